//! WeCom's intelligent-bot long connection (`wss://openws.work.weixin.qq.com`): messages and
//! card clicks arrive, and replies and card updates leave, over one WebSocket the bot opens
//! with its BotID and Secret, so no public URL is needed.
//!
//! Every frame is JSON `{cmd, headers: {req_id}, body}`. After the handshake imrelay sends
//! `aibot_subscribe` with `{bot_id, secret}` and waits for its answer
//! `{headers: {req_id}, errcode: 0, errmsg}`; then it sends `ping` every
//! [`HEARTBEAT_INTERVAL`] and treats two unanswered ones as a dead connection. Inbound
//! `aibot_msg_callback` and `aibot_event_callback` frames go to the handler with a [`Replies`]
//! handle; what it sends (`aibot_respond_msg`, `aibot_respond_update_msg` with the
//! callback's own `req_id`, `aibot_send_msg` with a fresh one) is answered by WeCom with
//! `{headers: {req_id}, errcode, errmsg}`, which the handle waits for. A callback delivered
//! again (same `msgid`) reaches the handler once. When WeCom sends `disconnected_event`
//! (another client connected with the same credentials) the connection is given up and
//! retried only after the longest backoff, since reconnecting at once would push the other
//! client out in turn.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::stream::{SplitSink, SplitStream};
use futures_util::{SinkExt, StreamExt};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;
use tokio_tungstenite::tungstenite::Message;
use tokio_util::sync::CancellationToken;

use crate::channels::longconn::{self, Attempts, Socket};
use crate::settings::Secret;
use crate::sync::LockExt;

/// WeCom's long-connection endpoint.
pub const DEFAULT_URL: &str = "wss://openws.work.weixin.qq.com";
/// How often `ping` is sent (the official Node SDK's default).
pub const HEARTBEAT_INTERVAL: Duration = Duration::from_secs(30);
/// How long a sent command waits for WeCom's answer (the official Node SDK waits 5 s).
pub const REPLY_TIMEOUT: Duration = Duration::from_secs(5);
/// How long `aibot_subscribe` may take to be answered.
pub const SUBSCRIBE_TIMEOUT: Duration = Duration::from_secs(10);
/// Shortest and longest wait between reconnect attempts (the Node SDK: 1 s doubling to 30 s).
pub const BACKOFF: (Duration, Duration) = (Duration::from_secs(1), Duration::from_secs(30));
/// The wait after another client took the connection over.
pub const TAKEN_OVER_WAIT: Duration = Duration::from_secs(300);
/// Callbacks remembered to recognise a redelivery.
pub const MAX_REMEMBERED: usize = 10_000;
/// Largest frame accepted.
pub const MAX_MESSAGE_BYTES: usize = 4 << 20;

/// The commands of the protocol.
pub mod cmd {
    /// Authenticate and subscribe (client → WeCom).
    pub const SUBSCRIBE: &str = "aibot_subscribe";
    /// Heartbeat (client → WeCom).
    pub const PING: &str = "ping";
    /// A message to the bot (WeCom → client).
    pub const MSG_CALLBACK: &str = "aibot_msg_callback";
    /// An event: entering the chat, a template card click, ... (WeCom → client).
    pub const EVENT_CALLBACK: &str = "aibot_event_callback";
    /// A reply to a message callback (client → WeCom).
    pub const RESPOND: &str = "aibot_respond_msg";
    /// A template card update answering a card event, within 5 s (client → WeCom).
    pub const RESPOND_UPDATE: &str = "aibot_respond_update_msg";
    /// A message sent unprompted to a chat (client → WeCom).
    pub const SEND: &str = "aibot_send_msg";
}

/// One frame, either way.
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
pub struct Frame {
    /// The command; absent on WeCom's answers to what the client sent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cmd: Option<String>,
    /// `req_id`, and whatever else WeCom puts there.
    #[serde(default)]
    pub headers: Headers,
    /// The body.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub body: Option<Value>,
    /// On answers: 0 for success.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub errcode: Option<i64>,
    /// On answers: WeCom's message.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub errmsg: Option<String>,
}

/// A frame's headers.
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
pub struct Headers {
    /// The request id an answer or a reply names.
    #[serde(default)]
    pub req_id: String,
}

