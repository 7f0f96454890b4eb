//! Pending interactions held in memory: a slot (the interaction, or only its id when it is
//! big, its deadline and its waiters), how one is tracked, adopted from another process and
//! settled when it resolves.

use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::Notify;

use super::budget::{self, Charge};
use super::deadlines::{DeadlineKey, instant_in};
use super::{Registry, RegistryError};
use crate::interaction::model::{Interaction, InteractionId, now};
use crate::sync::LockExt;

/// The most bytes ([`budget::cost`]) of a pending interaction kept whole in its slot. A
/// bigger one (a 900 KB command, a long diff) is kept in the store alone, which has it
/// anyway: its slot holds the id, the deadline and the waiters, and whoever needs the whole
/// interaction (an answer, the item's endpoint) reads it from the store. A typical tool call
/// is far below this, and is answered without a read.
const KEEP_WHOLE_MAX: usize = 16 * 1024;

/// What changes in a slot while it is pending, under one mutex: its positions in the
/// registry's queues, the interaction as escalated, its resolution and its waiters' wake-up.
/// (A std mutex: set and taken, never held across an await. One for all of them: a slot is
/// held for every pending interaction, and one lock where there were four keeps it in a
/// smaller allocation.)
#[derive(Default)]
pub(super) struct SlotState {
    /// In the deadline queue.
    pub(super) deadline: Option<DeadlineKey>,
    /// In the escalation queue.
    pub(super) escalation: Option<DeadlineKey>,
    /// The interaction as escalated, once it is (only when `whole` is kept).
    escalated: Option<Arc<Interaction>>,
    /// Set once, when it resolves.
    resolved: Option<Arc<Interaction>>,
    /// Made by the first waiter (most pending interactions are never waited on here), taken
    /// when it resolves.
    waiters: Option<Arc<Notify>>,
}

/// A pending interaction held in memory, with its waiters.
pub(super) struct Slot {
    pub(super) id: InteractionId,
    /// The interaction, unless it is bigger than [`KEEP_WHOLE_MAX`]: then only the store has
    /// it.
    pub(super) whole: Option<Arc<Interaction>>,
    /// Its queue positions, escalation, resolution and waiters. Locked after the deadline
    /// and escalation queues and after the slots map, never before them.
    pub(super) state: Mutex<SlotState>,
    /// The interaction's bytes, counted against the pending budget until the slot is gone.
    _charge: Charge,
}

impl Slot {
    pub(super) fn new(interaction: Arc<Interaction>, charge: Charge) -> Self {
        let keep = budget::cost(&interaction) <= KEEP_WHOLE_MAX;
        Self {
            id: interaction.id.clone(),
            whole: keep.then_some(interaction),
            state: Mutex::new(SlotState::default()),
            _charge: charge,
        }
    }

    /// The pending interaction as held here, latest first: escalated, or as created.
    pub(super) fn held(&self) -> Option<Arc<Interaction>> {
        let escalated = self.state.locked().escalated.clone();
        escalated.or_else(|| self.whole.clone())
    }

    /// Keeps the interaction as escalated (the first time only, and only when the slot keeps
    /// the interaction whole).
    pub(super) fn set_escalated(&self, escalated: &Arc<Interaction>) {
        if self.whole.is_some() {
            self.state
                .locked()
                .escalated
                .get_or_insert_with(|| escalated.clone());
        }
    }

    /// The interaction as resolved, once it is.
    pub(super) fn resolved(&self) -> Option<Arc<Interaction>> {
        self.state.locked().resolved.clone()
    }

    /// Whether it is resolved.
    pub(super) fn is_resolved(&self) -> bool {
        self.state.locked().resolved.is_some()
    }

    /// Completes when the interaction is resolved.
    pub(super) async fn resolution(&self) -> Arc<Interaction> {
        loop {
            let waiters = {
                let mut state = self.state.locked();
                if let Some(r) = &state.resolved {
                    return r.clone();
                }
                state.waiters.get_or_insert_with(Default::default).clone()
            };
            let notified = waiters.notified();
            tokio::pin!(notified);
            // Register before re-checking, so a resolution in between is not missed.
            notified.as_mut().enable();
            if let Some(r) = self.resolved() {
                return r;
            }
            notified.await;
        }
    }

