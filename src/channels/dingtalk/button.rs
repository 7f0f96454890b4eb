//! What a card's buttons carry back: one token, a card variable every action passes in its
//! parameters, that binds the click to exactly one interaction (its id and creation time)
//! under the server's persistent `dingtalk-cards` secret
//! ([`crate::channels::token::Signer`]). The action itself is the button's actionId; the
//! answer pipeline checks it fits the interaction. Compared in constant time.

use crate::channels::token::Signer;
use crate::interaction::{Interaction, InteractionId};

/// Bytes of the tag kept (128 bits).
const TAG_BYTES: usize = 16;
/// The domain of the tag.
const DOMAIN: &[u8] = b"imrelay/dingtalk/card/v1";
/// The most characters of a token accepted (an id is at most 256).
const MAX_TOKEN_CHARS: usize = 512;

/// Signs and verifies card tokens.
#[derive(Clone, Debug)]
pub(crate) struct Tokens(Signer);

impl Tokens {
    /// Tokens under `secret` (the store's `dingtalk-cards`).
    pub(crate) fn new(secret: Vec<u8>) -> Self {
        Self(Signer::new(secret))
    }

    /// The token of `i`'s card: `<created ms>.<tag>.<id>`.
    pub(crate) fn token(&self, i: &Interaction) -> String {
        let created = i.created_at.as_millisecond();
        let tag = self.0.tag(
            DOMAIN,
            &[i.id.as_str().as_bytes(), created.to_string().as_bytes()],
            TAG_BYTES,
        );
        format!("{created}.{tag}.{}", i.id.as_str())
    }

    /// The interaction and creation time a token names, if its tag checks out.
    pub(crate) fn verify(&self, token: &str) -> Option<(InteractionId, i64)> {
        if token.len() > MAX_TOKEN_CHARS {
            return None;
        }
        let mut parts = token.splitn(3, '.');
        let (created, tag, id) = (parts.next()?, parts.next()?, parts.next()?);
        let ms: i64 = created.parse().ok()?;
        let ok = self.0.verify(
            DOMAIN,
            &[id.as_bytes(), ms.to_string().as_bytes()],
            TAG_BYTES,
            tag,
        );
        if !ok {
            return None;
        }
        Some((InteractionId::parse(id).ok()?, ms))
    }

    /// The id a token claims, for the audit trail of a refusal (proves nothing).
    pub(crate) fn claimed(token: &str) -> &str {
        token.splitn(3, '.').nth(2).unwrap_or("")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use jiff::Timestamp;

    fn interaction(id: &str, ms: i64) -> Interaction {
        Interaction::pending(
            InteractionId::parse(id).unwrap(),
            "Bash",
            serde_json::Map::new(),
            Timestamp::from_millisecond(ms).unwrap(),
            300,
        )
    }

    #[test]
    fn a_token_binds_one_interaction_and_its_creation_time() {
        let t = Tokens::new(vec![7; 32]);
        let i = interaction("toolu.1", 1_700_000_000_000);
        let token = t.token(&i);
        let (id, ms) = t.verify(&token).unwrap();
        assert_eq!((id.as_str(), ms), ("toolu.1", 1_700_000_000_000));
        assert_eq!(Tokens::claimed(&token), "toolu.1");
        let other = t.token(&interaction("toolu.2", 1_700_000_000_000));
        let swapped = format!("{}.toolu.1", &other[..other.rfind(".toolu").unwrap()]);
        assert!(t.verify(&swapped).is_none(), "another id");
        let later = token.replacen("1700000000000", "1700000000001", 1);
        assert!(t.verify(&later).is_none(), "another incarnation");
        assert!(Tokens::new(vec![8; 32]).verify(&token).is_none());
        assert!(t.verify("").is_none() && t.verify("1.2").is_none());
        assert!(t.verify(&"x".repeat(600)).is_none());
    }
}
