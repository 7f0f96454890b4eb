//! Slack: the shop's messages go to one conversation; after five minutes unanswered, one
//! more goes to the other, saying why, and Bob answers there.

use imrelay::config::teams::{EscalateTo, PersonSettings, RouteSettings};

use super::{ESCALATED, call, jump, people, shop};
use crate::slack::channel::{
    APPROVER, click, connected, copies, enable, ephemerals, message, status, text_of,
};
use crate::slack::fake::{CHANNELS, FakeSlack};
use crate::support::{spawn_with, wait_until};

const BOB: &str = "U0BOB";

#[tokio::test]
async fn an_unanswered_message_escalates_to_another_conversation_where_bob_answers() {
    let fake = FakeSlack::start().await;
    let (first_place, escalated_place) = (CHANNELS[0], CHANNELS[1]);
    let app = spawn_with(|s| {
        enable(s, &fake);
        s.people = people(
            PersonSettings {
                ids: imrelay::config::teams::PerChannel::from([(
                    "slack".into(),
                    imrelay::config::teams::written(vec![APPROVER]),
                )]),
                ..Default::default()
            },
            PersonSettings {
                ids: imrelay::config::teams::PerChannel::from([(
                    "slack".into(),
                    imrelay::config::teams::written(vec![BOB]),
                )]),
                ..Default::default()
            },
        );
        let route = RouteSettings {
            places: imrelay::config::teams::PerChannel::from([(
                "slack".into(),
                imrelay::config::teams::written(vec![first_place]),
            )]),
            ..Default::default()
        };
        let to = EscalateTo {
            places: imrelay::config::teams::PerChannel::from([(
                "slack".into(),
                imrelay::config::teams::written(vec![escalated_place]),
            )]),
            ..Default::default()
        };
        shop(s, route, to);
    })
    .await;
    let conn = connected(&fake).await;
    let (s, body) = app
        .post("/v1/interactions", &call("sl-esc", "make shop"))
        .await;
    assert_eq!(s, 201, "{body}");
    app.outbox_idle().await;
    let first = copies(&fake, "sl-esc");
    assert_eq!(first.len(), 1, "{first:?}");
    assert_eq!(first[0].0, first_place);
    assert!(!text_of(&message(&fake, &first[0])).contains("escalated"));
    // Bob may not answer yet: the route is Alice's.
    click(&fake, conn, BOB, &first[0], "allow").await;
    wait_until("Bob's refusal", || !ephemerals(&fake, BOB).is_empty()).await;
    assert_eq!(status(&app, "sl-esc").await["status"], "pending");

    jump(299).await;
    app.outbox_idle().await;
    assert_eq!(copies(&fake, "sl-esc").len(), 1);
    assert!(status(&app, "sl-esc").await.get("escalated_at").is_none());

    jump(2).await;
    wait_until("the escalated message", || {
        copies(&fake, "sl-esc").len() == 2
    })
    .await;
    let escalated = copies(&fake, "sl-esc")
        .into_iter()
        .find(|(c, _)| c == escalated_place)
        .expect("a copy in the escalation's conversation");
    let text = text_of(&message(&fake, &escalated));
    assert!(text.contains(ESCALATED), "{text}");
    assert!(text.contains("make shop"), "{text}");
    assert!(status(&app, "sl-esc").await["escalated_at"].is_string());
    // Once: more time posts nothing more.
    jump(600).await;
    app.outbox_idle().await;
    assert_eq!(copies(&fake, "sl-esc").len(), 2);

    // Bob is on no list but the escalation's: he answers on its message.
    let conn = connected(&fake).await;
    click(&fake, conn, BOB, &escalated, "allow").await;
    let done = status(&app, "sl-esc").await;
    assert_eq!(done["resolution"]["outcome"], "allowed", "{done}");
    assert_eq!(done["resolution"]["by"], "bob", "{done}");
    // Both messages show the outcome.
    wait_until("both messages showing the outcome", || {
        [&first[0], &escalated]
            .iter()
            .all(|m| text_of(&message(&fake, m)).contains("Allowed by bob via slack"))
    })
    .await;
    app.stop().await;
}
