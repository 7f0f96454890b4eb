//! The registry's unit tests.

use super::*;
use crate::interaction::{Outcome, Via};
use crate::store::MemoryStore;
use crate::store::intercept::{Intercepted, Interceptor, Op};
use serde_json::json;
use serde_json::{Map, Value};
use std::sync::atomic::Ordering;
use tokio_util::sync::CancellationToken;

fn obj(v: Value) -> Map<String, Value> {
    v.as_object().cloned().unwrap_or_default()
}

fn registry() -> Registry {
    Registry::new(Arc::new(MemoryStore::new()), RegistryConfig::default())
}

fn bash(id: &str) -> NewInteraction {
    NewInteraction {
        id: Some(id.into()),
        ..NewInteraction::new("Bash", obj(json!({"command": "ls"})))
    }
}

/// Holds one `create` after it committed, so a test can act in the gap before the
/// registry tracks the new interaction.
#[derive(Default)]
struct CreateGate {
    armed: std::sync::atomic::AtomicBool,
    committed: Notify,
    release: Notify,
}

#[async_trait::async_trait]
impl Interceptor for CreateGate {
    async fn after(&self, op: Op) {
        if op == Op::Create && self.armed.swap(false, Ordering::SeqCst) {
            self.committed.notify_one();
            self.release.notified().await;
        }
    }
}

#[tokio::test(start_paused = true)]
async fn an_answer_between_commit_and_tracking_is_not_lost() {
    let store = Arc::new(Intercepted::new(
        Arc::new(MemoryStore::new()),
        CreateGate::default(),
    ));
    let reg = Registry::new(store.clone(), RegistryConfig::default());
    let shutdown = CancellationToken::new();
    reg.spawn_background(shutdown.clone());
    let (_, mut events) = reg.events().subscribe();
    store.hooks.armed.store(true, Ordering::SeqCst);
    let creating = tokio::spawn({
        let reg = reg.clone();
        async move { reg.create(bash("gap")).await }
    });
    // The interaction is in the store, but `create` has not tracked it yet.
    store.hooks.committed.notified().await;
    let id = InteractionId::parse("gap").unwrap();
    reg.respond(&id, Answer::allow(), Responder::new("quick", Via::api()))
        .await
        .unwrap();
    store.hooks.release.notify_one();
    let created = creating.await.unwrap().unwrap();
    assert!(created.created);
    assert_eq!(
        created.interaction.resolution.as_ref().unwrap().outcome,
        Outcome::Allowed
    );

    // Waiting finds the answer (with paused time, a stuck wait would run to its end).
    let waited = reg.wait(&id, Duration::from_secs(3600)).await.unwrap();
    assert_eq!(
        waited.unwrap().resolution.as_ref().unwrap().outcome,
        Outcome::Allowed
    );
    assert!(!reg.get(&id).await.unwrap().unwrap().is_pending());
    assert_eq!(reg.pending_count(), 0);
    assert_eq!(reg.scheduled_deadlines(), 0);

    // Past the deadline: still one resolution, announced once, never after a `created`.
    tokio::time::sleep(Duration::from_secs(600)).await;
    let mut kinds = Vec::new();
    while let Some(crate::interaction::Next::Event(e)) = events.try_next() {
        kinds.push(e.kind);
    }
    assert_eq!(kinds, vec![EventKind::Resolved]);
    shutdown.cancel();
}

#[tokio::test(start_paused = true)]
async fn enormous_durations_saturate_instead_of_failing_open() {
    let config = RegistryConfig {
        approval_timeout: Duration::MAX,
        max_timeout: Duration::MAX,
        retention: Duration::MAX,
        ..RegistryConfig::default()
    };
    let reg = Registry::new(Arc::new(MemoryStore::new()), config);
    let answered = reg
        .create(bash("old"))
        .await
        .unwrap()
        .interaction
        .id
        .clone();
    reg.respond(&answered, Answer::allow(), Responder::anonymous(Via::api()))
        .await
        .unwrap();
    let open = reg.create(bash("open")).await.unwrap().interaction;
    assert!(open.deadline > now());
    let shutdown = CancellationToken::new();
    reg.spawn_background(shutdown.clone());
    tokio::time::sleep(Duration::from_secs(3600)).await;
    // Not expired at once, and the pruner kept the answered one.
    assert!(reg.get(&open.id).await.unwrap().unwrap().is_pending());
    assert!(reg.store().get(&answered).await.unwrap().is_some());
    shutdown.cancel();
}

