//! A [`Store`] wrapper that runs hooks around every call: fault injection for tests and
//! drills (refuse writes as a full disk would, hold a write at a gate to cut a handler off
//! half-way, pause right after a commit).
//!
//! The wrapper delegates every call to the wrapped store unchanged; an [`Interceptor`] sees
//! which [`Op`] is about to run (and may refuse it) and when it has returned.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use jiff::Timestamp;
use serde_json::Value;

use super::{
    AuditEntry, AuditHead, AuditQuery, AuditRecord, ChannelMessage, ClaimQuota, ClaimedJob,
    CreateOutcome, Effects, EscalateOutcome, JobUpdate, ListQuery, OutboxJob, Page, ResolveOutcome,
    Store, StoreError,
};
use crate::interaction::{Interaction, InteractionId};
use crate::store::prelude::*;

/// One [`Store`] method.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[allow(missing_docs)]
pub enum Op {
    Create,
    Resolve,
    Escalate,
    Get,
    List,
    Pending,
    Prune,
    RecordMessage,
    Messages,
    Message,
    SetMessageState,
    Enqueue,
    ClaimJobs,
    FinishJob,
    NextJobAt,
    JobBacklog,
    AppendAudit,
    AuditHead,
    Audit,
    GetValue,
    SetValue,
    Secret,
    FirstSighting,
    ForgetSighting,
    CheckWritable,
    AddGrant,
    RevokeGrant,
    LiveGrants,
    ChangeSession,
    Session,
    Sessions,
    EventsAfter,
    EventHead,
}

impl Op {
    /// Whether the method changes what is stored.
    pub fn is_write(self) -> bool {
        matches!(
            self,
            Op::Create
                | Op::Resolve
                | Op::Prune
                | Op::RecordMessage
                | Op::SetMessageState
                | Op::Enqueue
                | Op::ClaimJobs
                | Op::FinishJob
                | Op::AppendAudit
                | Op::SetValue
                | Op::FirstSighting
                | Op::ForgetSighting
                | Op::CheckWritable
                | Op::AddGrant
                | Op::RevokeGrant
                | Op::ChangeSession
        )
    }
}

/// Hooks run around each call of an [`Intercepted`] store.
#[async_trait]
pub trait Interceptor: Send + Sync + 'static {
    /// Runs before `op`; an error is returned in place of making the call.
    async fn before(&self, _op: Op) -> Result<(), StoreError> {
        Ok(())
    }

    /// Runs after `op` returned, whatever it returned.
    async fn after(&self, _op: Op) {}
}

/// A store whose calls pass through an [`Interceptor`].
pub struct Intercepted<I> {
    inner: Arc<dyn Store>,
    /// The hooks, reachable so a test can open a gate or flip a switch.
    pub hooks: I,
}

impl<I: Interceptor> Intercepted<I> {
    /// Wraps `inner`.
    pub fn new(inner: Arc<dyn Store>, hooks: I) -> Self {
        Self { inner, hooks }
    }

    async fn call<T>(
        &self,
        op: Op,
        f: impl Future<Output = Result<T, StoreError>>,
    ) -> Result<T, StoreError> {
        self.hooks.before(op).await?;
        let out = f.await;
        self.hooks.after(op).await;
        out
    }
}

#[async_trait]
impl<I: Interceptor> InteractionStore for Intercepted<I> {
    async fn create(&self, i: Arc<Interaction>, e: Effects) -> Result<CreateOutcome, StoreError> {
        self.call(Op::Create, self.inner.create(i, e)).await
    }

    async fn resolve(&self, i: Arc<Interaction>, e: Effects) -> Result<ResolveOutcome, StoreError> {
        self.call(Op::Resolve, self.inner.resolve(i, e)).await
    }

    async fn vote(
        &self,
        b: crate::interaction::quorum::Ballot,
    ) -> Result<crate::interaction::quorum::VoteOutcome, StoreError> {
        self.call(Op::Resolve, self.inner.vote(b)).await
    }

    async fn escalate(
        &self,
        i: Arc<Interaction>,
        e: Effects,
    ) -> Result<EscalateOutcome, StoreError> {
        self.call(Op::Escalate, self.inner.escalate(i, e)).await
    }

    async fn get(&self, id: &InteractionId) -> Result<Option<Arc<Interaction>>, StoreError> {
        self.call(Op::Get, self.inner.get(id)).await
    }

