//! Changes made by other processes on a shared store: the change feed, the shared events
//! read in order, and the re-check that settles what a missed notification would have.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use futures_util::{FutureExt, StreamExt};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::{Registry, RegistryError};
use crate::interaction::events::EventKind;
use crate::interaction::model::{Interaction, InteractionId, Resolution};
use crate::interaction::ports::{Change, ChangeFeed, StoreError};
use crate::sync::LockExt;

/// One re-check of everything at a time: a request for one while one runs makes it run
/// once more when done.
#[derive(Default)]
struct Resync {
    running: std::sync::atomic::AtomicBool,
    again: std::sync::atomic::AtomicBool,
}

impl Resync {
    fn start(self: &Arc<Self>, registry: Registry) {
        self.again.store(true, Ordering::SeqCst);
        if self.running.swap(true, Ordering::SeqCst) {
            return;
        }
        let this = self.clone();
        tokio::spawn(async move {
            loop {
                while this.again.swap(false, Ordering::SeqCst) {
                    if let Err(e) = registry.resync().await {
                        tracing::warn!(error = %e, "could not re-check interactions against the store; retrying at the next check");
                    }
                }
                this.running.store(false, Ordering::SeqCst);
                // A request that came after the last pass but before `running` was cleared.
                if !this.again.load(Ordering::SeqCst) || this.running.swap(true, Ordering::SeqCst) {
                    return;
                }
            }
        });
    }
}

/// How long a subscriber resuming from another replica's event id waits for this one to
/// read that far.
const EVENTS_CATCH_UP: Duration = Duration::from_secs(2);

/// How many shared events are read at once.
const EVENT_BATCH: usize = 512;

/// Changes held between the feed and the reader of the shared events (see
/// [`Registry::settle_as_heard`]).
const FEED_QUEUE: usize = 1024;

/// How many changes from other processes are re-read at once.
const REFRESH_CONCURRENCY: usize = 64;

impl Registry {
    /// Waits (briefly) until the shared events up to `id` were read here, so a subscriber
    /// resuming with an id another replica gave it is not told it is ahead. At once when the
    /// store does not share events.
    pub async fn events_caught_up(&self, id: u64) {
        if !self.inner.shared_events {
            return;
        }
        let deadline = Instant::now() + EVENTS_CATCH_UP;
        while self.inner.events.head() < id {
            let pumped = self.inner.pumped.notified();
            tokio::pin!(pumped);
            pumped.as_mut().enable();
            if self.inner.events.head() >= id {
                return;
            }
            self.inner.pump_kick.notify_one();
            if tokio::time::timeout_at(deadline, pumped).await.is_err() {
                return;
            }
        }
    }

    /// Brings this process up to date with interaction `id` as the store has it now, whoever
    /// changed it (another replica sharing the store): a pending interaction this process
    /// does not hold yet is adopted (its waiters can wait here, its deadline is scheduled
    /// here too, and the conditional resolve applies it once), a resolved one wakes local
    /// waiters and is forgotten as pending. Idempotent: calling it again changes nothing.
    pub async fn refresh(
        &self,
        id: &InteractionId,
    ) -> Result<Option<Arc<Interaction>>, RegistryError> {
        let untracked_before = self.inner.untracked_resolutions.load(Ordering::SeqCst);
        let latest = self.inner.store.get(id).await?;
        match &latest {
            Some(i) if i.is_pending() => {
                let held = self.inner.slots.locked().contains_key(id);
                // Escalated by another process: reads here show it, and the timer stops.
                self.note_escalated(i);
                if !held {
                    self.track(i.clone());
                    // A resolution seen between the read and `track` found no slot: re-read.
                    if self.inner.untracked_resolutions.load(Ordering::SeqCst) != untracked_before
                        && let Some(now) = self.inner.store.get(id).await?
                        && !now.is_pending()
                    {
                        self.settled_elsewhere(&now);
                        return Ok(Some(now));
                    }
                }
            }
            Some(i) => self.settled_elsewhere(i),
            None => {}
        }
        Ok(latest)
    }

    /// Wakes local waiters of an interaction another process resolved.
    fn settled_elsewhere(&self, resolved: &Arc<Interaction>) {
        if self.settle_locally(resolved) {
            self.publish(EventKind::Resolved, resolved.clone());
        }
    }

