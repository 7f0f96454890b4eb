//! `GET /v1/events`: the lifecycle as Server-Sent Events.
//!
//! - Without `Last-Event-ID`, a client first receives every pending interaction as
//!   `interaction.created`, then live events.
//! - With `Last-Event-ID`, it receives what it missed, then live events; if that is older
//!   than the replay buffer (or from before a restart, or not a number this server gave),
//!   it receives `reset` followed by the pending interactions, as if it had just connected.
//! - Only the last event of such a snapshot carries an id (the event log's head when the
//!   snapshot began): a client that drops in the middle resumes from the id it had before,
//!   and so receives the whole snapshot again instead of losing its rest.
//! - An interaction created while the snapshot is read can be both in the snapshot and in
//!   the live events that follow; its live `interaction.created` is then not sent again.
//! - Keep-alive comments every 15 s; the stream ends when the server shuts down.
//!
//! **Memory.** A stream holds a position in the shared event log ([`Subscription`]), never
//! a queue of its own: each event is sent as the bytes the log encoded once for everyone,
//! and the next one is read only when the connection takes more. A client that stops
//! reading costs what the connection's write buffer holds; one that falls behind the
//! replay buffer gets `reset` and the pending list. A snapshot holds the pending
//! interactions' ids and reads each one as it sends it, so a stream never holds every pending
//! input at once. At most `server.max_event_streams` streams are open at once; more get
//! `503 too_many_event_streams`.

use std::collections::{HashSet, VecDeque};
use std::convert::Infallible;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use serde_json::json;

use super::AppState;
use super::error::ApiError;
use tokio_util::sync::CancellationToken;

use crate::interaction::{
    Event, EventKind, Interaction, InteractionId, Next, Registry, Subscription,
};

/// Interval of keep-alive comments.
pub(crate) const KEEP_ALIVE: Duration = Duration::from_secs(15);

/// What `Retry-After` tells a client refused because every event stream is taken, seconds.
const RETRY_AFTER_SECS: u64 = 5;

/// The open event streams, counted against `server.max_event_streams`.
#[derive(Debug, Default)]
pub struct StreamCount(Arc<AtomicUsize>);

impl StreamCount {
    /// How many event streams are open.
    pub fn open(&self) -> usize {
        self.0.load(Ordering::Relaxed)
    }

    /// A place for one more stream, if fewer than `max` are open.
    fn acquire(&self, max: usize) -> Option<StreamSlot> {
        self.0
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < max).then_some(n + 1)
            })
            .ok()
            .map(|_| StreamSlot(self.0.clone()))
    }
}

/// One open stream; frees its place when the stream ends.
struct StreamSlot(Arc<AtomicUsize>);

impl Drop for StreamSlot {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

/// `GET /v1/events`
pub async fn events(State(state): State<AppState>, headers: HeaderMap) -> Response {
    let max = state.settings.server.max_event_streams;
    let Some(slot) = state.event_streams.acquire(max) else {
        let mut resp = ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "too_many_event_streams",
            format!(
                "imrelay is serving as many event streams as it allows ({max}, \
                 server.max_event_streams); try again shortly"
            ),
        )
        .into_response();
        resp.headers_mut()
            .insert(header::RETRY_AFTER, HeaderValue::from(RETRY_AFTER_SECS));
        return resp;
    };
    let resume = match headers.get("last-event-id") {
        None => Resume::Fresh,
        // Anything but an id this server could have given means the client lost its place.
        Some(v) => match v.to_str().ok().and_then(|v| v.trim().parse::<u64>().ok()) {
            Some(id) => Resume::After(id),
            None => Resume::Unreadable,
        },
    };
    if let Resume::After(id) = resume {
        // An id another replica gave: read that far first.
        state.registry.events_caught_up(id).await;
    }
    let mut stream = Stream::new(state.registry.clone(), state.shutdown.clone(), resume, slot);
    // The snapshot is taken before the response goes out: what a client sees as pending when
    // its connection opens is in it, and whatever is created after arrives as a live event
    // with its own id, on every replica.
    if let Some(reset) = stream.start.take() {
        stream.take_snapshot(reset).await;
    }
    let body = Body::from_stream(futures_util::stream::unfold(stream, |mut s| async move {
        s.next_chunk()
            .await
            .map(|chunk| (Ok::<_, Infallible>(chunk), s))
    }));
    (
        [
            (
                header::CONTENT_TYPE,
                HeaderValue::from_static("text/event-stream"),
            ),
            (header::CACHE_CONTROL, HeaderValue::from_static("no-cache")),
        ],
        body,
    )
        .into_response()
}

