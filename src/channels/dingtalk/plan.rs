//! DingTalk's outbox jobs, planned in the registry's transactions: one `post` job per group
//! (or, for a route's people, per person) when an interaction is created; one `update` job
//! (every card recorded for it) when it is resolved.

use super::CHANNEL;
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
        // A routed interaction goes to its route's groups (and people's chats) only.
        let routed: Option<Vec<String>> = i
            .route
            .as_deref()
            .and_then(|r| r.addresses(CHANNEL))
            .map(|to| to.map(str::to_string).collect());
        for t in routed.as_ref().unwrap_or(&self.conversations) {
            let job = Job::Post { target: t.clone() };
            jobs.push(job.plan(i, &[t], from, until));
        }
    }

    fn plan_resolved(&self, i: &Interaction, jobs: &mut Vec<OutboxJob>) {
        let (from, until) = resolved_window(i);
        jobs.push(Job::Update.plan(i, &[], from, until));
    }
}
