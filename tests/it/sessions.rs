//! Agent sessions and steering: sessions learnt from Claude Code's hook events (posted as
//! Claude Code posts them) and Codex's (through `imrelay hook codex`, the real command),
//! listed by `GET /v1/sessions`; a finished turn asked on the session's route and continued
//! by a reply; a person's message handed to a working session at its next tool; and only the
//! route's approvers may steer.

use std::process::Stdio;
use std::time::Duration;

use imrelay::agents::steer::OnFinish;
use imrelay::config::teams::{PersonSettings, RouteSettings};
use imrelay::config::{OperatorToken, Secret, Settings};
use reqwest::StatusCode;
use serde_json::{Value, json};
use tokio::io::AsyncWriteExt;

use crate::support::*;

const SESSION: &str = "5f8a2c1e-3b7d-4e9f-a1c2-6d8e0f4b2a91";

/// A Claude Code hook input of `event` in the session, with `more` fields.
fn claude(event: &str, more: Value) -> Value {
    let mut body = json!({
        "session_id": SESSION,
        "transcript_path": "/home/dev/.claude/projects/shop/t.jsonl",
        "cwd": "/srv/shop",
        "permission_mode": "default",
        "hook_event_name": event,
    });
    for (k, v) in more.as_object().cloned().unwrap_or_default() {
        body[k] = v;
    }
    body
}

/// Posts a Claude Code hook input with `token` (an agent token), as Claude Code does.
fn hook_with(app: &TestApp, body: Value, token: Option<&str>) -> tokio::task::JoinHandle<Value> {
    let mut req = app
        .client
        .post(app.url("/v1/hooks/claude-code"))
        .json(&body);
    if let Some(t) = token {
        req = req.bearer_auth(t);
    }
    tokio::spawn(async move {
        let (status, out) = split(req.send().await.expect("hook call")).await;
        assert_eq!(status, StatusCode::OK, "{out}");
        out
    })
}

async fn session(app: &TestApp, agent: &str) -> Value {
    let (status, s) = app.get(&format!("/v1/sessions/{agent}/{SESSION}")).await;
    assert_eq!(status, StatusCode::OK, "{s}");
    s
}

#[tokio::test]
async fn hook_events_make_a_session_whose_state_a_listing_shows() {
    let app = spawn_app().await;
    let started = hook_with(
        &app,
        claude("SessionStart", json!({"source": "startup"})),
        None,
    );
    assert_eq!(started.await.unwrap(), json!({}));
    assert_eq!(session(&app, "claude-code").await["state"], "finished");
    let prompt = claude("UserPromptSubmit", json!({"prompt": "clean the build"}));
    assert_eq!(hook_with(&app, prompt, None).await.unwrap(), json!({}));
    assert_eq!(session(&app, "claude-code").await["state"], "working");
    // An approval waits: the session waits on a person, and names it.
    let call = hook_with(&app, fixture("claude-code/pre_tool_use.json"), None);
    let i = pending_one(&app).await;
    let s = session(&app, "claude-code").await;
    assert_eq!(s["state"], "waiting", "{s}");
    assert_eq!(s["pending"][0]["id"], i["id"], "{s}");
    assert_eq!(s["cwd"], "/home/dev/shop", "{s}");
    let id = i["id"].as_str().unwrap();
    app.respond(id, &json!({"decision": "allow", "by": "alice"}))
        .await;
    call.await.unwrap();
    let used = claude(
        "PostToolUse",
        json!({"tool_name": "Bash", "tool_input": {"command": "rm -rf build"},
        "tool_response": {"stdout": ""}, "tool_use_id": "toolu_1"}),
    );
    assert_eq!(hook_with(&app, used, None).await.unwrap(), json!({}));
    assert_eq!(session(&app, "claude-code").await["state"], "working");
    // Off by default: the turn ends with no question, and the last message is kept.
    let stop = claude(
        "Stop",
        json!({"stop_hook_active": false,
        "last_assistant_message": "  Removed the build directory.\n"}),
    );
    assert_eq!(hook_with(&app, stop, None).await.unwrap(), json!({}));
    let s = session(&app, "claude-code").await;
    assert_eq!(s["state"], "finished", "{s}");
    assert_eq!(s["last_message"], "Removed the build directory.", "{s}");
    let (_, list) = app.get("/v1/interactions?status=pending").await;
    assert_eq!(list["interactions"], json!([]), "{list}");
    // Listed, and filtered by route.
    let (_, all) = app.get("/v1/sessions").await;
    assert_eq!(all["sessions"].as_array().unwrap().len(), 1, "{all}");
    let (_, default) = app.get("/v1/sessions?route=default").await;
    assert_eq!(default["sessions"][0]["id"], SESSION, "{default}");
    let (_, other) = app.get("/v1/sessions?route=elsewhere").await;
    assert_eq!(other["sessions"], json!([]), "{other}");
    let end = claude("SessionEnd", json!({"reason": "exit"}));
    hook_with(&app, end, None).await.unwrap();
    assert_eq!(session(&app, "claude-code").await["state"], "gone");
    // Bad listings change nothing and say why.
    let (status, err) = app.get("/v1/sessions?limit=0").await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{err}");
    assert_eq!(err["error"]["field"], "limit", "{err}");
    app.stop().await;
}

