//! A fake Discord on loopback: the REST routes imrelay (and discord.py) call, under
//! `/api/v10`, and a Gateway WebSocket.
//!
//! REST: the bot token is checked (`Authorization: Bot <token>`, else 401 with Discord's
//! `{"message": "401: Unauthorized", "code": 0}`), messages are kept as last posted or edited
//! and checked against Discord's limits (2,000 characters of content, 5 action rows of 5
//! buttons or one select, 100-character `custom_id`s, 80-character labels, 25 options;
//! a modal's 45-character title and 5 text inputs), direct-message channels are opened,
//! interaction callbacks are taken once each, with the time since their interaction was
//! dispatched, and answered JSON to `?with_response=1`. Every JSON reply carries exactly
//! `Content-Type: application/json` and the `X-RateLimit-*` headers; a route told to fail
//! answers 429 with `Retry-After`, `X-RateLimit-Scope` and the body's `retry_after` and
//! `global`, as Discord does.
//!
//! Gateway: `Hello` with the heartbeat interval, then `Identify` (its token and intents
//! recorded and checked: a bad token is closed with 4004) or `Resume` (its session and
//! sequence checked, missed events replayed, `RESUMED`; anything else `Invalid Session`);
//! `READY` with a session id and a `resume_gateway_url`; every heartbeat recorded and
//! acknowledged. The test dispatches events (`INTERACTION_CREATE`) and sends `Reconnect`,
//! `Invalid Session` or a close code.

#![allow(dead_code)]

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio::sync::mpsc;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::protocol::CloseFrame;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;

pub(crate) const BOT_TOKEN: &str = "MTAwMDAwMDAwMDAwMDAwMDAx.fake.bot-token";
pub(crate) const BOT_ID: &str = "1000000000000000001";
pub(crate) const APP_ID: &str = "1000000000000000002";
/// Text channels the bot can post in.
pub(crate) const CHANNELS: &[&str] = &["2000000000000000001", "2000000000000000002"];
/// The guild those channels are in.
pub(crate) const GUILD: &str = "3000000000000000001";
/// Discord's window for answering an interaction.
pub(crate) const CALLBACK_WINDOW: Duration = Duration::from_secs(3);

/// A failure the fake answers with, once, instead of succeeding.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Failure {
    /// HTTP 429 with `Retry-After: secs`; `global` for the global limit.
    RateLimited { secs: u64, global: bool },
    /// HTTP 403 `Missing Access` (50001).
    MissingAccess,
    /// HTTP 502 with an HTML body.
    BadGateway,
}

/// One REST call as received.
#[derive(Clone, Debug)]
pub(crate) struct Call {
    pub method: String,
    pub path: String,
    pub query: HashMap<String, String>,
    pub auth: String,
    pub body: Value,
    pub at: Instant,
}

/// One interaction callback as received.
#[derive(Clone, Debug)]
pub(crate) struct Callback {
    pub interaction: String,
    pub body: Value,
    /// Time from the interaction's dispatch to this callback.
    pub latency: Option<Duration>,
}

/// What the gateway saw, in order.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Seen {
    /// A connection opened (its number).
    Open(usize),
    /// `Identify` with these intents.
    Identify { conn: usize, intents: u64 },
    /// `Resume` of this session from this sequence.
    Resume {
        conn: usize,
        session: String,
        seq: Option<u64>,
    },
    /// A heartbeat carrying this sequence.
    Heartbeat { conn: usize, seq: Option<u64> },
    /// The connection ended.
    Closed(usize),
}

enum Cmd {
    Text(String),
    Close(u16),
    Drop,
}

/// The gateway side.
#[derive(Default)]
pub(crate) struct Gateway {
    url: Mutex<String>,
    /// The heartbeat interval sent in `Hello`, ms.
    pub heartbeat_ms: AtomicU64,
    next_conn: AtomicU64,
    open: Mutex<HashMap<usize, mpsc::UnboundedSender<Cmd>>>,
    pub seen: Mutex<Vec<Seen>>,
    /// The session: its id, its last sequence, and the dispatches sent (to replay on resume).
    session: Mutex<Option<(String, u64, Vec<Value>)>>,
    sessions: AtomicU64,
}

impl Gateway {
    pub(crate) fn url(&self) -> String {
        self.url.lock().unwrap().clone()
    }

    pub(crate) fn seen(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }

    pub(crate) fn open_conns(&self) -> Vec<usize> {
        let mut v: Vec<usize> = self.open.lock().unwrap().keys().copied().collect();
        v.sort_unstable();
        v
    }

    /// Whether a session is identified (READY sent) on an open connection.
    pub(crate) fn ready(&self) -> bool {
        self.session.lock().unwrap().is_some() && !self.open_conns().is_empty()
    }

    fn send(&self, cmd: Cmd) {
        let conns = self.open_conns();
        let conn = conns.last().expect("a gateway connection is open");
        let tx = self.open.lock().unwrap().get(conn).cloned().unwrap();
        let _ = tx.send(cmd);
    }

    /// Dispatches event `t` with data `d` on the newest connection (recorded for a resume).
    pub(crate) fn dispatch(&self, t: &str, d: Value) {
        let frame = {
            let mut session = self.session.lock().unwrap();
            let (_, seq, sent) = session.as_mut().expect("a session is identified");
            *seq += 1;
            let frame = json!({"op": 0, "t": t, "s": *seq, "d": d});
            sent.push(frame.clone());
            frame
        };
        self.send(Cmd::Text(frame.to_string()));
    }

