//! Who may answer, races between answers, and answers given elsewhere editing Telegram.

use super::*;

// ---- who may answer, and races ------------------------------------------------------------

#[tokio::test]
async fn a_non_approver_tap_changes_nothing() {
    let (app, tg) = start(Mode::Webhook).await;
    let id = app.create_bash("toolu_mallory", "cat /etc/shadow").await;
    let p = prompt(&tg, GROUP, "cat /etc/shadow").await;
    assert_eq!(
        tap_on(&app, &tg, MALLORY, &p, &p.button("✅ Allow")).await,
        "You are not an approver for this"
    );
    // Replies do not work either.
    deliver(
        &app,
        &text(
            tg.next_update_id(),
            MALLORY,
            GROUP,
            "allow",
            Some(p.message_id),
        ),
    )
    .await;
    assert_eq!(status(&app, &id).await["status"], "pending");
    let m = app.metrics().await;
    assert!(
        m.contains("imrelay_telegram_refused_total{reason=\"not_approver\"} 2"),
        "{m}"
    );
    // Counted with every channel's refusals too; bound to an interaction, so never suppressed.
    assert!(
        m.contains("imrelay_answer_refusals_total{channel=\"telegram\"} 2"),
        "{m}"
    );
    assert!(
        m.lines()
            .filter(|l| l.starts_with("imrelay_refusals_suppressed_total{"))
            .all(|l| l.ends_with(" 0")),
        "{m}"
    );
    // Both attempts are in the audit trail, naming Mallory by her Telegram id.
    let refused: Vec<Value> = audit_of(&app, &id)
        .await
        .into_iter()
        .filter(|e| e["action"] == "refused")
        .collect();
    assert_eq!(refused.len(), 2, "{refused:?}");
    for r in &refused {
        assert_eq!(r["actor"], "Mallory (tg:666)");
        assert_eq!(r["channel"], "telegram");
        assert_eq!(r["outcome"], "refused");
        assert!(
            r["detail"]
                .as_str()
                .unwrap()
                .contains("not in telegram.approvers"),
            "{r}"
        );
    }
    assert!(tg.calls("editMessageText").is_empty());
    // Her reply got no answer: strangers cannot make the bot talk.
    assert_eq!(notices(&tg, GROUP), Vec::<String>::new());
    app.stop().await;
}

#[tokio::test]
async fn strangers_get_little_out_of_the_bot_and_approvers_everything() {
    let (app, tg) = start(Mode::Webhook).await;
    tg.wait_n("setWebhook", 1).await;
    let stranger_chat = MALLORY.id;
    let say = |who: Person, chat: i64, body: &str| text(tg.next_update_id(), who, chat, body, None);
    // Small talk from a stranger: no answer at all.
    deliver(&app, &say(MALLORY, stranger_chat, "hello?")).await;
    assert_eq!(notices(&tg, stranger_chat), Vec::<String>::new());
    // Commands: one answer, then a cooldown for that chat.
    for _ in 0..3 {
        deliver(&app, &say(MALLORY, stranger_chat, "/whoami")).await;
        deliver(&app, &say(MALLORY, stranger_chat, "/nonsense")).await;
    }
    let answered = notices(&tg, stranger_chat);
    assert_eq!(answered.len(), 1, "{answered:?}");
    assert!(answered[0].contains("<code>666</code>"));
    // Approvers are never limited.
    for _ in 0..3 {
        deliver(&app, &say(ALICE, PRIVATE, "/whoami")).await;
    }
    deliver(&app, &say(ALICE, PRIVATE, "hello?")).await;
    let to_alice = notices(&tg, PRIVATE);
    assert_eq!(to_alice.len(), 4, "{to_alice:?}");
    assert!(to_alice[3].contains("/pending"), "{to_alice:?}");
    app.stop().await;
}

#[tokio::test]
async fn double_taps_and_racing_approvers_have_one_winner_and_others_are_told() {
    let (app, tg) = start(Mode::Webhook).await;
    let id = app
        .create_bash("toolu_race", "kubectl delete ns prod")
        .await;
    let p = prompt(&tg, GROUP, "kubectl delete ns prod").await;
    let allow = p.button("✅ Allow");
    let deny = p.button("❌ Deny");
    let (ua, ub) = (tg.next_update_id(), tg.next_update_id());
    let (tap_a, tap_b) = (
        tap(ua, ALICE, GROUP, p.message_id, &allow),
        tap(ub, BOB, GROUP, p.message_id, &deny),
    );
    let (sa, sb) = tokio::join!(deliver(&app, &tap_a), deliver(&app, &tap_b));
    assert_eq!((sa, sb), (StatusCode::OK, StatusCode::OK));
    let (ta, tb) = (toast(&tg, ua).await, toast(&tg, ub).await);
    let body = status(&app, &id).await;
    let winner = body["resolution"]["by"].as_str().unwrap().to_string();
    match winner.as_str() {
        "Alice" => {
            assert_eq!(ta, "Allowed");
            assert_eq!(tb, "Already allowed by Alice via telegram");
        }
        "Bob" => {
            assert_eq!(tb, "Denied");
            assert_eq!(ta, "Already denied by Bob via telegram");
        }
        other => panic!("unexpected winner {other}"),
    }
    // A double tap by the winner is told too.
    let again = tap_on(&app, &tg, ALICE, &p, &allow).await;
    assert!(again.starts_with("Already"), "{again}");
    app.stop().await;
}

