//! The store contract, run against both backends, plus SQLite specifics and a store that
//! refuses writes (a full or read-only disk).

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use imrelay::audit::Action;
use imrelay::config::Backend;
use imrelay::interaction::{Interaction, InteractionId, NewInteraction, Registry, RegistryConfig};
use imrelay::store::intercept::{Intercepted, Interceptor, Op};
use imrelay::store::{
    AuditQuery, AuditRecord, ChannelMessage, ClaimQuota, CreateOutcome, Effects, JobUpdate,
    ListQuery, MemoryStore, OutboxJob, Page, ResolveOutcome, SqliteStore, StatusFilter, Store,
    StoreError, Synchronous,
};
use jiff::Timestamp;
use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::support::*;

fn job(key: &str, channel: &str) -> OutboxJob {
    OutboxJob {
        key: key.into(),
        channel: channel.into(),
        kind: "test".into(),
        interaction_id: None,
        payload: json!({"k": key}),
        not_before: Timestamp::now(),
        horizon: Timestamp::now() + jiff::SignedDuration::from_hours(1),
    }
}

async fn created(reg: &Registry, id: &str) -> Arc<Interaction> {
    let input = json!({"command": id}).as_object().cloned().unwrap();
    reg.create(NewInteraction {
        id: Some(id.into()),
        ..NewInteraction::new("Bash", input)
    })
    .await
    .unwrap()
    .interaction
}

