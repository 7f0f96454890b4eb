//! What a button or modal asks for, and the signed value that carries it: bound to one
//! interaction (its id and creation time) and one action by a MAC under the channel's secret.

use crate::channels::token::Signer;
use crate::interaction::{Interaction, InteractionId, Kind, parse_questions};
use crate::present::render;

/// The `action_id` of a multi-select question's checkboxes (ticking sends an action that
/// changes nothing).
pub const CHECKS_ACTION: &str = "imrelay.checks";

/// The `action_id` prefix of imrelay's buttons.
pub const ACTION_PREFIX: &str = "imrelay.";

/// What a button or modal asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    /// Approve the tool call.
    Allow,
    /// Approve it and allow similar calls for the session (the rule imrelay proposes).
    AllowSimilar,
    /// Deny it (or decline the question or form).
    Deny,
    /// Open the modal that denies with a reason.
    Reason,
    /// Open the modal that edits the command and approves it.
    Edit,
    /// Answer a one-question prompt with option `n`.
    Pick(usize),
    /// Submit a multi-select question's ticked options.
    Submit,
    /// Open the modal that takes a typed answer to a one-question prompt.
    Other,
    /// Open the modal with every question.
    Answer,
    /// Open the modal with the form.
    Fill,
}

impl Action {
    /// The name carried in values.
    pub fn name(self) -> String {
        match self {
            Action::Allow => "allow".into(),
            Action::AllowSimilar => "allow_similar".into(),
            Action::Deny => "deny".into(),
            Action::Reason => "reason".into(),
            Action::Edit => "edit".into(),
            Action::Pick(n) => format!("pick.{n}"),
            Action::Submit => "submit".into(),
            Action::Other => "other".into(),
            Action::Answer => "answer".into(),
            Action::Fill => "fill".into(),
        }
    }

    /// Parses a name carried in values.
    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "allow" => Action::Allow,
            "allow_similar" => Action::AllowSimilar,
            "deny" => Action::Deny,
            "reason" => Action::Reason,
            "edit" => Action::Edit,
            "submit" => Action::Submit,
            "other" => Action::Other,
            "answer" => Action::Answer,
            "fill" => Action::Fill,
            _ => Action::Pick(s.strip_prefix("pick.")?.parse().ok()?),
        })
    }

    /// Whether a message of `i` carries this action.
    pub fn fits(self, i: &Interaction) -> bool {
        let questions = || parse_questions(&i.input.map()).unwrap_or_default();
        match self {
            Action::Allow | Action::Reason => i.kind == Kind::Approval,
            Action::AllowSimilar => render::similar_rule(i).is_some(),
            Action::Edit => i.kind == Kind::Approval && editable_command(i).is_some(),
            Action::Deny => true,
            Action::Pick(n) => {
                let qs = questions();
                i.kind == Kind::Question
                    && qs.len() == 1
                    && !qs[0].multi_select
                    && n < qs[0].options.len()
            }
            Action::Submit => {
                let qs = questions();
                i.kind == Kind::Question && qs.len() == 1 && qs[0].multi_select
            }
            Action::Other => i.kind == Kind::Question && questions().len() == 1,
            Action::Answer => i.kind == Kind::Question,
            Action::Fill => i.kind == Kind::Form,
        }
    }

    /// Whether the action opens a modal rather than answering.
    pub fn opens_modal(self) -> bool {
        matches!(
            self,
            Action::Reason | Action::Edit | Action::Other | Action::Answer | Action::Fill
        )
    }
}

pub use crate::present::render::editable_command;

/// A signed value: what it is for, once verified.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Signed {
    /// The interaction.
    pub id: InteractionId,
    /// Its creation time, ms.
    pub created: i64,
    /// What the button or modal does.
    pub action: Action,
}

/// Signs and reads the values on buttons and modals.
#[derive(Clone, Debug)]
pub struct Buttons {
    signer: Signer,
}

/// The MAC's domain.
const DOMAIN: &[u8] = b"imrelay/slack/button/v1";

/// The MAC's length in bytes (Slack's 2,000-character value has room for all of it).
const TAG_BYTES: usize = 16;

impl Buttons {
    /// Values signed with `key` (the channel's secret from the store).
    pub fn new(key: Vec<u8>) -> Self {
        Self {
            signer: Signer::new(key),
        }
    }

    /// The value of a button (or a modal's metadata) for `action` on `i`:
    /// `<action> <id> <created ms> <tag>`.
    pub fn value(&self, i: &Interaction, action: Action) -> String {
        let created = i.created_at.as_millisecond().to_string();
        let name = action.name();
        let tag = self.signer.tag(
            DOMAIN,
            &[
                name.as_bytes(),
                i.id.as_str().as_bytes(),
                created.as_bytes(),
            ],
            TAG_BYTES,
        );
        format!("{name} {} {created} {tag}", i.id)
    }

    /// What `value` is for, if its MAC checks out.
    pub fn verify(&self, value: &str) -> Option<Signed> {
        let mut parts = value.split(' ');
        let (name, id, created, tag) = (parts.next()?, parts.next()?, parts.next()?, parts.next()?);
        if parts.next().is_some() {
            return None;
        }
        if !self.signer.verify(
            DOMAIN,
            &[name.as_bytes(), id.as_bytes(), created.as_bytes()],
            TAG_BYTES,
            tag,
        ) {
            return None;
        }
        Some(Signed {
            id: InteractionId::parse(id).ok()?,
            created: created.parse().ok()?,
            action: Action::parse(name)?,
        })
    }
}
