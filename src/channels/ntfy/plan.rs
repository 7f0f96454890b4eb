//! ntfy's outbox jobs, planned by the kit's one planner (`channels::plan`): one `post` job per
//! topic when an interaction is created, and one per topic its route escalates to when nobody
//! answered in time; one `voted` job per vote that does not decide yet; one `update` job (every copy recorded for it) when it is resolved, from
//! anywhere; one `digest` job per change to a session's digest on a topic.

use super::CHANNEL;
use crate::channels::plan::{ChatJob, Todo};
use crate::outbox::ChannelJob;

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
    /// A vote that does not decide yet: every topic's prompt is published again under its
    /// notification id with the votes so far.
    Voted,
    /// Bring a session's digest notification on one topic up to date.
    Digest {
        /// The topic.
        topic: String,
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
            Todo::Post(topic) => Job::Post { topic },
            Todo::Update => Job::Update,
            Todo::Voted => Job::Voted,
            Todo::Digest { to, session } => Job::Digest { topic: to, session },
        }
    }

    fn todo(self) -> Todo<String> {
        match self {
            Job::Post { topic } => Todo::Post(topic),
            Job::Update => Todo::Update,
            Job::Voted => Todo::Voted,
            Job::Digest { topic, session } => Todo::Digest { to: topic, session },
        }
    }

    fn target(address: &str) -> Option<String> {
        Some(address.to_string())
    }

    fn address(topic: &String) -> String {
        topic.clone()
    }
}

/// Plans the channel's outbox jobs inside each state change's transaction (the kit's one
/// planner).
pub(crate) type Planner = crate::channels::plan::Planner<Job>;

/// The planner of the channel, publishing to `topics` what names no route.
pub(crate) fn planner(topics: &[String]) -> Planner {
    Planner::new(CHANNEL, topics.to_vec())
}
