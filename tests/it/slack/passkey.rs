//! A route that needs a passkey (`step_up`) on Slack: its message offers no button that
//! answers, only a link button to its card in the inbox, and says why; a click on the link
//! (Slack still sends the app a `block_actions` payload) is acknowledged and changes nothing.

use imrelay::config::teams::{PerChannel, RouteSettings, written};
use serde_json::{Value, json};

use super::channel::{buttons, connected, deliver, enable, status, text_of};
use super::fake::{CHANNELS, FakeSlack};
use crate::support::{spawn_with, wait_until};

/// The message posted to `channel` whose text has `marker`, once there is one.
async fn posted_with(fake: &FakeSlack, channel: &str, marker: &str) -> Value {
    let find = || {
        fake.state
            .calls("chat.postMessage")
            .into_iter()
            .find(|c| c.body["channel"] == channel && text_of(&c.body).contains(marker))
            .map(|c| c.body)
    };
    wait_until("the message", || find().is_some()).await;
    find().unwrap()
}

#[tokio::test]
async fn a_step_up_approval_links_to_the_inbox_instead_of_answering() {
    let fake = FakeSlack::start().await;
    let app = spawn_with(|s| {
        enable(s, &fake);
        s.server.public_url = "https://relay.example.com".into();
        s.routes = vec![RouteSettings {
            name: "prod".into(),
            places: PerChannel::from([("slack".into(), written(vec![CHANNELS[0]]))]),
            step_up: true,
            ..Default::default()
        }];
    })
    .await;
    let conn = connected(&fake).await;
    app.create_bash("su-s", "make deploy-prod").await;
    let body = posted_with(&fake, CHANNELS[0], "make deploy-prod").await;
    assert!(
        text_of(&body)
            .contains("This needs a passkey (route \"prod\"): open it in the imrelay inbox"),
        "{body}"
    );
    let all = buttons(&body["blocks"]);
    assert_eq!(all.len(), 1, "one link, no button that answers: {all:?}");
    assert_eq!(all[0]["url"], "https://relay.example.com/#su-s");
    assert!(all[0].get("value").is_none(), "{}", all[0]);

    // A click on the link reaches the app too: acknowledged, and nothing changes.
    let click = json!({
        "type": "block_actions",
        "user": {"id": super::channel::APPROVER, "username": "alice", "name": "alice", "team_id": "T0TEAM"},
        "api_app_id": "A0APP",
        "container": {"type": "message", "message_ts": "1", "channel_id": CHANNELS[0], "is_ephemeral": false},
        "trigger_id": "trigger-step-up",
        "team": {"id": "T0TEAM", "domain": "imrelay-test"},
        "channel": {"id": CHANNELS[0], "name": "approvals"},
        "message": {"ts": "1"},
        "state": {"values": {}},
        "actions": [{"type": "button", "action_id": all[0]["action_id"], "block_id": "step_up",
            "action_ts": "1700000001.000200"}],
    });
    deliver(&fake, conn, click).await;
    assert_eq!(status(&app, "su-s").await["status"], "pending");
    app.stop().await;
}
