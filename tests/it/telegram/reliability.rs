//! Rate limits, outages and restarts: nothing lost, nothing posted twice.

use super::*;

// ---- rate limits and outages --------------------------------------------------------------

#[tokio::test]
async fn a_429_retry_after_is_honoured() {
    let (app, tg) = start_with(Mode::Webhook, |s| s.telegram.chats = vec![PRIVATE]).await;
    tg.fail("sendMessage", Fail::RetryAfter(2), 1);
    app.create_bash("toolu_429", "du -sh /").await;
    let calls = tg.wait_n("sendMessage", 2).await;
    let gap = calls[1].at - calls[0].at;
    assert!(
        gap >= Duration::from_millis(1990),
        "retried after {gap:?}, before the 2 s Telegram asked for"
    );
    prompt(&tg, PRIVATE, "du -sh /").await;
    let m = app.metrics().await;
    assert!(
        m.contains(
            "imrelay_telegram_api_calls_total{method=\"sendMessage\",result=\"retry_after\"} 1"
        ),
        "{m}"
    );
    app.stop().await;
}

#[tokio::test]
async fn a_5xx_answer_is_read_and_retried() {
    // teloxide pauses 10 s after any 5xx before it reads the answer; this test waits that
    // out once, on purpose, to see a real 500 answer arrive. The request bound is the
    // largest allowed, so only a 500 that was read and judged transient is retried in time.
    let (app, tg) = start_with(Mode::Webhook, |s| {
        s.telegram.chats = vec![PRIVATE];
        s.telegram.request_timeout_secs = 300;
    })
    .await;
    let id = app.create_bash("toolu_real_500", "make bench").await;
    let p = prompt(&tg, PRIVATE, "make bench").await;
    tg.fail(
        "editMessageText",
        Fail::Status(500, "Internal Server Error".into()),
        1,
    );
    app.respond(
        &id,
        &json!({"decision": "allow", "by": "Carol", "via": "desktop"}),
    )
    .await;
    let edits = tg
        .wait_for_within("editMessageText", Duration::from_secs(60), |c| c.len() >= 2)
        .await;
    assert_eq!(edits.len(), 2);
    assert_eq!(edits[1].params["message_id"], p.message_id);
    let m = deliveries_ok(&app, 2).await;
    assert!(
        m.contains(
            "imrelay_telegram_api_calls_total{method=\"editMessageText\",result=\"transient\"} 1"
        ),
        "{m}"
    );
    assert!(
        m.contains("imrelay_outbox_deliveries_total{channel=\"telegram\",result=\"retry\"} 1"),
        "{m}"
    );
    app.stop().await;
}

#[tokio::test]
async fn calls_cut_short_by_the_request_bound_are_retried_until_they_land() {
    let (app, tg) = start_with(Mode::Webhook, |s| {
        s.telegram.chats = vec![PRIVATE];
        // teloxide pauses 10 s after a 5xx before it answers; the 1 s request bound gives
        // up first, so these calls count as unanswered, not as 500s (see the test above).
        s.telegram.request_timeout_secs = 1;
    })
    .await;
    let id = app.create_bash("toolu_500", "systemctl restart db").await;
    prompt(&tg, PRIVATE, "systemctl restart db").await;
    tg.fail(
        "editMessageText",
        Fail::Status(500, "Internal Server Error".into()),
        2,
    );
    let (s, _) = app
        .respond(
            &id,
            &json!({"decision": "allow", "by": "Carol", "via": "desktop"}),
        )
        .await;
    assert_eq!(s, StatusCode::OK);
    // Two failed attempts, then the edit lands and the job is done.
    let edits = tg.wait_n("editMessageText", 3).await;
    for e in &edits {
        assert!(
            e.params["text"]
                .as_str()
                .unwrap()
                .contains("Allowed by Carol via desktop")
        );
        assert_eq!(e.params["reply_markup"], json!({"inline_keyboard": []}));
    }
    let m = deliveries_ok(&app, 2).await;
    assert!(
        m.contains("imrelay_outbox_deliveries_total{channel=\"telegram\",result=\"retry\"} 2"),
        "{m}"
    );
    assert_eq!(tg.calls("editMessageText").len(), 3);
    app.stop().await;
}

