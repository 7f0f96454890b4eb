//! A fake Slack on loopback: the Web API methods imrelay calls (checking the token kind each
//! one needs, keeping the messages posted and updated, answering Slack's error names and
//! HTTP 429 with `Retry-After` when told to) and a Socket Mode WebSocket server (single-use
//! URLs from `apps.connections.open`, `hello`, envelopes pushed by the test, every
//! acknowledgement recorded with its connection and latency, `disconnect` messages, drops).

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio::sync::mpsc;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::handshake::server::{
    ErrorResponse, Request, Response as WsResponse,
};

pub(crate) const BOT_TOKEN: &str = "xoxb-test-bot-token";
pub(crate) const APP_TOKEN: &str = "xapp-test-app-token";
/// Conversations the bot is a member of.
pub(crate) const CHANNELS: &[&str] = &["C0APPROVALS", "C0OPS"];
/// Slack refuses a message with more blocks than this.
pub(crate) const MAX_BLOCKS: usize = 50;
/// Slack's acknowledgement window.
pub(crate) const ACK_WINDOW: Duration = Duration::from_secs(3);

/// A failure the fake answers with, once, instead of succeeding.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Failure {
    /// HTTP 429 with `Retry-After: N` and `{"ok":false,"error":"ratelimited"}`.
    RateLimited(u64),
    /// HTTP 200 with `{"ok":false,"error":NAME}`.
    Error(&'static str),
    /// HTTP 503 with an HTML body.
    ServerError,
}

/// One Web API call as received.
#[derive(Clone, Debug)]
pub(crate) struct Call {
    pub method: String,
    pub token: String,
    pub content_type: String,
    pub body: Value,
}

/// One acknowledgement as received.
#[derive(Clone, Debug)]
pub(crate) struct Ack {
    pub conn: usize,
    pub envelope_id: String,
    pub payload: Option<Value>,
    /// Time from the envelope's (last) delivery to this acknowledgement.
    pub latency: Option<Duration>,
}

enum Cmd {
    Text(String),
    Close,
    Drop,
}

/// The Socket Mode side.
#[derive(Default)]
pub(crate) struct Sockets {
    url: Mutex<String>,
    tickets: Mutex<HashSet<String>>,
    next_ticket: AtomicU64,
    next_conn: AtomicUsize,
    /// Open connections, by number.
    open: Mutex<HashMap<usize, mpsc::UnboundedSender<Cmd>>>,
    /// (event, connection) in order: "open" after `hello` was sent, "closed" when it ended.
    pub log: Mutex<Vec<(String, usize)>>,
    sent_at: Mutex<HashMap<String, Instant>>,
    acks: Mutex<Vec<Ack>>,
    /// Handshakes refused because their ticket was unknown or used.
    pub refused: AtomicUsize,
}

impl Sockets {
    fn issue(&self) -> String {
        let n = self.next_ticket.fetch_add(1, Ordering::SeqCst);
        let ticket = format!("t{n}");
        self.tickets.lock().unwrap().insert(ticket.clone());
        format!("{}?ticket={ticket}", self.url.lock().unwrap())
    }

    /// Numbers of the connections open now, oldest first.
    pub(crate) fn open_conns(&self) -> Vec<usize> {
        let mut v: Vec<usize> = self.open.lock().unwrap().keys().copied().collect();
        v.sort_unstable();
        v
    }

    /// Connections opened so far.
    pub(crate) fn opened(&self) -> usize {
        self.log
            .lock()
            .unwrap()
            .iter()
            .filter(|(e, _)| e == "open")
            .count()
    }

    /// Position of `event` for `conn` in the log.
    pub(crate) fn position(&self, event: &str, conn: usize) -> Option<usize> {
        self.log
            .lock()
            .unwrap()
            .iter()
            .position(|(e, c)| e == event && *c == conn)
    }

    fn send(&self, conn: usize, cmd: Cmd) {
        let tx = self.open.lock().unwrap().get(&conn).cloned();
        tx.unwrap_or_else(|| panic!("connection {conn} is not open"))
            .send(cmd)
            .unwrap();
    }

