//! `[mcp]`: the MCP endpoint's settings and their validation.

use serde::{Deserialize, Serialize};

/// Longest accepted `progress_interval_secs`.
const MAX_PROGRESS_INTERVAL_SECS: u64 = 300;

/// `[mcp]`
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct McpSettings {
    /// Whether `/mcp` is served.
    pub enabled: bool,
    /// Seconds between progress notifications while a tool call waits for a person (sent
    /// only when the client asked for progress).
    pub progress_interval_secs: u64,
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
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_progress_interval_is_bounded() {
        let mut s = McpSettings {
            enabled: true,
            progress_interval_secs: 15,
        };
        assert!(s.validate().is_ok());
        for bad in [0, MAX_PROGRESS_INTERVAL_SECS + 1] {
            s.progress_interval_secs = bad;
            let e = s.validate().unwrap_err();
            assert!(e.contains("mcp.progress_interval_secs"), "{e}");
        }
    }
}
