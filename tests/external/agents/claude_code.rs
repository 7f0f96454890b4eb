//! Claude Code (`@anthropic-ai/claude-code`, pinned in `npm/claude-code`) against the real
//! imrelay: headless runs (`claude -p`) whose permissions go to imrelay's MCP tool
//! `permission_prompt`, and the HTTP hook at `/v1/hooks/claude-code`. The model is
//! [`FakeModel`] speaking the Anthropic Messages API (`ANTHROPIC_BASE_URL`).

use std::path::PathBuf;
use std::time::Duration;

use serde_json::{Value, json};

use super::capture;
use super::fake_model::{Dialect, FakeModel, Step};
use super::tap::Tap;
use super::{Running, Sandbox, installed};
use crate::support::*;
use crate::trial;

pub(crate) fn trials() -> Vec<libtest_mimic::Trial> {
    vec![
        trial(
            "agents::claude_code::permission_prompt_tool_allow_runs_the_command",
            super::claude_code,
            permission_prompt_tool_allow_runs_the_command,
        ),
        trial(
            "agents::claude_code::permission_prompt_tool_deny_tells_the_model_why",
            super::claude_code,
            permission_prompt_tool_deny_tells_the_model_why,
        ),
        trial(
            "agents::claude_code::pre_tool_use_hook_allow_runs_the_command",
            super::claude_code,
            pre_tool_use_hook_allow_runs_the_command,
        ),
        trial(
            "agents::claude_code::pre_tool_use_hook_deny_tells_the_model_why",
            super::claude_code,
            pre_tool_use_hook_deny_tells_the_model_why,
        ),
        trial(
            "agents::claude_code::a_reply_to_a_finished_turn_continues_it",
            super::claude_code,
            a_reply_to_a_finished_turn_continues_it,
        ),
        trial(
            "agents::claude_code::a_message_reaches_the_model_after_the_next_tool",
            super::claude_code,
            a_message_reaches_the_model_after_the_next_tool,
        ),
    ]
}

/// How long one run of Claude Code may take, start to end.
const RUN_LIMIT: Duration = Duration::from_secs(90);

/// The command the fake model asks to run, and the file it writes.
const COMMAND: &str = "echo ok > proof.txt";

fn claude() -> PathBuf {
    installed("claude-code").expect("installed (checked by the trial's need)")
}

/// `claude` with the model at `model`, its configuration in the sandbox's home, and the
/// traffic that is not the model's (telemetry, updates, error reports) off.
pub(crate) fn claude_command(sandbox: &Sandbox, model: &FakeModel) -> tokio::process::Command {
    let mut c = sandbox.command(&claude());
    c.env("ANTHROPIC_BASE_URL", model.base_url())
        .env("ANTHROPIC_API_KEY", "sk-ant-imrelay-test")
        .env("CLAUDE_CONFIG_DIR", sandbox.home().join(".claude"))
        .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
        .env("DISABLE_AUTOUPDATER", "1")
        .env("DISABLE_TELEMETRY", "1")
        .env("DISABLE_ERROR_REPORTING", "1");
    c
}

/// Writes an MCP configuration naming `url` (imrelay's `/mcp`, through a tap) as the server
/// `imrelay`.
fn mcp_config(sandbox: &Sandbox, url: &str) -> PathBuf {
    let path = sandbox.dir.path().join("mcp.json");
    let config = json!({"mcpServers": {"imrelay": {"type": "http", "url": url}}});
    std::fs::write(&path, config.to_string()).expect("write mcp.json");
    path
}

/// Starts `claude -p` asking for the shell command, with every permission going to
/// imrelay's `permission_prompt` tool.
fn start_with_permission_prompt_tool(sandbox: &Sandbox, tap: &Tap, model: &FakeModel) -> Running {
    let config = mcp_config(sandbox, &tap.url("/mcp"));
    let mut c = claude_command(sandbox, model);
    c.arg("-p")
        .arg("Write the proof file.")
        .arg("--mcp-config")
        .arg(&config)
        .args(["--strict-mcp-config", "--allowedTools", "mcp__imrelay"])
        .args([
            "--permission-prompt-tool",
            "mcp__imrelay__permission_prompt",
        ])
        .args(["--output-format", "stream-json", "--verbose"]);
    sandbox.spawn(c)
}

