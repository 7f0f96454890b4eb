//! Durability: the real binary is killed with SIGKILL and restarted on the same database.

use std::process::Command;
use std::time::Duration;

use futures_util::StreamExt;
use reqwest::StatusCode;
use serde_json::{Value, json};

use super::support::{Server, long_poll, wait_until};

async fn call(client: &reqwest::Client, req: reqwest::RequestBuilder) -> (StatusCode, Value) {
    let _ = client;
    answer(req.send().await.expect("request")).await
}

/// The status and JSON body of `resp`.
async fn answer(resp: reqwest::Response) -> (StatusCode, Value) {
    let status = resp.status();
    (status, resp.json().await.unwrap_or(Value::Null))
}

#[tokio::test]
async fn sigkill_with_pending_and_resolved_interactions_loses_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("data/imrelay.db");
    let client = reqwest::Client::new();
    let server = Server::start(&db);
    let base = server.base.clone();

    // 600 interactions, created concurrently; 100 of them answered just before the kill.
    let created: Vec<(String, Value)> = futures_util::stream::iter(0..600)
        .map(|n| {
            let client = client.clone();
            let base = base.clone();
            async move {
                let id = format!("toolu_{n:04}");
                let (status, body) = call(
                    &client,
                    client.post(format!("{base}/v1/interactions")).json(
                        &json!({"id": id, "tool_name": "Bash", "input": {"command": format!("echo {n}")}, "timeout_secs": 3600}),
                    ),
                )
                .await;
                assert_eq!(status, StatusCode::CREATED, "{body}");
                (id, body)
            }
        })
        .buffer_unordered(32)
        .collect()
        .await;
    let mut answered = Vec::new();
    for (id, _) in created
        .iter()
        .filter(|(id, _)| id.ends_with('0') || id.ends_with('5'))
        .take(100)
    {
        let decision = if answered.len() % 2 == 0 {
            "allow"
        } else {
            "deny"
        };
        let (status, body) = call(
            &client,
            client
                .post(format!("{base}/v1/interactions/{id}/respond"))
                .json(&json!({"decision": decision, "by": "alice"})),
        )
        .await;
        assert_eq!(status, StatusCode::OK, "{body}");
        answered.push((id.clone(), body["resolution"].clone()));
    }
    // One whose deadline passes while the server is down.
    let (status, short) = call(
        &client,
        client
            .post(format!("{base}/v1/interactions"))
            .json(&json!({"id": "short-lived", "tool_name": "Bash", "input": {"command": "x"}, "timeout_secs": 1})),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED);

    server.kill();
    let deadline: jiff::Timestamp = short["deadline"]
        .as_str()
        .and_then(|d| d.parse().ok())
        .expect("a deadline");
    wait_until(
        "the short-lived deadline passes while the server is down",
        || jiff::Timestamp::now() > deadline,
    )
    .await;

    let server = Server::start(&db);
    let base = server.base.clone();

    // Every resolution is still there.
    for (id, resolution) in &answered {
        let (status, body) =
            call(&client, client.get(format!("{base}/v1/interactions/{id}"))).await;
        assert_eq!(status, StatusCode::OK);
        assert_eq!(&body["resolution"], resolution, "{id}");
    }
    // Every other one is still pending, with its original deadline.
    let answered_ids: std::collections::HashSet<&str> =
        answered.iter().map(|(i, _)| i.as_str()).collect();
    let mut pending = 0;
    for (id, before) in &created {
        if answered_ids.contains(id.as_str()) {
            continue;
        }
        let (_, body) = call(&client, client.get(format!("{base}/v1/interactions/{id}"))).await;
        assert_eq!(body["status"], "pending", "{id}");
        assert_eq!(body["deadline"], before["deadline"], "{id}");
        pending += 1;
    }
    assert_eq!(pending, 500);

    // The deadline that passed during the downtime expired at start-up.
    let (_, body) = call(
        &client,
        client.get(format!("{base}/v1/interactions/short-lived")),
    )
    .await;
    assert_eq!(body["resolution"]["outcome"], "expired", "{body}");
    assert_eq!(body["deadline"], short["deadline"]);

    // An agent re-attaching with the same id gets the decision made before the crash.
    let (id, resolution) = &answered[0];
    let n: u32 = id.trim_start_matches("toolu_").parse().unwrap();
    let (status, body) = call(
        &client,
        client
            .post(format!("{base}/v1/interactions?wait_secs=5"))
            .json(
                &json!({"id": id, "tool_name": "Bash", "input": {"command": format!("echo {n}")}}),
            ),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(&body["resolution"], resolution);
    let (status, body) = call(
        &client,
        client.get(format!("{base}/v1/interactions/{id}/wait")),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body["result"]["behavior"], "allow");

    // Answering a pending one after the restart wakes its waiter.
    let waiter = long_poll(
        &client,
        &base,
        format!("{base}/v1/interactions/toolu_0001/wait?timeout_secs=30"),
    )
    .await;
    let (status, _) = call(
        &client,
        client
            .post(format!("{base}/v1/interactions/toolu_0001/respond"))
            .json(&json!({"decision": "allow", "by": "bob"})),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    let (status, body) = answer(waiter.await.unwrap()).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body["resolution"]["by"], "bob");
    server.kill();
}