    /// Sends `Reconnect` (op 7).
    pub(crate) fn reconnect(&self) {
        self.send(Cmd::Text(json!({"op": 7, "d": null}).to_string()));
    }

    /// Sends `Invalid Session` (op 9) saying whether the session may be resumed.
    pub(crate) fn invalid_session(&self, resumable: bool) {
        if !resumable {
            *self.session.lock().unwrap() = None;
        }
        self.send(Cmd::Text(json!({"op": 9, "d": resumable}).to_string()));
    }

    /// Closes the newest connection with `code`.
    pub(crate) fn close(&self, code: u16) {
        self.send(Cmd::Close(code));
    }

    /// Drops the newest connection's TCP stream without a close frame.
    pub(crate) fn drop_conn(&self) {
        self.send(Cmd::Drop);
    }

    pub(crate) fn identifies(&self) -> Vec<u64> {
        self.seen()
            .into_iter()
            .filter_map(|s| match s {
                Seen::Identify { intents, .. } => Some(intents),
                _ => None,
            })
            .collect()
    }

    pub(crate) fn heartbeats(&self) -> usize {
        self.seen()
            .iter()
            .filter(|s| matches!(s, Seen::Heartbeat { .. }))
            .count()
    }

    pub(crate) fn resumes(&self) -> Vec<(String, Option<u64>)> {
        self.seen()
            .into_iter()
            .filter_map(|s| match s {
                Seen::Resume { session, seq, .. } => Some((session, seq)),
                _ => None,
            })
            .collect()
    }

    /// The current session id.
    pub(crate) fn session_id(&self) -> Option<String> {
        self.session.lock().unwrap().as_ref().map(|s| s.0.clone())
    }
}

#[derive(Default)]
pub(crate) struct FakeState {
    pub calls: Mutex<Vec<Call>>,
    failures: Mutex<HashMap<String, VecDeque<Failure>>>,
    next_id: AtomicU64,
    /// Messages by (channel, id): the latest body posted or edited.
    pub messages: Mutex<HashMap<(String, String), Value>>,
    /// Interactions dispatched and not yet answered: token -> (id, dispatched at).
    pending: Mutex<HashMap<String, (String, Instant)>>,
    pub callbacks: Mutex<Vec<Callback>>,
    /// Direct-message channels opened, by recipient.
    pub dms: Mutex<HashMap<String, String>>,
    /// Threads started from a message, by id (the message's): the thread's channel object.
    pub threads: Mutex<HashMap<String, Value>>,
    /// The application's global commands, as last put.
    pub commands: Mutex<Vec<Value>>,
    pub gateway: Gateway,
    /// The token the gateway and REST accept.
    token: Mutex<String>,
}

impl FakeState {
    /// Makes the next calls whose route is `route` ("POST /channels/{id}/messages") fail.
    pub(crate) fn fail(&self, route: &str, failures: &[Failure]) {
        self.failures
            .lock()
            .unwrap()
            .entry(route.to_string())
            .or_default()
            .extend(failures.iter().cloned());
    }

    /// Calls by method and a path prefix (`"POST", "/channels/"`).
    pub(crate) fn calls(&self, method: &str, path_prefix: &str) -> Vec<Call> {
        self.calls
            .lock()
            .unwrap()
            .iter()
            .filter(|c| c.method == method && c.path.starts_with(path_prefix))
            .cloned()
            .collect()
    }

    /// Messages posted to `channel`, oldest first, as (id, body).
    pub(crate) fn messages_in(&self, channel: &str) -> Vec<(String, Value)> {
        let mut v: Vec<(String, Value)> = self
            .messages
            .lock()
            .unwrap()
            .iter()
            .filter(|((c, _), _)| c == channel)
            .map(|((_, id), body)| (id.clone(), body.clone()))
            .collect();
        v.sort_by_key(|(id, _)| id.parse::<u64>().unwrap_or(0));
        v
    }

    pub(crate) fn message(&self, channel: &str, id: &str) -> Option<Value> {
        self.messages
            .lock()
            .unwrap()
            .get(&(channel.to_string(), id.to_string()))
            .cloned()
    }

    pub(crate) fn callbacks(&self) -> Vec<Callback> {
        self.callbacks.lock().unwrap().clone()
    }

    /// Callbacks that came later than Discord's window (Discord would have shown the person
    /// "This interaction failed").
    pub(crate) fn late_callbacks(&self) -> Vec<Callback> {
        self.callbacks()
            .into_iter()
            .filter(|c| c.latency.is_none_or(|l| l > CALLBACK_WINDOW))
            .collect()
    }

    pub(crate) fn snowflake(&self) -> String {
        (4_000_000_000_000_000_000u64 + self.next_id.fetch_add(1, Ordering::SeqCst) + 1).to_string()
    }

    /// Registers an interaction about to be delivered (by the gateway or by HTTP) so that
    /// its callback is accepted once and timed.
    pub(crate) fn expect_interaction(&self, id: &str, token: &str) {
        self.pending
            .lock()
            .unwrap()
            .insert(token.to_string(), (id.to_string(), Instant::now()));
    }
}

