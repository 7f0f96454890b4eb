//! Sessions in the store: each agent session's record, changed under a lock (or in a
//! transaction) so that processes sharing a store agree, kept within a retention (the store's
//! `prune`) and a bound on how many.

use async_trait::async_trait;

use super::StoreError;
use super::audit::AuditRecord;
use crate::interaction::sessions::Session;

/// A change to one session's record: given the record as kept (`None`: none yet), the
/// record to keep (`None`: keep it as it is).
pub type SessionChange = Box<dyn FnOnce(Option<Session>) -> Option<Session> + Send>;

/// Agent sessions.
#[async_trait]
pub trait SessionStore: Send + Sync + 'static {
    /// Applies `change` to the record of `agent`'s session `id` with no other change to it in
    /// between (in any process sharing the store), records `audit` with it, and then keeps
    /// at most `keep` sessions (the least recently active go first). Returns the record kept,
    /// as `change` returned it, or `None` when it changed nothing.
    async fn change_session(
        &self,
        agent: &str,
        id: &str,
        change: SessionChange,
        audit: Vec<AuditRecord>,
        keep: usize,
    ) -> Result<Option<Session>, StoreError>;

    /// `agent`'s session `id`.
    async fn session(&self, agent: &str, id: &str) -> Result<Option<Session>, StoreError>;

    /// The `limit` most recently active sessions, most recent first.
    async fn sessions(&self, limit: usize) -> Result<Vec<Session>, StoreError>;
}
