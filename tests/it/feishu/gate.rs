//! A store whose answer writes can be held at a gate, to cut a click's handler off half-way
//! (the platform giving up, a dropped connection) and let it go on afterwards.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use imrelay::interaction::{Interaction, InteractionId};
use imrelay::store::{
    AuditEntry, AuditQuery, AuditRecord, ChannelMessage, ClaimedJob, CreateOutcome, Effects,
    JobUpdate, ListQuery, MemoryStore, OutboxJob, Page, ResolveOutcome, Store, StoreError,
};
use jiff::Timestamp;
use serde_json::Value;
use tokio::sync::watch;

/// The in-memory store, with `resolve` held while the gate is closed.
pub struct GatedStore {
    inner: MemoryStore,
    closed: watch::Sender<bool>,
    waiting: AtomicUsize,
}

impl GatedStore {
    pub fn new() -> Arc<Self> {
        Arc::new(Self {
            inner: MemoryStore::new(),
            closed: watch::Sender::new(false),
            waiting: AtomicUsize::new(0),
        })
    }

    pub fn close(&self) {
        self.closed.send_replace(true);
    }

    pub fn open(&self) {
        self.closed.send_replace(false);
    }

    /// Writes that reached the closed gate so far.
    pub fn waiting(&self) -> usize {
        self.waiting.load(Ordering::SeqCst)
    }
}

#[async_trait]
impl Store for GatedStore {
    async fn create(&self, i: Arc<Interaction>, e: Effects) -> Result<CreateOutcome, StoreError> {
        self.inner.create(i, e).await
    }
    async fn resolve(&self, i: Arc<Interaction>, e: Effects) -> Result<ResolveOutcome, StoreError> {
        if *self.closed.borrow() {
            self.waiting.fetch_add(1, Ordering::SeqCst);
            let mut gate = self.closed.subscribe();
            let _ = gate.wait_for(|closed| !closed).await;
        }
        self.inner.resolve(i, e).await
    }
    async fn append_audit(&self, r: Vec<AuditRecord>) -> Result<(), StoreError> {
        self.inner.append_audit(r).await
    }
    async fn audit(&self, q: &AuditQuery) -> Result<Vec<AuditEntry>, StoreError> {
        self.inner.audit(q).await
    }
    async fn get_value(&self, k: &str) -> Result<Option<String>, StoreError> {
        self.inner.get_value(k).await
    }
    async fn set_value(&self, k: &str, v: Option<String>) -> Result<(), StoreError> {
        self.inner.set_value(k, v).await
    }
    async fn get(&self, id: &InteractionId) -> Result<Option<Arc<Interaction>>, StoreError> {
        self.inner.get(id).await
    }
    async fn list(&self, q: &ListQuery) -> Result<Page, StoreError> {
        self.inner.list(q).await
    }
    async fn pending(&self) -> Result<Vec<Arc<Interaction>>, StoreError> {
        self.inner.pending().await
    }
    async fn prune(&self, b: Timestamp) -> Result<u64, StoreError> {
        self.inner.prune(b).await
    }
    async fn record_message(&self, m: ChannelMessage) -> Result<(), StoreError> {
        self.inner.record_message(m).await
    }
    async fn messages(
        &self,
        c: &str,
        id: &InteractionId,
    ) -> Result<Vec<ChannelMessage>, StoreError> {
        self.inner.messages(c, id).await
    }
    async fn message(
        &self,
        c: &str,
        a: &str,
        r: &str,
    ) -> Result<Option<ChannelMessage>, StoreError> {
        self.inner.message(c, a, r).await
    }
    async fn set_message_state(
        &self,
        c: &str,
        a: &str,
        r: &str,
        s: Option<Value>,
    ) -> Result<bool, StoreError> {
        self.inner.set_message_state(c, a, r, s).await
    }
    async fn enqueue(&self, j: Vec<OutboxJob>) -> Result<(), StoreError> {
        self.inner.enqueue(j).await
    }
    async fn claim_jobs(
        &self,
        n: Timestamp,
        l: usize,
        d: Duration,
    ) -> Result<Vec<ClaimedJob>, StoreError> {
        self.inner.claim_jobs(n, l, d).await
    }
    async fn finish_job(&self, id: i64, u: JobUpdate) -> Result<(), StoreError> {
        self.inner.finish_job(id, u).await
    }
    async fn next_job_at(&self) -> Result<Option<Timestamp>, StoreError> {
        self.inner.next_job_at().await
    }
    async fn job_backlog(&self) -> Result<Vec<(String, u64)>, StoreError> {
        self.inner.job_backlog().await
    }
    async fn secret(&self, n: &str) -> Result<Vec<u8>, StoreError> {
        self.inner.secret(n).await
    }
    async fn first_sighting(&self, s: &str, k: &str, e: Timestamp) -> Result<bool, StoreError> {
        self.inner.first_sighting(s, k, e).await
    }
}
