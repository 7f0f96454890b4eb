//! The `callback_data` carried by inline buttons: exactly one interaction and one action,
//! authenticated with a MAC under a persistent server secret.
//!
//! Anyone can read (and a modified client can send) callback data, so it carries no meaning
//! that could be forged: a short *handle* derived with a keyed hash from the interaction id
//! and creation time, the action with its question and option indices, and a MAC over both.
//! Old buttons keep working after a restart because the key lives in the store.
//!
//! The creation time makes a handle stand for one *incarnation* of an id: an id can be used
//! again once its interaction was pruned, and the new interaction gets a different handle. A
//! handle is mapped back to its interaction through a record deleted with the interaction, so
//! a button left on an old message is answered "This request no longer exists" and can never act on the new
//! one. (Buttons from before handles carried the creation time have handles of the id alone;
//! they work through their records until their interactions are pruned.) Layout (37 ASCII
//! bytes, within Telegram's 64):
//!
//! ```text
//! 1  a  q  o  hhhhhhhhhhh  mmmmmmmmmmmmmmmmmmmmmm
//! │  │  │  │  │            └ MAC: 16 bytes of HMAC-SHA256 over the first 15 bytes, base64url
//! │  │  │  │  └ handle: 8 bytes of HMAC-SHA256 over the interaction id and its creation
//! │  │  │  │    time in milliseconds, base64url
//! │  │  │  └ option index (0-63: 0-9, a-z, A-Z, - and _)
//! │  │  └ question or field index (0-63, written the same way)
//! │  └ action
//! └ format version
//! ```

use crate::channels::token::Signer;
use crate::interaction::{Interaction, Kind};

/// The domain of the MAC over callback data.
const CALLBACK_DOMAIN: &[u8] = b"imrelay/telegram/callback/v1";

/// The store secret that keys handles and MACs.
pub const SECRET_NAME: &str = "telegram-callback";

const VERSION: u8 = b'1';
const HANDLE_BYTES: usize = 8;
const MAC_BYTES: usize = 16;
/// Length of a handle in characters (base64url of 8 bytes).
pub(crate) const HANDLE_LEN: usize = 11;
const MAC_LEN: usize = 22;
const SIGNED_LEN: usize = 4 + HANDLE_LEN;
/// Length of encoded callback data, in bytes.
pub(crate) const DATA_LEN: usize = SIGNED_LEN + MAC_LEN;
/// The index digits: `0`-`9` first, so data written when indices were decimal reads the same.
const DIGITS: &[u8; 64] = b"0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ-_";

/// What a button does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    /// Allow the tool call.
    Allow,
    /// Allow, and apply the agent's "always allow" suggestions.
    AllowAlways,
    /// Allow, and grant the rule imrelay proposes for similar calls of this session.
    AllowSimilar,
    /// Deny the tool call (or decline a question).
    Deny,
    /// Ask for a reason, then deny with it.
    DenyWithReason,
    /// Answer single-select question `q` with option `o`.
    Pick {
        /// Question index.
        q: u8,
        /// Option index.
        o: u8,
    },
    /// Toggle option `o` of multi-select question `q`.
    Toggle {
        /// Question index.
        q: u8,
        /// Option index.
        o: u8,
    },
    /// Submit the toggled options of multi-select question `q`.
    Submit {
        /// Question index.
        q: u8,
    },
    /// Ask for free "Other" text for question `q`.
    Other {
        /// Question index.
        q: u8,
    },
    /// Remove the free "Other" text from multi-select question `q`.
    ClearOther {
        /// Question index.
        q: u8,
    },
    /// Leave optional form field `q` empty (it takes its default).
    Skip {
        /// Field index.
        q: u8,
    },
    /// Go back to form field `q`, forgetting it and what came after.
    Back {
        /// Field index.
        q: u8,
    },
    /// Send the filled-in form.
    SubmitForm,
}