    async fn list(&self, q: &ListQuery) -> Result<Page, StoreError> {
        self.call(Op::List, self.inner.list(q)).await
    }

    async fn pending(&self) -> Result<Vec<Arc<Interaction>>, StoreError> {
        self.call(Op::Pending, self.inner.pending()).await
    }

    async fn pending_ids(&self) -> Result<Vec<InteractionId>, StoreError> {
        self.call(Op::Pending, self.inner.pending_ids()).await
    }

    async fn prune(&self, before: Timestamp) -> Result<u64, StoreError> {
        self.call(Op::Prune, self.inner.prune(before)).await
    }
}

#[async_trait]
impl<I: Interceptor> ChannelStore for Intercepted<I> {
    async fn record_message(&self, m: ChannelMessage) -> Result<(), StoreError> {
        self.call(Op::RecordMessage, self.inner.record_message(m))
            .await
    }

    async fn messages(
        &self,
        channel: &str,
        id: &InteractionId,
    ) -> Result<Vec<ChannelMessage>, StoreError> {
        self.call(Op::Messages, self.inner.messages(channel, id))
            .await
    }

    async fn message(
        &self,
        channel: &str,
        address: &str,
        message_ref: &str,
    ) -> Result<Option<ChannelMessage>, StoreError> {
        self.call(
            Op::Message,
            self.inner.message(channel, address, message_ref),
        )
        .await
    }

    async fn set_message_state(
        &self,
        channel: &str,
        address: &str,
        message_ref: &str,
        state: Option<Value>,
    ) -> Result<bool, StoreError> {
        self.call(
            Op::SetMessageState,
            self.inner
                .set_message_state(channel, address, message_ref, state),
        )
        .await
    }
}

#[async_trait]
impl<I: Interceptor> OutboxStore for Intercepted<I> {
    async fn enqueue(&self, jobs: Vec<OutboxJob>) -> Result<(), StoreError> {
        self.call(Op::Enqueue, self.inner.enqueue(jobs)).await
    }

    async fn claim_jobs(
        &self,
        now: Timestamp,
        quota: &ClaimQuota,
        lease: Duration,
    ) -> Result<Vec<ClaimedJob>, StoreError> {
        self.call(Op::ClaimJobs, self.inner.claim_jobs(now, quota, lease))
            .await
    }

    async fn finish_job(
        &self,
        job: &ClaimedJob,
        update: JobUpdate,
        audit: Vec<AuditRecord>,
    ) -> Result<bool, StoreError> {
        self.call(Op::FinishJob, self.inner.finish_job(job, update, audit))
            .await
    }

    async fn next_job_at(&self, quota: &ClaimQuota) -> Result<Option<Timestamp>, StoreError> {
        self.call(Op::NextJobAt, self.inner.next_job_at(quota))
            .await
    }

    async fn job_backlog(&self) -> Result<Vec<(String, u64)>, StoreError> {
        self.call(Op::JobBacklog, self.inner.job_backlog()).await
    }
}

#[async_trait]
impl<I: Interceptor> AuditStore for Intercepted<I> {
    async fn append_audit(&self, records: Vec<AuditRecord>) -> Result<(), StoreError> {
        self.call(Op::AppendAudit, self.inner.append_audit(records))
            .await
    }

    async fn audit_head(&self) -> Result<Option<AuditHead>, StoreError> {
        self.call(Op::AuditHead, self.inner.audit_head()).await
    }

    async fn audit(&self, query: &AuditQuery) -> Result<Vec<AuditEntry>, StoreError> {
        self.call(Op::Audit, self.inner.audit(query)).await
    }
}

#[async_trait]
impl<I: Interceptor> GrantStore for Intercepted<I> {
    async fn add_grant(
        &self,
        grant: crate::interaction::policy::Grant,
        audit: Vec<AuditRecord>,
    ) -> Result<(), StoreError> {
        self.call(Op::AddGrant, self.inner.add_grant(grant, audit))
            .await
    }

    async fn revoke_grant(
        &self,
        id: &str,
        at: Timestamp,
        audit: Vec<AuditRecord>,
    ) -> Result<Option<crate::interaction::policy::Grant>, StoreError> {
        self.call(Op::RevokeGrant, self.inner.revoke_grant(id, at, audit))
            .await
    }

    async fn live_grants(
        &self,
        now: Timestamp,
    ) -> Result<Vec<crate::interaction::policy::Grant>, StoreError> {
        self.call(Op::LiveGrants, self.inner.live_grants(now)).await
    }
}

