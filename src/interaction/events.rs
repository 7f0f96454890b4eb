//! Lifecycle events (`interaction.created`, `interaction.resolved`) with monotonically
//! increasing sequence numbers, one shared replay buffer bounded in count and in bytes, and
//! cursors that read it in place.
//!
//! Each event is encoded once, when it is published, as the Server-Sent Events text every
//! subscriber sends: subscribers hold a position in the buffer, never a copy of what they
//! have not sent yet, so a subscriber that stops reading costs a cursor. One that falls so
//! far behind that its next event was evicted is told so ([`Next::Gap`]) and re-lists.
//!
//! Sequence numbers start at the process start time in microseconds, so a restarted process
//! numbers above the previous one unless the system clock was set back: a client resuming
//! with an id from before a restart is told to re-list (a gap) rather than handed the wrong
//! events.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard};

use bytes::Bytes;
use tokio::sync::watch;

use super::model::{Interaction, InteractionId};
use crate::sync::LockExt;

/// The replay buffer's default byte budget: 64 MiB.
pub(crate) const DEFAULT_BUFFER_BYTES: usize = 64 * 1024 * 1024;

/// What a buffered event costs beyond its encoded text (its id, sequence number, and the
/// buffer's bookkeeping), counted against the byte budget.
const EVENT_OVERHEAD: usize = 128;

/// Which lifecycle step an event reports.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EventKind {
    /// A new interaction awaits an answer.
    Created,
    /// An interaction was answered, expired or cancelled.
    Resolved,
    /// A person voted on an approval that needs several people, and it is still pending:
    /// the interaction carries the votes so far.
    Voted,
}

impl EventKind {
    /// The event name used on the wire (`interaction.created` / `interaction.resolved`).
    pub fn name(self) -> &'static str {
        match self {
            EventKind::Created => "interaction.created",
            EventKind::Resolved => "interaction.resolved",
            EventKind::Voted => "interaction.voted",
        }
    }
}

/// One lifecycle event, encoded once for every subscriber.
#[derive(Clone, Debug)]
pub struct Event {
    /// Monotonically increasing sequence number.
    pub seq: u64,
    /// What happened.
    pub kind: EventKind,
    /// Which interaction it happened to.
    pub id: InteractionId,
    /// `event: <name>\ndata: <interaction as JSON>\n`: the event as Server-Sent Events
    /// text, without its `id:` line and the blank line that ends it.
    body: Bytes,
}

impl Event {
    /// Encodes `interaction` as it is after the event.
    fn encode(seq: u64, kind: EventKind, interaction: &Interaction) -> Self {
        let name = kind.name();
        // An interaction always serializes (its JSON values are already valid JSON); should
        // that ever fail, subscribers get an empty object rather than no event.
        let json = serde_json::to_vec(interaction).unwrap_or_else(|_| b"{}".to_vec());
        let mut body = Vec::with_capacity(name.len() + json.len() + 16);
        body.extend_from_slice(b"event: ");
        body.extend_from_slice(name.as_bytes());
        body.extend_from_slice(b"\ndata: ");
        // serde_json escapes every line break inside strings: the JSON is one `data:` line.
        body.extend_from_slice(&json);
        body.push(b'\n');
        Self {
            seq,
            kind,
            id: interaction.id.clone(),
            body: Bytes::from(body),
        }
    }

    /// The event as Server-Sent Events text without its `id:` line and final blank line
    /// (shared: cloning it copies no bytes).
    pub fn body(&self) -> Bytes {
        self.body.clone()
    }

    /// The interaction as JSON, as sent in the event's `data:` line.
    pub fn data(&self) -> &str {
        let text = std::str::from_utf8(&self.body).unwrap_or_default();
        text.split_once("\ndata: ")
            .map(|(_, data)| data.trim_end_matches('\n'))
            .unwrap_or_default()
    }

    /// What the event counts against the byte budget.
    fn cost(&self) -> usize {
        self.body.len() + EVENT_OVERHEAD
    }
}

