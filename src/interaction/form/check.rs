//! A value checked against its field: type, bounds, pattern, format, options.

use std::collections::HashSet;

use serde_json::Value;

use super::entry::{list_values, show_number};
use super::{Field, FieldType};
use crate::interaction::question::{MAX_ANSWER_CHARS, json_type};

impl Field {
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
}
