//! Typed settings, loaded with the `config` crate from three layers: the compiled-in
//! `config/default.toml`, an optional file (`--config FILE` or `IMRELAY_CONFIG`), and
//! `IMRELAY__SECTION__KEY` environment variables (which win). Unknown keys are an error.
//!
//! Secrets are [`Secret`] values: they never appear in `Debug` output, logs or
//! `check-config`.

use std::collections::HashMap;
use std::fmt;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use secrecy::{ExposeSecret, SecretString};
use serde::{Deserialize, Serialize};

use crate::interaction::RegistryConfig;
use crate::store::Synchronous;

/// The compiled-in defaults.
pub const DEFAULT_TOML: &str = include_str!("../config/default.toml");

/// Prefix of configuration environment variables.
pub const ENV_PREFIX: &str = "IMRELAY";

/// Upper bound for durations given in seconds: one year.
const YEAR_SECS: u64 = 365 * 24 * 3600;
/// Upper bound for durations given in hours: one year.
const YEAR_HOURS: u64 = 365 * 24;

/// Upper bound of `server.header_read_timeout_secs`.
const HOUR_SECS: u64 = 3600;

/// Upper bound of `server.max_connections`.
const MAX_CONNECTIONS: usize = 1_000_000;

/// How the placeholder tokens in the deployment examples begin.
const PLACEHOLDER_PREFIX: &str = "replace-with-";

/// Deserializes a list given either as a list (files) or as one comma-separated string (the
/// environment, where `config` cannot tell a one-item list from a plain value).
pub(crate) fn list<'de, D, T>(d: D) -> Result<Vec<T>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Deserialize<'de> + std::str::FromStr,
    T::Err: fmt::Display,
{
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum OneOrMany<T> {
        Many(Vec<T>),
        Joined(String),
    }
    match OneOrMany::<T>::deserialize(d)? {
        OneOrMany::Many(v) => Ok(v),
        OneOrMany::Joined(s) => s
            .split(',')
            .map(str::trim)
            .filter(|p| !p.is_empty())
            .map(|p| p.parse::<T>().map_err(serde::de::Error::custom))
            .collect(),
    }
}

/// A secret configuration value: readable only through [`Secret::expose`].
#[derive(Clone, Deserialize)]
#[serde(transparent)]
pub struct Secret(SecretString);

impl std::str::FromStr for Secret {
    type Err = std::convert::Infallible;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Ok(Self::new(s))
    }
}

impl Secret {
    /// Wraps a secret.
    pub fn new(value: impl Into<String>) -> Self {
        Self(SecretString::from(value.into()))
    }

    /// The secret value. Never log it.
    pub fn expose(&self) -> &str {
        self.0.expose_secret()
    }

    /// Whether the secret is empty (i.e. not configured).
    pub fn is_empty(&self) -> bool {
        self.expose().is_empty()
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("[redacted]")
    }
}

impl Serialize for Secret {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(if self.is_empty() { "" } else { "[redacted]" })
    }
}

/// All settings.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Settings {
    /// The HTTP server.
    pub server: ServerSettings,
    /// Bearer tokens.
    pub auth: AuthSettings,
    /// Deadlines and retention.
    pub interactions: InteractionSettings,
    /// Agent hook endpoints.
    pub hooks: HooksSettings,
    /// Persistence.
    pub store: StoreSettings,
    /// Logging.
    pub log: LogSettings,
    /// Delivery retries.
    pub outbox: OutboxSettings,
    /// The audit trail.
    pub audit: AuditSettings,
    /// Webhook targets (`[[webhooks]]`).
    #[serde(default)]
    pub webhooks: Vec<crate::channels::webhook::WebhookSettings>,
    /// The Feishu/Lark channel.
    #[serde(default)]
    pub feishu: crate::channels::feishu::FeishuSettings,
    /// The Telegram channel.
    pub telegram: crate::channels::telegram::TelegramSettings,
}

/// `[audit]`
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct AuditSettings {
    /// Whether state changes and refused answers are appended to the audit trail.
    pub enabled: bool,
}

