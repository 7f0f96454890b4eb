//! `POST /v1/hooks/claude-code`: a Claude Code HTTP hook.
//!
//! Claude Code posts `PreToolUse` or `PermissionRequest` input; imrelay creates (or
//! re-attaches to) the interaction, waits for an answer, and replies with the matching
//! `hookSpecificOutput` before Claude Code's own hook timeout. Other hook events get `{}` (no
//! opinion).
//!
//! Ids: `PreToolUse` uses `tool_use_id`. `PermissionRequest` has none, so the id is derived
//! from the session, tool and input (`cc-<hash>`); if that interaction was already answered,
//! the next generation (`cc-<hash>.2`, ...) is used, so repeating the same command later in a
//! session asks again instead of replaying the old answer. The latest generation of each
//! derived id is remembered in the store, so finding it takes a read or two (not one per
//! earlier generation) and survives restarts. The memory is a value bound to that
//! generation's interaction ([`crate::store::BOUND_VALUE_PREFIX`]): pruning removes it with
//! the interaction, so it does not grow with every command ever asked about. Generations are
//! resolved in order, so by then every earlier one is gone too, and the next request starts
//! again at the first generation: an id is never taken while an interaction has it, and
//! channels tell a reused id's new interaction from the old one by its creation time.

use std::time::Duration;

use axum::Json;
use axum::extract::State;
use serde::Deserialize;
use serde_json::{Map, Value, json};
use sha2::{Digest, Sha256};

use super::AppState;
use super::error::ApiError;
use super::extract::ApiJson;
use crate::config::OnTimeout;
use crate::interaction::{
    Interaction, InteractionId, Kind, NewInteraction, Outcome, PermissionResult, Registry,
    RegistryError, canonical_json, valid_suggestions,
};
use crate::store::BOUND_VALUE_PREFIX;

/// Withdraws a `PreToolUse` interaction if its hook call is dropped before it is answered:
/// Claude Code stopped waiting (the person interrupted the turn, or its own hook timeout
/// passed), nobody will act on an answer, so no channel should go on asking for one.
/// (`PermissionRequest` interactions stay: a repeated request re-attaches to them.)
struct WithdrawIfAbandoned {
    registry: Registry,
    id: Option<InteractionId>,
}

impl WithdrawIfAbandoned {
    /// The call finished (answered, or failed with a reply): nothing to withdraw.
    fn disarm(&mut self) {
        self.id = None;
    }
}