    /// Delivers `envelope` (a whole Socket Mode message) on connection `conn`.
    pub(crate) fn deliver(&self, conn: usize, envelope: &Value) {
        if let Some(id) = envelope["envelope_id"].as_str() {
            self.sent_at
                .lock()
                .unwrap()
                .insert(id.to_string(), Instant::now());
        }
        self.send(conn, Cmd::Text(envelope.to_string()));
    }

    /// Sends Slack's `disconnect` message with `reason` on `conn`.
    pub(crate) fn disconnect(&self, conn: usize, reason: &str) {
        let msg =
            json!({"type": "disconnect", "reason": reason, "debug_info": {"host": "applink-fake"}});
        self.send(conn, Cmd::Text(msg.to_string()));
    }

    /// Closes `conn` with a close frame.
    pub(crate) fn close(&self, conn: usize) {
        self.send(conn, Cmd::Close);
    }

    /// Drops `conn`'s TCP connection without a close frame.
    pub(crate) fn drop_conn(&self, conn: usize) {
        self.send(conn, Cmd::Drop);
    }

    pub(crate) fn acks(&self) -> Vec<Ack> {
        self.acks.lock().unwrap().clone()
    }

    /// Acknowledgements that came later than Slack's window after their envelope (Slack
    /// would have redelivered the envelope).
    pub(crate) fn late_acks(&self) -> Vec<Ack> {
        self.acks()
            .into_iter()
            .filter(|a| a.latency.is_some_and(|l| l > ACK_WINDOW))
            .collect()
    }

    /// Acknowledgements of `envelope_id`.
    pub(crate) fn acks_of(&self, envelope_id: &str) -> Vec<Ack> {
        self.acks()
            .into_iter()
            .filter(|a| a.envelope_id == envelope_id)
            .collect()
    }
}

#[derive(Default)]
pub(crate) struct FakeState {
    pub calls: Mutex<Vec<Call>>,
    failures: Mutex<HashMap<String, VecDeque<Failure>>>,
    next_ts: AtomicU64,
    /// Messages by (channel, ts): the latest body posted or updated.
    pub messages: Mutex<HashMap<(String, String), Value>>,
    /// Trigger ids the test handed out, each usable once.
    pub triggers: Mutex<HashSet<String>>,
    pub sockets: Sockets,
}

impl FakeState {
    /// Makes the next calls of `method` fail, in order.
    pub(crate) fn fail(&self, method: &str, failures: &[Failure]) {
        self.failures
            .lock()
            .unwrap()
            .entry(method.to_string())
            .or_default()
            .extend(failures.iter().cloned());
    }

    pub(crate) fn calls(&self, method: &str) -> Vec<Call> {
        self.calls
            .lock()
            .unwrap()
            .iter()
            .filter(|c| c.method == method)
            .cloned()
            .collect()
    }

    /// The current body of message `ts` in `channel`.
    pub(crate) fn message(&self, channel: &str, ts: &str) -> Option<Value> {
        self.messages
            .lock()
            .unwrap()
            .get(&(channel.to_string(), ts.to_string()))
            .cloned()
    }
}

pub(crate) struct FakeSlack {
    /// The Web API base (`http://127.0.0.1:N/api`).
    pub api: String,
    pub state: Arc<FakeState>,
}

fn ok(mut v: Value) -> Response {
    v["ok"] = json!(true);
    axum::Json(v).into_response()
}

fn refuse(error: &str) -> Response {
    axum::Json(json!({"ok": false, "error": error})).into_response()
}

