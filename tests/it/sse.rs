//! The event stream: initial replay of pending interactions, live events, and resuming with
//! `Last-Event-ID`.

use std::time::Duration;

use serde_json::json;

use crate::support::*;

#[tokio::test]
async fn new_clients_first_receive_every_pending_interaction() {
    let app = spawn_app().await;
    app.create_bash("p1", "one").await;
    app.create_bash("p2", "two").await;
    let done = app.create_bash("p3", "three").await;
    app.post(
        &format!("/v1/interactions/{done}/respond"),
        &json!({"decision": "allow"}),
    )
    .await;

    let mut sse = Sse::connect(&app, None).await;
    let a = sse.next().await;
    let b = sse.next().await;
    assert_eq!(a.event, "interaction.created");
    assert_eq!(b.event, "interaction.created");
    let mut ids = vec![a.data["id"].clone(), b.data["id"].clone()];
    ids.sort_by_key(|v| v.to_string());
    assert_eq!(ids, [json!("p1"), json!("p2")]);
    assert!(sse.next_within(Duration::from_millis(200)).await.is_none());

    // Live events follow, with increasing ids.
    app.create_bash("p4", "four").await;
    let c = sse.next().await;
    assert_eq!(c.event, "interaction.created");
    assert_eq!(c.data["id"], "p4");
    assert_eq!(c.data["status"], "pending");
    app.post("/v1/interactions/p4/respond", &json!({"decision": "deny"}))
        .await;
    let d = sse.next().await;
    assert_eq!(d.event, "interaction.resolved");
    assert_eq!(d.data["resolution"]["outcome"], "denied");
    let (cid, did): (u64, u64) = (
        c.id.unwrap().parse().unwrap(),
        d.id.unwrap().parse().unwrap(),
    );
    assert!(did > cid);
}

#[tokio::test]
async fn resuming_with_last_event_id_replays_what_was_missed() {
    let app = spawn_app().await;
    let mut sse = Sse::connect(&app, None).await;
    app.create_bash("r1", "one").await;
    let first = sse.next().await;
    let last_id = first.id.clone().unwrap();
    drop(sse);

    // Missed while disconnected.
    app.create_bash("r2", "two").await;
    app.post(
        "/v1/interactions/r1/respond",
        &json!({"decision": "allow", "by": "eve"}),
    )
    .await;

    let mut resumed = Sse::connect(&app, Some(&last_id)).await;
    let a = resumed.next().await;
    let b = resumed.next().await;
    assert_eq!(
        (a.event.as_str(), a.data["id"].as_str()),
        ("interaction.created", Some("r2"))
    );
    assert_eq!(
        (b.event.as_str(), b.data["id"].as_str()),
        ("interaction.resolved", Some("r1"))
    );
    assert_eq!(b.data["resolution"]["by"], "eve");
    // No duplicate replay of the pending snapshot.
    assert!(
        resumed
            .next_within(Duration::from_millis(200))
            .await
            .is_none()
    );
}

#[tokio::test]
async fn an_id_older_than_the_buffer_gets_a_reset_and_the_pending_list() {
    let app = spawn_app().await;
    app.create_bash("s1", "one").await;
    // An id from long before this process started (e.g. before a restart).
    let mut sse = Sse::connect(&app, Some("5")).await;
    let reset = sse.next().await;
    assert_eq!(reset.event, "reset");
    let again = sse.next().await;
    assert_eq!(again.event, "interaction.created");
    assert_eq!(again.data["id"], "s1");
}
