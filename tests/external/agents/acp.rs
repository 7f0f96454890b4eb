//! Gemini CLI as an Agent Client Protocol agent (`gemini --acp`), driven over standard input
//! and output as an editor drives it: the `session/request_permission` round trip, checked
//! against the fixtures in `tests/fixtures/gemini-cli`; then the same through `imrelay acp`,
//! answered on imrelay's side, and the proxy killed without leaving Gemini CLI behind. The
//! model is [`FakeModel`] speaking the Gemini API.

use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, Lines};
use tokio::process::{Child, ChildStdin, ChildStdout};

use super::Sandbox;
use super::fake_model::{Dialect, FakeModel, Step};
use super::gemini::{gemini, gemini_command, write_settings};
use crate::support::{TestApp, eventually_within, spawn_app};
use crate::trial;

pub(crate) fn trials() -> Vec<libtest_mimic::Trial> {
    vec![
        trial(
            "agents::acp::gemini_asks_permission_and_runs_the_command_when_allowed",
            super::gemini_cli,
            gemini_asks_permission_and_runs_the_command_when_allowed,
        ),
        trial(
            "agents::acp::a_rejection_reaches_the_model_as_cancelled_by_the_user",
            super::gemini_cli,
            a_rejection_reaches_the_model_as_cancelled_by_the_user,
        ),
        trial(
            "agents::acp::a_cancelled_prompt_ends_cancelled_once_its_permission_is_answered",
            super::gemini_cli,
            a_cancelled_prompt_ends_cancelled_once_its_permission_is_answered,
        ),
        trial(
            "agents::acp::through_imrelay_acp_an_allow_on_a_channel_runs_the_command",
            super::gemini_cli,
            through_imrelay_acp_an_allow_on_a_channel_runs_the_command,
        ),
        trial(
            "agents::acp::through_imrelay_acp_a_deny_and_a_cancel_reach_gemini_and_nothing_outlives_the_proxy",
            super::gemini_cli,
            through_imrelay_acp_a_deny_and_a_cancel_reach_gemini_and_nothing_outlives_the_proxy,
        ),
    ]
}

/// How long one exchange may take.
pub(super) const LIMIT: Duration = Duration::from_secs(60);

pub(super) const COMMAND: &str = "echo ok > acp-proof.txt";

/// `gemini --acp` with its standard input and output.
pub(super) struct Agent {
    child: Child,
    stdin: ChildStdin,
    lines: Lines<BufReader<ChildStdout>>,
    /// Every message the agent sent, in order.
    pub(super) seen: Vec<Value>,
}

