//! What every agent adapter shares: the calls waiting on each interaction ([`HookCalls`]:
//! re-attaching a retried or parallel call, withdrawing the interaction when the agent's side
//! goes away), derived stable ids and their generations ([`derived_base`],
//! [`create_generation`]), and waiting for the answer within the adapter's deadline
//! ([`wait`]).
//!
//! Derived ids: an agent that gives no id imrelay can rely on gets one derived from what
//! identifies the call (its session, tool or server, input; `<prefix>-<hash>`). If that
//! interaction was already answered, or is being withdrawn, the next generation
//! (`<prefix>-<hash>.2`, ...) is used, so repeating the same call later asks again instead of
//! replaying the old answer. The latest generation of each derived id is remembered in the
//! store, so finding it takes a read or two (not one per earlier generation) and survives
//! restarts. The memory is a value bound to that generation's interaction
//! ([`crate::store::BOUND_VALUE_PREFIX`]): pruning removes it with the interaction, so it does
//! not grow with every call ever asked about. Generations are resolved in order, so by then
//! every earlier one is normally gone too, and the next request starts again at the first
//! generation: an id is never taken while an interaction has it, and channels tell a reused
//! id's new interaction from the old one by its creation time.
//!
//! Withdrawal: an agent closes a hook call's connection (or kills the hook command that holds
//! it) when it no longer needs the answer. The interaction is then cancelled at once, so every
//! copy on every channel says so instead of asking on, unless another call still waits for it:
//! identical requests in flight at once share one interaction.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use prometheus_client::metrics::gauge::Gauge;
use serde_json::value::RawValue;
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};
use tokio_util::sync::CancellationToken;

use crate::interaction::{
    Full, Interaction, InteractionId, NewInteraction, Outcome, Registry, RegistryError,
    ValidationError, canonical_json,
};
use crate::metrics::Metrics;
use crate::store::BOUND_VALUE_PREFIX;
use crate::sync::LockExt;
use crate::wire::error::ApiError;

/// Who withdraws an abandoned call, and what every channel is told.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Abandoned {
    /// The agent, named as the cancellation's `by` (`claude-code`, `codex`).
    pub by: &'static str,
    /// The cancellation message.
    pub reason: &'static str,
}

/// The hook calls waiting on each interaction in this process, of every agent.
///
/// A call that its agent abandons withdraws its interaction, unless another call still
/// waits for it; while the withdrawal is under way no call attaches to the interaction, so an
/// identical request asks anew rather than inheriting the cancellation. Entries exist only
/// while a call waits or a withdrawal runs.
pub struct HookCalls {
    waiting: Mutex<HashMap<InteractionId, Waiting>>,
    gauge: Gauge,
}

/// The state of one interaction's hook calls.
enum Waiting {
    /// This many calls wait for the answer.
    Calls(usize),
    /// Every call left before the answer; the interaction is being cancelled.
    Withdrawing,
}

