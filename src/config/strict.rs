//! Values in the file that the loader would bend into the type a setting takes, refused
//! instead with the fix: `enabled = "yes"` (read as true), `timeout_secs = 900.5` (read as
//! 901), `quorum = "2"` (read as 2). What a setting takes is read from the defaults file for
//! the sections, and from [`LIST_NUMBERS`] for the lists of tables. The environment's values
//! are text by nature and are not checked here.

/// The whole-number fields of the entries of the lists of tables (`[[routes]]`,
/// `[[policy]]`), which the defaults file does not show.
const LIST_NUMBERS: &[(&str, &[&str])] = &[
    (
        "routes",
        &[
            "timeout_secs",
            "quorum",
            "deny_quorum",
            "escalate_after_secs",
        ],
    ),
    ("policy", &["quorum", "deny_quorum"]),
];

/// The text the loader would read as true or false (any other is refused by it).
const READ_AS_BOOL: &[&str] = &["true", "false", "yes", "no", "on", "off", "1", "0"];

/// What a whole number of `key` counts, for messages: "seconds", or nothing.
fn unit(key: &str) -> &'static str {
    if key.ends_with("_secs") {
        " of seconds (the unit is in its name)"
    } else if key.ends_with("_ms") {
        " of milliseconds (the unit is in its name)"
    } else if key.ends_with("_hours") {
        " of hours (the unit is in its name)"
    } else {
        ""
    }
}

/// The problem with `value` for a setting whose default is `like` (`None`: a whole number
/// field of a list entry), at `key` in `path`.
fn loose(key: &str, path: &str, value: &toml::Value, like: &toml::Value) -> Option<String> {
    let name = key.rsplit('.').next().unwrap_or(key);
    match (like, value) {
        (toml::Value::Boolean(_), toml::Value::String(s))
            if READ_AS_BOOL.contains(&s.to_ascii_lowercase().trim()) =>
        {
            Some(format!(
                "{key} in {path}: {s:?} is text, not true or false. Use {name} = true or {name} = \
             false (without quotes)."
            ))
        }
        (toml::Value::Integer(_), toml::Value::String(s)) if s.trim().parse::<i64>().is_ok() => {
            Some(format!(
                "{key} in {path}: {s:?} is in quotes, which makes it text, not a number. Use \
                 {name} = {} (without quotes).",
                s.trim()
            ))
        }
        (toml::Value::Integer(_), toml::Value::Float(f)) => Some(format!(
            "{key} in {path}: {f} is not a whole number. It takes a whole number{}: use {name} = \
             {}.",
            unit(key),
            f.round()
        )),
        _ => None,
    }
}

/// Walks `table` (at `prefix`) against `schema`, the defaults, collecting loose values.
fn walk(
    table: &toml::Table,
    schema: &toml::Table,
    prefix: &str,
    path: &str,
    out: &mut Vec<String>,
) {
    for (k, v) in table {
        let key = if prefix.is_empty() {
            k.clone()
        } else {
            format!("{prefix}.{k}")
        };
        match (schema.get(k), v) {
            (Some(toml::Value::Table(s)), toml::Value::Table(t)) => walk(t, s, &key, path, out),
            (Some(like), _) => out.extend(loose(&key, path, v, like)),
            (None, _) => {}
        }
    }
}

/// The loose values of the file `table` read from `path`, checked against `schema` (the
/// defaults), each a message with its fix.
pub(super) fn loose_values(table: &toml::Table, schema: &toml::Table, path: &str) -> Vec<String> {
    let mut out = Vec::new();
    walk(table, schema, "", path, &mut out);
    let whole = toml::Value::Integer(0);
    for (list, fields) in LIST_NUMBERS {
        let Some(toml::Value::Array(entries)) = table.get(*list) else {
            continue;
        };
        for (i, entry) in entries.iter().enumerate() {
            let Some(entry) = entry.as_table() else {
                continue;
            };
            for field in *fields {
                if let Some(v) = entry.get(*field) {
                    out.extend(loose(&format!("{list}[{i}].{field}"), path, v, &whole));
                }
            }
        }
    }
    out
}
