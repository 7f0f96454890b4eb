//! A fake `opencode serve` on loopback: OpenCode's HTTP API with the events captured from the
//! real OpenCode, and what a test needs to make it misbehave (failed replies, raw frames, a
//! listing too large), and the bridge run as the real command.

use std::collections::{HashSet, VecDeque};
use std::net::SocketAddr;
use std::process::Stdio;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{Path, State};
use axum::http::StatusCode as AxumStatus;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use reqwest::StatusCode;
use serde_json::{Value, json};
use tokio::io::AsyncReadExt;
use tokio::sync::broadcast;
use tokio_util::sync::CancellationToken;

use crate::support::*;

/// The first event of `kind` in a captured `.jsonl` fixture.
pub(super) fn captured(name: &str, kind: &str) -> Value {
    let path = format!(
        "{}/tests/fixtures/opencode/{name}.jsonl",
        env!("CARGO_MANIFEST_DIR")
    );
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    text.lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .map(|l| l["event"].clone())
        .find(|e| e["type"] == kind)
        .unwrap_or_else(|| panic!("no {kind} in {path}"))
}

/// What the fake OpenCode server holds.
#[derive(Default)]
pub(super) struct Inner {
    /// Waiting permission requests (`GET /permission`).
    pub permissions: Vec<Value>,
    /// Waiting questions (`GET /question`).
    pub questions: Vec<Value>,
    /// Sessions `GET /session/{id}` knows.
    pub sessions: HashSet<String>,
    /// Every reply received and taken: (path, body).
    pub replies: Vec<(String, Value)>,
    /// The statuses the next replies get instead of being taken, in order.
    pub failing_replies: VecDeque<u16>,
    /// Replies refused by `failing_replies`.
    pub refused_replies: usize,
    /// `GET /session/{id}` requests received.
    pub session_reads: usize,
    /// `GET /permission` answers with this many bytes of a list that never ends, counting
    /// what it sent in `listing_sent`.
    pub endless_listing: Option<usize>,
}

#[derive(Clone)]
pub(super) struct Fake {
    pub inner: Arc<Mutex<Inner>>,
    /// Whole frames (`data: ...\n\n`) for every open stream.
    pub events: broadcast::Sender<Bytes>,
    /// Bytes of the endless listing sent so far.
    pub listing_sent: Arc<AtomicUsize>,
    /// How many times the endless listing was asked for.
    pub listing_requests: Arc<AtomicUsize>,
    password: Option<String>,
    /// Ends every open stream: the server is gone.
    stop: CancellationToken,
}

/// A fake `opencode serve` on loopback.
pub(super) struct FakeOpenCode {
    pub addr: SocketAddr,
    pub fake: Fake,
    stop: CancellationToken,
}

impl FakeOpenCode {
    pub(super) async fn start(
        port: u16,
        inner: Arc<Mutex<Inner>>,
        password: Option<&str>,
    ) -> FakeOpenCode {
        let (events, _) = broadcast::channel(1024);
        let stop = CancellationToken::new();
        let fake = Fake {
            inner,
            events,
            listing_sent: Arc::new(AtomicUsize::new(0)),
            listing_requests: Arc::new(AtomicUsize::new(0)),
            password: password.map(str::to_string),
            stop: stop.clone(),
        };
        let app = Router::new()
            .route("/event", get(event_stream))
            .route("/permission", get(list_permissions))
            .route("/question", get(list_questions))
            .route("/session/{id}", get(session))
            .route("/permission/{id}/reply", post(permission_reply))
            .route("/question/{id}/reply", post(question_reply))
            .route("/question/{id}/reject", post(question_reject))
            .layer(axum::middleware::from_fn_with_state(fake.clone(), basic))
            .with_state(fake.clone());
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", port))
            .await
            .expect("bind the fake OpenCode");
        let addr = listener.local_addr().expect("addr");
        let s = stop.clone();
        tokio::spawn(async move {
            let _ = axum::serve(listener, app)
                .with_graceful_shutdown(async move { s.cancelled().await })
                .await;
        });
        FakeOpenCode { addr, fake, stop }
    }

    pub(super) fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Publishes `event` on every open stream (and lists an asked request as waiting).
    pub(super) fn emit(&self, event: &Value) {
        {
            let mut inner = self.fake.inner.lock().unwrap();
            match event["type"].as_str() {
                Some("permission.asked") => inner.permissions.push(event["properties"].clone()),
                Some("question.asked") => inner.questions.push(event["properties"].clone()),
                _ => {}
            }
        }
        self.emit_raw(&event.to_string());
    }

    /// Publishes an event whose data is `data`, as it is.
    pub(super) fn emit_raw(&self, data: &str) {
        self.emit_frame(format!("data: {data}\n\n").into_bytes());
    }

    /// Publishes `frame`, bytes as they are, on every open stream.
    pub(super) fn emit_frame(&self, frame: Vec<u8>) {
        let _ = self.fake.events.send(Bytes::from(frame));
    }