/// Waits until the agent's call is pending in imrelay.
async fn pending(agent: &mut Running, app: &TestApp) -> Value {
    agent
        .until("the call is pending in imrelay", RUN_LIMIT, || async {
            let (_, list) = app.get("/v1/interactions?status=pending").await;
            list["interactions"].as_array()?.first().cloned()
        })
        .await
}

fn proof(sandbox: &Sandbox) -> Option<String> {
    std::fs::read_to_string(sandbox.project().join("proof.txt")).ok()
}

/// The final `result` line of `--output-format stream-json`.
fn result_line(stdout: &str) -> Option<Value> {
    stdout
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find(|v| v["type"] == "result")
}

async fn permission_prompt_tool_allow_runs_the_command() {
    let app = spawn_app().await;
    let tap = Tap::start(format!("http://{}", app.addr)).await;
    let model = FakeModel::start(Dialect::Anthropic, Step::Shell(COMMAND.into()), "Done.").await;
    let sandbox = Sandbox::new();
    let mut agent = start_with_permission_prompt_tool(&sandbox, &tap, &model);

    let asked = pending(&mut agent, &app).await;
    assert_eq!(asked["tool_name"], "Bash", "{asked}");
    assert_eq!(asked["input"]["command"], COMMAND, "{asked}");
    let (status, body) = app
        .respond(
            asked["id"].as_str().expect("id"),
            &json!({"decision": "allow", "by": "alice"}),
        )
        .await;
    assert_eq!(status, 200, "{body}");

    let out = agent.finish(RUN_LIMIT).await;
    // What Claude Code sent to the permission tool, and what it got back.
    let call = tap
        .exchanges()
        .into_iter()
        .find(|e| e.request_json()["params"]["name"] == "permission_prompt")
        .unwrap_or_else(|| panic!("no permission_prompt call\n{}", tap.describe()));
    let args = &call.request_json()["params"]["arguments"];
    assert_eq!(args["tool_name"], "Bash", "{args}");
    assert_eq!(args["input"]["command"], COMMAND, "{args}");
    assert!(args["tool_use_id"].is_string(), "{args}");
    capture("claude-code/permission_prompt_call.json", &call.to_json());
    let result = model
        .wait_for_tool_result(Duration::from_secs(1))
        .await
        .unwrap_or_else(|| {
            panic!(
                "no tool result reached the model\n{}\nrequests:\n{}",
                out.describe(),
                model.describe()
            )
        });
    assert!(
        !result.is_error,
        "the allowed command failed: {result:?}\n{}",
        out.describe()
    );
    assert_eq!(
        proof(&sandbox).as_deref(),
        Some("ok\n"),
        "the command did not run\n{}",
        out.describe()
    );
    assert!(out.succeeded(), "{}", out.describe());
    let end = result_line(&out.stdout).expect("a result line");
    assert_eq!(end["result"], "Done.", "{end}");
}

async fn permission_prompt_tool_deny_tells_the_model_why() {
    let app = spawn_app().await;
    let tap = Tap::start(format!("http://{}", app.addr)).await;
    let model = FakeModel::start(Dialect::Anthropic, Step::Shell(COMMAND.into()), "Done.").await;
    let sandbox = Sandbox::new();
    let mut agent = start_with_permission_prompt_tool(&sandbox, &tap, &model);

    let asked = pending(&mut agent, &app).await;
    let (status, body) = app
        .respond(
            asked["id"].as_str().expect("id"),
            &json!({"decision": "deny", "message": "Not on a Friday", "by": "alice"}),
        )
        .await;
    assert_eq!(status, 200, "{body}");

    let out = agent.finish(RUN_LIMIT).await;
    let result = model
        .wait_for_tool_result(Duration::from_secs(1))
        .await
        .unwrap_or_else(|| {
            panic!(
                "no tool result reached the model\n{}\nrequests:\n{}",
                out.describe(),
                model.describe()
            )
        });
    assert!(result.is_error, "{result:?}");
    assert!(
        result.text.contains("Not on a Friday"),
        "the reason did not reach the model: {result:?}\n{}",
        out.describe()
    );
    assert_eq!(proof(&sandbox), None, "a denied command ran");
    assert!(out.succeeded(), "{}", out.describe());
}

