//! A form half filled in: the one record of a person's progress through a [`Form`], field by
//! field, that every surface asking one field at a time drives (a chat's buttons and replies,
//! the terminal's typed lines).
//!
//! A [`FormDraft`] holds the fields done, in order (a value, or `null` for a field left empty,
//! which then takes its default), and the options toggled on for the multiple choice being
//! asked. Its steps are those a person takes: enter text, pick an option, toggle one and
//! confirm the choice, skip, go back, and submit. Each step checks the value against the
//! field ([`Field::check`]) and refuses with a [`DraftError`] saying what is wrong, in words
//! for the person; the draft is then unchanged. It does no I/O: the surface shows the field
//! asked next and sends what [`FormDraft::submit`] returns.

use serde_json::{Map, Value};

use super::form::{Field, FieldType, Form};

/// Why a step on a draft is refused. The message is for the person, and names the field.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum DraftError {
    /// The step names a field that is not the one being asked (or none is left to ask).
    #[error("That field is not the one being asked now.")]
    NotAsked,
    /// The step does not fit the field asked (a pick on a text field, an option it lacks).
    #[error("{0}: that does not fit this field.")]
    DoesNotFit(String),
    /// A required field cannot be left empty.
    #[error("{0} is required.")]
    Required(String),
    /// The value was refused by the field: its label, and what is wrong.
    #[error("{label}: {message}")]
    Invalid {
        /// The field's label.
        label: String,
        /// What is wrong with the value.
        message: String,
    },
    /// Submitted before every field was done.
    #[error("Fill in every field first.")]
    Incomplete,
}

/// A form being filled in, one field at a time, in the form's order.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct FormDraft {
    /// The fields done, in order: a value, or `null` for one left empty.
    values: Vec<Value>,
    /// The options toggled on for the multiple choice being asked, in option order.
    toggled: Vec<usize>,
}

impl FormDraft {
    /// A draft with nothing filled in.
    pub fn new() -> Self {
        Self::default()
    }

    /// A draft resumed from what was kept: the first fields' values (`null`: left empty)
    /// and the options toggled on for the field asked next. Toggles out of order or
    /// repeated are read as a set.
    pub fn resume(values: Vec<Value>, toggled: impl IntoIterator<Item = usize>) -> Self {
        let mut toggled: Vec<usize> = toggled.into_iter().collect();
        toggled.sort_unstable();
        toggled.dedup();
        Self { values, toggled }
    }

    /// The fields done, in order (`null`: left empty).
    pub fn values(&self) -> &[Value] {
        &self.values
    }

    /// The options toggled on for the field being asked, in option order.
    pub fn toggled(&self) -> &[usize] {
        &self.toggled
    }

    /// The index of the field being asked: the first not done, `None` once all are.
    pub fn current(&self, form: &Form) -> Option<usize> {
        (self.values.len() < form.fields.len()).then_some(self.values.len())
    }

