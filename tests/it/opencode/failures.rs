//! What OpenCode (or a great many of its requests) does wrong, and what the bridge does then:
//! a reply that fails is sent again until OpenCode takes it, and one it refuses is taken up
//! again at the next listing; an id no reply could reach is never asked; an event that is not
//! UTF-8 or too long is skipped alone; a listing too large is not read; and no more than 256
//! requests wait on imrelay at once.

use std::sync::atomic::Ordering;
use std::time::Duration;

use reqwest::StatusCode;
use serde_json::{Value, json};

use super::fake::*;
use crate::support::*;

/// How long 300 requests may take to go through the bridge, on a busy machine.
const LONG: Duration = Duration::from_secs(60);

/// A permission request of a known session, its id, and its interaction's id on `oc`.
fn permission(oc: &FakeOpenCode, request: &str) -> (Value, String) {
    let mut asked = captured("server_permission_once", "permission.asked");
    asked["properties"]["id"] = json!(request);
    (asked, interaction_id(&oc.url(), request))
}

#[tokio::test]
async fn a_reply_opencode_fails_is_sent_again_until_it_takes_it() {
    let app = spawn_app().await;
    let asked = captured("server_permission_once", "permission.asked");
    let inner = with_session(&asked);
    inner.lock().unwrap().failing_replies = [500, 503, 502].into();
    let oc = FakeOpenCode::start(0, inner, None).await;
    let bridge = BridgeProcess::start(&app.url(""), &oc.url(), None, &[]);
    oc.connected().await;
    oc.emit(&asked);
    let request = asked["properties"]["id"].as_str().unwrap();
    let id = interaction_id(&oc.url(), request);
    pending(&app, &id).await;
    let (status, _) = app.respond(&id, &json!({"decision": "allow"})).await;
    assert_eq!(status, StatusCode::OK);
    // Three failures, then the reply is taken: once.
    let r = replies(&oc, 1).await;
    assert_eq!(
        r,
        vec![(
            format!("/permission/{request}/reply"),
            json!({"reply": "once"})
        )]
    );
    assert_eq!(oc.fake.inner.lock().unwrap().refused_replies, 3);
    after_the_events_so_far(&app, &oc, &asked).await;
    assert_eq!(oc.replies().len(), 1);
    let err = bridge.stop().await;
    assert!(err.contains("sending the reply to"), "{err}");
    assert!(err.contains("replied to"), "{err}");
}

#[tokio::test]
async fn a_reply_opencode_refuses_is_taken_up_again_while_it_still_lists_the_request() {
    let app = spawn_app().await;
    let asked = captured("server_permission_reject", "permission.asked");
    let inner = with_session(&asked);
    // 414 is what a reply to an id too long for OpenCode's URLs got: not sent again at once.
    inner.lock().unwrap().failing_replies = [414].into();
    let port = free_port();
    let oc = FakeOpenCode::start(port, inner.clone(), None).await;
    let bridge = BridgeProcess::start(&app.url(""), &oc.url(), None, &[]);
    oc.connected().await;
    oc.emit(&asked);
    let request = asked["properties"]["id"].as_str().unwrap();
    let id = interaction_id(&oc.url(), request);
    pending(&app, &id).await;
    let (status, _) = app
        .respond(&id, &json!({"decision": "deny", "message": "Not now"}))
        .await;
    assert_eq!(status, StatusCode::OK);
    wait_until("OpenCode refused the reply", || {
        inner.lock().unwrap().refused_replies == 1
    })
    .await;
    assert!(oc.replies().is_empty());
    // OpenCode goes and comes back still listing the request: the bridge takes it up again
    // and the answer given in imrelay reaches it.
    oc.shut();
    wait_until("the bridge's event stream ends", || {
        oc.fake.events.receiver_count() == 0
    })
    .await;
    eventually("OpenCode's address is free", || async {
        tokio::net::TcpListener::bind(("127.0.0.1", port))
            .await
            .ok()
            .map(drop)
    })
    .await;
    let oc = FakeOpenCode::start(port, inner, None).await;
    let r = replies(&oc, 1).await;
    assert_eq!(
        r[0],
        (
            format!("/permission/{request}/reply"),
            json!({"reply": "reject", "message": "Not now"})
        )
    );
    let err = bridge.stop().await;
    assert!(err.contains("did not get through"), "{err}");
}

#[tokio::test]
async fn an_id_no_reply_could_reach_is_never_asked() {
    let app = spawn_app().await;
    let asked = captured("server_permission_once", "permission.asked");
    let inner = with_session(&asked);
    let oc = FakeOpenCode::start(0, inner.clone(), None).await;
    // One listed before the bridge starts, one announced after.
    let (listed, listed_id) = permission(&oc, &format!("per_{}", "L".repeat(300)));
    inner
        .lock()
        .unwrap()
        .permissions
        .push(listed["properties"].clone());
    let bridge = BridgeProcess::start(&app.url(""), &oc.url(), None, &[]);
    oc.connected().await;
    let (long, long_id) = permission(&oc, &format!("per_{}", "x".repeat(100_000)));
    oc.emit(&long);
    after_the_events_so_far(&app, &oc, &asked).await;
    for id in [&long_id, &listed_id] {
        let (status, _) = app.get(&format!("/v1/interactions/{id}")).await;
        assert_eq!(status, StatusCode::NOT_FOUND, "{id} was asked");
    }
    assert_eq!(
        inner.lock().unwrap().session_reads,
        1,
        "only the fence was taken up"
    );
    let err = bridge.stop().await;
    assert!(err.contains("more than an OpenCode id"), "{err}");
    assert!(!err.contains(&"x".repeat(1000)), "the whole id was logged");
}