pub(crate) struct FakeDiscord {
    /// The REST base (`http://127.0.0.1:N/api/v10`).
    pub api: String,
    /// The server's root (`http://127.0.0.1:N`).
    pub root: String,
    pub state: Arc<FakeState>,
}

/// A JSON reply with exactly `Content-Type: application/json` and Discord's rate-limit
/// headers.
fn reply(status: StatusCode, body: Value, bucket: &str) -> Response {
    (
        status,
        [
            (header::CONTENT_TYPE, "application/json".to_string()),
            (
                header::HeaderName::from_static("x-ratelimit-limit"),
                "5".into(),
            ),
            (
                header::HeaderName::from_static("x-ratelimit-remaining"),
                "4".into(),
            ),
            (
                header::HeaderName::from_static("x-ratelimit-reset-after"),
                "1.000".into(),
            ),
            (
                header::HeaderName::from_static("x-ratelimit-bucket"),
                bucket.to_string(),
            ),
        ],
        body.to_string(),
    )
        .into_response()
}

fn error(status: StatusCode, code: u64, message: &str) -> Response {
    reply(status, json!({"message": message, "code": code}), "err")
}

/// The privileged intents (`GUILD_MEMBERS`, `GUILD_PRESENCES`, `MESSAGE_CONTENT`): asking
/// for one the application has not enabled closes the Gateway with 4014.
pub(crate) const PRIVILEGED: u64 = (1 << 1) | (1 << 8) | (1 << 15);

/// The data of a `MESSAGE_CREATE`, as Discord sends it to a bot without the Message Content
/// intent: `user` writes `content` in `channel` (a text channel or a thread), as a reply to
/// message `to` of that channel (type 19, a `message_reference` of type 0 and the
/// `referenced_message`) with the reply's @mention on (`ping`, Discord's default) or off.
/// The text (`content`) is empty unless the bot is mentioned: by the reply's ping or by
/// `<@bot>` in the text (Discord's documented exceptions; DMs are not used here).
pub(crate) fn message_create(
    state: &FakeState,
    user: &str,
    channel: &str,
    to: Option<&str>,
    ping: bool,
    content: &str,
) -> Value {
    let id = state.snowflake();
    let in_thread = state.threads.lock().unwrap().contains_key(channel);
    let mut mentions = Vec::new();
    if ping && to.is_some() {
        mentions.push(bot_user());
    }
    if content.contains(&format!("<@{BOT_ID}>")) && mentions.is_empty() {
        mentions.push(bot_user());
    }
    let shown = if mentions.is_empty() { "" } else { content };
    let mut m = json!({
        "id": id, "channel_id": channel, "guild_id": GUILD, "type": 0,
        "author": {"id": user, "username": format!("user{}", &user[user.len() - 2..]),
            "discriminator": "0", "global_name": "Alice", "avatar": null},
        "member": {"roles": [], "joined_at": "2025-01-01T00:00:00.000000+00:00", "deaf": false,
            "mute": false, "flags": 0},
        "content": shown, "timestamp": "2026-01-01T00:00:02.000000+00:00",
        "edited_timestamp": null, "tts": false, "mention_everyone": false,
        "mentions": mentions, "mention_roles": [], "attachments": [], "embeds": [],
        "pinned": false, "flags": 0, "components": [], "nonce": id,
    });
    if let Some(to) = to {
        m["type"] = json!(19);
        m["message_reference"] =
            json!({"type": 0, "message_id": to, "channel_id": channel, "guild_id": GUILD});
        m["referenced_message"] = state.message(channel, to).unwrap_or(Value::Null);
    }
    if in_thread {
        // A message in a thread says where it is among the thread's messages.
        m["position"] = json!(1);
    }
    m
}

fn bot_user() -> Value {
    json!({"id": BOT_ID, "username": "imrelay", "discriminator": "0", "global_name": null,
        "avatar": null, "bot": true, "flags": 0, "verified": true, "mfa_enabled": false})
}

fn channel_object(id: &str) -> Value {
    json!({"id": id, "type": 0, "guild_id": GUILD, "name": format!("approvals-{}", &id[id.len() - 1..]),
        "position": 0, "permission_overwrites": [], "nsfw": false, "parent_id": null,
        "topic": null, "last_message_id": null, "rate_limit_per_user": 0, "flags": 0})
}

/// A channel as an interaction carries it: the channel object (a thread's, with its
/// `parent_id`, for a thread) with the bot's permissions.
fn channel_seen(state: &FakeState, id: &str) -> Value {
    let mut c = match state.threads.lock().unwrap().get(id) {
        Some(thread) => thread.clone(),
        None => channel_object(id),
    };
    c["permissions"] = json!("2248473465835073");
    c
}

/// The route key a failure is set for: the method and the path with ids as `{id}`.
fn route_key(method: &Method, path: &str) -> String {
    let shape: Vec<&str> = path
        .split('/')
        .map(|seg| {
            if seg.chars().all(|c| c.is_ascii_digit()) && !seg.is_empty() {
                "{id}"
            } else {
                seg
            }
        })
        .collect();
    format!("{method} {}", shape.join("/"))
}

