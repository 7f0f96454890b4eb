//! The long connection: card clicks arrive over a WebSocket that imrelay opens to the
//! platform, so no public URL is needed.
//!
//! One loop: ask for an endpoint with the app credentials, connect, ping at the interval the
//! platform gives (and apply any config a pong carries), reassemble multi-part messages, hand
//! every event to the same [`Callbacks`] handler the webhook endpoint uses, and ack each data
//! frame with the handler's reply (base64 JSON in `data`). On any drop it reconnects after the
//! platform's jitter and a bounded, jittered backoff that starts over only after a connection
//! that lasted, logging why. Duplicate deliveries after a reconnect are recognised by the
//! handler's event-id deduplication, which lives in the store.
//!
//! Everything that comes from the platform is bounded: connection settings, connect time,
//! message size and multi-part reassembly (`Reassembly`).

use std::collections::HashMap;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::sync::atomic::AtomicI64;
use std::time::Duration;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use futures_util::{FutureExt, SinkExt, StreamExt};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::gauge::Gauge;
use rand::Rng;
use serde_json::{Value, json};
use tokio::sync::mpsc;
use tokio::time::Instant;
use tokio_tungstenite::tungstenite::{self, Message};
use tokio_util::sync::CancellationToken;

use super::api::{ApiError, ClientConfig, OpenApi};
use super::frame::{Frame, METHOD_CONTROL, METHOD_DATA};
use super::inbound::{Callbacks, Source};
use crate::channels::longconn::{self, DialError, Socket};
use crate::health::Health;

/// The health component name.
const COMPONENT: &str = "feishu";
/// Longest wait between reconnect attempts.
pub(crate) const MAX_BACKOFF: Duration = Duration::from_secs(300);
/// Shortest wait between reconnect attempts, whatever the platform says.
pub(crate) const MIN_BACKOFF: Duration = Duration::from_secs(1);
/// A connection that stayed up this long was a good one: the backoff starts over after it.
pub(crate) const STABLE_AFTER: Duration = Duration::from_secs(60);
/// The range a ping interval from the platform is held to, seconds.
const PING_RANGE: (u64, u64) = (1, 600);
/// The range the platform's reconnect interval and jitter are held to, seconds.
const RECONNECT_RANGE: (u64, u64) = (0, 300);
/// How long the parts of a multi-part message are kept waiting for the rest.
pub(crate) const PARTS_TTL: Duration = Duration::from_secs(10);
/// Most messages being reassembled at once.
pub(crate) const MAX_PARTIAL: usize = 64;
/// Most parts one message may come in.
pub(crate) const MAX_PARTS: usize = 64;
/// Largest message, whole or reassembled, bytes (card clicks are a few KB).
pub(crate) const MAX_MESSAGE_BYTES: usize = 1 << 20;
/// Most bytes held for all messages being reassembled.
pub(crate) const MAX_HELD_BYTES: usize = 4 << 20;

/// The connection settings in force (the platform's, with local defaults).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Config {
    /// Seconds between pings.
    pub ping_interval: u64,
    /// Seconds between reconnect attempts (the backoff's ceiling).
    pub reconnect_interval: u64,
    /// Upper bound of the random delay before the first reconnect, seconds.
    pub reconnect_nonce: u64,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            ping_interval: 120,
            reconnect_interval: 120,
            reconnect_nonce: 30,
        }
    }
}

/// `v` seconds, held to `range`; `None` if the platform's value is out of the question
/// (negative, or zero where zero makes no sense).
fn secs(v: Option<i64>, range: (u64, u64)) -> Option<u64> {
    let v = u64::try_from(v?).ok()?;
    (v > 0 || range.0 == 0).then(|| v.clamp(range.0, range.1))
}

impl Config {
    /// Applies what the platform sent, held to sane bounds (a huge interval would overflow
    /// the clock, a tiny one would flood it); returns whether anything changed.
    pub(crate) fn apply(&mut self, c: &ClientConfig) -> bool {
        let before = *self;
        if let Some(p) = secs(c.ping_interval, PING_RANGE) {
            self.ping_interval = p;
        }
        if let Some(r) = secs(c.reconnect_interval, RECONNECT_RANGE).filter(|r| *r > 0) {
            self.reconnect_interval = r;
        }
        if let Some(n) = secs(c.reconnect_nonce, RECONNECT_RANGE) {
            self.reconnect_nonce = n;
        }
        *self != before
    }

