//! `imrelay bridge opencode`, the real command, between the real server and a fake OpenCode
//! server on loopback that serves OpenCode's HTTP API with the events captured from the real
//! OpenCode (`tests/fixtures/opencode`): requests become interactions, answers go back once,
//! answers given in OpenCode withdraw imrelay's copy, pending requests are found again after
//! restarts, and bad input changes nothing.

use std::collections::HashSet;
use std::net::SocketAddr;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::{Path, State};
use axum::http::StatusCode as AxumStatus;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use imrelay::interaction::{InteractionId, Outcome};
use reqwest::StatusCode;
use serde_json::{Value, json};
use tokio::io::AsyncReadExt;
use tokio::sync::broadcast;
use tokio_util::sync::CancellationToken;

use crate::support::*;

/// The first event of `kind` in a captured `.jsonl` fixture.
fn captured(name: &str, kind: &str) -> Value {
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
struct Inner {
    /// Waiting permission requests (`GET /permission`).
    permissions: Vec<Value>,
    /// Waiting questions (`GET /question`).
    questions: Vec<Value>,
    /// Sessions `GET /session/{id}` knows.
    sessions: HashSet<String>,
    /// Every reply received: (path, body).
    replies: Vec<(String, Value)>,
}

#[derive(Clone)]
struct Fake {
    inner: Arc<Mutex<Inner>>,
    events: broadcast::Sender<String>,
    password: Option<String>,
    /// Ends every open stream: the server is gone.
    stop: CancellationToken,
}

/// A fake `opencode serve` on loopback.
struct FakeOpenCode {
    addr: SocketAddr,
    fake: Fake,
    stop: CancellationToken,
}

impl FakeOpenCode {
    async fn start(port: u16, inner: Arc<Mutex<Inner>>, password: Option<&str>) -> FakeOpenCode {
        let (events, _) = broadcast::channel(64);
        let stop = CancellationToken::new();
        let fake = Fake {
            inner,
            events,
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

    fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Publishes `event` on every open stream (and lists an asked request as waiting).
    fn emit(&self, event: &Value) {
        {
            let mut inner = self.fake.inner.lock().unwrap();
            match event["type"].as_str() {
                Some("permission.asked") => inner.permissions.push(event["properties"].clone()),
                Some("question.asked") => inner.questions.push(event["properties"].clone()),
                _ => {}
            }
        }
        let _ = self.fake.events.send(event.to_string());
    }

    fn emit_raw(&self, data: &str) {
        let _ = self.fake.events.send(data.to_string());
    }

    fn replies(&self) -> Vec<(String, Value)> {
        self.fake.inner.lock().unwrap().replies.clone()
    }

    /// Waits until a stream is open.
    async fn connected(&self) {
        wait_until("the bridge follows the event stream", || {
            self.fake.events.receiver_count() > 0
        })
        .await;
    }

    /// Stops serving; open streams end.
    fn shut(&self) {
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
    let first = json!({"id": "evt_0", "type": "server.connected", "properties": {}}).to_string();
    let stream = futures_util::stream::unfold(
        (Some(first), rx, stop),
        |(first, mut rx, stop)| async move {
            if let Some(data) = first {
                return Some((
                    Ok::<_, std::io::Error>(format!("data: {data}\n\n")),
                    (None, rx, stop),
                ));
            }
            tokio::select! {
                _ = stop.cancelled() => None,
                r = rx.recv() => match r {
                    Ok(data) => Some((Ok(format!("data: {data}\n\n")), (None, rx, stop))),
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

async fn list_permissions(State(f): State<Fake>) -> axum::Json<Value> {
    axum::Json(json!(f.inner.lock().unwrap().permissions))
}

async fn list_questions(State(f): State<Fake>) -> axum::Json<Value> {
    axum::Json(json!(f.inner.lock().unwrap().questions))
}

async fn session(State(f): State<Fake>, Path(id): Path<String>) -> Response {
    if f.inner.lock().unwrap().sessions.contains(&id) {
        axum::Json(json!({"id": id, "directory": "/home/dev/project"})).into_response()
    } else {
        (
            AxumStatus::NOT_FOUND,
            axum::Json(json!({"name": "NotFoundError"})),
        )
            .into_response()
    }
}

/// Records a reply to `id` and settles it as OpenCode does (an event, off the listing).
fn settle(f: &Fake, path: String, body: Value, id: &str, event: Value) -> axum::Json<Value> {
    let mut inner = f.inner.lock().unwrap();
    inner.replies.push((path, body));
    let before = inner.permissions.len() + inner.questions.len();
    inner.permissions.retain(|p| p["id"] != id);
    inner.questions.retain(|q| q["id"] != id);
    if before != inner.permissions.len() + inner.questions.len() {
        let _ = f.events.send(event.to_string());
    }
    axum::Json(json!(true))
}

async fn permission_reply(
    State(f): State<Fake>,
    Path(id): Path<String>,
    axum::Json(body): axum::Json<Value>,
) -> axum::Json<Value> {
    let event = json!({"type": "permission.replied", "properties": {"sessionID": "ses", "requestID": id, "reply": body["reply"]}});
    settle(&f, format!("/permission/{id}/reply"), body, &id, event)
}

async fn question_reply(
    State(f): State<Fake>,
    Path(id): Path<String>,
    axum::Json(body): axum::Json<Value>,
) -> axum::Json<Value> {
    let event = json!({"type": "question.replied", "properties": {"sessionID": "ses", "requestID": id, "answers": body["answers"]}});
    settle(&f, format!("/question/{id}/reply"), body, &id, event)
}

async fn question_reject(State(f): State<Fake>, Path(id): Path<String>) -> axum::Json<Value> {
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
struct BridgeProcess(tokio::process::Child);

impl BridgeProcess {
    fn start(imrelay: &str, opencode: &str, password: Option<&str>, extra: &[&str]) -> Self {
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
        BridgeProcess(c.spawn().expect("imrelay runs"))
    }

    /// Stops it; what it wrote on standard error.
    async fn stop(mut self) -> String {
        let _ = self.0.start_kill();
        let _ = self.0.wait().await;
        let mut err = String::new();
        if let Some(mut e) = self.0.stderr.take() {
            let _ = e.read_to_string(&mut err).await;
        }
        err
    }
}

/// Announces one more permission request (like `asked`) and waits until imrelay holds it.
/// The bridge reads OpenCode's events in order, so by then it has handled each one before:
/// a reply one of them caused was on its way first.
async fn after_the_events_so_far(app: &TestApp, oc: &FakeOpenCode, asked: &Value) {
    let mut fence = asked.clone();
    fence["properties"]["id"] = json!("per_fence");
    oc.emit(&fence);
    pending(app, &interaction_id(&oc.url(), "per_fence")).await;
}

/// The interaction id the bridge derives for `request` on `server`.
fn interaction_id(server: &str, request: &str) -> String {
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

async fn pending(app: &TestApp, id: &str) -> Value {
    eventually(&format!("{id} is pending"), || async {
        let (status, v) = app.get(&format!("/v1/interactions/{id}")).await;
        (status == StatusCode::OK && v["status"] == "pending").then_some(v)
    })
    .await
}

async fn resolved(app: &TestApp, id: &str) -> Value {
    eventually(&format!("{id} is resolved"), || async {
        let (status, v) = app.get(&format!("/v1/interactions/{id}")).await;
        (status == StatusCode::OK && v["status"] != "pending").then_some(v)
    })
    .await
}

async fn replies(oc: &FakeOpenCode, n: usize) -> Vec<(String, Value)> {
    eventually(&format!("{n} replies reach OpenCode"), || async {
        let r = oc.replies();
        (r.len() >= n).then_some(r)
    })
    .await
}

fn with_session(asked: &Value) -> Arc<Mutex<Inner>> {
    let mut inner = Inner::default();
    inner.sessions.insert(
        asked["properties"]["sessionID"]
            .as_str()
            .expect("a session")
            .to_string(),
    );
    Arc::new(Mutex::new(inner))
}

#[tokio::test]
async fn a_permission_is_an_approval_answered_back_once() {
    let app = spawn_app().await;
    let asked = captured("server_permission_always", "permission.asked");
    let oc = FakeOpenCode::start(0, with_session(&asked), Some("s3cret")).await;
    let bridge = BridgeProcess::start(&app.url(""), &oc.url(), Some("s3cret"), &[]);
    oc.connected().await;
    oc.emit(&asked);
    let request = asked["properties"]["id"].as_str().unwrap();
    let id = interaction_id(&oc.url(), request);
    let i = pending(&app, &id).await;
    assert_eq!(i["tool_name"], "Bash", "{i}");
    assert_eq!(i["input"]["command"], "echo ok > oc-proof.txt", "{i}");
    assert_eq!(i["agent"], "opencode");
    assert_eq!(i["cwd"], "/home/dev/project");
    assert_eq!(i["session"], asked["properties"]["sessionID"]);
    let description = i["description"].as_str().unwrap_or_default();
    assert!(
        description.contains("`echo *`")
            && description.contains("in every session")
            && description.contains("for as long as this OpenCode server runs"),
        "{description}"
    );
    // OpenCode runs the original command whatever an answer says: an edit is refused.
    let (status, refused) = app
        .respond(
            &id,
            &json!({"decision": "allow", "updated_input": {"command": "echo edited"}}),
        )
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{refused}");
    assert!(
        refused["error"]["message"]
            .as_str()
            .unwrap_or_default()
            .contains("opencode cannot run an edited input"),
        "{refused}"
    );
    // The same request announced again is not asked twice.
    oc.emit_raw(&asked.to_string());
    let (status, _) = app
        .respond(&id, &json!({"decision": "allow", "always": true}))
        .await;
    assert_eq!(status, StatusCode::OK);
    let r = replies(&oc, 1).await;
    assert_eq!(
        r[0],
        (
            format!("/permission/{request}/reply"),
            json!({"reply": "always"})
        )
    );
    // Once: the announcement seen twice, and the settling event after the reply, add nothing.
    after_the_events_so_far(&app, &oc, &asked).await;
    assert_eq!(oc.replies().len(), 1, "{:?}", oc.replies());
    let err = bridge.stop().await;
    assert!(err.contains("replied to"), "{err}");
}

#[tokio::test]
async fn answered_in_opencode_withdraws_the_copy_everywhere() {
    let app = spawn_app().await;
    let asked = captured("server_permission_once", "permission.asked");
    let oc = FakeOpenCode::start(0, with_session(&asked), None).await;
    let bridge = BridgeProcess::start(&app.url(""), &oc.url(), None, &[]);
    oc.connected().await;
    oc.emit(&asked);
    let request = asked["properties"]["id"].as_str().unwrap();
    let id = interaction_id(&oc.url(), request);
    pending(&app, &id).await;
    let mut replied = captured("server_permission_once", "permission.replied");
    replied["properties"]["requestID"] = json!(request);
    oc.fake.inner.lock().unwrap().permissions.clear();
    oc.emit(&replied);
    let i = resolved(&app, &id).await;
    assert_eq!(i["resolution"]["outcome"], "cancelled", "{i}");
    assert!(
        i["resolution"]["result"]["message"]
            .as_str()
            .unwrap_or_default()
            .contains("Answered in OpenCode itself"),
        "{i}"
    );
    after_the_events_so_far(&app, &oc, &asked).await;
    assert!(oc.replies().is_empty(), "{:?}", oc.replies());
    bridge.stop().await;
}

#[tokio::test]
async fn a_question_goes_back_as_labels_and_a_deny_as_a_rejection() {
    let app = spawn_app().await;
    let asked = captured("server_question_reply", "question.asked");
    let oc = FakeOpenCode::start(0, with_session(&asked), None).await;
    let bridge = BridgeProcess::start(&app.url(""), &oc.url(), None, &[]);
    oc.connected().await;
    oc.emit(&asked);
    let request = asked["properties"]["id"].as_str().unwrap();
    let id = interaction_id(&oc.url(), request);
    let i = pending(&app, &id).await;
    assert_eq!(i["kind"], "question", "{i}");
    assert_eq!(
        i["input"]["questions"][0]["options"][0]["label"], "SQLite",
        "{i}"
    );
    let (status, body) = app
        .respond(&id, &json!({"answers": {"Which database?": "SQLite"}}))
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let r = replies(&oc, 1).await;
    assert_eq!(
        r[0],
        (
            format!("/question/{request}/reply"),
            json!({"answers": [["SQLite"]]})
        )
    );
    // A second question, denied: OpenCode's rejection.
    let mut second = captured("server_question_reject", "question.asked");
    second["properties"]["sessionID"] = asked["properties"]["sessionID"].clone();
    oc.emit(&second);
    let request = second["properties"]["id"].as_str().unwrap();
    let id = interaction_id(&oc.url(), request);
    pending(&app, &id).await;
    let (status, _) = app.respond(&id, &json!({"decision": "deny"})).await;
    assert_eq!(status, StatusCode::OK);
    let r = replies(&oc, 2).await;
    assert_eq!(r[1], (format!("/question/{request}/reject"), Value::Null));
    bridge.stop().await;
}

#[tokio::test]
async fn pending_requests_are_found_again_after_restarts() {
    let port = free_port();
    let store: Arc<dyn imrelay::store::Store> = Arc::new(imrelay::store::MemoryStore::new());
    let on_port = || {
        let mut s = settings();
        s.server.listen = format!("127.0.0.1:{port}").parse().unwrap();
        s
    };
    let app = spawn_on(on_port(), store.clone()).await;
    let asked = captured("server_permission_reject", "permission.asked");
    let request = asked["properties"]["id"].as_str().unwrap().to_string();
    // Asked before any bridge runs: found in OpenCode's listing.
    let oc_port = free_port();
    let oc = FakeOpenCode::start(oc_port, with_session(&asked), None).await;
    oc.emit(&asked);
    let bridge = BridgeProcess::start(&app.url(""), &oc.url(), None, &[]);
    let id = interaction_id(&oc.url(), &request);
    pending(&app, &id).await;
    // The bridge goes away; the answer is given meanwhile.
    bridge.stop().await;
    let (status, _) = app
        .respond(
            &id,
            &json!({"decision": "deny", "message": "Not on a Friday"}),
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    assert!(oc.replies().is_empty());
    // imrelay restarts too; a new bridge finds the request and carries the answer over.
    app.stop().await;
    let app = spawn_on(on_port(), store.clone()).await;
    let bridge = BridgeProcess::start(&app.url(""), &oc.url(), None, &[]);
    let r = replies(&oc, 1).await;
    assert_eq!(
        r[0],
        (
            format!("/permission/{request}/reply"),
            json!({"reply": "reject", "message": "Not on a Friday"})
        )
    );
    // imrelay away while OpenCode asks: the bridge keeps trying, and asks once it is back.
    app.stop().await;
    let mut later = asked.clone();
    later["properties"]["id"] = json!("per_later");
    // What answers on imrelay's address meanwhile takes the bridge's attempt and drops it.
    let away = tokio::net::TcpListener::bind(("127.0.0.1", port))
        .await
        .expect("imrelay's address");
    oc.emit(&later);
    let attempt = tokio::time::timeout(Duration::from_secs(10), away.accept())
        .await
        .expect("the bridge tries imrelay while it is away")
        .expect("accept");
    drop((attempt, away));
    let app = spawn_on(on_port(), store).await;
    let later_id = interaction_id(&oc.url(), "per_later");
    pending(&app, &later_id).await;
    // OpenCode goes away and comes back without the request (its server restarted): the copy
    // is withdrawn.
    oc.shut();
    wait_until("the bridge's event stream ends", || {
        oc.fake.events.receiver_count() == 0
    })
    .await;
    eventually("OpenCode's address is free", || async {
        tokio::net::TcpListener::bind(("127.0.0.1", oc_port))
            .await
            .ok()
            .map(drop)
    })
    .await;
    let inner = with_session(&asked);
    let oc2 = FakeOpenCode::start(oc_port, inner, None).await;
    let i = resolved(&app, &later_id).await;
    assert_eq!(i["resolution"]["outcome"], "cancelled", "{i}");
    assert!(
        i["resolution"]["result"]["message"]
            .as_str()
            .unwrap_or_default()
            .contains("OpenCode no longer waits for this answer"),
        "{i}"
    );
    assert_eq!(oc.replies().len(), 1);
    assert!(oc2.replies().is_empty());
    bridge.stop().await;
}

#[tokio::test]
async fn bad_input_from_opencode_changes_nothing() {
    let app = spawn_app().await;
    let asked = captured("server_permission_once", "permission.asked");
    let oc = FakeOpenCode::start(0, with_session(&asked), None).await;
    let bridge = BridgeProcess::start(&app.url(""), &oc.url(), None, &[]);
    oc.connected().await;
    oc.emit_raw("{not json");
    oc.emit_raw(r#"{"type":"permission.asked","properties":{"id":7}}"#);
    let mut stranger = asked.clone();
    stranger["properties"]["id"] = json!("per_stranger");
    stranger["properties"]["sessionID"] = json!("ses_nobody\u{1b}[31m");
    oc.emit(&stranger);
    // The stream goes on: a good request after them is asked.
    oc.emit(&asked);
    let id = interaction_id(&oc.url(), asked["properties"]["id"].as_str().unwrap());
    pending(&app, &id).await;
    let stranger_id = interaction_id(&oc.url(), "per_stranger");
    let (status, _) = app.get(&format!("/v1/interactions/{stranger_id}")).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert!(InteractionId::parse(&stranger_id).is_ok());
    let (_, listed) = app.get("/v1/interactions?status=pending").await;
    assert_eq!(
        listed["interactions"].as_array().map(Vec::len),
        Some(1),
        "{listed}"
    );
    let err = bridge.stop().await;
    assert!(err.contains("ignored an event it could not read"), "{err}");
    assert!(
        err.contains("does not know that session") && !err.contains('\u{1b}'),
        "{err}"
    );
    assert_eq!(
        app.registry
            .get(&InteractionId::parse(&id).unwrap())
            .await
            .unwrap()
            .map(|i| i.resolution.as_ref().map(|r| r.outcome)),
        Some(None::<Outcome>)
    );
}

#[tokio::test]
async fn allow_similar_is_answered_once_never_as_opencodes_always() {
    let app = spawn_app().await;
    let mut asked = captured("server_permission_once", "permission.asked");
    // A command a grant can cover (a redirection is never granted).
    asked["properties"]["metadata"]["command"] = json!("npm run test");
    asked["properties"]["patterns"] = json!(["npm run test"]);
    asked["properties"]["always"] = json!(["npm run *"]);
    let oc = FakeOpenCode::start(0, with_session(&asked), None).await;
    let bridge = BridgeProcess::start(&app.url(""), &oc.url(), None, &[]);
    oc.connected().await;
    oc.emit(&asked);
    let request = asked["properties"]["id"].as_str().unwrap();
    let id = interaction_id(&oc.url(), request);
    pending(&app, &id).await;
    let (_, display) = app.get(&format!("/v1/interactions/{id}/display")).await;
    let rule = display["proposed_rule"]
        .as_str()
        .expect("a proposed rule")
        .to_string();
    // A grant allows what its rule says, for this session: OpenCode's "always" would allow
    // `echo *` in every session while its server runs.
    let (status, body) = app
        .respond(
            &id,
            &json!({"decision": "allow", "grant": {"rule": rule, "scope": "session"}}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let r = replies(&oc, 1).await;
    assert_eq!(
        r[0],
        (
            format!("/permission/{request}/reply"),
            json!({"reply": "once"})
        )
    );
    bridge.stop().await;
}
