//! What one replica's trouble costs the others, and what `/healthz` says meanwhile: a lock the
//! writers need held by another session, a replica frozen (SIGSTOP) inside a transaction,
//! sessions cut as in a server restart, a server that refuses writes.

use std::process::Command;
use std::time::Duration;

use libtest_mimic::Trial;
use reqwest::StatusCode;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use tokio::time::Instant;

use crate::postgres::{in_schema, raw, server, url};
use crate::replicas::{replica, replica_with};
use crate::support::*;
use crate::trial;

pub(crate) fn trials() -> Vec<Trial> {
    vec![
        trial(
            "stalls::a_lock_held_elsewhere_turns_healthz_unavailable_until_released",
            server,
            || in_schema(a_lock_held_elsewhere_turns_healthz_unavailable_until_released),
        ),
        trial(
            "stalls::a_frozen_replica_stalls_the_others_writes_only_briefly",
            server,
            || in_schema(a_frozen_replica_stalls_the_others_writes_only_briefly),
        ),
        trial(
            "stalls::cut_sessions_are_unavailable_never_read_only",
            server,
            || in_schema(cut_sessions_are_unavailable_never_read_only),
        ),
        trial(
            "stalls::a_server_that_refuses_writes_is_read_only",
            server,
            || in_schema(a_server_that_refuses_writes_is_read_only),
        ),
    ]
}

/// The key of the advisory lock imrelay takes for `purpose` in `schema` (as
/// `Schema::lock_key` derives it).
fn lock_key(schema: &str, purpose: &str) -> i64 {
    let digest = Sha256::digest(format!("imrelay:{schema}:{purpose}").as_bytes());
    let mut bytes = [0u8; 8];
    bytes.copy_from_slice(&digest[..8]);
    i64::from_be_bytes(bytes)
}

/// `url()` with `param` added to its query.
fn url_with(param: &str) -> String {
    let url = url();
    let sep = if url.contains('?') { '&' } else { '?' };
    format!("{url}{sep}{param}")
}

fn create_body(id: &str) -> Value {
    json!({"id": id, "tool_name": "Bash", "input": {"command": "make"}})
}

async fn a_lock_held_elsewhere_turns_healthz_unavailable_until_released(schema: String) {
    let b = replica(&schema).await;
    b.create_bash("before", "ls").await;

    // Another session takes the audit chain's lock and keeps its transaction open (an
    // operator's psql, a stuck job): every create needs that lock.
    let holder = raw().await;
    holder
        .batch_execute(&format!(
            "SET idle_in_transaction_session_timeout = 0; BEGIN; SELECT pg_advisory_xact_lock({})",
            lock_key(&schema, "audit")
        ))
        .await
        .unwrap();

    let (status, health) = b.get("/healthz").await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{health}");
    assert_eq!(health["store"], "unavailable", "{health}");
    let why = health["store_error"].as_str().unwrap_or_default();
    assert!(why.contains("write locks"), "{health}");

    // A create waits for the lock; once the holder lets go it goes through.
    let create = {
        let (client, url) = (b.client.clone(), b.url("/v1/interactions"));
        tokio::spawn(async move {
            let resp = client.post(url).json(&create_body("during")).send().await;
            resp.unwrap().status()
        })
    };
    let key = lock_key(&schema, "audit");
    let (high, low) = ((key >> 32) as u32, key as u32);
    let db = raw().await;
    eventually("the create to wait for the lock", || async {
        // A bigint advisory key is shown as its high and low halves.
        let row = db
            .query_one(
                "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted
                   AND classid = $1 AND objid = $2 AND objsubid = 1",
                &[&high, &low],
            )
            .await
            .unwrap();
        (row.get::<_, i64>(0) > 0).then_some(())
    })
    .await;
    assert!(!create.is_finished(), "the create waits for the lock");
    holder.batch_execute("ROLLBACK").await.unwrap();
    assert_eq!(create.await.unwrap(), StatusCode::CREATED);
    eventually("healthz to be ok once the lock is free", || async {
        let (status, health) = b.get("/healthz").await;
        (status == StatusCode::OK && health["store"] == "ok").then_some(())
    })
    .await;
    b.stop().await;
}

/// Replica A as a process of its own, named `app` in `pg_stat_activity`.
fn start_process(schema: &str, app: &str) -> Server {
    let binary = std::env::var("IMRELAY_TEST_FROZEN_BIN")
        .unwrap_or_else(|_| env!("CARGO_BIN_EXE_imrelay").to_string());
    let mut cmd = Command::new(binary);
    cmd.env("IMRELAY__SERVER__LISTEN", "127.0.0.1:0")
        .env("IMRELAY__STORE__BACKEND", "postgres")
        .env(
            "IMRELAY__STORE__URL",
            url_with(&format!("application_name={app}")),
        )
        .env("IMRELAY__STORE__SCHEMA", schema);
    Server::spawn(cmd)
}

