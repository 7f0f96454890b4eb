//! A `requestedSchema` read into fields: the elicitation subset, and nothing outside it
//! (refused with the property named).

use std::collections::HashSet;

use serde_json::{Map, Value};

use super::entry::show_number;
use super::*;
use crate::interaction::ValidationError;
use crate::interaction::question::{MAX_ANSWER_CHARS, json_type};

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
fn options(
    prop: &Map<String, Value>,
    at: &str,
    list_key: &str,
) -> Result<Vec<Choice>, ValidationError> {
    // Counted before anything else, and duplicates found with a set: the work stays in
    // proportion to the options, which are few (a list of 100,000 was once compared pairwise).
    let mut gathered = Gathered::default();
    if let Some(list) = prop.get("enum") {
        enum_options(prop, list, at, &mut gathered)?;
    } else if let Some(list) = prop.get(list_key) {
        const_options(list, at, list_key, &mut gathered)?;
    } else {
        return Err(ValidationError::new(
            at,
            format!("a choice needs `enum` or `{list_key}`"),
        ));
    }
    if gathered.out.is_empty() {
        return Err(too_many(at, 0));
    }
    Ok(gathered.out)
}

fn too_many(at: &str, n: usize) -> ValidationError {
    ValidationError::new(
        at,
        format!("a choice needs 1 to {MAX_OPTIONS} options (got {n})"),
    )
}

/// `enum`, with `enumNames` as their titles if given.
fn enum_options<'a>(
    prop: &'a Map<String, Value>,
    list: &'a Value,
    at: &str,
    gathered: &mut Gathered<'a>,
) -> Result<(), ValidationError> {
    let Value::Array(list) = list else {
        return Err(ValidationError::new(
            format!("{at}.enum"),
            format!("expected an array, got {}", json_type(list)),
        ));
    };
    if list.len() > MAX_OPTIONS {
        return Err(too_many(at, list.len()));
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
        gathered.push(
            v,
            names.and_then(|names| names.get(n)),
            format!("{at}.enum[{n}]"),
        )?;
    }
    Ok(())
}

/// `oneOf` or `anyOf` (`list_key`) of `{const, title}`.
fn const_options<'a>(
    list: &'a Value,
    at: &str,
    list_key: &str,
    gathered: &mut Gathered<'a>,
) -> Result<(), ValidationError> {
    let Value::Array(list) = list else {
        return Err(ValidationError::new(
            format!("{at}.{list_key}"),
            format!("expected an array, got {}", json_type(list)),
        ));
    };
    if list.len() > MAX_OPTIONS {
        return Err(too_many(at, list.len()));
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
        gathered.push(&item["const"], item.get("title"), here)?;
    }
    Ok(())
}

/// The options read so far, and their values (each allowed once).
#[derive(Default)]
struct Gathered<'a> {
    out: Vec<Choice>,
    seen: HashSet<&'a str>,
}

impl<'a> Gathered<'a> {
    /// One option: its value (a string of 1 to [`MAX_TITLE_CHARS`] characters, not seen
    /// before) and its title, if it has one; `at` names it in an error.
    fn push(
        &mut self,
        value: &'a Value,
        label: Option<&Value>,
        at: String,
    ) -> Result<(), ValidationError> {
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
        if !self.seen.insert(value.as_str()) {
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
        self.out.push(Choice {
            value: value.clone(),
            label,
        });
        Ok(())
    }
}

/// A text field's type: lengths, pattern, format, `multiline`.
fn text_type(prop: &Map<String, Value>, at: &str) -> Result<FieldType, ValidationError> {
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
    Ok(FieldType::Text {
        min_len,
        max_len,
        pattern,
        format,
        multiline,
    })
}

/// A number field's type (whole when `integer`): its bounds, which some number must meet.
fn number_type(
    prop: &Map<String, Value>,
    at: &str,
    integer: bool,
) -> Result<FieldType, ValidationError> {
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
    if integer
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
    Ok(FieldType::Number {
        integer,
        minimum,
        maximum,
    })
}

/// A multiple choice's type: its options from `items`, and how many to choose.
fn multi_type(prop: &Map<String, Value>, at: &str) -> Result<FieldType, ValidationError> {
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
    Ok(FieldType::Multi {
        options,
        min_items,
        max_items,
    })
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
        "string" => text_type(prop, at)?,
        "number" | "integer" => number_type(prop, at, ty_name == "integer")?,
        "boolean" => {
            refuse_unknown(prop, at, &[], "a boolean")?;
            FieldType::Boolean
        }
        "array" => multi_type(prop, at)?,
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

/// The names `required` lists, each one of the properties.
fn required<'a>(
    schema: &'a Map<String, Value>,
    props: &Map<String, Value>,
    at: &str,
) -> Result<Vec<&'a str>, ValidationError> {
    let r = match schema.get("required") {
        None => return Ok(Vec::new()),
        Some(Value::Array(r)) => r,
        Some(other) => {
            return Err(ValidationError::new(
                format!("{at}.required"),
                format!("expected an array, got {}", json_type(other)),
            ));
        }
    };
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
    Ok(names)
}

/// The fields of a `requestedSchema`, in its order; errors name the property (`at`...).
pub(super) fn parse_schema(
    schema: &Map<String, Value>,
    at: &str,
) -> Result<Vec<Field>, ValidationError> {
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
    let required = required(schema, props, at)?;
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
