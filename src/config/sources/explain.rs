//! Configuration mistakes in a person's words: for the values people get wrong most (a chat
//! given by its @name, a quoted id, a backend's other spelling, an address without its port, a
//! unit after a number, a word for a yes/no), a message that names the setting, says what was
//! given, what the setting takes, and how to write it instead — in the file's syntax or the
//! variable's, whichever the value came from.
//!
//! A secret's value is never repeated: only settings that hold no secret are explained here.

use super::{Origin, Sources};

/// How a value was given: a value in the file, or the text of an environment variable.
enum Given {
    Toml(toml::Value),
    Text(String),
}

impl Given {
    /// The value as the person wrote it.
    fn shown(&self) -> String {
        match self {
            Given::Toml(v) => v.to_string(),
            Given::Text(s) => format!("{s:?}"),
        }
    }
}

/// An example chat id and user id.
const CHAT_EXAMPLE: &str = "-1001234567890";
const USER_EXAMPLE: &str = "123456789";

/// What the chat ids are, and where to find one.
const CHAT_IDS: &str = "Chat ids are numbers like -1001234567890 (a group) or 123456789 (a \
     private chat); a @name is not an id: send /whoami to the bot in that chat to see its id";
/// What the user ids are, and where to find one.
const USER_IDS: &str = "User ids are positive numbers like 123456789; a @name is not an id: \
     send /whoami to the bot to see yours";

/// The value of a setting read as a duration with a unit (`10s`, `5m`, `2h`, `1d`, `500ms`),
/// in `unit` (`secs`, `ms`, `hours`); `None` if it is not one.
fn with_unit(text: &str, unit: &str) -> Option<u64> {
    let t = text.trim().to_ascii_lowercase();
    let split = t.find(|c: char| !c.is_ascii_digit() && c != '.')?;
    let (number, suffix) = t.split_at(split);
    let number: f64 = number.parse().ok()?;
    let ms = match suffix.trim() {
        "ms" => 1.0,
        "s" | "sec" | "secs" | "second" | "seconds" => 1_000.0,
        "m" | "min" | "mins" | "minute" | "minutes" => 60_000.0,
        "h" | "hour" | "hours" => 3_600_000.0,
        "d" | "day" | "days" => 86_400_000.0,
        _ => return None,
    } * number;
    let per = match unit {
        "ms" => 1.0,
        "secs" => 1_000.0,
        "hours" => 3_600_000.0,
        _ => return None,
    };
    let n = ms / per;
    (n.fract() == 0.0 && n >= 0.0 && n < u64::MAX as f64).then_some(n as u64)
}

/// The unit a setting's name ends with, in words: `_secs` → seconds.
fn unit_of(key: &str) -> Option<(&'static str, &'static str)> {
    let last = key.rsplit('.').next().unwrap_or(key);
    if last.ends_with("_secs") {
        Some(("secs", "seconds"))
    } else if last.ends_with("_ms") {
        Some(("ms", "milliseconds"))
    } else if last.ends_with("_hours") {
        Some(("hours", "hours"))
    } else {
        None
    }
}

/// `values` as a person reads a list: `"a", "b" or "c"`.
fn either(values: &[String]) -> String {
    let quoted: Vec<String> = values.iter().map(|v| format!("{v:?}")).collect();
    match quoted.split_last() {
        Some((last, rest)) if !rest.is_empty() => format!("{} or {last}", rest.join(", ")),
        Some((last, _)) => last.clone(),
        None => String::new(),
    }
}

impl Sources {
    /// How `key`'s value was given, when it was.
    fn given(&self, key: &str) -> Option<Given> {
        if let Some(var) = self.env.iter().find(|v| v.key == key) {
            return Some(Given::Text(var.value.clone()));
        }
        self.file_value(key).cloned().map(Given::Toml)
    }