    /// The ping interval.
    fn ping(&self) -> Duration {
        Duration::from_secs(self.ping_interval)
    }

    /// The wait before reconnect attempt `attempt` (0 after a connection that was up for a
    /// while): the platform's random jitter first, then an exponential backoff capped by its
    /// interval, jittered; never less than `MIN_BACKOFF`.
    pub(crate) fn delay(&self, attempt: u32) -> Duration {
        let mut rng = rand::rng();
        let d = if attempt == 0 {
            let nonce = Duration::from_secs(self.reconnect_nonce).min(MAX_BACKOFF);
            Duration::from_millis(rng.random_range(0..=nonce.as_millis() as u64))
        } else {
            let cap = Duration::from_secs(self.reconnect_interval.max(1)).min(MAX_BACKOFF);
            let exp = Duration::from_secs(1u64 << (attempt - 1).min(16)).min(cap);
            let lo = exp / 2;
            lo + Duration::from_millis(rng.random_range(0..=(exp - lo).as_millis() as u64))
        };
        d.max(MIN_BACKOFF)
    }
}

/// Counts reconnect attempts: the count grows with every connection that failed or did not
/// last, and starts over only after one stayed up for [`STABLE_AFTER`] (a server that
/// accepts and then drops at once must not get a reconnect loop).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Attempts(u32);

impl Attempts {
    /// Records how a connection ended (`up_for`: how long it was open, if it opened) and
    /// returns the attempt number for the next wait.
    pub(crate) fn after(&mut self, up_for: Option<Duration>) -> u32 {
        if up_for.is_some_and(|d| d >= STABLE_AFTER) {
            self.0 = 0;
        }
        let n = self.0;
        self.0 = self.0.saturating_add(1);
        n
    }

    /// Attempts since the last good connection.
    pub(crate) fn count(&self) -> u32 {
        self.0
    }
}

/// Why a session ended.
#[derive(Debug, thiserror::Error)]
pub(crate) enum WsError {
    /// The endpoint request failed.
    #[error("endpoint request failed: {0}")]
    Endpoint(#[from] ApiError),
    /// The endpoint URL is unusable.
    #[error("bad endpoint URL: {0}")]
    BadUrl(String),
    /// The platform refused the WebSocket handshake.
    #[error("handshake refused (HTTP {status}, handshake-status {code}): {message}")]
    Handshake {
        /// HTTP status of the refusal.
        status: u16,
        /// The `Handshake-Status` header.
        code: String,
        /// The `Handshake-Msg` header (the platform's reason).
        message: String,
    },
    /// Connecting failed before the handshake.
    #[error("cannot connect: {0}")]
    Connect(String),
    /// An established connection dropped.
    #[error("{0}")]
    Dropped(String),
}

/// The long-connection client.
pub(crate) struct LongConnection {
    /// The platform client (endpoint requests).
    pub api: Arc<OpenApi>,
    /// The shared click handler.
    pub callbacks: Arc<Callbacks>,
    /// `/healthz` reporting.
    pub health: Arc<Health>,
    /// Reconnects, for `/metrics`.
    pub reconnects: Counter,
    /// 1 while connected.
    pub connected: Gauge<i64, AtomicI64>,
    /// Stops the loop.
    pub shutdown: CancellationToken,
    /// How long opening a connection (TCP, TLS, WebSocket handshake) may take.
    pub connect_timeout: Duration,
    /// TLS settings for `wss://`.
    pub tls: Arc<rustls::ClientConfig>,
}

enum Ended {
    Shutdown,
}

/// Reports the connection down when the loop ends, however it ends (a panic included), so
/// `/healthz` and the gauge never say "connected" for a connection nobody serves.
struct Down<'a>(&'a LongConnection);