async fn rest(
    State(state): State<Arc<FakeState>>,
    method: Method,
    Path(path): Path<String>,
    Query(query): Query<HashMap<String, String>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let path = format!("/{path}");
    let auth = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_string();
    let body: Value = if body.is_empty() {
        Value::Null
    } else {
        match serde_json::from_slice(&body) {
            Ok(v) => v,
            Err(_) => {
                return error(
                    StatusCode::BAD_REQUEST,
                    50109,
                    "The request body contains invalid JSON.",
                );
            }
        }
    };
    state.calls.lock().unwrap().push(Call {
        method: method.to_string(),
        path: path.clone(),
        query: query.clone(),
        auth: auth.clone(),
        body: body.clone(),
        at: Instant::now(),
    });
    let key = route_key(&method, &path);
    let failure = state
        .failures
        .lock()
        .unwrap()
        .get_mut(&key)
        .and_then(VecDeque::pop_front);
    match failure {
        Some(Failure::RateLimited { secs, global }) => {
            return (
                StatusCode::TOO_MANY_REQUESTS,
                [
                    (header::CONTENT_TYPE, "application/json".to_string()),
                    (header::RETRY_AFTER, secs.to_string()),
                    (
                        header::HeaderName::from_static("x-ratelimit-scope"),
                        if global { "global" } else { "user" }.into(),
                    ),
                    (
                        header::HeaderName::from_static("x-ratelimit-global"),
                        global.to_string(),
                    ),
                ],
                json!({"message": "You are being rate limited.", "retry_after": secs as f64, "global": global})
                    .to_string(),
            )
                .into_response();
        }
        Some(Failure::MissingAccess) => {
            return error(StatusCode::FORBIDDEN, 50001, "Missing Access");
        }
        Some(Failure::BadGateway) => {
            return (
                StatusCode::BAD_GATEWAY,
                "<html><body>502 Bad Gateway</body></html>",
            )
                .into_response();
        }
        None => {}
    }
    // Interaction callbacks are authenticated by their token, not the bot's.
    let segs: Vec<&str> = path.trim_start_matches('/').split('/').collect();
    if let ["interactions", id, token, "callback"] = segs.as_slice() {
        return callback(&state, id, token, &query, body);
    }
    if auth != format!("Bot {}", state.token.lock().unwrap()) {
        return error(StatusCode::UNAUTHORIZED, 0, "401: Unauthorized");
    }
    match (method.as_str(), segs.as_slice()) {
        ("GET", ["users", "@me"]) => reply(StatusCode::OK, bot_user(), "users"),
        ("GET", ["oauth2", "applications", "@me"]) => reply(
            StatusCode::OK,
            json!({"id": APP_ID, "name": "imrelay", "description": "", "icon": null,
                "rpc_origins": [], "bot_public": false, "bot_require_code_grant": false,
                "owner": {"id": "6000000000000000001", "username": "owner", "discriminator": "0", "avatar": null},
                "team": null, "verify_key": "00".repeat(32), "flags": 0, "summary": "",
                "bot": bot_user(), "tags": [], "redirect_uris": [], "interactions_endpoint_url": null}),
            "app",
        ),
        ("GET", ["gateway"]) => reply(StatusCode::OK, json!({"url": state.gateway.url()}), "gw"),
        ("GET", ["gateway", "bot"]) => reply(
            StatusCode::OK,
            json!({"url": state.gateway.url(), "shards": 1, "session_start_limit":
                {"total": 1000, "remaining": 999, "reset_after": 14400000, "max_concurrency": 1}}),
            "gw",
        ),
        ("GET", ["channels", id]) => {
            if CHANNELS.contains(id) {
                reply(StatusCode::OK, channel_object(id), "channel")
            } else if state.dms.lock().unwrap().values().any(|d| d == id) {
                reply(StatusCode::OK, json!({"id": id, "type": 1}), "channel")
            } else {
                error(StatusCode::NOT_FOUND, 10003, "Unknown Channel")
            }
        }
        ("POST", ["users", "@me", "channels"]) => {
            let Some(to) = body["recipient_id"].as_str().map(str::to_string) else {
                return error(StatusCode::BAD_REQUEST, 50035, "Invalid Form Body");
            };
            let id = state
                .dms
                .lock()
                .unwrap()
                .entry(to.clone())
                .or_insert_with(|| state.snowflake())
                .clone();
            reply(
                StatusCode::OK,
                json!({"id": id, "type": 1, "last_message_id": null, "flags": 0,
                    "recipients": [{"id": to, "username": "person", "discriminator": "0", "avatar": null}]}),
                "dm",
            )
        }
        ("POST", ["channels", channel, "messages"]) => {
            if !known_channel(&state, channel) {
                return error(StatusCode::NOT_FOUND, 10003, "Unknown Channel");
            }
            if state
                .threads
                .lock()
                .unwrap()
                .get(*channel)
                .is_some_and(|t| t["thread_metadata"]["locked"] == true)
            {
                return error(StatusCode::BAD_REQUEST, 50083, "Thread is archived");
            }
            if let Err(why) = check_message(&body) {
                return reply(
                    StatusCode::BAD_REQUEST,
                    json!({"message": "Invalid Form Body", "code": 50035, "errors": why}),
                    "err",
                );
            }
            let id = state.snowflake();
            let message = message_object(channel, &id, &body);
            state
                .messages
                .lock()
                .unwrap()
                .insert((channel.to_string(), id), message.clone());
            reply(StatusCode::OK, message, &format!("messages-{channel}"))
        }
        ("PUT", ["applications", app, "commands"]) => put_commands(&state, app, &body),
        ("POST", ["channels", channel, "messages", message, "threads"]) => {
            start_thread(&state, channel, message, &body)
        }
        ("PATCH", ["channels", id]) => {
            let mut threads = state.threads.lock().unwrap();
            let Some(thread) = threads.get_mut(*id) else {
                return error(StatusCode::NOT_FOUND, 10003, "Unknown Channel");
            };
            for k in ["archived", "locked"] {
                if let Some(v) = body[k].as_bool() {
                    thread["thread_metadata"][k] = json!(v);
                }
            }
            reply(StatusCode::OK, thread.clone(), "channel")
        }
        ("PATCH", ["channels", channel, "messages", id]) => {
            let Some(mut current) = state.message(channel, id) else {
                return error(StatusCode::NOT_FOUND, 10008, "Unknown Message");
            };
            if let Err(why) = check_message(&body) {
                return reply(
                    StatusCode::BAD_REQUEST,
                    json!({"message": "Invalid Form Body", "code": 50035, "errors": why}),
                    "err",
                );
            }
            for (k, v) in body.as_object().into_iter().flatten() {
                current[k] = v.clone();
            }
            current["edited_timestamp"] = json!("2026-01-01T00:00:01.000000+00:00");
            state
                .messages
                .lock()
                .unwrap()
                .insert((channel.to_string(), id.to_string()), current.clone());
            reply(StatusCode::OK, current, &format!("messages-{channel}"))
        }
        _ => error(StatusCode::NOT_FOUND, 0, "404: Not Found"),
    }
}

