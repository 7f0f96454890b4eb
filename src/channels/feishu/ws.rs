//! The long connection: card clicks arrive over a WebSocket that imrelay opens to the
//! platform, so no public URL is needed.
//!
//! One loop: ask for an endpoint with the app credentials, connect, ping at the interval the
//! platform gives (and apply any config a pong carries), reassemble multi-part messages, hand
//! every event to the same [`Callbacks`] handler the webhook endpoint uses, and ack each data
//! frame with the handler's reply (base64 JSON in `data`). On any drop it reconnects after the
//! platform's jitter and a bounded, jittered backoff, logging why. Duplicate deliveries after a
//! reconnect are caught by the handler's event-id deduplication, which lives in the store.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::AtomicI64;
use std::time::Duration;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use futures_util::{SinkExt, StreamExt};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::gauge::Gauge;
use rand::Rng;
use serde_json::{Value, json};
use tokio::sync::mpsc;
use tokio::time::Instant;
use tokio_tungstenite::tungstenite::{self, Message};
use tokio_util::sync::CancellationToken;

use super::api::{ApiError, ClientConfig, OpenApi};
use super::callback::{Callbacks, Source};
use super::frame::{Frame, METHOD_CONTROL, METHOD_DATA};
use crate::health::Health;

/// The health component name.
const COMPONENT: &str = "feishu";
/// Longest wait between reconnect attempts.
const MAX_BACKOFF: Duration = Duration::from_secs(300);
/// How long the parts of a multi-part message are kept waiting for the rest.
const PARTS_TTL: Duration = Duration::from_secs(10);
/// Most messages being reassembled at once.
const MAX_PARTIAL: usize = 256;

/// The connection settings in force (the platform's, with local defaults).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Config {
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

impl Config {
    /// Applies what the platform sent; returns whether anything changed.
    pub fn apply(&mut self, c: &ClientConfig) -> bool {
        let before = *self;
        if let Some(p) = c.ping_interval.filter(|p| *p > 0) {
            self.ping_interval = p;
        }
        if let Some(r) = c.reconnect_interval.filter(|r| *r > 0) {
            self.reconnect_interval = r;
        }
        if let Some(n) = c.reconnect_nonce {
            self.reconnect_nonce = n;
        }
        *self != before
    }

    /// The wait before reconnect attempt `attempt` (0 right after a drop): the platform's
    /// random jitter first, then an exponential backoff capped by its interval, jittered.
    pub fn delay(&self, attempt: u32) -> Duration {
        let mut rng = rand::rng();
        if attempt == 0 {
            let nonce = Duration::from_secs(self.reconnect_nonce).min(MAX_BACKOFF);
            return Duration::from_millis(rng.random_range(0..=nonce.as_millis() as u64));
        }
        let cap = Duration::from_secs(self.reconnect_interval.max(1)).min(MAX_BACKOFF);
        let exp = Duration::from_secs(1u64 << (attempt - 1).min(16)).min(cap);
        let lo = exp / 2;
        lo + Duration::from_millis(rng.random_range(0..=(exp - lo).as_millis() as u64))
    }
}

