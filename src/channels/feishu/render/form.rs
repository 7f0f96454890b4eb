//! The body of a form card: the agent's message and one input per field (a single free-text
//! question gets one answer box instead), and the form every pending question or form card
//! ends with.

use serde_json::{Value, json};

use super::action::{Action, field_name};
use super::budget::Budget;
use super::{Cards, MAX_INPUT_LEN, div, grey_div, plain};
use crate::interaction::clip;
use crate::interaction::form::{Choice, Field, FieldType, Format};
use crate::interaction::{Form, Interaction};
use crate::present;
use crate::present::render;

impl Cards {
    /// The form of a pending card, or the answers of a resolved one.
    pub(super) fn form_body(&self, i: &Interaction, budget: Budget, out: &mut Vec<Value>) {
        let form = match Form::from_input(&i.input.map()) {
            Ok(f) => f,
            Err(e) => {
                out.push(div(format!("{e}")));
                if let Some(r) = &i.resolution {
                    self.resolution_lines(i, r, budget, out);
                }
                return;
            }
        };
        // It needs a passkey: what it asks, and a link to answer it.
        let at = out.len();
        if i.resolution.is_none() && self.step_up_block(i, out) {
            out.insert(at, div(clip(&form.message, budget.text)));
            return;
        }
        if form.is_single_text() {
            return self.single_text_body(i, &form, budget, out);
        }
        out.push(div(clip(&form.message, budget.text)));
        if let Some(r) = &i.resolution {
            self.resolution_lines(i, r, budget, out);
            return;
        }
        let mut elements = Vec::new();
        for (n, f) in form.fields.iter().enumerate() {
            self.form_field(n, f, budget, &mut elements);
        }
        let decline = self.t("拒绝填写", "Decline");
        self.answer_form(i, elements, decline, out);
    }

    /// A single free-text question: the question as a heading, what its field adds, and one
    /// box for the answer with "Send answer" — no field label, no form to fill in.
    fn single_text_body(&self, i: &Interaction, form: &Form, budget: Budget, out: &mut Vec<Value>) {
        out.push(json!({"tag": "div", "text": {
            "tag": "plain_text",
            "content": present::visible_text(&clip(&form.message, budget.text)),
            "text_size": "heading",
        }}));
        let Some(field) = form.fields.first() else {
            return;
        };
        let note = render::single_text_note(field);
        if !note.is_empty() {
            out.push(grey_div(clip(&note, budget.question)));
        }
        if let Some(r) = &i.resolution {
            self.resolution_lines(i, r, budget, out);
            return;
        }
        // The field's own input (a text box, a date picker), without its label: the
        // question above is its label.
        let mut parts = Vec::new();
        self.form_field(0, field, budget, &mut parts);
        let Some(mut input) = parts.pop() else {
            return;
        };
        if input["tag"] == "input" && field.hint() == "text" {
            input["placeholder"] = plain(self.t("你的回答", "Your answer"));
        }
        out.push(self.deadline_line(i));
        out.push(json!({"tag": "form", "name": "answer_form", "elements": [
            input,
            self.submit(i, Action::Answer, self.t("回答", "Send answer"), "primary_filled", "submit"),
        ]}));
        out.push(self.button(
            i,
            Action::Deny,
            self.t("拒绝回答", "Decline to answer"),
            "danger",
            "decline",
        ));
    }

    /// The form of a pending question or form card: its `elements` and Submit, the deadline,
    /// and the button that declines (labelled `decline`).
    pub(super) fn answer_form(
        &self,
        i: &Interaction,
        mut elements: Vec<Value>,
        decline: &str,
        out: &mut Vec<Value>,
    ) {
        elements.push(self.submit(
            i,
            Action::Answer,
            self.t("提交", "Submit"),
            "primary_filled",
            "submit",
        ));
        out.push(self.deadline_line(i));
        out.push(json!({"tag": "form", "name": "answer_form", "elements": elements}));
        out.push(self.button(i, Action::Deny, decline, "danger", "decline"));
    }

