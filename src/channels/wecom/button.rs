//! What a card carries and how a click on it is verified: every button `key` holds the
//! interaction's id and creation time, the action, and a [`Signer`] tag over those and the
//! card's `task_id`, so a key works only on the card it was put on and only for the
//! interaction it was made for. `task_id` itself is derived from the interaction and the
//! chat (WeCom wants it unique per bot, of letters, digits and `_-@`, at most 128 bytes).
//! The typed-answer handle (`deny <handle> <reason>`) is a short tag over the interaction.

use sha2::{Digest, Sha256};

use crate::channels::token::Signer;
use crate::interaction::Interaction;

/// The bytes of the tag kept in a button key (128 bits).
const TAG_BYTES: usize = 16;
/// The bytes of a typed-answer handle (48 bits: 8 characters).
const HANDLE_BYTES: usize = 6;
const KEY_DOMAIN: &[u8] = b"imrelay/wecom/button/v1";
const HANDLE_DOMAIN: &[u8] = b"imrelay/wecom/handle/v1";
/// The separator of a key's parts (never in an action, a number or a base64url tag).
const SEP: char = '|';

/// What a button does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Action {
    /// Allow the approval.
    Allow,
    /// Deny it (or decline the question or form).
    Deny,
    /// Choose option `n` of a one-question question.
    Choose(usize),
    /// Submit the card's selections (a question or form as select lists).
    Submit,
    /// Allow, and grant the session the rule imrelay proposes for similar calls.
    AllowSimilar,
}

impl Action {
    fn as_str(self) -> String {
        match self {
            Action::Allow => "allow".into(),
            Action::Deny => "deny".into(),
            Action::Choose(n) => format!("o{n}"),
            Action::Submit => "submit".into(),
            Action::AllowSimilar => "similar".into(),
        }
    }

    fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "allow" => Action::Allow,
            "deny" => Action::Deny,
            "submit" => Action::Submit,
            "similar" => Action::AllowSimilar,
            o => Action::Choose(o.strip_prefix('o')?.parse().ok()?),
        })
    }
}

/// A verified click: the interaction (id and creation time) and the action.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Pressed {
    /// The interaction's id.
    pub id: String,
    /// Its creation time, milliseconds.
    pub created_ms: i64,
    /// What the button does.
    pub action: Action,
}

/// Makes and checks button keys under the channel's store secret.
#[derive(Clone, Debug)]
pub(crate) struct Keys {
    signer: Signer,
}

impl Keys {
    /// Keys signed under `secret`.
    pub(crate) fn new(secret: Vec<u8>) -> Self {
        Self {
            signer: Signer::new(secret),
        }
    }

    /// The `task_id` of `i`'s card in `chat`.
    pub(crate) fn task_id(i: &Interaction, chat: &str) -> String {
        let mut h = Sha256::new();
        h.update(i.incarnation().as_bytes());
        h.update(b"\n");
        h.update(chat.as_bytes());
        format!("imrelay-{}", hex::encode(&h.finalize()[..12]))
    }

    /// The key of `action`'s button on the card `task_id` showing `i`.
    pub(crate) fn key(&self, i: &Interaction, task_id: &str, action: Action) -> String {
        let id = i.id.to_string();
        let created = i.created_at.as_millisecond().to_string();
        let action = action.as_str();
        let tag = self.tag(&id, &created, &action, task_id);
        format!("{action}{SEP}{id}{SEP}{created}{SEP}{tag}")
    }

    fn tag(&self, id: &str, created: &str, action: &str, task_id: &str) -> String {
        self.signer.tag(
            KEY_DOMAIN,
            &[
                id.as_bytes(),
                created.as_bytes(),
                action.as_bytes(),
                task_id.as_bytes(),
            ],
            TAG_BYTES,
        )
    }

    /// What `key`, clicked on the card `task_id`, asks for, if its tag checks out (in
    /// constant time).
    pub(crate) fn verify(&self, key: &str, task_id: &str) -> Option<Pressed> {
        let (action, rest) = key.split_once(SEP)?;
        let (rest, tag) = rest.rsplit_once(SEP)?;
        let (id, created) = rest.rsplit_once(SEP)?;
        let parts = [id.as_bytes(), created.as_bytes(), action.as_bytes()];
        let signed = [parts[0], parts[1], parts[2], task_id.as_bytes()];
        if !self.signer.verify(KEY_DOMAIN, &signed, TAG_BYTES, tag) {
            return None;
        }
        Some(Pressed {
            id: id.to_string(),
            created_ms: created.parse().ok()?,
            action: Action::parse(action)?,
        })
    }

    /// The short handle a typed answer names `i` by.
    pub(crate) fn handle(&self, i: &Interaction) -> String {
        self.signer.tag(
            HANDLE_DOMAIN,
            &[
                i.id.as_str().as_bytes(),
                i.created_at.as_millisecond().to_string().as_bytes(),
            ],
            HANDLE_BYTES,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::interaction::InteractionId;

    fn interaction(id: &str, ms: i64) -> Interaction {
        Interaction::pending(
            InteractionId::parse(id).unwrap(),
            "Bash",
            serde_json::Map::new(),
            jiff::Timestamp::from_millisecond(ms).unwrap(),
            300,
        )
    }

    #[test]
    fn keys_bind_interaction_action_and_card() {
        let keys = Keys::new(vec![7; 32]);
        let i = interaction("toolu_1:x", 1_700_000_000_000);
        let task = Keys::task_id(&i, "chat1");
        assert!(task.len() <= 128);
        assert!(
            task.chars()
                .all(|c| c.is_ascii_alphanumeric() || "_-@".contains(c))
        );
        assert_ne!(task, Keys::task_id(&i, "chat2"));
        let key = keys.key(&i, &task, Action::Choose(2));
        let p = keys.verify(&key, &task).unwrap();
        assert_eq!(
            (p.id.as_str(), p.created_ms, p.action),
            ("toolu_1:x", 1_700_000_000_000, Action::Choose(2))
        );
        // On another card, with another action, or under another secret: refused.
        assert!(keys.verify(&key, &Keys::task_id(&i, "chat2")).is_none());
        let forged = key.replacen("o2", "allow", 1);
        assert!(keys.verify(&forged, &task).is_none());
        assert!(Keys::new(vec![8; 32]).verify(&key, &task).is_none());
        assert!(keys.verify("allow|x", &task).is_none());
        assert!(keys.verify("", &task).is_none());
        let later = interaction("toolu_1:x", 1_700_000_000_001);
        assert_ne!(keys.handle(&i), keys.handle(&later));
        assert_eq!(keys.handle(&i).len(), 8);
    }
}
