//! Following `/v1/events` across reconnects: each connection read event by event, what
//! happens reported as [`Feed`] items.

use std::time::Duration;

use futures_util::StreamExt;
use reqwest::StatusCode;
use serde_json::Value;
use tokio::sync::mpsc;

use super::{Backoff, CONNECT_TIMEOUT, ClientError, Remote};
use crate::interaction::Interaction;

/// The server sends a keep-alive every 15 s: silence for this long means the connection is
/// gone.
const IDLE_LIMIT: Duration = Duration::from_secs(45);

/// How one connection to the event stream ended.
enum Stream {
    /// The receiver went away.
    Closed,
    /// Reconnecting will not help (401, 403, an unexpected status).
    Fatal(ClientError),
    /// The connection failed or dropped; `connected` when it had been established.
    Lost { error: String, connected: bool },
}

/// What the event stream reports.
#[derive(Debug)]
pub(crate) enum Feed {
    /// Connected; `resumed` when the server was given the last event id seen.
    Connected {
        /// Whether `Last-Event-ID` was sent.
        resumed: bool,
    },
    /// A new (or, after connecting, a pending) interaction.
    Created(Interaction),
    /// An interaction was resolved.
    Resolved(Interaction),
    /// A vote on an approval that needs several people did not decide it: the interaction
    /// with the votes so far.
    Voted(Interaction),
    /// Missed events are gone: the pending interactions follow; drop what is known.
    Reset,
    /// An event this client could not read.
    Unreadable(String),
    /// The connection failed or dropped; the next attempt is in `retry_in`.
    Lost {
        /// What went wrong.
        error: String,
        /// When the next attempt is made.
        retry_in: Duration,
    },
    /// The server refused the stream; following has stopped.
    Refused(ClientError),
}

impl Remote {
    /// Follows `/v1/events` until `tx` is closed, reconnecting with `Last-Event-ID` after a
    /// failure and reporting what happens as [`Feed`] items.
    pub(crate) async fn follow(self, tx: mpsc::Sender<Feed>) {
        let mut last_id: Option<String> = None;
        let mut backoff = Backoff::default();
        loop {
            let outcome = self.stream_once(&tx, &mut last_id).await;
            let error = match outcome {
                Stream::Closed => return,
                Stream::Fatal(e) => {
                    let _ = tx.send(Feed::Refused(e)).await;
                    return;
                }
                Stream::Lost { error, connected } => {
                    if connected {
                        backoff = Backoff::default();
                    }
                    error
                }
            };
            let wait = backoff.delay();
            if tx
                .send(Feed::Lost {
                    error,
                    retry_in: wait,
                })
                .await
                .is_err()
            {
                return;
            }
            tokio::time::sleep(wait).await;
        }
    }

    /// One connection to the event stream, read until it ends.
    async fn stream_once(&self, tx: &mpsc::Sender<Feed>, last_id: &mut Option<String>) -> Stream {
        let resp = match self.connect_events(last_id.as_deref()).await {
            Ok(resp) => resp,
            Err(ended) => return ended,
        };
        if tx
            .send(Feed::Connected {
                resumed: last_id.is_some(),
            })
            .await
            .is_err()
        {
            return Stream::Closed;
        }
        let mut events = eventsource_stream::EventStream::new(resp.bytes_stream());
        loop {
            let event = match tokio::time::timeout(IDLE_LIMIT, events.next()).await {
                Err(_) => return lost(format!("nothing heard for {} s", IDLE_LIMIT.as_secs())),
                Ok(None) => return lost("the server closed the event stream".into()),
                Ok(Some(Err(eventsource_stream::EventStreamError::Transport(_)))) => {
                    return lost("the connection dropped".into());
                }
                Ok(Some(Err(other))) => {
                    return lost(format!("the event stream cannot be read: {other}"));
                }
                Ok(Some(Ok(event))) => event,
            };
            if !event.id.is_empty() {
                *last_id = Some(event.id.clone());
            }
            if let Some(feed) = feed_of(&event)
                && tx.send(feed).await.is_err()
            {
                return Stream::Closed;
            }
        }
    }

    /// Opens the event stream (resuming after `last_id`); how it ended when it did not open.
    async fn connect_events(&self, last_id: Option<&str>) -> Result<reqwest::Response, Stream> {
        let mut req = self
            .request(reqwest::Method::GET, "/v1/events")
            .header("Accept", "text/event-stream");
        if let Some(id) = last_id {
            req = req.header("Last-Event-ID", id);
        }
        let resp = match tokio::time::timeout(CONNECT_TIMEOUT * 2, req.send()).await {
            Err(_) => {
                return Err(Stream::Lost {
                    error: "no answer in time".into(),
                    connected: false,
                });
            }
            Ok(Err(e)) => {
                return Err(Stream::Lost {
                    error: match self.unreachable(&e) {
                        ClientError::Unreachable { reason, .. } => reason,
                        other => other.to_string(),
                    },
                    connected: false,
                });
            }
            Ok(Ok(r)) => r,
        };
        let status = resp.status();
        if status.is_success() {
            return Ok(resp);
        }
        let text = resp.text().await.unwrap_or_default();
        let message = serde_json::from_str::<Value>(&text)
            .ok()
            .and_then(|v| v["error"]["message"].as_str().map(str::to_string))
            .unwrap_or_else(|| crate::interaction::clip(text.trim(), 200));
        Err(match status {
            StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN => {
                Stream::Fatal(self.status_error(status, message))
            }
            s if s.is_server_error() => Stream::Lost {
                error: format!("{s}: {message}"),
                connected: false,
            },
            s => Stream::Fatal(ClientError::Protocol(format!(
                "/v1/events answered {s}: {message}"
            ))),
        })
    }
}

/// A connection that had been established was lost.
fn lost(error: String) -> Stream {
    Stream::Lost {
        error,
        connected: true,
    }
}

/// What an event means to the client; `None` for kinds from a newer server.
fn feed_of(event: &eventsource_stream::Event) -> Option<Feed> {
    match event.event.as_str() {
        "reset" => Some(Feed::Reset),
        "interaction.created" | "interaction.resolved" | "interaction.voted" => {
            match serde_json::from_str::<Interaction>(&event.data) {
                Ok(i) if event.event == "interaction.created" => Some(Feed::Created(i)),
                Ok(i) if event.event == "interaction.voted" => Some(Feed::Voted(i)),
                Ok(i) => Some(Feed::Resolved(i)),
                Err(e) => Some(Feed::Unreadable(format!("{}: {e}", event.event))),
            }
        }
        _ => None,
    }
}
