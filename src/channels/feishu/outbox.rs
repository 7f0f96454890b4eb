//! Posting and updating cards through the durable outbox.
//!
//! A new interaction plans one `send` job per receiver; a resolution plans one `update` job
//! that PATCHes every card recorded for it. Sends carry a dedupe `uuid`, so a retried send
//! never posts twice; every posted card is recorded in the store, so updates find it after a
//! restart. Requests to one chat are spaced to respect the platform's 5 QPS per chat, and
//! throttling answers push that chat back.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use jiff::Timestamp;
use serde_json::{Value, json};
use tokio::time::Instant;

use super::api::{ApiError, OpenApi, send_uuid};
use super::card::Cards;
use super::settings::Receiver;
use crate::health::Health;
use crate::interaction::{Interaction, Lifecycle};
use crate::outbox::{ChannelJob, Delivery, OutboxHandler, created_window, resolved_window};
use crate::store::{ChannelMessage, ClaimedJob, OutboxJob, Store};
use crate::sync::LockExt;

/// The outbox channel name.
pub const CHANNEL: &str = "feishu";
/// Smallest gap between two requests to one chat (5 per second).
pub(crate) const CHAT_GAP: Duration = Duration::from_millis(200);
/// How long a throttled chat is kept quiet when the platform does not say.
pub(crate) const THROTTLE_PAUSE: Duration = Duration::from_secs(1);
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
        for r in &self.receivers {
            let job = Job::Send {
                receiver: r.clone(),
            };
            jobs.push(job.plan(i, &[&r.address()], from, until));
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

/// Spaces requests to each chat.
#[derive(Default)]
pub(crate) struct Pacer {
    // A std mutex: slots are reserved without awaiting while it is held.
    next: Mutex<HashMap<String, Instant>>,
}

impl Pacer {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Instant>> {
        self.next.locked()
    }

    /// Waits for this chat's next free slot.
    pub async fn turn(&self, chat: &str) {
        let at = {
            let mut next = self.lock();
            let now = Instant::now();
            let slot = next.get(chat).copied().filter(|t| *t > now).unwrap_or(now);
            next.insert(chat.to_string(), slot + CHAT_GAP);
            slot
        };
        tokio::time::sleep_until(at).await;
    }

    /// Keeps this chat quiet for `pause` (the platform throttled it).
    pub fn pause(&self, chat: &str, pause: Duration) {
        let until = Instant::now() + pause;
        let mut next = self.lock();
        let slot = next.entry(chat.to_string()).or_insert(until);
        if *slot < until {
            *slot = until;
        }
    }
}

/// Delivers the channel's jobs.
pub(crate) struct Deliverer {
    /// The platform client.
    pub api: Arc<OpenApi>,
    /// The store (interactions and card records).
    pub store: Arc<dyn Store>,
    /// Card rendering.
    pub cards: Cards,
    /// Per-chat spacing.
    pub pacer: Pacer,
    /// Where the API's state is reported.
    pub health: Arc<Health>,
}

#[async_trait]
impl OutboxHandler for Deliverer {
    async fn deliver(&self, job: &ClaimedJob) -> Delivery {
        let delivery = match Job::read(&job.job) {
            Ok(Job::Send { receiver }) => self.send(job, receiver).await,
            Ok(Job::Update) => self.update(job).await,
            Err(failed) => failed,
        };
        match &delivery {
            Delivery::Done => self.health.set("feishu_api", "ok", json!({})),
            Delivery::Retry { error, .. } | Delivery::Failed(error) => {
                self.health
                    .set("feishu_api", "failing", json!({ "last_error": error }))
            }
        }
        delivery
    }

    fn concurrency(&self) -> usize {
        4
    }
}

fn store_retry(e: impl std::fmt::Display) -> Delivery {
    Delivery::store_retry(e)
}

/// What a failed platform call means for the job. A throttled chat is kept quiet for the
/// platform's wait (or [`THROTTLE_PAUSE`]); the job is retried after the platform's wait if it
/// gave one, and otherwise after the outbox's growing backoff.
fn failure(pacer: &Pacer, chat: &str, e: ApiError) -> Delivery {
    match e {
        ApiError::Throttled { retry_after, .. } => {
            pacer.pause(chat, retry_after.unwrap_or(THROTTLE_PAUSE));
            Delivery::Retry {
                after: retry_after,
                error: e.to_string(),
            }
        }
        ApiError::Refused { .. } => Delivery::Failed(e.to_string()),
        other => Delivery::Retry {
            after: None,
            error: other.to_string(),
        },
    }
}

impl Deliverer {
    fn failure(&self, chat: &str, e: ApiError) -> Delivery {
        failure(&self.pacer, chat, e)
    }

    async fn send(&self, job: &ClaimedJob, receiver: Receiver) -> Delivery {
        let Some(id) = &job.job.interaction_id else {
            return Delivery::Failed("a send job without an interaction".into());
        };
        let address = receiver.address();
        let interaction = match self.store.get(id).await {
            Ok(Some(i)) if job.job.is_for(&i) => i,
            // Pruned, or the id now names a newer interaction: nothing of this one to show.
            Ok(_) => return Delivery::Done,
            Err(e) => return store_retry(e),
        };
        let recorded = match self.store.messages(CHANNEL, id).await {
            Ok(all) => all.into_iter().find(|m| m.address == address),
            Err(e) => return store_retry(e),
        };
        if let Some(m) = recorded {
            // Sent by an earlier attempt that did not finish; make sure it is current.
            return if interaction.is_pending() {
                Delivery::Done
            } else {
                self.patch(&interaction, &m)
                    .await
                    .err()
                    .unwrap_or(Delivery::Done)
            };
        }
        if !interaction.is_pending() {
            tracing::debug!(id = %id, receiver = %address, "feishu: resolved before its card was posted; not posting");
            return Delivery::Done;
        }
        self.pacer.turn(&address).await;
        let message_id = match self
            .api
            .send_card(
                &receiver,
                &self.cards.render(&interaction),
                &send_uuid(&interaction.incarnation(), &receiver),
            )
            .await
        {
            Ok(m) => m,
            Err(e) => return self.failure(&address, e),
        };
        let message = ChannelMessage {
            channel: CHANNEL.into(),
            address: address.clone(),
            message_ref: message_id.clone(),
            interaction_id: id.clone(),
            state: Some(json!({ "receiver": receiver })),
            created_at: Timestamp::now(),
        };
        if let Err(e) = self.store.record_message(message.clone()).await {
            // Retried with the same uuid: the platform answers with the same message.
            return store_retry(e);
        }
        tracing::info!(id = %id, receiver = %address, message_id, "feishu: card posted");
        // The resolution may have landed while the card was in flight, and its update job may
        // have run before this card was on record: bring the card up to date now.
        match self.store.get(id).await {
            Ok(Some(latest)) if !latest.is_pending() => self
                .patch(&latest, &message)
                .await
                .err()
                .unwrap_or(Delivery::Done),
            _ => Delivery::Done,
        }
    }

    /// PATCHes one card to show `i`'s current state and marks it final if `i` is resolved.
    async fn patch(&self, i: &Interaction, m: &ChannelMessage) -> Result<(), Delivery> {
        self.pacer.turn(&m.address).await;
        match self
            .api
            .update_card(&m.message_ref, &self.cards.render(i))
            .await
        {
            Ok(()) => {}
            Err(e @ ApiError::Refused { .. }) => {
                // Deleted, older than the platform allows, or otherwise gone: nothing to fix.
                tracing::warn!(id = %i.id, message_id = %m.message_ref, error = %e, "feishu: cannot update a card; leaving it");
            }
            Err(e) => return Err(self.failure(&m.address, e)),
        }
        let mut state = m.state.clone().unwrap_or_else(|| json!({}));
        if let Value::Object(map) = &mut state {
            map.insert("final".into(), Value::Bool(true));
        }
        if let Err(e) = self
            .store
            .set_message_state(CHANNEL, &m.address, &m.message_ref, Some(state))
            .await
        {
            return Err(store_retry(e));
        }
        Ok(())
    }

    async fn update(&self, job: &ClaimedJob) -> Delivery {
        let Some(id) = &job.job.interaction_id else {
            return Delivery::Failed("an update job without an interaction".into());
        };
        let interaction = match self.store.get(id).await {
            Ok(Some(i)) if !i.is_pending() && job.job.is_for(&i) => i,
            Ok(_) => return Delivery::Done,
            Err(e) => return store_retry(e),
        };
        let messages = match self.store.messages(CHANNEL, id).await {
            Ok(m) => m,
            Err(e) => return store_retry(e),
        };
        let mut outcome = Delivery::Done;
        for m in messages {
            if m.state
                .as_ref()
                .is_some_and(|s| s["final"] == Value::Bool(true))
            {
                continue;
            }
            if let Err(d) = self.patch(&interaction, &m).await {
                outcome = d; // the others are still attempted; updated ones are not redone
            } else {
                tracing::info!(id = %id, message_id = %m.message_ref, "feishu: card updated");
            }
        }
        outcome
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::channels::feishu::settings::ReceiverType;
    use crate::interaction::InteractionId;

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

    /// When each of `n` requests to `chat` gets its turn, all asking at once.
    async fn turns(pacer: &Arc<Pacer>, chat: &'static str, n: usize) -> Vec<Instant> {
        let tasks: Vec<_> = (0..n)
            .map(|_| {
                let pacer = pacer.clone();
                tokio::spawn(async move {
                    pacer.turn(chat).await;
                    Instant::now()
                })
            })
            .collect();
        let mut at = Vec::new();
        for t in tasks {
            at.push(t.await.unwrap());
        }
        at.sort();
        at
    }

    #[tokio::test(start_paused = true)]
    async fn requests_to_one_chat_are_spaced_five_per_second_and_chats_do_not_wait_for_each_other()
    {
        let pacer = Arc::new(Pacer::default());
        let start = Instant::now();
        let (a, b) = tokio::join!(turns(&pacer, "oc_a", 10), turns(&pacer, "oc_b", 3));
        for pair in a.windows(2) {
            assert!(pair[1] - pair[0] >= CHAT_GAP, "{:?}", pair[1] - pair[0]);
        }
        // Ten requests take 1.8 s, no more: the pacer spaces, it does not stall.
        assert_eq!(a[9] - start, CHAT_GAP * 9);
        // The other chat went at its own pace.
        assert_eq!(b[0], start);
        assert_eq!(b[2] - start, CHAT_GAP * 2);
    }

    #[tokio::test(start_paused = true)]
    async fn a_throttled_chat_waits_out_the_pause() {
        let pacer = Arc::new(Pacer::default());
        let start = Instant::now();
        pacer.turn("oc_a").await;
        let hint = Duration::from_secs(3);
        let d = failure(
            &pacer,
            "oc_a",
            ApiError::Throttled {
                code: 99991400,
                retry_after: Some(hint),
            },
        );
        assert!(matches!(d, Delivery::Retry { after: Some(a), .. } if a == hint));
        let (next, other) = tokio::join!(turns(&pacer, "oc_a", 2), turns(&pacer, "oc_b", 1));
        assert_eq!(next[0] - start, hint);
        assert_eq!(next[1] - next[0], CHAT_GAP);
        assert_eq!(other[0], start, "only the throttled chat waits");
    }

    #[tokio::test(start_paused = true)]
    async fn throttling_without_a_hint_leaves_the_retry_to_the_growing_backoff() {
        let pacer = Pacer::default();
        let start = Instant::now();
        let d = failure(
            &pacer,
            "oc_a",
            ApiError::Throttled {
                code: 99991400,
                retry_after: None,
            },
        );
        assert!(matches!(d, Delivery::Retry { after: None, .. }), "{d:?}");
        // Other requests to the chat still hold back for a moment.
        pacer.turn("oc_a").await;
        assert_eq!(Instant::now() - start, THROTTLE_PAUSE);
    }
}
