//! The registry: pending interactions, their waiters, first-answer-wins, deadlines, and
//! lifecycle events.
//!
//! Every state change goes through the store first and touches memory only after the store
//! committed it: an interaction is created, or resolved, when the store says so. The store's
//! conditional writes decide which answer wins (including expiry, which is just another
//! answer that can lose); the registry then wakes local waiters and publishes the event.
//! Waking is a separate step ([`Registry::refresh`]) so a change made by another process can
//! trigger it too.
//!
//! Here: the registry's state and its create, answer, wait and recovery. Beside it:
//! `validate` (what a new interaction must be, and its timeout), `records` (the audit records
//! and log line of each change), `deadlines` (the expiry timer and the retention pruner),
//! `escalation` (a route's escalation, once) and `cluster` (changes made by other processes
//! on a shared store).

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, RwLock};
use std::time::Duration;

use futures_util::StreamExt;
use tokio::sync::Notify;
use tokio::time::Instant;

use super::ValidationError;
use super::answer::{self, Answer, Responder};
use super::events::{EventKind, EventLog};
use super::model::{Interaction, InteractionId, Resolution, now};
use super::ports::audit::{Action, AuditRecord};
use super::ports::{
    CreateOutcome, Cursor, Effects, ListQuery, OutboxJob, Page, ResolveOutcome, StatusFilter,
    Store, StoreError,
};
use crate::sync::{LockExt, RwLockExt};

mod budget;
mod cluster;
mod deadlines;
mod escalation;
mod grants;
mod policy;
mod records;
mod validate;
mod votes;

pub use budget::Full;
use budget::{Budget, Charge};
use deadlines::{DeadlineKey, Deadlines, EXPIRY_RETRY, instant_in};
pub use grants::GrantRequest;
pub use policy::{POLICY_VIA, audit_outcome, describe};
use records::{clip, created_record, log_resolution, resolved_record};
pub use validate::{MAX_LABEL_CHARS, MAX_LABELS, NewInteraction};

/// Timeouts and retention.
#[derive(Clone, Debug)]
pub struct RegistryConfig {
    /// Deadline for approvals when the request names none.
    pub approval_timeout: Duration,
    /// Deadline for questions when the request names none.
    pub question_timeout: Duration,
    /// Upper bound for a requested timeout.
    pub max_timeout: Duration,
    /// How long resolved interactions stay queryable.
    pub retention: Duration,
    /// How many recent events are kept for replay to reconnecting subscribers.
    pub event_buffer: usize,
    /// About how many bytes of encoded events are kept for replay (the newest event is
    /// always kept, whatever its size).
    pub event_buffer_bytes: usize,
    /// Whether state changes and refusals are appended to the audit trail.
    pub audit: bool,
    /// With a store shared by several processes: how often everything held is re-checked
    /// against the store, a backstop for changes whose notification was lost.
    pub recheck_interval: Duration,
    /// Bytes the pending interactions this process holds may take in all: a new one past
    /// it is refused ([`Full::Total`]).
    pub max_pending_bytes: usize,
    /// Bytes the pending interactions of one owner (an agent token) may take: a new one
    /// past it is refused ([`Full::Owner`]).
    pub max_pending_bytes_per_owner: usize,
    /// How long a session grant ("allow similar calls for this session") lasts.
    pub session_grant_ttl: Duration,
}

impl Default for RegistryConfig {
    fn default() -> Self {
        Self {
            approval_timeout: Duration::from_secs(300),
            question_timeout: Duration::from_secs(600),
            max_timeout: Duration::from_secs(3600),
            retention: Duration::from_secs(24 * 3600),
            event_buffer: 4096,
            event_buffer_bytes: super::events::DEFAULT_BUFFER_BYTES,
            audit: true,
            recheck_interval: Duration::from_secs(10),
            max_pending_bytes: 256 * 1024 * 1024,
            max_pending_bytes_per_owner: 64 * 1024 * 1024,
            session_grant_ttl: Duration::from_secs(12 * 3600),
        }
    }
}

/// Result of [`Registry::create`].
#[derive(Clone, Debug)]
pub struct Created {
    /// The interaction (the existing one when re-attaching).
    pub interaction: Arc<Interaction>,
    /// `true` if it was created now, `false` if an agent re-attached to an existing one.
    pub created: bool,
}

