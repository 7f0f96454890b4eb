//! Lifecycle events (`interaction.created`, `interaction.resolved`) with monotonically
//! increasing sequence numbers, a bounded replay buffer, and a broadcast to live subscribers.
//!
//! Sequence numbers start at the process start time in microseconds, so a restarted process
//! numbers above the previous one unless the system clock was set back: a client resuming
//! with an id from before a restart is told to re-list (a gap) rather than handed the wrong
//! events.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use tokio::sync::broadcast;

use super::model::Interaction;
use crate::sync::LockExt;

/// Which lifecycle step an event reports.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EventKind {
    /// A new interaction awaits an answer.
    Created,
    /// An interaction was answered, expired or cancelled.
    Resolved,
}

impl EventKind {
    /// The event name used on the wire (`interaction.created` / `interaction.resolved`).
    pub fn name(self) -> &'static str {
        match self {
            EventKind::Created => "interaction.created",
            EventKind::Resolved => "interaction.resolved",
        }
    }
}

/// One lifecycle event.
#[derive(Clone, Debug)]
pub struct Event {
    /// Monotonically increasing sequence number.
    pub seq: u64,
    /// What happened.
    pub kind: EventKind,
    /// The interaction as it is after the event.
    pub interaction: Arc<Interaction>,
}

/// What a subscriber missed since the sequence number it last saw.
#[derive(Debug)]
pub enum Replay {
    /// The events after the given sequence number, oldest first (possibly none).
    Events(Vec<Arc<Event>>),
    /// Too old for the buffer: the subscriber must re-list.
    Gap,
}

struct Ring {
    next_seq: u64,
    buffer: VecDeque<Arc<Event>>,
}

/// The event log: publishes events in sequence order and keeps the most recent ones.
pub struct EventLog {
    // A std mutex: held only to number, buffer and send one event; never across an await.
    ring: Mutex<Ring>,
    capacity: usize,
    tx: broadcast::Sender<Arc<Event>>,
}

impl EventLog {
    /// A log keeping the last `capacity` events for replay.
    pub fn new(capacity: usize) -> Self {
        let start = jiff::Timestamp::now().as_microsecond().max(1) as u64;
        let (tx, _) = broadcast::channel(capacity.max(16));
        Self {
            ring: Mutex::new(Ring {
                next_seq: start,
                buffer: VecDeque::with_capacity(capacity),
            }),
            capacity: capacity.max(1),
            tx,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Ring> {
        // A panic while holding this lock cannot leave the ring inconsistent.
        self.ring.locked()
    }

    /// Numbers, buffers and broadcasts one event.
    pub fn publish(&self, kind: EventKind, interaction: Arc<Interaction>) -> Arc<Event> {
        let mut ring = self.lock();
        let event = Arc::new(Event {
            seq: ring.next_seq,
            kind,
            interaction,
        });
        ring.next_seq += 1;
        if ring.buffer.len() == self.capacity {
            ring.buffer.pop_front();
        }
        ring.buffer.push_back(event.clone());
        // Sent under the lock so subscribers see events in sequence order.
        let _ = self.tx.send(event.clone());
        event
    }

    /// The sequence number of the latest event (or one less than the first, if none yet).
    pub fn head(&self) -> u64 {
        self.lock().next_seq - 1
    }

    /// Subscribes to live events, atomically with reading the current head: every event
    /// after the returned head arrives on the receiver, and none before it.
    pub fn subscribe(&self) -> (u64, broadcast::Receiver<Arc<Event>>) {
        let ring = self.lock();
        (ring.next_seq - 1, self.tx.subscribe())
    }

    /// Subscribes to live events and returns what was missed after `last_seen`.
    pub fn resume(&self, last_seen: u64) -> (Replay, broadcast::Receiver<Arc<Event>>) {
        let ring = self.lock();
        let rx = self.tx.subscribe();
        (Self::replay_locked(&ring, last_seen), rx)
    }

    /// The buffered events after `last_seen`, or a gap if some are no longer buffered.
    pub fn replay(&self, last_seen: u64) -> Replay {
        Self::replay_locked(&self.lock(), last_seen)
    }

    fn replay_locked(ring: &Ring, last_seen: u64) -> Replay {
        let head = ring.next_seq - 1;
        if last_seen >= head {
            // Nothing newer (or an id from the future, e.g. a clock step back): nothing to send
            // only if it is exactly current; anything ahead of us cannot be trusted.
            return if last_seen == head {
                Replay::Events(Vec::new())
            } else {
                Replay::Gap
            };
        }
        let oldest = ring.buffer.front().map(|e| e.seq).unwrap_or(ring.next_seq);
        if last_seen + 1 < oldest {
            return Replay::Gap;
        }
        Replay::Events(
            ring.buffer
                .iter()
                .filter(|e| e.seq > last_seen)
                .cloned()
                .collect(),
        )
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

    #[test]
    fn sequence_increases_and_replay_covers_the_buffer() {
        let log = EventLog::new(3);
        let start = log.head();
        let a = log.publish(EventKind::Created, sample());
        let b = log.publish(EventKind::Created, sample());
        assert_eq!(a.seq, start + 1);
        assert_eq!(b.seq, start + 2);
        match log.replay(start) {
            Replay::Events(e) => assert_eq!(e.len(), 2),
            Replay::Gap => panic!("unexpected gap"),
        }
        match log.replay(b.seq) {
            Replay::Events(e) => assert!(e.is_empty()),
            Replay::Gap => panic!("unexpected gap"),
        }
        for _ in 0..3 {
            log.publish(EventKind::Resolved, sample());
        }
        // The buffer holds 3 events: a's successor b is gone, so resuming after a is a gap.
        assert!(matches!(log.replay(a.seq), Replay::Gap));
        assert!(matches!(log.replay(log.head() + 5), Replay::Gap));
        assert!(matches!(log.replay(0), Replay::Gap));
    }

    #[tokio::test]
    async fn subscribers_receive_events_after_the_head() {
        let log = EventLog::new(8);
        log.publish(EventKind::Created, sample());
        let (head, mut rx) = log.subscribe();
        let e = log.publish(EventKind::Resolved, sample());
        let got = rx.recv().await.unwrap();
        assert_eq!(got.seq, e.seq);
        assert_eq!(got.seq, head + 1);
    }
}