    /// Where `key` was set, as messages begin: `store.backend in c.toml`, or the variable.
    fn at(&self, key: &str) -> String {
        match self.origin(key) {
            Some(Origin::Env(var)) => var,
            Some(Origin::File(path)) => format!("{key} in {path}"),
            None => key.to_string(),
        }
    }

    /// How to set `key` where it was set: `backend = "postgres"` in a file (`toml`, the value
    /// in TOML), `IMRELAY__STORE__BACKEND=postgres` in the environment (`text`).
    fn write(&self, key: &str, toml: &str, text: &str) -> String {
        match self.origin(key) {
            Some(Origin::Env(var)) => format!("{var}={text}"),
            _ => {
                let name = key.rsplit('.').next().unwrap_or(key);
                // An element of a list (`kind[0]`) is written as the list of it.
                match name.split_once('[') {
                    Some((list, _)) => format!("{list} = [{toml}]"),
                    None => format!("{name} = {toml}"),
                }
            }
        }
    }

    /// A message for a refused value of `key` (`error` is the loader's own words), when the
    /// mistake is one people make; `None` leaves the loader's message.
    pub(super) fn explain(&self, key: &str, error: &str) -> Option<String> {
        if let Some(m) = self.explain_unknown_field(key, error) {
            return Some(m);
        }
        if super::unindexed(key) == "routes.escalate_to" {
            return self.explain_escalate_to(key);
        }
        if key == "feishu.chats" && error.contains("untagged enum") {
            return self.explain_receivers(key);
        }
        let given = self.given(key)?;
        if error.contains("expected a sequence") {
            // One value where a list is taken (`agent = "codex"` for `agent = ["codex"]`).
            let shown = given.shown();
            return Some(format!(
                "{}: {shown} is not a list. It takes a list, even of one: use {}.",
                self.at(key),
                self.write(key, &format!("[{shown}]"), &shown)
            ));
        }
        if let Some(values) = crate::config::enum_values(&super::unindexed(key)) {
            return Some(self.explain_choice(key, &given, &values));
        }
        match key {
            "telegram.chats" => self.explain_ids(key, &given, false),
            "telegram.approvers" => self.explain_ids(key, &given, true),
            "server.listen" => self.explain_listen(key, &given),
            _ => self.explain_type(key, &given, error),
        }
    }

    /// A field a `[[list]]` entry does not have (`label` on a route): the nearest it has, or
    /// all of them.
    fn explain_unknown_field(&self, key: &str, error: &str) -> Option<String> {
        let rest = &error[error.find("unknown field `")? + "unknown field `".len()..];
        let (field, rest) = rest.split_once('`')?;
        let names: Vec<&str> = rest.split('`').skip(1).step_by(2).collect();
        let list = key.split(['[', '.']).next().unwrap_or(key);
        let near = names
            .iter()
            .map(|n| (strsim::jaro_winkler(field, n), *n))
            .filter(|(score, _)| *score >= 0.8)
            .max_by(|a, b| a.0.total_cmp(&b.0))
            .map(|(_, n)| n);
        let what = if key.contains('[') {
            format!("[[{list}]]")
        } else {
            format!("[{key}]")
        };
        Some(match near {
            Some(n) => format!(
                "{}: `{field}` is not a setting of {what}: did you mean `{n}`?",
                self.at(key)
            ),
            None => format!(
                "{}: `{field}` is not a setting of {what}, which has {}",
                self.at(key),
                names.join(", ")
            ),
        })
    }

    /// `escalate_to` written as a list (`escalate_to = ["bob"]`): it is a table.
    fn explain_escalate_to(&self, key: &str) -> Option<String> {
        let at = &key[..key.find("escalate_to")? + "escalate_to".len()];
        let given = self.given(at)?;
        Some(format!(
            "{}: {} is not a table. escalate_to says where to escalate and who may answer from \
             then on, each on its own line under the route: [routes.escalate_to] then, for \
             example, approvers = [\"bob\"] and direct = [\"bob\"] (see docs/teams.md).",
            self.at(at),
            given.shown()
        ))
    }

