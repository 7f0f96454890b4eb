//! DingTalk's Stream mode: card clicks and bot messages arrive over a WebSocket that imrelay
//! opens with the app's credentials, so no public URL is needed.
//!
//! One loop: `POST /v1.0/gateway/connections/open` with the clientId, clientSecret and the
//! callback topics subscribed to gives an endpoint and a one-time ticket; the WebSocket is
//! `{endpoint}?ticket={ticket}`. Every frame is JSON `{specVersion, type, headers, data}` with
//! `data` a JSON *string*, and every one is acknowledged with
//! `{code, headers: {contentType, messageId}, message, data}`: a `SYSTEM` `ping` by echoing its
//! data, a `SYSTEM` `disconnect` before the connection is replaced, a `CALLBACK` with
//! `{"response": …}` (for a card click, the card update to apply). A callback delivered again
//! under the same `messageId` reaches the handler once and gets the same acknowledgement.
//! Drops are retried after a jittered backoff.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use tokio::sync::mpsc;
use tokio::time::Instant;
use tokio_tungstenite::tungstenite::Message;
use tokio_util::sync::CancellationToken;

use crate::channels::longconn::{self, Attempts};
use crate::settings::Secret;
use crate::sync::LockExt;

/// DingTalk's OpenAPI base URL.
pub const DEFAULT_API_BASE: &str = "https://api.dingtalk.com";
/// The topic card clicks arrive on.
pub const CARD_CALLBACK_TOPIC: &str = "/v1.0/card/instances/callback";
/// The topic messages to the bot arrive on.
pub const BOT_MESSAGE_TOPIC: &str = "/v1.0/im/bot/messages/get";
/// How long the handler may take before a callback is acknowledged without its answer.
pub const ACK_BUDGET: Duration = Duration::from_millis(2500);
/// How often a WebSocket ping is sent (the official Python SDK pings every 60 s).
pub const PING_INTERVAL: Duration = Duration::from_secs(30);
/// A connection from which nothing arrived for this long is dead.
pub const SILENCE_LIMIT: Duration = Duration::from_secs(100);
/// Shortest and longest wait between reconnect attempts.
pub const BACKOFF: (Duration, Duration) = (Duration::from_secs(1), Duration::from_secs(60));
/// How long an acknowledgement is kept to answer a redelivery (the Python SDK keeps 5 min).
pub const REMEMBER_FOR: Duration = Duration::from_secs(300);
/// Most acknowledgements kept for redeliveries.
pub const MAX_REMEMBERED: usize = 10_000;
/// Largest frame accepted.
pub const MAX_MESSAGE_BYTES: usize = 4 << 20;

/// Why the stream could not be opened or ended.
#[derive(Debug, thiserror::Error)]
pub enum StreamError {
    /// The gateway request did not complete.
    #[error("cannot reach DingTalk: {0}")]
    Network(String),
    /// The gateway refused the credentials or the request.
    #[error("DingTalk refused the connection request (HTTP {status}): {message}")]
    Refused {
        /// HTTP status.
        status: u16,
        /// DingTalk's `code` and `message`.
        message: String,
    },
    /// The gateway's answer could not be used.
    #[error("unexpected answer from DingTalk: {0}")]
    Malformed(String),
    /// The WebSocket could not be opened.
    #[error("cannot connect: {0}")]
    Connect(String),
    /// An open connection ended.
    #[error("{0}")]
    Dropped(String),
}

/// Where to connect: what the gateway answers.
#[derive(Clone, Debug, Deserialize, PartialEq, Eq)]
pub struct Endpoint {
    /// The `wss://` endpoint.
    pub endpoint: String,
    /// The one-time ticket.
    pub ticket: String,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct OpenRequest<'a> {
    client_id: &'a str,
    client_secret: &'a str,
    subscriptions: Vec<Subscription<'a>>,
    ua: String,
    local_ip: &'a str,
}

#[derive(Serialize)]
struct Subscription<'a> {
    #[serde(rename = "type")]
    kind: &'a str,
    topic: &'a str,
}

