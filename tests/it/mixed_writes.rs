//! Mixed writes on SQLite: many clients creating, answering and sending answers that are
//! refused (each refusal an audit entry of its own), all at once, on a real database file.
//! Nothing may fail for want of the database's lock, and every refusal is in the trail.

use std::sync::Arc;
use std::time::Duration;

use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::support::*;

/// Concurrent clients.
const CLIENTS: usize = 16;
/// Rounds each client runs at most (create, answer, refused answers)...
const ROUNDS: usize = 60;
/// ...within this long: the test stays a few seconds on a slow machine.
const FOR: Duration = Duration::from_secs(4);

/// What one client saw.
#[derive(Default)]
struct Tally {
    /// Requests answered with a 5xx: status and body.
    failures: Vec<(u16, Value)>,
    /// Answers the server says it refused (each must have its audit entry).
    refused: usize,
}

impl Tally {
    fn check(&mut self, status: StatusCode, body: &Value) {
        if status.is_server_error() {
            self.failures.push((status.as_u16(), body.clone()));
        }
    }

    /// An answer's response: a 409 is a refusal (already resolved).
    fn answered(&mut self, status: StatusCode, body: &Value) {
        self.check(status, body);
        if status == StatusCode::CONFLICT {
            self.refused += 1;
        }
    }
}

/// One client: creates an approval with a sizeable input (so the write-ahead log grows and
/// the checkpointer has work), answers it, then answers it twice more (already resolved:
/// refused), once of them in a bulk answer beside an interaction of another client.
async fn client(app: Arc<TestApp>, n: usize) -> Tally {
    let mut tally = Tally::default();
    let until = tokio::time::Instant::now() + FOR;
    let padding = "x".repeat(2000);
    for round in 0..ROUNDS {
        if tokio::time::Instant::now() >= until {
            break;
        }
        let id = format!("mw-{n}-{round}");
        let (status, body) = app
            .post(
                "/v1/interactions",
                &json!({"id": id, "tool_name": "Bash",
                        "input": {"command": format!("make {padding}")}}),
            )
            .await;
        tally.check(status, &body);
        if status != StatusCode::CREATED {
            continue;
        }
        let (status, body) = app
            .respond(&id, &json!({"decision": "allow", "by": format!("c{n}")}))
            .await;
        // Already answered through another client's bulk answer: refused too.
        tally.answered(status, &body);
        let (status, body) = app
            .respond(&id, &json!({"decision": "deny", "by": format!("late{n}")}))
            .await;
        tally.answered(status, &body);
        let other = format!("mw-{}-{round}", (n + 1) % CLIENTS);
        let (status, body) = app
            .post(
                "/v1/respond",
                &json!({"ids": [id, other], "decision": "deny", "by": format!("bulk{n}")}),
            )
            .await;
        tally.check(status, &body);
        for item in body["results"].as_array().into_iter().flatten() {
            let s = item["status"].as_u64().unwrap_or(0);
            if s >= 500 {
                tally.failures.push((s as u16, item.clone()));
            }
            if s == 409 {
                tally.refused += 1;
            }
        }
    }
    tally
}

