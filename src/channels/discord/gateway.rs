//! The Gateway: interactions arrive over a WebSocket imrelay opens to Discord with the bot
//! token, so no public URL is needed.
//!
//! One connection, kept: `Hello` gives the heartbeat interval; imrelay identifies with the
//! `GUILD_MESSAGES` and `DIRECT_MESSAGES` intents, neither privileged (interactions reach a
//! bot whatever its intents; messages are read only for a reply to a session's message,
//! and imrelay reads no members or presences), sends the first heartbeat after a random part of the interval and
//! then one per interval carrying the last sequence number, and answers Discord's heartbeat
//! request at once. A heartbeat whose acknowledgement did not come before the next one is a
//! dead connection: it is closed and the session resumed on a new one (`Resume` with the
//! session id and sequence, on `resume_gateway_url`), as it is after `Reconnect`, a dropped
//! connection or a close code that allows it. `Invalid Session` (not resumable) and the
//! close codes 4007 and 4009 start a new session; 4004 (the token), 4010–4014 (shards,
//! intents) stop the channel's connection with an error that says what to fix.
//!
//! Each `INTERACTION_CREATE` is handed to the channel's handler and answered by
//! `POST /interactions/{id}/{token}/callback` within Discord's 3 seconds; each
//! `MESSAGE_CREATE` to the handler's replies (`super::replies`), answered by a message in
//! reply when it is a session's.

use std::sync::Arc;
use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use rand::Rng;
use serde_json::{Value, json};
use tokio::time::Instant;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::protocol::CloseFrame;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_util::sync::CancellationToken;

use super::api::Rest;
use super::inbound::Interactions;
use crate::channels::longconn::{self, Attempts};
use crate::health::Health;
use crate::settings::Secret;

/// The health component name.
const COMPONENT: &str = "discord";
/// The Gateway's API version and encoding.
const QUERY: &str = "?v=10&encoding=json";
/// The intents imrelay identifies with: `GUILD_MESSAGES` and `DIRECT_MESSAGES` (neither
/// privileged), for the replies to a session's messages (`super::replies`); interactions
/// need none.
pub const INTENTS: u64 = (1 << 9) | (1 << 12);
/// Shortest wait between reconnect attempts.
pub const MIN_BACKOFF: Duration = Duration::from_secs(1);
/// Longest wait between reconnect attempts.
pub const MAX_BACKOFF: Duration = Duration::from_secs(120);
/// Largest message accepted from the Gateway.
pub const MAX_MESSAGE_BYTES: usize = 4 << 20;

/// What to do after a connection ended.
#[derive(Debug, PartialEq)]
enum Next {
    /// Open a new connection and resume the session.
    Resume(String),
    /// Open a new connection and identify anew.
    Identify(String),
    /// Stop: the settings must change first.
    Fatal(String),
    /// The server is shutting down.
    Shutdown,
}

/// The half of a connection imrelay writes to.
type Sink = futures_util::stream::SplitSink<longconn::Socket, Message>;
/// The half of a connection imrelay reads from.
type Stream = futures_util::stream::SplitStream<longconn::Socket>;

/// The session a new connection resumes.
#[derive(Clone, Debug, Default)]
struct Session {
    id: Option<String>,
    resume_url: Option<String>,
    seq: Option<u64>,
}

/// The Gateway client.
pub struct Gateway {
    /// The Gateway's URL (no query).
    pub url: String,
    /// The bot token.
    pub token: Secret,
    /// For interaction callbacks.
    pub rest: Arc<Rest>,
    /// The interaction handler.
    pub handler: Arc<Interactions>,
    /// Where the connection's state is shown.
    pub health: Arc<Health>,
    /// Fires at shutdown.
    pub shutdown: CancellationToken,
    /// TLS for `wss://`.
    pub tls: Arc<rustls::ClientConfig>,
    /// How long opening a connection may take.
    pub connect_timeout: Duration,
}

