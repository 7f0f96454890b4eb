//! The body of a question message (with one question, a button per option; with several,
//! one button that opens the modal), and a question's input in that modal.

use serde_json::{Value, json};

use super::{
    Action, Blocks, CHECKS_ACTION, INPUT_ACTION, MAX_CHECKS, MAX_LABEL, context, option, plain,
    section,
};
use crate::interaction::{Interaction, Question, parse_questions};

impl Blocks {
    /// Each question, and while pending its options and the buttons that answer it.
    pub(super) fn question(&self, i: &Interaction, out: &mut Vec<Value>) {
        let questions = parse_questions(&i.input.map()).unwrap_or_default();
        for (n, q) in questions.iter().enumerate() {
            out.push(section(&format!("[{}] {}", q.header, q.question)));
            if i.resolution.is_none() {
                // With one question the buttons name the options; with several, the
                // options are listed here and chosen in the modal.
                let several = questions.len() != 1;
                let described: Vec<String> = q
                    .options
                    .iter()
                    .filter_map(|o| match o.description.as_deref() {
                        Some(d) => Some(format!("{}: {d}", o.label)),
                        None if several => Some(o.label.clone()),
                        None => None,
                    })
                    .collect();
                if !described.is_empty() {
                    out.push(context(&described.join("\n")));
                }
                if questions.len() == 1 {
                    self.one_question(i, n, q, out);
                }
            }
        }
        if i.resolution.is_none() && questions.len() != 1 {
            out.push(
                json!({"type": "actions", "block_id": "decide", "elements": [
                    self.button(i, Action::Answer, self.words.answer(), Some("primary")),
                    self.button(i, Action::Deny, self.words.decline(), Some("danger")),
                ]}),
            );
        }
    }

    /// The inputs of the only question of a prompt: a button per option, or checkboxes and
    /// Submit; "Other…" for a typed answer; Decline.
    fn one_question(&self, i: &Interaction, _n: usize, q: &Question, out: &mut Vec<Value>) {
        let mut elements = Vec::new();
        if q.multi_select {
            let options: Vec<Value> = q
                .options
                .iter()
                .take(MAX_CHECKS)
                .enumerate()
                .map(|(j, o)| option(&o.label, j))
                .collect();
            out.push(
                json!({"type": "actions", "block_id": "checks", "elements": [
                    {"type": "checkboxes", "action_id": CHECKS_ACTION, "options": options},
                ]}),
            );
            let submit = self.words.pick("提交", "Submit");
            elements.push(self.button(i, Action::Submit, submit, Some("primary")));
        } else {
            for (j, o) in q.options.iter().enumerate() {
                elements.push(self.button(i, Action::Pick(j), &o.label, None));
            }
        }
        elements.push(self.button(i, Action::Other, self.words.other(), None));
        elements.push(self.button(i, Action::Deny, self.words.decline(), Some("danger")));
        out.push(json!({"type": "actions", "block_id": "decide", "elements": elements}));
    }
}

/// The input block of question `n`'s typed answer in the modal.
pub fn other_block(n: usize) -> String {
    format!("q{n}_other")
}

/// The input block of question `n`'s options in the modal.
pub fn question_block(n: usize) -> String {
    format!("q{n}")
}

/// Question `n`'s options in the modal: radio buttons, or checkboxes for a multi-select one.
pub(super) fn question_input(n: usize, q: &Question) -> Value {
    let options: Vec<Value> = q
        .options
        .iter()
        .take(MAX_CHECKS)
        .enumerate()
        .map(|(j, o)| {
            let mut opt = option(&o.label, j);
            if let Some(d) = &o.description {
                opt["description"] = plain(d, MAX_LABEL);
            }
            opt
        })
        .collect();
    let kind = if q.multi_select {
        "checkboxes"
    } else {
        "radio_buttons"
    };
    json!({"type": "input", "block_id": question_block(n), "optional": true,
        "label": plain(&format!("[{}] {}", q.header, q.question), 2000),
        "element": {"type": kind, "action_id": INPUT_ACTION, "options": options}})
}
