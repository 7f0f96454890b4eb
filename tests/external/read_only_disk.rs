//! A read-only or full disk: imrelay serves what its SQLite database holds, refuses new work
//! clearly, and `/healthz` says so at once. Making a disk read-only even for root takes
//! `chattr +i`, which needs root and a file system with the attribute, and a small disk to
//! fill is a tmpfs, which needs root to mount; elsewhere these tests are reported as ignored,
//! with the reason.

use std::sync::Arc;

use imrelay::config::Backend;
use imrelay::store::{SqliteStore, Store, Synchronous};
use libtest_mimic::Trial;
use reqwest::StatusCode;
use serde_json::json;

use crate::support::*;
use crate::{Need, trial};

pub(crate) fn trials() -> Vec<Trial> {
    vec![
        trial(
            "read_only_disk::imrelay_serves_what_it_has_and_refuses_new_work",
            immutable_files,
            on_a_read_only_disk_imrelay_serves_what_it_has_and_refuses_new_work,
        ),
        trial(
            "read_only_disk::healthz_fails_at_once_when_the_disk_turns_read_only",
            immutable_files,
            healthz_fails_at_once_when_the_disk_turns_read_only,
        ),
        trial(
            "read_only_disk::healthz_fails_at_once_when_the_disk_fills",
            small_disks,
            healthz_fails_at_once_when_the_disk_fills,
        ),
    ]
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

/// A store in `dir/data/ro.db` and a server on it, with one interaction written a moment ago.
async fn serving_in(dir: &std::path::Path) -> (TestApp, std::path::PathBuf) {
    let path = dir.join("data").join("ro.db");
    let mut s = settings();
    s.store.backend = Backend::Sqlite;
    s.store.path = path.clone();
    let store: Arc<dyn Store> = Arc::new(
        SqliteStore::open_async(&path, Synchronous::Normal)
            .await
            .unwrap(),
    );
    let app = spawn_on(s, store).await;
    app.create_bash("written", "ls").await;
    (app, path)
}

/// `/healthz` says what a create would find, at once and after the disk recovers.
async fn healthz_follows_the_disk(app: &TestApp, recover: impl FnOnce()) {
    // A write committed a moment ago proves nothing about the next one.
    let (status, health) = app.get("/healthz").await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{health}");
    assert_eq!(health["store"], "read_only", "{health}");
    let (status, _) = app
        .post(
            "/v1/interactions",
            &json!({"tool_name": "Bash", "input": {"command": "x"}}),
        )
        .await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
    recover();
    eventually("healthz to be ok again", || async {
        let (status, _) = app.get("/healthz").await;
        (status == StatusCode::OK).then_some(())
    })
    .await;
    let (status, _) = app
        .post(
            "/v1/interactions",
            &json!({"tool_name": "Bash", "input": {"command": "y"}}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED);
}

async fn healthz_fails_at_once_when_the_disk_turns_read_only() {
    let dir = tempfile::tempdir().unwrap();
    let (app, path) = serving_in(dir.path()).await;
    let data = path.parent().unwrap().to_path_buf();
    let wal = data.join("ro.db-wal");
    // Not the `-shm` file: SQLite maps it, and a write to a mapped page of an immutable file
    // is a SIGBUS (see docs/durability.md).
    let frozen = Immutable::set(&[&data, &path, &wal]).expect("immutable files (checked before)");
    healthz_follows_the_disk(&app, move || drop(frozen)).await;
    app.stop().await;
}

fn small_disks() -> Need {
    match TmpDisk::new(1) {
        Some(_) => Need::Here,
        None => Need::Missing(
            "cannot mount a small tmpfs here (mount needs root, or CAP_SYS_ADMIN)".into(),
        ),
    }
}

/// A tmpfs of a few MiB mounted on a temporary folder for as long as it lives: a disk a test
/// can fill.
struct TmpDisk {
    dir: tempfile::TempDir,
}

impl TmpDisk {
    fn new(mib: u32) -> Option<TmpDisk> {
        let dir = tempfile::tempdir().ok()?;
        let ok = std::process::Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={mib}m"), "imrelay-test"])
            .arg(dir.path())
            .status()
            .is_ok_and(|s| s.success());
        ok.then_some(TmpDisk { dir })
    }
}

impl Drop for TmpDisk {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount")
            .arg("-l")
            .arg(self.dir.path())
            .status();
    }
}

async fn healthz_fails_at_once_when_the_disk_fills() {
    let disk = TmpDisk::new(8).expect("a tmpfs (checked before)");
    let (app, _) = serving_in(disk.dir.path()).await;
    let filler = disk.dir.path().join("filler");
    {
        use std::io::Write;
        let mut f = std::fs::File::create(&filler).unwrap();
        let chunk = vec![0u8; 64 * 1024];
        while f.write_all(&chunk).is_ok() {}
        let _ = f.sync_all();
    }
    healthz_follows_the_disk(&app, move || std::fs::remove_file(&filler).unwrap()).await;
    app.stop().await;
}
