//! The store contract ([`crate::contract`]) run against the memory and SQLite backends, plus
//! SQLite specifics and a store that refuses writes (a full or read-only disk).

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use imrelay::config::Backend;
use imrelay::interaction::{InteractionId, Registry, RegistryConfig};
use imrelay::store::intercept::{Intercepted, Interceptor, Op};
use imrelay::store::prelude::*;
use imrelay::store::{
    MemoryStore, PostgresOptions, PostgresStore, SqliteStore, Store, StoreError, Synchronous,
};
use jiff::Timestamp;
use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::contract::{contract, created};
use crate::support::*;

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

/// No server needed: nothing listens on port 1. (The PostgreSQL store against a real server
/// is tested in the `external` tests.)
#[tokio::test]
async fn an_unreachable_postgres_is_unavailable_and_its_password_stays_hidden() {
    let url = "postgres://imrelay:hunter2-secret@127.0.0.1:1/relay";
    let err = PostgresStore::connect(&PostgresOptions::new(url.into()))
        .await
        .expect_err("nothing listens there");
    let text = err.to_string();
    assert!(matches!(err, StoreError::Unavailable(_)), "{text}");
    assert!(
        text.contains("postgres://imrelay@127.0.0.1:1/relay"),
        "{text}"
    );
    assert!(!text.contains("hunter2"), "{text}");

    // Starting the server says the same, and `check-config` shows no URL at all.
    let mut s = settings();
    s.store.backend = Backend::Postgres;
    s.store.url = imrelay::config::Secret::new(url);
    let err = imrelay::app::App::build(s.clone())
        .await
        .err()
        .expect("no store, no start");
    let text = format!("{err:#}");
    assert!(
        text.contains("127.0.0.1:1") && !text.contains("hunter2"),
        "{text}"
    );
    let shown = s.redacted_toml().unwrap();
    assert!(
        !shown.contains("hunter2") && shown.contains("[redacted]"),
        "{shown}"
    );
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
    // Turn it back into what version 4 left: the memory under its old keys, as numbers, and
    // no grants (migrations 6 and 7).
    {
        let conn = rusqlite::Connection::open(&path).unwrap();
        conn.execute_batch(&format!(
            "INSERT INTO kv (key, value) VALUES
                 ('hooks.claude_code.generation:{base}', '3'),
                 ('hooks.claude_code.generation:{other}', '1'),
                 ('webhook.disabled.x', '{{}}');
             DROP TABLE grants;
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

#[tokio::test]
async fn migration_7_ends_the_session_grants_no_token_owns() {
    use imrelay::interaction::policy::{Grant, GrantScope};
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("v6.db");
    let grant = |id: &str, scope: GrantScope| Grant {
        id: id.into(),
        rule: "Bash(npm test:*)".into(),
        scope,
        session: (scope == GrantScope::Session).then(|| "s-1".into()),
        agent: None,
        cwd: None,
        by: Some("alice".into()),
        via: "api".into(),
        interaction_id: None,
        owner: None,
        route: None,
        grantor: None,
        created_at: Timestamp::now(),
        expires_at: (scope == GrantScope::Session)
            .then(|| Timestamp::now() + jiff::SignedDuration::from_hours(8)),
    };
    {
        let store = SqliteStore::open(&path, Synchronous::Normal).unwrap();
        store
            .add_grant(grant("g-session", GrantScope::Session), vec![])
            .await
            .unwrap();
        store
            .add_grant(grant("g-standing", GrantScope::Standing), vec![])
            .await
            .unwrap();
    }
    // What version 6 left: grants without owners.
    rusqlite::Connection::open(&path)
        .unwrap()
        .execute_batch("ALTER TABLE grants DROP COLUMN owner; PRAGMA user_version = 6;")
        .unwrap();
    let store = reopen_sqlite(&path).await;
    assert_eq!(user_version(&path), imrelay::store::sqlite::SCHEMA_VERSION);
    let live: Vec<String> = store
        .live_grants(Timestamp::now())
        .await
        .unwrap()
        .into_iter()
        .map(|g| g.id)
        .collect();
    assert_eq!(live, ["g-standing"]);
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
