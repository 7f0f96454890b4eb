//! The long connection against a fake endpoint and WebSocket server: connect, ping/pong with a
//! changed interval, card clicks acked with the toast and card, multi-part messages, drops and
//! reconnects, a refused handshake, duplicates after a reconnect, and the frame bytes checked
//! against the official SDK's frame definition.

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use imrelay::channels::feishu::frame::{Frame, Header, METHOD_DATA};
use imrelay::channels::feishu::settings::{Locale, Mode, Receiver};
use imrelay::config::{Secret, Settings};
use serde_json::{Value, json};

use super::fake::APP_SECRET;
use super::fake_ws::{FakePlatform, SERVICE, data_frame};
use super::gate::gated_store;
use super::{APPROVER, CHAT, button_value, card_for, click, event_id, tagged};
use crate::support::{TestApp, fixture, settings, spawn_on, spawn_with, wait_until};

fn enable_ws(s: &mut Settings, p: &FakePlatform) {
    let f = &mut s.feishu;
    f.enabled = true;
    f.mode = Mode::Websocket;
    f.base_url = p.openapi.url.clone();
    f.app_id = super::fake::APP_ID.into();
    f.app_secret = Secret::new(APP_SECRET);
    f.receivers = vec![format!("chat_id:{CHAT}").parse::<Receiver>().unwrap()];
    f.approvers = vec![APPROVER.into()];
    f.locale = Locale::EnUs;
}

async fn health(app: &TestApp) -> Value {
    app.get("/healthz").await.1["components"]["feishu"].clone()
}

