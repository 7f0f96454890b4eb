//! OpenCode's server (`opencode serve`, `opencode-ai` pinned in `npm/opencode`) driven over
//! HTTP as a bridge drives it: its event stream announces permissions and questions, and the
//! reply endpoints answer them. Checked against the fixtures in `tests/fixtures/opencode`. The
//! model is [`FakeModel`] speaking OpenAI chat completions, configured as an OpenAI-compatible
//! provider in `opencode.json`.

use std::path::PathBuf;
use std::time::Duration;

use futures_util::StreamExt;
use serde_json::{Value, json};
use tokio::sync::mpsc;

use super::fake_model::{Dialect, FakeModel, Step};
use super::{Running, Sandbox, installed};
use crate::support::{TestApp, eventually_within, free_port, spawn_app};
use crate::trial;

pub(crate) fn trials() -> Vec<libtest_mimic::Trial> {
    vec![
        trial(
            "agents::opencode::a_permission_answered_once_runs_the_command",
            super::opencode,
            a_permission_answered_once_runs_the_command,
        ),
        trial(
            "agents::opencode::a_rejections_message_reaches_the_model",
            super::opencode,
            a_rejections_message_reaches_the_model,
        ),
        trial(
            "agents::opencode::a_question_is_answered_with_a_label",
            super::opencode,
            a_question_is_answered_with_a_label,
        ),
        trial(
            "agents::opencode::the_server_password_is_http_basic_authentication",
            super::opencode,
            the_server_password_is_http_basic_authentication,
        ),
        trial(
            "agents::opencode::bridge_an_approval_through_imrelay_runs_the_command",
            super::opencode,
            bridge_an_approval_through_imrelay_runs_the_command,
        ),
        trial(
            "agents::opencode::bridge_an_answer_in_opencode_withdraws_imrelays_copy",
            super::opencode,
            bridge_an_answer_in_opencode_withdraws_imrelays_copy,
        ),
        trial(
            "agents::opencode::bridge_a_question_through_imrelay_reaches_the_model",
            super::opencode,
            bridge_a_question_through_imrelay_reaches_the_model,
        ),
        trial(
            "agents::opencode::bridge_an_answer_given_while_it_was_away_reaches_opencode_on_its_return",
            super::opencode,
            bridge_an_answer_given_while_it_was_away_reaches_opencode_on_its_return,
        ),
    ]
}

/// How long one wait may take (the first prompt loads OpenCode's plugins: several seconds).
pub(super) const LIMIT: Duration = Duration::from_secs(60);

pub(super) const COMMAND: &str = "echo ok > oc-proof.txt";

fn opencode() -> PathBuf {
    installed("opencode").expect("installed (checked by the trial's need)")
}

