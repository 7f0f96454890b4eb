//! Matrix's outbox jobs, planned in the registry's transactions: one `post` job per
//! configured room (or person messaged directly) when an interaction is created; one more per room its
//! route escalates to when nobody answered in time; one `update` job (every copy
//! recorded for it) when it is resolved (an answer from anywhere, expiry, withdrawal); one
//! `voted` job for each vote that does not decide yet.

use super::CHANNEL;
use crate::interaction::routes::destinations;
use crate::interaction::{Interaction, Lifecycle};
use crate::outbox::{ChannelJob, created_window, resolved_window};
use crate::store::OutboxJob;

/// What the channel's outbox does.
#[derive(Debug, serde::Serialize, serde::Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub(crate) enum Job {
    /// Post the message of a new interaction to one room.
    Post {
        /// The room id (`!...:server`), or a user id (`@...:server`) messaged in a direct
        /// room.
        room: String,
    },
    /// Update every message of a resolved interaction to its outcome.
    Update,
    /// Update every message of a pending interaction to show the votes so far (an approval
    /// that needs several people).
    Voted,
}

impl ChannelJob for Job {
    fn channel(&self) -> std::borrow::Cow<'static, str> {
        CHANNEL.into()
    }
}

/// Plans the channel's outbox jobs inside each state change's transaction.
pub(crate) struct Planner {
    /// Where messages go.
    pub rooms: Vec<String>,
}

impl Lifecycle for Planner {
    fn plan_created(&self, i: &Interaction, jobs: &mut Vec<OutboxJob>) {
        let (from, until) = created_window(i);
        // A routed interaction goes to its route's rooms only.
        for c in destinations(i.route.as_deref(), CHANNEL, &self.rooms) {
            let job = Job::Post {
                room: c.to_string(),
            };
            jobs.push(job.plan(i, &[c], from, until));
        }
    }

    fn plan_voted(&self, i: &Interaction, jobs: &mut Vec<OutboxJob>) {
        // One job per vote (its count names it), worth doing while it is pending.
        let (from, until) = created_window(i);
        jobs.push(Job::Voted.plan(i, &[&i.votes.len().to_string()], from, until));
    }

    fn plan_escalated(&self, i: &Interaction, jobs: &mut Vec<OutboxJob>) {
        let Some(stamp) = i.route.as_deref() else {
            return;
        };
        let (from, until) = (jiff::Timestamp::now(), i.deadline);
        for c in stamp.escalation_addresses(CHANNEL) {
            let job = Job::Post {
                room: c.to_string(),
            };
            let key = OutboxJob::key_for(CHANNEL, "escalate", i, &[c]);
            jobs.push(job.plan_keyed(key, i, from, until));
        }
    }

    fn plan_resolved(&self, i: &Interaction, jobs: &mut Vec<OutboxJob>) {
        // Planned even with no rooms configured: a route may have messaged people directly.
        let (from, until) = resolved_window(i);
        jobs.push(Job::Update.plan(i, &[], from, until));
    }
}
