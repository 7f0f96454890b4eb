//! The body of an approval card: the tool call as a person reads it (cut to the budget, with a
//! note of how much was left out), the votes so far, and while it is pending the rule "Allow
//! similar" would add, the deadline, the buttons and the form that denies with a reason (or,
//! when it needs a passkey, a link to its card in the inbox).

use serde_json::{Value, json};

use super::action::{Action, COMMAND_FIELD, REASON_FIELD};
use super::budget::Budget;
use super::{Cards, MAX_INPUT_LEN, code_block, grey_div, plain};
use crate::interaction::Interaction;
use crate::present;
use crate::present::render::{self, cut_note};

impl Cards {
    /// The tool call, the votes, and either the decision it waits for or how it was decided.
    pub(super) fn approval_body(&self, i: &Interaction, budget: Budget, out: &mut Vec<Value>) {
        // The tool call as a person reads it: a command, a diff, a file's first lines.
        let (text, lang) = present::chat_block(&i.tool_name, &i.input.map(), i.cwd.as_deref());
        let excerpt = render::excerpt(&text, budget.input);
        out.push(code_block(&excerpt.text, lang));
        if excerpt.cut > 0 {
            out.push(self.cut_notice(i, excerpt.cut));
        }
        if let Some(votes) = crate::present::render::votes_line(i, self.locale) {
            out.push(grey_div(votes));
        }
        match &i.resolution {
            Some(r) => self.resolution_lines(i, r, budget, out),
            None => self.decision(i, out),
        }
    }

    /// How many characters of the input were left out, linked to the inbox when there is one.
    fn cut_notice(&self, i: &Interaction, cut: usize) -> Value {
        match &self.inbox {
            Some(base) => {
                // The id is of URL-safe characters only; the base is the operator's setting.
                let url = format!("{base}/#{}", i.id);
                json!({"tag": "markdown", "content": if self.zh() {
                    format!("输入过长，已省略 {cut} 个字符：[在 imrelay 收件箱查看全部]({url})")
                } else {
                    format!("Input truncated: {}. [See all of it in the imrelay inbox]({url})", cut_note(cut))
                }})
            }
            None => grey_div(if self.zh() {
                format!("输入过长，已省略 {cut} 个字符（完整内容见 imrelay 收件箱）")
            } else {
                format!(
                    "Input truncated: {} (see the imrelay inbox for all of it)",
                    cut_note(cut)
                )
            }),
        }
    }

    /// When `i` needs a passkey and the inbox has an address: why, the deadline and a link to
    /// its card in the inbox, in place of whatever answers it on the card (an approval's
    /// buttons, a question's or a form's fields); `true` when it was drawn.
    pub(super) fn step_up_block(&self, i: &Interaction, out: &mut Vec<Value>) -> bool {
        let Some(l) = render::step_up_link(i, self.inbox.as_deref(), self.locale) else {
            return false;
        };
        out.push(grey_div(format!("🔑 {}", l.why)));
        out.push(self.deadline_line(i));
        out.push(
            json!({"tag": "button", "name": "step_up", "text": plain(l.label),
            "type": "primary_filled",
            "behaviors": [{"type": "open_url", "default_url": l.url}]}),
        );
        true
    }

    /// What a pending approval offers: the rule "Allow similar" adds, the deadline, the
    /// buttons, and the form that denies with a reason.
    fn decision(&self, i: &Interaction, out: &mut Vec<Value>) {
        if self.step_up_block(i, out) {
            return;
        }
        // Several people decide it: each allows it as it is, once.
        let similar = crate::present::render::similar_rule(i)
            .filter(|_| !crate::interaction::quorum::is_voted(i));
        if let Some(rule) = &similar {
            out.push(self.similar_note(i, rule));
        }
        out.push(self.deadline_line(i));
        out.push(self.approval_buttons(i, similar.is_some()));
        out.push(self.deny_form(i));
    }

    /// What "Allow similar" adds, in full, before anyone taps it.
    fn similar_note(&self, i: &Interaction, rule: &str) -> Value {
        let native = crate::channels::words::Words(self.locale).also_remembers_for(i);
        grey_div(format!(
            "{}{}{native}",
            self.t(
                "“批准并允许同类”会在本会话中自动允许：",
                "Allow similar also allows, for this session: "
            ),
            crate::interaction::clip(rule, 200)
        ))
    }

    /// Approve, "Allow similar" when `similar`, and Deny, side by side.
    fn approval_buttons(&self, i: &Interaction, similar: bool) -> Value {
        let mut columns = vec![json!({"tag": "column", "width": "auto", "elements": [
                self.button(i, Action::Allow, self.t("批准", "Approve"), "primary_filled", "approve")]})];
        if similar {
            columns.push(json!({"tag": "column", "width": "auto", "elements": [
                self.button(i, Action::AllowSimilar, self.t("批准并允许同类", "Allow similar"), "primary", "allow_similar")]}));
        }
        columns.push(json!({"tag": "column", "width": "auto", "elements": [
            self.button(i, Action::Deny, self.t("拒绝", "Deny"), "danger", "deny")]}));
        json!({
            "tag": "column_set",
            "flex_mode": "none",
            "horizontal_spacing": "8px",
            "columns": columns,
        })
    }

    /// The form that denies with a reason typed for the agent, and, where the command can be
    /// edited ("Edit & approve"), approves the command as changed in it. One form: Feishu
    /// sends every input of the form with either button, and each reads its own.
    fn deny_form(&self, i: &Interaction) -> Value {
        let mut elements = vec![
            json!({
                "tag": "input",
                "name": REASON_FIELD,
                "required": false,
                "max_length": MAX_INPUT_LEN,
                "placeholder": plain(self.t("拒绝原因（会告知智能体）", "Reason for denying (shown to the agent)")),
            }),
            self.submit(
                i,
                Action::Deny,
                self.t("拒绝并说明原因", "Deny with reason"),
                "danger",
                "deny_with_reason",
            ),
        ];
        // Several people decide it: each allows it as it is, once.
        if let Some(command) = render::editable_command(i)
            .filter(|c| c.chars().count() as u64 <= MAX_INPUT_LEN)
            .filter(|_| !crate::interaction::quorum::is_voted(i))
        {
            elements.push(json!({
                "tag": "input",
                "name": COMMAND_FIELD,
                "required": false,
                "max_length": MAX_INPUT_LEN,
                "default_value": command,
                "placeholder": plain(self.t("要运行的命令（可修改）", "The command to run (change it here)")),
            }));
            elements.push(self.submit(
                i,
                Action::Edit,
                self.t("按修改后的命令批准", "Edit & approve"),
                "primary",
                "edit",
            ));
        }
        json!({
            "tag": "form",
            "name": "deny_form",
            "elements": elements,
        })
    }
}