fn known_channel(state: &FakeState, channel: &str) -> bool {
    CHANNELS.contains(&channel)
        || state.dms.lock().unwrap().values().any(|d| d == channel)
        || state.threads.lock().unwrap().contains_key(channel)
}

/// `PUT /applications/{id}/commands` (bulk overwrite), as Discord documents it: the
/// application's own id, at most 100 chat input commands (type 1) each named in 1–32
/// lowercase letters, digits, `-` or `_`, described in 1–100 characters, names unique.
fn put_commands(state: &FakeState, app: &str, body: &Value) -> Response {
    if app != APP_ID {
        return error(StatusCode::FORBIDDEN, 50001, "Missing Access");
    }
    let Some(list) = body.as_array().filter(|l| l.len() <= 100) else {
        return error(StatusCode::BAD_REQUEST, 50035, "Invalid Form Body");
    };
    let mut names = std::collections::HashSet::new();
    for c in list {
        let name = c["name"].as_str().unwrap_or("");
        let description = c["description"].as_str().unwrap_or("").chars().count();
        let ok = (1..=32).contains(&name.chars().count())
            && name
                .chars()
                .all(|ch| ch.is_lowercase() || ch.is_numeric() || ch == '-' || ch == '_')
            && (1..=100).contains(&description)
            && c["type"].as_u64().unwrap_or(1) == 1
            && names.insert(name.to_string());
        if !ok {
            return error(StatusCode::BAD_REQUEST, 50035, "Invalid Form Body");
        }
    }
    let made: Vec<Value> = list
        .iter()
        .map(|c| {
            let mut c = c.clone();
            c["id"] = json!(state.snowflake());
            c["application_id"] = json!(APP_ID);
            c["version"] = json!(state.snowflake());
            c["default_member_permissions"] = Value::Null;
            c["type"] = json!(1);
            c
        })
        .collect();
    *state.commands.lock().unwrap() = made.clone();
    reply(StatusCode::OK, Value::Array(made), "commands")
}

/// `POST /channels/{id}/messages/{id}/threads`, as Discord documents it: a public thread
/// (type 11) in a guild text channel, from a message of that channel that has none yet,
/// named in 1–100 characters, archived after 60, 1440, 4320 or 10080 minutes of silence;
/// its id is the message's.
fn start_thread(state: &FakeState, channel: &str, message: &str, body: &Value) -> Response {
    if !CHANNELS.contains(&channel) {
        return error(StatusCode::NOT_FOUND, 10003, "Unknown Channel");
    }
    if state.message(channel, message).is_none() {
        return error(StatusCode::NOT_FOUND, 10008, "Unknown Message");
    }
    let name = body["name"].as_str().unwrap_or("").chars().count();
    let archive = body["auto_archive_duration"].as_u64().unwrap_or(4320);
    if !(1..=100).contains(&name) || ![60, 1440, 4320, 10080].contains(&archive) {
        return reply(
            StatusCode::BAD_REQUEST,
            json!({"message": "Invalid Form Body", "code": 50035}),
            "err",
        );
    }
    let mut threads = state.threads.lock().unwrap();
    if threads.contains_key(message) {
        return error(
            StatusCode::BAD_REQUEST,
            160004,
            "A thread has already been created for this message",
        );
    }
    let thread = json!({"id": message, "type": 11, "guild_id": GUILD, "parent_id": channel,
        "name": body["name"], "owner_id": bot_user()["id"], "last_message_id": null,
        "rate_limit_per_user": 0, "message_count": 0, "member_count": 1, "flags": 0,
        "thread_metadata": {"archived": false, "auto_archive_duration": archive,
            "archive_timestamp": "2026-01-01T00:00:00.000000+00:00", "locked": false}});
    threads.insert(message.to_string(), thread.clone());
    reply(StatusCode::CREATED, thread, &format!("threads-{channel}"))
}