#[async_trait]
impl<I: Interceptor> SessionStore for Intercepted<I> {
    async fn change_session(
        &self,
        agent: &str,
        id: &str,
        change: crate::interaction::ports::SessionChange,
        audit: Vec<AuditRecord>,
        keep: usize,
    ) -> Result<Option<crate::interaction::sessions::Session>, StoreError> {
        self.call(
            Op::ChangeSession,
            self.inner.change_session(agent, id, change, audit, keep),
        )
        .await
    }

    async fn session(
        &self,
        agent: &str,
        id: &str,
    ) -> Result<Option<crate::interaction::sessions::Session>, StoreError> {
        self.call(Op::Session, self.inner.session(agent, id)).await
    }

    async fn sessions(
        &self,
        limit: usize,
    ) -> Result<Vec<crate::interaction::sessions::Session>, StoreError> {
        self.call(Op::Sessions, self.inner.sessions(limit)).await
    }
}

#[async_trait]
impl<I: Interceptor> KvStore for Intercepted<I> {
    async fn get_value(&self, key: &str) -> Result<Option<String>, StoreError> {
        self.call(Op::GetValue, self.inner.get_value(key)).await
    }

    async fn set_value(&self, key: &str, value: Option<String>) -> Result<(), StoreError> {
        self.call(Op::SetValue, self.inner.set_value(key, value))
            .await
    }

    async fn swap_value(
        &self,
        key: &str,
        expected: Option<&str>,
        value: Option<String>,
    ) -> Result<bool, StoreError> {
        self.call(Op::SetValue, self.inner.swap_value(key, expected, value))
            .await
    }

    async fn values_under(
        &self,
        prefix: &str,
        limit: usize,
    ) -> Result<Vec<(String, String)>, StoreError> {
        self.call(Op::GetValue, self.inner.values_under(prefix, limit))
            .await
    }

    async fn secret(&self, name: &str) -> Result<Vec<u8>, StoreError> {
        self.call(Op::Secret, self.inner.secret(name)).await
    }

    async fn first_sighting(
        &self,
        scope: &str,
        key: &str,
        expires_at: Timestamp,
    ) -> Result<bool, StoreError> {
        self.call(
            Op::FirstSighting,
            self.inner.first_sighting(scope, key, expires_at),
        )
        .await
    }

    async fn forget_sighting(&self, scope: &str, key: &str) -> Result<(), StoreError> {
        self.call(Op::ForgetSighting, self.inner.forget_sighting(scope, key))
            .await
    }

    async fn check_writable(&self) -> Result<(), StoreError> {
        self.call(Op::CheckWritable, self.inner.check_writable())
            .await
    }
}

#[async_trait]
impl<I: Interceptor> ClusterStore for Intercepted<I> {
    fn changes(&self) -> Option<super::ChangeFeed> {
        self.inner.changes()
    }

    fn keeps_events(&self) -> bool {
        self.inner.keeps_events()
    }

    async fn events_after(
        &self,
        after: u64,
        limit: usize,
    ) -> Result<Vec<super::StoredEvent>, StoreError> {
        self.call(Op::EventsAfter, self.inner.events_after(after, limit))
            .await
    }

    async fn event_head(&self) -> Result<u64, StoreError> {
        self.call(Op::EventHead, self.inner.event_head()).await
    }

    fn lead(&self, name: &str, lease: Duration) -> super::Leader {
        self.inner.lead(name, lease)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::MemoryStore;
    use std::sync::atomic::{AtomicBool, Ordering};

    struct RefuseWrites(AtomicBool);

    #[async_trait]
    impl Interceptor for RefuseWrites {
        async fn before(&self, op: Op) -> Result<(), StoreError> {
            if op.is_write() && self.0.load(Ordering::SeqCst) {
                return Err(StoreError::Unavailable("refused".into()));
            }
            Ok(())
        }
    }

    #[tokio::test]
    async fn a_refused_call_never_reaches_the_store() {
        let store = Intercepted::new(
            Arc::new(MemoryStore::new()),
            RefuseWrites(AtomicBool::new(true)),
        );
        assert!(store.set_value("k", Some("v".into())).await.is_err());
        assert_eq!(store.get_value("k").await.unwrap(), None, "reads pass");
        store.hooks.0.store(false, Ordering::SeqCst);
        store.set_value("k", Some("v".into())).await.unwrap();
        assert_eq!(store.get_value("k").await.unwrap().as_deref(), Some("v"));
    }
}