async fn method(
    State(state): State<Arc<FakeState>>,
    Path(method): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let token = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .unwrap_or_default()
        .to_string();
    let content_type = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_string();
    let body: Value = if content_type.starts_with("application/json") {
        match serde_json::from_slice(&body) {
            Ok(v) => v,
            Err(_) => return refuse("invalid_json"),
        }
    } else {
        Value::Null
    };
    state.calls.lock().unwrap().push(Call {
        method: method.clone(),
        token: token.clone(),
        content_type,
        body: body.clone(),
    });
    let failure = state
        .failures
        .lock()
        .unwrap()
        .get_mut(&method)
        .and_then(VecDeque::pop_front);
    match failure {
        Some(Failure::RateLimited(secs)) => {
            return (
                StatusCode::TOO_MANY_REQUESTS,
                [(header::RETRY_AFTER, secs.to_string())],
                axum::Json(json!({"ok": false, "error": "ratelimited"})),
            )
                .into_response();
        }
        Some(Failure::Error(name)) => return refuse(name),
        Some(Failure::ServerError) => {
            return (
                StatusCode::SERVICE_UNAVAILABLE,
                "<html><body>upstream unavailable</body></html>",
            )
                .into_response();
        }
        None => {}
    }
    // Each method takes one kind of token.
    let wants_app = method == "apps.connections.open";
    match (wants_app, token.as_str()) {
        (true, APP_TOKEN) | (false, BOT_TOKEN) => {}
        (true, t) if t.starts_with("xoxb-") => return refuse("not_allowed_token_type"),
        (false, t) if t.starts_with("xapp-") => return refuse("not_allowed_token_type"),
        (_, "") => return refuse("not_authed"),
        _ => return refuse("invalid_auth"),
    }
    let str_field = |k: &str| body[k].as_str().unwrap_or_default().to_string();
    match method.as_str() {
        "auth.test" => ok(json!({
            "url": "https://imrelay-test.slack.com/", "team": "imrelay test",
            "user": "imrelay", "team_id": "T0TEAM", "user_id": "U0BOT", "bot_id": "B0BOT",
            "is_enterprise_install": false,
        })),
        "apps.connections.open" => ok(json!({"url": state.sockets.issue()})),
        "chat.postMessage" | "chat.update" => {
            let channel = str_field("channel");
            if !CHANNELS.contains(&channel.as_str()) {
                return refuse("channel_not_found");
            }
            if str_field("text").is_empty() && !body["blocks"].is_array() {
                return refuse("no_text");
            }
            if let Some(blocks) = body["blocks"].as_array()
                && blocks.len() > MAX_BLOCKS
            {
                return axum::Json(json!({"ok": false, "error": "invalid_blocks",
                    "response_metadata": {"messages": [format!("[ERROR] no more than {MAX_BLOCKS} items allowed [json-pointer:/blocks]")]}}))
                    .into_response();
            }
            if let Err(why) = check_limits(&body["blocks"], "/blocks") {
                return axum::Json(json!({"ok": false, "error": "invalid_blocks",
                    "response_metadata": {"messages": [why]}}))
                .into_response();
            }
            // A reply names the thread by a message of the same conversation (the fake
            // refuses any other; Slack's docs: "use its parent instead" of a reply's ts).
            if method == "chat.postMessage"
                && let Some(parent) = body["thread_ts"].as_str()
            {
                match state.message(&channel, parent) {
                    None => return refuse("thread_not_found"),
                    Some(p) if p["thread_ts"].is_string() => return refuse("thread_not_found"),
                    Some(_) => {}
                }
            }
            let ts = if method == "chat.update" {
                let ts = str_field("ts");
                if state.message(&channel, &ts).is_none() {
                    return refuse("message_not_found");
                }
                ts
            } else {
                let n = state.next_ts.fetch_add(1, Ordering::SeqCst) + 1;
                format!("1700000000.{n:06}")
            };
            state
                .messages
                .lock()
                .unwrap()
                .insert((channel.clone(), ts.clone()), body.clone());
            ok(
                json!({"channel": channel, "ts": ts, "message": {"text": body["text"], "blocks": body["blocks"]}}),
            )
        }
        "chat.postEphemeral" => {
            if !CHANNELS.contains(&str_field("channel").as_str()) {
                return refuse("channel_not_found");
            }
            if str_field("user").is_empty() {
                return refuse("user_not_in_channel");
            }
            let n = state.next_ts.fetch_add(1, Ordering::SeqCst) + 1;
            ok(json!({"message_ts": format!("1700000000.{n:06}")}))
        }
        "views.open" => {
            if !state
                .triggers
                .lock()
                .unwrap()
                .remove(&str_field("trigger_id"))
            {
                return refuse("expired_trigger_id");
            }
            let view = &body["view"];
            if view["type"] != "modal" || !view["title"].is_object() {
                return refuse("invalid_arguments");
            }
            let short = |v: &Value| v["text"].as_str().is_none_or(|t| t.chars().count() <= 24);
            if !short(&view["title"])
                || !short(&view["submit"])
                || !short(&view["close"])
                || view["private_metadata"]
                    .as_str()
                    .is_some_and(|m| m.len() > 3000)
            {
                return refuse("invalid_arguments");
            }
            if let Err(why) = check_limits(&view["blocks"], "/view/blocks") {
                return axum::Json(json!({"ok": false, "error": "invalid_arguments",
                    "response_metadata": {"messages": [why]}}))
                .into_response();
            }
            ok(
                json!({"view": {"id": "V0MODAL", "type": "modal", "title": view["title"], "blocks": view["blocks"]}}),
            )
        }
        _ => refuse("unknown_method"),
    }
}