/// Behaviour every backend must share.
async fn contract(store: Arc<dyn Store>) {
    let reg = Registry::new(store.clone(), RegistryConfig::default());
    let a = created(&reg, "c-a").await;
    // Insert-if-absent.
    match store.create(a.clone(), Effects::default()).await.unwrap() {
        CreateOutcome::Exists(e) => assert_eq!(e.id, a.id),
        CreateOutcome::Created => panic!("created twice"),
    }
    assert_eq!(store.get(&a.id).await.unwrap().unwrap().input, a.input);

    // Resolve-if-pending, with its jobs recorded in the same step.
    let resolved = Arc::new(a.resolved(imrelay::interaction::expired(&a, Timestamp::now())));
    let effects = Effects {
        jobs: vec![job("j-resolve", "test-channel")],
        audit: vec![],
    };
    assert!(matches!(
        store
            .resolve(resolved.clone(), effects.clone())
            .await
            .unwrap(),
        ResolveOutcome::Resolved
    ));
    match store.resolve(resolved.clone(), effects).await.unwrap() {
        ResolveOutcome::AlreadyResolved(w) => assert_eq!(w.resolution, resolved.resolution),
        other => panic!("unexpected {other:?}"),
    }
    let ghost = InteractionId::parse("ghost").unwrap();
    let mut g = (*resolved).clone();
    g.id = ghost.clone();
    assert!(matches!(
        store
            .resolve(Arc::new(g), Effects::default())
            .await
            .unwrap(),
        ResolveOutcome::NotFound
    ));

    // Pending listing and pagination.
    for n in 0..5 {
        created(&reg, &format!("c-p{n}")).await;
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    let pending = store.pending().await.unwrap();
    assert_eq!(pending.len(), 5);
    assert_eq!(pending[0].id.as_str(), "c-p0", "oldest first");
    let Page { interactions, next } = store
        .list(&ListQuery {
            status: StatusFilter::Pending,
            limit: 3,
            after: None,
        })
        .await
        .unwrap();
    assert_eq!(interactions.len(), 3);
    assert_eq!(interactions[0].id.as_str(), "c-p4", "newest first");
    let page2 = store
        .list(&ListQuery {
            status: StatusFilter::Pending,
            limit: 3,
            after: next,
        })
        .await
        .unwrap();
    assert_eq!(page2.interactions.len(), 2);
    assert!(page2.next.is_none());
    let resolved_only = store
        .list(&ListQuery {
            status: StatusFilter::Resolved,
            limit: 10,
            after: None,
        })
        .await
        .unwrap();
    assert_eq!(resolved_only.interactions.len(), 1);

    // Outbox: idempotent by key, leased claims, retry scheduling, completion.
    store
        .enqueue(vec![job("j1", "test-channel"), job("j1", "test-channel")])
        .await
        .unwrap();
    let now = imrelay::interaction::now();
    let all = ClaimQuota::any(10);
    let claimed = store
        .claim_jobs(now, &all, Duration::from_secs(60))
        .await
        .unwrap();
    let keys: Vec<&str> = claimed.iter().map(|c| c.job.key.as_str()).collect();
    assert_eq!(keys.len(), 2, "{keys:?}");
    assert!(keys.contains(&"j1") && keys.contains(&"j-resolve"));
    assert!(
        store
            .claim_jobs(now, &all, Duration::from_secs(60))
            .await
            .unwrap()
            .is_empty(),
        "leased"
    );
    let backlog = store.job_backlog().await.unwrap();
    assert_eq!(backlog, vec![("test-channel".to_string(), 2)]);
    let j1 = claimed.iter().find(|c| c.job.key == "j1").unwrap();
    let jr = claimed.iter().find(|c| c.job.key == "j-resolve").unwrap();
    let later = now + jiff::SignedDuration::from_secs(30);
    assert!(
        store
            .finish_job(
                j1,
                JobUpdate::Retry {
                    at: later,
                    error: "boom".into(),
                },
                vec![],
            )
            .await
            .unwrap()
    );
    assert!(store.finish_job(jr, JobUpdate::Done, vec![]).await.unwrap());
    assert!(
        !store.finish_job(jr, JobUpdate::Done, vec![]).await.unwrap(),
        "a finished job takes no second result"
    );
    assert_eq!(store.next_job_at(&all).await.unwrap(), Some(later));
    let again = store
        .claim_jobs(later, &all, Duration::from_secs(60))
        .await
        .unwrap();
    assert_eq!(again.len(), 1);
    assert_eq!(again[0].attempts, 1);
    // Fencing: the lease runs out and another worker claims the job; the first worker's late
    // result is refused, its audit entry not written, and the new claimant's result stands.
    let after_lease = later + jiff::SignedDuration::from_secs(61);
    let stolen = store
        .claim_jobs(after_lease, &all, Duration::from_secs(60))
        .await
        .unwrap();
    assert_eq!(stolen.len(), 1);
    assert_ne!(stolen[0].lease, again[0].lease);
    let entries_before = store
        .audit(&AuditQuery {
            after_seq: 0,
            since: None,
            limit: 1000,
        })
        .await
        .unwrap()
        .len();
    let failure = AuditRecord {
        at: Timestamp::now(),
        action: Action::DeliveryFailed,
        interaction_id: None,
        actor: Some("system".into()),
        channel: "test-channel".into(),
        outcome: "failed".into(),
        input_hash: None,
        detail: Some("gone".into()),
    };
    assert!(
        !store
            .finish_job(
                &again[0],
                JobUpdate::Failed {
                    error: "gone".into(),
                },
                vec![failure.clone()],
            )
            .await
            .unwrap(),
        "a stale claim records nothing"
    );
    assert!(
        store
            .finish_job(
                &stolen[0],
                JobUpdate::Failed {
                    error: "gone".into(),
                },
                vec![failure],
            )
            .await
            .unwrap()
    );
    let entries = store
        .audit(&AuditQuery {
            after_seq: 0,
            since: None,
            limit: 1000,
        })
        .await
        .unwrap();
    assert_eq!(
        entries.len(),
        entries_before + 1,
        "one audit entry, from the current claim"
    );
    let last = entries.last().unwrap();
    assert_eq!(last.record.action, Action::DeliveryFailed);
    let head = store.audit_head().await.unwrap().unwrap();
    assert_eq!(
        (head.seq, head.hash.as_str()),
        (last.seq, last.hash.as_str())
    );
    assert!(store.next_job_at(&all).await.unwrap().is_none());

    // Claims per channel: a channel without free slots is neither claimed nor waited for,
    // and never takes the places of another.
    let mut busy: Vec<OutboxJob> = (0..5).map(|n| job(&format!("busy-{n}"), "busy")).collect();
    busy.push(job("calm-0", "calm"));
    busy.push(job("stray-0", "stray"));
    store.enqueue(busy).await.unwrap();
    let now = imrelay::interaction::now();
    let only = |channels: &[(&str, usize)], others: usize| ClaimQuota {
        channels: channels.iter().map(|(c, n)| (c.to_string(), *n)).collect(),
        others,
    };
    assert!(
        store
            .next_job_at(&only(&[("busy", 0), ("calm", 0)], 0))
            .await
            .unwrap()
            .is_none()
    );
    assert!(
        store
            .next_job_at(&only(&[("busy", 0)], 1))
            .await
            .unwrap()
            .is_some()
    );
    let got = store
        .claim_jobs(
            now,
            &only(&[("busy", 2), ("calm", 1)], 0),
            Duration::from_secs(60),
        )
        .await
        .unwrap();
    let mut keys: Vec<&str> = got.iter().map(|c| c.job.key.as_str()).collect();
    keys.sort();
    assert_eq!(keys, ["busy-0", "busy-1", "calm-0"]);
    let got = store
        .claim_jobs(
            now,
            &only(&[("busy", 0), ("calm", 1)], 1),
            Duration::from_secs(60),
        )
        .await
        .unwrap();
    let keys: Vec<&str> = got.iter().map(|c| c.job.key.as_str()).collect();
    assert_eq!(
        keys,
        ["stray-0"],
        "a channel not listed gets the others' quota"
    );
    for j in got {
        store.finish_job(&j, JobUpdate::Done, vec![]).await.unwrap();
    }

    // Channel bookkeeping.
    let msg = ChannelMessage {
        channel: "telegram".into(),
        address: "-100123".into(),
        message_ref: "42".into(),
        interaction_id: InteractionId::parse("c-p0").unwrap(),
        state: Some(json!({"toggled": [1]})),
        created_at: Timestamp::now(),
    };
    store.record_message(msg.clone()).await.unwrap();
    assert_eq!(
        store
            .message("telegram", "-100123", "42")
            .await
            .unwrap()
            .unwrap()
            .state,
        msg.state
    );
    assert!(
        store
            .set_message_state("telegram", "-100123", "42", Some(json!({"toggled": []})))
            .await
            .unwrap()
    );
    assert!(
        !store
            .set_message_state("telegram", "x", "y", None)
            .await
            .unwrap()
    );
    let shown = store
        .messages("telegram", &msg.interaction_id)
        .await
        .unwrap();
    assert_eq!(shown.len(), 1);
    assert_eq!(shown[0].state, Some(json!({"toggled": []})));

    // Secrets are stable; first sightings deduplicate.
    let s1 = store.secret("buttons").await.unwrap();
    assert_eq!(s1.len(), 32);
    assert_eq!(store.secret("buttons").await.unwrap(), s1);
    assert_ne!(store.secret("other").await.unwrap(), s1);
    let exp = Timestamp::now() + jiff::SignedDuration::from_mins(5);
    assert!(store.first_sighting("tg", "update-1", exp).await.unwrap());
    assert!(!store.first_sighting("tg", "update-1", exp).await.unwrap());
    assert!(
        store
            .first_sighting("feishu", "update-1", exp)
            .await
            .unwrap()
    );
    store.forget_sighting("tg", "update-1").await.unwrap();
    assert!(store.first_sighting("tg", "update-1", exp).await.unwrap());

    // Values bound to an interaction live as long as it does; other values are kept.
    let pending = store.pending().await.unwrap()[0].id.to_string();
    let bound = |name: &str| format!("{}{name}", imrelay::store::BOUND_VALUE_PREFIX);
    for (key, value) in [
        (bound("to-a"), a.id.to_string()),
        (bound("to-pending"), pending.clone()),
        (bound("to-nothing"), "never-created".to_string()),
        (bound("not-an-id"), "not an id!".to_string()),
        ("plain".to_string(), a.id.to_string()),
    ] {
        store.set_value(&key, Some(value)).await.unwrap();
    }

    // Pruning removes resolved interactions past retention, with their messages.
    let pruned = store
        .prune(Timestamp::now() + jiff::SignedDuration::from_secs(1))
        .await
        .unwrap();
    assert_eq!(pruned, 1);
    assert!(store.get(&a.id).await.unwrap().is_none());
    assert_eq!(store.pending().await.unwrap().len(), 5);
    for gone in ["to-a", "to-nothing", "not-an-id"] {
        assert_eq!(store.get_value(&bound(gone)).await.unwrap(), None, "{gone}");
    }
    assert_eq!(
        store.get_value(&bound("to-pending")).await.unwrap(),
        Some(pending)
    );
    assert_eq!(
        store.get_value("plain").await.unwrap(),
        Some(a.id.to_string())
    );
}

#[tokio::test]
async fn memory_store_keeps_the_contract() {
    contract(Arc::new(MemoryStore::new())).await;
}

#[tokio::test]
async fn sqlite_store_keeps_the_contract() {
    let dir = tempfile::tempdir().unwrap();
    let store =
        SqliteStore::open(dir.path().join("nested/dir/imrelay.db"), Synchronous::Full).unwrap();
    contract(Arc::new(store)).await;
}

#[tokio::test]
async fn sqlite_migrations_apply_once_and_data_survives_reopening() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("m.db");
    {
        let store = Arc::new(SqliteStore::open(&path, Synchronous::Normal).unwrap());
        let reg = Registry::new(store, RegistryConfig::default());
        created(&reg, "survivor").await;
    }
    // The writer thread releases the file when the store is dropped; give it a moment.
    let store = reopen_sqlite(&path).await;
    let version: i64 = rusqlite::Connection::open(&path)
        .unwrap()
        .pragma_query_value(None, "user_version", |r| r.get(0))
        .unwrap();
    assert_eq!(version, imrelay::store::sqlite::SCHEMA_VERSION);
    let id = InteractionId::parse("survivor").unwrap();
    assert!(store.get(&id).await.unwrap().unwrap().is_pending());
}

