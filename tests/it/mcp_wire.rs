//! `/mcp` as each kind of client sees it on the wire, with clients written out by hand over
//! real HTTP against the real server: a client of protocol 2025-06-18 that, like the
//! TypeScript SDK's client of that revision (Gemini CLI's), fails on any event whose data is
//! not a JSON-RPC message; a 2025-11-25 client that gets priming events and resumes a call
//! over a new connection; and `permission_prompt`'s result read the way Claude Code reads it.

use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::support::*;

/// A Streamable HTTP client of one protocol revision, in an initialized session.
struct Wire {
    http: reqwest::Client,
    url: String,
    version: &'static str,
    session: String,
}

/// What a client of `2025-06-18` (the TypeScript SDK before 2025-11-25, which Gemini CLI 0.61
/// uses) does with an event: `JSON.parse` its data and read a JSON-RPC message from it. An
/// event without JSON data (a priming event's empty `data:`) fails it ("Unexpected end of
/// JSON input"), and it never gets its tools.
fn read_as_2025_06_18(ev: &SseEvent) -> Value {
    assert_eq!(ev.event, "message", "an event of another type: {ev:?}");
    let v: Value = serde_json::from_str(&ev.raw).unwrap_or_else(|e| {
        panic!("a 2025-06-18 client fails on this event ({e}): {ev:?}");
    });
    assert_eq!(v["jsonrpc"], "2.0", "not a JSON-RPC message: {ev:?}");
    v
}

/// What a 2025-06-18 client reads from every one of `events`; the last message.
fn read_all_as_2025_06_18(events: &[SseEvent]) -> Value {
    let mut read: Vec<Value> = events.iter().map(read_as_2025_06_18).collect();
    read.pop().expect("events")
}

/// Every event of `sse` until the response to request `id` (included), or until the stream
/// ends.
async fn events_until_response(sse: &mut Sse, id: i64) -> Vec<SseEvent> {
    let mut out = Vec::new();
    while let Some(ev) = sse.next_within(std::time::Duration::from_secs(10)).await {
        let done = serde_json::from_str::<Value>(&ev.raw).is_ok_and(|v| v["id"] == id);
        out.push(ev);
        if done {
            break;
        }
    }
    out
}

impl Wire {
    fn post(&self, body: &Value) -> reqwest::RequestBuilder {
        self.http
            .post(&self.url)
            .header("Content-Type", "application/json")
            .header("Accept", "application/json, text/event-stream")
            .header("Mcp-Session-Id", &self.session)
            .header("MCP-Protocol-Version", self.version)
            .body(body.to_string())
    }

    /// Initializes a session speaking `version`; returns the client and the events of the
    /// `initialize` response.
    async fn connect(app: &TestApp, version: &'static str) -> (Wire, Vec<SseEvent>) {
        let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": version, "capabilities": {},
            "clientInfo": {"name": "wire", "version": "1"}}});
        let resp = app
            .client
            .post(app.url("/mcp"))
            .header("Content-Type", "application/json")
            .header("Accept", "application/json, text/event-stream")
            .body(init.to_string())
            .send()
            .await
            .expect("initialize");
        assert_eq!(resp.status(), StatusCode::OK);
        let session = mcp_session(&resp);
        let mut sse = Sse::from_response(resp);
        let events = events_until_response(&mut sse, 1).await;
        let wire = Wire {
            http: app.client.clone(),
            url: app.url("/mcp"),
            version,
            session,
        };
        let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
        let resp = wire.post(&initialized).send().await.expect("initialized");
        assert!(resp.status().is_success(), "{}", resp.status());
        (wire, events)
    }

    /// Sends request `id`; returns its response's event stream.
    async fn request(&self, id: i64, method: &str, params: Value) -> Sse {
        let body = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        let resp = self.post(&body).send().await.expect("a request");
        assert_eq!(resp.status(), StatusCode::OK);
        Sse::from_response(resp)
    }

    /// Opens the session's GET stream, resuming after `last_event_id` if given.
    async fn get(&self, last_event_id: Option<&str>) -> Sse {
        let mut req = self
            .http
            .get(&self.url)
            .header("Accept", "text/event-stream")
            .header("Mcp-Session-Id", &self.session)
            .header("MCP-Protocol-Version", self.version);
        if let Some(id) = last_event_id {
            req = req.header("Last-Event-ID", id);
        }
        let resp = req.send().await.expect("GET");
        assert_eq!(resp.status(), StatusCode::OK);
        Sse::from_response(resp)
    }

    async fn delete(&self) -> StatusCode {
        self.http
            .delete(&self.url)
            .header("Mcp-Session-Id", &self.session)
            .header("MCP-Protocol-Version", self.version)
            .send()
            .await
            .expect("DELETE")
            .status()
    }
}

