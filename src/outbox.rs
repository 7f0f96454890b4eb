//! The outbox worker: delivers durable work to the outside world (channel messages and
//! their edits, webhook deliveries) with retries, so nothing is lost to an outage or a
//! restart.
//!
//! Jobs are recorded by the store in the same transaction as the state change that caused
//! them (see [`crate::interaction::Lifecycle`]). The worker claims due jobs with a lease,
//! hands each to the handler registered for its channel, and records the result: done, retry
//! after an exponential, jittered backoff (or the delay the handler asks for, e.g. Telegram's
//! `retry_after`), or failed once the job's horizon has passed. Each channel has its own
//! concurrency limit, and a claim takes of each channel only as many jobs as it has free
//! delivery slots, so a slow or dead target never holds up another: its backlog waits in the
//! store, not in this process. A result is recorded only under the claim that produced it
//! (a worker whose lease ran out cannot overwrite the next claimant's result), and a
//! given-up delivery's audit entry is written in the same transaction as its result.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use jiff::Timestamp;
use rand::Rng;
use tokio::sync::{Notify, OwnedSemaphorePermit, Semaphore};
use tokio_util::sync::CancellationToken;

use crate::audit::{Action, AuditRecord};
use crate::interaction::after as add;
use crate::interaction::{Interaction, Lifecycle};
use crate::metrics::Metrics;
use crate::store::{ClaimQuota, ClaimedJob, JobUpdate, OutboxJob, Store};
use crate::sync::LockExt;

/// How long a claimed job is reserved for one delivery attempt.
pub const LEASE: Duration = Duration::from_secs(600);
/// The longest one delivery attempt may take: well inside [`LEASE`], so an attempt always
/// records its result before its claim could be taken again (a later claim would fence the
/// result out, and the job would wait out another lease).
const ATTEMPT_LIMIT: Duration = Duration::from_secs(480);
/// Most jobs of one channel claimed per round.
const BATCH: usize = 64;
/// Jobs of a channel without a handler claimed per round (to be failed).
const ORPHANS: usize = 16;
/// Longest pause between looks at the store (other processes may add jobs).
const POLL: Duration = Duration::from_secs(1);

/// A channel's jobs, typed: an enum tagged by its `kind` (`#[serde(tag = "kind")]`), one
/// variant for each thing the channel does, carrying what that needs (or a struct whose
/// `kind` field names what it does). It is stored as the job's `kind` and the other fields as
/// its `payload`, so the store knows nothing of it.
pub(crate) trait ChannelJob: serde::Serialize + serde::de::DeserializeOwned {
    /// The outbox channel whose handler delivers this job: the channel's name, or for a
    /// channel with a queue per target (webhooks), that target's queue.
    fn channel(&self) -> std::borrow::Cow<'static, str>;

    /// The job's `kind`: the enum's tag.
    fn kind(&self) -> String {
        match serde_json::to_value(self) {
            Ok(serde_json::Value::Object(m)) => m
                .get("kind")
                .and_then(serde_json::Value::as_str)
                .unwrap_or_default()
                .to_string(),
            _ => String::new(),
        }
    }

    /// This job for interaction `i`, keyed `<channel>:<kind>:<incarnation>[:<more>...]`
    /// (`more` tells apart jobs of one kind for one interaction: a chat, a receiver), tried
    /// from `not_before` until `horizon`.
    fn plan(
        &self,
        i: &Interaction,
        more: &[&str],
        not_before: Timestamp,
        horizon: Timestamp,
    ) -> OutboxJob {
        let key = OutboxJob::key_for(&self.channel(), &self.kind(), i, more);
        self.plan_keyed(key, i, not_before, horizon)
    }

