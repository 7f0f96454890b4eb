//! ntfy's outbox jobs, planned in the registry's transactions: one `post` job per topic when
//! an interaction is created, and one per topic its route escalates to when nobody answered
//! in time; one `update` job (every copy recorded for it) when it is resolved, from anywhere.

use super::CHANNEL;
use crate::interaction::routes::destinations;
use crate::interaction::{Interaction, Lifecycle};
use crate::outbox::{ChannelJob, created_window, resolved_window};
use crate::store::OutboxJob;

/// What the channel's outbox does.
#[derive(Debug, serde::Serialize, serde::Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub(crate) enum Job {
    /// Publish the prompt of a new interaction to one topic.
    Post {
        /// The topic.
        topic: String,
    },
    /// Publish the outcome of a resolved interaction to every topic that has its prompt.
    Update,
}

impl ChannelJob for Job {
    fn channel(&self) -> std::borrow::Cow<'static, str> {
        CHANNEL.into()
    }
}

/// Plans the channel's outbox jobs inside each state change's transaction.
pub(crate) struct Planner {
    /// Where prompts go.
    pub topics: Vec<String>,
}

impl Lifecycle for Planner {
    fn plan_created(&self, i: &Interaction, jobs: &mut Vec<OutboxJob>) {
        let (from, until) = created_window(i);
        // A routed interaction goes to its route's topics only.
        for t in destinations(i.route.as_deref(), CHANNEL, &self.topics) {
            let job = Job::Post {
                topic: t.to_string(),
            };
            jobs.push(job.plan(i, &[t], from, until));
        }
    }

    fn plan_escalated(&self, i: &Interaction, jobs: &mut Vec<OutboxJob>) {
        let Some(stamp) = i.route.as_deref() else {
            return;
        };
        let (from, until) = (jiff::Timestamp::now(), i.deadline);
        for topic in stamp.escalation_addresses(CHANNEL) {
            let key = OutboxJob::key_for(CHANNEL, "escalate", i, &[topic]);
            let job = Job::Post {
                topic: topic.to_string(),
            };
            jobs.push(job.plan_keyed(key, i, from, until));
        }
    }

    fn plan_resolved(&self, i: &Interaction, jobs: &mut Vec<OutboxJob>) {
        if self.topics.is_empty() {
            return;
        }
        let (from, until) = resolved_window(i);
        jobs.push(Job::Update.plan(i, &[], from, until));
    }
}
