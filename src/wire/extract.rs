//! Extractors that turn every rejection into an [`ApiError`], so malformed JSON, wrong types,
//! unknown fields, a missing content type, an oversized body, a bad query string or an
//! undecodable path segment all get the API's JSON error body, naming the offending `field`
//! where there is one (`tool_name`, `questions[1].options`, `timeout_secs`, `id`).

use axum::body::Bytes;
use axum::extract::path::ErrorKind;
use axum::extract::rejection::PathRejection;
use axum::extract::{FromRequest, FromRequestParts, Request};
use axum::http::request::Parts;
use axum::http::{HeaderMap, StatusCode, header};
use serde::de::DeserializeOwned;

use super::error::ApiError;
use crate::interaction::ValidationError;

/// A request body of at most [`super::MAX_BODY_BYTES`]; a larger one is a `413` in the API's
/// shape (for the endpoints that check a signature over the raw body).
#[derive(Debug)]
pub(crate) struct ApiBytes(pub Bytes);

impl<S: Send + Sync> FromRequest<S> for ApiBytes {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        match Bytes::from_request(req, state).await {
            Ok(bytes) => Ok(ApiBytes(bytes)),
            Err(r) if r.status() == StatusCode::PAYLOAD_TOO_LARGE => Err(too_large()),
            Err(r) => Err(ApiError::bad_request(format!(
                "the body could not be read: {}",
                r.body_text()
            ))),
        }
    }
}

fn too_large() -> ApiError {
    ApiError::new(
        StatusCode::PAYLOAD_TOO_LARGE,
        "payload_too_large",
        format!("the body is larger than {} bytes", super::MAX_BODY_BYTES),
    )
}

/// A JSON body (`Content-Type: application/json`); rejections become API errors.
#[derive(Debug)]
pub struct ApiJson<T>(pub T);

impl<S, T> FromRequest<S> for ApiJson<T>
where
    T: DeserializeOwned,
    S: Send + Sync,
{
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        if !is_json(req.headers()) {
            return Err(ApiError::new(
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                "unsupported_media_type",
                "expected a JSON body with Content-Type: application/json",
            ));
        }
        let ApiBytes(body) = ApiBytes::from_request(req, state).await?;
        from_json(&body).map(ApiJson)
    }
}

/// Whether the request says its body is JSON (`application/json`, or `application/*+json`).
fn is_json(headers: &HeaderMap) -> bool {
    let Some(value) = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
    else {
        return false;
    };
    let essence = value.split(';').next().unwrap_or_default().trim();
    let Some((kind, sub)) = essence.split_once('/') else {
        return false;
    };
    kind.eq_ignore_ascii_case("application")
        && (sub.eq_ignore_ascii_case("json")
            || sub.len() > 5 && sub[sub.len() - 5..].eq_ignore_ascii_case("+json"))
}

/// Reads `body` as a `T`, naming the offending field of a misfit.
pub(crate) fn from_json<T: DeserializeOwned>(body: &[u8]) -> Result<T, ApiError> {
    let mut de = serde_json::Deserializer::from_slice(body);
    let value = serde_path_to_error::deserialize(&mut de).map_err(|e| {
        let (path, inner) = (e.path().to_string(), e.into_inner());
        if inner.is_data() {
            misfit(&path, &inner.to_string())
        } else {
            ApiError::bad_request(format!("malformed JSON: {inner}"))
        }
    })?;
    de.end()
        .map_err(|e| ApiError::bad_request(format!("malformed JSON: {e}")))?;
    Ok(value)
}

/// Reads a JSON value already parsed (`value`) as a `T`, naming the offending field.
pub(crate) fn from_value<T: DeserializeOwned>(value: serde_json::Value) -> Result<T, ApiError> {
    serde_path_to_error::deserialize(value).map_err(|e| {
        let path = e.path().to_string();
        misfit(&path, &e.into_inner().to_string())
    })
}

/// A value that does not fit its type, at `path` (`.` for the whole body or query):
/// `message` is serde's (`invalid type: ...`, `missing field `x``, `unknown field `x`, ...`).
fn misfit(path: &str, message: &str) -> ApiError {
    let at = (path != ".").then_some(path);
    // A missing field is reported at the object that lacks it: name the field itself.
    let missing = message
        .strip_prefix("missing field `")
        .and_then(|rest| rest.split('`').next());
    let field = match (at, missing) {
        (Some(at), Some(name)) => Some(format!("{at}.{name}")),
        (None, Some(name)) => Some(name.to_string()),
        (at, None) => at.map(str::to_string),
    };
    match field {
        Some(field) => ValidationError::new(field, message).into(),
        None => ApiError::bad_request(message),
    }
}

/// A query string; rejections become API errors naming the parameter.
#[derive(Debug)]
pub struct ApiQuery<T>(pub T);

impl<S, T> FromRequestParts<S> for ApiQuery<T>
where
    T: DeserializeOwned,
    S: Send + Sync,
{
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Self::Rejection> {
        let query = parts.uri.query().unwrap_or_default();
        let de = serde_urlencoded::Deserializer::new(form_urlencoded::parse(query.as_bytes()));
        serde_path_to_error::deserialize(de)
            .map(ApiQuery)
            .map_err(|e| {
                let path = e.path().to_string();
                let message = format!("invalid query string: {}", e.into_inner());
                let mut err = misfit(&path, &message);
                if err.field().is_none() {
                    // serde_urlencoded names no parameter for a value that does not parse.
                    err = ApiError::bad_request(message);
                }
                err
            })
    }
}

/// Path parameters; rejections (e.g. a segment whose percent-encoding is not UTF-8) become
/// API errors naming the parameter.
#[derive(Debug)]
pub struct ApiPath<T>(pub T);

impl<S, T> FromRequestParts<S> for ApiPath<T>
where
    T: DeserializeOwned + Send,
    S: Send + Sync,
{
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        match axum::extract::Path::<T>::from_request_parts(parts, state).await {
            Ok(axum::extract::Path(v)) => Ok(ApiPath(v)),
            Err(rejection) => Err(path_rejection(rejection)),
        }
    }
}

fn path_rejection(r: PathRejection) -> ApiError {
    if r.status().is_client_error() {
        let key = match &r {
            PathRejection::FailedToDeserializePathParams(e) => match e.kind() {
                ErrorKind::InvalidUtf8InPathParam { key }
                | ErrorKind::ParseErrorAtKey { key, .. }
                | ErrorKind::DeserializeError { key, .. } => Some(key.clone()),
                _ => None,
            },
            _ => None,
        };
        let message = format!("invalid path: {}", r.body_text());
        match key {
            Some(key) => ValidationError::new(key, message).into(),
            None => ApiError::bad_request(message),
        }
    } else {
        // A route and its extractor disagree: a bug here, not in the request.
        tracing::error!(error = %r.body_text(), "path parameters could not be extracted");
        ApiError::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "internal",
            "imrelay could not read this route's parameters",
        )
    }
}
