//! A tool input comes back exactly as the agent sent it: numbers as written (`1e2`, `-0`,
//! integers beyond 64 bits), whatever path the answer takes (the respond and wait answers,
//! a conflict's body, the event stream, a restart, the Claude Code hook, webhooks, a
//! question's answers).

use std::sync::Arc;

use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::support::*;

/// The input as sent (with whitespace), and the compact text every answer must carry.
const SENT: &str = r#"{ "command": "dd bs=1e2",
    "big": 18446744073709551617, "neg": -18446744073709551617, "e": 1e2, "E": 1E+2,
    "z": -0, "f": 1.10, "tiny": 5e-324, "huge": 123456789012345678901234567890.5,
    "s": "caf\u00e9 \" \\ ", "n": [ -0.0, 0, 1.0e-7 ], "o": { "k": 9007199254740993 } }"#;
const KEPT: &str = r#"{"command":"dd bs=1e2","big":18446744073709551617,"neg":-18446744073709551617,"e":1e2,"E":1E+2,"z":-0,"f":1.10,"tiny":5e-324,"huge":123456789012345678901234567890.5,"s":"caf\u00e9 \" \\ ","n":[-0.0,0,1.0e-7],"o":{"k":9007199254740993}}"#;

async fn raw_post(app: &TestApp, path: &str, body: String) -> (StatusCode, String) {
    post_text(app.client.clone(), app.url(path), body).await
}

/// POSTs `body` as JSON text, exactly as given; returns the answer's text.
async fn post_text(client: reqwest::Client, url: String, body: String) -> (StatusCode, String) {
    let resp = client
        .post(url)
        .header("content-type", "application/json")
        .body(body)
        .send()
        .await
        .unwrap();
    (resp.status(), resp.text().await.unwrap())
}

async fn raw_get(app: &TestApp, path: &str) -> String {
    app.client
        .get(app.url(path))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap()
}

/// How often `KEPT` occurs in `text`.
fn kept_in(text: &str) -> usize {
    text.matches(KEPT).count()
}

#[tokio::test]
async fn an_unedited_input_comes_back_exactly_as_sent() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("imrelay.db");
    let app = spawn_on(settings(), Arc::new(reopen_sqlite(&path).await)).await;
    let mut events = Sse::connect(&app, None).await;
    let create = |id: &str| format!(r#"{{"id": "{id}", "tool_name": "Bash", "input": {SENT}}}"#);

    let (status, created) = raw_post(&app, "/v1/interactions", create("num-1")).await;
    assert_eq!(status, StatusCode::CREATED, "{created}");
    assert_eq!(kept_in(&created), 1, "{created}");
    // Re-attaching with the same text is the same request.
    let (status, again) = raw_post(&app, "/v1/interactions", create("num-1")).await;
    assert_eq!(status, StatusCode::OK, "{again}");

    let (status, answer) = raw_post(
        &app,
        "/v1/interactions/num-1/respond",
        r#"{"decision": "allow", "by": "alice"}"#.into(),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    // The result, the resolution's result, the interaction's input and its resolution.
    assert_eq!(kept_in(&answer), 4, "{answer}");
    let wait = raw_get(&app, "/v1/interactions/num-1/wait").await;
    assert_eq!(kept_in(&wait), 4, "{wait}");

    // A second answer is refused with the winner, still as sent.
    let (status, conflict) = raw_post(
        &app,
        "/v1/interactions/num-1/respond",
        r#"{"decision": "deny"}"#.into(),
    )
    .await;
    assert_eq!(status, StatusCode::CONFLICT, "{conflict}");
    assert_eq!(kept_in(&conflict), 3, "{conflict}");
    let resp = app
        .client
        .delete(app.url("/v1/interactions/num-1"))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::CONFLICT);
    assert_eq!(kept_in(&resp.text().await.unwrap()), 3);

    // The event stream.
    for _ in 0..2 {
        let ev = events.next().await;
        let text = ev.raw.clone();
        assert!(kept_in(&text) >= 1, "{} {text}", ev.event);
    }

    // After a restart, from the store.
    let addr = app.addr;
    app.stop().await;
    let mut s = settings();
    s.server.listen = addr;
    let app = spawn_on(s, Arc::new(reopen_sqlite(&path).await)).await;
    let stored = raw_get(&app, "/v1/interactions/num-1").await;
    assert_eq!(kept_in(&stored), 2, "{stored}");
    let list = raw_get(&app, "/v1/interactions").await;
    assert_eq!(kept_in(&list), 2, "{list}");
    app.stop().await;
}

#[tokio::test]
async fn a_questions_answers_keep_the_rest_of_its_input_as_sent() {
    let app = spawn_app().await;
    let input = r#"{"questions": [{"question": "Which?", "header": "H", "multiSelect": false,
        "options": [{"label": "A"}, {"label": "B"}]}], "weight": 1e2, "id": 18446744073709551617}"#;
    let (status, created) = raw_post(
        &app,
        "/v1/interactions",
        format!(r#"{{"id": "num-q", "tool_name": "AskUserQuestion", "input": {input}}}"#),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED, "{created}");
    let (status, answer) = raw_post(
        &app,
        "/v1/interactions/num-q/respond",
        r#"{"answers": {"0": "B"}}"#.into(),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    let expected = r#""updatedInput":{"questions":[{"question":"Which?","header":"H","multiSelect":false,"options":[{"label":"A"},{"label":"B"}]}],"weight":1e2,"id":18446744073709551617,"answers":{"Which?":"B"}}"#;
    assert_eq!(answer.matches(expected).count(), 3, "{answer}");
}

#[tokio::test]
async fn the_claude_code_hook_hands_back_the_tool_input_as_sent() {
    let app = spawn_app().await;
    let mut body = fixture("claude-code/pre_tool_use.json");
    body["tool_use_id"] = json!("toolu_num");
    body["tool_input"] = json!("PLACEHOLDER");
    let text = body.to_string().replace(r#""PLACEHOLDER""#, SENT);
    let hook = tokio::spawn(post_text(
        app.client.clone(),
        app.url("/v1/hooks/claude-code"),
        text,
    ));
    eventually("the hook's interaction", || async {
        let (status, _) = app.get("/v1/interactions/toolu_num").await;
        (status == StatusCode::OK).then_some(())
    })
    .await;
    app.respond("toolu_num", &json!({"decision": "allow"}))
        .await;
    let (status, out) = hook.await.unwrap();
    assert_eq!(status, StatusCode::OK, "{out}");
    assert!(out.contains(&format!(r#""updatedInput":{KEPT}"#)), "{out}");
    let parsed: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(
        parsed["hookSpecificOutput"]["permissionDecision"], "allow",
        "{out}"
    );
}
