//! Socket Mode: interactions arrive over WebSockets that imrelay opens to Slack with the
//! app-level token, so no public URL is needed.
//!
//! [`SocketMode::run`] holds `connections` connections (Slack allows up to ten per app and
//! hands each envelope to one of them). Each is kept by a slot that loops: ask
//! `apps.connections.open` for a URL, connect, wait for Slack's `hello`, then read envelopes
//! and acknowledge each one by its `envelope_id` within Slack's 3-second window — with the
//! handler's response payload when it answered in time and Slack accepts one, or bare once
//! [`ACK_BUDGET`] has passed (the handler still runs to the end). When Slack sends
//! `disconnect` the slot opens the replacement first and retires the old connection once the
//! new one said `hello`, so nothing falls into a gap; `too_many_websockets`, a dropped
//! connection or a silent one is retried after a jittered backoff that starts over only
//! after a connection lasted.
//!
//! An envelope delivered twice (Slack redelivers what it did not see acknowledged, and a
//! retried Events API event comes in a new envelope with the same `event_id`) reaches the
//! handler once: the copy is acknowledged with the first one's payload. That record is this
//! process's; several replicas rely on the registry's first-answer-wins.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use serde::Deserialize;
use serde_json::{Value, json};
use tokio::net::TcpStream;
use tokio::sync::{mpsc, watch};
use tokio::task::JoinSet;
use tokio::time::Instant;
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;
use tokio_tungstenite::tungstenite::{self, Message};
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};
use tokio_util::sync::CancellationToken;

use super::api::{ApiError, Retry, WebApi};
use crate::channels::longconn::{self, Attempts};
use crate::health::Health;
use crate::sync::LockExt;

/// The health component name.
const COMPONENT: &str = "slack";
/// Slack's window for acknowledging an envelope.
pub const ACK_WINDOW: Duration = Duration::from_secs(3);
/// How long the handler may take before the envelope is acknowledged without its payload,
/// leaving room for the acknowledgement to travel inside [`ACK_WINDOW`].
pub const ACK_BUDGET: Duration = Duration::from_millis(2500);
/// Shortest wait between reconnect attempts.
pub const MIN_BACKOFF: Duration = Duration::from_secs(1);
/// Longest wait between reconnect attempts.
pub const MAX_BACKOFF: Duration = Duration::from_secs(120);
/// How often a WebSocket ping is sent.
pub const PING_INTERVAL: Duration = Duration::from_secs(10);
/// A connection from which nothing (not even a pong) arrived for this long is dead.
pub const SILENCE_LIMIT: Duration = Duration::from_secs(35);
/// How long a retired connection may take to send its last acknowledgements.
pub const DRAIN_LIMIT: Duration = ACK_WINDOW;
/// Largest message accepted from Slack (an interactive payload with a big view is tens of KB).
pub const MAX_MESSAGE_BYTES: usize = 4 << 20;
/// How long an envelope is remembered to recognise its copies.
pub const REMEMBER_FOR: Duration = Duration::from_secs(15 * 60);
/// Most envelopes remembered at once (the oldest go first).
pub const MAX_REMEMBERED: usize = 10_000;

type Ws = WebSocketStream<MaybeTlsStream<TcpStream>>;

/// One envelope Slack delivered.
#[derive(Clone, Debug, PartialEq)]
pub struct Envelope {
    /// `events_api`, `interactive` or `slash_commands`.
    pub kind: String,
    /// The id the acknowledgement names.
    pub envelope_id: String,
    /// What Slack would have POSTed to a Request URL (the interactivity payload, the event
    /// callback, the slash command).
    pub payload: Value,
    /// Whether the acknowledgement may carry a response payload (e.g. `response_action` for
    /// a view submission).
    pub accepts_response_payload: bool,
    /// Events API: which redelivery this is (0 the first).
    pub retry_attempt: Option<u64>,
    /// Events API: why it was redelivered (`timeout`, ...).
    pub retry_reason: Option<String>,
}

impl Envelope {
    /// What identifies this delivery across copies: an Events API event by its `event_id`
    /// (a redelivery comes in a new envelope), anything else by its envelope id.
    pub fn dedup_key(&self) -> String {
        match self.payload.get("event_id").and_then(Value::as_str) {
            Some(id) if self.kind == "events_api" && !id.is_empty() => format!("event:{id}"),
            _ => format!("envelope:{}", self.envelope_id),
        }
    }
}

