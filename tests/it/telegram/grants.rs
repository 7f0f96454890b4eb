//! "Allow similar" on Telegram: the rule it adds is in the message; a tap answers and grants
//! it for the session; the next matching call is allowed without a prompt; revoked from the
//! inbox's API, the next one is prompted again.

use imrelay::channels::telegram::Mode;
use reqwest::StatusCode;
use serde_json::json;

use super::*;

fn call(id: &str, command: &str) -> Value {
    json!({"id": id, "tool_name": "Bash", "input": {"command": command},
           "session": "s-tg", "agent": "claude-code", "cwd": "/srv/shop"})
}

#[tokio::test]
async fn a_session_grant_made_on_telegram_allows_the_next_call_until_revoked() {
    let (app, tg) = start(Mode::Webhook).await;
    create(&app, call("tg-g1", "npm run test -- --watch")).await;
    let p = prompt(&tg, PRIVATE, "npm run test -- --watch").await;
    assert!(
        p.text.contains("🔁 <i>Allow similar</i> also allows, for this session: <code>Bash(npm run test:*)</code>"),
        "{}",
        p.text
    );
    let t = tap_on(
        &app,
        &tg,
        ALICE,
        &p,
        &p.button("🔁 Allow similar (this session)"),
    )
    .await;
    assert_eq!(t, "Allowed");
    let first = status(&app, "tg-g1").await;
    assert_eq!(
        (
            first["resolution"]["by"].as_str(),
            first["resolution"]["via"].as_str()
        ),
        (Some("Alice"), Some("telegram"))
    );
    let (_, grants) = app.get("/v1/grants").await;
    let grant = &grants["grants"][0];
    assert_eq!(
        (
            grant["rule"].as_str(),
            grant["scope"].as_str(),
            grant["via"].as_str()
        ),
        (
            Some("Bash(npm run test:*)"),
            Some("session"),
            Some("telegram")
        )
    );
    let grant_id = grant["id"].as_str().unwrap().to_string();

    // The next matching call: allowed at creation, and nothing is posted for it.
    let posted_before = tg.calls("sendMessage").len();
    let (s, next) = app
        .post("/v1/interactions", &call("tg-g2", "npm run test"))
        .await;
    assert_eq!(s, StatusCode::CREATED);
    assert_eq!(next["resolution"]["by"], "grant Bash(npm run test:*)");
    let granted = audit_of(&app, "tg-g1").await;
    assert!(
        granted
            .iter()
            .any(|e| e["action"] == "granted" && e["channel"] == "telegram"),
        "{granted:?}"
    );

    // A non-approver's tap grants nothing.
    create(&app, call("tg-g3", "cargo test")).await;
    let p3 = prompt(&tg, PRIVATE, "cargo test").await;
    let t = tap_on(
        &app,
        &tg,
        MALLORY,
        &p3,
        &p3.button("🔁 Allow similar (this session)"),
    )
    .await;
    assert!(t.contains("not an approver"), "{t}");
    let (_, grants) = app.get("/v1/grants").await;
    assert_eq!(grants["grants"].as_array().unwrap().len(), 1);

    // Revoked (the inbox's Revoke): the next call is prompted again.
    let (s, _) = app
        .delete(&format!("/v1/grants/{grant_id}?by=Bob&via=desktop"))
        .await;
    assert_eq!(s, StatusCode::OK);
    create(&app, call("tg-g4", "npm run test")).await;
    let exact = ">npm run test</code>";
    prompt(&tg, PRIVATE, exact).await;
    // That is tg-g4's prompt: tg-g2, the same command, was never posted.
    let prompts: Vec<Value> = tg.calls("sendMessage")[posted_before..]
        .iter()
        .filter(|c| {
            c.params["chat_id"] == PRIVATE
                && c.params["text"].as_str().unwrap_or("").contains(exact)
        })
        .map(|c| c.params.clone())
        .collect();
    assert_eq!(prompts.len(), 1, "{prompts:#?}");
    // Without a session there is nothing to scope it to: no such button.
    app.create_bash("tg-g5", "npm run lint").await;
    let p5 = prompt(&tg, PRIVATE, "npm run lint").await;
    assert!(
        p5.buttons().iter().all(|(t, _)| !t.starts_with("🔁")),
        "{:?}",
        p5.buttons()
    );
    assert!(!p5.text.contains("Allow similar"));
    // Where the agent offers its own form of it, that is applied too, and the message says so.
    let rule = json!([{"type": "addRules", "rules": [{"toolName": "Bash", "ruleContent": "make:*"}],
                       "behavior": "allow", "destination": "localSettings"}]);
    let mut with_own = call("tg-g6", "make all");
    with_own["suggestions"] = rule;
    create(&app, with_own).await;
    let p6 = prompt(&tg, PRIVATE, "make all").await;
    assert!(p6.text.contains("<code>Bash(make all:*)</code> (the agent also remembers its own suggestion for this session)"), "{}", p6.text);
    assert_eq!(
        tap_on(
            &app,
            &tg,
            ALICE,
            &p6,
            &p6.button("🔁 Allow similar (this session)")
        )
        .await,
        "Allowed"
    );
    let six = status(&app, "tg-g6").await;
    assert_eq!(
        six["resolution"]["result"]["updatedPermissions"][0]["destination"], "session",
        "{six}"
    );
    app.stop().await;
}