impl Action {
    /// Whether this action can answer an interaction of `kind`.
    pub fn fits(self, kind: Kind) -> bool {
        // A choice, a toggle, Done, or typing: questions and forms alike.
        let choosing = matches!(
            self,
            Action::Pick { .. }
                | Action::Toggle { .. }
                | Action::Submit { .. }
                | Action::Other { .. }
        );
        match kind {
            Kind::Approval => matches!(
                self,
                Action::Allow
                    | Action::AllowAlways
                    | Action::AllowSimilar
                    | Action::Deny
                    | Action::DenyWithReason
            ),
            Kind::Question => choosing || matches!(self, Action::Deny | Action::ClearOther { .. }),
            Kind::Form => {
                choosing
                    || matches!(
                        self,
                        Action::Deny
                            | Action::Skip { .. }
                            | Action::Back { .. }
                            | Action::SubmitForm
                    )
            }
        }
    }

    fn code(self) -> (u8, u8, u8) {
        match self {
            Action::Allow => (b'a', 0, 0),
            Action::AllowAlways => (b'w', 0, 0),
            Action::AllowSimilar => (b'g', 0, 0),
            Action::Deny => (b'd', 0, 0),
            Action::DenyWithReason => (b'r', 0, 0),
            Action::Pick { q, o } => (b'p', q, o),
            Action::Toggle { q, o } => (b't', q, o),
            Action::Submit { q } => (b's', q, 0),
            Action::Other { q } => (b'o', q, 0),
            Action::ClearOther { q } => (b'c', q, 0),
            Action::Skip { q } => (b'k', q, 0),
            Action::Back { q } => (b'b', q, 0),
            Action::SubmitForm => (b'f', 0, 0),
        }
    }

    fn from_code(a: u8, q: u8, o: u8) -> Option<Self> {
        Some(match a {
            b'a' => Action::Allow,
            b'w' => Action::AllowAlways,
            b'g' => Action::AllowSimilar,
            b'd' => Action::Deny,
            b'r' => Action::DenyWithReason,
            b'p' => Action::Pick { q, o },
            b't' => Action::Toggle { q, o },
            b's' => Action::Submit { q },
            b'o' => Action::Other { q },
            b'c' => Action::ClearOther { q },
            b'k' => Action::Skip { q },
            b'b' => Action::Back { q },
            b'f' => Action::SubmitForm,
            _ => return None,
        })
    }
}

/// Why callback data was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum CallbackError {
    /// Not the shape this version writes.
    #[error("malformed callback data")]
    Malformed,
    /// The MAC does not match: forged or altered.
    #[error("callback data with a bad signature")]
    BadSignature,
}

/// Encodes and verifies callback data under one key (the channels' one signed token,
/// `Signer`, within Telegram's 64 bytes).
#[derive(Clone, Debug)]
pub struct Codec {
    signer: Signer,
}

impl Codec {
    /// A codec keyed with `key` (the store's `telegram-callback` secret).
    pub fn new(key: Vec<u8>) -> Self {
        Self {
            signer: Signer::new(key),
        }
    }

    /// The signer under the same key (for the digest's buttons).
    pub(crate) fn signer(&self) -> &Signer {
        &self.signer
    }

    /// The short handle that stands for interaction `i` (this incarnation of its id) in
    /// callback data.
    pub fn handle(&self, i: &Interaction) -> String {
        let created = i.created_at.as_millisecond().to_string();
        self.signer.tag(
            b"imrelay/telegram/handle/v2",
            &[i.id.as_str().as_bytes(), created.as_bytes()],
            HANDLE_BYTES,
        )
    }

    /// The callback data for `action` on the interaction with `handle`.
    pub fn encode(&self, handle: &str, action: Action) -> String {
        let (a, q, o) = action.code();
        let mut signed = String::with_capacity(DATA_LEN);
        signed.push(VERSION as char);
        signed.push(a as char);
        signed.push(char::from(DIGITS[usize::from(q.min(63))]));
        signed.push(char::from(DIGITS[usize::from(o.min(63))]));
        signed.push_str(handle);
        let tag = self
            .signer
            .tag(CALLBACK_DOMAIN, &[signed.as_bytes()], MAC_BYTES);
        signed.push_str(&tag);
        signed
    }