/// What handles envelopes: the interaction pipeline, in the channel.
#[async_trait::async_trait]
pub trait EnvelopeHandler: Send + Sync + 'static {
    /// Handles one envelope; the value returned is the acknowledgement's `payload` (only
    /// sent when Slack accepts one and it came within [`ACK_BUDGET`]).
    async fn handle(&self, envelope: Envelope) -> Option<Value>;
}

/// The acknowledgement frame for `envelope_id`.
pub fn ack_frame(envelope_id: &str, payload: Option<&Value>) -> String {
    match payload {
        Some(p) => json!({"envelope_id": envelope_id, "payload": p}).to_string(),
        None => json!({"envelope_id": envelope_id}).to_string(),
    }
}

/// A message from Slack on the connection.
#[derive(Debug, PartialEq)]
enum Incoming {
    Hello { num_connections: Option<u64> },
    Disconnect { reason: String },
    Envelope(Envelope),
    Other(String),
}

#[derive(Deserialize)]
struct Raw {
    #[serde(rename = "type", default)]
    kind: String,
    #[serde(default)]
    envelope_id: Option<String>,
    #[serde(default)]
    payload: Value,
    #[serde(default)]
    accepts_response_payload: bool,
    #[serde(default)]
    retry_attempt: Option<u64>,
    #[serde(default)]
    retry_reason: Option<String>,
    #[serde(default)]
    reason: Option<String>,
    #[serde(default)]
    num_connections: Option<u64>,
}

fn parse(text: &str) -> Result<Incoming, serde_json::Error> {
    let raw: Raw = serde_json::from_str(text)?;
    Ok(match (raw.kind.as_str(), raw.envelope_id) {
        ("hello", _) => Incoming::Hello {
            num_connections: raw.num_connections,
        },
        ("disconnect", _) => Incoming::Disconnect {
            reason: raw.reason.unwrap_or_else(|| "unknown".into()),
        },
        (_, Some(id)) if !id.is_empty() => Incoming::Envelope(Envelope {
            kind: raw.kind,
            envelope_id: id,
            payload: raw.payload,
            accepts_response_payload: raw.accepts_response_payload,
            retry_attempt: raw.retry_attempt,
            retry_reason: raw.retry_reason.filter(|r| !r.is_empty()),
        }),
        (kind, _) => Incoming::Other(kind.to_string()),
    })
}

/// What is known of an envelope being or already handled: `None` while the handler runs,
/// then its answer.
type Outcome = Option<Option<Value>>;

/// Envelopes handled recently, to recognise copies; bounded in number and age.
#[derive(Default)]
pub(crate) struct Dedup {
    // A std mutex: looked up and updated without awaiting.
    inner: Mutex<DedupInner>,
}

#[derive(Default)]
struct DedupInner {
    map: HashMap<String, watch::Receiver<Outcome>>,
    order: VecDeque<(Instant, String)>,
}

/// Whether an envelope is new.
pub(crate) enum Seen {
    /// The first copy: handle it, then send the answer.
    First(watch::Sender<Outcome>),
    /// A copy: its answer is (or will be) here.
    Again(watch::Receiver<Outcome>),
}

impl Dedup {
    /// Records `key` at `now`, or finds it.
    pub(crate) fn see(&self, key: String, now: Instant) -> Seen {
        let mut d = self.inner.locked();
        while let Some((at, _)) = d.order.front() {
            if now.saturating_duration_since(*at) < REMEMBER_FOR && d.order.len() < MAX_REMEMBERED {
                break;
            }
            if let Some((_, k)) = d.order.pop_front() {
                d.map.remove(&k);
            }
        }
        if let Some(rx) = d.map.get(&key) {
            return Seen::Again(rx.clone());
        }
        let (tx, rx) = watch::channel(None);
        d.map.insert(key.clone(), rx);
        d.order.push_back((now, key));
        Seen::First(tx)
    }

    /// Envelopes remembered.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.inner.locked().map.len()
    }
}