fn user_version(path: &std::path::Path) -> i64 {
    rusqlite::Connection::open(path)
        .unwrap()
        .pragma_query_value(None, "user_version", |r| r.get(0))
        .unwrap()
}

#[tokio::test]
async fn migrations_apply_to_an_existing_empty_file_and_are_idempotent() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("empty.db");
    std::fs::write(&path, b"").unwrap();
    assert_eq!(std::fs::metadata(&path).unwrap().len(), 0);
    {
        let store = Arc::new(SqliteStore::open(&path, Synchronous::Normal).unwrap());
        let reg = Registry::new(store, RegistryConfig::default());
        created(&reg, "first").await;
    }
    assert_eq!(user_version(&path), imrelay::store::sqlite::SCHEMA_VERSION);
    let schema = |path: &std::path::Path| -> Vec<String> {
        let conn = rusqlite::Connection::open(path).unwrap();
        let mut stmt = conn
            .prepare("SELECT sql FROM sqlite_master WHERE sql IS NOT NULL ORDER BY name")
            .unwrap();
        stmt.query_map([], |r| r.get(0))
            .unwrap()
            .map(|r| r.unwrap())
            .collect()
    };
    let before = schema(&path);
    // Opening again applies nothing and keeps the data.
    for _ in 0..2 {
        let store = reopen_sqlite(&path).await;
        let id = InteractionId::parse("first").unwrap();
        assert!(store.get(&id).await.unwrap().unwrap().is_pending());
    }
    assert_eq!(user_version(&path), imrelay::store::sqlite::SCHEMA_VERSION);
    assert_eq!(schema(&path), before);
}