/// The channel's health once `reached` holds for it, or as it is after five seconds (for the
/// assertions that follow to show).
async fn health_when(app: &TestApp, reached: impl Fn(&Value) -> bool) -> Value {
    let mut h = Value::Null;
    for _ in 0..500 {
        h = health(app).await;
        if reached(&h) {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    h
}

/// The callback reply an ack carries.
fn ack_reply(ack: &Frame) -> Value {
    let body: Value = serde_json::from_slice(ack.payload.as_deref().unwrap()).unwrap();
    assert_eq!(body["code"], 200, "{body}");
    let data = STANDARD.decode(body["data"].as_str().unwrap()).unwrap();
    serde_json::from_slice(&data).unwrap()
}

/// Pushes a click over the connection and waits for its ack.
async fn click_over_ws(p: &FakePlatform, message_id: &str, envelope: &Value) -> (Frame, Value) {
    let mut envelope = envelope.clone();
    envelope["header"]["token"] = json!(""); // the long connection carries no token
    p.ws.send(&data_frame(
        message_id,
        1,
        0,
        envelope.to_string().as_bytes(),
    ));
    wait_until(&format!("an ack for {message_id}"), || {
        !p.ws.acks(message_id).is_empty()
    })
    .await;
    let ack = p.ws.acks(message_id).remove(0);
    let reply = ack_reply(&ack);
    (ack, reply)
}

#[tokio::test]
async fn connects_with_the_endpoint_pings_and_applies_a_pong_config() {
    let p = FakePlatform::start().await;
    *p.ws.pong_config.lock().unwrap() = Some(
        json!({"PingInterval": 7, "ReconnectInterval": 2, "ReconnectNonce": 0, "ReconnectCount": -1}),
    );
    let app = spawn_with(|s| enable_ws(s, &p)).await;
    wait_until("connected", || {
        p.ws.connections.load(std::sync::atomic::Ordering::SeqCst) == 1
    })
    .await;
    let (body, locale) = p.ws.endpoint_requests.lock().unwrap()[0].clone();
    assert_eq!(
        body,
        json!({"AppID": super::fake::APP_ID, "AppSecret": APP_SECRET})
    );
    assert_eq!(locale, "zh");
    // The endpoint said to ping every second: a ping arrives, for the URL's service id.
    wait_until("a ping", || p.ws.pings() >= 1).await;
    let ping =
        p.ws.received()
            .into_iter()
            .find(|f| f.header("type") == Some("ping"))
            .unwrap();
    assert_eq!(ping.service, SERVICE);
    // Its pong carried a new interval, which is now in force.
    let h = health_when(&app, |h| h["ping_interval_secs"] == 7).await;
    assert_eq!(h["state"], "connected", "{h}");
    assert_eq!(h["ping_interval_secs"], 7, "{h}");
    assert_eq!(h["reconnect_interval_secs"], 2, "{h}");
    assert!(
        app.metrics()
            .await
            .contains("imrelay_feishu_ws_connected 1")
    );
    app.stop().await;
}

#[tokio::test]
async fn a_card_click_over_the_connection_resolves_and_is_acked_with_toast_and_card() {
    let p = FakePlatform::start().await;
    let app = spawn_with(|s| enable_ws(s, &p)).await;
    wait_until("connected", || {
        p.ws.connections.load(std::sync::atomic::Ordering::SeqCst) == 1
    })
    .await;
    let (status, _) = app
        .post(
            "/v1/interactions",
            &json!({"id": "toolu_ws1", "tool_name": "Bash", "input": {"command": "cargo publish"}}),
        )
        .await;
    assert_eq!(status, 201);
    let (_, card) = card_for(&p.openapi, "toolu_ws1").await;
    let (ack, reply) = click_over_ws(
        &p,
        "msg-1",
        &click(&event_id(), APPROVER, &button_value(&card, "approve"), None),
    )
    .await;
    // The ack is the frame sent back, with the handler's time and its reply.
    assert_eq!(ack.method, METHOD_DATA);
    assert_eq!(ack.service, SERVICE);
    assert_eq!(ack.header("trace_id"), Some("trace-msg-1"));
    assert!(ack.header("biz_rt").unwrap().parse::<u64>().is_ok());
    assert_eq!(reply["toast"]["type"], "success");
    assert_eq!(reply["card"]["type"], "raw");
    assert_eq!(reply["card"]["data"]["header"]["template"], "green");
    assert!(tagged(&reply["card"]["data"], "button").is_empty());
    let (_, body) = app
        .get("/v1/interactions/toolu_ws1/wait?timeout_secs=5")
        .await;
    assert_eq!(
        body["result"],
        json!({"behavior": "allow", "updatedInput": {"command": "cargo publish"}})
    );
    assert_eq!(body["resolution"]["via"], "feishu");
    // A click from someone else is refused the same way as over the webhook.
    app.create_bash("toolu_ws2", "ls").await;
    let (_, card2) = card_for(&p.openapi, "toolu_ws2").await;
    let (_, refused) = click_over_ws(
        &p,
        "msg-2",
        &click(
            &event_id(),
            "ou_else",
            &button_value(&card2, "approve"),
            None,
        ),
    )
    .await;
    assert_eq!(refused["toast"]["type"], "error");
    app.stop().await;
}

#[tokio::test]
async fn a_multi_part_message_is_reassembled() {
    let p = FakePlatform::start().await;
    let app = spawn_with(|s| enable_ws(s, &p)).await;
    wait_until("connected", || {
        p.ws.connections.load(std::sync::atomic::Ordering::SeqCst) == 1
    })
    .await;
    app.create_bash("toolu_parts", "ls").await;
    let (_, card) = card_for(&p.openapi, "toolu_parts").await;
    let mut envelope = click(&event_id(), APPROVER, &button_value(&card, "approve"), None);
    envelope["header"]["token"] = json!("");
    let bytes = envelope.to_string().into_bytes();
    let third = bytes.len() / 3;
    let parts = [
        &bytes[..third],
        &bytes[third..2 * third],
        &bytes[2 * third..],
    ];
    // Out of order, as the network may deliver them.
    for seq in [2, 0, 1] {
        p.ws.send(&data_frame("msg-parts", 3, seq, parts[seq]));
    }
    wait_until("an ack", || !p.ws.acks("msg-parts").is_empty()).await;
    let acks = p.ws.acks("msg-parts");
    assert_eq!(acks.len(), 1, "one ack for the whole message");
    assert_eq!(ack_reply(&acks[0])["toast"]["type"], "success");
    let (_, body) = app.get("/v1/interactions/toolu_parts").await;
    assert_eq!(body["resolution"]["outcome"], "allowed");
    app.stop().await;
}

#[tokio::test]
async fn a_dropped_connection_reconnects_and_a_duplicate_event_gets_the_original_reply() {
    let p = FakePlatform::start().await;
    let app = spawn_with(|s| enable_ws(s, &p)).await;
    wait_until("connected", || {
        p.ws.connections.load(std::sync::atomic::Ordering::SeqCst) == 1
    })
    .await;
    app.create_bash("toolu_drop", "ls").await;
    let (_, card) = card_for(&p.openapi, "toolu_drop").await;
    let eid = event_id();
    let (_, first) = click_over_ws(
        &p,
        "msg-a",
        &click(&eid, APPROVER, &button_value(&card, "approve"), None),
    )
    .await;
    assert_eq!(first["toast"]["type"], "success");

    p.ws.drop_connection();
    wait_until("reconnected", || {
        p.ws.connections.load(std::sync::atomic::Ordering::SeqCst) == 2
    })
    .await;
    assert!(
        app.metrics()
            .await
            .contains("imrelay_feishu_ws_reconnects_total 1")
    );
    let h = health(&app).await;
    assert_eq!(h["state"], "connected", "{h}");
    assert!(
        h["last_error"].as_str().is_some(),
        "the drop is reported: {h}"
    );

    // The platform re-delivers the event after the reconnect (under a new message id): it is
    // answered as the first delivery was, and changes nothing.
    let (_, again) = click_over_ws(
        &p,
        "msg-b",
        &click(&eid, APPROVER, &button_value(&card, "approve"), None),
    )
    .await;
    assert_eq!(again, first, "the original toast and card");
    let (_, body) = app.get("/v1/interactions/toolu_drop").await;
    assert_eq!(body["resolution"]["outcome"], "allowed");
    assert!(
        app.metrics()
            .await
            .contains("imrelay_feishu_callbacks_total{result=\"duplicate\"} 1")
    );
    app.stop().await;
}

#[tokio::test]
async fn a_slow_click_is_acked_in_time_finished_anyway_and_its_redelivery_gets_the_outcome() {
    let p = FakePlatform::start().await;
    let store = gated_store();
    let mut s = settings();
    enable_ws(&mut s, &p);
    let app = spawn_on(s, store.clone()).await;
    wait_until("connected", || {
        p.ws.connections.load(std::sync::atomic::Ordering::SeqCst) == 1
    })
    .await;
    app.create_bash("toolu_slow", "ls").await;
    let (_, card) = card_for(&p.openapi, "toolu_slow").await;
    let approve = click(&event_id(), APPROVER, &button_value(&card, "approve"), None);

    // The answer's write is held past the platform's window: the ack still goes out in time,
    // saying the click is being worked on.
    store.hooks.close();
    let (_, first) = click_over_ws(&p, "msg-slow-1", &approve).await;
    assert_eq!(store.hooks.waiting(), 1);
    assert_eq!(first["toast"]["type"], "info", "{first}");
    assert!(
        first["toast"]["content"]
            .as_str()
            .unwrap()
            .contains("Still working"),
        "{first}"
    );
    assert!(first.get("card").is_none());

    // The platform delivers the click again while the first is still held: it waits for the
    // first one's outcome instead of being dismissed as a duplicate.
    let mut envelope = approve.clone();
    envelope["header"]["token"] = json!("");
    p.ws.send(&data_frame(
        "msg-slow-2",
        1,
        0,
        envelope.to_string().as_bytes(),
    ));
    app.metrics_with("imrelay_feishu_callbacks_total{result=\"duplicate\"} 1")
        .await;
    assert!(
        app.metrics()
            .await
            .contains("imrelay_feishu_callbacks_total{result=\"duplicate\"} 1"),
        "the second delivery joined the first"
    );
    assert!(p.ws.acks("msg-slow-2").is_empty(), "still waiting");
    store.hooks.open();
    wait_until("the second ack", || !p.ws.acks("msg-slow-2").is_empty()).await;
    let second = ack_reply(&p.ws.acks("msg-slow-2")[0]);
    assert_eq!(second["toast"]["type"], "success", "{second}");
    assert_eq!(second["card"]["data"]["header"]["template"], "green");
    let (_, body) = app.get("/v1/interactions/toolu_slow").await;
    assert_eq!(body["resolution"]["outcome"], "allowed");
    assert_eq!(store.hooks.waiting(), 1, "handled once");
    app.stop().await;
}

#[tokio::test]
async fn a_refused_handshake_reports_the_platform_message_and_retries() {
    let p = FakePlatform::start().await;
    *p.ws.refuse_next.lock().unwrap() =
        Some((403, "the app has no long connection permission".into()));
    let app = spawn_with(|s| enable_ws(s, &p)).await;
    wait_until("connected on the retry", || {
        p.ws.connections.load(std::sync::atomic::Ordering::SeqCst) == 1
    })
    .await;
    let h = health_when(&app, |h| h["state"] == "connected").await;
    let last = h["last_error"].as_str().unwrap_or_default().to_string();
    assert!(
        last.contains("the app has no long connection permission"),
        "{h}"
    );
    assert!(last.contains("403"), "{h}");
    assert_eq!(
        p.ws.endpoint_requests.lock().unwrap().len(),
        2,
        "a fresh endpoint for the retry"
    );
    assert!(
        app.metrics()
            .await
            .contains("imrelay_feishu_ws_reconnects_total 1")
    );
    app.stop().await;
}

#[tokio::test]
async fn bad_credentials_keep_the_connection_down_and_say_why() {
    let p = FakePlatform::start().await;
    let app = spawn_with(|s| {
        enable_ws(s, &p);
        s.feishu.app_secret = Secret::new("wrong");
    })
    .await;
    let h = health_when(&app, |h| h["state"] == "disconnected").await;
    assert_eq!(h["state"], "disconnected", "{h}");
    assert!(
        h["last_error"].as_str().unwrap().contains("no credential"),
        "{h}"
    );
    assert_eq!(
        p.ws.connections.load(std::sync::atomic::Ordering::SeqCst),
        0
    );
    app.stop().await;
}

#[tokio::test]
async fn a_server_that_accepts_and_drops_gets_spaced_reconnects() {
    let p = FakePlatform::start().await;
    // The platform's own jitter is 0 (the fake's endpoint config), as it may well be.
    p.ws.drop_on_accept
        .store(true, std::sync::atomic::Ordering::SeqCst);
    let app = spawn_with(|s| enable_ws(s, &p)).await;
    wait_until("three connections", || {
        p.ws.connections.load(std::sync::atomic::Ordering::SeqCst) >= 3
    })
    .await;
    let at = p.ws.connected_at.lock().unwrap().clone();
    // Each reconnect waited at least a second: a connection that did not last does not
    // reset the backoff.
    for pair in at.windows(2) {
        assert!(
            pair[1] - pair[0] >= std::time::Duration::from_secs(1),
            "reconnected after {:?}",
            pair[1] - pair[0]
        );
    }
    let h = health(&app).await;
    assert!(h["last_error"].as_str().is_some(), "{h}");
    app.stop().await;
}

#[tokio::test]
async fn a_stalled_connect_times_out_and_is_retried() {
    let p = FakePlatform::start().await;
    p.ws.stall_next
        .store(true, std::sync::atomic::Ordering::SeqCst);
    let app = spawn_with(|s| {
        enable_ws(s, &p);
        s.feishu.connect_timeout_secs = 1;
    })
    .await;
    wait_until("connected on the retry", || {
        p.ws.connections.load(std::sync::atomic::Ordering::SeqCst) == 1
    })
    .await;
    assert_eq!(p.ws.endpoint_requests.lock().unwrap().len(), 2);
    let h = health_when(&app, |h| h["state"] == "connected").await;
    assert!(
        h["last_error"]
            .as_str()
            .unwrap_or_default()
            .contains("no connection after 1 s"),
        "{h}"
    );
    assert!(
        app.metrics()
            .await
            .contains("imrelay_feishu_ws_reconnects_total 1")
    );
    app.stop().await;
}

#[tokio::test]
async fn a_huge_ping_interval_is_clamped_and_the_connection_keeps_working() {
    let p = FakePlatform::start().await;
    *p.ws.pong_config.lock().unwrap() =
        Some(json!({"PingInterval": u64::MAX, "ReconnectInterval": -1}));
    let app = spawn_with(|s| enable_ws(s, &p)).await;
    wait_until("a ping", || p.ws.pings() >= 1).await;
    let h = health_when(&app, |h| h["ping_interval_secs"] != 1).await;
    assert_eq!(h["state"], "connected", "{h}");
    assert_eq!(h["ping_interval_secs"], 600, "{h}");
    // The connection is still served: a click is answered.
    app.create_bash("toolu_ping", "ls").await;
    let (_, card) = card_for(&p.openapi, "toolu_ping").await;
    let (_, reply) = click_over_ws(
        &p,
        "msg-ping",
        &click(&event_id(), APPROVER, &button_value(&card, "approve"), None),
    )
    .await;
    assert_eq!(reply["toast"]["type"], "success");
    assert_eq!(
        p.ws.connections.load(std::sync::atomic::Ordering::SeqCst),
        1
    );
    app.stop().await;
}

#[tokio::test]
async fn malformed_multi_part_messages_are_dropped_and_the_connection_carries_on() {
    let p = FakePlatform::start().await;
    let app = spawn_with(|s| enable_ws(s, &p)).await;
    wait_until("connected", || {
        p.ws.connections.load(std::sync::atomic::Ordering::SeqCst) == 1
    })
    .await;
    app.create_bash("toolu_mp", "ls").await;
    let (_, card) = card_for(&p.openapi, "toolu_mp").await;
    let mut envelope = click(&event_id(), APPROVER, &button_value(&card, "approve"), None);
    envelope["header"]["token"] = json!("");
    let bytes = envelope.to_string().into_bytes();
    let (a, b) = bytes.split_at(bytes.len() / 2);
    // A part beyond the count, a count that changes, and far too many parts.
    p.ws.send(&data_frame("bad-seq", 2, 2, a));
    p.ws.send(&data_frame("bad-sum", 2, 0, a));
    p.ws.send(&data_frame("bad-sum", 3, 1, b));
    p.ws.send(&data_frame("bad-sum", 3, 2, b));
    p.ws.send(&data_frame("too-many", 100_000, 0, a));
    // Then a good one, which is answered.
    p.ws.send(&data_frame("good", 2, 1, b));
    p.ws.send(&data_frame("good", 2, 0, a));
    wait_until("the good message is acked", || {
        !p.ws.acks("good").is_empty()
    })
    .await;
    assert_eq!(ack_reply(&p.ws.acks("good")[0])["toast"]["type"], "success");
    for id in ["bad-seq", "bad-sum", "too-many"] {
        assert!(p.ws.acks(id).is_empty(), "{id} is not answered");
    }
    app.stop().await;
}

#[test]
fn frames_match_the_official_sdk_bytes() {
    let fx = fixture("feishu/ws_frames.json");
    let bytes = |name: &str| hex::decode(fx["frames"][name]["hex"].as_str().unwrap()).unwrap();
    let service = fx["service"].as_i64().unwrap() as i32;

    // Our ping is byte for byte the SDK's.
    assert_eq!(Frame::ping(service).to_bytes(), bytes("ping"));

    // The SDK's pong and data frames decode to what it put in them, and re-encode identically.
    for name in ["pong", "data", "sdk_ack"] {
        let raw = bytes(name);
        let frame = Frame::from_bytes(&raw).unwrap();
        let fields = &fx["frames"][name]["fields"];
        assert_eq!(frame.seq_id, fields["SeqID"].as_u64().unwrap(), "{name}");
        assert_eq!(frame.log_id, fields["LogID"].as_u64().unwrap(), "{name}");
        assert_eq!(
            frame.service,
            fields["service"].as_i64().unwrap() as i32,
            "{name}"
        );
        assert_eq!(
            frame.method,
            fields["method"].as_i64().unwrap() as i32,
            "{name}"
        );
        let headers: Vec<(String, String)> = frame
            .headers
            .iter()
            .map(|h| (h.key.clone(), h.value.clone()))
            .collect();
        let expected: Vec<(String, String)> = fields["headers"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| (p[0].as_str().unwrap().into(), p[1].as_str().unwrap().into()))
            .collect();
        assert_eq!(headers, expected, "{name}");
        assert_eq!(
            frame
                .payload
                .as_deref()
                .map(|p| String::from_utf8(p.to_vec()).unwrap()),
            fields["payload"].as_str().map(str::to_string),
            "{name}"
        );
        assert_eq!(
            frame.to_bytes(),
            raw,
            "{name} re-encodes to the SDK's bytes"
        );
    }
    let data = Frame::from_bytes(&bytes("data")).unwrap();
    assert_eq!(
        data.log_id_new.as_deref(),
        fx["frames"]["data"]["fields"]["LogIDNew"].as_str()
    );

    // A frame built field by field equals the SDK's data frame.
    let built = Frame {
        seq_id: 1,
        log_id: 7306052617406841345,
        service,
        method: METHOD_DATA,
        headers: [
            ("type", "event"),
            ("message_id", "msg_1"),
            ("sum", "1"),
            ("seq", "0"),
            ("trace_id", "trace_1"),
        ]
        .into_iter()
        .map(|(k, v)| Header {
            key: k.into(),
            value: v.into(),
        })
        .collect(),
        payload: data.payload.clone(),
        log_id_new: Some("7306052617406841345_1".into()),
        ..Frame::default()
    };
    assert_eq!(built.to_bytes(), bytes("data"));

    // The SDK's ack: the same frame with biz_rt added and {"code":200,"data":base64(reply)}.
    let ack = Frame::from_bytes(&bytes("sdk_ack")).unwrap();
    assert_eq!(ack.header("biz_rt"), Some("0"));
    assert_eq!(ack_reply(&ack), fx["sdk_ack_reply"]);
    assert_eq!(fx["sdk_ack_reply"]["toast"]["type"], "success");
}
