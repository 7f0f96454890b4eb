//! Route escalation on Feishu, on a paused clock: the card goes to the person the route
//! escalates to only once nobody answered in time, saying so in the channel's locale, and
//! that person may then answer it; every card shows the outcome.

use std::time::Duration;

use imrelay::channels::feishu::settings::Locale;
use imrelay::config::teams::{EscalateTo, PersonSettings, RouteSettings};
use serde_json::Value;

use super::fake::FakeFeishu;
use super::{APPROVER, CHAT, DM, button_value, card_text, click, enable, event_id, post_callback};
use crate::support::{TestApp, eventually, spawn_with};

/// The shop's cards go to the team chat, answered by Alice; after five minutes unanswered
/// the card goes to Bob's direct messages too, and he may answer it.
fn teams(s: &mut imrelay::config::Settings) {
    s.people = vec![
        PersonSettings {
            ids: imrelay::config::teams::PerChannel::from([(
                "feishu".into(),
                imrelay::config::teams::written(vec![APPROVER]),
            )]),
            name: "alice".into(),
            ..Default::default()
        },
        PersonSettings {
            ids: imrelay::config::teams::PerChannel::from([(
                "feishu".into(),
                imrelay::config::teams::written(vec![DM]),
            )]),
            name: "bob".into(),
            ..Default::default()
        },
    ];
    s.routes = vec![RouteSettings {
        places: imrelay::config::teams::PerChannel::from([(
            "feishu".into(),
            imrelay::config::teams::written(vec![format!("chat_id:{CHAT}")]),
        )]),
        name: "shop".into(),
        cwd: vec!["/srv/shop/**".into()],
        approvers: vec!["alice".into()],
        timeout_secs: Some(3600),
        escalate_after_secs: Some(300),
        escalate_to: Some(EscalateTo {
            direct: vec!["bob".into()],
            approvers: vec!["bob".into()],
            ..Default::default()
        }),
        ..Default::default()
    }];
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

async fn outbox_settled(app: &TestApp) {
    eventually("the outbox to settle", || async {
        let backlog = app.store.job_backlog().await.unwrap();
        backlog.iter().all(|(_, n)| *n == 0).then_some(())
    })
    .await;
}

/// The cards delivered to `receiver`.
fn cards_to(fake: &FakeFeishu, receiver: &str) -> Vec<(String, Value)> {
    fake.state
        .delivered()
        .into_iter()
        .filter(|s| s.receive_id == receiver)
        .map(|s| (s.message_id.unwrap_or_default(), s.card))
        .collect()
}

async fn escalates_in(locale: Locale, line: &str) {
    let fake = FakeFeishu::start().await;
    let app = spawn_with(|s| {
        enable(s, &fake);
        s.feishu.locale = locale;
        teams(s);
    })
    .await;
    let (s, _) = app
        .post(
            "/v1/interactions",
            &serde_json::json!({"id": "fs-esc", "tool_name": "Bash",
                "input": {"command": "make shop"}, "cwd": "/srv/shop"}),
        )
        .await;
    assert_eq!(s, 201);
    outbox_settled(&app).await;
    assert_eq!(cards_to(&fake, CHAT).len(), 1);
    jump(299).await;
    outbox_settled(&app).await;
    assert!(cards_to(&fake, DM).is_empty());

    jump(2).await;
    let (message, card) = eventually("the escalated card", || {
        std::future::ready(cards_to(&fake, DM).into_iter().next())
    })
    .await;
    assert!(card_text(&card).contains(line), "{}", card_text(&card));
    let (first, first_card) = cards_to(&fake, CHAT).remove(0);
    assert!(!card_text(&first_card).contains(line));

    // Bob is on no list but the escalation's: he answers on his card.
    let (_, reply) = post_callback(
        &app,
        &click(&event_id(), DM, &button_value(&card, "approve"), None),
    )
    .await;
    assert_eq!(reply["toast"]["type"], "success", "{reply}");
    let (_, done) = app.get("/v1/interactions/fs-esc").await;
    assert_eq!(done["resolution"]["by"], "bob", "{done}");
    assert!(done["escalated_at"].is_string(), "{done}");
    // Both cards show the outcome.
    outbox_settled(&app).await;
    let patched: Vec<String> = fake
        .state
        .patches
        .lock()
        .unwrap()
        .iter()
        .map(|p| p.message_id.clone())
        .collect();
    assert!(
        patched.contains(&first) && patched.contains(&message),
        "{patched:?}"
    );
    app.stop().await;
}

#[tokio::test]
async fn an_unanswered_card_escalates_to_a_persons_direct_messages() {
    escalates_in(Locale::EnUs, "escalated: nobody on shop answered in 5 min").await;
}

#[tokio::test]
async fn the_escalated_card_says_so_in_the_channels_locale() {
    escalates_in(Locale::ZhCn, "已升级：路由 shop 上 5 分钟 内无人回答").await;
}
