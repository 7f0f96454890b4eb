//! A value checked against its field: type, bounds, pattern, format, options.

use std::collections::HashSet;

use serde_json::{Number, Value};

use super::entry::{list_values, show_number};
use super::{Choice, Field, FieldType};
use crate::interaction::question::{MAX_ANSWER_CHARS, json_type};

impl Field {
    /// Checks a value for this field; the error says what is wrong in words for the person
    /// who typed it (the caller adds the field's name).
    pub fn check(&self, v: &Value) -> Result<Value, String> {
        match (&self.ty, v) {
            (ty @ FieldType::Text { .. }, Value::String(s)) => check_text(ty, s)?,
            (
                FieldType::Number {
                    integer,
                    minimum,
                    maximum,
                },
                Value::Number(n),
            ) => check_number(n, *integer, *minimum, *maximum)?,
            (FieldType::Boolean, Value::Bool(_)) => {}
            (FieldType::Choice { options }, Value::String(s)) => {
                if !options.iter().any(|o| &o.value == s) {
                    return Err(format!("must be one of {}", list_values(options)));
                }
            }
            (
                FieldType::Multi {
                    options,
                    min_items,
                    max_items,
                },
                Value::Array(items),
            ) => check_multi(items, options, *min_items, *max_items)?,
            (ty, other) => {
                return Err(format!(
                    "expected {}, got {}",
                    ty.expected(),
                    json_type(other)
                ));
            }
        }
        Ok(v.clone())
    }
}

/// A text field's value: its length, format and pattern.
fn check_text(ty: &FieldType, s: &str) -> Result<(), String> {
    let FieldType::Text {
        min_len,
        max_len,
        pattern,
        format,
        ..
    } = ty
    else {
        return Ok(());
    };
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
    Ok(())
}

/// A number field's value: whole if it must be, within its bounds.
fn check_number(
    n: &Number,
    integer: bool,
    minimum: Option<f64>,
    maximum: Option<f64>,
) -> Result<(), String> {
    let x = n.as_f64().unwrap_or(f64::NAN);
    if integer && !(n.is_i64() || n.is_u64() || (x.is_finite() && x.fract() == 0.0)) {
        return Err("must be a whole number".to_string());
    }
    if let Some(min) = minimum
        && x < min
    {
        return Err(format!("must be at least {}", show_number(min)));
    }
    if let Some(max) = maximum
        && x > max
    {
        return Err(format!("must be at most {}", show_number(max)));
    }
    Ok(())
}

/// A multi-select field's value: options, each once, as many as it takes.
fn check_multi(
    items: &[Value],
    options: &[Choice],
    min_items: Option<usize>,
    max_items: Option<usize>,
) -> Result<(), String> {
    // Bounded before the items are looked at: no more than the options.
    if let Some(max) = max_items
        && items.len() > max
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
        && items.len() < min
    {
        return Err(format!("choose at least {min}"));
    }
    Ok(())
}