impl Gateway {
    /// Holds the connection until shutdown (or a fatal close).
    pub async fn run(self) {
        let mut session = Session::default();
        let mut attempts = Attempts::default();
        loop {
            let started = Instant::now();
            let next = self.connection(&mut session).await;
            let up_for = Some(started.elapsed());
            let why = match next {
                Next::Shutdown => return,
                Next::Fatal(why) => {
                    tracing::error!(
                        "discord: the Gateway refused imrelay: {why}; prompts are still posted, but clicks will not arrive until this is fixed and imrelay restarted"
                    );
                    self.health.set(
                        COMPONENT,
                        "failed",
                        json!({"transport": "gateway", "error": why}),
                    );
                    return;
                }
                Next::Resume(why) => why,
                Next::Identify(why) => {
                    session = Session::default();
                    why
                }
            };
            let mut wait = longconn::backoff(attempts.after(up_for), MIN_BACKOFF, MAX_BACKOFF);
            if session.id.is_none() {
                // Discord asks for a wait of 1 to 5 s before identifying again.
                wait = wait.max(Duration::from_millis(rand::rng().random_range(1000..5000)));
            }
            tracing::warn!(reason = %why, wait_ms = wait.as_millis() as u64, "discord: Gateway connection ended; reconnecting");
            self.health.set(
                COMPONENT,
                "reconnecting",
                json!({"transport": "gateway", "reason": why}),
            );
            tokio::select! {
                _ = self.shutdown.cancelled() => return,
                _ = tokio::time::sleep(wait) => {}
            }
        }
    }

    /// One connection: opened, then read until it ends.
    async fn connection(&self, session: &mut Session) -> Next {
        match self.open(session).await {
            Ok((sink, stream, interval)) => self.read(sink, stream, interval, session).await,
            Err(next) => next,
        }
    }

    /// Dials, waits for `Hello`, then identifies or resumes: the halves of the connection
    /// and the heartbeat interval.
    async fn open(&self, session: &Session) -> Result<(Sink, Stream, Duration), Next> {
        let base = session.resume_url.as_deref().unwrap_or(&self.url);
        let url = format!("{}/{QUERY}", base.trim_end_matches('/'));
        let tls = self.tls.clone();
        let dialed = longconn::dial(
            &url,
            MAX_MESSAGE_BYTES,
            tls,
            self.connect_timeout,
            &self.shutdown,
        );
        let ws = match dialed.await {
            Ok(Some(ws)) => ws,
            Ok(None) => return Err(Next::Shutdown),
            Err(e) => return Err(Next::Resume(format!("cannot connect: {e}"))),
        };
        let (mut sink, mut stream) = ws.split();
        let hello = tokio::time::timeout(self.connect_timeout, stream.next()).await;
        let interval = match hello.map(|m| longconn::json_frame::<Value>(m, "discord", "Discord")) {
            Ok(Ok(Some(v))) if v["op"] == 10 => {
                v["d"]["heartbeat_interval"].as_u64().unwrap_or(41_250)
            }
            Ok(Ok(_)) => return Err(Next::Resume("no Hello from the Gateway".into())),
            Ok(Err(e)) => return Err(Next::Resume(e)),
            Err(_) => return Err(Next::Resume("no Hello in time".into())),
        };
        let first = match &session.id {
            Some(id) => {
                json!({"op": 6, "d": {"token": self.token.expose(), "session_id": id, "seq": session.seq}})
            }
            None => json!({"op": 2, "d": {"token": self.token.expose(), "intents": INTENTS,
                "properties": {"os": std::env::consts::OS, "browser": "imrelay", "device": "imrelay"}}}),
        };
        if let Err(e) = sink.send(Message::Text(first.to_string().into())).await {
            return Err(Next::Resume(format!("cannot identify: {e}")));
        }
        Ok((sink, stream, Duration::from_millis(interval.max(1000))))
    }

    /// Reads frames and heartbeats until the connection ends: what to do then.
    async fn read(
        &self,
        mut sink: Sink,
        mut stream: Stream,
        interval: Duration,
        session: &mut Session,
    ) -> Next {
        let close = |code: u16| {
            Message::Close(Some(CloseFrame {
                code: CloseCode::from(code),
                reason: "".into(),
            }))
        };
        let jitter = rand::rng().random_range(0.0..1.0);
        let mut beat_at = Instant::now() + interval.mul_f64(jitter);
        let mut acked = true;
        loop {
            tokio::select! {
                _ = self.shutdown.cancelled() => {
                    let _ = sink.send(close(1000)).await;
                    return Next::Shutdown;
                }
                _ = tokio::time::sleep_until(beat_at) => {
                    if !acked {
                        // A zombie connection: closed with a code that keeps the session.
                        let _ = sink.send(close(4000)).await;
                        return Next::Resume("no heartbeat acknowledgement".into());
                    }
                    acked = false;
                    beat_at = Instant::now() + interval;
                    if sink.send(heartbeat(session.seq)).await.is_err() {
                        return Next::Resume("cannot send a heartbeat".into());
                    }
                }
                read = stream.next() => {
                    if let Some(Ok(Message::Close(Some(frame)))) = &read {
                        return closed(u16::from(frame.code));
                    }
                    let frame = match longconn::json_frame::<Value>(read, "discord", "Discord") {
                        Ok(Some(f)) => f,
                        Ok(None) => continue,
                        Err(e) => return Next::Resume(e),
                    };
                    let beat = match self.on_frame(&frame, session, &mut acked) {
                        Some(Err(next)) => return next,
                        Some(Ok(())) => true,
                        None => false,
                    };
                    if beat && sink.send(heartbeat(session.seq)).await.is_err() {
                        return Next::Resume("cannot send a heartbeat".into());
                    }
                }
            }
        }
    }