/// Starts `claude -p` asking for the shell command, with a `PreToolUse` HTTP hook for `Bash`
/// at imrelay's `/v1/hooks/claude-code` (and no other way to get permission).
fn start_with_hook(sandbox: &Sandbox, app: &TestApp, model: &FakeModel) -> Running {
    let settings = sandbox.dir.path().join("settings.json");
    let hook = json!({"type": "http", "url": app.url("/v1/hooks/claude-code"), "timeout": 60});
    let config = json!({"hooks": {"PreToolUse": [{"matcher": "Bash", "hooks": [hook]}]}});
    std::fs::write(&settings, config.to_string()).expect("write settings.json");
    let mut c = claude_command(sandbox, model);
    c.arg("-p")
        .arg("Write the proof file.")
        .arg("--settings")
        .arg(&settings)
        .args(["--output-format", "stream-json", "--verbose"]);
    sandbox.spawn(c)
}

async fn pre_tool_use_hook_allow_runs_the_command() {
    let app = spawn_app().await;
    let model = FakeModel::start(Dialect::Anthropic, Step::Shell(COMMAND.into()), "Done.").await;
    let sandbox = Sandbox::new();
    let mut agent = start_with_hook(&sandbox, &app, &model);

    let asked = pending(&mut agent, &app).await;
    assert_eq!(asked["tool_name"], "Bash", "{asked}");
    assert_eq!(asked["input"]["command"], COMMAND, "{asked}");
    let (status, body) = app
        .respond(
            asked["id"].as_str().expect("id"),
            &json!({"decision": "allow", "by": "alice"}),
        )
        .await;
    assert_eq!(status, 200, "{body}");

    let out = agent.finish(RUN_LIMIT).await;
    assert_eq!(
        proof(&sandbox).as_deref(),
        Some("ok\n"),
        "the command did not run\n{}",
        out.describe()
    );
    let result = model
        .wait_for_tool_result(Duration::from_secs(1))
        .await
        .expect("the tool result reached the model");
    assert!(!result.is_error, "{result:?}");
    assert!(out.succeeded(), "{}", out.describe());
}

async fn pre_tool_use_hook_deny_tells_the_model_why() {
    let app = spawn_app().await;
    let model = FakeModel::start(Dialect::Anthropic, Step::Shell(COMMAND.into()), "Done.").await;
    let sandbox = Sandbox::new();
    let mut agent = start_with_hook(&sandbox, &app, &model);

    let asked = pending(&mut agent, &app).await;
    let (status, body) = app
        .respond(
            asked["id"].as_str().expect("id"),
            &json!({"decision": "deny", "message": "Not on a Friday", "by": "alice"}),
        )
        .await;
    assert_eq!(status, 200, "{body}");

    let out = agent.finish(RUN_LIMIT).await;
    let result = model
        .wait_for_tool_result(Duration::from_secs(1))
        .await
        .unwrap_or_else(|| panic!("no tool result reached the model\n{}", out.describe()));
    assert!(result.is_error, "{result:?}");
    assert!(
        result.text.contains("Not on a Friday"),
        "the reason did not reach the model: {result:?}"
    );
    assert_eq!(proof(&sandbox), None, "a denied command ran");
    assert!(out.succeeded(), "{}", out.describe());
}

/// Whether any request the model received carries `text`.
fn model_saw(model: &FakeModel, text: &str) -> bool {
    model
        .requests()
        .iter()
        .any(|r| r.body.to_string().contains(text))
}

