//! `[mcp]`: the MCP endpoint's settings and their validation.

use serde::{Deserialize, Serialize};

/// Longest accepted `progress_interval_secs`.
const MAX_PROGRESS_INTERVAL_SECS: u64 = 300;

/// Longest accepted `session_idle_secs` (a week).
const MAX_SESSION_IDLE_SECS: u64 = 7 * 24 * 3600;

/// Longest accepted `reconnect_grace_secs` (an hour).
const MAX_RECONNECT_GRACE_SECS: u64 = 3600;

/// `[mcp]`
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct McpSettings {
    /// Whether `/mcp` is served.
    pub enabled: bool,
    /// Seconds between progress notifications while a tool call waits for a person (sent
    /// only when the client asked for progress).
    pub progress_interval_secs: u64,
    /// Sessions open at once, in all; an `initialize` beyond it gets `503`.
    pub max_sessions: usize,
    /// Sessions open at once with one agent token (or, without agent tokens, from this
    /// machine); an `initialize` beyond it gets `429`.
    pub max_sessions_per_token: usize,
    /// Seconds after which a session with nothing under way (no tool call waiting, no stream
    /// open, no request) is closed.
    pub session_idle_secs: u64,
    /// GET streams (`GET /mcp`) open at once; more get `503`.
    pub max_streams: usize,
    /// Seconds a tool call whose connection dropped waits for its client to come back
    /// (resume the call's stream, or call again with the same id) before its interaction is
    /// withdrawn; 0: at once.
    pub reconnect_grace_secs: u64,
}

impl McpSettings {
    /// Refuses values out of range, naming the key.
    pub fn validate(&self) -> Result<(), String> {
        if !(1..=MAX_PROGRESS_INTERVAL_SECS).contains(&self.progress_interval_secs) {
            return Err(format!(
                "mcp.progress_interval_secs must be between 1 and {MAX_PROGRESS_INTERVAL_SECS}, got {}",
                self.progress_interval_secs
            ));
        }
        if self.max_sessions == 0 {
            return Err("mcp.max_sessions must be at least 1".into());
        }
        if !(1..=self.max_sessions).contains(&self.max_sessions_per_token) {
            return Err(format!(
                "mcp.max_sessions_per_token must be between 1 and mcp.max_sessions ({}), got {}",
                self.max_sessions, self.max_sessions_per_token
            ));
        }
        if !(1..=MAX_SESSION_IDLE_SECS).contains(&self.session_idle_secs) {
            return Err(format!(
                "mcp.session_idle_secs must be between 1 and {MAX_SESSION_IDLE_SECS}, got {}",
                self.session_idle_secs
            ));
        }
        if self.max_streams == 0 {
            return Err("mcp.max_streams must be at least 1".into());
        }
        if self.reconnect_grace_secs > MAX_RECONNECT_GRACE_SECS {
            return Err(format!(
                "mcp.reconnect_grace_secs must be between 0 and {MAX_RECONNECT_GRACE_SECS}, got {}",
                self.reconnect_grace_secs
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn defaults() -> McpSettings {
        McpSettings {
            enabled: true,
            progress_interval_secs: 15,
            max_sessions: 1000,
            max_sessions_per_token: 250,
            session_idle_secs: 600,
            max_streams: 256,
            reconnect_grace_secs: 30,
        }
    }

    #[test]
    fn values_out_of_range_are_refused_by_name() {
        assert!(defaults().validate().is_ok());
        type Change = fn(&mut McpSettings);
        let bad: [(Change, &str); 8] = [
            (
                |s| s.progress_interval_secs = 0,
                "mcp.progress_interval_secs",
            ),
            (
                |s| s.progress_interval_secs = MAX_PROGRESS_INTERVAL_SECS + 1,
                "mcp.progress_interval_secs",
            ),
            (|s| s.max_sessions = 0, "mcp.max_sessions "),
            (
                |s| s.max_sessions_per_token = 0,
                "mcp.max_sessions_per_token",
            ),
            (
                |s| s.max_sessions_per_token = 1001,
                "mcp.max_sessions_per_token",
            ),
            (|s| s.session_idle_secs = 0, "mcp.session_idle_secs"),
            (|s| s.max_streams = 0, "mcp.max_streams"),
            (
                |s| s.reconnect_grace_secs = MAX_RECONNECT_GRACE_SECS + 1,
                "mcp.reconnect_grace_secs",
            ),
        ];
        for (change, key) in bad {
            let mut s = defaults();
            change(&mut s);
            let e = s.validate().unwrap_err();
            assert!(e.contains(key), "{key}: {e}");
        }
    }
}