/// Counters a test or `/metrics` can read.
#[derive(Debug, Default)]
pub struct SocketStats {
    /// Connections established (after `hello`).
    pub connected: AtomicU64,
    /// Connections open right now.
    pub live: AtomicUsize,
    /// Connections replaced because Slack sent `disconnect`.
    pub rotations: AtomicU64,
    /// Connections lost or refused and retried after a backoff.
    pub reconnects: AtomicU64,
    /// Envelopes handled.
    pub envelopes: AtomicU64,
    /// Copies of an envelope recognised and not handled again.
    pub duplicates: AtomicU64,
    /// Envelopes acknowledged before their handler finished.
    pub slow: AtomicU64,
}

/// Why a connection could not be opened or ended.
#[derive(Debug, thiserror::Error)]
pub enum LinkError {
    /// `apps.connections.open` failed.
    #[error("apps.connections.open failed: {0}")]
    Open(#[from] ApiError),
    /// The URL Slack gave is not a WebSocket URL.
    #[error("Slack gave a URL that is not ws:// or wss://")]
    BadUrl,
    /// Slack refused the WebSocket handshake.
    #[error("Slack refused the WebSocket handshake (HTTP {0})")]
    Handshake(u16),
    /// Connecting failed before Slack said `hello`.
    #[error("cannot connect: {0}")]
    Connect(String),
    /// Slack has more connections of this app than it allows.
    #[error("Slack closed the connection: too many connections for this app (at most 10)")]
    TooMany,
    /// An established connection ended.
    #[error("{0}")]
    Dropped(String),
}

impl LinkError {
    /// The wait Slack asked for, if it asked.
    fn retry_after(&self) -> Option<Duration> {
        match self {
            LinkError::Open(e) => match e.retry() {
                Retry::After(d) => Some(d),
                _ => None,
            },
            _ => None,
        }
    }
}

/// The wait before reconnect attempt `attempt`.
fn backoff(attempt: u32) -> Duration {
    longconn::backoff(attempt, MIN_BACKOFF, MAX_BACKOFF)
}

/// The Socket Mode client.
pub struct SocketMode {
    api: Arc<WebApi>,
    handler: Arc<dyn EnvelopeHandler>,
    connections: usize,
    connect_timeout: Duration,
    ack_budget: Duration,
    health: Arc<Health>,
    shutdown: CancellationToken,
    tls: Arc<rustls::ClientConfig>,
    dedup: Dedup,
    stats: Arc<SocketStats>,
    last_error: Mutex<Option<String>>,
}

/// A connection that said `hello`, with what arrived right after it.
struct Link {
    ws: Ws,
    early: Vec<String>,
}

/// How a served connection ended.
enum Served {
    /// Retired (replaced, or shutdown).
    Closed,
}

impl SocketMode {
    /// A client holding `connections` connections (1 to 10) for `handler`.
    pub fn new(
        api: Arc<WebApi>,
        handler: Arc<dyn EnvelopeHandler>,
        connections: u8,
        health: Arc<Health>,
        shutdown: CancellationToken,
        tls: Arc<rustls::ClientConfig>,
    ) -> Self {
        Self {
            api,
            handler,
            connections: usize::from(connections.clamp(1, 10)),
            connect_timeout: Duration::from_secs(15),
            ack_budget: ACK_BUDGET,
            health,
            shutdown,
            tls,
            dedup: Dedup::default(),
            stats: Arc::new(SocketStats::default()),
            last_error: Mutex::new(None),
        }
    }

    /// How long opening a connection (TCP, TLS, handshake and `hello`) may take.
    pub fn with_connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = timeout;
        self
    }

    /// How long the handler may take before the envelope is acknowledged without it (at
    /// most [`ACK_BUDGET`]).
    pub fn with_ack_budget(mut self, budget: Duration) -> Self {
        self.ack_budget = budget.min(ACK_BUDGET);
        self
    }

    /// The counters.
    pub fn stats(&self) -> Arc<SocketStats> {
        self.stats.clone()
    }

    /// Runs until shutdown.
    pub async fn run(self) {
        let this = Arc::new(self);
        this.report();
        let mut slots = JoinSet::new();
        for slot in 0..this.connections {
            slots.spawn(this.clone().slot(slot));
        }
        while slots.join_next().await.is_some() {}
        this.health
            .set(COMPONENT, "stopped", json!({"mode": "socket_mode"}));
        tracing::info!("slack: socket mode closed (shutdown)");
    }

