//! The agent adapters: each agent's *own* way of asking for approval (its hooks), translated
//! into interactions and the answers back into exactly the shape that agent accepts.
//!
//! Every adapter has the same shape: `src/agents/<agent>/mod.rs` reads its agent's native
//! request, maps the agent's tool names and inputs onto the ones the rest of imrelay reads
//! (Claude Code's: `Bash` with `command`, `Edit` with `file_path`, ...; see
//! docs/architecture.md), creates or re-attaches to the interaction, waits, and writes the
//! agent's reply; `settings.rs` beside it holds its section of `[hooks]`. What they share
//! (calls waiting on an interaction and their withdrawal, derived ids and their generations,
//! waiting within a deadline) is in [`shared`].
//!
//! The adapters serve their endpoints through [`routes`], which the app mounts behind the
//! agent-token check. They import the core, `store`, `wire` and `metrics`; never `http`,
//! `channels` or `config`.

pub mod acp;
pub mod claude_code;
pub mod codex;
pub mod opencode;
pub mod shared;
pub mod steer;
pub mod turns;

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::routing::post;
use serde::{Deserialize, Serialize};
use tokio_util::sync::CancellationToken;

use crate::interaction::{Interaction, InteractionId, NewInteraction, Registry};
use crate::metrics::Metrics;
use crate::wire::error::ApiError;
use shared::HookCalls;

/// `tool_name` and `input` as `agent` (an interaction's `agent`: `claude-code`,
/// `claude-code/<subagent>`, `codex`, ...) named them, in the vocabulary the rest of imrelay
/// reads (Claude Code's tool names and inputs; see docs/architecture.md): each adapter's one
/// mapping function, chosen by agent. An agent without an adapter is taken to use that
/// vocabulary already.
pub fn as_claude_code(
    agent: &str,
    tool_name: &str,
    input: serde_json::Map<String, serde_json::Value>,
) -> (String, serde_json::Map<String, serde_json::Value>) {
    match agent {
        codex::AGENT => codex::as_claude_code(tool_name, input),
        // Claude Code's names are the vocabulary.
        _ => (tool_name.to_string(), input),
    }
}

/// `[hooks]`: each adapter's section.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct HooksSettings {
    /// `[hooks.claude_code]`
    pub claude_code: claude_code::ClaudeCodeHookSettings,
    /// `[hooks.codex]`
    pub codex: codex::CodexHookSettings,
    /// `[hooks.acp]`
    pub acp: acp::AcpHookSettings,
    /// `[hooks.opencode]`
    pub opencode: opencode::OpenCodeHookSettings,
}

/// What a hook replies when nobody answered in time.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum OnTimeout {
    /// Deny the tool call.
    Deny,
    /// Fall back to the agent's own permission prompt.
    Ask,
}

/// What every adapter's handler reads: one reference-counted [`HooksState`].
#[derive(Clone)]
pub struct Hooks(Arc<HooksState>);

/// What [`Hooks`] holds.
pub struct HooksState {
    /// The interaction registry.
    pub registry: Registry,
    /// The adapters' settings.
    pub settings: HooksSettings,
    /// Fires when the server begins shutting down: waiting calls are answered and withdrawn.
    pub shutdown: CancellationToken,
    /// The hook calls waiting on each interaction.
    pub calls: Arc<HookCalls>,
}

impl Hooks {
    /// The adapters' state over `registry`; registers their metrics with `metrics`.
    pub fn new(
        registry: Registry,
        settings: HooksSettings,
        metrics: &Metrics,
        shutdown: CancellationToken,
    ) -> Self {
        Self(Arc::new(HooksState {
            registry,
            settings,
            shutdown,
            calls: HookCalls::new(metrics),
        }))
    }
}

impl HooksState {
    /// Creates (or re-attaches to) the interaction of a call with a derived id `base`, as
    /// [`shared::create_generation`] does, on this registry and its waiting calls.
    pub async fn create_generation(
        &self,
        of: shared::Generations,
        base: &str,
        owner: &str,
        new: NewInteraction,
    ) -> Result<(Arc<Interaction>, shared::Attached), shared::Refused> {
        shared::create_generation(&self.registry, &self.calls, of, base, owner, new).await
    }

    /// Waits for the answer to `id` for at most `wait`, or until shutdown, as
    /// [`shared::wait`] does: the interaction whose resolution answers the agent, or why
    /// there is none ([`shared::Waited::answer`]).
    pub async fn answer(
        &self,
        id: &InteractionId,
        wait: Duration,
    ) -> Result<Result<Arc<Interaction>, String>, ApiError> {
        Ok(shared::wait(&self.registry, &self.shutdown, id, wait)
            .await?
            .answer())
    }
}

impl std::ops::Deref for Hooks {
    type Target = HooksState;

    fn deref(&self) -> &HooksState {
        &self.0
    }
}

/// Every adapter's endpoint (the caller puts the agent-token check in front).
pub fn routes<S: Clone + Send + Sync + 'static>(hooks: Hooks) -> Router<S> {
    Router::new()
        .route(claude_code::PATH, post(claude_code::hook))
        .route(codex::PATH, post(codex::hook))
        .route(acp::PATH, post(acp::hook))
        .route(acp::SESSION_PATH, post(acp::session))
        .route(opencode::SESSION_PATH, post(opencode::session))
        .with_state(hooks)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn each_agent_maps_with_its_own_adapter() {
        let patch = json!({"command": "*** Begin Patch\n*** Delete File: a\n*** End Patch"});
        let input = patch.as_object().cloned().unwrap();
        let (tool, _) = as_claude_code("codex", "apply_patch", input.clone());
        assert_eq!(tool, crate::interaction::PATCH_TOOL);
        // Claude Code's names are kept, whichever subagent asks.
        for agent in ["claude-code", "claude-code/Explore", "my-agent"] {
            assert_eq!(
                as_claude_code(agent, "apply_patch", input.clone()),
                ("apply_patch".to_string(), input.clone())
            );
        }
    }
}
