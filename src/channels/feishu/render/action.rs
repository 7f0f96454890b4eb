//! What a card's buttons and forms ask for, and the names of the form fields whose values
//! come back with a click.

use crate::interaction::Kind;

/// What a button or form asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Action {
    /// Approve the tool call.
    Allow,
    /// Approve it, and grant the rule imrelay proposes for similar calls of its session.
    AllowSimilar,
    /// Deny it (with the reason typed in the form, if any).
    Deny,
    /// Submit the question form.
    Answer,
    /// Approve with the command typed in the edit form ("Edit & approve").
    Edit,
}

impl Action {
    /// The name carried in button values.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Action::Allow => "allow",
            Action::AllowSimilar => "allow_similar",
            Action::Deny => "deny",
            Action::Answer => "answer",
            Action::Edit => "edit",
        }
    }

    /// Whether a card of an interaction of `kind` carries this button: Allow on approvals,
    /// Answer on questions and forms, Deny (or Decline) on all.
    pub(crate) fn fits(self, kind: Kind) -> bool {
        match self {
            Action::Allow | Action::AllowSimilar | Action::Edit => kind == Kind::Approval,
            Action::Answer => matches!(kind, Kind::Question | Kind::Form),
            Action::Deny => match kind {
                Kind::Approval | Kind::Question | Kind::Form => true,
            },
        }
    }

    /// Parses a name carried in button values.
    pub(crate) fn parse(s: &str) -> Option<Self> {
        match s {
            "allow" => Some(Action::Allow),
            "allow_similar" => Some(Action::AllowSimilar),
            "deny" => Some(Action::Deny),
            "answer" => Some(Action::Answer),
            "edit" => Some(Action::Edit),
            _ => None,
        }
    }
}

/// The form field name of form field `n` (field names are the agent's: an index keeps the
/// card's names within what Feishu accepts).
pub(crate) fn field_name(n: usize) -> String {
    format!("f{n}")
}

/// Form field names.
pub(crate) const REASON_FIELD: &str = "reason";
/// The edit form's field: the command to run instead.
pub(crate) const COMMAND_FIELD: &str = "command";

/// The form field of question `i`'s selection.
pub(crate) fn select_field(i: usize) -> String {
    format!("q{i}")
}

/// The form field of question `i`'s "Other" text.
pub(crate) fn other_field(i: usize) -> String {
    format!("q{i}_other")
}
