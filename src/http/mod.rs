//! The axum layer: the router, shared state, authentication, the JSON API, the event stream,
//! the web inbox, health and metrics; and the server that runs it within
//! connection bounds ([`server`]).
//!
//! Routes and scopes:
//!
//! | route | scope |
//! |---|---|
//! | `GET /`, `GET /livez`, `GET /healthz`, `GET /metrics`, the inbox's assets (`/inbox.js`, `/passkeys.js`, `/push.js`, `/sw.js`, `/manifest.webmanifest`, the icons) | none |
//! | `POST /v1/interactions`, `GET /v1/interactions/{id}/wait`, `DELETE /v1/interactions/{id}`, `POST /v1/hooks/claude-code` | agent |
//! | `POST`, `GET`, `DELETE /mcp` (the MCP endpoint, mounted by the app) | agent |
//! | `GET /v1/interactions`, `POST /v1/interactions/{id}/respond`, `POST /v1/respond`, `GET /v1/events`, `GET /v1/audit`, `GET`, `POST /v1/grants`, `DELETE /v1/grants/{id}`, `GET /v1/sessions`, `GET /v1/sessions/{agent}/{id}`, `POST /v1/sessions/{agent}/{id}/messages`, `GET`, `POST /v1/passkeys`, `POST /v1/passkeys/register`, `POST /v1/passkeys/assert`, `POST /v1/passkeys/enrolment`, `DELETE /v1/passkeys/{id}`, `POST /v1/interactions/{id}/passkey`, `GET`, `POST /v1/presence` | operator |
//! | `POST /v1/webhooks/{name}/respond` | a Standard Webhooks signature (see [`crate::channels::webhook`]) |
//! | `GET /v1/interactions/{id}` | agent or operator (whichever check passes) |
//!
//! Channels with their own inbound endpoints (Telegram and Feishu webhooks, signed webhook
//! answers) add routes through [`AppState`]-independent routers merged in by the app.
//!
//! Every error any route returns, axum's own rejections included, has the shape
//! `{"error": {"code", "message", "field"?}}` ([`error::ApiError`]): handlers read their
//! input through the extractors of [`extract`] (never axum's `Json`, `Query`, `Path` or
//! `Bytes`, whose rejections are plain text), and unknown routes and methods go to JSON
//! fallbacks that cover the channels' routes too.

pub mod api;
pub mod auth;
pub mod bulk;
pub mod enrolment;
pub mod grants;
pub mod inbox;
pub mod kept;
pub mod operator;
pub mod passkeys;
pub mod presence;
pub mod quota;
mod refused;
pub mod server;
pub mod sessions;
pub mod sse;
mod summary;

pub use crate::wire::{MAX_BODY_BYTES, error, extract};

use std::sync::Arc;

use axum::Json;
use axum::Router;
use axum::extract::{DefaultBodyLimit, State};
use axum::http::{Method, StatusCode, Uri, header};
use axum::middleware::from_fn_with_state;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde_json::json;
use tokio_util::sync::CancellationToken;

use crate::config::Settings;
use crate::interaction::Registry;
use crate::metrics::Metrics;
use error::ApiError;

pub use crate::wire::is_own_path;

/// State shared by every handler: one reference-counted [`Shared`], so the clones axum makes
/// for every request (extractor, middleware) cost one atomic increment.
#[derive(Clone)]
pub struct AppState(Arc<Shared>);

impl AppState {
    /// Wraps the shared parts.
    pub fn new(shared: Shared) -> Self {
        Self(Arc::new(shared))
    }
}

impl std::ops::Deref for AppState {
    type Target = Shared;

    fn deref(&self) -> &Shared {
        &self.0
    }
}

/// What [`AppState`] holds.
pub struct Shared {
    /// The interaction registry.
    pub registry: Registry,
    /// Token checks.
    pub auth: Arc<auth::Auth>,
    /// Metrics.
    pub metrics: Arc<Metrics>,
    /// The effective settings.
    pub settings: Arc<Settings>,
    /// Fires when the server begins shutting down: long-polls and streams end early.
    pub shutdown: CancellationToken,
    /// Components reported by `/healthz` (e.g. a channel's connection state).
    pub health: Arc<crate::health::Health>,
    /// The open event streams (`GET /v1/events`), against `server.max_event_streams`.
    pub event_streams: sse::StreamCount,
    /// The requests each token has in flight, against `server.max_connections_per_token`.
    pub quota: Arc<quota::Quota>,
    /// Passkeys: the relying party and the challenges waiting for their second step.
    pub passkeys: Arc<passkeys::Passkeys>,
}

/// What the channels, the agent adapters and MCP add to the router.
pub struct Extra {
    /// The channels' own endpoints (they authenticate their callers themselves).
    pub open: Router,
    /// The channels' endpoints for operators, behind the operator-token check.
    pub operator: Router,
    /// The agent adapters' hooks and the MCP endpoint, behind the agent-token check.
    pub agent: Router<AppState>,
}