    /// Re-checks everything against the store: adopts pending interactions this process does
    /// not hold, and settles those it holds that were resolved elsewhere. For when changes
    /// may have been missed (see [`Change::MayHaveMissed`]).
    ///
    /// The pending interactions are read a page at a time ([`Registry::pending_page`]): what
    /// is held at once is their ids and one page.
    pub async fn resync(&self) -> Result<(), RegistryError> {
        let untracked_before = self.inner.untracked_resolutions.load(Ordering::SeqCst);
        let mut in_store = std::collections::HashSet::new();
        let mut adopted = Vec::new();
        let mut after = None;
        loop {
            let page = self.pending_page(after).await?;
            for i in page.interactions {
                in_store.insert(i.id.clone());
                if !self.inner.slots.locked().contains_key(&i.id) {
                    adopted.push(i.id.clone());
                    self.track(i);
                }
            }
            match page.next {
                Some(next) => after = Some(next),
                None => break,
            }
        }
        // Held here and not pending in the store: resolved elsewhere (or created here after
        // the walk passed its place, which the re-read finds pending).
        let mut recheck: Vec<InteractionId> = self
            .inner
            .slots
            .locked()
            .keys()
            .filter(|id| !in_store.contains(*id))
            .cloned()
            .collect();
        drop(in_store);
        if self.inner.untracked_resolutions.load(Ordering::SeqCst) != untracked_before {
            // A resolution found no slot meanwhile: it may be one of those just adopted.
            recheck.extend(adopted);
        }
        let failed = AtomicU64::new(0);
        futures_util::stream::iter(recheck)
            .for_each_concurrent(REFRESH_CONCURRENCY, |id| {
                let failed = &failed;
                async move {
                    if self.refresh(&id).await.is_err() {
                        failed.fetch_add(1, Ordering::Relaxed);
                    }
                }
            })
            .await;
        match failed.into_inner() {
            0 => Ok(()),
            n => Err(RegistryError::Store(StoreError::Unavailable(format!(
                "{n} interactions could not be re-read"
            )))),
        }
    }

    /// Starts the event log where the store's shared events are: the most recent ones,
    /// for subscribers that resume, and the numbering after them.
    pub(super) async fn load_recent_events(&self) -> Result<(), RegistryError> {
        let head = self.inner.store.event_head().await?;
        let keep = self.inner.config.event_buffer as u64;
        let from = head.saturating_sub(keep);
        self.inner.events.restart_at(from);
        let mut last = from;
        while last < head {
            let batch = self.inner.store.events_after(last, EVENT_BATCH).await?;
            let Some(end) = batch.last().map(|e| e.id) else {
                break;
            };
            for e in batch.into_iter().filter(|e| e.id <= head) {
                self.inner
                    .events
                    .publish_numbered(e.id, e.kind, e.interaction);
            }
            last = end;
        }
        self.inner.applied_event.store(head, Ordering::SeqCst);
        Ok(())
    }

    /// Reads the shared events after the last one applied here, and applies them in order:
    /// a new pending interaction is adopted, a resolved one settled, and each event is
    /// published to local subscribers with the id the store gave it.
    async fn pump_events(&self) -> Result<(), RegistryError> {
        loop {
            let last = self.inner.applied_event.load(Ordering::SeqCst);
            let batch = self.inner.store.events_after(last, EVENT_BATCH).await?;
            let n = batch.len();
            for e in batch {
                match e.kind {
                    EventKind::Created if e.interaction.is_pending() => {
                        self.track(e.interaction.clone());
                    }
                    _ if !e.interaction.is_pending() => {
                        self.settle_locally(&e.interaction);
                    }
                    _ => {}
                }
                self.inner.applied_event.store(e.id, Ordering::SeqCst);
                self.inner
                    .events
                    .publish_numbered(e.id, e.kind, e.interaction);
            }
            self.inner.pumped.notify_waiters();
            if n < EVENT_BATCH {
                return Ok(());
            }
        }
    }

