//! `[hooks.claude_code]`: the Claude Code hook's settings.

use serde::{Deserialize, Serialize};

/// What the Claude Code hook replies when nobody answered in time.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum OnTimeout {
    /// Deny the tool call.
    Deny,
    /// Fall back to Claude Code's own permission prompt.
    Ask,
}

/// `[hooks.claude_code]`
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct ClaudeCodeHookSettings {
    /// How long the hook waits for an answer, seconds.
    pub timeout_secs: u64,
    /// The reply when nobody answered in time.
    pub on_timeout: OnTimeout,
}
