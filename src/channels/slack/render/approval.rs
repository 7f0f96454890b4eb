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
        let w = self.words;
        if let Some(votes) = render::votes_line(i, w.0) {
            out.push(context(&votes));
        }
        if i.resolution.is_some() {
            return;
        }
        let mut buttons = vec![
            self.button(i, Action::Allow, w.approve(), Some("primary")),
            self.button(i, Action::Deny, w.deny(), Some("danger")),
            self.button(i, Action::Reason, w.deny_with_reason(), None),
        ];
        // Several people decide it: each allows it as it is.
        if editable_command(i).is_some() && !crate::interaction::quorum::is_voted(i) {
            buttons.push(self.button(i, Action::Edit, w.edit_approve(), None));
        }
        // "Allow similar": the rule it adds is in the message, in full.
        if let Some(rule) = render::similar_rule(i) {
            buttons.insert(
                1,
                self.button(i, Action::AllowSimilar, w.allow_similar(), None),
            );
            let native = w.also_remembers_for(i);
            out.push(context(&format!(
                "{}{}{native}",
                w.similar_note(),
                crate::interaction::clip(&rule, 200)
            )));
        }
        out.push(json!({"type": "actions", "block_id": "decide", "elements": buttons}));
    }

    /// "1,234 more characters not shown", linked to the inbox when there is one.
    fn cut_notice(&self, i: &Interaction, cut: usize) -> Value {
        let w = self.words;
        let note = w.input_truncated(&cut_note(cut));
        match &self.inbox {
            // The id is of URL-safe characters only; the base is the operator's setting.
            Some(base) => json!({"type": "context", "elements": [{"type": "mrkdwn",
                "text": format!("{note}. <{base}/#{}|{}>", i.id, w.see_all()),
                "verbatim": true}]}),
            None => context(&format!(
                "{note}{}",
                w.pick(
                    "（完整内容见 imrelay 收件箱）",
                    " (see the imrelay inbox for all of it)"
                )
            )),
        }
    }
}