#[tokio::test]
async fn migration_5_moves_the_hooks_generation_memory_under_the_bound_prefix() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("v4.db");
    let (base, other) = {
        let store: Arc<dyn Store> =
            Arc::new(SqliteStore::open(&path, Synchronous::Normal).unwrap());
        let reg = Registry::new(store, RegistryConfig::default());
        let base = "cc-0123456789abcdef0123456789abcdef";
        let other = "cc-fedcba9876543210fedcba9876543210";
        created(&reg, &format!("{base}.3")).await;
        (base.to_string(), other.to_string())
    };
    // Turn it back into what version 4 left: the memory under its old keys, as numbers.
    {
        let conn = rusqlite::Connection::open(&path).unwrap();
        conn.execute_batch(&format!(
            "INSERT INTO kv (key, value) VALUES
                 ('hooks.claude_code.generation:{base}', '3'),
                 ('hooks.claude_code.generation:{other}', '1'),
                 ('webhook.disabled.x', '{{}}');
             PRAGMA user_version = 4;"
        ))
        .unwrap();
    }
    let store = reopen_sqlite(&path).await;
    assert_eq!(user_version(&path), imrelay::store::sqlite::SCHEMA_VERSION);
    let key = |b: &str| format!("bound:hooks.claude_code.latest:{b}");
    assert_eq!(
        store.get_value(&key(&base)).await.unwrap(),
        Some(format!("{base}.3"))
    );
    assert_eq!(
        store.get_value(&key(&other)).await.unwrap(),
        Some(other.clone())
    );
    assert_eq!(
        store
            .get_value(&format!("hooks.claude_code.generation:{base}"))
            .await
            .unwrap(),
        None
    );
    // The first prune drops what names no interaction (long pruned); the rest stays.
    store.prune(Timestamp::now()).await.unwrap();
    assert_eq!(store.get_value(&key(&other)).await.unwrap(), None);
    assert!(store.get_value(&key(&base)).await.unwrap().is_some());
    assert!(
        store
            .get_value("webhook.disabled.x")
            .await
            .unwrap()
            .is_some()
    );
}

