//! The body of an approval message: the tool call as a person reads it, a note of how much
//! was cut, the votes so far, and while it is pending the buttons that decide it with the rule
//! "Allow similar" would add.

use serde_json::{Value, json};

use super::{Action, Blocks, INPUT_CHARS, context, editable_command, preformatted};
use crate::interaction::Interaction;
use crate::present;
use crate::present::render::{self, cut_note};

impl Blocks {
    /// The tool call, the votes, and the buttons of a pending approval.
    pub(super) fn approval(&self, i: &Interaction, out: &mut Vec<Value>) {
        // The tool call as a person reads it: a command, a diff, a file's first lines.
        let (text, _lang) = present::chat_block(&i.tool_name, &i.input.map(), i.cwd.as_deref());
        let excerpt = render::excerpt(&text, INPUT_CHARS);
        out.push(preformatted(&excerpt.text));
        if excerpt.cut > 0 {
            out.push(self.cut_notice(i, excerpt.cut));
        }
        if let Some(votes) = render::votes_line(i, render::Locale::EnUs) {
            out.push(context(&votes));
        }
        if i.resolution.is_some() {
            return;
        }
        let mut buttons = vec![
            self.button(i, Action::Allow, "Approve", Some("primary")),
            self.button(i, Action::Deny, "Deny", Some("danger")),
            self.button(i, Action::Reason, "Deny with reason…", None),
        ];
        // Several people decide it: each allows it as it is.
        if editable_command(i).is_some() && !crate::interaction::quorum::is_voted(i) {
            buttons.push(self.button(i, Action::Edit, "Edit & approve…", None));
        }
        // "Allow similar": the rule it adds is in the message, in full.
        if let Some(rule) = render::similar_rule(i) {
            buttons.insert(
                1,
                self.button(
                    i,
                    Action::AllowSimilar,
                    "Allow similar (this session)",
                    None,
                ),
            );
            let native = if i
                .suggestions
                .as_deref()
                .is_some_and(crate::interaction::applied_with_a_grant)
            {
                " (the agent also remembers its own suggestion for this session)"
            } else {
                ""
            };
            out.push(context(&format!(
                "Allow similar also allows, for this session: {}{native}",
                crate::interaction::clip(&rule, 200)
            )));
        }
        out.push(json!({"type": "actions", "block_id": "decide", "elements": buttons}));
    }

    /// "1,234 more characters not shown", linked to the inbox when there is one.
    fn cut_notice(&self, i: &Interaction, cut: usize) -> Value {
        match &self.inbox {
            // The id is of URL-safe characters only; the base is the operator's setting.
            Some(base) => json!({"type": "context", "elements": [{"type": "mrkdwn",
                "text": format!("Input truncated: {}. <{base}/#{}|See all of it in the imrelay inbox>", cut_note(cut), i.id),
                "verbatim": true}]}),
            None => context(&format!(
                "Input truncated: {} (see the imrelay inbox for all of it)",
                cut_note(cut)
            )),
        }
    }
}