/// A request id as the official SDK makes them: `{prefix}_{millis}_{random}`.
pub fn req_id(prefix: &str) -> String {
    let millis = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis());
    format!("{prefix}_{millis}_{:08x}", rand::random::<u32>())
}

/// Why a connection or a command failed.
#[derive(Debug, thiserror::Error)]
pub enum BotError {
    /// The WebSocket could not be opened.
    #[error("cannot connect: {0}")]
    Connect(String),
    /// WeCom refused the bot id or secret.
    #[error("WeCom refused the subscription (errcode {errcode}): {errmsg}")]
    Refused {
        /// WeCom's code.
        errcode: i64,
        /// WeCom's message.
        errmsg: String,
    },
    /// Another client connected with the same credentials and WeCom closed this one.
    #[error("another client connected with this bot's credentials; WeCom closed this connection")]
    TakenOver,
    /// The connection ended.
    #[error("{0}")]
    Dropped(String),
    /// A command was not answered in time.
    #[error("WeCom did not answer {0} in time")]
    Timeout(String),
    /// WeCom answered a command with an error (e.g. a card update after its 5 s window).
    #[error("WeCom refused {cmd} (errcode {errcode}): {errmsg}")]
    Failed {
        /// The command.
        cmd: String,
        /// WeCom's code.
        errcode: i64,
        /// WeCom's message.
        errmsg: String,
    },
    /// There is no connection to send on.
    #[error("not connected")]
    NotConnected,
}

type Pending = Arc<Mutex<HashMap<String, oneshot::Sender<Frame>>>>;

/// Sends commands on the current connection and waits for WeCom's answers.
#[derive(Clone)]
pub struct Replies {
    out: mpsc::Sender<String>,
    pending: Pending,
}

impl Replies {
    /// Sends `cmd` with `req_id` and `body`; waits for the answer.
    pub async fn command(&self, cmd: &str, req_id: &str, body: Value) -> Result<Frame, BotError> {
        let (tx, rx) = oneshot::channel();
        self.pending.locked().insert(req_id.to_string(), tx);
        let frame = Frame {
            cmd: Some(cmd.to_string()),
            headers: Headers {
                req_id: req_id.to_string(),
            },
            body: Some(body),
            ..Frame::default()
        };
        let text = serde_json::to_string(&frame).map_err(|e| BotError::Dropped(e.to_string()))?;
        if self.out.send(text).await.is_err() {
            self.pending.locked().remove(req_id);
            return Err(BotError::NotConnected);
        }
        let answer = tokio::time::timeout(REPLY_TIMEOUT, rx).await;
        self.pending.locked().remove(req_id);
        let answer = answer
            .map_err(|_| BotError::Timeout(cmd.to_string()))?
            .map_err(|_| BotError::NotConnected)?;
        match answer.errcode.unwrap_or(0) {
            0 => Ok(answer),
            errcode => Err(BotError::Failed {
                cmd: cmd.to_string(),
                errcode,
                errmsg: answer.errmsg.unwrap_or_default(),
            }),
        }
    }

    /// Replaces the template card a click came from (`req_id`: the click's own), for
    /// `userids` or, when empty, for everyone.
    pub async fn update_card(
        &self,
        req_id: &str,
        template_card: Value,
        userids: &[String],
    ) -> Result<(), BotError> {
        let mut body =
            json!({"response_type": "update_template_card", "template_card": template_card});
        if !userids.is_empty() {
            body["userids"] = json!(userids);
        }
        self.command(cmd::RESPOND_UPDATE, req_id, body)
            .await
            .map(|_| ())
    }

    /// Sends `body` (`{msgtype: "markdown" | "template_card", ...}`) to chat `chatid` (a
    /// group's chatid, or a person's userid) unprompted.
    pub async fn send(&self, chatid: &str, mut body: Value) -> Result<(), BotError> {
        body["chatid"] = json!(chatid);
        self.command(cmd::SEND, &req_id(cmd::SEND), body)
            .await
            .map(|_| ())
    }
}

/// What handles callbacks: the card pipeline, in the channel.
#[async_trait::async_trait]
pub trait BotHandler: Send + Sync + 'static {
    /// Handles an `aibot_msg_callback` or `aibot_event_callback` frame; `replies` answers
    /// on the connection it came on.
    async fn callback(&self, frame: Frame, replies: Replies);
}

