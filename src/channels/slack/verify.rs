//! Authenticates requests to the HTTP Events/Interactivity endpoint with the app's signing
//! secret: `X-Slack-Signature` is `v0=` and the hex HMAC-SHA256 of `v0:{timestamp}:{body}`,
//! `X-Slack-Request-Timestamp` must be within five minutes of this clock, the comparison is
//! constant-time, and a signature already accepted is refused as a replay while its
//! timestamp is still fresh (after that the age check refuses it anyway).
//!
//! The replay record only ever holds requests that carried a valid signature, so nobody
//! without the secret can grow it; it is bounded all the same.

use std::collections::{HashSet, VecDeque};
use std::sync::Mutex;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use hmac::{Hmac, Mac};
use sha2::Sha256;
use subtle::ConstantTimeEq;

use crate::settings::Secret;
use crate::sync::LockExt;

/// How far a request's timestamp may be from this clock, either way.
pub const TOLERANCE: Duration = Duration::from_secs(300);
/// Most accepted signatures remembered for replay detection (the oldest go first).
pub const MAX_REMEMBERED: usize = 100_000;
/// The timestamp header.
pub const TIMESTAMP_HEADER: &str = "x-slack-request-timestamp";
/// The signature header.
pub const SIGNATURE_HEADER: &str = "x-slack-signature";

/// Why a request was refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum VerifyError {
    /// A header is missing or not text.
    #[error("the {0} header is missing")]
    Missing(&'static str),
    /// The timestamp is not a number of seconds.
    #[error("the request timestamp is not a number")]
    BadTimestamp,
    /// The timestamp is more than [`TOLERANCE`] away from this clock.
    #[error("the request timestamp is {skew_secs} s away from this clock (at most 300 s allowed)")]
    Stale {
        /// How far off it is, seconds (negative: in the future).
        skew_secs: i64,
    },
    /// The signature does not match the body and timestamp under the signing secret.
    #[error("the request signature does not match")]
    BadSignature,
    /// This exact signed request was accepted before.
    #[error("the request was already received (a replay)")]
    Replayed,
}

/// The signature Slack sends for `body` at `timestamp` under `secret`: `v0=<hex>`.
pub fn signature(secret: &str, timestamp: &str, body: &[u8]) -> String {
    let mut mac = mac(secret);
    mac.update(b"v0:");
    mac.update(timestamp.as_bytes());
    mac.update(b":");
    mac.update(body);
    format!("v0={}", hex::encode(mac.finalize().into_bytes()))
}

fn mac(secret: &str) -> Hmac<Sha256> {
    // HMAC takes keys of any length; `new_from_slice` cannot fail for it.
    match Hmac::<Sha256>::new_from_slice(secret.as_bytes()) {
        Ok(m) => m,
        Err(_) => unreachable!("HMAC accepts keys of any length"),
    }
}

/// Accepted signatures still inside the tolerance window.
#[derive(Default)]
struct Seen {
    order: VecDeque<(i64, String)>,
    set: HashSet<String>,
}

impl Seen {
    fn forget_before(&mut self, oldest: i64) {
        while let Some((ts, _)) = self.order.front() {
            if *ts >= oldest && self.order.len() < MAX_REMEMBERED {
                break;
            }
            if let Some((_, sig)) = self.order.pop_front() {
                self.set.remove(&sig);
            }
        }
    }
}

/// Checks signed requests; keeps the replay record.
pub struct Verifier {
    secret: Secret,
    // A std mutex: checked and updated without awaiting.
    seen: Mutex<Seen>,
}

impl Verifier {
    /// A verifier for the app's signing secret.
    pub fn new(secret: Secret) -> Self {
        Self {
            secret,
            seen: Mutex::new(Seen::default()),
        }
    }