    /// Feishu chats (its receivers) written as text in a file: each is a table of its type and
    /// id.
    fn explain_receivers(&self, key: &str) -> Option<String> {
        let name = key.rsplit('.').next().unwrap_or(key);
        let Given::Toml(value) = self.given(key)? else {
            return None;
        };
        let first = match &value {
            toml::Value::Array(items) => items.first()?.as_str()?.to_string(),
            toml::Value::String(s) => s.clone(),
            _ => return None,
        };
        let (kind, id) = match first.split_once(':') {
            Some((kind, id)) => (kind.to_string(), id.to_string()),
            None if first.starts_with("ou_") => ("open_id".into(), first.clone()),
            None if first.starts_with("on_") => ("union_id".into(), first.clone()),
            None if first.contains('@') => ("email".into(), first.clone()),
            None if first.starts_with("oc_") => ("chat_id".into(), first.clone()),
            None => ("user_id".into(), first.clone()),
        };
        Some(format!(
            "{}: {} is text, but each receiver is a table of its type (chat_id, open_id, \
             user_id, union_id or email) and its id: use {name} = [{{ type = {kind:?}, id = \
             {id:?} }}].",
            self.at(key),
            value
        ))
    }

    /// A value that is not one of the names `values` of `key`.
    fn explain_choice(&self, key: &str, given: &Given, values: &[String]) -> String {
        let text = match given {
            Given::Toml(toml::Value::String(s)) | Given::Text(s) => s.trim().to_lowercase(),
            Given::Toml(other) => other.to_string(),
        };
        let near = values
            .iter()
            .map(|v| (strsim::jaro_winkler(&text, v), v))
            .filter(|(score, v)| *score >= 0.7 || v.starts_with(&text) || text.starts_with(*v))
            .max_by(|a, b| a.0.total_cmp(&b.0))
            .map(|(_, v)| v.clone());
        let fix = match near {
            Some(v) => format!("Use {}.", self.write(key, &format!("{v:?}"), &v)),
            None => {
                let first = values.first().cloned().unwrap_or_default();
                format!(
                    "Use one of them, like {}.",
                    self.write(key, &format!("{first:?}"), &first)
                )
            }
        };
        format!(
            "{}: {} is not one of the values {key} takes: {}. {fix}",
            self.at(key),
            given.shown(),
            either(values)
        )
    }

    /// A list of Telegram ids (`users`: user ids, else chat ids) with an item that is not one.
    fn explain_ids(&self, key: &str, given: &Given, users: bool) -> Option<String> {
        let items: Vec<Given> = match given {
            Given::Toml(toml::Value::Array(a)) => a.iter().cloned().map(Given::Toml).collect(),
            Given::Toml(other) => vec![Given::Toml(other.clone())],
            Given::Text(s) => s
                .split(',')
                .map(|p| Given::Text(p.trim().to_string()))
                .collect(),
        };
        let (what, about, example) = if users {
            ("a user id", USER_IDS, USER_EXAMPLE)
        } else {
            ("a chat id", CHAT_IDS, CHAT_EXAMPLE)
        };
        let list = |id: &str| self.write(key, &format!("[{id}]"), id);
        let several = match self.origin(key) {
            Some(Origin::Env(_)) => " (several separated by commas)",
            _ => "",
        };
        for item in &items {
            let text = match item {
                Given::Toml(toml::Value::Integer(n)) => {
                    if users && *n < 0 {
                        return Some(format!(
                            "{}: {n} is a chat id (a negative number), not a user id: chats go in telegram.chats. {USER_IDS}.",
                            self.at(key)
                        ));
                    }
                    continue;
                }
                Given::Toml(toml::Value::String(s)) => s.trim(),
                Given::Text(s) => s.as_str(),
                Given::Toml(other) => {
                    return Some(format!(
                        "{}: {other} is not {what}. {about}; then use {}{several}.",
                        self.at(key),
                        list(example)
                    ));
                }
            };
            let quoted = matches!(item, Given::Toml(_));
            let problem = if text.starts_with('@') {
                format!(
                    "{text:?} is a name, not {what}. {about}; then use {}{several}",
                    list(example)
                )
            } else if let Ok(n) = text.parse::<i64>() {
                if users && n < 0 {
                    format!(
                        "{text} is a chat id (a negative number), not a user id: chats go in telegram.chats. {USER_IDS}"
                    )
                } else if quoted {
                    format!(
                        "{text:?} is in quotes, which makes it text, not a number. Use {} (without quotes)",
                        list(text)
                    )
                } else {
                    continue;
                }
            } else if text.is_empty() {
                format!("an item is empty. {about}")
            } else {
                format!(
                    "{text:?} is not {what}. {about}; then use {}{several}",
                    list(example)
                )
            };
            return Some(format!("{}: {problem}.", self.at(key)));
        }
        None
    }