/// Why a registry operation failed.
#[derive(Debug, thiserror::Error)]
pub enum RegistryError {
    /// The request or answer does not fit.
    #[error(transparent)]
    Invalid(#[from] ValidationError),
    /// No interaction has this id.
    #[error("no interaction with id {0}")]
    NotFound(InteractionId),
    /// The id exists with a different tool name or input.
    #[error("interaction {} already exists with a different tool_name or input", .0.id)]
    Conflict(Arc<Interaction>),
    /// Another answer (or expiry, or cancellation) won first.
    #[error("interaction {} is already resolved ({})", .0.id, .0.resolution.as_ref().map(|r| r.summary()).unwrap_or_default())]
    AlreadyResolved(Arc<Interaction>),
    /// The store could not record the change; nothing changed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The pending interactions already hold all the memory they may; nothing changed.
    #[error(transparent)]
    Full(#[from] Full),
    /// No grant in force has this id.
    #[error("no grant in force with id {0}")]
    GrantNotFound(String),
    /// The answer was recorded as a vote on an approval that needs several people, and the
    /// votes do not decide it yet: the interaction, still pending, with the votes so far.
    #[error("vote recorded on interaction {}: {}", .0.id, super::quorum::tally(.0).unwrap_or_default())]
    Voted(Arc<Interaction>),
    /// This person voted on the interaction already (from this or another channel): their
    /// vote, and the interaction as it is. Nothing changed.
    #[error("{} already voted on interaction {} ({} via {})", .0.by, .1.id, if .0.allow { "allow" } else { "deny" }, .0.via)]
    AlreadyVoted(Box<super::quorum::Vote>, Arc<Interaction>),
}

/// Observes the lifecycle: plans durable outbox work inside the state change's transaction,
/// and reacts after it committed. Channels, webhooks and metrics implement this.
pub trait Lifecycle: Send + Sync {
    /// Outbox jobs to record together with a new interaction.
    fn plan_created(&self, _interaction: &Interaction, _jobs: &mut Vec<OutboxJob>) {}
    /// Outbox jobs to record together with a resolution.
    fn plan_resolved(&self, _interaction: &Interaction, _jobs: &mut Vec<OutboxJob>) {}
    /// Outbox jobs to record together with an escalation: the copies for the places the
    /// route escalates to ([`RouteStamp::escalation`](super::routes::RouteStamp::escalation)).
    fn plan_escalated(&self, _interaction: &Interaction, _jobs: &mut Vec<OutboxJob>) {}
    /// Called after an escalation was committed (once, by the process that made it).
    fn escalated(&self, _interaction: &Arc<Interaction>) {}
    /// Called after a new interaction was committed.
    fn created(&self, _interaction: &Arc<Interaction>) {}
    /// Called after a resolution was committed (once, by the process that made it).
    fn resolved(&self, _interaction: &Arc<Interaction>) {}
    /// Outbox jobs to record together with a vote that does not decide yet (`interaction`
    /// carries the votes so far, this one included): every copy shows them.
    fn plan_voted(&self, _interaction: &Interaction, _jobs: &mut Vec<OutboxJob>) {}
    /// Called after a vote that did not decide was committed (by the process that made it).
    fn voted(&self, _interaction: &Arc<Interaction>) {}
    /// Called after a committed change recorded outbox jobs.
    fn jobs_recorded(&self) {}
    /// Called for every answer attempt reported to [`Registry::refused`]; `recorded` is false
    /// when the rate limit kept it out of the log and the audit trail.
    fn refused(&self, _via: &super::Via, _recorded: bool) {}
    /// Called when a [`Registry::wait`] ends.
    fn long_poll(&self, _outcome: LongPoll) {}
    /// Called for each decision a policy rule or grant took (or, in shadow mode, would have
    /// taken) about a new interaction, once it was recorded.
    fn policy(&self, _interaction: &Interaction, _decided: &super::policy::Decided) {}
}

/// How a [`Registry::wait`] ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LongPoll {
    /// It was resolved already: nothing to wait for.
    Ready,
    /// It was pending; an answer (or expiry, or cancellation) arrived while waiting.
    Woken,
    /// It was pending and still was when the wait ran out.
    TimedOut,
}

impl LongPoll {
    /// `ready`, `woken` or `timed_out`.
    pub fn as_str(self) -> &'static str {
        match self {
            LongPoll::Ready => "ready",
            LongPoll::Woken => "woken",
            LongPoll::TimedOut => "timed_out",
        }
    }
}

/// The most bytes ([`budget::cost`]) of a pending interaction kept whole in its slot. A
/// bigger one (a 900 KB command, a long diff) is kept in the store alone, which has it
/// anyway: its slot holds the id, the deadline and the waiters, and whoever needs the whole
/// interaction (an answer, the item's endpoint) reads it from the store. A typical tool call
/// is far below this, and is answered without a read.
const KEEP_WHOLE_MAX: usize = 16 * 1024;

/// The most pending interactions read at once when going through all of them
/// ([`Registry::pending_page`]).
const PENDING_PAGE: usize = 500;

/// About the most bytes of stored interactions (their JSON text) read at once when going
/// through every pending one ([`Registry::pending_page`]): a page of big inputs holds fewer.
const PENDING_PAGE_BYTES: usize = 8 * 1024 * 1024;