/// Reads the whole trail through the API, as an operator watching it would, while the
/// clients write: long reads that the checkpointer waits for.
async fn refused_entries(app: &TestApp) -> usize {
    let (mut after, mut refused) = (0i64, 0usize);
    loop {
        let (status, body) = app
            .get(&format!("/v1/audit?limit=1000&after={after}"))
            .await;
        assert_eq!(status, StatusCode::OK, "{body}");
        refused += body["entries"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|e| e["action"] == "refused")
            .count();
        match body["next_after"].as_i64() {
            Some(next) => after = next,
            None => return refused,
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sqlite_takes_mixed_writes_and_refusals_without_a_lock_error() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("mixed.db");
    let app = Arc::new(spawn_on(settings(), Arc::new(reopen_sqlite(&db).await)).await);
    let watcher = {
        let app = app.clone();
        tokio::spawn(async move {
            let until = tokio::time::Instant::now() + FOR;
            while tokio::time::Instant::now() < until {
                refused_entries(&app).await;
            }
        })
    };
    let clients: Vec<_> = (0..CLIENTS)
        .map(|n| tokio::spawn(client(app.clone(), n)))
        .collect();
    let (mut failures, mut refused) = (Vec::new(), 0);
    for c in clients {
        let t = c.await.unwrap();
        failures.extend(t.failures);
        refused += t.refused;
    }
    watcher.await.unwrap();
    assert!(
        failures.is_empty(),
        "{} requests failed, the first: {:?}",
        failures.len(),
        failures.first()
    );
    assert!(
        refused > 0,
        "no answer was refused: the test tested nothing"
    );
    assert_eq!(
        refused_entries(&app).await,
        refused,
        "every refused answer has its audit entry"
    );
}

/// The mechanism alone, on the store: an audit append (which reads the chain's head before it
/// writes) while another connection holds the write lock, as the checkpointer does while it
/// restarts the log. The append waits for the lock instead of failing at once.
#[tokio::test]
async fn an_audit_append_waits_for_a_held_write_lock() {
    use imrelay::store::prelude::*;
    use imrelay::store::{AuditQuery, AuditRecord, SqliteStore, Synchronous};

    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("held.db");
    let store = SqliteStore::open(&db, Synchronous::Normal).unwrap();
    let record = |detail: &str| AuditRecord {
        at: jiff::Timestamp::now(),
        action: imrelay::audit::Action::Refused,
        interaction_id: None,
        actor: Some("tester".into()),
        channel: "api".into(),
        outcome: "refused".into(),
        input_hash: None,
        detail: Some(detail.into()),
    };
    // A first entry, so the next append reads a head before it writes.
    store.append_audit(vec![record("first")]).await.unwrap();

    let (held_tx, held_rx) = std::sync::mpsc::channel();
    let holder = std::thread::spawn(move || {
        let conn = rusqlite::Connection::open(&db).unwrap();
        conn.execute_batch("BEGIN IMMEDIATE").unwrap();
        held_tx.send(()).unwrap();
        // Long enough for the append below to reach its write; far below its 5 s wait.
        std::thread::sleep(Duration::from_millis(300));
        conn.execute_batch("COMMIT").unwrap();
    });
    held_rx.recv().unwrap();
    let appended = store.append_audit(vec![record("second")]).await;
    holder.join().unwrap();
    appended.expect("the append waits for the lock");
    let entries = store
        .audit(&AuditQuery {
            after_seq: 0,
            since: None,
            limit: 10,
        })
        .await
        .unwrap();
    let details: Vec<_> = entries
        .iter()
        .map(|e| e.record.detail.as_deref().unwrap_or(""))
        .collect();
    assert_eq!(details, ["first", "second"]);
}

/// Fails every audit append while set (the refusals' own writes), as a store that cannot
/// take them would; everything else passes.
#[derive(Default)]
struct RefuseAuditAppends(std::sync::atomic::AtomicBool);

#[async_trait::async_trait]
impl imrelay::store::intercept::Interceptor for RefuseAuditAppends {
    async fn before(
        &self,
        op: imrelay::store::intercept::Op,
    ) -> Result<(), imrelay::store::StoreError> {
        if op == imrelay::store::intercept::Op::AppendAudit
            && self.0.load(std::sync::atomic::Ordering::SeqCst)
        {
            return Err(imrelay::store::StoreError::Unavailable(
                "database is locked".into(),
            ));
        }
        Ok(())
    }
}

/// A refusal that cannot be written is not answered as if it were: the request fails with
/// 503 `audit_unavailable` (alone or in a bulk answer), and once the store takes writes
/// again the same attempt is refused and recorded.
#[tokio::test]
async fn a_refusal_that_cannot_be_audited_fails_the_request() {
    use imrelay::store::MemoryStore;
    use imrelay::store::intercept::Intercepted;

    let store = Arc::new(Intercepted::new(
        Arc::new(MemoryStore::new()),
        RefuseAuditAppends::default(),
    ));
    let app = spawn_on(settings(), store.clone()).await;
    let id = app.create_bash("unaudited", "ls").await;
    let (status, _) = app.respond(&id, &json!({"decision": "allow"})).await;
    assert_eq!(status, StatusCode::OK);
    let refused_before = refused_entries(&app).await;

    let set = |on: bool| store.hooks.0.store(on, std::sync::atomic::Ordering::SeqCst);
    set(true);
    let (status, body) = app
        .respond(&id, &json!({"decision": "deny", "by": "late"}))
        .await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{body}");
    assert_eq!(body["error"]["code"], "audit_unavailable", "{body}");
    let (status, body) = app
        .post("/v1/respond", &json!({"ids": [id], "decision": "deny"}))
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["results"][0]["status"], 503, "{body}");
    assert_eq!(
        body["results"][0]["error"]["code"], "audit_unavailable",
        "{body}"
    );

    set(false);
    let (status, body) = app
        .respond(&id, &json!({"decision": "deny", "by": "late"}))
        .await;
    assert_eq!(status, StatusCode::CONFLICT, "{body}");
    assert_eq!(refused_entries(&app).await, refused_before + 1);
}