/// Where a new stream starts.
#[derive(Clone, Copy, Debug)]
enum Resume {
    /// No `Last-Event-ID`: the pending list, then live events.
    Fresh,
    /// After this event.
    After(u64),
    /// A `Last-Event-ID` that is not an event id: `reset` and the pending list.
    Unreadable,
}

/// One client's stream: its position in the event log, the rest of a snapshot it is
/// being sent, and the few chunks of the event being sent.
struct Stream {
    registry: Registry,
    shutdown: CancellationToken,
    sub: Subscription,
    /// Chunks ready to go (at most one event's: its shared body and its id line).
    ready: VecDeque<Bytes>,
    /// A snapshot being sent: the ids of the interactions left (each is read when it is
    /// sent, so a stream never holds every pending input at once), and the id its last one
    /// carries.
    snapshot: VecDeque<InteractionId>,
    snapshot_head: u64,
    /// Snapshot entries whose live `interaction.created` may still arrive (each is
    /// forgotten once its live event does, or its resolution).
    in_snapshot: HashSet<InteractionId>,
    /// A snapshot to take before anything else (`Some(reset)`).
    start: Option<bool>,
    _slot: StreamSlot,
}

impl Stream {
    fn new(
        registry: Registry,
        shutdown: CancellationToken,
        resume: Resume,
        slot: StreamSlot,
    ) -> Self {
        let log = registry.events();
        let (sub, start) = match resume {
            Resume::Fresh => (log.subscribe().1, Some(false)),
            Resume::After(id) => (log.resume(id), None),
            Resume::Unreadable => (log.subscribe().1, Some(true)),
        };
        Self {
            registry,
            shutdown,
            sub,
            ready: VecDeque::new(),
            snapshot: VecDeque::new(),
            snapshot_head: 0,
            in_snapshot: HashSet::new(),
            start,
            _slot: slot,
        }
    }

    /// The next chunk of bytes to send; `None` ends the stream (at shutdown).
    async fn next_chunk(&mut self) -> Option<Bytes> {
        loop {
            if let Some(chunk) = self.ready.pop_front() {
                return Some(chunk);
            }
            if let Some(reset) = self.start.take() {
                self.take_snapshot(reset).await;
                continue;
            }
            if let Some(i) = self.snapshot.pop_front() {
                let id = self.snapshot.is_empty().then_some(self.snapshot_head);
                // As it is now: one answered meanwhile comes resolved (its
                // `interaction.resolved` follows, being after the head). One pruned since, or
                // unreadable, is left out, unless its event carries the snapshot's id.
                match self.registry.get(&i).await {
                    Ok(Some(i)) => return Some(created(&i, id)),
                    Ok(None) => {}
                    Err(e) => {
                        tracing::warn!(id = %i, error = %e, "could not read a pending interaction for an event stream");
                    }
                }
                if let Some(id) = id {
                    return Some(Bytes::from(format!(
                        ": end of the pending list\nid: {id}\n\n"
                    )));
                }
                continue;
            }
            let shutdown = self.shutdown.clone();
            let next = tokio::select! {
                next = self.sub.next() => next?,
                _ = tokio::time::sleep(KEEP_ALIVE) => return Some(Bytes::from_static(b":\n\n")),
                _ = shutdown.cancelled() => return None,
            };
            match next {
                Next::Event(e) => self.event(&e),
                Next::Gap => self.start = Some(true),
            }
        }
    }

    /// Lists the pending interactions to send as `interaction.created` (after `reset` when
    /// `reset` is set), the last one carrying the head as its id, and continues from it.
    async fn take_snapshot(&mut self, reset: bool) {
        let store = self.registry.store();
        if store.keeps_events() {
            // Events another replica committed are read here first, so the snapshot's id is
            // the cluster's head and not an older one.
            match store.event_head().await {
                Ok(head) => self.registry.events_caught_up(head).await,
                Err(e) => {
                    tracing::warn!(error = %e, "could not read the cluster's event head for an event stream")
                }
            }
        }
        let head = self.registry.events().head();
        let pending = match self.registry.pending_ids().await {
            Ok(p) => p,
            Err(e) => {
                tracing::warn!(error = %e, "could not list pending interactions for an event stream");
                Vec::new()
            }
        };
        self.sub.skip_to(head);
        self.snapshot_head = head;
        self.in_snapshot = pending.iter().cloned().collect();
        self.snapshot = pending.into();
        if reset {
            let data = json!({"reason": "missed events are no longer available; the pending interactions follow"});
            let mut text = format!("event: reset\ndata: {data}\n");
            if self.snapshot.is_empty() {
                text.push_str(&format!("id: {head}\n"));
            }
            text.push('\n');
            self.ready.push_back(Bytes::from(text));
        }
    }

