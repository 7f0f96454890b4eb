//! The MCP server at `/mcp`: any MCP client (Claude Code, Codex, Gemini CLI, Cursor, agent
//! frameworks) asks people through imrelay by calling its tools.
//!
//! - `request_approval`: an action in words plus its details → an approval interaction;
//!   returns approved or denied with the reason.
//! - `ask_human`: a question with 2 to 4 choices → an `AskUserQuestion` question; returns the
//!   chosen labels and any typed text. Without choices it asks for free text, and with a
//!   `schema` it asks for a form (both form interactions); returns the text or the content.
//! - `permission_prompt`: what Claude Code's `--permission-prompt-tool` calls; returns the
//!   permission decision as the JSON text Claude Code reads.
//!
//! Each call creates an interaction (or re-attaches to the one with the same id), waits for it
//! with progress notifications when the client asked for them, and answers with text for the
//! model plus structured content matching the tool's output schema. The client's
//! `notifications/cancelled` (or the end of its session) withdraws the interaction on every
//! channel. Who asks is the client's `initialize` name and version (the agent) and its
//! `Mcp-Session-Id` (the session).
//!
//! Transport: rmcp's Streamable HTTP server as a tower service, mounted by the app behind the
//! agent-token check like every agent endpoint. This module knows the core and nothing of
//! channels or of the HTTP layer's routes. `imrelay mcp` ([`crate::cli::mcp`]) relays stdio
//! to it.

mod calls;
mod errors;
mod server;
mod settings;
mod tools;

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use tokio_util::sync::CancellationToken;

use crate::interaction::Registry;
use crate::metrics::Metrics;

pub use server::Relay;
pub use settings::McpSettings;
pub use tools::{
    APPROVAL_TOOL, ApprovalResult, AskResult, MAX_CHOICES, MIN_CHOICES, Status, split_answer,
};

/// Where the endpoint is served.
pub(crate) const PATH: &str = crate::wire::MCP_PATH;

/// The Streamable HTTP endpoint as a tower service.
pub type Service = StreamableHttpService<Relay, LocalSessionManager>;

/// `service` at `PATH`, its refusals turned into JSON-RPC errors; `max_body` bounds a request
/// body. The caller puts the agent-token check in front.
pub fn router<S: Clone + Send + Sync + 'static>(service: Service, max_body: usize) -> Router<S> {
    Router::new()
        .route_service(PATH, service)
        .layer(axum::middleware::from_fn(move |req, next| {
            errors::json_rpc_errors(max_body, req, next)
        }))
}

/// The Streamable HTTP endpoint over `registry`, ending its sessions when `shutdown` fires
/// (mount it with [`router`]).
///
/// A session with nothing under way is closed after `idle`; give it longer than the longest
/// wait (a call without progress notifications is silent while it waits). `max_body` bounds a
/// request body.
pub fn service(
    registry: Registry,
    settings: &McpSettings,
    idle: Duration,
    max_body: usize,
    metrics: &Metrics,
    shutdown: &CancellationToken,
) -> Service {
    let relay = Relay::new(registry, settings, metrics, shutdown.clone());
    let mut sessions = LocalSessionManager::default();
    sessions.session_config.keep_alive = Some(idle);
    // The agent-token check in front of it decides who may call, for any host name (the
    // loopback rule for a scope without tokens includes the Host header), so rmcp's own
    // loopback-only Host check would only refuse deployments behind a proxy.
    let config = StreamableHttpServerConfig::default()
        .disable_allowed_hosts()
        .with_max_request_body_bytes(max_body)
        .with_cancellation_token(shutdown.child_token());
    StreamableHttpService::new(move || Ok(relay.clone()), Arc::new(sessions), config)
}
