//! Answering from Telegram end to end, and approvals: allow, deny, deny with a reason, always allow.

use super::*;

// ---- end to end ---------------------------------------------------------------------------

#[tokio::test]
async fn one_tap_in_telegram_answers_the_agent_end_to_end() {
    let (app, tg) = start(Mode::Polling).await;
    // Polling mode removes any webhook before it polls.
    let polls = tg.wait_n("getUpdates", 1).await;
    let deletes = tg.calls("deleteWebhook");
    assert_eq!(deletes.len(), 1);
    assert!(deletes[0].at <= polls[0].at);
    assert_eq!(
        polls[0].params["allowed_updates"],
        json!(["message", "callback_query"])
    );

    let id = app.create_bash("toolu_e2e", "cargo publish").await;
    let waiter = {
        let client = app.client.clone();
        let url = app.url(&format!("/v1/interactions/{id}/wait?timeout_secs=30"));
        tokio::spawn(async move { split(client.get(url).send().await.unwrap()).await })
    };
    let private = prompt(&tg, PRIVATE, "cargo publish").await;
    let group = prompt(&tg, GROUP, "cargo publish").await;
    let u = tg.next_update_id();
    tg.push_update(tap(
        u,
        ALICE,
        PRIVATE,
        private.message_id,
        &private.button("✅ Allow"),
    ));

    let (s, body) = waiter.await.unwrap();
    assert_eq!(s, StatusCode::OK, "{body}");
    assert_eq!(
        body["result"],
        json!({"behavior": "allow", "updatedInput": {"command": "cargo publish"}})
    );
    assert_eq!(body["resolution"]["by"], "Alice");
    assert_eq!(body["resolution"]["via"], "telegram");
    assert_eq!(toast(&tg, u).await, "Allowed");
    // The audit trail names the user by their stable Telegram id, not only the display name
    // anyone can choose.
    let answered: Vec<Value> = audit_of(&app, &id)
        .await
        .into_iter()
        .filter(|e| e["action"] == "answered")
        .collect();
    assert_eq!(answered.len(), 1, "{answered:?}");
    assert_eq!(answered[0]["actor"], "Alice (tg:1001)");
    assert_eq!(answered[0]["channel"], "telegram");

    // Every copy shows who answered, where and when, without buttons.
    for p in [&private, &group] {
        let e = edited(&tg, p.chat, p.message_id, "Allowed by Alice via telegram").await;
        assert_eq!(e["reply_markup"], json!({"inline_keyboard": []}));
        assert_eq!(e["parse_mode"], "HTML");
        assert!(e["text"].as_str().unwrap().contains("cargo publish"));
        assert!(e["text"].as_str().unwrap().contains("🕑"));
    }
    app.stop().await;
}

// ---- approvals ----------------------------------------------------------------------------

#[tokio::test]
async fn deny_button_denies_with_a_message_naming_who() {
    let (app, tg) = start(Mode::Webhook).await;
    let id = app.create_bash("toolu_deny", "git push --force").await;
    let p = prompt(&tg, GROUP, "git push --force").await;
    assert_eq!(
        tap_on(&app, &tg, BOB, &p, &p.button("❌ Deny")).await,
        "Denied"
    );
    let body = status(&app, &id).await;
    assert_eq!(body["resolution"]["outcome"], "denied");
    assert_eq!(
        body["resolution"]["result"],
        json!({"behavior": "deny", "message": "Denied by Bob via telegram", "interrupt": false})
    );
    edited(&tg, GROUP, p.message_id, "Denied by Bob via telegram").await;
    app.stop().await;
}

#[tokio::test]
async fn always_allow_applies_the_agents_suggestions() {
    let (app, tg) = start(Mode::Webhook).await;
    let rule = json!([{"type": "addRules", "rules": [{"toolName": "Bash", "ruleContent": "npm test"}],
                       "behavior": "allow", "destination": "session"}]);
    let id = create(
        &app,
        json!({"tool_name": "Bash", "input": {"command": "npm test"}, "suggestions": rule}),
    )
    .await;
    let p = prompt(&tg, PRIVATE, "npm test").await;
    assert_eq!(
        tap_on(&app, &tg, ALICE, &p, &p.button("✅ Always allow")).await,
        "Allowed"
    );
    let body = status(&app, &id).await;
    assert_eq!(body["resolution"]["result"]["updatedPermissions"], rule);
    // Without suggestions there is no such button.
    app.create_bash("toolu_plain", "npm ci").await;
    let plain = prompt(&tg, PRIVATE, "npm ci").await;
    assert!(plain.buttons().iter().all(|(t, _)| t != "✅ Always allow"));
    app.stop().await;
}