    fn report(&self) {
        let live = self.stats.live.load(Ordering::SeqCst);
        let last_error = self.last_error.locked().clone();
        let state = if live > 0 { "connected" } else { "connecting" };
        self.health.set(
            COMPONENT,
            state,
            json!({"mode": "socket_mode", "connections": live, "wanted": self.connections, "last_error": last_error}),
        );
    }

    /// Keeps one connection open until shutdown.
    async fn slot(self: Arc<Self>, slot: usize) {
        let mut attempts = Attempts::default();
        // The connection being replaced after Slack's `disconnect`: it keeps serving until
        // its replacement said `hello`.
        let mut retiring: Option<(CancellationToken, tokio::task::JoinHandle<()>)> = None;
        loop {
            let opened = tokio::select! {
                _ = self.shutdown.cancelled() => break,
                r = self.open() => r,
            };
            let link = match opened {
                Ok(link) => link,
                Err(e) => {
                    let wait = e
                        .retry_after()
                        .unwrap_or_else(|| backoff(attempts.after(None)));
                    if !self.wait_after(slot, &e, wait).await {
                        break;
                    }
                    continue;
                }
            };
            if let Some((close, _)) = retiring.take() {
                close.cancel();
            }
            let started = Instant::now();
            let close = CancellationToken::new();
            let (rotate_tx, mut rotate_rx) = mpsc::channel::<String>(1);
            let mut task = tokio::spawn(self.clone().serve(slot, link, close.clone(), rotate_tx));
            enum Next {
                Shutdown,
                Rotate(String),
                Ended,
            }
            let next = tokio::select! {
                _ = self.shutdown.cancelled() => Next::Shutdown,
                Some(reason) = rotate_rx.recv() => Next::Rotate(reason),
                _ = &mut task => Next::Ended,
            };
            match next {
                Next::Shutdown => {
                    close.cancel();
                    let _ = task.await;
                    break;
                }
                Next::Rotate(reason) => {
                    tracing::info!(
                        slot,
                        reason,
                        "slack: Slack asked to refresh a connection; opening its replacement"
                    );
                    self.stats.rotations.fetch_add(1, Ordering::Relaxed);
                    retiring = Some((close, task));
                }
                Next::Ended => {
                    let up_for = started.elapsed();
                    let reason = self
                        .last_error
                        .locked()
                        .clone()
                        .unwrap_or_else(|| "the connection ended".into());
                    let wait = backoff(attempts.after(Some(up_for)));
                    if !self
                        .wait_after(slot, &LinkError::Dropped(reason), wait)
                        .await
                    {
                        break;
                    }
                }
            }
        }
        if let Some((close, task)) = retiring.take() {
            close.cancel();
            let _ = task.await;
        }
    }

    /// Logs and reports `error`, then waits `wait` (false: shutdown came first).
    async fn wait_after(&self, slot: usize, error: &LinkError, wait: Duration) -> bool {
        self.stats.reconnects.fetch_add(1, Ordering::Relaxed);
        let retry_in_ms = wait.as_millis() as u64;
        match error {
            LinkError::Dropped(_) => {
                tracing::warn!(slot, reason = %error, retry_in_ms, "slack: socket mode connection lost; reconnecting")
            }
            _ => {
                tracing::error!(slot, error = %error, retry_in_ms, "slack: cannot open a socket mode connection; retrying")
            }
        }
        *self.last_error.locked() = Some(error.to_string());
        if self.stats.live.load(Ordering::SeqCst) == 0 {
            self.health.set(
                COMPONENT,
                "disconnected",
                json!({"mode": "socket_mode", "last_error": error.to_string(), "retry_in_ms": retry_in_ms}),
            );
        }
        tokio::select! {
            _ = self.shutdown.cancelled() => false,
            _ = tokio::time::sleep(wait) => true,
        }
    }