/// Rows in the main database file alone, ignoring anything still only in the write-ahead log.
fn rows_in_main_file(path: &std::path::Path) -> i64 {
    let uri = format!("file:{}?immutable=1", path.display());
    let conn = rusqlite::Connection::open_with_flags(
        uri,
        rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY | rusqlite::OpenFlags::SQLITE_OPEN_URI,
    )
    .unwrap();
    conn.query_row("SELECT count(*) FROM interactions", [], |r| r.get(0))
        .unwrap_or(0)
}

#[tokio::test]
async fn the_checkpointer_moves_commits_into_the_database_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ckpt.db");
    let store = Arc::new(SqliteStore::open(&path, Synchronous::Normal).unwrap());
    let reg = Registry::new(store.clone(), RegistryConfig::default());
    for n in 0..20 {
        created(&reg, &format!("ck-{n}")).await;
    }
    // The writer never checkpoints itself; the checkpointer copies the log back soon after.
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while rows_in_main_file(&path) < 20 {
        assert!(
            std::time::Instant::now() < deadline,
            "the commits never reached the database file"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // Closing the store empties the log.
    drop(reg);
    drop(store);
    let mut wal = path.clone().into_os_string();
    wal.push("-wal");
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while std::fs::metadata(&wal).map_or(0, |m| m.len()) > 0 {
        assert!(
            std::time::Instant::now() < deadline,
            "the log was not emptied on close"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Makes files immutable (`chattr +i`) for as long as it lives: a read-only disk, even for
/// root, which ignores file modes.
struct Immutable(Vec<std::path::PathBuf>);

impl Immutable {
    fn set(paths: &[&std::path::Path]) -> Option<Immutable> {
        let ok = std::process::Command::new("chattr")
            .arg("+i")
            .args(paths)
            .status()
            .is_ok_and(|s| s.success());
        let guard = Immutable(paths.iter().map(|p| p.to_path_buf()).collect());
        // Writes must really fail (a file system without the attribute, or no privilege).
        let probe = paths[0].join("probe");
        (ok && std::fs::write(&probe, b"x").is_err()).then_some(guard)
    }
}

impl Drop for Immutable {
    fn drop(&mut self) {
        let _ = std::process::Command::new("chattr")
            .arg("-i")
            .args(&self.0)
            .status();
    }
}

#[tokio::test]
async fn on_a_read_only_disk_imrelay_serves_what_it_has_and_refuses_new_work() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let path = data.join("ro.db");
    let mut s = settings();
    s.store.backend = Backend::Sqlite;
    s.store.path = path.clone();
    {
        let store: Arc<dyn Store> =
            Arc::new(SqliteStore::open(&path, Synchronous::Normal).unwrap());
        let app = spawn_on(s.clone(), store).await;
        app.create_bash("kept", "ls").await;
        app.stop().await;
    }
    drop(reopen_sqlite(&path).await);
    // Once the last connection closed, the write-ahead log was checkpointed and removed.
    let wal = data.join("ro.db-wal");
    eventually("the store lets go of its files", || async {
        (!wal.exists()).then_some(())
    })
    .await;
    let lock = data.join("ro.db.lock");
    let db = path.clone();
    let Some(_frozen) = Immutable::set(&[&data, &db, &lock]) else {
        eprintln!(
            "SKIPPED: cannot make {} read-only here (chattr +i needs root and a file system \
             that supports it)",
            data.display()
        );
        return;
    };

    let store: Arc<dyn Store> = Arc::new(
        SqliteStore::open_async(&path, Synchronous::Normal)
            .await
            .expect("a read-only database still opens"),
    );
    let app = spawn_on(s, store).await;
    let (status, health) = app.get("/healthz").await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{health}");
    assert_eq!(health["status"], "degraded");
    assert_eq!(health["store"], "read_only");
    assert!(health["store_error"].is_string(), "{health}");
    // What was acknowledged is there and can be waited on.
    let (status, kept) = app.get("/v1/interactions/kept").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(kept["status"], "pending");
    let (status, _) = app.get("/v1/interactions/kept/wait?timeout_secs=0").await;
    assert_eq!(status, StatusCode::ACCEPTED);
    // New work is refused clearly, and nothing changes.
    let (status, body) = app
        .post(
            "/v1/interactions",
            &json!({"tool_name": "Bash", "input": {"command": "x"}}),
        )
        .await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(body["error"]["code"], "store_unavailable");
    let (status, _) = app
        .post(
            "/v1/interactions/kept/respond",
            &json!({"decision": "allow"}),
        )
        .await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
    let (_, kept) = app.get("/v1/interactions/kept").await;
    assert_eq!(kept["status"], "pending");
    app.stop().await;
}

#[tokio::test]
async fn a_second_process_cannot_open_the_same_database() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("locked.db");
    let _first = SqliteStore::open(&path, Synchronous::Normal).unwrap();
    let err = SqliteStore::open(&path, Synchronous::Normal).unwrap_err();
    assert!(
        err.to_string()
            .contains("in use by another imrelay process"),
        "{err}"
    );
}

#[tokio::test]
async fn concurrent_answers_through_sqlite_one_winner() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = settings();
    s.store.backend = Backend::Sqlite;
    s.store.path = dir.path().join("race.db");
    let store: Arc<dyn Store> =
        Arc::new(SqliteStore::open(&s.store.path, Synchronous::Normal).unwrap());
    let app = spawn_on(s, store).await;
    let id = app.create_bash("sqlite-race", "deploy").await;
    let mut tasks = Vec::new();
    for n in 0..200 {
        let client = app.client.clone();
        let url = app.url(&format!("/v1/interactions/{id}/respond"));
        tasks.push(tokio::spawn(async move {
            split(
                client
                    .post(url)
                    .json(&json!({"decision": "allow", "by": format!("p{n}")}))
                    .send()
                    .await
                    .unwrap(),
            )
            .await
        }));
    }
    let mut ok = Vec::new();
    let mut conflicts = 0;
    for t in tasks {
        let (status, body) = t.await.unwrap();
        match status {
            StatusCode::OK => ok.push(body),
            StatusCode::CONFLICT => {
                conflicts += 1;
                assert_eq!(
                    body["error"]["resolution"]["by"],
                    ok.first()
                        .map(|b: &Value| b["resolution"]["by"].clone())
                        .unwrap_or_else(|| body["error"]["resolution"]["by"].clone())
                );
            }
            other => panic!("{other}: {body}"),
        }
    }
    assert_eq!(ok.len(), 1);
    assert_eq!(conflicts, 199);
    let stored = app
        .store
        .get(&InteractionId::parse(&id).unwrap())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        stored.resolution.as_ref().unwrap().by.as_deref(),
        ok[0]["resolution"]["by"].as_str()
    );
    app.stop().await;
}

