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

use std::collections::HashSet;
use std::fmt;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Number, Value};

use super::ValidationError;
use super::question::{MAX_ANSWER_CHARS, json_type};

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

    /// Checks a value for this field; the error says what is wrong in words for the person
    /// who typed it (the caller adds the field's name).
    pub fn check(&self, v: &Value) -> Result<Value, String> {
        match (&self.ty, v) {
            (
                FieldType::Text {
                    min_len,
                    max_len,
                    pattern,
                    format,
                    ..
                },
                Value::String(s),
            ) => {
                let n = s.chars().count();
                let most = max_len.unwrap_or(MAX_ANSWER_CHARS).min(MAX_ANSWER_CHARS);
                if n > most {
                    return Err(format!("must be at most {most} characters (got {n})"));
                }
                if let Some(min) = min_len
                    && n < *min
                {
                    return Err(if *min == 1 {
                        "must not be empty".to_string()
                    } else {
                        format!("must be at least {min} characters (got {n})")
                    });
                }
                if let Some(f) = format {
                    f.check(s)?;
                }
                if let Some(p) = pattern
                    && !p.regex.is_match(s)
                {
                    return Err(format!("must match the pattern {}", p.source));
                }
                Ok(v.clone())
            }
            (
                FieldType::Number {
                    integer,
                    minimum,
                    maximum,
                },
                Value::Number(n),
            ) => {
                let x = n.as_f64().unwrap_or(f64::NAN);
                if *integer && !(n.is_i64() || n.is_u64() || (x.is_finite() && x.fract() == 0.0)) {
                    return Err("must be a whole number".to_string());
                }
                if let Some(min) = minimum
                    && x < *min
                {
                    return Err(format!("must be at least {}", show_number(*min)));
                }
                if let Some(max) = maximum
                    && x > *max
                {
                    return Err(format!("must be at most {}", show_number(*max)));
                }
                Ok(v.clone())
            }
            (FieldType::Boolean, Value::Bool(_)) => Ok(v.clone()),
            (FieldType::Choice { options }, Value::String(s)) => {
                if options.iter().any(|o| &o.value == s) {
                    Ok(v.clone())
                } else {
                    Err(format!("must be one of {}", list_values(options)))
                }
            }
            (
                FieldType::Multi {
                    options,
                    min_items,
                    max_items,
                },
                Value::Array(items),
            ) => {
                // Bounded before the items are looked at: no more than the options.
                if let Some(max) = max_items
                    && items.len() > *max
                {
                    return Err(format!("choose at most {max}"));
                }
                if items.len() > options.len() {
                    return Err(format!("lists more than the {} options", options.len()));
                }
                let mut seen: HashSet<&str> = HashSet::with_capacity(items.len());
                for item in items {
                    let Value::String(s) = item else {
                        return Err(format!(
                            "must list option values as strings, found {}",
                            json_type(item)
                        ));
                    };
                    if !options.iter().any(|o| &o.value == s) {
                        return Err(format!(
                            "{s:?} is not an option: choose from {}",
                            list_values(options)
                        ));
                    }
                    if !seen.insert(s.as_str()) {
                        return Err(format!("lists {s:?} twice"));
                    }
                }
                if let Some(min) = min_items
                    && items.len() < *min
                {
                    return Err(format!("choose at least {min}"));
                }
                Ok(v.clone())
            }
            (ty, other) => Err(format!(
                "expected {}, got {}",
                ty.expected(),
                json_type(other)
            )),
        }
    }

    /// Reads what a person typed for this field (a chat reply, a terminal line, a card's text
    /// input) into its value: numbers are parsed, yes/no read as booleans, a choice by its
    /// value or label (any case) or its 1-based number, a multiple choice as a comma-separated
    /// list of those. The result is checked as [`Field::check`] does.
    pub fn parse_text(&self, text: &str) -> Result<Value, String> {
        let t = text.trim();
        let v = match &self.ty {
            FieldType::Text { .. } => Value::String(text.to_string()),
            FieldType::Number { .. } => {
                let n: f64 = t
                    .parse()
                    .map_err(|_| format!("expected {}, got {t:?}", self.ty.expected()))?;
                number_value(n).ok_or_else(|| format!("{t:?} is not a finite number"))?
            }
            FieldType::Boolean => match t.to_ascii_lowercase().as_str() {
                "yes" | "y" | "true" | "on" | "1" | "是" => Value::Bool(true),
                "no" | "n" | "false" | "off" | "0" | "否" => Value::Bool(false),
                _ => return Err(format!("answer yes or no, not {t:?}")),
            },
            FieldType::Choice { options } => Value::String(pick(options, t)?),
            FieldType::Multi { options, .. } => {
                let mut chosen = Vec::new();
                for part in t.split(',').map(str::trim).filter(|p| !p.is_empty()) {
                    chosen.push(Value::String(pick(options, part)?));
                }
                Value::Array(chosen)
            }
        };
        self.check(&v)
    }

    /// A value of this field as people read it: a choice by its label, a boolean as Yes/No.
    pub fn show(&self, v: &Value) -> String {
        let label = |s: &str| {
            self.options()
                .iter()
                .find(|o| o.value == s)
                .map_or_else(|| s.to_string(), |o| o.label.clone())
        };
        match v {
            Value::String(s) => label(s),
            Value::Bool(true) => "Yes".to_string(),
            Value::Bool(false) => "No".to_string(),
            Value::Array(items) => {
                if items.is_empty() {
                    "(none)".to_string()
                } else {
                    items
                        .iter()
                        .map(|i| i.as_str().map_or_else(|| i.to_string(), label))
                        .collect::<Vec<_>>()
                        .join(", ")
                }
            }
            Value::Null => "(none)".to_string(),
            other => other.to_string(),
        }
    }

    /// A one-line statement of what the field accepts, for a prompt: "a whole number from 1
    /// to 10", "a date, like 2026-11-25".
    pub fn hint(&self) -> String {
        match &self.ty {
            FieldType::Text {
                min_len,
                max_len,
                format,
                pattern,
                ..
            } => {
                let mut parts = vec![format.map_or("text", |f| f.hint()).to_string()];
                match (min_len, max_len) {
                    (Some(a), Some(b)) => parts.push(format!("{a} to {b} characters")),
                    (Some(a), None) if *a > 1 => parts.push(format!("at least {a} characters")),
                    (None, Some(b)) => parts.push(format!("at most {b} characters")),
                    _ => {}
                }
                if let Some(p) = pattern {
                    parts.push(format!("matching {}", p.source));
                }
                parts.join(", ")
            }
            FieldType::Number {
                integer,
                minimum,
                maximum,
            } => {
                let what = if *integer {
                    "a whole number"
                } else {
                    "a number"
                };
                match (minimum, maximum) {
                    (Some(a), Some(b)) => {
                        format!("{what} from {} to {}", show_number(*a), show_number(*b))
                    }
                    (Some(a), None) => format!("{what}, at least {}", show_number(*a)),
                    (None, Some(b)) => format!("{what}, at most {}", show_number(*b)),
                    (None, None) => what.to_string(),
                }
            }
            FieldType::Boolean => "yes or no".to_string(),
            FieldType::Choice { .. } => "one of the options".to_string(),
            FieldType::Multi {
                min_items,
                max_items,
                ..
            } => match (min_items, max_items) {
                (Some(a), Some(b)) if a == b => format!("exactly {a} of the options"),
                (Some(a), Some(b)) => format!("{a} to {b} of the options"),
                (Some(a), None) => format!("at least {a} of the options"),
                (None, Some(b)) => format!("at most {b} of the options"),
                (None, None) => "any of the options".to_string(),
            },
        }
    }
}

