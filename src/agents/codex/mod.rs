//! Codex's hooks: `POST /v1/hooks/codex`, the endpoint `imrelay hook codex` hands Codex's
//! hook input to (see docs/codex.md).
//!
//! Codex runs a command for its `PermissionRequest` hook (in its terminal interface, before
//! it would show its own approval prompt) and its `PreToolUse` hook (before every tool call,
//! the only gate `codex exec` has). The command, `imrelay hook codex`
//! ([`crate::cli::hook`]), posts the hook's standard input here unchanged and prints the
//! answer body as it is; everything Codex-specific is here:
//!
//! - the input: `{"session_id", "turn_id", "cwd", "hook_event_name", "tool_name",
//!   "tool_input", "tool_use_id"?, ...}` (Codex's published schema,
//!   `codex-rs/hooks/schema/generated/*.command.input.schema.json`); the tool call is mapped
//!   onto the names imrelay reads by [`as_claude_code`], and shown as `codex`'s, with its
//!   session and working directory;
//! - the id: Codex gives a `PermissionRequest` no tool-use id, so it is derived from the
//!   session, turn, tool, tool-use id (for `PreToolUse`) and input (`cx-<hash>`, in
//!   generations: [`super::shared`]);
//! - the answer, in the only shapes Codex accepts (an `updatedInput`, `updatedPermissions` or
//!   `interrupt` makes it reject the whole answer): `PermissionRequest`:
//!   `{"hookSpecificOutput": {"hookEventName": "PermissionRequest", "decision": {"behavior":
//!   "allow"}}}` or `{"behavior": "deny", "message"}`; `PreToolUse`: `{}` to let the call go
//!   on (Codex refuses `permissionDecision: "allow"` without an `updatedInput`) or
//!   `{"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "deny",
//!   "permissionDecisionReason"}}`. `{}` to a `PermissionRequest` is no decision: Codex shows
//!   its own prompt;
//! - the deadline: the lowest of `[hooks.codex] timeout_secs`, the approval default, and the
//!   `timeout` the command asks for (below the hook's own timeout, so the answer is back
//!   before Codex gives up on the hook);
//! - edits: the interaction is `input_fixed`, so an edit-then-approve is refused where the
//!   person makes it, with a message saying Codex cannot run an edited input;
//! - withdrawal: Codex kills the hook command when its timeout passes or the turn is
//!   interrupted; the command's connection drops, and the interaction is withdrawn on every
//!   channel ([`super::shared::HookCalls`]).

mod settings;
mod tools;

pub use settings::CodexHookSettings;
pub use tools::as_claude_code;

use std::time::Duration;

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::Response;
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use serde_json::{Map, Value};

use super::shared::{Abandoned, Fields, Generations, derived_base, field};
use super::{Hooks, OnTimeout, steer};
use crate::interaction::{
    AgentResult, Interaction, InteractionId, Kind, NewInteraction, Outcome, PermissionResult,
    ValidationError,
};
use crate::wire::error::ApiError;
use crate::wire::extract::{ApiJson, ApiQuery};
use crate::wire::json_response;

/// Where the endpoint is served.
pub const PATH: &str = "/v1/hooks/codex";

/// The agent's name on every channel, and the `by` of a withdrawal.
pub const AGENT: &str = "codex";

/// The hook events imrelay answers.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Event {
    /// Codex is about to show its own approval prompt (its terminal interface).
    PermissionRequest,
    /// Codex is about to run a tool (also under `codex exec`, which never asks).
    PreToolUse,
}

impl Event {
    fn name(self) -> &'static str {
        match self {
            Event::PermissionRequest => "PermissionRequest",
            Event::PreToolUse => "PreToolUse",
        }
    }
}

/// How a call Codex gave up on is withdrawn everywhere.
const ABANDONED: Abandoned = Abandoned {
    by: AGENT,
    reason: "Codex stopped waiting for this answer (its hook timed out, or the turn was interrupted)",
};

/// Its derived ids in generations.
const GENERATIONS: Generations = Generations {
    adapter: "codex",
    abandoned: ABANDONED,
};

/// The fields imrelay reads from Codex's hook input (others are ignored), each as its JSON
/// text.
#[derive(Debug, Deserialize)]
pub struct HookBody {
    hook_event_name: Option<Box<RawValue>>,
    session_id: Option<Box<RawValue>>,
    turn_id: Option<Box<RawValue>>,
    cwd: Option<Box<RawValue>>,
    tool_name: Option<Box<RawValue>>,
    tool_input: Option<Box<RawValue>>,
    tool_use_id: Option<Box<RawValue>>,
    last_assistant_message: Option<Box<RawValue>>,
}

/// The query string `imrelay hook codex` adds.
#[derive(Debug, Default, Deserialize)]
pub struct HookQuery {
    /// The longest the command can wait, seconds (below the hook's own timeout).
    timeout: Option<u64>,
}

