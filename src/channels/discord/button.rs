//! What a component or modal asks for, and the signed `custom_id` that carries it: bound to
//! one interaction (its id and creation time) and one action by a MAC under the channel's
//! secret, within Discord's 100 characters.
//!
//! Layout: `imr:<action>:<created ms>:<tag>:<id>`. The tag is 12 bytes of the kit's token
//! (16 characters); the id is last, as it may hold `:`. An id too long to fit (ids run to 128
//! characters) is left out: the click then names its interaction by the message it was made
//! on, whose copy imrelay recorded when it posted it.

use crate::channels::token::Signer;
use crate::interaction::{Interaction, InteractionId, Kind, parse_questions};
use crate::present::render;

/// Discord's limit on a `custom_id`.
pub const MAX_CUSTOM_ID: usize = 100;
/// The prefix of imrelay's `custom_id`s.
pub const PREFIX: &str = "imr";
/// The MAC's domain.
const DOMAIN: &[u8] = b"imrelay/discord/component/v1";
/// The MAC's length in bytes.
const TAG_BYTES: usize = 12;

/// What a component or modal asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    /// Approve the tool call.
    Allow,
    /// Approve it and allow similar calls for the session.
    AllowSimilar,
    /// Deny it (or decline the question or form).
    Deny,
    /// Open the modal that denies with a reason (and, submitted, deny with it).
    Reason,
    /// Open the modal that edits the command (and, submitted, approve it as edited).
    Edit,
    /// The select menu of a one-question prompt: its chosen options answer it.
    Pick,
    /// Open the modal that takes a typed answer to a one-question prompt.
    Other,
    /// Open the modal with every question.
    Answer,
    /// Open the modal with the form.
    Fill,
}

impl Action {
    /// The name carried in `custom_id`s.
    pub fn name(self) -> &'static str {
        match self {
            Action::Allow => "allow",
            Action::AllowSimilar => "similar",
            Action::Deny => "deny",
            Action::Reason => "reason",
            Action::Edit => "edit",
            Action::Pick => "pick",
            Action::Other => "other",
            Action::Answer => "answer",
            Action::Fill => "fill",
        }
    }

    /// Parses a name carried in `custom_id`s.
    pub fn parse(s: &str) -> Option<Self> {
        [
            Action::Allow,
            Action::AllowSimilar,
            Action::Deny,
            Action::Reason,
            Action::Edit,
            Action::Pick,
            Action::Other,
            Action::Answer,
            Action::Fill,
        ]
        .into_iter()
        .find(|a| a.name() == s)
    }

    /// Whether a message of `i` carries this action.
    pub fn fits(self, i: &Interaction) -> bool {
        let questions = || parse_questions(&i.input.map()).unwrap_or_default();
        match self {
            Action::Allow | Action::Reason => i.kind == Kind::Approval,
            Action::AllowSimilar => render::similar_rule(i).is_some(),
            Action::Edit => {
                i.kind == Kind::Approval
                    && editable_command(i).is_some()
                    && !crate::interaction::quorum::is_voted(i)
            }
            Action::Deny => true,
            Action::Pick | Action::Other => i.kind == Kind::Question && questions().len() == 1,
            Action::Answer => i.kind == Kind::Question,
            Action::Fill => i.kind == Kind::Form,
        }
    }

    /// Whether a click on it opens a modal rather than answering.
    pub fn opens_modal(self) -> bool {
        matches!(
            self,
            Action::Reason | Action::Edit | Action::Other | Action::Answer | Action::Fill
        )
    }
}

/// The command of a `Bash` call, which "Edit & approve" lets a person change (at most the
/// 4,000 characters a text input holds).
pub fn editable_command(i: &Interaction) -> Option<String> {
    if i.tool_name != "Bash" {
        return None;
    }
    i.input
        .map()
        .get("command")
        .and_then(serde_json::Value::as_str)
        .filter(|c| c.chars().count() <= 4000)
        .map(str::to_string)
}

/// A `custom_id` once verified: what it is for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Signed {
    /// The interaction, when the `custom_id` carried it (else the message names it).
    pub id: Option<InteractionId>,
    /// Its creation time, ms.
    pub created: i64,
    /// What the component or modal does.
    pub action: Action,
    /// The tag, to check once the id is known.
    tag: String,
}

