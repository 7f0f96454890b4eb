//! MCP sessions on `/mcp`: closing one withdraws what it waits for; caps per agent token and
//! in all, with the refusal a client over them gets; idle sessions expiring while one waiting
//! for a person stays; a call whose connection dropped withdrawn unless its client comes back;
//! and the GET streams' own budget.

use imrelay::config::Secret;
use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::support::*;

fn initialize(name: &str) -> String {
    json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": name, "version": "1"}}})
    .to_string()
}

/// Opens a session with `token`; its id, or the refusal's status and body.
async fn open(
    app: &TestApp,
    token: Option<&str>,
) -> Result<String, (StatusCode, Value, reqwest::header::HeaderMap)> {
    let resp = post_mcp(app, token, &initialize("sessions"), None).await;
    if resp.status() != StatusCode::OK {
        let headers = resp.headers().clone();
        let (s, body) = split(resp).await;
        return Err((s, body, headers));
    }
    let session = mcp_session(&resp);
    let _ = resp.text().await;
    let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    let r = post_mcp(app, token, &initialized.to_string(), Some(&session)).await;
    assert!(r.status().is_success(), "{}", r.status());
    Ok(session)
}

async fn delete(app: &TestApp, token: Option<&str>, session: &str) -> reqwest::Response {
    let mut req = app
        .client
        .delete(app.url("/mcp"))
        .header("Mcp-Session-Id", session)
        .header("MCP-Protocol-Version", "2025-06-18");
    if let Some(t) = token {
        req = req.bearer_auth(t);
    }
    req.send().await.expect("DELETE")
}

/// Starts `request_approval` with `arguments` in `session`; the response, still streaming.
async fn start_call(app: &TestApp, session: &str, arguments: Value) -> reqwest::Response {
    let body = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                      "params": {"name": "request_approval", "arguments": arguments}});
    let resp = post_mcp(app, None, &body.to_string(), Some(session)).await;
    assert_eq!(resp.status(), StatusCode::OK);
    resp
}

async fn pending_titled(app: &TestApp, title: &str) -> Value {
    eventually(&format!("a pending interaction titled {title}"), || async {
        let (_, body) = app.get("/v1/interactions?status=pending").await;
        body["interactions"]
            .as_array()?
            .iter()
            .find(|i| i["title"] == title)
            .cloned()
    })
    .await
}

#[tokio::test]
async fn deleting_a_session_withdraws_its_waiting_call_at_once() {
    let app = spawn_app().await;
    let session = open(&app, None).await.unwrap();
    let call = start_call(&app, &session, json!({"action": "x", "timeout_secs": 600})).await;
    let i = pending_titled(&app, "x").await;
    let id = i["id"].as_str().unwrap();
    let resp = delete(&app, None, &session).await;
    // What the official SDKs' servers answer, and their clients expect (the Python SDK's
    // client reports anything but 200 or 204 as a failed termination).
    assert_eq!(resp.status(), StatusCode::OK);
    // Withdrawn by the time the DELETE is answered, on every channel.
    let (_, got) = app.get(&format!("/v1/interactions/{id}")).await;
    assert_eq!(got["resolution"]["outcome"], "cancelled", "{got}");
    assert_eq!(
        got["resolution"]["result"]["message"], "The MCP client closed its session",
        "{got}"
    );
    assert_eq!(got["resolution"]["by"], "sessions/1", "{got}");
    drop(call);
    // The session is gone: a request in it, or closing it again, is a 404.
    let list = json!({"jsonrpc": "2.0", "id": 3, "method": "tools/list"}).to_string();
    let (s, body) = split(post_mcp(&app, None, &list, Some(&session)).await).await;
    assert_eq!(s, StatusCode::NOT_FOUND, "{body}");
    let (s, body) = split(delete(&app, None, &session).await).await;
    assert_eq!(s, StatusCode::NOT_FOUND, "{body}");
    assert_eq!(body["error"]["code"], -32600, "{body}");
    let (s, _) = split(delete(&app, None, "no-such-session").await).await;
    assert_eq!(s, StatusCode::NOT_FOUND);
    app.stop().await;
}

const TOKEN_A: &str = "agent-token-a-0123456789";
const TOKEN_B: &str = "agent-token-b-0123456789";