/// Slack's documented limits on what a block holds: a header's text 150 characters, any text
/// object 3,000, a button's or option's label 75, a button value 2,000, an actions block 25
/// elements, checkboxes and radio buttons 10 options, a static select 100, ids 255.
pub(crate) fn check_limits(v: &Value, at: &str) -> Result<(), String> {
    let err = |what: &str| Err(format!("[ERROR] {what} [json-pointer:{at}]"));
    let chars = |v: &Value| v.as_str().map_or(0, |s| s.chars().count());
    match v {
        Value::Array(items) => {
            for (n, item) in items.iter().enumerate() {
                check_limits(item, &format!("{at}/{n}"))?;
            }
        }
        Value::Object(m) => {
            let ty = m.get("type").and_then(Value::as_str).unwrap_or_default();
            match ty {
                "header" if chars(&v["text"]["text"]) > 150 => return err("header text over 150"),
                "plain_text" | "mrkdwn" if chars(&v["text"]) > 3000 => {
                    return err("text over 3000");
                }
                "plain_text" | "mrkdwn" if chars(&v["text"]) == 0 => return err("empty text"),
                "text" if chars(&v["text"]) > 4000 => return err("rich text over 4000"),
                "button" if chars(&v["text"]["text"]) > 75 => return err("button label over 75"),
                "button" if chars(&v["value"]) > 2000 => return err("button value over 2000"),
                "actions" if v["elements"].as_array().is_some_and(|e| e.len() > 25) => {
                    return err("more than 25 elements");
                }
                "checkboxes" | "radio_buttons"
                    if v["options"]
                        .as_array()
                        .is_some_and(|o| o.is_empty() || o.len() > 10) =>
                {
                    return err("1 to 10 options");
                }
                "static_select" | "multi_static_select"
                    if v["options"].as_array().is_some_and(|o| o.len() > 100) =>
                {
                    return err("more than 100 options");
                }
                _ => {}
            }
            if let Some(options) = m.get("options").and_then(Value::as_array) {
                for o in options {
                    if chars(&o["text"]["text"]) > 75 {
                        return err("option label over 75");
                    }
                }
            }
            for id in ["action_id", "block_id"] {
                if m.get(id).is_some_and(|i| chars(i) > 255) {
                    return err("id over 255");
                }
            }
            for (k, child) in m {
                check_limits(child, &format!("{at}/{k}"))?;
            }
        }
        _ => {}
    }
    Ok(())
}

