//! `GET /v1/events`: the lifecycle as Server-Sent Events.
//!
//! - Without `Last-Event-ID`, a client first receives every pending interaction as
//!   `interaction.created`, then live events.
//! - With `Last-Event-ID`, it receives what it missed, then live events; if that is older
//!   than the replay buffer (or from before a restart), it receives `reset` followed by the
//!   pending interactions, as if it had just connected.
//! - Keep-alive comments every 15 s; the stream ends when the server shuts down.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::sse::{Event as SseEvent, KeepAlive, Sse};
use futures_util::Stream;
use serde_json::json;
use tokio::sync::{broadcast, mpsc};
use tokio_stream::wrappers::ReceiverStream;

use super::AppState;
use crate::interaction::{Event, EventKind, Replay};

/// Interval of keep-alive comments.
pub const KEEP_ALIVE: Duration = Duration::from_secs(15);

fn encode(event: &Event) -> SseEvent {
    SseEvent::default()
        .id(event.seq.to_string())
        .event(event.kind.name())
        .json_data(&event.interaction)
        .unwrap_or_else(|_| SseEvent::default().comment("unencodable event"))
}

/// `GET /v1/events`
pub async fn events(
    State(state): State<AppState>,
    headers: HeaderMap,
) -> Sse<impl Stream<Item = Result<SseEvent, Infallible>>> {
    let last_id = headers
        .get("last-event-id")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok());
    let (tx, rx) = mpsc::channel::<SseEvent>(64);
    tokio::spawn(feed(state, last_id, tx));
    Sse::new(futures_util::StreamExt::map(ReceiverStream::new(rx), Ok))
        .keep_alive(KeepAlive::new().interval(KEEP_ALIVE))
}

/// Sends the pending interactions as `interaction.created`, all carrying `head` as their id
/// (so resuming from any of them replays what came after the snapshot).
async fn snapshot(state: &AppState, head: u64, tx: &mpsc::Sender<SseEvent>) -> Result<(), ()> {
    let pending = match state.registry.pending().await {
        Ok(p) => p,
        Err(e) => {
            tracing::warn!(error = %e, "could not list pending interactions for an event stream");
            Vec::new()
        }
    };
    for i in pending {
        let event = Event {
            seq: head,
            kind: EventKind::Created,
            interaction: Arc::clone(&i),
        };
        tx.send(encode(&event)).await.map_err(|_| ())?;
    }
    Ok(())
}

async fn reset(state: &AppState, head: u64, tx: &mpsc::Sender<SseEvent>) -> Result<(), ()> {
    let ev = SseEvent::default()
        .id(head.to_string())
        .event("reset")
        .json_data(json!({"reason": "missed events are no longer available; the pending interactions follow"}))
        .unwrap_or_default();
    tx.send(ev).await.map_err(|_| ())?;
    snapshot(state, head, tx).await
}

async fn feed(state: AppState, last_id: Option<u64>, tx: mpsc::Sender<SseEvent>) {
    let shutdown = state.shutdown.clone();
    tokio::select! {
        _ = run(&state, last_id, &tx) => {}
        _ = shutdown.cancelled() => {}
        _ = tx.closed() => {}
    }
}

async fn run(
    state: &AppState,
    last_id: Option<u64>,
    tx: &mpsc::Sender<SseEvent>,
) -> Result<(), ()> {
    let log = state.registry.events();
    let (mut last, mut rx) = match last_id {
        None => {
            let (head, rx) = log.subscribe();
            snapshot(state, head, tx).await?;
            (head, rx)
        }
        Some(id) => match log.resume(id) {
            (Replay::Events(missed), rx) => {
                let mut last = id;
                for e in missed {
                    last = e.seq;
                    tx.send(encode(&e)).await.map_err(|_| ())?;
                }
                (last, rx)
            }
            (Replay::Gap, rx) => {
                let head = log.head();
                reset(state, head, tx).await?;
                (head, rx)
            }
        },
    };
    loop {
        match rx.recv().await {
            Ok(e) => {
                if e.seq <= last {
                    continue;
                }
                last = e.seq;
                tx.send(encode(&e)).await.map_err(|_| ())?;
            }
            Err(broadcast::error::RecvError::Lagged(_)) => match log.replay(last) {
                Replay::Events(missed) => {
                    for e in missed {
                        last = e.seq;
                        tx.send(encode(&e)).await.map_err(|_| ())?;
                    }
                }
                Replay::Gap => {
                    last = log.head();
                    reset(state, last, tx).await?;
                }
            },
            Err(broadcast::error::RecvError::Closed) => return Ok(()),
        }
    }
}