#[tokio::test]
async fn deny_with_reason_asks_for_a_reply_and_uses_it() {
    let (app, tg) = start(Mode::Webhook).await;
    let id = app.create_bash("toolu_reason", "terraform destroy").await;
    let p = prompt(&tg, GROUP, "terraform destroy").await;
    let t = tap_on(&app, &tg, ALICE, &p, &p.button("💬 Deny with reason…")).await;
    assert!(t.contains("Reply"), "{t}");
    // A selective ForceReply, replying to the prompt, mentioning the tapper.
    let ask = tg
        .wait_for("sendMessage", |c| {
            c.iter()
                .any(|c| c.params["reply_markup"]["force_reply"] == true)
        })
        .await;
    let ask = ask
        .iter()
        .find(|c| c.params["reply_markup"]["force_reply"] == true)
        .unwrap()
        .clone();
    assert_eq!(ask.params["reply_markup"]["selective"], true);
    assert_eq!(ask.params["reply_parameters"]["message_id"], p.message_id);
    assert!(
        ask.params["text"]
            .as_str()
            .unwrap()
            .contains("tg://user?id=1001")
    );
    assert_eq!(status(&app, &id).await["status"], "pending");

    let reply_to = ask.message_id.unwrap();
    let u = tg.next_update_id();
    deliver(
        &app,
        &text(u, ALICE, GROUP, "not on <prod> & not today", Some(reply_to)),
    )
    .await;
    let body = status(&app, &id).await;
    assert_eq!(
        body["resolution"]["result"]["message"],
        "not on <prod> & not today"
    );
    assert_eq!(body["resolution"]["by"], "Alice");
    // The prompt shows the reason (escaped); the request shows it is settled.
    let e = edited(&tg, GROUP, p.message_id, "Denied by Alice via telegram").await;
    assert!(
        e["text"]
            .as_str()
            .unwrap()
            .contains("not on &lt;prod&gt; &amp; not today")
    );
    edited(&tg, GROUP, reply_to, "Denied by Alice").await;
    app.stop().await;
}

#[tokio::test]
async fn text_fallback_replies_allow_and_deny_the_replied_to_prompt() {
    let (app, tg) = start(Mode::Webhook).await;
    let a = app.create_bash("toolu_text_a", "make deploy").await;
    let b = app.create_bash("toolu_text_b", "make clean").await;
    let pa = prompt(&tg, PRIVATE, "make deploy").await;
    let pb = prompt(&tg, PRIVATE, "make clean").await;
    deliver(
        &app,
        &text(
            tg.next_update_id(),
            ALICE,
            PRIVATE,
            "deny too risky today",
            Some(pa.message_id),
        ),
    )
    .await;
    deliver(
        &app,
        &text(
            tg.next_update_id(),
            ALICE,
            PRIVATE,
            "Allow",
            Some(pb.message_id),
        ),
    )
    .await;
    let ra = status(&app, &a).await;
    assert_eq!(ra["resolution"]["result"]["message"], "too risky today");
    let rb = status(&app, &b).await;
    assert_eq!(rb["resolution"]["outcome"], "allowed");
    assert_eq!(rb["resolution"]["via"], "telegram");
    // Nonsense gets a hint and changes nothing.
    let c = app.create_bash("toolu_text_c", "make test").await;
    let pc = prompt(&tg, PRIVATE, "make test").await;
    deliver(
        &app,
        &text(
            tg.next_update_id(),
            ALICE,
            PRIVATE,
            "maybe?",
            Some(pc.message_id),
        ),
    )
    .await;
    tg.wait_for("sendMessage", |c| {
        c.iter().any(|c| {
            c.params["text"]
                .as_str()
                .unwrap_or("")
                .contains("reply “allow” or “deny [reason]”")
        })
    })
    .await;
    assert_eq!(status(&app, &c).await["status"], "pending");
    app.stop().await;
}

