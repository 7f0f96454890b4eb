//! Several replicas on one PostgreSQL schema: two real applications share a database, and an
//! agent waiting on one gets the answer given on the other, whichever way it came.

use std::sync::Arc;

use imrelay::config::{Backend, Settings};
use libtest_mimic::Trial;
use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::postgres::{in_schema, server, url};
use crate::support::*;
use crate::trial;

pub fn trials() -> Vec<Trial> {
    vec![
        trial(
            "replicas::an_agent_waiting_on_one_replica_gets_the_answer_given_on_the_other",
            server,
            || in_schema(an_agent_waiting_on_one_replica_gets_the_answer_given_on_the_other),
        ),
        trial(
            "replicas::each_expiry_is_applied_once_and_never_beats_an_answer",
            server,
            || in_schema(each_expiry_is_applied_once_and_never_beats_an_answer),
        ),
    ]
}

/// Settings for a replica on `schema`.
pub fn replica_settings(schema: &str) -> Settings {
    let mut s = settings();
    s.store.backend = Backend::Postgres;
    s.store.url = imrelay::config::Secret::new(url());
    s.store.schema = schema.into();
    s
}

/// A replica on `schema`, with `settings` adjusted by `f`.
pub async fn replica_with(schema: &str, f: impl FnOnce(&mut Settings)) -> TestApp {
    let mut s = replica_settings(schema);
    f(&mut s);
    let store = imrelay::app::open_store(&s).await.expect("the store opens");
    spawn_on(s, store).await
}

/// A replica on `schema` with the test defaults.
pub async fn replica(schema: &str) -> TestApp {
    replica_with(schema, |_| {}).await
}

/// Until `app` holds `n` pending interactions (it adopted what another replica created).
pub async fn holds(app: &TestApp, n: usize) {
    let registry = app.registry.clone();
    eventually("the replica to hold the pending interactions", || {
        let registry = registry.clone();
        async move { (registry.pending_count() == n).then_some(()) }
    })
    .await;
}

async fn an_agent_waiting_on_one_replica_gets_the_answer_given_on_the_other(schema: String) {
    let a = Arc::new(replica(&schema).await);
    let b = replica(&schema).await;

    // Created and awaited on A (POST ?wait_secs), answered on B.
    let waiting = {
        let a = a.clone();
        tokio::spawn(async move {
            a.post(
                "/v1/interactions?wait_secs=60",
                &json!({"id": "across-1", "tool_name": "Bash", "input": {"command": "make"}}),
            )
            .await
        })
    };
    eventually("the interaction to reach the store", || async {
        let (status, _) = b.get("/v1/interactions/across-1").await;
        (status == StatusCode::OK).then_some(())
    })
    .await;
    let (status, body) = b
        .respond("across-1", &json!({"decision": "allow", "by": "Ada"}))
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let (status, body) = waiting.await.unwrap();
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["status"], "resolved", "{body}");
    assert_eq!(body["result"]["behavior"], "allow", "{body}");

    // Created on A, awaited on B (/wait), answered on A.
    let id = a.create_bash("across-2", "make test").await;
    let waiting = {
        let url = b.url(&format!("/v1/interactions/{id}/wait?timeout_secs=60"));
        let client = b.client.clone();
        tokio::spawn(async move { split(client.get(url).send().await.unwrap()).await })
    };
    holds(&b, 1).await;
    let (status, body) = a
        .respond(
            &id,
            &json!({"decision": "deny", "message": "not now", "by": "Bo"}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let (_, body) = waiting.await.unwrap();
    assert_eq!(body["result"]["behavior"], "deny", "{body}");
    // Neither holds it as pending any more.
    holds(&a, 0).await;
    holds(&b, 0).await;

    // A second answer, on either replica, loses with the winner's resolution.
    let (status, body) = a
        .respond(&id, &json!({"decision": "allow", "by": "Cy"}))
        .await;
    assert_eq!(status, StatusCode::CONFLICT, "{body}");
    assert_eq!(body["error"]["code"], "already_resolved", "{body}");
    Arc::into_inner(a).expect("one owner").stop().await;
    b.stop().await;
}

/// The audit entries of `action` about `id`, as the API lists them.
async fn audited(app: &TestApp, id: &str, action: &str) -> Vec<Value> {
    let (status, body) = app.get("/v1/audit?limit=1000").await;
    assert_eq!(status, StatusCode::OK, "{body}");
    body["entries"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .into_iter()
        .filter(|e| e["interaction_id"] == id && e["action"] == action)
        .collect()
}

async fn each_expiry_is_applied_once_and_never_beats_an_answer(schema: String) {
    let a = replica(&schema).await;
    let b = replica(&schema).await;
    // Both replicas hold it, so both deadlines fire; the store applies one.
    let (status, body) = a
        .post(
            "/v1/interactions",
            &json!({"id": "short", "tool_name": "Bash", "input": {"command": "x"}, "timeout_secs": 1}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    holds(&b, 1).await;
    let (_, body) = b.get("/v1/interactions/short/wait?timeout_secs=30").await;
    assert_eq!(body["resolution"]["outcome"], "expired", "{body}");
    holds(&a, 0).await;
    holds(&b, 0).await;
    // Give the losing deadline every chance to write.
    let expired = eventually("the one expiry in the audit trail", || async {
        let e = audited(&a, "short", "expired").await;
        (!e.is_empty()).then_some(e)
    })
    .await;
    assert_eq!(expired.len(), 1, "{expired:?}");

    // Answered on B before its deadline: the expiry that A and B schedule never wins.
    let (status, body) = a
        .post(
            "/v1/interactions",
            &json!({"id": "answered", "tool_name": "Bash", "input": {"command": "y"}, "timeout_secs": 2}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    holds(&b, 1).await;
    let (status, body) = b
        .respond("answered", &json!({"decision": "allow", "by": "Ada"}))
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    // Both replicas dropped its deadline: no expiry can follow.
    for app in [&a, &b] {
        let registry = app.registry.clone();
        wait_until("the deadline to leave the queue", || {
            registry.scheduled_deadlines() == 0
        })
        .await;
    }
    let (_, body) = a.get("/v1/interactions/answered").await;
    assert_eq!(body["resolution"]["outcome"], "allowed", "{body}");
    assert!(audited(&a, "answered", "expired").await.is_empty());
    a.stop().await;
    b.stop().await;
}