    /// One form field: its label (with a mark when required), its description, and the input
    /// that fits its type (a tick box, labelled itself, for yes/no). Feishu checks `required`
    /// before it sends anything; imrelay checks everything again.
    fn form_field(&self, n: usize, f: &Field, b: Budget, out: &mut Vec<Value>) {
        let mark = if f.required { " *" } else { "" };
        if !matches!(f.ty, FieldType::Boolean) {
            out.push(json!({"tag": "div", "text": {"tag": "plain_text", "content": present::visible_text(&format!("{}{mark}", clip(f.label(), 100))), "text_size": "normal_v2"}}));
        }
        if let Some(d) = f.description.as_deref() {
            out.push(grey_div(clip(d, b.question)));
        }
        let mut element = self.field_input(f);
        element["name"] = json!(field_name(n));
        if !matches!(f.ty, FieldType::Boolean) {
            element["required"] = json!(f.required && f.default.is_none());
        }
        if let Some(d) = &f.default {
            set_default(f, d, &mut element);
        }
        out.push(element);
    }

    /// The input element that fits field `f`'s type, before its name, `required` and default.
    fn field_input(&self, f: &Field) -> Value {
        let hint = f.hint();
        match &f.ty {
            FieldType::Choice { options: choices } => json!({
                "tag": "select_static",
                "width": "fill",
                "placeholder": plain(self.t("请选择", "Choose one")),
                "options": choice_options(choices),
            }),
            FieldType::Multi {
                options: choices, ..
            } => json!({
                "tag": "multi_select_static",
                "width": "fill",
                "placeholder": plain(clip(&hint, 100)),
                "options": choice_options(choices),
            }),
            // A tick box: unticked is `false`, so it needs no `required` (which it lacks).
            FieldType::Boolean => json!({
                "tag": "checker",
                "checked": f.default == Some(Value::Bool(true)),
                "text": plain(clip(f.label(), 100)),
            }),
            FieldType::Text {
                format: Some(Format::Date),
                ..
            } => json!({
                "tag": "date_picker",
                "width": "fill",
                "placeholder": plain(self.t("请选择日期", "Choose a date")),
            }),
            FieldType::Text {
                multiline, max_len, ..
            } => {
                let mut e = json!({
                    "tag": "input",
                    "width": "fill",
                    "max_length": max_len.map_or(MAX_INPUT_LEN, |m| (m as u64).min(MAX_INPUT_LEN)),
                    "placeholder": plain(clip(&hint, 100)),
                });
                if *multiline {
                    e["input_type"] = json!("multiline_text");
                    e["rows"] = json!(3);
                }
                e
            }
            FieldType::Number { .. } => json!({
                "tag": "input",
                "width": "fill",
                "max_length": 40,
                "placeholder": plain(clip(&hint, 100)),
            }),
        }
    }
}

/// The options of a select, each valued by its index.
fn choice_options(choices: &[Choice]) -> Vec<Value> {
    choices
        .iter()
        .enumerate()
        .map(|(j, c)| json!({"text": plain(clip(&c.label, 100)), "value": j.to_string()}))
        .collect()
}

/// Shows field `f`'s default `d` in its input `element`, where the input takes one.
fn set_default(f: &Field, d: &Value, element: &mut Value) {
    match (&f.ty, d) {
        (FieldType::Choice { options: c }, Value::String(v)) => {
            if let Some(j) = c.iter().position(|o| &o.value == v) {
                element["initial_option"] = json!(j.to_string());
            }
        }
        (
            FieldType::Text {
                format: Some(Format::Date),
                ..
            },
            Value::String(v),
        ) => {
            element["initial_date"] = json!(v);
        }
        (FieldType::Text { .. }, Value::String(v)) => element["default_value"] = json!(v),
        (FieldType::Number { .. }, Value::Number(v)) => {
            element["default_value"] = json!(v.to_string());
        }
        _ => {}
    }
}