impl FieldType {
    fn expected(&self) -> &'static str {
        match self {
            FieldType::Text { .. } => "a string",
            FieldType::Number { integer: true, .. } => "a whole number",
            FieldType::Number { .. } => "a number",
            FieldType::Boolean => "a boolean",
            FieldType::Choice { .. } => "one of the option values (a string)",
            FieldType::Multi { .. } => "an array of option values",
        }
    }

    /// Whether this field is answered by choosing (buttons, a select) rather than typing.
    pub fn is_choice(&self) -> bool {
        matches!(
            self,
            FieldType::Boolean | FieldType::Choice { .. } | FieldType::Multi { .. }
        )
    }
}

fn pick(options: &[Choice], t: &str) -> Result<String, String> {
    if let Some(o) = options.iter().find(|o| o.value == t) {
        return Ok(o.value.clone());
    }
    if let Some(o) = options
        .iter()
        .find(|o| o.label.eq_ignore_ascii_case(t) || o.value.eq_ignore_ascii_case(t))
    {
        return Ok(o.value.clone());
    }
    if let Ok(n) = t.parse::<usize>()
        && let Some(o) = n.checked_sub(1).and_then(|i| options.get(i))
    {
        return Ok(o.value.clone());
    }
    Err(format!(
        "{t:?} is not an option: choose from {}",
        list_values(options)
    ))
}

fn list_values(options: &[Choice]) -> String {
    let mut s = String::new();
    for (n, o) in options.iter().enumerate() {
        if n > 0 {
            s.push_str(", ");
        }
        if n == 8 {
            s.push('…');
            break;
        }
        s.push_str(&format!("{:?}", o.value));
    }
    s
}

