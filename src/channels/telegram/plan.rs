//! Telegram's outbox jobs, planned in the registry's transactions: one `post` job per
//! configured chat when an interaction is created (and a re-post on `/pending`), one more
//! per chat its route escalates to when nobody answered in time, one `resolved` job when it
//! is resolved, by anyone, anywhere, and a `voted` job for each vote that does not decide
//! yet (every copy shows the votes so far).

use std::time::Duration;

use jiff::Timestamp;

use super::CHANNEL;
use crate::interaction::{Interaction, Lifecycle, after};
use crate::outbox::ChannelJob;
use crate::store::OutboxJob;

/// Plans the channel's outbox jobs inside the registry's transactions.
pub(super) struct Planner {
    pub(super) chats: Vec<i64>,
    pub(super) retention: Duration,
}

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

/// The job that brings the digest of `session` in `chat` up to date at the end of the
/// current edit window (every change within it shares the job); `i` is the change's
/// interaction.
pub(crate) fn digest_job(i: &Interaction, chat: i64, session: &str) -> OutboxJob {
    let (at, window) = crate::channels::digest::refresh_window(Timestamp::now());
    let key = format!("{CHANNEL}:digest:{chat}:{session}:{window}");
    let job = Job::Digest {
        chat,
        session: session.to_string(),
    };
    job.plan_keyed(key, i, at, after(at, crate::outbox::UPDATE_HORIZON))
}

/// The chats interaction `i` is posted to: its route's chats (and people's private chats)
/// when it was routed, otherwise `chats`.
pub(crate) fn chats_of(i: &Interaction, chats: &[i64]) -> Vec<i64> {
    match i.route.as_deref().and_then(|r| r.addresses(CHANNEL)) {
        Some(to) => to.filter_map(|c| c.parse::<i64>().ok()).collect(),
        None => chats.to_vec(),
    }
}

/// The job that posts interaction `i`, escalated, to `chat` (a copy of its own, beside the
/// first ones).
pub(crate) fn escalate_job(i: &Interaction, chat: i64) -> OutboxJob {
    Job::Post { chat }.plan_keyed(
        OutboxJob::key_for(CHANNEL, "escalate", i, &[&chat.to_string()]),
        i,
        Timestamp::now(),
        i.deadline,
    )
}

impl Lifecycle for Planner {
    fn plan_created(&self, i: &Interaction, jobs: &mut Vec<OutboxJob>) {
        for chat in chats_of(i, &self.chats) {
            jobs.push(post_job(i, chat, None));
        }
    }

    fn plan_voted(&self, i: &Interaction, jobs: &mut Vec<OutboxJob>) {
        // One job per vote (its count names it); worth doing until the deadline.
        let n = i.votes().len().to_string();
        jobs.push(Job::Voted.plan(i, &[&n], Timestamp::now(), i.deadline));
    }

    fn plan_escalated(&self, i: &Interaction, jobs: &mut Vec<OutboxJob>) {
        let Some(stamp) = i.route.as_deref() else {
            return;
        };
        for chat in stamp.escalation_addresses(CHANNEL) {
            if let Ok(chat) = chat.parse::<i64>() {
                jobs.push(escalate_job(i, chat));
            }
        }
    }

    fn plan_resolved(&self, i: &Interaction, jobs: &mut Vec<OutboxJob>) {
        let now = Timestamp::now();
        // Worth trying for as long as the interaction is kept.
        jobs.push(Job::Resolved.plan(i, &[], now, after(now, self.retention)));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::interaction::InteractionId;
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
        let planner = Planner {
            chats: vec![7],
            retention: Duration::from_secs(60),
        };
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