#[tokio::test]
async fn a_reply_starting_with_a_slash_is_an_answer_not_a_command() {
    let (app, tg) = start(Mode::Webhook).await;
    let id = app.create_bash("toolu_slash", "cat /etc/passwd").await;
    let p = prompt(&tg, GROUP, "cat /etc/passwd").await;
    tap_on(&app, &tg, ALICE, &p, &p.button("💬 Deny with reason…")).await;
    let ask = reply_request(&tg, 1).await;
    deliver(
        &app,
        &text(
            tg.next_update_id(),
            ALICE,
            GROUP,
            "/etc is off-limits",
            ask.message_id,
        ),
    )
    .await;
    let body = status(&app, &id).await;
    assert_eq!(
        body["resolution"]["result"]["message"],
        "/etc is off-limits"
    );

    // The same for an "Other…" answer.
    let q = create(
        &app,
        json!({"tool_name": "AskUserQuestion", "input": {"questions": [
            {"question": "Install where?", "header": "Prefix",
             "options": [{"label": "~/.local"}, {"label": "/opt"}]}]}}),
    )
    .await;
    let pq = prompt(&tg, GROUP, "Install where?").await;
    tap_on(&app, &tg, BOB, &pq, &pq.button("✏️ Other…")).await;
    let ask = reply_request(&tg, 2).await;
    deliver(
        &app,
        &text(
            tg.next_update_id(),
            BOB,
            GROUP,
            "/usr/local",
            ask.message_id,
        ),
    )
    .await;
    assert_eq!(
        status(&app, &q).await["resolution"]["result"]["updatedInput"]["answers"],
        json!({"Install where?": "/usr/local"})
    );
    // A command replying to a prompt is still a command.
    let c = app.create_bash("toolu_slash_cmd", "ls /").await;
    let pc = prompt(&tg, GROUP, "ls /").await;
    deliver(
        &app,
        &text(
            tg.next_update_id(),
            ALICE,
            GROUP,
            "/whoami",
            Some(pc.message_id),
        ),
    )
    .await;
    assert!(
        notices(&tg, GROUP)
            .iter()
            .any(|n| n.contains("<code>1001</code>")),
        "{:?}",
        notices(&tg, GROUP)
    );
    assert_eq!(status(&app, &c).await["status"], "pending");
    app.stop().await;
}

#[tokio::test]
async fn only_the_tapper_can_answer_their_reply_request() {
    let (app, tg) = start(Mode::Webhook).await;
    let id = app.create_bash("toolu_whose", "drop table users").await;
    let p = prompt(&tg, GROUP, "drop table users").await;
    tap_on(&app, &tg, ALICE, &p, &p.button("💬 Deny with reason…")).await;
    let ask = reply_request(&tg, 1).await;
    // Bob, an approver too, replies to Alice's request: not taken, and he is told why.
    deliver(
        &app,
        &text(
            tg.next_update_id(),
            BOB,
            GROUP,
            "Bob's reason",
            ask.message_id,
        ),
    )
    .await;
    assert_eq!(status(&app, &id).await["status"], "pending");
    assert!(
        notices(&tg, GROUP)
            .iter()
            .any(|n| n.contains("for the person who tapped the button")),
        "{:?}",
        notices(&tg, GROUP)
    );
    let m = app.metrics().await;
    assert!(
        m.contains("imrelay_telegram_refused_total{reason=\"foreign_reply\"} 1"),
        "{m}"
    );
    let refused: Vec<Value> = audit_of(&app, &id)
        .await
        .into_iter()
        .filter(|e| e["action"] == "refused")
        .collect();
    assert_eq!(refused.len(), 1, "{refused:?}");
    assert_eq!(refused[0]["actor"], "Bob (tg:1002)");
    // Alice's own reply is taken.
    deliver(
        &app,
        &text(
            tg.next_update_id(),
            ALICE,
            GROUP,
            "Alice's reason",
            ask.message_id,
        ),
    )
    .await;
    let body = status(&app, &id).await;
    assert_eq!(body["resolution"]["result"]["message"], "Alice's reason");
    assert_eq!(body["resolution"]["by"], "Alice");
    app.stop().await;
}