impl Drop for Down<'_> {
    fn drop(&mut self) {
        self.0.connected.set(0);
        if std::thread::panicking() {
            self.0.health.set(
                COMPONENT,
                "failed",
                json!({"mode": "websocket", "last_error": "the long connection task failed; see the log"}),
            );
        } else {
            self.0
                .health
                .set(COMPONENT, "stopped", json!({"mode": "websocket"}));
        }
    }
}

impl LongConnection {
    /// Runs until shutdown, reconnecting on every drop.
    pub(crate) async fn run(self) {
        let _down = Down(&self);
        let mut config = Config::default();
        let mut attempts = Attempts::default();
        let mut last_error: Option<String> = None;
        loop {
            self.health.set(
                COMPONENT,
                "connecting",
                json!({"mode": "websocket", "attempt": attempts.count()}),
            );
            let mut opened: Option<Instant> = None;
            let session = self.session(&mut config, &mut opened, last_error.as_deref());
            let reason = match AssertUnwindSafe(session).catch_unwind().await {
                Ok(Ok(Ended::Shutdown)) => break,
                Ok(Err(e)) => e,
                // A bug, not the network: logged by the panic hook; start over all the same.
                Err(_) => WsError::Dropped("internal error in the connection task".into()),
            };
            self.connected.set(0);
            if self.shutdown.is_cancelled() {
                break;
            }
            let attempt = attempts.after(opened.map(|t| t.elapsed()));
            let delay = config.delay(attempt);
            match &reason {
                WsError::Dropped(_) => {
                    tracing::warn!(reason = %reason, attempt, retry_in_ms = delay.as_millis() as u64, "feishu: long connection lost; reconnecting")
                }
                _ => {
                    tracing::error!(error = %reason, attempt, retry_in_ms = delay.as_millis() as u64, "feishu: cannot open the long connection; retrying")
                }
            }
            self.health.set(
                COMPONENT,
                "disconnected",
                json!({"mode": "websocket", "last_error": reason.to_string(), "retry_in_ms": delay.as_millis() as u64}),
            );
            self.reconnects.inc();
            last_error = Some(reason.to_string());
            tokio::select! {
                _ = self.shutdown.cancelled() => break,
                _ = tokio::time::sleep(delay) => {}
            }
        }
        tracing::info!("feishu: long connection closed (shutdown)");
    }

    /// One connection, from the endpoint request until it ends; `opened` is set when the
    /// handshake succeeds.
    async fn session(
        &self,
        config: &mut Config,
        opened: &mut Option<Instant>,
        last_error: Option<&str>,
    ) -> Result<Ended, WsError> {
        let Some((ws, service, conn_id)) = self.open(config).await? else {
            return Ok(Ended::Shutdown);
        };
        *opened = Some(Instant::now());
        self.connected.set(1);
        tracing::info!(
            conn_id,
            service,
            ping_interval_secs = config.ping_interval,
            "feishu: long connection established"
        );
        self.report_connected(config, &conn_id, last_error);
        let (mut sink, mut stream) = ws.split();
        let (ack_tx, mut ack_rx) = mpsc::channel::<Vec<u8>>(64);
        let mut parts = Reassembly::default();
        let mut ping = tokio::time::interval_at(Instant::now() + config.ping(), config.ping());
        let mut last_seen = Instant::now();
        loop {
            let silence = (config.ping() * 3).max(Duration::from_secs(10));
            tokio::select! {
                _ = self.shutdown.cancelled() => {
                    let _ = sink.send(Message::Close(None)).await;
                    return Ok(Ended::Shutdown);
                }
                _ = ping.tick() => {
                    if last_seen.elapsed() > silence {
                        return Err(WsError::Dropped(format!("no answer from the platform for {} s", silence.as_secs())));
                    }
                    for (message_id, missing) in parts.prune(Instant::now()) {
                        tracing::warn!(message_id, missing, "feishu: a multi-part message never arrived whole; dropped");
                    }
                    sink.send(Message::Binary(Frame::ping(service).to_bytes().into()))
                        .await
                        .map_err(|e| WsError::Dropped(format!("ping failed: {e}")))?;
                }
                Some(ack) = ack_rx.recv() => {
                    sink.send(Message::Binary(ack.into()))
                        .await
                        .map_err(|e| WsError::Dropped(format!("ack failed: {e}")))?;
                }
                msg = stream.next() => {
                    last_seen = Instant::now();
                    match msg {
                        None => return Err(WsError::Dropped("the connection ended".into())),
                        Some(Err(e)) => return Err(WsError::Dropped(format!("connection error: {e}"))),
                        Some(Ok(Message::Close(frame))) => {
                            let why = frame.map(|f| format!("{} {}", u16::from(f.code), f.reason)).unwrap_or_else(|| "no reason given".into());
                            return Err(WsError::Dropped(format!("closed by the platform: {why}")));
                        }
                        Some(Ok(Message::Binary(bytes))) => {
                            if self.frame(&bytes, config, &mut parts, &ack_tx) {
                                ping = tokio::time::interval_at(Instant::now() + config.ping(), config.ping());
                                self.report_connected(config, &conn_id, last_error);
                            }
                        }
                        Some(Ok(_)) => {} // text, ping and pong frames of the WebSocket layer
                    }
                }
            }
        }
    }