#[tokio::test]
async fn forged_and_malformed_callback_data_are_refused() {
    let (app, tg) = start(Mode::Webhook).await;
    let a = app.create_bash("toolu_forge_a", "echo a").await;
    let b = app.create_bash("toolu_forge_b", "echo b").await;
    let pa = prompt(&tg, PRIVATE, "echo a").await;
    let pb = prompt(&tg, PRIVATE, "echo b").await;
    let deny_a = pa.button("❌ Deny");
    // The action altered without the key: deny turned into allow.
    let forged = format!("{}a{}", &deny_a[..1], &deny_a[2..]);
    // One character of the MAC changed.
    let mut mac_flipped = deny_a.clone().into_bytes();
    mac_flipped[20] = if mac_flipped[20] == b'A' { b'B' } else { b'A' };
    let mut cases = vec![
        "perm:allow".to_string(),
        "".to_string(),
        forged,
        "x".repeat(64),
        String::from_utf8(mac_flipped).unwrap(),
    ];
    cases.push(deny_a.replace(&deny_a[4..15], "AAAAAAAAAAA"));
    for data in &cases {
        let t = tap_on(&app, &tg, ALICE, &pa, data).await;
        assert_eq!(t, "This button is not valid.", "{data:?}");
    }
    // A genuine button of B, sent from A's message, is refused too.
    let t = tap_on(&app, &tg, ALICE, &pa, &pb.button("✅ Allow")).await;
    assert_eq!(t, "This button is not valid.");
    assert_eq!(status(&app, &a).await["status"], "pending");
    assert_eq!(status(&app, &b).await["status"], "pending");
    let m = app.metrics().await;
    assert!(
        m.contains(&format!(
            "imrelay_telegram_refused_total{{reason=\"bad_data\"}} {}",
            cases.len()
        )),
        "{m}"
    );
    assert!(
        m.contains("imrelay_telegram_refused_total{reason=\"foreign_message\"} 1"),
        "{m}"
    );
    app.stop().await;
}

// ---- resolution elsewhere edits Telegram --------------------------------------------------

#[tokio::test]
async fn a_desktop_answer_edits_every_telegram_copy() {
    let (app, tg) = start(Mode::Webhook).await;
    let id = app.create_bash("toolu_desk", "npm publish").await;
    let private = prompt(&tg, PRIVATE, "npm publish").await;
    let group = prompt(&tg, GROUP, "npm publish").await;
    let (s, body) = app
        .respond(&id, &json!({"decision": "deny", "message": "wrong branch", "by": "Carol", "via": "desktop"}))
        .await;
    assert_eq!(s, StatusCode::OK, "{body}");
    for p in [&private, &group] {
        let e = edited(&tg, p.chat, p.message_id, "Denied by Carol via desktop").await;
        assert!(e["text"].as_str().unwrap().contains("wrong branch"));
        assert_eq!(e["reply_markup"], json!({"inline_keyboard": []}));
    }
    // A late tap is told who won.
    assert_eq!(
        tap_on(&app, &tg, ALICE, &private, &private.button("✅ Allow")).await,
        "Already denied by Carol via desktop"
    );
    app.stop().await;
}

#[tokio::test]
async fn expiry_edits_the_message_and_late_taps_are_told() {
    let (app, tg) = start(Mode::Webhook).await;
    let id = create(
        &app,
        json!({"tool_name": "Bash", "input": {"command": "sleep 1"}, "timeout_secs": 1}),
    )
    .await;
    let p = prompt(&tg, PRIVATE, "sleep 1").await;
    edited(&tg, PRIVATE, p.message_id, "Expired — denied automatically").await;
    assert_eq!(status(&app, &id).await["resolution"]["outcome"], "expired");
    assert_eq!(
        tap_on(&app, &tg, ALICE, &p, &p.button("✅ Allow")).await,
        "Expired — denied automatically"
    );
    app.stop().await;
}

#[tokio::test]
async fn a_resolution_during_the_post_is_shown_as_soon_as_the_post_lands() {
    let (app, tg) = start_with(Mode::Webhook, |s| s.telegram.chats = vec![PRIVATE]).await;
    tg.hold("sendMessage");
    let id = app
        .create_bash("toolu_inflight", "rm -rf node_modules")
        .await;
    tg.wait_n("sendMessage", 1).await;
    // Resolved while the post is in flight: the resolved job finds no message yet.
    let (s, _) = app
        .respond(
            &id,
            &json!({"decision": "allow", "by": "Carol", "via": "desktop"}),
        )
        .await;
    assert_eq!(s, StatusCode::OK);
    // The resolution's job has run and finished; only the held post is left.
    outbox_holds(&app.store, 1).await;
    tg.release("sendMessage");
    let p = prompt(&tg, PRIVATE, "rm -rf node_modules").await;
    edited(&tg, PRIVATE, p.message_id, "Allowed by Carol via desktop").await;
    app.stop().await;
}
