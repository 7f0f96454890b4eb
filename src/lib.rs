//! imrelay: a human-in-the-loop relay for AI agents.
//!
//! An agent hands imrelay a tool approval or a question and waits; imrelay shows it on every
//! configured channel at once (the desktop inbox, Telegram, Feishu/Lark, Slack, WeCom, DingTalk,
//! ntfy, Discord, webhooks), and the
//! first valid answer from any of them resolves it. The agent receives exactly the Claude
//! Agent SDK's `PermissionResult`.
//!
//! Layout:
//! - [`interaction`]: the core (model, validation, registry). No I/O, no HTTP.
//! - [`audit`]: the hash-chained audit trail.
//! - [`store`]: persistence behind one trait; SQLite embedded by default.
//! - [`present`]: how an interaction and a tool call read to a person, for every surface.
//! - [`channels`]: Telegram, Feishu/Lark, Slack, WeCom, DingTalk, ntfy, Discord, Matrix, Web Push and webhooks: present interactions, take answers.
//! - [`outbox`]: durable delivery of work to the outside world, with retries.
//! - [`http`]: the axum layer (API, event stream, inbox, health, metrics, routing) and the
//!   server that bounds connections.
//! - [`agents`]: the agent adapters: each agent's own approval hooks (Claude Code, ...) as
//!   interactions, and the answers back in the shape that agent accepts.
//! - [`mcp`]: the MCP server at `/mcp` (tools that ask people), over the core.
//! - [`tls`]: the TLS client settings every outgoing connection shares.
//! - [`app`]: wiring, shared by `main` and the tests.
//! - [`cli`]: the command-line tools: the terminal client of a running server (`watch`,
//!   `pending`, `show`, `answer`) and tools for the server's machine (`audit`, `backup`).
//!
//! Error policy: anything a request can reach returns typed errors (`thiserror`) that the
//! HTTP layer turns into JSON error bodies; `anyhow` is used only at start-up and in the CLI.

pub mod agents;
pub mod app;
pub mod audit;
pub mod channels;
pub mod cli;
pub mod config;
pub mod health;
pub mod http;
pub mod interaction;
pub mod mcp;
pub mod metrics;
pub mod outbox;
pub mod present;
pub mod settings;
pub mod store;
pub mod sync;
pub mod telemetry;
pub mod tls;
pub mod wire;

/// The version, with the git commit it was built from when known.
pub const VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (",
    env!("IMRELAY_GIT_COMMIT"),
    ")"
);