/// The one pending interaction, once it exists.
async fn the_pending(app: &TestApp) -> Value {
    eventually("a pending interaction", || async {
        let (_, body) = app.get("/v1/interactions?status=pending").await;
        body["interactions"].as_array()?.first().cloned()
    })
    .await
}

#[tokio::test]
async fn a_2025_06_18_client_gets_only_events_with_json_rpc_data() {
    let app = spawn_app().await;
    let (wire, init) = Wire::connect(&app, "2025-06-18").await;
    let result = read_all_as_2025_06_18(&init);
    assert_eq!(result["result"]["protocolVersion"], "2025-06-18");
    let mut standalone = wire.get(None).await;
    let tools = events_until_response(&mut wire.request(2, "tools/list", json!({})).await, 2).await;
    let tools = read_all_as_2025_06_18(&tools);
    assert_eq!(tools["result"]["tools"].as_array().map(Vec::len), Some(3));
    let mut call = wire
        .request(
            3,
            "tools/call",
            json!({"name": "request_approval", "arguments": {"action": "Deploy"},
                   "_meta": {"progressToken": "p3"}}),
        )
        .await;
    let i = the_pending(&app).await;
    let (s, _) = app
        .respond(
            i["id"].as_str().unwrap(),
            &json!({"decision": "allow", "by": "ann"}),
        )
        .await;
    assert_eq!(s, StatusCode::OK);
    let events = events_until_response(&mut call, 3).await;
    let answer = read_all_as_2025_06_18(&events);
    assert_eq!(answer["result"]["structuredContent"]["approved"], true);
    // Closing the session ends the GET stream: everything it carried was JSON-RPC too.
    assert!(wire.delete().await.is_success());
    while let Some(ev) = standalone
        .next_within(std::time::Duration::from_secs(10))
        .await
    {
        read_as_2025_06_18(&ev);
    }
    app.stop().await;
}

#[tokio::test]
async fn a_2025_11_25_client_gets_priming_events_and_resumes_a_call_on_a_new_connection() {
    let app = spawn_app().await;
    let (wire, _) = Wire::connect(&app, "2025-11-25").await;
    // The GET stream starts with a priming event: an id to resume from, and a retry interval.
    let mut standalone = wire.get(None).await;
    let first = standalone.next().await;
    assert_eq!(first.raw, "", "{first:?}");
    assert!(first.id.is_some() && first.retry.is_some(), "{first:?}");
    drop(standalone);
    // So does a tool call's stream.
    let mut call = wire
        .request(
            2,
            "tools/call",
            json!({"name": "request_approval", "arguments": {"action": "Rotate the keys"}}),
        )
        .await;
    let priming = call.next().await;
    assert_eq!(priming.raw, "", "{priming:?}");
    assert_eq!(priming.retry, Some(3000), "{priming:?}");
    let resume_from = priming.id.clone().expect("an event id");
    // The connection drops while a person has not answered yet; the client comes back with
    // the last event id it saw, and the answer arrives on the new connection.
    drop(call);
    let mut resumed = wire.get(Some(&resume_from)).await;
    let i = the_pending(&app).await;
    let (s, _) = app
        .respond(
            i["id"].as_str().unwrap(),
            &json!({"decision": "deny", "message": "not today", "by": "ann"}),
        )
        .await;
    assert_eq!(s, StatusCode::OK);
    let events = events_until_response(&mut resumed, 2).await;
    let answer: Value = serde_json::from_str(&events.last().expect("events").raw).unwrap();
    assert_eq!(answer["id"], 2, "{events:?}");
    assert_eq!(answer["result"]["structuredContent"]["status"], "denied");
    assert_eq!(
        answer["result"]["structuredContent"]["message"],
        "not today"
    );
    app.stop().await;
}