    /// This job for interaction `i` under a key of the caller's own making (a re-post, say,
    /// which must not collide with the first post).
    fn plan_keyed(
        &self,
        key: String,
        i: &Interaction,
        not_before: Timestamp,
        horizon: Timestamp,
    ) -> OutboxJob {
        let mut payload = match serde_json::to_value(self) {
            Ok(serde_json::Value::Object(m)) => m,
            // A tagged enum always serializes to an object.
            _ => serde_json::Map::new(),
        };
        let kind = match payload.remove("kind") {
            Some(serde_json::Value::String(k)) => k,
            _ => String::new(),
        };
        OutboxJob {
            key,
            channel: self.channel().into_owned(),
            kind,
            interaction_id: Some(i.id.clone()),
            payload: serde_json::Value::Object(payload),
            not_before,
            horizon,
        }
    }

    /// Reads a claimed job back; one this version cannot read fails for good, saying why.
    fn read(job: &OutboxJob) -> Result<Self, Delivery> {
        let mut fields = match &job.payload {
            serde_json::Value::Object(m) => m.clone(),
            serde_json::Value::Null => serde_json::Map::new(),
            other => {
                return Err(Delivery::Failed(format!(
                    "a {} job whose payload is not an object: {other}",
                    job.channel
                )));
            }
        };
        fields.insert("kind".into(), serde_json::Value::String(job.kind.clone()));
        serde_json::from_value(serde_json::Value::Object(fields)).map_err(|e| {
            Delivery::Failed(format!(
                "a {} job of kind {:?} this version cannot read: {e}",
                job.channel, job.kind
            ))
        })
    }
}

/// How long the update of a resolved interaction's messages is retried, on every channel:
/// long enough to outlast an outage, short of the day after which nobody reads it.
pub(crate) const UPDATE_HORIZON: Duration = Duration::from_secs(24 * 3600);

/// The window of a job showing a new interaction: from its creation to its deadline (after
/// which a message could only say it expired).
pub(crate) fn created_window(i: &Interaction) -> (Timestamp, Timestamp) {
    (i.created_at, i.deadline)
}

/// The window of a job showing a resolution: from the resolution for [`UPDATE_HORIZON`].
pub(crate) fn resolved_window(i: &Interaction) -> (Timestamp, Timestamp) {
    let at = i
        .resolution
        .as_ref()
        .map(|r| r.at)
        .unwrap_or_else(Timestamp::now);
    (at, add(at, UPDATE_HORIZON))
}

/// How a delivery attempt ended, as the handler sees it.
#[derive(Clone, Debug, PartialEq)]
pub enum Delivery {
    /// Delivered.
    Done,
    /// Failed for now; try again (after `after`, or the backoff if `None`).
    Retry {
        /// A delay the target asked for.
        after: Option<Duration>,
        /// What went wrong.
        error: String,
    },
    /// Failed for good; do not retry.
    Failed(String),
}

impl Delivery {
    /// Retry after the backoff: the store could not be read or written.
    pub fn store_retry(e: impl std::fmt::Display) -> Self {
        Delivery::Retry {
            after: None,
            error: format!("store: {e}"),
        }
    }
}

/// Delivers jobs of one channel.
#[async_trait]
pub trait OutboxHandler: Send + Sync {
    /// Attempts one delivery.
    async fn deliver(&self, job: &ClaimedJob) -> Delivery;

    /// Most deliveries of this channel in flight at once.
    fn concurrency(&self) -> usize {
        4
    }
}

/// Exponential backoff with jitter.
#[derive(Clone, Copy, Debug)]
pub struct Backoff {
    /// Delay after the first failure.
    pub base: Duration,
    /// Largest delay.
    pub max: Duration,
}

impl Default for Backoff {
    fn default() -> Self {
        Self {
            base: Duration::from_secs(1),
            max: Duration::from_secs(300),
        }
    }
}

impl Backoff {
    /// The delay before attempt `attempt + 1`, after `attempt` failures (1-based): uniformly
    /// random in `[d/2, d]` where `d = min(base · 2^(attempt-1), max)`.
    pub fn delay(&self, attempt: u32) -> Duration {
        let exp = attempt.saturating_sub(1).min(30);
        let d = self
            .base
            .saturating_mul(1u32 << exp)
            .min(self.max)
            .max(Duration::from_millis(1));
        let lo = d / 2;
        let jitter = rand::rng().random_range(0..=(d - lo).as_millis() as u64);
        lo + Duration::from_millis(jitter)
    }
}