    /// `server.listen` that is not an IP address and a port.
    fn explain_listen(&self, key: &str, given: &Given) -> Option<String> {
        let raw = match given {
            Given::Toml(toml::Value::String(s)) | Given::Text(s) => s.trim().to_string(),
            Given::Toml(other) => other.to_string(),
        };
        let takes = "It takes an IP address and a port, not a host name: 127.0.0.1:8787 for \
                     this machine only, 0.0.0.0:8787 for every interface";
        let use_ = |addr: &str| format!("Use {}", self.write(key, &format!("{addr:?}"), addr));
        let bare = raw.trim_matches(['[', ']']);
        let problem = if let Ok(ip) = bare.parse::<std::net::IpAddr>() {
            let fixed = std::net::SocketAddr::new(ip, 8787).to_string();
            format!("{raw:?} has no port. {takes}. {}", use_(&fixed))
        } else if raw.parse::<u16>().is_ok() || raw.starts_with(':') {
            let port = raw.trim_start_matches(':');
            format!(
                "{raw:?} has a port but no address. {takes}. {} (this machine only)",
                use_(&format!("127.0.0.1:{port}"))
            )
        } else if let Some((host, port)) = raw.rsplit_once(':') {
            let host = host.trim_matches(['[', ']']);
            match port.parse::<u16>() {
                Err(_) if host.parse::<std::net::IpAddr>().is_ok() => {
                    format!("{port:?} is not a port: ports are numbers from 0 to 65535. {takes}")
                }
                Err(_) => format!("{raw:?} is not an address and a port. {takes}"),
                Ok(port)
                    if host.eq_ignore_ascii_case("localhost")
                        || host.eq_ignore_ascii_case("localhost.") =>
                {
                    format!(
                        "{host:?} is a host name. {takes}. {}",
                        use_(&format!("127.0.0.1:{port}"))
                    )
                }
                Ok(port) if host.is_empty() || host == "*" => {
                    format!(
                        "{raw:?} has no address. {takes}. {}",
                        use_(&format!("0.0.0.0:{port}"))
                    )
                }
                Ok(port) => format!(
                    "{host:?} is a host name. {takes}. {} (every interface), or the address of one",
                    use_(&format!("0.0.0.0:{port}"))
                ),
            }
        } else if raw.eq_ignore_ascii_case("localhost") {
            format!(
                "{raw:?} is a host name, without a port. {takes}. {}",
                use_("127.0.0.1:8787")
            )
        } else {
            format!("{raw:?} is not an address and a port. {takes}")
        };
        Some(format!("{}: {problem}.", self.at(key)))
    }

