//! Matrix's outbox jobs, planned by the kit's one planner (`channels::plan`): one `post` job
//! per configured room (or person messaged directly) when an interaction is created, and one
//! per room its route escalates to when nobody answered in time; one `voted` job for each vote
//! that does not decide yet; one `update` job (every copy recorded for it) when it is
//! resolved, from anywhere; a `digest` job per refresh of a session's digest in a room.

use super::CHANNEL;
use crate::channels::plan::{ChatJob, Todo};
use crate::outbox::ChannelJob;

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
    /// Edit every message of a resolved interaction to its outcome.
    Update,
    /// Edit every message of a pending interaction to show the votes so far.
    Voted,
    /// Post, bring up to date or close the digest of one session in one room.
    Digest {
        /// The room id, or a user id messaged in a direct room.
        room: String,
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
            Todo::Post(room) => Job::Post { room },
            Todo::Update => Job::Update,
            Todo::Voted => Job::Voted,
            Todo::Digest { to, session } => Job::Digest { room: to, session },
        }
    }

    fn todo(self) -> Todo<String> {
        match self {
            Job::Post { room } => Todo::Post(room),
            Job::Update => Todo::Update,
            Job::Voted => Todo::Voted,
            Job::Digest { room, session } => Todo::Digest { to: room, session },
        }
    }

    fn target(address: &str) -> Option<String> {
        Some(address.to_string())
    }

    fn address(room: &String) -> String {
        room.clone()
    }
}

/// Plans the channel's outbox jobs inside each state change's transaction (the kit's one
/// planner).
pub(crate) type Planner = crate::channels::plan::Planner<Job>;

/// The planner of the channel, posting to `rooms` what names no route.
pub(crate) fn planner(rooms: &[String]) -> Planner {
    Planner::new(CHANNEL, rooms.to_vec())
}