/// `POST /v1/hooks/codex`
pub async fn hook(
    State(state): State<Hooks>,
    principal: crate::wire::Principal,
    ApiQuery(query): ApiQuery<HookQuery>,
    ApiJson(body): ApiJson<HookBody>,
) -> Result<Response, ApiError> {
    let event = match field::<String>(&body.hook_event_name, "hook_event_name", "a string", "hook")
    {
        Ok(Some(name)) if name == "PermissionRequest" => Event::PermissionRequest,
        Ok(Some(name)) if name == "PreToolUse" => Event::PreToolUse,
        // Another event: what the session did, and a person's words where there are some.
        Ok(Some(name)) => {
            let owner = principal.owner();
            return lifecycle(&state, &owner, &name, &body, query.timeout).await;
        }
        Ok(None) | Err(_) => {
            return Err(ValidationError::new("hook_event_name", "expected a string").into());
        }
    };
    let (new, base, timeout_secs) = read_call(&state, event, &body, query)?;
    let asked = crate::interaction::sessions::SessionEvent::Asked;
    let owner = principal.owner();
    steer::report(
        &state,
        &steering(&state, None),
        new.session.as_deref(),
        new.cwd.as_deref(),
        &owner,
        asked,
    )
    .await;
    let (interaction, attached) = state
        .create_generation(GENERATIONS, &base, &owner, new)
        .await?;
    let reply = wait_and_reply(&state, event, &interaction.id, timeout_secs).await;
    attached.finish();
    reply
}

/// Any other hook event: what the session did (`SessionStart`, `UserPromptSubmit`,
/// `PostToolUse`, `Stop`), answered with a person's queued message or reply where there is
/// one ([`steer`]); `{}` (no opinion) otherwise.
async fn lifecycle(
    state: &Hooks,
    owner: &str,
    name: &str,
    body: &HookBody,
    command_timeout: Option<u64>,
) -> Result<Response, ApiError> {
    // Events sessions do not follow get no opinion, whatever the rest of their input.
    if steer::session_event(name, None).is_none() {
        return Ok(json_response(StatusCode::OK, &serde_json::json!({})));
    }
    let fields = Fields { event: name };
    let agent = steering(state, command_timeout);
    let input = steer::Lifecycle {
        event: name,
        session: fields.string(&body.session_id, "session_id")?,
        cwd: fields.string(&body.cwd, "cwd")?,
        last_message: fields.string(&body.last_assistant_message, "last_assistant_message")?,
    };
    let output = steer::lifecycle(state, agent, owner, input)
        .await
        .unwrap_or_else(|| serde_json::json!({}));
    Ok(json_response(StatusCode::OK, &output))
}

/// The agent as sessions and steering know it; a reply is waited for within the hook
/// command's own wait (`command_timeout`), as every answer is.
fn steering(state: &Hooks, command_timeout: Option<u64>) -> steer::Agent {
    let settings = &state.settings.codex;
    steer::Agent {
        adapter: AGENT,
        name: AGENT.into(),
        shown: "Codex".into(),
        delivery: crate::interaction::sessions::Delivery::NextStep,
        on_finish: settings.on_finish,
        finish_wait_secs: settings
            .finish_wait_secs
            .min(command_timeout.unwrap_or(u64::MAX)),
    }
}

/// A hook call read into the interaction it asks for, the base of its derived id and its
/// deadline in seconds.
fn read_call(
    state: &Hooks,
    event: Event,
    body: &HookBody,
    query: HookQuery,
) -> Result<(NewInteraction, String, u64), ApiError> {
    let name = event.name();
    let fields = Fields { event: name };
    let tool_name = fields.tool_name(&body.tool_name)?;
    let session_id = fields.string(&body.session_id, "session_id")?;
    let turn_id = fields.string(&body.turn_id, "turn_id")?;
    let cwd = fields.string(&body.cwd, "cwd")?;
    let tool_use_id = fields.string(&body.tool_use_id, "tool_use_id")?;
    let raw_input = fields.tool_input(&body.tool_input)?;
    let input: Map<String, Value> = serde_json::from_str(raw_input.get()).map_err(|_| {
        ValidationError::new("tool_input", format!("expected an object in {name} input"))
    })?;
    let base = derived_base(
        "cx",
        &[
            session_id.as_deref().unwrap_or(""),
            turn_id.as_deref().unwrap_or(""),
            &tool_name,
            tool_use_id.as_deref().unwrap_or(""),
        ],
        &input,
    );
    let (shown_tool, shown_input) = as_claude_code(&tool_name, input);
    if Kind::of_tool(&shown_tool) != Kind::Approval {
        return Err(ValidationError::new(
            "tool_name",
            format!("Codex's hooks carry tool approvals, not {shown_tool}"),
        )
        .into());
    }
    // The deadline never outlives the command's wait: every copy on every channel shows the
    // expiry the moment Codex gets its answer.
    let timeout_secs = state
        .registry
        .timeout_for(Kind::Approval, None)?
        .min(state.settings.codex.timeout_secs)
        .min(query.timeout.unwrap_or(u64::MAX))
        .max(1);
    let new = NewInteraction {
        session: session_id,
        agent: Some(AGENT.into()),
        cwd,
        timeout_secs: Some(timeout_secs),
        input_fixed: true,
        ..NewInteraction::new(shown_tool, shown_input)
    };
    Ok((new, base, timeout_secs))
}