    /// Asks for an endpoint (applying the config it carries) and connects to it: the socket,
    /// with the service and connection ids the endpoint names; `None` at shutdown.
    async fn open(&self, config: &mut Config) -> Result<Option<(Socket, i32, String)>, WsError> {
        let endpoint = self.api.ws_endpoint().await?;
        if let Some(c) = &endpoint.config {
            config.apply(c);
        }
        let (service, conn_id) = parse_endpoint(&endpoint.url)?;
        let dialed = longconn::dial(
            endpoint.url.as_str(),
            MAX_MESSAGE_BYTES + 64 * 1024,
            self.tls.clone(),
            self.connect_timeout,
            &self.shutdown,
        )
        .await;
        match dialed {
            Ok(ws) => Ok(ws.map(|ws| (ws, service, conn_id))),
            Err(DialError::Stalled) => Err(WsError::Connect(format!(
                "no connection after {} s (TCP, TLS or the WebSocket handshake stalled)",
                self.connect_timeout.as_secs()
            ))),
            Err(DialError::Failed(e)) => Err(handshake_error(e)),
        }
    }

    /// Handles one binary frame; returns whether the connection settings changed.
    fn frame(
        &self,
        bytes: &[u8],
        config: &mut Config,
        parts: &mut Reassembly,
        acks: &mpsc::Sender<Vec<u8>>,
    ) -> bool {
        let frame = match Frame::from_bytes(bytes) {
            Ok(f) => f,
            Err(e) => {
                tracing::warn!(error = %e, "feishu: undecodable frame ignored");
                return false;
            }
        };
        match frame.method {
            METHOD_CONTROL => return self.control(frame, config),
            METHOD_DATA => self.data(frame, parts, acks),
            other => tracing::debug!(method = other, "feishu: frame of unknown method ignored"),
        }
        false
    }

    fn report_connected(&self, config: &Config, conn_id: &str, last_error: Option<&str>) {
        self.health.set(
            COMPONENT,
            "connected",
            json!({
                "mode": "websocket",
                "conn_id": conn_id,
                "ping_interval_secs": config.ping_interval,
                "reconnect_interval_secs": config.reconnect_interval,
                "last_error": last_error,
            }),
        );
    }

    /// Handles a control frame; returns whether the connection settings changed.
    fn control(&self, frame: Frame, config: &mut Config) -> bool {
        if frame.header("type") != Some("pong") {
            return false;
        }
        let Some(payload) = frame.payload.filter(|p| !p.is_empty()) else {
            return false;
        };
        let Ok(c) = serde_json::from_slice::<ClientConfig>(&payload) else {
            tracing::debug!("feishu: a pong with an unreadable config ignored");
            return false;
        };
        let changed = config.apply(&c);
        if changed {
            tracing::info!(
                ping_interval_secs = config.ping_interval,
                reconnect_interval_secs = config.reconnect_interval,
                "feishu: the platform updated the connection settings"
            );
        }
        changed
    }

