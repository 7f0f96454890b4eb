//! The Stream mode client against the fake gateway.

use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};

use imrelay::channels::dingtalk::stream::{
    CARD_CALLBACK_TOPIC, CallbackHandler, CardClick, Gateway, Stream,
};
use imrelay::channels::longconn::tls_config;
use imrelay::config::Secret;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use super::fake::{CLIENT_ID, CLIENT_SECRET, FakeDingTalk, card_click};
use crate::support::wait_until;

/// Records card clicks and answers each with a card update naming the action.
#[derive(Default)]
struct Cards {
    clicks: Mutex<Vec<(String, CardClick)>>,
}

#[async_trait::async_trait]
impl CallbackHandler for Cards {
    async fn callback(&self, topic: &str, data: Value) -> Value {
        let click: CardClick = serde_json::from_value(data).unwrap();
        let action = click
            .action()
            .map(|(ids, _)| ids.join(","))
            .unwrap_or_default();
        self.clicks.lock().unwrap().push((topic.to_string(), click));
        json!({"cardUpdateOptions": {"updateCardDataByKey": true},
               "cardData": {"cardParamMap": {"status": action}}})
    }
}

fn start(
    fake: &FakeDingTalk,
    secret: &str,
    cards: Arc<Cards>,
) -> (Arc<Stream>, CancellationToken, tokio::task::JoinHandle<()>) {
    let gateway = Arc::new(Gateway::new(&fake.api, CLIENT_ID, Secret::new(secret)).unwrap());
    let shutdown = CancellationToken::new();
    let stream = Arc::new(Stream::new(
        gateway,
        vec![CARD_CALLBACK_TOPIC.to_string()],
        cards,
        shutdown.clone(),
        tls_config().unwrap(),
    ));
    let task = tokio::spawn(stream.clone().run());
    (stream, shutdown, task)
}

#[tokio::test]
async fn connects_answers_pings_and_acknowledges_card_clicks_with_the_update() {
    let fake = FakeDingTalk::start().await;
    let cards = Arc::new(Cards::default());
    let (stream, shutdown, task) = start(&fake, CLIENT_SECRET, cards.clone());
    let s = &fake.state;
    wait_until("connected", || s.open_conns() == [0]).await;
    let open = s.opens.lock().unwrap()[0].clone();
    assert_eq!(open["clientId"], CLIENT_ID);
    assert_eq!(
        open["subscriptions"],
        json!([{"type": "CALLBACK", "topic": CARD_CALLBACK_TOPIC}])
    );

    s.push(0, "SYSTEM", "ping", "ping-1", &json!({"opaque": 1}));
    wait_until("pong", || !s.acks_of("ping-1").is_empty()).await;
    let (_, pong) = &s.acks_of("ping-1")[0];
    assert_eq!(pong["code"], 200);
    assert_eq!(
        pong["data"],
        json!({"opaque": 1}).to_string(),
        "the ping's data echoed"
    );

    s.push(
        0,
        "CALLBACK",
        CARD_CALLBACK_TOPIC,
        "msg-1",
        &card_click("imrelay-t1", "manager1", "approve", "tok"),
    );
    wait_until("the click acked", || !s.acks_of("msg-1").is_empty()).await;
    let (_, ack) = &s.acks_of("msg-1")[0];
    assert_eq!(ack["code"], 200);
    assert_eq!(ack["headers"]["messageId"], "msg-1");
    let data: Value = serde_json::from_str(ack["data"].as_str().unwrap()).unwrap();
    assert_eq!(
        data["response"]["cardData"]["cardParamMap"]["status"],
        "approve"
    );
    let clicks = cards.clicks.lock().unwrap().clone();
    assert_eq!(clicks.len(), 1);
    assert_eq!(clicks[0].0, CARD_CALLBACK_TOPIC);
    assert_eq!(clicks[0].1.out_track_id, "imrelay-t1");
    assert_eq!(clicks[0].1.user_id, "manager1");

    // Delivered again under the same message id: the same answer, the handler once.
    s.push(
        0,
        "CALLBACK",
        CARD_CALLBACK_TOPIC,
        "msg-1",
        &card_click("imrelay-t1", "manager1", "approve", "tok"),
    );
    wait_until("the copy acked", || s.acks_of("msg-1").len() == 2).await;
    assert_eq!(s.acks_of("msg-1")[1].1, s.acks_of("msg-1")[0].1);
    assert_eq!(cards.clicks.lock().unwrap().len(), 1);
    assert_eq!(stream.stats().duplicates.load(Ordering::Relaxed), 1);
    shutdown.cancel();
    task.await.unwrap();
    wait_until("closed", || s.open_conns().is_empty()).await;
}

#[tokio::test]
async fn a_disconnect_is_acknowledged_then_the_connection_is_replaced() {
    let fake = FakeDingTalk::start().await;
    let (stream, shutdown, task) = start(&fake, CLIENT_SECRET, Arc::new(Cards::default()));
    let s = &fake.state;
    wait_until("connected", || s.open_conns() == [0]).await;
    s.push(0, "SYSTEM", "disconnect", "dc-1", &json!({}));
    wait_until("replaced", || s.open_conns() == [1]).await;
    let acks = s.acks_of("dc-1");
    assert_eq!(acks.len(), 1);
    assert_eq!(acks[0].0, 0, "acknowledged on the connection it came on");
    assert_eq!(s.opens.lock().unwrap().len(), 2, "a new ticket");
    assert_eq!(stream.stats().rotations.load(Ordering::Relaxed), 1);
    assert_eq!(stream.stats().reconnects.load(Ordering::Relaxed), 0);

    // A drop is retried after a backoff.
    s.drop_conn(1);
    wait_until("reconnected", || s.open_conns() == [2]).await;
    assert_eq!(stream.stats().reconnects.load(Ordering::Relaxed), 1);
    shutdown.cancel();
    task.await.unwrap();
}

#[tokio::test]
async fn refused_credentials_are_reported_and_no_connection_opens() {
    let fake = FakeDingTalk::start().await;
    let (stream, shutdown, task) = start(&fake, "wrong-secret", Arc::new(Cards::default()));
    wait_until("refused", || stream.last_error().is_some()).await;
    let error = stream.last_error().unwrap();
    assert!(
        error.contains("InvalidAuthentication") && error.contains("401"),
        "{error}"
    );
    assert!(!error.contains("wrong-secret"), "{error}");
    assert!(fake.state.open_conns().is_empty());
    shutdown.cancel();
    task.await.unwrap();
}
