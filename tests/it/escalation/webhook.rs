//! Webhooks: the shop's requests go to one webhook; after five minutes unanswered, the other
//! is sent `interaction.created` too, carrying `escalated_at`, and Bob's signed answer
//! through it resolves the request for both.

use imrelay::config::teams::{EscalateTo, PersonSettings, RouteSettings};
use reqwest::StatusCode;
use serde_json::json;

use super::{call, jump, people, shop};
use crate::support::spawn_with;
use crate::webhooks::{Receiver, fast, post_signed, signed, target};

#[tokio::test]
async fn an_unanswered_request_is_sent_to_the_escalations_webhook_where_bob_answers() {
    let (ticketing, ticketing_url) = Receiver::start(&[]).await;
    let (pager, pager_url) = Receiver::start(&[]).await;
    let app = spawn_with(|s| {
        fast(s);
        s.webhooks = vec![
            target("ticketing", &ticketing_url),
            target("pager", &pager_url),
        ];
        s.people = people(
            PersonSettings {
                ids: imrelay::config::teams::PerChannel::from([(
                    "webhook".into(),
                    imrelay::config::teams::written(vec!["jira-alice"]),
                )]),
                ..Default::default()
            },
            PersonSettings {
                ids: imrelay::config::teams::PerChannel::from([(
                    "webhook".into(),
                    imrelay::config::teams::written(vec!["pd-bob"]),
                )]),
                ..Default::default()
            },
        );
        let route = RouteSettings {
            places: imrelay::config::teams::PerChannel::from([(
                "webhooks".into(),
                imrelay::config::teams::written(vec!["ticketing"]),
            )]),
            ..Default::default()
        };
        let to = EscalateTo {
            places: imrelay::config::teams::PerChannel::from([(
                "webhooks".into(),
                imrelay::config::teams::written(vec!["pager"]),
            )]),
            ..Default::default()
        };
        shop(s, route, to);
    })
    .await;
    let (s, body) = app
        .post("/v1/interactions", &call("wh-esc", "make shop"))
        .await;
    assert_eq!(s, StatusCode::CREATED, "{body}");
    let got = ticketing.wait_for(1).await;
    assert_eq!(got[0].body["type"], "interaction.created");
    assert!(
        got[0].body["data"]["interaction"]
            .get("escalated_at")
            .is_none()
    );
    app.outbox_idle().await;
    assert!(pager.received().is_empty());

    jump(299).await;
    app.outbox_idle().await;
    assert!(pager.received().is_empty());
    assert_eq!(ticketing.received().len(), 1);

    jump(2).await;
    let got = pager.wait_for(1).await;
    let created = &got[0].body;
    assert_eq!(created["type"], "interaction.created", "{created}");
    let i = &created["data"]["interaction"];
    assert_eq!(i["id"], "wh-esc", "{created}");
    assert!(i["escalated_at"].is_string(), "{created}");
    assert_eq!(i["route"]["name"], "shop", "{created}");
    assert_eq!(
        created["data"]["respond_url"],
        "https://imrelay.example.com/v1/webhooks/pager/respond"
    );
    // Once: more time sends nothing more, to either.
    jump(600).await;
    app.outbox_idle().await;
    assert_eq!(pager.received().len(), 1);
    assert_eq!(ticketing.received().len(), 1);

    // Bob answers through the escalation's webhook, recorded under his name.
    let answer = json!({"id": "wh-esc", "decision": "allow", "by": "pd-bob"});
    let (raw, headers) = signed(&answer, "msg_esc", jiff::Timestamp::now().as_second());
    let (s, ok) = post_signed(&app, "pager", raw, headers).await;
    assert_eq!(s, StatusCode::OK, "{ok}");
    assert_eq!(ok["resolution"]["by"], "bob", "{ok}");
    assert_eq!(ok["resolution"]["via"], "webhook:pager", "{ok}");
    // Both webhooks are told.
    for r in [&ticketing, &pager] {
        let got = r.wait_for(2).await;
        assert_eq!(
            got[1].body["type"], "interaction.resolved",
            "{}",
            got[1].body
        );
        assert_eq!(got[1].body["data"]["resolution"]["by"], "bob");
    }
    app.stop().await;
}
