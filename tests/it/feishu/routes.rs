//! Routes on Feishu: a route's receivers get its cards and the others do not, the card names
//! the route, an approver of another route is refused on a click, and the route's own
//! approver answers under their name without being on `feishu.approvers`.

use imrelay::config::teams::{PersonSettings, RouteSettings};
use imrelay::interaction::InteractionId;
use serde_json::Value;

use super::fake::FakeFeishu;
use super::{
    APPROVER, CHAT, DM, button_value, card_for, card_text, click, enable, event_id, post_callback,
};
use crate::support::{TestApp, eventually, spawn_with};

/// Alice is on `feishu.approvers`; Bob (the DM receiver) is not, but the shop route names him.
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
        approvers: vec!["bob".into()],
        ..Default::default()
    }];
}

async fn outbox_settled(app: &TestApp) {
    eventually("the outbox to settle", || async {
        let backlog = app.store.job_backlog().await.unwrap();
        backlog.iter().all(|(_, n)| *n == 0).then_some(())
    })
    .await;
}

#[tokio::test]
async fn an_approver_of_another_route_is_refused_on_a_click() {
    let fake = FakeFeishu::start().await;
    let app = spawn_with(|s| {
        enable(s, &fake);
        teams(s);
    })
    .await;
    let (s, _) = app
        .post(
            "/v1/interactions",
            &serde_json::json!({"id": "fs-route", "tool_name": "Bash",
                "input": {"command": "make shop"}, "cwd": "/srv/shop"}),
        )
        .await;
    assert_eq!(s, 201);
    let (_, card) = card_for(&fake, "fs-route").await;
    assert!(card_text(&card).contains("route shop"), "{card}");
    outbox_settled(&app).await;
    // Only the route's chat got it: not the DM receiver.
    let to: Vec<String> = fake
        .state
        .sends()
        .into_iter()
        .map(|s| s.receive_id)
        .collect();
    assert_eq!(to, [CHAT], "{to:?}");

    // Alice is on feishu.approvers, but the shop route is Bob's.
    let (status, reply) = post_callback(
        &app,
        &click(&event_id(), APPROVER, &button_value(&card, "approve"), None),
    )
    .await;
    assert_eq!(status, 200);
    assert_eq!(reply["toast"]["type"], "error", "{reply}");
    assert_eq!(
        reply["toast"]["content"],
        "This request came through route \"shop\": only its approvers can answer it"
    );
    let id = InteractionId::parse("fs-route").unwrap();
    assert!(app.registry.get(&id).await.unwrap().unwrap().is_pending());
    let (_, audit) = app.get("/v1/audit?limit=100").await;
    let refused: Vec<&Value> = audit["entries"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["action"] == "refused")
        .collect();
    assert_eq!(refused.len(), 1, "{audit}");
    assert_eq!(refused[0]["actor"], format!("alice (feishu:{APPROVER})"));

    // Bob answers: not on feishu.approvers, but the route names him; recorded as "bob".
    let (_, reply) = post_callback(
        &app,
        &click(&event_id(), DM, &button_value(&card, "approve"), None),
    )
    .await;
    assert_eq!(reply["toast"]["type"], "success", "{reply}");
    let i = app.registry.get(&id).await.unwrap().unwrap();
    assert_eq!(i.resolution.as_ref().unwrap().by.as_deref(), Some("bob"));
    app.stop().await;
}
