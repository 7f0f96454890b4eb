//! Quiet hours on DingTalk, whose direct messages are addressed `user:<id>` (not the id
//! itself): a route's card to a person in their quiet hours (here lasting past the deadline)
//! is never sent, while the group's card goes at once.

use imrelay::config::teams::{PerChannel, PersonSettings, RouteSettings, written};
use serde_json::json;

use super::channel::{GROUPS, STRANGER, connected, enable};
use super::fake::FakeDingTalk;
use crate::support::{spawn_with, wait_until};

#[tokio::test]
async fn a_direct_card_waits_for_quiet_hours_and_the_groups_does_not() {
    let now = jiff::Timestamp::now().to_zoned(jiff::tz::TimeZone::UTC);
    let h = i32::from(now.hour());
    let quiet = format!("{:02}:00-{:02}:00", (h + 23) % 24, (h + 3) % 24);
    let fake = FakeDingTalk::start().await;
    let app = spawn_with(|s| {
        enable(s, &fake);
        s.people = vec![PersonSettings {
            ids: PerChannel::from([("dingtalk".into(), written(vec![STRANGER]))]),
            name: "ann".into(),
            quiet,
            time_zone: "UTC".into(),
            ..Default::default()
        }];
        s.routes = vec![RouteSettings {
            places: PerChannel::from([("dingtalk".into(), written(vec![GROUPS[1]]))]),
            name: "shop".into(),
            direct: vec!["ann".into()],
            approvers: vec!["ann".into()],
            timeout_secs: Some(3600),
            ..Default::default()
        }];
    })
    .await;
    connected(&fake).await;
    let (status, _) = app
        .post(
            "/v1/interactions",
            &json!({"id": "toolu_q1", "tool_name": "Bash", "input": {"command": "make shop"}}),
        )
        .await;
    assert!(status.is_success(), "{status}");
    wait_until("the group's card", || {
        !fake.state.cards_of("toolu_q1").is_empty()
    })
    .await;
    app.outbox_idle().await;
    let spaces: Vec<String> = fake
        .state
        .cards_of("toolu_q1")
        .iter()
        .map(|c| c.space.clone())
        .collect();
    assert_eq!(spaces, ["dtv1.card//IM_GROUP.cidGroupDev=="]);
    app.stop().await;
}
