//! DingTalk's outbox jobs, planned in the registry's transactions: one `post` job per group
//! (or, for a route's people, per person) when an interaction is created, and per place
//! its route escalates to; one `update` job (every card recorded for it) when it is
//! resolved.

use super::CHANNEL;
use crate::interaction::routes::destinations;
use crate::interaction::{Interaction, Lifecycle};
use crate::outbox::{ChannelJob, created_window, resolved_window};
use crate::store::OutboxJob;

/// What the channel's outbox does.
#[derive(Debug, serde::Serialize, serde::Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub(crate) enum Job {
    /// Create and deliver the card of a new interaction to one place.
    Post {
        /// A group's openConversationId, or `user:<userId>` for a person's chat with the
        /// robot.
        target: String,
    },
    /// Update every card of a resolved interaction to its outcome.
    Update,
}

impl ChannelJob for Job {
    fn channel(&self) -> std::borrow::Cow<'static, str> {
        CHANNEL.into()
    }
}

/// Plans the channel's outbox jobs inside each state change's transaction.
pub(crate) struct Planner {
    /// Where cards go.
    pub conversations: Vec<String>,
}

impl Lifecycle for Planner {
    fn plan_created(&self, i: &Interaction, jobs: &mut Vec<OutboxJob>) {
        let (from, until) = created_window(i);
        // A routed interaction goes to its route's places only.
        for t in destinations(i.route.as_deref(), CHANNEL, &self.conversations) {
            let job = Job::Post {
                target: t.to_string(),
            };
            jobs.push(job.plan(i, &[t], from, until));
        }
    }

    fn plan_escalated(&self, i: &Interaction, jobs: &mut Vec<OutboxJob>) {
        let Some(stamp) = i.route.as_deref() else {
            return;
        };
        let (from, until) = (jiff::Timestamp::now(), i.deadline);
        for t in stamp.escalation_addresses(CHANNEL) {
            let job = Job::Post {
                target: t.to_string(),
            };
            let key = OutboxJob::key_for(CHANNEL, "escalate", i, &[t]);
            jobs.push(job.plan_keyed(key, i, from, until));
        }
    }

    fn plan_resolved(&self, i: &Interaction, jobs: &mut Vec<OutboxJob>) {
        let (from, until) = resolved_window(i);
        jobs.push(Job::Update.plan(i, &[], from, until));
    }
}
