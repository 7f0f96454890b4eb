//! A scripted model API on 127.0.0.1 that real agent programs talk to instead of their
//! vendor's: the Anthropic Messages API (Claude Code), the OpenAI Responses API (Codex), OpenAI
//! chat completions (OpenCode's OpenAI-compatible provider) and the Gemini API (Gemini CLI),
//! each streaming as the real one does.
//!
//! The script is one tool call: a request that offers the tool (and carries no result of an
//! earlier call) is answered with a call to it; a request carrying that call's result gets the
//! final text; any other request (titles, summaries, classifiers the agents run on the side)
//! gets a short text. So the answer depends on the conversation, not on how many side requests
//! an agent makes. Every request is recorded, so that a test can assert what reached the model
//! (the command's output after an allow, the approver's reason after a deny).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::http::{Method, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

/// Which vendor API the fake speaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Dialect {
    /// `POST /v1/messages` (Anthropic Messages, server-sent events when `stream` is set).
    Anthropic,
    /// `POST /v1/responses` (OpenAI Responses, server-sent events).
    OpenAiResponses,
    /// `POST /v1/chat/completions` (OpenAI chat completions, server-sent events).
    OpenAiChat,
    /// `POST /v1beta/models/{model}:streamGenerateContent?alt=sse` and `:generateContent`.
    Gemini,
}

/// The one tool call the fake makes.
#[derive(Clone, Debug)]
pub(crate) enum Step {
    /// Run this shell command with whatever shell tool the agent offers (`Bash`,
    /// `run_shell_command`, `shell_command`, `exec_command`, `bash`), in that tool's argument
    /// shape.
    Shell(String),
    /// Call the tool whose name ends with `name` (MCP tools are prefixed differently by each
    /// agent: `mcp__imrelay__ask_human`, `mcp_imrelay_ask_human`, `imrelay_ask_human`).
    Tool { name: String, input: Value },
}

/// A request as the fake received it.
#[derive(Clone, Debug)]
pub(crate) struct Recorded {
    pub path: String,
    pub body: Value,
}

/// A tool result found in a request: what the agent told the model a call returned.
#[derive(Clone, Debug)]
pub(crate) struct ToolResult {
    pub call_id: String,
    /// The result's text (text blocks joined, or the JSON as text).
    pub text: String,
    /// Whether the agent marked it an error (Anthropic's `is_error`; other APIs have none).
    pub is_error: bool,
}

struct State {
    dialect: Dialect,
    step: Step,
    final_text: String,
    requests: Mutex<Vec<Recorded>>,
    calls_made: Mutex<u32>,
    changed: Notify,
}

/// A running fake; stops when dropped.
pub(crate) struct FakeModel {
    pub addr: std::net::SocketAddr,
    state: Arc<State>,
    stop: CancellationToken,
}

impl Drop for FakeModel {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

/// The prefix of every tool-call id the fake makes, so a result can be told from others.
const CALL_PREFIX: &str = "call_imrelay_";

impl FakeModel {
    /// Starts a fake speaking `dialect` that makes the call `step` and then says `final_text`.
    pub(crate) async fn start(dialect: Dialect, step: Step, final_text: &str) -> FakeModel {
        FakeModel::start_at(dialect, step, final_text, 0).await
    }

    /// [`FakeModel::start`] on 127.0.0.1:`port` (0: any free port).
    pub(crate) async fn start_at(
        dialect: Dialect,
        step: Step,
        final_text: &str,
        port: u16,
    ) -> FakeModel {
        let state = Arc::new(State {
            dialect,
            step,
            final_text: final_text.to_string(),
            requests: Mutex::new(Vec::new()),
            calls_made: Mutex::new(0),
            changed: Notify::new(),
        });
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", port))
            .await
            .expect("bind the fake model API");
        let addr = listener.local_addr().expect("its address");
        let stop = CancellationToken::new();
        let app = Router::new().fallback({
            let state = state.clone();
            move |method: Method, uri: Uri, body: Bytes| {
                let state = state.clone();
                async move { handle(&state, method, uri, body) }
            }
        });
        let s = stop.clone();
        tokio::spawn(async move {
            let _ = axum::serve(listener, app)
                .with_graceful_shutdown(async move { s.cancelled().await })
                .await;
        });
        FakeModel { addr, state, stop }
    }

    /// `http://127.0.0.1:<port>`.
    pub(crate) fn base_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Every request received so far.
    pub(crate) fn requests(&self) -> Vec<Recorded> {
        self.state.requests.lock().expect("lock").clone()
    }