/// Whether the sessions named `app` include one idle inside a transaction that holds an
/// advisory lock (the audit chain's or the events').
async fn holds_the_locks(db: &tokio_postgres::Client, app: &str) -> bool {
    let row = db
        .query_one(
            "SELECT count(*) FROM pg_locks l JOIN pg_stat_activity a USING (pid)
             WHERE l.locktype = 'advisory' AND l.granted
               AND a.application_name = $1 AND a.state = 'idle in transaction'",
            &[&app],
        )
        .await
        .unwrap();
    row.get::<_, i64>(0) > 0
}

async fn a_frozen_replica_stalls_the_others_writes_only_briefly(schema: String) {
    use nix::sys::signal::{Signal, kill};
    use nix::unistd::Pid;

    let app = format!("imrelay-frozen-{}", &schema[3..15]);
    let a = start_process(&schema, &app);
    let pid = Pid::from_raw(a.child.id() as i32);
    let b = replica(&schema).await;
    let db = raw().await;

    // Creates on A, four at a time, until it is stopped while holding the cluster's locks.
    let load = {
        let (client, base) = (reqwest::Client::new(), a.base.clone());
        tokio::spawn(async move {
            let mut n = 0u64;
            let mut running = tokio::task::JoinSet::new();
            loop {
                while running.len() < 4 {
                    n += 1;
                    let req = client
                        .post(format!("{base}/v1/interactions"))
                        .json(&create_body(&format!("a-{n}")))
                        .timeout(Duration::from_secs(120));
                    running.spawn(async move { req.send().await.map(|r| r.status()) });
                }
                running.join_next().await;
            }
        })
    };
    let mut frozen_at = None;
    for attempt in 0..300u64 {
        tokio::time::sleep(Duration::from_millis(5 + attempt % 7)).await;
        kill(pid, Signal::SIGSTOP).unwrap();
        let stopped = Instant::now();
        // Checked twice: what A wrote just before it stopped (its COMMIT) may still be on
        // its way to the server at the first look.
        if holds_the_locks(&db, &app).await && {
            tokio::time::sleep(Duration::from_millis(100)).await;
            holds_the_locks(&db, &app).await
        } {
            frozen_at = Some(stopped);
            break;
        }
        kill(pid, Signal::SIGCONT).unwrap();
    }
    let frozen_at = frozen_at.expect("replica A stopped while holding the cluster's locks");

    // B's writes meanwhile: one create after another, each timed, and /healthz sampled.
    let health = {
        let (client, url) = (b.client.clone(), b.url("/healthz"));
        tokio::spawn(async move {
            let mut samples = Vec::new();
            for _ in 0..6 {
                let asked = frozen_at.elapsed();
                let resp = client.get(url.clone()).send().await.unwrap();
                let status = resp.status();
                let body: Value = resp.json().await.unwrap_or_default();
                samples.push((asked, status, body["store"].as_str().map(str::to_string)));
                tokio::time::sleep(Duration::from_millis(250)).await;
            }
            samples
        })
    };
    let mut creates = Vec::new();
    let stall = loop {
        let sent = frozen_at.elapsed();
        let (status, _) = b
            .post(
                "/v1/interactions",
                &create_body(&format!("b-{}", creates.len())),
            )
            .await;
        creates.push((sent, frozen_at.elapsed() - sent, status));
        if status == StatusCode::CREATED {
            break frozen_at.elapsed();
        }
        assert!(
            frozen_at.elapsed() < Duration::from_secs(120),
            "{creates:?}"
        );
    };
    let samples = health.await.unwrap();
    // The figures, for BENCHMARKS.md (`--nocapture`).
    eprintln!("stall from the freeze to B's first create: {stall:?}");
    eprintln!("B's creates (sent after the freeze, took, status): {creates:?}");
    eprintln!("B's /healthz (asked after the freeze, status, store): {samples:?}");
    eventually_within(
        "the server to end A's session",
        Duration::from_secs(10),
        || {
            let db = &db;
            let app = app.clone();
            async move { (!holds_the_locks(db, &app).await).then_some(()) }
        },
    )
    .await;

    // The first create of B went through: it waited for the frozen session to be ended
    // (the idle-in-transaction limit) instead of failing at the lock timeout.
    assert_eq!(creates[0].2, StatusCode::CREATED, "{creates:?}");
    // While A held the locks, B's /healthz said so at least once, and never `read_only`.
    assert!(
        samples
            .iter()
            .any(|(_, s, store)| *s == StatusCode::SERVICE_UNAVAILABLE
                && store.as_deref() == Some("unavailable")),
        "{samples:?}"
    );
    assert!(
        samples
            .iter()
            .all(|(_, _, store)| store.as_deref() != Some("read_only")),
        "{samples:?}"
    );

    // A resumes, finds its session gone, and takes writes again.
    kill(pid, Signal::SIGCONT).unwrap();
    load.abort();
    let a_base = a.base.clone();
    eventually_within("A to take writes again", Duration::from_secs(20), || {
        let url = format!("{a_base}/v1/interactions");
        async move {
            let id = format!("after-{}", uuid::Uuid::new_v4().simple());
            let resp = reqwest::Client::new()
                .post(url)
                .json(&create_body(&id))
                .send()
                .await
                .ok()?;
            (resp.status() == StatusCode::CREATED).then_some(())
        }
    })
    .await;
    b.stop().await;
    a.kill();
}