fn show_number(x: f64) -> String {
    if x.fract() == 0.0 && x.abs() < 1e15 {
        format!("{}", x as i64)
    } else {
        x.to_string()
    }
}

fn number_value(x: f64) -> Option<Value> {
    if x.fract() == 0.0 && x.abs() < 9e15 {
        Some(Value::Number(Number::from(x as i64)))
    } else {
        Number::from_f64(x).map(Value::Number)
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
        let fields = parse_schema(schema, "requestedSchema")?;
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

fn text_member(
    prop: &Map<String, Value>,
    key: &str,
    at: &str,
    max: usize,
) -> Result<Option<String>, ValidationError> {
    match prop.get(key) {
        None => Ok(None),
        Some(Value::String(s)) => {
            if s.chars().count() > max {
                Err(ValidationError::new(
                    format!("{at}.{key}"),
                    format!("is longer than {max} characters"),
                ))
            } else if s.trim().is_empty() {
                Ok(None)
            } else {
                Ok(Some(s.clone()))
            }
        }
        Some(other) => Err(ValidationError::new(
            format!("{at}.{key}"),
            format!("expected a string, got {}", json_type(other)),
        )),
    }
}

fn count_member(
    prop: &Map<String, Value>,
    key: &str,
    at: &str,
) -> Result<Option<usize>, ValidationError> {
    match prop.get(key) {
        None => Ok(None),
        Some(v) => v
            .as_u64()
            .and_then(|n| usize::try_from(n).ok())
            .map(Some)
            .ok_or_else(|| {
                ValidationError::new(
                    format!("{at}.{key}"),
                    format!("expected a non-negative whole number, got {v}"),
                )
            }),
    }
}

fn number_member(
    prop: &Map<String, Value>,
    key: &str,
    at: &str,
) -> Result<Option<f64>, ValidationError> {
    match prop.get(key) {
        None => Ok(None),
        Some(Value::Number(n)) => Ok(n.as_f64()),
        Some(other) => Err(ValidationError::new(
            format!("{at}.{key}"),
            format!("expected a number, got {}", json_type(other)),
        )),
    }
}

fn refuse_unknown(
    prop: &Map<String, Value>,
    at: &str,
    allowed: &[&str],
    what: &str,
) -> Result<(), ValidationError> {
    const ANNOTATIONS: [&str; 4] = ["type", "title", "description", "default"];
    match prop
        .keys()
        .find(|k| !ANNOTATIONS.contains(&k.as_str()) && !allowed.contains(&k.as_str()))
    {
        Some(k) => Err(ValidationError::new(
            format!("{at}.{k}"),
            format!(
                "is not supported for {what} (a form field may use {})",
                ANNOTATIONS
                    .iter()
                    .chain(allowed)
                    .copied()
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        )),
        None => Ok(()),
    }
}

/// Options from `enum` (+ legacy `enumNames`) or `oneOf`/`anyOf` of `{const, title}`: at
/// most [`MAX_OPTIONS`], each of at most [`MAX_TITLE_CHARS`] characters.
fn options<'a>(
    prop: &'a Map<String, Value>,
    at: &str,
    list_key: &str,
) -> Result<Vec<Choice>, ValidationError> {
    // Counted before anything else, and duplicates found with a set: the work stays in
    // proportion to the options, which are few (a list of 100,000 was once compared pairwise).
    let too_many = |n: usize| {
        ValidationError::new(
            at,
            format!("a choice needs 1 to {MAX_OPTIONS} options (got {n})"),
        )
    };
    let mut out: Vec<Choice> = Vec::new();
    let mut seen: HashSet<&str> = HashSet::new();
    let mut push = |out: &mut Vec<Choice>, value: &'a Value, label: Option<&Value>, at: String| {
        let Value::String(value) = value else {
            return Err(ValidationError::new(
                at,
                format!("expected a string option, got {}", json_type(value)),
            ));
        };
        if value.is_empty() || value.chars().count() > MAX_TITLE_CHARS {
            return Err(ValidationError::new(
                at,
                format!("an option must be 1 to {MAX_TITLE_CHARS} characters"),
            ));
        }
        if !seen.insert(value.as_str()) {
            return Err(ValidationError::new(
                at,
                format!("{value:?} is listed twice"),
            ));
        }
        let label = match label {
            None => value.clone(),
            Some(Value::String(l)) if !l.trim().is_empty() => {
                if l.chars().count() > MAX_TITLE_CHARS {
                    return Err(ValidationError::new(
                        at,
                        format!("a title is longer than {MAX_TITLE_CHARS} characters"),
                    ));
                }
                l.clone()
            }
            Some(other) => {
                return Err(ValidationError::new(
                    at,
                    format!("expected a non-empty string title, got {other}"),
                ));
            }
        };
        out.push(Choice {
            value: value.clone(),
            label,
        });
        Ok(())
    };
    if let Some(list) = prop.get("enum") {
        let Value::Array(list) = list else {
            return Err(ValidationError::new(
                format!("{at}.enum"),
                format!("expected an array, got {}", json_type(list)),
            ));
        };
        if list.len() > MAX_OPTIONS {
            return Err(too_many(list.len()));
        }
        let names = match prop.get("enumNames") {
            None => None,
            Some(Value::Array(n)) if n.len() == list.len() => Some(n),
            Some(_) => {
                return Err(ValidationError::new(
                    format!("{at}.enumNames"),
                    "must be an array as long as `enum`",
                ));
            }
        };
        for (n, v) in list.iter().enumerate() {
            push(
                &mut out,
                v,
                names.and_then(|names| names.get(n)),
                format!("{at}.enum[{n}]"),
            )?;
        }
    } else if let Some(list) = prop.get(list_key) {
        let Value::Array(list) = list else {
            return Err(ValidationError::new(
                format!("{at}.{list_key}"),
                format!("expected an array, got {}", json_type(list)),
            ));
        };
        if list.len() > MAX_OPTIONS {
            return Err(too_many(list.len()));
        }
        for (n, item) in list.iter().enumerate() {
            let here = format!("{at}.{list_key}[{n}]");
            let Some(Value::String(_)) = item.get("const") else {
                return Err(ValidationError::new(
                    here,
                    "expected an object with a string `const` and a `title`",
                ));
            };
            if let Value::Object(o) = item
                && let Some(k) = o.keys().find(|k| !matches!(k.as_str(), "const" | "title"))
            {
                return Err(ValidationError::new(
                    format!("{here}.{k}"),
                    "is not supported (an option has `const` and `title`)",
                ));
            }
            push(&mut out, &item["const"], item.get("title"), here)?;
        }
    } else {
        return Err(ValidationError::new(
            at,
            format!("a choice needs `enum` or `{list_key}`"),
        ));
    }
    if out.is_empty() {
        return Err(too_many(0));
    }
    Ok(out)
}

fn parse_field(
    name: &str,
    prop: &Value,
    required: bool,
    at: &str,
) -> Result<Field, ValidationError> {
    let Value::Object(prop) = prop else {
        return Err(ValidationError::new(
            at,
            format!("expected an object, got {}", json_type(prop)),
        ));
    };
    let ty_name = match prop.get("type") {
        Some(Value::String(t)) => t.as_str(),
        Some(other) => {
            return Err(ValidationError::new(
                format!("{at}.type"),
                format!("expected a type name, got {other}"),
            ));
        }
        None => {
            return Err(ValidationError::new(
                format!("{at}.type"),
                "is required (string, number, integer, boolean or array)",
            ));
        }
    };
    let ty = match ty_name {
        "string" if prop.contains_key("enum") || prop.contains_key("oneOf") => {
            refuse_unknown(prop, at, &["enum", "enumNames", "oneOf"], "a choice")?;
            FieldType::Choice {
                options: options(prop, at, "oneOf")?,
            }
        }
        "string" => {
            refuse_unknown(
                prop,
                at,
                &["minLength", "maxLength", "pattern", "format", "multiline"],
                "a string",
            )?;
            let min_len = count_member(prop, "minLength", at)?;
            let max_len = count_member(prop, "maxLength", at)?;
            if let Some(max) = max_len
                && max > MAX_ANSWER_CHARS
            {
                return Err(ValidationError::new(
                    format!("{at}.maxLength"),
                    format!("may be at most {MAX_ANSWER_CHARS}"),
                ));
            }
            if let (Some(a), Some(b)) = (min_len, max_len)
                && a > b
            {
                return Err(ValidationError::new(
                    format!("{at}.minLength"),
                    "is greater than maxLength",
                ));
            }
            let format = match text_member(prop, "format", at, 32)? {
                None => None,
                Some(f) => Some(Format::parse(&f).ok_or_else(|| {
                    ValidationError::new(
                        format!("{at}.format"),
                        format!("{f:?} is not supported (email, uri, date or date-time)"),
                    )
                })?),
            };
            let pattern = match text_member(prop, "pattern", at, MAX_PATTERN_CHARS)? {
                None => None,
                Some(source) => {
                    let regex = regex::RegexBuilder::new(&source)
                        .size_limit(1 << 20)
                        .build()
                        .map_err(|e| {
                            let first = e.to_string();
                            let first = first.lines().last().unwrap_or("").trim().to_string();
                            ValidationError::new(
                                format!("{at}.pattern"),
                                format!("is not a valid regular expression: {first}"),
                            )
                        })?;
                    Some(Pattern { source, regex })
                }
            };
            let multiline = match prop.get("multiline") {
                None => false,
                Some(Value::Bool(b)) => *b,
                Some(other) => {
                    return Err(ValidationError::new(
                        format!("{at}.multiline"),
                        format!("expected a boolean, got {}", json_type(other)),
                    ));
                }
            };
            FieldType::Text {
                min_len,
                max_len,
                pattern,
                format,
                multiline,
            }
        }
        "number" | "integer" => {
            refuse_unknown(prop, at, &["minimum", "maximum"], "a number")?;
            let minimum = number_member(prop, "minimum", at)?;
            let maximum = number_member(prop, "maximum", at)?;
            if let (Some(a), Some(b)) = (minimum, maximum)
                && a > b
            {
                return Err(ValidationError::new(
                    format!("{at}.minimum"),
                    "is greater than maximum",
                ));
            }
            if ty_name == "integer"
                && let (Some(a), Some(b)) = (minimum, maximum)
                && a.ceil() > b.floor()
            {
                return Err(ValidationError::new(
                    format!("{at}.minimum"),
                    format!(
                        "no whole number lies from {} to {}: nobody could answer",
                        show_number(a),
                        show_number(b)
                    ),
                ));
            }
            FieldType::Number {
                integer: ty_name == "integer",
                minimum,
                maximum,
            }
        }
        "boolean" => {
            refuse_unknown(prop, at, &[], "a boolean")?;
            FieldType::Boolean
        }
        "array" => {
            refuse_unknown(
                prop,
                at,
                &["items", "minItems", "maxItems"],
                "a multiple choice",
            )?;
            let items_at = format!("{at}.items");
            let items = match prop.get("items") {
                Some(Value::Object(items)) => items,
                _ => {
                    return Err(ValidationError::new(
                        items_at,
                        "a multiple choice needs `items` with `enum` or `anyOf`",
                    ));
                }
            };
            if let Some(k) = items
                .keys()
                .find(|k| !matches!(k.as_str(), "type" | "enum" | "enumNames" | "anyOf"))
            {
                return Err(ValidationError::new(
                    format!("{items_at}.{k}"),
                    "is not supported (items take `type`, `enum` or `anyOf`)",
                ));
            }
            if let Some(t) = items.get("type")
                && t != "string"
            {
                return Err(ValidationError::new(
                    format!("{items_at}.type"),
                    "only string options are supported",
                ));
            }
            let options = options(items, &items_at, "anyOf")?;
            let min_items = count_member(prop, "minItems", at)?;
            let max_items = count_member(prop, "maxItems", at)?;
            if let (Some(a), Some(b)) = (min_items, max_items)
                && a > b
            {
                return Err(ValidationError::new(
                    format!("{at}.minItems"),
                    "is greater than maxItems",
                ));
            }
            if min_items.is_some_and(|a| a > options.len()) {
                return Err(ValidationError::new(
                    format!("{at}.minItems"),
                    "is more than the number of options",
                ));
            }
            FieldType::Multi {
                options,
                min_items,
                max_items,
            }
        }
        "object" | "null" => {
            return Err(ValidationError::new(
                format!("{at}.type"),
                format!(
                    "{ty_name:?} is not supported: a form's fields are flat (string, number, integer, boolean, or array of options)"
                ),
            ));
        }
        other => {
            return Err(ValidationError::new(
                format!("{at}.type"),
                format!("{other:?} is not supported (string, number, integer, boolean or array)"),
            ));
        }
    };
    let mut field = Field {
        name: name.to_string(),
        title: text_member(prop, "title", at, MAX_TITLE_CHARS)?,
        description: text_member(prop, "description", at, MAX_DESCRIPTION_CHARS)?,
        required,
        default: None,
        ty,
    };
    if let Some(d) = prop.get("default") {
        let d = field
            .check(d)
            .map_err(|m| ValidationError::new(format!("{at}.default"), m))?;
        field.default = Some(d);
    }
    Ok(field)
}

fn parse_schema(schema: &Map<String, Value>, at: &str) -> Result<Vec<Field>, ValidationError> {
    if let Some(k) = schema.keys().find(|k| {
        !matches!(
            k.as_str(),
            "type" | "properties" | "required" | "$schema" | "title" | "description"
        )
    }) {
        return Err(ValidationError::new(
            format!("{at}.{k}"),
            "is not supported (a form schema has `type`, `properties` and `required`)",
        ));
    }
    match schema.get("type") {
        Some(Value::String(t)) if t == "object" => {}
        _ => {
            return Err(ValidationError::new(
                format!("{at}.type"),
                "must be \"object\"",
            ));
        }
    }
    let props = match schema.get("properties") {
        Some(Value::Object(p)) => p,
        Some(other) => {
            return Err(ValidationError::new(
                format!("{at}.properties"),
                format!("expected an object, got {}", json_type(other)),
            ));
        }
        None => {
            return Err(ValidationError::new(
                format!("{at}.properties"),
                "is required",
            ));
        }
    };
    if props.is_empty() || props.len() > MAX_FIELDS {
        return Err(ValidationError::new(
            format!("{at}.properties"),
            format!(
                "a form needs 1 to {MAX_FIELDS} fields (got {})",
                props.len()
            ),
        ));
    }
    let required: Vec<&str> = match schema.get("required") {
        None => Vec::new(),
        Some(Value::Array(r)) => {
            if r.len() > props.len() {
                return Err(ValidationError::new(
                    format!("{at}.required"),
                    format!(
                        "lists {} names for {} properties: each may be listed once",
                        r.len(),
                        props.len()
                    ),
                ));
            }
            let mut names = Vec::with_capacity(r.len());
            for (n, v) in r.iter().enumerate() {
                match v.as_str() {
                    Some(name) if props.contains_key(name) => names.push(name),
                    Some(name) => {
                        return Err(ValidationError::new(
                            format!("{at}.required[{n}]"),
                            format!("{name:?} is not one of the properties"),
                        ));
                    }
                    None => {
                        return Err(ValidationError::new(
                            format!("{at}.required[{n}]"),
                            "expected a property name",
                        ));
                    }
                }
            }
            names
        }
        Some(other) => {
            return Err(ValidationError::new(
                format!("{at}.required"),
                format!("expected an array, got {}", json_type(other)),
            ));
        }
    };
    let mut fields = Vec::with_capacity(props.len());
    for (name, prop) in props {
        let here = format!("{at}.properties.{name}");
        if name.is_empty()
            || name.chars().count() > MAX_NAME_CHARS
            || name.chars().any(char::is_control)
        {
            return Err(ValidationError::new(
                here,
                format!("a field name must be 1 to {MAX_NAME_CHARS} printable characters"),
            ));
        }
        fields.push(parse_field(
            name,
            prop,
            required.contains(&name.as_str()),
            &here,
        )?);
    }
    Ok(fields)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn form(schema: Value) -> Result<Form, ValidationError> {
        Form::from_input(&Form::input("Tell me", schema))
    }

    fn err(schema: Value) -> ValidationError {
        form(schema).expect_err("refused")
    }

    fn obj(v: Value) -> Map<String, Value> {
        v.as_object().cloned().unwrap()
    }

    #[test]
    fn every_supported_type_parses_in_schema_order() {
        let f = form(json!({
            "type": "object",
            "properties": {
                "name": {"type": "string", "title": "Your name", "minLength": 1, "maxLength": 50},
                "email": {"type": "string", "format": "email"},
                "age": {"type": "integer", "minimum": 0, "maximum": 150},
                "ratio": {"type": "number"},
                "ok": {"type": "boolean", "default": true},
                "size": {"type": "string", "enum": ["s", "m"], "enumNames": ["Small", "Medium"]},
                "colour": {"type": "string", "oneOf": [{"const": "r", "title": "Red"}, {"const": "g", "title": "Green"}]},
                "tags": {"type": "array", "items": {"type": "string", "enum": ["a", "b", "c"]}, "minItems": 1, "maxItems": 2},
                "pets": {"type": "array", "items": {"anyOf": [{"const": "cat", "title": "Cat"}]}},
                "notes": {"type": "string", "multiline": true, "description": "Anything else"}
            },
            "required": ["name", "age"]
        }))
        .unwrap();
        let names: Vec<_> = f.fields.iter().map(|f| f.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "name", "email", "age", "ratio", "ok", "size", "colour", "tags", "pets", "notes"
            ]
        );
        assert!(f.fields[0].required && !f.fields[1].required && f.fields[2].required);
        assert_eq!(f.fields[0].label(), "Your name");
        assert_eq!(f.fields[1].label(), "email");
        assert_eq!(f.field("size").unwrap().options()[1].label, "Medium");
        assert_eq!(f.field("colour").unwrap().options()[0].value, "r");
        assert!(matches!(
            f.field("notes").unwrap().ty,
            FieldType::Text {
                multiline: true,
                ..
            }
        ));
        assert!(matches!(
            f.field("age").unwrap().ty,
            FieldType::Number { integer: true, .. }
        ));
    }

    #[test]
    fn anything_outside_the_subset_is_refused_naming_the_property() {
        let cases = [
            (
                json!({"type": "object", "properties": {"a": {"type": "object", "properties": {}}}}),
                "requestedSchema.properties.a.type",
            ),
            (
                json!({"type": "object", "properties": {"a": {"type": "string", "$ref": "#/x"}}}),
                "requestedSchema.properties.a.$ref",
            ),
            (
                json!({"type": "object", "properties": {"a": {"type": "string", "format": "ipv4"}}}),
                "requestedSchema.properties.a.format",
            ),
            (
                json!({"type": "object", "properties": {"a": {"type": "string", "pattern": "(unclosed"}}}),
                "requestedSchema.properties.a.pattern",
            ),
            (
                json!({"type": "object", "properties": {"a": {"type": "integer", "minimum": 5, "maximum": 1}}}),
                "requestedSchema.properties.a.minimum",
            ),
            (
                json!({"type": "object", "properties": {"a": {"type": "array", "items": {"type": "number"}}}}),
                "requestedSchema.properties.a.items.type",
            ),
            (
                json!({"type": "object", "properties": {"a": {"type": "string", "enum": ["x", "x"]}}}),
                "requestedSchema.properties.a.enum[1]",
            ),
            (
                json!({"type": "object", "properties": {"a": {"type": "boolean", "default": "yes"}}}),
                "requestedSchema.properties.a.default",
            ),
            (
                json!({"type": "object", "properties": {"a": {"type": "string"}}, "required": ["b"]}),
                "requestedSchema.required[0]",
            ),
            (
                json!({"type": "object", "properties": {}}),
                "requestedSchema.properties",
            ),
            (
                json!({"type": "array", "properties": {"a": {"type": "string"}}}),
                "requestedSchema.type",
            ),
            (
                json!({"type": "object", "properties": {"a": {"type": "string"}}, "additionalProperties": false}),
                "requestedSchema.additionalProperties",
            ),
            (
                json!({"type": "object", "properties": {"a": {"type": "string", "maxLength": 100000}}}),
                "requestedSchema.properties.a.maxLength",
            ),
            (
                json!({"type": "object", "properties": {"a": {}}}),
                "requestedSchema.properties.a.type",
            ),
        ];
        for (schema, field) in cases {
            assert_eq!(err(schema.clone()).field, field, "{schema}");
        }
        let many: Map<String, Value> = (0..=MAX_FIELDS)
            .map(|n| (format!("f{n}"), json!({"type": "string"})))
            .collect();
        let e = err(json!({"type": "object", "properties": many}));
        assert!(e.message.contains("1 to 20 fields"), "{e}");
        let e = Form::from_input(&obj(json!({"requestedSchema": Form::prompt_schema(false)})))
            .unwrap_err();
        assert_eq!(e.field, "message");
        let e = Form::from_input(&obj(
            json!({"message": "m", "mode": "url", "requestedSchema": Form::prompt_schema(false)}),
        ))
        .unwrap_err();
        assert_eq!(e.field, "mode");
    }

    #[test]
    fn content_is_checked_field_by_field_and_completed_with_defaults() {
        let f = form(json!({
            "type": "object",
            "properties": {
                "name": {"type": "string", "minLength": 2, "pattern": "^[a-z]+$"},
                "age": {"type": "integer", "minimum": 18},
                "when": {"type": "string", "format": "date"},
                "site": {"type": "string", "format": "uri"},
                "mail": {"type": "string", "format": "email"},
                "at": {"type": "string", "format": "date-time"},
                "ok": {"type": "boolean", "default": false},
                "size": {"type": "string", "enum": ["s", "m"]},
                "tags": {"type": "array", "items": {"enum": ["a", "b", "c"]}, "maxItems": 2}
            },
            "required": ["name", "age"]
        }))
        .unwrap();
        let accepted = f.accept(&obj(json!({"age": 30, "name": "ann"}))).unwrap();
        assert_eq!(
            Value::Object(accepted.clone()),
            json!({"name": "ann", "age": 30, "ok": false})
        );
        assert_eq!(
            accepted.keys().collect::<Vec<_>>(),
            ["name", "age", "ok"],
            "in field order"
        );
        let refused = |content: Value| f.accept(&obj(content)).unwrap_err();
        let e = refused(json!({"age": 30}));
        assert_eq!(
            (e.field.as_str(), e.message.as_str()),
            ("content.name", "is required")
        );
        assert_eq!(
            refused(json!({"name": "a", "age": 30})).field,
            "content.name"
        );
        let e = refused(json!({"name": "Ann", "age": 30}));
        assert!(e.message.contains("pattern"), "{e}");
        let e = refused(json!({"name": "ann", "age": 17}));
        assert_eq!(e.message, "must be at least 18");
        assert_eq!(
            refused(json!({"name": "ann", "age": 18.5})).message,
            "must be a whole number"
        );
        assert!(f.accept(&obj(json!({"name": "ann", "age": 18.0}))).is_ok());
        assert_eq!(
            refused(json!({"name": "ann", "age": "30"})).message,
            "expected a whole number, got a string"
        );
        for (field, bad) in [
            ("when", json!("2026-13-01")),
            ("when", json!("25/11/2026")),
            ("site", json!("not a url")),
            ("mail", json!("nobody")),
            ("at", json!("2026-11-25")),
            ("size", json!("xl")),
            ("tags", json!(["a", "z"])),
            ("tags", json!(["a", "a"])),
            ("tags", json!(["a", "b", "c"])),
            ("ok", json!("true")),
        ] {
            let mut c = obj(json!({"name": "ann", "age": 30}));
            c.insert(field.into(), bad.clone());
            let e = f.accept(&c).unwrap_err();
            assert_eq!(e.field, format!("content.{field}"), "{bad}");
        }
        let good = f
            .accept(&obj(json!({"name": "ann", "age": 30, "when": "2026-11-25",
                "site": "https://example.com/x", "mail": "a@b.c", "at": "2026-11-25T17:00:00Z",
                "size": "m", "tags": ["c", "a"], "ok": null})))
            .unwrap();
        assert_eq!(good["ok"], json!(false), "null takes the default");
        assert_eq!(good["tags"], json!(["c", "a"]));
        let e = refused(json!({"name": "ann", "age": 30, "extra": 1}));
        assert_eq!(e.field, "content.extra");
    }

    #[test]
    fn typed_text_is_read_into_the_field_type() {
        let f = form(json!({"type": "object", "properties": {
            "n": {"type": "integer", "minimum": 1, "maximum": 10},
            "x": {"type": "number"},
            "b": {"type": "boolean"},
            "c": {"type": "string", "oneOf": [{"const": "r", "title": "Red"}, {"const": "g", "title": "Green"}]},
            "m": {"type": "array", "items": {"enum": ["a", "b", "c"]}},
            "t": {"type": "string"}
        }}))
        .unwrap();
        let p = |name: &str, text: &str| f.field(name).unwrap().parse_text(text);
        assert_eq!(p("n", " 7 ").unwrap(), json!(7));
        assert!(p("n", "11").unwrap_err().contains("at most 10"));
        assert!(p("n", "seven").is_err());
        assert_eq!(p("x", "2.5").unwrap(), json!(2.5));
        assert!(p("x", "NaN").is_err());
        assert_eq!(p("b", "Yes").unwrap(), json!(true));
        assert_eq!(p("b", "no").unwrap(), json!(false));
        assert!(p("b", "maybe").is_err());
        assert_eq!(p("c", "green").unwrap(), json!("g"));
        assert_eq!(p("c", "1").unwrap(), json!("r"));
        assert!(p("c", "blue").is_err());
        assert_eq!(p("m", "a, 3").unwrap(), json!(["a", "c"]));
        assert_eq!(p("t", "  keep spaces ").unwrap(), json!("  keep spaces "));
        assert_eq!(f.field("c").unwrap().show(&json!("g")), "Green");
        assert_eq!(f.field("b").unwrap().show(&json!(true)), "Yes");
        assert_eq!(f.field("m").unwrap().show(&json!(["a", "c"])), "a, c");
        assert_eq!(f.field("n").unwrap().hint(), "a whole number from 1 to 10");
    }

    #[test]
    fn a_prompt_is_one_required_text_field() {
        let f =
            Form::from_input(&Form::input("Favourite colour?", Form::prompt_schema(true))).unwrap();
        assert!(f.is_single_text());
        assert_eq!(f.fields[0].name, PROMPT_FIELD);
        assert!(f.fields[0].required);
        assert_eq!(
            f.accept(&obj(json!({}))).unwrap_err().field,
            "content.answer"
        );
        assert_eq!(
            f.accept(&obj(json!({"answer": ""}))).unwrap_err().message,
            "must not be empty"
        );
        assert_eq!(
            f.summary(&f.accept(&obj(json!({"answer": "blue"}))).unwrap()),
            [("Answer".to_string(), "blue".to_string())]
        );
    }

    #[test]
    fn the_result_has_mcps_shape() {
        let accept = ElicitResult {
            action: ElicitAction::Accept,
            content: Some(obj(json!({"a": 1}))),
            message: None,
        };
        assert_eq!(
            serde_json::to_value(&accept).unwrap(),
            json!({"action": "accept", "content": {"a": 1}})
        );
        let cancel: ElicitResult =
            serde_json::from_value(json!({"action": "cancel", "message": "m"})).unwrap();
        assert_eq!(cancel.action, ElicitAction::Cancel);
        assert_eq!(cancel.content, None);
    }
}