    /// The results of the fake's own tool calls that came back in any request.
    pub(crate) fn tool_results(&self) -> Vec<ToolResult> {
        let mut out: Vec<ToolResult> = Vec::new();
        for r in self.requests() {
            for t in tool_results(self.state.dialect, &r.body) {
                if t.call_id.starts_with(CALL_PREFIX) && !out.iter().any(|o| o.call_id == t.call_id)
                {
                    out.push(t);
                }
            }
        }
        out
    }

    /// Waits (at most `limit`) until a result of the scripted call has reached the model.
    pub(crate) async fn wait_for_tool_result(&self, limit: Duration) -> Option<ToolResult> {
        let deadline = tokio::time::Instant::now() + limit;
        loop {
            let notified = self.state.changed.notified();
            if let Some(t) = self.tool_results().into_iter().next() {
                return Some(t);
            }
            if tokio::time::timeout_at(deadline, notified).await.is_err() {
                return None;
            }
        }
    }

    /// A summary of what was received, for failure messages.
    pub(crate) fn describe(&self) -> String {
        self.requests()
            .iter()
            .map(|r| {
                let body = r.body.to_string();
                let cut: String = body.chars().take(400).collect();
                format!("  {} {}", r.path, cut)
            })
            .collect::<Vec<_>>()
            .join("\n")
    }
}

fn handle(state: &State, method: Method, uri: Uri, body: Bytes) -> Response {
    let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let path = uri.path().to_string();
    state.requests.lock().expect("lock").push(Recorded {
        path: uri.to_string(),
        body: body.clone(),
    });
    state.changed.notify_waiters();
    if method != Method::POST {
        return match state.dialect {
            // Listing models is how some clients check a provider.
            Dialect::OpenAiChat | Dialect::OpenAiResponses if path.ends_with("/models") => {
                axum::Json(json!({"object": "list", "data": [{"id": "fake-model", "object": "model", "owned_by": "imrelay-tests"}]})).into_response()
            }
            _ => StatusCode::NOT_FOUND.into_response(),
        };
    }
    match state.dialect {
        Dialect::Anthropic if path.ends_with("/count_tokens") => {
            axum::Json(json!({"input_tokens": 100})).into_response()
        }
        Dialect::Anthropic if path.ends_with("/v1/messages") => anthropic(state, &body),
        Dialect::OpenAiResponses if path.ends_with("/responses") => responses(state, &body),
        Dialect::OpenAiChat if path.ends_with("/chat/completions") => chat(state, &body),
        Dialect::Gemini if path.contains(":countTokens") => {
            axum::Json(json!({"totalTokens": 100})).into_response()
        }
        Dialect::Gemini if path.contains(":streamGenerateContent") => gemini(state, &body, true),
        Dialect::Gemini if path.contains(":generateContent") => gemini(state, &body, false),
        _ => StatusCode::NOT_FOUND.into_response(),
    }
}

/// What the fake says next.
enum Reply {
    Call {
        id: String,
        name: String,
        input: Value,
    },
    Text(String),
}

/// Decides the reply from the conversation: the final text once a result of the fake's call
/// is there, the call when the tool is offered, a short text otherwise.
fn decide(state: &State, offered: &[String], results: &[ToolResult]) -> Reply {
    if results.iter().any(|r| r.call_id.starts_with(CALL_PREFIX)) {
        return Reply::Text(state.final_text.clone());
    }
    let call = match &state.step {
        Step::Shell(command) => shell_call(offered, command),
        Step::Tool { name, input } => offered
            .iter()
            .find(|o| *o == name || o.ends_with(&format!("_{name}")))
            .map(|o| (o.clone(), input.clone())),
    };
    match call {
        Some((name, input)) => {
            let mut n = state.calls_made.lock().expect("lock");
            *n += 1;
            Reply::Call {
                id: format!("{CALL_PREFIX}{n}"),
                name,
                input,
            }
        }
        None => Reply::Text("OK.".into()),
    }
}

/// The shell tool among `offered`, with `command` in its argument shape.
fn shell_call(offered: &[String], command: &str) -> Option<(String, Value)> {
    let has = |n: &str| offered.iter().any(|o| o == n);
    let desc = "Write the proof file";
    if has("Bash") {
        Some((
            "Bash".into(),
            json!({"command": command, "description": desc}),
        ))
    } else if has("run_shell_command") {
        Some((
            "run_shell_command".into(),
            json!({"command": command, "description": desc}),
        ))
    } else if has("shell_command") {
        Some(("shell_command".into(), json!({"command": command})))
    } else if has("exec_command") {
        // Codex runs a command in its sandbox without asking; asking to run it outside is
        // what makes it ask (under `approval_policy = "on-request"`).
        Some((
            "exec_command".into(),
            json!({"cmd": command, "sandbox_permissions": "require_escalated", "justification": "May I write the proof file?"}),
        ))
    } else if has("shell") {
        Some(("shell".into(), json!({"command": ["bash", "-lc", command]})))
    } else if has("bash") {
        Some((
            "bash".into(),
            json!({"command": command, "description": desc}),
        ))
    } else {
        None
    }
}

/// The tool results a request carries, in the dialect's shape.
fn tool_results(dialect: Dialect, body: &Value) -> Vec<ToolResult> {
    let mut out = Vec::new();
    let text_of = |v: &Value| -> String {
        match v {
            Value::String(s) => s.clone(),
            Value::Array(blocks) => blocks
                .iter()
                .map(|b| {
                    b["text"]
                        .as_str()
                        .map(str::to_string)
                        .unwrap_or_else(|| b.to_string())
                })
                .collect::<Vec<_>>()
                .join("\n"),
            other => other.to_string(),
        }
    };
    match dialect {
        Dialect::Anthropic => {
            for m in body["messages"].as_array().into_iter().flatten() {
                for b in m["content"].as_array().into_iter().flatten() {
                    if b["type"] == "tool_result" {
                        out.push(ToolResult {
                            call_id: b["tool_use_id"].as_str().unwrap_or("").into(),
                            text: text_of(&b["content"]),
                            is_error: b["is_error"].as_bool().unwrap_or(false),
                        });
                    }
                }
            }
        }
        Dialect::OpenAiResponses => {
            for item in body["input"].as_array().into_iter().flatten() {
                if item["type"] == "function_call_output"
                    || item["type"] == "custom_tool_call_output"
                {
                    out.push(ToolResult {
                        call_id: item["call_id"].as_str().unwrap_or("").into(),
                        text: text_of(&item["output"]),
                        is_error: false,
                    });
                }
            }
        }
        Dialect::OpenAiChat => {
            for m in body["messages"].as_array().into_iter().flatten() {
                if m["role"] == "tool" {
                    out.push(ToolResult {
                        call_id: m["tool_call_id"].as_str().unwrap_or("").into(),
                        text: text_of(&m["content"]),
                        is_error: false,
                    });
                }
            }
        }
        Dialect::Gemini => {
            for c in body["contents"].as_array().into_iter().flatten() {
                for p in c["parts"].as_array().into_iter().flatten() {
                    if let Some(r) = p.get("functionResponse") {
                        out.push(ToolResult {
                            call_id: r["id"].as_str().unwrap_or("").into(),
                            text: r["response"].to_string(),
                            is_error: r["response"].get("error").is_some(),
                        });
                    }
                }
            }
        }
    }
    out
}

/// Server-sent events, each `(event name, data)`; an empty name writes no `event:` line.
fn sse(events: Vec<(&str, Value)>, done: bool) -> Response {
    let mut text = String::new();
    for (name, data) in events {
        if !name.is_empty() {
            text.push_str(&format!("event: {name}\n"));
        }
        text.push_str(&format!("data: {data}\n\n"));
    }
    if done {
        text.push_str("data: [DONE]\n\n");
    }
    Response::builder()
        .header(header::CONTENT_TYPE, "text/event-stream")
        .header(header::CACHE_CONTROL, "no-cache")
        .body(Body::from(text))
        .expect("a response")
}

fn anthropic(state: &State, body: &Value) -> Response {
    let offered: Vec<String> = body["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|t| t["name"].as_str().map(str::to_string))
        .collect();
    let reply = decide(state, &offered, &tool_results(Dialect::Anthropic, body));
    let model = body["model"].as_str().unwrap_or("claude-fake").to_string();
    let usage = json!({"input_tokens": 100, "output_tokens": 10, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0});
    let (block, stop_reason) = match &reply {
        Reply::Call { id, name, input } => (
            json!({"type": "tool_use", "id": id, "name": name, "input": input}),
            "tool_use",
        ),
        Reply::Text(t) => (json!({"type": "text", "text": t}), "end_turn"),
    };
    let message = json!({
        "id": "msg_imrelay_fake", "type": "message", "role": "assistant", "model": model,
        "content": [block.clone()], "stop_reason": stop_reason, "stop_sequence": null, "usage": usage,
    });
    if body["stream"] != true {
        return axum::Json(message).into_response();
    }
    let mut start = message.clone();
    start["content"] = json!([]);
    start["stop_reason"] = Value::Null;
    let (opening, delta) = match &reply {
        Reply::Call { id, name, input } => (
            json!({"type": "tool_use", "id": id, "name": name, "input": {}}),
            json!({"type": "input_json_delta", "partial_json": input.to_string()}),
        ),
        Reply::Text(t) => (
            json!({"type": "text", "text": ""}),
            json!({"type": "text_delta", "text": t}),
        ),
    };
    sse(
        vec![
            (
                "message_start",
                json!({"type": "message_start", "message": start}),
            ),
            (
                "content_block_start",
                json!({"type": "content_block_start", "index": 0, "content_block": opening}),
            ),
            (
                "content_block_delta",
                json!({"type": "content_block_delta", "index": 0, "delta": delta}),
            ),
            (
                "content_block_stop",
                json!({"type": "content_block_stop", "index": 0}),
            ),
            (
                "message_delta",
                json!({"type": "message_delta", "delta": {"stop_reason": stop_reason, "stop_sequence": null}, "usage": {"output_tokens": 10}}),
            ),
            ("message_stop", json!({"type": "message_stop"})),
        ],
        false,
    )
}

fn responses(state: &State, body: &Value) -> Response {
    // Codex offers an MCP server's tools inside a `namespace` tool (`mcp__<server>`); such a
    // tool is offered here as `<namespace>__<name>` and called with both.
    let mut offered: Vec<String> = Vec::new();
    for t in body["tools"].as_array().into_iter().flatten() {
        let Some(name) = t["name"].as_str() else {
            continue;
        };
        if t["type"] == "namespace" {
            for inner in t["tools"].as_array().into_iter().flatten() {
                if let Some(n) = inner["name"].as_str() {
                    offered.push(format!("{name}__{n}"));
                }
            }
        } else {
            offered.push(name.to_string());
        }
    }
    let reply = decide(
        state,
        &offered,
        &tool_results(Dialect::OpenAiResponses, body),
    );
    let item = match &reply {
        Reply::Call { id, name, input } => {
            let mut item = json!({
                "type": "function_call", "id": format!("fc_{id}"), "call_id": id, "name": name,
                "arguments": input.to_string(), "status": "completed",
            });
            if let Some((namespace, tool)) = name.rsplit_once("__")
                && namespace.starts_with("mcp__")
            {
                item["namespace"] = json!(namespace);
                item["name"] = json!(tool);
            }
            item
        }
        Reply::Text(t) => json!({
            "type": "message", "id": "msg_imrelay_fake", "role": "assistant", "status": "completed",
            "content": [{"type": "output_text", "text": t, "annotations": []}],
        }),
    };
    let response = json!({"id": "resp_imrelay_fake", "object": "response", "status": "in_progress", "model": body["model"], "output": []});
    let mut completed = response.clone();
    completed["status"] = json!("completed");
    completed["output"] = json!([item.clone()]);
    completed["usage"] = json!({
        "input_tokens": 100, "input_tokens_details": {"cached_tokens": 0},
        "output_tokens": 10, "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": 110,
    });
    let mut events = vec![
        (
            "response.created",
            json!({"type": "response.created", "response": response}),
        ),
        (
            "response.output_item.added",
            json!({"type": "response.output_item.added", "output_index": 0, "item": item}),
        ),
    ];
    if let Reply::Text(t) = &reply {
        events.push((
            "response.output_text.delta",
            json!({"type": "response.output_text.delta", "item_id": "msg_imrelay_fake", "output_index": 0, "content_index": 0, "delta": t}),
        ));
    }
    events.push((
        "response.output_item.done",
        json!({"type": "response.output_item.done", "output_index": 0, "item": item}),
    ));
    events.push((
        "response.completed",
        json!({"type": "response.completed", "response": completed}),
    ));
    sse(events, false)
}

fn chat(state: &State, body: &Value) -> Response {
    let offered: Vec<String> = body["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|t| t["function"]["name"].as_str().map(str::to_string))
        .collect();
    let reply = decide(state, &offered, &tool_results(Dialect::OpenAiChat, body));
    let chunk = |delta: Value, finish: Value| {
        json!({
            "id": "chatcmpl-imrelay", "object": "chat.completion.chunk", "created": 0,
            "model": body["model"], "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        })
    };
    let (delta, finish) = match &reply {
        Reply::Call { id, name, input } => (
            json!({"role": "assistant", "content": null, "tool_calls": [{"index": 0, "id": id, "type": "function", "function": {"name": name, "arguments": input.to_string()}}]}),
            "tool_calls",
        ),
        Reply::Text(t) => (json!({"role": "assistant", "content": t}), "stop"),
    };
    if body["stream"] != true {
        let message = match &reply {
            Reply::Call { id, name, input } => {
                json!({"role": "assistant", "content": null, "tool_calls": [{"id": id, "type": "function", "function": {"name": name, "arguments": input.to_string()}}]})
            }
            Reply::Text(t) => json!({"role": "assistant", "content": t}),
        };
        return axum::Json(json!({
            "id": "chatcmpl-imrelay", "object": "chat.completion", "created": 0, "model": body["model"],
            "choices": [{"index": 0, "message": message, "finish_reason": finish}],
            "usage": {"prompt_tokens": 100, "completion_tokens": 10, "total_tokens": 110},
        }))
        .into_response();
    }
    let mut last = chunk(json!({}), json!(finish));
    last["usage"] = json!({"prompt_tokens": 100, "completion_tokens": 10, "total_tokens": 110});
    sse(vec![("", chunk(delta, Value::Null)), ("", last)], true)
}

fn gemini(state: &State, body: &Value, stream: bool) -> Response {
    let offered: Vec<String> = body["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|t| {
            t["functionDeclarations"]
                .as_array()
                .cloned()
                .unwrap_or_default()
        })
        .filter_map(|f| f["name"].as_str().map(str::to_string))
        .collect();
    // Side requests that ask for JSON (Gemini CLI's classifiers) get an empty object.
    let wants_json = body["generationConfig"]["responseMimeType"] == "application/json"
        || body["config"]["responseMimeType"] == "application/json";
    let reply = if wants_json && offered.is_empty() {
        Reply::Text("{}".into())
    } else {
        decide(state, &offered, &tool_results(Dialect::Gemini, body))
    };
    let part = match &reply {
        Reply::Call { id, name, input } => {
            json!({"functionCall": {"id": id, "name": name, "args": input}})
        }
        Reply::Text(t) => json!({"text": t}),
    };
    let response = json!({
        "candidates": [{"content": {"role": "model", "parts": [part]}, "finishReason": "STOP", "index": 0}],
        "usageMetadata": {"promptTokenCount": 100, "candidatesTokenCount": 10, "totalTokenCount": 110},
        "modelVersion": "gemini-fake",
    });
    if stream {
        sse(vec![("", response)], false)
    } else {
        axum::Json(response).into_response()
    }
}

/// With `IMRELAY_FAKE_MODEL=<dialect>:<step>` set, serves a fake model on 127.0.0.1 until
/// interrupted instead of running the tests, printing its URL and each request as it comes,
/// so that a real agent can be driven by hand (under tmux) against it:
///
/// - `<dialect>`: `anthropic`, `responses`, `chat` or `gemini`;
/// - `<step>`: `shell:<command>` or `tool:<name>:<input as JSON>`.
///
/// `IMRELAY_FAKE_MODEL_PORT` picks the port (default: any free one). Returns `false` when the
/// variable is not set.
pub(crate) fn serve_from_env() -> bool {
    let Ok(spec) = std::env::var("IMRELAY_FAKE_MODEL") else {
        return false;
    };
    let (dialect, step) = spec
        .split_once(':')
        .unwrap_or((&spec, "shell:echo ok > proof.txt"));
    let dialect = match dialect {
        "anthropic" => Dialect::Anthropic,
        "responses" => Dialect::OpenAiResponses,
        "chat" => Dialect::OpenAiChat,
        "gemini" => Dialect::Gemini,
        other => panic!("IMRELAY_FAKE_MODEL: unknown dialect {other}"),
    };
    let step = match step.split_once(':') {
        Some(("shell", command)) => Step::Shell(command.to_string()),
        Some(("tool", rest)) => {
            let (name, input) = rest.split_once(':').unwrap_or((rest, "{}"));
            Step::Tool {
                name: name.to_string(),
                input: serde_json::from_str(input).expect("the tool input is JSON"),
            }
        }
        _ => panic!("IMRELAY_FAKE_MODEL: the step is shell:<command> or tool:<name>:<json>"),
    };
    let rt = tokio::runtime::Runtime::new().expect("a runtime");
    rt.block_on(async move {
        let port = std::env::var("IMRELAY_FAKE_MODEL_PORT")
            .ok()
            .and_then(|p| p.parse().ok())
            .unwrap_or(0);
        let model = FakeModel::start_at(dialect, step, "Done.", port).await;
        eprintln!("fake model ({dialect:?}) at {}", model.base_url());
        let mut seen = 0;
        loop {
            let notified = model.state.changed.notified();
            let requests = model.requests();
            for r in &requests[seen..] {
                eprintln!("<- {} {}", r.path, r.body);
            }
            seen = requests.len();
            notified.await;
        }
    })
}