/// A message as Discord returns it.
fn message_object(channel: &str, id: &str, body: &Value) -> Value {
    let mut m = json!({
        "id": id, "channel_id": channel, "type": 0,
        "author": bot_user(),
        "content": body["content"].as_str().unwrap_or_default(),
        "timestamp": "2026-01-01T00:00:00.000000+00:00", "edited_timestamp": null,
        "tts": false, "mention_everyone": false, "mentions": [], "mention_roles": [],
        "attachments": [], "embeds": body.get("embeds").cloned().unwrap_or(json!([])),
        "pinned": false, "flags": body["flags"].as_u64().unwrap_or(0),
        "components": body.get("components").cloned().unwrap_or(json!([])),
        "allowed_mentions": body.get("allowed_mentions").cloned().unwrap_or(Value::Null),
    });
    // A reply (type 19) names its message; Discord leaves the field out otherwise.
    if let Some(reference) = body.get("message_reference") {
        m["type"] = json!(19);
        m["message_reference"] = reference.clone();
    }
    m
}

/// Discord's documented limits on a message and its components.
pub(crate) fn check_message(body: &Value) -> Result<(), String> {
    let chars = |v: &Value| v.as_str().map_or(0, |s| s.chars().count());
    if chars(&body["content"]) > 2000 {
        return Err("content: Must be 2000 or fewer in length.".into());
    }
    let embeds = body["embeds"].as_array().map_or(&[][..], Vec::as_slice);
    if embeds.len() > 10 {
        return Err("embeds: at most 10".into());
    }
    for e in embeds {
        if chars(&e["title"]) > 256 || chars(&e["description"]) > 4096 {
            return Err("embeds: title 256, description 4096".into());
        }
    }
    check_components(&body["components"])
}

/// The classic component limits: 5 action rows, each 5 buttons or one select; ids of 100,
/// labels of 80, 25 options of 100-character labels.
pub(crate) fn check_components(components: &Value) -> Result<(), String> {
    let chars = |v: &Value| v.as_str().map_or(0, |s| s.chars().count());
    let rows = components.as_array().map_or(&[][..], Vec::as_slice);
    if rows.len() > 5 {
        return Err("components: at most 5 action rows".into());
    }
    for row in rows {
        if row["type"] != 1 {
            return Err("components: top level must be action rows".into());
        }
        let items = row["components"].as_array().map_or(&[][..], Vec::as_slice);
        if items.is_empty() || items.len() > 5 {
            return Err("components: 1 to 5 per row".into());
        }
        let selects = items.iter().filter(|c| c["type"] == 3).count();
        if selects > 0 && items.len() > 1 {
            return Err("components: a select is alone in its row".into());
        }
        for c in items {
            if chars(&c["custom_id"]) > 100 {
                return Err("custom_id: at most 100".into());
            }
            if chars(&c["label"]) > 80 {
                return Err("label: at most 80".into());
            }
            if c["type"] == 2
                && c["style"] != 5
                && c["custom_id"].as_str().is_none_or(str::is_empty)
            {
                return Err("button: custom_id required".into());
            }
            if c["type"] == 3 {
                let options = c["options"].as_array().map_or(&[][..], Vec::as_slice);
                if options.is_empty() || options.len() > 25 {
                    return Err("select: 1 to 25 options".into());
                }
                if options
                    .iter()
                    .any(|o| chars(&o["label"]) > 100 || chars(&o["value"]) > 100)
                {
                    return Err("select option: label and value at most 100".into());
                }
                if chars(&c["placeholder"]) > 150 {
                    return Err("select: placeholder at most 150".into());
                }
            }
            if c["type"] == 4 {
                if chars(&c["label"]) > 45 {
                    return Err("text input: label at most 45".into());
                }
                if chars(&c["value"]) > 4000 {
                    return Err("text input: value at most 4000".into());
                }
            }
        }
    }
    Ok(())
}

