//! Escalation: the queue of pending interactions by the time their route escalates them
//! ([`crate::interaction::routes::Escalation`]), the timer that fires it, and the escalation
//! itself: the interaction marked escalated and its new copies planned in one conditional
//! write ([`InteractionStore::escalate`](crate::interaction::ports::InteractionStore::escalate)),
//! so it happens once however many processes on one store try. Every process holding the
//! interaction arms the timer (the one that created it, one that adopted it from another,
//! one that reloaded it at start-up); the first write wins, the others change nothing.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Notify;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::deadlines::{DeadlineKey, EXPIRY_RETRY, instant_in};
use super::records::escalated_record;
use super::{Registry, RegistryError, Slot};
use crate::interaction::model::{Interaction, InteractionId, now};
use crate::interaction::ports::{Effects, EscalateOutcome};
use crate::sync::LockExt;

/// Pending interactions by the time they escalate. Resolved ones are removed at once.
#[derive(Default)]
pub(super) struct Escalations {
    queue: std::sync::Mutex<(BTreeMap<DeadlineKey, Arc<Slot>>, u64)>,
    changed: Notify,
}

impl Escalations {
    /// How many escalations are armed.
    pub(super) fn len(&self) -> usize {
        self.queue.locked().0.len()
    }
}

impl Registry {
    /// Arms `slot`'s escalation, if its route escalates and it has not escalated yet: at
    /// its creation plus the route's wait (at once if that passed while imrelay was down).
    pub(super) fn arm_escalation(&self, slot: &Arc<Slot>, i: &Interaction) {
        let Some(e) = i.route.as_deref().and_then(|r| r.escalation.as_ref()) else {
            return;
        };
        if i.escalated_at().is_some() || !i.is_pending() {
            return;
        }
        let remaining = e
            .due(i)
            .as_millisecond()
            .saturating_sub(now().as_millisecond())
            .max(0);
        self.schedule_escalation(
            slot.clone(),
            instant_in(Duration::from_millis(remaining as u64)),
        );
    }

    fn schedule_escalation(&self, slot: Arc<Slot>, at: Instant) {
        let q = &self.inner.escalations;
        let is_first = {
            let mut guard = q.queue.locked();
            let (queue, seq) = &mut *guard;
            *seq += 1;
            let key = (at, *seq);
            let earlier = queue
                .first_key_value()
                .is_none_or(|(first, _)| key < *first);
            if let Some(old) = slot.state.locked().escalation.replace(key) {
                queue.remove(&old);
            }
            queue.insert(key, slot);
            earlier
        };
        if is_first {
            q.changed.notify_one();
        }
    }

    /// Takes `slot` out of the escalation queue (it resolved, or escalated).
    pub(super) fn disarm_escalation(&self, slot: &Slot) {
        // Taken in its own statement: the timer locks the queue before a slot's key.
        let key = slot.state.locked().escalation.take();
        if let Some(key) = key {
            self.inner.escalations.queue.locked().0.remove(&key);
        }
    }