/// `[outbox]`
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct OutboxSettings {
    /// Delay after a first failed delivery, milliseconds.
    pub retry_base_ms: u64,
    /// Longest delay between attempts, seconds.
    pub retry_max_secs: u64,
}

/// `[server]`
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct ServerSettings {
    /// Listen address.
    pub listen: SocketAddr,
    /// The externally reachable base URL (empty: derived from `listen`).
    pub public_url: String,
    /// Grace period for in-flight requests at shutdown, in seconds.
    pub shutdown_grace_secs: u64,
    /// Client connections served at once; more are refused.
    pub max_connections: usize,
    /// Time a connection has to send a complete request head (also the keep-alive idle
    /// timeout), in seconds.
    pub header_read_timeout_secs: u64,
}

/// `[auth]`
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct AuthSettings {
    /// Tokens with the agent scope.
    #[serde(deserialize_with = "list")]
    pub agent_tokens: Vec<Secret>,
    /// Tokens with the operator scope.
    #[serde(deserialize_with = "list")]
    pub operator_tokens: Vec<Secret>,
}

/// `[interactions]`
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct InteractionSettings {
    /// Default approval deadline, seconds.
    pub approval_timeout_secs: u64,
    /// Default question deadline, seconds.
    pub question_timeout_secs: u64,
    /// Maximum requested deadline, seconds.
    pub max_timeout_secs: u64,
    /// Retention of resolved interactions, hours.
    pub retention_hours: u64,
}

/// `[hooks]`
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct HooksSettings {
    /// `[hooks.claude_code]`
    pub claude_code: ClaudeCodeHookSettings,
}

/// What the Claude Code hook replies when nobody answered in time.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum OnTimeout {
    /// Deny the tool call.
    Deny,
    /// Fall back to Claude Code's own permission prompt.
    Ask,
}

/// `[hooks.claude_code]`
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct ClaudeCodeHookSettings {
    /// How long the hook waits for an answer, seconds.
    pub timeout_secs: u64,
    /// The reply when nobody answered in time.
    pub on_timeout: OnTimeout,
}

/// Which store backend to use.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Backend {
    /// Embedded SQLite (durable).
    Sqlite,
    /// In memory (lost on exit).
    Memory,
}

/// `[store]`
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct StoreSettings {
    /// The backend.
    pub backend: Backend,
    /// SQLite database path.
    pub path: PathBuf,
    /// SQLite synchronous setting.
    pub synchronous: Synchronous,
}

/// Log output format.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum LogFormat {
    /// Human-readable lines.
    Text,
    /// One JSON object per line.
    Json,
}

/// `[log]`
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct LogSettings {
    /// Output format.
    pub format: LogFormat,
    /// Filter directives (RUST_LOG syntax); RUST_LOG wins when set.
    pub level: String,
}

/// Why the configuration could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// A source could not be read or parsed, or a key is unknown or has the wrong type.
    #[error("invalid configuration: {0}")]
    Load(#[from] config::ConfigError),
    /// The values are individually fine but do not make sense together.
    #[error("invalid configuration: {0}")]
    Invalid(String),
}

impl Settings {
    /// Loads the layered configuration using the process environment.
    pub fn load(file: Option<&Path>) -> Result<Self, ConfigError> {
        Self::load_with_env(file, None)
    }

    /// Loads the layered configuration; `env` replaces the process environment when given
    /// (tests use this).
    pub fn load_with_env(
        file: Option<&Path>,
        env: Option<HashMap<String, String>>,
    ) -> Result<Self, ConfigError> {
        let mut builder = config::Config::builder().add_source(config::File::from_str(
            DEFAULT_TOML,
            config::FileFormat::Toml,
        ));
        if let Some(path) = file {
            builder = builder.add_source(
                config::File::from(path)
                    .format(config::FileFormat::Toml)
                    .required(true),
            );
        }
        // Values stay strings; serde converts them to the field's type (lists via `list`).
        let environment = config::Environment::with_prefix(ENV_PREFIX)
            .prefix_separator("__")
            .separator("__")
            .source(env);
        let settings: Settings = builder.add_source(environment).build()?.try_deserialize()?;
        settings.validate()?;
        Ok(settings)
    }