impl HookCalls {
    /// No calls yet; registers the `imrelay_hook_calls_waiting` gauge with `metrics`.
    pub fn new(metrics: &Metrics) -> Arc<Self> {
        let gauge = Gauge::default();
        metrics.register(
            "imrelay_hook_calls_waiting",
            "Agent hook calls (Claude Code, Codex) waiting for an answer",
            gauge.clone(),
        );
        Arc::new(Self {
            waiting: Mutex::new(HashMap::new()),
            gauge,
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<InteractionId, Waiting>> {
        self.waiting.locked()
    }

    /// Registers a call waiting on `id`, withdrawn as `abandoned` says if it is dropped
    /// unfinished; `None` while `id` is being withdrawn.
    pub fn attach(
        self: &Arc<Self>,
        registry: &Registry,
        id: &InteractionId,
        abandoned: Abandoned,
    ) -> Option<Attached> {
        let mut waiting = self.lock();
        match waiting.entry(id.clone()).or_insert(Waiting::Calls(0)) {
            Waiting::Withdrawing => return None,
            Waiting::Calls(n) => *n += 1,
        }
        self.gauge.inc();
        Some(Attached {
            calls: self.clone(),
            registry: registry.clone(),
            id: id.clone(),
            abandoned,
            finished: false,
        })
    }

    /// The withdrawal of `id` is over: calls may attach to it again (it is resolved now, so
    /// they only read the outcome).
    fn withdrawn(&self, id: &InteractionId) {
        let mut waiting = self.lock();
        if matches!(waiting.get(id), Some(Waiting::Withdrawing)) {
            waiting.remove(id);
        }
    }
}

/// One hook call's hold on its interaction. Dropped before [`Attached::finish`], the call was
/// abandoned: if it was the last one waiting, the interaction is withdrawn everywhere.
pub struct Attached {
    calls: Arc<HookCalls>,
    registry: Registry,
    id: InteractionId,
    abandoned: Abandoned,
    finished: bool,
}

impl Attached {
    /// The call ended with a reply (answered, expired, or handed back at shutdown).
    pub fn finish(mut self) {
        self.finished = true;
    }
}

impl Drop for Attached {
    fn drop(&mut self) {
        self.calls.gauge.dec();
        let mut waiting = self.calls.lock();
        let Some(Waiting::Calls(n)) = waiting.get_mut(&self.id) else {
            return;
        };
        *n = n.saturating_sub(1);
        if *n > 0 {
            return;
        }
        if self.finished {
            waiting.remove(&self.id);
            return;
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            waiting.remove(&self.id);
            return;
        };
        waiting.insert(self.id.clone(), Waiting::Withdrawing);
        drop(waiting);
        let (calls, registry, id) = (self.calls.clone(), self.registry.clone(), self.id.clone());
        let Abandoned { by, reason } = self.abandoned;
        runtime.spawn(async move {
            match registry
                .cancel(&id, Some(reason.to_string()), Some(by.to_string()))
                .await
            {
                Ok(_) | Err(RegistryError::AlreadyResolved(_) | RegistryError::NotFound(_)) => {}
                Err(e) => {
                    tracing::warn!(id = %id, error = %e, "cannot withdraw an abandoned hook call");
                }
            }
            calls.withdrawn(&id);
        });
    }
}

/// The store value that remembers the latest generation of derived id `base` for the adapter
/// `adapter` (`claude_code`, `codex`): the id of that generation, kept as long as its
/// interaction is.
fn latest_key(adapter: &str, base: &str) -> String {
    format!("{BOUND_VALUE_PREFIX}hooks.{adapter}.latest:{base}")
}

/// Generation `generation` of derived id `base`.
fn generation_id(base: &str, generation: u64) -> String {
    if generation == 1 {
        base.to_string()
    } else {
        format!("{base}.{generation}")
    }
}

/// Which generation of `base` the id `id` is.
fn generation_of(base: &str, id: &str) -> Option<u64> {
    if id == base {
        return Some(1);
    }
    id.strip_prefix(base)?
        .strip_prefix('.')?
        .parse::<u64>()
        .ok()
        .filter(|g| *g >= 2)
}

/// A derived id: `<prefix>-` and 32 hex digits of SHA-256 over `parts` (each ended by a zero
/// byte) and `input` in canonical JSON, so the same call gets the same id whatever the order
/// of its input's keys.
pub fn derived_base(prefix: &str, parts: &[&str], input: &Map<String, Value>) -> String {
    let mut h = Sha256::new();
    for part in parts {
        h.update(part.as_bytes());
        h.update([0]);
    }
    h.update(canonical_json(&Value::Object(input.clone())).as_bytes());
    format!("{prefix}-{}", &hex::encode(h.finalize())[..32])
}

/// What a derived-id interaction belongs to: the adapter's name in the store's memory of
/// generations, and how its abandoned calls are withdrawn.
#[derive(Clone, Copy, Debug)]
pub struct Generations {
    /// The adapter's key in the store (`claude_code`, `codex`).
    pub adapter: &'static str,
    /// How an abandoned call is withdrawn.
    pub abandoned: Abandoned,
}

/// Creates the first unanswered generation of a derived id, or re-attaches to a pending one,
/// and registers the call as waiting on it.
///
/// The walk starts at the remembered latest generation (the first if none is remembered)
/// and moves past answered ones, and past one being withdrawn (the agent dropped it a moment
/// ago, so this request is a new one). A remembered generation that is gone was pruned a
/// moment ago (its memory goes in the same prune): the walk moves past it too.
///
/// The interaction counts against `owner`'s pending budget (the agent token, as
/// [`crate::wire::Principal::owner`] names it); past it the error is [`Refused::Full`], for
/// the adapter to answer in its agent's own way.
pub async fn create_generation(
    registry: &Registry,
    calls: &Arc<HookCalls>,
    of: Generations,
    base: &str,
    owner: &str,
    new: NewInteraction,
) -> Result<(Arc<Interaction>, Attached), Refused> {
    let store = registry.store();
    let key = latest_key(of.adapter, base);
    let remembered = store
        .get_value(&key)
        .await?
        .and_then(|v| generation_of(base, &v));
    let mut generation = remembered.unwrap_or(1);
    loop {
        let id = generation_id(base, generation);
        let parsed = InteractionId::parse(&id)?;
        match registry.get(&parsed).await? {
            Some(existing) if !existing.is_pending() => {
                generation = generation.saturating_add(1);
                continue;
            }
            None if remembered == Some(generation) => {
                generation = generation.saturating_add(1);
                continue;
            }
            _ => {}
        }
        match registry
            .create_for(
                NewInteraction {
                    id: Some(id),
                    ..new.clone()
                },
                Some(owner),
            )
            .await
        {
            Ok(c) if c.interaction.is_pending() || c.created => {
                let Some(attached) = calls.attach(registry, &c.interaction.id, of.abandoned) else {
                    generation = generation.saturating_add(1);
                    continue;
                };
                if remembered != Some(generation)
                    && let Err(e) = store
                        .set_value(&key, Some(c.interaction.id.to_string()))
                        .await
                {
                    // The interaction exists; a stale memory only means a longer walk later.
                    tracing::warn!(id = %c.interaction.id, error = %e, "could not remember the latest generation of a derived id");
                }
                return Ok((c.interaction, attached));
            }
            // Answered between the look-up and the create, or the id was taken by a different
            // request: take the next generation.
            Ok(_) | Err(RegistryError::Conflict(_)) => generation = generation.saturating_add(1),
            Err(e) => return Err(e.into()),
        }
    }
}

/// Why a hook call's interaction was not created.
pub enum Refused {
    /// The pending interactions of its agent token, or of all, hold all they may: nobody
    /// can be asked, and the adapter hands the decision back to its agent.
    Full(Full),
    /// Any other failure, answered as an API error.
    Other(ApiError),
}

impl From<RegistryError> for Refused {
    fn from(e: RegistryError) -> Self {
        match e {
            RegistryError::Full(full) => Refused::Full(full),
            other => Refused::Other(other.into()),
        }
    }
}

impl From<crate::store::StoreError> for Refused {
    fn from(e: crate::store::StoreError) -> Self {
        Refused::Other(e.into())
    }
}

impl From<ValidationError> for Refused {
    fn from(e: ValidationError) -> Self {
        Refused::Other(e.into())
    }
}

impl From<Refused> for ApiError {
    fn from(r: Refused) -> Self {
        match r {
            Refused::Full(full) => RegistryError::Full(full).into(),
            Refused::Other(e) => e,
        }
    }
}

/// Field `name` of a hook input for `event` read as a `T`; absent or `null` is `None`.
pub fn field<T: serde::de::DeserializeOwned>(
    raw: &Option<Box<RawValue>>,
    name: &str,
    expected: &str,
    event: &str,
) -> Result<Option<T>, ValidationError> {
    raw.as_deref()
        .map(|r| serde_json::from_str::<Option<T>>(r.get()))
        .transpose()
        .map(Option::flatten)
        .map_err(|_| ValidationError::new(name, format!("expected {expected} in {event} input")))
}

/// Reads the fields of one hook event's input, naming the event in every error.
#[derive(Clone, Copy, Debug)]
pub struct Fields<'a> {
    /// The event (`PreToolUse`, ...).
    pub event: &'a str,
}

impl Fields<'_> {
    /// The error for a missing field `what`.
    pub fn required(&self, what: &str) -> ValidationError {
        ValidationError::new(what, format!("is required in {} input", self.event))
    }

    /// Field `what` as a string; absent or `null` is `None`.
    pub fn string(
        &self,
        raw: &Option<Box<RawValue>>,
        what: &str,
    ) -> Result<Option<String>, ValidationError> {
        field::<String>(raw, what, "a string", self.event)
    }

    /// `tool_name`: a string, required and not empty.
    pub fn tool_name(&self, raw: &Option<Box<RawValue>>) -> Result<String, ValidationError> {
        self.string(raw, "tool_name")?
            .filter(|t| !t.is_empty())
            .ok_or_else(|| self.required("tool_name"))
    }

    /// `tool_input` as its JSON text, required and not `null`.
    pub fn tool_input<'r>(
        &self,
        raw: &'r Option<Box<RawValue>>,
    ) -> Result<&'r RawValue, ValidationError> {
        raw.as_deref()
            .filter(|r| r.get() != "null")
            .ok_or_else(|| self.required("tool_input"))
    }
}

