//! The PostgreSQL store against a real server: the store contract, migrations under
//! replicas starting together, several stores (as replicas) on one schema, a bounded pool,
//! the listener, and the whole application on it. Each test works in a schema of its own,
//! dropped afterwards.

use std::collections::HashSet;
use std::future::Future;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use futures_util::StreamExt;
use imrelay::audit::{self, Action, AuditRecord};
use imrelay::config::Backend;
use imrelay::interaction::{Interaction, InteractionId};
use imrelay::store::postgres::{Notification, SCHEMA_VERSION};
use imrelay::store::prelude::*;
use imrelay::store::{
    AuditQuery, ClaimQuota, CreateOutcome, Effects, PostgresOptions, PostgresStore, ResolveOutcome,
    Store, StoreError,
};
use jiff::Timestamp;
use libtest_mimic::Trial;
use reqwest::StatusCode;
use serde_json::json;

use crate::contract::{contract, job};
use crate::support::*;
use crate::{Need, trial};

const DEFAULT_URL: &str = "postgres://postgres@127.0.0.1:5432/test";

/// The store's whole audit trail (up to 10,000 entries), oldest first.
async fn audit_trail(store: &(impl AuditStore + ?Sized)) -> Vec<imrelay::audit::AuditEntry> {
    store
        .audit(&AuditQuery {
            after_seq: 0,
            since: None,
            limit: 10_000,
        })
        .await
        .unwrap()
}

pub(crate) fn trials() -> Vec<Trial> {
    vec![
        trial("postgres::store_keeps_the_contract", server, || {
            in_schema(|schema| async move {
                contract(Arc::new(open(&schema).await)).await;
            })
        }),
        trial("postgres::replicas_agree_on_sessions", server, || {
            in_schema(|schema| async move {
                let a: Arc<dyn Store> = Arc::new(open(&schema).await);
                let b: Arc<dyn Store> = Arc::new(open(&schema).await);
                crate::contract::sessions(vec![a, b]).await;
            })
        }),
        trial(
            "postgres::migrations_apply_once_when_replicas_start_together",
            server,
            || in_schema(migrations_apply_once_when_replicas_start_together),
        ),
        trial(
            "postgres::an_older_imrelay_refuses_a_newer_schema",
            server,
            || in_schema(an_older_imrelay_refuses_a_newer_schema),
        ),
        trial(
            "postgres::a_user_without_create_on_the_database_starts_in_a_schema_made_for_it",
            server,
            || in_schema(a_user_without_create_on_the_database_starts_in_a_schema_made_for_it),
        ),
        trial(
            "postgres::replicas_write_one_audit_chain_and_each_resolution_has_one_winner",
            server,
            || in_schema(replicas_write_one_audit_chain_and_each_resolution_has_one_winner),
        ),
        trial(
            "postgres::a_change_holds_the_shared_locks_for_two_round_trips",
            server,
            || in_schema(a_change_holds_the_shared_locks_for_two_round_trips),
        ),
        trial(
            "postgres::changes_queued_together_are_answered_as_if_each_were_alone",
            server,
            || in_schema(changes_queued_together_are_answered_as_if_each_were_alone),
        ),
        trial(
            "postgres::concurrent_changes_share_their_round_trips_and_commit",
            server,
            || in_schema(concurrent_changes_share_their_round_trips_and_commit),
        ),
        trial(
            "postgres::a_change_whose_caller_stopped_waiting_is_still_committed",
            server,
            || in_schema(a_change_whose_caller_stopped_waiting_is_still_committed),
        ),
        trial(
            "postgres::a_group_with_a_refused_change_fails_only_that_change",
            server,
            || in_schema(a_group_with_a_refused_change_fails_only_that_change),
        ),
        trial(
            "postgres::a_starting_replica_reads_the_pending_interactions_once",
            server,
            || in_schema(a_starting_replica_reads_the_pending_interactions_once),
        ),
        trial(
            "postgres::a_resolution_from_elsewhere_wakes_waiters_before_the_events_are_read",
            server,
            || in_schema(a_resolution_from_elsewhere_wakes_waiters_before_the_events_are_read),
        ),
        trial(
            "postgres::replicas_never_claim_the_same_job",
            server,
            || in_schema(replicas_never_claim_the_same_job),
        ),
        trial(
            "postgres::an_exhausted_pool_fails_after_a_bounded_wait",
            server,
            || in_schema(an_exhausted_pool_fails_after_a_bounded_wait),
        ),
        trial(
            "postgres::a_write_stuck_behind_a_lock_fails_instead_of_hanging",
            server,
            || in_schema(a_write_stuck_behind_a_lock_fails_instead_of_hanging),
        ),
        trial(
            "postgres::the_listener_hears_changes_and_says_when_it_may_have_missed_some",
            server,
            || in_schema(the_listener_hears_changes_and_says_when_it_may_have_missed_some),
        ),
        trial(
            "postgres::the_app_serves_from_postgres_and_keeps_it_across_a_restart",
            server,
            || in_schema(the_app_serves_from_postgres_and_keeps_it_across_a_restart),
        ),
    ]
}

pub(crate) fn url() -> String {
    std::env::var("IMRELAY_TEST_POSTGRES_URL").unwrap_or_else(|_| DEFAULT_URL.into())
}

/// The test server's URL without a password, for messages.
fn shown_url() -> String {
    let url = url();
    match url.split_once("://").zip(url.rsplit_once('@')) {
        Some(((scheme, _), (_, host))) => format!("{scheme}://…@{host}"),
        None => url,
    }
}

