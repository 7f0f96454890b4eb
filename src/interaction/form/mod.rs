//! Forms: questions that are not about a tool call. An agent asks a free-text question, a
//! yes/no, a choice or a few fields at once, and gets back what the person entered.
//!
//! A form is MCP elicitation's form mode (spec 2025-11-25): a `message` and a
//! `requestedSchema`, a flat object of properties each of which is a string (`minLength`,
//! `maxLength`, `pattern`, `format`: email, uri, date, date-time), a number or integer
//! (`minimum`, `maximum`), a boolean, a single choice (`enum`, `oneOf` of `{const, title}`, or
//! the legacy `enum` + `enumNames`) or a multiple choice (`type: "array"` with `items.enum` or
//! `items.anyOf`, `minItems`, `maxItems`), each with `title`, `description` and `default`,
//! and a `required` list. Anything outside that subset is refused with the property named.
//! imrelay adds one keyword: `multiline` on a string asks for a text area.
//!
//! A form interaction's input is exactly the elicitation request's parameters,
//! `{"message", "requestedSchema"}`, under the reserved tool name [`FORM_TOOL`]; its answer is
//! an [`ElicitResult`], which an MCP client can return unchanged.

//!
//! The module is split by concern: this file holds the types; `schema.rs` reads a
//! `requestedSchema` into fields (refusing what lies outside the subset); `check.rs` checks a
//! value against its field; `entry.rs` reads what a person typed and shows values and hints
//! in words.

mod check;
mod entry;
mod schema;

use std::fmt;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::ValidationError;
#[cfg(doc)]
use super::question::MAX_ANSWER_CHARS;
use super::question::json_type;

/// The tool name every form interaction carries. No agent tool can have it: tool names are
/// `[A-Za-z0-9_-]`, and this has a colon.
pub const FORM_TOOL: &str = "imrelay:form";

/// Most fields in one form: what a phone screen, a chat's one-question-at-a-time flow and a
/// Feishu card hold comfortably.
pub(crate) const MAX_FIELDS: usize = 20;
/// Most options in one choice field.
pub(crate) const MAX_OPTIONS: usize = 50;
/// Longest form message, in characters.
pub(crate) const MAX_MESSAGE_CHARS: usize = 4000;
/// Longest field name, in characters.
pub(crate) const MAX_NAME_CHARS: usize = 64;
/// Longest title or option label, in characters.
pub(crate) const MAX_TITLE_CHARS: usize = 200;
/// Longest field description, in characters.
pub(crate) const MAX_DESCRIPTION_CHARS: usize = 1000;
/// Longest `pattern`, in characters.
pub(crate) const MAX_PATTERN_CHARS: usize = 500;
/// The name of the one field of a free-text prompt.
pub(crate) const PROMPT_FIELD: &str = "answer";

/// The title of a free-text prompt's one field.
pub(crate) const PROMPT_TITLE: &str = "Answer";

/// What a person did with a form (MCP's `ElicitResult.action`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ElicitAction {
    /// Submitted it: `content` holds the values.
    Accept,
    /// Said no.
    Decline,
    /// Nobody answered (expiry), or the agent withdrew it.
    Cancel,
}

impl ElicitAction {
    /// The lowercase label used in JSON.
    pub fn as_str(self) -> &'static str {
        match self {
            ElicitAction::Accept => "accept",
            ElicitAction::Decline => "decline",
            ElicitAction::Cancel => "cancel",
        }
    }
}

/// The answer to a form, in MCP's `ElicitResult` shape: `{"action": "accept", "content":
/// {...}}`, `{"action": "decline"}` or `{"action": "cancel"}`. A decline or cancel also says
/// why in `message` (MCP results admit further members; the hook reply leaves it out).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ElicitResult {
    /// What the person did.
    pub action: ElicitAction,
    /// The values, with defaults filled in, present exactly when accepted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content: Option<Map<String, Value>>,
    /// Why it was declined or cancelled, in words for the model.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// A string's `format`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// An e-mail address.
    Email,
    /// An absolute URI.
    Uri,
    /// A calendar date, `2026-11-25`.
    Date,
    /// An RFC 3339 time, `2026-11-25T17:00:00Z`.
    DateTime,
}