/// What a subscriber reads next.
#[derive(Debug)]
pub enum Next {
    /// The next event after the subscriber's position.
    Event(Arc<Event>),
    /// The events after the subscriber's position are no longer buffered (or its position
    /// is ahead of the log, e.g. an id from before a restart): it must re-list.
    Gap,
}

struct Ring {
    next_seq: u64,
    buffer: VecDeque<Arc<Event>>,
    /// The sum of the buffered events' costs.
    bytes: usize,
}

impl Ring {
    fn head(&self) -> u64 {
        self.next_seq - 1
    }

    /// The first buffered event after `last_seen`; `None` when there is none yet.
    fn after(&self, last_seen: u64) -> Option<Next> {
        let head = self.head();
        if last_seen == head {
            return None;
        }
        // An id from the future (a clock step back, a forged header) cannot be trusted.
        if last_seen > head {
            return Some(Next::Gap);
        }
        let oldest = self.buffer.front().map_or(self.next_seq, |e| e.seq);
        if last_seen + 1 < oldest {
            return Some(Next::Gap);
        }
        let at = self.buffer.partition_point(|e| e.seq <= last_seen);
        // Numbers handed out elsewhere may leave holes: the head may be above the last
        // buffered event only right after `restart_at`, when there is nothing to send.
        self.buffer.get(at).cloned().map(Next::Event)
    }
}

struct Shared {
    // A std mutex: held only to number, buffer or look up one event; never across an await.
    ring: Mutex<Ring>,
    capacity: usize,
    max_bytes: usize,
    /// The head, for subscribers waiting for the next event.
    head: watch::Sender<u64>,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Ring> {
        // A panic while holding this lock cannot leave the ring inconsistent.
        self.ring.locked()
    }
}

/// The event log: publishes events in sequence order and keeps the most recent ones, at
/// most `capacity` of them and about `max_bytes` of encoded text.
pub struct EventLog {
    shared: Arc<Shared>,
}

impl EventLog {
    /// A log keeping the last `capacity` events for replay, within the default byte budget.
    pub fn new(capacity: usize) -> Self {
        Self::with_budget(capacity, DEFAULT_BUFFER_BYTES)
    }

    /// A log keeping at most `capacity` events and about `max_bytes` of them for replay
    /// (always at least the newest one).
    pub fn with_budget(capacity: usize, max_bytes: usize) -> Self {
        let start = jiff::Timestamp::now().as_microsecond().max(1) as u64;
        let (head, _) = watch::channel(start - 1);
        Self {
            shared: Arc::new(Shared {
                ring: Mutex::new(Ring {
                    next_seq: start,
                    buffer: VecDeque::new(),
                    bytes: 0,
                }),
                capacity: capacity.max(1),
                max_bytes,
                head,
            }),
        }
    }

    /// Numbers, buffers and announces one event.
    pub fn publish(&self, kind: EventKind, interaction: Arc<Interaction>) -> Arc<Event> {
        // Encoded before the lock is taken: the sequence number is not part of the body.
        let event = Event::encode(0, kind, &interaction);
        let mut ring = self.shared.lock();
        self.push_locked(&mut ring, event)
    }

    fn push_locked(&self, ring: &mut Ring, mut event: Event) -> Arc<Event> {
        event.seq = ring.next_seq;
        ring.next_seq += 1;
        let event = Arc::new(event);
        ring.bytes += event.cost();
        ring.buffer.push_back(event.clone());
        while ring.buffer.len() > self.shared.capacity
            || (ring.bytes > self.shared.max_bytes && ring.buffer.len() > 1)
        {
            if let Some(old) = ring.buffer.pop_front() {
                ring.bytes -= old.cost();
            }
        }
        // Under the lock, so subscribers never see a head whose event is not buffered yet.
        self.shared.head.send_replace(event.seq);
        event
    }