/// Whether the test server answers (asked once per run).
pub(crate) fn server() -> Need {
    static PROBE: OnceLock<Result<(), String>> = OnceLock::new();
    let probe = PROBE.get_or_init(|| {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| e.to_string())?;
        rt.block_on(async {
            let url = url();
            let connect = tokio_postgres::connect(&url, tokio_postgres::NoTls);
            match tokio::time::timeout(Duration::from_secs(5), connect).await {
                Ok(Ok(_)) => Ok(()),
                Ok(Err(e)) => Err(match std::error::Error::source(&e) {
                    Some(cause) => cause.to_string(),
                    None => e.to_string(),
                }),
                Err(_) => Err("no answer within 5 s".into()),
            }
        })
    });
    match probe {
        Ok(()) => Need::Here,
        Err(e) => {
            let why = format!("no PostgreSQL server at {}: {e}", shown_url());
            if std::env::var("IMRELAY_TEST_POSTGRES").as_deref() == Ok("require") {
                Need::Required(format!("{why}, and IMRELAY_TEST_POSTGRES=require"))
            } else {
                Need::Missing(format!(
                    "{why}; set IMRELAY_TEST_POSTGRES_URL, or IMRELAY_TEST_POSTGRES=require to fail instead"
                ))
            }
        }
    }
}

/// A raw connection to the test server, for what the tests do behind the store's back.
pub(crate) async fn raw() -> tokio_postgres::Client {
    let (client, conn) = tokio_postgres::connect(&url(), tokio_postgres::NoTls)
        .await
        .expect("connect to the test server");
    tokio::spawn(conn);
    client
}

fn options(schema: &str) -> PostgresOptions {
    PostgresOptions {
        schema: schema.into(),
        ..PostgresOptions::new(url().into())
    }
}

async fn open(schema: &str) -> PostgresStore {
    PostgresStore::connect(&options(schema))
        .await
        .expect("the store opens")
}

/// Runs `test` with the name of a fresh schema, and drops the schema afterwards, whether the
/// test passed or not.
pub(crate) async fn in_schema<F, Fut>(test: F)
where
    F: FnOnce(String) -> Fut,
    Fut: Future<Output = ()> + Send + 'static,
{
    let schema = format!("it_{}", uuid::Uuid::new_v4().simple());
    let outcome = tokio::spawn(test(schema.clone())).await;
    raw()
        .await
        .batch_execute(&format!("DROP SCHEMA IF EXISTS \"{schema}\" CASCADE"))
        .await
        .expect("drop the test schema");
    if let Err(e) = outcome {
        std::panic::resume_unwind(e.into_panic());
    }
}

fn pending(id: &str) -> Arc<Interaction> {
    let input = json!({"command": id}).as_object().cloned().unwrap();
    Arc::new(Interaction::pending(
        InteractionId::parse(id).unwrap(),
        "Bash",
        input,
        imrelay::interaction::now(),
        60,
    ))
}

fn record(action: Action, id: &str, by: &str) -> AuditRecord {
    AuditRecord {
        at: Timestamp::now(),
        action,
        interaction_id: Some(id.into()),
        actor: Some(by.into()),
        channel: "api".into(),
        outcome: by.into(),
        input_hash: None,
        detail: None,
    }
}

