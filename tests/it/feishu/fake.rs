//! A fake Feishu OpenAPI server on loopback: issues tenant tokens, accepts card sends (with
//! `uuid` deduplication) and card updates, records everything, and can be told to fail.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Json;
use axum::Router;
use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{patch, post};
use serde_json::{Value, json};

pub(crate) const APP_ID: &str = "cli_test_app";
pub(crate) const APP_SECRET: &str = "test-app-secret";
/// The platform refuses a card message whose request body is over 30 KB.
pub(crate) const MAX_CARD_BODY: usize = 30_000;

/// A failure the fake answers with, once, instead of succeeding.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Failure {
    /// HTTP 400 with code 99991400 and a one-second reset header.
    Throttle,
    /// HTTP 502 with an HTML body.
    ServerError,
    /// Creates the message, then answers HTTP 500 (the answer is lost on the way).
    CommitThenFail,
    /// HTTP 400 with a permanent refusal (bot not in the chat).
    Refuse,
}

/// One card send as received.
#[derive(Clone, Debug)]
pub(crate) struct Send {
    pub receive_id_type: String,
    pub receive_id: String,
    pub uuid: String,
    pub card: Value,
    pub token: String,
    /// The size of the request body, bytes.
    pub body_len: usize,
    /// The message id answered (None if the fake failed the request).
    pub message_id: Option<String>,
}

/// One reply (`POST /open-apis/im/v1/messages/{message_id}/reply`) as accepted.
#[derive(Clone, Debug)]
pub(crate) struct Reply {
    /// The message replied to.
    pub parent: String,
    pub msg_type: String,
    /// The content, parsed (a card, or `{"text": ...}`).
    pub content: Value,
    pub reply_in_thread: bool,
    pub uuid: String,
    /// The reply's message id.
    pub message_id: String,
    /// The thread it is in (`omt_…`), when it is in one.
    pub thread_id: Option<String>,
}

/// One card update as received.
#[derive(Clone, Debug)]
pub(crate) struct Patch {
    pub message_id: String,
    pub card: Value,
    /// The size of the request body, bytes.
    pub body_len: usize,
}

#[derive(Default)]
pub(crate) struct FakeState {
    pub token_requests: AtomicUsize,
    next_token: AtomicU64,
    next_message: AtomicU64,
    /// Lifetime of issued tokens, seconds.
    pub expire: AtomicU64,
    /// Delay before answering a token request, ms.
    pub token_delay_ms: AtomicU64,
    /// Delay before answering a send, ms.
    pub send_delay_ms: AtomicU64,
    issued: Mutex<Vec<String>>,
    revoked: Mutex<HashSet<String>>,
    by_uuid: Mutex<HashMap<String, String>>,
    pub sends: Mutex<Vec<Send>>,
    pub patches: Mutex<Vec<Patch>>,
    pub replies: Mutex<Vec<Reply>>,
    /// The thread each message is in, once a reply made one under it or was posted in it.
    threads: Mutex<HashMap<String, String>>,
    /// Messages people wrote (that the bot may reply to).
    written: Mutex<HashSet<String>>,
    send_failures: Mutex<VecDeque<Failure>>,
    patch_failures: Mutex<VecDeque<Failure>>,
}

impl FakeState {
    /// A person wrote message `id`, replying to `parent` (in its thread, if it has one):
    /// the bot may reply to it. Returns the thread it is in.
    pub(crate) fn written(&self, id: &str, parent: Option<&str>) -> Option<String> {
        self.written.lock().unwrap().insert(id.to_string());
        let mut threads = self.threads.lock().unwrap();
        let thread = parent.and_then(|p| threads.get(p).cloned());
        if let Some(t) = &thread {
            threads.insert(id.to_string(), t.clone());
        }
        thread
    }

    pub(crate) fn fail_sends(&self, failures: &[Failure]) {
        self.send_failures.lock().unwrap().extend(failures);
    }

    pub(crate) fn fail_patches(&self, failures: &[Failure]) {
        self.patch_failures.lock().unwrap().extend(failures);
    }

    /// Makes every token issued so far invalid.
    pub(crate) fn revoke_tokens(&self) {
        let issued = self.issued.lock().unwrap().clone();
        self.revoked.lock().unwrap().extend(issued);
    }

    pub(crate) fn sends(&self) -> Vec<Send> {
        self.sends.lock().unwrap().clone()
    }

    /// Sends that created or returned a message.
    pub(crate) fn delivered(&self) -> Vec<Send> {
        self.sends()
            .into_iter()
            .filter(|s| s.message_id.is_some())
            .collect()
    }

    /// Distinct messages created.
    pub(crate) fn messages_created(&self) -> usize {
        self.by_uuid.lock().unwrap().len()
    }