    /// Handles a data frame: reassembles it if needed, then answers it on a task of its own so
    /// pings and other frames are never held up.
    fn data(&self, mut frame: Frame, parts: &mut Reassembly, acks: &mpsc::Sender<Vec<u8>>) {
        let message_id = frame.header("message_id").unwrap_or_default().to_string();
        let sum: usize = frame
            .header("sum")
            .and_then(|s| s.parse().ok())
            .unwrap_or(1)
            .max(1);
        let seq: usize = frame
            .header("seq")
            .and_then(|s| s.parse().ok())
            .unwrap_or(0);
        let part = frame.payload.take().unwrap_or_default();
        let payload = if sum > 1 {
            match parts.add(&message_id, sum, seq, part, Instant::now()) {
                Ok(Some(whole)) => whole,
                Ok(None) => return,
                Err(e) => {
                    tracing::warn!(message_id, sum, seq, error = %e, "feishu: a message part dropped");
                    return;
                }
            }
        } else {
            part
        };
        let kind = frame.header("type").unwrap_or_default().to_string();
        let callbacks = self.callbacks.clone();
        let acks = acks.clone();
        tokio::spawn(async move {
            let started = Instant::now();
            let reply = match (kind.as_str(), serde_json::from_slice::<Value>(&payload)) {
                ("event" | "card", Ok(envelope)) => {
                    Some(callbacks.handle(envelope, Source::LongConnection).await)
                }
                (_, Err(e)) => {
                    tracing::warn!(message_id, error = %e, "feishu: a data frame that is not JSON");
                    None
                }
                (other, Ok(_)) => {
                    tracing::debug!(
                        message_id,
                        kind = other,
                        "feishu: data frame of an unknown type"
                    );
                    Some(json!({}))
                }
            };
            let mut ack = frame;
            ack.set_header("biz_rt", started.elapsed().as_millis().to_string());
            let body = match reply {
                Some(r) => {
                    json!({"code": 200, "headers": {}, "data": STANDARD.encode(r.to_string())})
                }
                None => json!({"code": 500, "headers": {}, "data": ""}),
            };
            ack.payload = Some(body.to_string().into_bytes());
            if acks.send(ack.to_bytes()).await.is_err() {
                tracing::warn!(
                    message_id,
                    "feishu: the connection closed before a callback could be acknowledged"
                );
            }
        });
    }
}

/// Why a part of a multi-part message was dropped.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub(crate) enum PartError {
    /// `seq` is not below `sum`.
    #[error("part {seq} of a message in {sum} parts does not exist")]
    OutOfRange {
        /// The part's index.
        seq: usize,
        /// The number of parts it claims.
        sum: usize,
    },
    /// More parts than [`MAX_PARTS`].
    #[error("a message in {0} parts is more than the {MAX_PARTS} allowed")]
    TooManyParts(usize),
    /// The parts of one message disagree on their number; the message is dropped.
    #[error("the parts disagree on their number ({0} then {1}); the message is dropped")]
    SumChanged(usize, usize),
    /// The message would be larger than [`MAX_MESSAGE_BYTES`]; it is dropped.
    #[error("the message is larger than {MAX_MESSAGE_BYTES} bytes; dropped")]
    TooLarge,
    /// [`MAX_PARTIAL`] messages are already waiting for parts.
    #[error("{MAX_PARTIAL} messages are already waiting for their parts")]
    TooManyMessages,
    /// The parts held would exceed [`MAX_HELD_BYTES`]; the message is dropped.
    #[error("more than {MAX_HELD_BYTES} bytes of parts would be held; the message is dropped")]
    Full,
}

/// A message being reassembled.
struct Partial {
    parts: Vec<Option<Vec<u8>>>,
    bytes: usize,
    started: Instant,
}

/// Multi-part messages being reassembled, bounded in number, parts, bytes and time.
#[derive(Default)]
pub(crate) struct Reassembly {
    open: HashMap<String, Partial>,
    held: usize,
}