impl Drop for WithdrawIfAbandoned {
    fn drop(&mut self) {
        let Some(id) = self.id.take() else { return };
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let registry = self.registry.clone();
        runtime.spawn(async move {
            let reason = "Claude Code stopped waiting for this answer".to_string();
            match registry
                .cancel(&id, Some(reason), Some("claude-code".into()))
                .await
            {
                Ok(_) | Err(RegistryError::AlreadyResolved(_) | RegistryError::NotFound(_)) => {}
                Err(e) => {
                    tracing::warn!(id = %id, error = %e, "cannot withdraw an abandoned hook call");
                }
            }
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

/// The fields imrelay reads from a `PreToolUse` or `PermissionRequest` hook input (others
/// are ignored).
#[derive(Debug, Deserialize)]
pub struct HookInput {
    session_id: Option<String>,
    cwd: Option<String>,
    tool_name: Option<String>,
    tool_input: Option<Value>,
    tool_use_id: Option<String>,
    permission_suggestions: Option<Value>,
    agent_type: Option<String>,
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Event {
    PreToolUse,
    PermissionRequest,
}

impl Event {
    fn name(self) -> &'static str {
        match self {
            Event::PreToolUse => "PreToolUse",
            Event::PermissionRequest => "PermissionRequest",
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

/// `POST /v1/hooks/claude-code`
pub async fn claude_code(
    State(state): State<AppState>,
    ApiJson(body): ApiJson<Value>,
) -> Result<Json<Value>, ApiError> {
    // The event name first: other events get no opinion, whatever the rest of their input.
    let event = match body.get("hook_event_name") {
        Some(Value::String(name)) if name == "PreToolUse" => Event::PreToolUse,
        Some(Value::String(name)) if name == "PermissionRequest" => Event::PermissionRequest,
        Some(Value::String(_)) => return Ok(Json(json!({}))),
        _ => {
            return Err(ApiError::bad_request("hook_event_name: expected a string")
                .with("field", json!("hook_event_name")));
        }
    };
    let hook: HookInput = serde_json::from_value(body)
        .map_err(|e| ApiError::bad_request(format!("invalid {} input: {e}", event.name())))?;
    let tool_name = hook
        .tool_name
        .filter(|t| !t.is_empty())
        .ok_or_else(|| ApiError::bad_request("tool_name: is required for this hook event"))?;
    let input = match hook.tool_input {
        Some(Value::Object(m)) => m,
        Some(_) => return Err(ApiError::bad_request("tool_input: expected a JSON object")),
        None => {
            return Err(ApiError::bad_request(
                "tool_input: is required for this hook event",
            ));
        }
    };
    let settings = &state.settings.hooks.claude_code;
    let kind = Kind::of_tool(&tool_name);
    // The interaction's deadline never outlives the hook's wait, so every copy on every
    // channel shows the expiry the moment Claude Code gets its answer.
    let default = state.registry.timeout_for(kind, None)?;
    let timeout_secs = default.min(settings.timeout_secs);
    let agent = match hook.agent_type.as_deref() {
        Some(t) if !t.is_empty() => format!("claude-code/{t}"),
        _ => "claude-code".to_string(),
    };
    // Claude Code's suggestions, as far as they fit the SDK's shape: ones that do not are
    // left out (no "always allow" for them) rather than failing a hook that must answer.
    let suggestions = hook.permission_suggestions.and_then(|s| {
        let (kept, left_out) = valid_suggestions(s);
        for e in left_out {
            tracing::warn!(tool = %tool_name, error = %e, "a permission suggestion from Claude Code was left out");
        }
        kept
    });
    let new = NewInteraction {
        id: None,
        tool_name: tool_name.clone(),
        input: input.clone(),
        session: hook.session_id.clone(),
        agent: Some(agent),
        title: None,
        description: None,
        cwd: hook.cwd,
        timeout_secs: Some(timeout_secs),
        suggestions,
    };
    let interaction = match (event, hook.tool_use_id.filter(|t| !t.is_empty())) {
        (Event::PreToolUse, Some(tool_use_id)) => {
            state
                .registry
                .create(NewInteraction {
                    id: Some(tool_use_id),
                    ..new
                })
                .await?
                .interaction
        }
        _ => {
            let base = derived_base(hook.session_id.as_deref().unwrap_or(""), &tool_name, &input);
            create_generation(&state, &base, new).await?
        }
    };
    let id = interaction.id.clone();
    let mut abandoned = WithdrawIfAbandoned {
        registry: state.registry.clone(),
        id: (event == Event::PreToolUse).then(|| id.clone()),
    };
    let reply = wait_and_reply(&state, event, &id).await;
    abandoned.disarm();
    reply
}

/// Waits for the answer to `id` (or the hook's timeout, or shutdown) and builds the reply.
async fn wait_and_reply(
    state: &AppState,
    event: Event,
    id: &InteractionId,
) -> Result<Json<Value>, ApiError> {
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
                return Ok(Json(reply(event, &final_state, settings.on_timeout)));
            }
            return Ok(Json(ask(event, &reason)));
        }
    };
    let final_state = match waited {
        Some(i) => i,
        None => state.registry.expire(id).await?,
    };
    Ok(Json(reply(event, &final_state, settings.on_timeout)))
}

/// Creates the first unanswered generation of a derived id, or re-attaches to a pending one.
///
/// The walk starts at the remembered latest generation (the first if none is remembered)
/// and moves past answered ones. A remembered generation that is gone was pruned a moment
/// ago (its memory goes in the same prune): the walk moves past it too.
async fn create_generation(
    state: &AppState,
    base: &str,
    new: NewInteraction,
) -> Result<std::sync::Arc<Interaction>, ApiError> {
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
            .create(NewInteraction {
                id: Some(id),
                ..new.clone()
            })
            .await
        {
            Ok(c) if c.interaction.is_pending() || c.created => {
                if remembered != Some(generation)
                    && let Err(e) = store
                        .set_value(&key, Some(c.interaction.id.to_string()))
                        .await
                {
                    // The interaction exists; a stale memory only means a longer walk later.
                    tracing::warn!(id = %c.interaction.id, error = %e, "could not remember the latest generation of a derived id");
                }
                return Ok(c.interaction);
            }
            // Answered between the look-up and the create, or the id was taken by a different
            // request: take the next generation.
            Ok(_) | Err(RegistryError::Conflict(_)) => generation = generation.saturating_add(1),
            Err(e) => return Err(e.into()),
        }
    }
}

fn ask(event: Event, reason: &str) -> Value {
    match event {
        Event::PreToolUse => json!({"hookSpecificOutput": {
            "hookEventName": "PreToolUse",
            "permissionDecision": "ask",
            "permissionDecisionReason": reason,
        }}),
        // No decision: Claude Code shows its own permission dialog.
        Event::PermissionRequest => json!({}),
    }
}

/// The hook output for a resolved interaction.
fn reply(event: Event, i: &Interaction, on_timeout: OnTimeout) -> Value {
    let Some(r) = &i.resolution else {
        return ask(event, "no answer yet");
    };
    if r.outcome == Outcome::Expired && on_timeout == OnTimeout::Ask {
        let reason = format!(
            "{} through imrelay; asking here instead",
            r.message().unwrap_or("No response")
        );
        return ask(event, &reason);
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
    match (event, &r.result) {
        (Event::PreToolUse, PermissionResult::Allow { updated_input, .. }) => json!({
            "hookSpecificOutput": {
                "hookEventName": event.name(),
                "permissionDecision": "allow",
                "permissionDecisionReason": reason,
                "updatedInput": updated_input,
            }
        }),
        (Event::PreToolUse, PermissionResult::Deny { message, .. }) => json!({
            "hookSpecificOutput": {
                "hookEventName": event.name(),
                "permissionDecision": "deny",
                "permissionDecisionReason": message,
            }
        }),
        (Event::PermissionRequest, result) => json!({
            "hookSpecificOutput": {
                "hookEventName": event.name(),
                "decision": result,
            }
        }),
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