    /// Publishes an event numbered elsewhere (a store shared by several processes numbers
    /// them for all): `seq` must be above the head, or the event is dropped (`None`).
    pub fn publish_numbered(
        &self,
        seq: u64,
        kind: EventKind,
        interaction: Arc<Interaction>,
    ) -> Option<Arc<Event>> {
        let event = Event::encode(seq, kind, &interaction);
        let mut ring = self.shared.lock();
        if seq < ring.next_seq {
            return None;
        }
        ring.next_seq = seq;
        Some(self.push_locked(&mut ring, event))
    }

    /// Continues the numbering after `head` (taken from a store shared by several
    /// processes), forgetting what is buffered.
    pub fn restart_at(&self, head: u64) {
        let mut ring = self.shared.lock();
        ring.buffer.clear();
        ring.bytes = 0;
        ring.next_seq = head.saturating_add(1);
        self.shared.head.send_replace(head);
    }

    /// The sequence number of the latest event (or one less than the first, if none yet).
    pub fn head(&self) -> u64 {
        self.shared.lock().head()
    }

    /// How many events are buffered, and what they count against the byte budget.
    pub fn buffered(&self) -> (usize, usize) {
        let ring = self.shared.lock();
        (ring.buffer.len(), ring.bytes)
    }

    /// A subscriber positioned at the current head: it reads every event after the
    /// returned head, and none before it.
    pub fn subscribe(&self) -> (u64, Subscription) {
        let head = self.head();
        (head, self.resume(head))
    }

    /// A subscriber positioned after `last_seen`: it reads what was missed since, or a
    /// [`Next::Gap`] if that is no longer buffered.
    pub fn resume(&self, last_seen: u64) -> Subscription {
        Subscription {
            shared: self.shared.clone(),
            last: last_seen,
            head: self.shared.head.subscribe(),
        }
    }
}

/// A position in the [`EventLog`]: all a subscriber holds, however far behind it is.
pub struct Subscription {
    shared: Arc<Shared>,
    last: u64,
    head: watch::Receiver<u64>,
}

impl Subscription {
    /// The sequence number of the last event read (or skipped to).
    pub fn last(&self) -> u64 {
        self.last
    }

    /// Continues after `seq` (e.g. the head a re-listing covered).
    pub fn skip_to(&mut self, seq: u64) {
        self.last = seq;
    }

    /// The next event, if there is one now. A gap leaves the position where it was.
    pub fn try_next(&mut self) -> Option<Next> {
        let next = self.shared.lock().after(self.last);
        if let Some(Next::Event(e)) = &next {
            self.last = e.seq;
        }
        next
    }