    /// Queues a live or replayed event, unless it is a snapshot entry's
    /// `interaction.created`.
    fn event(&mut self, e: &Event) {
        let in_snapshot = !self.in_snapshot.is_empty() && self.in_snapshot.remove(&e.id);
        if in_snapshot && e.kind == EventKind::Created {
            return;
        }
        self.ready.push_back(e.body());
        self.ready
            .push_back(Bytes::from(format!("id: {}\n\n", e.seq)));
    }
}

/// A pending interaction as `interaction.created` text, with `id` if given.
fn created(i: &Interaction, id: Option<u64>) -> Bytes {
    let data = serde_json::to_string(i).unwrap_or_else(|_| "{}".into());
    let mut text = format!("event: {}\ndata: {data}\n", EventKind::Created.name());
    if let Some(id) = id {
        text.push_str(&format!("id: {id}\n"));
    }
    text.push('\n');
    Bytes::from(text)
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

    /// Every chunk the stream has ready now, as text.
    async fn drain(stream: &mut Stream) -> String {
        let mut out = String::new();
        while let Ok(Some(chunk)) =
            tokio::time::timeout(Duration::from_millis(50), stream.next_chunk()).await
        {
            out.push_str(std::str::from_utf8(&chunk).unwrap());
        }
        out
    }

    #[tokio::test]
    async fn an_interaction_created_during_the_snapshot_is_sent_once() {
        let reg = Registry::new(Arc::new(MemoryStore::new()), RegistryConfig::default());
        reg.create(bash("before")).await.unwrap();
        let count = StreamCount::default();
        let mut stream = Stream::new(
            reg.clone(),
            CancellationToken::new(),
            Resume::Fresh,
            count.acquire(1).unwrap(),
        );
        assert_eq!(count.open(), 1);
        let head = reg.events().head();
        // Created after the stream took its position, before the snapshot reads the pending
        // list: it is in both the snapshot and the live events.
        let during = reg
            .create(bash("during"))
            .await
            .unwrap()
            .interaction
            .id
            .clone();
        let first = stream.next_chunk().await.unwrap();
        reg.respond(&during, Answer::allow(), Responder::anonymous(Via::api()))
            .await
            .unwrap();
        reg.create(bash("after")).await.unwrap();
        let sent = format!(
            "{}{}",
            std::str::from_utf8(&first).unwrap(),
            drain(&mut stream).await
        );
        let events: Vec<&str> = sent.split("\n\n").filter(|e| !e.is_empty()).collect();
        let created = |id: &str| {
            events
                .iter()
                .filter(|e| {
                    e.starts_with("event: interaction.created\n")
                        && e.contains(&format!("\"id\":\"{id}\""))
                })
                .count()
        };
        assert_eq!(created("before"), 1, "{events:#?}");
        assert_eq!(created("during"), 1, "{events:#?}");
        assert_eq!(created("after"), 1, "{events:#?}");
        let resolved = events
            .iter()
            .filter(|e| e.starts_with("event: interaction.resolved\n"))
            .count();
        assert_eq!(resolved, 1, "{events:#?}");
        assert_eq!(events.len(), 4, "{events:#?}");
        // Only the snapshot's last event carries an id, and it is not older than the head
        // the stream started from.
        assert!(!events[0].contains("\nid: "), "{events:#?}");
        let id: u64 = events[1].rsplit("\nid: ").next().unwrap().parse().unwrap();
        assert!(id >= head, "{events:#?}");
        drop(stream);
        assert_eq!(count.open(), 0);
    }

    #[test]
    fn streams_beyond_the_cap_are_refused_until_one_ends() {
        let count = StreamCount::default();
        let a = count.acquire(2).unwrap();
        let _b = count.acquire(2).unwrap();
        assert!(count.acquire(2).is_none());
        drop(a);
        assert!(count.acquire(2).is_some());
    }
}
