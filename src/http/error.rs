//! The API's error type: every failure a request can reach becomes a status code and a
//! stable JSON body `{"error":{"code":"...","message":"..."}}`, sometimes with extra fields
//! (the offending `field`, or the winning `resolution` of a conflict).
//!
//! Error policy: handlers return [`ApiError`]; internal details (store failures) are logged
//! here and replaced by a generic message, never leaked to the client.

use std::sync::Arc;

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Map, Value, json};

use crate::interaction::{Interaction, RegistryError, ValidationError};
use crate::store::StoreError;

/// An error answer.
#[derive(Debug)]
pub struct ApiError {
    status: StatusCode,
    code: &'static str,
    message: String,
    extra: Map<String, Value>,
}

impl ApiError {
    /// An error with a status, stable code and human message.
    pub fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> Self {
        Self {
            status,
            code,
            message: message.into(),
            extra: Map::new(),
        }
    }

    /// Adds a field to the error object.
    pub fn with(mut self, key: &str, value: Value) -> Self {
        self.extra.insert(key.to_string(), value);
        self
    }

    /// 400 `invalid_request`.
    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, "invalid_request", message)
    }

    /// 404 `not_found`.
    pub fn not_found(message: impl Into<String>) -> Self {
        Self::new(StatusCode::NOT_FOUND, "not_found", message)
    }

    /// 401 `unauthorized`.
    pub fn unauthorized(message: impl Into<String>) -> Self {
        Self::new(StatusCode::UNAUTHORIZED, "unauthorized", message)
    }

    /// 403 `forbidden`.
    pub fn forbidden(message: impl Into<String>) -> Self {
        Self::new(StatusCode::FORBIDDEN, "forbidden", message)
    }

    /// The HTTP status.
    pub fn status(&self) -> StatusCode {
        self.status
    }

    /// The stable error code.
    pub fn code(&self) -> &'static str {
        self.code
    }

    /// A 409 carrying the interaction that already won.
    pub fn already_resolved(i: &Arc<Interaction>) -> Self {
        let summary = i
            .resolution
            .as_ref()
            .map(|r| r.summary())
            .unwrap_or_default();
        Self::new(
            StatusCode::CONFLICT,
            "already_resolved",
            format!("interaction {} is already resolved: {summary}", i.id),
        )
        .with("resolution", json!(i.resolution))
        .with("interaction", json!(i))
    }
}

impl From<ValidationError> for ApiError {
    fn from(e: ValidationError) -> Self {
        Self::bad_request(e.to_string()).with("field", Value::String(e.field))
    }
}

impl From<StoreError> for ApiError {
    fn from(e: StoreError) -> Self {
        match e {
            StoreError::Unavailable(detail) => {
                tracing::error!(error = %detail, "store unavailable; request refused");
                Self::new(
                    StatusCode::SERVICE_UNAVAILABLE,
                    "store_unavailable",
                    "imrelay cannot record this right now (its store refused the write); nothing was changed, try again later",
                )
            }
            StoreError::Corrupt(detail) => {
                tracing::error!(error = %detail, "stored data could not be read");
                Self::new(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    "internal",
                    "imrelay could not read its stored data",
                )
            }
        }
    }
}

impl From<RegistryError> for ApiError {
    fn from(e: RegistryError) -> Self {
        match e {
            RegistryError::Invalid(v) => v.into(),
            RegistryError::NotFound(id) => Self::not_found(format!("no interaction with id {id}")),
            RegistryError::Conflict(existing) => Self::new(
                StatusCode::CONFLICT,
                "id_conflict",
                format!(
                    "interaction {} already exists with a different tool_name or input",
                    existing.id
                ),
            )
            .with("interaction", json!(existing)),
            RegistryError::AlreadyResolved(i) => Self::already_resolved(&i),
            RegistryError::Store(s) => s.into(),
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut body = Map::new();
        body.insert("code".into(), Value::String(self.code.into()));
        body.insert("message".into(), Value::String(self.message));
        body.extend(self.extra);
        let mut resp = (self.status, axum::Json(json!({ "error": body }))).into_response();
        if self.status == StatusCode::UNAUTHORIZED {
            resp.headers_mut()
                .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
        }
        resp
    }
}
