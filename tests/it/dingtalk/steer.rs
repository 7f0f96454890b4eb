//! Replies that talk to an agent session on DingTalk: a message to the robot that quotes
//! (引用) one of a session's cards is queued for the session; a person who may not answer
//! the session's route is refused with a notice and nothing changes; a quote of a card
//! that is not imrelay's, or that names a card of another chat, is left alone.

use serde_json::{Value, json};

use super::channel::{APPROVER, GROUPS, STRANGER, cards, connected, enable, status};
use super::fake::{FakeDingTalk, quoting_message};
use crate::support::{claude_session_start, eventually, queued_messages, spawn_with, wait_until};

const TOPIC: &str = "/v1.0/im/bot/messages/get";
/// A group none of the cards went to.
const OTHER: &str = "cidGroupElse==";

/// The texts the robot sent to group `group`.
fn said_in(fake: &FakeDingTalk, group: &str) -> Vec<String> {
    fake.state
        .calls_to("groupMessages")
        .iter()
        .filter(|sent| sent["openConversationId"] == group)
        .map(|sent| {
            let param: Value = serde_json::from_str(sent["msgParam"].as_str().unwrap()).unwrap();
            param["content"].as_str().unwrap_or_default().to_string()
        })
        .collect()
}

#[tokio::test]
async fn a_message_quoting_a_sessions_card_reaches_the_session_and_a_strangers_is_refused() {
    let fake = FakeDingTalk::start().await;
    let app = spawn_with(|s| enable(s, &fake)).await;
    let conn = connected(&fake).await;
    claude_session_start(&app, "s-dt").await;
    let body = json!({"id": "toolu_dq1", "tool_name": "Bash", "input": {"command": "make"},
        "session": "s-dt", "agent": "claude-code", "cwd": "/srv/shop"});
    let (s, created) = app.post("/v1/interactions", &body).await;
    assert_eq!(s, 201, "{created}");
    let copies = cards(&fake, "toolu_dq1").await;
    let card = copies
        .iter()
        .find(|c| c.space.ends_with(GROUPS[0]))
        .unwrap();
    // An approver quotes the card (the robot @-mentioned, as a group message to it is).
    let quote = quoting_message(
        GROUPS[0],
        APPROVER,
        "msgQ1",
        " use the staging database",
        card,
    );
    fake.state.push(conn, "CALLBACK", TOPIC, "m-q1", &quote);
    let queued = eventually("the message queued", || async {
        let m = queued_messages(&app, "s-dt").await;
        (m.len() == 1).then_some(m)
    })
    .await;
    assert_eq!(queued[0]["text"], "use the staging database");
    assert_eq!(queued[0]["via"], "dingtalk");
    wait_until("the queued notice", || {
        said_in(&fake, GROUPS[0])
            .iter()
            .any(|t| t.starts_with("✉️ 已排队发给 claude-code 会话"))
    })
    .await;
    // The approval it quoted keeps waiting for its buttons.
    assert_eq!(status(&app, "toolu_dq1").await["status"], "pending");
    // The same message delivered again is taken once.
    fake.state
        .push(conn, "CALLBACK", TOPIC, "m-q1-again", &quote);
    wait_until("the redelivery acknowledged", || {
        !fake.state.acks_of("m-q1-again").is_empty()
    })
    .await;
    // Someone who may not answer the route is refused, told so, and nothing is queued.
    let stranger = quoting_message(GROUPS[0], STRANGER, "msgQ2", " drop the table", card);
    fake.state.push(conn, "CALLBACK", TOPIC, "m-q2", &stranger);
    wait_until("the refusal", || {
        said_in(&fake, GROUPS[0])
            .iter()
            .any(|t| t.contains("may not message this session"))
    })
    .await;
    assert_eq!(queued_messages(&app, "s-dt").await.len(), 1);
    // A quote of this card written in a group it was not sent to names no message of that
    // group (the card's content pasted there); a quote of a card whose token is not
    // imrelay's is not a card of imrelay's: both are left alone.
    let elsewhere = quoting_message(OTHER, APPROVER, "msgQ3", " elsewhere", card);
    fake.state.push(conn, "CALLBACK", TOPIC, "m-q3", &elsewhere);
    let mut forged = card.clone();
    forged
        .params
        .insert("token".into(), json!("1700000000000.AAAAAAAA.toolu_dq1"));
    let forged = quoting_message(GROUPS[0], APPROVER, "msgQ4", " forged", &forged);
    fake.state.push(conn, "CALLBACK", TOPIC, "m-q4", &forged);
    wait_until("both acknowledged", || {
        !fake.state.acks_of("m-q3").is_empty() && !fake.state.acks_of("m-q4").is_empty()
    })
    .await;
    assert_eq!(queued_messages(&app, "s-dt").await.len(), 1);
    assert!(said_in(&fake, OTHER).is_empty());
    let (_, audit) = app.get("/v1/audit?limit=1000").await;
    assert!(
        audit.to_string().contains("may not message its sessions"),
        "{audit}"
    );
    app.stop().await;
}
