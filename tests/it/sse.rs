//! The event stream: initial replay of pending interactions, live events, and resuming with
//! `Last-Event-ID`.

use std::time::Duration;

use futures_util::StreamExt;
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

#[tokio::test]
async fn an_unreadable_last_event_id_gets_a_reset_and_the_pending_list() {
    let app = spawn_app().await;
    app.create_bash("u1", "ls").await;
    let mut fresh = Sse::connect(&app, None).await;
    let head: u64 = fresh.next().await.id.unwrap().parse().unwrap();
    drop(fresh);
    let beyond = (head + 1000).to_string();
    for id in ["garbage", "-1", "", "1.5", beyond.as_str()] {
        let mut sse = Sse::connect(&app, Some(id)).await;
        let reset = sse.next().await;
        assert_eq!(reset.event, "reset", "Last-Event-ID {id:?}");
        let listed = sse.next().await;
        assert_eq!(listed.event, "interaction.created", "Last-Event-ID {id:?}");
        assert_eq!(listed.data["id"], "u1");
        assert_eq!(listed.id, Some(head.to_string()), "Last-Event-ID {id:?}");
    }
}

#[tokio::test]
async fn event_streams_beyond_the_cap_are_refused_until_one_ends() {
    let app = spawn_with(|s| s.server.max_event_streams = 2).await;
    let first = Sse::connect(&app, None).await;
    let _second = Sse::connect(&app, None).await;
    let refused = app.client.get(app.url("/v1/events")).send().await.unwrap();
    assert_eq!(refused.status(), 503);
    assert!(refused.headers().get("retry-after").is_some());
    let (_, body) = split(refused).await;
    assert_eq!(body["error"]["code"], "too_many_event_streams");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("server.max_event_streams"),
        "{body}"
    );
    // Everything else is still served.
    let (status, _) = app.get("/v1/interactions").await;
    assert_eq!(status, 200);
    // A stream that ends frees its place.
    drop(first);
    eventually("a place for a new stream", || async {
        let resp = app.client.get(app.url("/v1/events")).send().await.unwrap();
        (resp.status() == 200).then_some(())
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn racing_answers_announce_each_resolution_once() {
    const N: usize = 200;
    const ANSWERS: usize = 6;
    let app = spawn_app().await;
    let mut ids = Vec::new();
    for n in 0..N {
        ids.push(app.create_bash(&format!("race{n}"), "ls").await);
    }
    let mut sse = Sse::connect(&app, None).await;
    for _ in 0..N {
        assert_eq!(sse.next().await.event, "interaction.created");
    }
    // Every interaction gets several answers at once; one wins each.
    let app = &app;
    let answers = ids.iter().flat_map(|id| {
        (0..ANSWERS).map(move |k| async move {
            let decision = if k % 2 == 0 { "allow" } else { "deny" };
            app.respond(id, &json!({"decision": decision, "by": format!("r{k}")}))
                .await
                .0
        })
    });
    let statuses: Vec<_> = futures_util::stream::iter(answers)
        .buffer_unordered(64)
        .collect()
        .await;
    assert_eq!(statuses.iter().filter(|s| s.as_u16() == 200).count(), N);
    assert_eq!(
        statuses.iter().filter(|s| s.as_u16() == 409).count(),
        N * (ANSWERS - 1)
    );
    let mut resolved = std::collections::HashMap::<String, usize>::new();
    while let Some(e) = sse.next_within(Duration::from_millis(500)).await {
        assert_eq!(e.event, "interaction.resolved", "{}", e.raw);
        *resolved
            .entry(e.data["id"].as_str().unwrap().to_string())
            .or_default() += 1;
    }
    assert_eq!(resolved.len(), N, "{resolved:?}");
    let repeated: Vec<_> = resolved.iter().filter(|(_, n)| **n > 1).collect();
    assert!(
        repeated.is_empty(),
        "announced more than once: {repeated:?}"
    );
}

#[tokio::test]
async fn a_client_that_stops_reading_is_sent_a_reset_not_a_backlog() {
    // A 1 MiB replay buffer, and far more than that published while a client reads nothing.
    let app = spawn_with(|s| s.interactions.event_buffer_bytes = 1024 * 1024).await;
    let mut stalled = Sse::connect(&app, None).await;
    let big = "x".repeat(100 * 1024);
    for n in 0..200 {
        let (status, body) = app
            .post(
                "/v1/interactions",
                &json!({"id": format!("big{n}"), "tool_name": "Bash", "input": {"command": big}}),
            )
            .await;
        assert_eq!(status, 201, "{body}");
        app.respond(&format!("big{n}"), &json!({"decision": "deny"}))
            .await;
    }
    app.create_bash("last", "ls").await;
    // Reading now: what the connection held, then a reset and the pending list, then the
    // stream goes on.
    let mut seen = 0;
    loop {
        let e = stalled.next().await;
        seen += 1;
        if e.event == "reset" {
            break;
        }
        assert!(seen < 400, "no reset after {seen} events");
    }
    let listed = stalled.next().await;
    assert_eq!(listed.event, "interaction.created");
    assert_eq!(listed.data["id"], "last");
    assert!(seen < 400);
    app.create_bash("after", "ls").await;
    let live = stalled.next().await;
    assert_eq!(live.data["id"], "after");
}
