//! The ports the core calls and the backends implement: the persistence traits, split by
//! role, and the values that cross them (outbox jobs, effects, listings, channel messages,
//! audit records).
//!
//! The core owns these so that it imports nothing from the layers above it: `store/` holds the
//! backends that implement the traits, `outbox.rs` and the channels deliver the jobs, and
//! `audit.rs` chains and verifies the records.
//!
//! The contract every backend keeps is written down in [`crate::store`]. A backend implements
//! each role trait ([`InteractionStore`], [`ChannelStore`], [`OutboxStore`], [`AuditStore`],
//! [`KvStore`], and [`ClusterStore`] where several processes share it); [`Store`] is every role at once, implemented for any type that has them all,
//! so the rest of the program holds one `Arc<dyn Store>`.

pub mod audit;
mod ballot;
pub mod grants;
pub mod lease;
pub mod sessions;

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use futures_util::stream::BoxStream;
use jiff::Timestamp;
use serde_json::Value;

use self::audit::{AuditEntry, AuditHead, AuditRecord};
pub use self::ballot::{Ballot, Count, VoteOutcome};
pub use self::grants::GrantStore;
use self::lease::Leader;
pub use self::sessions::{SessionChange, SessionStore};
use super::{Interaction, InteractionId};

/// Why the store could not do what was asked.
#[derive(Clone, Debug, thiserror::Error)]
pub enum StoreError {
    /// The store cannot take writes (disk full, read-only, I/O error); nothing was changed.
    #[error("the store is unavailable: {0}")]
    Unavailable(String),
    /// Stored data could not be decoded.
    #[error("stored data is corrupt: {0}")]
    Corrupt(String),
}

/// A unit of work that must reach the outside world (a message edit, a webhook delivery),
/// retried until it succeeds or its horizon passes.
#[derive(Clone, Debug, PartialEq)]
pub struct OutboxJob {
    /// Idempotency key: enqueueing a job whose key exists does nothing.
    pub key: String,
    /// The handler that delivers it (e.g. `telegram`, `webhook`).
    pub channel: String,
    /// What to do, as the handler understands it (e.g. `post`, `resolved`).
    pub kind: String,
    /// The interaction it concerns, if any.
    pub interaction_id: Option<InteractionId>,
    /// Handler-specific data.
    pub payload: Value,
    /// Not to be attempted before this time.
    pub not_before: Timestamp,
    /// Given up if not delivered by this time.
    pub horizon: Timestamp,
}

impl OutboxJob {
    /// The key of a job of `channel` doing `kind` for interaction `i`:
    /// `<channel>:<kind>:<incarnation>[:<more>...]`, the form [`OutboxJob::is_for`] reads.
    /// `more` tells apart jobs of one kind for one interaction (a chat, a receiver).
    pub fn key_for(channel: &str, kind: &str, i: &Interaction, more: &[&str]) -> String {
        let mut key = format!("{channel}:{kind}:{}", i.incarnation());
        for m in more {
            key.push(':');
            key.push_str(m);
        }
        key
    }

    /// Whether this job was planned for incarnation `i` of its interaction id. The keys of
    /// jobs about one interaction read `<channel>:<kind>:<incarnation>[:<more>]` (see
    /// [`Interaction::incarnation`]): an id can be used again once its old interaction is
    /// pruned, and a job of the old one still retrying must not act for the new one.
    pub fn is_for(&self, i: &Interaction) -> bool {
        let mut parts = self.key.splitn(3, ':');
        let (Some(_), Some(_), Some(rest)) = (parts.next(), parts.next(), parts.next()) else {
            return false;
        };
        rest.strip_prefix(i.incarnation().as_str())
            .is_some_and(|more| more.is_empty() || more.starts_with(':'))
    }
}

/// An outbox job claimed for delivery.
#[derive(Clone, Debug, PartialEq)]
pub struct ClaimedJob {
    /// The store's id for the job.
    pub id: i64,
    /// Identifies this claim: a later claim of the same job gets a different value, and only
    /// the newest claim's result is recorded.
    pub lease: i64,
    /// Delivery attempts made before this one.
    pub attempts: u32,
    /// The job.
    pub job: OutboxJob,
}

