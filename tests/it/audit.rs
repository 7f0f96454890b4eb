//! The audit trail: what is recorded, the API, and `imrelay audit [verify]` on a real file.

use std::sync::Arc;

use imrelay::store::{SqliteStore, Store, Synchronous};
use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::support::*;

async fn entries(app: &TestApp) -> Vec<Value> {
    let (status, body) = app.get("/v1/audit?limit=1000").await;
    assert_eq!(status, StatusCode::OK, "{body}");
    body["entries"].as_array().unwrap().clone()
}

/// Creates, answers, refuses, expires and cancels; returns the app.
async fn eventful(app: &TestApp) {
    let a = app.create_bash("au-1", "rm -rf build").await;
    app.respond(
        &a,
        &json!({"decision": "allow", "by": "alice", "via": "desktop"}),
    )
    .await;
    // Refused: already resolved, and an answer that does not fit.
    app.respond(&a, &json!({"decision": "deny", "by": "bob"}))
        .await;
    let b = app.create_bash("au-2", "ls").await;
    app.respond(&b, &json!({"answers": {"0": "x"}, "by": "carol"}))
        .await;
    app.delete(&format!("/v1/interactions/{b}?reason=stopped"))
        .await;
    app.post(
        "/v1/interactions",
        &json!({"id": "au-3", "tool_name": "Bash", "input": {}, "timeout_secs": 1}),
    )
    .await;
    let (_, expired) = app.get("/v1/interactions/au-3/wait?timeout_secs=10").await;
    assert_eq!(expired["resolution"]["outcome"], "expired");
}