/// Counters a test or `/metrics` can read.
#[derive(Debug, Default)]
pub struct BotStats {
    /// Subscriptions accepted.
    pub subscribed: AtomicU64,
    /// Connections open and subscribed now.
    pub live: AtomicUsize,
    /// Reconnects after a failure.
    pub reconnects: AtomicU64,
    /// Callbacks handled.
    pub callbacks: AtomicU64,
    /// Callbacks delivered again and not handled twice.
    pub duplicates: AtomicU64,
    /// Pings sent.
    pub pings: AtomicU64,
}

/// The long-connection client.
pub struct BotConnection {
    url: String,
    bot_id: String,
    secret: Secret,
    handler: Arc<dyn BotHandler>,
    shutdown: CancellationToken,
    tls: Arc<rustls::ClientConfig>,
    heartbeat: Duration,
    connect_timeout: Duration,
    seen: Mutex<(HashSet<String>, VecDeque<String>)>,
    stats: Arc<BotStats>,
    last_error: Mutex<Option<Arc<BotError>>>,
    current: Mutex<Option<Replies>>,
}

impl BotConnection {
    /// A client for bot `bot_id` at `url` ([`DEFAULT_URL`]).
    pub fn new(
        url: &str,
        bot_id: &str,
        secret: Secret,
        handler: Arc<dyn BotHandler>,
        shutdown: CancellationToken,
        tls: Arc<rustls::ClientConfig>,
    ) -> Self {
        Self {
            url: url.to_string(),
            bot_id: bot_id.to_string(),
            secret,
            handler,
            shutdown,
            tls,
            heartbeat: HEARTBEAT_INTERVAL,
            connect_timeout: SUBSCRIBE_TIMEOUT,
            seen: Mutex::default(),
            stats: Arc::default(),
            last_error: Mutex::new(None),
            current: Mutex::new(None),
        }
    }

    /// Sends `ping` this often instead.
    pub fn with_heartbeat(mut self, every: Duration) -> Self {
        self.heartbeat = every;
        self
    }

