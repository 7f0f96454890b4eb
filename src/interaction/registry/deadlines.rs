//! Deadlines: the queue of pending interactions by deadline, the timer that expires them,
//! and the pruner that forgets resolved ones past retention.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use jiff::Timestamp;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::{Registry, RegistryError, Slot};
use crate::sync::LockExt;

/// How long to wait before retrying an expiry the store could not record.
pub(super) const EXPIRY_RETRY: Duration = Duration::from_secs(5);

/// Position in the deadline queue: when, and a sequence number to keep keys unique.
pub(super) type DeadlineKey = (Instant, u64);

/// Pending interactions by deadline. Resolved ones are removed at once, so memory follows
/// the number of pending interactions, not the rate of traffic.
#[derive(Default)]
pub(super) struct Deadlines {
    pub(super) queue: BTreeMap<DeadlineKey, Arc<Slot>>,
    pub(super) seq: u64,
}

/// `t - d`, saturating at the earliest representable time (never later than `t`).
fn sub(t: Timestamp, d: Duration) -> Timestamp {
    jiff::SignedDuration::try_from(d)
        .ok()
        .and_then(|d| t.checked_sub(d).ok())
        .unwrap_or(Timestamp::MIN)
}

/// The monotonic instant `d` from now, saturating far in the future instead of overflowing.
pub(super) fn instant_in(d: Duration) -> Instant {
    let now = Instant::now();
    now.checked_add(d)
        .or_else(|| now.checked_add(FAR_FUTURE))
        .unwrap_or(now)
}

/// Stand-in for "never" in the monotonic clock (as tokio itself uses: about 30 years).
const FAR_FUTURE: Duration = Duration::from_secs(86_400 * 365 * 30);

impl Registry {
    pub(super) fn schedule(&self, slot: Arc<Slot>, at: Instant) {
        let is_first = {
            let mut d = self.inner.deadlines.locked();
            d.seq += 1;
            let key = (at, d.seq);
            let earlier = d
                .queue
                .first_key_value()
                .is_none_or(|(first, _)| key < *first);
            if let Some(old) = slot.state.locked().deadline.replace(key) {
                d.queue.remove(&old);
            }
            d.queue.insert(key, slot);
            earlier
        };
        if is_first {
            self.inner.deadline_changed.notify_one();
        }
    }

    /// Starts the deadline timer, the escalation timer and the retention pruner; they stop
    /// when `shutdown` fires.
    pub fn spawn_background(
        &self,
        shutdown: CancellationToken,
    ) -> Vec<tokio::task::JoinHandle<()>> {
        let mut tasks = vec![
            tokio::spawn(self.clone().run_deadlines(shutdown.clone())),
            tokio::spawn(self.clone().run_pruner(shutdown.clone())),
            tokio::spawn(self.clone().run_escalations(shutdown.clone())),
        ];
        if let Some(feed) = self.inner.store.changes() {
            tasks.push(tokio::spawn(self.clone().run_changes(feed, shutdown)));
        }
        tasks
    }

    async fn run_deadlines(self, shutdown: CancellationToken) {
        loop {
            let notified = self.inner.deadline_changed.notified();
            let next = {
                let mut d = self.inner.deadlines.locked();
                let now = Instant::now();
                let mut due = Vec::new();
                while let Some(entry) = d.queue.first_entry() {
                    if entry.key().0 > now {
                        break;
                    }
                    let slot = entry.remove();
                    slot.state.locked().deadline.take();
                    due.push(slot);
                }
                let next = d.queue.first_key_value().map(|(k, _)| k.0);
                drop(d);
                for slot in due {
                    if !slot.is_resolved() {
                        let this = self.clone();
                        tokio::spawn(async move { this.expire_slot(slot).await });
                    }
                }
                next
            };
            tokio::select! {
                _ = shutdown.cancelled() => return,
                _ = notified => {}
                _ = async {
                    match next {
                        Some(at) => tokio::time::sleep_until(at).await,
                        None => std::future::pending().await,
                    }
                } => {}
            }
        }
    }

    async fn expire_slot(&self, slot: Arc<Slot>) {
        let id = slot.id.clone();
        match self.expire(&id).await {
            Ok(_) | Err(RegistryError::NotFound(_)) => {}
            Err(e) => {
                tracing::error!(id = %id, error = %e, "could not record an expiry; retrying shortly");
                self.schedule(slot, instant_in(EXPIRY_RETRY));
            }
        }
    }

    async fn run_pruner(self, shutdown: CancellationToken) {
        let retention = self.inner.config.retention;
        let every = (retention / 4).clamp(Duration::from_secs(1), Duration::from_secs(600));
        loop {
            // A retention too long to subtract keeps everything rather than nothing.
            let cutoff = sub(Timestamp::now(), retention);
            match self.inner.store.prune(cutoff).await {
                Ok(0) => {}
                Ok(n) => tracing::info!(pruned = n, "pruned resolved interactions past retention"),
                Err(e) => tracing::warn!(error = %e, "pruning failed; will retry"),
            }
            tokio::select! {
                _ = shutdown.cancelled() => return,
                _ = tokio::time::sleep(every) => {}
            }
        }
    }
}
