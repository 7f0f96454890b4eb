//! DingTalk: the shop's cards go to one group; after five minutes unanswered, one more goes
//! to the other group, saying why in the channel's locale, and Bob answers on it.

use imrelay::config::teams::{EscalateTo, PersonSettings, RouteSettings};
use serde_json::json;

use super::{call, jump, people, shop};
use crate::dingtalk::channel::{
    APPROVER, GROUPS, click, connected, enable, every_card_shows, notice, status,
};
use crate::dingtalk::fake::{Card, FakeDingTalk};
use crate::support::{spawn_with, wait_until};

const BOB: &str = "bob0413";
/// What an escalated card says, in the channel's default locale.
const ESCALATED: &str = "已升级：路由 shop 上 5 分钟 内无人回答";

fn markdown(card: &Card) -> &str {
    card.params["markdown"].as_str().unwrap_or_default()
}

/// The card of `id` in `group`, if there is one.
fn card_in(fake: &FakeDingTalk, id: &str, group: &str) -> Option<Card> {
    let space = format!("dtv1.card//IM_GROUP.{group}");
    fake.state
        .cards_of(id)
        .into_iter()
        .find(|c| c.space == space)
}

#[tokio::test]
async fn an_unanswered_card_escalates_to_another_group_where_bob_answers() {
    let fake = FakeDingTalk::start().await;
    let (first_place, escalated_place) = (GROUPS[0], GROUPS[1]);
    let app = spawn_with(|s| {
        enable(s, &fake);
        s.people = people(
            PersonSettings {
                ids: imrelay::config::teams::PerChannel::from([(
                    "dingtalk".into(),
                    imrelay::config::teams::written(vec![APPROVER]),
                )]),
                ..Default::default()
            },
            PersonSettings {
                ids: imrelay::config::teams::PerChannel::from([(
                    "dingtalk".into(),
                    imrelay::config::teams::written(vec![BOB]),
                )]),
                ..Default::default()
            },
        );
        let route = RouteSettings {
            places: imrelay::config::teams::PerChannel::from([(
                "dingtalk".into(),
                imrelay::config::teams::written(vec![first_place]),
            )]),
            ..Default::default()
        };
        let to = EscalateTo {
            places: imrelay::config::teams::PerChannel::from([(
                "dingtalk".into(),
                imrelay::config::teams::written(vec![escalated_place]),
            )]),
            ..Default::default()
        };
        shop(s, route, to);
    })
    .await;
    let conn = connected(&fake).await;
    let (s, body) = app
        .post("/v1/interactions", &call("dt-esc", "make shop"))
        .await;
    assert_eq!(s, 201, "{body}");
    app.outbox_idle().await;
    assert_eq!(fake.state.cards_of("dt-esc").len(), 1);
    let first = card_in(&fake, "dt-esc", first_place).expect("the route's card");
    assert!(!markdown(&first).contains("已升级"), "{}", markdown(&first));
    // Bob may not answer yet: the route is Alice's.
    let r = click(&fake, conn, BOB, &first, "allow", json!({})).await;
    assert_eq!(
        notice(&r),
        "此请求属于路由「shop」，只有该路由的审批人可以处理"
    );

    jump(299).await;
    app.outbox_idle().await;
    assert_eq!(fake.state.cards_of("dt-esc").len(), 1);
    assert!(status(&app, "dt-esc").await.get("escalated_at").is_none());

    jump(2).await;
    wait_until("the escalated card", || {
        card_in(&fake, "dt-esc", escalated_place).is_some()
    })
    .await;
    let escalated = card_in(&fake, "dt-esc", escalated_place).expect("the escalated card");
    assert!(
        markdown(&escalated).contains(ESCALATED),
        "{}",
        markdown(&escalated)
    );
    assert!(markdown(&escalated).contains("make shop"));
    assert!(status(&app, "dt-esc").await["escalated_at"].is_string());
    // Once: more time posts nothing more.
    jump(600).await;
    app.outbox_idle().await;
    assert_eq!(fake.state.cards_of("dt-esc").len(), 2);

    // Bob is on no list but the escalation's: he answers on its card.
    let conn = connected(&fake).await;
    let r = click(&fake, conn, BOB, &escalated, "allow", json!({})).await;
    assert_eq!(notice(&r), "已批准", "{r}");
    let done = status(&app, "dt-esc").await;
    assert_eq!(done["resolution"]["by"], "bob", "{done}");
    // Both cards show the outcome, and no longer the escalation.
    every_card_shows(&fake, "dt-esc", "由 bob 通过 dingtalk 批准").await;
    for card in fake.state.cards_of("dt-esc") {
        assert!(!markdown(&card).contains("已升级"), "{}", markdown(&card));
    }
    app.stop().await;
}