/// A pending interaction held in memory, with its waiters.
struct Slot {
    id: InteractionId,
    /// The interaction, unless it is bigger than [`KEEP_WHOLE_MAX`]: then only the store has
    /// it.
    whole: Option<Arc<Interaction>>,
    resolved: OnceLock<Arc<Interaction>>,
    notify: Notify,
    /// Its entry in the deadline queue, removed when it resolves so the queue holds only
    /// pending interactions. (A std mutex: set and taken, never held across an await.)
    deadline: Mutex<Option<DeadlineKey>>,
    /// Its entry in the escalation queue, like `deadline`.
    escalation: Mutex<Option<DeadlineKey>>,
    /// The interaction as escalated, once it is (only when `whole` is kept).
    escalated: OnceLock<Arc<Interaction>>,
    /// The interaction's bytes, counted against the pending budget until the slot is gone.
    _charge: Charge,
}

impl Slot {
    fn new(interaction: Arc<Interaction>, charge: Charge) -> Self {
        let keep = budget::cost(&interaction) <= KEEP_WHOLE_MAX;
        Self {
            id: interaction.id.clone(),
            whole: keep.then_some(interaction),
            resolved: OnceLock::new(),
            notify: Notify::new(),
            deadline: Mutex::new(None),
            escalation: Mutex::new(None),
            escalated: OnceLock::new(),
            _charge: charge,
        }
    }

    /// The pending interaction as held here, latest first: escalated, or as created.
    fn held(&self) -> Option<Arc<Interaction>> {
        self.escalated.get().or(self.whole.as_ref()).cloned()
    }

    /// Completes when the interaction is resolved.
    async fn resolution(&self) -> Arc<Interaction> {
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

    fn settle(&self, resolved: Arc<Interaction>) {
        if self.resolved.set(resolved).is_ok() {
            self.notify.notify_waiters();
        }
    }
}

struct Inner {
    store: Arc<dyn Store>,
    config: RegistryConfig,
    // std mutexes: held for map/heap updates only, never across an await.
    slots: Mutex<HashMap<InteractionId, Arc<Slot>, foldhash::fast::RandomState>>,
    deadlines: Mutex<Deadlines>,
    deadline_changed: Notify,
    escalations: escalation::Escalations,
    events: EventLog,
    hooks: RwLock<Vec<Arc<dyn Lifecycle>>>,
    /// How many resolutions found no local slot. Bumped under the `slots` lock, so
    /// [`Registry::create`] can tell whether its own interaction may have been resolved
    /// between the store's commit and the slot's insertion, and only then re-read it.
    untracked_resolutions: AtomicU64,
    /// Bounds what refusals not bound to an interaction write (see [`Registry::refused`]).
    refusals: super::RefusalLimiter,
    /// Whether the store keeps every process's lifecycle events ([`ports::ClusterStore::keeps_events`](super::ports::ClusterStore::keeps_events)):
    /// then `events` is fed from there (by [`Registry::run_changes`]), not by this process.
    shared_events: bool,
    /// How many resolutions of each interaction this process is writing to the store right
    /// now: a losing one announces the winner (resolved by another process) only when it is
    /// the last of them, so one resolution is announced once however many answers race.
    resolving: Mutex<HashMap<InteractionId, usize, foldhash::fast::RandomState>>,
    /// The id of the last shared event applied here.
    applied_event: AtomicU64,
    /// Set by [`Registry::recover`] once it read the shared events' head and then every
    /// pending interaction; taken by the first [`Change::MayHaveMissed`], which that covers.
    recovered: AtomicBool,
    /// Rung after this process committed a change, so the shared events are read at once.
    pump_kick: Notify,
    /// Rung after every read of the shared events.
    pumped: Notify,
    /// The bytes pending interactions hold here, and their bounds.
    budget: Arc<Budget>,
    /// The policy rules weighed at creation.
    policy: RwLock<Arc<super::policy::Policy>>,
    /// The live grants weighed at creation, after the policy's deny and ask rules.
    grants: RwLock<Arc<Vec<super::policy::Rule>>>,
    /// The people answers are recorded under, and the routes interactions take.
    teams: RwLock<Arc<Teams>>,
}

/// The people and groups, and the routes: what the registry stamps on each interaction and
/// checks a person's answer against.
#[derive(Clone, Debug, Default)]
pub struct Teams {
    /// People and groups.
    pub people: super::people::People,
    /// Routes, in order.
    pub routes: super::routes::Routes,
}

/// The pending-interaction registry. Cheap to clone; all clones share state.
#[derive(Clone)]
pub struct Registry {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Registry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Registry")
            .field("pending", &self.pending_count())
            .finish()
    }
}

/// One resolution of an interaction being written by this process (see `Inner::resolving`);
/// counted until finished or dropped (a cancelled request).
struct Resolving<'a> {
    map: &'a Mutex<HashMap<InteractionId, usize, foldhash::fast::RandomState>>,
    id: Option<InteractionId>,
}

impl<'a> Resolving<'a> {
    fn start(
        map: &'a Mutex<HashMap<InteractionId, usize, foldhash::fast::RandomState>>,
        id: &InteractionId,
    ) -> Self {
        *map.locked().entry(id.clone()).or_default() += 1;
        Self {
            map,
            id: Some(id.clone()),
        }
    }