/// The source of "now" for scheduling (replaceable in tests).
pub type Clock = Arc<dyn Fn() -> Timestamp + Send + Sync>;

/// The outbox worker. Register handlers, then [`Outbox::run`].
pub struct Outbox {
    store: Arc<dyn Store>,
    handlers: HashMap<String, (Arc<dyn OutboxHandler>, Arc<Semaphore>)>,
    wake: Notify,
    metrics: Arc<Metrics>,
    backoff: Backoff,
    clock: Clock,
    audit: bool,
    // A std mutex: membership checks only, never held across an await.
    in_flight: Mutex<HashSet<i64>>,
}

impl Outbox {
    /// A worker over `store` with the default backoff and the system clock.
    pub fn new(store: Arc<dyn Store>, metrics: Arc<Metrics>) -> Self {
        Self {
            store,
            handlers: HashMap::new(),
            wake: Notify::new(),
            metrics,
            backoff: Backoff::default(),
            clock: Arc::new(Timestamp::now),
            audit: true,
            in_flight: Mutex::new(HashSet::new()),
        }
    }

    /// Whether given-up deliveries are appended to the audit trail (the `[audit]` switch).
    pub fn with_audit(mut self, audit: bool) -> Self {
        self.audit = audit;
        self
    }

    /// Replaces the backoff policy.
    pub fn with_backoff(mut self, backoff: Backoff) -> Self {
        self.backoff = backoff;
        self
    }

    /// Replaces the clock.
    pub fn with_clock(mut self, clock: Clock) -> Self {
        self.clock = clock;
        self
    }

    /// Registers the handler for `channel` (whose metrics then start at 0).
    pub fn register(&mut self, channel: &str, handler: Arc<dyn OutboxHandler>) {
        self.metrics.add_channel(channel);
        let permits = handler.concurrency().max(1);
        self.handlers.insert(
            channel.to_string(),
            (handler, Arc::new(Semaphore::new(permits))),
        );
    }

    /// Whether a handler is registered for `channel`.
    pub fn handles(&self, channel: &str) -> bool {
        self.handlers.contains_key(channel)
    }

    /// Asks the worker to look for due jobs now.
    pub fn wake(&self) {
        self.wake.notify_one();
    }

    /// What the next claim may take: each channel's free delivery slots, and a few jobs of
    /// channels nobody here delivers (they are failed).
    fn quota(&self) -> ClaimQuota {
        ClaimQuota {
            channels: self
                .handlers
                .iter()
                .map(|(c, (_, permits))| (c.clone(), permits.available_permits().min(BATCH)))
                .collect(),
            others: ORPHANS,
        }
    }

    /// Runs until `shutdown` fires.
    pub async fn run(self: Arc<Self>, shutdown: CancellationToken) {
        loop {
            let notified = self.wake.notified();
            // A read first: claiming is a write, done only when something is due. Jobs of a
            // channel without free slots are not looked at: a finished delivery wakes the loop.
            let next = match self.store.next_job_at(&self.quota()).await {
                Ok(next) => next,
                Err(e) => {
                    tracing::warn!(error = %e, "outbox: cannot read the store");
                    None
                }
            };
            let now = (self.clock)();
            let pause = match next {
                Some(at) if at <= now => {
                    if self.dispatch().await > 0 {
                        // Claimed jobs are leased, so the next look sees what is left.
                        continue;
                    }
                    Duration::from_millis(10)
                }
                Some(at) => {
                    let ms = at.as_millisecond() - now.as_millisecond();
                    Duration::from_millis(ms.max(0) as u64).min(POLL)
                }
                None => POLL,
            };
            tokio::select! {
                _ = shutdown.cancelled() => return,
                _ = notified => {}
                _ = tokio::time::sleep(pause.max(Duration::from_millis(10))) => {}
            }
        }
    }

