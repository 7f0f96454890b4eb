//! VAPID (RFC 8292): the server's P-256 key, made at random the first time the channel
//! starts and kept in the store (a named server secret, so every replica signs with the same
//! key and a restart keeps every subscription good), and the signed JWT each push carries.
//!
//! The JWT's `aud` is the push endpoint's origin written out in full, port included when the
//! URL has one: a push service compares it with its own origin, and one on a non-default port
//! refuses a token without it. The signature is ES256 (P-256 ECDSA over SHA-256, `r || s`).

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use p256::ecdsa::signature::Signer;
use p256::ecdsa::{Signature, SigningKey};
use sha2::{Digest, Sha256};

use crate::store::{Store, StoreError};

/// The name of the server secret the key is derived from.
pub(super) const SECRET: &str = "push.vapid";

/// How long a signature is good for (RFC 8292 allows at most 24 hours).
const VALID_SECS: i64 = 12 * 3600;

/// The server's VAPID key.
#[derive(Clone)]
pub(crate) struct Vapid {
    key: SigningKey,
    /// The public key, uncompressed (65 bytes), base64url: what browsers subscribe with
    /// (`applicationServerKey`) and the `k=` of every push.
    public: String,
}

impl std::fmt::Debug for Vapid {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Vapid")
            .field("public", &self.public)
            .finish_non_exhaustive()
    }
}

impl Vapid {
    /// The key kept in `store`, made on first use.
    pub(super) async fn load(store: &dyn Store) -> Result<Self, StoreError> {
        let secret = store.secret(SECRET).await?;
        Ok(Self::from_secret(&secret))
    }

    /// The key of a 32-byte secret: the secret itself as the scalar when it is a valid one
    /// (all but a 2^-32 share of values), else its hash, hashed again until valid.
    pub(super) fn from_secret(secret: &[u8]) -> Self {
        let mut bytes = secret.to_vec();
        let key = loop {
            if let Ok(k) = SigningKey::from_slice(&bytes) {
                break k;
            }
            bytes = Sha256::digest(&bytes).to_vec();
        };
        let point = key.verifying_key().to_encoded_point(false);
        Self {
            public: URL_SAFE_NO_PAD.encode(point.as_bytes()),
            key,
        }
    }

    /// The public key, base64url (uncompressed point).
    pub(super) fn public_key(&self) -> &str {
        &self.public
    }

    /// The `Authorization` header for a push to `endpoint`, signed now, naming `contact`.
    pub(super) fn authorization(&self, endpoint: &url::Url, contact: &str) -> Option<String> {
        let aud = audience(endpoint)?;
        let exp = jiff::Timestamp::now().as_second() + VALID_SECS;
        let header = URL_SAFE_NO_PAD.encode(br#"{"typ":"JWT","alg":"ES256"}"#);
        let claims = serde_json::json!({ "aud": aud, "exp": exp, "sub": contact });
        let claims = URL_SAFE_NO_PAD.encode(claims.to_string());
        let signed = format!("{header}.{claims}");
        let signature: Signature = self.key.sign(signed.as_bytes());
        let signature = URL_SAFE_NO_PAD.encode(signature.to_bytes());
        Some(format!("vapid t={signed}.{signature}, k={}", self.public))
    }
}

/// The origin of `endpoint` as the JWT's `aud`: scheme, host and, when the URL names one
/// other than the scheme's default, the port.
pub(crate) fn audience(endpoint: &url::Url) -> Option<String> {
    let host = endpoint.host_str()?;
    let host = match endpoint.host() {
        Some(url::Host::Ipv6(_)) if !host.starts_with('[') => format!("[{host}]"),
        _ => host.to_string(),
    };
    Some(match endpoint.port() {
        Some(port) => format!("{}://{host}:{port}", endpoint.scheme()),
        None => format!("{}://{host}", endpoint.scheme()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use p256::ecdsa::VerifyingKey;
    use p256::ecdsa::signature::Verifier;

    #[test]
    fn the_audience_keeps_the_port() {
        let a = |u: &str| audience(&url::Url::parse(u).unwrap()).unwrap();
        assert_eq!(a("http://127.0.0.1:8123/push/1"), "http://127.0.0.1:8123");
        assert_eq!(
            a("https://fcm.googleapis.com/fcm/send/x"),
            "https://fcm.googleapis.com"
        );
        assert_eq!(
            a("https://push.example:8443/x"),
            "https://push.example:8443"
        );
        // The default port is not written (url drops it).
        assert_eq!(a("https://push.example:443/x"), "https://push.example");
        assert_eq!(a("http://[::1]:9000/x"), "http://[::1]:9000");
    }

    #[test]
    fn the_header_is_a_verifiable_es256_jwt() {
        let v = Vapid::from_secret(&[7u8; 32]);
        let h = v
            .authorization(
                &url::Url::parse("http://127.0.0.1:9/p").unwrap(),
                "mailto:a@b.c",
            )
            .unwrap();
        let rest = h.strip_prefix("vapid t=").unwrap();
        let (token, k) = rest.split_once(", k=").unwrap();
        assert_eq!(k, v.public_key());
        let (signed, sig) = token.rsplit_once('.').unwrap();
        let claims = signed.split('.').nth(1).unwrap();
        let claims: serde_json::Value =
            serde_json::from_slice(&URL_SAFE_NO_PAD.decode(claims).unwrap()).unwrap();
        assert_eq!(claims["aud"], "http://127.0.0.1:9");
        assert_eq!(claims["sub"], "mailto:a@b.c");
        let key = VerifyingKey::from_sec1_bytes(&URL_SAFE_NO_PAD.decode(k).unwrap()).unwrap();
        let sig = Signature::from_slice(&URL_SAFE_NO_PAD.decode(sig).unwrap()).unwrap();
        assert!(key.verify(signed.as_bytes(), &sig).is_ok());
        // The same secret gives the same key; a zero secret (no valid scalar) still gives one.
        assert_eq!(Vapid::from_secret(&[7u8; 32]).public, v.public);
        assert_ne!(Vapid::from_secret(&[0u8; 32]).public, v.public);
    }
}
