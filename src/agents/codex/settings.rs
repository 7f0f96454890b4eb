//! `[hooks.codex]`: the Codex hook endpoint's settings.

use serde::{Deserialize, Serialize};

use crate::agents::OnTimeout;

/// `[hooks.codex]`
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct CodexHookSettings {
    /// The longest the endpoint waits for an answer, seconds (the hook command asks for less
    /// when its own timeout is shorter).
    pub timeout_secs: u64,
    /// What a `PermissionRequest` hook answers when nobody answered in time.
    pub on_timeout: OnTimeout,
    /// What happens when the agent's turn ends (its `Stop` hook): `off`, `tell` (a
    /// "finished" question reaches the session's route) or `ask` (and the hook holds the
    /// agent for a reply).
    pub on_finish: crate::agents::steer::OnFinish,
    /// How long `on_finish = "ask"` holds the agent for a reply, seconds.
    pub finish_wait_secs: u64,
}
