//! Pending interactions held in memory: a slot (the interaction, or only its id when it is
//! big, its deadline and its waiters), how one is tracked, adopted from another process and
//! settled when it resolves.

use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, OnceLock};
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

/// A slot's positions in the registry's queues.
#[derive(Default)]
pub(super) struct QueueKeys {
    /// In the deadline queue.
    pub(super) deadline: Option<DeadlineKey>,
    /// In the escalation queue.
    pub(super) escalation: Option<DeadlineKey>,
}

/// A pending interaction held in memory, with its waiters.
pub(super) struct Slot {
    pub(super) id: InteractionId,
    /// The interaction, unless it is bigger than [`KEEP_WHOLE_MAX`]: then only the store has
    /// it.
    pub(super) whole: Option<Arc<Interaction>>,
    pub(super) resolved: OnceLock<Arc<Interaction>>,
    notify: Notify,
    /// Its entries in the deadline and escalation queues, removed when it resolves so the
    /// queues hold only pending interactions. (A std mutex: set and taken, never held across
    /// an await. One for both: a slot is held for every pending interaction, and one mutex
    /// fewer keeps it in a smaller allocation.)
    pub(super) keys: Mutex<QueueKeys>,
    /// The interaction as escalated, once it is (only when `whole` is kept).
    pub(super) escalated: OnceLock<Arc<Interaction>>,
    /// The interaction's bytes, counted against the pending budget until the slot is gone.
    _charge: Charge,
}

impl Slot {
    pub(super) fn new(interaction: Arc<Interaction>, charge: Charge) -> Self {
        let keep = budget::cost(&interaction) <= KEEP_WHOLE_MAX;
        Self {
            id: interaction.id.clone(),
            whole: keep.then_some(interaction),
            resolved: OnceLock::new(),
            notify: Notify::new(),
            keys: Mutex::new(QueueKeys::default()),
            escalated: OnceLock::new(),
            _charge: charge,
        }
    }

    /// The pending interaction as held here, latest first: escalated, or as created.
    pub(super) fn held(&self) -> Option<Arc<Interaction>> {
        self.escalated.get().or(self.whole.as_ref()).cloned()
    }

    /// Completes when the interaction is resolved.
    pub(super) async fn resolution(&self) -> Arc<Interaction> {
        loop {
            if let Some(r) = self.resolved.get() {
                return r.clone();
            }
            let notified = self.notify.notified();
            tokio::pin!(notified);
            // Register before re-checking, so a resolution in between is not missed.
            notified.as_mut().enable();
            if let Some(r) = self.resolved.get() {
                return r.clone();
            }
            notified.await;
        }
    }

    pub(super) fn settle(&self, resolved: Arc<Interaction>) {
        if self.resolved.set(resolved).is_ok() {
            self.notify.notify_waiters();
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
                let key = slot.keys.locked().deadline.take();
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