/// Waits until the outbox has finished `n` Telegram deliveries, and returns the metrics.
async fn deliveries_ok(app: &TestApp, n: usize) -> String {
    app.metrics_with(&format!(
        "imrelay_outbox_deliveries_total{{channel=\"telegram\",result=\"ok\"}} {n}"
    ))
    .await
}

#[tokio::test]
async fn a_refused_final_edit_falls_back_to_plain_text_and_never_leaves_buttons() {
    let (app, tg) = start_with(Mode::Webhook, |s| s.telegram.chats = vec![PRIVATE]).await;
    let a = app.create_bash("toolu_refused_edit", "make release").await;
    let pa = prompt(&tg, PRIVATE, "make release").await;
    tg.fail(
        "editMessageText",
        Fail::Status(
            400,
            "Bad Request: can't parse entities: Unsupported start tag \"x\"".into(),
        ),
        1,
    );
    app.respond(
        &a,
        &json!({"decision": "allow", "by": "Carol", "via": "desktop"}),
    )
    .await;
    // The HTML edit is refused; the plain-text one shows the outcome without buttons.
    let edits = tg.wait_n("editMessageText", 2).await;
    assert_eq!(edits[0].params["parse_mode"], "HTML");
    let plain = &edits[1].params;
    assert_eq!(plain["message_id"], pa.message_id);
    assert!(plain["parse_mode"].is_null(), "{plain}");
    let t = plain["text"].as_str().unwrap();
    assert!(t.contains("Allowed by Carol via desktop"), "{t}");
    assert!(t.contains("Approval for Bash") && t.contains("🕑"), "{t}");
    assert_eq!(plain["reply_markup"], json!({"inline_keyboard": []}));

    // Both texts refused: the buttons are removed all the same.
    let b = app.create_bash("toolu_refused_twice", "make publish").await;
    let pb = prompt(&tg, PRIVATE, "make publish").await;
    tg.fail(
        "editMessageText",
        Fail::Status(400, "Bad Request: message is too long".into()),
        2,
    );
    app.respond(
        &b,
        &json!({"decision": "deny", "by": "Carol", "via": "desktop"}),
    )
    .await;
    let removed = tg.wait_n("editMessageReplyMarkup", 1).await;
    assert_eq!(removed[0].params["message_id"], pb.message_id);
    assert_eq!(
        removed[0].params["reply_markup"],
        json!({"inline_keyboard": []})
    );
    // Both jobs count as delivered: 2 posts and 2 final edits.
    let m = deliveries_ok(&app, 4).await;
    assert!(
        m.contains("imrelay_outbox_deliveries_total{channel=\"telegram\",result=\"failed\"} 0"),
        "{m}"
    );
    app.stop().await;
}

#[tokio::test]
async fn a_429_on_the_final_edit_is_waited_out() {
    let (app, tg) = start_with(Mode::Webhook, |s| s.telegram.chats = vec![PRIVATE]).await;
    let id = app.create_bash("toolu_429_edit", "make docs").await;
    let p = prompt(&tg, PRIVATE, "make docs").await;
    tg.fail("editMessageText", Fail::RetryAfter(1), 1);
    app.respond(
        &id,
        &json!({"decision": "allow", "by": "Carol", "via": "desktop"}),
    )
    .await;
    let edits = tg.wait_n("editMessageText", 2).await;
    assert!(edits[1].at - edits[0].at >= Duration::from_millis(990));
    let e = edited(&tg, PRIVATE, p.message_id, "Allowed by Carol via desktop").await;
    assert_eq!(e["parse_mode"], "HTML");
    assert_eq!(e["reply_markup"], json!({"inline_keyboard": []}));
    app.stop().await;
}

