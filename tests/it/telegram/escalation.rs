//! Route escalation on Telegram, on a paused clock: nothing is posted to the escalation's
//! chat before its time; after it, the request is posted there too, saying why; the first
//! copy still answers it, and so may the escalation's approvers; an answer before the time
//! means no escalation at all.

use std::time::Duration;

use imrelay::channels::telegram::Mode;
use imrelay::config::teams::{EscalateTo, PersonSettings, RouteSettings};

use super::*;

const ESCALATED: &str = "escalated: nobody on shop answered in 5 min";

/// The shop goes to the group, answered by Alice; after five minutes unanswered it goes to
/// the private chat too, and Bob may answer it as well.
fn teams(s: &mut Settings) {
    s.people = vec![
        PersonSettings {
            ids: imrelay::config::teams::PerChannel::from([(
                "telegram".into(),
                imrelay::config::teams::written(vec![ALICE.id as u64]),
            )]),
            name: "alice".into(),
            ..Default::default()
        },
        PersonSettings {
            ids: imrelay::config::teams::PerChannel::from([(
                "telegram".into(),
                imrelay::config::teams::written(vec![BOB.id as u64]),
            )]),
            name: "bob".into(),
            ..Default::default()
        },
    ];
    s.routes = vec![RouteSettings {
        places: imrelay::config::teams::PerChannel::from([(
            "telegram".into(),
            imrelay::config::teams::written(vec![GROUP]),
        )]),
        name: "shop".into(),
        cwd: vec!["/srv/shop/**".into()],
        approvers: vec!["alice".into()],
        timeout_secs: Some(3600),
        escalate_after_secs: Some(300),
        escalate_to: Some(EscalateTo {
            places: imrelay::config::teams::PerChannel::from([(
                "telegram".into(),
                imrelay::config::teams::written(vec![PRIVATE]),
            )]),
            approvers: vec!["bob".into()],
            ..Default::default()
        }),
        ..Default::default()
    }];
}

fn call(id: &str, command: &str) -> Value {
    json!({"id": id, "tool_name": "Bash", "input": {"command": command},
           "agent": "claude-code", "cwd": "/srv/shop"})
}

/// Moves the clock `secs` forward (the registry's timers fire as if that time had passed),
/// then lets it run again for the HTTP that follows.
async fn jump(secs: u64) {
    tokio::time::pause();
    tokio::time::advance(Duration::from_secs(secs)).await;
    tokio::time::resume();
    for _ in 0..50 {
        tokio::task::yield_now().await;
    }
}

/// Waits until every planned delivery is done, so what was not sent never will be.
async fn outbox_settled(app: &TestApp) {
    eventually("the outbox to settle", || async {
        let backlog = app.store.job_backlog().await.unwrap();
        backlog.iter().all(|(_, n)| *n == 0).then_some(())
    })
    .await;
}

fn sent_to(tg: &FakeTelegram, chat: i64, marker: &str) -> usize {
    tg.calls("sendMessage")
        .iter()
        .filter(|c| {
            c.params["chat_id"] == chat && c.params["text"].as_str().unwrap_or("").contains(marker)
        })
        .count()
}

#[tokio::test]
async fn an_unanswered_request_escalates_once_and_every_copy_still_answers() {
    let (app, tg) = start_with(Mode::Webhook, teams).await;
    create(&app, call("esc-1", "make shop-release")).await;
    let first = prompt(&tg, GROUP, "make shop-release").await;
    assert!(!first.text.contains("escalated"), "{}", first.text);
    // Bob may not answer yet: the route is Alice's.
    assert_eq!(
        tap_on(&app, &tg, BOB, &first, &first.button("✅ Allow")).await,
        "This request came through route \"shop\": only its approvers can answer it"
    );
    outbox_settled(&app).await;

    jump(299).await;
    outbox_settled(&app).await;
    assert_eq!(sent_to(&tg, PRIVATE, "make shop-release"), 0);
    assert!(status(&app, "esc-1").await.get("escalated_at").is_none());

    jump(2).await;
    let escalated = prompt(&tg, PRIVATE, "make shop-release").await;
    assert!(escalated.text.contains(ESCALATED), "{}", escalated.text);
    assert!(escalated.text.contains("route shop"), "{}", escalated.text);
    let st = status(&app, "esc-1").await;
    assert_eq!(st["status"], "pending");
    assert!(st["escalated_at"].is_string(), "{st}");
    // Once: more time changes nothing, and the group got no second copy.
    jump(600).await;
    outbox_settled(&app).await;
    assert_eq!(sent_to(&tg, PRIVATE, "make shop-release"), 1);
    assert_eq!(sent_to(&tg, GROUP, "make shop-release"), 1);
    let audit = audit_of(&app, "esc-1").await;
    assert_eq!(
        audit.iter().filter(|e| e["action"] == "escalated").count(),
        1,
        "{audit:?}"
    );

    // The first copy stays live: Alice answers there, and both copies show the outcome.
    assert_eq!(
        tap_on(&app, &tg, ALICE, &first, &first.button("✅ Allow")).await,
        "Allowed"
    );
    let done = status(&app, "esc-1").await;
    assert_eq!(done["resolution"]["by"], "alice");
    edited(&tg, PRIVATE, escalated.message_id, "Allowed").await;
    edited(&tg, GROUP, first.message_id, "Allowed").await;
    app.stop().await;
}

#[tokio::test]
async fn an_escalation_approver_answers_on_the_escalated_copy() {
    let (app, tg) = start_with(Mode::Webhook, teams).await;
    create(&app, call("esc-2", "make shop-migrate")).await;
    prompt(&tg, GROUP, "make shop-migrate").await;
    outbox_settled(&app).await;
    jump(301).await;
    let escalated = prompt(&tg, PRIVATE, "make shop-migrate").await;
    assert_eq!(
        tap_on(&app, &tg, BOB, &escalated, &escalated.button("❌ Deny")).await,
        "Denied"
    );
    let done = status(&app, "esc-2").await;
    assert_eq!(done["resolution"]["outcome"], "denied");
    assert_eq!(done["resolution"]["by"], "bob");
    app.stop().await;
}

#[tokio::test]
async fn a_request_answered_in_time_does_not_escalate() {
    let (app, tg) = start_with(Mode::Webhook, teams).await;
    create(&app, call("esc-3", "make shop-test")).await;
    let first = prompt(&tg, GROUP, "make shop-test").await;
    jump(120).await;
    assert_eq!(
        tap_on(&app, &tg, ALICE, &first, &first.button("✅ Allow")).await,
        "Allowed"
    );
    outbox_settled(&app).await;
    jump(600).await;
    outbox_settled(&app).await;
    assert_eq!(sent_to(&tg, PRIVATE, "make shop-test"), 0);
    let st = status(&app, "esc-3").await;
    assert!(st.get("escalated_at").is_none(), "{st}");
    assert!(
        !audit_of(&app, "esc-3")
            .await
            .iter()
            .any(|e| e["action"] == "escalated")
    );
    app.stop().await;
}
