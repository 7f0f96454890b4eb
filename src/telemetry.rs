//! Logging with `tracing`: human-readable lines by default, one JSON object per line with
//! `log.format = "json"`, filtered by `RUST_LOG` or `log.level`. Set up once, at start-up.

use std::io::IsTerminal;

use tracing_subscriber::EnvFilter;

use crate::config::{LogFormat, LogSettings};

/// Installs the global subscriber, writing to standard error.
pub fn init(settings: &LogSettings) -> anyhow::Result<()> {
    let filter = match std::env::var("RUST_LOG") {
        Ok(v) if !v.trim().is_empty() => EnvFilter::try_new(v)?,
        _ => EnvFilter::try_new(&settings.level)?,
    };
    // Colours only on a terminal: escape codes in journald or a container log are noise.
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(std::io::stderr().is_terminal())
        .with_writer(std::io::stderr);
    let result = match settings.format {
        LogFormat::Text => builder.try_init(),
        LogFormat::Json => builder
            .json()
            .flatten_event(true)
            .with_current_span(false)
            .try_init(),
    };
    result.map_err(|e| anyhow::anyhow!("cannot set up logging: {e}"))
}