impl Agent {
    fn start(sandbox: &Sandbox, model: &FakeModel) -> Agent {
        write_settings(sandbox, json!({}));
        let mut c = gemini_command(sandbox, model);
        c.env("GEMINI_CLI_TRUST_WORKSPACE", "true")
            .args(["--acp", "-m", "gemini-2.5-flash"])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null());
        let mut child = c.spawn().expect("gemini --acp starts");
        let stdin = child.stdin.take().expect("stdin");
        let stdout = child.stdout.take().expect("stdout");
        Agent {
            child,
            stdin,
            lines: BufReader::new(stdout).lines(),
            seen: Vec::new(),
        }
    }

    /// `imrelay acp --url url -- gemini --acp ...`: the proxy in the agent's place.
    fn start_proxied(sandbox: &Sandbox, model: &FakeModel, url: &str) -> Agent {
        Agent::start_proxied_with(sandbox, model, url, None)
    }

    /// [`Agent::start_proxied`] presenting the agent token `token`, if given.
    pub(super) fn start_proxied_with(
        sandbox: &Sandbox,
        model: &FakeModel,
        url: &str,
        token: Option<&str>,
    ) -> Agent {
        write_settings(sandbox, json!({}));
        let mut c = sandbox.command(std::path::Path::new(env!("CARGO_BIN_EXE_imrelay")));
        if let Some(t) = token {
            c.env("IMRELAY_AGENT_TOKEN", t);
        }
        c.env("GEMINI_API_KEY", "imrelay-test-key")
            .env("GOOGLE_GEMINI_BASE_URL", model.base_url())
            .env("GEMINI_CLI_TRUST_WORKSPACE", "true")
            .args(["acp", "--url", url, "--"])
            .arg(gemini())
            .args(["--acp", "-m", "gemini-2.5-flash"])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::inherit());
        let mut child = c.spawn().expect("imrelay acp starts");
        let stdin = child.stdin.take().expect("stdin");
        let stdout = child.stdout.take().expect("stdout");
        Agent {
            child,
            stdin,
            lines: BufReader::new(stdout).lines(),
            seen: Vec::new(),
        }
    }

    /// `initialize`, `session/new` and `session/prompt` (id 3); the session id.
    pub(super) async fn prompt(&mut self, sandbox: &Sandbox) -> String {
        self.send(json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": 1,
            "clientCapabilities": {"fs": {"readTextFile": false, "writeTextFile": false}, "terminal": false},
        }}))
        .await;
        let init = self.until("initialize's result", |m| m["id"] == 1).await;
        assert_eq!(init["result"]["agentInfo"]["name"], "gemini-cli", "{init}");
        let cwd = sandbox.project().display().to_string();
        self.send(json!({"jsonrpc": "2.0", "id": 2, "method": "session/new",
            "params": {"cwd": cwd, "mcpServers": []}}))
            .await;
        let new = self.until("session/new's result", |m| m["id"] == 2).await;
        let session = new["result"]["sessionId"]
            .as_str()
            .unwrap_or_else(|| panic!("no sessionId: {new}"))
            .to_string();
        self.send(
            json!({"jsonrpc": "2.0", "id": 3, "method": "session/prompt", "params": {
            "sessionId": session, "prompt": [{"type": "text", "text": "Write the proof file."}]}}),
        )
        .await;
        session
    }

    pub(super) async fn send(&mut self, message: Value) {
        let line = format!("{message}\n");
        self.stdin
            .write_all(line.as_bytes())
            .await
            .expect("write to the agent");
        self.stdin.flush().await.expect("flush");
    }

    /// Reads messages until one satisfies `pred`, for at most [`LIMIT`].
    pub(super) async fn until(&mut self, what: &str, pred: impl Fn(&Value) -> bool) -> Value {
        let deadline = tokio::time::Instant::now() + LIMIT;
        loop {
            let line = match tokio::time::timeout_at(deadline, self.lines.next_line()).await {
                Ok(Ok(Some(line))) => line,
                Ok(Ok(None)) => panic!(
                    "the agent closed its output before {what}: {:#?}",
                    self.seen
                ),
                Ok(Err(e)) => panic!("reading the agent: {e}"),
                Err(_) => panic!(
                    "not within {LIMIT:?}: {what}; the agent sent {:#?}",
                    self.seen
                ),
            };
            if line.trim().is_empty() {
                continue;
            }
            let message: Value = serde_json::from_str(&line).unwrap_or_else(|e| {
                panic!("the agent wrote a line that is not JSON ({e}): {line}")
            });
            self.seen.push(message.clone());
            if pred(&message) {
                return message;
            }
        }
    }

    /// `initialize`, `session/new` and `session/prompt` (id 3); the permission request.
    async fn prompt_until_asked(&mut self, sandbox: &Sandbox) -> (String, Value) {
        let session = self.prompt(sandbox).await;
        let asked = self
            .until("session/request_permission", |m| {
                m["method"] == "session/request_permission"
            })
            .await;
        (session, asked)
    }
}

