//! Agent sessions on Telegram: a reply to a session's prompt talks to the session.

use super::*;
use imrelay::agents::steer::OnFinish;

#[tokio::test]
async fn a_reply_to_a_sessions_prompt_continues_it_or_reaches_it_as_a_message() {
    let (app, tg) = start_with(Mode::Webhook, |s| {
        s.hooks.claude_code.on_finish = OnFinish::Ask;
        s.hooks.claude_code.finish_wait_secs = 60;
    })
    .await;
    let held = crate::support::claude_stop(&app, "s-tg");
    let p = prompt(&tg, PRIVATE, "finished its turn").await;
    // A reply to the pending "finished" question continues the turn with its words.
    deliver(
        &app,
        &text(
            tg.next_update_id(),
            ALICE,
            PRIVATE,
            "now run the tests",
            Some(p.message_id),
        ),
    )
    .await;
    let out = held.await.unwrap();
    assert_eq!(out["decision"], "block", "{out}");
    assert!(
        out["reason"]
            .as_str()
            .unwrap()
            .contains("now run the tests"),
        "{out}"
    );
    // A stranger's reply to the same prompt changes nothing.
    deliver(
        &app,
        &text(
            tg.next_update_id(),
            MALLORY,
            PRIVATE,
            "rm -rf /",
            Some(p.message_id),
        ),
    )
    .await;
    // A reply once it was answered is a message to the session, queued for its next step.
    deliver(
        &app,
        &text(
            tg.next_update_id(),
            ALICE,
            PRIVATE,
            "and then the linter",
            Some(p.message_id),
        ),
    )
    .await;
    tg.wait_for("sendMessage", |c| {
        c.iter().any(|c| {
            c.params["text"]
                .as_str()
                .unwrap_or("")
                .starts_with("✉️ Queued for the claude-code session")
        })
    })
    .await;
    let (status, s) = app.get("/v1/sessions/claude-code/s-tg").await;
    assert_eq!(status, StatusCode::OK, "{s}");
    let messages = s["messages"].as_array().unwrap();
    assert_eq!(messages.len(), 1, "{s}");
    assert_eq!(messages[0]["text"], "and then the linter", "{s}");
    assert_eq!(messages[0]["by"], "Alice", "{s}");
    assert_eq!(messages[0]["via"], "telegram", "{s}");
    // `allow` / `deny` to an answered prompt keep their meaning: already answered.
    deliver(
        &app,
        &text(
            tg.next_update_id(),
            ALICE,
            PRIVATE,
            "allow",
            Some(p.message_id),
        ),
    )
    .await;
    let (_, s) = app.get("/v1/sessions/claude-code/s-tg").await;
    assert_eq!(s["messages"].as_array().unwrap().len(), 1, "{s}");
    app.stop().await;
}

