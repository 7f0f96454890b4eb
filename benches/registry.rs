//! Micro-benchmarks of the registry itself, without HTTP: create + resolve on one thread,
//! and resolution with many waiters per interaction.
//!
//! Three stores under the registry: none at all (a store that records nothing: the cost of
//! the registry's own work, events and audit records included), and the in-memory store with
//! the audit trail on and off (it keeps every interaction and audit entry, so its figures
//! include a growing heap).
//!
//! No tracing subscriber is installed, so the registry's log lines cost next to nothing here,
//! unlike in the server (which writes a line per creation and per resolution by default).
//!
//! `cargo bench --bench registry`

use std::sync::Arc;
use std::time::Duration;

use criterion::{BatchSize, BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use imrelay::interaction::{Answer, NewInteraction, Registry, RegistryConfig, Responder, Via};
use imrelay::interaction::{Interaction, InteractionId};
use imrelay::store::prelude::*;
use imrelay::store::{
    AuditEntry, AuditQuery, AuditRecord, ChannelMessage, ClaimQuota, ClaimedJob, CreateOutcome,
    Effects, EscalateOutcome, JobUpdate, ListQuery, MemoryStore, OutboxJob, Page, ResolveOutcome,
    Store, StoreError,
};
use jiff::Timestamp;
use serde_json::{Map, Value, json};

/// A store that accepts every write and keeps nothing: what is left is the registry.
struct NullStore;

#[async_trait::async_trait]
impl InteractionStore for NullStore {
    async fn create(&self, _: Arc<Interaction>, _: Effects) -> Result<CreateOutcome, StoreError> {
        Ok(CreateOutcome::Created)
    }

    async fn resolve(&self, _: Arc<Interaction>, _: Effects) -> Result<ResolveOutcome, StoreError> {
        Ok(ResolveOutcome::Resolved)
    }

    async fn vote(
        &self,
        b: imrelay::interaction::quorum::Ballot,
    ) -> Result<imrelay::interaction::quorum::VoteOutcome, StoreError> {
        Ok(imrelay::interaction::quorum::VoteOutcome::Decided(
            b.decided,
        ))
    }

    async fn escalate(
        &self,
        _: Arc<Interaction>,
        _: Effects,
    ) -> Result<EscalateOutcome, StoreError> {
        Ok(EscalateOutcome::Escalated)
    }

    async fn get(&self, _: &InteractionId) -> Result<Option<Arc<Interaction>>, StoreError> {
        Ok(None)
    }

    async fn list(&self, _: &ListQuery) -> Result<Page, StoreError> {
        Ok(Page {
            interactions: Vec::new(),
            next: None,
        })
    }

    async fn pending(&self) -> Result<Vec<Arc<Interaction>>, StoreError> {
        Ok(Vec::new())
    }

    async fn prune(&self, _: Timestamp) -> Result<u64, StoreError> {
        Ok(0)
    }
}

#[async_trait::async_trait]
impl ChannelStore for NullStore {
    async fn record_message(&self, _: ChannelMessage) -> Result<(), StoreError> {
        Ok(())
    }

    async fn messages(
        &self,
        _: &str,
        _: &InteractionId,
    ) -> Result<Vec<ChannelMessage>, StoreError> {
        Ok(Vec::new())
    }

    async fn message(
        &self,
        _: &str,
        _: &str,
        _: &str,
    ) -> Result<Option<ChannelMessage>, StoreError> {
        Ok(None)
    }

    async fn set_message_state(
        &self,
        _: &str,
        _: &str,
        _: &str,
        _: Option<Value>,
    ) -> Result<bool, StoreError> {
        Ok(false)
    }
}

#[async_trait::async_trait]
impl OutboxStore for NullStore {
    async fn enqueue(&self, _: Vec<OutboxJob>) -> Result<(), StoreError> {
        Ok(())
    }

    async fn claim_jobs(
        &self,
        _: Timestamp,
        _: &ClaimQuota,
        _: Duration,
    ) -> Result<Vec<ClaimedJob>, StoreError> {
        Ok(Vec::new())
    }

    async fn finish_job(
        &self,
        _: &ClaimedJob,
        _: JobUpdate,
        _: Vec<AuditRecord>,
    ) -> Result<bool, StoreError> {
        Ok(false)
    }

    async fn next_job_at(&self, _: &ClaimQuota) -> Result<Option<Timestamp>, StoreError> {
        Ok(None)
    }

    async fn job_backlog(&self) -> Result<Vec<(String, u64)>, StoreError> {
        Ok(Vec::new())
    }
}

#[async_trait::async_trait]
impl AuditStore for NullStore {
    async fn append_audit(&self, _: Vec<AuditRecord>) -> Result<(), StoreError> {
        Ok(())
    }

    async fn audit(&self, _: &AuditQuery) -> Result<Vec<AuditEntry>, StoreError> {
        Ok(Vec::new())
    }
}

#[async_trait::async_trait]
impl KvStore for NullStore {
    async fn get_value(&self, _: &str) -> Result<Option<String>, StoreError> {
        Ok(None)
    }

    async fn set_value(&self, _: &str, _: Option<String>) -> Result<(), StoreError> {
        Ok(())
    }

    async fn swap_value(
        &self,
        _: &str,
        _: Option<&str>,
        _: Option<String>,
    ) -> Result<bool, StoreError> {
        Ok(true)
    }

    async fn values_under(&self, _: &str, _: usize) -> Result<Vec<(String, String)>, StoreError> {
        Ok(Vec::new())
    }

    async fn secret(&self, _: &str) -> Result<Vec<u8>, StoreError> {
        Ok(vec![0; 32])
    }

    async fn first_sighting(&self, _: &str, _: &str, _: Timestamp) -> Result<bool, StoreError> {
        Ok(true)
    }

    async fn forget_sighting(&self, _: &str, _: &str) -> Result<(), StoreError> {
        Ok(())
    }
}

impl ClusterStore for NullStore {}

#[async_trait::async_trait]
impl GrantStore for NullStore {
    async fn add_grant(
        &self,
        _: imrelay::interaction::policy::Grant,
        _: Vec<AuditRecord>,
    ) -> Result<(), StoreError> {
        Ok(())
    }

    async fn revoke_grant(
        &self,
        _: &str,
        _: Timestamp,
        _: Vec<AuditRecord>,
    ) -> Result<Option<imrelay::interaction::policy::Grant>, StoreError> {
        Ok(None)
    }

    async fn live_grants(
        &self,
        _: Timestamp,
    ) -> Result<Vec<imrelay::interaction::policy::Grant>, StoreError> {
        Ok(Vec::new())
    }
}

#[async_trait::async_trait]
impl imrelay::interaction::ports::SessionStore for NullStore {
    async fn change_session(
        &self,
        _: &str,
        _: &str,
        change: imrelay::interaction::ports::SessionChange,
        _: Vec<AuditRecord>,
        _: usize,
    ) -> Result<Option<imrelay::interaction::sessions::Session>, StoreError> {
        Ok(change(None))
    }

    async fn session(
        &self,
        _: &str,
        _: &str,
    ) -> Result<Option<imrelay::interaction::sessions::Session>, StoreError> {
        Ok(None)
    }

    async fn sessions(
        &self,
        _: usize,
    ) -> Result<Vec<imrelay::interaction::sessions::Session>, StoreError> {
        Ok(Vec::new())
    }
}

/// The allocator the imrelay binary uses.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn input() -> Map<String, Value> {
    json!({"command": "cargo test --package imrelay -- --nocapture", "description": "Run the tests"})
        .as_object()
        .cloned()
        .unwrap_or_default()
}