// The handshake callback's error type is fixed by tungstenite.
#[allow(clippy::result_large_err)]
async fn serve_sockets(listener: tokio::net::TcpListener, state: Arc<FakeState>) {
    loop {
        let Ok((tcp, _)) = listener.accept().await else {
            return;
        };
        let state = state.clone();
        tokio::spawn(async move {
            let s = &state.sockets;
            let check = |req: &Request, resp: WsResponse| -> Result<WsResponse, ErrorResponse> {
                let ticket = req
                    .uri()
                    .query()
                    .and_then(|q| q.strip_prefix("ticket="))
                    .unwrap_or_default()
                    .to_string();
                if s.tickets.lock().unwrap().remove(&ticket) {
                    Ok(resp)
                } else {
                    s.refused.fetch_add(1, Ordering::SeqCst);
                    Err(axum::http::Response::builder()
                        .status(401)
                        .body(Some("invalid ticket".into()))
                        .unwrap())
                }
            };
            let Ok(ws) = tokio_tungstenite::accept_hdr_async(tcp, check).await else {
                return;
            };
            let conn = s.next_conn.fetch_add(1, Ordering::SeqCst);
            let (mut sink, mut stream) = ws.split();
            let hello = json!({"type": "hello", "num_connections": s.open_conns().len() + 1,
                "debug_info": {"host": "applink-fake", "build_number": 1, "approximate_connection_time": 18060},
                "connection_info": {"app_id": "A0APP"}});
            if sink
                .send(Message::Text(hello.to_string().into()))
                .await
                .is_err()
            {
                return;
            }
            let (tx, mut rx) = mpsc::unbounded_channel();
            s.open.lock().unwrap().insert(conn, tx);
            s.log.lock().unwrap().push(("open".into(), conn));
            loop {
                tokio::select! {
                    cmd = rx.recv() => match cmd {
                        Some(Cmd::Text(t)) => { let _ = sink.send(Message::Text(t.into())).await; }
                        Some(Cmd::Close) => { let _ = sink.send(Message::Close(None)).await; }
                        Some(Cmd::Drop) | None => break,
                    },
                    msg = stream.next() => match msg {
                        Some(Ok(Message::Text(t))) => {
                            let v: Value = serde_json::from_str(t.as_str()).expect("the client sends JSON");
                            let id = v["envelope_id"].as_str().expect("an acknowledgement names its envelope").to_string();
                            let latency = s.sent_at.lock().unwrap().get(&id).map(Instant::elapsed);
                            s.acks.lock().unwrap().push(Ack { conn, envelope_id: id, payload: v.get("payload").cloned(), latency });
                        }
                        Some(Ok(Message::Close(_))) | None | Some(Err(_)) => break,
                        Some(Ok(_)) => {}
                    },
                }
            }
            s.open.lock().unwrap().remove(&conn);
            s.log.lock().unwrap().push(("closed".into(), conn));
        });
    }
}

impl FakeSlack {
    pub(crate) async fn start() -> Self {
        let state = Arc::new(FakeState::default());
        let ws_listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        *state.sockets.url.lock().unwrap() =
            format!("ws://{}/link/", ws_listener.local_addr().unwrap());
        tokio::spawn(serve_sockets(ws_listener, state.clone()));
        let app = Router::new()
            .route("/api/{method}", post(method))
            .with_state(state.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let api = format!("http://{}/api", listener.local_addr().unwrap());
        tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        FakeSlack { api, state }
    }
}

/// An interactive envelope carrying `payload`.
pub(crate) fn interactive(
    envelope_id: &str,
    payload: Value,
    accepts_response_payload: bool,
) -> Value {
    json!({"envelope_id": envelope_id, "type": "interactive", "payload": payload,
        "accepts_response_payload": accepts_response_payload})
}

/// A `block_actions` payload: `user` pressed the button `action_id` with `value`.
pub(crate) fn block_action(user: &str, action_id: &str, value: &str, trigger_id: &str) -> Value {
    json!({
        "type": "block_actions",
        "user": {"id": user, "username": "someone", "team_id": "T0TEAM"},
        "api_app_id": "A0APP", "token": "legacy-verification-token",
        "container": {"type": "message", "message_ts": "1700000000.000001", "channel_id": "C0APPROVALS", "is_ephemeral": false},
        "trigger_id": trigger_id,
        "team": {"id": "T0TEAM", "domain": "imrelay-test"},
        "channel": {"id": "C0APPROVALS", "name": "approvals"},
        "actions": [{"type": "button", "action_id": action_id, "block_id": "decide", "value": value,
            "text": {"type": "plain_text", "text": "Approve"}, "action_ts": "1700000001.000200"}],
    })
}

/// An Events API envelope for event `event_id` (a redelivery has a new envelope id).
pub(crate) fn event(envelope_id: &str, event_id: &str, retry_attempt: u64) -> Value {
    json!({"envelope_id": envelope_id, "type": "events_api", "accepts_response_payload": false,
        "retry_attempt": retry_attempt, "retry_reason": if retry_attempt > 0 { "timeout" } else { "" },
        "payload": {"token": "legacy-verification-token", "team_id": "T0TEAM", "api_app_id": "A0APP",
            "event": {"type": "app_mention", "user": "U0PERSON", "text": "<@U0BOT> status", "channel": "C0OPS", "ts": "1700000002.000100"},
            "type": "event_callback", "event_id": event_id, "event_time": 1700000002}})
}
