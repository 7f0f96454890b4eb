//! Routes on Telegram: a route's chats get its prompts and the others do not, every copy
//! names its route, an approver of another route is refused on a tap with a notice saying
//! so, and answers are recorded under the person's name.

use imrelay::channels::telegram::Mode;
use imrelay::config::teams::{PersonSettings, RouteSettings};

use super::*;

/// Alice approves the shop (posted in the group), Bob the ops project (posted in Alice's
/// private chat, which makes no difference to who may answer).
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
            groups: vec!["ops".into()],
            ..Default::default()
        },
    ];
    s.routes = vec![
        RouteSettings {
            places: imrelay::config::teams::PerChannel::from([(
                "telegram".into(),
                imrelay::config::teams::written(vec![GROUP]),
            )]),
            name: "shop".into(),
            cwd: vec!["/srv/shop/**".into()],
            approvers: vec!["alice".into()],
            ..Default::default()
        },
        RouteSettings {
            places: imrelay::config::teams::PerChannel::from([(
                "telegram".into(),
                imrelay::config::teams::written(vec![PRIVATE]),
            )]),
            name: "ops".into(),
            cwd: vec!["/srv/ops/**".into()],
            approvers: vec!["ops".into()],
            timeout_secs: Some(120),
            ..Default::default()
        },
    ];
}

fn call(id: &str, command: &str, cwd: &str) -> Value {
    json!({"id": id, "tool_name": "Bash", "input": {"command": command},
           "agent": "claude-code", "cwd": cwd})
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
async fn a_routes_chats_get_its_prompts_and_the_others_do_not() {
    let (app, tg) = start_with(Mode::Webhook, teams).await;
    create(&app, call("rt-shop", "make shop-build", "/srv/shop/api")).await;
    create(&app, call("rt-ops", "make ops-deploy", "/srv/ops")).await;
    create(&app, call("rt-else", "make elsewhere", "/tmp/x")).await;
    let shop = prompt(&tg, GROUP, "make shop-build").await;
    assert!(shop.text.contains("route shop"), "{}", shop.text);
    let ops = prompt(&tg, PRIVATE, "make ops-deploy").await;
    assert!(ops.text.contains("route ops"), "{}", ops.text);
    // No route matches: the implicit last one, everywhere.
    let d = prompt(&tg, GROUP, "make elsewhere").await;
    assert!(d.text.contains("route default"), "{}", d.text);
    prompt(&tg, PRIVATE, "make elsewhere").await;
    outbox_settled(&app).await;
    assert_eq!(sent_to(&tg, GROUP, "make shop-build"), 1);
    assert_eq!(sent_to(&tg, PRIVATE, "make shop-build"), 0);
    assert_eq!(sent_to(&tg, PRIVATE, "make ops-deploy"), 1);
    assert_eq!(sent_to(&tg, GROUP, "make ops-deploy"), 0);
    // The route's timeout: the agent asked none, the route's is taken.
    let ops = status(&app, "rt-ops").await;
    assert_eq!(ops["timeout_secs"], 120);
    assert_eq!(ops["route"]["name"], "ops");
    app.stop().await;
}

#[tokio::test]
async fn an_approver_of_another_route_is_refused_on_a_tap() {
    let (app, tg) = start_with(Mode::Webhook, teams).await;
    create(&app, call("rt-tap", "make shop-release", "/srv/shop")).await;
    let p = prompt(&tg, GROUP, "make shop-release").await;
    // Bob is on telegram.approvers, but this is the shop's, which only Alice approves.
    assert_eq!(
        tap_on(&app, &tg, BOB, &p, &p.button("✅ Allow")).await,
        "This request came through route \"shop\": only its approvers can answer it"
    );
    assert_eq!(status(&app, "rt-tap").await["status"], "pending");
    let refused: Vec<Value> = audit_of(&app, "rt-tap")
        .await
        .into_iter()
        .filter(|e| e["action"] == "refused")
        .collect();
    assert_eq!(refused.len(), 1, "{refused:?}");
    // Recorded under his name, with the identity he tapped with.
    assert_eq!(refused[0]["actor"], "bob (telegram:1002)");
    assert!(
        refused[0]["detail"]
            .as_str()
            .unwrap()
            .contains("not an approver of route \"shop\""),
        "{refused:?}"
    );
    let m = app.metrics().await;
    assert!(
        m.contains("imrelay_telegram_refused_total{reason=\"other_route\"} 1"),
        "{m}"
    );
    // Alice may, and the answer is hers by name (not her Telegram display name).
    assert_eq!(
        tap_on(&app, &tg, ALICE, &p, &p.button("✅ Allow")).await,
        "Allowed"
    );
    let done = status(&app, "rt-tap").await;
    assert_eq!(done["resolution"]["by"], "alice");
    assert_eq!(done["resolution"]["via"], "telegram");
    app.stop().await;
}