    /// Verifies `data` (in constant time) and returns the handle and action it carries.
    pub fn decode(&self, data: &str) -> Result<(String, Action), CallbackError> {
        let bytes = data.as_bytes();
        if bytes.len() != DATA_LEN || !data.is_ascii() || bytes[0] != VERSION {
            return Err(CallbackError::Malformed);
        }
        let (signed, mac) = data.split_at(SIGNED_LEN);
        if !self
            .signer
            .verify(CALLBACK_DOMAIN, &[signed.as_bytes()], MAC_BYTES, mac)
        {
            return Err(CallbackError::BadSignature);
        }
        let digit = |b: u8| DIGITS.iter().position(|d| *d == b).map(|n| n as u8);
        let (Some(q), Some(o)) = (digit(bytes[2]), digit(bytes[3])) else {
            return Err(CallbackError::Malformed);
        };
        let action = Action::from_code(bytes[1], q, o).ok_or(CallbackError::Malformed)?;
        Ok((signed[4..].to_string(), action))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::interaction::InteractionId;
    use jiff::Timestamp;

    fn codec() -> Codec {
        Codec::new(vec![7u8; 32])
    }

    fn interaction(id: &str, created_ms: i64) -> Interaction {
        let created_at = Timestamp::from_millisecond(created_ms).unwrap();
        Interaction {
            deadline: created_at,
            ..Interaction::pending(
                InteractionId::parse(id).unwrap(),
                "Bash",
                serde_json::Map::new(),
                created_at,
                300,
            )
        }
    }

    #[test]
    fn round_trips_every_action_within_64_bytes() {
        let c = codec();
        let h = c.handle(&interaction(
            "toolu_01D7FLrfh4GYq7yT1ULFeyMV",
            1_700_000_000_000,
        ));
        assert_eq!(h.len(), HANDLE_LEN);
        for action in [
            Action::Allow,
            Action::AllowAlways,
            Action::AllowSimilar,
            Action::Deny,
            Action::DenyWithReason,
            Action::Pick { q: 3, o: 2 },
            Action::Toggle { q: 1, o: 3 },
            Action::Submit { q: 2 },
            Action::Other { q: 0 },
            Action::ClearOther { q: 1 },
            Action::Pick { q: 19, o: 49 },
            Action::Toggle { q: 63, o: 10 },
            Action::Skip { q: 12 },
            Action::Back { q: 0 },
            Action::SubmitForm,
        ] {
            let data = c.encode(&h, action);
            assert!(data.len() <= 64 && data.len() == DATA_LEN, "{data}");
            assert_eq!(c.decode(&data), Ok((h.clone(), action)));
        }
    }

    #[test]
    fn handles_differ_per_interaction_incarnation_and_key() {
        let a = interaction("a", 1_700_000_000_000);
        let b = interaction("b", 1_700_000_000_000);
        assert_ne!(codec().handle(&a), codec().handle(&b));
        assert_ne!(codec().handle(&a), Codec::new(vec![8u8; 32]).handle(&a));
        // The same id created again (after the first was pruned) is another interaction.
        let again = interaction("a", 1_700_000_000_001);
        assert_ne!(codec().handle(&a), codec().handle(&again));
        // And the same interaction always gets the same handle (after a restart too).
        assert_eq!(codec().handle(&a), codec().handle(&a.clone()));
    }

    #[test]
    fn altered_or_foreign_data_is_refused() {
        let c = codec();
        let h = c.handle(&interaction("x", 1_700_000_000_000));
        let data = c.encode(&h, Action::Deny);
        // Turn a deny into an allow without the key.
        let forged = format!("1a{}", &data[2..]);
        assert_eq!(c.decode(&forged), Err(CallbackError::BadSignature));
        // Signed with another key.
        let other = Codec::new(vec![9u8; 32]).encode(&h, Action::Allow);
        assert_eq!(c.decode(&other), Err(CallbackError::BadSignature));
        for bad in ["", "perm:allow", &data[..DATA_LEN - 1], "2aa00"] {
            assert_eq!(c.decode(bad), Err(CallbackError::Malformed), "{bad:?}");
        }
        let non_ascii = format!("1é{}", &data[3..]);
        assert!(c.decode(&non_ascii).is_err());
    }
}