/// Waits until the `opencode serve` just started answers on `url` with the configuration
/// written for it (not another server's answer on a port taken meanwhile).
async fn ours(
    agent: &mut Running,
    client: &reqwest::Client,
    url: &str,
    password: Option<&str>,
) -> Result<(), String> {
    let deadline = tokio::time::Instant::now() + LIMIT;
    loop {
        let mut req = client
            .get(format!("{url}/config"))
            .timeout(Duration::from_secs(2));
        if let Some(p) = password {
            req = req.basic_auth("opencode", Some(p));
        }
        if let Ok(resp) = req.send().await {
            let config: Option<Value> = resp.json().await.ok();
            match config.as_ref().and_then(|c| c.get("model")) {
                Some(m) if m == "fake/fake-model" => return Ok(()),
                _ => return Err("another server answers there".into()),
            }
        }
        if agent.exited() {
            return Err("it ended before it answered".into());
        }
        if tokio::time::Instant::now() >= deadline {
            return Err(format!("it did not answer within {LIMIT:?}"));
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// A running `opencode serve` and its event stream.
pub(super) struct Server {
    agent: Running,
    pub(super) url: String,
    client: reqwest::Client,
    password: Option<String>,
    events: mpsc::UnboundedReceiver<Value>,
    /// Every event received so far.
    seen: Vec<Value>,
}

impl Server {
    /// Starts `opencode serve` in `sandbox` with the model at `model`, bash and edits asking
    /// for permission, the question tool on, and `password` if given; waits until it answers.
    pub(super) async fn start(
        sandbox: &Sandbox,
        model: &FakeModel,
        password: Option<&str>,
    ) -> Server {
        let config = json!({
            "$schema": "https://opencode.ai/config.json",
            "autoupdate": false, "share": "disabled",
            "model": "fake/fake-model", "small_model": "fake/fake-model",
            "provider": {"fake": {
                "npm": "@ai-sdk/openai-compatible", "name": "Fake",
                "options": {"baseURL": format!("{}/v1", model.base_url()), "apiKey": "imrelay-test-key"},
                "models": {"fake-model": {"name": "Fake model", "tool_call": true}},
            }},
            "permission": {"bash": "ask", "edit": "ask"},
        });
        std::fs::write(sandbox.project().join("opencode.json"), config.to_string())
            .expect("opencode.json");
        // No request may hang a test: each gets a deadline (the event stream one of its own).
        let client = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(5))
            .build()
            .expect("a client");
        // `--port 0` means OpenCode's default port, so a free one is picked here; another
        // process may take it before OpenCode binds it: then OpenCode ends, or another server
        // answers, and a new port is tried.
        let mut tries = 0;
        let (agent, url) = loop {
            tries += 1;
            let port = free_port();
            let mut c = sandbox.command(&opencode());
            c.args([
                "serve",
                "--hostname",
                "127.0.0.1",
                "--port",
                &port.to_string(),
            ])
            .env("OPENCODE_ENABLE_QUESTION_TOOL", "1");
            if let Some(p) = password {
                c.env("OPENCODE_SERVER_PASSWORD", p);
            }
            let mut agent = sandbox.spawn(c);
            let url = format!("http://127.0.0.1:{port}");
            match ours(&mut agent, &client, &url, password).await {
                Ok(()) => break (agent, url),
                Err(why) if tries < 3 => {
                    eprintln!("opencode serve on port {port}: {why}; trying another port");
                    let _ = agent.finish(Duration::from_secs(1)).await;
                }
                Err(why) => panic!("opencode serve: {why}\n{}", agent.output().describe()),
            }
        };
        let (tx, events) = mpsc::unbounded_channel();
        let mut server = Server {
            agent,
            url,
            client,
            password: password.map(str::to_string),
            events,
            seen: Vec::new(),
        };
        if password.is_none() {
            let resp =
                tokio::time::timeout(LIMIT, server.request(reqwest::Method::GET, "/event").send())
                    .await
                    .expect("GET /event answers in time")
                    .expect("GET /event");
            assert_eq!(resp.status(), 200);
            tokio::spawn(async move {
                let mut stream = eventsource_stream::Eventsource::eventsource(resp.bytes_stream());
                while let Some(Ok(event)) = stream.next().await {
                    if let Ok(v) = serde_json::from_str::<Value>(&event.data)
                        && tx.send(v).is_err()
                    {
                        break;
                    }
                }
            });
            server.event("server.connected", |_| true).await;
        }
        server
    }

    fn request(&self, method: reqwest::Method, path: &str) -> reqwest::RequestBuilder {
        let req = self.client.request(method, format!("{}{path}", self.url));
        match &self.password {
            Some(p) => req.basic_auth("opencode", Some(p)),
            None => req,
        }
    }

    pub(super) async fn call(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<Value>,
    ) -> (u16, Value) {
        let mut req = self.request(method, path).timeout(LIMIT);
        if let Some(b) = body {
            req = req.json(&b);
        }
        let resp = req.send().await.expect("a request to opencode");
        let status = resp.status().as_u16();
        let text = resp.text().await.unwrap_or_default();
        (status, serde_json::from_str(&text).unwrap_or(Value::Null))
    }

    /// Waits for the event of `kind` whose properties satisfy `pred`.
    pub(super) async fn event(&mut self, kind: &str, pred: impl Fn(&Value) -> bool) -> Value {
        let deadline = tokio::time::Instant::now() + LIMIT;
        loop {
            match tokio::time::timeout_at(deadline, self.events.recv()).await {
                Ok(Some(ev)) => {
                    self.seen.push(ev.clone());
                    if ev["type"] == kind && pred(&ev["properties"]) {
                        return ev["properties"].clone();
                    }
                }
                Ok(None) => panic!("the event stream ended before {kind}"),
                Err(_) => {
                    let kinds: Vec<&Value> = self.seen.iter().map(|e| &e["type"]).collect();
                    panic!(
                        "no {kind} within {LIMIT:?}; events: {kinds:?}\n{}",
                        self.agent.output().describe()
                    )
                }
            }
        }
    }

    /// Starts a session on `text`; its id.
    pub(super) async fn prompt(&self, text: &str) -> String {
        let (status, session) = self
            .call(reqwest::Method::POST, "/session", Some(json!({})))
            .await;
        assert_eq!(status, 200, "{session}");
        let id = session["id"].as_str().expect("a session id").to_string();
        let (status, body) = self
            .call(
                reqwest::Method::POST,
                &format!("/session/{id}/prompt_async"),
                Some(json!({"parts": [{"type": "text", "text": text}]})),
            )
            .await;
        assert_eq!(status, 204, "{body}");
        id
    }
}

/// The first event of `kind` in a `.jsonl` fixture.
fn fixture_event(name: &str, kind: &str) -> Value {
    let path = format!(
        "{}/tests/fixtures/opencode/{name}.jsonl",
        env!("CARGO_MANIFEST_DIR")
    );
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    text.lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .map(|l| l["event"].clone())
        .find(|e| e["type"] == kind)
        .unwrap_or_else(|| panic!("no {kind} in {path}"))["properties"]
        .clone()
}

fn keys(v: &Value) -> Vec<String> {
    let mut k: Vec<String> = v.as_object().expect("an object").keys().cloned().collect();
    k.sort();
    k
}

/// Starts a session asking to run the command; the `permission.asked` it raises.
async fn asked(server: &mut Server) -> (String, Value) {
    let session = server.prompt("Write the proof file.").await;
    let s = session.clone();
    let asked = server
        .event("permission.asked", move |p| p["sessionID"] == s)
        .await;
    let captured = fixture_event("server_permission_once", "permission.asked");
    assert_eq!(keys(&asked), keys(&captured), "{asked}");
    assert_eq!(asked["permission"], "bash", "{asked}");
    assert_eq!(asked["patterns"], json!([COMMAND]), "{asked}");
    assert_eq!(asked["metadata"]["command"], COMMAND, "{asked}");
    assert_eq!(asked["always"], json!(["echo *"]), "{asked}");
    (session, asked)
}

async fn a_permission_answered_once_runs_the_command() {
    let model = FakeModel::start(Dialect::OpenAiChat, Step::Shell(COMMAND.into()), "Done.").await;
    let sandbox = Sandbox::new();
    let mut server = Server::start(&sandbox, &model, None).await;
    let (session, asked) = asked(&mut server).await;
    let id = asked["id"].as_str().expect("id").to_string();

    let (status, pending) = server.call(reqwest::Method::GET, "/permission", None).await;
    assert_eq!(status, 200);
    assert_eq!(
        pending,
        json!([asked]),
        "GET /permission lists what was asked"
    );
    let (status, ok) = server
        .call(
            reqwest::Method::POST,
            &format!("/permission/{id}/reply"),
            Some(json!({"reply": "once"})),
        )
        .await;
    assert_eq!((status, ok), (200, json!(true)));
    let replied = server
        .event("permission.replied", |p| p["requestID"] == id.as_str())
        .await;
    assert_eq!(replied["reply"], "once", "{replied}");
    server
        .event("session.idle", |p| p["sessionID"] == session.as_str())
        .await;
    assert_eq!(
        std::fs::read_to_string(sandbox.project().join("oc-proof.txt"))
            .ok()
            .as_deref(),
        Some("ok\n"),
        "the allowed command did not run"
    );
    let (_, pending) = server.call(reqwest::Method::GET, "/permission", None).await;
    assert_eq!(pending, json!([]));
}

async fn a_rejections_message_reaches_the_model() {
    let model = FakeModel::start(Dialect::OpenAiChat, Step::Shell(COMMAND.into()), "Done.").await;
    let sandbox = Sandbox::new();
    let mut server = Server::start(&sandbox, &model, None).await;
    let (session, asked) = asked(&mut server).await;
    let id = asked["id"].as_str().expect("id").to_string();

    let (status, ok) = server
        .call(
            reqwest::Method::POST,
            &format!("/permission/{id}/reply"),
            Some(json!({"reply": "reject", "message": "Not on a Friday"})),
        )
        .await;
    assert_eq!((status, ok), (200, json!(true)));
    server
        .event("session.idle", |p| p["sessionID"] == session.as_str())
        .await;
    assert!(
        !sandbox.project().join("oc-proof.txt").exists(),
        "a rejected command ran"
    );
    let told = model
        .wait_for_tool_result(Duration::from_secs(5))
        .await
        .expect("the rejection reached the model");
    assert!(told.text.contains("Not on a Friday"), "{told:?}");
}

async fn a_question_is_answered_with_a_label() {
    let step = Step::Tool {
        name: "question".into(),
        input: json!({"questions": [{"question": "Which database?", "header": "Database",
            "options": [{"label": "SQLite", "description": "A file"}, {"label": "PostgreSQL", "description": "A server"}]}]}),
    };
    let model = FakeModel::start(Dialect::OpenAiChat, step, "Done.").await;
    let sandbox = Sandbox::new();
    let mut server = Server::start(&sandbox, &model, None).await;
    let session = server.prompt("Ask me which database.").await;
    let s = session.clone();
    let asked = server
        .event("question.asked", move |p| p["sessionID"] == s)
        .await;
    let captured = fixture_event("server_question_reply", "question.asked");
    assert_eq!(keys(&asked), keys(&captured), "{asked}");
    assert_eq!(
        asked["questions"][0]["question"], "Which database?",
        "{asked}"
    );
    let id = asked["id"].as_str().expect("id").to_string();

    let (status, ok) = server
        .call(
            reqwest::Method::POST,
            &format!("/question/{id}/reply"),
            Some(json!({"answers": [["SQLite"]]})),
        )
        .await;
    assert_eq!((status, ok), (200, json!(true)));
    let replied = server
        .event("question.replied", |p| p["requestID"] == id.as_str())
        .await;
    assert_eq!(replied["answers"], json!([["SQLite"]]), "{replied}");
    let told = model
        .wait_for_tool_result(LIMIT)
        .await
        .expect("the answer reached the model");
    assert!(
        told.text.contains("\"Which database?\"=\"SQLite\""),
        "{told:?}"
    );
}

async fn the_server_password_is_http_basic_authentication() {
    let model = FakeModel::start(Dialect::OpenAiChat, Step::Shell(COMMAND.into()), "Done.").await;
    let sandbox = Sandbox::new();
    let server = Server::start(&sandbox, &model, Some("imrelay-test-password")).await;
    let without = server
        .client
        .get(format!("{}/permission", server.url))
        .send()
        .await
        .expect("a request");
    assert_eq!(without.status(), 401);
    assert_eq!(
        without
            .headers()
            .get("www-authenticate")
            .and_then(|v| v.to_str().ok()),
        Some("Basic realm=\"Secure Area\"")
    );
    let wrong = server
        .client
        .get(format!("{}/permission", server.url))
        .basic_auth("opencode", Some("wrong"))
        .send()
        .await
        .expect("a request");
    assert_eq!(wrong.status(), 401);
    let (status, pending) = server.call(reqwest::Method::GET, "/permission", None).await;
    assert_eq!((status, pending), (200, json!([])));
}

/// `imrelay bridge opencode` between `app` and `server`, its standard error in `bridge.log`
/// in the sandbox.
fn bridge(sandbox: &Sandbox, app: &TestApp, server: &Server) -> tokio::process::Child {
    bridge_with(sandbox, app, server, None)
}

/// [`bridge`] presenting the agent token `token`, if given.
pub(super) fn bridge_with(
    sandbox: &Sandbox,
    app: &TestApp,
    server: &Server,
    token: Option<&str>,
) -> tokio::process::Child {
    let log = std::fs::File::create(sandbox.dir.path().join("bridge.log")).expect("bridge.log");
    let mut c = tokio::process::Command::new(env!("CARGO_BIN_EXE_imrelay"));
    c.env_remove("IMRELAY_AGENT_TOKEN")
        .env_remove("IMRELAY_URL")
        .env_remove("OPENCODE_URL")
        .env_remove("OPENCODE_SERVER_PASSWORD")
        .args([
            "bridge",
            "opencode",
            "--url",
            &app.url(""),
            "--opencode",
            &server.url,
        ])
        .stdout(std::process::Stdio::null())
        .stderr(log)
        .kill_on_drop(true);
    if let Some(p) = &server.password {
        c.env("OPENCODE_SERVER_PASSWORD", p);
    }
    if let Some(t) = token {
        c.env("IMRELAY_AGENT_TOKEN", t);
    }
    c.spawn().expect("imrelay bridge opencode starts")
}

pub(super) fn bridge_log(sandbox: &Sandbox) -> String {
    std::fs::read_to_string(sandbox.dir.path().join("bridge.log")).unwrap_or_default()
}

/// The one interaction pending in `app`, once there is one (else a panic with the bridge's
/// log).
pub(super) async fn pending_in(app: &TestApp, sandbox: &Sandbox) -> Value {
    let deadline = tokio::time::Instant::now() + LIMIT;
    loop {
        let (_, listed) = app.get("/v1/interactions?status=pending").await;
        if let Some(i) = listed["interactions"].as_array().and_then(|a| a.first()) {
            return i.clone();
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the bridge asked nothing within {LIMIT:?}\n{}",
            bridge_log(sandbox)
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn bridge_an_approval_through_imrelay_runs_the_command() {
    let model = FakeModel::start(Dialect::OpenAiChat, Step::Shell(COMMAND.into()), "Done.").await;
    let sandbox = Sandbox::new();
    let server = Server::start(&sandbox, &model, Some("imrelay-test-password")).await;
    let app = spawn_app().await;
    let _bridge = bridge(&sandbox, &app, &server);
    let session = server.prompt("Write the proof file.").await;
    let i = pending_in(&app, &sandbox).await;
    assert_eq!(i["tool_name"], "Bash", "{i}");
    assert_eq!(i["input"]["command"], COMMAND, "{i}");
    assert_eq!(i["session"], session.as_str(), "{i}");
    assert_eq!(
        i["cwd"].as_str().map(std::path::PathBuf::from),
        Some(sandbox.project().canonicalize().expect("project")),
        "{i}"
    );
    assert!(
        i["description"]
            .as_str()
            .is_some_and(|d| d.contains("`echo *`") && d.contains("in every session")),
        "{i}"
    );
    let id = i["id"].as_str().expect("id").to_string();
    let (status, body) = app
        .respond(&id, &serde_json::json!({"decision": "allow"}))
        .await;
    assert_eq!(status, 200, "{body}");
    let proof = sandbox.project().join("oc-proof.txt");
    eventually_within("the allowed command runs", LIMIT, || {
        let proof = proof.clone();
        async move { std::fs::read_to_string(&proof).ok().filter(|t| t == "ok\n") }
    })
    .await;
    let (_, pending) = server.call(reqwest::Method::GET, "/permission", None).await;
    assert_eq!(pending, json!([]), "{}", bridge_log(&sandbox));
}

async fn bridge_an_answer_in_opencode_withdraws_imrelays_copy() {
    let model = FakeModel::start(Dialect::OpenAiChat, Step::Shell(COMMAND.into()), "Done.").await;
    let sandbox = Sandbox::new();
    let mut server = Server::start(&sandbox, &model, None).await;
    let app = spawn_app().await;
    let _bridge = bridge(&sandbox, &app, &server);
    let (_, asked) = asked(&mut server).await;
    let i = pending_in(&app, &sandbox).await;
    let request = asked["id"].as_str().expect("id").to_string();
    let (status, ok) = server
        .call(
            reqwest::Method::POST,
            &format!("/permission/{request}/reply"),
            Some(json!({"reply": "reject"})),
        )
        .await;
    assert_eq!((status, ok), (200, json!(true)));
    let id = i["id"].as_str().expect("id").to_string();
    let done = eventually_within("imrelay's copy is withdrawn", LIMIT, || async {
        let (_, v) = app.get(&format!("/v1/interactions/{id}")).await;
        (v["status"] != "pending").then_some(v)
    })
    .await;
    assert_eq!(done["resolution"]["outcome"], "cancelled", "{done}");
    assert!(
        done["resolution"]["result"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("Answered in OpenCode itself")),
        "{done}"
    );
}

async fn bridge_a_question_through_imrelay_reaches_the_model() {
    let step = Step::Tool {
        name: "question".into(),
        input: json!({"questions": [{"question": "Which database?", "header": "Database",
            "options": [{"label": "SQLite", "description": "A file"}, {"label": "PostgreSQL", "description": "A server"}]}]}),
    };
    let model = FakeModel::start(Dialect::OpenAiChat, step, "Done.").await;
    let sandbox = Sandbox::new();
    let server = Server::start(&sandbox, &model, None).await;
    let app = spawn_app().await;
    let _bridge = bridge(&sandbox, &app, &server);
    server.prompt("Ask me which database.").await;
    let i = pending_in(&app, &sandbox).await;
    assert_eq!(i["kind"], "question", "{i}");
    let id = i["id"].as_str().expect("id").to_string();
    let (status, body) = app
        .respond(&id, &json!({"answers": {"Which database?": "PostgreSQL"}}))
        .await;
    assert_eq!(status, 200, "{body}");
    let told = model
        .wait_for_tool_result(LIMIT)
        .await
        .expect("the answer reached the model");
    assert!(
        told.text.contains("\"Which database?\"=\"PostgreSQL\""),
        "{told:?}\n{}",
        bridge_log(&sandbox)
    );
}

async fn bridge_an_answer_given_while_it_was_away_reaches_opencode_on_its_return() {
    let model = FakeModel::start(Dialect::OpenAiChat, Step::Shell(COMMAND.into()), "Done.").await;
    let sandbox = Sandbox::new();
    let server = Server::start(&sandbox, &model, None).await;
    let app = spawn_app().await;
    let mut first = bridge(&sandbox, &app, &server);
    server.prompt("Write the proof file.").await;
    let i = pending_in(&app, &sandbox).await;
    // The bridge goes away; the answer is given in imrelay meanwhile, and OpenCode, which
    // has had no reply, still lists the request.
    first.kill().await.expect("the first bridge stops");
    let id = i["id"].as_str().expect("id").to_string();
    let (status, body) = app
        .respond(&id, &serde_json::json!({"decision": "allow"}))
        .await;
    assert_eq!(status, 200, "{body}");
    let (_, waiting) = server.call(reqwest::Method::GET, "/permission", None).await;
    assert_eq!(waiting.as_array().map(Vec::len), Some(1), "{waiting}");
    // A bridge started again takes the request up from OpenCode's listing, finds the answer
    // on the interaction it re-attaches to, and replies: the command runs.
    let _second = bridge(&sandbox, &app, &server);
    let proof = sandbox.project().join("oc-proof.txt");
    eventually_within("the allowed command runs", LIMIT, || {
        let proof = proof.clone();
        async move { std::fs::read_to_string(&proof).ok().filter(|t| t == "ok\n") }
    })
    .await;
    let (_, pending) = server.call(reqwest::Method::GET, "/permission", None).await;
    assert_eq!(pending, json!([]), "{}", bridge_log(&sandbox));
    assert!(
        bridge_log(&sandbox).contains("replied to"),
        "{}",
        bridge_log(&sandbox)
    );
}