/// Makes writes fail as on a full or read-only disk while set; reads still work.
#[derive(Default)]
struct RefuseWrites(std::sync::atomic::AtomicBool);

#[async_trait]
impl Interceptor for RefuseWrites {
    async fn before(&self, op: Op) -> Result<(), StoreError> {
        if op.is_write() && self.0.load(std::sync::atomic::Ordering::SeqCst) {
            return Err(StoreError::Unavailable("database or disk is full".into()));
        }
        Ok(())
    }
}

#[tokio::test]
async fn a_store_that_refuses_writes_gets_503_and_loses_nothing() {
    let store = Arc::new(Intercepted::new(
        Arc::new(MemoryStore::new()),
        RefuseWrites::default(),
    ));
    let app = spawn_on(settings(), store.clone()).await;
    let id = app.create_bash("before-full", "ls").await;
    store
        .hooks
        .0
        .store(true, std::sync::atomic::Ordering::SeqCst);

    let (status, body) = app
        .post(
            "/v1/interactions",
            &json!({"tool_name": "Bash", "input": {"command": "x"}}),
        )
        .await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(body["error"]["code"], "store_unavailable");
    let (status, _) = app.respond(&id, &json!({"decision": "allow"})).await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
    let (status, health) = app.get("/healthz").await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(health["store"], "read_only");
    assert!(
        health["store_error"]
            .as_str()
            .unwrap()
            .contains("disk is full")
    );
    // Not ready, but alive: nothing that restarts on failed liveness checks restarts it.
    let (status, live) = app.get("/livez").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(live["status"], "ok");
    assert_eq!(healthchecks(&app).await, (false, true));
    // Nothing was acknowledged, so nothing changed: still pending, still answerable later.
    let (_, still) = app.get(&format!("/v1/interactions/{id}")).await;
    assert_eq!(still["status"], "pending");
    assert_eq!(app.registry.pending_count(), 1);

    store
        .hooks
        .0
        .store(false, std::sync::atomic::Ordering::SeqCst);
    let (status, _) = app.respond(&id, &json!({"decision": "allow"})).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(app.get("/healthz").await.0, StatusCode::OK);
    assert_eq!(healthchecks(&app).await, (true, true));
}

/// What `imrelay healthcheck` and `imrelay healthcheck --live` say about `app` (each builds
/// its own runtime, so they run on a plain thread).
async fn healthchecks(app: &TestApp) -> (bool, bool) {
    use imrelay::cli::{Probe, healthcheck};
    let mut s = settings();
    s.server.listen = app.addr;
    tokio::task::spawn_blocking(move || {
        std::thread::spawn(move || {
            (
                healthcheck(&s, Probe::Ready, None).unwrap(),
                healthcheck(&s, Probe::Live, None).unwrap(),
            )
        })
        .join()
        .unwrap()
    })
    .await
    .unwrap()
}