    /// Gives up opening a connection after `timeout` (then retries) instead.
    pub fn with_connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = timeout;
        self
    }

    /// The counters.
    pub fn stats(&self) -> Arc<BotStats> {
        self.stats.clone()
    }

    /// Why the last connection failed or ended, if it did, in words.
    pub fn last_error(&self) -> Option<String> {
        self.last_failure().map(|e| e.to_string())
    }

    /// Why the last connection failed or ended, if it did.
    pub fn last_failure(&self) -> Option<Arc<BotError>> {
        self.last_error.locked().clone()
    }

    /// The handle for sending on the current connection (unprompted sends, updates of other
    /// copies), while one is up.
    pub fn replies(&self) -> Option<Replies> {
        self.current.locked().clone()
    }

    /// Runs until shutdown, reconnecting on every drop.
    pub async fn run(self: Arc<Self>) {
        let mut attempts = Attempts::default();
        loop {
            let mut subscribed_at = None;
            let result = self.session(&mut subscribed_at).await;
            *self.current.locked() = None;
            self.stats.live.store(0, Ordering::SeqCst);
            let error = match result {
                Ok(()) => break,
                Err(e) => e,
            };
            let wait = match error {
                BotError::TakenOver => TAKEN_OVER_WAIT,
                _ => longconn::backoff(
                    attempts.after(subscribed_at.map(|t: Instant| t.elapsed())),
                    BACKOFF.0,
                    BACKOFF.1,
                ),
            };
            tracing::warn!(error = %error, retry_in_ms = wait.as_millis() as u64, "wecom: bot connection lost or refused; reconnecting");
            *self.last_error.locked() = Some(Arc::new(error));
            self.stats.reconnects.fetch_add(1, Ordering::Relaxed);
            tokio::select! {
                _ = self.shutdown.cancelled() => break,
                _ = tokio::time::sleep(wait) => {}
            }
        }
    }

    /// One connection: handshake, subscription, then frames until it ends (`Ok`: shutdown).
    async fn session(&self, subscribed_at: &mut Option<Instant>) -> Result<(), BotError> {
        let dialed = longconn::dial(
            &self.url,
            MAX_MESSAGE_BYTES,
            self.tls.clone(),
            self.connect_timeout,
            &self.shutdown,
        )
        .await;
        let Some(ws) = dialed.map_err(|e| BotError::Connect(e.to_string()))? else {
            return Ok(());
        };
        let (mut sink, mut stream) = ws.split();
        self.subscribe(&mut sink, &mut stream).await?;
        *subscribed_at = Some(Instant::now());
        self.stats.subscribed.fetch_add(1, Ordering::Relaxed);
        self.stats.live.store(1, Ordering::SeqCst);
        tracing::info!("wecom: bot connection subscribed");
        let (out_tx, mut out_rx) = mpsc::channel::<String>(64);
        let pending: Pending = Arc::default();
        let replies = Replies {
            out: out_tx,
            pending: pending.clone(),
        };
        *self.current.locked() = Some(replies.clone());
        let mut heartbeat =
            tokio::time::interval_at(Instant::now() + self.heartbeat, self.heartbeat);
        let mut unanswered = 0u32;
        loop {
            tokio::select! {
                _ = self.shutdown.cancelled() => {
                    let _ = sink.send(Message::Close(None)).await;
                    return Ok(());
                }
                Some(text) = out_rx.recv() => {
                    sink.send(Message::Text(text.into())).await
                        .map_err(|e| BotError::Dropped(format!("send failed: {e}")))?;
                }
                _ = heartbeat.tick() => {
                    if unanswered >= 2 {
                        return Err(BotError::Dropped("two heartbeats went unanswered".into()));
                    }
                    unanswered += 1;
                    self.stats.pings.fetch_add(1, Ordering::Relaxed);
                    let ping = json!({"cmd": cmd::PING, "headers": {"req_id": req_id(cmd::PING)}});
                    sink.send(Message::Text(ping.to_string().into())).await
                        .map_err(|e| BotError::Dropped(format!("ping failed: {e}")))?;
                }
                msg = stream.next() => {
                    let Some(frame) = longconn::json_frame::<Frame>(msg, "wecom", "WeCom")
                        .map_err(BotError::Dropped)?
                    else {
                        continue;
                    };
                    match frame.cmd.as_deref() {
                        None if frame.headers.req_id.starts_with(cmd::PING) => unanswered = 0,
                        None => {
                            let waiter = pending.locked().remove(&frame.headers.req_id);
                            if let Some(w) = waiter {
                                let _ = w.send(frame);
                            }
                        }
                        Some(cmd::EVENT_CALLBACK)
                            if frame.body.as_ref().and_then(|b| b.pointer("/event/eventtype")).and_then(Value::as_str)
                                == Some("disconnected_event") =>
                        {
                            let _ = sink.send(Message::Close(None)).await;
                            return Err(BotError::TakenOver);
                        }
                        Some(cmd::MSG_CALLBACK | cmd::EVENT_CALLBACK) => self.callback(frame, &replies),
                        Some(other) => tracing::debug!(cmd = other, "wecom: a frame of an unknown command ignored"),
                    }
                }
            }
        }
    }

    /// Subscribes with the bot's id and secret, first: nothing else is sent before WeCom
    /// accepts it.
    async fn subscribe(
        &self,
        sink: &mut SplitSink<Socket, Message>,
        stream: &mut SplitStream<Socket>,
    ) -> Result<(), BotError> {
        let sub_id = req_id(cmd::SUBSCRIBE);
        let sub = json!({"cmd": cmd::SUBSCRIBE, "headers": {"req_id": sub_id},
            "body": {"bot_id": self.bot_id, "secret": self.secret.expose()}});
        sink.send(Message::Text(sub.to_string().into()))
            .await
            .map_err(|e| BotError::Dropped(format!("subscribe failed: {e}")))?;
        let answer = tokio::time::timeout(SUBSCRIBE_TIMEOUT, async {
            while let Some(msg) = stream.next().await {
                if let Ok(Message::Text(t)) = msg
                    && let Ok(f) = serde_json::from_str::<Frame>(t.as_str())
                    && f.headers.req_id == sub_id
                {
                    return Some(f);
                }
            }
            None
        })
        .await
        .map_err(|_| BotError::Timeout(cmd::SUBSCRIBE.into()))?
        .ok_or_else(|| BotError::Dropped("closed before the subscription was answered".into()))?;
        if answer.errcode.unwrap_or(-1) != 0 {
            return Err(BotError::Refused {
                errcode: answer.errcode.unwrap_or(-1),
                errmsg: answer.errmsg.unwrap_or_default(),
            });
        }
        Ok(())
    }

    /// Hands a callback to the handler on a task of its own, once per `msgid`.
    fn callback(&self, frame: Frame, replies: &Replies) {
        let msgid = frame
            .body
            .as_ref()
            .and_then(|b| b.get("msgid"))
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        if !msgid.is_empty() {
            let mut seen = self.seen.locked();
            let (set, order) = &mut *seen;
            if !set.insert(msgid.clone()) {
                self.stats.duplicates.fetch_add(1, Ordering::Relaxed);
                return;
            }
            order.push_back(msgid);
            while order.len() > MAX_REMEMBERED {
                if let Some(old) = order.pop_front() {
                    set.remove(&old);
                }
            }
        }
        self.stats.callbacks.fetch_add(1, Ordering::Relaxed);
        let handler = self.handler.clone();
        let replies = replies.clone();
        tokio::spawn(async move { handler.callback(frame, replies).await });
    }
}