#[tokio::test]
async fn first_answer_wins_under_concurrency() {
    let reg = registry();
    let c = reg.create(bash("t1")).await.unwrap();
    let id = c.interaction.id.clone();
    let mut tasks = Vec::new();
    for n in 0..64 {
        let reg = reg.clone();
        let id = id.clone();
        tasks.push(tokio::spawn(async move {
            let answer = if n % 2 == 0 {
                Answer::allow()
            } else {
                Answer::deny(None)
            };
            reg.respond(&id, answer, Responder::new(format!("p{n}"), Via::api()))
                .await
        }));
    }
    let mut wins = Vec::new();
    let mut losers = Vec::new();
    for t in tasks {
        match t.await.unwrap() {
            Ok(i) => wins.push(i),
            Err(RegistryError::AlreadyResolved(i)) => losers.push(i),
            Err(e) => panic!("unexpected error {e}"),
        }
    }
    assert_eq!(wins.len(), 1);
    assert_eq!(losers.len(), 63);
    for l in losers {
        assert_eq!(l.resolution, wins[0].resolution);
    }
}

#[tokio::test]
async fn reattach_and_conflict() {
    let reg = registry();
    assert!(reg.create(bash("same")).await.unwrap().created);
    assert!(!reg.create(bash("same")).await.unwrap().created);
    let other = NewInteraction {
        id: Some("same".into()),
        ..NewInteraction::new("Bash", obj(json!({"command": "rm"})))
    };
    assert!(matches!(
        reg.create(other).await,
        Err(RegistryError::Conflict(_))
    ));
}

#[tokio::test(start_paused = true)]
async fn expiry_denies_with_a_clear_message() {
    let reg = registry();
    let shutdown = CancellationToken::new();
    reg.spawn_background(shutdown.clone());
    let mut new = bash("exp");
    new.timeout_secs = Some(5);
    let id = reg.create(new).await.unwrap().interaction.id.clone();
    let waited = reg.wait(&id, Duration::from_secs(60)).await.unwrap();
    let resolved = waited.expect("expired before the wait ended");
    let r = resolved.resolution.as_ref().unwrap();
    assert_eq!(r.outcome, Outcome::Expired);
    assert_eq!(r.message(), Some("No response within 5 seconds"));
    assert_eq!(reg.pending_count(), 0);
    shutdown.cancel();
}

#[tokio::test(start_paused = true)]
async fn expiry_never_overrides_an_earlier_answer() {
    let reg = registry();
    let shutdown = CancellationToken::new();
    reg.spawn_background(shutdown.clone());
    let mut new = bash("ans");
    new.timeout_secs = Some(5);
    let id = reg.create(new).await.unwrap().interaction.id.clone();
    reg.respond(&id, Answer::allow(), Responder::new("a", Via::desktop()))
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_secs(10)).await;
    let after = reg.get(&id).await.unwrap().unwrap();
    assert_eq!(after.resolution.as_ref().unwrap().outcome, Outcome::Allowed);
    assert!(matches!(
        reg.expire(&id)
            .await
            .map(|i| i.resolution.clone().unwrap().outcome),
        Ok(Outcome::Allowed)
    ));
    shutdown.cancel();
}

#[tokio::test]
async fn an_expiry_racing_an_answer_loses_in_the_store() {
    let dir = tempfile::tempdir().unwrap();
    let store = crate::store::SqliteStore::open(
        dir.path().join("race.db"),
        crate::store::Synchronous::Normal,
    )
    .unwrap();
    let reg = Registry::new(Arc::new(store), RegistryConfig::default());
    let mut new = bash("race");
    new.timeout_secs = Some(1);
    let id = reg.create(new).await.unwrap().interaction.id.clone();
    // The deadline timer read the interaction while it was still pending ...
    let seen_by_timer = reg.get(&id).await.unwrap().unwrap();
    let (_, mut events) = reg.events().subscribe();
    // ... an answer arrives right at the deadline and wins ...
    reg.respond(&id, Answer::allow(), Responder::new("a", Via::api()))
        .await
        .unwrap();
    // ... and the expiry, built from that stale read, reaches the store second.
    let at = now();
    match reg
        .settle(seen_by_timer, None, |i| Ok(answer::expired(i, at)))
        .await
    {
        Err(RegistryError::AlreadyResolved(winner)) => assert_eq!(
            winner.resolution.as_ref().unwrap().outcome,
            Outcome::Allowed
        ),
        other => panic!("the expiry was not refused: {other:?}"),
    }
    let stored = reg.store().get(&id).await.unwrap().unwrap();
    assert_eq!(
        stored.resolution.as_ref().unwrap().outcome,
        Outcome::Allowed
    );
    // One resolution, announced once.
    let mut resolved = 0;
    while let Some(crate::interaction::Next::Event(e)) = events.try_next() {
        assert_eq!(e.kind, EventKind::Resolved);
        resolved += 1;
    }
    assert_eq!(resolved, 1);
}

