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

use std::sync::Arc;

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};

use error::ApiError;

/// Who a request authenticated as: the token check puts it in the request's extensions for
/// what an endpoint counts per client (MCP sessions per agent token) and for who answers
/// (an operator token's label names its person).
#[derive(Clone, PartialEq, Eq, Hash)]
pub enum Principal {
    /// A configured token without a label, by its SHA-256 digest (an agent token, or the
    /// administrator's operator token).
    Token([u8; 32]),
    /// An operator token with a label (`alice-laptop`), by its SHA-256 digest: the label says
    /// whose it is.
    Labelled([u8; 32], Arc<str>),
    /// A request from this machine to a scope without tokens.
    Local,
}

impl Principal {
    /// The name its pending interactions are counted under (the registry's per-owner
    /// budget) and its grants are bound to: `token:` and the start of the token's SHA-256
    /// (never the token), or `local`. The same on every entry point (the API, the hook
    /// endpoint, MCP), so an agent token has one budget however it asks.
    pub fn owner(&self) -> String {
        match self {
            Principal::Token(d) | Principal::Labelled(d, _) => {
                format!("token:{}", hex::encode(&d[..8]))
            }
            Principal::Local => "local".to_string(),
        }
    }

    /// The label of the operator token, if it has one: `None` for the administrator's token,
    /// an agent token, or this machine without tokens.
    pub fn label(&self) -> Option<&str> {
        match self {
            Principal::Labelled(_, label) => Some(label),
            _ => None,
        }
    }
}

/// The principal the token check left in the request (`Local` on a route without one).
impl<S: Send + Sync> axum::extract::FromRequestParts<S> for Principal {
    type Rejection = std::convert::Infallible;

    async fn from_request_parts(
        parts: &mut axum::http::request::Parts,
        _: &S,
    ) -> Result<Self, Self::Rejection> {
        Ok(extension_or(parts, Principal::Local))
    }
}

/// What a layer before the handler left in the request's extensions, or `default` where it
/// left nothing (a route that layer does not guard).
pub fn extension_or<T: Clone + Send + Sync + 'static>(
    parts: &axum::http::request::Parts,
    default: T,
) -> T {
    parts.extensions.get::<T>().cloned().unwrap_or(default)
}

impl std::fmt::Debug for Principal {
    // The digest stays out of logs: it names a secret. The label is a name.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Principal::Token(_) => f.write_str("Principal::Token(..)"),
            Principal::Labelled(_, label) => write!(f, "Principal::Labelled(.., {label:?})"),
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
    "/push.js",
    "/sw.js",
    "/manifest.webmanifest",
    "/icon-192.png",
    "/icon-512.png",
    "/icon-maskable-512.png",
    "/apple-touch-icon.png",
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