#[tokio::test]
async fn sessions_are_capped_per_agent_token_and_in_all_with_a_refusal_that_says_what_to_do() {
    let app = spawn_with(|s| {
        s.auth.agent_tokens = vec![Secret::new(TOKEN_A), Secret::new(TOKEN_B)];
        s.mcp.max_sessions = 3;
        s.mcp.max_sessions_per_token = 2;
    })
    .await;
    let a1 = open(&app, Some(TOKEN_A)).await.unwrap();
    let _a2 = open(&app, Some(TOKEN_A)).await.unwrap();
    // A third for the same token: 429, with a JSON-RPC error answering the initialize.
    let (status, body, headers) = open(&app, Some(TOKEN_A)).await.unwrap_err();
    assert_eq!(status, StatusCode::TOO_MANY_REQUESTS, "{body}");
    assert_eq!(body["jsonrpc"], "2.0");
    assert_eq!(body["id"], 1);
    assert_eq!(body["error"]["code"], -32000);
    let message = body["error"]["message"].as_str().unwrap();
    for words in [
        "2 MCP sessions",
        "mcp.max_sessions_per_token",
        "DELETE /mcp",
        "600 s",
    ] {
        assert!(message.contains(words), "{words}: {message}");
    }
    assert_eq!(body["error"]["data"]["limit"], "mcp.max_sessions_per_token");
    assert_eq!(headers["retry-after"], "60");
    // Another token still gets one, up to the cap in all: 503.
    let _b1 = open(&app, Some(TOKEN_B)).await.unwrap();
    let (status, body, headers) = open(&app, Some(TOKEN_B)).await.unwrap_err();
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{body}");
    assert_eq!(body["error"]["data"]["limit"], "mcp.max_sessions");
    assert!(headers.contains_key("retry-after"));
    // A refused initialize holds nothing, and a closed session frees its place.
    assert_eq!(
        delete(&app, Some(TOKEN_A), &a1).await.status(),
        StatusCode::OK
    );
    let _b2 = open(&app, Some(TOKEN_B)).await.unwrap();
    let metrics = app.metrics_with("imrelay_mcp_sessions 3\n").await;
    assert!(
        metrics.contains(r#"imrelay_mcp_refused_total{limit="max_sessions_per_token"} 1"#),
        "{metrics}"
    );
    assert!(
        metrics.contains(r#"imrelay_mcp_refused_total{limit="max_sessions"} 1"#),
        "{metrics}"
    );
    app.stop().await;
}

#[tokio::test]
async fn an_idle_session_closes_but_one_whose_call_waits_for_a_person_stays() {
    let app = spawn_with(|s| s.mcp.session_idle_secs = 1).await;
    // Opened first, so it would be the first to go if a waiting call did not count.
    let waiting = open(&app, None).await.unwrap();
    let call = start_call(
        &app,
        &waiting,
        json!({"action": "slow", "timeout_secs": 600}),
    )
    .await;
    let i = pending_titled(&app, "slow").await;
    let idle = open(&app, None).await.unwrap();
    // Watched from the metrics: a request in a session would keep it from being idle.
    app.metrics_with("imrelay_mcp_sessions 1\n").await;
    let list = json!({"jsonrpc": "2.0", "id": 3, "method": "tools/list"}).to_string();
    let (status, body) = split(post_mcp(&app, None, &list, Some(&idle)).await).await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{body}");
    let resp = post_mcp(&app, None, &list, Some(&waiting)).await;
    assert_eq!(resp.status(), StatusCode::OK);
    drop(resp);
    // The person answers long after; the call ends, and then its session idles out too.
    let (s, _) = app
        .respond(i["id"].as_str().unwrap(), &json!({"decision": "allow"}))
        .await;
    assert_eq!(s, StatusCode::OK);
    let (_, answered) = split(call).await;
    assert!(answered.to_string().contains("approved"), "{answered}");
    app.metrics_with("imrelay_mcp_sessions 0\n").await;
    let (status, body) = split(post_mcp(&app, None, &list, Some(&waiting)).await).await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{body}");
    app.stop().await;
}

/// A session of protocol 2025-11-25, whose streams start with an event id (priming).
async fn open_resumable(app: &TestApp) -> String {
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "resumer", "version": "1"}}});
    let resp = post_mcp(app, None, &init.to_string(), None).await;
    assert_eq!(resp.status(), StatusCode::OK);
    let session = mcp_session(&resp);
    let _ = resp.text().await;
    let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    let r = in_resumable(app, &session, &initialized).await;
    assert!(r.status().is_success(), "{}", r.status());
    session
}

/// POSTs `message` in the 2025-11-25 session `session`.
async fn in_resumable(app: &TestApp, session: &str, message: &Value) -> reqwest::Response {
    app.client
        .post(app.url("/mcp"))
        .header("Content-Type", "application/json")
        .header("Accept", "application/json, text/event-stream")
        .header("Mcp-Session-Id", session)
        .header("MCP-Protocol-Version", "2025-11-25")
        .body(message.to_string())
        .send()
        .await
        .expect("POST")
}

/// `request_approval` (JSON-RPC id `rpc`) in the 2025-11-25 `session`; the response, still
/// streaming, and the id of its first event.
async fn call_resumable(
    app: &TestApp,
    session: &str,
    rpc: u64,
    arguments: Value,
) -> (reqwest::Response, String) {
    let body = json!({"jsonrpc": "2.0", "id": rpc, "method": "tools/call",
                      "params": {"name": "request_approval", "arguments": arguments}});
    let mut resp = in_resumable(app, session, &body).await;
    assert_eq!(resp.status(), StatusCode::OK);
    let mut seen = String::new();
    let id = loop {
        let chunk = resp.chunk().await.expect("read").expect("a first event");
        seen.push_str(&String::from_utf8_lossy(&chunk));
        if let Some(line) = seen.lines().find_map(|l| l.strip_prefix("id:")) {
            break line.trim().to_string();
        }
    };
    (resp, id)
}

