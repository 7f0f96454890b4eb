//! Feishu's outbox jobs, planned in the registry's transactions: one `send` job per receiver
//! when an interaction is created, one more per receiver its route escalates to when nobody
//! answered in time, one `update` job (every card recorded for it) when it is resolved, and
//! one `voted` job (every card recorded for it) for each vote that does not decide yet.

use super::CHANNEL;
use super::settings::Receiver;
use crate::interaction::{Interaction, Lifecycle};
use crate::outbox::{ChannelJob, created_window, resolved_window};
use crate::store::OutboxJob;

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

/// The receivers interaction `i` is posted to: its route's receivers (and people's direct
/// chats) when it was routed, otherwise `receivers`.
pub(crate) fn receivers_of(i: &Interaction, receivers: &[Receiver]) -> Vec<Receiver> {
    match i.route.as_deref().and_then(|r| r.addresses(CHANNEL)) {
        Some(to) => to.filter_map(|a| a.parse().ok()).collect(),
        None => receivers.to_vec(),
    }
}

/// The job that brings the digest of `session` for `receiver` up to date at the end of the
/// current edit window (every change within it shares the job); `i` is the change's
/// interaction.
pub(crate) fn digest_job(i: &Interaction, receiver: &Receiver, session: &str) -> OutboxJob {
    let (at, window) = crate::channels::digest::refresh_window(jiff::Timestamp::now());
    let key = format!("{CHANNEL}:digest:{}:{session}:{window}", receiver.address());
    let job = Job::Digest {
        receiver: receiver.clone(),
        session: session.to_string(),
    };
    let until = crate::interaction::after(at, crate::outbox::UPDATE_HORIZON);
    job.plan_keyed(key, i, at, until)
}

/// The job that posts `i` to `receiver` again, on its own, for a digest's Review (`nonce`
/// tells reviews from different digest cards apart).
pub(crate) fn review_job(i: &Interaction, receiver: &Receiver, nonce: &str) -> OutboxJob {
    let (from, until) = created_window(i);
    let job = Job::Send {
        receiver: receiver.clone(),
    };
    let key = OutboxJob::key_for(CHANNEL, "review", i, &[&receiver.address(), nonce]);
    job.plan_keyed(key, i, from, until)
}

/// Whether `key` is a job's first post of an interaction (not a Review's).
pub(crate) fn first_post(key: &str) -> bool {
    key.starts_with(&format!("{CHANNEL}:send:"))
}

impl ChannelJob for Job {
    fn channel(&self) -> std::borrow::Cow<'static, str> {
        CHANNEL.into()
    }
}

/// Plans the channel's outbox jobs inside each state change's transaction.
pub(crate) struct Planner {
    /// Where cards go.
    pub receivers: Vec<Receiver>,
}

impl Lifecycle for Planner {
    fn plan_created(&self, i: &Interaction, jobs: &mut Vec<OutboxJob>) {
        let (from, until) = created_window(i);
        // A routed interaction goes to its route's receivers (and people's direct chats) only.
        for r in &receivers_of(i, &self.receivers) {
            let job = Job::Send {
                receiver: r.clone(),
            };
            jobs.push(job.plan(i, &[&r.address()], from, until));
        }
    }

    fn plan_voted(&self, i: &Interaction, jobs: &mut Vec<OutboxJob>) {
        // One job per vote (its count names it), worth doing while it is pending.
        let (from, until) = created_window(i);
        jobs.push(Job::Voted.plan(i, &[&i.votes().len().to_string()], from, until));
    }

    fn plan_escalated(&self, i: &Interaction, jobs: &mut Vec<OutboxJob>) {
        let Some(stamp) = i.route.as_deref() else {
            return;
        };
        let (from, until) = (jiff::Timestamp::now(), i.deadline);
        for address in stamp.escalation_addresses(CHANNEL) {
            let Ok(receiver) = address.parse::<Receiver>() else {
                continue;
            };
            let key = OutboxJob::key_for(CHANNEL, "escalate", i, &[address]);
            jobs.push(Job::Send { receiver }.plan_keyed(key, i, from, until));
        }
    }

    fn plan_resolved(&self, i: &Interaction, jobs: &mut Vec<OutboxJob>) {
        if self.receivers.is_empty() {
            return;
        }
        let (from, until) = resolved_window(i);
        jobs.push(Job::Update.plan(i, &[], from, until));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::channels::feishu::settings::ReceiverType;
    use crate::interaction::InteractionId;
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
        let planner = Planner {
            receivers: vec![Receiver {
                kind: ReceiverType::ChatId,
                id: "oc_1".into(),
            }],
        };
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
