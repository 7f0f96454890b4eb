//! Codex's hooks through `imrelay hook codex`, the real command, with the hook inputs captured
//! from the real Codex (`tests/fixtures/codex`): what it prints for each answer, what it
//! prints when imrelay cannot decide, and that killing it withdraws the interaction.

use std::process::Stdio;
use std::time::Duration;

use imrelay::config::OnTimeout;
use reqwest::StatusCode;
use serde_json::{Value, json};
use tokio::io::AsyncWriteExt;

use crate::support::*;

/// `imrelay hook codex` started on `input`, talking to `url`, with `--timeout timeout`.
fn hook_command(url: &str, input: &Value, timeout: u64) -> tokio::process::Child {
    hook_command_with(url, input, timeout, None)
}

/// [`hook_command`], with `token` as `IMRELAY_AGENT_TOKEN`.
fn hook_command_with(
    url: &str,
    input: &Value,
    timeout: u64,
    token: Option<&str>,
) -> tokio::process::Child {
    let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_imrelay"));
    command.env_remove("IMRELAY_AGENT_TOKEN");
    if let Some(t) = token {
        command.env("IMRELAY_AGENT_TOKEN", t);
    }
    let mut child = command
        .args([
            "hook",
            "codex",
            "--url",
            url,
            "--timeout",
            &timeout.to_string(),
        ])
        .env_remove("IMRELAY_URL")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("imrelay runs");
    let mut stdin = child.stdin.take().expect("stdin");
    let text = serde_json::to_vec_pretty(input).expect("JSON");
    tokio::spawn(async move {
        stdin.write_all(&text).await.expect("write the hook input");
        // Dropped: closed, as Codex closes it.
    });
    child
}

/// What the command printed, and its exit status.
async fn finished(child: tokio::process::Child) -> (String, String, i32) {
    let out = tokio::time::timeout(Duration::from_secs(30), child.wait_with_output())
        .await
        .expect("the hook finishes")
        .expect("the hook's output");
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
        out.status.code().unwrap_or(-1),
    )
}

/// A printed answer, as JSON.
fn printed(stdout: &str) -> Value {
    serde_json::from_str(stdout.trim()).unwrap_or_else(|e| panic!("{e}: {stdout:?}"))
}

/// The answers Codex accepted in the capture, by event and behaviour.
fn accepted(n: usize) -> Value {
    fixture("codex/hook_outputs.json")["cases"][n]["stdout"].clone()
}

#[tokio::test]
async fn permission_request_allowed_then_asked_again_and_denied() {
    let app = spawn_app().await;
    let input = fixture("codex/permission_request.json");
    let hook = hook_command(&app.url(""), &input, 600);
    let i = pending_one(&app).await;
    let id = i["id"].as_str().unwrap().to_string();
    assert!(id.starts_with("cx-"), "{id}");
    // Codex as the agent, with its session and working directory; the shell command as Bash.
    assert_eq!(i["agent"], "codex");
    assert_eq!(i["session"], input["session_id"]);
    assert_eq!(i["cwd"], input["cwd"]);
    assert_eq!(i["tool_name"], "Bash");
    assert_eq!(i["input"], input["tool_input"]);
    assert_eq!(i["input_fixed"], true);
    // The deadline is below the hook's timeout (600 s, less 5) and the endpoint's (590 s).
    assert!(i["timeout_secs"].as_u64().unwrap() <= 590, "{i}");
    let (status, _) = app
        .respond(&id, &json!({"decision": "allow", "by": "alice"}))
        .await;
    assert_eq!(status, StatusCode::OK);
    let (stdout, stderr, code) = finished(hook).await;
    assert_eq!(code, 0, "{stderr}");
    // Exactly what the real Codex accepted as an allow: `behavior` and nothing else.
    assert_eq!(printed(&stdout), accepted(0));

    // The same command later in the turn asks again, and a deny carries its message.
    let hook = hook_command(&app.url(""), &input, 600);
    let j = eventually("a second interaction", || async {
        let (_, list) = app.get("/v1/interactions?status=pending").await;
        list["interactions"].as_array()?.first().cloned()
    })
    .await;
    assert_eq!(j["id"], format!("{id}.2"));
    app.respond(
        j["id"].as_str().unwrap(),
        &json!({"decision": "deny", "message": "Not on a Friday"}),
    )
    .await;
    let (stdout, stderr, code) = finished(hook).await;
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(printed(&stdout), accepted(1));
}

