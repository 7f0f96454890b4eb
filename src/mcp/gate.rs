//! What `/mcp` checks and counts before rmcp's transport serves a request, and what it puts
//! right in the answer.
//!
//! - A body that is not a JSON-RPC message is refused with a JSON-RPC error
//!   ([`super::errors`]).
//! - An `initialize` (which opens a session) takes a place among the sessions of its agent
//!   token and among all sessions ([`super::sessions`]); with none left it gets `429` (the
//!   token's share is used up) or `503` (every session is taken), with `Retry-After` and a
//!   JSON-RPC error that says what to do.
//! - A GET stream takes one of `mcp.max_streams` places, its budget of its own, held until
//!   the stream ends; with none left it gets `503` and `Retry-After`.
//! - A response stream (a call's, the GET stream) keeps its session from being idle while
//!   it is open; every request for a session counts as activity.
//! - `DELETE` of an unknown session is `404`, as for any request to it; a session closed
//!   answers `200` (what the official SDKs' servers answer and their clients expect: the
//!   Python SDK's client reports a `202` as a failed termination).
//! - The transport's other plain-text refusals become JSON-RPC errors.

use std::sync::Arc;

use axum::body::Body;
use axum::extract::Request;
use axum::http::{HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::Response;
use futures_util::StreamExt;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use rmcp::model::{ClientJsonRpcMessage, ClientRequest};
use serde_json::{Value, json};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use super::errors::{self, LIMIT_REACHED};
use super::sessions::{Full, Table};
use crate::metrics::Metrics;
use crate::wire::Principal;

/// What `Retry-After` tells a client refused a GET stream, in seconds.
const STREAM_RETRY_AFTER_SECS: u64 = 5;

/// Longest `Retry-After` a client refused a session is told, in seconds.
const SESSION_RETRY_AFTER_SECS: u64 = 60;

/// The state the gate keeps.
#[derive(Clone)]
pub(crate) struct Gate {
    sessions: Arc<Table>,
    streams: Arc<Semaphore>,
    max_streams: usize,
    max_body: usize,
    open_streams: Gauge,
    refused: Family<LimitLabels, Counter>,
}

/// Which limit refused a request.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct LimitLabels {
    /// The setting: `max_sessions`, `max_sessions_per_token` or `max_streams`.
    limit: String,
}

impl Gate {
    /// A gate over `sessions`, with `max_streams` GET streams at once and request bodies of
    /// at most `max_body` bytes; registers its metrics.
    pub(super) fn new(
        sessions: Arc<Table>,
        max_streams: usize,
        max_body: usize,
        metrics: &Metrics,
    ) -> Self {
        let gate = Self {
            sessions,
            streams: Arc::new(Semaphore::new(max_streams)),
            max_streams,
            max_body,
            open_streams: Gauge::default(),
            refused: Family::default(),
        };
        metrics.register(
            "imrelay_mcp_streams",
            "GET streams open on /mcp (counted against mcp.max_streams)",
            gate.open_streams.clone(),
        );
        metrics.register(
            "imrelay_mcp_refused",
            "MCP requests refused because a limit was reached (mcp.max_sessions, mcp.max_sessions_per_token, mcp.max_streams)",
            gate.refused.clone(),
        );
        gate
    }

    fn count_refusal(&self, limit: &str) {
        self.refused
            .get_or_create(&LimitLabels {
                limit: limit.to_string(),
            })
            .inc();
    }

    /// The refusal of an `initialize` (request `id`) for want of a session.
    fn no_session(&self, full: Full, id: Value) -> Response {
        let idle = self.sessions.limits().idle.as_secs();
        let (status, limit, max, message) = match full {
            Full::Token(max) => (
                StatusCode::TOO_MANY_REQUESTS,
                "max_sessions_per_token",
                max,
                format!(
                    "This agent token already has {max} MCP sessions open, the most \
                     mcp.max_sessions_per_token allows. Close the sessions you no longer use \
                     (DELETE /mcp with their Mcp-Session-Id), or try again once unused ones \
                     have closed: a session closes after {idle} s with nothing under way."
                ),
            ),
            Full::All(max) => (
                StatusCode::SERVICE_UNAVAILABLE,
                "max_sessions",
                max,
                format!(
                    "imrelay has {max} MCP sessions open, the most mcp.max_sessions allows: \
                     try again shortly (a session closes after {idle} s with nothing under \
                     way)."
                ),
            ),
        };
        self.count_refusal(limit);
        let retry_after = idle.min(SESSION_RETRY_AFTER_SECS);
        let mut resp = errors::rpc_error_with(
            status,
            id,
            LIMIT_REACHED,
            message,
            Some(
                json!({"limit": format!("mcp.{limit}"), "max": max, "retry_after_secs": retry_after}),
            ),
        );
        resp.headers_mut()
            .insert(header::RETRY_AFTER, HeaderValue::from(retry_after));
        resp
    }