async fn migrations_apply_once_when_replicas_start_together(schema: String) {
    let o = options(&schema);
    let stores = futures_util::future::join_all((0..4).map(|_| PostgresStore::connect(&o))).await;
    assert!(stores.iter().all(Result::is_ok), "{stores:?}");
    let db = raw().await;
    let versions: Vec<i32> = db
        .query(
            &format!("SELECT version FROM \"{schema}\".migrations ORDER BY version"),
            &[],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    let expected: Vec<i32> = (1..=SCHEMA_VERSION).collect();
    assert_eq!(versions, expected);

    // Data outlives the store, and opening again applies nothing again.
    let store = stores.into_iter().next().unwrap().unwrap();
    store
        .create(pending("kept"), Effects::default())
        .await
        .unwrap();
    drop(store);
    let again = open(&schema).await;
    assert!(
        again
            .get(&InteractionId::parse("kept").unwrap())
            .await
            .unwrap()
            .is_some()
    );
    let n: i64 = db
        .query_one(
            &format!("SELECT count(*) FROM \"{schema}\".migrations"),
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(n, expected.len() as i64);
}

async fn an_older_imrelay_refuses_a_newer_schema(schema: String) {
    drop(open(&schema).await);
    raw()
        .await
        .execute(
            &format!(
                "INSERT INTO \"{schema}\".migrations (version, name, checksum, applied_at)
                 VALUES ($1, 'from_the_future', '', 0)"
            ),
            &[&(SCHEMA_VERSION + 1)],
        )
        .await
        .unwrap();
    let err = PostgresStore::connect(&options(&schema))
        .await
        .expect_err("an older binary must not start");
    let text = err.to_string();
    assert!(matches!(err, StoreError::Unavailable(_)), "{text}");
    assert!(
        text.contains(&format!("version {}", SCHEMA_VERSION + 1))
            && text.contains("newer than this imrelay"),
        "{text}"
    );
}

async fn a_user_without_create_on_the_database_starts_in_a_schema_made_for_it(schema: String) {
    // An administrator makes the schema and hands it to a role that may create nothing else.
    let role = format!("{schema}_owner");
    let db = raw().await;
    db.batch_execute(&format!(
        "CREATE ROLE \"{role}\" LOGIN; CREATE SCHEMA \"{schema}\" AUTHORIZATION \"{role}\""
    ))
    .await
    .unwrap();
    let base = url();
    let as_role = format!(
        "{base}{}user={role}",
        if base.contains('?') { '&' } else { '?' }
    );
    let opened = PostgresStore::connect(&PostgresOptions {
        schema: schema.clone(),
        ..PostgresOptions::new(as_role.into())
    })
    .await;
    let created = match &opened {
        Ok(store) => store.create(pending("least"), Effects::default()).await,
        Err(e) => Err(StoreError::Unavailable(e.to_string())),
    };
    drop(opened);
    db.batch_execute(&format!(
        "DROP SCHEMA \"{schema}\" CASCADE; DROP ROLE \"{role}\""
    ))
    .await
    .unwrap();
    assert!(matches!(created, Ok(CreateOutcome::Created)), "{created:?}");
}

async fn replicas_write_one_audit_chain_and_each_resolution_has_one_winner(schema: String) {
    let a: Arc<dyn Store> = Arc::new(open(&schema).await);
    let b: Arc<dyn Store> = Arc::new(open(&schema).await);
    let ids: Vec<String> = (0..20).map(|n| format!("race-{n}")).collect();
    let mut tasks = Vec::new();
    for (n, id) in ids.iter().enumerate() {
        let store = if n % 2 == 0 { a.clone() } else { b.clone() };
        let id = id.clone();
        tasks.push(tokio::spawn(async move {
            let effects = Effects {
                jobs: vec![],
                audit: vec![record(Action::Created, &id, "agent")],
            };
            let created = store.create(pending(&id), effects).await.unwrap();
            assert!(matches!(created, CreateOutcome::Created));
        }));
    }
    for t in tasks.drain(..) {
        t.await.unwrap();
    }
    // Every interaction answered by both replicas at once, and refusals appended meanwhile.
    for id in &ids {
        for (store, by) in [(a.clone(), "alice"), (b.clone(), "bob")] {
            let id = id.clone();
            tasks.push(tokio::spawn(async move {
                let current = store
                    .get(&InteractionId::parse(&id).unwrap())
                    .await
                    .unwrap()
                    .unwrap();
                let mut resolution = imrelay::interaction::expired(&current, Timestamp::now());
                resolution.by = Some(by.into());
                let effects = Effects {
                    jobs: vec![],
                    audit: vec![record(Action::Answered, &id, by)],
                };
                match store
                    .resolve(Arc::new(current.resolved(resolution)), effects)
                    .await
                    .unwrap()
                {
                    ResolveOutcome::Resolved => {}
                    ResolveOutcome::AlreadyResolved(_) => {
                        store
                            .append_audit(vec![record(Action::Refused, &id, by)])
                            .await
                            .unwrap();
                    }
                    ResolveOutcome::NotFound => panic!("{id} vanished"),
                }
            }));
        }
    }
    for t in tasks {
        t.await.unwrap();
    }
    let entries = audit_trail(&*a).await;
    assert_eq!(audit::verify(&entries), Ok(entries.len() as i64));
    assert_eq!(entries.len(), ids.len() * 3, "created, answered, refused");
    for id in &ids {
        let of = |action| {
            entries
                .iter()
                .filter(|e| {
                    e.record.action == action && e.record.interaction_id.as_ref() == Some(id)
                })
                .count()
        };
        assert_eq!(
            (of(Action::Answered), of(Action::Refused)),
            (1, 1),
            "{id}: one winner"
        );
    }
    let last = entries.last().unwrap();
    for store in [&a, &b] {
        let head = store.audit_head().await.unwrap().unwrap();
        assert_eq!(
            (head.seq, head.hash.as_str()),
            (last.seq, last.hash.as_str())
        );
    }
}

/// Every replica's creates and resolutions wait for the cluster's locks (the audit chain's and
/// the events'), held until the commit: how long a change holds them bounds how many changes
/// per second the whole cluster makes. The store reaches the server through a proxy that
/// passes each answer on `DELAY` late, so that time counts the round trips made while
/// holding them: the lock with the chain's head, then the entries with the event, then the
/// commit.
async fn a_change_holds_the_shared_locks_for_two_round_trips(schema: String) {
    const DELAY: Duration = Duration::from_millis(100);
    let proxy =
        crate::proxy::Proxy::start_with_delay(crate::replicas::upstream().await, DELAY).await;
    // The store's sessions carry a name of their own, to find their locks.
    let name = format!("locks_{}", &schema[3..19]);
    let url = format!(
        "{} application_name={name}",
        crate::replicas::through(proxy.addr)
    );
    let store = PostgresStore::connect(&PostgresOptions {
        schema: schema.clone(),
        ..PostgresOptions::new(url.into())
    })
    .await
    .expect("the store opens through the proxy");
    let probe = raw().await;
    let watching = Arc::new(std::sync::atomic::AtomicBool::new(true));
    let watch = watching.clone();
    let watcher = tokio::spawn(async move {
        let held = probe
            .prepare(
                "SELECT count(*) FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
                 WHERE l.locktype = 'advisory' AND l.granted AND a.application_name = $1",
            )
            .await
            .unwrap();
        let mut holds = Vec::new();
        let mut since: Option<std::time::Instant> = None;
        while watch.load(std::sync::atomic::Ordering::SeqCst) {
            let n: i64 = probe.query_one(&held, &[&name]).await.unwrap().get(0);
            match (n > 0, since) {
                (true, None) => since = Some(std::time::Instant::now()),
                (false, Some(t)) => {
                    holds.push(t.elapsed());
                    since = None;
                }
                _ => {}
            }
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        holds
    });
    let id = "held-1";
    let created = store
        .create(
            pending(id),
            Effects {
                jobs: vec![],
                audit: vec![record(Action::Created, id, "agent")],
            },
        )
        .await
        .unwrap();
    assert!(matches!(created, CreateOutcome::Created));
    let current = store
        .get(&InteractionId::parse(id).unwrap())
        .await
        .unwrap()
        .unwrap();
    let resolution = imrelay::interaction::expired(&current, Timestamp::now());
    let resolved = store
        .resolve(
            Arc::new(current.resolved(resolution)),
            Effects {
                jobs: vec![],
                audit: vec![record(Action::Answered, id, "alice")],
            },
        )
        .await
        .unwrap();
    assert!(matches!(resolved, ResolveOutcome::Resolved));
    watching.store(false, std::sync::atomic::Ordering::SeqCst);
    let holds = watcher.await.unwrap();
    assert_eq!(holds.len(), 2, "one hold per change: {holds:?}");
    for held in holds {
        // Two round trips and the commit's way there: 2 × DELAY, and well under 3.
        assert!(
            held < DELAY * 3,
            "a change held the cluster's locks for {held:?}, more than two round trips of {DELAY:?}"
        );
    }
}

/// Creates and resolutions queued at one moment are committed together (the store's group
/// commit), yet each caller gets the outcome its change would have had alone, changes of one
/// interaction see each other in the order they were made, and each change that took effect
/// has its audit entry, its event and its notification.
async fn changes_queued_together_are_answered_as_if_each_were_alone(schema: String) {
    let store = open(&schema).await;
    let mut listener = store.listen();
    assert_eq!(next(&mut listener).await, Notification::MayHaveMissed);
    let a = pending("batch-a");
    let b = pending("batch-b");
    let c = pending("batch-c");
    let answer = |i: &Arc<Interaction>, by: &str| {
        let mut resolution = imrelay::interaction::expired(i, Timestamp::now());
        resolution.by = Some(by.into());
        Arc::new(i.resolved(resolution))
    };
    let audited = |action, id: &str, by: &str| Effects {
        jobs: vec![job(&format!("{id}-{by}"), "slow")],
        audit: vec![record(action, id, by)],
    };
    // Polled together: every change is queued before the writer takes any.
    let (created_a, again_a, created_b, answered_b, again_b, missing, created_c) = tokio::join!(
        store.create(a.clone(), audited(Action::Created, "batch-a", "agent")),
        store.create(a.clone(), audited(Action::Created, "batch-a", "agent-2")),
        store.create(b.clone(), audited(Action::Created, "batch-b", "agent")),
        store.resolve(
            answer(&b, "alice"),
            audited(Action::Answered, "batch-b", "alice")
        ),
        store.resolve(
            answer(&b, "bob"),
            audited(Action::Answered, "batch-b", "bob")
        ),
        store.resolve(answer(&pending("batch-none"), "alice"), Effects::default()),
        store.create(c.clone(), audited(Action::Created, "batch-c", "agent")),
    );
    assert!(matches!(created_a.unwrap(), CreateOutcome::Created));
    assert!(matches!(created_b.unwrap(), CreateOutcome::Created));
    assert!(matches!(created_c.unwrap(), CreateOutcome::Created));
    match again_a.unwrap() {
        CreateOutcome::Exists(i) => assert_eq!(i.id, a.id),
        other => panic!("a second create of one id: {other:?}"),
    }
    assert!(matches!(answered_b.unwrap(), ResolveOutcome::Resolved));
    match again_b.unwrap() {
        ResolveOutcome::AlreadyResolved(i) => assert_eq!(
            i.resolution.as_ref().and_then(|r| r.by.as_deref()),
            Some("alice"),
            "the first answer won"
        ),
        other => panic!("a second answer: {other:?}"),
    }
    assert!(matches!(missing.unwrap(), ResolveOutcome::NotFound));

    // One audit entry, one outbox job and one event per change that took effect.
    let entries = audit_trail(&store).await;
    assert_eq!(audit::verify(&entries), Ok(4));
    let actors: Vec<_> = entries
        .iter()
        .map(|e| e.record.actor.clone().unwrap_or_default())
        .collect();
    assert!(!actors.contains(&"agent-2".to_string()), "{actors:?}");
    assert!(!actors.contains(&"bob".to_string()), "{actors:?}");
    let events = store.events_after(0, 100).await.unwrap();
    let kinds: Vec<_> = events
        .iter()
        .map(|e| (e.interaction.id.as_str().to_string(), e.kind))
        .collect();
    assert_eq!(kinds.len(), 4, "{kinds:?}");
    assert!(events.windows(2).all(|w| w[0].id < w[1].id));
    let resolved_b = events
        .iter()
        .find(|e| e.kind == imrelay::interaction::EventKind::Resolved)
        .expect("b's resolution is an event");
    assert_eq!(resolved_b.interaction.id, b.id);
    assert!(resolved_b.interaction.resolution.is_some());
    let backlog = store.job_backlog().await.unwrap();
    assert_eq!(backlog, vec![("slow".to_string(), 4)]);
    // Every change that took effect rang the doorbell, and the resolution also carried
    // itself.
    let (mut rung, mut settled) = (HashSet::new(), Vec::new());
    while rung.len() < 3 || settled.is_empty() {
        match next(&mut listener).await {
            Notification::Changed(id) => {
                rung.insert(id.as_str().to_string());
            }
            Notification::Settled(id, resolution) => settled.push((id, resolution)),
            other => panic!("{other:?}"),
        }
    }
    assert_eq!(
        rung,
        HashSet::from(["batch-a", "batch-b", "batch-c"].map(String::from))
    );
    assert_eq!(settled.len(), 1, "{settled:?}");
    assert_eq!(settled[0].0, b.id);
    assert_eq!(settled[0].1.by.as_deref(), Some("alice"));
}

/// Fifty creates made at once through a connection whose every answer comes 100 ms late are
/// committed by a few transactions, not fifty: the rows say which transaction wrote them.
async fn concurrent_changes_share_their_round_trips_and_commit(schema: String) {
    const DELAY: Duration = Duration::from_millis(100);
    let proxy =
        crate::proxy::Proxy::start_with_delay(crate::replicas::upstream().await, DELAY).await;
    let store = Arc::new(
        PostgresStore::connect(&PostgresOptions {
            schema: schema.clone(),
            ..PostgresOptions::new(crate::replicas::through(proxy.addr).into())
        })
        .await
        .expect("the store opens through the proxy"),
    );
    let outcomes = futures_util::future::join_all((0..50).map(|n| {
        let id = format!("many-{n}");
        store.create(
            pending(&id),
            Effects {
                jobs: vec![],
                audit: vec![record(Action::Created, &id, "agent")],
            },
        )
    }))
    .await;
    for o in outcomes {
        assert!(matches!(o.unwrap(), CreateOutcome::Created));
    }
    // While the first change's round trips are under way, the other 49 queue up and go
    // together: alone, each would have been a transaction of its own.
    let writers: i64 = raw()
        .await
        .query_one(
            &format!(
                "SELECT count(DISTINCT xmin::text) FROM \"{schema}\".interactions
                 WHERE id LIKE 'many-%'"
            ),
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert!(
        (1..=3).contains(&writers),
        "50 creates were committed by {writers} transactions"
    );
    let entries = audit_trail(&*store).await;
    assert_eq!(audit::verify(&entries), Ok(50));
}

/// A change is applied once queued: a caller that stops waiting (its client went away) does
/// not take its change back, nor make it half done.
async fn a_change_whose_caller_stopped_waiting_is_still_committed(schema: String) {
    let store = open(&schema).await;
    let i = pending("abandoned");
    let effects = Effects {
        jobs: vec![],
        audit: vec![record(Action::Created, "abandoned", "agent")],
    };
    // Polled once (queued), then dropped.
    let gave_up = tokio::time::timeout(Duration::ZERO, store.create(i.clone(), effects)).await;
    assert!(gave_up.is_err(), "answered before the writer ran");
    eventually("the abandoned create to be committed", || async {
        store.get(&i.id).await.unwrap().map(|_| ())
    })
    .await;
    let entries = audit_trail(&store).await;
    assert_eq!(audit::verify(&entries), Ok(1));
    assert_eq!(store.events_after(0, 10).await.unwrap().len(), 1);
}

/// When the database refuses one change of a group (here its row is locked elsewhere past the
/// lock timeout), the others are applied alone and succeed; only that change fails.
async fn a_group_with_a_refused_change_fails_only_that_change(schema: String) {
    let store = open(&schema).await;
    let (_, stuck, locker) = locked(&schema, &store, "refused").await;
    let fine = pending("innocent");
    let (stuck_outcome, fine_outcome) = tokio::time::timeout(Duration::from_secs(60), async {
        tokio::join!(
            store.resolve(stuck.clone(), Effects::default()),
            store.create(fine.clone(), Effects::default()),
        )
    })
    .await
    .expect("answers, not a hang");
    let err = stuck_outcome.expect_err("the row stays locked");
    assert!(err.to_string().contains("lock timeout"), "{err}");
    assert!(matches!(fine_outcome.unwrap(), CreateOutcome::Created));
    locker.batch_execute("ROLLBACK").await.unwrap();
    assert!(matches!(
        store.resolve(stuck, Effects::default()).await.unwrap(),
        ResolveOutcome::Resolved
    ));
    let events = store.events_after(0, 10).await.unwrap();
    assert_eq!(
        events.len(),
        3,
        "refused's creation and resolution, innocent's creation"
    );
}

/// A replica starting reads every pending interaction once. Its change feed then says it may
/// have missed changes (every listener says so when it connects), but recovery read the
/// shared events' head before the pending interactions, so the shared events bring the rest:
/// reading all of them again would double start-up's work and memory for nothing.
async fn a_starting_replica_reads_the_pending_interactions_once(schema: String) {
    use imrelay::interaction::{Registry, RegistryConfig};
    use imrelay::store::intercept::{Intercepted, Interceptor, Op};
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[derive(Default)]
    struct CountPending(AtomicUsize);

    #[async_trait::async_trait]
    impl Interceptor for CountPending {
        async fn before(&self, op: Op) -> Result<(), StoreError> {
            // Read whole (`Pending`) or a page at a time (`List`).
            if matches!(op, Op::Pending | Op::List) {
                self.0.fetch_add(1, Ordering::SeqCst);
            }
            Ok(())
        }
    }

    let other: Arc<dyn Store> = Arc::new(open(&schema).await);
    for n in 0..3 {
        let created = other
            .create(pending(&format!("before-{n}")), Effects::default())
            .await
            .unwrap();
        assert!(matches!(created, CreateOutcome::Created));
    }
    let store = Arc::new(Intercepted::new(
        Arc::new(open(&schema).await),
        CountPending::default(),
    ));
    let registry = Registry::new(store.clone(), RegistryConfig::default());
    assert_eq!(registry.recover().await.unwrap(), (3, 0));
    let shutdown = tokio_util::sync::CancellationToken::new();
    let tasks = registry.spawn_background(shutdown.clone());
    // A change made elsewhere arrives once the feed is connected.
    let created = other
        .create(pending("after"), Effects::default())
        .await
        .unwrap();
    assert!(matches!(created, CreateOutcome::Created));
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while registry.pending_count() < 4 {
        assert!(
            std::time::Instant::now() < deadline,
            "the change made elsewhere never arrived"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    // A re-check, were one started on the feed's connecting, would have begun reading by the
    // time a later change made elsewhere arrives (the changes are read in order).
    let fence = other
        .create(pending("fence"), Effects::default())
        .await
        .unwrap();
    assert!(matches!(fence, CreateOutcome::Created));
    wait_until("the later change arrives", || registry.pending_count() == 5).await;
    assert_eq!(
        store.hooks.0.load(Ordering::SeqCst),
        1,
        "the pending interactions were read again after recovery"
    );
    shutdown.cancel();
    for t in tasks {
        let _ = t.await;
    }
}

/// An answer committed by another replica wakes a waiter here from the notification that
/// carries it, while this replica's reads of the shared events (and of interactions) are held
/// shut: the hop needs no read. A resolution too big to carry, and an interaction this
/// replica holds without its input, fall back on the events: their waiters wake once the
/// events can be read, never before.
async fn a_resolution_from_elsewhere_wakes_waiters_before_the_events_are_read(schema: String) {
    use imrelay::interaction::{Registry, RegistryConfig};
    use imrelay::store::intercept::{Intercepted, Interceptor, Op};
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// While shut, holds every read of the shared events and of an interaction.
    struct Gate {
        shut: tokio::sync::watch::Sender<bool>,
        /// Reads that found the gate shut.
        held: AtomicUsize,
    }

    #[async_trait::async_trait]
    impl Interceptor for Gate {
        async fn before(&self, op: Op) -> Result<(), StoreError> {
            if matches!(op, Op::EventsAfter | Op::Get) {
                let mut shut = self.shut.subscribe();
                if *shut.borrow_and_update() {
                    self.held.fetch_add(1, Ordering::SeqCst);
                }
                let _ = shut.wait_for(|s| !*s).await;
            }
            Ok(())
        }
    }

    let here = Arc::new(Intercepted::new(
        Arc::new(open(&schema).await),
        Gate {
            shut: tokio::sync::watch::channel(false).0,
            held: AtomicUsize::new(0),
        },
    ));
    let registry = Registry::new(here.clone(), RegistryConfig::default());
    registry.recover().await.unwrap();
    let shutdown = tokio_util::sync::CancellationToken::new();
    let tasks = registry.spawn_background(shutdown.clone());
    let elsewhere = open(&schema).await;

    // Created elsewhere, adopted here (through the events), then shut off from the store.
    let adopt = |i: Arc<Interaction>| {
        let (registry, elsewhere, here) = (registry.clone(), &elsewhere, here.clone());
        async move {
            let created = elsewhere.create(i.clone(), Effects::default()).await;
            assert!(matches!(created.unwrap(), CreateOutcome::Created));
            eventually("the interaction to be adopted here", || async {
                registry.holds_whole(&i.id).map(|_| ())
            })
            .await;
            here.hooks.shut.send_replace(true);
            here.hooks.held.store(0, Ordering::SeqCst);
            let waiting = {
                let (registry, id) = (registry.clone(), i.id.clone());
                tokio::spawn(async move { registry.wait(&id, Duration::from_secs(60)).await })
            };
            (i, waiting)
        }
    };
    let answer = |i: &Arc<Interaction>, by: String| {
        let mut resolution = imrelay::interaction::expired(i, Timestamp::now());
        resolution.by = Some(by);
        resolution
    };

    // Carried: woken while every read is held.
    let (i, waiting) = adopt(pending("carried")).await;
    assert_eq!(registry.holds_whole(&i.id), Some(true));
    let resolution = answer(&i, "alice".into());
    let resolved = Arc::new(i.resolved(resolution.clone()));
    assert!(matches!(
        elsewhere
            .resolve(resolved, Effects::default())
            .await
            .unwrap(),
        ResolveOutcome::Resolved
    ));
    let woken = tokio::time::timeout(Duration::from_secs(20), waiting)
        .await
        .expect("the waiter woke while the events could not be read")
        .unwrap()
        .unwrap()
        .expect("resolved");
    assert_eq!(woken.resolution.as_deref(), Some(&resolution));
    assert_eq!(woken.id, i.id);
    // The event still comes, in order, once the events can be read.
    let (_, mut stream) = registry.events().subscribe();
    here.hooks.shut.send_replace(false);
    let next = tokio::time::timeout(Duration::from_secs(20), stream.next())
        .await
        .expect("the resolution's event in time");
    let Some(imrelay::interaction::Next::Event(event)) = next else {
        panic!(
            "an event, not {}",
            if next.is_some() { "a gap" } else { "the end" }
        );
    };
    assert_eq!(event.kind, imrelay::interaction::EventKind::Resolved);
    assert_eq!(event.id, i.id);

    // Too big to carry, or held without its input: not woken until the events are read.
    let big_input = |id: &str| {
        let input = json!({"command": "x".repeat(20_000)})
            .as_object()
            .cloned()
            .unwrap();
        Arc::new(Interaction::pending(
            InteractionId::parse(id).unwrap(),
            "Bash",
            input,
            imrelay::interaction::now(),
            60,
        ))
    };
    for (i, by, whole) in [
        (pending("too-big"), "b".repeat(8_000), true),
        (big_input("held-by-id"), "bob".to_string(), false),
    ] {
        let (i, waiting) = adopt(i).await;
        assert_eq!(registry.holds_whole(&i.id), Some(whole));
        let resolution = answer(&i, by);
        let resolved = Arc::new(i.resolved(resolution.clone()));
        assert!(matches!(
            elsewhere
                .resolve(resolved, Effects::default())
                .await
                .unwrap(),
            ResolveOutcome::Resolved
        ));
        // The id's notification, sent after any carried resolution, made this replica try
        // the events: whatever the notifications could do is done.
        eventually("the events to be tried", || async {
            (here.hooks.held.load(Ordering::SeqCst) > 0).then_some(())
        })
        .await;
        assert!(
            registry.holds_whole(&i.id).is_some() && !waiting.is_finished(),
            "{} was settled without reading the events",
            i.id
        );
        here.hooks.shut.send_replace(false);
        let woken = tokio::time::timeout(Duration::from_secs(20), waiting)
            .await
            .expect("the waiter woke once the events were read")
            .unwrap()
            .unwrap()
            .expect("resolved");
        assert_eq!(woken.resolution.as_deref(), Some(&resolution));
    }
    shutdown.cancel();
    for t in tasks {
        let _ = t.await;
    }
}

async fn replicas_never_claim_the_same_job(schema: String) {
    let a: Arc<dyn Store> = Arc::new(open(&schema).await);
    let b: Arc<dyn Store> = Arc::new(open(&schema).await);
    let jobs: Vec<_> = (0..120)
        .map(|n| job(&format!("j{n}"), if n % 3 == 0 { "slow" } else { "fast" }))
        .collect();
    a.enqueue(jobs).await.unwrap();
    let mut workers = Vec::new();
    for store in [a.clone(), b.clone(), a.clone(), b.clone()] {
        workers.push(tokio::spawn(async move {
            let mut mine = Vec::new();
            loop {
                let claimed = store
                    .claim_jobs(
                        imrelay::interaction::now(),
                        &ClaimQuota::any(7),
                        Duration::from_secs(60),
                    )
                    .await
                    .unwrap();
                if claimed.is_empty() {
                    return mine;
                }
                mine.extend(claimed.into_iter().map(|c| c.job.key));
                tokio::task::yield_now().await;
            }
        }));
    }
    let mut all = Vec::new();
    for w in workers {
        all.extend(w.await.unwrap());
    }
    let distinct: HashSet<&String> = all.iter().collect();
    assert_eq!(distinct.len(), all.len(), "a job was claimed twice");
    assert_eq!(all.len(), 120);
}

/// Creates interaction `id` through `store` and locks its row from another session, whose
/// transaction stays open until that session runs `ROLLBACK`. Returns the interaction, its
/// resolution to attempt, and the session.
async fn locked(
    schema: &str,
    store: &dyn Store,
    id: &str,
) -> (Arc<Interaction>, Arc<Interaction>, tokio_postgres::Client) {
    let held = pending(id);
    store
        .create(held.clone(), Effects::default())
        .await
        .unwrap();
    let locker = raw().await;
    locker
        .batch_execute(&format!(
            "BEGIN; SELECT 1 FROM \"{schema}\".interactions WHERE id = '{id}' FOR UPDATE"
        ))
        .await
        .unwrap();
    let resolved = Arc::new(held.resolved(imrelay::interaction::expired(&held, Timestamp::now())));
    (held, resolved, locker)
}

async fn an_exhausted_pool_fails_after_a_bounded_wait(schema: String) {
    let store = Arc::new(
        PostgresStore::connect(&PostgresOptions {
            pool_size: 1,
            pool_wait: Duration::from_millis(300),
            ..options(&schema)
        })
        .await
        .unwrap(),
    );
    // Another session locks the row: the store's one connection waits in a resolution.
    let (held, resolved, locker) = locked(&schema, &*store, "held").await;
    let resolving = {
        let store = store.clone();
        tokio::spawn(async move { store.resolve(resolved, Effects::default()).await })
    };
    let waiting = format!(
        "SELECT count(*) FROM pg_stat_activity
         WHERE application_name = 'imrelay' AND wait_event_type = 'Lock'
           AND query LIKE '%\"{schema}\".interactions%'"
    );
    let probe = raw().await;
    eventually("the resolution to wait for the row lock", || async {
        let n: i64 = probe.query_one(&waiting, &[]).await.unwrap().get(0);
        (n == 1).then_some(())
    })
    .await;
    let started = tokio::time::Instant::now();
    let err = store.get(&held.id).await.expect_err("no free connection");
    assert!(matches!(err, StoreError::Unavailable(_)), "{err}");
    assert!(err.to_string().contains("busy"), "{err}");
    assert!(started.elapsed() < Duration::from_secs(30), "bounded");
    locker.batch_execute("ROLLBACK").await.unwrap();
    assert!(matches!(
        resolving.await.unwrap().unwrap(),
        ResolveOutcome::Resolved
    ));
    assert!(store.get(&held.id).await.unwrap().is_some());
}

async fn a_write_stuck_behind_a_lock_fails_instead_of_hanging(schema: String) {
    let store = open(&schema).await;
    // A session that holds the row and never finishes (as a replica cut off mid-write would
    // until the server notices).
    let (_, resolved, locker) = locked(&schema, &store, "stuck").await;
    let err = tokio::time::timeout(
        Duration::from_secs(30),
        store.resolve(resolved.clone(), Effects::default()),
    )
    .await
    .expect("an answer, not a hang")
    .expect_err("the row stays locked");
    assert!(matches!(err, StoreError::Unavailable(_)), "{err}");
    assert!(err.to_string().contains("lock timeout"), "{err}");
    locker.batch_execute("ROLLBACK").await.unwrap();
    assert!(matches!(
        store.resolve(resolved, Effects::default()).await.unwrap(),
        ResolveOutcome::Resolved
    ));
}

async fn next(listener: &mut imrelay::store::postgres::Listener) -> Notification {
    tokio::time::timeout(Duration::from_secs(20), listener.next())
        .await
        .expect("a notification in time")
        .expect("the listener runs")
}

async fn the_listener_hears_changes_and_says_when_it_may_have_missed_some(schema: String) {
    let store = open(&schema).await;
    let mut listener = store.listen();
    assert_eq!(next(&mut listener).await, Notification::MayHaveMissed);
    let db = raw().await;
    let channel = store.channel();
    db.execute("SELECT pg_notify($1, 'from-elsewhere')", &[&channel])
        .await
        .unwrap();
    assert_eq!(
        next(&mut listener).await,
        Notification::Changed(InteractionId::parse("from-elsewhere").unwrap())
    );
    // The store's own writes ring too: a create, and a resolution.
    let i = pending("rung");
    store.create(i.clone(), Effects::default()).await.unwrap();
    assert_eq!(
        next(&mut listener).await,
        Notification::Changed(i.id.clone())
    );
    // A resolution rings with the resolution itself on the settled channel first, then
    // with the id.
    let resolution = imrelay::interaction::expired(&i, Timestamp::now());
    let resolved = Arc::new(i.resolved(resolution.clone()));
    store.resolve(resolved, Effects::default()).await.unwrap();
    assert_eq!(
        next(&mut listener).await,
        Notification::Settled(i.id.clone(), Box::new(resolution))
    );
    assert_eq!(
        next(&mut listener).await,
        Notification::Changed(i.id.clone())
    );
    // One too big for a notification (PostgreSQL takes under 8,000 bytes) rings with its id
    // alone, and the write goes through.
    let big = pending("rung-big");
    store.create(big.clone(), Effects::default()).await.unwrap();
    assert_eq!(
        next(&mut listener).await,
        Notification::Changed(big.id.clone())
    );
    let mut resolution = imrelay::interaction::expired(&big, Timestamp::now());
    resolution.by = Some("m".repeat(8_000));
    let resolved = Arc::new(big.resolved(resolution));
    assert!(matches!(
        store.resolve(resolved, Effects::default()).await.unwrap(),
        ResolveOutcome::Resolved
    ));
    assert_eq!(
        next(&mut listener).await,
        Notification::Changed(big.id.clone())
    );
    // A payload on the settled channel that is not a resolution is passed over: its id
    // comes on the changes channel anyway.
    db.execute(
        "SELECT pg_notify($1, 'not json'), pg_notify($2, 'after-junk')",
        &[&store.settled_channel(), &channel],
    )
    .await
    .unwrap();
    assert_eq!(
        next(&mut listener).await,
        Notification::Changed(InteractionId::parse("after-junk").unwrap())
    );

    // The listener's connection is killed: it reconnects, and says it may have missed some.
    let listening = format!(
        "LISTEN \"{channel}\"; LISTEN \"{}\"",
        store.settled_channel()
    );
    let killed: i64 = db
        .query_one(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
             WHERE application_name = 'imrelay-listener' AND query = $1",
            &[&listening],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(killed, 1);
    assert_eq!(next(&mut listener).await, Notification::MayHaveMissed);
    db.execute("SELECT pg_notify($1, 'after-the-gap')", &[&channel])
        .await
        .unwrap();
    assert_eq!(
        next(&mut listener).await,
        Notification::Changed(InteractionId::parse("after-the-gap").unwrap())
    );
    // Dropped, it closes its connection.
    drop(listener);
    let probe = raw().await;
    eventually("the listener's connection to close", || async {
        let n: i64 = probe
            .query_one(
                "SELECT count(*) FROM pg_stat_activity WHERE query = $1",
                &[&listening],
            )
            .await
            .unwrap()
            .get(0);
        (n == 0).then_some(())
    })
    .await;
}

async fn the_app_serves_from_postgres_and_keeps_it_across_a_restart(schema: String) {
    let mut s = settings();
    s.store.backend = Backend::Postgres;
    s.store.url = imrelay::config::Secret::new(url());
    s.store.schema = schema.clone();
    let store = imrelay::app::open_store(&s).await.unwrap();
    let app = spawn_on(s.clone(), store).await;
    let id = app.create_bash("pg-app", "make deploy").await;
    let (status, body) = app
        .post(
            &format!("/v1/interactions/{id}/respond"),
            &json!({"decision": "allow", "by": "Ada"}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    app.create_bash("pg-app-pending", "make test").await;
    app.stop().await;

    let store = imrelay::app::open_store(&s).await.unwrap();
    let app = spawn_on(s, store).await;
    let (_, answered) = app.get(&format!("/v1/interactions/{id}")).await;
    assert_eq!(answered["resolution"]["by"], "Ada");
    let (_, pending) = app.get("/v1/interactions?status=pending").await;
    assert_eq!(
        pending["interactions"][0]["id"], "pg-app-pending",
        "{pending}"
    );
    let (status, health) = app.get("/healthz").await;
    assert_eq!(status, StatusCode::OK, "{health}");
    app.stop().await;
}