/// The permission request has the shape of the captured one, for this session and command.
fn assert_like_fixture(asked: &Value, session: &str) {
    let captured = fixture_line("acp_allow", "session/request_permission");
    let params = &asked["params"];
    assert_eq!(params["sessionId"], session, "{asked}");
    assert_eq!(params["options"], captured["params"]["options"], "{asked}");
    let call = &params["toolCall"];
    assert_eq!(call["title"], COMMAND, "{asked}");
    assert_eq!(call["kind"], "execute", "{asked}");
    assert_eq!(call["status"], "pending", "{asked}");
    assert!(
        call["toolCallId"]
            .as_str()
            .is_some_and(|id| id.starts_with("run_shell_command__")),
        "{asked}"
    );
    assert_eq!(call["content"][0]["type"], "content", "{asked}");
    assert_eq!(call["content"][0]["content"]["type"], "text", "{asked}");
    assert_eq!(call["locations"], json!([]), "{asked}");
}

/// The first message of a `.jsonl` fixture with this method.
fn fixture_line(name: &str, method: &str) -> Value {
    let path = format!(
        "{}/tests/fixtures/gemini-cli/{name}.jsonl",
        env!("CARGO_MANIFEST_DIR")
    );
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    text.lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .map(|l| l["msg"].clone())
        .find(|m| m["method"] == method)
        .unwrap_or_else(|| panic!("no {method} in {path}"))
}

async fn gemini_asks_permission_and_runs_the_command_when_allowed() {
    let model = FakeModel::start(Dialect::Gemini, Step::Shell(COMMAND.into()), "Done.").await;
    let sandbox = Sandbox::new();
    let mut agent = Agent::start(&sandbox, &model);
    let (session, asked) = agent.prompt_until_asked(&sandbox).await;
    assert_like_fixture(&asked, &session);

    agent
        .send(json!({"jsonrpc": "2.0", "id": asked["id"], "result":
            {"outcome": {"outcome": "selected", "optionId": "proceed_once"}}}))
        .await;
    let done = agent.until("the prompt's result", |m| m["id"] == 3).await;
    assert_eq!(done["result"]["stopReason"], "end_turn", "{done}");
    assert_eq!(
        std::fs::read_to_string(sandbox.project().join("acp-proof.txt"))
            .ok()
            .as_deref(),
        Some("ok\n"),
        "the allowed command did not run"
    );
    // The agent reported the call's progress in session/update notifications.
    assert!(
        agent.seen.iter().any(|m| m["method"] == "session/update"
            && m["params"]["update"]["sessionUpdate"] == "tool_call_update"
            && m["params"]["update"]["status"] == "completed"),
        "{:#?}",
        agent.seen
    );
}

async fn a_rejection_reaches_the_model_as_cancelled_by_the_user() {
    let model = FakeModel::start(Dialect::Gemini, Step::Shell(COMMAND.into()), "Done.").await;
    let sandbox = Sandbox::new();
    let mut agent = Agent::start(&sandbox, &model);
    let (_, asked) = agent.prompt_until_asked(&sandbox).await;

    agent
        .send(json!({"jsonrpc": "2.0", "id": asked["id"], "result":
            {"outcome": {"outcome": "selected", "optionId": "cancel"}}}))
        .await;
    let done = agent.until("the prompt's result", |m| m["id"] == 3).await;
    assert_eq!(done["result"]["stopReason"], "end_turn", "{done}");
    assert!(
        !sandbox.project().join("acp-proof.txt").exists(),
        "a rejected command ran"
    );
    let told = model
        .wait_for_tool_result(Duration::from_secs(1))
        .await
        .expect("the rejection reached the model");
    // ACP carries no reason: this is all the model learns.
    assert!(told.text.contains("was canceled by the user"), "{told:?}");
}