impl Reassembly {
    /// Adds part `seq` of `sum` of message `message_id`; returns the whole message once every
    /// part is in. A part received twice replaces the first.
    pub(crate) fn add(
        &mut self,
        message_id: &str,
        sum: usize,
        seq: usize,
        part: Vec<u8>,
        now: Instant,
    ) -> Result<Option<Vec<u8>>, PartError> {
        self.prune(now);
        if sum > MAX_PARTS {
            self.remove(message_id);
            return Err(PartError::TooManyParts(sum));
        }
        if seq >= sum {
            return Err(PartError::OutOfRange { seq, sum });
        }
        match self.open.get(message_id) {
            Some(p) if p.parts.len() != sum => {
                let was = p.parts.len();
                self.remove(message_id);
                return Err(PartError::SumChanged(was, sum));
            }
            Some(_) => {}
            None if self.open.len() >= MAX_PARTIAL => return Err(PartError::TooManyMessages),
            None => {
                self.open.insert(
                    message_id.to_string(),
                    Partial {
                        parts: vec![None; sum],
                        bytes: 0,
                        started: now,
                    },
                );
            }
        }
        let Some(entry) = self.open.get_mut(message_id) else {
            return Ok(None); // inserted just above
        };
        let replaced = entry.parts[seq].as_ref().map_or(0, Vec::len);
        let bytes = entry.bytes - replaced + part.len();
        let held = self.held - replaced + part.len();
        if bytes > MAX_MESSAGE_BYTES || held > MAX_HELD_BYTES {
            self.remove(message_id);
            return Err(if bytes > MAX_MESSAGE_BYTES {
                PartError::TooLarge
            } else {
                PartError::Full
            });
        }
        entry.parts[seq] = Some(part);
        entry.bytes = bytes;
        self.held = held;
        if entry.parts.iter().any(Option::is_none) {
            return Ok(None);
        }
        Ok(self
            .remove(message_id)
            .map(|p| p.parts.into_iter().flatten().flatten().collect()))
    }

    /// Drops messages still incomplete [`PARTS_TTL`] after their first part; returns each
    /// one's id and how many parts it lacked.
    pub(crate) fn prune(&mut self, now: Instant) -> Vec<(String, usize)> {
        let expired: Vec<String> = self
            .open
            .iter()
            .filter(|(_, p)| now.saturating_duration_since(p.started) >= PARTS_TTL)
            .map(|(id, _)| id.clone())
            .collect();
        expired
            .into_iter()
            .filter_map(|id| {
                let p = self.remove(&id)?;
                Some((id, p.parts.iter().filter(|x| x.is_none()).count()))
            })
            .collect()
    }

    /// Messages waiting for parts, and the bytes held for them.
    #[cfg(test)]
    pub(crate) fn held(&self) -> (usize, usize) {
        (self.open.len(), self.held)
    }

    fn remove(&mut self, message_id: &str) -> Option<Partial> {
        let p = self.open.remove(message_id)?;
        self.held -= p.bytes;
        Some(p)
    }
}

fn parse_endpoint(url: &str) -> Result<(i32, String), WsError> {
    let query = url.split_once('?').map(|(_, q)| q).unwrap_or_default();
    let mut service = None;
    let mut device = String::new();
    for pair in query.split('&') {
        match pair.split_once('=') {
            Some(("service_id", v)) => service = v.parse::<i32>().ok(),
            Some(("device_id", v)) => device = v.to_string(),
            _ => {}
        }
    }
    if !(url.starts_with("wss://") || url.starts_with("ws://")) {
        return Err(WsError::BadUrl("not a ws:// or wss:// URL".into()));
    }
    let service =
        service.ok_or_else(|| WsError::BadUrl("no service_id in the endpoint URL".into()))?;
    Ok((service, device))
}

