//! Quiet hours on a chat channel, against the fake Bot API on a paused clock: a route's
//! direct message to a person in their quiet hours is not sent while they last (here they
//! last past the deadline, so it is never sent), the group's copy and another person's
//! direct message go at once, and an escalation's direct message reaches a person in their
//! quiet hours only when its route says `through_quiet`.

use std::time::Duration;

use imrelay::channels::telegram::Mode;
use imrelay::config::teams::{EscalateTo, PerChannel, PersonSettings, RouteSettings, written};

use super::*;

/// Quiet hours around now, in UTC: from an hour ago to three hours on (past a one-hour
/// deadline).
fn quiet_now() -> String {
    let now = jiff::Timestamp::now().to_zoned(jiff::tz::TimeZone::UTC);
    let h = i32::from(now.hour());
    format!("{:02}:00-{:02}:00", (h + 23) % 24, (h + 3) % 24)
}

fn person(name: &str, id: i64, quiet: &str) -> PersonSettings {
    PersonSettings {
        name: name.into(),
        ids: PerChannel::from([("telegram".into(), written(vec![id as u64]))]),
        quiet: quiet.into(),
        time_zone: if quiet.is_empty() { "" } else { "UTC" }.into(),
        ..Default::default()
    }
}

/// Carol's Telegram id (and private chat).
const CAROL: i64 = 1003;

/// Alice and Carol (both quiet now) and Bob; the route messages Alice and Bob directly, and
/// after five minutes escalates to Carol, through her quiet hours (`through` false: not).
fn teams(s: &mut Settings, through: bool) {
    s.telegram.chats.extend([BOB.id, CAROL]);
    s.people = vec![
        person("alice", ALICE.id, &quiet_now()),
        person("bob", BOB.id, ""),
        person("carol", CAROL, &quiet_now()),
    ];
    s.routes = vec![RouteSettings {
        name: "shop".into(),
        places: PerChannel::from([("telegram".into(), written(vec![GROUP]))]),
        direct: vec!["alice".into(), "bob".into()],
        approvers: vec!["alice".into(), "bob".into()],
        timeout_secs: Some(3600),
        escalate_after_secs: Some(300),
        escalate_to: Some(EscalateTo {
            direct: vec!["carol".into()],
            through_quiet: through,
            ..Default::default()
        }),
        ..Default::default()
    }];
}

fn call(id: &str, command: &str) -> Value {
    json!({"id": id, "tool_name": "Bash", "input": {"command": command},
           "agent": "claude-code", "cwd": "/srv/shop"})
}

/// Moves the registry's timers `secs` forward, then lets the clock run again.
async fn jump(secs: u64) {
    tokio::time::pause();
    tokio::time::advance(Duration::from_secs(secs)).await;
    tokio::time::resume();
    for _ in 0..50 {
        tokio::task::yield_now().await;
    }
}

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
async fn a_direct_message_waits_for_quiet_hours_and_an_escalation_through_them_does_not() {
    let (app, tg) = start_with(Mode::Webhook, |s| teams(s, true)).await;
    create(&app, call("quiet-1", "make shop-at-night")).await;
    prompt(&tg, GROUP, "make shop-at-night").await;
    prompt(&tg, BOB.id, "make shop-at-night").await;
    outbox_settled(&app).await;
    // Her hours last past the deadline: her direct message was never planned.
    assert_eq!(sent_to(&tg, ALICE.id, "make shop-at-night"), 0);

    // The escalation reaches Carol through her quiet hours, as its route says.
    jump(301).await;
    let escalated = prompt(&tg, CAROL, "make shop-at-night").await;
    assert!(escalated.text.contains("escalated"), "{}", escalated.text);
    app.stop().await;
}

#[tokio::test]
async fn an_escalation_waits_for_quiet_hours_unless_its_route_says_through_quiet() {
    let (app, tg) = start_with(Mode::Webhook, |s| teams(s, false)).await;
    create(&app, call("quiet-2", "make shop-overnight")).await;
    prompt(&tg, BOB.id, "make shop-overnight").await;
    jump(301).await;
    eventually("the escalation", || async {
        let st = status(&app, "quiet-2").await;
        st.get("escalated_at").map(|_| ())
    })
    .await;
    outbox_settled(&app).await;
    assert_eq!(sent_to(&tg, CAROL, "make shop-overnight"), 0);
    app.stop().await;
}
