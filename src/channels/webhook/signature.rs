//! Standard Webhooks signatures: `webhook-signature: v1,<base64 HMAC-SHA256(secret,
//! "{id}.{timestamp}.{body}")>`, with secrets written `whsec_<base64>`.
//!
//! Used both to sign outbound deliveries and to verify inbound answers (constant-time
//! comparison, timestamp tolerance).

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use hmac::{Hmac, Mac};
use sha2::Sha256;
use subtle::ConstantTimeEq;

/// The accepted clock difference for inbound signatures.
pub(crate) const TOLERANCE_SECS: i64 = 5 * 60;

/// Length of an HMAC-SHA256.
const MAC_BYTES: usize = 32;

/// A webhook signing key.
#[derive(Clone)]
pub struct SigningKey(Vec<u8>);

impl std::fmt::Debug for SigningKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SigningKey([redacted])")
    }
}

/// Why a signature was refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum VerifyError {
    /// A required header is missing or unreadable.
    #[error("missing or unreadable {0} header")]
    MissingHeader(&'static str),
    /// The timestamp is outside the tolerance.
    #[error("the webhook-timestamp is more than 5 minutes away from this server's clock")]
    Stale,
    /// No signature matched.
    #[error("the webhook-signature does not match")]
    Mismatch,
}

impl SigningKey {
    /// Parses a `whsec_<base64>` secret.
    pub fn parse(secret: &str) -> Result<Self, String> {
        let b64 = secret
            .strip_prefix("whsec_")
            .ok_or_else(|| "a webhook secret must start with whsec_".to_string())?;
        let bytes = STANDARD
            .decode(b64)
            .map_err(|_| "a webhook secret must be whsec_ followed by base64".to_string())?;
        if bytes.len() < 16 {
            return Err("a webhook secret must hold at least 16 bytes".into());
        }
        Ok(Self(bytes))
    }

    /// The MAC over `{id}.{timestamp}.{body}`, with the timestamp exactly as sent.
    fn mac(&self, id: &str, timestamp: &str, body: &[u8]) -> Vec<u8> {
        // HMAC accepts keys of any length; this cannot fail.
        let mut mac = <Hmac<Sha256> as Mac>::new_from_slice(&self.0)
            .unwrap_or_else(|_| unreachable!("HMAC takes keys of any length"));
        mac.update(id.as_bytes());
        mac.update(b".");
        mac.update(timestamp.as_bytes());
        mac.update(b".");
        mac.update(body);
        mac.finalize().into_bytes().to_vec()
    }

    /// The `webhook-signature` header value for a message.
    pub fn sign(&self, id: &str, timestamp: i64, body: &[u8]) -> String {
        format!(
            "v1,{}",
            STANDARD.encode(self.mac(id, &timestamp.to_string(), body))
        )
    }

    /// Verifies a message's headers against `now` (unix seconds). The timestamp must be
    /// plain ASCII digits (no sign, no spaces), and the signature is checked over the header
    /// text exactly as received.
    pub fn verify(
        &self,
        id: Option<&str>,
        timestamp: Option<&str>,
        signature: Option<&str>,
        body: &[u8],
        now: i64,
    ) -> Result<(), VerifyError> {
        self.verify_body(&Signed::check(id, timestamp, signature, now)?, body)
    }

    /// Verifies the body of a message whose headers passed [`Signed::check`].
    pub fn verify_body(&self, signed: &Signed<'_>, body: &[u8]) -> Result<(), VerifyError> {
        let expected = self.mac(signed.id, signed.timestamp, body);
        let mut ok = subtle::Choice::from(0u8);
        for given in &signed.signatures {
            ok |= given.as_slice().ct_eq(&expected);
        }
        if bool::from(ok) {
            Ok(())
        } else {
            Err(VerifyError::Mismatch)
        }
    }
}

/// A message's signature headers, present, well formed and recent: what can be checked
/// before its body is read.
#[derive(Debug)]
pub struct Signed<'a> {
    id: &'a str,
    /// The timestamp exactly as sent.
    timestamp: &'a str,
    /// The `v1` signatures that decode to a MAC's length.
    signatures: Vec<Vec<u8>>,
}

