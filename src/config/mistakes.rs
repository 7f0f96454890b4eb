//! Every configuration mistake of a load at once, not only the first: a value of the wrong
//! type in one section does not hide another's, nor an unknown key a value out of range.
//! Each section is read on its own so that one bad value leaves the others to be checked.

use serde::de::DeserializeOwned;

use super::ConfigError;

/// The problems of a load as one error: a single one as it is, several numbered, one a line.
pub(super) fn all_of(problems: Vec<String>) -> Result<(), ConfigError> {
    if problems.is_empty() {
        Ok(())
    } else {
        Err(joined(problems))
    }
}

/// `problems` (at least one) as one error.
pub(super) fn joined(problems: Vec<String>) -> ConfigError {
    if problems.len() == 1 {
        return ConfigError::Invalid(problems.concat());
    }
    let listed: Vec<String> = problems
        .iter()
        .enumerate()
        .map(|(i, p)| format!("{}. {p}", i + 1))
        .collect();
    ConfigError::Invalid(format!(
        "{} mistakes, each with its fix:\n  {}",
        problems.len(),
        listed.join("\n  ")
    ))
}

impl ConfigError {
    /// The message alone, without "invalid configuration: ".
    pub(super) fn into_message(self) -> String {
        match self {
            Self::Load(m) | Self::Invalid(m) => m,
        }
    }
}

/// `error`, the error of reading the value at `section`, with its key made whole
/// (`server` and `listen` → `server.listen`; `policy` and `[0]decision` → `policy[0]decision`).
fn under(section: &str, error: config::ConfigError) -> config::ConfigError {
    let whole = |key: Option<String>| {
        Some(match key {
            Some(k) if k.starts_with('[') => format!("{section}{k}"),
            Some(k) if !k.is_empty() => format!("{section}.{k}"),
            _ => section.to_string(),
        })
    };
    match error {
        config::ConfigError::Type {
            origin,
            unexpected,
            expected,
            key,
        } => config::ConfigError::Type {
            origin,
            unexpected,
            expected,
            key: whole(key),
        },
        config::ConfigError::At { error, origin, key } => config::ConfigError::At {
            error,
            origin,
            key: whole(key),
        },
        config::ConfigError::NotFound(key) => {
            config::ConfigError::NotFound(whole(Some(key)).unwrap_or_default())
        }
        other => config::ConfigError::At {
            error: Box::new(other),
            origin: None,
            key: whole(None),
        },
    }
}

/// Most mistakes said of one section.
const MAX_PER_SECTION: usize = 16;

/// Reads section `key` of `cfg` as a `T`, adding its errors (if any) to `out`: after each,
/// the value at fault is taken out and the section read again, so every value of the wrong
/// type in it is said, not only the first. A section that is absent is left to the whole read
/// (most have defaults).
pub(super) fn one<T: DeserializeOwned>(
    cfg: &config::Config,
    key: &str,
    out: &mut Vec<config::ConfigError>,
) {
    let Ok(mut value) = cfg.get::<config::Value>(key) else {
        return;
    };
    let mut taken: Vec<(String, String)> = Vec::new();
    for _ in 0..MAX_PER_SECTION {
        let Err(e) = T::deserialize(value.clone()) else {
            return;
        };
        // A field taken out that the section needs (its default went with it): the mistake
        // was said already, and the fields after it cannot be read.
        let text = e.to_string();
        let at = error_key(&e);
        if taken.iter().any(|(whole, name)| {
            at.as_deref() == Some(whole.as_str())
                || text.contains(&format!("missing field `{name}`"))
        }) {
            return;
        }
        out.push(under(key, e));
        let Some(whole) = at else { return };
        match take_out(&mut value, &path(&whole)) {
            Some(name) => taken.push((whole, name)),
            None => return,
        }
    }
}

/// The key an error is about, relative to what was read (`listen`, `[0]decision`).
fn error_key(e: &config::ConfigError) -> Option<String> {
    match e {
        config::ConfigError::Type { key, .. } | config::ConfigError::At { key, .. } => key.clone(),
        config::ConfigError::NotFound(key) => Some(key.clone()),
        _ => None,
    }
}

/// One step of a key: a table's key or an array's index.
#[derive(Debug, PartialEq)]
enum Step {
    Key(String),
    Index(usize),
}

