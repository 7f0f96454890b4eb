//! The registry: pending interactions, their waiters, first-answer-wins, deadlines, and
//! lifecycle events.
//!
//! Every state change goes through the store first and touches memory only after the store
//! committed it: an interaction is created, or resolved, when the store says so. The store's
//! conditional writes decide which answer wins (including expiry, which is just another
//! answer that can lose); the registry then wakes local waiters and publishes the event.
//! Waking is a separate step ([`Registry::refresh`]) so a change made by another process can
//! trigger it too.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, RwLock};
use std::time::Duration;

use futures_util::{FutureExt, StreamExt};
use jiff::Timestamp;
use serde_json::{Map, Value};
use tokio::sync::Notify;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::ValidationError;
use super::answer::{self, Answer, Responder};
use super::events::{EventKind, EventLog};
use super::form::Form;
use super::model::{Input, Interaction, InteractionId, Kind, Resolution, now};
use super::ports::audit::{Action, AuditRecord};
use super::ports::{
    Change, ChangeFeed, CreateOutcome, Effects, ListQuery, OutboxJob, Page, ResolveOutcome, Store,
    StoreError,
};
use super::question::parse_questions;
use crate::sync::{LockExt, RwLockExt};

/// Longest accepted `tool_name`, in characters.
const MAX_TOOL_NAME: usize = 200;
/// Longest accepted short label (`session`, `agent`), in characters.
const MAX_LABEL: usize = 200;
/// Longest accepted text field (`title`, `description`, `cwd`), in characters.
const MAX_TEXT: usize = 16 * 1024;
/// How long to wait before retrying an expiry the store could not record.
const EXPIRY_RETRY: Duration = Duration::from_secs(5);

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
        }
    }
}

/// A request to create an interaction, as an agent sends it.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct NewInteraction {
    /// The agent's idempotency key (e.g. the SDK's `toolUseID`); a UUID v7 if absent.
    pub id: Option<String>,
    /// The tool name, exactly as `canUseTool` received it.
    pub tool_name: String,
    /// The tool input, exactly as `canUseTool` received it.
    pub input: Map<String, Value>,
    /// The input's JSON text as the agent sent it, if it sent text: the interaction keeps it
    /// as its input, so the agent gets back exactly what it sent (a parsed [`Value`] rewrites
    /// some numbers). `input` must be its parsed form, as [`NewInteraction::from_json`] makes
    /// both. `None`: the input is written out from `input`.
    pub input_text: Option<Input>,
    /// The agent's session label.
    pub session: Option<String>,
    /// Which agent is asking.
    pub agent: Option<String>,
    /// Human-readable title from the SDK's context.
    pub title: Option<String>,
    /// Human-readable description from the SDK's context.
    pub description: Option<String>,
    /// The agent's working directory.
    pub cwd: Option<String>,
    /// Requested timeout in seconds (clamped to the configured maximum).
    pub timeout_secs: Option<u64>,
    /// Permission suggestions ("always allow" rules) the agent offers: an array of the SDK's
    /// permission updates (see [`super::validate_suggestions`]); `[]` is none.
    pub suggestions: Option<Value>,
}

impl NewInteraction {
    /// A request with just a tool name and input.
    pub fn new(tool_name: impl Into<String>, input: Map<String, Value>) -> Self {
        Self {
            tool_name: tool_name.into(),
            input,
            ..Self::default()
        }
    }