/// A registry on a single-threaded runtime: everything runs on one core.
fn setup(audit: bool) -> (tokio::runtime::Runtime, Registry) {
    setup_on(Arc::new(MemoryStore::new()), audit)
}

fn setup_on(store: Arc<dyn Store>, audit: bool) -> (tokio::runtime::Runtime, Registry) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let config = RegistryConfig {
        audit,
        ..RegistryConfig::default()
    };
    let registry = Registry::new(store, config);
    (rt, registry)
}

fn create_resolve(c: &mut Criterion) {
    let input = input();
    let mut group = c.benchmark_group("registry");
    group.throughput(Throughput::Elements(1));
    for (name, store, audit) in [
        (
            "create+resolve, no store",
            Arc::new(NullStore) as Arc<dyn Store>,
            true,
        ),
        ("create+resolve", Arc::new(MemoryStore::new()), true),
        (
            "create+resolve, audit off",
            Arc::new(MemoryStore::new()),
            false,
        ),
    ] {
        let (rt, registry) = setup_on(store, audit);
        group.bench_function(name, |b| {
            // The copies of the registry handle and the input are made outside the timing.
            b.to_async(&rt).iter_batched(
                || (registry.clone(), input.clone()),
                |(registry, input)| async move {
                    let created = registry
                        .create(NewInteraction::new("Bash", input))
                        .await
                        .expect("created");
                    registry
                        .respond(
                            &created.interaction.id,
                            Answer::allow(),
                            Responder::new("bench", Via::api()),
                        )
                        .await
                        .expect("resolved")
                },
                BatchSize::SmallInput,
            )
        });
    }
    group.finish();
}

fn waiters(c: &mut Criterion) {
    let (rt, registry) = setup(true);
    let input = input();
    let mut group = c.benchmark_group("registry/waiters");
    for n in [1usize, 16, 256] {
        group.throughput(Throughput::Elements(1));
        group.bench_with_input(BenchmarkId::from_parameter(n), &n, |b, &n| {
            b.to_async(&rt).iter_batched(
                || (registry.clone(), input.clone()),
                |(registry, input)| async move {
                    let created = registry
                        .create(NewInteraction::new("Bash", input))
                        .await
                        .expect("created");
                    let id = created.interaction.id.clone();
                    let handles: Vec<_> = (0..n)
                        .map(|_| {
                            let registry = registry.clone();
                            let id = id.clone();
                            tokio::spawn(async move {
                                registry.wait(&id, Duration::from_secs(60)).await
                            })
                        })
                        .collect();
                    // Let every waiter park before the answer arrives.
                    tokio::task::yield_now().await;
                    registry
                        .respond(&id, Answer::allow(), Responder::new("bench", Via::api()))
                        .await
                        .expect("resolved");
                    for h in handles {
                        let woke = h.await.expect("joined").expect("waited");
                        assert!(woke.is_some());
                    }
                },
                BatchSize::SmallInput,
            )
        });
    }
    group.finish();
}

criterion_group!(benches, create_resolve, waiters);
criterion_main!(benches);