#[tokio::test]
async fn edit_then_approve_is_refused_with_a_clear_message_and_the_hook_still_waits() {
    let app = spawn_app().await;
    let hook = hook_command(&app.url(""), &fixture("codex/permission_request.json"), 600);
    let id = pending_one(&app).await["id"].as_str().unwrap().to_string();
    let (status, body) = app
        .respond(
            &id,
            &json!({"decision": "allow", "updated_input": {"command": "echo edited > proof.txt"}}),
        )
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert_eq!(body["error"]["field"], "updated_input", "{body}");
    assert_eq!(
        body["error"]["message"],
        "updated_input: codex cannot run an edited input: approve it as it is, or deny it"
    );
    let (_, still) = app.get(&format!("/v1/interactions/{id}")).await;
    assert_eq!(still["status"], "pending");
    app.respond(&id, &json!({"decision": "allow"})).await;
    let (stdout, _, code) = finished(hook).await;
    assert_eq!(code, 0);
    assert_eq!(printed(&stdout), accepted(0));
}

#[tokio::test]
async fn killing_the_hook_withdraws_the_interaction_everywhere() {
    use nix::sys::signal::{Signal, kill};
    use nix::unistd::Pid;

    let app = spawn_app().await;
    for (n, signal) in [Signal::SIGTERM, Signal::SIGKILL].into_iter().enumerate() {
        let mut input = fixture("codex/permission_request.json");
        input["turn_id"] = json!(format!("turn-{n}"));
        let mut hook = hook_command(&app.url(""), &input, 600);
        let id = pending_one(&app).await["id"].as_str().unwrap().to_string();
        // What Codex does when the hook's timeout passes, or the person presses Esc.
        let pid = Pid::from_raw(hook.id().expect("running") as i32);
        kill(pid, signal).expect("signal the hook");
        let _ = hook.wait().await;
        let withdrawn = eventually_within(
            "the interaction is withdrawn",
            Duration::from_secs(5),
            || async {
                let (_, i) = app.get(&format!("/v1/interactions/{id}")).await;
                (i["status"] == "resolved").then_some(i)
            },
        )
        .await;
        let r = &withdrawn["resolution"];
        assert_eq!(r["outcome"], "cancelled", "{signal}: {withdrawn}");
        assert_eq!(r["by"], "codex");
        assert_eq!(
            r["result"]["message"],
            "Codex stopped waiting for this answer (its hook timed out, or the turn was interrupted)"
        );
        // A late answer is refused, not accepted and lost.
        let (status, _) = app.respond(&id, &json!({"decision": "allow"})).await;
        assert_eq!(status, StatusCode::CONFLICT, "{signal}");
    }
}

#[tokio::test]
async fn pre_tool_use_goes_on_when_allowed_and_is_blocked_when_denied() {
    let app = spawn_app().await;
    let input = fixture("codex/pre_tool_use.exec.json");
    let hook = hook_command(&app.url(""), &input, 60);
    let i = pending_one(&app).await;
    assert_eq!(i["tool_name"], "Bash");
    assert_eq!(i["input"], json!({"command": "echo ok > proof.txt"}));
    // The deadline is 5 seconds below the hook's timeout.
    assert_eq!(i["timeout_secs"], 55);
    app.respond(i["id"].as_str().unwrap(), &json!({"decision": "allow"}))
        .await;
    let (stdout, _, code) = finished(hook).await;
    assert_eq!(code, 0);
    // No decision: the call goes on (Codex refuses `permissionDecision: "allow"` alone).
    assert_eq!(printed(&stdout), json!({}));

    let mut again = input.clone();
    again["tool_use_id"] = json!("call_imrelay_14");
    let hook = hook_command(&app.url(""), &again, 60);
    let j = pending_one(&app).await;
    app.respond(
        j["id"].as_str().unwrap(),
        &json!({"decision": "deny", "message": "Not on a Friday (pre)"}),
    )
    .await;
    let (stdout, _, code) = finished(hook).await;
    assert_eq!(code, 0);
    assert_eq!(
        printed(&stdout),
        fixture("codex/hook_outputs.json")["cases"][9]["stdout"]
    );
}