    /// Claims due jobs, at most each channel's free slots, and starts their deliveries;
    /// returns how many were claimed.
    async fn dispatch(self: &Arc<Self>) -> usize {
        let quota = self.quota();
        if quota.is_empty() {
            return 0;
        }
        let jobs = match self.store.claim_jobs((self.clock)(), &quota, LEASE).await {
            Ok(jobs) => jobs,
            Err(e) => {
                tracing::warn!(error = %e, "outbox: cannot claim jobs");
                return 0;
            }
        };
        let n = jobs.len();
        for job in jobs {
            if !self.in_flight().insert(job.id) {
                continue; // already being delivered by this process
            }
            // Only this loop takes permits, and the claim took no more jobs than were free,
            // so the slot is there now.
            let permit = self
                .handlers
                .get(&job.job.channel)
                .and_then(|(_, permits)| permits.clone().try_acquire_owned().ok());
            let this = self.clone();
            tokio::spawn(async move {
                this.deliver(&job, permit).await;
                this.in_flight().remove(&job.id);
                this.wake();
            });
        }
        n
    }

    fn in_flight(&self) -> std::sync::MutexGuard<'_, HashSet<i64>> {
        self.in_flight.locked()
    }

    async fn deliver(&self, job: &ClaimedJob, permit: Option<OwnedSemaphorePermit>) {
        let channel = job.job.channel.as_str();
        let delivery = match self.handlers.get(channel) {
            Some((handler, permits)) => {
                let _permit = match permit {
                    Some(p) => Ok(p),
                    None => permits.clone().acquire_owned().await,
                };
                match tokio::time::timeout(ATTEMPT_LIMIT, handler.deliver(job)).await {
                    Ok(delivery) => delivery,
                    Err(_) => Delivery::Retry {
                        after: None,
                        error: format!(
                            "the attempt took longer than {} s",
                            ATTEMPT_LIMIT.as_secs()
                        ),
                    },
                }
            }
            None => Delivery::Failed(format!(
                "no handler for channel {channel:?} (is it disabled?)"
            )),
        };
        let update = match delivery {
            Delivery::Done => {
                self.metrics.delivery(channel, "ok");
                JobUpdate::Done
            }
            Delivery::Failed(error) => {
                self.metrics.delivery(channel, "failed");
                tracing::error!(job = %job.job.key, channel, error = %error, "outbox: delivery failed for good");
                JobUpdate::Failed { error }
            }
            Delivery::Retry { after, error } => {
                let attempt = job.attempts + 1;
                let delay = after.unwrap_or_else(|| self.backoff.delay(attempt));
                let at = add((self.clock)(), delay);
                if at > job.job.horizon {
                    self.metrics.delivery(channel, "failed");
                    tracing::error!(job = %job.job.key, channel, attempts = attempt, error = %error,
                        "outbox: giving up, the delivery horizon has passed");
                    JobUpdate::Failed {
                        error: format!(
                            "gave up after {attempt} attempts (horizon passed): {error}"
                        ),
                    }
                } else {
                    self.metrics.delivery(channel, "retry");
                    tracing::warn!(job = %job.job.key, channel, attempt, retry_in_ms = delay.as_millis() as u64,
                        error = %error, "outbox: delivery failed; will retry");
                    JobUpdate::Retry { at, error }
                }
            }
        };
        let audit = match &update {
            JobUpdate::Failed { error } if self.audit => {
                vec![self.failure_record(job, error).await]
            }
            _ => Vec::new(),
        };
        match self.store.finish_job(job, update, audit).await {
            Ok(true) => {}
            Ok(false) => {
                tracing::warn!(job = %job.job.key, channel,
                    "outbox: the job was claimed again while this attempt ran (its lease ran out); this result is not recorded");
            }
            Err(e) => {
                // The lease runs out and the job is delivered again: at-least-once.
                tracing::error!(job = %job.job.key, error = %e, "outbox: cannot record a delivery result");
            }
        }
    }

    /// The audit entry of a given-up delivery, with the hash of the interaction's input.
    async fn failure_record(&self, job: &ClaimedJob, error: &str) -> AuditRecord {
        let input_hash = match &job.job.interaction_id {
            Some(id) => match self.store.get(id).await {
                Ok(i) => i.map(|i| i.input_digest()),
                Err(e) => {
                    tracing::warn!(job = %job.job.key, error = %e,
                        "outbox: cannot read the interaction of a failed delivery; auditing it without its input hash");
                    None
                }
            },
            None => None,
        };
        AuditRecord {
            at: crate::interaction::now(),
            action: Action::DeliveryFailed,
            interaction_id: job
                .job
                .interaction_id
                .as_ref()
                .map(|i| i.as_str().to_string()),
            actor: Some("system".into()),
            channel: job.job.channel.clone(),
            outcome: "failed".into(),
            input_hash,
            detail: Some(format!("{} ({}): {error}", job.job.key, job.job.kind)),
        }
    }
}