    /// The field being asked, with its index.
    pub fn asked<'f>(&self, form: &'f Form) -> Option<(usize, &'f Field)> {
        let n = self.current(form)?;
        form.fields.get(n).map(|f| (n, f))
    }

    /// Whether every field is done.
    pub fn is_complete(&self, form: &Form) -> bool {
        self.current(form).is_none()
    }

    /// The field being asked, if it is field `n`.
    fn expect<'f>(&self, form: &'f Form, n: usize) -> Result<&'f Field, DraftError> {
        match self.asked(form) {
            Some((at, f)) if at == n => Ok(f),
            _ => Err(DraftError::NotAsked),
        }
    }

    /// Field done with `value`; returns how it reads.
    fn fill(&mut self, field: &Field, value: Value) -> String {
        let shown = shown(field, &value);
        self.values.push(value);
        self.toggled.clear();
        shown
    }

    /// Text typed for the field asked (a chat reply, a terminal line), read as the field's
    /// type ([`Field::parse_text`]). A blank entry leaves the field empty, so it takes its
    /// default; that is refused only when the field is required and has none. Returns the
    /// value as it reads ("(left empty)", "5 (default)").
    pub fn enter_text(&mut self, form: &Form, text: &str) -> Result<String, DraftError> {
        let (_, field) = self.asked(form).ok_or(DraftError::NotAsked)?;
        if text.trim().is_empty() {
            if field.required && field.default.is_none() {
                return Err(DraftError::Required(field.label().to_string()));
            }
            return Ok(self.fill(field, Value::Null));
        }
        let value = field.parse_text(text).map_err(|m| invalid(field, m))?;
        Ok(self.fill(field, value))
    }

    /// Option `option` picked for field `n`, a choice or a yes/no (option 0 is No, 1 Yes).
    pub fn pick(&mut self, form: &Form, n: usize, option: usize) -> Result<String, DraftError> {
        let field = self.expect(form, n)?;
        let value = match &field.ty {
            FieldType::Boolean if option <= 1 => Value::Bool(option == 1),
            FieldType::Choice { options } => options
                .get(option)
                .map(|c| Value::String(c.value.clone()))
                .ok_or_else(|| does_not_fit(field))?,
            _ => return Err(does_not_fit(field)),
        };
        Ok(self.fill(field, value))
    }

    /// Option `option` of field `n`, a multiple choice, toggled; returns whether it is now
    /// on, and its label.
    pub fn toggle(
        &mut self,
        form: &Form,
        n: usize,
        option: usize,
    ) -> Result<(bool, String), DraftError> {
        let field = self.expect(form, n)?;
        let label = match &field.ty {
            FieldType::Multi { options, .. } => options
                .get(option)
                .map(|c| c.label.clone())
                .ok_or_else(|| does_not_fit(field))?,
            _ => return Err(does_not_fit(field)),
        };
        let on = match self.toggled.binary_search(&option) {
            Ok(at) => {
                self.toggled.remove(at);
                false
            }
            Err(at) => {
                self.toggled.insert(at, option);
                true
            }
        };
        Ok((on, label))
    }

    /// Whether option `option` of the field asked is toggled on.
    pub fn is_toggled(&self, option: usize) -> bool {
        self.toggled.binary_search(&option).is_ok()
    }

    /// The options toggled on for field `n`, a multiple choice, taken as its value once the
    /// field's bounds allow them.
    pub fn confirm_toggled(&mut self, form: &Form, n: usize) -> Result<String, DraftError> {
        let field = self.expect(form, n)?;
        let FieldType::Multi { options, .. } = &field.ty else {
            return Err(does_not_fit(field));
        };
        let chosen: Vec<Value> = self
            .toggled
            .iter()
            .filter_map(|o| options.get(*o))
            .map(|c| Value::String(c.value.clone()))
            .collect();
        let value = field
            .check(&Value::Array(chosen))
            .map_err(|m| invalid(field, m))?;
        Ok(self.fill(field, value))
    }

    /// Field `n` left empty (it takes its default); refused for a required field.
    pub fn skip(&mut self, form: &Form, n: usize) -> Result<(), DraftError> {
        let field = self.expect(form, n)?;
        if field.required {
            return Err(DraftError::Required(field.label().to_string()));
        }
        self.fill(field, Value::Null);
        Ok(())
    }

    /// Back to field `n`, done or being asked: it and every later field are asked again.
    /// Returns its label; refused for a field the form does not have.
    pub fn back<'f>(&mut self, form: &'f Form, n: usize) -> Result<&'f str, DraftError> {
        let field = form.fields.get(n).ok_or(DraftError::NotAsked)?;
        if n < self.values.len() {
            self.values.truncate(n);
            self.toggled.clear();
        } else if n == self.values.len() {
            self.toggled.clear();
        }
        Ok(field.label())
    }

    /// The content as filled in so far: each field done with a value, by name (fields left
    /// empty are left out, so they take their defaults).
    pub fn content(&self, form: &Form) -> Map<String, Value> {
        form.fields
            .iter()
            .zip(&self.values)
            .filter(|(_, v)| !v.is_null())
            .map(|(f, v)| (f.name.clone(), v.clone()))
            .collect()
    }

    /// The content to send once every field is done ([`Form::accept`] checks it again on
    /// arrival); refused while a field is still to be asked.
    pub fn submit(&self, form: &Form) -> Result<Map<String, Value>, DraftError> {
        if !self.is_complete(form) {
            return Err(DraftError::Incomplete);
        }
        Ok(self.content(form))
    }
}

/// A field's value as it reads once done: its default when left empty and it has one.
pub fn shown(field: &Field, value: &Value) -> String {
    match (value, &field.default) {
        (Value::Null, Some(d)) => format!("{} (default)", field.show(d)),
        (Value::Null, None) => "(left empty)".to_string(),
        (v, _) => field.show(v),
    }
}

fn invalid(field: &Field, message: String) -> DraftError {
    DraftError::Invalid {
        label: field.label().to_string(),
        message,
    }
}

