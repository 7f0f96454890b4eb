//! The doorbell between replicas: one dedicated connection (outside the pool: `LISTEN`
//! belongs to a session, so it must not go through a transaction-pooling proxy either) that
//! listens on the schema's channels, and a stream of what it hears.
//!
//! On the changes channel a notification carries an interaction id: the tables are the
//! truth, and the listener only says where to look. A resolution is also announced on the
//! settled channel with the resolution itself (`settled_payload`, when it fits the 8,000
//! bytes PostgreSQL allows), so a replica holding the interaction wakes its waiters without
//! reading the store first; it still reads the events, which the id's notification asks
//! for. A resolution too big to carry is announced by its id alone, as before. Older
//! replicas listen on the changes channel only and never see the second payload.
//! Nothing is replayed after a reconnect, so whenever the
//! listener may have missed something (on every (re)connection, the first included, and when
//! its reader falls behind) it says so with [`Notification::MayHaveMissed`], and the reader
//! re-checks what it holds. The connection is re-established with a growing, jittered
//! backoff for as long as the [`Listener`] lives; dropping it closes the connection.

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use futures_util::{Stream, StreamExt};
use serde::{Deserialize, Serialize};
use tokio::sync::mpsc;
use tokio_postgres::AsyncMessage;
use tokio_util::sync::{CancellationToken, DropGuard};

use super::connect::Target;
use crate::interaction::{InteractionId, Resolution};

/// Notifications held for a slow reader; past this, they are dropped for one
/// [`Notification::MayHaveMissed`] (the connection is never left unread: the server would
/// buffer for it, and writers' `NOTIFY`s fail once its queue is full).
const BUFFER: usize = 1024;
/// The first wait before reconnecting; it doubles up to [`BACKOFF_MAX`].
const BACKOFF_MIN: Duration = Duration::from_millis(100);
/// The longest wait before reconnecting.
const BACKOFF_MAX: Duration = Duration::from_secs(5);
/// How the listener's connection is named in `pg_stat_activity`.
pub(crate) const APPLICATION_NAME: &str = "imrelay-listener";
/// The most bytes a notification's payload may have: PostgreSQL refuses 8,000 or more.
pub(crate) const MAX_PAYLOAD: usize = 7999;

/// A resolution as announced on the settled channel.
#[derive(Serialize)]
struct SettledOut<'a> {
    id: &'a str,
    resolution: &'a Resolution,
}

/// [`SettledOut`] as read back.
#[derive(Deserialize)]
struct SettledIn {
    id: InteractionId,
    resolution: Box<Resolution>,
}

/// The payload announcing that interaction `id` was resolved with `resolution`, for the
/// settled channel; `None` when it would not fit a notification ([`MAX_PAYLOAD`]): then
/// the id on the changes channel announces it alone.
pub(crate) fn settled_payload(id: &str, resolution: &Resolution) -> Option<String> {
    let text = serde_json::to_string(&SettledOut { id, resolution }).ok()?;
    (text.len() <= MAX_PAYLOAD).then_some(text)
}

/// What the listener reports: the store's [`crate::store::Change`].
pub use crate::store::Change as Notification;

/// A running listener: a stream of [`Notification`]s that ends only when the listener is
/// dropped.
#[derive(Debug)]
pub struct Listener {
    rx: mpsc::Receiver<Notification>,
    _stop: DropGuard,
}

impl Listener {
    /// Starts listening on `channel` (ids of changed interactions) and `settled` (the
    /// resolutions, see [`settled_payload`]) in the background.
    pub(crate) fn start(target: Arc<Target>, channel: String, settled: String) -> Self {
        let (tx, rx) = mpsc::channel(BUFFER);
        let stop = CancellationToken::new();
        let channels = Channels {
            changes: channel,
            settled,
        };
        tokio::spawn(run(target, channels, tx, stop.clone()));
        Self {
            rx,
            _stop: stop.drop_guard(),
        }
    }
}

impl Stream for Listener {
    type Item = Notification;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Notification>> {
        self.rx.poll_recv(cx)
    }
}

/// The channels listened on.
struct Channels {
    /// Ids of created and resolved interactions.
    changes: String,
    /// Resolutions, with the resolution.
    settled: String,
}

/// Why a listening session ended.
enum Ended {
    /// The listener was dropped.
    Stopped,
    /// The connection was lost (or never made); try again.
    Lost(String),
}

async fn run(
    target: Arc<Target>,
    channels: Channels,
    tx: mpsc::Sender<Notification>,
    stop: CancellationToken,
) {
    let mut backoff = BACKOFF_MIN;
    loop {
        let started = tokio::time::Instant::now();
        match session(&target, &channels, &tx, &stop).await {
            Ended::Stopped => return,
            Ended::Lost(why) => {
                tracing::warn!(url = target.shown(), channel = %channels.changes.escape_debug(), error = %why,
                    "the PostgreSQL listener lost its connection; reconnecting");
            }
        }
        // A session that lasted is a fresh failure: start the backoff over.
        if started.elapsed() > BACKOFF_MAX * 2 {
            backoff = BACKOFF_MIN;
        }
        let jitter = rand::random_range(0..=backoff.as_millis() as u64 / 2);
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = tokio::time::sleep(backoff + Duration::from_millis(jitter)) => {}
        }
        backoff = (backoff * 2).min(BACKOFF_MAX);
    }
}