/// The connection gateway.
pub struct Gateway {
    http: reqwest::Client,
    base: String,
    client_id: String,
    client_secret: Secret,
}

impl Gateway {
    /// A gateway client for the app `client_id` (its AppKey) at `base`.
    pub fn new(base: &str, client_id: &str, client_secret: Secret) -> Result<Self, StreamError> {
        let http = reqwest::Client::builder()
            .timeout(Duration::from_secs(10))
            .user_agent(format!("imrelay/{}", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| StreamError::Network(e.to_string()))?;
        Ok(Self {
            http,
            base: base.trim_end_matches('/').to_string(),
            client_id: client_id.to_string(),
            client_secret,
        })
    }

    /// Asks for an endpoint and ticket for a connection subscribed to `topics` (callbacks).
    pub async fn open(&self, topics: &[String]) -> Result<Endpoint, StreamError> {
        let body = OpenRequest {
            client_id: &self.client_id,
            client_secret: self.client_secret.expose(),
            subscriptions: topics
                .iter()
                .map(|t| Subscription {
                    kind: "CALLBACK",
                    topic: t,
                })
                .collect(),
            ua: format!("imrelay/{}", env!("CARGO_PKG_VERSION")),
            local_ip: "",
        };
        let resp = self
            .http
            .post(format!("{}/v1.0/gateway/connections/open", self.base))
            .header(reqwest::header::ACCEPT, "application/json")
            .json(&body)
            .send()
            .await
            .map_err(|e| StreamError::Network(e.without_url().to_string()))?;
        let status = resp.status();
        let text = resp
            .text()
            .await
            .map_err(|e| StreamError::Network(e.without_url().to_string()))?;
        if !status.is_success() {
            let v: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
            let message = match (v["code"].as_str(), v["message"].as_str()) {
                (Some(c), Some(m)) => format!("{c}: {m}"),
                _ => crate::interaction::clip(text.trim(), 200),
            };
            return Err(StreamError::Refused {
                status: status.as_u16(),
                message,
            });
        }
        let e: Endpoint =
            serde_json::from_str(&text).map_err(|e| StreamError::Malformed(e.to_string()))?;
        if e.endpoint.is_empty() || e.ticket.is_empty() {
            return Err(StreamError::Malformed("no endpoint or ticket".into()));
        }
        Ok(e)
    }
}

/// One frame from DingTalk.
#[derive(Clone, Debug, Deserialize, PartialEq)]
pub struct Frame {
    /// `SYSTEM`, `EVENT` or `CALLBACK`.
    #[serde(rename = "type", default)]
    pub kind: String,
    /// `topic`, `messageId`, `contentType`, `time`, ... (values as sent).
    #[serde(default)]
    pub headers: HashMap<String, Value>,
    /// The payload: JSON in a string.
    #[serde(default)]
    pub data: String,
}

impl Frame {
    fn header(&self, key: &str) -> &str {
        self.headers
            .get(key)
            .and_then(Value::as_str)
            .unwrap_or_default()
    }

    /// The frame's topic.
    pub fn topic(&self) -> &str {
        self.header("topic")
    }

    /// The frame's message id (what its acknowledgement names).
    pub fn message_id(&self) -> &str {
        self.header("messageId")
    }
}

/// The acknowledgement of message `message_id` with status `code` and `data` (a string,
/// JSON for callbacks).
pub fn ack(message_id: &str, code: u16, message: &str, data: &str) -> String {
    json!({
        "code": code,
        "headers": {"contentType": "application/json", "messageId": message_id},
        "message": message,
        "data": data,
    })
    .to_string()
}

/// What handles callbacks: the card pipeline, in the channel.
#[async_trait::async_trait]
pub trait CallbackHandler: Send + Sync + 'static {
    /// Handles the callback on `topic` with its decoded `data`; returns the `response` its
    /// acknowledgement carries (for a card click: `cardData`/`userPrivateData` to apply).
    async fn callback(&self, topic: &str, data: Value) -> Value;
}