    /// Opens one connection: a URL from `apps.connections.open`, the handshake, `hello`.
    async fn open(&self) -> Result<Link, LinkError> {
        let url = self.api.connections_open().await?;
        if !(url.starts_with("wss://") || url.starts_with("ws://")) {
            return Err(LinkError::BadUrl);
        }
        let limits = WebSocketConfig::default()
            .max_message_size(Some(MAX_MESSAGE_BYTES))
            .max_frame_size(Some(MAX_MESSAGE_BYTES));
        let connector = tokio_tungstenite::Connector::Rustls(self.tls.clone());
        let handshake = async {
            let (mut ws, _) = tokio_tungstenite::connect_async_tls_with_config(
                url.as_str(),
                Some(limits),
                true,
                Some(connector),
            )
            .await
            .map_err(|e| match e {
                tungstenite::Error::Http(resp) => LinkError::Handshake(resp.status().as_u16()),
                // The URL carries a ticket: name the failure, never the URL.
                other => LinkError::Connect(other.to_string()),
            })?;
            let mut early = Vec::new();
            loop {
                match ws.next().await {
                    Some(Ok(Message::Text(t))) => match parse(t.as_str()) {
                        Ok(Incoming::Hello { num_connections }) => {
                            tracing::debug!(num_connections, "slack: hello");
                            return Ok(Link { ws, early });
                        }
                        Ok(Incoming::Disconnect { reason }) if reason == "too_many_websockets" => {
                            return Err(LinkError::TooMany);
                        }
                        _ if early.len() < 64 => early.push(t.as_str().to_string()),
                        _ => {}
                    },
                    Some(Ok(Message::Close(_))) | None => {
                        return Err(LinkError::Connect("closed before hello".into()));
                    }
                    Some(Ok(_)) => {}
                    Some(Err(e)) => return Err(LinkError::Connect(e.to_string())),
                }
            }
        };
        tokio::time::timeout(self.connect_timeout, handshake)
            .await
            .map_err(|_| {
                LinkError::Connect(format!(
                    "no hello after {} s (TCP, TLS, the handshake or Slack stalled)",
                    self.connect_timeout.as_secs()
                ))
            })?
    }

    /// Serves one connection until it ends or is retired; a `disconnect` from Slack is
    /// passed to the slot through `rotate`, and this connection keeps serving meanwhile.
    async fn serve(
        self: Arc<Self>,
        slot: usize,
        link: Link,
        close: CancellationToken,
        rotate: mpsc::Sender<String>,
    ) {
        self.stats.connected.fetch_add(1, Ordering::Relaxed);
        self.stats.live.fetch_add(1, Ordering::SeqCst);
        tracing::info!(slot, "slack: socket mode connection established");
        self.report();
        let result = self.serve_inner(link, close, rotate).await;
        self.stats.live.fetch_sub(1, Ordering::SeqCst);
        match result {
            Ok(Served::Closed) => tracing::debug!(slot, "slack: connection retired"),
            Err(e) => {
                tracing::debug!(slot, error = %e, "slack: connection ended");
                *self.last_error.locked() = Some(e.to_string());
            }
        }
        self.report();
    }

    async fn serve_inner(
        &self,
        link: Link,
        close: CancellationToken,
        rotate: mpsc::Sender<String>,
    ) -> Result<Served, LinkError> {
        let Link { ws, early } = link;
        let (mut sink, mut stream) = ws.split();
        let (ack_tx, mut ack_rx) = mpsc::channel::<String>(64);
        let mut handlers: JoinSet<()> = JoinSet::new();
        let mut ping = tokio::time::interval_at(Instant::now() + PING_INTERVAL, PING_INTERVAL);
        let mut last_seen = Instant::now();
        let mut draining: Option<Instant> = None;
        let mut asked_to_rotate = false;
        for text in early {
            self.incoming(&text, &ack_tx, &mut handlers, &rotate, &mut asked_to_rotate)?;
        }
        loop {
            if draining.is_some() && handlers.is_empty() && ack_rx.is_empty() {
                let _ = sink.send(Message::Close(None)).await;
                return Ok(Served::Closed);
            }
            let drain_deadline = draining.unwrap_or_else(|| Instant::now() + DRAIN_LIMIT);
            tokio::select! {
                _ = close.cancelled(), if draining.is_none() => {
                    // Finish what is in flight (its acknowledgements go out here), then close.
                    draining = Some(Instant::now() + DRAIN_LIMIT);
                }
                _ = tokio::time::sleep_until(drain_deadline), if draining.is_some() => {
                    let _ = sink.send(Message::Close(None)).await;
                    return Ok(Served::Closed);
                }
                Some(ack) = ack_rx.recv() => {
                    sink.send(Message::Text(ack.into()))
                        .await
                        .map_err(|e| LinkError::Dropped(format!("acknowledgement failed: {e}")))?;
                }
                Some(_) = handlers.join_next(), if !handlers.is_empty() => {}
                _ = ping.tick() => {
                    if last_seen.elapsed() > SILENCE_LIMIT {
                        return Err(LinkError::Dropped(format!(
                            "nothing from Slack for {} s", SILENCE_LIMIT.as_secs()
                        )));
                    }
                    sink.send(Message::Ping(Vec::new().into()))
                        .await
                        .map_err(|e| LinkError::Dropped(format!("ping failed: {e}")))?;
                }
                msg = stream.next() => {
                    last_seen = Instant::now();
                    match msg {
                        None => return Err(LinkError::Dropped("the connection ended".into())),
                        Some(Err(e)) => return Err(LinkError::Dropped(format!("connection error: {e}"))),
                        Some(Ok(Message::Close(frame))) => {
                            if draining.is_some() {
                                return Ok(Served::Closed);
                            }
                            let why = frame
                                .map(|f| format!("{} {}", u16::from(f.code), f.reason))
                                .unwrap_or_else(|| "no reason given".into());
                            return Err(LinkError::Dropped(format!("closed by Slack: {why}")));
                        }
                        Some(Ok(Message::Text(text))) => {
                            self.incoming(text.as_str(), &ack_tx, &mut handlers, &rotate, &mut asked_to_rotate)?;
                        }
                        // Pongs count as life; pings are answered by the WebSocket layer.
                        Some(Ok(_)) => {}
                    }
                }
            }
        }
    }

