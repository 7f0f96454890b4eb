//! A fake Telegram Bot API on loopback: records every call, answers like Telegram, serves
//! queued updates through `getUpdates` (long polling), and fails on request (429 with
//! `retry_after`, 5xx, 4xx) or holds calls until released.
//!
//! It refuses what Telegram refuses, with Telegram's `400 Bad Request`: message text longer
//! than 4096 UTF-16 units once its entities are parsed, empty text, HTML that is not valid
//! for `parse_mode=HTML` (unknown or unbalanced tags, bare `<`, `>` or `&`, unknown
//! entities), `callback_data` outside 1–64 bytes, toasts over 200 units. Refused calls are
//! kept apart from [`FakeTelegram::calls`], and a test that caused one fails when its fake is
//! dropped unless it took them with [`FakeTelegram::take_refusals`]: every test checks the
//! limits.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Json;
use axum::Router;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use serde_json::{Value, json};
use tokio::sync::{Notify, Semaphore};
use tokio::time::Instant;

pub(crate) const TOKEN: &str = "123456:TEST-token_abc";
pub(crate) const BOT_ID: i64 = 123456;
pub(crate) const BOT_USERNAME: &str = "imrelay_test_bot";

/// One recorded call.
#[derive(Clone, Debug)]
pub(crate) struct Call {
    pub method: String,
    pub params: Value,
    pub at: Instant,
    /// The id given to a sent message.
    pub message_id: Option<i64>,
}

/// A scripted failure.
#[derive(Clone, Debug)]
pub(crate) enum Fail {
    /// 429 with `parameters.retry_after`.
    RetryAfter(u32),
    /// An HTTP status with Telegram's error body.
    Status(u16, String),
}

#[derive(Default)]
struct Inner {
    calls: Mutex<Vec<Call>>,
    /// Calls refused as Telegram would refuse them: (method, why, params).
    refused: Mutex<Vec<(String, String, Value)>>,
    changed: Notify,
    updates: Mutex<VecDeque<Value>>,
    update_arrived: Notify,
    failures: Mutex<HashMap<String, VecDeque<Fail>>>,
    holds: Mutex<HashMap<String, Arc<Semaphore>>>,
    next_message: AtomicI64,
    next_update: AtomicI64,
    /// Supergroups whose topics are on (`is_forum`).
    forums: Mutex<HashSet<i64>>,
    /// Forum topics by (chat, message_thread_id): whether each is closed.
    topics: Mutex<HashMap<(i64, i64), bool>>,
}

/// The fake server.
pub(crate) struct FakeTelegram {
    pub url: String,
    inner: Arc<Inner>,
}

impl Drop for FakeTelegram {
    fn drop(&mut self) {
        let refused = self.inner.refused.lock().unwrap();
        if !refused.is_empty() && !std::thread::panicking() {
            panic!("the fake Bot API refused calls Telegram would refuse: {refused:#?}");
        }
    }
}

pub(crate) fn bot_user() -> Value {
    json!({"id": BOT_ID, "is_bot": true, "first_name": "imrelay", "username": BOT_USERNAME})
}

pub(crate) fn chat(id: i64) -> Value {
    if id < 0 {
        json!({"id": id, "type": "group", "title": "Ops"})
    } else {
        json!({"id": id, "type": "private", "first_name": "Private"})
    }
}

/// A message from the bot, as Telegram returns it.
pub(crate) fn bot_message(chat_id: i64, message_id: i64, text: &str) -> Value {
    json!({
        "message_id": message_id,
        "date": 1_700_000_000,
        "chat": chat(chat_id),
        "from": bot_user(),
        "text": text,
    })
}

fn ok(result: Value) -> Response {
    Json(json!({"ok": true, "result": result})).into_response()
}

fn error(status: u16, description: &str, extra: Option<Value>) -> Response {
    let mut body = json!({"ok": false, "error_code": status, "description": description});
    if let Some(p) = extra {
        body["parameters"] = p;
    }
    (
        StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR),
        Json(body),
    )
        .into_response()
}

/// Tags Telegram accepts with `parse_mode=HTML`.
const TAGS: [&str; 15] = [
    "b",
    "strong",
    "i",
    "em",
    "u",
    "ins",
    "s",
    "strike",
    "del",
    "span",
    "tg-spoiler",
    "a",
    "code",
    "pre",
    "blockquote",
];

