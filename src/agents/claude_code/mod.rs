//! Claude Code's hooks: `POST /v1/hooks/claude-code`, a Claude Code HTTP hook.
//!
//! Claude Code posts `PreToolUse` or `PermissionRequest` input (a tool call), or
//! `Elicitation` input (an MCP server's form); imrelay creates (or re-attaches to) the
//! interaction, waits for an answer, and replies with the matching `hookSpecificOutput`
//! before Claude Code's own hook timeout. Other hook events, and URL-mode elicitations, get
//! `{}` (no opinion). Claude Code's tool names and inputs are the ones the rest of imrelay
//! reads (`Bash` with `command`, `Edit` with `file_path`, ...), so they are kept as they are.
//!
//! Ids: `PreToolUse` uses `tool_use_id`. `PermissionRequest` and `Elicitation` have none
//! imrelay can rely on, so the id is derived from the session, tool (or MCP server) and input
//! (`cc-<hash>`, in generations: [`super::shared`]).
//!
//! Withdrawal: Claude Code closes a hook call's connection when it no longer needs the answer
//! (for `PermissionRequest`, the person answered Claude Code's own dialog, which it shows at
//! the same time, or pressed Esc; for either event, the turn was interrupted or its hook
//! timeout passed). The interaction is then cancelled at once, so every copy on every channel
//! says so instead of asking on, unless another call still waits for it: two identical
//! requests in flight at once (parallel tool calls) share one interaction
//! ([`super::shared::HookCalls`]).

mod settings;

pub use settings::ClaudeCodeHookSettings;

use super::OnTimeout;

use std::sync::Arc;
use std::time::Duration;

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::Response;
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use serde_json::{Map, Value};

use super::Hooks;
use super::shared::{self, Abandoned, Fields, Generations, Refused, derived_base, field};
use super::steer;
use crate::interaction::{
    AgentResult, ElicitAction, FORM_TOOL, Form, Input, Interaction, InteractionId, Kind,
    NewInteraction, Outcome, PermissionResult, ValidationError, valid_suggestions,
};
use crate::wire::error::ApiError;
use crate::wire::extract::ApiJson;
use crate::wire::json_response;

/// Where the hook is served.
pub const PATH: &str = "/v1/hooks/claude-code";

/// The agent's name on every channel, and the `by` of a withdrawal.
const AGENT: &str = "claude-code";

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
    last_assistant_message: Option<Box<RawValue>>,
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

    /// How a call of this event that Claude Code drops unanswered is withdrawn.
    fn abandoned(self) -> Abandoned {
        let reason = match self {
            Event::PreToolUse | Event::Elicitation => "Claude Code stopped waiting for this answer",
            // Claude Code shows its own dialog beside the hook and drops the hook when the
            // person answers or dismisses it there.
            Event::PermissionRequest => "Answered in Claude Code, or abandoned there",
        };
        Abandoned { by: AGENT, reason }
    }

    /// Its derived ids in generations.
    fn generations(self) -> Generations {
        Generations {
            adapter: "claude_code",
            abandoned: self.abandoned(),
        }
    }
}

/// The derived id of a call with no id of its own: `cc-<hash>` of the session, the tool (or
/// MCP server) and the input.
fn derived(session: &str, tool: &str, input: &Map<String, Value>) -> String {
    derived_base("cc", &[session, tool], input)
}

/// `POST /v1/hooks/claude-code`
pub async fn hook(
    State(state): State<Hooks>,
    principal: crate::wire::Principal,
    ApiJson(hook): ApiJson<HookBody>,
) -> Result<Response, ApiError> {
    // The event name first: other events get no opinion, whatever the rest of their input.
    let event = match field::<String>(&hook.hook_event_name, "hook_event_name", "a string", "hook")
    {
        Ok(Some(name)) if name == "PreToolUse" => Event::PreToolUse,
        Ok(Some(name)) if name == "PermissionRequest" => Event::PermissionRequest,
        Ok(Some(name)) if name == "Elicitation" => {
            asked(&state, &principal.owner(), &hook).await;
            return elicitation(state, &principal.owner(), hook).await;
        }
        Ok(Some(name)) => return lifecycle(&state, &principal.owner(), &name, &hook).await,
        Ok(None) | Err(_) => {
            return Err(ValidationError::new("hook_event_name", "expected a string").into());
        }
    };
    let owner = principal.owner();
    let (new, base, tool_use_id) = read_call(&state, event, &hook)?;
    asked(&state, &owner, &hook).await;
    let created = create(&state, event, &owner, new, &base, tool_use_id).await;
    let (id, attached) = match created {
        Ok((interaction, attached)) => (interaction.id.clone(), attached),
        Err(refused) => return handed_back(event, refused),
    };
    // Waited on by id: the whole input stays with the store, not with every waiting call.
    drop(hook);
    let reply = wait_and_reply(&state, event, &id).await;
    if let Some(attached) = attached {
        attached.finish();
    }
    reply
}

/// The agent as sessions and steering know it.
fn steering(state: &Hooks) -> steer::Agent {
    let settings = &state.settings.claude_code;
    steer::Agent {
        adapter: AGENT,
        name: AGENT.into(),
        shown: "Claude Code".into(),
        delivery: crate::interaction::sessions::Delivery::NextStep,
        on_finish: settings.on_finish,
        finish_wait_secs: settings.finish_wait_secs,
    }
}

/// Records that the session asked for something (an approval, an answer, a form).
async fn asked(state: &Hooks, owner: &str, hook: &HookBody) {
    let string =
        |raw: &Option<Box<RawValue>>| field::<String>(raw, "", "a string", "hook").ok().flatten();
    let (session, cwd) = (string(&hook.session_id), string(&hook.cwd));
    let event = crate::interaction::sessions::SessionEvent::Asked;
    steer::report(
        state,
        &steering(state),
        session.as_deref(),
        cwd.as_deref(),
        owner,
        event,
    )
    .await;
}