    /// Checks a request from its headers and raw body against this clock.
    pub fn verify_request(
        &self,
        headers: &axum::http::HeaderMap,
        body: &[u8],
    ) -> Result<(), VerifyError> {
        let header = |name| headers.get(name).and_then(|v| v.to_str().ok());
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs() as i64);
        self.verify(
            header(TIMESTAMP_HEADER),
            header(SIGNATURE_HEADER),
            body,
            now,
        )
    }

    /// Checks `signature` over `timestamp` and `body` at Unix time `now`.
    pub fn verify(
        &self,
        timestamp: Option<&str>,
        signature: Option<&str>,
        body: &[u8],
        now: i64,
    ) -> Result<(), VerifyError> {
        let timestamp = timestamp.ok_or(VerifyError::Missing(TIMESTAMP_HEADER))?;
        let given = signature.ok_or(VerifyError::Missing(SIGNATURE_HEADER))?;
        let ts: i64 = timestamp
            .trim()
            .parse()
            .map_err(|_| VerifyError::BadTimestamp)?;
        let skew = now.saturating_sub(ts);
        if skew.unsigned_abs() > TOLERANCE.as_secs() {
            return Err(VerifyError::Stale { skew_secs: skew });
        }
        let expected = self::signature(self.secret.expose(), timestamp, body);
        if !bool::from(expected.as_bytes().ct_eq(given.trim().as_bytes())) {
            return Err(VerifyError::BadSignature);
        }
        let mut seen = self.seen.locked();
        seen.forget_before(now.saturating_sub(TOLERANCE.as_secs() as i64));
        if !seen.set.insert(expected.clone()) {
            return Err(VerifyError::Replayed);
        }
        seen.order.push_back((ts, expected));
        Ok(())
    }

    /// Signatures remembered for replay detection.
    #[cfg(test)]
    fn remembered(&self) -> usize {
        self.seen.locked().set.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // The worked example of Slack's "Verifying requests from Slack" page, as the official
    // Python SDK's tests carry it (tests/slack_sdk/signature/test_signature_verifier.py).
    const SECRET: &str = "8f742231b10e8888abcd99yyyzzz85a5";
    const TS: &str = "1531420618";
    const BODY: &str = "token=xyzz0WbapA4vBCDEFasx0q6G&team_id=T1DC2JH3J&team_domain=testteamnow&channel_id=G8PSS9T3V&channel_name=foobar&user_id=U2CERLKJA&user_name=roadrunner&command=%2Fwebhook-collect&text=&response_url=https%3A%2F%2Fhooks.slack.com%2Fcommands%2FT1DC2JH3J%2F397700885554%2F96rGlfmibIGlgcZRskXaIFfN&trigger_id=398738663015.47445629121.803a0bc887a14d10d2c447fce8b6703c";
    const SIG: &str = "v0=a2114d57b48eac39b9ad189dd8316235a7b4a8d21a10bd27519666489c69b503";
    const NOW: i64 = 1531420618;

    fn verifier() -> Verifier {
        Verifier::new(Secret::new(SECRET))
    }

    #[test]
    fn slacks_own_example_verifies() {
        assert_eq!(signature(SECRET, TS, BODY.as_bytes()), SIG);
        assert_eq!(
            verifier().verify(Some(TS), Some(SIG), BODY.as_bytes(), NOW),
            Ok(())
        );
    }

    #[test]
    fn a_changed_body_timestamp_or_secret_is_refused() {
        let v = verifier();
        let mut body = BODY.as_bytes().to_vec();
        body[6] ^= 1;
        assert_eq!(
            v.verify(Some(TS), Some(SIG), &body, NOW),
            Err(VerifyError::BadSignature)
        );
        assert_eq!(
            v.verify(Some("1531420619"), Some(SIG), BODY.as_bytes(), NOW),
            Err(VerifyError::BadSignature)
        );
        assert_eq!(
            Verifier::new(Secret::new("other")).verify(Some(TS), Some(SIG), BODY.as_bytes(), NOW),
            Err(VerifyError::BadSignature)
        );
        // A truncated or empty signature is just as wrong.
        assert_eq!(
            v.verify(Some(TS), Some(&SIG[..20]), BODY.as_bytes(), NOW),
            Err(VerifyError::BadSignature)
        );
        assert_eq!(
            v.verify(Some(TS), Some(""), BODY.as_bytes(), NOW),
            Err(VerifyError::BadSignature)
        );
    }

    #[test]
    fn stale_and_future_timestamps_are_refused() {
        let v = verifier();
        assert_eq!(
            v.verify(Some(TS), Some(SIG), BODY.as_bytes(), NOW + 301),
            Err(VerifyError::Stale { skew_secs: 301 })
        );
        assert_eq!(
            v.verify(Some(TS), Some(SIG), BODY.as_bytes(), NOW - 301),
            Err(VerifyError::Stale { skew_secs: -301 })
        );
        assert_eq!(
            v.verify(Some(TS), Some(SIG), BODY.as_bytes(), NOW + 300),
            Ok(()),
            "five minutes exactly is still fine"
        );
        assert_eq!(
            v.verify(Some("soon"), Some(SIG), BODY.as_bytes(), NOW),
            Err(VerifyError::BadTimestamp)
        );
        assert_eq!(
            v.verify(None, Some(SIG), BODY.as_bytes(), NOW),
            Err(VerifyError::Missing(TIMESTAMP_HEADER))
        );
        assert_eq!(
            v.verify(Some(TS), None, BODY.as_bytes(), NOW),
            Err(VerifyError::Missing(SIGNATURE_HEADER))
        );
    }

    #[test]
    fn a_replay_is_refused_and_the_record_forgets_what_has_gone_stale() {
        let v = verifier();
        assert_eq!(v.verify(Some(TS), Some(SIG), BODY.as_bytes(), NOW), Ok(()));
        assert_eq!(
            v.verify(Some(TS), Some(SIG), BODY.as_bytes(), NOW + 10),
            Err(VerifyError::Replayed)
        );
        // A refused request is not remembered.
        assert_eq!(
            v.verify(Some(TS), Some("v0=00"), BODY.as_bytes(), NOW),
            Err(VerifyError::BadSignature)
        );
        assert_eq!(v.remembered(), 1);
        // Once the first one is too old to pass the age check, it is forgotten.
        let later = (NOW + 400).to_string();
        let sig = signature(SECRET, &later, b"x");
        assert_eq!(v.verify(Some(&later), Some(&sig), b"x", NOW + 400), Ok(()));
        assert_eq!(v.remembered(), 1);
    }

    #[test]
    fn the_replay_record_is_bounded() {
        let v = verifier();
        for n in 0..(MAX_REMEMBERED + 5) {
            let body = n.to_string();
            let sig = signature(SECRET, TS, body.as_bytes());
            assert_eq!(v.verify(Some(TS), Some(&sig), body.as_bytes(), NOW), Ok(()));
        }
        assert!(v.remembered() <= MAX_REMEMBERED, "{}", v.remembered());
    }

    #[test]
    fn headers_are_read_case_insensitively() {
        let v = verifier();
        let mut h = axum::http::HeaderMap::new();
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_secs()
            .to_string();
        h.insert("X-Slack-Request-Timestamp", now.parse().unwrap());
        h.insert(
            "X-Slack-Signature",
            signature(SECRET, &now, b"payload=%7B%7D").parse().unwrap(),
        );
        assert_eq!(v.verify_request(&h, b"payload=%7B%7D"), Ok(()));
        assert_eq!(
            v.verify_request(&h, b"payload=%7B%7D"),
            Err(VerifyError::Replayed)
        );
    }
}