#[tokio::test]
async fn a_reply_to_a_sessions_digest_reaches_the_session_and_answers_none_of_it() {
    let (app, tg) = start_with(Mode::Webhook, |s| {
        s.telegram.chats = vec![GROUP];
        s.telegram.digest_after = 1;
    })
    .await;
    crate::support::claude_session_start(&app, "s-tgd").await;
    for k in 0..3 {
        let body = json!({"id": format!("toolu_tgd{k}"), "tool_name": "Bash",
            "input": {"command": format!("step-{k}")}, "session": "s-tgd",
            "agent": "claude-code", "cwd": "/srv/shop"});
        let (s, created) = app.post("/v1/interactions", &body).await;
        assert_eq!(s, StatusCode::CREATED, "{created}");
    }
    // The first is posted on its own, the two past `digest_after` in the session's digest.
    let digest = prompt(&tg, GROUP, "from session").await;
    deliver(
        &app,
        &text(
            tg.next_update_id(),
            ALICE,
            GROUP,
            "stop after step-1",
            Some(digest.message_id),
        ),
    )
    .await;
    let queued = eventually("the message queued", || async {
        let m = crate::support::queued_messages(&app, "s-tgd").await;
        (m.len() == 1).then_some(m)
    })
    .await;
    assert_eq!(queued[0]["text"], "stop after step-1");
    assert_eq!(queued[0]["via"], "telegram");
    tg.wait_for("sendMessage", |c| {
        c.iter().any(|c| {
            c.params["text"]
                .as_str()
                .unwrap_or("")
                .starts_with("✉️ Queued for the claude-code session")
        })
    })
    .await;
    // It answered none of the requests the digest lists.
    for k in 0..3 {
        let (_, i) = app.get(&format!("/v1/interactions/toolu_tgd{k}")).await;
        assert_eq!(i["status"], "pending", "{i}");
    }
    // Someone who may not answer the route is refused, told so, and nothing is queued.
    deliver(
        &app,
        &text(
            tg.next_update_id(),
            MALLORY,
            GROUP,
            "drop the table",
            Some(digest.message_id),
        ),
    )
    .await;
    tg.wait_for("sendMessage", |c| {
        c.iter().any(|c| {
            c.params["text"]
                .as_str()
                .unwrap_or("")
                .contains("may not message this session")
        })
    })
    .await;
    assert_eq!(
        crate::support::queued_messages(&app, "s-tgd").await.len(),
        1
    );
    app.stop().await;
}

/// Reports `event` of the ACP session `s-acp` as `imrelay acp` does; the prompt answered.
async fn acp_turn(app: &TestApp, event: &str, said: Option<&str>) -> Value {
    let body = json!({"event": event, "session": "s-acp", "cwd": "/srv/shop",
        "agent": {"name": "fake-agent", "title": "Fake Agent"}, "last_message": said});
    let resp = app
        .client
        .post(app.url("/v1/hooks/acp/session"))
        .json(&body)
        .send()
        .await
        .expect("the session call");
    assert_eq!(resp.status(), StatusCode::OK);
    resp.json::<Value>().await.expect("JSON")["prompt"].clone()
}

#[tokio::test]
async fn a_message_to_an_acp_session_is_said_to_wait_for_the_turns_end() {
    let (app, tg) = start_with(Mode::Webhook, |s| {
        s.hooks.acp.on_finish = OnFinish::Tell;
    })
    .await;
    assert_eq!(acp_turn(&app, "prompted", None).await, Value::Null);
    // `tell`: the turn's end asks, and the proxy is not held.
    assert_eq!(
        acp_turn(&app, "stopped", Some("The migration ran.")).await,
        Value::Null
    );
    let p = prompt(&tg, PRIVATE, "finished its turn").await;
    let reply = |t: &str| text(tg.next_update_id(), ALICE, PRIVATE, t, Some(p.message_id));
    deliver(&app, &reply("now run the tests")).await;
    let answered = eventually("the question is answered", || async {
        let (_, s) = app.get("/v1/sessions/fake-agent/s-acp").await;
        (s["messages"].as_array()?.len() == 1).then_some(())
    });
    answered.await;
    // Once answered, a reply is a message to the session: it waits for the turn's end.
    deliver(&app, &reply("and then the linter")).await;
    tg.wait_for("sendMessage", |c| {
        c.iter().any(|c| {
            c.params["text"].as_str().unwrap_or("")
                == "✉️ Queued for the fake-agent session: it will be sent when the agent's turn ends."
        })
    })
    .await;
    let (_, s) = app.get("/v1/sessions/fake-agent/s-acp").await;
    assert_eq!(s["delivery"], "turn_end", "{s}");
    // A turn starting at the desk carries nothing; its end carries both, as one prompt.
    assert_eq!(acp_turn(&app, "prompted", None).await, Value::Null);
    let next = acp_turn(&app, "stopped", Some("Tests pass.")).await;
    let next = next.as_str().unwrap_or_default();
    assert!(
        next.contains("now run the tests") && next.contains("and then the linter"),
        "{next}"
    );
    app.stop().await;
}