impl Format {
    fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "email" => Format::Email,
            "uri" => Format::Uri,
            "date" => Format::Date,
            "date-time" => Format::DateTime,
            _ => return None,
        })
    }

    /// The keyword as written in a schema.
    pub fn as_str(self) -> &'static str {
        match self {
            Format::Email => "email",
            Format::Uri => "uri",
            Format::Date => "date",
            Format::DateTime => "date-time",
        }
    }

    /// What a person is asked to type, as an example.
    pub fn hint(self) -> &'static str {
        match self {
            Format::Email => "an e-mail address, like name@example.com",
            Format::Uri => "a full address, like https://example.com/page",
            Format::Date => "a date, like 2026-11-25",
            Format::DateTime => "a date and time, like 2026-11-25T17:00:00Z",
        }
    }

    fn check(self, s: &str) -> Result<(), String> {
        let ok = match self {
            Format::Email => {
                let (local, domain) = s.rsplit_once('@').unwrap_or(("", ""));
                !local.is_empty()
                    && !domain.is_empty()
                    && !domain.starts_with('.')
                    && !domain.ends_with('.')
                    && !s.chars().any(|c| c.is_whitespace() || c.is_control())
            }
            Format::Uri => url::Url::parse(s).is_ok(),
            Format::Date => s.len() == 10 && s.parse::<jiff::civil::Date>().is_ok(),
            Format::DateTime => s.parse::<jiff::Timestamp>().is_ok(),
        };
        if ok {
            Ok(())
        } else {
            Err(format!("must be {}", self.hint()))
        }
    }
}

/// One listed option of a choice.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Choice {
    /// The value the agent receives.
    pub value: String,
    /// What people see (the value itself when no title was given).
    pub label: String,
}

/// What a field holds, with its bounds.
#[derive(Clone, Debug)]
pub enum FieldType {
    /// Text.
    Text {
        /// Fewest characters.
        min_len: Option<usize>,
        /// Most characters (never more than [`MAX_ANSWER_CHARS`]).
        max_len: Option<usize>,
        /// A regular expression the text must match somewhere (JSON Schema's `pattern`).
        pattern: Option<Pattern>,
        /// A well-known format.
        format: Option<Format>,
        /// Shown as a text area rather than one line.
        multiline: bool,
    },
    /// A number; whole when `integer`.
    Number {
        /// `type: "integer"`.
        integer: bool,
        /// Smallest allowed.
        minimum: Option<f64>,
        /// Largest allowed.
        maximum: Option<f64>,
    },
    /// Yes or no.
    Boolean,
    /// Exactly one of the options.
    Choice {
        /// The options, in order.
        options: Vec<Choice>,
    },
    /// Any number of the options (within bounds).
    Multi {
        /// The options, in order.
        options: Vec<Choice>,
        /// Fewest to choose.
        min_items: Option<usize>,
        /// Most to choose.
        max_items: Option<usize>,
    },
}

/// A compiled `pattern`, kept with its source.
#[derive(Clone)]
pub struct Pattern {
    source: String,
    regex: regex::Regex,
}

impl Pattern {
    /// The pattern as the schema wrote it.
    pub fn as_str(&self) -> &str {
        &self.source
    }
}

impl fmt::Debug for Pattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.source, f)
    }
}

/// One field of a form.
#[derive(Clone, Debug)]
pub struct Field {
    /// The property name: the key in the answer's `content`.
    pub name: String,
    /// The label people see (the name when no title was given).
    pub title: Option<String>,
    /// A longer explanation.
    pub description: Option<String>,
    /// Whether an answer must include it.
    pub required: bool,
    /// The value used when an answer leaves it out.
    pub default: Option<Value>,
    /// What it holds.
    pub ty: FieldType,
}

impl Field {
    /// The label people see: the title, or the property name.
    pub fn label(&self) -> &str {
        self.title.as_deref().unwrap_or(&self.name)
    }

    /// The options of a choice or multiple choice; empty for other fields.
    pub fn options(&self) -> &[Choice] {
        match &self.ty {
            FieldType::Choice { options } | FieldType::Multi { options, .. } => options,
            _ => &[],
        }
    }
}

impl FieldType {
    /// What a value of this type is, in words ("a whole number").
    pub(super) fn expected(&self) -> &'static str {
        match self {
            FieldType::Text { .. } => "a string",
            FieldType::Number { integer: true, .. } => "a whole number",
            FieldType::Number { .. } => "a number",
            FieldType::Boolean => "a boolean",
            FieldType::Choice { .. } => "one of the option values (a string)",
            FieldType::Multi { .. } => "an array of option values",
        }
    }
}

/// A validated form: its message and fields in the order the schema lists them.
#[derive(Clone, Debug)]
pub struct Form {
    /// What the agent asks, shown above the fields.
    pub message: String,
    /// The fields.
    pub fields: Vec<Field>,
}