async fn a_cancelled_prompt_ends_cancelled_once_its_permission_is_answered() {
    let model = FakeModel::start(Dialect::Gemini, Step::Shell(COMMAND.into()), "Done.").await;
    let sandbox = Sandbox::new();
    let mut agent = Agent::start(&sandbox, &model);
    let (session, asked) = agent.prompt_until_asked(&sandbox).await;

    agent
        .send(
            json!({"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": session}}),
        )
        .await;
    agent
        .send(json!({"jsonrpc": "2.0", "id": asked["id"], "result": {"outcome": {"outcome": "cancelled"}}}))
        .await;
    let done = agent.until("the prompt's result", |m| m["id"] == 3).await;
    assert_eq!(done["result"]["stopReason"], "cancelled", "{done}");
    assert!(
        !sandbox.project().join("acp-proof.txt").exists(),
        "a cancelled command ran"
    );
}

/// The interaction Gemini CLI's request became, waiting in imrelay.
pub(super) async fn asked_in_imrelay(app: &TestApp) -> Value {
    eventually_within("the permission request waits in imrelay", LIMIT, || async {
        let (_, list) = app.get("/v1/interactions?status=pending").await;
        let id = list["interactions"].as_array()?.first()?["id"]
            .as_str()?
            .to_string();
        let (_, full) = app.get(&format!("/v1/interactions/{id}")).await;
        Some(full)
    })
    .await
}

/// Whether any live process is in process group `pgid`.
fn group_alive(pgid: i32) -> bool {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return false;
    };
    dir.filter_map(Result::ok)
        .filter_map(|e| std::fs::read_to_string(e.path().join("stat")).ok())
        .any(|stat| {
            let Some((_, rest)) = stat.rsplit_once(')') else {
                return false;
            };
            let fields: Vec<&str> = rest.split_whitespace().collect();
            fields.first().is_some_and(|s| *s != "Z")
                && fields.get(2).and_then(|g| g.parse::<i32>().ok()) == Some(pgid)
        })
}

/// The pid of the proxy's child (the agent, leader of its process group).
fn child_of(parent: u32) -> Option<i32> {
    std::fs::read_dir("/proc")
        .ok()?
        .filter_map(Result::ok)
        .filter_map(|e| {
            let pid = e.file_name().to_str()?.parse::<i32>().ok()?;
            let stat = std::fs::read_to_string(e.path().join("stat")).ok()?;
            let (_, rest) = stat.rsplit_once(')')?;
            let ppid = rest.split_whitespace().nth(1)?.parse::<u32>().ok()?;
            (ppid == parent).then_some(pid)
        })
        .next()
}

async fn through_imrelay_acp_an_allow_on_a_channel_runs_the_command() {
    let app = spawn_app().await;
    let model = FakeModel::start(Dialect::Gemini, Step::Shell(COMMAND.into()), "Done.").await;
    let sandbox = Sandbox::new();
    let mut agent = Agent::start_proxied(&sandbox, &model, &app.url(""));
    let session = agent.prompt(&sandbox).await;
    let i = asked_in_imrelay(&app).await;
    // Gemini CLI's request as people see it: its title, session, working directory, and its
    // own options named.
    assert_eq!(i["agent"], "gemini-cli", "{i}");
    assert_eq!(i["session"], session.as_str(), "{i}");
    assert_eq!(i["cwd"], sandbox.project().display().to_string(), "{i}");
    assert_eq!(i["title"], COMMAND, "{i}");
    assert_eq!(i["tool_name"], "acp:execute", "{i}");
    let description = i["description"].as_str().unwrap_or_default();
    assert!(
        description.contains("Allow answers Gemini CLI's “Allow”")
            && description.contains("Always allow answers “Allow for this session”"),
        "{description}"
    );
    let (status, body) = app
        .respond(
            i["id"].as_str().expect("id"),
            &json!({"decision": "allow", "by": "alice"}),
        )
        .await;
    assert!(status.is_success(), "{body}");
    let done = agent.until("the prompt's result", |m| m["id"] == 3).await;
    assert_eq!(done["result"]["stopReason"], "end_turn", "{done}");
    assert_eq!(
        std::fs::read_to_string(sandbox.project().join("acp-proof.txt"))
            .ok()
            .as_deref(),
        Some("ok\n"),
        "the allowed command did not run"
    );
    // The editor never saw the request; it saw the call complete.
    assert!(
        !agent
            .seen
            .iter()
            .any(|m| m["method"] == "session/request_permission"),
        "{:#?}",
        agent.seen
    );
    assert!(
        agent
            .seen
            .iter()
            .any(|m| m["method"] == "session/update"
                && m["params"]["update"]["status"] == "completed"),
        "{:#?}",
        agent.seen
    );
    // The editor closes its end: the proxy and Gemini CLI end.
    let pgid = child_of(agent.child.id().expect("pid")).expect("the agent runs");
    drop(agent.stdin);
    let status = tokio::time::timeout(LIMIT, agent.child.wait())
        .await
        .expect("the proxy exits")
        .expect("wait");
    assert!(status.code().is_some(), "{status:?}");
    eventually_within("nothing of Gemini CLI runs", LIMIT, || async {
        (!group_alive(pgid)).then_some(())
    })
    .await;
}

