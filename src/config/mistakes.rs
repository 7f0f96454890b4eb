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

/// Reads section `key` of `cfg` as a `T`, adding its error (if any) to `out`. A section
/// that is absent is left to the whole read (most have defaults).
fn one<T: DeserializeOwned>(cfg: &config::Config, key: &str, out: &mut Vec<config::ConfigError>) {
    if let Ok(value) = cfg.get::<config::Value>(key)
        && let Err(e) = T::deserialize(value)
    {
        out.push(under(key, e));
    }
}

/// Reads one section, adding its error to the list.
type ReadSection = fn(&config::Config, &str, &mut Vec<config::ConfigError>);

/// The error of each section of `cfg` that cannot be read, in the order of
/// [`Settings`](super::Settings)' fields.
pub(super) fn section_errors(cfg: &config::Config) -> Vec<config::ConfigError> {
    use crate::channels::{
        dingtalk, discord, feishu, matrix, ntfy, slack, telegram, webhook, wecom,
    };
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
        ("webhooks", one::<Vec<webhook::WebhookSettings>>),
        ("feishu", one::<feishu::FeishuSettings>),
        ("telegram", one::<telegram::TelegramSettings>),
        ("policy", one::<Vec<super::policy::PolicyRuleSettings>>),
        ("slack", one::<slack::SlackSettings>),
        ("wecom", one::<wecom::WeComSettings>),
        ("dingtalk", one::<dingtalk::DingTalkSettings>),
        ("ntfy", one::<ntfy::NtfySettings>),
        ("discord", one::<discord::DiscordSettings>),
        ("matrix", one::<matrix::MatrixSettings>),
        ("people", one::<Vec<super::teams::PersonSettings>>),
        ("groups", one::<Vec<super::teams::GroupSettings>>),
        ("routes", one::<Vec<super::teams::RouteSettings>>),
    ];
    for (key, f) in read {
        f(cfg, key, &mut out);
    }
    out
}