fn entity(name: &str) -> Option<char> {
    match name {
        "lt" => Some('<'),
        "gt" => Some('>'),
        "amp" => Some('&'),
        "quot" => Some('"'),
        _ => {
            let n = name.strip_prefix('#')?;
            let code = match n.strip_prefix(['x', 'X']) {
                Some(hex) => u32::from_str_radix(hex, 16).ok()?,
                None => n.parse().ok()?,
            };
            char::from_u32(code)
        }
    }
}

/// Parses `html` as Telegram does for `parse_mode=HTML`; returns the text shown, or the
/// reason Telegram gives for refusing it.
pub(crate) fn parse_html(html: &str) -> Result<String, String> {
    let err = |m: String| Err(format!("Bad Request: can't parse entities: {m}"));
    let mut out = String::new();
    let mut open: Vec<String> = Vec::new();
    let mut i = 0;
    while i < html.len() {
        let rest = &html[i..];
        let c = rest.chars().next().unwrap();
        match c {
            '<' => {
                let Some(end) = rest.find('>') else {
                    return err(format!("Unclosed start tag at byte offset {i}"));
                };
                let tag = &rest[1..end];
                if let Some(name) = tag.strip_prefix('/') {
                    match open.pop() {
                        Some(top) if top == name.trim() => {}
                        Some(top) => {
                            return err(format!(
                                "Unmatched end tag at byte offset {i}, expected \"</{top}>\", found \"</{name}>\""
                            ));
                        }
                        None => {
                            return err(format!("Unexpected end tag at byte offset {i}"));
                        }
                    }
                } else {
                    let name = tag.split_whitespace().next().unwrap_or("");
                    if !TAGS.contains(&name) {
                        return err(format!(
                            "Unsupported start tag \"{name}\" at byte offset {i}"
                        ));
                    }
                    // Attribute values are quoted and may hold entities but no `<`.
                    if tag.contains('<') || !tag.matches('"').count().is_multiple_of(2) {
                        return err(format!("Bad attribute in tag at byte offset {i}"));
                    }
                    open.push(name.to_string());
                }
                i += end + 1;
            }
            '>' => return err(format!("Unexpected \">\" at byte offset {i}")),
            '&' => {
                let decoded = rest
                    .find(';')
                    .filter(|end| *end <= 10)
                    .and_then(|end| entity(&rest[1..end]).map(|c| (c, end)));
                let Some((ch, end)) = decoded else {
                    return err(format!(
                        "Can't find end of the entity starting at byte offset {i}"
                    ));
                };
                out.push(ch);
                i += end + 1;
            }
            c => {
                out.push(c);
                i += c.len_utf8();
            }
        }
    }
    if let Some(tag) = open.pop() {
        return err(format!(
            "Can't find end tag corresponding to start tag \"{tag}\""
        ));
    }
    Ok(out)
}

/// Why Telegram would refuse this call, if it would.
pub(crate) fn refusal(method: &str, params: &Value) -> Option<String> {
    if matches!(method, "sendMessage" | "editMessageText") {
        let text = params["text"].as_str().unwrap_or("");
        let shown = if params["parse_mode"] == "HTML" {
            match parse_html(text) {
                Ok(s) => s,
                Err(e) => return Some(e),
            }
        } else {
            text.to_string()
        };
        if shown.trim().is_empty() {
            return Some("Bad Request: message text is empty".into());
        }
        if shown.encode_utf16().count() > 4096 {
            return Some("Bad Request: message is too long".into());
        }
    }
    if let Some(rows) = params["reply_markup"]["inline_keyboard"].as_array() {
        for b in rows
            .iter()
            .flat_map(|r| r.as_array().cloned().unwrap_or_default())
        {
            if b["text"].as_str().is_none_or(str::is_empty) {
                return Some(
                    "Bad Request: text buttons are unallowed in the inline keyboard".into(),
                );
            }
            // "Exactly one of the optional fields must be used" (InlineKeyboardButton).
            let kinds = [
                "url",
                "callback_data",
                "switch_inline_query",
                "login_url",
                "pay",
            ];
            if kinds.iter().filter(|k| b.get(**k).is_some()).count() != 1 {
                return Some("Bad Request: can't parse inline keyboard button".into());
            }
            if let Some(u) = b.get("url")
                && !u
                    .as_str()
                    .is_some_and(|u| u.starts_with("https://") || u.starts_with("http://"))
            {
                return Some("Bad Request: BUTTON_URL_INVALID".into());
            }
            if let Some(d) = b.get("callback_data")
                && !d.as_str().is_some_and(|d| (1..=64).contains(&d.len()))
            {
                return Some("Bad Request: BUTTON_DATA_INVALID".into());
            }
        }
    }
    if method == "answerCallbackQuery"
        && params["text"]
            .as_str()
            .is_some_and(|t| t.encode_utf16().count() > 200)
    {
        return Some("Bad Request: MESSAGE_TOO_LONG".into());
    }
    None
}