    /// Escalates each pending interaction when its time comes, until `shutdown` fires.
    pub(super) async fn run_escalations(self, shutdown: CancellationToken) {
        loop {
            let notified = self.inner.escalations.changed.notified();
            let next = {
                let mut guard = self.inner.escalations.queue.locked();
                let now = Instant::now();
                let mut due = Vec::new();
                while let Some(entry) = guard.0.first_entry() {
                    if entry.key().0 > now {
                        break;
                    }
                    let slot = entry.remove();
                    slot.state.locked().escalation.take();
                    due.push(slot);
                }
                let next = guard.0.first_key_value().map(|(k, _)| k.0);
                drop(guard);
                for slot in due {
                    if !slot.is_resolved() {
                        let this = self.clone();
                        tokio::spawn(async move { this.escalate_slot(slot).await });
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

    async fn escalate_slot(&self, slot: Arc<Slot>) {
        let id = slot.id.clone();
        match self.escalate(&id).await {
            Ok(_) | Err(RegistryError::NotFound(_)) => {}
            Err(e) => {
                tracing::error!(id = %id, error = %e, "could not record an escalation; retrying shortly");
                self.schedule_escalation(slot, instant_in(EXPIRY_RETRY));
            }
        }
    }

    /// Escalates interaction `id` now, if it is pending, before its deadline, not escalated
    /// yet, and its route escalates: marks it and records the jobs the lifecycle hooks plan
    /// for it ([`Lifecycle::plan_escalated`](super::Lifecycle::plan_escalated)) in one
    /// conditional write. `Some` with the escalated interaction when this call did it;
    /// `None` when there was nothing to do or another process did it first.
    pub async fn escalate(
        &self,
        id: &InteractionId,
    ) -> Result<Option<Arc<Interaction>>, RegistryError> {
        let current = self.current(id).await?;
        let at = now();
        let route = current.route.as_deref();
        if !current.is_pending()
            || current.escalated_at().is_some()
            || current.deadline <= at
            || route.and_then(|r| r.escalation.as_ref()).is_none()
        {
            return Ok(None);
        }
        let mut escalated = (*current).clone();
        escalated.set_escalated_at(Some(at));
        let escalated = Arc::new(escalated);
        let mut jobs = Vec::new();
        for h in self.hooks().iter() {
            h.plan_escalated(&escalated, &mut jobs);
        }
        let has_jobs = !jobs.is_empty();
        let audit = if self.inner.config.audit {
            vec![escalated_record(&escalated)]
        } else {
            Vec::new()
        };
        match self
            .inner
            .store
            .escalate(escalated.clone(), Effects { jobs, audit })
            .await?
        {
            EscalateOutcome::Escalated => {
                self.note_escalated(&escalated);
                tracing::info!(
                    id = %escalated.id,
                    route = route.map(|r| r.name.as_str()).unwrap_or(""),
                    "interaction escalated: nobody answered in time"
                );
                for h in self.hooks().iter() {
                    h.escalated(&escalated);
                    if has_jobs {
                        h.jobs_recorded();
                    }
                }
                Ok(Some(escalated))
            }
            EscalateOutcome::Unchanged(latest) => {
                if latest.is_pending() {
                    self.note_escalated(&latest);
                }
                Ok(None)
            }
            EscalateOutcome::NotFound => Err(RegistryError::NotFound(id.clone())),
        }
    }

    /// Keeps the escalated copy of a pending interaction held here (so reads show the mark)
    /// and disarms its timer.
    pub(super) fn note_escalated(&self, i: &Arc<Interaction>) {
        if i.escalated_at().is_none() {
            return;
        }
        let slot = self.inner.slots.locked().get(&i.id).cloned();
        if let Some(slot) = slot {
            slot.set_escalated(i);
            self.disarm_escalation(&slot);
        }
    }

    /// How many escalations are armed (for tests: resolved interactions leave the queue).
    pub fn scheduled_escalations(&self) -> usize {
        self.inner.escalations.len()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use serde_json::json;

    use super::*;
    use crate::interaction::people::{Identity, People, PersonSpec};
    use crate::interaction::ports::{AuditQuery, Store};
    use crate::interaction::registry::{Lifecycle, NewInteraction, RegistryConfig, Teams};
    use crate::interaction::routes::{Escalation, RouteSpec, Routes, Target};
    use crate::interaction::{Answer, Responder, Via};
    use crate::store::MemoryStore;

    /// Counts what the registry asks of the lifecycle hooks about escalations.
    #[derive(Default)]
    struct Counts {
        planned: AtomicUsize,
        escalated: AtomicUsize,
    }

    impl Lifecycle for Counts {
        fn plan_escalated(&self, i: &Interaction, _: &mut Vec<crate::store::OutboxJob>) {
            assert!(i.escalated_at().is_some() && i.is_pending());
            self.planned.fetch_add(1, Ordering::SeqCst);
        }
        fn escalated(&self, _: &Arc<Interaction>) {
            self.escalated.fetch_add(1, Ordering::SeqCst);
        }
    }

    /// One route, "shop", that escalates after five minutes to a second chat and to Bob.
    fn teams() -> Teams {
        let people = People::new(
            vec![PersonSpec {
                name: "bob".into(),
                identities: vec![Identity::new("telegram", "222")],
                groups: vec![],
                quiet: None,
            }],
            vec![],
        )
        .unwrap();
        let routes = Routes::new(
            vec![RouteSpec {
                name: "shop".into(),
                targets: vec![Target::new("telegram", "-1")],
                timeout_secs: Some(3600),
                escalation: Some(Escalation {
                    after_secs: 300,
                    targets: vec![Target::new("telegram", "-2")],
                    approvers: vec!["bob".into()],
                    through_quiet: false,
                }),
                ..Default::default()
            }],
            &people,
        )
        .unwrap();
        Teams { people, routes }
    }

    fn started(store: Arc<dyn Store>, shutdown: &CancellationToken) -> (Registry, Arc<Counts>) {
        let reg = Registry::new(store, RegistryConfig::default());
        reg.set_teams(teams());
        let counts = Arc::new(Counts::default());
        reg.add_hook(counts.clone());
        reg.spawn_background(shutdown.clone());
        (reg, counts)
    }

    fn bash(id: &str) -> NewInteraction {
        NewInteraction {
            id: Some(id.into()),
            ..NewInteraction::new(
                "Bash",
                json!({"command": "make"}).as_object().cloned().unwrap(),
            )
        }
    }

    fn id(s: &str) -> InteractionId {
        InteractionId::parse(s).unwrap()
    }

    async fn settle() {
        for _ in 0..20 {
            tokio::task::yield_now().await;
        }
    }

    #[tokio::test(start_paused = true)]
    async fn nothing_before_the_time_the_escalation_once_after_and_the_answer_still_counts() {
        let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
        let shutdown = CancellationToken::new();
        let (reg, counts) = started(store.clone(), &shutdown);
        reg.create(bash("e1")).await.unwrap();
        assert_eq!(reg.scheduled_escalations(), 1);
        tokio::time::sleep(Duration::from_secs(299)).await;
        settle().await;
        assert_eq!(counts.planned.load(Ordering::SeqCst), 0);
        let i = reg.get(&id("e1")).await.unwrap().unwrap();
        assert!(i.escalated_at().is_none());
        tokio::time::sleep(Duration::from_secs(2)).await;
        settle().await;
        assert_eq!(counts.planned.load(Ordering::SeqCst), 1);
        assert_eq!(counts.escalated.load(Ordering::SeqCst), 1);
        assert_eq!(reg.scheduled_escalations(), 0);
        let i = reg.get(&id("e1")).await.unwrap().unwrap();
        assert!(i.escalated_at().is_some() && i.is_pending());
        assert!(
            store
                .get(&id("e1"))
                .await
                .unwrap()
                .unwrap()
                .escalated_at()
                .is_some()
        );
        // Once: asking again changes nothing.
        assert!(reg.escalate(&id("e1")).await.unwrap().is_none());
        let audit = store
            .audit(&AuditQuery {
                after_seq: 0,
                since: None,
                limit: 10,
            })
            .await
            .unwrap();
        let escalated: Vec<_> = audit
            .iter()
            .filter(|e| e.record.action == crate::interaction::ports::audit::Action::Escalated)
            .collect();
        assert_eq!(escalated.len(), 1, "{audit:?}");
        assert_eq!(
            escalated[0].record.detail.as_deref(),
            Some("nobody on route \"shop\" answered in 5 min")
        );
        // The first copies stay live: an answer still resolves it, and the mark stays.
        let done = reg
            .respond(
                &id("e1"),
                Answer::allow(),
                Responder::new("alice", Via::api()),
            )
            .await
            .unwrap();
        assert!(!done.is_pending());
        assert!(
            store
                .get(&id("e1"))
                .await
                .unwrap()
                .unwrap()
                .escalated_at()
                .is_some()
        );
        shutdown.cancel();
    }

    #[tokio::test(start_paused = true)]
    async fn an_answer_before_the_time_means_no_escalation() {
        let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
        let shutdown = CancellationToken::new();
        let (reg, counts) = started(store.clone(), &shutdown);
        reg.create(bash("e2")).await.unwrap();
        tokio::time::sleep(Duration::from_secs(100)).await;
        reg.respond(
            &id("e2"),
            Answer::allow(),
            Responder::new("alice", Via::api()),
        )
        .await
        .unwrap();
        assert_eq!(reg.scheduled_escalations(), 0);
        tokio::time::sleep(Duration::from_secs(600)).await;
        settle().await;
        assert_eq!(counts.planned.load(Ordering::SeqCst), 0);
        assert!(
            store
                .get(&id("e2"))
                .await
                .unwrap()
                .unwrap()
                .escalated_at()
                .is_none()
        );
        shutdown.cancel();
    }

    #[tokio::test(start_paused = true)]
    async fn two_registries_on_one_store_escalate_once() {
        let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
        let shutdown = CancellationToken::new();
        let (a, at_a) = started(store.clone(), &shutdown);
        let (b, at_b) = started(store.clone(), &shutdown);
        a.create(bash("e3")).await.unwrap();
        // The other process hears of it and holds it too, timer and all.
        b.refresh(&id("e3")).await.unwrap();
        assert_eq!(
            (a.scheduled_escalations(), b.scheduled_escalations()),
            (1, 1)
        );
        tokio::time::sleep(Duration::from_secs(301)).await;
        settle().await;
        let planned = at_a.planned.load(Ordering::SeqCst) + at_b.planned.load(Ordering::SeqCst);
        let done = at_a.escalated.load(Ordering::SeqCst) + at_b.escalated.load(Ordering::SeqCst);
        // Both may plan; one write wins, and only its jobs are recorded.
        assert!((1..=2).contains(&planned), "{planned}");
        assert_eq!(done, 1);
        assert_eq!(
            (a.scheduled_escalations(), b.scheduled_escalations()),
            (0, 0)
        );
        shutdown.cancel();
    }

    #[tokio::test(start_paused = true)]
    async fn a_restart_re_arms_pending_escalations() {
        let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
        let first = CancellationToken::new();
        let (old, _) = started(store.clone(), &first);
        old.create(bash("e4")).await.unwrap();
        old.create(bash("e5")).await.unwrap();
        tokio::time::sleep(Duration::from_secs(60)).await;
        first.cancel();
        drop(old);
        let shutdown = CancellationToken::new();
        let (new, counts) = started(store.clone(), &shutdown);
        new.recover().await.unwrap();
        assert_eq!(new.scheduled_escalations(), 2);
        // Re-armed from the creation time by the wall clock, which the paused clock leaves
        // where it was: the escalation is due about 300 s from now.
        tokio::time::sleep(Duration::from_secs(298)).await;
        settle().await;
        assert_eq!(counts.escalated.load(Ordering::SeqCst), 0);
        tokio::time::sleep(Duration::from_secs(3)).await;
        settle().await;
        assert_eq!(counts.escalated.load(Ordering::SeqCst), 2);
        shutdown.cancel();
    }
}
