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
//! `notifications/cancelled`, the end of its session, or its connection dropping without its
//! coming back within `mcp.reconnect_grace_secs` withdraws the interaction on every
//! channel. Who asks is the client's `initialize` name and version (the agent) and its
//! `Mcp-Session-Id` (the session).
//!
//! Transport: rmcp's Streamable HTTP server as a tower service, mounted by the app behind the
//! agent-token check like every agent endpoint, with a gate in front (`gate.rs`) that keeps
//! sessions and GET streams within their limits, and a session manager ([`Sessions`]) that
//! closes idle sessions, withdraws what a closed session waited for, and sends priming events
//! only to the protocol revisions that read them. This module knows the core and nothing of
//! channels or of the HTTP layer's routes. `imrelay mcp` ([`crate::cli::mcp`]) relays stdio
//! to it.

mod calls;
mod dropped;
mod errors;
mod gate;
mod server;
mod sessions;
mod settings;
mod tools;

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use tokio_util::sync::CancellationToken;

use crate::interaction::Registry;
use crate::metrics::Metrics;

pub use server::Relay;
pub use sessions::Sessions;
pub use settings::McpSettings;
pub use tools::{
    APPROVAL_TOOL, ApprovalResult, AskResult, MAX_CHOICES, MIN_CHOICES, Status, split_answer,
};

/// Where the endpoint is served.
pub(crate) const PATH: &str = crate::wire::MCP_PATH;

/// How long a client waits before it resumes a stream that dropped, as priming events say.
const SSE_RETRY: Duration = Duration::from_secs(3);

/// A task to run beside the server until it shuts down.
pub type Task = std::pin::Pin<Box<dyn Future<Output = ()> + Send + 'static>>;

/// The Streamable HTTP endpoint as a tower service.
pub type Service = StreamableHttpService<Relay, Sessions>;

/// The MCP endpoint: its routes, and the task that closes idle sessions.
pub struct Endpoint {
    service: Service,
    gate: gate::Gate,
    reaper: Task,
}

/// The Streamable HTTP endpoint over `registry`, ending its sessions when `shutdown` fires;
/// `max_body` bounds a request body. Mount it with [`Endpoint::into_parts`].
pub fn endpoint(
    registry: Registry,
    settings: &McpSettings,
    max_body: usize,
    metrics: &Metrics,
    shutdown: &CancellationToken,
) -> Endpoint {
    let table = sessions::Table::new(
        sessions::Limits {
            max_sessions: settings.max_sessions,
            max_per_token: settings.max_sessions_per_token,
            idle: Duration::from_secs(settings.session_idle_secs),
        },
        metrics,
    );
    let relay = Relay::new(registry, settings, metrics, table.clone(), shutdown.clone());
    let links = dropped::Links::new(Duration::from_secs(settings.reconnect_grace_secs));
    let sessions = Arc::new(Sessions::new(table.clone(), SSE_RETRY, links));
    // The agent-token check in front of it decides who may call, for any host name (the
    // loopback rule for a scope without tokens includes the Host header), so rmcp's own
    // loopback-only Host check would only refuse deployments behind a proxy. Priming events
    // come from the session manager, for the revisions that read them: the transport's own
    // (on every GET stream and `initialize` answer, whatever the revision) are off.
    let config = StreamableHttpServerConfig::default()
        .disable_allowed_hosts()
        .with_sse_retry(None)
        .with_max_request_body_bytes(max_body)
        .with_cancellation_token(shutdown.child_token());
    let service = StreamableHttpService::new(move || Ok(relay.clone()), sessions.clone(), config);
    Endpoint {
        service,
        gate: gate::Gate::new(table, settings.max_streams, max_body, metrics),
        reaper: Box::pin(sessions::reap(sessions, shutdown.clone())),
    }
}

impl Endpoint {
    /// The routes at `PATH` (the caller puts the agent-token check in front), and the task
    /// to run beside the server.
    pub fn into_parts<S: Clone + Send + Sync + 'static>(self) -> (Router<S>, Task) {
        let gate = self.gate;
        let router =
            Router::new()
                .route_service(PATH, self.service)
                .layer(axum::middleware::from_fn(move |req, next| {
                    gate::gate(gate.clone(), req, next)
                }));
        (router, self.reaper)
    }
}
