//! A route that needs a passkey (`step_up`) on DingTalk: its cards' `status` is `step_up`
//! (the template shows none of its answer buttons), `step_up_url` links its card in the
//! inbox for the template's link button, and the body says why; a click that still arrives
//! (a template that shows the buttons anyway) is refused with the same words, and nothing
//! changes.

use imrelay::config::teams::{PerChannel, RouteSettings, written};
use serde_json::json;

use super::channel::{APPROVER, GROUPS, cards, click, connected, enable, notice, status};
use super::fake::FakeDingTalk;
use crate::support::spawn_with;

#[tokio::test]
async fn a_step_up_approval_links_to_the_inbox_and_a_click_is_refused() {
    let fake = FakeDingTalk::start().await;
    let app = spawn_with(|s| {
        enable(s, &fake);
        s.server.public_url = "https://relay.example.com".into();
        s.routes = vec![RouteSettings {
            name: "prod".into(),
            places: PerChannel::from([("dingtalk".into(), written(GROUPS.to_vec()))]),
            step_up: true,
            ..Default::default()
        }];
    })
    .await;
    let conn = connected(&fake).await;
    app.create_bash("su-d", "make deploy-prod").await;
    let cards = cards(&fake, "su-d").await;
    for card in &cards {
        let p = &card.params;
        assert_eq!(p["status"], "step_up", "no answer buttons: {p:?}");
        assert_eq!(p["step_up_label"], "🔑 在收件箱中回答");
        assert_eq!(p["step_up_url"], "https://relay.example.com/#su-d");
        let md = p["markdown"].as_str().unwrap().replace('\u{200b}', "");
        assert!(
            md.contains("🔑 此请求（路由「prod」）需要通行密钥：请在 imrelay 收件箱中打开并回答"),
            "{md}"
        );
        assert_eq!(p["similar_label"], "");
        assert_eq!(p["edit_label"], "");
    }

    let response = click(&fake, conn, APPROVER, &cards[0], "allow", json!({})).await;
    assert!(
        notice(&response).starts_with("此请求（路由「prod」）需要通行密钥"),
        "{response}"
    );
    assert!(status(&app, "su-d").await["resolution"].is_null());
    app.stop().await;
}
