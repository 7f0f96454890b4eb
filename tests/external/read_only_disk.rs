//! A read-only disk: imrelay serves what its SQLite database holds and refuses new work
//! clearly. Making a disk read-only even for root takes `chattr +i`, which needs root and a
//! file system with the attribute; elsewhere this test is reported as ignored, with the reason.

use std::sync::Arc;

use imrelay::config::Backend;
use imrelay::store::{SqliteStore, Store, Synchronous};
use libtest_mimic::Trial;
use reqwest::StatusCode;
use serde_json::json;

use crate::support::*;
use crate::{Need, trial};

pub fn trials() -> Vec<Trial> {
    vec![trial(
        "read_only_disk::imrelay_serves_what_it_has_and_refuses_new_work",
        immutable_files,
        on_a_read_only_disk_imrelay_serves_what_it_has_and_refuses_new_work,
    )]
}

fn immutable_files() -> Need {
    let works = tempfile::tempdir()
        .ok()
        .and_then(|dir| Immutable::set(&[dir.path()]).map(drop))
        .is_some();
    if works {
        Need::Here
    } else {
        Need::Missing(
            "cannot make files immutable here (chattr +i needs root and a file system that supports it)"
                .into(),
        )
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
    let _frozen = Immutable::set(&[&data, &db, &lock]).expect("immutable files (checked before)");

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