/// Counters a test or `/metrics` can read.
#[derive(Debug, Default)]
pub struct StreamStats {
    /// Connections opened.
    pub connected: AtomicU64,
    /// Connections open now.
    pub live: AtomicUsize,
    /// Reconnects after a drop or a failure to connect.
    pub reconnects: AtomicU64,
    /// Connections replaced because DingTalk sent `disconnect`.
    pub rotations: AtomicU64,
    /// Callbacks handled.
    pub callbacks: AtomicU64,
    /// Callbacks delivered again and answered from the record.
    pub duplicates: AtomicU64,
}

/// Acknowledgements sent, to answer a redelivery the same way.
#[derive(Default)]
struct Acked {
    map: HashMap<String, String>,
    order: VecDeque<(Instant, String)>,
}

impl Acked {
    fn get(&mut self, id: &str, now: Instant) -> Option<String> {
        while let Some((at, _)) = self.order.front() {
            if now.saturating_duration_since(*at) < REMEMBER_FOR
                && self.order.len() < MAX_REMEMBERED
            {
                break;
            }
            if let Some((_, k)) = self.order.pop_front() {
                self.map.remove(&k);
            }
        }
        self.map.get(id).cloned()
    }

    fn put(&mut self, id: String, ack: String, now: Instant) {
        if self.map.insert(id.clone(), ack).is_none() {
            self.order.push_back((now, id));
        }
    }
}

/// How a connection ended without an error.
enum Ended {
    Shutdown,
    Disconnect,
}

/// The Stream mode client.
pub struct Stream {
    gateway: Arc<Gateway>,
    topics: Vec<String>,
    handler: Arc<dyn CallbackHandler>,
    shutdown: CancellationToken,
    tls: Arc<rustls::ClientConfig>,
    connect_timeout: Duration,
    acked: Arc<Mutex<Acked>>,
    stats: Arc<StreamStats>,
    last_error: Mutex<Option<String>>,
    health: Option<Arc<crate::health::Health>>,
}

impl Stream {
    /// A client subscribed to `topics`, handing callbacks to `handler`.
    pub fn new(
        gateway: Arc<Gateway>,
        topics: Vec<String>,
        handler: Arc<dyn CallbackHandler>,
        shutdown: CancellationToken,
        tls: Arc<rustls::ClientConfig>,
    ) -> Self {
        Self {
            gateway,
            topics,
            handler,
            shutdown,
            tls,
            connect_timeout: Duration::from_secs(15),
            acked: Arc::default(),
            stats: Arc::default(),
            last_error: Mutex::new(None),
            health: None,
        }
    }

    /// Reports the connection's state to `health` (as the `dingtalk` component).
    pub fn with_health(mut self, health: Arc<crate::health::Health>) -> Self {
        self.health = Some(health);
        self
    }

