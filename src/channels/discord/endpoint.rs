//! The HTTP interactions endpoint (`discord.transport = "interactions"`): Discord POSTs each
//! interaction to `server.public_url + discord.inbound_path` and takes the interaction
//! response as the reply.
//!
//! Every request is authenticated before anything else is read from it: the Ed25519
//! signature (`X-Signature-Ed25519`) over the timestamp (`X-Signature-Timestamp`) and the
//! body, under the application's public key; a timestamp more than [`REPLAY_WINDOW`] from
//! now is refused, and so is a signature already seen inside the window (a replay). A refused
//! request is a 401 recorded in the audit trail. Discord's `PING` is answered `{"type": 1}`.

use std::collections::{HashSet, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use serde_json::Value;

use super::inbound::Interactions;
use crate::interaction::{Registry, Via};
use crate::sync::LockExt;
use crate::wire::error::ApiError;
use crate::wire::extract::ApiBytes;

/// How far a request's timestamp may be from now, either way.
pub const REPLAY_WINDOW: Duration = Duration::from_secs(300);
/// Most signatures remembered to refuse replays (the oldest go first).
const MAX_REMEMBERED: usize = 10_000;

/// Why a request was refused.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum Refusal {
    /// A header is missing or malformed.
    #[error("missing or malformed {0}")]
    Header(&'static str),
    /// The timestamp is outside the window.
    #[error("the timestamp is {0} s from now, more than the {w} s allowed", w = REPLAY_WINDOW.as_secs())]
    Stale(i64),
    /// The signature does not check.
    #[error("the signature does not match the application's public key")]
    BadSignature,
    /// The same signed request came before.
    #[error("the request was already received (a replay)")]
    Replay,
}

/// Checks the signatures of interaction requests.
pub struct Verifier {
    key: Vec<u8>,
    seen: Mutex<(HashSet<String>, VecDeque<String>)>,
}

impl Verifier {
    /// A verifier for the application's Ed25519 public key (32 bytes).
    pub fn new(key: Vec<u8>) -> Self {
        Self {
            key,
            seen: Mutex::default(),
        }
    }

    /// Whether `body` with `headers` was signed by Discord just now, and not seen before.
    pub fn verify(&self, headers: &HeaderMap, body: &[u8], now: i64) -> Result<(), Refusal> {
        let header = |name: &'static str| {
            headers
                .get(name)
                .and_then(|v| v.to_str().ok())
                .map(str::trim)
                .filter(|v| !v.is_empty())
                .ok_or(Refusal::Header(name))
        };
        let signature = header("x-signature-ed25519")?;
        let timestamp = header("x-signature-timestamp")?;
        let sig = hex::decode(signature)
            .ok()
            .filter(|s| s.len() == 64)
            .ok_or(Refusal::Header("x-signature-ed25519"))?;
        let at: i64 = timestamp
            .parse()
            .map_err(|_| Refusal::Header("x-signature-timestamp"))?;
        let mut signed = Vec::with_capacity(timestamp.len() + body.len());
        signed.extend_from_slice(timestamp.as_bytes());
        signed.extend_from_slice(body);
        ring::signature::UnparsedPublicKey::new(&ring::signature::ED25519, &self.key)
            .verify(&signed, &sig)
            .map_err(|_| Refusal::BadSignature)?;
        let off = now.saturating_sub(at);
        if off.unsigned_abs() > REPLAY_WINDOW.as_secs() {
            return Err(Refusal::Stale(off));
        }
        let mut seen = self.seen.locked();
        let (set, order) = &mut *seen;
        if !set.insert(signature.to_ascii_lowercase()) {
            return Err(Refusal::Replay);
        }
        order.push_back(signature.to_ascii_lowercase());
        while order.len() > MAX_REMEMBERED {
            if let Some(old) = order.pop_front() {
                set.remove(&old);
            }
        }
        Ok(())
    }
}

/// The endpoint's state.
pub struct Endpoint {
    interactions: Arc<Interactions>,
    verifier: Verifier,
    registry: Registry,
    path: String,
}

impl Endpoint {
    /// The endpoint at `path`, checking signatures under `key`, handing interactions to
    /// `interactions`.
    pub fn new(
        interactions: Arc<Interactions>,
        key: Vec<u8>,
        path: &str,
        registry: Registry,
    ) -> Self {
        Self {
            interactions,
            verifier: Verifier::new(key),
            registry,
            path: path.to_string(),
        }
    }

    async fn serve(&self, headers: HeaderMap, body: Bytes) -> Result<Response, ApiError> {
        let now = jiff::Timestamp::now().as_second();
        if let Err(e) = self.verifier.verify(&headers, &body, now) {
            self.registry
                .refused(None, "unknown", &Via::new(super::CHANNEL), &e.to_string())
                .await?;
            return Err(ApiError::unauthorized(format!(
                "discord request refused: {e}"
            )));
        }
        let payload: Value = serde_json::from_slice(&body)
            .map_err(|e| ApiError::bad_request(format!("malformed JSON: {e}")))?;
        let response = self.interactions.respond_in_time(payload).await;
        Ok((StatusCode::OK, axum::Json(response)).into_response())
    }
}

/// The router serving `discord.inbound_path`.
pub fn router(endpoint: Arc<Endpoint>) -> Router {
    let path = endpoint.path.clone();
    Router::new().route(&path, post(serve)).with_state(endpoint)
}

async fn serve(
    State(e): State<Arc<Endpoint>>,
    headers: HeaderMap,
    ApiBytes(body): ApiBytes,
) -> Response {
    match e.serve(headers, body).await {
        Ok(r) => r,
        Err(e) => e.into_response(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ring::signature::{Ed25519KeyPair, KeyPair};

    fn signed(key: &Ed25519KeyPair, ts: &str, body: &[u8]) -> HeaderMap {
        let mut msg = ts.as_bytes().to_vec();
        msg.extend_from_slice(body);
        let mut h = HeaderMap::new();
        h.insert(
            "x-signature-ed25519",
            hex::encode(key.sign(&msg).as_ref()).parse().unwrap(),
        );
        h.insert("x-signature-timestamp", ts.parse().unwrap());
        h
    }

    #[test]
    fn signatures_timestamps_and_replays_are_checked() {
        let key = Ed25519KeyPair::from_seed_unchecked(&[9; 32]).unwrap();
        let v = Verifier::new(key.public_key().as_ref().to_vec());
        let body = br#"{"type":1}"#;
        let now = 1_700_000_000;
        let h = signed(&key, "1700000000", body);
        assert_eq!(v.verify(&h, body, now), Ok(()));
        assert_eq!(v.verify(&h, body, now), Err(Refusal::Replay));
        assert_eq!(v.verify(&h, b"{}", now), Err(Refusal::BadSignature));
        let old = signed(&key, "1699999000", body);
        assert_eq!(v.verify(&old, body, now), Err(Refusal::Stale(1000)));
        let other = Ed25519KeyPair::from_seed_unchecked(&[8; 32]).unwrap();
        assert_eq!(
            v.verify(&signed(&other, "1700000000", body), body, now),
            Err(Refusal::BadSignature)
        );
        assert!(matches!(
            v.verify(&HeaderMap::new(), body, now),
            Err(Refusal::Header(_))
        ));
    }
}