    /// Stops counting this resolution; true when no other one of the same interaction is
    /// in flight here.
    fn finish(mut self) -> bool {
        self.release()
    }

    fn release(&mut self) -> bool {
        let Some(id) = self.id.take() else {
            return false;
        };
        let mut map = self.map.locked();
        match map.get_mut(&id) {
            Some(n) if *n > 1 => {
                *n -= 1;
                false
            }
            _ => {
                map.remove(&id);
                true
            }
        }
    }
}

impl Drop for Resolving<'_> {
    fn drop(&mut self) {
        self.release();
    }
}

impl Registry {
    /// A registry over `store`. Call [`Registry::recover`] and
    /// [`Registry::spawn_background`] before serving.
    pub fn new(store: Arc<dyn Store>, config: RegistryConfig) -> Self {
        let events = EventLog::with_budget(config.event_buffer, config.event_buffer_bytes);
        let budget = Budget::new(config.max_pending_bytes, config.max_pending_bytes_per_owner);
        Self {
            inner: Arc::new(Inner {
                budget,
                config,
                slots: Mutex::new(HashMap::default()),
                deadlines: Mutex::new(Deadlines::default()),
                deadline_changed: Notify::new(),
                escalations: Default::default(),
                events,
                hooks: RwLock::new(Vec::new()),
                untracked_resolutions: AtomicU64::new(0),
                resolving: Mutex::new(HashMap::default()),
                refusals: super::RefusalLimiter::default(),
                shared_events: store.keeps_events(),
                applied_event: AtomicU64::new(0),
                recovered: AtomicBool::new(false),
                pump_kick: Notify::new(),
                pumped: Notify::new(),
                policy: RwLock::new(Arc::default()),
                grants: RwLock::new(Arc::default()),
                teams: RwLock::new(Arc::default()),
                store,
            }),
        }
    }

    /// Registers a lifecycle observer (a channel, webhooks, metrics).
    pub fn add_hook(&self, hook: Arc<dyn Lifecycle>) {
        self.inner.hooks.writing().push(hook);
    }

    /// Drops every lifecycle hook. Called when the server stops, so hooks that hold the
    /// registry (channels) do not keep each other alive.
    pub fn close(&self) {
        self.inner.hooks.writing().clear();
    }

    fn report_long_poll(&self, outcome: LongPoll) {
        for h in self.hooks().iter() {
            h.long_poll(outcome);
        }
    }