#[tokio::test]
async fn every_state_change_and_refusal_is_recorded() {
    let app = spawn_app().await;
    eventful(&app).await;
    let all = entries(&app).await;
    let summary: Vec<(String, String, String, String)> = all
        .iter()
        .map(|e| {
            (
                e["action"].as_str().unwrap().to_string(),
                e["interaction_id"].as_str().unwrap_or("").to_string(),
                e["actor"].as_str().unwrap_or("").to_string(),
                e["channel"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    let has = |action: &str, id: &str, actor: &str, channel: &str| {
        summary
            .iter()
            .any(|s| s == &(action.into(), id.into(), actor.into(), channel.into()))
    };
    assert!(has("created", "au-1", "", "agent"), "{summary:?}");
    assert!(has("answered", "au-1", "alice", "desktop"), "{summary:?}");
    assert!(has("refused", "au-1", "bob", "api"), "{summary:?}");
    assert!(has("refused", "au-2", "carol", "api"), "{summary:?}");
    assert!(has("cancelled", "au-2", "agent", "system"), "{summary:?}");
    assert!(has("expired", "au-3", "system", "system"), "{summary:?}");
    let refusal = all
        .iter()
        .find(|e| e["action"] == "refused" && e["interaction_id"] == "au-1")
        .unwrap();
    assert!(
        refusal["detail"]
            .as_str()
            .unwrap()
            .contains("already resolved")
    );
    // Every entry about au-1 carries the same hash of what was shown.
    let hashes: Vec<&Value> = all
        .iter()
        .filter(|e| e["interaction_id"] == "au-1")
        .map(|e| &e["input_hash"])
        .collect();
    assert!(hashes.iter().all(|h| h.is_string() && *h == hashes[0]));
    // The chain is intact and gap-free.
    for (n, e) in all.iter().enumerate() {
        assert_eq!(e["seq"], n as i64 + 1);
        if n > 0 {
            assert_eq!(e["prev_hash"], all[n - 1]["hash"]);
        }
    }
}

#[tokio::test]
async fn an_answer_without_a_name_is_anonymous_not_system() {
    let app = spawn_app().await;
    let id = app.create_bash("anon-1", "ls").await;
    let (status, body) = app.respond(&id, &json!({"decision": "allow"})).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["resolution"]["by"], Value::Null, "{body}");
    assert_eq!(body["resolution"]["via"], "api");
    // A blank name is no name either.
    let blank = app.create_bash("anon-2", "ls").await;
    let (_, body) = app
        .respond(&blank, &json!({"decision": "deny", "by": "  "}))
        .await;
    assert_eq!(body["resolution"]["by"], Value::Null, "{body}");
    assert_eq!(body["result"]["message"], "Denied via api");
    // Shut down under a waiting hook: imrelay itself cancelled it, and says so.
    let third = app.create_bash("anon-3", "ls").await;
    app.registry
        .cancel(
            &imrelay::interaction::InteractionId::parse(&third).unwrap(),
            None,
            None,
        )
        .await
        .unwrap();

    let all = entries(&app).await;
    let entry = |action: &str, id: &str| {
        all.iter()
            .find(|e| e["action"] == action && e["interaction_id"] == id)
            .unwrap_or_else(|| panic!("no {action} entry for {id}: {all:?}"))
            .clone()
    };
    for id in ["anon-1", "anon-2"] {
        let answered = entry("answered", id);
        assert_eq!(answered["actor"], Value::Null, "{answered}");
        assert_eq!(answered["channel"], "api");
    }
    assert_eq!(entry("cancelled", "anon-3")["actor"], "system");
}

#[tokio::test]
async fn the_api_pages_through_the_trail() {
    let app = spawn_app().await;
    for n in 0..5 {
        app.create_bash(&format!("pg-{n}"), "ls").await;
    }
    let (_, first) = app.get("/v1/audit?limit=2").await;
    assert_eq!(first["entries"].as_array().unwrap().len(), 2);
    let next = first["next_after"].as_i64().unwrap();
    let (_, second) = app.get(&format!("/v1/audit?limit=10&after={next}")).await;
    assert_eq!(second["entries"].as_array().unwrap().len(), 3);
    assert_eq!(second["next_after"], Value::Null);
    assert_eq!(
        app.get("/v1/audit?since=yesterday").await.0,
        StatusCode::BAD_REQUEST
    );
    let (_, since) = app.get("/v1/audit?since=2000-01-01T00:00:00Z").await;
    assert_eq!(since["entries"].as_array().unwrap().len(), 5);
}

#[tokio::test]
async fn audit_verify_passes_on_an_intact_file_and_names_the_broken_entry() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("audit.db");
    {
        let store: Arc<dyn Store> = Arc::new(SqliteStore::open(&db, Synchronous::Normal).unwrap());
        let app = spawn_on(settings(), store).await;
        eventful(&app).await;
        app.stop().await;
    }
    sqlite_closed(&db).await;

    let (ok, out, err) = cli(&db, &["audit", "verify"]);
    assert!(ok, "{out}{err}");
    assert!(out.contains("audit trail intact"), "{out}");

    let (ok, out, _) = cli(&db, &["audit", "--json", "--since", "1h"]);
    assert!(ok);
    let lines: Vec<Value> = out
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert!(lines.len() >= 8, "{out}");
    assert!(lines.iter().any(|e| e["action"] == "expired"));
    let (ok, table, _) = cli(&db, &["audit"]);
    assert!(ok);
    assert!(
        table.contains("answered") && table.contains("alice"),
        "{table}"
    );

    // Alter one entry, in a consistent copy: SQLite writes it (`VACUUM INTO`), so a log file
    // checkpointed between copying the database and copying its log cannot lose the entry.
    let altered = dir.path().join("altered.db");
    rusqlite::Connection::open(&db)
        .unwrap()
        .execute("VACUUM INTO ?1", [altered.to_str().unwrap()])
        .unwrap();
    let changed = rusqlite::Connection::open(&altered)
        .unwrap()
        .execute("UPDATE audit SET actor = 'mallory' WHERE seq = 3", [])
        .unwrap();
    assert_eq!(changed, 1, "entry 3 is in the copy");
    let (ok, out, _) = cli(&altered, &["audit", "verify"]);
    assert!(!ok);
    assert!(out.contains("broken at entry 3"), "{out}");
    assert!(out.contains("altered"), "{out}");

    // Delete one entry.
    rusqlite::Connection::open(&db)
        .unwrap()
        .execute("DELETE FROM audit WHERE seq = 5", [])
        .unwrap();
    let (ok, out, _) = cli(&db, &["audit", "verify"]);
    assert!(!ok);
    assert!(out.contains("broken at entry 5"), "{out}");
    assert!(out.contains("missing"), "{out}");
}

/// A copy of the database (with its WAL) at `name`, beside it.
fn copy_db(db: &std::path::Path, name: &str) -> std::path::PathBuf {
    let copy = db.with_file_name(name);
    std::fs::copy(db, &copy).unwrap();
    for ext in ["-wal", "-shm"] {
        let src = format!("{}{ext}", db.display());
        if std::path::Path::new(&src).exists() {
            std::fs::copy(&src, format!("{}{ext}", copy.display())).unwrap();
        }
    }
    copy
}

#[tokio::test]
async fn deleting_from_the_end_of_the_trail_is_detected() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("tail.db");
    {
        let store: Arc<dyn Store> = Arc::new(SqliteStore::open(&db, Synchronous::Normal).unwrap());
        let app = spawn_on(settings(), store).await;
        eventful(&app).await;
        app.stop().await;
    }
    sqlite_closed(&db).await;
    let (ok, out, err) = cli(&db, &["audit", "verify"]);
    assert!(ok, "{out}{err}");
    let (ok, head, err) = cli(&db, &["audit", "head"]);
    assert!(ok, "{err}");
    let head = head.trim().to_string();
    let (last, _) = head.split_once(':').unwrap();
    let last: i64 = last.parse().unwrap();
    assert!(out.contains(&format!("head {head}")), "{out}");
    let (ok, out, _) = cli(&db, &["audit", "verify", "--expect", &head]);
    assert!(ok, "{out}");

    let sql = |path: &std::path::Path, sql: &str| {
        rusqlite::Connection::open(path)
            .unwrap()
            .execute_batch(sql)
            .unwrap();
    };

    // The newest entry deleted: the chain itself is intact, but ends before its head.
    let cut = copy_db(&db, "cut.db");
    sql(&cut, &format!("DELETE FROM audit WHERE seq = {last}"));
    let (ok, out, _) = cli(&cut, &["audit", "verify"]);
    assert!(!ok, "{out}");
    assert!(out.contains(&format!("broken at entry {last}")), "{out}");
    assert!(out.contains("deleted from the end"), "{out}");

    // Everything deleted.
    let empty = copy_db(&db, "empty.db");
    sql(&empty, "DELETE FROM audit");
    let (ok, out, _) = cli(&empty, &["audit", "verify"]);
    assert!(!ok, "{out}");
    assert!(out.contains("broken at entry 1"), "{out}");

    // The head deleted as well as the entries: the interactions still stored give it away.
    let both = copy_db(&db, "both.db");
    sql(
        &both,
        "DELETE FROM audit; DELETE FROM kv WHERE key = 'audit.head';",
    );
    let (ok, out, _) = cli(&both, &["audit", "verify"]);
    assert!(!ok, "{out}");
    assert!(out.contains("INCOMPLETE"), "{out}");
    assert!(out.contains("au-1"), "{out}");

    // Only the recorded head deleted: `audit head` will not offer the last row in its place.
    let headless = copy_db(&db, "headless.db");
    sql(&headless, "DELETE FROM kv WHERE key = 'audit.head';");
    let (ok, out, err) = cli(&headless, &["audit", "head"]);
    assert!(!ok, "{out}");
    assert!(err.contains("recorded head is missing"), "{err}");

    // The tail cut and the stored head rewritten to match: the head kept outside catches it.
    let rewritten = copy_db(&db, "rewritten.db");
    sql(
        &rewritten,
        &format!(
            "DELETE FROM audit WHERE seq = {last};
             UPDATE kv SET value = (SELECT seq || ':' || hash FROM audit WHERE seq = {})
             WHERE key = 'audit.head';",
            last - 1
        ),
    );
    let (ok, out, _) = cli(&rewritten, &["audit", "verify", "--expect", &head]);
    assert!(!ok, "{out}");
    assert!(out.contains(&format!("broken at entry {last}")), "{out}");

    // An append after a deletion chains from the recorded head, so the gap stays visible.
    let store: Arc<dyn Store> = Arc::new(SqliteStore::open(&cut, Synchronous::Normal).unwrap());
    let app = spawn_on(settings(), store).await;
    app.create_bash("after-the-cut", "ls").await;
    app.stop().await;
    sqlite_closed(&cut).await;
    let (ok, out, _) = cli(&cut, &["audit", "verify"]);
    assert!(!ok, "{out}");
    assert!(out.contains(&format!("broken at entry {last}")), "{out}");
    assert!(out.contains("missing"), "{out}");
}

#[tokio::test]
async fn a_backup_taken_while_the_server_runs_is_a_complete_verified_copy() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("live.db");
    let copy = dir.path().join("copy.db");
    let app = spawn_on(settings(), Arc::new(reopen_sqlite(&db).await)).await;
    eventful(&app).await;
    app.create_bash("bk-pending", "make release").await;

    let (ok, out, err) = cli(&db, &["backup", copy.to_str().unwrap()]);
    assert!(ok, "{out}{err}");
    assert!(err.contains("backed up"), "{err}");
    // Never over an existing file.
    let (ok, _, err) = cli(&db, &["backup", copy.to_str().unwrap()]);
    assert!(!ok);
    assert!(err.contains("already exists"), "{err}");
    // To standard output (for containers without a shell), leaving nothing behind.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_imrelay"))
        .args(["backup", "-"])
        .env("IMRELAY__STORE__PATH", &db)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.stdout.starts_with(b"SQLite format 3\0"));
    let streamed = dir.path().join("streamed.db");
    std::fs::write(&streamed, &out.stdout).unwrap();
    let leftovers: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains("imrelay-backup"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
    app.stop().await;
    let (ok, out, err) = cli(&streamed, &["audit", "verify"]);
    assert!(ok, "{out}{err}");

    // The copy is a whole database: its trail verifies, and a server started on it has the
    // interaction that was pending.
    let (ok, out, err) = cli(&copy, &["audit", "verify"]);
    assert!(ok, "{out}{err}");
    let restored = spawn_on(settings(), Arc::new(reopen_sqlite(&copy).await)).await;
    let (status, body) = restored.get("/v1/interactions/bk-pending").await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["status"], "pending");
    restored.stop().await;
}

#[tokio::test]
async fn the_audit_table_shows_names_and_messages_escaped() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("audit.db");
    {
        let store: Arc<dyn Store> = Arc::new(SqliteStore::open(&db, Synchronous::Normal).unwrap());
        let app = spawn_on(settings(), store).await;
        let id = app.create_bash("esc-1", "ls").await;
        let (status, _) = app
            .respond(
                &id,
                &json!({"decision": "deny", "by": "eve\nforged line", "message": "no\u{1b}[2J\u{9b}"}),
            )
            .await;
        assert_eq!(status, StatusCode::OK);
        app.stop().await;
    }
    let (ok, table, err) = cli(&db, &["audit"]);
    assert!(ok, "{err}");
    // A header and two entries: nothing in them started a line of its own.
    assert_eq!(table.lines().count(), 3, "{table}");
    assert!(
        !table.contains('\u{1b}') && !table.contains('\u{9b}'),
        "{table:?}"
    );
    assert!(table.contains(r"eve\nforged line"), "{table}");
    assert!(table.contains(r"no\u{1b}[2J\u{9b}"), "{table}");
}