/// The full router for `state`, with `extra` merged in.
pub fn router(state: AppState, extra: Extra) -> Router {
    let Extra {
        open: extra,
        operator: operator_extra,
        agent: agent_extra,
    } = extra;
    // (axum refuses a route layer on a router without routes.)
    let operator_extra = if operator_extra.has_routes() {
        operator_extra.route_layer(from_fn_with_state(state.clone(), auth::operator))
    } else {
        operator_extra
    };
    let agent = Router::new()
        .route("/v1/interactions", post(api::create))
        .route("/v1/interactions/{id}/wait", get(api::wait))
        .route("/v1/interactions/{id}", axum::routing::delete(api::cancel))
        .merge(agent_extra)
        .route_layer(from_fn_with_state(state.clone(), auth::agent));
    let operator = Router::new()
        .route("/v1/interactions", get(api::list))
        .route("/v1/interactions/{id}/respond", post(api::respond))
        .route("/v1/respond", post(bulk::respond_many))
        .route("/v1/events", get(sse::events))
        .route("/v1/audit", get(api::audit))
        .route("/v1/interactions/{id}/display", get(api::display))
        .route("/v1/grants", get(grants::list).post(grants::add))
        .route("/v1/grants/{id}", axum::routing::delete(grants::revoke))
        .route("/v1/me", get(operator::me))
        .route("/v1/passkeys", get(passkeys::list).post(passkeys::create))
        .route("/v1/passkeys/register", post(passkeys::register))
        .route("/v1/passkeys/assert", post(passkeys::prove))
        .route("/v1/passkeys/enrolment", post(passkeys::enrol))
        .route("/v1/passkeys/{id}", axum::routing::delete(passkeys::remove))
        .route("/v1/interactions/{id}/passkey", post(passkeys::challenge))
        .route("/v1/presence", get(presence::list).post(presence::report))
        .route("/v1/sessions", get(sessions::list))
        .route("/v1/sessions/{agent}/{id}", get(sessions::get))
        .route(
            "/v1/sessions/{agent}/{id}/messages",
            post(sessions::message),
        )
        .route_layer(from_fn_with_state(state.clone(), auth::operator));
    let either = Router::new()
        .route("/v1/interactions/{id}", get(api::get))
        .route_layer(from_fn_with_state(state.clone(), auth::any));
    let open = Router::new()
        .route("/", get(inbox::page))
        .route("/inbox.js", get(inbox::script))
        .route("/passkeys.js", get(inbox::passkeys_script))
        .route("/inbox.css", get(inbox::style))
        .route("/push.js", get(inbox::push_script))
        .route("/sw.js", get(inbox::worker))
        .route("/manifest.webmanifest", get(inbox::manifest))
        .route(inbox::ICONS[0], get(inbox::icon))
        .route(inbox::ICONS[1], get(inbox::icon))
        .route(inbox::ICONS[2], get(inbox::icon))
        .route(inbox::ICONS[3], get(inbox::icon))
        .route("/livez", get(livez))
        .route("/healthz", get(healthz))
        .route("/metrics", get(metrics));
    Router::new()
        .merge(agent)
        .merge(operator)
        .merge(either)
        .merge(open)
        .with_state(state)
        // The channels' endpoints before the fallbacks: a method-not-allowed fallback covers
        // only the routes registered before it.
        .merge(extra)
        .merge(operator_extra)
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(DefaultBodyLimit::max(MAX_BODY_BYTES))
}

async fn not_found(method: Method, uri: Uri) -> ApiError {
    ApiError::not_found(format!("no route for {method} {}", uri.path()))
}

async fn method_not_allowed(method: Method, uri: Uri) -> ApiError {
    ApiError::new(
        StatusCode::METHOD_NOT_ALLOWED,
        "method_not_allowed",
        format!("{method} is not allowed on {}", uri.path()),
    )
}

/// Liveness: the process serves requests. Nothing else is checked, so that a full or
/// read-only disk (which `/healthz` reports) does not get a healthy process restarted in a
/// loop by a supervisor that restarts on failed liveness checks.
async fn livez() -> Json<serde_json::Value> {
    Json(json!({"status": "ok", "version": env!("CARGO_PKG_VERSION")}))
}

/// Readiness: the store can be read and take writes, and how the components are doing.
async fn healthz(State(state): State<AppState>) -> Response {
    // Reads and writes fail separately: a read-only or full disk still serves what it has.
    let store = state.registry.store().health().await;
    let components = state.health.snapshot();
    let (store_state, healthy, error) = (store.as_str(), store.error().is_none(), store.error());
    let mut body = json!({
        "status": if healthy { "ok" } else { "degraded" },
        "version": env!("CARGO_PKG_VERSION"),
        "store": store_state,
        "pending": state.registry.pending_count(),
        "components": components,
    });
    if let Some(e) = error {
        body["store_error"] = json!(e.to_string());
    }
    // A channel that cannot reach its platform degrades the status and is named, but the
    // answer stays 200: the server still takes interactions, the other channels and the
    // inbox still answer them, so a readiness probe keeps it in service.
    let failing = state.health.failing();
    if !failing.is_empty() {
        body["status"] = json!("degraded");
        body["failing"] = json!(failing);
    }
    let status = if healthy {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    (status, Json(body)).into_response()
}

async fn metrics(State(state): State<AppState>) -> Response {
    if let Ok(backlog) = state.registry.store().job_backlog().await {
        state.metrics.set_outbox_backlog(backlog);
    }
    let body = state.metrics.encode(state.registry.pending_count());
    (
        [(
            header::CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        body,
    )
        .into_response()
}