/// `tls.cert`, `[0]decision` and `routes[1].people` as steps; none for what is not a path.
fn path(key: &str) -> Vec<Step> {
    let mut steps = Vec::new();
    let mut name = String::new();
    let mut chars = key.chars();
    let flush = |name: &mut String, steps: &mut Vec<Step>| {
        if !name.is_empty() {
            steps.push(Step::Key(std::mem::take(name)));
        }
    };
    while let Some(c) = chars.next() {
        match c {
            '.' => flush(&mut name, &mut steps),
            '[' => {
                flush(&mut name, &mut steps);
                let digits: String = chars.by_ref().take_while(|c| *c != ']').collect();
                match digits.parse() {
                    Ok(k) => steps.push(Step::Index(k)),
                    Err(_) => return Vec::new(),
                }
            }
            c => name.push(c),
        }
    }
    flush(&mut name, &mut steps);
    steps
}

/// Takes the value at `steps` out of its table, so that the field's default (or the next
/// mistake) shows; its name, or `None` when the path does not end at a table's key (an array's
/// element is never taken out: the indices of the others would shift).
fn take_out(value: &mut config::Value, steps: &[Step]) -> Option<String> {
    let (last, before) = steps.split_last()?;
    let mut at = value;
    for step in before {
        at = match (step, &mut at.kind) {
            (Step::Key(k), config::ValueKind::Table(t)) => t.get_mut(k)?,
            (Step::Index(i), config::ValueKind::Array(a)) => a.get_mut(*i)?,
            _ => return None,
        };
    }
    match (last, &mut at.kind) {
        (Step::Key(k), config::ValueKind::Table(t)) => t.remove(k).map(|_| k.clone()),
        _ => None,
    }
}

/// Reads one section, adding its error to the list.
pub(super) type ReadSection = fn(&config::Config, &str, &mut Vec<config::ConfigError>);

/// The error of each section of `cfg` that cannot be read: the sections of
/// [`Settings`](super::Settings) other than the channels', then each channel's in the
/// registry's order, then the lists of people and routes.
pub(super) fn section_errors(cfg: &config::Config) -> Vec<config::ConfigError> {
    let mut out = Vec::new();
    let read: Vec<(&str, ReadSection)> = vec![
        ("server", one::<super::ServerSettings>),
        ("auth", one::<super::AuthSettings>),
        ("interactions", one::<super::InteractionSettings>),
        ("hooks", one::<super::HooksSettings>),
        ("mcp", one::<crate::mcp::McpSettings>),
        ("store", one::<super::StoreSettings>),
        ("log", one::<super::LogSettings>),
        ("outbox", one::<super::OutboxSettings>),
        ("audit", one::<super::AuditSettings>),
        ("policy", one::<Vec<super::policy::PolicyRuleSettings>>),
    ];
    let channels = super::Settings::channel_sections().map(|c| (c.name, c.read));
    let after: Vec<(&str, ReadSection)> = vec![
        ("passkeys", one::<super::phone::PasskeySettings>),
        ("people", one::<Vec<super::teams::PersonSettings>>),
        ("groups", one::<Vec<super::teams::GroupSettings>>),
        ("routes", one::<Vec<super::teams::RouteSettings>>),
    ];
    for (key, f) in read.into_iter().chain(channels).chain(after) {
        f(cfg, key, &mut out);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_reads_as_its_steps_and_only_a_tables_key_is_taken_out() {
        assert_eq!(
            path("[0]decision"),
            vec![Step::Index(0), Step::Key("decision".into())]
        );
        assert_eq!(
            path("tls.cert"),
            vec![Step::Key("tls".into()), Step::Key("cert".into())]
        );
        assert!(path("[x]").is_empty());
        let cfg = config::Config::builder()
            .add_source(config::File::from_str(
                "[s]\na = 1\nlist = [{ b = 2 }]\n",
                config::FileFormat::Toml,
            ))
            .build()
            .unwrap();
        let mut v = cfg.get::<config::Value>("s").unwrap();
        assert_eq!(take_out(&mut v, &path("list[0]b")), Some("b".into()));
        assert_eq!(take_out(&mut v, &path("list[0]")), None, "an element stays");
        assert_eq!(take_out(&mut v, &path("a")), Some("a".into()));
        assert_eq!(take_out(&mut v, &path("a")), None, "taken already");
    }
}