    pub(super) fn replies(&self) -> Vec<(String, Value)> {
        self.fake.inner.lock().unwrap().replies.clone()
    }

    /// Waits until a stream is open.
    pub(super) async fn connected(&self) {
        wait_until("the bridge follows the event stream", || {
            self.fake.events.receiver_count() > 0
        })
        .await;
    }

    /// Stops serving; open streams end.
    pub(super) fn shut(&self) {
        self.stop.cancel();
    }
}

async fn basic(
    State(f): State<Fake>,
    req: axum::extract::Request,
    next: axum::middleware::Next,
) -> Response {
    if let Some(p) = &f.password {
        use base64::Engine;
        let want = format!(
            "Basic {}",
            base64::engine::general_purpose::STANDARD.encode(format!("opencode:{p}"))
        );
        let got = req
            .headers()
            .get("authorization")
            .and_then(|v| v.to_str().ok());
        if got != Some(want.as_str()) {
            return (AxumStatus::UNAUTHORIZED, "").into_response();
        }
    }
    next.run(req).await
}

async fn event_stream(State(f): State<Fake>) -> Response {
    let rx = f.events.subscribe();
    let stop = f.stop.clone();
    let first = json!({"id": "evt_0", "type": "server.connected", "properties": {}});
    let first = Bytes::from(format!("data: {first}\n\n"));
    let stream = futures_util::stream::unfold(
        (Some(first), rx, stop),
        |(first, mut rx, stop)| async move {
            if let Some(frame) = first {
                return Some((Ok::<_, std::io::Error>(frame), (None, rx, stop)));
            }
            tokio::select! {
                _ = stop.cancelled() => None,
                r = rx.recv() => match r {
                    Ok(frame) => Some((Ok(frame), (None, rx, stop))),
                    Err(_) => None,
                },
            }
        },
    );
    Response::builder()
        .header("content-type", "text/event-stream")
        .body(Body::from_stream(stream))
        .unwrap()
}

async fn list_permissions(State(f): State<Fake>) -> Response {
    let endless = f.inner.lock().unwrap().endless_listing;
    let Some(total) = endless else {
        return axum::Json(json!(f.inner.lock().unwrap().permissions)).into_response();
    };
    f.listing_requests.fetch_add(1, Ordering::Relaxed);
    // `[` and spaces, never closed, sent in pieces of 1 MiB without a length.
    const PIECE: usize = 1024 * 1024;
    let mut piece = vec![b' '; PIECE];
    piece[0] = b'[';
    let first = Bytes::from(piece);
    let spaces = Bytes::from(vec![b' '; PIECE]);
    let sent = f.listing_sent.clone();
    let stream = futures_util::stream::iter((0..total / PIECE).map(move |k| {
        sent.fetch_add(PIECE, Ordering::Relaxed);
        Ok::<_, std::io::Error>(if k == 0 {
            first.clone()
        } else {
            spaces.clone()
        })
    }));
    Response::builder()
        .header("content-type", "application/json")
        .body(Body::from_stream(stream))
        .unwrap()
}

async fn list_questions(State(f): State<Fake>) -> axum::Json<Value> {
    axum::Json(json!(f.inner.lock().unwrap().questions))
}

async fn session(State(f): State<Fake>, Path(id): Path<String>) -> Response {
    let mut inner = f.inner.lock().unwrap();
    inner.session_reads += 1;
    if inner.sessions.contains(&id) {
        axum::Json(json!({"id": id, "directory": "/home/dev/project"})).into_response()
    } else {
        (
            AxumStatus::NOT_FOUND,
            axum::Json(json!({"name": "NotFoundError"})),
        )
            .into_response()
    }
}

/// Records a reply to `id` and settles it as OpenCode does (an event, off the listing); or,
/// if a failure is planned, answers with it and changes nothing.
fn settle(f: &Fake, path: String, body: Value, id: &str, event: Value) -> Response {
    let mut inner = f.inner.lock().unwrap();
    if let Some(status) = inner.failing_replies.pop_front() {
        inner.refused_replies += 1;
        let status = AxumStatus::from_u16(status).unwrap();
        return (status, axum::Json(json!({"name": "UnknownError"}))).into_response();
    }
    inner.replies.push((path, body));
    let before = inner.permissions.len() + inner.questions.len();
    inner.permissions.retain(|p| p["id"] != id);
    inner.questions.retain(|q| q["id"] != id);
    if before != inner.permissions.len() + inner.questions.len() {
        let _ = f.events.send(Bytes::from(format!("data: {event}\n\n")));
    }
    axum::Json(json!(true)).into_response()
}

async fn permission_reply(
    State(f): State<Fake>,
    Path(id): Path<String>,
    axum::Json(body): axum::Json<Value>,
) -> Response {
    let event = json!({"type": "permission.replied", "properties": {"sessionID": "ses", "requestID": id, "reply": body["reply"]}});
    settle(&f, format!("/permission/{id}/reply"), body, &id, event)
}