/// One connection: connect, `LISTEN`, then pass on what arrives until the connection ends.
async fn session(
    target: &Target,
    channels: &Channels,
    tx: &mpsc::Sender<Notification>,
    stop: &CancellationToken,
) -> Ended {
    let connecting = target.connect(APPLICATION_NAME);
    let (client, mut messages) = tokio::select! {
        _ = stop.cancelled() => return Ended::Stopped,
        r = connecting => match r {
            Ok(c) => c,
            Err(e) => return Ended::Lost(e.to_string()),
        },
    };
    // The connection makes progress only while its messages are read: read them while the
    // LISTEN runs (nothing can be heard before it completes).
    let quote = |c: &str| format!("\"{}\"", c.replace('"', "\"\""));
    let listen_sql = format!(
        "LISTEN {}; LISTEN {}",
        quote(&channels.changes),
        quote(&channels.settled)
    );
    let listen = client.batch_execute(&listen_sql);
    tokio::pin!(listen);
    loop {
        tokio::select! {
            _ = stop.cancelled() => return Ended::Stopped,
            r = &mut listen => match r {
                Ok(()) => break,
                Err(e) => return Ended::Lost(target.scrub(super::describe(&e))),
            },
            m = messages.next() => match m {
                Some(Ok(_)) => {}
                Some(Err(e)) => return Ended::Lost(target.scrub(super::describe(&e))),
                None => return Ended::Lost("the connection closed".into()),
            },
        }
    }
    tracing::info!(url = target.shown(), channel = %channels.changes.escape_debug(), "listening for changes from other replicas");
    // Whatever happened before this LISTEN was not heard.
    let mut missed = true;
    loop {
        tokio::select! {
            _ = stop.cancelled() => return Ended::Stopped,
            permit = tx.reserve(), if missed => match permit {
                Ok(p) => {
                    p.send(Notification::MayHaveMissed);
                    missed = false;
                }
                Err(_) => return Ended::Stopped,
            },
            m = messages.next() => match m {
                Some(Ok(AsyncMessage::Notification(n))) => {
                    let note = if n.channel() == channels.settled {
                        // Unreadable: the same resolution's id on the changes channel covers it.
                        let Some(note) = parse_settled(n.payload()) else { continue };
                        note
                    } else {
                        parse(n.payload())
                    };
                    match tx.try_send(note) {
                        Ok(()) => {}
                        Err(mpsc::error::TrySendError::Full(_)) => missed = true,
                        Err(mpsc::error::TrySendError::Closed(_)) => return Ended::Stopped,
                    }
                }
                Some(Ok(_)) => {}
                Some(Err(e)) => return Ended::Lost(target.scrub(super::describe(&e))),
                None => return Ended::Lost("the connection closed".into()),
            },
        }
    }
}

/// A notification's payload: an interaction id, or (empty or not an id) "look at
/// everything".
fn parse(payload: &str) -> Notification {
    if payload.is_empty() {
        return Notification::MayHaveMissed;
    }
    match InteractionId::parse(payload) {
        Ok(id) => Notification::Changed(id),
        Err(_) => {
            tracing::warn!(payload = %payload.escape_debug(), "a notification that is not an interaction id; re-checking everything");
            Notification::MayHaveMissed
        }
    }
}

/// A payload of the settled channel ([`settled_payload`]), or `None` (logged) if it is not one.
fn parse_settled(payload: &str) -> Option<Notification> {
    match serde_json::from_str::<SettledIn>(payload) {
        Ok(s) => Some(Notification::Settled(s.id, s.resolution)),
        Err(e) => {
            tracing::warn!(error = %e, bytes = payload.len(), "an unreadable resolution notification; waiting for the events instead");
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_payload_names_an_interaction_or_asks_for_a_recheck() {
        assert_eq!(
            parse("a-1"),
            Notification::Changed(InteractionId::parse("a-1").unwrap())
        );
        assert_eq!(parse(""), Notification::MayHaveMissed);
        assert_eq!(parse("not an id!"), Notification::MayHaveMissed);
    }

    fn resolution(by: &str) -> Resolution {
        let i = crate::interaction::Interaction::pending(
            InteractionId::parse("a-1").unwrap(),
            "Bash",
            serde_json::Map::new(),
            crate::interaction::now(),
            60,
        );
        let mut r = crate::interaction::expired(&i, crate::interaction::now());
        r.by = Some(by.into());
        r
    }

    #[test]
    fn a_resolution_is_carried_when_it_fits_a_notification() {
        let r = resolution("alice");
        let payload = settled_payload("a-1", &r).expect("a small resolution fits");
        assert_eq!(
            parse_settled(&payload),
            Some(Notification::Settled(
                InteractionId::parse("a-1").unwrap(),
                Box::new(r)
            ))
        );
        // PostgreSQL refuses a payload of 8,000 bytes or more: then none is made.
        let fits = (7_000..8_000)
            .map(|n| (n, settled_payload("a-1", &resolution(&"b".repeat(n)))))
            .collect::<Vec<_>>();
        let last = fits.iter().rev().find_map(|(_, p)| p.as_ref()).unwrap();
        assert!(last.len() <= MAX_PAYLOAD && last.len() > MAX_PAYLOAD - 10);
        assert!(fits.iter().any(|(_, p)| p.is_none()));
        assert_eq!(
            settled_payload("a-1", &resolution(&"é".repeat(4_000))),
            None
        );
    }

    #[test]
    fn an_unreadable_resolution_payload_is_passed_over() {
        assert_eq!(parse_settled("not json"), None);
        assert_eq!(parse_settled(r#"{"id":"a-1"}"#), None);
        assert_eq!(parse_settled(r#"{"id":"","resolution":null}"#), None);
    }
}
