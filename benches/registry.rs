//! Micro-benchmarks of the registry itself, without HTTP: create + resolve on one thread,
//! and resolution with many waiters per interaction. In-memory store.
//!
//! `cargo bench --bench registry`

use std::sync::Arc;
use std::time::Duration;

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use imrelay::interaction::{Answer, NewInteraction, Registry, RegistryConfig, Responder, Via};
use imrelay::store::MemoryStore;
use serde_json::{Map, Value, json};

fn input() -> Map<String, Value> {
    json!({"command": "cargo test --package imrelay -- --nocapture", "description": "Run the tests"})
        .as_object()
        .cloned()
        .unwrap_or_default()
}

/// A registry on a single-threaded runtime: everything runs on one core.
fn setup() -> (tokio::runtime::Runtime, Registry) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let registry = Registry::new(Arc::new(MemoryStore::new()), RegistryConfig::default());
    (rt, registry)
}

fn create_resolve(c: &mut Criterion) {
    let (rt, registry) = setup();
    let input = input();
    let mut group = c.benchmark_group("registry");
    group.throughput(Throughput::Elements(1));
    group.bench_function("create+resolve", |b| {
        b.to_async(&rt).iter(|| {
            let registry = registry.clone();
            let input = input.clone();
            async move {
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
            }
        })
    });
    group.finish();
}

fn waiters(c: &mut Criterion) {
    let (rt, registry) = setup();
    let input = input();
    let mut group = c.benchmark_group("registry/waiters");
    for n in [1usize, 16, 256] {
        group.throughput(Throughput::Elements(1));
        group.bench_with_input(BenchmarkId::from_parameter(n), &n, |b, &n| {
            b.to_async(&rt).iter(|| {
                let registry = registry.clone();
                let input = input.clone();
                async move {
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
                }
            })
        });
    }
    group.finish();
}

criterion_group!(benches, create_resolve, waiters);
criterion_main!(benches);