impl<'a> Signed<'a> {
    /// Checks the `webhook-id`, `webhook-timestamp` and `webhook-signature` headers: present,
    /// the timestamp plain digits within the tolerance of `now` (unix seconds), and at least
    /// one `v1,` signature of a SHA-256 MAC's length in base64.
    pub fn check(
        id: Option<&'a str>,
        timestamp: Option<&'a str>,
        signature: Option<&str>,
        now: i64,
    ) -> Result<Self, VerifyError> {
        let id = id
            .filter(|v| !v.is_empty())
            .ok_or(VerifyError::MissingHeader("webhook-id"))?;
        let (timestamp, ts) = timestamp
            .and_then(|t| Some((t, parse_timestamp(t)?)))
            .ok_or(VerifyError::MissingHeader("webhook-timestamp"))?;
        let signature = signature.ok_or(VerifyError::MissingHeader("webhook-signature"))?;
        if now.abs_diff(ts) > TOLERANCE_SECS.unsigned_abs() {
            return Err(VerifyError::Stale);
        }
        let signatures: Vec<Vec<u8>> = signature
            .split(' ')
            .filter_map(|candidate| candidate.strip_prefix("v1,"))
            .filter_map(|b64| STANDARD.decode(b64).ok())
            .filter(|mac| mac.len() == MAC_BYTES)
            .collect();
        if signatures.is_empty() {
            return Err(VerifyError::MissingHeader("webhook-signature"));
        }
        Ok(Self {
            id,
            timestamp,
            signatures,
        })
    }

    /// The `webhook-id`.
    pub fn id(&self) -> &'a str {
        self.id
    }
}

/// Unix seconds written as 1 to 19 ASCII digits; anything else (a sign, spaces, other
/// digits, an overflow) is unreadable.
fn parse_timestamp(text: &str) -> Option<i64> {
    if text.is_empty() || text.len() > 19 || !text.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    text.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";

    #[test]
    fn sign_then_verify_and_refusals() {
        let k = SigningKey::parse(SECRET).unwrap();
        let body = br#"{"test": 2432232314}"#;
        let sig = k.sign("msg_p5jXN8AQM9LWM0D4loKWxJek", 1614265330, body);
        assert!(
            k.verify(
                Some("msg_p5jXN8AQM9LWM0D4loKWxJek"),
                Some("1614265330"),
                Some(&sig),
                body,
                1614265330 + 60
            )
            .is_ok()
        );
        // Several signatures, one valid.
        let many = format!("v1,AAAA {sig} v2,zzz");
        assert!(
            k.verify(
                Some("msg_p5jXN8AQM9LWM0D4loKWxJek"),
                Some("1614265330"),
                Some(&many),
                body,
                1614265330
            )
            .is_ok()
        );
        assert_eq!(
            k.verify(
                Some("msg_p5jXN8AQM9LWM0D4loKWxJek"),
                Some("1614265330"),
                Some(&sig),
                b"{}",
                1614265330
            ),
            Err(VerifyError::Mismatch)
        );
        assert_eq!(
            k.verify(
                Some("msg_p5jXN8AQM9LWM0D4loKWxJek"),
                Some("1614265330"),
                Some(&sig),
                body,
                1614265330 + 301
            ),
            Err(VerifyError::Stale)
        );
        assert_eq!(
            k.verify(None, Some("1"), Some(&sig), body, 1),
            Err(VerifyError::MissingHeader("webhook-id"))
        );
    }

    #[test]
    fn secrets_are_validated() {
        assert!(SigningKey::parse("MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw").is_err());
        assert!(SigningKey::parse("whsec_!!!").is_err());
        assert!(SigningKey::parse("whsec_AAAA").is_err());
    }

    #[test]
    fn timestamps_must_be_plain_digits_and_are_signed_as_sent() {
        let k = SigningKey::parse(SECRET).unwrap();
        let body = b"{}";
        let now = 1_700_000_000;
        let sig = k.sign("msg_1", now, body);
        let verify = |ts: &str, sig: &str| k.verify(Some("msg_1"), Some(ts), Some(sig), body, now);
        assert_eq!(verify("1700000000", &sig), Ok(()));
        let unreadable = Err(VerifyError::MissingHeader("webhook-timestamp"));
        for bad in [
            "+1700000000",
            "-1700000000",
            " 1700000000",
            "1700000000 ",
            "1_700_000_000",
            "",
            "١٧٠٠٠٠٠٠٠٠",
            "99999999999999999999",
        ] {
            assert_eq!(verify(bad, &sig), unreadable, "{bad:?}");
        }
        // The most negative number used to overflow the clock comparison.
        assert_eq!(verify("-9223372036854775808", &sig), unreadable);
        assert_eq!(
            k.verify(
                Some("msg_1"),
                Some("9223372036854775807"),
                Some(&sig),
                body,
                i64::MIN
            ),
            Err(VerifyError::Stale)
        );
        // A zero-padded timestamp is checked as sent: the signature over the plain number
        // does not match it, and one over the padded text does.
        assert_eq!(verify("01700000000", &sig), Err(VerifyError::Mismatch));
        let padded = format!(
            "v1,{}",
            STANDARD.encode(k.mac("msg_1", "01700000000", body))
        );
        assert_eq!(verify("01700000000", &padded), Ok(()));
    }
}