    /// How long opening a connection may take before it is abandoned and retried.
    pub fn with_connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = timeout;
        self
    }

    fn report(&self, state: &str, detail: Value) {
        if let Some(h) = &self.health {
            h.set(super::CHANNEL, state, detail);
        }
    }

    /// The counters.
    pub fn stats(&self) -> Arc<StreamStats> {
        self.stats.clone()
    }

    /// Why the last connection failed or ended, if it did.
    pub fn last_error(&self) -> Option<String> {
        self.last_error.locked().clone()
    }

    /// Runs until shutdown, reconnecting on every drop.
    pub async fn run(self: Arc<Self>) {
        let mut attempts = Attempts::default();
        loop {
            let mut opened = None;
            let result = self.session(&mut opened).await;
            self.stats.live.store(0, Ordering::SeqCst);
            let error = match result {
                Ok(Ended::Shutdown) => break,
                Ok(Ended::Disconnect) => {
                    // DingTalk asked: reconnect at once, on a new ticket.
                    self.stats.rotations.fetch_add(1, Ordering::Relaxed);
                    continue;
                }
                Err(e) => e,
            };
            let wait = longconn::backoff(
                attempts.after(opened.map(|t: Instant| t.elapsed())),
                BACKOFF.0,
                BACKOFF.1,
            );
            tracing::warn!(error = %error, retry_in_ms = wait.as_millis() as u64, "dingtalk: stream connection lost or refused; reconnecting");
            *self.last_error.locked() = Some(error.to_string());
            self.report(
                "retrying",
                json!({"mode": "stream", "last_error": error.to_string()}),
            );
            self.stats.reconnects.fetch_add(1, Ordering::Relaxed);
            tokio::select! {
                _ = self.shutdown.cancelled() => break,
                _ = tokio::time::sleep(wait) => {}
            }
        }
    }

    async fn session(&self, opened: &mut Option<Instant>) -> Result<Ended, StreamError> {
        let endpoint = tokio::select! {
            _ = self.shutdown.cancelled() => return Ok(Ended::Shutdown),
            e = self.gateway.open(&self.topics) => e?,
        };
        let mut url = url::Url::parse(&endpoint.endpoint)
            .map_err(|e| StreamError::Malformed(format!("endpoint: {e}")))?;
        if !matches!(url.scheme(), "ws" | "wss") {
            return Err(StreamError::Malformed(
                "the endpoint is not ws:// or wss://".into(),
            ));
        }
        url.query_pairs_mut()
            .append_pair("ticket", &endpoint.ticket);
        let dialed = longconn::dial(
            url.as_str(),
            MAX_MESSAGE_BYTES,
            self.tls.clone(),
            self.connect_timeout,
            &self.shutdown,
        )
        .await;
        let Some(ws) = dialed.map_err(|e| StreamError::Connect(e.to_string()))? else {
            return Ok(Ended::Shutdown);
        };
        *opened = Some(Instant::now());
        self.stats.connected.fetch_add(1, Ordering::Relaxed);
        self.stats.live.store(1, Ordering::SeqCst);
        tracing::info!("dingtalk: stream connection established");
        self.report("connected", json!({"mode": "stream"}));
        let (mut sink, mut stream) = ws.split();
        let (ack_tx, mut ack_rx) = mpsc::channel::<String>(64);
        let mut ping = tokio::time::interval_at(Instant::now() + PING_INTERVAL, PING_INTERVAL);
        let mut last_seen = Instant::now();
        loop {
            tokio::select! {
                _ = self.shutdown.cancelled() => {
                    let _ = sink.send(Message::Close(None)).await;
                    return Ok(Ended::Shutdown);
                }
                Some(a) = ack_rx.recv() => {
                    sink.send(Message::Text(a.into())).await
                        .map_err(|e| StreamError::Dropped(format!("acknowledgement failed: {e}")))?;
                }
                _ = ping.tick() => {
                    if last_seen.elapsed() > SILENCE_LIMIT {
                        return Err(StreamError::Dropped(format!("nothing from DingTalk for {} s", SILENCE_LIMIT.as_secs())));
                    }
                    sink.send(Message::Ping(Vec::new().into())).await
                        .map_err(|e| StreamError::Dropped(format!("ping failed: {e}")))?;
                }
                msg = stream.next() => {
                    last_seen = Instant::now();
                    let Some(frame) = longconn::json_frame::<Frame>(msg, "dingtalk", "DingTalk")
                        .map_err(StreamError::Dropped)?
                    else {
                        continue;
                    };
                    if frame.kind == "SYSTEM" && frame.topic() == "disconnect" {
                        // Acknowledge on this connection first, then replace it.
                        let a = ack(frame.message_id(), 200, "OK", &frame.data);
                        let _ = sink.send(Message::Text(a.into())).await;
                        let _ = sink.send(Message::Close(None)).await;
                        return Ok(Ended::Disconnect);
                    }
                    self.frame(frame, &ack_tx);
                }
            }
        }
    }

    /// Answers one frame; callbacks on a task of their own so pings are never held up.
    fn frame(&self, frame: Frame, acks: &mpsc::Sender<String>) {
        let id = frame.message_id().to_string();
        match frame.kind.as_str() {
            "SYSTEM" => {
                // `ping` and anything else: echo the data back.
                let _ = acks.try_send(ack(&id, 200, "OK", &frame.data));
            }
            "CALLBACK" => {
                if let Some(done) = self.acked.locked().get(&id, Instant::now()) {
                    self.stats.duplicates.fetch_add(1, Ordering::Relaxed);
                    let _ = acks.try_send(done);
                    return;
                }
                self.stats.callbacks.fetch_add(1, Ordering::Relaxed);
                let handler = self.handler.clone();
                let acked = self.acked.clone();
                let acks = acks.clone();
                tokio::spawn(async move {
                    let topic = frame.topic().to_string();
                    let data: Value = serde_json::from_str(&frame.data).unwrap_or(Value::Null);
                    let work = handler.callback(&topic, data);
                    let (code, response) = match tokio::time::timeout(ACK_BUDGET, work).await {
                        Ok(r) => (200, r),
                        Err(_) => {
                            tracing::warn!(
                                topic,
                                "dingtalk: the handler is slow; acknowledged without its answer"
                            );
                            (200, json!({}))
                        }
                    };
                    let a = ack(&id, code, "OK", &json!({"response": response}).to_string());
                    acked.locked().put(id, a.clone(), Instant::now());
                    if acks.send(a).await.is_err() {
                        tracing::warn!(
                            "dingtalk: the connection closed before a callback could be acknowledged"
                        );
                    }
                });
            }
            other => {
                tracing::debug!(
                    kind = other,
                    topic = frame.topic(),
                    "dingtalk: a frame imrelay did not subscribe to"
                );
                let _ = acks.try_send(ack(&id, 404, "not implemented", ""));
            }
        }
    }
}

