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

/// A request body of at most [`super::MAX_BODY_BYTES`], read within the request's time
/// bounds ([`super::body`]): a larger one is a `413`, a slow or stalled one a `408`, both in
/// the API's shape (for the endpoints that check a signature over the raw body).
#[derive(Debug)]
pub(crate) struct ApiBytes(pub Bytes);

impl<S: Send + Sync> FromRequest<S> for ApiBytes {
    type Rejection = ApiError;

    async fn from_request(req: Request, _: &S) -> Result<Self, Self::Rejection> {
        body_of(req).await.map(ApiBytes)
    }
}

/// Refuses `req` at once if its `Content-Length` declares more than [`super::MAX_BODY_BYTES`]
/// (`413`): the first check of a handler that looks at a credential in the headers before
/// reading the body, so that an oversized request is refused as such everywhere.
pub(crate) fn declared_size(req: &Request) -> Result<(), ApiError> {
    Ok(super::body::check_declared(
        req.headers(),
        super::MAX_BODY_BYTES,
    )?)
}

/// The body of `req`, as [`ApiBytes`] reads it: for a handler that checks the request's
/// headers (a credential) before reading its body.
pub(crate) async fn body_of(req: Request) -> Result<Bytes, ApiError> {
    let (parts, body) = req.into_parts();
    Ok(super::body::read(
        &parts.headers,
        &parts.extensions,
        body,
        super::MAX_BODY_BYTES,
    )
    .await?)
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

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use axum::body::Body;
    use futures_util::StreamExt;

    use super::*;

    /// A chunk's backing memory, counted while alive: it stands for the connection read
    /// buffer each chunk from hyper keeps alive.
    struct Counted {
        live: Arc<AtomicUsize>,
        bytes: Vec<u8>,
    }

    impl AsRef<[u8]> for Counted {
        fn as_ref(&self) -> &[u8] {
            &self.bytes
        }
    }

    impl Drop for Counted {
        fn drop(&mut self) {
            self.live.fetch_sub(1, Ordering::SeqCst);
        }
    }

    /// A body of `n` one-byte chunks, each a view into a 4 KiB buffer of its own (as a body
    /// sent one byte per TCP packet arrives), and the most buffers it saw alive at once.
    fn one_byte_chunks(n: usize) -> (Body, Arc<AtomicUsize>) {
        let live = Arc::new(AtomicUsize::new(0));
        let most = Arc::new(AtomicUsize::new(0));
        let (l, m) = (live.clone(), most.clone());
        let stream = futures_util::stream::iter(0..n).map(move |i| {
            l.fetch_add(1, Ordering::SeqCst);
            let mut bytes = vec![0u8; 4096];
            bytes[0] = b'a' + (i % 26) as u8;
            let chunk = Bytes::from_owner(Counted {
                live: l.clone(),
                bytes,
            })
            .slice(0..1);
            m.fetch_max(l.load(Ordering::SeqCst), Ordering::SeqCst);
            Ok::<_, std::io::Error>(chunk)
        });
        (Body::from_stream(stream), most)
    }

    #[tokio::test]
    async fn a_body_in_one_byte_chunks_holds_its_bytes_not_its_chunks() {
        let n = 2_000;
        let (body, most) = one_byte_chunks(n);
        let req = Request::post("/").body(body).expect("request");
        let ApiBytes(bytes) = ApiBytes::from_request(req, &()).await.expect("read");
        assert_eq!(bytes.len(), n);
        assert!(bytes.iter().take(26).copied().eq(b'a'..=b'z'));
        // Each chunk's buffer is released before the next one is read.
        let most = most.load(Ordering::SeqCst);
        assert!(most <= 2, "{most} chunk buffers were alive at once");
    }
}
