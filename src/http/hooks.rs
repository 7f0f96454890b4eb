//! `POST /v1/hooks/claude-code`: a Claude Code HTTP hook.
//!
//! Claude Code posts `PreToolUse` or `PermissionRequest` input (a tool call), or
//! `Elicitation` input (an MCP server's form); imrelay creates (or re-attaches to) the
//! interaction, waits for an answer, and replies with the matching `hookSpecificOutput`
//! before Claude Code's own hook timeout. Other hook events, and URL-mode elicitations, get
//! `{}` (no opinion).
//!
//! Ids: `PreToolUse` uses `tool_use_id`. `PermissionRequest` and `Elicitation` have none
//! imrelay can rely on, so the id is derived from the session, tool (or MCP server) and input
//! (`cc-<hash>`); if that interaction was already answered,
//! or is being withdrawn, the next generation (`cc-<hash>.2`, ...) is used, so repeating the
//! same command later in a session asks again instead of replaying the old answer. The latest
//! generation of each derived id is remembered in the store, so finding it takes a read or
//! two (not one per earlier generation) and survives restarts. The memory is a value bound to
//! that generation's interaction ([`crate::store::BOUND_VALUE_PREFIX`]): pruning removes it
//! with the interaction, so it does not grow with every command ever asked about. Generations
//! are resolved in order, so by then every earlier one is normally gone too, and the next
//! request starts again at the first generation: an id is never taken while an interaction
//! has it, and channels tell a reused id's new interaction from the old one by its creation
//! time.
//!
//! Withdrawal: Claude Code closes a hook call's connection when it no longer needs the answer
//! (for `PermissionRequest`, the person answered Claude Code's own dialog, which it shows at
//! the same time, or pressed Esc; for either event, the turn was interrupted or its hook
//! timeout passed). The interaction is then cancelled at once, so every copy on every channel
//! says so instead of asking on, unless another call still waits for it: two identical
//! requests in flight at once (parallel tool calls) share one interaction ([`HookCalls`]).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::Response;
use prometheus_client::metrics::gauge::Gauge;
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

use super::AppState;
use super::api::json_response;
use super::error::ApiError;
use super::extract::ApiJson;
use crate::config::OnTimeout;
use crate::interaction::{
    AgentResult, ElicitAction, FORM_TOOL, Form, Full, Input, Interaction, InteractionId, Kind,
    NewInteraction, Outcome, PermissionResult, Registry, RegistryError, ValidationError,
    canonical_json, valid_suggestions,
};
use crate::metrics::Metrics;
use crate::store::BOUND_VALUE_PREFIX;
use crate::sync::LockExt;
use crate::wire::Principal;

