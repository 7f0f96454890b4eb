//! A route that needs a passkey (`step_up`) on Discord: its message offers no component that
//! answers, only a link button (style 5) to its card in the inbox, and says why.

use std::sync::atomic::Ordering;

use imrelay::config::teams::{PerChannel, RouteSettings, written};
use serde_json::json;

use super::channel::enable;
use super::fake::{CHANNELS, FakeDiscord};
use crate::support::{spawn_with, wait_until};

#[tokio::test]
async fn a_step_up_approval_links_to_the_inbox_instead_of_answering() {
    let fake = FakeDiscord::start().await;
    fake.state
        .gateway
        .heartbeat_ms
        .store(1000, Ordering::SeqCst);
    let app = spawn_with(|s| {
        enable(s, &fake);
        s.server.public_url = "https://relay.example.com".into();
        s.routes = vec![RouteSettings {
            name: "prod".into(),
            places: PerChannel::from([("discord".into(), written(vec![CHANNELS[0]]))]),
            step_up: true,
            ..Default::default()
        }];
    })
    .await;
    app.create_bash("su-d", "make deploy-prod").await;
    let find = || {
        fake.state
            .messages_in(CHANNELS[0])
            .into_iter()
            .map(|(_, m)| m)
            .find(|m| {
                m["content"]
                    .as_str()
                    .unwrap_or("")
                    .contains("make deploy-prod")
            })
    };
    wait_until("the message", || find().is_some()).await;
    let m = find().unwrap();
    // (Markdown escapes the parentheses and the colon.)
    let content = m["content"].as_str().unwrap();
    assert!(
        content.contains("🔑 This needs a passkey")
            && content.contains("open it in the imrelay inbox"),
        "{m}"
    );
    assert_eq!(
        m["components"],
        json!([{"type": 1, "components": [{"type": 2, "style": 5,
            "label": "🔑 Answer in the inbox", "url": "https://relay.example.com/#su-d"}]}]),
        "one link, no component that answers"
    );
    app.stop().await;
}