#[tokio::test]
async fn an_event_that_is_not_utf8_or_too_long_is_skipped_alone() {
    let app = spawn_app().await;
    let asked = captured("server_permission_once", "permission.asked");
    let oc = FakeOpenCode::start(0, with_session(&asked), None).await;
    let mut bridge = BridgeProcess::start(&app.url(""), &oc.url(), None, &[]);
    oc.connected().await;
    let (first, first_id) = permission(&oc, "per_first");
    oc.emit(&first);
    // An event that is not UTF-8, then one longer than the bridge reads (17 MiB, one line).
    oc.emit_frame(b"data: {\"type\":\"message.updated\",\"x\":\"\xff\xfe\"}\n\n".to_vec());
    let mut long = b"data: {\"type\":\"message.part.updated\",\"text\":\"".to_vec();
    long.resize(long.len() + 17 * 1024 * 1024, b'a');
    long.extend_from_slice(b"\"}\n\n");
    oc.emit_frame(long);
    let (after, after_id) = permission(&oc, "per_after");
    oc.emit(&after);
    // The events around them are read at once (not after the stream's silence timeout).
    pending(&app, &first_id).await;
    pending(&app, &after_id).await;
    // The listing the first skip prompts may find `per_after` before the long event is read
    // through: wait for the bridge to have read it.
    bridge.until_said("the bridge reads").await;
    let err = bridge.stop().await;
    assert!(err.contains("skipped an event that is not UTF-8"), "{err}");
    assert!(err.contains("over the 16777216 the bridge reads"), "{err}");
    assert!(!err.contains("fell silent"), "{err}");
}

#[tokio::test]
async fn a_listing_too_large_is_not_read_and_events_are_still_relayed() {
    let app = spawn_app().await;
    let asked = captured("server_permission_once", "permission.asked");
    let inner = with_session(&asked);
    // 200 MiB of a list that never closes: the bridge stops at 64 MiB.
    inner.lock().unwrap().endless_listing = Some(200 * 1024 * 1024);
    let oc = FakeOpenCode::start(0, inner, None).await;
    let bridge = BridgeProcess::start(&app.url(""), &oc.url(), None, &[]);
    oc.connected().await;
    oc.emit(&asked);
    let id = interaction_id(&oc.url(), asked["properties"]["id"].as_str().unwrap());
    pending(&app, &id).await;
    let err = bridge.stop().await;
    assert!(
        err.contains("answered /permission with more than 67108864 bytes: not read"),
        "{err}"
    );
    // What was sent is what the bridge read and some more (the connections' buffers, what
    // the server sent before it saw the connection closed), for each time it listed (a
    // failed listing makes it list again soon): never the whole 200 MiB.
    let sent = oc.fake.listing_sent.load(Ordering::Relaxed);
    let listings = oc.fake.listing_requests.load(Ordering::Relaxed);
    assert!(
        sent < listings * 128 * 1024 * 1024,
        "{sent} bytes of the listing were sent over {listings} listings"
    );
}

/// The ids of the interactions pending in `app`.
async fn listed(app: &TestApp) -> Vec<String> {
    let (_, body) = app.get("/v1/interactions?status=pending&limit=500").await;
    body["interactions"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|i| i["id"].as_str().unwrap_or_default().to_string())
                .collect()
        })
        .unwrap_or_default()
}

#[tokio::test]
async fn at_most_256_requests_wait_on_imrelay_at_once() {
    // The bridge's long polls count against one share: exactly its own cap.
    let app = spawn_with(|s| s.server.max_connections_per_token = 256).await;
    let asked = captured("server_permission_once", "permission.asked");
    let inner = with_session(&asked);
    let oc = FakeOpenCode::start(0, inner.clone(), None).await;
    let bridge = BridgeProcess::start(&app.url(""), &oc.url(), None, &[]);
    oc.connected().await;
    for n in 0..300 {
        oc.emit(&permission(&oc, &format!("per_many{n:03}")).0);
    }
    eventually("256 requests are asked", || async {
        (listed(&app).await.len() == 256).then_some(())
    })
    .await;
    // Each answer lets the next request be asked, until every one was, never more than 256
    // waiting at once.
    eventually_within("every request is asked and answered", LONG, || async {
        if oc.replies().len() == 300 {
            return Some(());
        }
        let ids = listed(&app).await;
        assert!(ids.len() <= 256, "{} waiting at once", ids.len());
        if !ids.is_empty() {
            let (status, body) = app
                .post("/v1/respond", &json!({"ids": ids, "decision": "allow"}))
                .await;
            assert_eq!(status, StatusCode::OK, "{body}");
        }
        None
    })
    .await;
    let r = replies(&oc, 300).await;
    assert_eq!(r.len(), 300);
    assert_eq!(inner.lock().unwrap().session_reads, 300);
    // No long poll of the bridge's was ever over its share.
    let metrics = app.metrics().await;
    assert!(
        metrics.contains("imrelay_http_token_connections_refused_total 0\n"),
        "{metrics}"
    );
    let err = bridge.stop().await;
    assert!(
        err.contains("256 requests wait on imrelay already"),
        "{err}"
    );
}
