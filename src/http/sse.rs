//! `GET /v1/events`: the lifecycle as Server-Sent Events.
//!
//! - Without `Last-Event-ID`, a client first receives every pending interaction as
//!   `interaction.created`, then live events.
//! - With `Last-Event-ID`, it receives what it missed, then live events; if that is older
//!   than the replay buffer (or from before a restart), it receives `reset` followed by the
//!   pending interactions, as if it had just connected.
//! - Only the last event of such a snapshot carries an id (the event log's head when the
//!   snapshot began): a client that drops in the middle resumes from the id it had before,
//!   and so receives the whole snapshot again instead of losing its rest.
//! - An interaction created while the snapshot is read can be both in the snapshot and in
//!   the live events that follow; its live `interaction.created` is then not sent again.
//! - Keep-alive comments every 15 s; the stream ends when the server shuts down.

use std::collections::HashSet;
use std::convert::Infallible;
use std::time::Duration;

use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::sse::{Event as SseEvent, KeepAlive, Sse};
use futures_util::Stream;
use serde_json::json;
use tokio::sync::{broadcast, mpsc};
use tokio_stream::wrappers::ReceiverStream;

use super::AppState;
use crate::interaction::{Event, EventKind, Interaction, InteractionId, Registry, Replay};

/// Interval of keep-alive comments.
pub const KEEP_ALIVE: Duration = Duration::from_secs(15);

fn encode_data(kind: &str, interaction: &Interaction) -> SseEvent {
    SseEvent::default()
        .event(kind)
        .json_data(interaction)
        .unwrap_or_else(|_| SseEvent::default().comment("unencodable event"))
}

