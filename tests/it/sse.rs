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
    app.respond(&done, &json!({"decision": "allow"})).await;

    let mut sse = Sse::connect(&app, None).await;
    let a = sse.next().await;
    let b = sse.next().await;
    assert_eq!(a.event, "interaction.created");
    assert_eq!(b.event, "interaction.created");
    // Only the snapshot's last event carries an id: a client dropping after `a` reconnects
    // without one and gets the whole snapshot again.
    assert_eq!(a.id, None);
    let snapshot_id = b.id.clone().expect("the last snapshot event has an id");
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
    assert!(cid > snapshot_id.parse::<u64>().unwrap());
}

#[tokio::test]
async fn a_client_dropping_mid_snapshot_gets_all_of_it_again() {
    let app = spawn_app().await;
    for n in 0..3 {
        app.create_bash(&format!("m{n}"), "ls").await;
    }
    let mut sse = Sse::connect(&app, None).await;
    let first = sse.next().await;
    drop(sse);
    // Reconnecting as an SSE client does: with the last id it saw, here none.
    let mut again = Sse::connect(&app, first.id.as_deref()).await;
    let mut ids = Vec::new();
    for _ in 0..3 {
        let e = again.next().await;
        assert_eq!(e.event, "interaction.created");
        ids.push(e.data["id"].as_str().unwrap().to_string());
    }
    ids.sort();
    assert_eq!(ids, ["m0", "m1", "m2"]);
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
    // No id yet: dropping here means reconnecting with the old id and another reset.
    assert_eq!(reset.id, None);
    let again = sse.next().await;
    assert_eq!(again.event, "interaction.created");
    assert_eq!(again.data["id"], "s1");
    let head = again.id.expect("the snapshot ends with an id");
    drop(sse);
    // Resuming from the end of the snapshot replays nothing and resets nothing.
    let mut resumed = Sse::connect(&app, Some(&head)).await;
    app.create_bash("s2", "two").await;
    let next = resumed.next().await;
    assert_eq!(next.event, "interaction.created");
    assert_eq!(next.data["id"], "s2");
}

#[tokio::test]
async fn a_reset_with_nothing_pending_carries_the_id_itself() {
    let app = spawn_app().await;
    let mut sse = Sse::connect(&app, Some("5")).await;
    let reset = sse.next().await;
    assert_eq!(reset.event, "reset");
    let head = reset.id.expect("nothing follows, so the reset has the id");
    drop(sse);
    let mut resumed = Sse::connect(&app, Some(&head)).await;
    app.create_bash("r-after", "ls").await;
    let next = resumed.next().await;
    assert_eq!(next.event, "interaction.created");
    assert_eq!(next.data["id"], "r-after");
}