#[tokio::test]
async fn when_imrelay_cannot_decide_codex_asks_itself_and_exec_is_denied() {
    // Nothing listens there.
    let url = format!("http://127.0.0.1:{}", free_port());
    let hook = hook_command(&url, &fixture("codex/permission_request.json"), 600);
    let (stdout, stderr, code) = finished(hook).await;
    // Nothing printed, not exit status 2 (a deny): Codex shows its own prompt.
    assert_eq!(stdout, "");
    assert_eq!(code, 1);
    assert!(stderr.contains("cannot reach imrelay"), "{stderr}");

    let hook = hook_command(&url, &fixture("codex/pre_tool_use.exec.json"), 600);
    let (stdout, _, code) = finished(hook).await;
    assert_eq!(code, 0);
    let out = printed(&stdout);
    assert_eq!(out["hookSpecificOutput"]["permissionDecision"], "deny");
    assert!(
        out["hookSpecificOutput"]["permissionDecisionReason"]
            .as_str()
            .unwrap()
            .starts_with("imrelay could not ask anyone: cannot reach imrelay"),
        "{out}"
    );

    // A refused token is a failure too.
    let app = spawn_with(|s| {
        s.auth.agent_tokens = vec![imrelay::config::Secret::new("agent-token-0123456789")];
    })
    .await;
    let hook = hook_command(&app.url(""), &fixture("codex/permission_request.json"), 600);
    let (stdout, stderr, code) = finished(hook).await;
    assert_eq!((stdout.as_str(), code), ("", 1), "{stderr}");
    assert!(stderr.contains("401"), "{stderr}");
    // The token in Codex's environment is the one used.
    let hook = hook_command_with(
        &app.url(""),
        &fixture("codex/permission_request.json"),
        600,
        Some("agent-token-0123456789"),
    );
    let i = pending_one(&app).await;
    app.respond(i["id"].as_str().unwrap(), &json!({"decision": "allow"}))
        .await;
    let (stdout, stderr, code) = finished(hook).await;
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(printed(&stdout), accepted(0));
}

#[tokio::test]
async fn nobody_answering_denies_or_hands_back_to_codex() {
    for (on_timeout, expected) in [(OnTimeout::Deny, "deny"), (OnTimeout::Ask, "ask")] {
        let app = spawn_with(|s| s.hooks.codex.on_timeout = on_timeout).await;
        // --timeout 6: a deadline of one second.
        let hook = hook_command(&app.url(""), &fixture("codex/permission_request.json"), 6);
        let (stdout, stderr, code) = finished(hook).await;
        assert_eq!(code, 0, "{stderr}");
        let out = printed(&stdout);
        match expected {
            "deny" => {
                assert_eq!(out["hookSpecificOutput"]["decision"]["behavior"], "deny");
                let message = out["hookSpecificOutput"]["decision"]["message"]
                    .as_str()
                    .unwrap();
                assert!(message.starts_with("No response within 1 second"), "{out}");
            }
            _ => assert_eq!(out, json!({})),
        }
        // A PreToolUse hook denies either way: Codex would run the command.
        let hook = hook_command(&app.url(""), &fixture("codex/pre_tool_use.exec.json"), 6);
        let (stdout, _, _) = finished(hook).await;
        assert_eq!(
            printed(&stdout)["hookSpecificOutput"]["permissionDecision"],
            "deny"
        );
    }
}

#[tokio::test]
async fn a_patch_is_asked_about_as_a_patch() {
    let app = spawn_app().await;
    let patch = "*** Begin Patch\n*** Add File: hello.txt\n+Hello\n*** End Patch\n";
    let mut input = fixture("codex/pre_tool_use.exec.json");
    input["tool_name"] = json!("apply_patch");
    input["tool_input"] = json!({"command": patch});
    let hook = hook_command(&app.url(""), &input, 60);
    let i = pending_one(&app).await;
    assert_eq!(i["tool_name"], "Patch");
    assert_eq!(i["input"], json!({"patch": patch}));
    let (_, display) = app
        .get(&format!(
            "/v1/interactions/{}/display",
            i["id"].as_str().unwrap()
        ))
        .await;
    assert_eq!(display["summary"], "Patch hello.txt", "{display}");
    app.respond(i["id"].as_str().unwrap(), &json!({"decision": "deny"}))
        .await;
    let (stdout, _, _) = finished(hook).await;
    assert_eq!(
        printed(&stdout)["hookSpecificOutput"]["permissionDecision"],
        "deny"
    );
}

#[tokio::test]
async fn a_killed_hook_is_withdrawn_on_telegram_too_and_codex_is_shown_as_the_agent() {
    use crate::telegram::{PRIVATE, edited, prompt, start};
    use imrelay::channels::telegram::Mode;
    use nix::sys::signal::{Signal, kill};
    use nix::unistd::Pid;

    let (app, tg) = start(Mode::Webhook).await;
    let mut hook = hook_command(&app.url(""), &fixture("codex/permission_request.json"), 600);
    let posted = prompt(&tg, PRIVATE, "echo ok &gt; proof.txt").await;
    // Codex, its working directory, and the command as a command.
    for shown in ["codex", "/tmp/cx/a1/project", "May I write the proof file?"] {
        assert!(posted.text.contains(shown), "{shown}: {}", posted.text);
    }
    let pid = Pid::from_raw(hook.id().expect("running") as i32);
    kill(pid, Signal::SIGTERM).expect("signal the hook");
    let _ = hook.wait().await;
    let edit = edited(&tg, PRIVATE, posted.message_id, "Codex stopped waiting").await;
    assert_eq!(edit["reply_markup"], json!({"inline_keyboard": []}));
}