fn encode(event: &Event) -> SseEvent {
    encode_data(event.kind.name(), &event.interaction).id(event.seq.to_string())
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

/// What a stream sends, with the ids of snapshot entries whose live `interaction.created`
/// may still arrive (each is forgotten once its live event does, or its resolution).
struct Outgoing {
    tx: mpsc::Sender<SseEvent>,
    /// The sequence number of the last event sent (or covered by a snapshot).
    last: u64,
    snapshot: HashSet<InteractionId>,
}

impl Outgoing {
    fn new(tx: mpsc::Sender<SseEvent>) -> Self {
        Self {
            tx,
            last: 0,
            snapshot: HashSet::new(),
        }
    }

    async fn send(&self, event: SseEvent) -> Result<(), ()> {
        self.tx.send(event).await.map_err(|_| ())
    }

    /// Sends the pending interactions as `interaction.created` (after `reset` when `reset`
    /// is set), the last one carrying `head` as its id, and continues from `head`.
    async fn snapshot(&mut self, registry: &Registry, head: u64, reset: bool) -> Result<(), ()> {
        let pending = match registry.pending().await {
            Ok(p) => p,
            Err(e) => {
                tracing::warn!(error = %e, "could not list pending interactions for an event stream");
                Vec::new()
            }
        };
        let mut events = Vec::with_capacity(pending.len() + 1);
        if reset {
            events.push(
                SseEvent::default()
                    .event("reset")
                    .json_data(json!({"reason": "missed events are no longer available; the pending interactions follow"}))
                    .unwrap_or_default(),
            );
        }
        self.snapshot = pending.iter().map(|i| i.id.clone()).collect();
        events.extend(
            pending
                .iter()
                .map(|i| encode_data(EventKind::Created.name(), i)),
        );
        self.last = head;
        let count = events.len();
        for (n, event) in events.into_iter().enumerate() {
            let event = if n + 1 == count {
                event.id(head.to_string())
            } else {
                event
            };
            self.send(event).await?;
        }
        Ok(())
    }

    /// Sends a live or replayed event, unless it was already sent or is a snapshot entry's
    /// `interaction.created`.
    async fn event(&mut self, e: &Event) -> Result<(), ()> {
        if e.seq <= self.last {
            return Ok(());
        }
        self.last = e.seq;
        let in_snapshot = !self.snapshot.is_empty() && self.snapshot.remove(&e.interaction.id);
        if in_snapshot && e.kind == EventKind::Created {
            return Ok(());
        }
        self.send(encode(e)).await
    }
}

async fn feed(state: AppState, last_id: Option<u64>, tx: mpsc::Sender<SseEvent>) {
    let shutdown = state.shutdown.clone();
    let closed = tx.clone();
    tokio::select! {
        _ = run(&state, last_id, tx) => {}
        _ = shutdown.cancelled() => {}
        _ = closed.closed() => {}
    }
}

async fn run(state: &AppState, last_id: Option<u64>, tx: mpsc::Sender<SseEvent>) -> Result<(), ()> {
    if let Some(id) = last_id {
        // An id another replica gave: read that far first.
        state.registry.events_caught_up(id).await;
    }
    let log = state.registry.events();
    let mut out = Outgoing::new(tx);
    let mut rx = match last_id {
        None => {
            let (head, rx) = log.subscribe();
            out.snapshot(&state.registry, head, false).await?;
            rx
        }
        Some(id) => match log.resume(id) {
            (Replay::Events(missed), rx) => {
                out.last = id;
                for e in missed {
                    out.event(&e).await?;
                }
                rx
            }
            (Replay::Gap, rx) => {
                out.snapshot(&state.registry, log.head(), true).await?;
                rx
            }
        },
    };
    loop {
        match rx.recv().await {
            Ok(e) => out.event(&e).await?,
            Err(broadcast::error::RecvError::Lagged(_)) => match log.replay(out.last) {
                Replay::Events(missed) => {
                    for e in missed {
                        out.event(&e).await?;
                    }
                }
                Replay::Gap => out.snapshot(&state.registry, log.head(), true).await?,
            },
            Err(broadcast::error::RecvError::Closed) => return Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::interaction::{Answer, NewInteraction, RegistryConfig, Responder, Via};
    use crate::store::MemoryStore;

    fn bash(id: &str) -> NewInteraction {
        NewInteraction {
            id: Some(id.into()),
            ..NewInteraction::new("Bash", Default::default())
        }
    }

    fn drain(rx: &mut mpsc::Receiver<SseEvent>) -> Vec<String> {
        let mut out = Vec::new();
        while let Ok(e) = rx.try_recv() {
            out.push(format!("{e:?}"));
        }
        out
    }

    #[tokio::test]
    async fn an_interaction_created_during_the_snapshot_is_sent_once() {
        let reg = Registry::new(Arc::new(MemoryStore::new()), RegistryConfig::default());
        reg.create(bash("before")).await.unwrap();
        let (head, mut live) = reg.events().subscribe();
        // Created after subscribing, before the snapshot reads the pending list: it is in
        // both the snapshot and the live events.
        let during = reg
            .create(bash("during"))
            .await
            .unwrap()
            .interaction
            .id
            .clone();
        let (tx, mut rx) = mpsc::channel(16);
        let mut out = Outgoing::new(tx);
        out.snapshot(&reg, head, false).await.unwrap();
        reg.respond(&during, Answer::allow(), Responder::anonymous(Via::api()))
            .await
            .unwrap();
        reg.create(bash("after")).await.unwrap();
        while let Ok(e) = live.try_recv() {
            out.event(&e).await.unwrap();
        }
        let sent = drain(&mut rx);
        let created = |id: &str| {
            sent.iter()
                .filter(|e| {
                    e.contains("interaction.created")
                        && e.contains(&format!("\\\"id\\\":\\\"{id}\\\""))
                })
                .count()
        };
        assert_eq!(created("before"), 1, "{sent:#?}");
        assert_eq!(created("during"), 1, "{sent:#?}");
        assert_eq!(created("after"), 1, "{sent:#?}");
        assert_eq!(
            sent.iter()
                .filter(|e| e.contains("interaction.resolved"))
                .count(),
            1,
            "{sent:#?}"
        );
        assert_eq!(sent.len(), 4, "{sent:#?}");
        // Only the snapshot's last event carries an id.
        assert!(!sent[0].contains("id: "), "{sent:#?}");
        assert!(sent[1].contains(&format!("id: {head}")), "{sent:#?}");
    }
}