/// How a delivery attempt ended.
#[derive(Clone, Debug, PartialEq)]
pub enum JobUpdate {
    /// Delivered: the job is finished.
    Done,
    /// Failed for now: try again at `at`.
    Retry {
        /// When to try again.
        at: Timestamp,
        /// What went wrong.
        error: String,
    },
    /// Failed for good (rejected, or the horizon passed).
    Failed {
        /// What went wrong.
        error: String,
    },
}

/// Which due jobs a claim may take: a number per channel, so that one busy or stuck channel
/// never takes the places of others.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ClaimQuota {
    /// Channels and how many of their jobs may be claimed now (0: none).
    pub channels: Vec<(String, usize)>,
    /// How many jobs may be claimed of each channel not listed.
    pub others: usize,
}

impl ClaimQuota {
    /// Up to `limit` jobs of every channel.
    pub fn any(limit: usize) -> Self {
        Self {
            channels: Vec::new(),
            others: limit,
        }
    }

    /// How many jobs of `channel` may be claimed.
    pub fn limit(&self, channel: &str) -> usize {
        self.channels
            .iter()
            .find(|(c, _)| c == channel)
            .map_or(self.others, |(_, n)| *n)
    }

    /// The channels a claim may take jobs of, with how many each: the listed ones with
    /// places, then those of `pending` (the channels with unfinished jobs; needed only when
    /// [`ClaimQuota::others`] is not 0) that are not listed.
    pub fn claimable(&self, pending: Vec<String>) -> Vec<(String, usize)> {
        let mut out: Vec<(String, usize)> = self
            .channels
            .iter()
            .filter(|(_, n)| *n > 0)
            .cloned()
            .collect();
        if self.others > 0 {
            for c in pending {
                if !self.channels.iter().any(|(listed, _)| *listed == c) {
                    out.push((c, self.others));
                }
            }
        }
        out
    }

    /// Whether nothing at all may be claimed.
    pub fn is_empty(&self) -> bool {
        self.others == 0 && self.channels.iter().all(|(_, n)| *n == 0)
    }
}

/// Durable side effects of a state change, recorded in the same transaction as it.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Effects {
    /// Outbox jobs to enqueue (deduplicated by key).
    pub jobs: Vec<OutboxJob>,
    /// Audit records to append to the chain.
    pub audit: Vec<AuditRecord>,
}

/// A request for audit entries, oldest first.
#[derive(Clone, Debug)]
pub struct AuditQuery {
    /// Only entries with a higher sequence number.
    pub after_seq: i64,
    /// Only entries at or after this time.
    pub since: Option<Timestamp>,
    /// At most this many.
    pub limit: usize,
}

/// Result of [`InteractionStore::create`].
#[derive(Clone, Debug)]
pub enum CreateOutcome {
    /// The interaction was recorded.
    Created,
    /// An interaction with that id already exists; here it is, unchanged.
    Exists(Arc<Interaction>),
}

/// Result of [`InteractionStore::resolve`].
#[derive(Clone, Debug)]
pub enum ResolveOutcome {
    /// This resolution won.
    Resolved,
    /// Another resolution won first; here is the interaction with it.
    AlreadyResolved(Arc<Interaction>),
    /// No interaction has that id.
    NotFound,
}

/// Result of [`InteractionStore::escalate`].
#[derive(Clone, Debug)]
pub enum EscalateOutcome {
    /// This call marked it escalated and recorded the jobs.
    Escalated,
    /// It is resolved, or escalated already (by this process or another): nothing was
    /// recorded; here it is as stored.
    Unchanged(Arc<Interaction>),
    /// No interaction has that id.
    NotFound,
}

/// Which interactions to list.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StatusFilter {
    /// Awaiting an answer.
    #[default]
    Pending,
    /// Answered, expired or cancelled.
    Resolved,
    /// Both.
    All,
}

impl StatusFilter {
    /// Whether an interaction passes this filter.
    pub fn matches(self, i: &Interaction) -> bool {
        match self {
            StatusFilter::Pending => i.is_pending(),
            StatusFilter::Resolved => !i.is_pending(),
            StatusFilter::All => true,
        }
    }
}

/// A position in a newest-first listing: the last item of the previous page.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Cursor {
    /// Creation time of the last item, in unix milliseconds.
    pub created_ms: i64,
    /// Id of the last item.
    pub id: InteractionId,
}

impl Cursor {
    /// The cursor pointing just after `i`.
    pub fn after(i: &Interaction) -> Self {
        Self {
            created_ms: i.created_at.as_millisecond(),
            id: i.id.clone(),
        }
    }
}

