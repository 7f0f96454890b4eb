//! Test harness: starts the real application on 127.0.0.1:0 and talks HTTP to it.

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Once};
use std::time::Duration;

use imrelay::app::App;
use imrelay::config::{Backend, Settings};
use imrelay::interaction::Registry;
use imrelay::store::{MemoryStore, Store};
use reqwest::StatusCode;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

static LOG: Once = Once::new();

/// Logs to the test output when TEST_LOG is set; quiet otherwise.
pub(crate) fn init_log() {
    LOG.call_once(|| {
        if std::env::var_os("TEST_LOG").is_some() {
            let _ = tracing_subscriber::fmt()
                .with_env_filter(
                    std::env::var("RUST_LOG").unwrap_or_else(|_| "imrelay=debug,info".into()),
                )
                .with_test_writer()
                .try_init();
        }
    });
}

/// Default settings for tests: in-memory store, loopback, no tokens.
pub(crate) fn settings() -> Settings {
    let mut s = Settings::defaults().expect("the defaults load");
    s.store.backend = Backend::Memory;
    s.server.listen = "127.0.0.1:0".parse().expect("address");
    s.server.shutdown_grace_secs = 2;
    s
}

/// A running server.
pub(crate) struct TestApp {
    pub addr: SocketAddr,
    pub client: reqwest::Client,
    pub shutdown: CancellationToken,
    pub registry: Registry,
    pub store: Arc<dyn Store>,
    pub token: Option<String>,
    handle: Option<tokio::task::JoinHandle<()>>,
}

impl TestApp {
    /// Waits until the outbox holds no unfinished job: every delivery planned so far was
    /// made or given up, and none is left to retry. What a test then sees is all there is,
    /// not what arrived within a fixed wait.
    pub(crate) async fn outbox_idle(&self) {
        outbox_holds(&self.store, 0).await
    }

    pub(crate) fn url(&self, path: &str) -> String {
        format!("http://{}{}", self.addr, path)
    }

    fn auth(&self, req: reqwest::RequestBuilder) -> reqwest::RequestBuilder {
        match &self.token {
            Some(t) => req.bearer_auth(t),
            None => req,
        }
    }

    pub(crate) async fn post(&self, path: &str, body: &Value) -> (StatusCode, Value) {
        let resp = self
            .auth(self.client.post(self.url(path)))
            .json(body)
            .send()
            .await
            .expect("request");
        split(resp).await
    }

    /// The `/metrics` text.
    pub(crate) async fn metrics(&self) -> String {
        self.client
            .get(self.url("/metrics"))
            .send()
            .await
            .expect("request")
            .text()
            .await
            .expect("metrics text")
    }

    /// The `/metrics` text once it contains `line`; panics, showing the text, if it does not
    /// within five seconds.
    pub(crate) async fn metrics_with(&self, line: &str) -> String {
        let mut m = String::new();
        for _ in 0..200 {
            m = self.metrics().await;
            if m.contains(line) {
                return m;
            }
            tokio::time::sleep(std::time::Duration::from_millis(25)).await;
        }
        panic!("no {line} in {m}");
    }

    pub(crate) async fn get(&self, path: &str) -> (StatusCode, Value) {
        let resp = self
            .auth(self.client.get(self.url(path)))
            .send()
            .await
            .expect("request");
        split(resp).await
    }

    pub(crate) async fn delete(&self, path: &str) -> (StatusCode, Value) {
        let resp = self
            .auth(self.client.delete(self.url(path)))
            .send()
            .await
            .expect("request");
        split(resp).await
    }

    /// Prunes every resolved interaction now, as if its retention had passed, and returns how
    /// many went. Waits a few milliseconds after, so that an id created next gets a later
    /// creation time than the pruned one (a new incarnation).
    pub(crate) async fn prune_all(&self) -> u64 {
        let pruned = self
            .store
            .prune(jiff::Timestamp::now() + jiff::SignedDuration::from_secs(1))
            .await
            .expect("prune");
        tokio::time::sleep(Duration::from_millis(5)).await;
        pruned
    }

