//! What a person types, read into a field's value, and values and hints shown in words.

use serde_json::{Number, Value};

use super::{Choice, Field, FieldType};

impl Field {
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

pub(super) fn list_values(options: &[Choice]) -> String {
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

pub(super) fn show_number(x: f64) -> String {
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