/// A listing request.
#[derive(Clone, Debug)]
pub struct ListQuery {
    /// Which interactions.
    pub status: StatusFilter,
    /// Page size.
    pub limit: usize,
    /// Continue after this position.
    pub after: Option<Cursor>,
    /// About how many bytes of stored interactions (their JSON text) the page may load: a
    /// store that reads them from elsewhere ends the page once it holds more, after at least
    /// one interaction, with `next` after the last one it holds. `None`: `limit` alone. A
    /// store that keeps them in memory anyway may ignore it.
    pub max_bytes: Option<usize>,
}

/// One page of a listing, newest first.
#[derive(Clone, Debug)]
pub struct Page {
    /// The interactions on this page.
    pub interactions: Vec<Arc<Interaction>>,
    /// Where the next page starts, if there is one.
    pub next: Option<Cursor>,
}

impl Page {
    /// A page that ended early (at [`ListQuery::max_bytes`]): more may follow its last item.
    pub fn cut_short(items: Vec<Arc<Interaction>>) -> Self {
        Self {
            next: items.last().map(|i| Cursor::after(i)),
            interactions: items,
        }
    }

    /// The page of at most `limit` interactions out of `items`, a newest-first listing that
    /// was asked for one more than `limit`: that extra one, if there, says a next page exists.
    pub fn from_overfetch(mut items: Vec<Arc<Interaction>>, limit: usize) -> Self {
        let next = if items.len() > limit {
            items.truncate(limit);
            items.last().map(|i| Cursor::after(i))
        } else {
            None
        };
        Self {
            interactions: items,
            next,
        }
    }
}

/// A message on an external channel that shows an interaction (a Telegram message, a Feishu
/// card), so that its buttons keep working and it is updated when the interaction resolves.
#[derive(Clone, Debug, PartialEq)]
pub struct ChannelMessage {
    /// The channel (`telegram`, `feishu`).
    pub channel: String,
    /// Where it was posted (chat id, receiver).
    pub address: String,
    /// The channel's id for the message.
    pub message_ref: String,
    /// The interaction it shows.
    pub interaction_id: InteractionId,
    /// Channel-specific state (e.g. multi-select toggles).
    pub state: Option<Value>,
    /// When it was posted.
    pub created_at: Timestamp,
}

/// Prefix of small named values that belong to an interaction: the value is the id of an
/// interaction, and the value is kept only as long as that interaction is ([`InteractionStore::prune`]
/// deletes it once the interaction is gone). For memories that would otherwise grow with
/// every interaction ever seen.
pub const BOUND_VALUE_PREFIX: &str = "bound:";

/// What a store shared by several processes reports about changes any of them committed
/// (see [`ClusterStore::changes`]). The store is the truth: a change says where to look, and
/// at most carries a committed resolution so waiters wake before the look.
#[derive(Clone, Debug, PartialEq)]
pub enum Change {
    /// Interaction `id` was created or resolved, by any process (this one included).
    Changed(InteractionId),
    /// Interaction `id` was resolved with this resolution, by any process (this one
    /// included), and committed: a process holding it pending can wake its waiters with it
    /// at once. Sent besides [`Change::Changed`] for the same resolution (in either order),
    /// never instead of it, and only when the resolution is small enough to carry.
    Settled(InteractionId, Box<super::Resolution>),
    /// Changes may have been missed (the feed reconnected, or its reader fell behind):
    /// re-check everything held.
    MayHaveMissed,
}

/// A stream of [`Change`]s; it ends only when the store is closed.
pub type ChangeFeed = BoxStream<'static, Change>;

/// A lifecycle event as a shared store keeps it (see [`ClusterStore::events_after`]).
#[derive(Clone, Debug)]
pub struct StoredEvent {
    /// Its id: every process sees the same, increasing in commit order.
    pub id: u64,
    /// What happened.
    pub kind: super::EventKind,
    /// The interaction as it was after the event.
    pub interaction: Arc<Interaction>,
}