    /// Answers interaction `id` through `POST /v1/interactions/{id}/respond`.
    pub(crate) async fn respond(&self, id: &str, body: &Value) -> (StatusCode, Value) {
        self.post(&format!("/v1/interactions/{id}/respond"), body)
            .await
    }

    /// Creates an approval for `Bash` with `command`, returning its id.
    pub(crate) async fn create_bash(&self, id: &str, command: &str) -> String {
        let (status, body) = self
            .post(
                "/v1/interactions",
                &serde_json::json!({"id": id, "tool_name": "Bash", "input": {"command": command}}),
            )
            .await;
        assert_eq!(status, StatusCode::CREATED, "{body}");
        body["id"].as_str().expect("id").to_string()
    }

    /// Stops the server and waits for it to finish.
    pub(crate) async fn stop(mut self) {
        self.shutdown.cancel();
        if let Some(h) = self.handle.take() {
            let _ = tokio::time::timeout(Duration::from_secs(10), h).await;
        }
    }
}

impl Drop for TestApp {
    fn drop(&mut self) {
        self.shutdown.cancel();
    }
}

/// Polls `probe` every 10 ms until it gives a value, for at most ten seconds; panics naming
/// `what` if it never does.
pub(crate) async fn eventually<T, F>(what: &str, probe: impl FnMut() -> F) -> T
where
    F: std::future::Future<Output = Option<T>>,
{
    eventually_within(what, Duration::from_secs(10), probe).await
}

