//! Feishu's outbox jobs, planned by the kit's one planner (`channels::plan`): one `send` job
//! per receiver when an interaction is created, one more per receiver its route escalates
//! to when nobody answered in time, one `update` job (every card recorded for it) when it is
//! resolved, one `voted` job for each vote that does not decide yet, and `digest` jobs.

use super::CHANNEL;
use super::settings::Receiver;
use crate::channels::plan::{ChatJob, Todo};
use crate::outbox::ChannelJob;

/// What the channel's outbox does.
#[derive(Debug, serde::Serialize, serde::Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub(crate) enum Job {
    /// Post the card of a new interaction to one receiver.
    Send {
        /// Where.
        receiver: Receiver,
    },
    /// Update every card of a resolved interaction to its outcome.
    Update,
    /// Update every card of a pending interaction to show the votes so far (an approval
    /// that needs several people).
    Voted,
    /// Post or bring up to date the digest card of one session for one receiver
    /// (`channels::digest`).
    Digest {
        /// Where.
        receiver: Receiver,
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
    type Target = Receiver;
    const POST: &'static str = "send";

    fn make(todo: Todo<Receiver>) -> Self {
        match todo {
            Todo::Post(receiver) => Job::Send { receiver },
            Todo::Update => Job::Update,
            Todo::Voted => Job::Voted,
            Todo::Digest { to, session } => Job::Digest {
                receiver: to,
                session,
            },
        }
    }

    fn todo(self) -> Todo<Receiver> {
        match self {
            Job::Send { receiver } => Todo::Post(receiver),
            Job::Update => Todo::Update,
            Job::Voted => Todo::Voted,
            Job::Digest { receiver, session } => Todo::Digest {
                to: receiver,
                session,
            },
        }
    }

    fn target(address: &str) -> Option<Receiver> {
        address.parse().ok()
    }

    fn address(receiver: &Receiver) -> String {
        receiver.address()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::channels::feishu::settings::ReceiverType;
    use crate::interaction::{Interaction, InteractionId, Lifecycle};
    use jiff::Timestamp;

    fn interaction(created_ms: i64) -> Interaction {
        let created_at = Timestamp::from_millisecond(created_ms).unwrap();
        Interaction {
            deadline: created_at,
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
    fn a_reused_id_gets_fresh_job_keys() {
        let to = Receiver {
            kind: ReceiverType::ChatId,
            id: "oc_1".into(),
        };
        let planner = crate::channels::plan::Planner::<Job>::new(CHANNEL, vec![to.address()]);
        let jobs = |i: &Interaction| {
            let mut jobs = Vec::new();
            planner.plan_created(i, &mut jobs);
            planner.plan_resolved(i, &mut jobs);
            jobs
        };
        let keys = |i: &Interaction| jobs(i).into_iter().map(|j| j.key).collect::<Vec<_>>();
        let (old, new) = (
            interaction(1_700_000_000_000),
            interaction(1_700_000_086_400),
        );
        let old_keys = keys(&old);
        assert_eq!(old_keys.len(), 2);
        for k in &old_keys {
            assert!(k.contains("toolu_reused:1700000000000"), "{k}");
            assert!(!keys(&new).contains(k), "{k} is planned again");
        }
        // The same interaction plans the same keys (a repeat stays deduplicated).
        assert_eq!(keys(&old), old_keys);
        // And the old interaction's jobs do nothing for the new one.
        for j in jobs(&old) {
            assert!(j.is_for(&old) && !j.is_for(&new), "{}", j.key);
        }
    }
}