/// Why Telegram would refuse this call for its forum topics, if it would: a topic made in a
/// chat whose topics are off, a name outside 1–128 characters, a message into a topic that
/// does not exist or is closed, a topic closed twice or never made.
fn topic_refusal(inner: &Inner, method: &str, params: &Value) -> Option<String> {
    let chat = params["chat_id"].as_i64().unwrap_or(0);
    let topic = params["message_thread_id"].as_i64();
    let topics = inner.topics.lock().unwrap();
    match method {
        "createForumTopic" => {
            if !inner.forums.lock().unwrap().contains(&chat) {
                return Some("Bad Request: the chat is not a forum".into());
            }
            let name = params["name"].as_str().unwrap_or("").chars().count();
            if !(1..=128).contains(&name) {
                return Some("Bad Request: TOPIC_NAME_INVALID".into());
            }
            None
        }
        "closeForumTopic" => match topic.and_then(|t| topics.get(&(chat, t))) {
            None => Some("Bad Request: TOPIC_ID_INVALID".into()),
            Some(true) => Some("Bad Request: TOPIC_NOT_MODIFIED".into()),
            Some(false) => None,
        },
        "sendMessage" => match topic.map(|t| topics.get(&(chat, t))) {
            None => None,
            Some(None) => Some("Bad Request: message thread not found".into()),
            Some(Some(true)) => Some("Bad Request: TOPIC_CLOSED".into()),
            Some(Some(false)) => None,
        },
        _ => None,
    }
}

/// Reads the text fields of a `multipart/form-data` body (teloxide sends `setWebhook` so)
/// into an object; values that parse as JSON are kept as JSON.
fn form_fields(content_type: &str, body: &[u8]) -> Value {
    let Some(boundary) = content_type.split("boundary=").nth(1) else {
        return Value::Null;
    };
    let body = String::from_utf8_lossy(body);
    let mut fields = serde_json::Map::new();
    for part in body.split(&format!("--{}", boundary.trim_matches('"'))) {
        let Some((head, value)) = part.split_once("\r\n\r\n") else {
            continue;
        };
        let Some(name) = head
            .split("name=\"")
            .nth(1)
            .and_then(|n| n.split('"').next())
        else {
            continue;
        };
        let value = value.strip_suffix("\r\n").unwrap_or(value);
        let parsed = serde_json::from_str(value).unwrap_or(Value::String(value.to_string()));
        fields.insert(name.to_string(), parsed);
    }
    Value::Object(fields)
}