fn callback(
    state: &FakeState,
    id: &str,
    token: &str,
    query: &HashMap<String, String>,
    body: Value,
) -> Response {
    let Some((expected, at)) = state.pending.lock().unwrap().remove(token) else {
        return error(
            StatusCode::BAD_REQUEST,
            40060,
            "Interaction has already been acknowledged.",
        );
    };
    if expected != id {
        return error(StatusCode::NOT_FOUND, 10062, "Unknown interaction");
    }
    let kind = body["type"].as_u64().unwrap_or(0);
    let data = &body["data"];
    let fits = match kind {
        4 | 7 => check_message(data).is_ok(),
        5 | 6 => true,
        9 => {
            let rows = data["components"].as_array().map_or(0, Vec::len);
            data["title"]
                .as_str()
                .is_some_and(|t| !t.is_empty() && t.chars().count() <= 45)
                && data["custom_id"].as_str().is_some_and(|c| c.len() <= 100)
                && (1..=5).contains(&rows)
                && check_components(&data["components"]).is_ok()
        }
        _ => false,
    };
    let latency = at.elapsed();
    state.callbacks.lock().unwrap().push(Callback {
        interaction: id.to_string(),
        body: body.clone(),
        latency: Some(latency),
    });
    if !fits {
        return reply(
            StatusCode::BAD_REQUEST,
            json!({"message": "Invalid Form Body", "code": 50035}),
            "err",
        );
    }
    if latency > CALLBACK_WINDOW {
        return error(StatusCode::NOT_FOUND, 10062, "Unknown interaction");
    }
    let with_response = query
        .get("with_response")
        .is_some_and(|v| v == "1" || v == "true");
    if !with_response {
        return StatusCode::NO_CONTENT.into_response();
    }
    let message_id = state.snowflake();
    let resource = match kind {
        4 | 7 => json!({"type": kind, "message": message_object("0", &message_id, data)}),
        _ => json!({"type": kind}),
    };
    reply(
        StatusCode::OK,
        json!({
            "interaction": {"id": id, "type": 3, "activity_instance_id": null,
                "response_message_id": if matches!(kind, 4 | 7) { json!(message_id) } else { Value::Null },
                "response_message_loading": kind == 5,
                "response_message_ephemeral": data["flags"].as_u64().is_some_and(|f| f & 64 != 0)},
            "resource": resource,
        }),
        "interactions",
    )
}

async fn serve_gateway(listener: tokio::net::TcpListener, state: Arc<FakeState>) {
    loop {
        let Ok((tcp, _)) = listener.accept().await else {
            return;
        };
        let state = state.clone();
        tokio::spawn(async move {
            let Ok(ws) = tokio_tungstenite::accept_async(tcp).await else {
                return;
            };
            connection(ws, state).await;
        });
    }
}

async fn connection(
    ws: tokio_tungstenite::WebSocketStream<tokio::net::TcpStream>,
    state: Arc<FakeState>,
) {
    let g = &state.gateway;
    let conn = g.next_conn.fetch_add(1, Ordering::SeqCst) as usize;
    let (mut sink, mut stream) = ws.split();
    let interval = g.heartbeat_ms.load(Ordering::SeqCst);
    let hello = json!({"op": 10, "d": {"heartbeat_interval": interval}, "s": null, "t": null});
    if sink
        .send(Message::Text(hello.to_string().into()))
        .await
        .is_err()
    {
        return;
    }
    let (tx, mut rx) = mpsc::unbounded_channel();
    g.open.lock().unwrap().insert(conn, tx.clone());
    g.seen.lock().unwrap().push(Seen::Open(conn));
    let close = |code: u16| {
        Message::Close(Some(CloseFrame {
            code: CloseCode::from(code),
            reason: "".into(),
        }))
    };
    loop {
        tokio::select! {
            cmd = rx.recv() => match cmd {
                Some(Cmd::Text(t)) => { let _ = sink.send(Message::Text(t.into())).await; }
                Some(Cmd::Close(code)) => { let _ = sink.send(close(code)).await; break; }
                Some(Cmd::Drop) | None => break,
            },
            msg = stream.next() => match msg {
                Some(Ok(Message::Text(t))) => {
                    let Ok(v) = serde_json::from_str::<Value>(t.as_str()) else {
                        let _ = sink.send(close(4002)).await;
                        break;
                    };
                    if let Some(out) = gateway_frame(&state, conn, &v) {
                        match out {
                            Ok(frames) => for f in frames {
                                let _ = sink.send(Message::Text(f.to_string().into())).await;
                            },
                            Err(code) => { let _ = sink.send(close(code)).await; break; }
                        }
                    }
                }
                Some(Ok(Message::Close(_))) | None | Some(Err(_)) => break,
                Some(Ok(_)) => {}
            },
        }
    }
    g.open.lock().unwrap().remove(&conn);
    g.seen.lock().unwrap().push(Seen::Closed(conn));
}

/// What the gateway answers to one frame from the client: frames to send, or a close code.
fn gateway_frame(state: &FakeState, conn: usize, v: &Value) -> Option<Result<Vec<Value>, u16>> {
    let g = &state.gateway;
    let token_ok = |t: &Value| t.as_str() == Some(state.token.lock().unwrap().as_str());
    match v["op"].as_u64() {
        Some(1) => {
            g.seen.lock().unwrap().push(Seen::Heartbeat {
                conn,
                seq: v["d"].as_u64(),
            });
            Some(Ok(vec![json!({"op": 11, "d": null})]))
        }
        Some(2) => {
            let d = &v["d"];
            let intents = d["intents"].as_u64();
            g.seen.lock().unwrap().push(Seen::Identify {
                conn,
                intents: intents.unwrap_or(u64::MAX),
            });
            if !token_ok(&d["token"]) {
                return Some(Err(4004));
            }
            if intents.is_none() || !d["properties"].is_object() {
                return Some(Err(4002));
            }
            // The fake application has no privileged intent enabled in the Developer Portal.
            if intents.is_some_and(|i| i & PRIVILEGED != 0) {
                return Some(Err(4014));
            }
            let n = g.sessions.fetch_add(1, Ordering::SeqCst) + 1;
            let session = format!("fake-session-{n}");
            *g.session.lock().unwrap() = Some((session.clone(), 1, Vec::new()));
            let ready = json!({"op": 0, "t": "READY", "s": 1, "d": {
                "v": 10, "user": bot_user(), "guilds": [], "session_id": session,
                "resume_gateway_url": g.url(), "shard": [0, 1],
                "application": {"id": APP_ID, "flags": 0},
                "private_channels": [], "relationships": [], "presences": [],
                "geo_ordered_rtc_regions": [], "guild_join_requests": [], "user_settings": {},
            }});
            Some(Ok(vec![ready]))
        }
        Some(6) => {
            let d = &v["d"];
            let session = d["session_id"].as_str().unwrap_or_default().to_string();
            let seq = d["seq"].as_u64();
            g.seen.lock().unwrap().push(Seen::Resume {
                conn,
                session: session.clone(),
                seq,
            });
            if !token_ok(&d["token"]) {
                return Some(Err(4004));
            }
            let mut current = g.session.lock().unwrap();
            match current.as_mut() {
                Some((id, last, sent)) if *id == session => {
                    let from = seq.unwrap_or(0);
                    let mut frames: Vec<Value> = sent
                        .iter()
                        .filter(|f| f["s"].as_u64().is_some_and(|s| s > from))
                        .cloned()
                        .collect();
                    *last += 1;
                    frames.push(json!({"op": 0, "t": "RESUMED", "s": *last, "d": {"_trace": ["fake-gateway"]}}));
                    Some(Ok(frames))
                }
                _ => Some(Ok(vec![json!({"op": 9, "d": false})])),
            }
        }
        _ => Some(Err(4001)),
    }
}

