//! What every inbound endpoint shares, whoever serves it (the agent API in `http/`, a
//! channel's callback in `channels/`): the JSON error every bad request gets
//! (`{"error":{"code","message","field"?}}`, [`error::ApiError`]) and the extractors that turn a
//! request into typed values or into that error ([`extract`]).
//!
//! It sits below `http/` and `channels/` so that a channel can answer a platform's request
//! without importing the HTTP layer; `http` re-exports both modules under their old paths.

pub mod answer;
pub mod body;
pub mod error;
pub mod extract;

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};

use error::ApiError;

/// Who a request authenticated as: the token check puts it in the request's extensions for
/// what an endpoint counts per client (MCP sessions per agent token).
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub enum Principal {
    /// A configured token, by its SHA-256 digest.
    Token([u8; 32]),
    /// A request from this machine to a scope without tokens.
    Local,
}

impl std::fmt::Debug for Principal {
    // The digest stays out of logs: it names a secret.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Principal::Token(_) => f.write_str("Principal::Token(..)"),
            Principal::Local => f.write_str("Principal::Local"),
        }
    }
}

/// Largest accepted request body.
pub const MAX_BODY_BYTES: usize = 1024 * 1024;

/// Where the MCP server is mounted.
pub(crate) const MCP_PATH: &str = "/mcp";

/// Paths served by imrelay itself, outside `/v1/`.
const OWN_PATHS: &[&str] = &[
    "/",
    MCP_PATH,
    "/livez",
    "/healthz",
    "/metrics",
    "/inbox.js",
    "/inbox.css",
];

/// Whether `path` is one of imrelay's own endpoints (or under `/v1/`), so a channel must not
/// mount its inbound endpoint there.
pub fn is_own_path(path: &str) -> bool {
    OWN_PATHS.contains(&path) || path == "/v1" || path.starts_with("/v1/")
}

/// `body` as JSON, written into a buffer with room for a typical interaction up front (the
/// hot answers carry one or two; axum's `Json` starts at 128 bytes and regrows for them).
pub fn json_response(status: StatusCode, body: &impl serde::Serialize) -> Response {
    let mut buf = Vec::with_capacity(2048);
    match serde_json::to_writer(&mut buf, body) {
        Ok(()) => (
            status,
            [(
                axum::http::header::CONTENT_TYPE,
                axum::http::HeaderValue::from_static("application/json"),
            )],
            buf,
        )
            .into_response(),
        Err(e) => ApiError::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "internal",
            format!("cannot encode the answer: {e}"),
        )
        .into_response(),
    }
}
