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
        s.auth.operator_tokens = vec![imrelay::config::OperatorToken::new(OPERATOR)];
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
async fn a_listing_of_huge_items_stays_under_its_byte_bound_and_pages_on() {
    use imrelay::store::{SqliteStore, Store, Synchronous};
    use std::sync::Arc;
    let dir = tempfile::tempdir().unwrap();
    let store: Arc<dyn Store> =
        Arc::new(SqliteStore::open(dir.path().join("list.db"), Synchronous::Normal).unwrap());
    let app = crate::support::spawn_on(crate::support::settings(), store).await;
    let count = 12;
    for n in 0..count {
        let body = json!({"id": format!("big-{n:02}"), "tool_name": "Bash", "title": "t".repeat(5000),
                          "input": {"command": format!("{n} {}", "x".repeat(900_000))}});
        let (status, reply) = app.post("/v1/interactions", &body).await;
        assert_eq!(status, StatusCode::CREATED, "{reply}");
    }
    let mut seen = Vec::new();
    let mut cursor: Option<String> = None;
    for _ in 0..count + 1 {
        let mut url = app.url("/v1/interactions?status=pending&limit=500");
        if let Some(c) = &cursor {
            url.push_str(&format!("&cursor={c}"));
        }
        let resp = app.client.get(url).send().await.expect("sent");
        assert_eq!(resp.status(), StatusCode::OK);
        let bytes = resp.bytes().await.expect("body");
        let page: Value = serde_json::from_slice(&bytes).expect("JSON");
        let items = page["interactions"].as_array().expect("a list");
        // A summary of each: a few KB an item, never the 900 KB inputs.
        assert!(
            bytes.len() <= items.len().max(1) * 8 * 1024,
            "{} bytes for {} items",
            bytes.len(),
            items.len()
        );
        for i in items {
            assert_eq!(i["truncated"], true, "{i}");
            let id = i["id"].as_str().unwrap();
            let n: usize = id[4..].parse().unwrap();
            let whole = format!("{n} {}", "x".repeat(900_000));
            assert_eq!(
                i["input_bytes"],
                json!({"command": whole}).to_string().len()
            );
            let shown = i["input"]["command"].as_str().unwrap();
            assert!(shown.ends_with('…') && whole.starts_with(shown.trim_end_matches('…')));
            assert!(i["title"].as_str().unwrap().len() < 5000);
            seen.push(id.to_string());
        }
        match page["next_cursor"].as_str() {
            Some(c) => cursor = Some(c.to_string()),
            None => break,
        }
    }
    // The store reads about 8 MB of whole interactions for a page: these twelve take two.
    assert!(cursor.is_some(), "one page held everything");
    seen.sort();
    let all: Vec<String> = (0..count).map(|n| format!("big-{n:02}")).collect();
    assert_eq!(seen, all, "every interaction listed once");
    // The whole interaction is at its own endpoint.
    let (status, i) = app.get("/v1/interactions/big-03").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        i["input"]["command"],
        format!("3 {}", "x".repeat(900_000)).as_str()
    );
    assert!(i.get("truncated").is_none());
}

/// A Claude Code hook body for `event` with a 900 KB command.
fn big_hook(event: &str, tool_use_id: &str) -> Value {
    json!({"session_id": "s-budget", "cwd": "/tmp", "hook_event_name": event,
           "tool_name": "Bash", "tool_input": {"command": "x".repeat(900_000)},
           "tool_use_id": tool_use_id})
}

/// Opens an MCP session with `token`; its id.
async fn mcp_session(app: &crate::support::TestApp, token: &str) -> String {
    use crate::support::{mcp_session, post_mcp};
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "budget-test", "version": "1"}}});
    let resp = post_mcp(app, Some(token), &init.to_string(), None).await;
    assert!(resp.status().is_success(), "{}", resp.status());
    let session = mcp_session(&resp);
    let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    post_mcp(app, Some(token), &initialized.to_string(), Some(&session)).await;
    session
}

/// Calls `request_approval` with 900 KB of details in `session`; the JSON-RPC response.
async fn big_approval(
    app: &crate::support::TestApp,
    token: &str,
    session: &str,
    id: &str,
) -> Value {
    let call = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
        "name": "request_approval", "arguments": {"action": "Run it", "id": id,
        "tool": "Bash", "details": {"command": "x".repeat(900_000)}}}});
    let resp = crate::support::post_mcp(app, Some(token), &call.to_string(), Some(session)).await;
    let text = resp.text().await.expect("body");
    text.lines()
        .filter_map(|l| l.strip_prefix("data:"))
        .filter_map(|d| serde_json::from_str::<Value>(d.trim()).ok())
        .chain(serde_json::from_str::<Value>(&text).ok())
        .find(|m| m["id"] == 2)
        .unwrap_or_else(|| {
            panic!(
                "no response to the call in {}",
                &text[..text.len().min(500)]
            )
        })
}

