//! The body of a form message (the agent's message, the fields it asks for, and the button
//! that opens the modal), and each field's input in that modal.

use serde_json::{Value, json};

use super::{
    Action, Blocks, INPUT_ACTION, MAX_LABEL, MAX_OPTIONS, MAX_TEXT, context, option, plain, section,
};
use crate::interaction::form::{Choice, Field, FieldType, Format};
use crate::interaction::{Form, Interaction};

impl Blocks {
    /// The form's message and, while pending, its fields and the button that opens it.
    pub(super) fn form(&self, i: &Interaction, out: &mut Vec<Value>) {
        let form = match Form::from_input(&i.input.map()) {
            Ok(f) => f,
            Err(e) => {
                out.push(section(&e.to_string()));
                return;
            }
        };
        out.push(section(&form.message));
        if i.resolution.is_some() {
            return;
        }
        let fields: Vec<String> = form
            .fields
            .iter()
            .map(|f| format!("• {}{}", f.label(), if f.required { " *" } else { "" }))
            .collect();
        out.push(context(&fields.join("\n")));
        out.push(
            json!({"type": "actions", "block_id": "decide", "elements": [
                self.button(i, Action::Fill, self.words.fill_in(), Some("primary")),
                self.button(i, Action::Deny, self.words.decline(), Some("danger")),
            ]}),
        );
    }
}

/// The input block of form field `n` (field names are the agent's: an index keeps block ids
/// within what Slack accepts).
pub fn field_block(n: usize) -> String {
    format!("f{n}")
}

/// The options of a select, each valued by its index (at most `max`).
fn choice_options(choices: &[Choice], max: usize) -> Vec<Value> {
    choices
        .iter()
        .take(max)
        .enumerate()
        .map(|(j, c)| option(&c.label, j))
        .collect()
}

/// The input of form field `n`, of the kind its type needs.
pub(super) fn field_input(n: usize, f: &Field) -> Value {
    let element = match &f.ty {
        FieldType::Choice { options } => {
            let mut e = json!({"type": "static_select", "action_id": INPUT_ACTION,
                "placeholder": plain("Choose one", MAX_LABEL), "options": choice_options(options, MAX_OPTIONS)});
            if let Some(j) = default_index(f, options) {
                e["initial_option"] = option(&options[j].label, j);
            }
            e
        }
        FieldType::Multi { options, .. } => json!({"type": "multi_static_select",
            "action_id": INPUT_ACTION, "placeholder": plain(&f.hint(), MAX_LABEL),
            "options": choice_options(options, MAX_OPTIONS)}),
        FieldType::Boolean => {
            let mut e = json!({"type": "checkboxes", "action_id": INPUT_ACTION,
                "options": [option("Yes", 1)]});
            if f.default == Some(Value::Bool(true)) {
                e["initial_options"] = json!([option("Yes", 1)]);
            }
            e
        }
        FieldType::Text {
            format: Some(Format::Date),
            ..
        } => json!({"type": "datepicker", "action_id": INPUT_ACTION}),
        FieldType::Text {
            multiline, max_len, ..
        } => {
            let mut e = json!({"type": "plain_text_input", "action_id": INPUT_ACTION,
                "multiline": multiline, "max_length": max_len.unwrap_or(MAX_TEXT).min(MAX_TEXT),
                "placeholder": plain(&f.hint(), 150)});
            if let Some(Value::String(d)) = &f.default {
                e["initial_value"] = json!(d);
            }
            e
        }
        FieldType::Number { integer, .. } => {
            let mut e = json!({"type": "number_input", "action_id": INPUT_ACTION,
                "is_decimal_allowed": !integer, "placeholder": plain(&f.hint(), 150)});
            if let Some(Value::Number(d)) = &f.default {
                e["initial_value"] = json!(d.to_string());
            }
            e
        }
    };
    let mut block = json!({"type": "input", "block_id": field_block(n),
        // Booleans are never required: unticked is `false`.
        "optional": !f.required || matches!(f.ty, FieldType::Boolean),
        "label": plain(f.label(), 2000), "element": element});
    if let Some(d) = &f.description {
        block["hint"] = plain(d, 2000);
    }
    block
}

/// The index of field `f`'s default among its `options`.
fn default_index(f: &Field, options: &[Choice]) -> Option<usize> {
    let d = f.default.as_ref()?.as_str()?;
    options.iter().position(|c| c.value == d)
}

/// The agent's message of a form interaction.
pub(super) fn form_message(i: &Interaction) -> String {
    i.input
        .map()
        .get("message")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string()
}