    /// The next event, waiting for it; `None` once the log is gone.
    pub async fn next(&mut self) -> Option<Next> {
        loop {
            // Marked seen before the buffer is read: a publish after the read changes it.
            self.head.borrow_and_update();
            if let Some(next) = self.try_next() {
                return Some(next);
            }
            self.head.changed().await.ok()?;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::interaction::model::{InteractionId, now};

    fn sample() -> Arc<Interaction> {
        Arc::new(Interaction::pending(
            InteractionId::generate(),
            "Bash",
            crate::interaction::Input::default(),
            now(),
            1,
        ))
    }

    fn seqs(sub: &mut Subscription) -> Result<Vec<u64>, ()> {
        let mut out = Vec::new();
        while let Some(next) = sub.try_next() {
            match next {
                Next::Event(e) => out.push(e.seq),
                Next::Gap => return Err(()),
            }
        }
        Ok(out)
    }

    #[test]
    fn sequence_increases_and_replay_covers_the_buffer() {
        let log = EventLog::new(3);
        let start = log.head();
        let a = log.publish(EventKind::Created, sample());
        let b = log.publish(EventKind::Created, sample());
        assert_eq!(a.seq, start + 1);
        assert_eq!(b.seq, start + 2);
        assert_eq!(seqs(&mut log.resume(start)), Ok(vec![a.seq, b.seq]));
        assert_eq!(seqs(&mut log.resume(b.seq)), Ok(vec![]));
        for _ in 0..3 {
            log.publish(EventKind::Resolved, sample());
        }
        // The buffer holds 3 events: a's successor b is gone, so resuming after a is a gap.
        assert_eq!(seqs(&mut log.resume(a.seq)), Err(()));
        assert_eq!(seqs(&mut log.resume(log.head() + 5)), Err(()));
        assert_eq!(seqs(&mut log.resume(0)), Err(()));
    }

    #[test]
    fn the_buffer_keeps_within_its_byte_budget_and_always_the_newest_event() {
        let big = |n: usize| {
            let input = crate::interaction::Input::default()
                .with_member("command", &serde_json::Value::String("x".repeat(n)));
            Arc::new(Interaction::pending(
                InteractionId::generate(),
                "Bash",
                input,
                now(),
                1,
            ))
        };
        let log = EventLog::with_budget(1000, 10_000);
        let (_, mut slow) = log.subscribe();
        for _ in 0..10 {
            log.publish(EventKind::Created, big(3_000));
        }
        let (count, bytes) = log.buffered();
        assert!(bytes <= 10_000, "{bytes} bytes buffered");
        // As many as fit: one more (they are all the same size) would not.
        assert!(
            count < 10 && bytes + bytes / count > 10_000,
            "{count}, {bytes}"
        );
        // A subscriber that read nothing meanwhile is told it missed events.
        assert!(matches!(slow.try_next(), Some(Next::Gap)));
        // One event over the whole budget is still kept: the newest is always replayable.
        let huge = log.publish(EventKind::Created, big(50_000));
        assert_eq!(log.buffered().0, 1);
        assert_eq!(seqs(&mut log.resume(huge.seq - 1)), Ok(vec![huge.seq]));
    }

    #[test]
    fn an_event_is_encoded_once_as_server_sent_events_text() {
        let log = EventLog::new(8);
        let i = sample();
        let e = log.publish(EventKind::Created, i.clone());
        let body = e.body();
        assert!(body.starts_with(b"event: interaction.created\ndata: {"));
        assert!(body.ends_with(b"}\n"));
        let data: serde_json::Value = serde_json::from_str(e.data()).unwrap();
        assert_eq!(data["id"], i.id.as_str());
        // Every subscriber shares the same bytes.
        assert_eq!(e.body().as_ptr(), body.as_ptr());
    }

    #[test]
    fn events_numbered_elsewhere_keep_their_ids_and_never_go_back() {
        let log = EventLog::new(8);
        log.restart_at(41);
        assert_eq!(log.head(), 41);
        let a = log
            .publish_numbered(42, EventKind::Created, sample())
            .unwrap();
        // A hole (an id given to a transaction that rolled back) is fine.
        let b = log
            .publish_numbered(44, EventKind::Resolved, sample())
            .unwrap();
        assert_eq!((a.seq, b.seq, log.head()), (42, 44, 44));
        assert!(
            log.publish_numbered(43, EventKind::Created, sample())
                .is_none()
        );
        assert!(
            log.publish_numbered(44, EventKind::Created, sample())
                .is_none()
        );
        assert_eq!(seqs(&mut log.resume(41)), Ok(vec![42, 44]));
        assert_eq!(seqs(&mut log.resume(43)), Ok(vec![44]));
    }

    #[tokio::test]
    async fn subscribers_wait_for_events_after_the_head() {
        let log = Arc::new(EventLog::new(8));
        log.publish(EventKind::Created, sample());
        let (head, mut sub) = log.subscribe();
        assert!(sub.try_next().is_none());
        let waiting = tokio::spawn(async move { sub.next().await });
        tokio::task::yield_now().await;
        let e = log.publish(EventKind::Resolved, sample());
        match waiting.await.unwrap() {
            Some(Next::Event(got)) => {
                assert_eq!(got.seq, e.seq);
                assert_eq!(got.seq, head + 1);
            }
            other => panic!("{other:?}"),
        }
    }
}