/// Interactions: the conditional writes first-answer-wins rests on, reads and pruning.
#[async_trait]
pub trait InteractionStore: Send + Sync + 'static {
    /// Records a new interaction and its effects, unless its id exists (then nothing is
    /// recorded).
    async fn create(
        &self,
        interaction: Arc<Interaction>,
        effects: Effects,
    ) -> Result<CreateOutcome, StoreError>;

    /// Records a resolution (carried by `resolved`) and its effects, if the interaction is
    /// still pending (otherwise nothing is recorded).
    async fn resolve(
        &self,
        resolved: Arc<Interaction>,
        effects: Effects,
    ) -> Result<ResolveOutcome, StoreError>;

    /// Records a person's vote on an approval that needs several people and counts the
    /// votes, in one transaction: refused when the person voted already (one vote per
    /// person, whatever channel), and, when the votes on the vote's side reach
    /// `ballot.needed`, the interaction is resolved as `ballot.decided` (with every vote)
    /// in the same transaction. Two votes at once, from any processes, are counted one
    /// after the other: neither is lost and only one decides.
    async fn vote(&self, ballot: Ballot) -> Result<VoteOutcome, StoreError>;

    /// Records `escalated` (a pending interaction with [`Interaction::escalated_at`] set) and
    /// its effects, in one transaction, if the stored interaction is still pending and not yet
    /// escalated: the compare-and-set that makes an escalation happen once however many
    /// processes try it. Only the mark changes; the stored resolution (none) stays.
    async fn escalate(
        &self,
        escalated: Arc<Interaction>,
        effects: Effects,
    ) -> Result<EscalateOutcome, StoreError>;

    /// One interaction by id.
    async fn get(&self, id: &InteractionId) -> Result<Option<Arc<Interaction>>, StoreError>;

    /// A page of interactions, newest first.
    async fn list(&self, query: &ListQuery) -> Result<Page, StoreError>;

    /// Every pending interaction, oldest first.
    async fn pending(&self) -> Result<Vec<Arc<Interaction>>, StoreError>;

    /// The ids of every pending interaction, oldest first: for a caller that reads each one
    /// later, without holding all of them at once. A store that keeps interactions elsewhere
    /// reads the ids alone.
    async fn pending_ids(&self) -> Result<Vec<InteractionId>, StoreError> {
        Ok(self.pending().await?.iter().map(|i| i.id.clone()).collect())
    }

    /// Deletes interactions resolved before `before`, with their channel messages, finished
    /// outbox jobs older than it, grants revoked or expired before it, expired deduplication
    /// keys, and the small named values
    /// under [`BOUND_VALUE_PREFIX`] whose interaction no longer exists. Returns how many
    /// interactions were deleted.
    async fn prune(&self, before: Timestamp) -> Result<u64, StoreError>;
}

/// Channel bookkeeping: the messages that show an interaction on a channel.
#[async_trait]
pub trait ChannelStore: Send + Sync + 'static {
    /// Records (or replaces) a channel message.
    async fn record_message(&self, message: ChannelMessage) -> Result<(), StoreError>;

    /// The messages of `channel` that show interaction `id`.
    async fn messages(
        &self,
        channel: &str,
        id: &InteractionId,
    ) -> Result<Vec<ChannelMessage>, StoreError>;

    /// One channel message by its address and reference.
    async fn message(
        &self,
        channel: &str,
        address: &str,
        message_ref: &str,
    ) -> Result<Option<ChannelMessage>, StoreError>;

    /// Replaces a channel message's state; `false` if there is no such message.
    async fn set_message_state(
        &self,
        channel: &str,
        address: &str,
        message_ref: &str,
        state: Option<Value>,
    ) -> Result<bool, StoreError>;
}

/// The outbox: jobs enqueued, claimed under a lease and finished.
#[async_trait]
pub trait OutboxStore: Send + Sync + 'static {
    /// Enqueues outbox jobs outside any state change (keys deduplicate).
    async fn enqueue(&self, jobs: Vec<OutboxJob>) -> Result<(), StoreError>;

    /// Claims due jobs, as many per channel as `quota` allows, for `lease`; claimed jobs are
    /// not handed out again until finished or the lease runs out.
    async fn claim_jobs(
        &self,
        now: Timestamp,
        quota: &ClaimQuota,
        lease: Duration,
    ) -> Result<Vec<ClaimedJob>, StoreError>;

    /// Records how a claimed job's delivery attempt ended, with audit records to append in
    /// the same transaction. `Ok(false)` (nothing recorded, nothing appended) if the claim is
    /// stale: the job was claimed again since, or is already finished.
    async fn finish_job(
        &self,
        job: &ClaimedJob,
        update: JobUpdate,
        audit: Vec<AuditRecord>,
    ) -> Result<bool, StoreError>;

    /// When the earliest unfinished job that `quota` lets a claim take can next be claimed
    /// (due and not leased), if any.
    async fn next_job_at(&self, quota: &ClaimQuota) -> Result<Option<Timestamp>, StoreError>;

    /// Unfinished outbox jobs, by channel: for metrics and health.
    async fn job_backlog(&self) -> Result<Vec<(String, u64)>, StoreError>;
}