impl Form {
    /// The form a form interaction's input holds (`{"message", "requestedSchema"}`),
    /// validated. Errors name the property (`requestedSchema.properties.age.minimum`).
    pub fn from_input(input: &Map<String, Value>) -> Result<Form, ValidationError> {
        let message = match input.get("message") {
            Some(Value::String(s)) if !s.trim().is_empty() => s.clone(),
            Some(Value::String(_)) => {
                return Err(ValidationError::new("message", "must not be empty"));
            }
            Some(other) => {
                return Err(ValidationError::new(
                    "message",
                    format!("expected a string, got {}", json_type(other)),
                ));
            }
            None => return Err(ValidationError::new("message", "is required")),
        };
        if message.chars().count() > MAX_MESSAGE_CHARS {
            return Err(ValidationError::new(
                "message",
                format!("is longer than {MAX_MESSAGE_CHARS} characters"),
            ));
        }
        for key in input.keys() {
            if !matches!(key.as_str(), "message" | "requestedSchema" | "mode") {
                return Err(ValidationError::new(
                    key.as_str(),
                    "is not part of a form (expected `message` and `requestedSchema`)",
                ));
            }
        }
        match input.get("mode") {
            None => {}
            Some(Value::String(m)) if m == "form" => {}
            Some(other) => {
                return Err(ValidationError::new(
                    "mode",
                    format!("only form mode is supported (got {other})"),
                ));
            }
        }
        let schema = match input.get("requestedSchema") {
            Some(Value::Object(s)) => s,
            Some(other) => {
                return Err(ValidationError::new(
                    "requestedSchema",
                    format!("expected an object, got {}", json_type(other)),
                ));
            }
            None => return Err(ValidationError::new("requestedSchema", "is required")),
        };
        let fields = schema::parse_schema(schema, "requestedSchema")?;
        Ok(Form { message, fields })
    }

    /// The input of a form interaction asking `message` with `schema` (an elicitation's
    /// `requestedSchema`); check it with [`Form::from_input`].
    pub fn input(message: &str, schema: Value) -> Map<String, Value> {
        let mut m = Map::new();
        m.insert("message".into(), Value::String(message.to_string()));
        m.insert("requestedSchema".into(), schema);
        m
    }

    /// The schema of a free-text prompt: one required string, `answer`, shown as a text area
    /// when `multiline`.
    pub fn prompt_schema(multiline: bool) -> Value {
        let mut field = Map::new();
        field.insert("type".into(), "string".into());
        field.insert("title".into(), PROMPT_TITLE.into());
        field.insert("minLength".into(), 1.into());
        if multiline {
            field.insert("multiline".into(), true.into());
        }
        let mut props = Map::new();
        props.insert(PROMPT_FIELD.into(), Value::Object(field));
        let mut schema = Map::new();
        schema.insert("type".into(), "object".into());
        schema.insert("properties".into(), Value::Object(props));
        schema.insert("required".into(), Value::Array(vec![PROMPT_FIELD.into()]));
        Value::Object(schema)
    }

    /// The field named `name`.
    pub fn field(&self, name: &str) -> Option<&Field> {
        self.fields.iter().find(|f| f.name == name)
    }

    /// Checks submitted `content` against the fields and returns it complete: in field order,
    /// every missing optional field with a default given its default. Errors name the field
    /// as `content.<name>`.
    pub fn accept(
        &self,
        content: &Map<String, Value>,
    ) -> Result<Map<String, Value>, ValidationError> {
        if let Some(unknown) = content.keys().find(|k| self.field(k).is_none()) {
            return Err(ValidationError::new(
                format!("content.{unknown}"),
                "is not a field of this form",
            ));
        }
        let mut out = Map::new();
        for f in &self.fields {
            let field = || format!("content.{}", f.name);
            match content.get(&f.name) {
                // A null is how some clients leave an optional field empty.
                Some(Value::Null) | None => {
                    if let Some(d) = &f.default {
                        out.insert(f.name.clone(), d.clone());
                    } else if f.required {
                        return Err(ValidationError::new(field(), "is required"));
                    }
                }
                Some(v) => {
                    let v = f.check(v).map_err(|m| ValidationError::new(field(), m))?;
                    out.insert(f.name.clone(), v);
                }
            }
        }
        Ok(out)
    }

    /// Accepted content as lines people read: "Name: value", by label, in field order.
    pub fn summary(&self, content: &Map<String, Value>) -> Vec<(String, String)> {
        self.fields
            .iter()
            .filter_map(|f| {
                content
                    .get(&f.name)
                    .map(|v| (f.label().to_string(), f.show(v)))
            })
            .collect()
    }

    /// Whether this is a free-text prompt: one text field (answered by one typed reply).
    pub fn is_single_text(&self) -> bool {
        self.fields.len() == 1 && matches!(self.fields[0].ty, FieldType::Text { .. })
    }
}

#[cfg(test)]
mod tests;