/// How Claude Code 2.1.x reads what its `--permission-prompt-tool` returned (`tool` as
/// `tools/list` gave it), step by step as its program does: the decision it takes, or the
/// error it fails the tool call with. See `tests/fixtures/claude-code/permission_prompt_results.json`.
fn claude_code_reads(tool: &Value, result: &Value) -> Result<Value, String> {
    let is_error = result["isError"].as_bool().unwrap_or(false);
    let structured = result.get("structuredContent");
    // Its MCP client: a tool with an output schema must return structured content.
    if tool.get("outputSchema").is_some() && structured.is_none() && !is_error {
        return Err("has an output schema but did not return structured content".into());
    }
    let blocks = result["content"].as_array().cloned().unwrap_or_default();
    // The tool result it builds: structured content becomes its JSON as a string, after any
    // blocks that are not text; otherwise the content blocks as they are.
    let content = match structured {
        Some(s) => {
            let mut others: Vec<Value> = blocks
                .iter()
                .filter(|b| b["type"] != "text")
                .cloned()
                .collect();
            if others.is_empty() {
                Value::String(s.to_string())
            } else {
                others.push(json!({"type": "text", "text": s.to_string()}));
                Value::Array(others)
            }
        }
        None => Value::Array(blocks),
    };
    // The permission check proper.
    let text = match content.as_array().and_then(|c| c.first()) {
        Some(b) if b["type"] == "text" && b["text"].is_string() => b["text"].as_str().unwrap_or(""),
        _ => {
            return Err(
                "Permission prompt tool returned an invalid result. Expected a single \
                        text block param with type=\"text\" and a string text value."
                    .into(),
            );
        }
    };
    let decision: Value =
        serde_json::from_str(text).map_err(|e| format!("the text is not JSON: {e}"))?;
    let valid = match decision["behavior"].as_str() {
        Some("allow") => decision.get("updatedInput").is_none_or(Value::is_object),
        Some("deny") => decision["message"].is_string(),
        _ => false,
    };
    if valid {
        Ok(decision)
    } else {
        Err(format!("an invalid permission result: {decision}"))
    }
}

#[tokio::test]
async fn permission_prompt_results_pass_claude_codes_check() {
    // The replica of the check takes what Claude Code takes and refuses what it refuses.
    let fixture = fixture("claude-code/permission_prompt_results.json");
    for case in fixture["accepted"].as_array().unwrap() {
        assert_eq!(
            claude_code_reads(&case["tool"], &case["result"]).as_ref(),
            Ok(&case["decision"]),
            "{case}"
        );
    }
    for case in fixture["refused"].as_array().unwrap() {
        assert!(
            claude_code_reads(&case["tool"], &case["result"]).is_err(),
            "{case}"
        );
    }

    // imrelay's tool and results, as they come over the wire.
    let app = spawn_app().await;
    let (wire, _) = Wire::connect(&app, "2025-11-25").await;
    let tools = events_until_response(&mut wire.request(2, "tools/list", json!({})).await, 2).await;
    let tools: Value = serde_json::from_str(&tools.last().unwrap().raw).unwrap();
    let tool = tools["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "permission_prompt")
        .cloned()
        .expect("permission_prompt");
    let accepted_shape = &fixture["accepted"][0]["result"];
    for (n, (tool_use_id, answer, decision)) in [
        (
            "toolu_allow",
            json!({"decision": "allow", "by": "ann"}),
            json!({"behavior": "allow", "updatedInput": {"command": "npm test"}}),
        ),
        (
            "toolu_edit",
            json!({"decision": "allow", "updated_input": {"command": "npm test -- --bail"}}),
            json!({"behavior": "allow", "updatedInput": {"command": "npm test -- --bail"}}),
        ),
        (
            "toolu_deny",
            json!({"decision": "deny", "message": "not on a Friday"}),
            json!({"behavior": "deny", "message": "not on a Friday", "interrupt": false}),
        ),
    ]
    .into_iter()
    .enumerate()
    {
        let id = 10 + n as i64;
        let mut call = wire
            .request(
                id,
                "tools/call",
                json!({"name": "permission_prompt", "arguments": {
                    "tool_name": "Bash", "input": {"command": "npm test"},
                    "tool_use_id": tool_use_id}}),
            )
            .await;
        eventually("the prompt is pending", || async {
            let (s, _) = app.get(&format!("/v1/interactions/{tool_use_id}")).await;
            (s == StatusCode::OK).then_some(())
        })
        .await;
        let (s, body) = app.respond(tool_use_id, &answer).await;
        assert_eq!(s, StatusCode::OK, "{body}");
        let events = events_until_response(&mut call, id).await;
        let message: Value = serde_json::from_str(&events.last().unwrap().raw).unwrap();
        let result = &message["result"];
        assert_eq!(claude_code_reads(&tool, result), Ok(decision), "{result}");
        // The very shape of what Claude Code accepts: one text block, nothing beside it.
        let keys = |v: &Value| -> Vec<String> {
            let mut k: Vec<String> = v.as_object().unwrap().keys().cloned().collect();
            k.sort();
            k
        };
        assert_eq!(keys(result), keys(accepted_shape), "{result}");
        assert_eq!(result["content"].as_array().map(Vec::len), Some(1));
    }
    app.stop().await;
}
