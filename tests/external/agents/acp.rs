//! Gemini CLI as an Agent Client Protocol agent (`gemini --acp`), driven over standard input
//! and output as an editor drives it: the `session/request_permission` round trip that
//! `imrelay acp` will intercept, checked against the fixtures in `tests/fixtures/gemini-cli`.
//! The model is [`FakeModel`] speaking the Gemini API.

use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, Lines};
use tokio::process::{Child, ChildStdin, ChildStdout};

use super::Sandbox;
use super::fake_model::{Dialect, FakeModel, Step};
use super::gemini::{gemini_command, write_settings};
use crate::trial;

pub fn trials() -> Vec<libtest_mimic::Trial> {
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
    ]
}

/// How long one exchange may take.
const LIMIT: Duration = Duration::from_secs(60);

const COMMAND: &str = "echo ok > acp-proof.txt";

/// `gemini --acp` with its standard input and output.
struct Agent {
    _child: Child,
    stdin: ChildStdin,
    lines: Lines<BufReader<ChildStdout>>,
    /// Every message the agent sent, in order.
    seen: Vec<Value>,
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
            _child: child,
            stdin,
            lines: BufReader::new(stdout).lines(),
            seen: Vec::new(),
        }
    }

    async fn send(&mut self, message: Value) {
        let line = format!("{message}\n");
        self.stdin
            .write_all(line.as_bytes())
            .await
            .expect("write to the agent");
        self.stdin.flush().await.expect("flush");
    }

    /// Reads messages until one satisfies `pred`, for at most [`LIMIT`].
    async fn until(&mut self, what: &str, pred: impl Fn(&Value) -> bool) -> Value {
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