#[tokio::test]
async fn wait_returns_pending_on_timeout_and_not_found_for_unknown() {
    let reg = registry();
    let id = reg.create(bash("w")).await.unwrap().interaction.id.clone();
    assert!(
        reg.wait(&id, Duration::from_millis(10))
            .await
            .unwrap()
            .is_none()
    );
    let unknown = InteractionId::parse("nope").unwrap();
    assert!(matches!(
        reg.wait(&unknown, Duration::from_millis(10)).await,
        Err(RegistryError::NotFound(_))
    ));
}

/// Counts long polls by outcome.
#[derive(Default)]
struct LongPolls(Mutex<Vec<LongPoll>>);

impl Lifecycle for LongPolls {
    fn long_poll(&self, outcome: LongPoll) {
        self.0.locked().push(outcome);
    }
}

#[tokio::test(flavor = "current_thread")]
async fn long_polls_report_how_they_ended() {
    let reg = registry();
    let seen = Arc::new(LongPolls::default());
    reg.add_hook(seen.clone());
    let id = reg.create(bash("lp")).await.unwrap().interaction.id.clone();
    assert!(
        reg.wait(&id, Duration::from_millis(1))
            .await
            .unwrap()
            .is_none()
    );
    let waiting = tokio::spawn({
        let (reg, id) = (reg.clone(), id.clone());
        async move { reg.wait(&id, Duration::from_secs(30)).await }
    });
    // One thread: the waiter runs until it parks before the answer below.
    tokio::task::yield_now().await;
    reg.respond(&id, Answer::allow(), Responder::new("a", Via::api()))
        .await
        .unwrap();
    assert!(waiting.await.unwrap().unwrap().is_some());
    assert!(
        reg.wait(&id, Duration::from_secs(30))
            .await
            .unwrap()
            .is_some()
    );
    assert_eq!(
        *seen.0.locked(),
        [LongPoll::TimedOut, LongPoll::Woken, LongPoll::Ready]
    );
}

#[tokio::test]
async fn many_waiters_all_wake() {
    let reg = registry();
    let id = reg
        .create(bash("many"))
        .await
        .unwrap()
        .interaction
        .id
        .clone();
    let waiters: Vec<_> = (0..100)
        .map(|_| {
            let reg = reg.clone();
            let id = id.clone();
            tokio::spawn(async move { reg.wait(&id, Duration::from_secs(30)).await })
        })
        .collect();
    tokio::task::yield_now().await;
    reg.cancel(&id, None, None).await.unwrap();
    for w in waiters {
        let got = w.await.unwrap().unwrap().unwrap();
        assert_eq!(got.resolution.as_ref().unwrap().outcome, Outcome::Cancelled);
    }
}

#[tokio::test]
async fn resolved_interactions_leave_the_deadline_queue() {
    let reg = registry();
    for n in 0..50 {
        let id = reg
            .create(bash(&format!("dq{n}")))
            .await
            .unwrap()
            .interaction
            .id
            .clone();
        if n % 2 == 0 {
            reg.respond(&id, Answer::allow(), Responder::anonymous(Via::api()))
                .await
                .unwrap();
        }
    }
    assert_eq!(reg.pending_count(), 25);
    assert_eq!(reg.scheduled_deadlines(), 25);
}

#[tokio::test]
async fn timeouts_are_clamped() {
    let reg = registry();
    let mut new = bash("clamp");
    new.timeout_secs = Some(1_000_000);
    let i = reg.create(new).await.unwrap().interaction;
    assert_eq!(i.timeout_secs(), 3600);
    let mut zero = bash("zero");
    zero.timeout_secs = Some(0);
    assert!(matches!(
        reg.create(zero).await,
        Err(RegistryError::Invalid(_))
    ));
    let q = NewInteraction::new(
        "AskUserQuestion",
        obj(
            json!({"questions":[{"question":"q","header":"h","options":[{"label":"a"},{"label":"b"}]}]}),
        ),
    );
    assert_eq!(reg.create(q).await.unwrap().interaction.timeout_secs(), 600);
}

#[tokio::test]
async fn invalid_questions_are_refused_with_the_field() {
    let reg = registry();
    let q = NewInteraction::new(
        "AskUserQuestion",
        obj(json!({"questions":[{"question":"q","header":"h","options":[{"label":"a"}]}]})),
    );
    match reg.create(q).await {
        Err(RegistryError::Invalid(e)) => {
            assert_eq!(
                e.to_string(),
                "questions[0].options: expected 2 to 4 options, got 1"
            )
        }
        other => panic!("unexpected {other:?}"),
    }
    assert_eq!(reg.pending_count(), 0);
}