#[tokio::test]
async fn hostile_names_are_escaped_in_final_edits() {
    const EVE: Person = Person {
        id: 1003,
        first_name: "<script>alert(1)</script> & Eve",
    };
    let (app, tg) = start_with(Mode::Webhook, |s| {
        s.telegram.chats = vec![PRIVATE];
        s.telegram.approvers.push(EVE.id as u64);
    })
    .await;
    // A Telegram user's name.
    let a = app.create_bash("toolu_eve", "make a").await;
    let pa = prompt(&tg, PRIVATE, "make a").await;
    assert_eq!(
        tap_on(&app, &tg, EVE, &pa, &pa.button("✅ Allow")).await,
        "Allowed"
    );
    let e = edited(&tg, PRIVATE, pa.message_id, "Allowed by").await;
    let t = e["text"].as_str().unwrap();
    assert!(
        t.contains("Allowed by &lt;script&gt;alert(1)&lt;/script&gt; &amp; Eve via telegram"),
        "{t}"
    );
    assert_eq!(
        status(&app, &a).await["resolution"]["by"],
        "<script>alert(1)</script> & Eve"
    );
    // A desktop `by` and reason.
    let b = app.create_bash("toolu_desk_hostile", "make b").await;
    let pb = prompt(&tg, PRIVATE, "make b").await;
    app.respond(
        &b,
        &json!({"decision": "deny", "by": "<b>Mallory</b> & co", "via": "desktop",
                "message": "</pre> & <i>nope"}),
    )
    .await;
    let e = edited(&tg, PRIVATE, pb.message_id, "Denied by").await;
    let t = e["text"].as_str().unwrap();
    assert!(
        t.contains("Denied by &lt;b&gt;Mallory&lt;/b&gt; &amp; co via desktop"),
        "{t}"
    );
    assert!(t.contains("&lt;/pre&gt; &amp; &lt;i&gt;nope"), "{t}");
    app.stop().await;
}

#[tokio::test]
async fn a_send_that_finally_fails_is_counted() {
    let (app, tg) = start_with(Mode::Webhook, |s| s.telegram.chats = vec![GROUP]).await;
    tg.fail(
        "sendMessage",
        Fail::Status(400, "Bad Request: chat not found".into()),
        1,
    );
    app.create_bash("toolu_gone", "ls").await;
    tg.wait_n("sendMessage", 1).await;
    app.metrics_with("imrelay_outbox_deliveries_total{channel=\"telegram\",result=\"failed\"} 1")
        .await;
    // Not retried: the chat does not exist.
    app.outbox_idle().await;
    assert_eq!(tg.calls("sendMessage").len(), 1);
    app.stop().await;
}

// ---- restarts -----------------------------------------------------------------------------

#[tokio::test]
async fn an_old_button_still_works_after_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("imrelay.db");
    let (s, tg) = setup(Mode::Webhook, |_| {}).await;

    let first = spawn_on(s.clone(), open_sqlite(&path).await).await;
    let id = first.create_bash("toolu_restart", "reboot").await;
    let p = prompt(&tg, PRIVATE, "reboot").await;
    prompt(&tg, GROUP, "reboot").await;
    first.stop().await;

    let second = spawn_on(s, open_sqlite(&path).await).await;
    assert_eq!(status(&second, &id).await["status"], "pending");
    assert_eq!(
        tap_on(&second, &tg, ALICE, &p, &p.button("✅ Allow")).await,
        "Allowed"
    );
    assert_eq!(status(&second, &id).await["resolution"]["via"], "telegram");
    // Both copies, posted before the restart, are edited after it.
    edited(&tg, PRIVATE, p.message_id, "Allowed by Alice via telegram").await;
    let group = tg
        .calls("sendMessage")
        .iter()
        .find(|c| c.params["chat_id"] == GROUP)
        .map(Posted::from)
        .unwrap();
    edited(
        &tg,
        GROUP,
        group.message_id,
        "Allowed by Alice via telegram",
    )
    .await;
    // Not posted again after the restart.
    assert_eq!(
        tg.calls("sendMessage")
            .iter()
            .filter(|c| c.params["text"].as_str().unwrap().contains("reboot"))
            .count(),
        2
    );
    second.stop().await;
}

#[tokio::test]
async fn with_the_store_lost_old_buttons_are_not_valid() {
    let (s, tg) = setup(Mode::Webhook, |s| s.telegram.chats = vec![PRIVATE]).await;
    let first = spawn_on(s.clone(), Arc::new(MemoryStore::new())).await;
    first.create_bash("toolu_lost", "make lost").await;
    let p = prompt(&tg, PRIVATE, "make lost").await;
    first.stop().await;
    // A new, empty store: a new button key, so the old button's signature fails.
    let second = spawn_on(s, Arc::new(MemoryStore::new())).await;
    assert_eq!(
        tap_on(&second, &tg, ALICE, &p, &p.button("✅ Allow")).await,
        "This button is not valid."
    );
    second.stop().await;
}