async fn api(
    State(inner): State<Arc<Inner>>,
    Path((bot, method)): Path<(String, String)>,
    headers: axum::http::HeaderMap,
    body: axum::body::Bytes,
) -> Response {
    let content_type = headers
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    let params: Value = if content_type.starts_with("multipart/form-data") {
        form_fields(content_type, &body)
    } else {
        serde_json::from_slice(&body).unwrap_or(Value::Null)
    };
    // Method names are case-insensitive; teloxide writes them as `SendMessage`.
    let method = {
        let mut c = method.chars();
        match c.next() {
            Some(first) => first.to_lowercase().chain(c).collect::<String>(),
            None => method,
        }
    };
    if bot != format!("bot{TOKEN}") {
        return error(401, "Unauthorized", None);
    }
    if let Some(why) = refusal(&method, &params) {
        inner
            .refused
            .lock()
            .unwrap()
            .push((method.clone(), why.clone(), params));
        inner.changed.notify_waiters();
        return error(400, &why, None);
    }
    if let Some(why) = topic_refusal(&inner, &method, &params) {
        inner
            .refused
            .lock()
            .unwrap()
            .push((method.clone(), why.clone(), params));
        inner.changed.notify_waiters();
        return error(400, &why, None);
    }
    // sendMessage ids are assigned when the call arrives, so tests can match calls to ids.
    let message_id =
        (method == "sendMessage").then(|| inner.next_message.fetch_add(1, Ordering::SeqCst) + 1);
    inner.calls.lock().unwrap().push(Call {
        method: method.clone(),
        params: params.clone(),
        at: Instant::now(),
        message_id,
    });
    inner.changed.notify_waiters();
    let hold = inner.holds.lock().unwrap().get(&method).cloned();
    if let Some(gate) = hold {
        let _permit = gate.acquire().await;
    }
    let failure = inner
        .failures
        .lock()
        .unwrap()
        .get_mut(&method)
        .and_then(VecDeque::pop_front);
    match failure {
        Some(Fail::RetryAfter(secs)) => {
            return error(
                429,
                &format!("Too Many Requests: retry after {secs}"),
                Some(json!({"retry_after": secs})),
            );
        }
        Some(Fail::Status(status, description)) => return error(status, &description, None),
        None => {}
    }
    match method.as_str() {
        "getMe" => ok(json!({
            "id": BOT_ID, "is_bot": true, "first_name": "imrelay", "username": BOT_USERNAME,
            "can_join_groups": true, "can_read_all_group_messages": false,
            "supports_inline_queries": false, "can_connect_to_business": false,
            "has_main_web_app": false
        })),
        "sendMessage" => {
            let id = message_id.unwrap_or_default();
            let chat_id = params["chat_id"].as_i64().unwrap_or(0);
            let mut m = bot_message(chat_id, id, params["text"].as_str().unwrap_or_default());
            if let Some(topic) = params["message_thread_id"].as_i64() {
                m["message_thread_id"] = json!(topic);
                m["is_topic_message"] = json!(true);
                m["chat"] =
                    json!({"id": chat_id, "type": "supergroup", "title": "Ops", "is_forum": true});
            }
            ok(m)
        }
        "createForumTopic" => {
            // A topic's id is the id of the service message that opens it.
            let chat_id = params["chat_id"].as_i64().unwrap_or(0);
            let topic = inner.next_message.fetch_add(1, Ordering::SeqCst) + 1;
            inner.topics.lock().unwrap().insert((chat_id, topic), false);
            ok(json!({"message_thread_id": topic, "name": params["name"],
                "icon_color": params["icon_color"].as_i64().unwrap_or(7322096)}))
        }
        "closeForumTopic" => {
            let chat_id = params["chat_id"].as_i64().unwrap_or(0);
            let topic = params["message_thread_id"].as_i64().unwrap_or(0);
            inner.topics.lock().unwrap().insert((chat_id, topic), true);
            ok(json!(true))
        }
        "editMessageText" | "editMessageReplyMarkup" => {
            let chat_id = params["chat_id"].as_i64().unwrap_or(0);
            let id = params["message_id"].as_i64().unwrap_or(0);
            ok(bot_message(
                chat_id,
                id,
                params["text"].as_str().unwrap_or("prompt"),
            ))
        }
        "getUpdates" => {
            let wait = Duration::from_secs(params["timeout"].as_u64().unwrap_or(0));
            let deadline = Instant::now() + wait;
            loop {
                let arrived = inner.update_arrived.notified();
                let batch: Vec<Value> = inner.updates.lock().unwrap().drain(..).collect();
                if !batch.is_empty() {
                    return ok(Value::Array(batch));
                }
                if tokio::time::timeout_at(deadline, arrived).await.is_err() {
                    return ok(json!([]));
                }
            }
        }
        _ => ok(json!(true)),
    }
}

impl FakeTelegram {
    /// Turns topics on in supergroup `chat` (a forum).
    pub(crate) fn forum(&self, chat: i64) {
        self.inner.forums.lock().unwrap().insert(chat);
    }

    /// Whether topic `topic` of `chat` was made and is closed (`None`: never made).
    pub(crate) fn topic_closed(&self, chat: i64, topic: i64) -> Option<bool> {
        self.inner
            .topics
            .lock()
            .unwrap()
            .get(&(chat, topic))
            .copied()
    }