#[tokio::test]
async fn a_call_whose_connection_drops_is_withdrawn_unless_its_client_comes_back() {
    let app = spawn_with(|s| s.mcp.reconnect_grace_secs = 4).await;
    let session = open_resumable(&app).await;
    let (resumed, event_id) = call_resumable(
        &app,
        &session,
        2,
        json!({"action": "resumed", "timeout_secs": 600}),
    )
    .await;
    let keyed = json!({"action": "retried", "id": "retried-1", "timeout_secs": 600});
    let (retried, _) = call_resumable(&app, &session, 3, keyed.clone()).await;
    let resumed_i = pending_titled(&app, "resumed").await;
    let retried_i = pending_titled(&app, "retried").await;
    // Both connections drop; the client comes back for both within the grace: it resumes
    // one stream (`Last-Event-ID`) and calls the other again with the same id.
    drop((resumed, retried));
    let resume = app
        .client
        .get(app.url("/mcp"))
        .header("Accept", "text/event-stream")
        .header("Mcp-Session-Id", &session)
        .header("MCP-Protocol-Version", "2025-11-25")
        .header("Last-Event-ID", &event_id)
        .send()
        .await
        .expect("GET");
    assert_eq!(resume.status(), StatusCode::OK);
    let (again, _) = call_resumable(&app, &session, 4, keyed).await;
    // A third call drops after them, and nobody comes back for it: it is withdrawn on every
    // channel, by the client, once the grace has passed.
    let (abandoned, _) = call_resumable(
        &app,
        &session,
        5,
        json!({"action": "abandoned", "timeout_secs": 600}),
    )
    .await;
    let abandoned_i = pending_titled(&app, "abandoned").await;
    drop(abandoned);
    let id = abandoned_i["id"].as_str().unwrap().to_string();
    let got = eventually("the abandoned call is withdrawn", || async {
        let (_, got) = app.get(&format!("/v1/interactions/{id}")).await;
        (got["status"] != "pending").then_some(got)
    })
    .await;
    assert_eq!(got["resolution"]["outcome"], "cancelled", "{got}");
    assert_eq!(
        got["resolution"]["result"]["message"],
        "The MCP client's connection dropped and it did not come back",
        "{got}"
    );
    assert_eq!(got["resolution"]["by"], "resumer/1", "{got}");
    // The two whose grace began earlier still wait, and their answers reach the client.
    for i in [&resumed_i, &retried_i] {
        let (_, got) = app
            .get(&format!("/v1/interactions/{}", i["id"].as_str().unwrap()))
            .await;
        assert_eq!(got["status"], "pending", "{got}");
        let (s, _) = app
            .respond(i["id"].as_str().unwrap(), &json!({"decision": "allow"}))
            .await;
        assert_eq!(s, StatusCode::OK);
    }
    for stream in [resume, again] {
        let text = stream
            .text()
            .await
            .expect("the stream ends with the answer");
        assert!(text.contains("approved"), "{text}");
    }
    app.stop().await;
}

async fn get_stream(app: &TestApp, session: &str) -> reqwest::Response {
    app.client
        .get(app.url("/mcp"))
        .header("Accept", "text/event-stream")
        .header("Mcp-Session-Id", session)
        .header("MCP-Protocol-Version", "2025-06-18")
        .send()
        .await
        .expect("GET")
}

#[tokio::test]
async fn get_streams_have_a_budget_of_their_own() {
    let app = spawn_with(|s| {
        s.mcp.max_streams = 2;
        s.server.max_event_streams = 1;
    })
    .await;
    let session = open(&app, None).await.unwrap();
    let first = get_stream(&app, &session).await;
    let second = get_stream(&app, &session).await;
    assert_eq!(first.status(), StatusCode::OK);
    assert_eq!(second.status(), StatusCode::OK);
    let refused = get_stream(&app, &session).await;
    assert_eq!(refused.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(refused.headers()["retry-after"], "5");
    let (_, body) = split(refused).await;
    assert_eq!(body["error"]["code"], -32000, "{body}");
    assert_eq!(body["error"]["data"]["limit"], "mcp.max_streams", "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("Tool calls work without"),
        "{body}"
    );
    // The API's event streams keep theirs, and tool calls go on.
    let events = Sse::connect(&app, None).await;
    let list = json!({"jsonrpc": "2.0", "id": 3, "method": "tools/list"}).to_string();
    assert_eq!(
        post_mcp(&app, None, &list, Some(&session)).await.status(),
        StatusCode::OK
    );
    // A stream that ends gives its place back.
    drop(first);
    let again = eventually("a place for a GET stream", || async {
        let resp = get_stream(&app, &session).await;
        (resp.status() == StatusCode::OK).then_some(resp)
    })
    .await;
    app.metrics_with("imrelay_mcp_streams 2\n").await;
    drop((second, again, events));
    app.stop().await;
}
