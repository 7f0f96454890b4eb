//! Discord's outbox jobs, planned by the kit's one planner (`channels::plan`): one `post` job
//! per configured channel (or person's direct messages) when an interaction is created; one
//! more per place its route escalates to when nobody answered in time; one `update` job
//! (every copy recorded for it) when it is resolved; one `voted` job for each vote that does
//! not decide yet; a `digest` job to post or bring up to date one session's digest in one
//! place (`channels::digest`).

use super::CHANNEL;
use crate::channels::plan::{ChatJob, Todo};
use crate::outbox::ChannelJob;

/// What the channel's outbox does.
#[derive(Debug, serde::Serialize, serde::Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub(crate) enum Job {
    /// Post the message of a new interaction to one place.
    Post {
        /// The channel id, or `@` and a user id (their direct messages).
        channel: String,
    },
    /// Update every message of a resolved interaction to its outcome.
    Update,
    /// Show the votes so far on every copy of a pending interaction.
    Voted,
    /// Post or bring up to date the digest of one session in one place.
    Digest {
        /// The channel id, or `@` and a user id.
        channel: String,
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
            Todo::Post(channel) => Job::Post { channel },
            Todo::Update => Job::Update,
            Todo::Voted => Job::Voted,
            Todo::Digest { to, session } => Job::Digest {
                channel: to,
                session,
            },
        }
    }

    fn todo(self) -> Todo<String> {
        match self {
            Job::Post { channel } => Todo::Post(channel),
            Job::Update => Todo::Update,
            Job::Voted => Todo::Voted,
            Job::Digest { channel, session } => Todo::Digest {
                to: channel,
                session,
            },
        }
    }

    fn target(address: &str) -> Option<String> {
        Some(address.to_string())
    }

    fn address(channel: &String) -> String {
        channel.clone()
    }
}

/// The kit's planner over Discord's jobs.
pub(crate) type Planner = crate::channels::plan::Planner<Job>;

/// The planner posting to `chats`.
pub(crate) fn planner(chats: &[String]) -> Planner {
    Planner::new(CHANNEL, chats.to_vec())
}
