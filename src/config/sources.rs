//! Where each configuration value came from (a key in the configuration file, or an
//! environment variable), so that every configuration error names the place to fix and, where
//! the fix is obvious, says what it is: the nearest known key for an unknown one, a single
//! underscore where `__` separates the parts of a variable's name, and (in `explain`) what a
//! refused value should have been.
//!
//! Values are quoted in messages only where `explain` says what was given, never a secret's.

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::path::Path;

use super::{DEFAULT_TOML, ENV_PREFIX};

mod explain;

/// The separator between the prefix, the section and the key of a variable's name.
const SEPARATOR: &str = "__";

/// Top-level keys that are lists of tables, which the defaults leave out.
const TABLE_LISTS: &[&str] = &["webhooks", "policy", "people", "groups", "routes"];

/// Names people write for a top-level list, and the list's name.
const ALIASES: &[(&str, &str)] = &[
    ("person", "people"),
    ("persons", "people"),
    ("group", "groups"),
    ("route", "routes"),
    ("webhook", "webhooks"),
    ("rule", "policy"),
    ("rules", "policy"),
    ("policies", "policy"),
];

/// How alike (Jaro-Winkler) a known key must be to an unknown one to be suggested.
const SIMILAR: f64 = 0.8;

/// Where a value came from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum Origin {
    /// An environment variable, by the name it was given.
    Env(String),
    /// The configuration file.
    File(String),
}

impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Origin::Env(var) => write!(f, "the environment variable {var}"),
            Origin::File(path) => f.write_str(path),
        }
    }
}

/// One configuration variable: its name as given, the dotted key it sets, and its value.
struct EnvVar {
    name: String,
    key: String,
    value: String,
}

/// The sources of one load: the file's table, the environment's variables, and the known keys.
pub(super) struct Sources {
    file: Option<(String, toml::Table)>,
    env: Vec<EnvVar>,
    /// The compiled-in defaults: every known table and key.
    schema: toml::Table,
}

/// The dotted key `key` without list indices (`auth.agent_tokens[1]` → `auth.agent_tokens`).
fn without_index(key: &str) -> &str {
    key.split('[').next().unwrap_or(key)
}

/// `value`, or its element when `part` names one (`policy[0]`): an index past the end, or on
/// something that is not an array, is `None`.
fn element<'v>(value: &'v toml::Value, part: &str) -> Option<&'v toml::Value> {
    match part.split_once('[') {
        None => Some(value),
        Some((_, index)) => value
            .as_array()?
            .get(index.strip_suffix(']')?.parse::<usize>().ok()?),
    }
}

/// `key` with every element index taken out (`policy[0].decision` → `policy.decision`): the
/// setting it is an instance of.
pub(super) fn unindexed(key: &str) -> String {
    key.split('.')
        .map(without_index)
        .collect::<Vec<_>>()
        .join(".")
}

/// `key` as the loader names a member of an array's element (`policy[0]decision`), with the
/// dot people write (`policy[0].decision`).
fn dotted(key: &str) -> String {
    let mut out = String::with_capacity(key.len() + 2);
    let mut chars = key.chars().peekable();
    while let Some(c) = chars.next() {
        out.push(c);
        if c == ']' && chars.peek().is_some_and(|n| *n != '.' && *n != '[') {
            out.push('.');
        }
    }
    out
}

/// `key` as the environment variable that sets it.
fn env_name(key: &str) -> String {
    format!(
        "{ENV_PREFIX}{SEPARATOR}{}",
        key.replace('.', SEPARATOR).to_uppercase()
    )
}

/// Every dotted key the defaults know: tables and leaves, in order.
fn known_keys(table: &toml::Table, prefix: &str, out: &mut Vec<(String, bool)>) {
    for (k, v) in table {
        let key = if prefix.is_empty() {
            k.clone()
        } else {
            format!("{prefix}.{k}")
        };
        match v {
            toml::Value::Table(t) => {
                out.push((key.clone(), true));
                known_keys(t, &key, out);
            }
            _ => out.push((key, false)),
        }
    }
}