    /// Handles one text message from Slack.
    fn incoming(
        &self,
        text: &str,
        acks: &mpsc::Sender<String>,
        handlers: &mut JoinSet<()>,
        rotate: &mpsc::Sender<String>,
        asked_to_rotate: &mut bool,
    ) -> Result<(), LinkError> {
        match parse(text) {
            Ok(Incoming::Envelope(envelope)) => {
                self.dispatch(envelope, acks.clone(), handlers);
                Ok(())
            }
            Ok(Incoming::Disconnect { reason }) if reason == "too_many_websockets" => {
                Err(LinkError::TooMany)
            }
            Ok(Incoming::Disconnect { reason }) => {
                if !*asked_to_rotate {
                    *asked_to_rotate = true;
                    let _ = rotate.try_send(reason);
                }
                Ok(())
            }
            Ok(Incoming::Hello { .. }) => Ok(()),
            Ok(Incoming::Other(kind)) => {
                tracing::debug!(kind, "slack: a message of an unknown type ignored");
                Ok(())
            }
            Err(e) => {
                tracing::warn!(error = %e, "slack: a message that is not JSON ignored");
                Ok(())
            }
        }
    }

    /// Runs the handler for a new envelope (or waits for the first copy's answer) and
    /// acknowledges it in time.
    fn dispatch(&self, envelope: Envelope, acks: mpsc::Sender<String>, handlers: &mut JoinSet<()>) {
        let budget = self.ack_budget;
        let id = envelope.envelope_id.clone();
        let accepts = envelope.accepts_response_payload;
        let send = move |payload: Option<Value>| {
            let frame = ack_frame(&id, payload.as_ref().filter(|_| accepts));
            async move {
                if acks.send(frame).await.is_err() {
                    tracing::warn!(
                        "slack: the connection closed before an envelope could be acknowledged"
                    );
                }
            }
        };
        match self.dedup.see(envelope.dedup_key(), Instant::now()) {
            Seen::Again(mut rx) => {
                self.stats.duplicates.fetch_add(1, Ordering::Relaxed);
                tracing::debug!(
                    kind = envelope.kind,
                    retry_attempt = envelope.retry_attempt,
                    "slack: a copy of an envelope already handled"
                );
                handlers.spawn(async move {
                    let answer = tokio::time::timeout(budget, rx.wait_for(Option::is_some))
                        .await
                        .ok()
                        .and_then(|r| r.ok().and_then(|v| v.clone()))
                        .flatten();
                    send(answer).await;
                });
            }
            Seen::First(tx) => {
                self.stats.envelopes.fetch_add(1, Ordering::Relaxed);
                let handler = self.handler.clone();
                let stats = self.stats.clone();
                let kind = envelope.kind.clone();
                // The handler runs on a task of its own: it finishes even when the
                // acknowledgement had to go without it.
                let mut work = tokio::spawn(async move { handler.handle(envelope).await });
                handlers.spawn(async move {
                    match tokio::time::timeout(budget, &mut work).await {
                        Ok(answer) => {
                            let answer = answer.ok().flatten();
                            tx.send_replace(Some(answer.clone()));
                            send(answer).await;
                        }
                        Err(_) => {
                            stats.slow.fetch_add(1, Ordering::Relaxed);
                            tracing::warn!(
                                kind,
                                budget_ms = budget.as_millis() as u64,
                                "slack: the handler is slow; acknowledged without waiting for it"
                            );
                            send(None).await;
                            tokio::spawn(async move {
                                let answer = work.await.ok().flatten();
                                tx.send_replace(Some(answer));
                            });
                        }
                    }
                });
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_are_read_as_slack_sends_them() {
        // Frames as the official Python SDK's test server sends them
        // (tests/slack_sdk/socket_mode/mock_socket_mode_server.py).
        assert_eq!(
            parse(r#"{"type":"hello","num_connections":2,"debug_info":{"host":"applink-111-xxx","build_number":10,"approximate_connection_time":18060},"connection_info":{"app_id":"A111"}}"#).unwrap(),
            Incoming::Hello { num_connections: Some(2) }
        );
        assert_eq!(
            parse(r#"{"type":"disconnect","reason":"too_many_websockets","num_connections":2,"debug_info":{"host":"applink-111-xxx"},"connection_info":{"app_id":"A111"}}"#).unwrap(),
            Incoming::Disconnect { reason: "too_many_websockets".into() }
        );
        let Incoming::Envelope(e) = parse(r#"{"envelope_id":"cda4159a-72a5-4744-aba3-4d66eb52682b","payload":{"token":"verification-token","team_id":"T111","api_app_id":"A111","event":{"type":"app_mention"},"type":"event_callback","event_id":"Ev111","event_time":1610241741},"type":"events_api","accepts_response_payload":false,"retry_attempt":0,"retry_reason":""}"#).unwrap() else {
            panic!("an envelope");
        };
        assert_eq!(e.kind, "events_api");
        assert_eq!(e.retry_attempt, Some(0));
        assert_eq!(e.retry_reason, None);
        assert_eq!(e.dedup_key(), "event:Ev111");
        let Incoming::Envelope(e) = parse(r#"{"envelope_id":"57d6a792","payload":{"type":"block_actions","event_id":"not-an-event"},"type":"interactive","accepts_response_payload":false}"#).unwrap() else {
            panic!("an envelope");
        };
        assert_eq!(e.dedup_key(), "envelope:57d6a792");
        assert_eq!(
            parse(r#"{"type":"mystery"}"#).unwrap(),
            Incoming::Other("mystery".into())
        );
        assert!(parse("not json").is_err());
    }

    #[test]
    fn acknowledgements_name_the_envelope() {
        assert_eq!(ack_frame("e1", None), r#"{"envelope_id":"e1"}"#);
        let v: Value = serde_json::from_str(&ack_frame(
            "e2",
            Some(&json!({"response_action": "errors", "errors": {"b": "x"}})),
        ))
        .unwrap();
        assert_eq!(v["envelope_id"], "e2");
        assert_eq!(v["payload"]["response_action"], "errors");
    }

    #[tokio::test(start_paused = true)]
    async fn copies_are_recognised_and_forgotten_in_bounded_time_and_space() {
        let d = Dedup::default();
        let t0 = Instant::now();
        let Seen::First(tx) = d.see("a".into(), t0) else {
            panic!("first");
        };
        let Seen::Again(mut rx) = d.see("a".into(), t0) else {
            panic!("a copy");
        };
        tx.send_replace(Some(Some(json!({"x": 1}))));
        let seen = rx.wait_for(Option::is_some).await.unwrap().clone();
        assert_eq!(seen, Some(Some(json!({"x": 1}))));
        // Long after, the same key is new again.
        assert!(matches!(
            d.see("a".into(), t0 + REMEMBER_FOR),
            Seen::First(_)
        ));
        for n in 0..(MAX_REMEMBERED + 10) {
            let _ = d.see(n.to_string(), t0 + REMEMBER_FOR);
        }
        assert!(d.len() <= MAX_REMEMBERED, "{}", d.len());
    }
}
