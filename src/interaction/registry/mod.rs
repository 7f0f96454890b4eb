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
//! Here: the registry's state, its lifecycle hooks, and answering (first answer wins:
//! respond, cancel, expire). Beside it: `validate` (what a new interaction must be, and its
//! timeout), `create` (a new interaction written and announced, or re-attached to),
//! `slots` (pending interactions held in memory with their waiters), `reads` (get, list,
//! pending pages, wait), `refused` (answer attempts refused, recorded), `recover`
//! (start-up), `records` (the audit records and log line of each change), `deadlines` (the
//! expiry timer and the retention pruner), `escalation` (a route's escalation, once),
//! `votes` (the vote step for an approval that needs several people), `sessions` (agent
//! sessions: reported, listed, sent messages), `grants` and `policy`
//! (weighed at creation), `budget` (the bytes pending interactions may hold) and `cluster`
//! (changes made by other processes on a shared store).

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use tokio::sync::Notify;

use super::ValidationError;
use super::answer::{self, Answer, Responder};
use super::events::{EventKind, EventLog};
use super::model::{Interaction, InteractionId, Resolution, now};
use super::ports::{Effects, OutboxJob, ResolveOutcome, Store, StoreError};
use crate::sync::{LockExt, RwLockExt};

mod budget;
mod cluster;
mod create;
mod deadlines;
mod escalation;
mod grants;
mod policy;
mod reads;
mod records;
mod recover;
mod refused;
mod sessions;
mod slots;
mod texts;
mod validate;
mod votes;

use budget::Budget;
pub use budget::Full;
use deadlines::Deadlines;
pub use grants::{GrantRequest, Grantor};
pub use policy::{POLICY_VIA, audit_outcome, describe};
use records::{clip, log_resolution, resolved_record};
pub use refused::Unrecorded;
pub use sessions::{FinishSettings, MAX_SESSIONS, SessionReport, SessionView};
use slots::Slot;
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
    /// The id is another client's interaction (another agent token's): nothing of it is
    /// told, and nothing changed.
    #[error("interaction id {0} is in use by another client: choose another id")]
    Taken(InteractionId),
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
    /// No agent session is kept under this agent and id (never seen, or pruned): what it
    /// says, with both made printable.
    #[error("{0}")]
    SessionNotFound(String),
    /// Who asked may not do this (make or revoke a grant beyond the routes they approve);
    /// the refusal was recorded. Nothing changed.
    #[error("{0}")]
    Forbidden(String),
    /// The answer was recorded as a vote on an approval that needs several people, and the
    /// votes do not decide it yet: the interaction, still pending, with the votes so far.
    #[error("vote recorded on interaction {}: {}", .0.id, super::quorum::tally(.0).unwrap_or_default())]
    Voted(Arc<Interaction>),
    /// The attempt was refused, and its refusal could not be written to the audit trail:
    /// nothing changed, and whoever sent it may try again.
    #[error(transparent)]
    Unrecorded(#[from] Unrecorded),
    /// This person voted on the interaction already (from this or another channel): their
    /// vote, and the interaction as it is. Nothing changed.
    #[error("{} already voted on interaction {} ({} via {})", .0.by, .1.id, if .0.allow { "allow" } else { "deny" }, .0.via)]
    AlreadyVoted(Box<super::quorum::Vote>, Arc<Interaction>),
    /// The interaction's route (or an ask rule) needs a passkey: an answer counts only with
    /// an assertion made in the inbox. The refusal was recorded; nothing changed.
    #[error("interaction {} needs a passkey (step_up on route {}): answer it in the inbox", .0.id, super::routes::route_name(.0))]
    StepUpRequired(Arc<Interaction>),
}

