//! Grants in the store: kept with their audit entries in one transaction, read by every
//! process sharing the store.

use async_trait::async_trait;
use jiff::Timestamp;

use super::StoreError;
use super::audit::AuditRecord;
use crate::interaction::policy::Grant;

/// Grants: "allow this and similar calls", kept until revoked or expired.
#[async_trait]
pub trait GrantStore: Send + Sync + 'static {
    /// Records a new grant and its audit records.
    async fn add_grant(&self, grant: Grant, audit: Vec<AuditRecord>) -> Result<(), StoreError>;

    /// Revokes grant `id` at `at` with its audit records, if it is in force: the grant as it
    /// was, or `None` (nothing recorded) if there is no such grant in force.
    async fn revoke_grant(
        &self,
        id: &str,
        at: Timestamp,
        audit: Vec<AuditRecord>,
    ) -> Result<Option<Grant>, StoreError>;

    /// The grants in force at `now` (neither revoked nor expired), oldest first.
    async fn live_grants(&self, now: Timestamp) -> Result<Vec<Grant>, StoreError>;
}