    pub(crate) fn replies(&self) -> Vec<Reply> {
        self.replies.lock().unwrap().clone()
    }

    pub(crate) fn patches(&self) -> Vec<Patch> {
        self.patches.lock().unwrap().clone()
    }
}

pub(crate) struct FakeFeishu {
    pub url: String,
    pub state: Arc<FakeState>,
}

fn fail(f: Failure) -> Response {
    match f {
        Failure::Throttle => (
            StatusCode::BAD_REQUEST,
            [("x-ogw-ratelimit-reset", "1")],
            Json(json!({"code": 99991400, "msg": "request trigger frequency limit"})),
        )
            .into_response(),
        Failure::ServerError | Failure::CommitThenFail => (
            StatusCode::BAD_GATEWAY,
            "<html><body>502 Bad Gateway</body></html>",
        )
            .into_response(),
        Failure::Refuse => (
            StatusCode::BAD_REQUEST,
            Json(json!({"code": 230002, "msg": "Bot/User can NOT be out of the chat."})),
        )
            .into_response(),
    }
}

fn bearer(headers: &HeaderMap) -> String {
    headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .unwrap_or_default()
        .to_string()
}

fn token_ok(s: &FakeState, token: &str) -> bool {
    s.issued.lock().unwrap().iter().any(|t| t == token)
        && !s.revoked.lock().unwrap().contains(token)
}

fn invalid_token() -> Response {
    (
        StatusCode::BAD_REQUEST,
        Json(json!({"code": 99991663, "msg": "Invalid access token for authorization. Please make a request with token attached."})),
    )
        .into_response()
}

fn too_long() -> Response {
    (
        StatusCode::BAD_REQUEST,
        Json(
            json!({"code": 230025, "msg": "The length of the message content reaches its limit."}),
        ),
    )
        .into_response()
}

async fn token(State(s): State<Arc<FakeState>>, Json(body): Json<Value>) -> Response {
    s.token_requests.fetch_add(1, Ordering::SeqCst);
    let delay = s.token_delay_ms.load(Ordering::SeqCst);
    if delay > 0 {
        tokio::time::sleep(Duration::from_millis(delay)).await;
    }
    if body["app_id"] != APP_ID || body["app_secret"] != APP_SECRET {
        return Json(json!({"code": 10014, "msg": "app secret invalid"})).into_response();
    }
    let n = s.next_token.fetch_add(1, Ordering::SeqCst) + 1;
    let t = format!("t-fake-{n}");
    s.issued.lock().unwrap().push(t.clone());
    Json(json!({"code": 0, "msg": "ok", "tenant_access_token": t, "expire": s.expire.load(Ordering::SeqCst)}))
        .into_response()
}

async fn send(
    State(s): State<Arc<FakeState>>,
    Query(q): Query<HashMap<String, String>>,
    headers: HeaderMap,
    raw: Bytes,
) -> Response {
    let body: Value = serde_json::from_slice(&raw).unwrap_or(Value::Null);
    let token = bearer(&headers);
    let card: Value =
        serde_json::from_str(body["content"].as_str().unwrap_or("null")).unwrap_or(Value::Null);
    let mut record = Send {
        receive_id_type: q.get("receive_id_type").cloned().unwrap_or_default(),
        receive_id: body["receive_id"].as_str().unwrap_or_default().into(),
        uuid: body["uuid"].as_str().unwrap_or_default().into(),
        card,
        token: token.clone(),
        body_len: raw.len(),
        message_id: None,
    };
    let delay = s.send_delay_ms.load(Ordering::SeqCst);
    if !token_ok(&s, &token) {
        s.sends.lock().unwrap().push(record);
        return invalid_token();
    }
    if raw.len() > MAX_CARD_BODY {
        s.sends.lock().unwrap().push(record);
        return too_long();
    }
    let failure = s.send_failures.lock().unwrap().pop_front();
    if let Some(f) = failure
        && f != Failure::CommitThenFail
    {
        s.sends.lock().unwrap().push(record);
        return fail(f);
    }
    let message_id = {
        let mut by_uuid = s.by_uuid.lock().unwrap();
        by_uuid
            .entry(record.uuid.clone())
            .or_insert_with(|| {
                format!(
                    "om_fake_{}",
                    s.next_message.fetch_add(1, Ordering::SeqCst) + 1
                )
            })
            .clone()
    };
    if failure == Some(Failure::CommitThenFail) {
        s.sends.lock().unwrap().push(record);
        return fail(Failure::CommitThenFail);
    }
    record.message_id = Some(message_id.clone());
    s.sends.lock().unwrap().push(record);
    if delay > 0 {
        tokio::time::sleep(Duration::from_millis(delay)).await;
    }
    Json(json!({"code": 0, "msg": "success", "data": {"message_id": message_id, "msg_type": "interactive"}}))
        .into_response()
}