impl FakeDiscord {
    pub(crate) async fn start() -> Self {
        let state = Arc::new(FakeState::default());
        *state.token.lock().unwrap() = BOT_TOKEN.to_string();
        state.gateway.heartbeat_ms.store(41_250, Ordering::SeqCst);
        let ws_listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        *state.gateway.url.lock().unwrap() = format!("ws://{}", ws_listener.local_addr().unwrap());
        tokio::spawn(serve_gateway(ws_listener, state.clone()));
        let app = Router::new()
            .route(
                "/api/v10/{*path}",
                get(rest).post(rest).patch(rest).delete(rest).put(rest),
            )
            .with_state(state.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let root = format!("http://{}", listener.local_addr().unwrap());
        tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        FakeDiscord {
            api: format!("{root}/api/v10"),
            root,
            state,
        }
    }
}

/// An `INTERACTION_CREATE` for a click on component `custom_id` of message `message_id` in
/// `channel` by `user`; registered with `state` so its callback is timed.
pub(crate) fn component_click(
    state: &FakeState,
    n: u64,
    user: &str,
    channel: &str,
    message_id: &str,
    custom_id: &str,
    values: Option<Vec<&str>>,
) -> Value {
    let (id, token) = (
        format!("{}", 5_000_000_000_000_000_000u64 + n),
        format!("itoken-{n}"),
    );
    state.expect_interaction(&id, &token);
    let mut data = json!({"custom_id": custom_id, "component_type": 2});
    if let Some(values) = values {
        data = json!({"custom_id": custom_id, "component_type": 3, "values": values});
    }
    let message = state
        .message(channel, message_id)
        .unwrap_or_else(|| json!({"id": message_id, "channel_id": channel}));
    json!({
        "id": id, "application_id": APP_ID, "type": 3, "token": token, "version": 1,
        "data": data, "guild_id": GUILD, "channel_id": channel,
        "channel": channel_seen(state, channel),
        "member": {"user": {"id": user, "username": format!("user{}", &user[user.len() - 2..]),
            "discriminator": "0", "global_name": null, "avatar": null},
            "roles": [], "joined_at": "2025-01-01T00:00:00.000000+00:00", "deaf": false, "mute": false,
            "flags": 0, "permissions": "2248473465835073"},
        "message": message, "locale": "en-US", "guild_locale": "en-US",
        "app_permissions": "2248473465835073", "entitlements": [],
        "authorizing_integration_owners": {"0": GUILD}, "context": 0,
        "attachment_size_limit": 10485760,
    })
}

/// An `INTERACTION_CREATE` for chat input command `name` (`/whoami`) used by `user` in
/// `channel`.
pub(crate) fn command_use(
    state: &FakeState,
    n: u64,
    user: &str,
    channel: &str,
    name: &str,
) -> Value {
    let mut v = component_click(state, n, user, channel, "0", "unused", None);
    v["type"] = json!(2);
    v["data"] = json!({"id": "7000000000000000001", "name": name, "type": 1});
    if let Some(m) = v.as_object_mut() {
        m.remove("message");
    }
    v
}

/// An `INTERACTION_CREATE` for the submission of modal `custom_id` (opened from a button on
/// `message_id`) with text inputs `(custom_id, value)`.
pub(crate) fn modal_submit(
    state: &FakeState,
    n: u64,
    user: &str,
    channel: &str,
    message_id: &str,
    custom_id: &str,
    inputs: &[(&str, &str)],
) -> Value {
    let mut v = component_click(state, n, user, channel, message_id, custom_id, None);
    v["type"] = json!(5);
    let rows: Vec<Value> = inputs
        .iter()
        .map(|(id, value)| json!({"type": 1, "components": [{"type": 4, "custom_id": id, "value": value}]}))
        .collect();
    v["data"] = json!({"custom_id": custom_id, "components": rows});
    v
}
