//! Values in the file that the loader would bend into the type a setting takes, refused
//! instead with the fix: `enabled = "yes"` (read as true), `timeout_secs = 900.5` (read as
//! 901), `quorum = "2"` (read as 2). What a setting takes is read from the defaults file for
//! the sections, and from [`LIST_NUMBERS`] for the lists of tables. The environment's values
//! are text by nature and are not checked here. And for TOML that does not parse, what the
//! line most likely meant.

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
            "desk_first_secs",
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

/// The spellings of a field that `[[routes]]` and `[[policy]]` both accept though each has
/// its own (`tool` on a route, `tools` on a rule): (list, the one written, the list's own).
const OTHER_SPELLINGS: &[(&str, &str, &str)] =
    &[("routes", "tools", "tool"), ("policy", "tool", "tools")];

/// Warnings for the entries of the file `table` (read from `path`) that use the other
/// list's spelling of a field: read all the same, and said.
pub(super) fn other_spellings(table: &toml::Table, path: &str) -> Vec<String> {
    let mut out = Vec::new();
    for (list, written, own) in OTHER_SPELLINGS {
        let Some(toml::Value::Array(entries)) = table.get(*list) else {
            continue;
        };
        for (i, entry) in entries.iter().enumerate() {
            if entry.as_table().is_some_and(|t| t.contains_key(*written)) {
                out.push(format!(
                    "{list}[{i}].{written} in {path} is read as {own}: [[{list}]] entries \
                     call it `{own}` (write {own} = [...])"
                ));
            }
        }
    }
    out
}

/// For a TOML error at byte `at` of `text`, what the line it is on most likely meant: a list
/// without its brackets (`chats = -1, -2`), a Telegram @name where an id belongs.
pub(super) fn toml_hint(text: &str, at: usize) -> Option<String> {
    let start = text.get(..at)?.rfind('\n').map_or(0, |n| n + 1);
    let line = text.get(start..)?.lines().next()?;
    let (name, value) = line.split_once('=')?;
    let (name, value) = (name.trim(), value.trim());
    if matches!(name, "chats" | "approvers") && value.contains('@') {
        return Some(
            "\nTelegram ids are numbers like -1001234567890 (a group) or 123456789 (a person); \
             a @name is not an id: send /whoami to the bot in that chat to see its id"
                .into(),
        );
    }
    let quoted_or_bracketed = value.starts_with(['[', '{', '"', '\'']);
    if quoted_or_bracketed || name.is_empty() {
        return None;
    }
    if value.contains(',') {
        return Some(format!(
            "\nA list is written in brackets: {name} = [{value}]"
        ));
    }
    // A bare word: `enabled = yes`, `token = 123456:ABC` (read as the start of a time).
    let word = value.split('#').next().unwrap_or(value).trim();
    if ["yes", "no", "on", "off", "y", "n"].contains(&word.to_ascii_lowercase().as_str()) {
        return Some(format!(
            "\nOn or off is written true or false, without quotes: {name} = true or {name} = false"
        ));
    }
    let escaped = word.replace('\\', "\\\\").replace('"', "\\\"");
    let literal = word.parse::<f64>().is_ok() || matches!(word, "true" | "false");
    (!word.is_empty() && !literal)
        .then(|| format!("\nText is written in quotes: {name} = \"{escaped}\""))
}