/// Whether an answer came with a passkey assertion its receiver verified.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum StepUp {
    /// Without one (a chat, a webhook, the API).
    Without,
    /// With one, verified.
    Verified,
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
    /// Called after a person's message to an agent session was queued (`outcome`
    /// `queued`) or handed to its agent (`delivered`); `via` is where it came from.
    fn steered(&self, _via: &str, _outcome: &str) {}
    /// Called after an agent session's record changed (by the process the adapter reported
    /// it to), with the record as kept.
    fn session_reported(&self, _session: &crate::interaction::sessions::Session) {}
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
    /// Who is at the desk ("desk first").
    presence: super::presence::Presence,
    /// How many resolutions found no local slot. Bumped under the `slots` lock, so
    /// [`Registry::create`] can tell whether its own interaction may have been resolved
    /// between the store's commit and the slot's insertion, and only then re-read it.
    untracked_resolutions: AtomicU64,
    /// Bounds what refusals not bound to an interaction write (see [`Registry::refused`]).
    refusals: super::RefusalLimiter,
    /// Bounds how fast one person sends messages to agent sessions (`sessions`).
    messages: super::RefusalLimiter,
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
    /// The agent, session and directory texts, one copy shared by the interactions that
    /// repeat them.
    texts: texts::SharedTexts,
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
                texts: Default::default(),
                config,
                slots: Mutex::new(HashMap::default()),
                deadlines: Mutex::new(Deadlines::default()),
                deadline_changed: Notify::new(),
                escalations: Default::default(),
                events,
                hooks: RwLock::new(Vec::new()),
                presence: Default::default(),
                untracked_resolutions: AtomicU64::new(0),
                resolving: Mutex::new(HashMap::default()),
                refusals: super::RefusalLimiter::default(),
                messages: sessions::message_limiter(),
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

    /// Who is at the desk: the inbox and `imrelay watch` report here ("desk first").
    pub fn presence(&self) -> &super::presence::Presence {
        &self.inner.presence
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
        self.respond_as(id, answer, responder, StepUp::Without)
            .await
    }

    /// [`Registry::respond`] with a passkey assertion the caller verified (the inbox's): the
    /// one way to answer an interaction that needs `step_up`.
    pub async fn respond_with_passkey(
        &self,
        id: &InteractionId,
        answer: Answer,
        responder: Responder,
    ) -> Result<Arc<Interaction>, RegistryError> {
        self.respond_as(id, answer, responder, StepUp::Verified)
            .await
    }

    /// Whether `current` needs a passkey this answer lacks (refused, the refusal recorded),
    /// or an `always` the passkey would not cover later.
    async fn check_step_up(
        &self,
        current: &Arc<Interaction>,
        answer: &Answer,
        responder: &Responder,
        step_up: StepUp,
    ) -> Result<(), RegistryError> {
        if !super::routes::needs_step_up(current) || !current.is_pending() {
            return Ok(());
        }
        if step_up == StepUp::Without {
            self.refused(
                Some(&current.id),
                &clip(&responder.audit_actor().unwrap_or_default()),
                &responder.via,
                "needs a passkey (step_up): answer it in the inbox",
            )
            .await?;
            return Err(RegistryError::StepUpRequired(current.clone()));
        }
        if matches!(answer, Answer::Allow { always: true, .. }) {
            // "Always" would let later calls through without a passkey.
            return Err(ValidationError::new(
                "always",
                "this approval needs a passkey: it cannot allow similar calls for good",
            )
            .into());
        }
        Ok(())
    }

    async fn respond_as(
        &self,
        id: &InteractionId,
        answer: Answer,
        responder: Responder,
        step_up: StepUp,
    ) -> Result<Arc<Interaction>, RegistryError> {
        let responder = self.attribute(responder);
        let current = self.current(id).await?;
        self.check_step_up(&current, &answer, &responder, step_up)
            .await?;
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
            .await?;
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
                self.refused(Some(id), &who, &via, &reason).await?;
            }
            Err(RegistryError::Invalid(e)) => {
                self.refused(Some(id), &who, &via, &format!("invalid answer: {e}"))
                    .await?;
            }
            _ => {}
        }
        result
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
}

#[cfg(test)]
mod phone_tests;
#[cfg(test)]
mod tests;
