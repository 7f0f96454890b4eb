//! How a resolved message ends: the outcome's icon, the answers given, the reason for a
//! denial, the command as edited; and the thread reply that says how it ended.

use serde_json::{Value, json};

use super::{Blocks, context, cut, editable_command, escape, preformatted, section};
use crate::interaction::{Interaction, Kind, Outcome, PermissionResult};
use crate::present::render::{self, format_time};

impl Blocks {
    /// The thread reply that says how `i` ended: `(text, blocks)`.
    pub fn outcome_reply(&self, i: &Interaction) -> Option<(String, Value)> {
        let r = i.resolution.as_ref()?;
        let line = format!(
            "{} {} · {}",
            outcome_icon(r.outcome),
            render::outcome_phrase_in(r, self.words.0),
            format_time(r.at)
        );
        Some((escape(&cut(&line, 300)), json!([section(&line)])))
    }

    /// The answers given, the reason for a denial, and the command as edited.
    pub(super) fn resolution_details(&self, i: &Interaction, out: &mut Vec<Value>) {
        let Some(r) = &i.resolution else { return };
        for (label, value) in render::form_answers(i) {
            out.push(section(&format!("{} → {value}", cut(&label, 60))));
        }
        for (q, a) in render::given_answers(i) {
            out.push(section(&format!("{} → {a}", cut(&q, 200))));
        }
        match (r.result.permission(), r.outcome) {
            (_, Outcome::Denied | Outcome::Expired) if i.kind == Kind::Form => {
                if let Some(m) = r.message() {
                    out.push(section(&format!(
                        "{}{m}",
                        self.words.pick("理由：", "Reason: ")
                    )));
                }
            }
            (Some(PermissionResult::Deny { message, .. }), Outcome::Denied | Outcome::Expired) => {
                out.push(section(&format!(
                    "{}{message}",
                    self.words.pick("理由：", "Reason: ")
                )));
            }
            (Some(PermissionResult::Allow { updated_input, .. }), Outcome::Allowed) => {
                if let (Some(Value::String(new)), Some(old)) = (
                    updated_input.map().get("command"),
                    editable_command(i).filter(|_| i.tool_name == "Bash"),
                ) && new != &old
                {
                    out.push(context(
                        self.words
                            .pick("按改写后的命令批准：", "Approved as edited:"),
                    ));
                    out.push(preformatted(new));
                }
            }
            _ => {}
        }
    }
}

/// The icon of an outcome.
pub(super) fn outcome_icon(o: Outcome) -> &'static str {
    match o {
        Outcome::Allowed | Outcome::Answered => "✅",
        Outcome::Denied => "⛔",
        Outcome::Expired => "⌛",
        Outcome::Cancelled => "✖️",
    }
}