#[tokio::test]
async fn a_reply_to_a_finished_turn_continues_it_and_let_it_stop_ends_it() {
    let app = spawn_with(|s| {
        s.hooks.claude_code.on_finish = OnFinish::Ask;
        s.hooks.claude_code.finish_wait_secs = 60;
    })
    .await;
    let stop = claude(
        "Stop",
        json!({"stop_hook_active": false,
        "last_assistant_message": "The build directory is gone."}),
    );
    let held = hook_with(&app, stop.clone(), None);
    let q = pending_one(&app).await;
    assert_eq!(q["kind"], "question", "{q}");
    assert_eq!(q["title"], "Claude Code finished its turn", "{q}");
    let text = q["input"]["questions"][0]["question"].as_str().unwrap();
    assert!(text.contains("The build directory is gone."), "{text}");
    let (status, out) = app
        .respond(
            q["id"].as_str().unwrap(),
            &json!({"answers": {"0": "now run the tests"}, "by": "alice"}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{out}");
    let out = held.await.unwrap();
    assert_eq!(out["decision"], "block", "{out}");
    let reason = out["reason"].as_str().unwrap();
    assert!(reason.contains("now run the tests"), "{reason}");
    assert!(reason.starts_with("alice "), "{reason}");
    // The next end of the turn asks again; "Let it stop" lets it.
    let mut again = stop;
    again["stop_hook_active"] = json!(true);
    let held = hook_with(&app, again, None);
    let q = pending_one(&app).await;
    app.respond(
        q["id"].as_str().unwrap(),
        &json!({"answers": {"0": "Let it stop"}}),
    )
    .await;
    assert_eq!(held.await.unwrap(), json!({}));
    app.stop().await;
}

#[tokio::test]
async fn a_message_reaches_a_working_session_at_its_next_tool_and_is_audited() {
    let app = spawn_app().await;
    let prompt = claude("UserPromptSubmit", json!({"prompt": "drop the table"}));
    hook_with(&app, prompt, None).await.unwrap();
    let path = format!("/v1/sessions/claude-code/{SESSION}/messages");
    let (status, s) = app
        .post(
            &path,
            &json!({"text": "truncate it instead", "by": "alice"}),
        )
        .await;
    assert_eq!(status, StatusCode::ACCEPTED, "{s}");
    assert_eq!(s["messages"][0]["text"], "truncate it instead", "{s}");
    assert!(s["messages"][0].get("delivered_at").is_none(), "{s}");
    // An approval does not carry it; the tool's end does.
    let used = claude(
        "PostToolUse",
        json!({"tool_name": "Bash", "tool_input": {"command": "ls"},
        "tool_response": {}, "tool_use_id": "toolu_2"}),
    );
    let out = hook_with(&app, used.clone(), None).await.unwrap();
    let context = out["hookSpecificOutput"]["additionalContext"]
        .as_str()
        .unwrap();
    assert!(context.contains("truncate it instead"), "{out}");
    assert!(context.contains("alice"), "{out}");
    assert_eq!(out["hookSpecificOutput"]["hookEventName"], "PostToolUse");
    // Once.
    assert_eq!(hook_with(&app, used, None).await.unwrap(), json!({}));
    let s = session(&app, "claude-code").await;
    assert_eq!(s["messages"][0]["delivered_with"], "tool_used", "{s}");
    let (_, audit) = app.get("/v1/audit?limit=100").await;
    let steered: Vec<&Value> = audit["entries"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["action"] == "steered")
        .collect();
    let outcomes: Vec<&str> = steered
        .iter()
        .filter_map(|e| e["outcome"].as_str())
        .collect();
    assert_eq!(outcomes, ["queued", "delivered"], "{audit}");
    let metrics = app.metrics().await;
    for outcome in ["queued", "delivered"] {
        let series =
            format!("imrelay_session_messages_total{{outcome=\"{outcome}\",via=\"api\"}} 1");
        assert!(metrics.contains(&series), "{series} not in\n{metrics}");
    }
    // Nothing reaches a session nobody has seen, or with no words.
    let (status, err) = app
        .post(
            "/v1/sessions/claude-code/nope/messages",
            &json!({"text": "hi"}),
        )
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{err}");
    assert_eq!(err["error"]["code"], "session_not_found", "{err}");
    let (status, err) = app.post(&path, &json!({"text": "  "})).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{err}");
    assert_eq!(err["error"]["field"], "text", "{err}");
    app.stop().await;
}

const AGENT: &str = "agent-token-0123456789";
const ALICE: &str = "alice-token-0123456789";
const BOB: &str = "bob-token-0123456789";

/// Alice approves the shop's route; bob approves nothing.
fn teams(s: &mut Settings) {
    s.auth.agent_tokens = vec![Secret::new(AGENT)];
    s.auth.operator_tokens = vec![
        OperatorToken::labelled(ALICE, "alice-laptop"),
        OperatorToken::labelled(BOB, "bob-phone"),
    ];
    s.people = vec![
        PersonSettings {
            name: "alice".into(),
            operator: vec!["alice-laptop".into()],
            ..Default::default()
        },
        PersonSettings {
            name: "bob".into(),
            operator: vec!["bob-phone".into()],
            ..Default::default()
        },
    ];
    s.routes = vec![RouteSettings {
        name: "shop".into(),
        cwd: vec!["/srv/shop/**".into(), "/srv/shop".into()],
        approvers: vec!["alice".into()],
        ..Default::default()
    }];
}

#[tokio::test]
async fn only_the_routes_approvers_may_message_its_sessions() {
    let mut app = spawn_with(teams).await;
    let prompt = claude("UserPromptSubmit", json!({"prompt": "go"}));
    hook_with(&app, prompt, Some(AGENT)).await.unwrap();
    app.token = Some(BOB.into());
    let s = session(&app, "claude-code").await;
    assert_eq!(s["route"], "shop", "{s}");
    let path = format!("/v1/sessions/claude-code/{SESSION}/messages");
    let (status, err) = app.post(&path, &json!({"text": "stop"})).await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{err}");
    assert_eq!(err["error"]["code"], "not_an_approver", "{err}");
    assert!(session(&app, "claude-code").await["messages"] == json!([]));
    app.token = Some(ALICE.into());
    let (status, s) = app
        .post(&path, &json!({"text": "stop", "by": "mallory"}))
        .await;
    assert_eq!(status, StatusCode::ACCEPTED, "{s}");
    // The token says who it is.
    assert_eq!(s["messages"][0]["by"], "alice", "{s}");
    let (_, audit) = app.get("/v1/audit?limit=100").await;
    assert!(
        audit["entries"]
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e["action"] == "refused"
                && e["actor"].as_str().unwrap_or("").starts_with("bob")),
        "{audit}"
    );
    app.stop().await;
}

/// `imrelay hook codex` run on `input` against `app`; what it printed.
async fn codex_hook(app: &TestApp, input: Value) -> tokio::task::JoinHandle<Value> {
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_imrelay"))
        .args(["hook", "codex", "--url", &app.url(""), "--timeout", "120"])
        .env_remove("IMRELAY_AGENT_TOKEN")
        .env_remove("IMRELAY_URL")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("imrelay runs");
    let mut stdin = child.stdin.take().expect("stdin");
    stdin
        .write_all(input.to_string().as_bytes())
        .await
        .expect("write the hook input");
    drop(stdin);
    tokio::spawn(async move {
        let out = tokio::time::timeout(Duration::from_secs(60), child.wait_with_output())
            .await
            .expect("the hook ends")
            .expect("output");
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "{text} {}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_str(text.trim()).expect("JSON on standard output")
    })
}

#[tokio::test]
async fn codex_sessions_are_learnt_and_a_reply_continues_its_turn() {
    let app = spawn_with(|s| {
        s.hooks.codex.on_finish = OnFinish::Ask;
        s.hooks.codex.finish_wait_secs = 60;
    })
    .await;
    let base = json!({"session_id": SESSION, "turn_id": "t1", "cwd": "/w",
        "transcript_path": null, "model": "gpt-5", "permission_mode": "default"});
    let with = |event: &str, more: Value| {
        let mut b = base.clone();
        b["hook_event_name"] = json!(event);
        for (k, v) in more.as_object().cloned().unwrap_or_default() {
            b[k] = v;
        }
        b
    };
    let started = codex_hook(&app, with("SessionStart", json!({"source": "startup"}))).await;
    assert_eq!(started.await.unwrap(), json!({}));
    assert_eq!(session(&app, "codex").await["state"], "finished");
    let stop = with(
        "Stop",
        json!({"stop_hook_active": false, "last_assistant_message": "Done."}),
    );
    let held = codex_hook(&app, stop).await;
    let q = pending_one(&app).await;
    assert_eq!(q["agent"], "codex", "{q}");
    app.respond(
        q["id"].as_str().unwrap(),
        &json!({"answers": {"0": "Continue"}}),
    )
    .await;
    let out = held.await.unwrap();
    assert_eq!(out["decision"], "block", "{out}");
    assert!(
        out["reason"].as_str().unwrap().contains("continue"),
        "{out}"
    );
    app.stop().await;
}

#[tokio::test]
async fn messages_are_bounded_per_session_and_per_person() {
    let app = spawn_app().await;
    for id in ["s-a", "s-b"] {
        let mut prompt = claude("UserPromptSubmit", json!({"prompt": "go"}));
        prompt["session_id"] = json!(id);
        hook_with(&app, prompt, None).await.unwrap();
    }
    let send = |id: &'static str, n: usize| {
        let path = format!("/v1/sessions/claude-code/{id}/messages");
        let app = &app;
        async move {
            app.post(&path, &json!({"text": format!("step {n}"), "by": "alice"}))
                .await
        }
    };
    // Per session: 8 wait at most.
    for n in 0..8 {
        let (status, out) = send("s-a", n).await;
        assert_eq!(status, StatusCode::ACCEPTED, "{out}");
    }
    let (status, err) = send("s-a", 8).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{err}");
    assert!(
        err["error"]["message"]
            .as_str()
            .unwrap()
            .contains("8 messages already wait"),
        "{err}"
    );
    // Per person: 10 at once (the refused one counted), then one every few seconds.
    let (status, out) = send("s-b", 0).await;
    assert_eq!(status, StatusCode::ACCEPTED, "{out}");
    let (status, err) = send("s-b", 1).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{err}");
    assert!(
        err["error"]["message"]
            .as_str()
            .unwrap()
            .contains("wait a few seconds"),
        "{err}"
    );
    let (_, s) = app.get("/v1/sessions/claude-code/s-b").await;
    assert_eq!(s["messages"].as_array().unwrap().len(), 1, "{s}");
    app.stop().await;
}