/// Any other hook event: what the session did (`SessionStart`, `UserPromptSubmit`,
/// `PostToolUse`, `Stop`, `SessionEnd`), answered with a person's queued message or reply
/// where there is one ([`steer`]); `{}` (no opinion) otherwise.
async fn lifecycle(
    state: &Hooks,
    owner: &str,
    name: &str,
    hook: &HookBody,
) -> Result<Response, ApiError> {
    // Events sessions do not follow get no opinion, whatever the rest of their input.
    if steer::session_event(name, None).is_none() {
        return Ok(json_response(StatusCode::OK, &serde_json::json!({})));
    }
    let fields = Fields { event: name };
    let input = steer::Lifecycle {
        event: name,
        session: fields.string(&hook.session_id, "session_id")?,
        cwd: fields.string(&hook.cwd, "cwd")?,
        last_message: fields.string(&hook.last_assistant_message, "last_assistant_message")?,
    };
    let output = steer::lifecycle(state, steering(state), owner, input)
        .await
        .unwrap_or_else(|| serde_json::json!({}));
    Ok(json_response(StatusCode::OK, &output))
}

/// A `PreToolUse` or `PermissionRequest` call read into the interaction it asks for, the
/// base of its derived id and Claude Code's `tool_use_id`.
fn read_call(
    state: &Hooks,
    event: Event,
    hook: &HookBody,
) -> Result<(NewInteraction, String, Option<String>), ApiError> {
    let name = event.name();
    let fields = Fields { event: name };
    let string = |raw: &Option<Box<RawValue>>, what: &str| fields.string(raw, what);
    let tool_name = fields.tool_name(&hook.tool_name)?;
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
    let raw_input = fields.tool_input(&hook.tool_input)?;
    let NewInteraction {
        input, input_text, ..
    } = NewInteraction::from_json(tool_name.clone(), raw_input).map_err(|e| {
        ValidationError::new("tool_input", format!("{} in {name} input", e.message))
    })?;
    let settings = &state.settings.claude_code;
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
    let base = derived(session_id.as_deref().unwrap_or(""), &tool_name, &input);
    let new = NewInteraction {
        id: None,
        tool_name,
        input,
        input_text,
        session: session_id,
        agent: Some(agent),
        title: None,
        description: None,
        cwd,
        timeout_secs: Some(timeout_secs),
        suggestions,
        input_fixed: false,
        labels: Vec::new(),
    };
    Ok((new, base, tool_use_id.filter(|t| !t.is_empty())))
}

/// Creates (or re-attaches to) the interaction of a call: by its `tool_use_id` for a
/// `PreToolUse` that has one, else by generation of its derived id.
async fn create(
    state: &Hooks,
    event: Event,
    owner: &str,
    new: NewInteraction,
    base: &str,
    tool_use_id: Option<String>,
) -> Result<(Arc<Interaction>, Option<shared::Attached>), Refused> {
    match (event, tool_use_id) {
        (Event::PreToolUse, Some(tool_use_id)) => {
            let new = NewInteraction {
                id: Some(tool_use_id),
                ..new
            };
            state
                .registry
                .create_for(new, Some(owner))
                .await
                .map_err(Refused::from)
                .map(|c| {
                    // A tool_use_id that is being withdrawn is waited on all the same: its
                    // outcome, the cancellation, is the answer to it.
                    let attached = state.calls.attach(
                        &state.registry,
                        &c.interaction.id,
                        Event::PreToolUse.abandoned(),
                    );
                    (c.interaction, attached)
                })
        }
        _ => state
            .create_generation(event.generations(), base, owner, new)
            .await
            .map(|(i, attached)| (i, Some(attached))),
    }
}

/// An `Elicitation` hook call: an MCP server's form, asked on every channel and answered
/// with the form's `action` and `content`.
async fn elicitation(state: Hooks, owner: &str, hook: HookBody) -> Result<Response, ApiError> {
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
    let settings = &state.settings.claude_code;
    let default = state.registry.timeout_for(Kind::Form, None)?;
    let base = derived(
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
    let created = state
        .create_generation(event.generations(), &base, owner, new)
        .await;
    let (id, attached) = match created {
        Ok((interaction, attached)) => (interaction.id.clone(), attached),
        Err(refused) => return handed_back(event, refused),
    };
    drop(hook);
    let reply = wait_and_reply(&state, event, &id).await;
    attached.finish();
    reply
}

/// A call whose interaction was refused for a full pending budget: imrelay cannot ask
/// anyone, so Claude Code is handed the decision back, as at shutdown. Any other refusal is
/// an API error.
fn handed_back(event: Event, refused: Refused) -> Result<Response, ApiError> {
    match refused {
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

/// Waits for the answer to `id` (or the hook's timeout, or shutdown) and builds the reply.
async fn wait_and_reply(
    state: &Hooks,
    event: Event,
    id: &InteractionId,
) -> Result<Response, ApiError> {
    let settings = &state.settings.claude_code;
    let wait = Duration::from_secs(settings.timeout_secs);
    match state.answer(id, wait).await? {
        Ok(i) => Ok(respond_with(reply(event, &i, settings.on_timeout))),
        // Claude Code will not come back for this answer: it was withdrawn everywhere.
        Err(reason) => Ok(respond_with(ask(event, reason))),
    }
}

fn respond_with(output: HookOutput<'_>) -> Response {
    json_response(StatusCode::OK, &output)
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