/// Signs and reads `custom_id`s.
#[derive(Clone, Debug)]
pub struct Buttons {
    signer: Signer,
}

impl Buttons {
    /// `custom_id`s signed with `key` (the channel's secret from the store).
    pub fn new(key: Vec<u8>) -> Self {
        Self {
            signer: Signer::new(key),
        }
    }

    fn tag(&self, action: Action, id: &str, created: &str) -> String {
        self.signer.tag(
            DOMAIN,
            &[action.name().as_bytes(), id.as_bytes(), created.as_bytes()],
            TAG_BYTES,
        )
    }

    /// The `custom_id` for `action` on `i`.
    pub fn custom_id(&self, i: &Interaction, action: Action) -> String {
        let created = i.created_at.as_millisecond().to_string();
        let tag = self.tag(action, i.id.as_str(), &created);
        let with_id = format!("{PREFIX}:{}:{created}:{tag}:{}", action.name(), i.id);
        if with_id.len() <= MAX_CUSTOM_ID {
            with_id
        } else {
            format!("{PREFIX}:{}:{created}:{tag}:", action.name())
        }
    }

    /// Reads `custom_id`: `None` when it is not imrelay's or is damaged. The tag is checked
    /// by [`Buttons::verify`] once the interaction's id is known.
    pub fn read(&self, custom_id: &str) -> Option<Signed> {
        let mut parts = custom_id.splitn(5, ':');
        if parts.next()? != PREFIX {
            return None;
        }
        let action = Action::parse(parts.next()?)?;
        let created = parts.next()?.parse().ok()?;
        let tag = parts.next()?.to_string();
        let id = parts.next()?;
        let id = if id.is_empty() {
            None
        } else {
            Some(InteractionId::parse(id).ok()?)
        };
        Some(Signed {
            id,
            created,
            action,
            tag,
        })
    }

    /// Whether `signed` was made by this server for interaction `id`; in constant time.
    pub fn verify(&self, signed: &Signed, id: &InteractionId) -> bool {
        if signed.id.as_ref().is_some_and(|own| own != id) {
            return false;
        }
        self.signer.verify(
            DOMAIN,
            &[
                signed.action.name().as_bytes(),
                id.as_str().as_bytes(),
                signed.created.to_string().as_bytes(),
            ],
            TAG_BYTES,
            &signed.tag,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use jiff::Timestamp;

    fn pending(id: &str) -> Interaction {
        Interaction::pending(
            InteractionId::parse(id).unwrap(),
            "Bash",
            serde_json::Map::new(),
            Timestamp::from_millisecond(1_700_000_000_000).unwrap(),
            300,
        )
    }

    #[test]
    fn custom_ids_fit_and_verify_only_for_their_interaction_and_action() {
        let b = Buttons::new(vec![7; 32]);
        let i = pending("toolu_01ABCDEFGHIJKLMNOPQRSTUV");
        let c = b.custom_id(&i, Action::Allow);
        assert!(c.len() <= MAX_CUSTOM_ID, "{c}");
        let s = b.read(&c).unwrap();
        assert_eq!(s.action, Action::Allow);
        assert!(b.verify(&s, &i.id));
        assert!(!b.verify(&s, &InteractionId::parse("other").unwrap()));
        let swapped = b.read(&c.replacen("allow", "deny", 1)).unwrap();
        assert!(!b.verify(&swapped, &i.id));
        assert!(!Buttons::new(vec![8; 32]).verify(&s, &i.id));
        assert!(b.read("something:else").is_none());
        // An id with colons, and one too long to carry.
        let colons = pending("a:b:c");
        let s = b.read(&b.custom_id(&colons, Action::Deny)).unwrap();
        assert_eq!(s.id.as_ref().unwrap().as_str(), "a:b:c");
        let long = pending(&"x".repeat(128));
        let c = b.custom_id(&long, Action::Deny);
        assert!(c.len() <= MAX_CUSTOM_ID);
        let s = b.read(&c).unwrap();
        assert!(s.id.is_none());
        assert!(b.verify(&s, &long.id));
    }
}