/// Collects the keys of `table` (at `prefix`) that `schema` does not have.
fn walk_file(table: &toml::Table, schema: &toml::Table, prefix: &str, unknown: &mut Vec<String>) {
    for (k, v) in table {
        let key = if prefix.is_empty() {
            k.clone()
        } else {
            format!("{prefix}.{k}")
        };
        match (schema.get(k), v) {
            (Some(toml::Value::Table(s)), toml::Value::Table(t)) => walk_file(t, s, &key, unknown),
            // A value of the wrong shape is the deserializer's to report, with its key.
            (Some(_), _) => {}
            (None, _) if prefix.is_empty() && TABLE_LISTS.contains(&k.as_str()) => {}
            (None, _) => unknown.push(key),
        }
    }
}

/// Takes dotted `key` out of `table`.
fn remove(table: &mut toml::Table, key: &str) {
    match key.split_once('.') {
        None => {
            table.remove(key);
        }
        Some((first, rest)) => {
            if let Some(toml::Value::Table(inner)) = table.get_mut(first) {
                remove(inner, rest);
            }
        }
    }
}

/// Whether `text` mentions `key` as a whole key (not as part of a longer one).
fn mentions(text: &str, key: &str) -> bool {
    let part = |c: char| c.is_ascii_alphanumeric() || c == '_' || c == '.';
    text.match_indices(key).any(|(at, _)| {
        let before = text[..at].chars().next_back();
        let after = text[at + key.len()..].chars().next();
        !before.is_some_and(part) && !after.is_some_and(|c| part(c) && c != '.')
    })
}

impl Sources {
    /// The sources of a load from `file` (already parsed) and the variables in `env`.
    pub(super) fn new(file: Option<(&Path, toml::Table)>, env: &HashMap<String, String>) -> Self {
        let prefix = format!("{ENV_PREFIX}{SEPARATOR}").to_lowercase();
        let mut env: Vec<EnvVar> = env
            .iter()
            .filter_map(|(name, value)| {
                let lower = name.to_lowercase();
                let rest = lower.strip_prefix(&prefix)?;
                Some(EnvVar {
                    name: name.clone(),
                    key: rest.replace(SEPARATOR, "."),
                    value: value.clone(),
                })
            })
            .collect();
        env.sort_by(|a, b| a.name.cmp(&b.name));
        Self {
            file: file.map(|(p, t)| (p.display().to_string(), t)),
            env,
            // The defaults are compiled in and parsed by every load; a test checks they parse.
            schema: toml::from_str(DEFAULT_TOML).unwrap_or_default(),
        }
    }

    /// Every known dotted key, with whether it names a table.
    fn known(&self) -> Vec<(String, bool)> {
        let mut out = Vec::new();
        known_keys(&self.schema, "", &mut out);
        out.extend(TABLE_LISTS.iter().map(|k| (k.to_string(), false)));
        out
    }

    /// The value at dotted `key` in the file (indices ignored).
    fn file_value(&self, key: &str) -> Option<&toml::Value> {
        let (_, table) = self.file.as_ref()?;
        let mut parts = key.split('.');
        let first = parts.next()?;
        let mut value = element(table.get(without_index(first))?, first)?;
        for part in parts {
            value = element(value.as_table()?.get(without_index(part))?, part)?;
        }
        Some(value)
    }

    /// Where the value of `key` came from, or `None` for a default. The environment wins.
    pub(super) fn origin(&self, key: &str) -> Option<Origin> {
        let key = without_index(key);
        if let Some(var) = self.env.iter().find(|v| v.key == key) {
            return Some(Origin::Env(var.name.clone()));
        }
        self.file_value(key)?;
        self.file
            .as_ref()
            .map(|(path, _)| Origin::File(path.clone()))
    }

    /// The keys the file or the environment sets that no setting has, one message for each
    /// that names it, where it is, and the nearest known key.
    pub(super) fn unknown_keys(&self) -> Vec<String> {
        let mut problems = Vec::new();
        if let Some((path, table)) = &self.file {
            let mut unknown = Vec::new();
            walk_file(table, &self.schema, "", &mut unknown);
            for key in unknown {
                let hint = self
                    .nearest(&key)
                    .map(|k| match k.rsplit_once('.') {
                        // A setting written outside its section.
                        Some((section, name)) if !key.contains('.') && name == key => {
                            format!(": did you mean `{k}`? It goes under [{section}]: {name} = ...")
                        }
                        _ => format!(": did you mean `{k}`?"),
                    })
                    .or_else(|| self.section_settings(&key))
                    .unwrap_or_default();
                problems.push(format!("unknown setting `{key}` in {path}{hint}"));
            }
        }
        for var in self.env.iter().filter(|v| !self.is_known(&v.key)) {
            let flattened = var.key.replace('.', "_");
            let hint = match self
                .known()
                .into_iter()
                .find(|(k, table)| !table && k.replace('.', "_") == flattened)
            {
                // IMRELAY__SERVER_LISTEN: one underscore where two belong.
                Some((k, _)) => format!(
                    ": the section and the key are separated by `{SEPARATOR}`, so use {} (`{k}`)",
                    env_name(&k)
                ),
                None => self
                    .nearest(&var.key)
                    .map(|k| format!(": did you mean {} (`{k}`)?", env_name(&k)))
                    .or_else(|| self.section_settings(&var.key))
                    .unwrap_or_default(),
            };
            problems.push(format!(
                "unknown setting `{}` from the environment variable {}{hint}",
                var.key, var.name
            ));
        }
        problems
    }

