//! Digests: past `telegram.digest_after` pending for one chat, one message per session with
//! Review, Approve all and Deny all; the "all" answers confirmed, bound to what was listed.

use super::*;

/// Creates a Bash call in session `session` (in /home/dev/shop) with `command`.
async fn create_in(app: &TestApp, id: &str, session: &str, command: &str) -> String {
    create(
        app,
        json!({"id": id, "tool_name": "Bash", "input": {"command": command},
               "session": session, "cwd": "/home/dev/shop"}),
    )
    .await
}

/// Telegram in webhook mode posting to the group alone, with digests past `after`.
async fn start_digests(after: u32) -> (TestApp, FakeTelegram) {
    start_with(Mode::Webhook, |s| {
        s.telegram.chats = vec![GROUP];
        s.telegram.digest_after = after;
    })
    .await
}

/// The newest text and buttons the group's message `id` shows (sent or edited) once its
/// text contains `marker`.
async fn shows(tg: &FakeTelegram, id: i64, marker: &str) -> Posted {
    for _ in 0..200 {
        let sent = tg
            .calls("sendMessage")
            .into_iter()
            .filter(|c| c.message_id == Some(id));
        let edits = tg
            .calls("editMessageText")
            .into_iter()
            .filter(|c| c.params["message_id"] == id);
        if let Some(last) = sent.chain(edits).last()
            && last.params["text"].as_str().unwrap_or("").contains(marker)
        {
            return Posted {
                chat: GROUP,
                message_id: id,
                text: last.params["text"].as_str().unwrap().to_string(),
                params: last.params.clone(),
            };
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("message {id} never showed {marker:?}");
}

/// Waits for the prompt of one interaction (not a digest) posted to the group whose text
/// contains `marker`.
async fn individual(tg: &FakeTelegram, marker: &str) -> Posted {
    let own = |c: &Call| {
        c.params["chat_id"] == GROUP
            && c.params["text"].as_str().unwrap_or("").contains(marker)
            && !c.params["text"]
                .as_str()
                .unwrap_or("")
                .contains("from session")
    };
    let calls = tg
        .wait_for("sendMessage", |calls| calls.iter().any(own))
        .await;
    Posted::from(calls.iter().find(|c| own(c)).unwrap())
}

/// Waits for the digest message whose text contains `marker`.
async fn digest(tg: &FakeTelegram, marker: &str) -> Posted {
    prompt(tg, GROUP, marker).await
}

#[tokio::test]
async fn many_pending_in_one_chat_become_one_digest_per_session_approved_all_after_confirming() {
    let (app, tg) = start_digests(2).await;
    // The first two are posted on their own.
    let first = create_in(&app, "toolu_d1", "s-1", "cargo build").await;
    create_in(&app, "toolu_d2", "s-1", "cargo test").await;
    let p1 = prompt(&tg, GROUP, "cargo build").await;
    prompt(&tg, GROUP, "cargo test").await;
    // Past two pending, the next ones of the session are held for one digest message.
    let mut held = Vec::new();
    for (n, cmd) in ["npm ci", "npm run lint", "npm test"].iter().enumerate() {
        held.push(create_in(&app, &format!("toolu_h{n}"), "s-1", cmd).await);
    }
    let d = digest(&tg, "3 requests from session s-1 in /home/dev/shop").await;
    println!("digest as sent:\n{}\nbuttons: {:?}", d.text, d.buttons());
    assert!(
        d.text.contains("• Run: npm ci") && d.text.contains("• Run: npm test"),
        "{}",
        d.text
    );
    let labels: Vec<String> = d.buttons().into_iter().map(|(t, _)| t).collect();
    assert_eq!(labels, ["Review", "Approve all", "Deny all"]);
    let individual = tg
        .calls("sendMessage")
        .iter()
        .filter(|c| c.params["text"].as_str().unwrap_or("").contains("npm "))
        .count();
    assert_eq!(individual, 1, "only the digest names them");
    let seen = d.button("Approve all");

    // Another one arrives: the same message is edited to list four.
    held.push(create_in(&app, "toolu_h3", "s-1", "npm publish").await);
    let d4 = shows(&tg, d.message_id, "4 requests from session s-1").await;
    // "Approve all" as it was seen before the fourth arrived is refused, and answers nothing.
    let stale = tap_on(&app, &tg, ALICE, &d, &seen).await;
    assert!(
        stale.starts_with("This list changed since you saw it (now 4)"),
        "{stale}"
    );
    for id in &held {
        assert_eq!(status(&app, id).await["status"], "pending");
    }
    // Someone who may not answer is refused.
    let refused = tap_on(&app, &tg, MALLORY, &d4, &d4.button("Approve all")).await;
    assert_eq!(refused, "You are not an approver for this");

    // Approve all asks first; the confirmation lists what it answers.
    let asked = tap_on(&app, &tg, ALICE, &d4, &d4.button("Approve all")).await;
    assert_eq!(asked, "Confirm on the message");
    let confirm = shows(&tg, d.message_id, "Approve 4 requests?").await;
    println!(
        "confirmation:\n{}\nbuttons: {:?}",
        confirm.text,
        confirm.buttons()
    );
    let labels: Vec<String> = confirm.buttons().into_iter().map(|(t, _)| t).collect();
    assert_eq!(labels, ["Yes, approve 4", "Cancel"]);
    let done = tap_on(
        &app,
        &tg,
        ALICE,
        &confirm,
        &confirm.button("Yes, approve 4"),
    )
    .await;
    assert_eq!(done, "Approved 4");
    for id in &held {
        let body = status(&app, id).await;
        assert_eq!(body["resolution"]["outcome"], "allowed", "{body}");
        assert_eq!(body["resolution"]["by"], "Alice");
        assert_eq!(body["resolution"]["via"], "telegram");
    }
    // The ones posted on their own are not in the digest: still pending.
    assert_eq!(status(&app, &first).await["status"], "pending");
    let closed = shows(&tg, d.message_id, "all answered").await;
    assert!(closed.buttons().is_empty(), "{:?}", closed.params);
    // The "Yes" tapped again answers nothing more.
    let again = tap_on(
        &app,
        &tg,
        ALICE,
        &confirm,
        &confirm.button("Yes, approve 4"),
    )
    .await;
    assert_eq!(
        again,
        "This digest is closed: its requests were all answered"
    );
    // And the individual message is still what its own answer updates.
    tap_on(&app, &tg, BOB, &p1, &p1.button("✅ Allow")).await;
    edited(&tg, GROUP, p1.message_id, "Allowed by Bob via telegram").await;
    app.stop().await;
}

#[tokio::test]
async fn review_posts_them_one_by_one_and_deny_all_updates_those_copies_too() {
    let (app, tg) = start_digests(1).await;
    create_in(&app, "toolu_r0", "s-2", "ls").await;
    prompt(&tg, GROUP, "ls").await;
    let mut held = Vec::new();
    for (n, cmd) in ["rm -rf build", "rm -rf dist", "rm -rf target"]
        .iter()
        .enumerate()
    {
        held.push(create_in(&app, &format!("toolu_r{}", n + 1), "s-2", cmd).await);
    }
    // A question in the same session: Deny all declines it as well.
    held.push(
        create(
            &app,
            json!({"id": "toolu_rq", "tool_name": "AskUserQuestion", "input": questions_input(),
                   "session": "s-2", "cwd": "/home/dev/shop"}),
        )
        .await,
    );
    let d = digest(&tg, "4 requests from session s-2").await;
    assert!(d.text.contains("• Question"), "{}", d.text);
    let t = tap_on(&app, &tg, ALICE, &d, &d.button("Review")).await;
    assert_eq!(t, "Request 1 of 4 is posted below on its own");
    let one = individual(&tg, "rm -rf build").await;
    assert!(one.buttons().iter().any(|(l, _)| l == "✅ Allow"));
    let t = tap_on(&app, &tg, ALICE, &d, &d.button("Review")).await;
    assert_eq!(t, "Request 2 of 4 is posted below on its own");
    individual(&tg, "rm -rf dist").await;

    // Cancel goes back to the list, answering nothing.
    tap_on(&app, &tg, BOB, &d, &d.button("Deny all")).await;
    let confirm = shows(&tg, d.message_id, "Deny 4 requests?").await;
    assert_eq!(
        tap_on(&app, &tg, BOB, &confirm, &confirm.button("Cancel")).await,
        "Cancelled: nothing was answered"
    );
    let list = shows(&tg, d.message_id, "4 requests from session s-2").await;
    assert_eq!(list.buttons().len(), 3);
    for id in &held {
        assert_eq!(status(&app, id).await["status"], "pending");
    }
    // Deny all, confirmed: every one is denied, each on its own.
    tap_on(&app, &tg, BOB, &d, &d.button("Deny all")).await;
    let confirm = shows(&tg, d.message_id, "Deny 4 requests?").await;
    assert_eq!(
        tap_on(&app, &tg, BOB, &confirm, &confirm.button("Yes, deny 4")).await,
        "Denied 4"
    );
    for id in &held {
        assert_eq!(status(&app, id).await["resolution"]["outcome"], "denied");
    }
    // The copy Review posted is updated as any copy is.
    edited(&tg, GROUP, one.message_id, "Denied by Bob via telegram").await;
    shows(&tg, d.message_id, "all answered").await;
    app.stop().await;
}

#[tokio::test]
async fn digest_buttons_are_bound_to_their_chat_and_refuse_forgery() {
    let (app, tg) = start_digests(1).await;
    create_in(&app, "toolu_f0", "s-3", "echo 0").await;
    prompt(&tg, GROUP, "echo 0").await;
    create_in(&app, "toolu_f1", "s-3", "echo 1").await;
    create_in(&app, "toolu_f2", "s-3", "echo 2").await;
    let d = digest(&tg, "2 requests from session s-3").await;
    let data = d.button("Approve all");
    // Altered: Deny all's code with Approve all's MAC.
    let forged = format!("Dd{}", &data[2..]);
    assert_eq!(
        tap_on(&app, &tg, ALICE, &d, &forged).await,
        "This button is not valid."
    );
    // The same data sent from another chat's message.
    let elsewhere = Posted {
        chat: PRIVATE,
        ..d.clone()
    };
    assert_eq!(
        tap_on(&app, &tg, ALICE, &elsewhere, &data).await,
        "This button is not valid."
    );
    for id in ["toolu_f1", "toolu_f2"] {
        assert_eq!(status(&app, id).await["status"], "pending");
    }
    app.stop().await;
}

/// A burst to one chat that Telegram's pace (one message a second to a person) cannot post
/// before the deadlines is gathered into a digest at once, with digests otherwise off: every
/// request is posted on its own or listed in the digest, none is left to expire unseen.
#[tokio::test]
async fn a_burst_the_pace_cannot_post_in_time_is_gathered_into_a_digest_not_left_to_expire() {
    let (app, tg) = start_with(Mode::Webhook, |s| {
        s.telegram.chats = vec![PRIVATE];
    })
    .await;
    let n = 30;
    let created = futures_util::future::join_all((0..n).map(|k| {
        create(
            &app,
            json!({"tool_name": "Bash", "input": {"command": format!("burst-{k}-end")},
                   "session": "s-burst", "cwd": "/home/dev/shop", "timeout_secs": 20}),
        )
    }))
    .await;
    assert_eq!(created.len(), n);
    let digest_title = regex::Regex::new(r"^<b>(\d+) requests? from session s-burst").unwrap();
    let (mut posted, mut listed) = (0, 0);
    for _ in 0..600 {
        let sent = tg.calls("sendMessage");
        let edited = tg.calls("editMessageText");
        let text = |c: &Call| c.params["text"].as_str().unwrap_or("").to_string();
        posted = sent
            .iter()
            .filter(|c| text(c).contains("burst-") && !text(c).contains("from session"))
            .count();
        listed = sent
            .iter()
            .chain(edited.iter())
            .filter_map(|c| {
                digest_title
                    .captures(&text(c))
                    .map(|m| m[1].parse::<usize>().unwrap())
            })
            .max()
            .unwrap_or(0);
        if posted + listed == n {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(
        posted + listed,
        n,
        "{posted} posted, {listed} in the digest"
    );
    assert!(
        listed > 0 && posted > 0,
        "{posted} posted, {listed} in the digest"
    );
    // Nothing was posted twice: the gathered ones never got a message of their own.
    let sent = tg.calls("sendMessage");
    for k in 0..n {
        let own = sent
            .iter()
            .filter(|c| {
                let t = c.params["text"].as_str().unwrap_or("");
                t.contains(&format!("burst-{k}-end")) && !t.contains("from session")
            })
            .count();
        assert!(own <= 1, "burst-{k} posted {own} times");
    }
    app.stop().await;
}