/// A card click as the card callback topic delivers it (`data`, decoded).
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct CardClick {
    /// The card's own id, chosen when it was created.
    #[serde(default)]
    pub out_track_id: String,
    /// Who clicked (the organisation's userId).
    #[serde(default)]
    pub user_id: String,
    /// The organisation.
    #[serde(default)]
    pub corp_id: String,
    /// `{"cardPrivateData": {"actionIds": [...], "params": {...}}}`, as a JSON string.
    #[serde(default)]
    pub content: String,
}

impl CardClick {
    /// The action ids and parameters of the click (`content.cardPrivateData`).
    pub fn action(&self) -> Option<(Vec<String>, serde_json::Map<String, Value>)> {
        let content: Value = serde_json::from_str(&self.content).ok()?;
        let private = content.get("cardPrivateData")?;
        let ids = private
            .get("actionIds")
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(Value::as_str)
                    .map(str::to_string)
                    .collect()
            })
            .unwrap_or_default();
        let params = private
            .get("params")
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_default();
        Some((ids, params))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_and_acks_are_shaped_as_the_official_sdks_do() {
        // A ping as the official Go SDK's tests send it (client/client_test.go).
        let f: Frame = serde_json::from_str(
            r#"{"headers":{"messageId":"m-1","topic":"ping"},"type":"SYSTEM","data":"{\"hello\":\"world\"}"}"#,
        )
        .unwrap();
        assert_eq!(
            (f.kind.as_str(), f.topic(), f.message_id()),
            ("SYSTEM", "ping", "m-1")
        );
        let a: Value = serde_json::from_str(&ack("m-1", 200, "OK", &f.data)).unwrap();
        assert_eq!(
            a,
            json!({"code": 200, "headers": {"contentType": "application/json", "messageId": "m-1"},
                   "message": "OK", "data": "{\"hello\":\"world\"}"})
        );
    }

    #[test]
    fn a_card_click_names_its_card_clicker_and_action() {
        let click: CardClick = serde_json::from_value(json!({
            "extension": "{}", "corpId": "ding123", "userId": "manager1", "type": "actionCallback",
            "outTrackId": "imrelay-t1", "spaceType": "IM_GROUP", "spaceId": "cid1", "userIdType": 1,
            "content": "{\"cardPrivateData\":{\"actionIds\":[\"approve\"],\"params\":{\"token\":\"tok\"}}}"
        }))
        .unwrap();
        assert_eq!(click.out_track_id, "imrelay-t1");
        assert_eq!(click.user_id, "manager1");
        let (ids, params) = click.action().unwrap();
        assert_eq!(ids, ["approve"]);
        assert_eq!(params["token"], "tok");
    }
}
