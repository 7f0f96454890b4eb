//! The pacing of one platform's requests to each chat: requests to one chat at least a gap
//! apart, a throttled chat kept quiet for the wait the platform gave (or the pacer's own),
//! and chats never waiting for each other. Every chat platform's delivery goes through one
//! (`channels::messages`); a platform whose client paces itself has one that never waits.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use tokio::time::Instant;

use crate::sync::LockExt;

/// Spaces requests to each chat, and keeps a throttled chat quiet.
pub(crate) struct Pacer {
    gap: Duration,
    pause: Duration,
    // A std mutex: slots are reserved without awaiting while it is held.
    next: Mutex<HashMap<String, Instant>>,
}

impl Pacer {
    /// Requests to one chat at least `gap` apart; a throttled chat without a wait from the
    /// platform is kept quiet for `pause`.
    pub(crate) fn new(gap: Duration, pause: Duration) -> Self {
        Self {
            gap,
            pause,
            next: Mutex::new(HashMap::new()),
        }
    }

    /// A pacer that never waits (for a platform whose client paces itself).
    pub(crate) fn off() -> Self {
        Self::new(Duration::ZERO, Duration::ZERO)
    }

    /// The gap between two requests to one chat (zero when off).
    pub(crate) fn gap(&self) -> Duration {
        self.gap
    }

    /// How long until this chat's next free slot (zero when it is free now).
    pub(crate) fn wait(&self, chat: &str) -> Duration {
        let now = Instant::now();
        self.next
            .locked()
            .get(chat)
            .map_or(Duration::ZERO, |t| t.saturating_duration_since(now))
    }

    fn is_off(&self) -> bool {
        self.gap.is_zero() && self.pause.is_zero()
    }

    /// Waits for this chat's next free slot.
    pub(crate) async fn turn(&self, chat: &str) {
        if self.is_off() {
            return;
        }
        let at = {
            let mut next = self.next.locked();
            let now = Instant::now();
            // Slots long past are forgotten, so the map holds only chats in use.
            next.retain(|_, t| *t + self.gap > now);
            let slot = next.get(chat).copied().filter(|t| *t > now).unwrap_or(now);
            next.insert(chat.to_string(), slot + self.gap);
            slot
        };
        tokio::time::sleep_until(at).await;
    }

    /// Keeps this chat quiet for `pause` (the platform throttled it), or the pacer's own
    /// pause when the platform did not say.
    pub(crate) fn pause(&self, chat: &str, pause: Option<Duration>) {
        if self.is_off() {
            return;
        }
        let until = Instant::now() + pause.unwrap_or(self.pause);
        let mut next = self.next.locked();
        let slot = next.entry(chat.to_string()).or_insert(until);
        if *slot < until {
            *slot = until;
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::channels::messages::Failure;
    use crate::outbox::Delivery;

    const GAP: Duration = Duration::from_millis(200);
    const PAUSE: Duration = Duration::from_secs(1);

    /// When each of `n` requests to `chat` gets its turn, all asking at once.
    async fn turns(pacer: &Arc<Pacer>, chat: &'static str, n: usize) -> Vec<Instant> {
        let tasks: Vec<_> = (0..n)
            .map(|_| {
                let pacer = pacer.clone();
                tokio::spawn(async move {
                    pacer.turn(chat).await;
                    Instant::now()
                })
            })
            .collect();
        let mut at = Vec::new();
        for t in tasks {
            at.push(t.await.unwrap());
        }
        at.sort();
        at
    }

    #[tokio::test(start_paused = true)]
    async fn requests_to_one_chat_are_spaced_and_chats_do_not_wait_for_each_other() {
        let pacer = Arc::new(Pacer::new(GAP, PAUSE));
        let start = Instant::now();
        let (a, b) = tokio::join!(turns(&pacer, "a", 10), turns(&pacer, "b", 3));
        for pair in a.windows(2) {
            assert!(pair[1] - pair[0] >= GAP, "{:?}", pair[1] - pair[0]);
        }
        // Ten requests take nine gaps, no more: the pacer spaces, it does not stall.
        assert_eq!(a[9] - start, GAP * 9);
        assert_eq!(b[0], start);
        assert_eq!(b[2] - start, GAP * 2);
    }

    #[tokio::test(start_paused = true)]
    async fn a_throttled_chat_waits_out_the_pause_it_was_given_or_the_pacers_own() {
        let pacer = Arc::new(Pacer::new(GAP, PAUSE));
        let start = Instant::now();
        pacer.turn("a").await;
        let hint = Duration::from_secs(3);
        let f = pacer.note(
            "a",
            Failure::Throttled {
                after: Some(hint),
                error: "slow down".into(),
            },
        );
        assert!(matches!(f.delivery(), Delivery::Retry { after: Some(a), .. } if a == hint));
        let (next, other) = tokio::join!(turns(&pacer, "a", 2), turns(&pacer, "b", 1));
        assert_eq!(next[0] - start, hint);
        assert_eq!(next[1] - next[0], GAP);
        assert_eq!(other[0], start, "only the throttled chat waits");

        let start = Instant::now();
        let f = pacer.note(
            "c",
            Failure::Throttled {
                after: None,
                error: "slow down".into(),
            },
        );
        assert!(matches!(f.delivery(), Delivery::Retry { after: None, .. }));
        pacer.turn("c").await;
        assert_eq!(Instant::now() - start, PAUSE);
    }

    #[tokio::test(start_paused = true)]
    async fn the_pacer_forgets_chats_it_no_longer_spaces() {
        let pacer = Pacer::new(GAP, PAUSE);
        for n in 0..100 {
            pacer.turn(&format!("chat{n}")).await;
        }
        tokio::time::advance(GAP * 2).await;
        pacer.turn("last").await;
        assert_eq!(pacer.next.locked().len(), 1);
    }
}