    fn hooks(&self) -> std::sync::RwLockReadGuard<'_, Vec<Arc<dyn Lifecycle>>> {
        self.inner.hooks.reading()
    }

    /// Publishes a lifecycle event this process caused, unless the store keeps the events
    /// of every process (then they come from there, numbered for all, and this only asks for
    /// them to be read now).
    fn publish(&self, kind: EventKind, interaction: Arc<Interaction>) {
        if self.inner.shared_events {
            self.inner.pump_kick.notify_one();
        } else {
            self.inner.events.publish(kind, interaction);
        }
    }

    /// The store behind this registry.
    pub fn store(&self) -> &Arc<dyn Store> {
        &self.inner.store
    }

    /// The configuration.
    pub fn config(&self) -> &RegistryConfig {
        &self.inner.config
    }

    /// The lifecycle event log (for SSE and other subscribers).
    pub fn events(&self) -> &EventLog {
        &self.inner.events
    }

    /// How many interactions this process holds as pending.
    pub fn pending_count(&self) -> usize {
        self.inner.slots.locked().len()
    }

    /// About how many bytes the pending interactions this process holds take (see
    /// [`RegistryConfig::max_pending_bytes`]).
    pub fn pending_bytes(&self) -> usize {
        self.inner.budget.held()
    }

    /// How many deadlines are scheduled (equals the pending count once settled; exposed so
    /// tests can check that resolved interactions leave the queue).
    pub fn scheduled_deadlines(&self) -> usize {
        self.inner.deadlines.locked().queue.len()
    }

    /// Creates an interaction, or re-attaches to the existing one with the same id, tool name
    /// and input. It is durable when this returns.
    pub async fn create(&self, new: NewInteraction) -> Result<Created, RegistryError> {
        self.create_for(new, None).await
    }

    /// [`Registry::create`] on behalf of `owner` (an agent token, or whatever the caller
    /// names its clients by), whose pending interactions may hold at most
    /// [`RegistryConfig::max_pending_bytes_per_owner`]. A new interaction that would pass
    /// that, or [`RegistryConfig::max_pending_bytes`] in all, is refused with
    /// [`RegistryError::Full`] before anything is written.
    pub async fn create_for(
        &self,
        new: NewInteraction,
        owner: Option<&str>,
    ) -> Result<Created, RegistryError> {
        let mut built = self.build(new)?;
        built.owner = owner.map(Box::from);
        let interaction = Arc::new(built);
        let local = self
            .inner
            .slots
            .locked()
            .get(&interaction.id)
            .map(|s| s.held());
        match local {
            Some(Some(existing)) => return Self::reattach(existing, &interaction),
            // Held here without its input: the store has the rest.
            Some(None) => {
                if let Some(existing) = self.inner.store.get(&interaction.id).await? {
                    return Self::reattach(existing, &interaction);
                }
            }
            None => {}
        }
        let evaluation = self.weigh(&interaction).await;
        if let Some(d) = evaluation
            .live
            .as_ref()
            .filter(|d| d.decision != super::policy::Decision::Ask)
        {
            return self.create_decided(interaction, d, &evaluation).await;
        }
        let charge = self
            .inner
            .budget
            .reserve(owner, budget::cost(&interaction))?;
        let mut jobs = Vec::new();
        for h in self.hooks().iter() {
            h.plan_created(&interaction, &mut jobs);
        }
        let has_jobs = !jobs.is_empty();
        let effects = Effects {
            jobs,
            audit: if self.inner.config.audit {
                let mut audit = vec![created_record(&interaction)];
                audit.extend(policy::policy_records(&interaction, &evaluation));
                audit
            } else {
                Vec::new()
            },
        };
        let untracked_before = self.inner.untracked_resolutions.load(Ordering::SeqCst);
        match self
            .inner
            .store
            .create(interaction.clone(), effects)
            .await?
        {
            CreateOutcome::Created => {
                self.track_charged(interaction.clone(), Some(charge));
                // An answer can land between the commit and `track`: it finds no slot, wins in
                // the store and publishes `resolved` itself. If any resolution missed its slot
                // meanwhile, re-read first; a resolved interaction is settled here and never
                // announced as created after its resolution.
                let unchanged =
                    self.inner.untracked_resolutions.load(Ordering::SeqCst) == untracked_before;
                let resolved_meanwhile = if unchanged && self.announce_created(&interaction) {
                    None
                } else {
                    let latest = self.resolved_in_store(&interaction.id).await;
                    if latest.is_none() {
                        self.announce_created(&interaction);
                    }
                    latest
                };
                tracing::info!(
                    id = %interaction.id,
                    kind = interaction.kind.as_str(),
                    tool = %interaction.tool_name,
                    session = interaction.session.as_deref().unwrap_or(""),
                    agent = interaction.agent.as_deref().unwrap_or(""),
                    timeout_secs = interaction.timeout_secs,
                    "interaction created"
                );
                self.report_policy(&interaction, &evaluation);
                for h in self.hooks().iter() {
                    h.created(&interaction);
                    if has_jobs {
                        h.jobs_recorded();
                    }
                }
                Ok(Created {
                    interaction: resolved_meanwhile.unwrap_or(interaction),
                    created: true,
                })
            }
            CreateOutcome::Exists(existing) => {
                if existing.is_pending()
                    && existing.same_request(&interaction.tool_name, &interaction.input)
                {
                    self.adopt(existing.clone()).await?;
                }
                Self::reattach(existing, &interaction)
            }
        }
    }

    fn reattach(existing: Arc<Interaction>, asked: &Interaction) -> Result<Created, RegistryError> {
        if existing.same_request(&asked.tool_name, &asked.input) {
            Ok(Created {
                interaction: existing,
                created: false,
            })
        } else {
            Err(RegistryError::Conflict(existing))
        }
    }

    /// Holds a pending interaction in memory and schedules its deadline (once); its bytes
    /// are counted against the budget without a bound (it is held anyway).
    fn track(&self, interaction: Arc<Interaction>) -> Arc<Slot> {
        self.track_charged(interaction, None)
    }

    /// [`Registry::track`] with the bytes already reserved by `charge`.
    fn track_charged(&self, interaction: Arc<Interaction>, charge: Option<Charge>) -> Arc<Slot> {
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
    async fn adopt(&self, interaction: Arc<Interaction>) -> Result<Arc<Slot>, RegistryError> {
        let slot = self.track(interaction.clone());
        if let Some(latest) = self.inner.store.get(&interaction.id).await?
            && !latest.is_pending()
        {
            self.settle_locally(&latest);
        }
        Ok(slot)
    }

    /// Publishes `interaction.created` if the interaction is still pending here. Done under
    /// the slots lock, which whoever settles the slot takes before publishing `resolved`, so
    /// `created` always comes first. Returns whether it was published.
    fn announce_created(&self, interaction: &Arc<Interaction>) -> bool {
        let slots = self.inner.slots.locked();
        let pending = slots
            .get(&interaction.id)
            .is_some_and(|s| s.resolved.get().is_none());
        if pending {
            self.publish(EventKind::Created, interaction.clone());
        }
        pending
    }

    /// Re-reads a freshly tracked interaction and, if the store has it resolved, settles it
    /// locally and returns it. A failed read is logged: the deadline settles it later.
    async fn resolved_in_store(&self, id: &InteractionId) -> Option<Arc<Interaction>> {
        match self.inner.store.get(id).await {
            Ok(Some(latest)) if !latest.is_pending() => {
                self.settle_locally(&latest);
                Some(latest)
            }
            Ok(_) => None,
            Err(e) => {
                tracing::warn!(id = %id, error = %e, "could not re-read a new interaction; its deadline will settle it");
                None
            }
        }
    }

    /// Wakes local waiters of a resolved interaction and forgets it as pending. Returns
    /// whether it was pending here.
    fn settle_locally(&self, resolved: &Arc<Interaction>) -> bool {
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
                let key = slot.deadline.locked().take();
                if let Some(key) = key {
                    self.inner.deadlines.locked().queue.remove(&key);
                }
                self.disarm_escalation(&slot);
                true
            }
            None => false,
        }
    }

    /// The current state of an interaction, whole: from memory where it is held there,
    /// else from the store.
    pub async fn get(&self, id: &InteractionId) -> Result<Option<Arc<Interaction>>, RegistryError> {
        let local = self.inner.slots.locked().get(id).cloned();
        // A pending interaction with votes changes as people vote: the store has the votes.
        if let Some(slot) = local
            && let Some(i) = slot
                .resolved
                .get()
                .cloned()
                .or_else(|| slot.held().filter(|w| !super::quorum::is_voted(w)))
        {
            return Ok(Some(i));
        }
        Ok(self.inner.store.get(id).await?)
    }

    /// Whether this process keeps interaction `id` whole in memory (`Some(false)`: pending
    /// here, but only the store has its input; `None`: not pending here). For tests and
    /// measurements of what pending interactions hold.
    pub fn holds_whole(&self, id: &InteractionId) -> Option<bool> {
        self.inner.slots.locked().get(id).map(|s| s.whole.is_some())
    }

    /// A page of interactions, newest first.
    pub async fn list(&self, query: &ListQuery) -> Result<Page, RegistryError> {
        Ok(self.inner.store.list(query).await?)
    }

    /// One page of a walk through every pending interaction, newest first, holding about
    /// 8 MiB of them at most (at least one): start with `None`, go on with
    /// each page's `next` until it is `None`. For whoever must see each pending interaction
    /// whole (start-up, a re-check, a re-post) without holding all of them at once.
    pub async fn pending_page(&self, after: Option<Cursor>) -> Result<Page, RegistryError> {
        let query = ListQuery {
            status: StatusFilter::Pending,
            limit: PENDING_PAGE,
            after,
            max_bytes: Some(PENDING_PAGE_BYTES),
        };
        Ok(self.inner.store.list(&query).await?)
    }

    /// The ids of every pending interaction, oldest first (read each with
    /// [`Registry::get`] when it is needed, rather than all at once).
    pub async fn pending_ids(&self) -> Result<Vec<InteractionId>, RegistryError> {
        Ok(self.inner.store.pending_ids().await?)
    }

    /// Waits up to `timeout` for an interaction to be resolved: `Some` with the resolved
    /// interaction (at once if it already is), `None` if it is still pending.
    pub async fn wait(
        &self,
        id: &InteractionId,
        timeout: Duration,
    ) -> Result<Option<Arc<Interaction>>, RegistryError> {
        let local = self.inner.slots.locked().get(id).cloned();
        let slot = match local {
            Some(s) => s,
            None => match self.inner.store.get(id).await? {
                None => return Err(RegistryError::NotFound(id.clone())),
                Some(i) if !i.is_pending() => {
                    self.report_long_poll(LongPoll::Ready);
                    return Ok(Some(i));
                }
                Some(i) => self.adopt(i).await?,
            },
        };
        if let Some(resolved) = slot.resolved.get() {
            self.report_long_poll(LongPoll::Ready);
            return Ok(Some(resolved.clone()));
        }
        let (outcome, waited) = match tokio::time::timeout(timeout, slot.resolution()).await {
            Ok(resolved) => (LongPoll::Woken, Some(resolved)),
            Err(_) => (LongPoll::TimedOut, None),
        };
        self.report_long_poll(outcome);
        Ok(waited)
    }

    /// Replaces the people and the routes.
    pub fn set_teams(&self, teams: Teams) {
        *self.inner.teams.writing() = Arc::new(teams);
    }

    /// The people and the routes.
    pub fn teams(&self) -> Arc<Teams> {
        self.inner.teams.reading().clone()
    }

    /// The routes interactions take.
    pub(super) fn routes(&self) -> super::routes::Routes {
        self.inner.teams.reading().routes.clone()
    }

    /// `responder` named as the configured people know them.
    pub fn attribute(&self, responder: Responder) -> Responder {
        responder.attributed(&self.inner.teams.reading().people)
    }

    /// Records a person's answer. The first answer wins; later ones get
    /// [`RegistryError::AlreadyResolved`] with the winning resolution. An answer arriving
    /// after the deadline finds the interaction expired.
    pub async fn respond(
        &self,
        id: &InteractionId,
        answer: Answer,
        responder: Responder,
    ) -> Result<Arc<Interaction>, RegistryError> {
        let responder = self.attribute(responder);
        let current = self.current(id).await?;
        let at = now();
        if super::quorum::is_voted(&current) && current.deadline > at {
            return self.vote(current, answer, responder, at).await;
        }
        if current.deadline <= at {
            // Past the deadline: the expiry is due even if its timer has not fired yet.
            let expired = match self
                .settle(current, None, |i| Ok(answer::expired(i, at)))
                .await
            {
                Ok(expired) | Err(RegistryError::AlreadyResolved(expired)) => expired,
                Err(e) => return Err(e),
            };
            let via = responder.via.clone();
            self.refused(
                Some(id),
                &clip(&responder.audit_actor().unwrap_or_default()),
                &via,
                "answered after the deadline",
            )
            .await;
            return Err(RegistryError::AlreadyResolved(expired));
        }
        // Clipped: a refused answer's `by` has not been length-checked, and it is logged
        // and audited.
        let who = clip(&responder.audit_actor().unwrap_or_default());
        let via = responder.via.clone();
        let result = self
            .settle(
                current,
                Some(who.as_str()).filter(|w| !w.is_empty()),
                move |i| answer::resolution_for(i, answer, responder, at),
            )
            .await;
        match &result {
            Err(RegistryError::AlreadyResolved(winner)) => {
                let reason = format!(
                    "already resolved: {}",
                    winner
                        .resolution
                        .as_ref()
                        .map(|r| r.summary())
                        .unwrap_or_default()
                );
                self.refused(Some(id), &who, &via, &reason).await;
            }
            Err(RegistryError::Invalid(e)) => {
                self.refused(Some(id), &who, &via, &format!("invalid answer: {e}"))
                    .await;
            }
            _ => {}
        }
        result
    }

    /// Records an answer attempt that was refused before reaching the registry's decision
    /// (a non-approver's tap, a bad signature, a forged button): it changes nothing, but it
    /// is part of the record of who tried what.
    ///
    /// Anyone can send refusals that are not bound to an interaction (`id` is `None`: a bad
    /// signature, a wrong secret), so those are rate-limited per channel: beyond a burst, they
    /// are counted instead of logged and audited, and the count goes into the next entry.
    /// `actor` and `reason` are cut to a bounded length.
    pub async fn refused(
        &self,
        id: Option<&InteractionId>,
        actor: &str,
        via: &super::Via,
        reason: &str,
    ) {
        /// Longest actor recorded, in characters.
        const MAX_ACTOR: usize = 128;
        let admitted = match id {
            Some(_) => Some(0),
            None => self
                .inner
                .refusals
                .admit(via.as_str(), Instant::now().into_std()),
        };
        for h in self.hooks().iter() {
            h.refused(via, admitted.is_some());
        }
        let Some(suppressed) = admitted else { return };
        let actor = super::clip(actor, MAX_ACTOR);
        let mut detail = clip(reason);
        if suppressed > 0 {
            detail.push_str(&format!(
                " (and {suppressed} similar refusals on this channel before it, not recorded)"
            ));
        }
        tracing::warn!(
            id = id.map(|i| i.as_str()).unwrap_or(""),
            actor,
            via = %via,
            reason = detail,
            "answer attempt refused"
        );
        if !self.inner.config.audit {
            return;
        }
        let input_hash = match id {
            Some(id) => self.get(id).await.ok().flatten().map(|i| i.input_digest()),
            None => None,
        };
        let record = AuditRecord {
            at: now(),
            action: Action::Refused,
            interaction_id: id.map(|i| i.as_str().to_string()),
            actor: (!actor.is_empty()).then_some(actor),
            channel: via.as_str().to_string(),
            outcome: "refused".into(),
            input_hash,
            detail: Some(detail),
        };
        if let Err(e) = self.inner.store.append_audit(vec![record]).await {
            tracing::error!(error = %e, "could not append a refusal to the audit trail");
        }
    }

    /// The outbox jobs and audit record that go with a resolution.
    fn resolution_effects(&self, resolved: &Interaction, actor: Option<&str>) -> Effects {
        let mut jobs = Vec::new();
        for h in self.hooks().iter() {
            h.plan_resolved(resolved, &mut jobs);
        }
        Effects {
            jobs,
            audit: resolved
                .resolution
                .as_ref()
                .filter(|_| self.inner.config.audit)
                .map(|r| resolved_record(resolved, r, actor))
                .into_iter()
                .collect(),
        }
    }

    /// Cancels a pending interaction (the agent withdrew it): resolved as a deny.
    pub async fn cancel(
        &self,
        id: &InteractionId,
        reason: Option<String>,
        by: Option<String>,
    ) -> Result<Arc<Interaction>, RegistryError> {
        let current = self.current(id).await?;
        let at = now();
        self.settle(current, None, move |i| {
            Ok(answer::cancelled(i, reason, by, at))
        })
        .await
    }

    /// Expires a pending interaction now (its deadline passed, or a waiter such as the Claude
    /// Code hook gave up). Returns the final state: the expiry, or the answer that won first.
    pub async fn expire(&self, id: &InteractionId) -> Result<Arc<Interaction>, RegistryError> {
        let current = self.current(id).await?;
        let at = now();
        match self
            .settle(current, None, |i| Ok(answer::expired(i, at)))
            .await
        {
            Ok(i) => Ok(i),
            Err(RegistryError::AlreadyResolved(i)) => Ok(i),
            Err(e) => Err(e),
        }
    }

    async fn current(&self, id: &InteractionId) -> Result<Arc<Interaction>, RegistryError> {
        self.get(id)
            .await?
            .ok_or_else(|| RegistryError::NotFound(id.clone()))
    }

    /// Resolves `current` with the resolution `make` builds, if it is still pending.
    /// `actor` names who answered in the audit trail (default: the resolution's `by`).
    async fn settle(
        &self,
        current: Arc<Interaction>,
        actor: Option<&str>,
        make: impl FnOnce(&Interaction) -> Result<Resolution, ValidationError>,
    ) -> Result<Arc<Interaction>, RegistryError> {
        if !current.is_pending() {
            return Err(RegistryError::AlreadyResolved(current));
        }
        let resolution = make(&current)?;
        let resolved = Arc::new(current.resolved(resolution));
        let effects = self.resolution_effects(&resolved, actor);
        let has_jobs = !effects.jobs.is_empty();
        let resolving = Resolving::start(&self.inner.resolving, &resolved.id);
        match self.inner.store.resolve(resolved.clone(), effects).await? {
            ResolveOutcome::Resolved => {
                self.settle_locally(&resolved);
                self.publish(EventKind::Resolved, resolved.clone());
                log_resolution(&resolved, "interaction resolved");
                for h in self.hooks().iter() {
                    h.resolved(&resolved);
                    if has_jobs {
                        h.jobs_recorded();
                    }
                }
                Ok(resolved)
            }
            ResolveOutcome::AlreadyResolved(winner) => {
                // The winner may be a resolution of this process still on its way from the
                // store to its announcement: only the last of the racing resolutions here
                // settles and announces, and only what no local winner settled already.
                if resolving.finish() && self.settle_locally(&winner) {
                    // Resolved by another process: tell local subscribers.
                    self.publish(EventKind::Resolved, winner.clone());
                }
                Err(RegistryError::AlreadyResolved(winner))
            }
            ResolveOutcome::NotFound => Err(RegistryError::NotFound(current.id.clone())),
        }
    }

    /// Loads pending interactions from the store with their original deadlines, and expires
    /// at once those whose deadline passed while imrelay was down. Returns (reloaded, expired).
    /// They are read a page at a time ([`Registry::pending_page`]), so start-up holds at once
    /// only what the slots keep (big inputs stay in the store) and one page.
    pub async fn recover(&self) -> Result<(usize, usize), RegistryError> {
        self.load_grants().await?;
        if self.inner.shared_events {
            // Read before the pending interactions: every change after this is read later.
            self.load_recent_events().await?;
        }
        let at = now();
        let (mut reloaded, mut expired) = (0, 0);
        let mut after = None;
        loop {
            let page = self.pending_page(after).await?;
            let mut overdue = Vec::new();
            for i in page.interactions {
                if i.deadline <= at {
                    overdue.push(i);
                } else {
                    self.track(i);
                    reloaded += 1;
                }
            }
            expired += overdue.len();
            self.expire_overdue(overdue, at).await;
            match page.next {
                Some(next) => after = Some(next),
                None => break,
            }
        }
        // What changes from here on is in the shared events after the head read above.
        self.inner
            .recovered
            .store(self.inner.shared_events, Ordering::SeqCst);
        Ok((reloaded, expired))
    }

    /// Expires interactions whose deadline passed while imrelay was down; one that cannot
    /// be recorded now is held and tried again shortly.
    async fn expire_overdue(&self, overdue: Vec<Arc<Interaction>>, at: jiff::Timestamp) {
        futures_util::stream::iter(overdue)
            .for_each_concurrent(256, |i| async move {
                let resolved = Arc::new(i.resolved(answer::expired(&i, at)));
                let effects = self.resolution_effects(&resolved, None);
                let has_jobs = !effects.jobs.is_empty();
                match self.inner.store.resolve(resolved.clone(), effects).await {
                    Ok(ResolveOutcome::Resolved) => {
                        self.publish(EventKind::Resolved, resolved.clone());
                        log_resolution(&resolved, "interaction expired while imrelay was down");
                        for h in self.hooks().iter() {
                            h.resolved(&resolved);
                            if has_jobs {
                                h.jobs_recorded();
                            }
                        }
                    }
                    Ok(_) => {}
                    Err(e) => {
                        tracing::error!(id = %resolved.id, error = %e, "could not record an overdue expiry; retrying shortly");
                        let slot = self.track(i.clone());
                        self.schedule(slot, instant_in(EXPIRY_RETRY));
                    }
                }
            })
            .await;
    }
}

#[cfg(test)]
mod tests;