/// Waits for the answer to `id` (or its deadline, or shutdown) and builds the reply.
async fn wait_and_reply(
    state: &Hooks,
    event: Event,
    id: &InteractionId,
    timeout_secs: u64,
) -> Result<Response, ApiError> {
    let on_timeout = state.settings.codex.on_timeout;
    let wait = Duration::from_secs(timeout_secs);
    let output = match state.answer(id, wait).await? {
        Ok(i) => reply(event, &i, on_timeout),
        Err(reason) => no_answer(event, reason),
    };
    Ok(answer(&output))
}

fn answer(output: &Output) -> Response {
    json_response(StatusCode::OK, output)
}

/// What the hook command prints: `{}` or `{"hookSpecificOutput": {...}}`, with only the
/// fields Codex accepts.
#[derive(Debug, Serialize, PartialEq)]
struct Output {
    #[serde(rename = "hookSpecificOutput", skip_serializing_if = "Option::is_none")]
    specific: Option<Specific>,
}

impl Output {
    /// No decision: a `PermissionRequest` goes to Codex's own prompt, a `PreToolUse` call
    /// goes on.
    const NONE: Output = Output { specific: None };
}

#[derive(Debug, Serialize, PartialEq)]
#[serde(untagged)]
enum Specific {
    #[serde(rename_all = "camelCase")]
    PermissionRequest {
        hook_event_name: &'static str,
        decision: Decision,
    },
    #[serde(rename_all = "camelCase")]
    PreToolUse {
        hook_event_name: &'static str,
        permission_decision: &'static str,
        permission_decision_reason: String,
    },
}

/// A `PermissionRequest` decision: `behavior`, and a `message` with a deny; nothing else.
#[derive(Debug, Serialize, PartialEq)]
#[serde(tag = "behavior", rename_all = "snake_case")]
enum Decision {
    Allow,
    Deny { message: String },
}

/// A deny of `event` with `message`.
fn deny(event: Event, message: String) -> Output {
    // Codex ignores an empty reason; never send one.
    let message = if message.trim().is_empty() {
        "Denied through imrelay".to_string()
    } else {
        message
    };
    let specific = match event {
        Event::PermissionRequest => Specific::PermissionRequest {
            hook_event_name: event.name(),
            decision: Decision::Deny { message },
        },
        Event::PreToolUse => Specific::PreToolUse {
            hook_event_name: event.name(),
            permission_decision: "deny",
            permission_decision_reason: message,
        },
    };
    Output {
        specific: Some(specific),
    }
}

/// Nobody answered (imrelay is shutting down, or the deadline passed with `ask`): Codex's own
/// prompt for a `PermissionRequest`; a deny for `PreToolUse`, which has no prompt to fall back
/// on (Codex would run the command).
fn no_answer(event: Event, reason: String) -> Output {
    match event {
        Event::PermissionRequest => Output::NONE,
        Event::PreToolUse => deny(event, reason),
    }
}

/// The hook output for a resolved interaction.
fn reply(event: Event, i: &Interaction, on_timeout: OnTimeout) -> Output {
    let Some(r) = &i.resolution else {
        return no_answer(event, "No answer through imrelay".into());
    };
    if r.outcome == Outcome::Expired && on_timeout == OnTimeout::Ask {
        let reason = format!("{} through imrelay", r.message().unwrap_or("No response"));
        return no_answer(event, reason);
    }
    match &r.result {
        AgentResult::Permission(PermissionResult::Allow { .. }) => match event {
            Event::PermissionRequest => Output {
                specific: Some(Specific::PermissionRequest {
                    hook_event_name: event.name(),
                    decision: Decision::Allow,
                }),
            },
            // Codex takes `allow` only with an `updatedInput`; no decision lets the call go on.
            Event::PreToolUse => Output::NONE,
        },
        AgentResult::Permission(PermissionResult::Deny { message, .. }) => {
            deny(event, message.clone())
        }
        // Only approvals are created here.
        AgentResult::Elicit(_) => no_answer(event, "Not a tool approval".into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn outputs_have_only_the_fields_codex_accepts() {
        let allow = Output {
            specific: Some(Specific::PermissionRequest {
                hook_event_name: "PermissionRequest",
                decision: Decision::Allow,
            }),
        };
        assert_eq!(
            serde_json::to_value(&allow).unwrap(),
            json!({"hookSpecificOutput": {"hookEventName": "PermissionRequest", "decision": {"behavior": "allow"}}})
        );
        assert_eq!(
            serde_json::to_value(deny(Event::PermissionRequest, "no".into())).unwrap(),
            json!({"hookSpecificOutput": {"hookEventName": "PermissionRequest", "decision": {"behavior": "deny", "message": "no"}}})
        );
        assert_eq!(
            serde_json::to_value(deny(Event::PreToolUse, " ".into())).unwrap(),
            json!({"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "deny", "permissionDecisionReason": "Denied through imrelay"}})
        );
        assert_eq!(serde_json::to_value(Output::NONE).unwrap(), json!({}));
    }
}
