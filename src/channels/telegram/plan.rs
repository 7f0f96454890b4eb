//! Telegram's outbox jobs, planned by the kit's one planner (`channels::plan`): one `post`
//! job per configured chat when an interaction is created (and a re-post on `/pending`), one
//! more per chat its route escalates to when nobody answered in time, one `resolved` job
//! when it is resolved, by anyone, anywhere, a `voted` job for each vote that does not
//! decide yet (every copy shows the votes so far), and `digest` jobs.

use jiff::Timestamp;

use super::CHANNEL;
use crate::channels::plan::{ChatJob, Todo};
use crate::interaction::Interaction;
use crate::outbox::ChannelJob;
use crate::store::OutboxJob;

/// Plans the channel's outbox jobs inside the registry's transactions.
pub(super) type Planner = crate::channels::plan::Planner<Job>;

/// What the channel's outbox does.
#[derive(Debug, serde::Serialize, serde::Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub(crate) enum Job {
    /// Post the prompt of a pending interaction to one chat.
    Post {
        /// Which chat.
        chat: i64,
    },
    /// Edit every message of a resolved interaction to its outcome.
    Resolved,
    /// Edit every message of a pending interaction to show the votes so far (an approval
    /// that needs several people).
    Voted,
    /// Post or bring up to date the digest of one session in one chat (`channels::digest`).
    Digest {
        /// Which chat.
        chat: i64,
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
    type Target = i64;
    const POST: &'static str = "post";

    fn make(todo: Todo<i64>) -> Self {
        match todo {
            Todo::Post(chat) => Job::Post { chat },
            Todo::Update => Job::Resolved,
            Todo::Voted => Job::Voted,
            Todo::Digest { to, session } => Job::Digest { chat: to, session },
        }
    }

    fn todo(self) -> Todo<i64> {
        match self {
            Job::Post { chat } => Todo::Post(chat),
            Job::Resolved => Todo::Update,
            Job::Voted => Todo::Voted,
            Job::Digest { chat, session } => Todo::Digest { to: chat, session },
        }
    }

    fn target(address: &str) -> Option<i64> {
        address.parse().ok()
    }

    fn address(chat: &i64) -> String {
        chat.to_string()
    }
}

/// The planner of the channel, posting to `chats` what names no route.
pub(super) fn planner(chats: &[i64]) -> Planner {
    Planner::new(CHANNEL, chats.iter().map(i64::to_string).collect())
}

/// The job that posts interaction `i` to `chat`; `nonce` distinguishes a re-post.
pub(crate) fn post_job(i: &Interaction, chat: i64, nonce: Option<&str>) -> OutboxJob {
    let job = Job::Post { chat };
    // Posting after the deadline shows nothing anyone could act on.
    let (now, deadline) = (Timestamp::now(), i.deadline);
    match nonce {
        None => job.plan(i, &[&chat.to_string()], now, deadline),
        Some(n) => job.plan_keyed(
            OutboxJob::key_for(CHANNEL, "repost", i, &[&chat.to_string(), n]),
            i,
            now,
            deadline,
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::interaction::InteractionId;
    use crate::interaction::Lifecycle;
    use crate::interaction::now;

    fn interaction(created_at: Timestamp) -> Interaction {
        Interaction {
            deadline: now(),
            ..Interaction::pending(
                InteractionId::parse("toolu_reused").unwrap(),
                "Bash",
                serde_json::Map::new(),
                created_at,
                300,
            )
        }
    }

    #[test]
    fn a_reused_id_gets_fresh_outbox_keys() {
        let planner = planner(&[7]);
        let jobs = |i: &Interaction| {
            let mut jobs = Vec::new();
            planner.plan_created(i, &mut jobs);
            planner.plan_resolved(i, &mut jobs);
            jobs.push(post_job(i, 7, Some("42")));
            jobs
        };
        let keys = |i: &Interaction| jobs(i).into_iter().map(|j| j.key).collect::<Vec<_>>();
        let old = interaction(Timestamp::from_millisecond(1_700_000_000_000).unwrap());
        let new = interaction(Timestamp::from_millisecond(1_700_000_086_400).unwrap());
        let (old_keys, new_keys) = (keys(&old), keys(&new));
        assert_eq!(old_keys.len(), 3);
        for k in &old_keys {
            assert!(k.contains("toolu_reused:1700000000000"), "{k}");
            assert!(!new_keys.contains(k), "{k} is reused");
        }
        // The same interaction plans the same keys (redelivery stays idempotent).
        assert_eq!(keys(&old), old_keys);
        // And the old interaction's jobs do nothing for the new one.
        for j in jobs(&old) {
            assert!(j.is_for(&old) && !j.is_for(&new), "{}", j.key);
        }
    }
}