/// [`eventually`], giving up (and panicking) once `limit` has passed.
pub(crate) async fn eventually_within<T, F>(
    what: &str,
    limit: Duration,
    mut probe: impl FnMut() -> F,
) -> T
where
    F: std::future::Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + limit;
    loop {
        if let Some(v) = probe().await {
            return v;
        }
        if tokio::time::Instant::now() >= deadline {
            panic!("not reached within {limit:?}: {what}");
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Waits until the outbox in `store` holds exactly `n` unfinished jobs (planned, retrying or
/// in flight): with `n` 0, every delivery planned so far was made or given up.
pub(crate) async fn outbox_holds(store: &Arc<dyn Store>, n: u64) {
    eventually(&format!("the outbox holds {n} unfinished jobs"), || async {
        let backlog = store.job_backlog().await.expect("the outbox backlog");
        let unfinished: u64 = backlog.iter().map(|(_, k)| *k).sum();
        (unfinished == n).then_some(())
    })
    .await
}

/// How many client connections the server at `base` serves now (its
/// `imrelay_http_connections` gauge), asked on `client`: the connection asking is among them.
pub(crate) async fn open_connections(client: &reqwest::Client, base: &str) -> u64 {
    let text = client
        .get(format!("{base}/metrics"))
        .send()
        .await
        .expect("request")
        .text()
        .await
        .expect("metrics text");
    text.lines()
        .find_map(|l| l.strip_prefix("imrelay_http_connections "))
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or_else(|| panic!("no imrelay_http_connections in {text}"))
}

/// Sends `GET url` (a long poll) on a connection of its own, and returns once the server at
/// `base` serves that connection, so that what the test does next finds the request there
/// rather than racing it. `client` asks for the connection count.
pub(crate) async fn long_poll(
    client: &reqwest::Client,
    base: &str,
    url: String,
) -> tokio::task::JoinHandle<reqwest::Response> {
    let before = open_connections(client, base).await;
    let own = reqwest::Client::new();
    let poll = tokio::spawn(async move { own.get(url).send().await.expect("request") });
    eventually("the long poll reaches the server", || async {
        (open_connections(client, base).await > before).then_some(())
    })
    .await;
    poll
}

/// Waits until no store holds the SQLite database at `path` any more: its lock is free and
/// its write-ahead log is empty (the last connection closed and checkpointed), so the file
/// alone holds every commit.
pub(crate) async fn sqlite_closed(path: &Path) {
    let beside = |suffix: &str| {
        let mut p = path.as_os_str().to_owned();
        p.push(suffix);
        std::path::PathBuf::from(p)
    };
    let (lock, wal) = (beside(".lock"), beside("-wal"));
    eventually("the store lets go of the database", || {
        let free = std::fs::File::open(&lock).map_or(true, |f| f.try_lock().is_ok());
        let logged = std::fs::metadata(&wal).map_or(0, |m| m.len());
        std::future::ready((free && logged == 0).then_some(()))
    })
    .await
}

/// Waits until `condition` holds, checking every 10 ms for at most ten seconds.
pub(crate) async fn wait_until(what: &str, mut condition: impl FnMut() -> bool) {
    eventually(what, || std::future::ready(condition().then_some(()))).await
}

/// Runs the `imrelay` binary with `args` on the SQLite database `db`: (success, stdout,
/// stderr).
pub(crate) fn cli(db: &std::path::Path, args: &[&str]) -> (bool, String, String) {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_imrelay"))
        .args(args)
        .env("IMRELAY__STORE__PATH", db)
        .output()
        .expect("runs");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Opens the SQLite store at `path` once an earlier store there has let go of it (its writer
/// thread releases the file shortly after the store is dropped).
pub(crate) async fn reopen_sqlite(path: &std::path::Path) -> imrelay::store::SqliteStore {
    use imrelay::store::{SqliteStore, Synchronous};
    eventually("the store reopens", || async {
        SqliteStore::open(path, Synchronous::Normal).ok()
    })
    .await
}

pub(crate) async fn split(resp: reqwest::Response) -> (StatusCode, Value) {
    let status = resp.status();
    let text = resp.text().await.expect("body");
    let value = if text.is_empty() {
        Value::Null
    } else {
        serde_json::from_str(&text).unwrap_or(Value::String(text))
    };
    (status, value)
}

/// Starts the app with test defaults.
pub(crate) async fn spawn_app() -> TestApp {
    spawn_with(|_| {}).await
}

/// Starts the app with settings adjusted by `f`, over an in-memory store.
pub(crate) async fn spawn_with(f: impl FnOnce(&mut Settings)) -> TestApp {
    let mut s = settings();
    f(&mut s);
    let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
    spawn_on(s, store).await
}

/// Starts the app with `settings` over `store`.
pub(crate) async fn spawn_on(settings: Settings, store: Arc<dyn Store>) -> TestApp {
    init_log();
    let listener = imrelay::http::server::bind(settings.server.listen).expect("bind");
    let addr = listener.local_addr().expect("addr");
    let app = App::with_store(settings, store.clone())
        .await
        .expect("app builds");
    let shutdown = app.shutdown_token();
    let registry = app.state().registry.clone();
    let handle = tokio::spawn(async move {
        app.serve(listener).await.expect("serve");
    });
    TestApp {
        addr,
        client: reqwest::Client::new(),
        shutdown,
        registry,
        store,
        token: None,
        handle: Some(handle),
    }
}

/// A minimal Server-Sent Events reader.
pub(crate) struct Sse {
    resp: reqwest::Response,
    buf: String,
}

/// One parsed event.
#[derive(Debug, Clone)]
pub(crate) struct SseEvent {
    pub event: String,
    pub id: Option<String>,
    /// The `retry` field, in milliseconds, if the event had one.
    pub retry: Option<u64>,
    pub data: Value,
    /// The data as sent.
    pub raw: String,
}

impl Sse {
    pub(crate) async fn connect(app: &TestApp, last_event_id: Option<&str>) -> Sse {
        let mut req = app.client.get(app.url("/v1/events"));
        if let Some(t) = &app.token {
            req = req.bearer_auth(t);
        }
        if let Some(id) = last_event_id {
            req = req.header("Last-Event-ID", id);
        }
        let resp = req.send().await.expect("connect");
        assert_eq!(resp.status(), StatusCode::OK);
        Sse::from_response(resp)
    }

    /// Reads the events of `resp`, an event stream.
    pub(crate) fn from_response(resp: reqwest::Response) -> Sse {
        Sse {
            resp,
            buf: String::new(),
        }
    }

    /// The next event, or `None` if none arrives within `wait`.
    pub(crate) async fn next_within(&mut self, wait: Duration) -> Option<SseEvent> {
        let deadline = tokio::time::Instant::now() + wait;
        loop {
            if let Some(ev) = self.take_event() {
                return Some(ev);
            }
            let chunk = tokio::time::timeout_at(deadline, self.resp.chunk())
                .await
                .ok()?;
            match chunk.expect("stream") {
                Some(bytes) => self
                    .buf
                    .push_str(&String::from_utf8_lossy(&bytes).replace("\r\n", "\n")),
                None => return None,
            }
        }
    }

    pub(crate) async fn next(&mut self) -> SseEvent {
        self.next_within(Duration::from_secs(10))
            .await
            .expect("an event within 10 s")
    }

    fn take_event(&mut self) -> Option<SseEvent> {
        loop {
            let cut = self.buf.find("\n\n")?;
            let block: String = self.buf.drain(..cut + 2).collect();
            let mut event = "message".to_string();
            let mut id = None;
            let mut retry = None;
            let mut data = Vec::new();
            for line in block.lines() {
                if line.starts_with(':') || line.is_empty() {
                    continue;
                }
                let (field, value) = line.split_once(':').unwrap_or((line, ""));
                let value = value.strip_prefix(' ').unwrap_or(value);
                match field {
                    "event" => event = value.to_string(),
                    "id" => id = Some(value.to_string()),
                    "retry" => retry = value.parse().ok(),
                    "data" => data.push(value.to_string()),
                    _ => {}
                }
            }
            if data.is_empty() && event == "message" {
                continue; // keep-alive comment
            }
            let raw = data.join("\n");
            let data = serde_json::from_str(&raw).unwrap_or(Value::Null);
            return Some(SseEvent {
                event,
                id,
                retry,
                data,
                raw,
            });
        }
    }
}

/// Loads a JSON fixture from `tests/fixtures`.
pub(crate) fn fixture(path: &str) -> Value {
    let full = format!("{}/tests/fixtures/{path}", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&full).unwrap_or_else(|e| panic!("{full}: {e}"));
    serde_json::from_str(&text).expect("fixture is JSON")
}

/// A running `imrelay` child process.
pub(crate) struct Server {
    pub child: Child,
    pub base: String,
}

impl Server {
    /// Starts the binary on an ephemeral port with its store at `db`, and waits until ready.
    pub(crate) fn start(db: &Path) -> Server {
        Self::start_with(db, None)
    }

    /// [`Server::start`] with a configuration file.
    pub(crate) fn start_with(db: &Path, config: Option<&Path>) -> Server {
        Self::start_on("127.0.0.1:0", db, config)
    }

    /// [`Server::start_with`] listening on `listen` (to come back on the same address after
    /// a restart).
    pub(crate) fn start_on(listen: &str, db: &Path, config: Option<&Path>) -> Server {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_imrelay"));
        if let Some(config) = config {
            cmd.arg("--config").arg(config);
        }
        cmd.env("IMRELAY__SERVER__LISTEN", listen)
            .env("IMRELAY__STORE__PATH", db);
        Self::spawn(cmd)
    }

    /// Runs `cmd` (an `imrelay` binary and its settings) as `imrelay serve`, and waits until
    /// it is ready.
    pub(crate) fn spawn(mut cmd: Command) -> Server {
        let mut child = cmd
            .arg("serve")
            .env("IMRELAY__LOG__FORMAT", "json")
            .env("RUST_LOG", "info")
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("the imrelay binary starts");
        let stderr = child.stderr.take().expect("stderr");
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut sent = false;
            for line in BufReader::new(stderr).lines() {
                let Ok(line) = line else { break };
                if !sent
                    && let Ok(v) = serde_json::from_str::<Value>(&line)
                    && v["message"] == "imrelay is ready"
                {
                    let _ = tx.send(v["listen"].as_str().unwrap_or_default().to_string());
                    sent = true;
                }
                if std::env::var_os("TEST_LOG").is_some() {
                    eprintln!("[imrelay] {line}");
                }
            }
        });
        let listen = rx
            .recv_timeout(Duration::from_secs(30))
            .expect("the server reports it is ready");
        Server {
            child,
            base: format!("http://{listen}"),
        }
    }

    pub(crate) fn kill(mut self) {
        self.child.kill().expect("SIGKILL");
        let _ = self.child.wait();
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A port on 127.0.0.1 free a moment ago (for a server that must come back on the same
/// address after a restart).
pub(crate) fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port()
}

/// Posts a hook body in the background; returns the pending response.
pub(crate) fn post_hook(
    app: &TestApp,
    body: Value,
) -> tokio::task::JoinHandle<(StatusCode, Value)> {
    let client = app.client.clone();
    let url = app.url("/v1/hooks/claude-code");
    tokio::spawn(async move { split(client.post(url).json(&body).send().await.unwrap()).await })
}

/// Waits until an interaction is pending and returns it.
pub(crate) async fn pending_one(app: &TestApp) -> Value {
    eventually("an interaction becomes pending", || async {
        let (_, list) = app.get("/v1/interactions?status=pending").await;
        list["interactions"].as_array()?.first().cloned()
    })
    .await
}

/// The `Mcp-Session-Id` an `initialize` answer gave.
pub(crate) fn mcp_session(resp: &reqwest::Response) -> String {
    resp.headers()
        .get("mcp-session-id")
        .and_then(|v| v.to_str().ok())
        .expect("a session id")
        .to_string()
}

/// POSTs one JSON-RPC message to `/mcp` as a Streamable HTTP client does, with `token` and,
/// after `initialize`, in `session`.
pub(crate) async fn post_mcp(
    app: &TestApp,
    token: Option<&str>,
    body: &str,
    session: Option<&str>,
) -> reqwest::Response {
    let mut req = app
        .client
        .post(app.url("/mcp"))
        .header("Content-Type", "application/json")
        .header("Accept", "application/json, text/event-stream")
        .body(body.to_string());
    if let Some(t) = token {
        req = req.bearer_auth(t);
    }
    if let Some(s) = session {
        req = req
            .header("Mcp-Session-Id", s)
            .header("MCP-Protocol-Version", "2025-06-18");
    }
    req.send().await.unwrap()
}

/// Posts Claude Code's `Stop` hook of `session` (a turn ended, saying "The migration ran."),
/// as Claude Code does; held until it is answered, what it answered.
pub(crate) fn claude_stop(app: &TestApp, session: &str) -> tokio::task::JoinHandle<Value> {
    let body = json!({"hook_event_name": "Stop", "session_id": session, "cwd": "/srv/shop",
        "stop_hook_active": false, "last_assistant_message": "The migration ran."});
    let req = app
        .client
        .post(app.url("/v1/hooks/claude-code"))
        .json(&body);
    tokio::spawn(async move {
        let resp = req.send().await.expect("the hook call");
        assert_eq!(resp.status(), StatusCode::OK);
        resp.json().await.expect("JSON")
    })
}

/// Tells imrelay, as Claude Code's `SessionStart` hook does, that `session` started in
/// `/srv/shop`.
pub(crate) async fn claude_session_start(app: &TestApp, session: &str) {
    let start = json!({"session_id": session, "cwd": "/srv/shop", "hook_event_name": "SessionStart",
        "transcript_path": "/tmp/t.jsonl", "permission_mode": "default", "source": "startup"});
    let resp = app
        .client
        .post(app.url("/v1/hooks/claude-code"))
        .json(&start)
        .send()
        .await
        .expect("the hook call");
    assert_eq!(resp.status(), StatusCode::OK);
}

/// The messages people queued for claude-code's session `session`, as the API lists them.
pub(crate) async fn queued_messages(app: &TestApp, session: &str) -> Vec<Value> {
    let (status, s) = app
        .get(&format!("/v1/sessions/claude-code/{session}"))
        .await;
    assert_eq!(status, StatusCode::OK, "{s}");
    s["messages"].as_array().cloned().unwrap_or_default()
}

/// Waits for a held `Stop` hook's answer and checks it goes on with `words`: the answer of
/// the "finished" question.
pub(crate) async fn continued_with(held: tokio::task::JoinHandle<Value>, words: &str) {
    let out = held.await.expect("the hook call");
    assert_eq!(out["decision"], "block", "{out}");
    let reason = out["reason"].as_str().unwrap_or_default();
    assert!(reason.contains(words), "{out}");
}