/// A template card click (`aibot_event_callback` with `eventtype: template_card_event`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CardClick {
    /// The click's `req_id`: the only one an `aibot_respond_update_msg` for it accepts.
    pub req_id: String,
    /// The delivery's id (for deduplication).
    pub msgid: String,
    /// Who clicked (`from.userid`).
    pub userid: String,
    /// The group's chatid (absent in a one-to-one chat).
    pub chatid: Option<String>,
    /// The button's key.
    pub event_key: String,
    /// The card's `task_id`.
    pub task_id: String,
}

impl CardClick {
    /// Reads a click from a callback frame; `None` for anything else. The key and task id
    /// are read from `event` itself (as the official Node SDK's types have them) or from
    /// `event.template_card_event` (as other clients read them).
    pub fn from_frame(frame: &Frame) -> Option<Self> {
        let body = frame.body.as_ref()?;
        let event = body.get("event")?;
        if event.get("eventtype")?.as_str()? != "template_card_event" {
            return None;
        }
        let field = |k: &str| {
            event
                .get(k)
                .or_else(|| event.get("template_card_event").and_then(|t| t.get(k)))
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string()
        };
        Some(Self {
            req_id: frame.headers.req_id.clone(),
            msgid: body
                .get("msgid")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string(),
            userid: body
                .pointer("/from/userid")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string(),
            chatid: body
                .get("chatid")
                .and_then(Value::as_str)
                .map(str::to_string),
            event_key: field("event_key"),
            task_id: field("task_id"),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_are_shaped_as_the_official_sdk_sends_them() {
        let f: Frame = serde_json::from_value(
            json!({"headers": {"req_id": "aibot_subscribe_1_ab"}, "errcode": 0, "errmsg": "ok"}),
        )
        .unwrap();
        assert_eq!(f.cmd, None);
        assert_eq!(f.errcode, Some(0));
        let out = serde_json::to_value(Frame {
            cmd: Some(cmd::PING.into()),
            headers: Headers {
                req_id: "ping_1_ab".into(),
            },
            ..Frame::default()
        })
        .unwrap();
        assert_eq!(
            out,
            json!({"cmd": "ping", "headers": {"req_id": "ping_1_ab"}})
        );
        let id = req_id(cmd::SEND);
        assert!(id.starts_with("aibot_send_msg_"), "{id}");
    }

    #[test]
    fn a_card_click_is_read_from_either_shape() {
        for event in [
            json!({"eventtype": "template_card_event", "event_key": "approve", "task_id": "t1"}),
            json!({"eventtype": "template_card_event", "template_card_event": {"event_key": "approve", "task_id": "t1"}}),
        ] {
            let f = Frame {
                cmd: Some(cmd::EVENT_CALLBACK.into()),
                headers: Headers {
                    req_id: "r1".into(),
                },
                body: Some(
                    json!({"msgid": "m1", "aibotid": "b1", "chatid": "g1", "chattype": "group",
                    "from": {"userid": "lead"}, "msgtype": "event", "event": event}),
                ),
                ..Frame::default()
            };
            let c = CardClick::from_frame(&f).unwrap();
            assert_eq!(
                (c.event_key.as_str(), c.task_id.as_str(), c.userid.as_str()),
                ("approve", "t1", "lead")
            );
            assert_eq!(c.req_id, "r1");
        }
    }
}