    /// A request with just a tool name and an input the agent sent as JSON text, which the
    /// interaction keeps as written (see [`NewInteraction::input_text`]).
    pub fn from_json(
        tool_name: impl Into<String>,
        input: &serde_json::value::RawValue,
    ) -> Result<Self, ValidationError> {
        let text = Input::from_json(input)?;
        let map = serde_json::from_str(text.as_json())
            .map_err(|e| ValidationError::new("input", e.to_string()))?;
        Ok(Self {
            input_text: Some(text),
            ..Self::new(tool_name, map)
        })
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
}

/// Observes the lifecycle: plans durable outbox work inside the state change's transaction,
/// and reacts after it committed. Channels, webhooks and metrics implement this.
pub trait Lifecycle: Send + Sync {
    /// Outbox jobs to record together with a new interaction.
    fn plan_created(&self, _interaction: &Interaction, _jobs: &mut Vec<OutboxJob>) {}
    /// Outbox jobs to record together with a resolution.
    fn plan_resolved(&self, _interaction: &Interaction, _jobs: &mut Vec<OutboxJob>) {}
    /// Called after a new interaction was committed.
    fn created(&self, _interaction: &Arc<Interaction>) {}
    /// Called after a resolution was committed (once, by the process that made it).
    fn resolved(&self, _interaction: &Arc<Interaction>) {}
    /// Called after a committed change recorded outbox jobs.
    fn jobs_recorded(&self) {}
    /// Called for every answer attempt reported to [`Registry::refused`]; `recorded` is false
    /// when the rate limit kept it out of the log and the audit trail.
    fn refused(&self, _via: &super::Via, _recorded: bool) {}
    /// Called when a [`Registry::wait`] ends.
    fn long_poll(&self, _outcome: LongPoll) {}
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

/// A pending interaction held in memory, with its waiters.
struct Slot {
    interaction: Arc<Interaction>,
    resolved: OnceLock<Arc<Interaction>>,
    notify: Notify,
    /// Its entry in the deadline queue, removed when it resolves so the queue holds only
    /// pending interactions. (A std mutex: set and taken, never held across an await.)
    deadline: Mutex<Option<DeadlineKey>>,
}

impl Slot {
    fn new(interaction: Arc<Interaction>) -> Self {
        Self {
            interaction,
            resolved: OnceLock::new(),
            notify: Notify::new(),
            deadline: Mutex::new(None),
        }
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

/// Position in the deadline queue: when, and a sequence number to keep keys unique.
type DeadlineKey = (Instant, u64);

/// Pending interactions by deadline. Resolved ones are removed at once, so memory follows
/// the number of pending interactions, not the rate of traffic.
#[derive(Default)]
struct Deadlines {
    queue: BTreeMap<DeadlineKey, Arc<Slot>>,
    seq: u64,
}

struct Inner {
    store: Arc<dyn Store>,
    config: RegistryConfig,
    // std mutexes: held for map/heap updates only, never across an await.
    slots: Mutex<HashMap<InteractionId, Arc<Slot>, foldhash::fast::RandomState>>,
    deadlines: Mutex<Deadlines>,
    deadline_changed: Notify,
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

fn check_len(v: &Option<String>, field: &str, max: usize) -> Result<(), ValidationError> {
    if let Some(s) = v
        && s.chars().count() > max
    {
        return Err(ValidationError::new(
            field,
            format!("is longer than {max} characters"),
        ));
    }
    Ok(())
}

/// Audit details are kept short.
/// Longest audit detail or actor kept, in characters.
const MAX_DETAIL: usize = 500;

fn clip(s: &str) -> String {
    super::clip(s, MAX_DETAIL)
}

fn created_record(i: &Interaction) -> AuditRecord {
    AuditRecord {
        at: i.created_at,
        action: Action::Created,
        interaction_id: Some(i.id.as_str().to_string()),
        actor: i
            .agent
            .as_deref()
            .or(i.session.as_deref())
            .map(str::to_string),
        channel: "agent".into(),
        outcome: "pending".into(),
        input_hash: Some(i.input_digest()),
        detail: Some(clip(&i.tool_name)),
    }
}

/// `actor` names who answered for the audit (a stable identity); default: `r.by`. An answer
/// that named nobody is anonymous (no actor); `system` is imrelay itself: an expiry, or a
/// cancellation that names nobody else.
fn resolved_record(i: &Interaction, r: &Resolution, actor: Option<&str>) -> AuditRecord {
    use super::Outcome;
    AuditRecord {
        at: r.at,
        action: match r.outcome {
            Outcome::Allowed | Outcome::Denied | Outcome::Answered => Action::Answered,
            Outcome::Expired => Action::Expired,
            Outcome::Cancelled => Action::Cancelled,
        },
        interaction_id: Some(i.id.as_str().to_string()),
        actor: actor
            .map(str::to_string)
            .or_else(|| r.by.clone())
            .or_else(|| {
                matches!(r.outcome, Outcome::Expired | Outcome::Cancelled).then(|| "system".into())
            }),
        channel: r.via.as_str().to_string(),
        outcome: r.outcome.as_str().into(),
        input_hash: Some(i.input_digest()),
        detail: r.message().map(clip),
    }
}

/// Logs a resolution this process recorded: the one line per resolution, with its kind,
/// outcome, who, via which channel and the time to answer.
fn log_resolution(resolved: &Interaction, what: &'static str) {
    if let Some(r) = &resolved.resolution {
        tracing::info!(
            id = %resolved.id,
            kind = resolved.kind.as_str(),
            outcome = r.outcome.as_str(),
            by = r.by.as_deref().unwrap_or(""),
            via = %r.via,
            time_to_answer_ms = resolved
                .time_to_answer()
                .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
                .unwrap_or(0),
            "{what}"
        );
    }
}

/// `t - d`, saturating at the earliest representable time (never later than `t`).
fn sub(t: Timestamp, d: Duration) -> Timestamp {
    jiff::SignedDuration::try_from(d)
        .ok()
        .and_then(|d| t.checked_sub(d).ok())
        .unwrap_or(Timestamp::MIN)
}

/// The monotonic instant `d` from now, saturating far in the future instead of overflowing.
fn instant_in(d: Duration) -> Instant {
    let now = Instant::now();
    now.checked_add(d)
        .or_else(|| now.checked_add(FAR_FUTURE))
        .unwrap_or(now)
}

/// How long a subscriber resuming from another replica's event id waits for this one to
/// read that far.
const EVENTS_CATCH_UP: Duration = Duration::from_secs(2);

/// How many shared events are read at once.
const EVENT_BATCH: usize = 512;

/// How many changes from other processes are re-read at once.
const REFRESH_CONCURRENCY: usize = 64;

/// Stand-in for "never" in the monotonic clock (as tokio itself uses: about 30 years).
const FAR_FUTURE: Duration = Duration::from_secs(86_400 * 365 * 30);

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
        Self {
            inner: Arc::new(Inner {
                config,
                slots: Mutex::new(HashMap::default()),
                deadlines: Mutex::new(Deadlines::default()),
                deadline_changed: Notify::new(),
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

    /// How many deadlines are scheduled (equals the pending count once settled; exposed so
    /// tests can check that resolved interactions leave the queue).
    pub fn scheduled_deadlines(&self) -> usize {
        self.inner.deadlines.locked().queue.len()
    }

    /// The timeout an interaction of `kind` gets when `requested` seconds were asked for.
    pub fn timeout_for(&self, kind: Kind, requested: Option<u64>) -> Result<u64, ValidationError> {
        let cfg = &self.inner.config;
        let default = match kind {
            Kind::Approval => cfg.approval_timeout,
            Kind::Question | Kind::Form => cfg.question_timeout,
        };
        let max = cfg.max_timeout.as_secs().max(1);
        match requested {
            Some(0) => Err(ValidationError::new("timeout_secs", "must be at least 1")),
            Some(s) => Ok(s.min(max)),
            None => Ok(default.as_secs().clamp(1, max)),
        }
    }

    fn build(&self, new: NewInteraction) -> Result<Interaction, ValidationError> {
        let id = match &new.id {
            Some(raw) => InteractionId::parse(raw)?,
            None => InteractionId::generate(),
        };
        if new.tool_name.trim().is_empty() {
            return Err(ValidationError::new("tool_name", "must not be empty"));
        }
        if new.tool_name.chars().count() > MAX_TOOL_NAME {
            return Err(ValidationError::new(
                "tool_name",
                format!("is longer than {MAX_TOOL_NAME} characters"),
            ));
        }
        check_len(&new.session, "session", MAX_LABEL)?;
        check_len(&new.agent, "agent", MAX_LABEL)?;
        check_len(&new.title, "title", MAX_TEXT)?;
        check_len(&new.description, "description", MAX_TEXT)?;
        check_len(&new.cwd, "cwd", MAX_TEXT)?;
        let suggestions = new
            .suggestions
            .map(super::validate_suggestions)
            .transpose()?
            .flatten();
        let kind = Kind::of_tool(&new.tool_name);
        match kind {
            Kind::Question => {
                parse_questions(&new.input)?;
            }
            Kind::Form => {
                Form::from_input(&new.input)?;
            }
            Kind::Approval => {}
        }
        let timeout_secs = self.timeout_for(kind, new.timeout_secs)?;
        let interaction = Interaction {
            session: new.session.map(String::into_boxed_str),
            agent: new.agent.map(String::into_boxed_str),
            title: new.title.map(String::into_boxed_str),
            description: new.description.map(String::into_boxed_str),
            cwd: new.cwd.map(String::into_boxed_str),
            suggestions: suggestions.map(Box::new),
            ..Interaction::pending(
                id,
                new.tool_name,
                new.input_text
                    .unwrap_or_else(|| Input::from_map(&new.input)),
                now(),
                timeout_secs,
            )
        };
        if self.inner.config.audit {
            // The creation's audit entry refers to the digest; the map is at hand now.
            interaction.prime_digest(&new.input);
        }
        Ok(interaction)
    }

    /// Creates an interaction, or re-attaches to the existing one with the same id, tool name
    /// and input. It is durable when this returns.
    pub async fn create(&self, new: NewInteraction) -> Result<Created, RegistryError> {
        let interaction = Arc::new(self.build(new)?);
        let local = self
            .inner
            .slots
            .locked()
            .get(&interaction.id)
            .map(|s| s.interaction.clone());
        if let Some(existing) = local {
            return Self::reattach(existing, &interaction);
        }
        let mut jobs = Vec::new();
        for h in self.hooks().iter() {
            h.plan_created(&interaction, &mut jobs);
        }
        let has_jobs = !jobs.is_empty();
        let effects = Effects {
            jobs,
            audit: if self.inner.config.audit {
                vec![created_record(&interaction)]
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
                self.track(interaction.clone());
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

    /// Holds a pending interaction in memory and schedules its deadline (once).
    fn track(&self, interaction: Arc<Interaction>) -> Arc<Slot> {
        let (slot, fresh) = {
            let mut slots = self.inner.slots.locked();
            match slots.get(&interaction.id) {
                Some(s) => (s.clone(), false),
                None => {
                    let s = Arc::new(Slot::new(interaction.clone()));
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

    fn schedule(&self, slot: Arc<Slot>, at: Instant) {
        let is_first = {
            let mut d = self.inner.deadlines.locked();
            d.seq += 1;
            let key = (at, d.seq);
            let earlier = d
                .queue
                .first_key_value()
                .is_none_or(|(first, _)| key < *first);
            if let Some(old) = slot.deadline.locked().replace(key) {
                d.queue.remove(&old);
            }
            d.queue.insert(key, slot);
            earlier
        };
        if is_first {
            self.inner.deadline_changed.notify_one();
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
                true
            }
            None => false,
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
    pub async fn resync(&self) -> Result<(), RegistryError> {
        let untracked_before = self.inner.untracked_resolutions.load(Ordering::SeqCst);
        let pending = self.inner.store.pending().await?;
        let mut fresh = Vec::new();
        let stale: Vec<InteractionId> = {
            let slots = self.inner.slots.locked();
            let in_store: std::collections::HashSet<&InteractionId> =
                pending.iter().map(|i| &i.id).collect();
            for i in &pending {
                if !slots.contains_key(&i.id) {
                    fresh.push(i.clone());
                }
            }
            slots
                .keys()
                .filter(|id| !in_store.contains(id))
                .cloned()
                .collect()
        };
        let mut recheck = stale;
        let adopted: Vec<InteractionId> = fresh.iter().map(|i| i.id.clone()).collect();
        for i in fresh {
            self.track(i);
        }
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
    async fn load_recent_events(&self) -> Result<(), RegistryError> {
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
    async fn run_changes(self, mut feed: ChangeFeed, shutdown: CancellationToken) {
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
                // Whatever else is ready is covered by the one read.
                while let Some(Some(change)) = feed.next().now_or_never() {
                    if change == Change::MayHaveMissed {
                        missed |= self.must_recheck();
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

    /// Whether a [`Change::MayHaveMissed`] calls for re-checking everything against the
    /// store. Not the first one after [`Registry::recover`] (every change feed says it when it
    /// first connects): recovery read the shared events' head and then every pending
    /// interaction, and whatever changed since is in the shared events, which are read anyway.
    /// Reading every pending interaction again would only double start-up's work and memory.
    fn must_recheck(&self) -> bool {
        !(self.inner.shared_events && self.inner.recovered.swap(false, Ordering::SeqCst))
    }

    /// The current state of an interaction.
    pub async fn get(&self, id: &InteractionId) -> Result<Option<Arc<Interaction>>, RegistryError> {
        let local = self.inner.slots.locked().get(id).cloned();
        if let Some(slot) = local {
            return Ok(Some(
                slot.resolved
                    .get()
                    .cloned()
                    .unwrap_or_else(|| slot.interaction.clone()),
            ));
        }
        Ok(self.inner.store.get(id).await?)
    }

    /// A page of interactions, newest first.
    pub async fn list(&self, query: &ListQuery) -> Result<Page, RegistryError> {
        Ok(self.inner.store.list(query).await?)
    }

    /// Every pending interaction, oldest first.
    pub async fn pending(&self) -> Result<Vec<Arc<Interaction>>, RegistryError> {
        Ok(self.inner.store.pending().await?)
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

    /// Records a person's answer. The first answer wins; later ones get
    /// [`RegistryError::AlreadyResolved`] with the winning resolution. An answer arriving
    /// after the deadline finds the interaction expired.
    pub async fn respond(
        &self,
        id: &InteractionId,
        answer: Answer,
        responder: Responder,
    ) -> Result<Arc<Interaction>, RegistryError> {
        let current = self.current(id).await?;
        let at = now();
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
    pub async fn recover(&self) -> Result<(usize, usize), RegistryError> {
        if self.inner.shared_events {
            // Read before the pending interactions: every change after this is read later.
            self.load_recent_events().await?;
        }
        let pending = self.inner.store.pending().await?;
        let at = now();
        let mut overdue = Vec::new();
        let mut reloaded = 0;
        for i in pending {
            if i.deadline <= at {
                overdue.push(i);
            } else {
                self.track(i);
                reloaded += 1;
            }
        }
        // What changes from here on is in the shared events after the head read above.
        self.inner
            .recovered
            .store(self.inner.shared_events, Ordering::SeqCst);
        let expired = overdue.len();
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
        Ok((reloaded, expired))
    }

    /// Starts the deadline timer and the retention pruner; both stop when `shutdown` fires.
    pub fn spawn_background(
        &self,
        shutdown: CancellationToken,
    ) -> Vec<tokio::task::JoinHandle<()>> {
        let mut tasks = vec![
            tokio::spawn(self.clone().run_deadlines(shutdown.clone())),
            tokio::spawn(self.clone().run_pruner(shutdown.clone())),
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
                    slot.deadline.locked().take();
                    due.push(slot);
                }
                let next = d.queue.first_key_value().map(|(k, _)| k.0);
                drop(d);
                for slot in due {
                    if slot.resolved.get().is_none() {
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
        let id = slot.interaction.id.clone();
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::interaction::{Outcome, Via};
    use crate::store::MemoryStore;
    use crate::store::intercept::{Intercepted, Interceptor, Op};
    use serde_json::json;
    use std::sync::atomic::Ordering;

    fn obj(v: Value) -> Map<String, Value> {
        v.as_object().cloned().unwrap_or_default()
    }

    fn registry() -> Registry {
        Registry::new(Arc::new(MemoryStore::new()), RegistryConfig::default())
    }

    fn bash(id: &str) -> NewInteraction {
        NewInteraction {
            id: Some(id.into()),
            ..NewInteraction::new("Bash", obj(json!({"command": "ls"})))
        }
    }

    /// Holds one `create` after it committed, so a test can act in the gap before the
    /// registry tracks the new interaction.
    #[derive(Default)]
    struct CreateGate {
        armed: std::sync::atomic::AtomicBool,
        committed: Notify,
        release: Notify,
    }

    #[async_trait::async_trait]
    impl Interceptor for CreateGate {
        async fn after(&self, op: Op) {
            if op == Op::Create && self.armed.swap(false, Ordering::SeqCst) {
                self.committed.notify_one();
                self.release.notified().await;
            }
        }
    }

    #[tokio::test(start_paused = true)]
    async fn an_answer_between_commit_and_tracking_is_not_lost() {
        let store = Arc::new(Intercepted::new(
            Arc::new(MemoryStore::new()),
            CreateGate::default(),
        ));
        let reg = Registry::new(store.clone(), RegistryConfig::default());
        let shutdown = CancellationToken::new();
        reg.spawn_background(shutdown.clone());
        let (_, mut events) = reg.events().subscribe();
        store.hooks.armed.store(true, Ordering::SeqCst);
        let creating = tokio::spawn({
            let reg = reg.clone();
            async move { reg.create(bash("gap")).await }
        });
        // The interaction is in the store, but `create` has not tracked it yet.
        store.hooks.committed.notified().await;
        let id = InteractionId::parse("gap").unwrap();
        reg.respond(&id, Answer::allow(), Responder::new("quick", Via::api()))
            .await
            .unwrap();
        store.hooks.release.notify_one();
        let created = creating.await.unwrap().unwrap();
        assert!(created.created);
        assert_eq!(
            created.interaction.resolution.as_ref().unwrap().outcome,
            Outcome::Allowed
        );

        // Waiting finds the answer (with paused time, a stuck wait would run to its end).
        let waited = reg.wait(&id, Duration::from_secs(3600)).await.unwrap();
        assert_eq!(
            waited.unwrap().resolution.as_ref().unwrap().outcome,
            Outcome::Allowed
        );
        assert!(!reg.get(&id).await.unwrap().unwrap().is_pending());
        assert_eq!(reg.pending_count(), 0);
        assert_eq!(reg.scheduled_deadlines(), 0);

        // Past the deadline: still one resolution, announced once, never after a `created`.
        tokio::time::sleep(Duration::from_secs(600)).await;
        let mut kinds = Vec::new();
        while let Some(crate::interaction::Next::Event(e)) = events.try_next() {
            kinds.push(e.kind);
        }
        assert_eq!(kinds, vec![EventKind::Resolved]);
        shutdown.cancel();
    }

    #[tokio::test(start_paused = true)]
    async fn enormous_durations_saturate_instead_of_failing_open() {
        let config = RegistryConfig {
            approval_timeout: Duration::MAX,
            max_timeout: Duration::MAX,
            retention: Duration::MAX,
            ..RegistryConfig::default()
        };
        let reg = Registry::new(Arc::new(MemoryStore::new()), config);
        let answered = reg
            .create(bash("old"))
            .await
            .unwrap()
            .interaction
            .id
            .clone();
        reg.respond(&answered, Answer::allow(), Responder::anonymous(Via::api()))
            .await
            .unwrap();
        let open = reg.create(bash("open")).await.unwrap().interaction;
        assert!(open.deadline > now());
        let shutdown = CancellationToken::new();
        reg.spawn_background(shutdown.clone());
        tokio::time::sleep(Duration::from_secs(3600)).await;
        // Not expired at once, and the pruner kept the answered one.
        assert!(reg.get(&open.id).await.unwrap().unwrap().is_pending());
        assert!(reg.store().get(&answered).await.unwrap().is_some());
        shutdown.cancel();
    }

    #[tokio::test]
    async fn first_answer_wins_under_concurrency() {
        let reg = registry();
        let c = reg.create(bash("t1")).await.unwrap();
        let id = c.interaction.id.clone();
        let mut tasks = Vec::new();
        for n in 0..64 {
            let reg = reg.clone();
            let id = id.clone();
            tasks.push(tokio::spawn(async move {
                let answer = if n % 2 == 0 {
                    Answer::allow()
                } else {
                    Answer::deny(None)
                };
                reg.respond(&id, answer, Responder::new(format!("p{n}"), Via::api()))
                    .await
            }));
        }
        let mut wins = Vec::new();
        let mut losers = Vec::new();
        for t in tasks {
            match t.await.unwrap() {
                Ok(i) => wins.push(i),
                Err(RegistryError::AlreadyResolved(i)) => losers.push(i),
                Err(e) => panic!("unexpected error {e}"),
            }
        }
        assert_eq!(wins.len(), 1);
        assert_eq!(losers.len(), 63);
        for l in losers {
            assert_eq!(l.resolution, wins[0].resolution);
        }
    }

    #[tokio::test]
    async fn reattach_and_conflict() {
        let reg = registry();
        assert!(reg.create(bash("same")).await.unwrap().created);
        assert!(!reg.create(bash("same")).await.unwrap().created);
        let other = NewInteraction {
            id: Some("same".into()),
            ..NewInteraction::new("Bash", obj(json!({"command": "rm"})))
        };
        assert!(matches!(
            reg.create(other).await,
            Err(RegistryError::Conflict(_))
        ));
    }

    #[tokio::test(start_paused = true)]
    async fn expiry_denies_with_a_clear_message() {
        let reg = registry();
        let shutdown = CancellationToken::new();
        reg.spawn_background(shutdown.clone());
        let mut new = bash("exp");
        new.timeout_secs = Some(5);
        let id = reg.create(new).await.unwrap().interaction.id.clone();
        let waited = reg.wait(&id, Duration::from_secs(60)).await.unwrap();
        let resolved = waited.expect("expired before the wait ended");
        let r = resolved.resolution.as_ref().unwrap();
        assert_eq!(r.outcome, Outcome::Expired);
        assert_eq!(r.message(), Some("No response within 5 seconds"));
        assert_eq!(reg.pending_count(), 0);
        shutdown.cancel();
    }

    #[tokio::test(start_paused = true)]
    async fn expiry_never_overrides_an_earlier_answer() {
        let reg = registry();
        let shutdown = CancellationToken::new();
        reg.spawn_background(shutdown.clone());
        let mut new = bash("ans");
        new.timeout_secs = Some(5);
        let id = reg.create(new).await.unwrap().interaction.id.clone();
        reg.respond(&id, Answer::allow(), Responder::new("a", Via::desktop()))
            .await
            .unwrap();
        tokio::time::sleep(Duration::from_secs(10)).await;
        let after = reg.get(&id).await.unwrap().unwrap();
        assert_eq!(after.resolution.as_ref().unwrap().outcome, Outcome::Allowed);
        assert!(matches!(
            reg.expire(&id)
                .await
                .map(|i| i.resolution.clone().unwrap().outcome),
            Ok(Outcome::Allowed)
        ));
        shutdown.cancel();
    }

    #[tokio::test]
    async fn an_expiry_racing_an_answer_loses_in_the_store() {
        let dir = tempfile::tempdir().unwrap();
        let store = crate::store::SqliteStore::open(
            dir.path().join("race.db"),
            crate::store::Synchronous::Normal,
        )
        .unwrap();
        let reg = Registry::new(Arc::new(store), RegistryConfig::default());
        let mut new = bash("race");
        new.timeout_secs = Some(1);
        let id = reg.create(new).await.unwrap().interaction.id.clone();
        // The deadline timer read the interaction while it was still pending ...
        let seen_by_timer = reg.get(&id).await.unwrap().unwrap();
        let (_, mut events) = reg.events().subscribe();
        // ... an answer arrives right at the deadline and wins ...
        reg.respond(&id, Answer::allow(), Responder::new("a", Via::api()))
            .await
            .unwrap();
        // ... and the expiry, built from that stale read, reaches the store second.
        let at = now();
        match reg
            .settle(seen_by_timer, None, |i| Ok(answer::expired(i, at)))
            .await
        {
            Err(RegistryError::AlreadyResolved(winner)) => assert_eq!(
                winner.resolution.as_ref().unwrap().outcome,
                Outcome::Allowed
            ),
            other => panic!("the expiry was not refused: {other:?}"),
        }
        let stored = reg.store().get(&id).await.unwrap().unwrap();
        assert_eq!(
            stored.resolution.as_ref().unwrap().outcome,
            Outcome::Allowed
        );
        // One resolution, announced once.
        let mut resolved = 0;
        while let Some(crate::interaction::Next::Event(e)) = events.try_next() {
            assert_eq!(e.kind, EventKind::Resolved);
            resolved += 1;
        }
        assert_eq!(resolved, 1);
    }

    #[tokio::test]
    async fn wait_returns_pending_on_timeout_and_not_found_for_unknown() {
        let reg = registry();
        let id = reg.create(bash("w")).await.unwrap().interaction.id.clone();
        assert!(
            reg.wait(&id, Duration::from_millis(10))
                .await
                .unwrap()
                .is_none()
        );
        let unknown = InteractionId::parse("nope").unwrap();
        assert!(matches!(
            reg.wait(&unknown, Duration::from_millis(10)).await,
            Err(RegistryError::NotFound(_))
        ));
    }

    /// Counts long polls by outcome.
    #[derive(Default)]
    struct LongPolls(Mutex<Vec<LongPoll>>);

    impl Lifecycle for LongPolls {
        fn long_poll(&self, outcome: LongPoll) {
            self.0.locked().push(outcome);
        }
    }

    #[tokio::test(flavor = "current_thread")]
    async fn long_polls_report_how_they_ended() {
        let reg = registry();
        let seen = Arc::new(LongPolls::default());
        reg.add_hook(seen.clone());
        let id = reg.create(bash("lp")).await.unwrap().interaction.id.clone();
        assert!(
            reg.wait(&id, Duration::from_millis(1))
                .await
                .unwrap()
                .is_none()
        );
        let waiting = tokio::spawn({
            let (reg, id) = (reg.clone(), id.clone());
            async move { reg.wait(&id, Duration::from_secs(30)).await }
        });
        // One thread: the waiter runs until it parks before the answer below.
        tokio::task::yield_now().await;
        reg.respond(&id, Answer::allow(), Responder::new("a", Via::api()))
            .await
            .unwrap();
        assert!(waiting.await.unwrap().unwrap().is_some());
        assert!(
            reg.wait(&id, Duration::from_secs(30))
                .await
                .unwrap()
                .is_some()
        );
        assert_eq!(
            *seen.0.locked(),
            [LongPoll::TimedOut, LongPoll::Woken, LongPoll::Ready]
        );
    }

    #[tokio::test]
    async fn many_waiters_all_wake() {
        let reg = registry();
        let id = reg
            .create(bash("many"))
            .await
            .unwrap()
            .interaction
            .id
            .clone();
        let waiters: Vec<_> = (0..100)
            .map(|_| {
                let reg = reg.clone();
                let id = id.clone();
                tokio::spawn(async move { reg.wait(&id, Duration::from_secs(30)).await })
            })
            .collect();
        tokio::task::yield_now().await;
        reg.cancel(&id, None, None).await.unwrap();
        for w in waiters {
            let got = w.await.unwrap().unwrap().unwrap();
            assert_eq!(got.resolution.as_ref().unwrap().outcome, Outcome::Cancelled);
        }
    }

    #[tokio::test]
    async fn resolved_interactions_leave_the_deadline_queue() {
        let reg = registry();
        for n in 0..50 {
            let id = reg
                .create(bash(&format!("dq{n}")))
                .await
                .unwrap()
                .interaction
                .id
                .clone();
            if n % 2 == 0 {
                reg.respond(&id, Answer::allow(), Responder::anonymous(Via::api()))
                    .await
                    .unwrap();
            }
        }
        assert_eq!(reg.pending_count(), 25);
        assert_eq!(reg.scheduled_deadlines(), 25);
    }

    #[tokio::test]
    async fn timeouts_are_clamped() {
        let reg = registry();
        let mut new = bash("clamp");
        new.timeout_secs = Some(1_000_000);
        let i = reg.create(new).await.unwrap().interaction;
        assert_eq!(i.timeout_secs, 3600);
        let mut zero = bash("zero");
        zero.timeout_secs = Some(0);
        assert!(matches!(
            reg.create(zero).await,
            Err(RegistryError::Invalid(_))
        ));
        let q = NewInteraction::new(
            "AskUserQuestion",
            obj(
                json!({"questions":[{"question":"q","header":"h","options":[{"label":"a"},{"label":"b"}]}]}),
            ),
        );
        assert_eq!(reg.create(q).await.unwrap().interaction.timeout_secs, 600);
    }

    #[tokio::test]
    async fn invalid_questions_are_refused_with_the_field() {
        let reg = registry();
        let q = NewInteraction::new(
            "AskUserQuestion",
            obj(json!({"questions":[{"question":"q","header":"h","options":[{"label":"a"}]}]})),
        );
        match reg.create(q).await {
            Err(RegistryError::Invalid(e)) => {
                assert_eq!(
                    e.to_string(),
                    "questions[0].options: expected 2 to 4 options, got 1"
                )
            }
            other => panic!("unexpected {other:?}"),
        }
        assert_eq!(reg.pending_count(), 0);
    }
}