/// Wakes the outbox when a state change recorded jobs (and only then: a wake costs the
/// store a claim).
pub(crate) struct WakeOnChange(pub Arc<Outbox>);

impl Lifecycle for WakeOnChange {
    fn jobs_recorded(&self) {
        self.0.wake();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, PartialEq, serde::Serialize, serde::Deserialize)]
    #[serde(tag = "kind", rename_all = "snake_case")]
    enum Sample {
        Post { chat: i64 },
        Resolved,
    }

    impl ChannelJob for Sample {
        fn channel(&self) -> std::borrow::Cow<'static, str> {
            "sample".into()
        }
    }

    #[test]
    fn a_typed_job_is_stored_as_kind_and_payload_and_read_back() {
        let i = crate::interaction::Interaction::pending(
            crate::interaction::InteractionId::parse("t1").unwrap(),
            "Bash",
            crate::interaction::Input::default(),
            jiff::Timestamp::from_millisecond(1_700_000_000_000).unwrap(),
            60,
        );
        let (from, until) = created_window(&i);
        let job = Sample::Post { chat: 42 }.plan(&i, &["42"], from, until);
        assert_eq!(job.key, "sample:post:t1:1700000000000:42");
        assert_eq!(
            (job.channel.as_str(), job.kind.as_str()),
            ("sample", "post")
        );
        // The payload is what jobs stored by earlier versions hold: read the same way.
        assert_eq!(job.payload, serde_json::json!({"chat": 42}));
        assert_eq!(Sample::read(&job), Ok(Sample::Post { chat: 42 }));
        let done = Sample::Resolved.plan(&i, &[], from, until);
        assert_eq!(done.payload, serde_json::json!({}));
        assert_eq!(Sample::read(&done), Ok(Sample::Resolved));
        let unknown = OutboxJob {
            kind: "explode".into(),
            ..done.clone()
        };
        assert!(
            matches!(Sample::read(&unknown), Err(Delivery::Failed(m)) if m.contains("explode"))
        );
        assert!(matches!(
            Sample::read(&OutboxJob {
                payload: serde_json::json!({}),
                ..job
            }),
            Err(Delivery::Failed(_))
        ));
    }

    #[test]
    fn backoff_grows_with_jitter_and_caps() {
        let b = Backoff {
            base: Duration::from_secs(1),
            max: Duration::from_secs(60),
        };
        for attempt in 1..=10 {
            let d = b.delay(attempt);
            let full = Duration::from_secs(1u64 << (attempt - 1)).min(Duration::from_secs(60));
            assert!(
                d >= full / 2 && d <= full,
                "attempt {attempt}: {d:?} vs {full:?}"
            );
        }
        assert!(b.delay(1000) <= Duration::from_secs(60));
    }
}
