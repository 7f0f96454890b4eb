//! The modals a button opens (a reason, an edited command, a typed answer, every question, a
//! form), the ids of their inputs, and the values a submitted modal carries.

use serde_json::{Map, Value, json};

use super::form::field_input;
use super::question::{other_block, question_input};
use super::{Action, Blocks, MAX_TEXT, MAX_TITLE, editable_command, plain, section};
use crate::interaction::{Form, Interaction, parse_questions};

/// The `callback_id` of imrelay's modals.
pub const CALLBACK_ID: &str = "imrelay";

/// The block and action ids of inputs in modals.
pub const REASON_BLOCK: &str = "reason";

/// The edited command's input block.
pub const COMMAND_BLOCK: &str = "command";

/// A typed answer's input block.
pub const ANSWER_BLOCK: &str = "answer";

/// The action id of every input element in imrelay's modals.
pub const INPUT_ACTION: &str = "v";

impl Blocks {
    /// A modal for `action` on `i` (`None` when the action opens none).
    pub fn modal(&self, i: &Interaction, action: Action) -> Option<Value> {
        let w = self.words;
        let (title, submit, blocks) = match action {
            Action::Reason => (
                w.pick("附理由拒绝", "Deny with reason"),
                w.deny(),
                vec![
                    section(&format!(
                        "{}{}{}",
                        w.pick("拒绝 ", "Deny "),
                        i.tool_name,
                        w.pick("？", "?")
                    )),
                    text_input(
                        REASON_BLOCK,
                        w.pick("理由（会告知智能体）", "Reason (shown to the agent)"),
                        true,
                        false,
                        None,
                        Some(1000),
                    ),
                ],
            ),
            Action::Edit => (
                w.pick("改写后批准", "Edit & approve"),
                w.approve(),
                vec![
                    section(w.pick(
                        "命令将按此处的内容运行。",
                        "The command runs as you leave it here.",
                    )),
                    text_input(
                        COMMAND_BLOCK,
                        w.pick("命令", "Command"),
                        true,
                        false,
                        editable_command(i).as_deref(),
                        Some(MAX_TEXT),
                    ),
                ],
            ),
            Action::Other => {
                let q = parse_questions(&i.input.map()).ok()?.into_iter().next()?;
                (
                    w.pick("回答", "Answer"),
                    w.pick("回答", "Answer"),
                    vec![
                        section(&format!("[{}] {}", q.header, q.question)),
                        text_input(
                            ANSWER_BLOCK,
                            w.pick("你的回答", "Your answer"),
                            true,
                            false,
                            None,
                            Some(4096),
                        ),
                    ],
                )
            }
            Action::Answer => (
                w.pick("回答", "Answer"),
                w.pick("提交", "Submit"),
                self.answer_blocks(i)?,
            ),
            Action::Fill => {
                let form = Form::from_input(&i.input.map()).ok()?;
                let mut blocks = vec![section(&form.message)];
                for (n, f) in form.fields.iter().enumerate() {
                    blocks.push(field_input(n, f));
                }
                let title = i
                    .title()
                    .filter(|t| !t.trim().is_empty())
                    .unwrap_or(w.pick("请填写", "Please fill in"));
                return Some(self.view(i, action, title, w.pick("提交", "Submit"), blocks));
            }
            _ => return None,
        };
        Some(self.view(i, action, title, submit, blocks))
    }

    /// The inputs of every question: its options, and a typed answer instead.
    fn answer_blocks(&self, i: &Interaction) -> Option<Vec<Value>> {
        let qs = parse_questions(&i.input.map()).ok()?;
        let mut blocks = Vec::new();
        for (n, q) in qs.iter().enumerate() {
            blocks.push(question_input(n, q));
            blocks.push(text_input(
                &other_block(n),
                self.words.pick("或输入回答", "Or type an answer"),
                false,
                true,
                None,
                Some(4096),
            ));
        }
        Some(blocks)
    }

    /// A modal for `action` on `i`, its metadata signed.
    fn view(
        &self,
        i: &Interaction,
        action: Action,
        title: &str,
        submit: &str,
        blocks: Vec<Value>,
    ) -> Value {
        json!({
            "type": "modal",
            "callback_id": CALLBACK_ID,
            "private_metadata": self.buttons.value(i, action),
            "title": plain(title, MAX_TITLE),
            "submit": plain(submit, MAX_TITLE),
            "close": plain(self.words.pick("取消", "Cancel"), MAX_TITLE),
            "blocks": blocks,
        })
    }
}

/// A text input in block `block`.
fn text_input(
    block: &str,
    label: &str,
    multiline: bool,
    optional: bool,
    initial: Option<&str>,
    max_len: Option<usize>,
) -> Value {
    let mut element =
        json!({"type": "plain_text_input", "action_id": INPUT_ACTION, "multiline": multiline});
    if let Some(v) = initial {
        element["initial_value"] = json!(v);
    }
    if let Some(m) = max_len {
        element["max_length"] = json!(m.min(MAX_TEXT));
    }
    json!({"type": "input", "block_id": block, "optional": optional,
        "label": plain(label, 2000), "element": element})
}

/// The values of a submitted modal's inputs: `block id → value element` (Slack's
/// `view.state.values`, one action per block).
pub fn state_values(view: &Value) -> Map<String, Value> {
    let mut out = Map::new();
    if let Some(blocks) = view["state"]["values"].as_object() {
        for (block, actions) in blocks {
            if let Some(v) = actions.get(INPUT_ACTION) {
                out.insert(block.clone(), v.clone());
            }
        }
    }
    out
}