/// How waiting for an answer ended.
pub enum Waited {
    /// Resolved: answered, or expired at the adapter's deadline.
    Resolved(Arc<Interaction>),
    /// imrelay is shutting down: the interaction was withdrawn with `reason` (or had been
    /// resolved a moment before, as `resolved` holds).
    ShutDown {
        /// The interaction as it ended.
        resolved: Arc<Interaction>,
        /// The withdrawal's message.
        reason: String,
    },
}

impl Waited {
    /// The interaction whose resolution answers the agent: the resolved one, or one answered
    /// a moment before shutdown; else, when it was withdrawn at shutdown (the agent will not
    /// come back for this answer), the withdrawal's message.
    pub fn answer(self) -> Result<Arc<Interaction>, String> {
        match self {
            Waited::Resolved(i) => Ok(i),
            Waited::ShutDown { resolved, reason } => {
                if resolved
                    .resolution
                    .as_ref()
                    .is_some_and(|r| r.outcome != Outcome::Cancelled)
                {
                    Ok(resolved)
                } else {
                    Err(reason)
                }
            }
        }
    }
}

/// Waits for the answer to `id` for at most `wait` (then expires it), or until `shutdown`
/// fires (then withdraws it everywhere: the agent will not come back for this answer).
pub async fn wait(
    registry: &Registry,
    shutdown: &CancellationToken,
    id: &InteractionId,
    wait: Duration,
) -> Result<Waited, ApiError> {
    let waited = tokio::select! {
        r = registry.wait(id, wait) => r?,
        _ = shutdown.cancelled() => {
            let reason = "imrelay shut down before anyone answered".to_string();
            let resolved = match registry.cancel(id, Some(reason.clone()), None).await {
                Ok(i) | Err(RegistryError::AlreadyResolved(i)) => i,
                Err(e) => return Err(e.into()),
            };
            return Ok(Waited::ShutDown { resolved, reason });
        }
    };
    Ok(Waited::Resolved(match waited {
        Some(i) => i,
        None => registry.expire(id).await?,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::interaction::RegistryConfig;
    use crate::store::MemoryStore;
    use serde_json::json;

    const ABANDONED: Abandoned = Abandoned {
        by: "claude-code",
        reason: "Answered in Claude Code, or abandoned there",
    };

    async fn pending(registry: &Registry, id: &str) -> InteractionId {
        let new = NewInteraction {
            id: Some(id.into()),
            ..NewInteraction::new("Bash", Map::new())
        };
        registry.create(new).await.unwrap().interaction.id.clone()
    }

    /// Lets spawned tasks run until no withdrawal is under way.
    async fn settle(calls: &HookCalls) {
        for _ in 0..1000 {
            if calls.lock().is_empty() {
                return;
            }
            tokio::task::yield_now().await;
        }
        panic!("a withdrawal never finished");
    }

    // One thread: the withdrawal spawned by the last drop runs only when the test yields.
    #[tokio::test(flavor = "current_thread")]
    async fn the_last_call_to_leave_withdraws_and_nothing_attaches_meanwhile() {
        let registry = Registry::new(Arc::new(MemoryStore::new()), RegistryConfig::default());
        let calls = HookCalls::new(&Metrics::new());
        let id = pending(&registry, "cc-shared").await;
        let first = calls.attach(&registry, &id, ABANDONED).unwrap();
        let second = calls.attach(&registry, &id, ABANDONED).unwrap();
        assert_eq!(calls.gauge.get(), 2);
        // One of two identical calls leaves: the other still waits for the answer.
        drop(first);
        settle_a_little().await;
        assert!(registry.get(&id).await.unwrap().unwrap().is_pending());
        // The last one leaves: from now on nothing attaches until it is withdrawn.
        drop(second);
        assert_eq!(calls.gauge.get(), 0);
        assert!(calls.attach(&registry, &id, ABANDONED).is_none());
        settle(&calls).await;
        let withdrawn = registry.get(&id).await.unwrap().unwrap();
        let r = withdrawn.resolution.as_ref().unwrap();
        assert_eq!(r.outcome, Outcome::Cancelled);
        assert_eq!(
            r.message(),
            Some("Answered in Claude Code, or abandoned there")
        );
        assert_eq!(r.by.as_deref(), Some("claude-code"));
        // A call that finishes with a reply withdraws nothing, and leaves no entry behind.
        let other = pending(&registry, "cc-answered").await;
        calls.attach(&registry, &other, ABANDONED).unwrap().finish();
        assert!(calls.lock().is_empty());
        settle_a_little().await;
        assert!(registry.get(&other).await.unwrap().unwrap().is_pending());
    }

    /// Gives spawned tasks a chance to run (none should have been spawned).
    async fn settle_a_little() {
        for _ in 0..10 {
            tokio::task::yield_now().await;
        }
    }

    #[test]
    fn derived_ids_are_stable_and_valid() {
        let input = json!({"command":"ls","b":1}).as_object().cloned().unwrap();
        let a = derived_base("cc", &["s1", "Bash"], &input);
        let b = derived_base("cc", &["s1", "Bash"], &input);
        assert_eq!(a, b);
        assert_ne!(a, derived_base("cc", &["s2", "Bash"], &input));
        let reordered = json!({"b":1,"command":"ls"}).as_object().cloned().unwrap();
        assert_eq!(a, derived_base("cc", &["s1", "Bash"], &reordered));
        assert!(InteractionId::parse(&a).is_ok());
        assert!(InteractionId::parse(&format!("{a}.{}", u64::MAX)).is_ok());
    }

    #[test]
    fn generation_ids_round_trip() {
        let base = "cc-0123456789abcdef0123456789abcdef";
        for g in [1, 2, 50_000, u64::MAX] {
            assert_eq!(generation_of(base, &generation_id(base, g)), Some(g));
        }
        for other in [
            "cc-0123456789abcdef0123456789abcdee",
            "cc-0123456789abcdef0123456789abcdef.1",
            "cc-0123456789abcdef0123456789abcdef.x",
            "cc-0123456789abcdef0123456789abcdef2",
            "3",
        ] {
            assert_eq!(generation_of(base, other), None, "{other}");
        }
    }
}
