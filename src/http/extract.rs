//! Extractors that turn axum's rejections into [`ApiError`]s, so malformed JSON, wrong types,
//! a missing content type, an oversized body, a bad query string or an undecodable path
//! segment all get the API's JSON error body.

use axum::extract::rejection::{JsonRejection, PathRejection, QueryRejection};
use axum::extract::{FromRequest, FromRequestParts, Request};
use axum::http::StatusCode;
use axum::http::request::Parts;
use serde::de::DeserializeOwned;

use super::error::ApiError;

/// A JSON body; rejections become API errors.
#[derive(Debug)]
pub struct ApiJson<T>(pub T);

impl<S, T> FromRequest<S> for ApiJson<T>
where
    T: DeserializeOwned,
    S: Send + Sync,
{
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        match axum::Json::<T>::from_request(req, state).await {
            Ok(axum::Json(v)) => Ok(ApiJson(v)),
            Err(rejection) => Err(json_rejection(rejection)),
        }
    }
}

fn json_rejection(r: JsonRejection) -> ApiError {
    match r {
        JsonRejection::MissingJsonContentType(_) => ApiError::new(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "unsupported_media_type",
            "expected a JSON body with Content-Type: application/json",
        ),
        JsonRejection::JsonSyntaxError(e) => {
            ApiError::bad_request(format!("malformed JSON: {}", e.body_text()))
        }
        JsonRejection::JsonDataError(e) => ApiError::bad_request(e.body_text()),
        other if other.status() == StatusCode::PAYLOAD_TOO_LARGE => ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "payload_too_large",
            format!("the body is larger than {} bytes", super::MAX_BODY_BYTES),
        ),
        other => ApiError::bad_request(other.body_text()),
    }
}

/// A query string; rejections become API errors.
#[derive(Debug)]
pub struct ApiQuery<T>(pub T);

impl<S, T> FromRequestParts<S> for ApiQuery<T>
where
    T: DeserializeOwned,
    S: Send + Sync,
{
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        match axum::extract::Query::<T>::from_request_parts(parts, state).await {
            Ok(axum::extract::Query(v)) => Ok(ApiQuery(v)),
            Err(QueryRejection::FailedToDeserializeQueryString(e)) => Err(ApiError::bad_request(
                format!("invalid query string: {}", e.body_text()),
            )),
            Err(other) => Err(ApiError::bad_request(other.body_text())),
        }
    }
}

/// Path parameters; rejections (e.g. a segment whose percent-encoding is not UTF-8) become
/// API errors.
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
        ApiError::bad_request(format!("invalid path: {}", r.body_text()))
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