/// A reply as the OpenAPI takes it: to a message that exists (sent or replied here), with a
/// `msg_type` and its `content` as a JSON string, `reply_in_thread` a boolean when given;
/// in a thread when asked to be or when the message replied to is in one (the thread made
/// under the message if it has none). `uuid` deduplicates as for sends.
async fn reply(
    State(s): State<Arc<FakeState>>,
    Path(parent): Path<String>,
    headers: HeaderMap,
    raw: Bytes,
) -> Response {
    if !token_ok(&s, &bearer(&headers)) {
        return invalid_token();
    }
    let body: Value = serde_json::from_slice(&raw).unwrap_or(Value::Null);
    let known = s.by_uuid.lock().unwrap().values().any(|m| *m == parent)
        || s.written.lock().unwrap().contains(&parent)
        || s.replies
            .lock()
            .unwrap()
            .iter()
            .any(|r| r.message_id == parent);
    let content = body["content"]
        .as_str()
        .and_then(|c| serde_json::from_str::<Value>(c).ok());
    let in_thread = match &body["reply_in_thread"] {
        Value::Null => Some(false),
        v => v.as_bool(),
    };
    let (Some(content), Some(msg_type), Some(in_thread), true) =
        (content, body["msg_type"].as_str(), in_thread, known)
    else {
        return (
            StatusCode::BAD_REQUEST,
            Json(json!({"code": 230001, "msg": "Your request contains an invalid request parameter."})),
        )
            .into_response();
    };
    let uuid = body["uuid"].as_str().unwrap_or_default().to_string();
    let message_id = {
        let mut by_uuid = s.by_uuid.lock().unwrap();
        let next = || {
            format!(
                "om_fake_{}",
                s.next_message.fetch_add(1, Ordering::SeqCst) + 1
            )
        };
        if uuid.is_empty() {
            next()
        } else {
            by_uuid.entry(uuid.clone()).or_insert_with(next).clone()
        }
    };
    let thread_id = {
        let mut threads = s.threads.lock().unwrap();
        let existing = threads.get(&parent).cloned();
        let thread = match (existing, in_thread) {
            (Some(t), _) => Some(t),
            (None, true) => Some(format!("omt_{parent}")),
            (None, false) => None,
        };
        if let Some(t) = &thread {
            threads.insert(parent.clone(), t.clone());
            threads.insert(message_id.clone(), t.clone());
        }
        thread
    };
    s.replies.lock().unwrap().push(Reply {
        parent,
        msg_type: msg_type.to_string(),
        content,
        reply_in_thread: in_thread,
        uuid,
        message_id: message_id.clone(),
        thread_id: thread_id.clone(),
    });
    Json(
        json!({"code": 0, "msg": "success", "data": {"message_id": message_id,
        "msg_type": msg_type, "thread_id": thread_id}}),
    )
    .into_response()
}

async fn update(
    State(s): State<Arc<FakeState>>,
    Path(message_id): Path<String>,
    headers: HeaderMap,
    raw: Bytes,
) -> Response {
    if !token_ok(&s, &bearer(&headers)) {
        return invalid_token();
    }
    if raw.len() > MAX_CARD_BODY {
        return too_long();
    }
    if let Some(f) = s.patch_failures.lock().unwrap().pop_front() {
        return fail(f);
    }
    let body: Value = serde_json::from_slice(&raw).unwrap_or(Value::Null);
    let card: Value =
        serde_json::from_str(body["content"].as_str().unwrap_or("null")).unwrap_or(Value::Null);
    s.patches.lock().unwrap().push(Patch {
        message_id,
        card,
        body_len: raw.len(),
    });
    Json(json!({"code": 0, "msg": "success", "data": {}})).into_response()
}

impl FakeFeishu {
    /// Starts the fake; `extra` adds routes (the long-connection endpoint).
    pub(crate) async fn start_with(
        extra: impl FnOnce(Router<Arc<FakeState>>) -> Router<Arc<FakeState>>,
    ) -> Self {
        let state = Arc::new(FakeState::default());
        state.expire.store(7200, Ordering::SeqCst);
        let router = Router::new()
            .route(
                "/open-apis/auth/v3/tenant_access_token/internal",
                post(token),
            )
            .route("/open-apis/im/v1/messages", post(send))
            .route("/open-apis/im/v1/messages/{message_id}", patch(update))
            .route("/open-apis/im/v1/messages/{message_id}/reply", post(reply));
        let app = extra(router).with_state(state.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, app).await });
        FakeFeishu { url, state }
    }

    pub(crate) async fn start() -> Self {
        Self::start_with(|r| r).await
    }
}