    /// What one frame asks: `Some(Ok)` a heartbeat now, `Some(Err)` the connection's end.
    fn on_frame(
        &self,
        frame: &Value,
        session: &mut Session,
        acked: &mut bool,
    ) -> Option<Result<(), Next>> {
        match frame["op"].as_u64() {
            Some(0) => self.dispatch(frame, session),
            Some(1) => return Some(Ok(())),
            Some(7) => return Some(Err(Next::Resume("Discord asked to reconnect".into()))),
            Some(9) if frame["d"] == true => {
                return Some(Err(Next::Resume("session invalid (resumable)".into())));
            }
            Some(9) => return Some(Err(Next::Identify("session invalid".into()))),
            Some(11) => *acked = true,
            _ => {}
        }
        None
    }

    /// A dispatch: the sequence kept, the session noted, interactions handled.
    fn dispatch(&self, frame: &Value, session: &mut Session) {
        if let Some(s) = frame["s"].as_u64() {
            session.seq = Some(s);
        }
        match frame["t"].as_str() {
            Some("READY") => {
                let d = &frame["d"];
                session.id = d["session_id"].as_str().map(str::to_string);
                session.resume_url = d["resume_gateway_url"].as_str().map(str::to_string);
                tracing::info!("discord: Gateway session ready");
                self.health.set(
                    COMPONENT,
                    "connected",
                    json!({"transport": "gateway",
                    "bot": d["user"]["id"], "intents": INTENTS}),
                );
            }
            Some("RESUMED") => {
                tracing::info!("discord: Gateway session resumed");
                self.health.set(
                    COMPONENT,
                    "connected",
                    json!({"transport": "gateway", "resumed": true}),
                );
            }
            Some("INTERACTION_CREATE") => {
                let payload = frame["d"].clone();
                let (handler, rest) = (self.handler.clone(), self.rest.clone());
                tokio::spawn(async move {
                    let (Some(id), Some(token)) = (
                        payload["id"].as_str().map(str::to_string),
                        payload["token"].as_str().map(str::to_string),
                    ) else {
                        return;
                    };
                    let response = handler.respond_in_time(payload).await;
                    if let Err(e) = rest.callback(&id, &token, &response).await {
                        tracing::warn!(error = %e, "discord: cannot answer an interaction");
                    }
                });
            }
            Some("MESSAGE_CREATE") => {
                let message = frame["d"].clone();
                let (handler, rest) = (self.handler.clone(), self.rest.clone());
                tokio::spawn(async move {
                    let Some(answer) = handler.message(&message).await else {
                        return;
                    };
                    let channel = message["channel_id"].as_str().unwrap_or_default();
                    if let Err(e) = rest.post(channel, &answer).await {
                        tracing::warn!(error = %e, "discord: cannot answer a reply to a session's message");
                    }
                });
            }
            _ => {}
        }
    }
}

fn heartbeat(seq: Option<u64>) -> Message {
    Message::Text(json!({"op": 1, "d": seq}).to_string().into())
}

/// What a close code from Discord means.
fn closed(code: u16) -> Next {
    match code {
        4004 => {
            Next::Fatal("the bot token was refused (close 4004): check discord.bot_token".into())
        }
        4010 | 4011 => Next::Fatal(format!("sharding refused (close {code})")),
        4012 => Next::Fatal("the Gateway version is refused (close 4012)".into()),
        4013 | 4014 => Next::Fatal(format!(
            "the intents were refused (close {code}): imrelay asks for GUILD_MESSAGES and DIRECT_MESSAGES only, neither privileged; check the application in the Developer Portal"
        )),
        4007 | 4009 => Next::Identify(format!("the session cannot be resumed (close {code})")),
        other => Next::Resume(format!("closed by Discord (close {other})")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn close_codes_say_what_to_do() {
        assert!(matches!(closed(4004), Next::Fatal(_)));
        assert!(matches!(closed(4014), Next::Fatal(_)));
        assert!(matches!(closed(4009), Next::Identify(_)));
        assert!(matches!(closed(4000), Next::Resume(_)));
        assert!(matches!(closed(1001), Next::Resume(_)));
    }
}