fn handshake_error(e: tungstenite::Error) -> WsError {
    match e {
        tungstenite::Error::Http(resp) => {
            let h = |k: &str| {
                resp.headers()
                    .get(k)
                    .and_then(|v| v.to_str().ok())
                    .unwrap_or_default()
                    .to_string()
            };
            let mut message = h("handshake-msg");
            if message.is_empty() {
                message = "no Handshake-Msg given".into();
            }
            let mut code = h("handshake-status");
            let auth = h("handshake-autherrcode");
            if !auth.is_empty() {
                code = format!("{code}, auth error {auth}");
            }
            WsError::Handshake {
                status: resp.status().as_u16(),
                code,
                message,
            }
        }
        other => WsError::Connect(other.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_starts_with_the_platform_jitter_and_stays_bounded() {
        let c = Config {
            ping_interval: 120,
            reconnect_interval: 8,
            reconnect_nonce: 2,
        };
        for _ in 0..50 {
            let first = c.delay(0);
            assert!(first >= MIN_BACKOFF && first <= Duration::from_secs(2));
            assert_eq!(c.delay(1), MIN_BACKOFF);
            assert!(c.delay(3) >= Duration::from_secs(2) && c.delay(3) <= Duration::from_secs(4));
            assert!(c.delay(30) <= Duration::from_secs(8));
            assert!(c.delay(30) >= Duration::from_secs(4));
        }
        // A platform jitter of 0 never means an instant reconnect.
        let eager = Config {
            reconnect_nonce: 0,
            reconnect_interval: 1,
            ..c
        };
        for attempt in [0, 1, 2, 50] {
            assert_eq!(eager.delay(attempt), MIN_BACKOFF, "attempt {attempt}");
        }
    }

    #[test]
    fn attempts_grow_until_a_connection_lasts() {
        let mut a = Attempts::default();
        assert_eq!(a.after(None), 0, "could not connect");
        assert_eq!(
            a.after(Some(Duration::ZERO)),
            1,
            "accepted, then dropped at once"
        );
        assert_eq!(a.after(Some(Duration::from_secs(59))), 2);
        assert_eq!(a.after(None), 3);
        assert_eq!(
            a.after(Some(STABLE_AFTER)),
            0,
            "a good connection starts over"
        );
        assert_eq!(a.after(Some(Duration::from_secs(1))), 1);
        let c = Config::default();
        let mut a = Attempts::default();
        let waits: Vec<Duration> = (0..8)
            .map(|_| c.delay(a.after(Some(Duration::ZERO))))
            .collect();
        assert!(waits[7] >= Duration::from_secs(32), "{waits:?}");
    }

    #[test]
    fn platform_settings_are_held_to_sane_bounds() {
        let mut c = Config::default();
        assert!(c.apply(&ClientConfig {
            ping_interval: Some(i64::MAX),
            reconnect_interval: Some(i64::MAX),
            reconnect_nonce: Some(i64::MAX),
            reconnect_count: None,
        }));
        assert_eq!(c.ping_interval, PING_RANGE.1);
        assert_eq!(c.reconnect_interval, RECONNECT_RANGE.1);
        assert_eq!(c.reconnect_nonce, RECONNECT_RANGE.1);
        // The clock can take what is left.
        let _ = Instant::now() + c.ping() * 3;
        // Zero and negative values are ignored where they make no sense; a jitter of 0 is fine.
        assert!(c.apply(&ClientConfig {
            ping_interval: Some(0),
            reconnect_interval: Some(-3),
            reconnect_nonce: Some(0),
            reconnect_count: None,
        }));
        assert_eq!(c.ping_interval, PING_RANGE.1);
        assert_eq!(c.reconnect_interval, RECONNECT_RANGE.1);
        assert_eq!(c.reconnect_nonce, 0);
        assert!(!c.apply(&ClientConfig {
            reconnect_nonce: Some(-1),
            ..ClientConfig::default()
        }));
    }

    #[test]
    fn parts_are_reassembled_in_any_order() {
        let now = Instant::now();
        let mut r = Reassembly::default();
        assert_eq!(r.add("m", 3, 2, b"c".to_vec(), now), Ok(None));
        assert_eq!(r.add("m", 3, 0, b"a".to_vec(), now), Ok(None));
        // A part sent twice replaces the first copy.
        assert_eq!(r.add("m", 3, 0, b"A".to_vec(), now), Ok(None));
        assert_eq!(r.held(), (1, 2));
        assert_eq!(
            r.add("m", 3, 1, b"b".to_vec(), now),
            Ok(Some(b"Abc".to_vec()))
        );
        assert_eq!(r.held(), (0, 0), "nothing is left behind");
    }

    #[test]
    fn malformed_parts_are_refused_and_hold_nothing() {
        let now = Instant::now();
        let mut r = Reassembly::default();
        // seq ≥ sum.
        assert_eq!(
            r.add("m", 2, 2, b"x".to_vec(), now),
            Err(PartError::OutOfRange { seq: 2, sum: 2 })
        );
        assert_eq!(r.held(), (0, 0));
        // The number of parts changes between parts: the message is dropped.
        assert_eq!(r.add("m", 2, 0, b"x".to_vec(), now), Ok(None));
        assert_eq!(
            r.add("m", 3, 1, b"y".to_vec(), now),
            Err(PartError::SumChanged(2, 3))
        );
        assert_eq!(r.held(), (0, 0));
        // More parts than allowed.
        assert_eq!(
            r.add("m", MAX_PARTS + 1, 0, b"x".to_vec(), now),
            Err(PartError::TooManyParts(MAX_PARTS + 1))
        );
        assert_eq!(r.held(), (0, 0));
        // A message larger than allowed, however it is split.
        let half = vec![0u8; MAX_MESSAGE_BYTES / 2 + 1];
        assert_eq!(r.add("big", 2, 0, half.clone(), now), Ok(None));
        assert_eq!(r.add("big", 2, 1, half, now), Err(PartError::TooLarge));
        assert_eq!(r.held(), (0, 0));
        // Too many messages open at once.
        for n in 0..MAX_PARTIAL {
            assert_eq!(r.add(&format!("o{n}"), 2, 0, b"x".to_vec(), now), Ok(None));
        }
        assert_eq!(
            r.add("one-more", 2, 0, b"x".to_vec(), now),
            Err(PartError::TooManyMessages)
        );
        // ...while the open ones can still complete.
        assert_eq!(
            r.add("o0", 2, 1, b"y".to_vec(), now),
            Ok(Some(b"xy".to_vec()))
        );
    }

    #[test]
    fn the_total_held_is_bounded() {
        let now = Instant::now();
        let mut r = Reassembly::default();
        let chunk = vec![0u8; MAX_MESSAGE_BYTES / 2];
        let fits = MAX_HELD_BYTES / chunk.len();
        for n in 0..fits {
            assert_eq!(r.add(&format!("m{n}"), 4, 0, chunk.clone(), now), Ok(None));
        }
        assert_eq!(
            r.add("last", 4, 0, chunk.clone(), now),
            Err(PartError::Full)
        );
        assert_eq!(r.held(), (fits, fits * chunk.len()));
    }

    #[test]
    fn parts_that_never_complete_expire() {
        let start = Instant::now();
        let mut r = Reassembly::default();
        assert_eq!(r.add("m", 3, 0, b"a".to_vec(), start), Ok(None));
        assert!(r.prune(start + PARTS_TTL / 2).is_empty());
        assert_eq!(r.prune(start + PARTS_TTL), vec![("m".to_string(), 2)]);
        assert_eq!(r.held(), (0, 0));
        // A late part starts a new message rather than completing the expired one.
        assert_eq!(r.add("m", 3, 1, b"b".to_vec(), start + PARTS_TTL), Ok(None));
        assert_eq!(r.held(), (1, 1));
    }

    #[test]
    fn endpoints_name_their_service() {
        assert_eq!(
            parse_endpoint("wss://x.feishu.cn/ws/v2?fpid=493&aid=552564&device_id=d1&access_key=k&service_id=33554678&ticket=t").unwrap(),
            (33554678, "d1".to_string())
        );
        assert!(parse_endpoint("https://x/ws?service_id=1").is_err());
        assert!(parse_endpoint("wss://x/ws?device_id=1").is_err());
    }

    #[test]
    fn config_applies_only_what_is_given() {
        let mut c = Config::default();
        assert!(!c.apply(&ClientConfig::default()));
        assert!(c.apply(&ClientConfig {
            ping_interval: Some(5),
            ..ClientConfig::default()
        }));
        assert_eq!(c.ping_interval, 5);
        assert_eq!(c.reconnect_interval, 120);
    }
}