/// `imrelay sessions ARGS` against `app`, in an empty environment: its exit status and output.
async fn cli(app: &TestApp, args: &[&str]) -> (Option<i32>, String, String) {
    let dir = tempfile::tempdir().expect("a directory");
    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_imrelay"))
        .current_dir(dir.path())
        .env_clear()
        .arg("sessions")
        .args(["--url", &app.url("")])
        .args(args)
        .output()
        .await
        .expect("imrelay runs");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[tokio::test]
async fn imrelay_sessions_lists_them_and_sends_a_message() {
    let app = spawn_app().await;
    let (code, out, err) = cli(&app, &[]).await;
    assert_eq!(code, Some(0), "{err}");
    assert!(out.contains("No sessions seen yet"), "{out}");
    let prompt = claude("UserPromptSubmit", json!({"prompt": "go"}));
    hook_with(&app, prompt, None).await.unwrap();
    let stop = claude(
        "Stop",
        json!({"last_assistant_message": "Done \u{1b}[31mred"}),
    );
    hook_with(&app, stop, None).await.unwrap();
    let (code, out, err) = cli(&app, &[]).await;
    assert_eq!(code, Some(0), "{err}");
    let line = out
        .lines()
        .find(|l| l.contains(SESSION))
        .expect("the session's line");
    assert!(line.starts_with("claude-code"), "{out}");
    assert!(line.contains("finished"), "{out}");
    assert!(line.contains("/srv/shop"), "{out}");
    // What the agent said, with no control sequence reaching the terminal.
    assert!(out.contains("said: Done"), "{out}");
    assert!(!out.contains('\u{1b}'), "{out:?}");
    let (code, out, err) = cli(
        &app,
        &[
            "send",
            "claude-code",
            SESSION,
            "run the tests",
            "--by",
            "bob",
        ],
    )
    .await;
    assert_eq!(code, Some(0), "{err}");
    assert!(out.starts_with("Queued"), "{out}");
    let (code, out, _) = cli(&app, &["--json"]).await;
    assert_eq!(code, Some(0));
    let list: Value = serde_json::from_str(&out).expect("JSON");
    assert_eq!(list[0]["messages"][0]["by"], "bob", "{list}");
    assert_eq!(list[0]["messages"][0]["via"], "terminal", "{list}");
    // A session nobody has seen: the server's words, a failing status.
    let (code, _, err) = cli(&app, &["send", "codex", "nope", "hi"]).await;
    assert_eq!(code, Some(4), "{err}");
    assert!(err.contains("no codex session nope is known"), "{err}");
    app.stop().await;
}

#[tokio::test]
async fn tell_only_does_not_hold_the_agent_and_a_reply_reaches_it_at_its_next_tool() {
    let app = spawn_with(|s| s.hooks.claude_code.on_finish = OnFinish::Tell).await;
    let stop = claude("Stop", json!({"last_assistant_message": "Migrated."}));
    // Answered at once: the agent is not held.
    let out = tokio::time::timeout(Duration::from_secs(5), hook_with(&app, stop, None))
        .await
        .expect("the Stop hook answers at once")
        .unwrap();
    assert_eq!(out, json!({}));
    let q = pending_one(&app).await;
    app.respond(
        q["id"].as_str().unwrap(),
        &json!({"answers": {"0": "now seed the data"}, "by": "alice"}),
    )
    .await;
    let queued = eventually("the reply is queued for the session", || async {
        let s = session(&app, "claude-code").await;
        s["messages"].as_array()?.first().cloned()
    })
    .await;
    assert_eq!(queued["by"], "alice", "{queued}");
    let prompt = claude("UserPromptSubmit", json!({"prompt": "next"}));
    let out = hook_with(&app, prompt, None).await.unwrap();
    let context = out["hookSpecificOutput"]["additionalContext"]
        .as_str()
        .unwrap();
    assert!(context.contains("now seed the data"), "{out}");
    assert_eq!(
        out["hookSpecificOutput"]["hookEventName"],
        "UserPromptSubmit"
    );
    app.stop().await;
}

#[tokio::test]
async fn a_finished_question_is_withdrawn_when_the_agent_stops_waiting() {
    let app = spawn_with(|s| {
        s.hooks.claude_code.on_finish = OnFinish::Ask;
        s.hooks.claude_code.finish_wait_secs = 60;
    })
    .await;
    let stop = claude("Stop", json!({"last_assistant_message": "Done."}));
    let held = hook_with(&app, stop, None);
    let q = pending_one(&app).await;
    // Claude Code's own hook timeout: the call's connection closes.
    held.abort();
    let id = q["id"].as_str().unwrap().to_string();
    let gone = eventually("the question is withdrawn", || async {
        let (_, i) = app.get(&format!("/v1/interactions/{id}")).await;
        (i["status"] != "pending").then_some(i)
    })
    .await;
    assert_eq!(gone["resolution"]["outcome"], "cancelled", "{gone}");
    assert_eq!(gone["resolution"]["by"], "claude-code", "{gone}");
    app.stop().await;
}

#[tokio::test]
async fn an_unknown_session_is_a_404_session_not_found_wherever_it_is_named() {
    let app = spawn_app().await;
    let prompt = claude("UserPromptSubmit", json!({"prompt": "go"}));
    hook_with(&app, prompt, None).await.unwrap();
    // Another agent's session id, an id never seen, a session id of another agent.
    for path in [
        "/v1/sessions/claude-code/never-seen",
        &format!("/v1/sessions/codex/{SESSION}"),
        "/v1/sessions/nobody/x",
    ] {
        let (status, err) = app.get(path).await;
        assert_eq!(status, StatusCode::NOT_FOUND, "{path}: {err}");
        assert_eq!(err["error"]["code"], "session_not_found", "{path}: {err}");
        let message = err["error"]["message"].as_str().unwrap();
        assert!(message.contains("is known"), "{message}");
        // A message to it: the same, whatever the message says (even nothing).
        for body in [json!({"text": "hi"}), json!({"text": ""})] {
            let (status, err) = app.post(&format!("{path}/messages"), &body).await;
            assert_eq!(status, StatusCode::NOT_FOUND, "{path}: {err}");
            assert_eq!(err["error"]["code"], "session_not_found", "{path}: {err}");
        }
    }
    // The known one still answers.
    assert_eq!(session(&app, "claude-code").await["id"], SESSION);
    app.stop().await;
}

/// A `Stop` of the session in `cwd`, posted with the agent token.
fn stop_in(app: &TestApp, cwd: &str) -> tokio::task::JoinHandle<Value> {
    let mut body = claude(
        "Stop",
        json!({"stop_hook_active": false, "last_assistant_message": "Done."}),
    );
    body["cwd"] = json!(cwd);
    hook_with(app, body, Some(AGENT))
}

#[tokio::test]
async fn a_route_says_what_a_finished_turn_does_over_the_agents_setting() {
    // The agent says off; the shop's route says ask, for 60 s.
    let app = spawn_with(|s| {
        teams(s);
        s.hooks.claude_code.on_finish = OnFinish::Off;
        s.routes[0].on_finish = Some(OnFinish::Ask);
        s.routes[0].finish_wait_secs = Some(60);
    })
    .await;
    let mut app = app;
    app.token = Some(ALICE.into());
    let held = stop_in(&app, "/srv/shop");
    let q = pending_one(&app).await;
    assert_eq!(q["route"]["name"], "shop", "{q}");
    assert!(q["timeout_secs"].as_u64().unwrap() <= 60, "{q}");
    let (status, out) = app
        .respond(
            q["id"].as_str().unwrap(),
            &json!({"answers": {"0": "go on"}}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{out}");
    assert_eq!(held.await.unwrap()["decision"], "block");
    // Elsewhere the agent's setting holds: nobody is asked.
    let elsewhere = tokio::time::timeout(Duration::from_secs(10), stop_in(&app, "/srv/blog"))
        .await
        .expect("answered at once")
        .unwrap();
    assert_eq!(elsewhere, json!({}));
    let (_, list) = app.get("/v1/interactions?status=pending").await;
    assert_eq!(list["interactions"], json!([]), "{list}");
    app.stop().await;

    // The agent says ask; the shop's route says off.
    let mut app = spawn_with(|s| {
        teams(s);
        s.hooks.claude_code.on_finish = OnFinish::Ask;
        s.routes[0].on_finish = Some(OnFinish::Off);
    })
    .await;
    app.token = Some(ALICE.into());
    let quiet = tokio::time::timeout(Duration::from_secs(10), stop_in(&app, "/srv/shop"))
        .await
        .expect("answered at once")
        .unwrap();
    assert_eq!(quiet, json!({}));
    let (_, list) = app.get("/v1/interactions?status=pending").await;
    assert_eq!(list["interactions"], json!([]), "{list}");
    app.stop().await;
}