/// Small server state: named values, secrets and deduplication keys.
#[async_trait]
pub trait KvStore: Send + Sync + 'static {
    /// A small named value (e.g. "this webhook target is disabled"). Values are kept until
    /// removed, except those under [`BOUND_VALUE_PREFIX`].
    async fn get_value(&self, key: &str) -> Result<Option<String>, StoreError>;

    /// Sets (or with `None` removes) a small named value.
    async fn set_value(&self, key: &str, value: Option<String>) -> Result<(), StoreError>;

    /// Sets (or with `None` removes) value `key` only if it is still `expected` (`None`: it
    /// does not exist): `true` if it was set, `false` if another writer changed it first (the
    /// caller reads it again). A value read, changed and written back this way loses no
    /// other writer's change, whichever replica made it.
    async fn swap_value(
        &self,
        key: &str,
        expected: Option<&str>,
        value: Option<String>,
    ) -> Result<bool, StoreError>;

    /// The named values whose keys start with `prefix`, by key, at most `limit` of them (a
    /// small set kept under one prefix, such as a channel's registered devices).
    async fn values_under(
        &self,
        prefix: &str,
        limit: usize,
    ) -> Result<Vec<(String, String)>, StoreError>;

    /// A named 32-byte server secret, created at random on first use and kept for good (used
    /// to sign channel buttons so they keep working after a restart).
    async fn secret(&self, name: &str) -> Result<Vec<u8>, StoreError>;

    /// Records `key` in `scope` until `expires_at`; `true` if it was not already recorded
    /// (deduplication of platform re-deliveries and replayed webhook ids).
    async fn first_sighting(
        &self,
        scope: &str,
        key: &str,
        expires_at: Timestamp,
    ) -> Result<bool, StoreError>;

    /// Forgets `key` in `scope` (a request that used it failed in a way its sender may retry).
    async fn forget_sighting(&self, scope: &str, key: &str) -> Result<(), StoreError>;

    /// Whether the store can take writes now. The default writes a small named value.
    async fn check_writable(&self) -> Result<(), StoreError> {
        self.set_value(
            "health.write_probe",
            Some(Timestamp::now().as_millisecond().to_string()),
        )
        .await
    }

    /// How the store is doing now, for `/healthz`. The default reads a small named value,
    /// then checks writes ([`KvStore::check_writable`]): a failed read is
    /// [`StoreHealth::Unavailable`], a failed write after a good read
    /// [`StoreHealth::ReadOnly`]. A backend whose probe costs more bounds how often it runs.
    async fn health(&self) -> StoreHealth {
        if let Err(e) = self.get_value("health.write_probe").await {
            return StoreHealth::Unavailable(e);
        }
        match self.check_writable().await {
            Ok(()) => StoreHealth::Ok,
            Err(e) => StoreHealth::ReadOnly(e),
        }
    }
}

/// How the store is doing, as `/healthz` reports it.
#[derive(Clone, Debug)]
pub enum StoreHealth {
    /// Reads and writes work.
    Ok,
    /// What is stored can be read, and writes are refused by the storage itself: a
    /// read-only or full disk, a read-only database server.
    ReadOnly(StoreError),
    /// The store cannot be used now: unreachable, restarting, or writes cannot get through
    /// (a lock another session holds).
    Unavailable(StoreError),
}

impl StoreHealth {
    /// The state's name in `/healthz`: `ok`, `read_only` or `unavailable`.
    pub fn as_str(&self) -> &'static str {
        match self {
            Self::Ok => "ok",
            Self::ReadOnly(_) => "read_only",
            Self::Unavailable(_) => "unavailable",
        }
    }

    /// Why the store is not healthy (`None` when it is).
    pub fn error(&self) -> Option<&StoreError> {
        match self {
            Self::Ok => None,
            Self::ReadOnly(e) | Self::Unavailable(e) => Some(e),
        }
    }
}