#[tokio::test]
async fn check_config_prints_redacted_settings() {
    let out = Command::new(env!("CARGO_BIN_EXE_imrelay"))
        .arg("check-config")
        .env("IMRELAY__AUTH__OPERATOR_TOKENS", "super-secret-token")
        .output()
        .expect("runs");
    assert!(out.status.success());
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("listen = \"127.0.0.1:8787\""), "{stdout}");
    assert!(stdout.contains("[redacted]"));
    assert!(!stdout.contains("super-secret-token"));

    let bad = Command::new(env!("CARGO_BIN_EXE_imrelay"))
        .arg("check-config")
        .env("IMRELAY__SERVER__LISTEN", "0.0.0.0:8787")
        .output()
        .expect("runs");
    assert!(!bad.status.success());
    let stderr = String::from_utf8_lossy(&bad.stderr);
    assert!(stderr.contains("tokens are required"), "{stderr}");
}

#[tokio::test]
async fn sigterm_shuts_down_cleanly_and_ends_long_polls() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(&dir.path().join("term.db"));
    let client = reqwest::Client::new();
    let base = server.base.clone();
    call(
        &client,
        client
            .post(format!("{base}/v1/interactions"))
            .json(&json!({"id": "t1", "tool_name": "Bash", "input": {}})),
    )
    .await;
    let poll = long_poll(
        &client,
        &base,
        format!("{base}/v1/interactions/t1/wait?timeout_secs=60"),
    )
    .await;
    let pid = server.child.id();
    let status = Command::new("kill")
        .args(["-TERM", &pid.to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    // The long-poll is answered (still pending) instead of being cut off.
    let (status, body) = answer(
        tokio::time::timeout(Duration::from_secs(10), poll)
            .await
            .expect("the long-poll ends promptly")
            .unwrap(),
    )
    .await;
    assert_eq!(status, StatusCode::ACCEPTED);
    assert_eq!(body["status"], "pending");
    let mut server = server;
    let exit = tokio::task::spawn_blocking(move || {
        let r = server.child.wait();
        (r, server)
    })
    .await
    .unwrap();
    assert!(exit.0.unwrap().success(), "exit status");
}

#[tokio::test]
async fn sigkill_during_an_outbox_delivery_resumes_it_after_the_restart() {
    use axum::body::Bytes;
    use axum::extract::State;
    use axum::http::HeaderMap;
    use std::sync::{Arc, Mutex};

    // A receiver that holds the first request without answering, then accepts.
    #[derive(Clone, Default)]
    struct Got(Arc<Mutex<Vec<(String, Value)>>>);
    async fn receive(State(got): State<Got>, headers: HeaderMap, body: Bytes) -> &'static str {
        let id = headers["webhook-id"].to_str().unwrap().to_string();
        let first = {
            let mut got = got.0.lock().unwrap();
            got.push((id, serde_json::from_slice(&body).unwrap()));
            got.len() == 1
        };
        if first {
            std::future::pending::<()>().await;
        }
        "ok"
    }
    let got = Got::default();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/hook", listener.local_addr().unwrap());
    let app = axum::Router::new()
        .route("/hook", axum::routing::post(receive))
        .with_state(got.clone());
    tokio::spawn(async move { axum::serve(listener, app).await });
    let wait_for = |n: usize| {
        let got = got.clone();
        async move {
            for _ in 0..1000 {
                if got.0.lock().unwrap().len() >= n {
                    return;
                }
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            panic!("the receiver did not get {n} requests");
        }
    };

    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("outbox.db");
    let config = dir.path().join("imrelay.toml");
    std::fs::write(
        &config,
        format!(
            r#"
[[webhooks]]
name = "pager"
url = "{url}"
secret = "whsec_dGhpcyBpcyBhIDMyIGJ5dGUgc2VjcmV0IGtleSEh"
events = ["interaction.created"]
timeout_secs = 300
"#
        ),
    )
    .unwrap();
    let client = reqwest::Client::new();
    let server = Server::start_with(&db, Some(&config));
    let (status, _) = call(
        &client,
        client
            .post(format!("{}/v1/interactions", server.base))
            .json(&json!({"id": "paged", "tool_name": "Bash", "input": {"command": "x"}})),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED);
    // The delivery is under way (leased, its request unanswered) when the process dies.
    wait_for(1).await;
    server.kill();

    let server = Server::start_with(&db, Some(&config));
    wait_for(2).await;
    let got = got.0.lock().unwrap().clone();
    assert_eq!(
        got[1].0, got[0].0,
        "the same event, under the same webhook-id"
    );
    assert_eq!(got[1].1["data"]["interaction"]["id"], "paged");
    drop(server);
}