/// The Claude Code hook calls waiting on each interaction in this process.
///
/// A call that Claude Code abandons withdraws its interaction, unless another call still
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
            "Claude Code hook calls waiting for an answer",
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

    /// Registers a call of `event` waiting on `id`, or `None` while `id` is being withdrawn.
    fn attach(
        self: &Arc<Self>,
        registry: &Registry,
        id: &InteractionId,
        event: Event,
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
            event,
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
struct Attached {
    calls: Arc<HookCalls>,
    registry: Registry,
    id: InteractionId,
    event: Event,
    finished: bool,
}

impl Attached {
    /// The call ended with a reply (answered, expired, or handed back at shutdown).
    fn finish(mut self) {
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
        let reason = self.event.abandoned().to_string();
        runtime.spawn(async move {
            match registry
                .cancel(&id, Some(reason), Some("claude-code".into()))
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

/// The store value that remembers the latest generation of derived id `base`: the id of that
/// generation, kept as long as its interaction is.
fn latest_key(base: &str) -> String {
    format!("{BOUND_VALUE_PREFIX}hooks.claude_code.latest:{base}")
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

/// The fields imrelay reads from a hook input (others are ignored), each as its JSON text:
/// the event name decides whether the others are read at all, and `tool_input` is kept as
/// Claude Code wrote it.
#[derive(Debug, Deserialize)]
pub struct HookBody {
    hook_event_name: Option<Box<RawValue>>,
    session_id: Option<Box<RawValue>>,
    cwd: Option<Box<RawValue>>,
    tool_name: Option<Box<RawValue>>,
    tool_input: Option<Box<RawValue>>,
    tool_use_id: Option<Box<RawValue>>,
    permission_suggestions: Option<Box<RawValue>>,
    agent_type: Option<Box<RawValue>>,
    mcp_server_name: Option<Box<RawValue>>,
    message: Option<Box<RawValue>>,
    mode: Option<Box<RawValue>>,
    requested_schema: Option<Box<RawValue>>,
}

/// Field `name` of a hook input for `event` read as a `T`; absent or `null` is `None`.
fn field<T: serde::de::DeserializeOwned>(
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

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Event {
    PreToolUse,
    PermissionRequest,
    Elicitation,
}

impl Event {
    fn name(self) -> &'static str {
        match self {
            Event::PreToolUse => "PreToolUse",
            Event::PermissionRequest => "PermissionRequest",
            Event::Elicitation => "Elicitation",
        }
    }

    /// The cancellation message when Claude Code drops a call of this event unanswered.
    fn abandoned(self) -> &'static str {
        match self {
            Event::PreToolUse | Event::Elicitation => "Claude Code stopped waiting for this answer",
            // Claude Code shows its own dialog beside the hook and drops the hook when the
            // person answers or dismisses it there.
            Event::PermissionRequest => "Answered in Claude Code, or abandoned there",
        }
    }
}

fn derived_base(session: &str, tool: &str, input: &Map<String, Value>) -> String {
    let mut h = Sha256::new();
    h.update(session.as_bytes());
    h.update([0]);
    h.update(tool.as_bytes());
    h.update([0]);
    h.update(canonical_json(&Value::Object(input.clone())).as_bytes());
    format!("cc-{}", &hex::encode(h.finalize())[..32])
}

/// `POST /v1/hooks/claude-code`: counted against the pending budget of the agent token it
/// came with, like the API's creations ([`Principal::owner`]).
pub async fn claude_code(
    State(state): State<AppState>,
    principal: Principal,
    ApiJson(hook): ApiJson<HookBody>,
) -> Result<Response, ApiError> {
    let owner = principal.owner();
    // The event name first: other events get no opinion, whatever the rest of their input.
    let event = match field::<String>(&hook.hook_event_name, "hook_event_name", "a string", "hook")
    {
        Ok(Some(name)) if name == "PreToolUse" => Event::PreToolUse,
        Ok(Some(name)) if name == "PermissionRequest" => Event::PermissionRequest,
        Ok(Some(name)) if name == "Elicitation" => return elicitation(state, &owner, hook).await,
        Ok(Some(_)) => return Ok(json_response(StatusCode::OK, &HookOutput::NONE)),
        Ok(None) | Err(_) => {
            return Err(ValidationError::new("hook_event_name", "expected a string").into());
        }
    };
    let name = event.name();
    let required = |what: &str| ValidationError::new(what, format!("is required in {name} input"));
    let string =
        |raw: &Option<Box<RawValue>>, what: &str| field::<String>(raw, what, "a string", name);
    let tool_name = string(&hook.tool_name, "tool_name")?
        .filter(|t| !t.is_empty())
        .ok_or_else(|| required("tool_name"))?;
    let session_id = string(&hook.session_id, "session_id")?;
    let cwd = string(&hook.cwd, "cwd")?;
    let tool_use_id = string(&hook.tool_use_id, "tool_use_id")?;
    let agent_type = string(&hook.agent_type, "agent_type")?;
    let permission_suggestions = field::<Value>(
        &hook.permission_suggestions,
        "permission_suggestions",
        "JSON",
        name,
    )?;
    // Kept as Claude Code wrote it: an allow hands exactly this back.
    let raw_input = hook
        .tool_input
        .as_deref()
        .filter(|r| r.get() != "null")
        .ok_or_else(|| required("tool_input"))?;
    let NewInteraction {
        input, input_text, ..
    } = NewInteraction::from_json(tool_name.clone(), raw_input).map_err(|e| {
        ValidationError::new("tool_input", format!("{} in {name} input", e.message))
    })?;
    let settings = &state.settings.hooks.claude_code;
    let kind = Kind::of_tool(&tool_name);
    // The interaction's deadline never outlives the hook's wait, so every copy on every
    // channel shows the expiry the moment Claude Code gets its answer.
    let default = state.registry.timeout_for(kind, None)?;
    let timeout_secs = default.min(settings.timeout_secs);
    let agent = match agent_type.as_deref() {
        Some(t) if !t.is_empty() => format!("claude-code/{t}"),
        _ => "claude-code".to_string(),
    };
    // Claude Code's suggestions, as far as they fit the SDK's shape: ones that do not are
    // left out (no "always allow" for them) rather than failing a hook that must answer.
    let suggestions = permission_suggestions.and_then(|s| {
        let (kept, left_out) = valid_suggestions(s);
        for e in left_out {
            tracing::warn!(tool = %tool_name, error = %e, "a permission suggestion from Claude Code was left out");
        }
        kept
    });
    let base = derived_base(session_id.as_deref().unwrap_or(""), &tool_name, &input);
    let new = NewInteraction {
        id: None,
        tool_name: tool_name.clone(),
        input,
        input_text,
        session: session_id,
        agent: Some(agent),
        title: None,
        description: None,
        cwd,
        timeout_secs: Some(timeout_secs),
        suggestions,
    };
    let created = match (event, tool_use_id.filter(|t| !t.is_empty())) {
        (Event::PreToolUse, Some(tool_use_id)) => {
            let new = NewInteraction {
                id: Some(tool_use_id),
                ..new
            };
            state
                .registry
                .create_for(new, Some(&owner))
                .await
                .map_err(Refused::from)
                .map(|c| {
                    // A tool_use_id that is being withdrawn is waited on all the same: its
                    // outcome, the cancellation, is the answer to it.
                    let attached = state.hook_calls.attach(
                        &state.registry,
                        &c.interaction.id,
                        Event::PreToolUse,
                    );
                    (c.interaction, attached)
                })
        }
        _ => create_generation(&state, event, &base, &owner, new)
            .await
            .map(|(i, attached)| (i, Some(attached))),
    };
    let (id, attached) = match created {
        Ok((interaction, attached)) => (interaction.id.clone(), attached),
        Err(refused) => return refused.reply(event),
    };
    // Waited on by id: the whole input stays with the store, not with every waiting call.
    drop(hook);
    let reply = wait_and_reply(&state, event, &id).await;
    if let Some(attached) = attached {
        attached.finish();
    }
    reply
}

/// An `Elicitation` hook call: an MCP server's form, asked on every channel and answered
/// with the form's `action` and `content`.
async fn elicitation(state: AppState, owner: &str, hook: HookBody) -> Result<Response, ApiError> {
    let event = Event::Elicitation;
    let name = event.name();
    let string =
        |raw: &Option<Box<RawValue>>, what: &str| field::<String>(raw, what, "a string", name);
    let mode = string(&hook.mode, "mode")?;
    if mode.as_deref().is_some_and(|m| m != "form") {
        // A URL hand-off happens in a browser next to Claude Code: nothing to relay.
        return Ok(respond_with(HookOutput::NONE));
    }
    let server = string(&hook.mcp_server_name, "mcp_server_name")?
        .filter(|s| !s.is_empty())
        .ok_or_else(|| {
            ValidationError::new("mcp_server_name", format!("is required in {name} input"))
        })?;
    let message = string(&hook.message, "message")?
        .ok_or_else(|| ValidationError::new("message", format!("is required in {name} input")))?;
    let schema = field::<Value>(
        &hook.requested_schema,
        "requested_schema",
        "an object",
        name,
    )?
    .unwrap_or_else(|| Form::prompt_schema(false));
    let session_id = string(&hook.session_id, "session_id")?;
    let cwd = string(&hook.cwd, "cwd")?;
    let input = Form::input(&message, schema);
    if let Err(e) = Form::from_input(&input) {
        // Claude Code shows its own dialog for a form imrelay cannot carry.
        tracing::warn!(server = %server.escape_debug(), error = %e, "an MCP form outside the supported schema was left to Claude Code");
        return Ok(respond_with(HookOutput::NONE));
    }
    let settings = &state.settings.hooks.claude_code;
    let default = state.registry.timeout_for(Kind::Form, None)?;
    let base = derived_base(
        session_id.as_deref().unwrap_or(""),
        &format!("mcp:{server}"),
        &input,
    );
    let new = NewInteraction {
        session: session_id,
        agent: Some("claude-code".into()),
        title: Some(format!("{server} asks")),
        cwd,
        timeout_secs: Some(default.min(settings.timeout_secs)),
        ..NewInteraction::new(FORM_TOOL, input)
    };
    let (id, attached) = match create_generation(&state, event, &base, owner, new).await {
        Ok((interaction, attached)) => (interaction.id.clone(), attached),
        Err(refused) => return refused.reply(event),
    };
    drop(hook);
    let reply = wait_and_reply(&state, event, &id).await;
    attached.finish();
    reply
}

/// Why a hook call's interaction was not created.
enum Refused {
    /// The pending interactions of its agent token, or of all, hold all they may: imrelay
    /// cannot ask anyone, so Claude Code is handed the decision back, as at shutdown.
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

impl Refused {
    fn reply(self, event: Event) -> Result<Response, ApiError> {
        match self {
            Refused::Full(full) => {
                tracing::warn!(event = event.name(), reason = %full, "a Claude Code hook call was handed back: the pending budget is full");
                Ok(respond_with(ask(
                    event,
                    format!("imrelay cannot relay this now: {full}"),
                )))
            }
            Refused::Other(e) => Err(e),
        }
    }
}

/// Waits for the answer to `id` (or the hook's timeout, or shutdown) and builds the reply.
async fn wait_and_reply(
    state: &AppState,
    event: Event,
    id: &InteractionId,
) -> Result<Response, ApiError> {
    let settings = &state.settings.hooks.claude_code;
    let wait = Duration::from_secs(settings.timeout_secs);
    let waited = tokio::select! {
        r = state.registry.wait(id, wait) => r?,
        _ = state.shutdown.cancelled() => {
            // Claude Code will not come back for this answer: withdraw it everywhere.
            let reason = "imrelay shut down before anyone answered".to_string();
            let final_state = match state.registry.cancel(id, Some(reason.clone()), None).await {
                Ok(i) | Err(RegistryError::AlreadyResolved(i)) => i,
                Err(e) => return Err(e.into()),
            };
            if final_state.resolution.as_ref().is_some_and(|r| r.outcome != Outcome::Cancelled) {
                return Ok(respond_with(reply(event, &final_state, settings.on_timeout)));
            }
            return Ok(respond_with(ask(event, reason)));
        }
    };
    let final_state = match waited {
        Some(i) => i,
        None => state.registry.expire(id).await?,
    };
    Ok(respond_with(reply(
        event,
        &final_state,
        settings.on_timeout,
    )))
}

fn respond_with(output: HookOutput<'_>) -> Response {
    json_response(StatusCode::OK, &output)
}

/// Creates the first unanswered generation of a derived id, or re-attaches to a pending one,
/// and registers the call as waiting on it.
///
/// The walk starts at the remembered latest generation (the first if none is remembered)
/// and moves past answered ones, and past one being withdrawn (Claude Code dropped it a moment
/// ago, so this request is a new one). A remembered generation that is gone was pruned a
/// moment ago (its memory goes in the same prune): the walk moves past it too.
async fn create_generation(
    state: &AppState,
    event: Event,
    base: &str,
    owner: &str,
    new: NewInteraction,
) -> Result<(Arc<Interaction>, Attached), Refused> {
    let store = state.registry.store();
    let key = latest_key(base);
    let remembered = store
        .get_value(&key)
        .await?
        .and_then(|v| generation_of(base, &v));
    let mut generation = remembered.unwrap_or(1);
    loop {
        let id = generation_id(base, generation);
        let parsed = InteractionId::parse(&id)?;
        match state.registry.get(&parsed).await? {
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
        match state
            .registry
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
                let Some(attached) =
                    state
                        .hook_calls
                        .attach(&state.registry, &c.interaction.id, event)
                else {
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

/// What the hook answers: `{}` (no opinion) or `{"hookSpecificOutput": {...}}`. Written
/// straight from the interaction, so `updatedInput` is the input's text as kept.
#[derive(Debug, Serialize)]
struct HookOutput<'a> {
    #[serde(rename = "hookSpecificOutput", skip_serializing_if = "Option::is_none")]
    specific: Option<Specific<'a>>,
}

impl HookOutput<'_> {
    /// No opinion.
    const NONE: HookOutput<'static> = HookOutput { specific: None };
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct Specific<'a> {
    hook_event_name: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    permission_decision: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    permission_decision_reason: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    updated_input: Option<&'a Input>,
    #[serde(skip_serializing_if = "Option::is_none")]
    decision: Option<&'a PermissionResult>,
    #[serde(skip_serializing_if = "Option::is_none")]
    action: Option<ElicitAction>,
    #[serde(skip_serializing_if = "Option::is_none")]
    content: Option<&'a Map<String, Value>>,
}

impl Specific<'_> {
    fn pre_tool_use(decision: &'static str, reason: String) -> Self {
        Specific {
            permission_decision: Some(decision),
            permission_decision_reason: Some(reason),
            ..Specific::of(Event::PreToolUse)
        }
    }

    fn of(event: Event) -> Self {
        Specific {
            hook_event_name: event.name(),
            permission_decision: None,
            permission_decision_reason: None,
            updated_input: None,
            decision: None,
            action: None,
            content: None,
        }
    }
}

fn ask(event: Event, reason: String) -> HookOutput<'static> {
    match event {
        Event::PreToolUse => HookOutput {
            specific: Some(Specific::pre_tool_use("ask", reason)),
        },
        // No decision: Claude Code shows its own permission dialog, or its own form.
        Event::PermissionRequest | Event::Elicitation => HookOutput::NONE,
    }
}

/// The hook output for a resolved interaction.
fn reply(event: Event, i: &Interaction, on_timeout: OnTimeout) -> HookOutput<'_> {
    let Some(r) = &i.resolution else {
        return ask(event, "no answer yet".into());
    };
    if r.outcome == Outcome::Expired && on_timeout == OnTimeout::Ask {
        let reason = format!(
            "{} through imrelay; asking here instead",
            r.message().unwrap_or("No response")
        );
        return ask(event, reason);
    }
    let reason = match r.message() {
        Some(m) => m.to_string(),
        None => {
            let mut s = format!("{} through imrelay", capitalise(r.outcome.as_str()));
            if let Some(by) = &r.by {
                s = format!("{s} by {by}");
            }
            format!("{s} via {}", r.via)
        }
    };
    let specific = match (event, &r.result) {
        (_, AgentResult::Elicit(e)) => Specific {
            action: Some(e.action),
            content: e.content.as_ref(),
            ..Specific::of(Event::Elicitation)
        },
        (
            Event::PreToolUse,
            AgentResult::Permission(PermissionResult::Allow { updated_input, .. }),
        ) => Specific {
            updated_input: Some(updated_input),
            ..Specific::pre_tool_use("allow", reason)
        },
        (Event::PreToolUse, AgentResult::Permission(PermissionResult::Deny { message, .. })) => {
            Specific::pre_tool_use("deny", message.clone())
        }
        (Event::PermissionRequest | Event::Elicitation, AgentResult::Permission(result)) => {
            Specific {
                decision: Some(result),
                ..Specific::of(Event::PermissionRequest)
            }
        }
    };
    HookOutput {
        specific: Some(specific),
    }
}

fn capitalise(s: &str) -> String {
    let mut c = s.chars();
    match c.next() {
        Some(f) => f.to_uppercase().chain(c).collect(),
        None => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::interaction::RegistryConfig;
    use crate::store::MemoryStore;

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
        let first = calls
            .attach(&registry, &id, Event::PermissionRequest)
            .unwrap();
        let second = calls
            .attach(&registry, &id, Event::PermissionRequest)
            .unwrap();
        assert_eq!(calls.gauge.get(), 2);
        // One of two identical calls leaves: the other still waits for the answer.
        drop(first);
        settle_a_little().await;
        assert!(registry.get(&id).await.unwrap().unwrap().is_pending());
        // The last one leaves: from now on nothing attaches until it is withdrawn.
        drop(second);
        assert_eq!(calls.gauge.get(), 0);
        assert!(
            calls
                .attach(&registry, &id, Event::PermissionRequest)
                .is_none()
        );
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
        calls
            .attach(&registry, &other, Event::PermissionRequest)
            .unwrap()
            .finish();
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
    use serde_json::json;

    #[test]
    fn derived_ids_are_stable_and_valid() {
        let input = json!({"command":"ls","b":1}).as_object().cloned().unwrap();
        let a = derived_base("s1", "Bash", &input);
        let b = derived_base("s1", "Bash", &input);
        assert_eq!(a, b);
        assert_ne!(a, derived_base("s2", "Bash", &input));
        let reordered = json!({"b":1,"command":"ls"}).as_object().cloned().unwrap();
        assert_eq!(a, derived_base("s1", "Bash", &reordered));
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