    /// The file's table without the keys no setting has, as TOML (`None`: no file, or none
    /// unknown in it), and the names of the variables that set no setting: what is left is
    /// read, so that unknown keys do not hide the other mistakes.
    pub(super) fn without_unknown(&self) -> (Option<String>, Vec<String>) {
        let mut text = None;
        if let Some((_, table)) = &self.file {
            let mut unknown = Vec::new();
            walk_file(table, &self.schema, "", &mut unknown);
            if !unknown.is_empty() {
                let mut pruned = table.clone();
                for key in &unknown {
                    remove(&mut pruned, key);
                }
                text = toml::to_string(&pruned).ok();
            }
        }
        let vars = self
            .env
            .iter()
            .filter(|v| !self.is_known(&v.key))
            .map(|v| v.name.clone())
            .collect();
        (text, vars)
    }

    /// For an unknown `key` in a known section, the settings that section has.
    fn section_settings(&self, key: &str) -> Option<String> {
        let (section, _) = key.rsplit_once('.')?;
        let prefix = format!("{section}.");
        let names: Vec<String> = self
            .known()
            .into_iter()
            .filter_map(|(k, _)| {
                k.strip_prefix(&prefix)
                    .filter(|rest| !rest.contains('.'))
                    .map(str::to_string)
            })
            .collect();
        (!names.is_empty()).then(|| format!(": [{section}] has {}", names.join(", ")))
    }

    /// Whether dotted `key` is a known setting or section (or lies inside a value, such as a
    /// list of tables, whose shape the deserializer checks).
    fn is_known(&self, key: &str) -> bool {
        let mut parts = key.split('.');
        let Some(first) = parts.next() else {
            return false;
        };
        if TABLE_LISTS.contains(&first) {
            return true;
        }
        let mut value = self.schema.get(first);
        for part in parts {
            value = value
                .and_then(toml::Value::as_table)
                .and_then(|t| t.get(part));
        }
        value.is_some()
    }

    /// The known key most like `key`, if one is alike enough (within its section, when that is
    /// known: the section's name makes every key in it look alike); else a setting of that
    /// name in another section (`listen` at the top is `server.listen`).
    fn nearest(&self, key: &str) -> Option<String> {
        if let Some((_, meant)) = ALIASES.iter().find(|(a, _)| *a == key) {
            return Some(meant.to_string());
        }
        let known = self.known();
        let last_of = |k: &str| k.rsplit('.').next().unwrap_or(k).to_string();
        let last = last_of(key);
        let section = key
            .rsplit_once('.')
            .map(|(s, _)| s)
            .filter(|s| known.iter().any(|(k, table)| *table && k == s));
        let alike = match section {
            Some(section) => known
                .iter()
                .filter(|(k, _)| k.rsplit_once('.').map(|(s, _)| s) == Some(section))
                .map(|(k, _)| (strsim::jaro_winkler(&last, &last_of(k)), k))
                .filter(|(score, _)| *score >= SIMILAR)
                .max_by(|a, b| a.0.total_cmp(&b.0))
                .map(|(_, k)| k.clone()),
            None => known
                .iter()
                .map(|(k, _)| (strsim::jaro_winkler(key, k), k))
                .filter(|(score, _)| *score >= SIMILAR)
                .max_by(|a, b| a.0.total_cmp(&b.0))
                .map(|(_, k)| k.clone()),
        };
        alike.or_else(|| {
            let mut same = known
                .iter()
                .filter(|(k, table)| !table && last_of(k) == last);
            match (same.next(), same.next()) {
                (Some((k, _)), None) => Some(k.clone()),
                _ => None,
            }
        })
    }