#[tokio::test]
async fn hook_and_mcp_creations_count_against_the_agent_tokens_budget() {
    use crate::support::eventually;
    let mib = 1024 * 1024;
    let app = spawn_with(|s| {
        s.auth.agent_tokens = vec![Secret::new(AGENT_A), Secret::new(AGENT_B)];
        s.auth.operator_tokens = vec![imrelay::config::OperatorToken::new(OPERATOR)];
        s.interactions.max_pending_bytes = 64 * mib;
        s.interactions.max_pending_bytes_per_token = 2 * mib;
    })
    .await;
    let api = |token: &'static str, id: &str| {
        let body = json!({"id": id, "tool_name": "Bash",
                          "input": {"command": "x".repeat(900_000)}});
        let req = app
            .client
            .post(app.url("/v1/interactions"))
            .bearer_auth(token)
            .json(&body);
        async move { split(req.send().await.expect("sent")).await }
    };
    let hook = |token: &'static str, body: Value| {
        let req = app
            .client
            .post(app.url("/v1/hooks/claude-code"))
            .bearer_auth(token)
            .json(&body);
        tokio::spawn(async move { split(req.send().await.expect("sent")).await })
    };
    let pending = || async {
        let (_, list) = split(
            app.client
                .get(app.url("/v1/interactions?status=pending"))
                .bearer_auth(OPERATOR)
                .send()
                .await
                .expect("sent"),
        )
        .await;
        let mut ids: Vec<String> = list["interactions"]
            .as_array()
            .expect("a list")
            .iter()
            .map(|i| i["id"].as_str().unwrap_or("").to_string())
            .collect();
        ids.sort();
        ids
    };

    // A uses its share through the API.
    for id in ["a1", "a2"] {
        let (status, body) = api(AGENT_A, id).await;
        assert_eq!(status, StatusCode::CREATED, "{body}");
    }
    // Then the hook cannot add to it: Claude Code is handed the decision back at once,
    // with why, and nothing is written.
    let (status, out) = hook(AGENT_A, big_hook("PreToolUse", "toolu_over"))
        .await
        .unwrap();
    assert_eq!(status, StatusCode::OK, "{out}");
    assert_eq!(
        out["hookSpecificOutput"]["permissionDecision"], "ask",
        "{out}"
    );
    let reason = out["hookSpecificOutput"]["permissionDecisionReason"]
        .as_str()
        .unwrap_or("");
    assert!(reason.contains("max_pending_bytes_per_token"), "{reason}");
    let (status, out) = hook(AGENT_A, big_hook("PermissionRequest", ""))
        .await
        .unwrap();
    assert_eq!((status, out), (StatusCode::OK, json!({})));
    // Nor can MCP: a tool error that says why, nothing written.
    let session = mcp_session(&app, AGENT_A).await;
    let answer = big_approval(&app, AGENT_A, &session, "mcp-over").await;
    assert_eq!(answer["result"]["isError"], true, "{answer}");
    let said = answer["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or("");
    assert!(said.contains("max_pending_bytes_per_token"), "{said}");
    assert_eq!(pending().await, ["a1", "a2"]);

    // B asks through the hook and MCP; those count in B's share, so the API refuses B's
    // third 900 KB request.
    let waiting_hook = hook(AGENT_B, big_hook("PreToolUse", "toolu_b"));
    let session_b = mcp_session(&app, AGENT_B).await;
    let waiting_call = {
        let app_url = app.url("/mcp");
        let client = app.client.clone();
        let call = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
            "name": "request_approval", "arguments": {"action": "Run it", "id": "mcp-b",
            "tool": "Bash", "details": {"command": "x".repeat(900_000)}}}});
        let session = session_b.clone();
        tokio::spawn(async move {
            client
                .post(app_url)
                .bearer_auth(AGENT_B)
                .header("Content-Type", "application/json")
                .header("Accept", "application/json, text/event-stream")
                .header("Mcp-Session-Id", session)
                .header("MCP-Protocol-Version", "2025-06-18")
                .body(call.to_string())
                .send()
                .await
                .expect("sent")
                .text()
                .await
                .expect("body")
        })
    };
    eventually("B's hook call and MCP call are pending", || async {
        (pending().await.len() == 4).then_some(())
    })
    .await;
    assert_eq!(pending().await, ["a1", "a2", "mcp-b", "toolu_b"]);
    let (status, body) = api(AGENT_B, "b-third").await;
    assert_eq!(status, StatusCode::TOO_MANY_REQUESTS, "{body}");
    assert_eq!(body["error"]["code"], "pending_quota", "{body}");
    // Answered, they release B's share.
    for id in ["toolu_b", "mcp-b"] {
        let (status, body) = split(
            app.client
                .post(app.url(&format!("/v1/interactions/{id}/respond")))
                .bearer_auth(OPERATOR)
                .json(&json!({"decision": "allow", "by": "ann"}))
                .send()
                .await
                .expect("sent"),
        )
        .await;
        assert_eq!(status, StatusCode::OK, "{body}");
    }
    let (status, out) = waiting_hook.await.unwrap();
    assert_eq!(status, StatusCode::OK);
    assert_eq!(out["hookSpecificOutput"]["permissionDecision"], "allow");
    assert!(waiting_call.await.unwrap().contains("\"approved\":true"));
    let (status, body) = api(AGENT_B, "b-third").await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
}