fn does_not_fit(field: &Field) -> DraftError {
    DraftError::DoesNotFit(field.label().to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn form() -> Form {
        let input = Form::input(
            "Deploy?",
            json!({
                "type": "object",
                "properties": {
                    "env": {"type": "string", "title": "Environment",
                        "oneOf": [{"const": "prod", "title": "Production"}, {"const": "dev", "title": "Dev"}]},
                    "count": {"type": "integer", "minimum": 1, "maximum": 5, "default": 2},
                    "tags": {"type": "array", "title": "Tags", "minItems": 1,
                        "items": {"enum": ["a", "b", "c"]}},
                    "notify": {"type": "boolean", "title": "Notify"},
                    "note": {"type": "string", "title": "Note"}
                },
                "required": ["env", "tags"]
            }),
        );
        Form::from_input(&input).expect("form")
    }

    #[test]
    fn fields_are_asked_in_order_and_submitted_as_content() {
        let f = form();
        let mut d = FormDraft::new();
        assert_eq!(
            d.asked(&f).map(|(n, x)| (n, x.label())),
            Some((0, "Environment"))
        );
        assert_eq!(d.submit(&f), Err(DraftError::Incomplete));
        assert_eq!(d.pick(&f, 0, 0).as_deref(), Ok("Production"));
        assert_eq!(d.enter_text(&f, "  ").as_deref(), Ok("2 (default)"));
        assert_eq!(d.toggle(&f, 2, 2), Ok((true, "c".to_string())));
        assert_eq!(d.toggle(&f, 2, 0), Ok((true, "a".to_string())));
        assert!(d.is_toggled(0) && !d.is_toggled(1));
        assert_eq!(d.confirm_toggled(&f, 2).as_deref(), Ok("a, c"));
        assert_eq!(d.pick(&f, 3, 1).as_deref(), Ok("Yes"));
        assert_eq!(d.enter_text(&f, "").as_deref(), Ok("(left empty)"));
        assert!(d.is_complete(&f));
        let content = d.submit(&f).expect("complete");
        assert_eq!(
            Value::Object(content.clone()),
            json!({"env": "prod", "tags": ["a", "c"], "notify": true})
        );
        // What arrives is what the form accepts, defaults filled in.
        assert_eq!(
            Value::Object(f.accept(&content).expect("accepted")),
            json!({"env": "prod", "count": 2, "tags": ["a", "c"], "notify": true})
        );
    }

    #[test]
    fn refused_steps_say_why_and_change_nothing() {
        let f = form();
        let mut d = FormDraft::new();
        assert_eq!(
            d.enter_text(&f, ""),
            Err(DraftError::Required("Environment".into()))
        );
        let got = d.enter_text(&f, "staging").unwrap_err().to_string();
        assert!(got.starts_with("Environment: "), "{got}");
        assert_eq!(d.pick(&f, 1, 0), Err(DraftError::NotAsked));
        assert_eq!(
            d.pick(&f, 0, 7),
            Err(DraftError::DoesNotFit("Environment".into()))
        );
        assert_eq!(
            d.toggle(&f, 0, 0),
            Err(DraftError::DoesNotFit("Environment".into()))
        );
        assert_eq!(
            d.skip(&f, 0),
            Err(DraftError::Required("Environment".into()))
        );
        assert_eq!(d, FormDraft::new());
        d.enter_text(&f, "2").expect("by number");
        assert_eq!(d.values(), [json!("dev")]);
        let err = d.enter_text(&f, "9").unwrap_err();
        assert!(
            matches!(&err, DraftError::Invalid { label, .. } if label == "count"),
            "{err:?}"
        );
        assert_eq!(d.values(), [json!("dev")]);
        d.skip(&f, 1).expect("count is optional");
        // A multiple choice below its minimum is refused, the toggles kept.
        assert_eq!(d.toggle(&f, 2, 1), Ok((true, "b".into())));
        assert_eq!(d.toggle(&f, 2, 1), Ok((false, "b".into())));
        assert!(matches!(
            d.confirm_toggled(&f, 2),
            Err(DraftError::Invalid { .. })
        ));
        assert_eq!(d.values().len(), 2);
    }

    #[test]
    fn back_asks_a_field_and_every_later_one_again() {
        let f = form();
        let mut d = FormDraft::resume(vec![json!("prod"), Value::Null], [2, 0, 2]);
        assert_eq!(d.toggled(), [0, 2]);
        assert_eq!(d.current(&f), Some(2));
        assert_eq!(d.back(&f, 5), Err(DraftError::NotAsked));
        assert_eq!(d.back(&f, 3), Ok("Notify"));
        assert_eq!(d.toggled(), [0, 2], "a later field: nothing to undo");
        assert_eq!(d.back(&f, 2), Ok("Tags"));
        assert!(d.toggled().is_empty());
        assert_eq!(d.back(&f, 0), Ok("Environment"));
        assert_eq!(d, FormDraft::new());
        assert!(d.content(&f).is_empty());
    }

    #[test]
    fn a_single_text_prompt_is_one_entry() {
        let f = Form::from_input(&Form::input("Why?", Form::prompt_schema(true))).expect("form");
        let mut d = FormDraft::new();
        assert_eq!(
            d.enter_text(&f, " "),
            Err(DraftError::Required("Answer".into()))
        );
        assert_eq!(
            d.enter_text(&f, "line one\nline two").as_deref(),
            Ok("line one\nline two")
        );
        assert_eq!(
            Value::Object(d.submit(&f).expect("done")),
            json!({"answer": "line one\nline two"})
        );
        assert_eq!(d.enter_text(&f, "more"), Err(DraftError::NotAsked));
    }
}