async fn cut_sessions_are_unavailable_never_read_only(schema: String) {
    let app = format!("imrelay-cut-{}", &schema[3..15]);
    let b = replica_with(&schema, |s| {
        s.store.url = imrelay::config::Secret::new(url_with(&format!("application_name={app}")));
    })
    .await;
    let (status, _) = b.get("/healthz").await;
    assert_eq!(status, StatusCode::OK);

    // As in a server restart: every session of B is ended again and again (SQLSTATE 57P01,
    // "terminating connection due to administrator command"), while /healthz is asked.
    let cutter = {
        let db = raw().await;
        let app = app.clone();
        tokio::spawn(async move {
            loop {
                let _ = db
                    .execute(
                        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity
                         WHERE application_name = $1",
                        &[&app],
                    )
                    .await;
                tokio::time::sleep(Duration::from_millis(2)).await;
            }
        })
    };
    let mut states = Vec::new();
    let until = Instant::now() + Duration::from_secs(4);
    while Instant::now() < until {
        let (status, health) = b.get("/healthz").await;
        states.push((
            status,
            health["store"].as_str().unwrap_or_default().to_string(),
        ));
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    cutter.abort();
    assert!(
        states.iter().all(|(_, store)| store != "read_only"),
        "{states:?}"
    );
    assert!(
        states
            .iter()
            .any(|(s, store)| *s == StatusCode::SERVICE_UNAVAILABLE && store == "unavailable"),
        "{states:?}"
    );
    eventually_within("healthz to recover", Duration::from_secs(15), || async {
        let (status, _) = b.get("/healthz").await;
        (status == StatusCode::OK).then_some(())
    })
    .await;
    b.stop().await;
}

async fn a_server_that_refuses_writes_is_read_only(schema: String) {
    // B connects as a role of its own; once it runs, every new session of that role is
    // read-only (as on a hot standby, or with default_transaction_read_only).
    let role = format!("imrelay_ro_{}", &schema[3..15]);
    let db = raw().await;
    db.batch_execute(&format!("CREATE ROLE {role} LOGIN SUPERUSER"))
        .await
        .unwrap();
    let mut as_role = url::Url::parse(&url()).unwrap();
    as_role.set_username(&role).unwrap();
    let b = replica_with(&schema, |s| {
        s.store.url = imrelay::config::Secret::new(as_role.to_string());
    })
    .await;
    b.create_bash("kept", "ls").await;
    db.batch_execute(&format!(
        "ALTER ROLE {role} SET default_transaction_read_only = on;
         SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = '{role}'"
    ))
    .await
    .unwrap();

    let health = eventually("healthz to see the read-only server", || async {
        let (status, health) = b.get("/healthz").await;
        (health["store"] == "read_only").then_some((status, health))
    })
    .await;
    let (status, health) = health;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{health}");
    assert_eq!(health["store"], "read_only", "{health}");
    assert!(
        health["store_error"]
            .as_str()
            .unwrap_or_default()
            .contains("read-only"),
        "{health}"
    );
    // What is there is served.
    let (status, kept) = b.get("/v1/interactions/kept").await;
    assert_eq!(status, StatusCode::OK, "{kept}");
    b.stop().await;
    db.batch_execute(&format!(
        "REASSIGN OWNED BY {role} TO CURRENT_USER; DROP ROLE {role}"
    ))
    .await
    .unwrap();
}
