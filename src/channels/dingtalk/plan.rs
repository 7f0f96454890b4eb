//! DingTalk's outbox jobs, planned by the kit's one planner (`channels::plan`): one `post` job
//! per group (or, for a route's people, per person) when an interaction is created, and per
//! place its route escalates to; one `update` job (every card recorded for it) when it is
//! resolved; one `voted` job for each vote that does not decide yet; `digest` jobs.

use super::CHANNEL;
use crate::channels::plan::{ChatJob, Todo};
use crate::outbox::ChannelJob;

/// What the channel's outbox does.
#[derive(Debug, serde::Serialize, serde::Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub(crate) enum Job {
    /// Create and deliver the card of a new interaction to one place.
    Post {
        /// A group's openConversationId, or `user:<userId>` for a person's chat with the robot.
        target: String,
    },
    /// Update every card of a resolved interaction to its outcome.
    Update,
    /// Show the votes so far on every copy of a pending interaction (an approval that needs
    /// several people).
    Voted,
    /// Post or bring up to date the digest of one session in one place (`channels::digest`).
    Digest {
        /// Where.
        target: String,
        /// The session's digest key.
        session: String,
    },
}

impl ChannelJob for Job {
    fn channel(&self) -> std::borrow::Cow<'static, str> {
        CHANNEL.into()
    }
}

impl ChatJob for Job {
    type Target = String;
    const POST: &'static str = "post";

    fn make(todo: Todo<String>) -> Self {
        match todo {
            Todo::Post(target) => Job::Post { target },
            Todo::Update => Job::Update,
            Todo::Voted => Job::Voted,
            Todo::Digest { to, session } => Job::Digest {
                target: to,
                session,
            },
        }
    }

    fn todo(self) -> Todo<String> {
        match self {
            Job::Post { target } => Todo::Post(target),
            Job::Update => Todo::Update,
            Job::Voted => Todo::Voted,
            Job::Digest { target, session } => Todo::Digest {
                to: target,
                session,
            },
        }
    }

    fn target(address: &str) -> Option<String> {
        Some(address.to_string())
    }

    fn address(target: &String) -> String {
        target.clone()
    }
}

/// Plans the channel's outbox jobs inside each state change's transaction (the kit's one
/// planner).
pub(crate) type Planner = crate::channels::plan::Planner<Job>;

/// The planner of the channel, posting to `places` what names no route.
pub(crate) fn planner(places: &[String]) -> Planner {
    Planner::new(CHANNEL, places.to_vec())
}
