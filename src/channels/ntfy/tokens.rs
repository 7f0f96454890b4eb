//! The single-use action tokens behind ntfy's action buttons (and, later, Web Push actions).
//!
//! Each button's URL carries a fresh random token made for one interaction (its creation time
//! is the token's first part, so a token never acts on a later interaction that reuses the
//! id) and one action. Only the token's SHA-256, with the action, is kept: as a value bound to
//! the interaction ([`crate::store::BOUND_VALUE_PREFIX`]), so it is pruned with it. A token is
//! found by that hash, which no timing can turn into a token; the interaction it names is
//! compared in constant time. Using a token records its hash as seen until the interaction's
//! deadline: a second press is refused.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use rand::RngCore;
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use crate::interaction::Interaction;
use crate::store::BOUND_VALUE_PREFIX;

/// The scope under which used tokens are recorded.
pub(super) const USED_SCOPE: &str = "ntfy-action";

/// What a button does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Action {
    /// Allow the tool call.
    Allow,
    /// Deny it.
    Deny,
}

impl Action {
    /// As the URL names it.
    pub fn as_str(self) -> &'static str {
        match self {
            Action::Allow => "allow",
            Action::Deny => "deny",
        }
    }

    /// The action a URL names.
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "allow" => Some(Action::Allow),
            "deny" => Some(Action::Deny),
            _ => None,
        }
    }
}

/// A fresh token for `action` on interaction `i`: `<created ms>-<32 random bytes>`.
pub(super) fn make(i: &Interaction) -> String {
    let mut bytes = [0u8; 32];
    rand::rng().fill_bytes(&mut bytes);
    format!(
        "{}-{}",
        i.created_at.as_millisecond(),
        URL_SAFE_NO_PAD.encode(bytes)
    )
}

/// The hex SHA-256 of `token` bound to `action`: what is kept, and what a used token is
/// recorded as.
pub(super) fn digest(action: Action, token: &str) -> String {
    let mut h = Sha256::new();
    h.update(b"imrelay ntfy action\n");
    h.update(action.as_str().as_bytes());
    h.update(b"\n");
    h.update(token.as_bytes());
    hex::encode(h.finalize())
}

/// The store key of a token's binding; its value is the interaction's id.
pub(super) fn key(digest: &str) -> String {
    format!("{BOUND_VALUE_PREFIX}ntfy.action.{digest}")
}

/// The creation time (ms) a token was made for, when it is well formed (at most 128
/// characters of `0-9`, `-`, and base64url).
pub(super) fn created(token: &str) -> Option<i64> {
    if token.len() > 128
        || !token
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
    {
        return None;
    }
    token.split_once('-')?.0.parse().ok()
}

/// Whether the binding found (`stored`) names interaction `id`, compared in constant time.
pub(super) fn names(stored: &str, id: &str) -> bool {
    stored.as_bytes().ct_eq(id.as_bytes()).into()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::interaction::InteractionId;

    #[test]
    fn tokens_are_fresh_bound_to_their_action_and_carry_the_incarnation() {
        let i = Interaction::pending(
            InteractionId::parse("t1").unwrap(),
            "Bash",
            crate::interaction::Input::default(),
            jiff::Timestamp::from_millisecond(1_700_000_000_000).unwrap(),
            60,
        );
        let (a, b) = (make(&i), make(&i));
        assert_ne!(a, b);
        assert_eq!(created(&a), Some(1_700_000_000_000));
        assert_ne!(digest(Action::Allow, &a), digest(Action::Deny, &a));
        assert!(key(&digest(Action::Allow, &a)).starts_with("bound:ntfy.action."));
        assert_eq!(created("x/y"), None);
        assert_eq!(created(&"1".repeat(200)), None);
        assert!(names("t1", "t1") && !names("t1", "t2"));
        assert_eq!(Action::parse("allow"), Some(Action::Allow));
        assert_eq!(Action::parse("ALLOW"), None);
    }
}