    /// Records the resolution (the first one only) and wakes every waiter.
    pub(super) fn settle(&self, resolved: Arc<Interaction>) {
        let waiters = {
            let mut state = self.state.locked();
            if state.resolved.is_some() {
                return;
            }
            state.resolved = Some(resolved);
            state.waiters.take()
        };
        if let Some(waiters) = waiters {
            waiters.notify_waiters();
        }
    }
}

impl Registry {
    /// Holds a pending interaction in memory and schedules its deadline (once); its bytes
    /// are counted against the budget without a bound (it is held anyway).
    pub(super) fn track(&self, interaction: Arc<Interaction>) -> Arc<Slot> {
        self.track_charged(interaction, None)
    }

    /// [`Registry::track`] with the bytes already reserved by `charge`.
    pub(super) fn track_charged(
        &self,
        interaction: Arc<Interaction>,
        charge: Option<Charge>,
    ) -> Arc<Slot> {
        let (slot, fresh) = {
            let mut slots = self.inner.slots.locked();
            match slots.get(&interaction.id) {
                Some(s) => (s.clone(), false),
                None => {
                    let charge = charge
                        .unwrap_or_else(|| self.inner.budget.force(budget::cost(&interaction)));
                    let s = Arc::new(Slot::new(interaction.clone(), charge));
                    slots.insert(interaction.id.clone(), s.clone());
                    (s, true)
                }
            }
        };
        if fresh {
            let remaining = interaction
                .deadline
                .as_millisecond()
                .saturating_sub(now().as_millisecond())
                .max(0);
            self.schedule(
                slot.clone(),
                instant_in(Duration::from_millis(remaining as u64)),
            );
            self.arm_escalation(&slot, &interaction);
        }
        slot
    }

    /// Tracks a pending interaction this process did not create (another replica made it, or
    /// it was loaded at start-up), re-checking the store so a resolution committed meanwhile
    /// is not missed.
    pub(super) async fn adopt(
        &self,
        interaction: Arc<Interaction>,
    ) -> Result<Arc<Slot>, RegistryError> {
        let slot = self.track(interaction.clone());
        if let Some(latest) = self.inner.store.get(&interaction.id).await?
            && !latest.is_pending()
        {
            self.settle_locally(&latest);
        }
        Ok(slot)
    }

    /// Wakes local waiters of a resolved interaction and forgets it as pending. Returns
    /// whether it was pending here.
    pub(super) fn settle_locally(&self, resolved: &Arc<Interaction>) -> bool {
        let slot = {
            let mut slots = self.inner.slots.locked();
            let slot = slots.remove(&resolved.id);
            if slot.is_none() {
                // Under the lock, so a `track` that follows is guaranteed to see the count.
                self.inner
                    .untracked_resolutions
                    .fetch_add(1, Ordering::SeqCst);
            }
            slot
        };
        match slot {
            Some(slot) => {
                slot.settle(resolved.clone());
                // Taken in its own statement: the deadline timer locks the queue before a
                // slot's key, so holding the key's lock while locking the queue could deadlock.
                let key = slot.state.locked().deadline.take();
                if let Some(key) = key {
                    self.inner.deadlines.locked().queue.remove(&key);
                }
                self.disarm_escalation(&slot);
                true
            }
            None => false,
        }
    }

    /// Whether this process keeps interaction `id` whole in memory (`Some(false)`: pending
    /// here, but only the store has its input; `None`: not pending here). For tests and
    /// measurements of what pending interactions hold.
    pub fn holds_whole(&self, id: &InteractionId) -> Option<bool> {
        self.inner.slots.locked().get(id).map(|s| s.whole.is_some())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A slot is held for every pending interaction: it stays in mimalloc's 160-byte size
    /// class with its reference counts (it was 192 with four locks; BENCHMARKS.md, memory per
    /// pending interaction).
    #[test]
    fn a_slot_with_its_counts_fits_160_bytes() {
        assert!(
            std::mem::size_of::<Slot>() + 2 * std::mem::size_of::<usize>() <= 160,
            "a slot is {} bytes",
            std::mem::size_of::<Slot>()
        );
    }
}