#[tokio::test]
async fn a_big_input_is_kept_by_the_store_alone_and_read_whole_when_needed() {
    let dir = tempfile::tempdir().unwrap();
    let store = crate::store::SqliteStore::open(
        dir.path().join("big.db"),
        crate::store::Synchronous::Normal,
    )
    .unwrap();
    let reg = Registry::new(Arc::new(store), RegistryConfig::default());
    let command = "x".repeat(900_000);
    let big = NewInteraction {
        id: Some("big".into()),
        ..NewInteraction::new("Bash", obj(json!({"command": command})))
    };
    let id = reg
        .create(big.clone())
        .await
        .unwrap()
        .interaction
        .id
        .clone();
    let small = reg
        .create(bash("small"))
        .await
        .unwrap()
        .interaction
        .id
        .clone();
    // The small one is held whole; the big one by its id, deadline and waiters alone.
    assert_eq!(reg.holds_whole(&small), Some(true));
    assert_eq!(reg.holds_whole(&id), Some(false));
    // Its whole input is read from the store when asked for, and it re-attaches as before.
    let got = reg.get(&id).await.unwrap().unwrap();
    assert_eq!(got.input.map()["command"], command.as_str());
    assert!(!reg.create(big.clone()).await.unwrap().created);
    let mut other = big;
    other.input = obj(json!({"command": "ls"}));
    other.input_text = None;
    assert!(matches!(
        reg.create(other).await,
        Err(RegistryError::Conflict(_))
    ));
    // A waiter gets the whole answer: an allow hands back the input exactly.
    let waiter = tokio::spawn({
        let (reg, id) = (reg.clone(), id.clone());
        async move { reg.wait(&id, Duration::from_secs(30)).await }
    });
    tokio::task::yield_now().await;
    reg.respond(&id, Answer::allow(), Responder::new("a", Via::api()))
        .await
        .unwrap();
    let resolved = waiter.await.unwrap().unwrap().expect("resolved");
    match resolved.resolution.as_ref().unwrap().permission() {
        Some(crate::interaction::PermissionResult::Allow { updated_input, .. }) => {
            assert_eq!(updated_input.as_json().len(), got.input.as_json().len());
            assert_eq!(updated_input.map()["command"], command.as_str());
        }
        other => panic!("not an allow: {other:?}"),
    }
    assert_eq!(reg.holds_whole(&id), None);
    assert!(reg.pending_bytes() > 0, "the small one is still counted");
}

/// Start-up and a re-check read the pending interactions a page at a time (about
/// [`PENDING_PAGE_BYTES`] of them), never all at once: twelve of 900 KB on SQLite take two
/// pages, and each is then held by its id alone.
#[tokio::test]
async fn recovery_and_a_recheck_read_big_pending_interactions_a_page_at_a_time() {
    #[derive(Default)]
    struct Reads {
        whole: std::sync::atomic::AtomicUsize,
        pages: std::sync::atomic::AtomicUsize,
    }

    #[async_trait::async_trait]
    impl Interceptor for Reads {
        async fn before(&self, op: Op) -> Result<(), StoreError> {
            match op {
                Op::Pending => self.whole.fetch_add(1, Ordering::SeqCst),
                Op::List => self.pages.fetch_add(1, Ordering::SeqCst),
                _ => 0,
            };
            Ok(())
        }
    }

    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("big.db");
    let open = || crate::store::SqliteStore::open(&path, crate::store::Synchronous::Normal);
    let mut ids = Vec::new();
    {
        let reg = Registry::new(Arc::new(open().unwrap()), RegistryConfig::default());
        for n in 0..12 {
            let new = NewInteraction {
                id: Some(format!("big-{n}")),
                ..NewInteraction::new(
                    "Bash",
                    obj(json!({"command": format!("{n} {}", "x".repeat(900_000))})),
                )
            };
            ids.push(reg.create(new).await.unwrap().interaction.id.clone());
        }
    }
    let store = Arc::new(Intercepted::new(
        Arc::new(open().unwrap()),
        Reads::default(),
    ));
    let reg = Registry::new(store.clone(), RegistryConfig::default());
    assert_eq!(reg.recover().await.unwrap(), (12, 0));
    let reads = |r: &Reads| {
        (
            r.whole.swap(0, Ordering::SeqCst),
            r.pages.swap(0, Ordering::SeqCst),
        )
    };
    assert_eq!(
        reads(&store.hooks),
        (0, 2),
        "(whole reads, pages) at start-up"
    );
    for id in &ids {
        assert_eq!(reg.holds_whole(id), Some(false), "{id}");
    }
    reg.resync().await.unwrap();
    assert_eq!(
        reads(&store.hooks),
        (0, 2),
        "(whole reads, pages) in a re-check"
    );
    assert_eq!(reg.pending_count(), 12);
}
