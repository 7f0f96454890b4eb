//! "Allow similar" on a Feishu card: the rule it adds is on the card; a click answers and
//! grants it for the session, and the next matching call is allowed without a card.

use reqwest::StatusCode;
use serde_json::{Value, json};

use super::fake::FakeFeishu;
use super::{APPROVER, button_value, card_for, card_text, click, enable, event_id, post_callback};
use crate::support::spawn_with;

#[tokio::test]
async fn a_session_grant_made_on_a_card_allows_the_next_call() {
    let fake = FakeFeishu::start().await;
    let app = spawn_with(|s| enable(s, &fake)).await;
    let call = |id: &str, command: &str| {
        json!({"id": id, "tool_name": "Bash", "input": {"command": command},
               "session": "s-fs", "agent": "claude-code", "cwd": "/srv/shop"})
    };
    let (s, _) = app
        .post("/v1/interactions", &call("fs-g1", "cargo test --lib"))
        .await;
    assert_eq!(s, StatusCode::CREATED);
    let (_, card) = card_for(&fake, "fs-g1").await;
    assert!(
        card_text(&card)
            .contains("Allow similar also allows, for this session: Bash(cargo test:*)"),
        "{}",
        card_text(&card)
    );
    let similar = button_value(&card, "allow_similar");
    let (_, reply) = post_callback(&app, &click(&event_id(), APPROVER, &similar, None)).await;
    assert_eq!(reply["toast"]["content"], "Allowed", "{reply}");
    let (_, grants) = app.get("/v1/grants").await;
    let grant = &grants["grants"][0];
    assert_eq!(
        (
            grant["rule"].as_str(),
            grant["scope"].as_str(),
            grant["via"].as_str(),
            grant["by"].as_str()
        ),
        (
            Some("Bash(cargo test:*)"),
            Some("session"),
            Some("feishu"),
            Some(APPROVER)
        )
    );
    let (_, next) = app
        .post("/v1/interactions", &call("fs-g2", "cargo test --doc"))
        .await;
    assert_eq!(
        next["resolution"]["by"], "grant Bash(cargo test:*)",
        "{next}"
    );
    // A card without a session has no such button.
    app.create_bash("fs-g3", "cargo build").await;
    let (_, plain) = card_for(&fake, "fs-g3").await;
    assert!(!card_text(&plain).contains("Allow similar"));
    let names: Vec<Value> = super::tagged(&plain, "button")
        .iter()
        .map(|b| b["name"].clone())
        .collect();
    assert!(!names.contains(&json!("allow_similar")), "{names:?}");
    app.stop().await;
}
