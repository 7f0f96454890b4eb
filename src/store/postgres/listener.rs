//! The doorbell between replicas: one dedicated connection (outside the pool: `LISTEN`
//! belongs to a session, so it must not go through a transaction-pooling proxy either) that
//! listens on the schema's channel, and a stream of what it hears.
//!
//! A notification carries at most an interaction id: the tables are the truth, and the
//! listener only says where to look. Nothing is replayed after a reconnect, so whenever the
//! listener may have missed something (on every (re)connection, the first included, and when
//! its reader falls behind) it says so with [`Notification::MayHaveMissed`], and the reader
//! re-checks what it holds. The connection is re-established with a growing, jittered
//! backoff for as long as the [`Listener`] lives; dropping it closes the connection.

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use futures_util::{Stream, StreamExt};
use tokio::sync::mpsc;
use tokio_postgres::AsyncMessage;
use tokio_util::sync::{CancellationToken, DropGuard};

use super::connect::Target;
use crate::interaction::InteractionId;

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
    /// Starts listening on `channel` in the background.
    pub(crate) fn start(target: Arc<Target>, channel: String) -> Self {
        let (tx, rx) = mpsc::channel(BUFFER);
        let stop = CancellationToken::new();
        tokio::spawn(run(target, channel, tx, stop.clone()));
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

/// Why a listening session ended.
enum Ended {
    /// The listener was dropped.
    Stopped,
    /// The connection was lost (or never made); try again.
    Lost(String),
}

async fn run(
    target: Arc<Target>,
    channel: String,
    tx: mpsc::Sender<Notification>,
    stop: CancellationToken,
) {
    let mut backoff = BACKOFF_MIN;
    loop {
        let started = tokio::time::Instant::now();
        match session(&target, &channel, &tx, &stop).await {
            Ended::Stopped => return,
            Ended::Lost(why) => {
                tracing::warn!(url = target.shown(), channel = %channel.escape_debug(), error = %why,
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
    channel: &str,
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
    let listen_sql = format!("LISTEN \"{}\"", channel.replace('"', "\"\""));
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
    tracing::info!(url = target.shown(), channel = %channel.escape_debug(), "listening for changes from other replicas");
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
                    let note = parse(n.payload());
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
}