/// The audit chain: appends and reads (the head is kept as a small named value).
#[async_trait]
pub trait AuditStore: KvStore {
    /// Appends records to the audit chain (events that change no state, such as refusals).
    async fn append_audit(&self, records: Vec<AuditRecord>) -> Result<(), StoreError>;

    /// The audit chain's head as recorded with the last append (`None` before the first).
    async fn audit_head(&self) -> Result<Option<AuditHead>, StoreError> {
        match self.get_value(audit::HEAD_KEY).await? {
            Some(v) => v.parse().map(Some).map_err(StoreError::Corrupt),
            None => Ok(None),
        }
    }

    /// Audit entries, oldest first.
    async fn audit(&self, query: &AuditQuery) -> Result<Vec<AuditEntry>, StoreError>;
}

/// Several processes on one store: the change feed, the shared lifecycle events and leases.
/// A store only one process uses keeps every default.
#[async_trait]
pub trait ClusterStore: Send + Sync + 'static {
    /// The changes committed by every process sharing this store, starting now; `None` for
    /// a store only this process writes (nothing else can change it). Each call starts a
    /// new feed.
    fn changes(&self) -> Option<ChangeFeed> {
        None
    }

    /// Whether this store keeps the lifecycle events of every process sharing it
    /// ([`ClusterStore::events_after`]); then those, not the ones this process numbers itself, are
    /// what its subscribers see.
    fn keeps_events(&self) -> bool {
        false
    }

    /// The kept lifecycle events after id `after`, oldest first, at most `limit`.
    async fn events_after(
        &self,
        _after: u64,
        _limit: usize,
    ) -> Result<Vec<StoredEvent>, StoreError> {
        Ok(Vec::new())
    }

    /// The id of the newest kept lifecycle event (0 before the first).
    async fn event_head(&self) -> Result<u64, StoreError> {
        Ok(0)
    }

    /// Competes for the lease `name` with the other processes sharing the store, renewing
    /// it in the background while held; a lease of `lease` is taken over by another process
    /// within that time after its holder dies. A store only this process uses always leads.
    fn lead(&self, _name: &str, _lease: Duration) -> Leader {
        Leader::sole()
    }
}

/// Persistence for interactions, channel bookkeeping, the outbox and small server state:
/// every role at once. Implemented for any type that implements all the role traits.
/// (Each role trait is `Send + Sync + 'static` already.)
pub trait Store:
    InteractionStore
    + ChannelStore
    + OutboxStore
    + AuditStore
    + KvStore
    + ClusterStore
    + GrantStore
    + SessionStore
{
}

impl<T> Store for T where
    T: InteractionStore
        + ChannelStore
        + OutboxStore
        + AuditStore
        + KvStore
        + ClusterStore
        + GrantStore
        + SessionStore
{
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::interaction::Interaction;

    #[test]
    fn a_job_is_for_the_incarnation_its_key_names() {
        let at = |ms| Timestamp::from_millisecond(ms).unwrap();
        let i = |id: &str, ms| {
            Interaction::pending(
                InteractionId::parse(id).unwrap(),
                "Bash",
                serde_json::Map::new(),
                at(ms),
                60,
            )
        };
        let job = |key: &str| OutboxJob {
            key: key.into(),
            channel: "c".into(),
            kind: "k".into(),
            interaction_id: None,
            payload: Value::Null,
            not_before: at(0),
            horizon: at(0),
        };
        let x = i("a:b", 10);
        assert!(job("c:k:a:b:10").is_for(&x));
        assert!(job("c:k:a:b:10:oc_1:more").is_for(&x));
        // Another creation time of the same id, including one the key's time starts with.
        assert!(!job("c:k:a:b:100").is_for(&x));
        assert!(!job("c:k:a:b:1").is_for(&x));
        assert!(!job("c:k:a:b:11:oc_1").is_for(&x));
        // The incarnation must follow the channel and kind.
        assert!(!job("c:a:b:10").is_for(&x));
        assert!(!job("a:b:10").is_for(&x));
        assert!(!job("").is_for(&x));
        // The key builder writes what is_for reads.
        assert_eq!(OutboxJob::key_for("c", "k", &x, &[]), "c:k:a:b:10");
        assert!(job(&OutboxJob::key_for("c", "k", &x, &["oc_1", "more"])).is_for(&x));
        assert!(!job(&OutboxJob::key_for("c", "k", &i("a:b", 11), &[])).is_for(&x));
    }
}