/// Claude Code's `Stop` hook at imrelay with `on_finish = "ask"`: the end of the turn is asked
/// on the session's route with what Claude said; a reply continues the turn (the model is
/// called again and reads the person's words); "Let it stop" ends it.
async fn a_reply_to_a_finished_turn_continues_it() {
    let app = spawn_with(|s| {
        s.hooks.claude_code.on_finish = imrelay::agents::steer::OnFinish::Ask;
        s.hooks.claude_code.finish_wait_secs = 60;
    })
    .await;
    // No tool the model asks for is offered: it answers in words at once.
    let step = Step::Tool {
        name: "no_such_tool".into(),
        input: json!({}),
    };
    let model = FakeModel::start(Dialect::Anthropic, step, "Done.").await;
    let sandbox = Sandbox::new();
    let settings = sandbox.dir.path().join("settings.json");
    let hook = json!({"type": "http", "url": app.url("/v1/hooks/claude-code"), "timeout": 90});
    let entry = json!([{"hooks": [hook]}]);
    let config = json!({"hooks": {"SessionStart": entry, "UserPromptSubmit": entry,
        "Stop": entry, "SessionEnd": entry}});
    std::fs::write(&settings, config.to_string()).expect("write settings.json");
    let mut c = claude_command(&sandbox, &model);
    c.arg("-p")
        .arg("Say something.")
        .arg("--settings")
        .arg(&settings)
        .args(["--output-format", "stream-json", "--verbose"]);
    let mut agent = sandbox.spawn(c);

    let asked = pending(&mut agent, &app).await;
    assert_eq!(asked["kind"], "question", "{asked}");
    assert_eq!(asked["agent"], "claude-code", "{asked}");
    let question = asked["input"]["questions"][0]["question"]
        .as_str()
        .unwrap_or("");
    assert!(
        question.contains("OK."),
        "Claude's last message is not shown: {question}"
    );
    let (_, sessions) = app.get("/v1/sessions").await;
    let session = &sessions["sessions"][0];
    assert_eq!(session["state"], "waiting", "{sessions}");
    assert_eq!(session["last_message"], "OK.", "{sessions}");
    let before = model.requests().len();
    let (status, body) = app
        .respond(
            asked["id"].as_str().expect("id"),
            &json!({"answers": {"0": "Also list the files, please"}, "by": "alice"}),
        )
        .await;
    assert_eq!(status, 200, "{body}");

    // The turn goes on: the model is called again with the person's words, and the next end
    // of the turn is asked again.
    let again = agent
        .until("the next end of the turn is asked", RUN_LIMIT, || async {
            let (_, list) = app.get("/v1/interactions?status=pending").await;
            list["interactions"].as_array()?.first().cloned()
        })
        .await;
    assert!(
        model.requests().len() > before,
        "the model was not called again\n{}",
        model.describe()
    );
    assert!(
        model_saw(&model, "Also list the files, please"),
        "the reply did not reach the model\n{}",
        model.describe()
    );
    app.respond(
        again["id"].as_str().expect("id"),
        &json!({"answers": {"0": "Let it stop"}, "by": "alice"}),
    )
    .await;
    let out = agent.finish(RUN_LIMIT).await;
    assert!(out.succeeded(), "{}", out.describe());
    let (_, sessions) = app.get("/v1/sessions").await;
    let state = &sessions["sessions"][0]["state"];
    assert!(state == "finished" || state == "gone", "{sessions}");
}

/// A person's message to a working session, queued while its `Bash` call waits for approval,
/// reaches the model with the call's result through the `PostToolUse` hook.
async fn a_message_reaches_the_model_after_the_next_tool() {
    let app = spawn_app().await;
    let model = FakeModel::start(Dialect::Anthropic, Step::Shell(COMMAND.into()), "Done.").await;
    let sandbox = Sandbox::new();
    let settings = sandbox.dir.path().join("settings.json");
    let hook = json!({"type": "http", "url": app.url("/v1/hooks/claude-code"), "timeout": 60});
    let config = json!({"hooks": {
        "PreToolUse": [{"matcher": "Bash", "hooks": [hook]}],
        "PostToolUse": [{"matcher": "*", "hooks": [hook]}],
    }});
    std::fs::write(&settings, config.to_string()).expect("write settings.json");
    let mut c = claude_command(&sandbox, &model);
    c.arg("-p")
        .arg("Write the proof file.")
        .arg("--settings")
        .arg(&settings)
        .args(["--output-format", "stream-json", "--verbose"]);
    let mut agent = sandbox.spawn(c);

    let asked = pending(&mut agent, &app).await;
    let session = asked["session"].as_str().expect("a session id");
    let (status, body) = app
        .post(
            &format!("/v1/sessions/claude-code/{session}/messages"),
            &json!({"text": "Use the staging database from now on", "by": "alice"}),
        )
        .await;
    assert_eq!(status, 202, "{body}");
    app.respond(
        asked["id"].as_str().expect("id"),
        &json!({"decision": "allow", "by": "alice"}),
    )
    .await;
    let out = agent.finish(RUN_LIMIT).await;
    assert!(out.succeeded(), "{}", out.describe());
    assert!(
        model_saw(&model, "Use the staging database from now on"),
        "the message did not reach the model\n{}\n{}",
        out.describe(),
        model.describe()
    );
    let (_, s) = app
        .get(&format!("/v1/sessions/claude-code/{session}"))
        .await;
    assert_eq!(s["messages"][0]["delivered_with"], "tool_used", "{s}");
}