    /// The defaults alone (no file, no environment).
    pub fn defaults() -> Result<Self, ConfigError> {
        Self::load_with_env(None, Some(HashMap::new()))
    }

    /// Checks values that only make sense together, and that durations are in range.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let i = &self.interactions;
        for (name, v, max) in [
            (
                "interactions.approval_timeout_secs",
                i.approval_timeout_secs,
                YEAR_SECS,
            ),
            (
                "interactions.question_timeout_secs",
                i.question_timeout_secs,
                YEAR_SECS,
            ),
            (
                "interactions.max_timeout_secs",
                i.max_timeout_secs,
                YEAR_SECS,
            ),
            (
                "interactions.retention_hours",
                i.retention_hours,
                YEAR_HOURS,
            ),
            (
                "hooks.claude_code.timeout_secs",
                self.hooks.claude_code.timeout_secs,
                YEAR_SECS,
            ),
        ] {
            if v == 0 {
                return Err(ConfigError::Invalid(format!("{name} must be at least 1")));
            }
            if v > max {
                return Err(ConfigError::Invalid(format!(
                    "{name} must be at most {max} (one year), got {v}"
                )));
            }
        }
        if !self.server.listen.ip().is_loopback() {
            let mut missing = Vec::new();
            if !self.auth.agent_tokens.iter().any(|t| !t.is_empty()) {
                missing.push("auth.agent_tokens");
            }
            if !self.auth.operator_tokens.iter().any(|t| !t.is_empty()) {
                missing.push("auth.operator_tokens");
            }
            if !missing.is_empty() {
                return Err(ConfigError::Invalid(format!(
                    "server.listen = {} is not a loopback address, so tokens are required: set {}",
                    self.server.listen,
                    missing.join(" and ")
                )));
            }
        }
        if self
            .auth
            .agent_tokens
            .iter()
            .chain(&self.auth.operator_tokens)
            .any(|t| t.is_empty())
        {
            return Err(ConfigError::Invalid(
                "auth tokens must not be empty strings".into(),
            ));
        }
        // The deployment examples ship these placeholders; copied unchanged they would let
        // anyone who has read the examples answer for the operator.
        if let Some(key) = [
            ("auth.agent_tokens", &self.auth.agent_tokens),
            ("auth.operator_tokens", &self.auth.operator_tokens),
        ]
        .iter()
        .find_map(|(key, tokens)| {
            tokens
                .iter()
                .any(|t| t.expose().starts_with(PLACEHOLDER_PREFIX))
                .then_some(key)
        }) {
            return Err(ConfigError::Invalid(format!(
                "{key} still holds the example placeholder (\"{PLACEHOLDER_PREFIX}...\"): set a real token, e.g. from `openssl rand -hex 32`"
            )));
        }
        if self.outbox.retry_base_ms == 0 || self.outbox.retry_max_secs == 0 {
            return Err(ConfigError::Invalid(
                "outbox.retry_base_ms and outbox.retry_max_secs must be at least 1".into(),
            ));
        }
        let server = &self.server;
        if !(1..=MAX_CONNECTIONS).contains(&server.max_connections) {
            return Err(ConfigError::Invalid(format!(
                "server.max_connections must be between 1 and {MAX_CONNECTIONS}, got {}",
                server.max_connections
            )));
        }
        if !(1..=HOUR_SECS).contains(&server.header_read_timeout_secs) {
            return Err(ConfigError::Invalid(format!(
                "server.header_read_timeout_secs must be between 1 and {HOUR_SECS} (one hour), got {}",
                server.header_read_timeout_secs
            )));
        }
        crate::channels::webhook::validate_all(&self.webhooks).map_err(ConfigError::Invalid)?;
        self.telegram.validate().map_err(ConfigError::Invalid)?;
        let url = self.server.public_url.trim();
        if !(url.is_empty() || url.starts_with("http://") || url.starts_with("https://")) {
            return Err(ConfigError::Invalid(format!(
                "server.public_url must start with http:// or https:// (got {url:?})"
            )));
        }
        self.feishu.validate().map_err(ConfigError::Invalid)?;
        let (tg, fs) = (&self.telegram, &self.feishu);
        if tg.enabled
            && tg.mode == crate::channels::telegram::Mode::Webhook
            && fs.enabled
            && fs.mode == crate::channels::feishu::Mode::Webhook
            && tg.webhook_path == fs.callback_path
        {
            return Err(ConfigError::Invalid(format!(
                "telegram.webhook_path and feishu.callback_path are both {:?}: give each channel its own path",
                tg.webhook_path
            )));
        }
        Ok(())
    }

    /// The registry's view of the settings.
    pub fn registry_config(&self) -> RegistryConfig {
        let i = &self.interactions;
        RegistryConfig {
            approval_timeout: Duration::from_secs(i.approval_timeout_secs),
            question_timeout: Duration::from_secs(i.question_timeout_secs),
            max_timeout: Duration::from_secs(i.max_timeout_secs),
            retention: Duration::from_secs(i.retention_hours.saturating_mul(3600)),
            audit: self.audit.enabled,
            ..RegistryConfig::default()
        }
    }

    /// The outbox retry policy.
    pub fn backoff(&self) -> crate::outbox::Backoff {
        crate::outbox::Backoff {
            base: Duration::from_millis(self.outbox.retry_base_ms),
            max: Duration::from_secs(self.outbox.retry_max_secs),
        }
    }

    /// The base URL people and integrations reach this server at, without a trailing slash.
    pub fn public_url(&self) -> String {
        let url = self.server.public_url.trim().trim_end_matches('/');
        if url.is_empty() {
            format!("http://{}", self.server.listen)
        } else {
            url.to_string()
        }
    }

    /// The effective configuration as TOML, every secret redacted.
    pub fn redacted_toml(&self) -> Result<String, ConfigError> {
        toml::to_string_pretty(self).map_err(|e| ConfigError::Invalid(e.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &[(&str, &str)]) -> Option<HashMap<String, String>> {
        Some(
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        )
    }

    #[test]
    fn defaults_load_and_match_the_documented_values() {
        let s = Settings::defaults().unwrap();
        assert_eq!(s.server.listen.to_string(), "127.0.0.1:8787");
        assert_eq!(s.interactions.approval_timeout_secs, 300);
        assert_eq!(s.interactions.question_timeout_secs, 600);
        assert_eq!(s.interactions.max_timeout_secs, 3600);
        assert_eq!(s.interactions.retention_hours, 24);
        assert_eq!(s.hooks.claude_code.timeout_secs, 590);
        assert_eq!(s.hooks.claude_code.on_timeout, OnTimeout::Deny);
        assert_eq!(s.store.backend, Backend::Sqlite);
        assert_eq!(s.log.format, LogFormat::Text);
    }

    /// Every key under `v` as (section, key), sections dotted (`hooks.claude_code`).
    fn keys(v: &toml::Value, section: &str, out: &mut Vec<(String, String)>) {
        let Some(table) = v.as_table() else { return };
        for (k, child) in table {
            match child {
                toml::Value::Table(_) if section.is_empty() => keys(child, k, out),
                toml::Value::Table(_) => keys(child, &format!("{section}.{k}"), out),
                _ => out.push((section.to_string(), k.clone())),
            }
        }
    }

    /// The text of `doc` under the heading naming `title`, up to the next heading.
    fn doc_section(doc: &str, title: &str) -> String {
        let mut lines = doc
            .lines()
            .skip_while(|l| !(l.starts_with('#') && l.contains(title)));
        assert!(
            lines.next().is_some(),
            "docs/configuration.md has no heading {title}"
        );
        lines
            .take_while(|l| !l.starts_with('#'))
            .collect::<Vec<_>>()
            .join("\n")
    }

    #[test]
    fn every_setting_is_in_the_defaults_file_and_documented() {
        let doc = include_str!("../docs/configuration.md");
        let defaults: toml::Value = toml::from_str(DEFAULT_TOML).unwrap();
        let effective = toml::Value::try_from(Settings::defaults().unwrap()).unwrap();
        let mut all = Vec::new();
        keys(&effective, "", &mut all);
        for (section, key) in all.iter().filter(|(s, _)| !s.is_empty()) {
            let mut table = &defaults;
            for part in section.split('.') {
                table = &table[part];
            }
            assert!(
                table.get(key).is_some(),
                "{section}.{key} is missing from config/default.toml"
            );
            assert!(
                doc_section(doc, &format!("`[{section}]`")).contains(&format!("`{key}`")),
                "{section}.{key} is not in docs/configuration.md"
            );
        }
        // Webhook targets: the commented example in the defaults, and the table.
        let target: crate::channels::webhook::WebhookSettings =
            toml::from_str("name = \"x\"\nurl = \"http://x\"\nsecret = \"whsec_x\"").unwrap();
        let mut target_keys = Vec::new();
        keys(
            &toml::Value::try_from(target).unwrap(),
            "webhooks",
            &mut target_keys,
        );
        assert!(target_keys.len() >= 8, "{target_keys:?}");
        for (_, key) in target_keys {
            assert!(
                DEFAULT_TOML.contains(&format!("# {key} =")),
                "webhooks.{key} is missing from config/default.toml"
            );
            assert!(
                doc_section(doc, "`[[webhooks]]`").contains(&format!("`{key}`")),
                "webhooks.{key} is not in docs/configuration.md"
            );
        }
    }

    #[test]
    fn environment_wins_and_lists_split() {
        let s = Settings::load_with_env(
            None,
            env(&[
                ("IMRELAY__SERVER__LISTEN", "127.0.0.1:9000"),
                ("IMRELAY__AUTH__AGENT_TOKENS", "a1,a2"),
                ("IMRELAY__AUTH__OPERATOR_TOKENS", "12345"),
                ("IMRELAY__INTERACTIONS__APPROVAL_TIMEOUT_SECS", "77"),
                ("IMRELAY__HOOKS__CLAUDE_CODE__ON_TIMEOUT", "ask"),
                ("IMRELAY_CONFIG", "ignored.toml"),
            ]),
        )
        .unwrap();
        assert_eq!(s.server.listen.port(), 9000);
        assert_eq!(s.auth.agent_tokens.len(), 2);
        assert_eq!(s.auth.agent_tokens[1].expose(), "a2");
        assert_eq!(s.auth.operator_tokens[0].expose(), "12345");
        assert_eq!(s.interactions.approval_timeout_secs, 77);
        assert_eq!(s.hooks.claude_code.on_timeout, OnTimeout::Ask);
    }

    #[test]
    fn unknown_keys_are_errors_naming_the_key() {
        let err = Settings::load_with_env(None, env(&[("IMRELAY__SERVER__LISTN", "x")]))
            .unwrap_err()
            .to_string();
        assert!(err.contains("listn"), "{err}");
    }

    #[test]
    fn unknown_keys_in_a_file_are_errors_naming_the_key() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.toml");
        std::fs::write(
            &path,
            "[hooks.claude_code]\ntimeout_secs = 100\non_timeuot = \"ask\"\n",
        )
        .unwrap();
        let err = Settings::load_with_env(Some(&path), env(&[]))
            .unwrap_err()
            .to_string();
        assert!(err.contains("on_timeuot"), "{err}");
    }

    #[test]
    fn durations_beyond_a_year_are_refused_naming_the_key() {
        for (var, key) in [
            (
                "IMRELAY__INTERACTIONS__RETENTION_HOURS",
                "interactions.retention_hours",
            ),
            (
                "IMRELAY__INTERACTIONS__MAX_TIMEOUT_SECS",
                "interactions.max_timeout_secs",
            ),
            (
                "IMRELAY__INTERACTIONS__APPROVAL_TIMEOUT_SECS",
                "interactions.approval_timeout_secs",
            ),
            (
                "IMRELAY__HOOKS__CLAUDE_CODE__TIMEOUT_SECS",
                "hooks.claude_code.timeout_secs",
            ),
        ] {
            let err = Settings::load_with_env(None, env(&[(var, "18446744073709551615")]))
                .unwrap_err()
                .to_string();
            assert!(err.contains(key), "{err}");
            assert!(err.contains("at most"), "{err}");
        }
        let s = Settings::load_with_env(
            None,
            env(&[("IMRELAY__INTERACTIONS__RETENTION_HOURS", "8760")]),
        )
        .unwrap();
        assert_eq!(s.interactions.retention_hours, 8760);
    }

    #[test]
    fn connection_bounds_out_of_range_are_refused_naming_the_key() {
        for (var, value, key) in [
            (
                "IMRELAY__SERVER__MAX_CONNECTIONS",
                "0",
                "server.max_connections",
            ),
            (
                "IMRELAY__SERVER__MAX_CONNECTIONS",
                "1000001",
                "server.max_connections",
            ),
            (
                "IMRELAY__SERVER__HEADER_READ_TIMEOUT_SECS",
                "0",
                "server.header_read_timeout_secs",
            ),
            (
                "IMRELAY__SERVER__HEADER_READ_TIMEOUT_SECS",
                "3601",
                "server.header_read_timeout_secs",
            ),
        ] {
            let err = Settings::load_with_env(None, env(&[(var, value)]))
                .unwrap_err()
                .to_string();
            assert!(err.contains(key), "{value}: {err}");
            assert!(err.contains("between 1 and"), "{value}: {err}");
        }
        let s = Settings::load_with_env(
            None,
            env(&[
                ("IMRELAY__SERVER__MAX_CONNECTIONS", "1000000"),
                ("IMRELAY__SERVER__HEADER_READ_TIMEOUT_SECS", "3600"),
            ]),
        )
        .unwrap();
        assert_eq!(s.server.max_connections, 1_000_000);
        assert_eq!(s.server.header_read_timeout_secs, 3600);
    }

    #[test]
    fn non_loopback_without_tokens_is_refused() {
        let err =
            Settings::load_with_env(None, env(&[("IMRELAY__SERVER__LISTEN", "0.0.0.0:8787")]))
                .unwrap_err()
                .to_string();
        assert!(err.contains("auth.agent_tokens"), "{err}");
        assert!(err.contains("auth.operator_tokens"), "{err}");
        assert!(
            Settings::load_with_env(
                None,
                env(&[
                    ("IMRELAY__SERVER__LISTEN", "0.0.0.0:8787"),
                    ("IMRELAY__AUTH__AGENT_TOKENS", "a"),
                    ("IMRELAY__AUTH__OPERATOR_TOKENS", "o"),
                ])
            )
            .is_ok()
        );
    }

    #[test]
    fn secrets_are_redacted() {
        let s =
            Settings::load_with_env(None, env(&[("IMRELAY__AUTH__OPERATOR_TOKENS", "hunter2")]))
                .unwrap();
        let toml = s.redacted_toml().unwrap();
        assert!(!toml.contains("hunter2"));
        assert!(toml.contains("[redacted]"));
        assert!(!format!("{s:?}").contains("hunter2"));
    }

    #[test]
    fn two_channels_on_one_path_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.toml");
        let config = |feishu_path: &str| {
            format!(
                r#"
[telegram]
enabled = true
token = "123456:ABC-def_123"
chats = [1]
approvers = [1]
mode = "webhook"
webhook_url = "https://relay.example.com/hooks/in"
webhook_path = "/hooks/in"

[feishu]
enabled = true
mode = "webhook"
app_id = "cli_1"
app_secret = "s"
verification_token = "v"
receivers = [{{ type = "chat_id", id = "oc_1" }}]
approvers = ["ou_1"]
callback_path = "{feishu_path}"
"#
            )
        };
        std::fs::write(&path, config("/hooks/in")).unwrap();
        let err = Settings::load_with_env(Some(&path), env(&[]))
            .unwrap_err()
            .to_string();
        assert!(err.contains("both \"/hooks/in\""), "{err}");
        std::fs::write(&path, config("/feishu/callback")).unwrap();
        Settings::load_with_env(Some(&path), env(&[])).unwrap();
    }

    #[test]
    fn files_override_defaults() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.toml");
        std::fs::write(&path, "[interactions]\napproval_timeout_secs = 42\n").unwrap();
        let s = Settings::load_with_env(Some(&path), env(&[])).unwrap();
        assert_eq!(s.interactions.approval_timeout_secs, 42);
        assert_eq!(s.interactions.question_timeout_secs, 600);
        assert!(Settings::load_with_env(Some(&dir.path().join("missing.toml")), env(&[])).is_err());
    }
}