    /// Starts the fake on 127.0.0.1:0.
    pub(crate) async fn start() -> Self {
        let inner = Arc::new(Inner {
            next_message: AtomicI64::new(100),
            next_update: AtomicI64::new(5000),
            ..Inner::default()
        });
        let app = Router::new()
            .route("/{bot}/{method}", post(api))
            .with_state(inner.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, app).await });
        Self { url, inner }
    }

    /// The calls refused as Telegram would refuse them (method, reason); taking them tells
    /// the fake they were expected.
    pub(crate) fn take_refusals(&self) -> Vec<(String, String)> {
        std::mem::take(&mut *self.inner.refused.lock().unwrap())
            .into_iter()
            .map(|(m, why, _)| (m, why))
            .collect()
    }

    /// Every accepted call of `method` so far, in order (refused ones are not among them).
    pub(crate) fn calls(&self, method: &str) -> Vec<Call> {
        self.inner
            .calls
            .lock()
            .unwrap()
            .iter()
            .filter(|c| c.method == method)
            .cloned()
            .collect()
    }

    /// Waits until `pred` holds for the calls of `method`, and returns them.
    pub(crate) async fn wait_for(&self, method: &str, pred: impl Fn(&[Call]) -> bool) -> Vec<Call> {
        self.wait_for_within(method, Duration::from_secs(15), pred)
            .await
    }

    /// [`FakeTelegram::wait_for`], giving up after `limit`.
    pub(crate) async fn wait_for_within(
        &self,
        method: &str,
        limit: Duration,
        pred: impl Fn(&[Call]) -> bool,
    ) -> Vec<Call> {
        let deadline = Instant::now() + limit;
        loop {
            let changed = self.inner.changed.notified();
            let calls = self.calls(method);
            if pred(&calls) {
                return calls;
            }
            if tokio::time::timeout_at(deadline, changed).await.is_err() {
                panic!(
                    "timed out waiting for {method} calls; got {:#?}; refused: {:#?}",
                    self.calls(method)
                        .iter()
                        .map(|c| &c.params)
                        .collect::<Vec<_>>(),
                    self.inner.refused.lock().unwrap()
                );
            }
        }
    }

    /// Waits for at least `n` calls of `method`.
    pub(crate) async fn wait_n(&self, method: &str, n: usize) -> Vec<Call> {
        self.wait_for(method, |c| c.len() >= n).await
    }

    /// Makes the next `times` calls of `method` fail with `fail`.
    pub(crate) fn fail(&self, method: &str, fail: Fail, times: usize) {
        let mut f = self.inner.failures.lock().unwrap();
        let q = f.entry(method.to_string()).or_default();
        for _ in 0..times {
            q.push_back(fail.clone());
        }
    }

    /// Holds calls of `method` (after recording them) until [`FakeTelegram::release`].
    pub(crate) fn hold(&self, method: &str) {
        self.inner
            .holds
            .lock()
            .unwrap()
            .insert(method.to_string(), Arc::new(Semaphore::new(0)));
    }

    /// Lets held calls of `method` through.
    pub(crate) fn release(&self, method: &str) {
        if let Some(gate) = self.inner.holds.lock().unwrap().remove(method) {
            gate.add_permits(1 << 20);
        }
    }

    /// The next update id.
    pub(crate) fn next_update_id(&self) -> i64 {
        self.inner.next_update.fetch_add(1, Ordering::SeqCst)
    }

    /// Queues an update for `getUpdates`.
    pub(crate) fn push_update(&self, update: Value) {
        self.push_updates(vec![update]);
    }

    /// Queues updates so that one `getUpdates` answer carries them all, in this order.
    pub(crate) fn push_updates(&self, updates: Vec<Value>) {
        self.inner.updates.lock().unwrap().extend(updates);
        self.inner.update_arrived.notify_waiters();
    }
}

/// A person.
#[derive(Clone, Copy)]
pub(crate) struct Person {
    pub id: i64,
    pub first_name: &'static str,
}

impl Person {
    pub(crate) fn json(&self) -> Value {
        json!({"id": self.id, "is_bot": false, "first_name": self.first_name, "username": self.first_name.to_lowercase()})
    }
}

/// A callback query update: `who` tapped the button with `data` on message `message` in
/// `chat`.
pub(crate) fn tap(update_id: i64, who: Person, chat_id: i64, message: i64, data: &str) -> Value {
    json!({
        "update_id": update_id,
        "callback_query": {
            "id": format!("cq-{update_id}"),
            "from": who.json(),
            "message": bot_message(chat_id, message, "prompt"),
            "chat_instance": "ci-1",
            "data": data,
        }
    })
}

/// A text message update from `who` in `chat`, optionally replying to message `reply_to`.
pub(crate) fn text(
    update_id: i64,
    who: Person,
    chat_id: i64,
    body: &str,
    reply_to: Option<i64>,
) -> Value {
    let mut m = json!({
        "message_id": 90_000 + update_id,
        "date": 1_700_000_000,
        "chat": chat(chat_id),
        "from": who.json(),
        "text": body,
    });
    if let Some(r) = reply_to {
        m["reply_to_message"] = bot_message(chat_id, r, "prompt");
    }
    if body.starts_with('/') {
        let len = body
            .split_whitespace()
            .next()
            .unwrap_or("")
            .encode_utf16()
            .count();
        m["entities"] = json!([{"type": "bot_command", "offset": 0, "length": len}]);
    }
    json!({"update_id": update_id, "message": m})
}
