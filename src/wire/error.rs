//! The API's error type: every failure a request can reach becomes a status code and a
//! stable JSON body `{"error":{"code":"...","message":"..."}}`, sometimes with extra fields
//! (the offending `field`, or the winning `resolution` of a conflict).
//!
//! Error policy: handlers return [`ApiError`]; internal details (store failures) are logged
//! here and replaced by a generic message, never leaked to the client.

use std::sync::Arc;

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use serde::ser::SerializeMap;
use serde_json::Value;
use serde_json::value::RawValue;

use crate::interaction::{Full, Interaction, RegistryError, Unrecorded, ValidationError};
use crate::store::StoreError;

/// An error answer.
#[derive(Debug)]
pub struct ApiError {
    status: StatusCode,
    code: &'static str,
    message: String,
    /// Further fields of the error object, each as its JSON text: an interaction in them is
    /// written as kept, never through a [`Value`] (which would rewrite some numbers).
    extra: Vec<(String, Box<RawValue>)>,
    /// Whether the answer closes the connection (the request's body was not read to its end).
    close: bool,
}

impl ApiError {
    /// An error with a status, stable code and human message.
    pub fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> Self {
        Self {
            status,
            code,
            message: message.into(),
            extra: Vec::new(),
            close: false,
        }
    }

    /// The same error, answered with `Connection: close`: for a request whose body was left
    /// unread, so that the client neither reuses the connection nor keeps sending into it.
    pub fn closing(mut self) -> Self {
        self.close = true;
        self
    }

    /// Adds a field to the error object (replacing one of the same name).
    pub fn with(mut self, key: &str, value: impl Serialize) -> Self {
        // Everything imrelay puts here serializes; a value that did not is left out.
        if let Ok(raw) = serde_json::value::to_raw_value(&value) {
            self.extra.retain(|(k, _)| k != key);
            self.extra.push((key.to_string(), raw));
        }
        self
    }

    /// The offending field named in the error object, if any.
    pub fn field(&self) -> Option<&str> {
        self.extra
            .iter()
            .find(|(k, _)| k == "field")
            .and_then(|(_, v)| serde_json::from_str(v.get()).ok())
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

    /// The human message.
    pub fn message(&self) -> &str {
        &self.message
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
        .with("resolution", &i.resolution)
        .with("interaction", &**i)
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

impl From<Unrecorded> for ApiError {
    fn from(e: Unrecorded) -> Self {
        tracing::error!(error = %e.0, "a refusal could not be audited; request refused");
        Self::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "audit_unavailable",
            "imrelay refused this and could not write the refusal to its audit trail (its store refused the write); nothing was changed, try again later",
        )
    }
}

/// The error code of an answer without the passkey assertion its interaction needs.
pub const STEP_UP_REQUIRED: &str = "step_up_required";

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
            .with("interaction", &*existing),
            RegistryError::AlreadyResolved(i) => Self::already_resolved(&i),
            RegistryError::Taken(id) => Self::new(
                StatusCode::CONFLICT,
                "id_conflict",
                format!("interaction id {id} is in use by another client: choose another id"),
            )
            .with("field", Value::String("id".into())),
            RegistryError::GrantNotFound(id) => {
                Self::not_found(format!("no grant in force with id {id}"))
            }
            RegistryError::Forbidden(message) => {
                Self::new(StatusCode::FORBIDDEN, "not_an_approver", message)
            }
            RegistryError::Store(s) => s.into(),
            RegistryError::Unrecorded(u) => u.into(),
            // The HTTP API answers a recorded vote with 202 and this body.
            RegistryError::Voted(i) => Self::new(
                StatusCode::ACCEPTED,
                "voted",
                format!(
                    "vote recorded on interaction {}: {}",
                    i.id,
                    crate::interaction::quorum::tally(&i).unwrap_or_default()
                ),
            )
            .with("interaction", &*i),
            RegistryError::AlreadyVoted(v, i) => Self::new(
                StatusCode::CONFLICT,
                "already_voted",
                format!(
                    "{} already voted on interaction {} ({} via {}): each person counts once",
                    v.by,
                    i.id,
                    if v.allow { "allow" } else { "deny" },
                    v.via
                ),
            )
            .with("vote", &*v)
            .with("interaction", &*i),
            RegistryError::StepUpRequired(i) => Self::new(
                StatusCode::FORBIDDEN,
                STEP_UP_REQUIRED,
                format!(
                    "interaction {} needs a passkey (route {:?} has step_up): answer it in the \
                     inbox, which asks for the passkey, or with an assertion from \
                     POST /v1/interactions/{{id}}/passkey",
                    i.id,
                    crate::interaction::routes::route_name(&i)
                ),
            ),
            RegistryError::Full(full) => {
                let (status, code) = match full {
                    Full::Owner { .. } => (StatusCode::TOO_MANY_REQUESTS, "pending_quota"),
                    Full::Total { .. } => (StatusCode::SERVICE_UNAVAILABLE, "pending_full"),
                };
                Self::new(status, code, full.to_string())
            }
        }
    }
}

/// `{"error": {"code", "message", ...extra}}`.
struct Body<'a>(&'a ApiError);

impl Serialize for Body<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        struct Fields<'a>(&'a ApiError);
        impl Serialize for Fields<'_> {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                let e = self.0;
                let mut m = s.serialize_map(Some(2 + e.extra.len()))?;
                m.serialize_entry("code", e.code)?;
                m.serialize_entry("message", &e.message)?;
                for (k, v) in &e.extra {
                    m.serialize_entry(k, v)?;
                }
                m.end()
            }
        }
        let mut m = s.serialize_map(Some(1))?;
        m.serialize_entry("error", &Fields(self.0))?;
        m.end()
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = serde_json::to_vec(&Body(&self)).unwrap_or_else(|_| {
            br#"{"error":{"code":"internal","message":"the error could not be encoded"}}"#.to_vec()
        });
        let mut resp = (
            self.status,
            [(
                header::CONTENT_TYPE,
                HeaderValue::from_static("application/json"),
            )],
            body,
        )
            .into_response();
        if self.close {
            resp.headers_mut()
                .insert(header::CONNECTION, HeaderValue::from_static("close"));
        }
        if self.status == StatusCode::UNAUTHORIZED {
            resp.headers_mut()
                .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
        }
        resp
    }
}
