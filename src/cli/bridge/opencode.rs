//! The bridge's requests to one OpenCode server: HTTP Basic authentication when it has a
//! password, a timeout on each, and every answer read within a bound ([`MAX_ANSWER_BYTES`],
//! [`MAX_LISTING_BYTES`] for the listings), refused unread when it says it is longer and cut
//! off when it turns out so, so that no answer can take the bridge's memory.

use std::time::Duration;

use futures_util::StreamExt;
use secrecy::ExposeSecret;
use serde_json::Value;
use serde_json::value::RawValue;

use super::Bridge;

/// The most bytes read of an answer to `GET /session/{id}` or to a reply.
pub(super) const MAX_ANSWER_BYTES: usize = 1024 * 1024;

/// The most bytes read of a listing (`GET /permission`, `GET /question`): a bigger one is
/// not read (the requests its events announce are still relayed).
pub(super) const MAX_LISTING_BYTES: usize = 64 * 1024 * 1024;

/// How long one request to OpenCode may take (the event stream excepted).
const REQUEST_TIMEOUT: Duration = Duration::from_secs(15);

/// Why a request to OpenCode failed.
#[derive(Debug, thiserror::Error)]
pub(super) enum OpenCodeError {
    #[error("cannot reach OpenCode at {url}: {reason}")]
    Unreachable { url: String, reason: String },
    #[error("OpenCode at {url} answered {path} with {status}")]
    Status {
        url: String,
        path: String,
        status: u16,
    },
    #[error("OpenCode at {url} answered {path} with more than {max} bytes: not read")]
    TooLong {
        url: String,
        path: String,
        max: usize,
    },
    #[error("OpenCode at {url} answered {path} with something unreadable: {reason}")]
    Unreadable {
        url: String,
        path: String,
        reason: String,
    },
}

impl OpenCodeError {
    /// Whether trying again may succeed: the network, or OpenCode's own failure (5xx).
    pub(super) fn is_transient(&self) -> bool {
        match self {
            OpenCodeError::Unreachable { .. } => true,
            OpenCodeError::Status { status, .. } => *status >= 500,
            OpenCodeError::TooLong { .. } | OpenCodeError::Unreadable { .. } => false,
        }
    }
}

impl Bridge {
    /// A request to the server, authenticated if it has a password.
    pub(super) fn request(&self, method: reqwest::Method, path: &str) -> reqwest::RequestBuilder {
        let req = self.http.request(method, format!("{}{path}", self.url));
        match &self.options.password {
            Some(p) => req.basic_auth(&self.options.username, Some(p.expose_secret())),
            None => req,
        }
    }

    /// Sends `method path` with `body`; the answer, once its status is a success.
    async fn send(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<&Value>,
    ) -> Result<reqwest::Response, OpenCodeError> {
        let mut req = self.request(method, path).timeout(REQUEST_TIMEOUT);
        if let Some(b) = body {
            req = req.json(b);
        }
        let resp = req.send().await.map_err(|e| self.unreachable(&e))?;
        let status = resp.status();
        if !status.is_success() {
            return Err(OpenCodeError::Status {
                url: self.url.clone(),
                path: path.to_string(),
                status: status.as_u16(),
            });
        }
        Ok(resp)
    }

    fn unreachable(&self, e: &reqwest::Error) -> OpenCodeError {
        OpenCodeError::Unreachable {
            url: self.url.clone(),
            reason: e.to_string(),
        }
    }

    /// The body of `resp` (the answer to `path`), at most `max` bytes of it.
    async fn read_body(
        &self,
        resp: reqwest::Response,
        path: &str,
        max: usize,
    ) -> Result<Vec<u8>, OpenCodeError> {
        let too_long = || OpenCodeError::TooLong {
            url: self.url.clone(),
            path: path.to_string(),
            max,
        };
        if resp.content_length().is_some_and(|n| n > max as u64) {
            return Err(too_long());
        }
        let declared = resp.content_length().and_then(|n| usize::try_from(n).ok());
        let mut bytes = Vec::with_capacity(declared.unwrap_or(0));
        let mut chunks = resp.bytes_stream();
        while let Some(chunk) = chunks.next().await {
            let chunk = chunk.map_err(|e| self.unreachable(&e))?;
            let len = bytes.len() + chunk.len();
            if len > max {
                return Err(too_long());
            }
            // Grown by doubling as a `Vec` is, but never past the bound.
            if len > bytes.capacity() {
                let grown = (2 * bytes.capacity()).clamp(len, max);
                bytes.reserve_exact(grown - bytes.len());
            }
            bytes.extend_from_slice(&chunk);
        }
        Ok(bytes)
    }

    fn unreadable(&self, path: &str, e: &serde_json::Error) -> OpenCodeError {
        OpenCodeError::Unreadable {
            url: self.url.clone(),
            path: path.to_string(),
            reason: e.to_string(),
        }
    }

    /// `GET path`, read as JSON (at most [`MAX_ANSWER_BYTES`]).
    pub(super) async fn get(&self, path: &str) -> Result<Value, OpenCodeError> {
        let resp = self.send(reqwest::Method::GET, path, None).await?;
        let bytes = self.read_body(resp, path, MAX_ANSWER_BYTES).await?;
        serde_json::from_slice(&bytes).map_err(|e| self.unreadable(path, &e))
    }

    /// `GET path` of a listing: its items, each left unread (at most [`MAX_LISTING_BYTES`]
    /// in all), as the listing's bytes and the items' places in them.
    pub(super) async fn list(&self, path: &str) -> Result<Listing, OpenCodeError> {
        let resp = self.send(reqwest::Method::GET, path, None).await?;
        let bytes = self.read_body(resp, path, MAX_LISTING_BYTES).await?;
        // Checked here, borrowed again by the reader.
        serde_json::from_slice::<Vec<&RawValue>>(&bytes).map_err(|e| self.unreadable(path, &e))?;
        Ok(Listing(bytes))
    }

    /// `POST path` with `body`: accepted when OpenCode answers a success, whatever its
    /// answer says (read no further than [`MAX_ANSWER_BYTES`]).
    pub(super) async fn post(&self, path: &str, body: Option<&Value>) -> Result<(), OpenCodeError> {
        let resp = self.send(reqwest::Method::POST, path, body).await?;
        // The status said it was taken: an answer that is long or cut off changes nothing.
        let _ = self.read_body(resp, path, MAX_ANSWER_BYTES).await;
        Ok(())
    }
}

/// A listing's bytes: a JSON array, checked.
pub(super) struct Listing(Vec<u8>);

impl Listing {
    /// Its items, each as its JSON text.
    pub(super) fn items(&self) -> Vec<&RawValue> {
        serde_json::from_slice(&self.0).unwrap_or_default()
    }
}