    /// The refusal of a GET stream for want of a place.
    fn no_stream(&self) -> Response {
        self.count_refusal("max_streams");
        let max = self.max_streams;
        let mut resp = errors::rpc_error_with(
            StatusCode::SERVICE_UNAVAILABLE,
            Value::Null,
            LIMIT_REACHED,
            format!(
                "imrelay has {max} GET streams open on /mcp, the most mcp.max_streams allows: \
                 try again later. Tool calls work without this stream (each call's answer \
                 comes on its own response)."
            ),
            Some(
                json!({"limit": "mcp.max_streams", "max": max, "retry_after_secs": STREAM_RETRY_AFTER_SECS}),
            ),
        );
        resp.headers_mut().insert(
            header::RETRY_AFTER,
            HeaderValue::from(STREAM_RETRY_AFTER_SECS),
        );
        resp
    }
}

/// One GET stream's place, counted while it is held.
struct StreamPlace {
    _permit: OwnedSemaphorePermit,
    open: Gauge,
}

impl StreamPlace {
    fn new(permit: OwnedSemaphorePermit, open: &Gauge) -> Self {
        open.inc();
        Self {
            _permit: permit,
            open: open.clone(),
        }
    }
}

impl Drop for StreamPlace {
    fn drop(&mut self) {
        self.open.dec();
    }
}

/// Whether `resp` is an event stream being sent.
fn is_stream(resp: &Response) -> bool {
    resp.status() == StatusCode::OK
        && resp
            .headers()
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.starts_with("text/event-stream"))
}

/// `resp`, whose body keeps `held` until it ends or the client goes away.
fn holding(resp: Response, held: impl Send + 'static) -> Response {
    let (parts, body) = resp.into_parts();
    let body = body.into_data_stream().map(move |chunk| {
        let _ = &held;
        chunk
    });
    Response::from_parts(parts, Body::from_stream(body))
}

/// Whether `message` opens a session.
fn is_initialize(message: &ClientJsonRpcMessage) -> bool {
    matches!(message, ClientJsonRpcMessage::Request(r)
        if matches!(r.request, ClientRequest::InitializeRequest(_)))
}

/// The middleware on `/mcp`.
pub(crate) async fn gate(gate: Gate, mut req: Request, next: Next) -> Response {
    let session = req
        .headers()
        .get("mcp-session-id")
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    let known = session.as_deref().is_some_and(|s| gate.sessions.touch(s));
    let mut place = None;
    match req.method().clone() {
        Method::POST if errors::is_json(&req) => {
            let (read, message) = match errors::read_body(req, gate.max_body).await {
                Ok(read) => read,
                Err(refused) => return *refused,
            };
            req = read;
            if session.is_none() && is_initialize(&message) {
                let principal = req
                    .extensions()
                    .get::<Principal>()
                    .cloned()
                    .unwrap_or(Principal::Local);
                match gate.sessions.reserve(principal) {
                    Ok(reservation) => {
                        req.extensions_mut().insert(reservation);
                    }
                    Err(full) => {
                        let id = match &message {
                            ClientJsonRpcMessage::Request(r) => {
                                serde_json::to_value(&r.id).unwrap_or(Value::Null)
                            }
                            _ => Value::Null,
                        };
                        return gate.no_session(full, id);
                    }
                }
            }
        }
        Method::GET if known => match gate.streams.clone().try_acquire_owned() {
            Ok(permit) => place = Some(StreamPlace::new(permit, &gate.open_streams)),
            Err(_) => return gate.no_stream(),
        },
        Method::DELETE if session.is_some() && !known => {
            return errors::rpc_error(
                StatusCode::NOT_FOUND,
                Value::Null,
                errors::INVALID_REQUEST,
                "Not Found: Session not found".into(),
            );
        }
        _ => {}
    }
    let delete = req.method() == Method::DELETE;
    let resp = next.run(req).await;
    if delete && resp.status() == StatusCode::ACCEPTED {
        let mut closed = Response::new(Body::empty());
        *closed.status_mut() = StatusCode::OK;
        return closed;
    }
    if is_stream(&resp)
        && let Some(busy) = session.as_deref().and_then(|s| gate.sessions.stream(s))
    {
        return holding(resp, (busy, place));
    }
    errors::as_json_rpc(resp).await
}