#[tokio::test]
async fn an_old_button_cannot_act_on_an_id_used_again_after_pruning() {
    let (app, tg) = start_with(Mode::Webhook, |s| s.telegram.chats = vec![PRIVATE]).await;
    let id = app.create_bash("toolu_again", "make again").await;
    let old = prompt(&tg, PRIVATE, "make again").await;
    assert_eq!(app.delete(&format!("/v1/interactions/{id}")).await.0, 200);
    edited(&tg, PRIVATE, old.message_id, "Cancelled").await;
    assert_eq!(app.prune_all().await, 1);
    // The same id again, created in a later millisecond: a new interaction, a new prompt.
    app.create_bash("toolu_again", "make again").await;
    let posts = tg
        .wait_for("sendMessage", |calls| {
            calls
                .iter()
                .filter(|c| {
                    c.params["text"]
                        .as_str()
                        .unwrap_or("")
                        .contains("make again")
                })
                .count()
                == 2
        })
        .await;
    let new = Posted::from(posts.last().unwrap());
    assert_ne!(new.message_id, old.message_id);
    assert_ne!(new.button("✅ Allow"), old.button("✅ Allow"));
    // A button left on the old message (say its final edit never landed) is told it is gone,
    // and the new interaction stays pending.
    assert_eq!(
        tap_on(&app, &tg, ALICE, &old, &old.button("✅ Allow")).await,
        "This request no longer exists"
    );
    assert_eq!(status(&app, &id).await["status"], "pending");
    // The new prompt's buttons answer it.
    assert_eq!(
        tap_on(&app, &tg, ALICE, &new, &new.button("✅ Allow")).await,
        "Allowed"
    );
    assert_eq!(status(&app, &id).await["resolution"]["by"], "Alice");
    app.stop().await;
}

#[tokio::test]
async fn a_keyboard_from_before_incarnation_handles_keeps_working_and_is_rerendered_with_them() {
    use base64::Engine;
    use hmac::{Hmac, Mac};
    use imrelay::channels::telegram::callback::{Action, Codec, SECRET_NAME};

    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("imrelay.db");
    let (s, tg) = setup(Mode::Webhook, |s| s.telegram.chats = vec![PRIVATE]).await;
    let app = spawn_on(s, open_sqlite(&path).await).await;
    let id = create(
        &app,
        json!({"tool_name": "AskUserQuestion", "input": {"questions": [
            {"question": "Which toppings?", "header": "Toppings", "multiSelect": true,
             "options": [{"label": "Cheese"}, {"label": "Ham"}]}]}}),
    )
    .await;
    let p = prompt(&tg, PRIVATE, "Which toppings?").await;
    let current = p.button("📨 Submit")[4..15].to_string();
    // Make the database look as an earlier version left it: the prompt's only handle is one
    // of the id alone.
    let key = app.store.secret(SECRET_NAME).await.unwrap();
    let mut mac = <Hmac<sha2::Sha256> as Mac>::new_from_slice(&key).unwrap();
    mac.update(b"imrelay/telegram/handle/v1\n");
    mac.update(id.as_bytes());
    let legacy =
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(&mac.finalize().into_bytes()[..8]);
    let conn = rusqlite::Connection::open(&path).unwrap();
    conn.busy_timeout(Duration::from_secs(5)).unwrap();
    let changed = conn
        .execute(
            "UPDATE channel_messages SET message_ref = ?1 WHERE channel = 'telegram:handle'",
            [&legacy],
        )
        .unwrap();
    assert_eq!(changed, 1);
    drop(conn);

    // A button of the old kind works...
    let toggle = Codec::new(key).encode(&legacy, Action::Toggle { q: 0, o: 0 });
    assert_eq!(tap_on(&app, &tg, ALICE, &p, &toggle).await, "☑ Cheese");
    // ...and the keyboard it re-renders carries the new handle, which works too.
    let e = edited(&tg, PRIVATE, p.message_id, "Which toppings?").await;
    let rerendered = Posted {
        params: e,
        ..p.clone()
    };
    assert!(
        rerendered
            .buttons()
            .iter()
            .all(|(_, data)| data[4..15] == current),
        "{:?}",
        rerendered.buttons()
    );
    assert_eq!(
        tap_on(
            &app,
            &tg,
            ALICE,
            &rerendered,
            &rerendered.button("📨 Submit")
        )
        .await,
        "Answered"
    );
    app.stop().await;
}