    /// Follows the changes other processes commit to a shared store: re-reads each changed
    /// interaction (or, when the store keeps shared events, the events after the last one
    /// read), re-checks everything when changes may have been missed, and reads again every
    /// [`RegistryConfig::recheck_interval`] as a backstop.
    pub(super) async fn run_changes(self, feed: ChangeFeed, shutdown: CancellationToken) {
        let mut feed = self.settle_as_heard(feed, shutdown.clone());
        let every = self
            .inner
            .config
            .recheck_interval
            .max(Duration::from_millis(10));
        let mut recheck = tokio::time::interval_at(Instant::now() + every, every);
        recheck.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let permits = Arc::new(tokio::sync::Semaphore::new(REFRESH_CONCURRENCY));
        let resync = Arc::new(Resync::default());
        let shared = self.inner.shared_events;
        loop {
            let mut missed = false;
            tokio::select! {
                _ = shutdown.cancelled() => return,
                change = feed.next() => match change {
                    None => return,
                    // Settled as heard (`settle_as_heard`); the events (or the interaction)
                    // are read on the same resolution's `Changed`.
                    Some(Change::Settled(..)) => continue,
                    Some(Change::Changed(_)) if shared => {}
                    Some(Change::Changed(id)) => {
                        let Ok(permit) = permits.clone().acquire_owned().await else { return };
                        let this = self.clone();
                        let resync = resync.clone();
                        tokio::spawn(async move {
                            if let Err(e) = this.refresh(&id).await {
                                tracing::warn!(id = %id, error = %e, "could not re-read a changed interaction; re-checking everything");
                                resync.start(this);
                            }
                            drop(permit);
                        });
                        continue;
                    }
                    Some(Change::MayHaveMissed) => missed |= self.must_recheck(),
                },
                _ = self.inner.pump_kick.notified(), if shared => {}
                _ = recheck.tick() => missed = !shared,
            }
            if shared {
                // Whatever else is ready is covered by the one read. A feed that ended is
                // never polled again.
                loop {
                    match feed.next().now_or_never() {
                        Some(Some(Change::MayHaveMissed)) => missed |= self.must_recheck(),
                        Some(Some(_)) => {}
                        Some(None) => return,
                        None => break,
                    }
                }
                if let Err(e) = self.pump_events().await {
                    tracing::warn!(error = %e, "could not read the shared events; retrying at the next change or check");
                    missed = true;
                }
            }
            if missed {
                resync.start(self.clone());
            }
        }
    }

    /// The feed without its [`Change::Settled`]s, which a task of their own applies as they
    /// arrive ([`Registry::settled_by_feed`]): a waiter woken by a resolution another
    /// process committed waits neither for a read of the store nor behind one that the
    /// other changes started. The rest is passed on in order, through a bounded queue: when
    /// it is full the feed's own buffer fills, and the feed then reports that it may have
    /// missed changes. The task ends with `shutdown` or the feed.
    fn settle_as_heard(&self, mut feed: ChangeFeed, shutdown: CancellationToken) -> ChangeFeed {
        let (tx, rx) = tokio::sync::mpsc::channel(FEED_QUEUE);
        let this = self.clone();
        tokio::spawn(async move {
            loop {
                let change = tokio::select! {
                    _ = shutdown.cancelled() => return,
                    change = feed.next() => change,
                };
                match change {
                    None => return,
                    Some(Change::Settled(id, resolution)) => this.settled_by_feed(&id, *resolution),
                    Some(other) => {
                        tokio::select! {
                            _ = shutdown.cancelled() => return,
                            sent = tx.send(other) => if sent.is_err() { return },
                        }
                    }
                }
            }
        });
        // Fused: polled after its end, it says so again rather than panicking.
        Box::pin(
            futures_util::stream::unfold(rx, |mut rx| async move {
                rx.recv().await.map(|change| (change, rx))
            })
            .fuse(),
        )
    }

    /// Wakes the local waiters of interaction `id`, resolved elsewhere with `resolution`
    /// (committed: see [`Change::Settled`]), without reading the store, when this process
    /// holds it whole. Otherwise (not held, or held without its input) nothing happens here:
    /// the same resolution's [`Change::Changed`] settles it from the store. With shared
    /// events, the event itself is published when they are read, in their order.
    fn settled_by_feed(&self, id: &InteractionId, resolution: Resolution) {
        let held = self.inner.slots.locked().get(id).and_then(|s| s.held());
        if let Some(pending) = held {
            let resolved = Arc::new(pending.resolved(resolution));
            // Where the events are shared, the event comes from them, numbered.
            if self.settle_locally(&resolved) && !self.inner.shared_events {
                self.inner.events.publish(EventKind::Resolved, resolved);
            }
        }
    }

    /// Whether a [`Change::MayHaveMissed`] calls for re-checking everything against the
    /// store. Not the first one after [`Registry::recover`] (every change feed says it when it
    /// first connects): recovery read the shared events' head and then every pending
    /// interaction, and whatever changed since is in the shared events, which are read anyway.
    /// Reading every pending interaction again would only double start-up's work and memory.
    fn must_recheck(&self) -> bool {
        !(self.inner.shared_events && self.inner.recovered.swap(false, Ordering::SeqCst))
    }
}