    /// A value of the wrong type: text for a number (with a unit, perhaps), a negative number
    /// for a count, a word for true or false.
    fn explain_type(&self, key: &str, given: &Given, error: &str) -> Option<String> {
        if is_secret(key) {
            return None;
        }
        let listed = list_number(key);
        let default = self.schema_value(key).or(listed.as_ref())?;
        let default_word = if listed.is_some() {
            ""
        } else {
            " (the default)"
        };
        let text = match given {
            Given::Toml(toml::Value::String(s)) | Given::Text(s) => Some(s.trim()),
            _ => None,
        };
        let at = self.at(key);
        let shown = given.shown();
        match default {
            toml::Value::Integer(d) => {
                let (unit, words) = unit_of(key).unwrap_or(("", ""));
                let what = if words.is_empty() {
                    "a whole number".to_string()
                } else {
                    format!("a whole number of {words} (the unit is in its name)")
                };
                let negative = matches!(given, Given::Toml(toml::Value::Integer(n)) if *n < 0)
                    || text.is_some_and(|t| t.starts_with('-'));
                if negative {
                    return Some(format!(
                        "{at}: {shown} is below zero. It takes {what}, like {d}{default_word}."
                    ));
                }
                if let Some(n) = text.and_then(|t| with_unit(t, unit)) {
                    let n = n.to_string();
                    return Some(format!(
                        "{at}: {shown} is not a number. It takes {what}: use {}.",
                        self.write(key, &n, &n)
                    ));
                }
                let d = d.to_string();
                Some(format!(
                    "{at}: {shown} is not a number. It takes {what}, like {}.",
                    self.write(key, &d, &d)
                ))
            }
            toml::Value::Boolean(_) if error.contains("bool") => Some(format!(
                "{at}: {shown} is not true or false. Use {} or {}.",
                self.write(key, "true", "true"),
                self.write(key, "false", "false")
            )),
            _ => None,
        }
    }

    /// The default value of dotted `key`.
    fn schema_value(&self, key: &str) -> Option<&toml::Value> {
        let mut parts = key.split('.');
        let mut value = self.schema.get(parts.next()?)?;
        for part in parts {
            value = value.as_table()?.get(part)?;
        }
        Some(value)
    }
}

/// An example of a whole-number field of a `[[routes]]` or `[[policy]]` entry, which the
/// defaults do not show (`routes[0].timeout_secs`: 600).
fn list_number(key: &str) -> Option<toml::Value> {
    let (list, rest) = key.split_once('[')?;
    let field = rest.split_once("].")?.1;
    let example = match (list, field) {
        ("routes", "timeout_secs") => 600,
        ("routes", "escalate_after_secs") => 300,
        ("routes" | "policy", "quorum" | "deny_quorum") => 2,
        _ => return None,
    };
    Some(toml::Value::Integer(example))
}

/// Whether `key` holds a secret, whose value a message must not repeat.
fn is_secret(key: &str) -> bool {
    let last = key.rsplit('.').next().unwrap_or(key);
    key == "store.url"
        || ["token", "secret", "encrypt_key", "password"]
            .iter()
            .any(|s| last.contains(s))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_with_units_in_the_settings_unit() {
        assert_eq!(with_unit("10s", "secs"), Some(10));
        assert_eq!(with_unit("5m", "secs"), Some(300));
        assert_eq!(with_unit("1.5s", "ms"), Some(1500));
        assert_eq!(with_unit("2 hours", "secs"), Some(7200));
        assert_eq!(with_unit("1d", "hours"), Some(24));
        assert_eq!(with_unit("1.5s", "secs"), None);
        assert_eq!(with_unit("ten", "secs"), None);
        assert_eq!(with_unit("10", "secs"), None);
    }

    #[test]
    fn secrets_are_known_by_name() {
        for key in [
            "telegram.token",
            "telegram.webhook_secret",
            "auth.agent_tokens",
            "feishu.encrypt_key",
            "store.url",
        ] {
            assert!(is_secret(key), "{key}");
        }
        assert!(!is_secret("telegram.api_url"));
    }
}