/// Why a session ended.
#[derive(Debug, thiserror::Error)]
pub enum WsError {
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
pub struct LongConnection {
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
    /// TLS settings for `wss://`.
    pub tls: Arc<rustls::ClientConfig>,
}

/// The TLS client settings: the ring provider and the Mozilla roots.
pub fn tls_config() -> anyhow::Result<Arc<rustls::ClientConfig>> {
    let mut roots = rustls::RootCertStore::empty();
    roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
    let config = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()?
    .with_root_certificates(roots)
    .with_no_client_auth();
    Ok(Arc::new(config))
}

/// A message being reassembled.
struct Partial {
    parts: Vec<Option<Vec<u8>>>,
    started: Instant,
}

enum Ended {
    Shutdown,
}

impl LongConnection {
    /// Runs until shutdown, reconnecting on every drop.
    pub async fn run(self) {
        let mut config = Config::default();
        let mut attempt: u32 = 0;
        let mut last_error: Option<String> = None;
        loop {
            self.health.set(
                COMPONENT,
                "connecting",
                json!({"mode": "websocket", "attempt": attempt}),
            );
            let reason = match self
                .session(&mut config, &mut attempt, last_error.as_deref())
                .await
            {
                Ok(Ended::Shutdown) => break,
                Err(e) => e,
            };
            self.connected.set(0);
            if self.shutdown.is_cancelled() {
                break;
            }
            let delay = config.delay(attempt);
            match &reason {
                WsError::Dropped(_) => {
                    tracing::warn!(reason = %reason, retry_in_ms = delay.as_millis() as u64, "feishu: long connection lost; reconnecting")
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
            attempt = attempt.saturating_add(1);
            tokio::select! {
                _ = self.shutdown.cancelled() => break,
                _ = tokio::time::sleep(delay) => {}
            }
        }
        self.connected.set(0);
        self.health
            .set(COMPONENT, "stopped", json!({"mode": "websocket"}));
        tracing::info!("feishu: long connection closed (shutdown)");
    }

    /// One connection, from the endpoint request until it ends.
    async fn session(
        &self,
        config: &mut Config,
        attempt: &mut u32,
        last_error: Option<&str>,
    ) -> Result<Ended, WsError> {
        let endpoint = self.api.ws_endpoint().await?;
        if let Some(c) = &endpoint.config {
            config.apply(c);
        }
        let (service, conn_id) = parse_endpoint(&endpoint.url)?;
        let connector = tokio_tungstenite::Connector::Rustls(self.tls.clone());
        let connected = tokio::select! {
            _ = self.shutdown.cancelled() => return Ok(Ended::Shutdown),
            r = tokio_tungstenite::connect_async_tls_with_config(endpoint.url.as_str(), None, true, Some(connector)) => r,
        };
        let (ws, _) = connected.map_err(handshake_error)?;
        *attempt = 0;
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
        let mut partial: HashMap<String, Partial> = HashMap::new();
        let mut ping = tokio::time::interval_at(
            Instant::now() + Duration::from_secs(config.ping_interval),
            Duration::from_secs(config.ping_interval),
        );
        let mut last_seen = Instant::now();
        loop {
            let silence = Duration::from_secs(config.ping_interval.saturating_mul(3).max(10));
            tokio::select! {
                _ = self.shutdown.cancelled() => {
                    let _ = sink.send(Message::Close(None)).await;
                    return Ok(Ended::Shutdown);
                }
                _ = ping.tick() => {
                    if last_seen.elapsed() > silence {
                        return Err(WsError::Dropped(format!("no answer from the platform for {} s", silence.as_secs())));
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
                            let frame = match Frame::from_bytes(&bytes) {
                                Ok(f) => f,
                                Err(e) => {
                                    tracing::warn!(error = %e, "feishu: undecodable frame ignored");
                                    continue;
                                }
                            };
                            match frame.method {
                                METHOD_CONTROL => {
                                    if self.control(frame, config) {
                                        ping = tokio::time::interval_at(
                                            Instant::now() + Duration::from_secs(config.ping_interval),
                                            Duration::from_secs(config.ping_interval),
                                        );
                                        self.report_connected(config, &conn_id, last_error);
                                    }
                                }
                                METHOD_DATA => self.data(frame, &mut partial, &ack_tx),
                                other => tracing::debug!(method = other, "feishu: frame of unknown method ignored"),
                            }
                        }
                        Some(Ok(_)) => {} // text, ping and pong frames of the WebSocket layer
                    }
                }
            }
        }
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

    /// Handles a control frame; returns whether the ping interval changed.
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
        let before = config.ping_interval;
        if config.apply(&c) {
            tracing::info!(
                ping_interval_secs = config.ping_interval,
                reconnect_interval_secs = config.reconnect_interval,
                "feishu: the platform updated the connection settings"
            );
        }
        config.ping_interval != before
    }

    /// Handles a data frame: reassembles it if needed, then answers it on a task of its own so
    /// pings and other frames are never held up.
    fn data(
        &self,
        frame: Frame,
        partial: &mut HashMap<String, Partial>,
        acks: &mpsc::Sender<Vec<u8>>,
    ) {
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
        let payload = if sum > 1 {
            partial.retain(|_, p| p.started.elapsed() < PARTS_TTL);
            if seq >= sum
                || sum > 1024
                || (partial.len() >= MAX_PARTIAL && !partial.contains_key(&message_id))
            {
                tracing::warn!(
                    message_id,
                    sum,
                    seq,
                    "feishu: a message part out of range ignored"
                );
                return;
            }
            let entry = partial
                .entry(message_id.clone())
                .or_insert_with(|| Partial {
                    parts: vec![None; sum],
                    started: Instant::now(),
                });
            if entry.parts.len() != sum {
                tracing::warn!(
                    message_id,
                    "feishu: message parts disagree on their count; dropped"
                );
                partial.remove(&message_id);
                return;
            }
            entry.parts[seq] = frame.payload.clone();
            if entry.parts.iter().any(Option::is_none) {
                return;
            }
            let whole = partial
                .remove(&message_id)
                .map(|p| p.parts.into_iter().flatten().flatten().collect::<Vec<u8>>());
            whole.unwrap_or_default()
        } else {
            frame.payload.clone().unwrap_or_default()
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
            assert!(c.delay(0) <= Duration::from_secs(2));
            assert!(
                c.delay(1) >= Duration::from_millis(500) && c.delay(1) <= Duration::from_secs(1)
            );
            assert!(c.delay(30) <= Duration::from_secs(8));
            assert!(c.delay(30) >= Duration::from_secs(4));
        }
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