async fn question_reply(
    State(f): State<Fake>,
    Path(id): Path<String>,
    axum::Json(body): axum::Json<Value>,
) -> Response {
    let event = json!({"type": "question.replied", "properties": {"sessionID": "ses", "requestID": id, "answers": body["answers"]}});
    settle(&f, format!("/question/{id}/reply"), body, &id, event)
}

async fn question_reject(State(f): State<Fake>, Path(id): Path<String>) -> Response {
    let event =
        json!({"type": "question.rejected", "properties": {"sessionID": "ses", "requestID": id}});
    settle(
        &f,
        format!("/question/{id}/reject"),
        Value::Null,
        &id,
        event,
    )
}

/// `imrelay bridge opencode` between `imrelay` and `opencode`.
pub(super) struct BridgeProcess(tokio::process::Child, String);

impl BridgeProcess {
    pub(super) fn start(
        imrelay: &str,
        opencode: &str,
        password: Option<&str>,
        extra: &[&str],
    ) -> Self {
        let mut c = tokio::process::Command::new(env!("CARGO_BIN_EXE_imrelay"));
        c.env_remove("IMRELAY_AGENT_TOKEN")
            .env_remove("IMRELAY_URL")
            .env_remove("OPENCODE_URL")
            .env_remove("OPENCODE_SERVER_PASSWORD")
            .args([
                "bridge",
                "opencode",
                "--url",
                imrelay,
                "--opencode",
                opencode,
            ])
            .args(extra)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        if let Some(p) = password {
            c.env("OPENCODE_SERVER_PASSWORD", p);
        }
        BridgeProcess(c.spawn().expect("imrelay runs"), String::new())
    }

    /// Waits until it has written `needle` on standard error (at most 60 s).
    pub(super) async fn until_said(&mut self, needle: &str) {
        let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(60);
        let err = self.0.stderr.as_mut().expect("standard error is piped");
        let mut buf = [0u8; 4096];
        while !self.1.contains(needle) {
            match tokio::time::timeout_at(deadline, err.read(&mut buf)).await {
                Ok(Ok(n)) if n > 0 => self.1.push_str(&String::from_utf8_lossy(&buf[..n])),
                _ => panic!("the bridge did not say {needle:?}; it said:\n{}", self.1),
            }
        }
    }

    /// Stops it; what it wrote on standard error.
    pub(super) async fn stop(mut self) -> String {
        let _ = self.0.start_kill();
        let _ = self.0.wait().await;
        let mut err = std::mem::take(&mut self.1);
        if let Some(mut e) = self.0.stderr.take() {
            let _ = e.read_to_string(&mut err).await;
        }
        err
    }
}

/// Announces one more permission request (like `asked`) and waits until imrelay holds it.
/// The bridge reads OpenCode's events in order, so by then it has handled each one before:
/// a reply one of them caused was on its way first.
pub(super) async fn after_the_events_so_far(app: &TestApp, oc: &FakeOpenCode, asked: &Value) {
    let mut fence = asked.clone();
    fence["properties"]["id"] = json!("per_fence");
    oc.emit(&fence);
    pending(app, &interaction_id(&oc.url(), "per_fence")).await;
}

/// The interaction id the bridge derives for `request` on `server`.
pub(super) fn interaction_id(server: &str, request: &str) -> String {
    imrelay::agents::opencode::Request::Permission(imrelay::agents::opencode::PermissionAsked {
        id: request.into(),
        session_id: String::new(),
        permission: String::new(),
        patterns: vec![],
        metadata: Default::default(),
        always: vec![],
    })
    .interaction_id(server)
}

pub(super) async fn pending(app: &TestApp, id: &str) -> Value {
    eventually(&format!("{id} is pending"), || async {
        let (status, v) = app.get(&format!("/v1/interactions/{id}")).await;
        (status == StatusCode::OK && v["status"] == "pending").then_some(v)
    })
    .await
}

pub(super) async fn resolved(app: &TestApp, id: &str) -> Value {
    eventually(&format!("{id} is resolved"), || async {
        let (status, v) = app.get(&format!("/v1/interactions/{id}")).await;
        (status == StatusCode::OK && v["status"] != "pending").then_some(v)
    })
    .await
}

pub(super) async fn replies(oc: &FakeOpenCode, n: usize) -> Vec<(String, Value)> {
    eventually(&format!("{n} replies reach OpenCode"), || async {
        let r = oc.replies();
        (r.len() >= n).then_some(r)
    })
    .await
}

pub(super) fn with_session(asked: &Value) -> Arc<Mutex<Inner>> {
    let mut inner = Inner::default();
    inner.sessions.insert(
        asked["properties"]["sessionID"]
            .as_str()
            .expect("a session")
            .to_string(),
    );
    Arc::new(Mutex::new(inner))
}
