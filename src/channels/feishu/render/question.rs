//! The body of a question card: each question with its options in a select and a box for
//! another answer, or, once resolved, the questions and their answers.

use serde_json::{Value, json};

use super::action::{other_field, select_field};
use super::budget::Budget;
use super::{Cards, MAX_INPUT_LEN, div, grey_div, plain};
use crate::interaction::clip;
use crate::interaction::{Interaction, Question, parse_questions};
use crate::present;

impl Cards {
    /// The questions of a pending card as one form, or of a resolved one with the answers.
    pub(super) fn question_body(&self, i: &Interaction, budget: Budget, out: &mut Vec<Value>) {
        let questions = parse_questions(&i.input.map()).unwrap_or_default();
        match &i.resolution {
            Some(r) => {
                for q in &questions {
                    out.push(div(format!(
                        "[{}] {}",
                        clip(&q.header, 40),
                        clip(&q.question, budget.question)
                    )));
                }
                self.resolution_lines(i, r, budget, out);
            }
            None => {
                // It needs a passkey: the questions to read, and a link to answer them.
                let at = out.len();
                if self.step_up_block(i, out) {
                    let asked = questions
                        .iter()
                        .map(|q| div(clip(&q.question, budget.question)));
                    out.splice(at..at, asked);
                    return;
                }
                let mut form = Vec::new();
                for (n, q) in questions.iter().enumerate() {
                    self.question_fields(n, q, budget, &mut form);
                }
                let decline = self.t("拒绝回答", "Decline to answer");
                self.answer_form(i, form, decline, out);
            }
        }
    }

    /// Question `n`: its text, its options' descriptions, the select and the "Other" box.
    fn question_fields(&self, n: usize, q: &Question, b: Budget, form: &mut Vec<Value>) {
        form.push(json!({"tag": "div", "text": {"tag": "plain_text", "content": present::visible_text(&format!("[{}] {}", clip(&q.header, 40), clip(&q.question, b.question))), "text_size": "normal_v2"}}));
        let described: Vec<String> = q
            .options
            .iter()
            .filter(|_| b.option > 0)
            .filter_map(|o| {
                o.description
                    .as_deref()
                    .filter(|d| !d.trim().is_empty())
                    .map(|d| format!("• {} — {}", clip(&o.label, 100), clip(d, b.option)))
            })
            .collect();
        if !described.is_empty() {
            form.push(grey_div(described.join("\n")));
        }
        let options: Vec<Value> = q
            .options
            .iter()
            .enumerate()
            .map(|(j, o)| json!({"text": plain(clip(&o.label, 100)), "value": j.to_string()}))
            .collect();
        let (tag, placeholder) = if q.multi_select {
            (
                "multi_select_static",
                self.t("可多选", "Choose one or more"),
            )
        } else {
            ("select_static", self.t("请选择", "Choose one"))
        };
        form.push(json!({
            "tag": tag,
            "name": select_field(n),
            "required": false,
            "width": "fill",
            "placeholder": plain(placeholder),
            "options": options,
        }));
        form.push(json!({
            "tag": "input",
            "name": other_field(n),
            "required": false,
            "max_length": MAX_INPUT_LEN,
            "placeholder": plain(if q.multi_select {
                self.t("其他（可选，自行填写，会与所选项一起提交）", "Other (optional, sent along with the chosen options)")
            } else {
                self.t("其他（自行填写答案，代替上面的选项）", "Other (type your own answer instead)")
            }),
        }));
    }
}
