//! Persistence behind one trait, [`Store`], with an embedded SQLite implementation (the
//! default), a PostgreSQL one (several replicas sharing one database) and an in-memory one
//! (tests and throwaway runs).
//!
//! The contract every backend keeps:
//! - a write is durable when its future completes: callers acknowledge only after that;
//! - [`InteractionStore::create`] and [`InteractionStore::resolve`] are conditional (insert-if-absent and
//!   resolve-if-pending) so first-answer-wins holds in the store itself, whichever process
//!   writes; nothing is read-then-written;
//! - outbox jobs handed to `create`/`resolve` are recorded in the same transaction as the
//!   state change, and deduplicated by key;
//! - outbox jobs are claimed with a lease, so several workers (or replicas) never deliver the
//!   same job at once, and a crashed worker's jobs come back after the lease; a result is
//!   recorded only by the holder of the job's newest claim (fencing), so a worker whose lease
//!   ran out cannot overwrite what the next claimant did;
//! - every audit append moves the chain head (`audit.head` in the small named values) in the
//!   same transaction, so entries deleted from the end of the chain are noticed.
//!
//! Waking local waiters is not the store's job: the registry does that after a write, and a
//! shared backend can trigger the same step when another process changes an interaction.

pub mod intercept;
pub use crate::interaction::ports::lease;
pub mod memory;
pub mod postgres;
mod probe;
pub mod sqlite;

pub use crate::interaction::ports::audit::{AuditEntry, AuditHead, AuditRecord};
pub use crate::interaction::ports::{
    AuditQuery, AuditStore, BOUND_VALUE_PREFIX, Change, ChangeFeed, ChannelMessage, ChannelStore,
    ClaimQuota, ClaimedJob, ClusterStore, CreateOutcome, Cursor, Effects, EscalateOutcome,
    InteractionStore, JobUpdate, KvStore, ListQuery, OutboxJob, OutboxStore, Page, ResolveOutcome,
    StatusFilter, Store, StoreError, StoreHealth, StoredEvent,
};

pub use lease::Leader;
pub use memory::MemoryStore;
pub use postgres::{PostgresOptions, PostgresStore};
pub use sqlite::{SqliteStore, Synchronous};

/// One import for code that calls a store: the role traits (whose methods need to be in
/// scope on a concrete backend) and [`Store`].
pub mod prelude {
    pub use crate::interaction::ports::{
        AuditStore, ChannelStore, ClusterStore, GrantStore, InteractionStore, KvStore, OutboxStore,
        SessionStore, Store,
    };
}

/// 32 random bytes for a new server secret.
pub(crate) fn random_secret() -> Vec<u8> {
    use rand::RngCore;
    let mut bytes = vec![0u8; 32];
    rand::rng().fill_bytes(&mut bytes);
    bytes
}
