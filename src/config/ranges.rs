//! The ranges numeric settings must lie in: durations, connections, the memory interactions
//! and events may take, and the request timeouts. Checked by [`Settings::validate`].

use super::{ConfigError, InteractionSettings, ServerSettings, Settings};

/// Upper bound for durations given in seconds: one year.
const YEAR_SECS: u64 = 365 * 24 * 3600;
/// Upper bound for durations given in hours: one year.
const YEAR_HOURS: u64 = 365 * 24;

/// Upper bound of `server.header_read_timeout_secs` and `server.body_timeout_secs`.
const HOUR_SECS: u64 = 3600;

/// Upper bound of `server.body_min_bytes_per_sec`: 1 GiB per second.
const MAX_BODY_RATE: u64 = 1 << 30;

/// Lower bound of `interactions.max_pending_bytes` and `max_pending_bytes_per_token`: 2 MiB,
/// room for one interaction of the largest body.
const MIN_PENDING_BYTES: usize = 2 * 1024 * 1024;

/// Lower bound of `interactions.event_buffer_bytes`: 1 MiB.
const MIN_EVENT_BUFFER_BYTES: usize = 1024 * 1024;

/// Upper bound of `server.max_connections` (and of `server.max_event_streams`).
const MAX_CONNECTIONS: usize = 1_000_000;

impl Settings {
    /// Every deadline, retention and grant duration is at least 1 and at most a year.
    pub(super) fn check_durations(&self) -> Result<(), ConfigError> {
        let i = &self.interactions;
        for (name, v, max) in [
            (
                "interactions.approval_timeout_secs",
                i.approval_timeout_secs,
                YEAR_SECS,
            ),
            (
                "interactions.question_timeout_secs",
                i.question_timeout_secs,
                YEAR_SECS,
            ),
            (
                "interactions.max_timeout_secs",
                i.max_timeout_secs,
                YEAR_SECS,
            ),
            (
                "interactions.retention_hours",
                i.retention_hours,
                YEAR_HOURS,
            ),
            (
                "interactions.session_grant_hours",
                i.session_grant_hours,
                YEAR_HOURS,
            ),
            (
                "hooks.claude_code.timeout_secs",
                self.hooks.claude_code.timeout_secs,
                YEAR_SECS,
            ),
            (
                "hooks.codex.timeout_secs",
                self.hooks.codex.timeout_secs,
                YEAR_SECS,
            ),
            (
                "hooks.claude_code.finish_wait_secs",
                self.hooks.claude_code.finish_wait_secs,
                YEAR_SECS,
            ),
            (
                "hooks.codex.finish_wait_secs",
                self.hooks.codex.finish_wait_secs,
                YEAR_SECS,
            ),
            (
                "hooks.acp.timeout_secs",
                self.hooks.acp.timeout_secs,
                YEAR_SECS,
            ),
            (
                "hooks.acp.finish_wait_secs",
                self.hooks.acp.finish_wait_secs,
                YEAR_SECS,
            ),
            (
                "hooks.opencode.finish_wait_secs",
                self.hooks.opencode.finish_wait_secs,
                YEAR_SECS,
            ),
        ] {
            if v == 0 {
                return Err(ConfigError::Invalid(format!("{name} must be at least 1")));
            }
            if v > max {
                return Err(ConfigError::Invalid(format!(
                    "{name} must be at most {max} (one year), got {v}"
                )));
            }
        }
        Ok(())
    }
}

impl ServerSettings {
    /// `max_connections` and `max_event_streams` are 1 to [`MAX_CONNECTIONS`], and
    /// `max_connections_per_token` 1 to `max_connections`.
    pub(super) fn check_connections(&self) -> Result<(), ConfigError> {
        if !(1..=MAX_CONNECTIONS).contains(&self.max_connections) {
            return Err(ConfigError::Invalid(format!(
                "server.max_connections must be between 1 and {MAX_CONNECTIONS}, got {}",
                self.max_connections
            )));
        }
        if !(1..=MAX_CONNECTIONS).contains(&self.max_event_streams) {
            return Err(ConfigError::Invalid(format!(
                "server.max_event_streams must be between 1 and {MAX_CONNECTIONS}, got {}",
                self.max_event_streams
            )));
        }
        if !(1..=self.max_connections).contains(&self.max_connections_per_token) {
            return Err(ConfigError::Invalid(format!(
                "server.max_connections_per_token must be between 1 and server.max_connections                  ({}), got {}: it is one token's share of the connections, so that one client                  cannot take them all",
                self.max_connections, self.max_connections_per_token
            )));
        }
        Ok(())
    }

    /// The request head and body timeouts are a second to an hour, and the body's minimum
    /// rate at most [`MAX_BODY_RATE`].
    pub(super) fn check_request_timeouts(&self) -> Result<(), ConfigError> {
        if !(1..=HOUR_SECS).contains(&self.header_read_timeout_secs) {
            return Err(ConfigError::Invalid(format!(
                "server.header_read_timeout_secs must be between 1 and {HOUR_SECS} (one hour), got {}",
                self.header_read_timeout_secs
            )));
        }
        if !(1..=HOUR_SECS).contains(&self.body_timeout_secs) {
            return Err(ConfigError::Invalid(format!(
                "server.body_timeout_secs must be between 1 and {HOUR_SECS} (one hour), got {}",
                self.body_timeout_secs
            )));
        }
        if self.body_min_bytes_per_sec > MAX_BODY_RATE {
            return Err(ConfigError::Invalid(format!(
                "server.body_min_bytes_per_sec must be at most {MAX_BODY_RATE} (1 GiB per second), got {}",
                self.body_min_bytes_per_sec
            )));
        }
        Ok(())
    }
}

impl InteractionSettings {
    /// The event buffer and the pending budgets hold at least one interaction of the largest
    /// size, and one token's share is at most the whole.
    pub(super) fn check_memory(&self) -> Result<(), ConfigError> {
        if self.event_buffer_bytes < MIN_EVENT_BUFFER_BYTES {
            return Err(ConfigError::Invalid(format!(
                "interactions.event_buffer_bytes must be at least {MIN_EVENT_BUFFER_BYTES} (1 MiB), got {}",
                self.event_buffer_bytes
            )));
        }
        if self.max_pending_bytes < MIN_PENDING_BYTES
            || !(MIN_PENDING_BYTES..=self.max_pending_bytes)
                .contains(&self.max_pending_bytes_per_token)
        {
            return Err(ConfigError::Invalid(format!(
                "interactions.max_pending_bytes ({}) and interactions.max_pending_bytes_per_token \
                 ({}) must be at least {MIN_PENDING_BYTES} (2 MiB: one interaction of the largest \
                 size), and the share of one token at most the whole",
                self.max_pending_bytes, self.max_pending_bytes_per_token
            )));
        }
        Ok(())
    }
}