async fn through_imrelay_acp_a_deny_and_a_cancel_reach_gemini_and_nothing_outlives_the_proxy() {
    let app = spawn_app().await;
    let model = FakeModel::start(Dialect::Gemini, Step::Shell(COMMAND.into()), "Done.").await;
    let sandbox = Sandbox::new();
    let mut agent = Agent::start_proxied(&sandbox, &model, &app.url(""));
    agent.prompt(&sandbox).await;
    let i = asked_in_imrelay(&app).await;
    app.respond(
        i["id"].as_str().expect("id"),
        &json!({"decision": "deny", "message": "Not now"}),
    )
    .await;
    let done = agent.until("the prompt's result", |m| m["id"] == 3).await;
    assert_eq!(done["result"]["stopReason"], "end_turn", "{done}");
    assert!(
        !sandbox.project().join("acp-proof.txt").exists(),
        "a denied command ran"
    );
    let told = model
        .wait_for_tool_result(Duration::from_secs(5))
        .await
        .expect("the rejection reached the model");
    // The reason stayed in imrelay: ACP carries none.
    assert!(told.text.contains("was canceled by the user"), "{told:?}");
    assert!(!told.text.contains("Not now"), "{told:?}");

    // A second turn asks again; the editor cancels it: Gemini CLI ends the turn cancelled and
    // imrelay's copy is withdrawn.
    let model2 = FakeModel::start(Dialect::Gemini, Step::Shell(COMMAND.into()), "Done.").await;
    let sandbox2 = Sandbox::new();
    let mut agent2 = Agent::start_proxied(&sandbox2, &model2, &app.url(""));
    let session = agent2.prompt(&sandbox2).await;
    let j = asked_in_imrelay(&app).await;
    agent2
        .send(
            json!({"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": session}}),
        )
        .await;
    let done = agent2.until("the prompt's result", |m| m["id"] == 3).await;
    assert_eq!(done["result"]["stopReason"], "cancelled", "{done}");
    let id = j["id"].as_str().expect("id").to_string();
    eventually_within("the interaction is withdrawn", LIMIT, || async {
        let (_, i) = app.get(&format!("/v1/interactions/{id}")).await;
        (i["resolution"]["outcome"] == "cancelled").then_some(())
    })
    .await;

    // The proxy is killed outright: Gemini CLI (and what it started) goes with it.
    let pgid = child_of(agent2.child.id().expect("pid")).expect("the agent runs");
    assert!(group_alive(pgid));
    agent2.child.start_kill().expect("kill the proxy");
    let _ = agent2.child.wait().await;
    eventually_within("nothing of Gemini CLI runs", LIMIT, || async {
        (!group_alive(pgid)).then_some(())
    })
    .await;
    drop(agent);
}
