//! The memory pending interactions may hold: per agent token and in all, each past its bound
//! refused clearly with nothing written, and released as interactions are answered.

use imrelay::settings::Secret;
use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::support::{spawn_with, split};

const AGENT_A: &str = "agent-token-a-0123456789";
const AGENT_B: &str = "agent-token-b-0123456789";
const OPERATOR: &str = "operator-token-0123456789";

#[tokio::test]
async fn pending_bytes_are_bounded_per_token_and_in_all() {
    let mib = 1024 * 1024;
    let app = spawn_with(|s| {
        s.auth.agent_tokens = vec![Secret::new(AGENT_A), Secret::new(AGENT_B)];
        s.auth.operator_tokens = vec![Secret::new(OPERATOR)];
        s.interactions.max_pending_bytes = 3 * mib;
        s.interactions.max_pending_bytes_per_token = 2 * mib;
    })
    .await;
    // Each holds a 900 KB input.
    let create = |token: &'static str, id: &str| {
        let body = json!({"id": id, "tool_name": "Bash",
                          "input": {"command": "x".repeat(900_000)}});
        let req = app
            .client
            .post(app.url("/v1/interactions"))
            .bearer_auth(token)
            .json(&body);
        async move { split(req.send().await.expect("sent")).await }
    };
    for id in ["a1", "a2"] {
        let (status, body) = create(AGENT_A, id).await;
        assert_eq!(status, StatusCode::CREATED, "{id}: {body}");
    }
    // A's share is used up; nothing is written for the refused one.
    let (status, body) = create(AGENT_A, "a3").await;
    assert_eq!(status, StatusCode::TOO_MANY_REQUESTS, "{body}");
    assert_eq!(body["error"]["code"], "pending_quota", "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap_or("")
            .contains("max_pending_bytes_per_token"),
        "{body}"
    );
    // B has its own share, until the whole is used up.
    let (status, body) = create(AGENT_B, "b1").await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    let (status, body) = create(AGENT_B, "b2").await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{body}");
    assert_eq!(body["error"]["code"], "pending_full", "{body}");
    let get = |id: &str| {
        let req = app
            .client
            .get(app.url(&format!("/v1/interactions/{id}")))
            .bearer_auth(OPERATOR);
        async move { split(req.send().await.expect("sent")).await }
    };
    for id in ["a3", "b2"] {
        assert_eq!(
            get(id).await.0,
            StatusCode::NOT_FOUND,
            "{id} was not written"
        );
    }
    // An answer releases what its interaction held.
    let (status, body): (StatusCode, Value) = split(
        app.client
            .post(app.url("/v1/interactions/a1/respond"))
            .bearer_auth(OPERATOR)
            .json(&json!({"decision": "allow"}))
            .send()
            .await
            .expect("sent"),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let (status, body) = create(AGENT_A, "a3").await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
}

#[tokio::test]
async fn a_listing_is_bounded_in_bytes_and_pages_on_with_its_cursor() {
    let app = crate::support::spawn_app().await;
    for n in 0..10 {
        let body = json!({"id": format!("big-{n}"), "tool_name": "Bash",
                          "input": {"command": "x".repeat(900_000)}});
        let (status, reply) = app.post("/v1/interactions", &body).await;
        assert_eq!(status, StatusCode::CREATED, "{reply}");
    }
    let mut seen = Vec::new();
    let mut cursor: Option<String> = None;
    for _ in 0..10 {
        let mut url = app.url("/v1/interactions?status=pending&limit=500");
        if let Some(c) = &cursor {
            url.push_str(&format!("&cursor={c}"));
        }
        let resp = app.client.get(url).send().await.expect("sent");
        assert_eq!(resp.status(), StatusCode::OK);
        let bytes = resp.bytes().await.expect("body");
        // 4 MiB of interactions at most (here: four of them), never all ten at once.
        assert!(
            bytes.len() <= 4 * 1024 * 1024 + 1024,
            "{} bytes",
            bytes.len()
        );
        let page: Value = serde_json::from_slice(&bytes).expect("JSON");
        let items = page["interactions"].as_array().expect("a list");
        assert!(
            !items.is_empty() && items.len() < 10,
            "{} items",
            items.len()
        );
        seen.extend(items.iter().map(|i| i["id"].as_str().unwrap().to_string()));
        match page["next_cursor"].as_str() {
            Some(c) => cursor = Some(c.to_string()),
            None => break,
        }
    }
    seen.sort();
    let all: Vec<String> = (0..10).map(|n| format!("big-{n}")).collect();
    assert_eq!(seen, all, "every interaction listed once");
}