    /// Variables that look like settings but are ignored because they separate the parts of
    /// their name with one underscore instead of two (`IMRELAY_SERVER_LISTEN`).
    pub(super) fn ignored_variables(&self, env: &HashMap<String, String>) -> Vec<String> {
        let prefix = format!("{ENV_PREFIX}_").to_lowercase();
        let double = format!("{ENV_PREFIX}{SEPARATOR}").to_lowercase();
        let known = self.known();
        let mut names: Vec<&String> = env.keys().collect();
        names.sort();
        names
            .into_iter()
            .filter_map(|name| {
                let lower = name.to_lowercase();
                if lower.starts_with(&double) {
                    return None;
                }
                let rest = lower.strip_prefix(&prefix)?;
                let (key, _) = known
                    .iter()
                    .find(|(k, table)| !table && k.replace('.', "_") == rest)?;
                Some(format!(
                    "{name} is ignored: the prefix, section and key of a setting's variable are \
                     separated by `{SEPARATOR}`, so use {} to set `{key}`",
                    env_name(key)
                ))
            })
            .collect()
    }

    /// A load error as one message naming the key and where it came from.
    pub(super) fn describe(&self, error: config::ConfigError) -> String {
        match error {
            config::ConfigError::At {
                error,
                key: Some(key),
                ..
            } => {
                let key = dotted(&key);
                let error = error.to_string();
                self.explain(&key, &error)
                    .unwrap_or_else(|| self.about(&key, &error))
            }
            config::ConfigError::Type {
                unexpected,
                expected,
                key: Some(key),
                ..
            } => {
                let key = dotted(&key);
                let error = format!("expected {expected}, found {unexpected}");
                self.explain(&key, &error)
                    .unwrap_or_else(|| self.about(&key, &error))
            }
            config::ConfigError::NotFound(key) => missing(&key),
            other => other.to_string(),
        }
    }

    /// `problem` with the value of `key`, said where the value came from.
    fn about(&self, key: &str, problem: &str) -> String {
        let at = match self.origin(key) {
            Some(Origin::Env(var)) => var,
            Some(Origin::File(path)) => format!("{key} in {path}"),
            None => key.to_string(),
        };
        format!("{at}: {problem}")
    }

    /// `message`, an error about values that do not fit together, with where each key it
    /// names came from (keys left at their defaults are not mentioned).
    pub(super) fn annotate(&self, message: &str) -> String {
        let mut origins: BTreeMap<String, Origin> = BTreeMap::new();
        for (key, _) in self.known().into_iter().filter(|(_, table)| !table) {
            if mentions(message, &key)
                && let Some(origin) = self.origin(&key)
            {
                origins.insert(key, origin);
            }
        }
        if origins.is_empty() {
            return message.to_string();
        }
        let from: Vec<String> = origins
            .into_iter()
            .map(|(key, origin)| match origin {
                Origin::Env(var) => format!("{key} is set by {var}"),
                Origin::File(path) => format!("{key} is set in {path}"),
            })
            .collect();
        format!("{message} ({})", from.join("; "))
    }
}

/// A setting that must be given, named as it is written: `webhooks[0].secret is missing`.
fn missing(key: &str) -> String {
    // The loader writes an item's field right after its index: `webhooks[0]secret`.
    let key = match key.split_once(']') {
        Some((list, field)) if !field.is_empty() && !field.starts_with('.') => {
            format!("{list}].{field}")
        }
        _ => key.to_string(),
    };
    match key.split_once('[') {
        Some((list, _)) => {
            format!("{key} is missing: every [[{list}]] entry needs it (see docs/configuration.md)")
        }
        None => format!("{key} is missing"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mentions_whole_keys_only() {
        assert!(mentions("set auth.agent_tokens and x", "auth.agent_tokens"));
        assert!(mentions(
            "auth.agent_tokens[1] is short",
            "auth.agent_tokens"
        ));
        assert!(mentions("server.listen = 0.0.0.0", "server.listen"));
        assert!(!mentions(
            "telegram.webhook_url is empty",
            "telegram.webhook"
        ));
        assert!(!mentions("xserver.listen", "server.listen"));
        assert!(mentions("telegram.inbound_path.", "telegram.inbound_path"));
    }
}
