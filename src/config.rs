//! Typed settings, loaded with the `config` crate from three layers: the compiled-in
//! `config/default.toml`, an optional file (`--config FILE` or `IMRELAY_CONFIG`, else the
//! first found of `./imrelay.toml`, the user's and the system's: see [`discovery`]), and
//! `IMRELAY__SECTION__KEY` environment variables (which win). Unknown keys are an error.
//!
//! Secrets are [`Secret`] values: they never appear in `Debug` output, logs, error messages
//! or `check-config`.
//!
//! Every error names where the value came from (the file and key, or the environment
//! variable) and, where the fix is obvious, says what it is.

mod aliases;
mod auth;
pub mod discovery;
mod mistakes;
pub mod phone;
pub mod policy;
mod print;
mod ranges;
mod reach;
mod sections;
mod sources;
mod steering;
mod strict;
pub mod teams;

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use secrecy::SecretString;
use serde::{Deserialize, Serialize};

pub use crate::agents::acp::AcpHookSettings;
pub use crate::agents::claude_code::ClaudeCodeHookSettings;
pub use crate::agents::codex::CodexHookSettings;
pub use crate::agents::{HooksSettings, OnTimeout};
use crate::interaction::RegistryConfig;
pub use crate::settings::Secret;
use crate::store::Synchronous;
pub use auth::{AuthSettings, MAX_LABEL_CHARS, OperatorToken};
pub use discovery::ConfigFile;

/// The compiled-in defaults.
pub(crate) const DEFAULT_TOML: &str = include_str!("../config/default.toml");

/// Prefix of configuration environment variables.
pub(crate) const ENV_PREFIX: &str = "IMRELAY";

/// How the placeholder tokens in the deployment examples begin.
const PLACEHOLDER_PREFIX: &str = "replace-with-";

/// The fewest characters a token may have.
pub(crate) const MIN_TOKEN_CHARS: usize = 16;

/// How to make a good token, for messages about bad ones.
const MAKE_A_TOKEN: &str = "make one with `openssl rand -hex 32`";

/// Makes `Settings` with a field for each channel of the list it is given
/// (`crate::channels::each_channel!`), `Settings::channels`, and what the rest of the settings
/// tree reads of every channel section: so a channel is named once, in that list.
macro_rules! settings {
    ($($(#[$serde:meta])* $name:ident: $module:ident::$section:ident,)*) => {
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
            pub hooks: crate::agents::HooksSettings,
            /// The MCP endpoint.
            pub mcp: crate::mcp::McpSettings,
            /// Persistence.
            pub store: StoreSettings,
            /// Logging.
            pub log: LogSettings,
            /// Delivery retries.
            pub outbox: OutboxSettings,
            /// The audit trail.
            pub audit: AuditSettings,
            /// Policy rules (`[[policy]]`), weighed at creation in this order.
            #[serde(default)]
            pub policy: Vec<policy::PolicyRuleSettings>,
            /// Passkeys for `step_up` answers: how a person's first one is allowed.
            #[serde(default)]
            pub passkeys: phone::PasskeySettings,
            /// People and their identities on each channel (`[[people]]`).
            #[serde(default)]
            pub people: Vec<teams::PersonSettings>,
            /// Groups of people (`[[groups]]`).
            #[serde(default)]
            pub groups: Vec<teams::GroupSettings>,
            /// Routes (`[[routes]]`): first match wins.
            #[serde(default)]
            pub routes: Vec<teams::RouteSettings>,
            $(
                #[doc = concat!("The `", stringify!($name), "` channel's settings section.")]
                $(#[$serde])*
                pub $name: crate::channels::$module::$section,
            )*
        }

        /// How many channels there are.
        const CHANNEL_COUNT: usize = [$(stringify!($name)),*].len();

        impl Settings {
            /// The channel registry: every channel's settings section, in the order of
            /// `crate::channels::each_channel!`: the order they are checked, installed and
            /// tried by `imrelay doctor`.
            pub fn channels(&self) -> [&dyn crate::channels::Channel; CHANNEL_COUNT] {
                [$(&self.$name),*]
            }

            /// Each channel's section, in the registry's order: what the settings tree does
            /// with it besides reading it as a field.
            fn channel_sections() -> [sections::Section; CHANNEL_COUNT] {
                [$(
                    sections::Section {
                        name: stringify!($name),
                        read: mistakes::one::<crate::channels::$module::$section>,
                        print: |s, out| print::any(out, stringify!($name), &s.$name),
                        values: sections::values_of::<crate::channels::$module::$section>,
                    }
                ),*]
            }
        }
    };
}

crate::channels::each_channel!(settings);

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
    /// Time a request body has to arrive in full, from the end of its head, in seconds.
    pub body_timeout_secs: u64,
    /// Bytes per second a request body must keep up with after a short grace (0: none).
    pub body_min_bytes_per_sec: u64,
    /// Event streams (`GET /v1/events`) open at once; more are refused.
    pub max_event_streams: usize,
    /// Requests one token (without tokens: this machine, per scope) may have in flight at
    /// once; more get `429 connection_quota`.
    pub max_connections_per_token: usize,
}

impl ServerSettings {
    /// `public_url` is empty or an `http://` or `https://` URL.
    fn check_public_url(&self) -> Result<(), ConfigError> {
        let url = self.public_url.trim();
        if !(url.is_empty() || url.starts_with("http://") || url.starts_with("https://")) {
            return Err(ConfigError::Invalid(format!(
                "server.public_url must start with http:// or https:// (got {url:?}): it is the \
                 address people and integrations reach this server at, like \
                 \"https://{}\"",
                url.split("://")
                    .last()
                    .unwrap_or(url)
                    .trim_start_matches('/')
            )));
        }
        if !url.is_empty() && url::Url::parse(url).is_err() {
            return Err(ConfigError::Invalid(format!(
                "server.public_url is not a URL (got {url:?}): it is the address people and \
                 integrations reach this server at, like \"https://imrelay.example.com\""
            )));
        }
        Ok(())
    }
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
    /// About how many bytes of recent events are kept for clients resuming their event
    /// stream.
    pub event_buffer_bytes: usize,
    /// Bytes the pending interactions held by this process may take in all.
    pub max_pending_bytes: usize,
    /// Bytes the pending interactions created with one agent token may take.
    pub max_pending_bytes_per_token: usize,
    /// How long a session grant ("allow similar calls for this session") lasts, hours.
    pub session_grant_hours: u64,
}

/// Which store backend to use.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Backend {
    /// Embedded SQLite (durable).
    Sqlite,
    /// In memory (lost on exit).
    Memory,
    /// PostgreSQL (several replicas may share it).
    Postgres,
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
    /// PostgreSQL connection URL (`postgres://user:password@host:5432/database`).
    pub url: Secret,
    /// PostgreSQL connections kept for queries, per process.
    pub pool_size: usize,
    /// The PostgreSQL schema imrelay's tables live in.
    pub schema: String,
    /// PostgreSQL: how long a query waits for a free pooled connection before it fails with
    /// 503, milliseconds.
    pub pool_wait_ms: u64,
    /// PostgreSQL: how often each process re-checks what it holds against the database,
    /// milliseconds (a backstop for missed change notifications).
    pub recheck_interval_ms: u64,
    /// PostgreSQL: how long the lease of the process that polls Telegram lasts,
    /// milliseconds; another process takes over within this time when it dies.
    pub leader_lease_ms: u64,
}

/// Most PostgreSQL connections one process may keep.
const MAX_POOL_SIZE: usize = 1000;

impl StoreSettings {
    /// Checks the PostgreSQL settings (whatever the backend, so that a bad value does not lie
    /// in wait), and that PostgreSQL has a URL when it is the backend.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.pool_size == 0 || self.pool_size > MAX_POOL_SIZE {
            return Err(ConfigError::Invalid(format!(
                "store.pool_size must be 1 to {MAX_POOL_SIZE}, got {}",
                self.pool_size
            )));
        }
        crate::store::postgres::check_schema_name(&self.schema)
            .map_err(|e| ConfigError::Invalid(format!("store.schema: {e}")))?;
        if !(1..=600_000).contains(&self.pool_wait_ms) {
            return Err(ConfigError::Invalid(format!(
                "store.pool_wait_ms must be 1 to 600000, got {}",
                self.pool_wait_ms
            )));
        }
        if !(100..=3_600_000).contains(&self.recheck_interval_ms) {
            return Err(ConfigError::Invalid(format!(
                "store.recheck_interval_ms must be 100 to 3600000, got {}",
                self.recheck_interval_ms
            )));
        }
        if !(1_000..=600_000).contains(&self.leader_lease_ms) {
            return Err(ConfigError::Invalid(format!(
                "store.leader_lease_ms must be 1000 to 600000, got {}",
                self.leader_lease_ms
            )));
        }
        if self.backend == Backend::Postgres && self.url.expose().trim().is_empty() {
            return Err(ConfigError::Invalid(
                "store.backend is \"postgres\" but store.url is empty: set it (e.g. \
                 IMRELAY__STORE__URL=postgres://imrelay:PASSWORD@db.example:5432/imrelay)"
                    .into(),
            ));
        }
        Ok(())
    }

    /// The PostgreSQL settings as the store takes them.
    pub fn postgres(&self) -> crate::store::PostgresOptions {
        crate::store::PostgresOptions {
            schema: self.schema.clone(),
            pool_size: self.pool_size,
            pool_wait: Duration::from_millis(self.pool_wait_ms),
            ..crate::store::PostgresOptions::new(SecretString::from(self.url.expose().to_string()))
        }
    }
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

/// Why the configuration could not be loaded. The message is complete (it names the key,
/// where its value came from and, where obvious, the fix), so the error has no source.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// A source could not be read or parsed, or a key is unknown or has the wrong type.
    #[error("invalid configuration: {0}")]
    Load(String),
    /// The values are individually fine but do not make sense together.
    #[error("invalid configuration: {0}")]
    Invalid(String),
}

/// The process environment's variables. Those whose name or value is not UTF-8 are left
/// out (they cannot be settings), except that such a value for an `IMRELAY__` variable is
/// an error rather than silently ignored.
fn process_env() -> Result<HashMap<String, String>, ConfigError> {
    let mut env = HashMap::new();
    for (name, value) in std::env::vars_os() {
        let Ok(name) = name.into_string() else {
            continue;
        };
        match value.into_string() {
            Ok(value) => {
                env.insert(name, value);
            }
            Err(_) if name.to_uppercase().starts_with(&format!("{ENV_PREFIX}__")) => {
                return Err(ConfigError::Load(format!(
                    "the environment variable {name} is not valid UTF-8"
                )));
            }
            Err(_) => {}
        }
    }
    Ok(env)
}

/// Log levels, most verbose first.
const LEVELS: [&str; 6] = ["trace", "debug", "info", "warn", "error", "off"];

/// Words other tools use for a level, and the level they mean here.
const LEVEL_WORDS: [(&str, &str); 10] = [
    ("verbose", "debug"),
    ("all", "trace"),
    ("none", "off"),
    ("quiet", "off"),
    ("silent", "off"),
    ("critical", "error"),
    ("fatal", "error"),
    ("err", "error"),
    ("notice", "info"),
    ("information", "info"),
];

impl LogSettings {
    /// Checks that `level` does not give a word meant as a level that the filter would read as
    /// a target (`verbose`, `warning`): that silences every line.
    pub fn validate(&self) -> Result<(), ConfigError> {
        for directive in self.level.split(',').map(str::trim) {
            let word = directive.to_ascii_lowercase();
            if LEVELS.contains(&word.as_str()) || !word.chars().all(|c| c.is_ascii_alphabetic()) {
                continue;
            }
            let meant = LEVEL_WORDS
                .iter()
                .find(|(w, _)| *w == word)
                .map(|(_, l)| *l)
                .or_else(|| {
                    LEVELS
                        .iter()
                        .copied()
                        .find(|l| strsim::jaro_winkler(&word, l) >= 0.85)
                });
            if let Some(level) = meant {
                return Err(ConfigError::Invalid(format!(
                    "log.level: {directive:?} is not a level, so it would be read as the name of \
                     a target and nothing else would be logged. A level is trace, debug, info, \
                     warn, error or off: use \"{level}\" (or \"imrelay={level},info\" for \
                     imrelay's own lines only)"
                )));
            }
        }
        Ok(())
    }
}

/// The values a setting that is one of a fixed set takes (`store.backend`: sqlite, memory,
/// postgres), as written in the configuration; `None` for any other setting. Read from the
/// types themselves, so the list is never out of date; a channel's settings (`telegram.locale`,
/// `feishu.domain`) from its section's type, so none is named here.
pub(crate) fn enum_values(key: &str) -> Option<Vec<String>> {
    Some(match key {
        "store.backend" => variants::<Backend>(),
        "store.synchronous" => variants::<Synchronous>(),
        "log.format" => variants::<LogFormat>(),
        "hooks.claude_code.on_timeout" | "hooks.codex.on_timeout" | "hooks.acp.on_timeout" => {
            variants::<OnTimeout>()
        }
        "hooks.claude_code.on_finish"
        | "hooks.codex.on_finish"
        | "hooks.acp.on_finish"
        | "hooks.opencode.on_finish"
        | "routes.on_finish" => variants::<crate::agents::steer::OnFinish>(),
        "policy.decision" => variants::<crate::interaction::policy::Decision>(),
        "policy.mode" => variants::<crate::interaction::policy::Mode>(),
        "policy.kind" | "routes.kind" => variants::<crate::interaction::Kind>(),
        "passkeys.first_passkey" => variants::<phone::FirstPasskey>(),
        _ => {
            let (section, field) = key.split_once('.')?;
            let channel = Settings::channel_sections()
                .into_iter()
                .find(|c| c.name == section)?;
            return (channel.values)(section, field);
        }
    })
}

/// The names serde accepts for the unit variants of enum `T`: what it lists when refusing a
/// name it does not know.
fn variants<T: serde::de::DeserializeOwned>() -> Vec<String> {
    use serde::de::IntoDeserializer;
    let none: serde::de::value::StrDeserializer<'_, serde::de::value::Error> =
        sections::NO_NAME.into_deserializer();
    match T::deserialize(none) {
        Ok(_) => Vec::new(),
        Err(e) => listed(&e.to_string()),
    }
}

/// The names serde lists when refusing one it does not know: "unknown variant `x`, expected
/// one of `a`, `b`" (or "expected `a` or `b`").
fn listed(refused: &str) -> Vec<String> {
    let listed = refused.split_once("expected").map_or("", |(_, l)| l);
    listed
        .split('`')
        .skip(1)
        .step_by(2)
        .map(str::to_string)
        .collect()
}

/// Settings as loaded, with what the person running imrelay should be told about them.
#[derive(Debug)]
pub struct Loaded {
    /// The settings.
    pub settings: Settings,
    /// Warnings: settings that are valid but probably not what was meant.
    pub warnings: Vec<String>,
}

impl Settings {
    /// Loads the layered configuration using the process environment, with warnings.
    pub fn load(file: Option<&Path>) -> Result<Loaded, ConfigError> {
        Self::load_from(file, process_env()?)
    }

    /// Loads the layered configuration; `env` replaces the process environment when given
    /// (tests use this).
    pub fn load_with_env(
        file: Option<&Path>,
        env: Option<HashMap<String, String>>,
    ) -> Result<Self, ConfigError> {
        let env = match env {
            Some(env) => env,
            None => process_env()?,
        };
        Ok(Self::load_from(file, env)?.settings)
    }

    /// Loads the defaults, `file` and the `IMRELAY__` variables of `env`, in that order of
    /// precedence (the last wins).
    pub fn load_from(
        file: Option<&Path>,
        mut env: HashMap<String, String>,
    ) -> Result<Loaded, ConfigError> {
        // Settings under an old name are read under the new one, with a warning each.
        let mut renamed = aliases::rename_in_env(&mut env);
        let file_table = file.map(|path| read_file(path, &mut renamed)).transpose()?;
        let file_text = file_table.as_ref().map(|(_, text, _)| text.clone());
        // The defaults are compiled in and parsed by every load; a test checks they parse.
        let schema: toml::Table = toml::from_str(DEFAULT_TOML).unwrap_or_default();
        let loose = file_table.as_ref().map(|(path, _, table)| {
            strict::loose_values(table, &schema, &path.display().to_string())
        });
        let spellings = file_table
            .as_ref()
            .map(|(path, _, table)| strict::other_spellings(table, &path.display().to_string()));
        let sources = sources::Sources::new(file_table.map(|(path, _, table)| (path, table)), &env);
        // Every mistake is said at once: unknown keys (left out of what is read, so that they
        // hide nothing), values of the wrong type (one per section), or, when every value
        // reads, values that do not fit.
        let mut problems = sources.unknown_keys();
        problems.extend(loose.unwrap_or_default());
        let (pruned, unknown_vars) = sources.without_unknown();
        let mut builder = config::Config::builder().add_source(config::File::from_str(
            DEFAULT_TOML,
            config::FileFormat::Toml,
        ));
        if let Some(text) = pruned.or(file_text) {
            builder = builder.add_source(config::File::from_str(&text, config::FileFormat::Toml));
        }
        let mut known_env = env.clone();
        known_env.retain(|name, _| !unknown_vars.contains(name));
        // Values stay strings; serde converts them to the field's type (lists via `list`).
        let environment = config::Environment::with_prefix(ENV_PREFIX)
            .prefix_separator("__")
            .separator("__")
            .source(Some(known_env));
        let built = builder
            .add_source(environment)
            .build()
            .map_err(|e| ConfigError::Load(sources.describe(e)))?;
        let settings = match built.clone().try_deserialize::<Settings>() {
            Ok(settings) => settings,
            Err(whole) => {
                let each = mistakes::section_errors(&built);
                problems.extend(each.into_iter().map(|e| sources.describe(e)));
                if problems.is_empty() {
                    problems.push(sources.describe(whole));
                }
                return Err(mistakes::joined(problems));
            }
        };
        problems.extend(settings.problems().iter().map(|m| sources.annotate(m)));
        mistakes::all_of(problems)?;
        let mut warnings = renamed;
        warnings.extend(sources.ignored_variables(&env));
        warnings.extend(spellings.unwrap_or_default());
        warnings.extend(settings.warnings());
        Ok(Loaded { settings, warnings })
    }

    /// The defaults alone (no file, no environment).
    pub fn defaults() -> Result<Self, ConfigError> {
        Self::load_with_env(None, Some(HashMap::new()))
    }

    /// Settings that are valid but probably not what was meant: a channel that posts prompts
    /// nobody may answer (neither its approver list nor a route's approvers), a route whose
    /// approvers cannot answer on a channel it sends to.
    pub fn warnings(&self) -> Vec<String> {
        let mut out = teams::warnings(self);
        out.extend(reach::warnings(self));
        out.extend(phone::warnings(self));
        out.extend(steering::warnings(self));
        out
    }

    /// Each route that sends or escalates to places on channels that are turned off, with
    /// those places (`channel:address`): the routes table says so.
    pub fn route_places_off(&self) -> Vec<(String, Vec<String>)> {
        reach::places_off(self)
    }

    /// Checks values that only make sense together, and that durations are in range; the
    /// error says every problem at once.
    pub fn validate(&self) -> Result<(), ConfigError> {
        mistakes::all_of(self.problems())
    }

    /// Every problem [`Settings::validate`] finds, each a complete message with its fix.
    pub fn problems(&self) -> Vec<String> {
        let mut out = Vec::new();
        let mut check = |r: Result<(), ConfigError>| {
            if let Err(e) = r {
                out.push(e.into_message());
            }
        };
        let invalid = ConfigError::Invalid;
        check(self.log.validate());
        check(self.check_durations());
        check(self.check_exposure());
        check(self.auth.validate());
        check(self.store.validate());
        check(self.mcp.validate().map_err(invalid));
        if self.outbox.retry_base_ms == 0 || self.outbox.retry_max_secs == 0 {
            check(Err(invalid(
                "outbox.retry_base_ms and outbox.retry_max_secs must be at least 1".into(),
            )));
        }
        check(self.server.check_connections());
        check(self.interactions.check_memory());
        check(self.server.check_request_timeouts());
        check(policy::compile(&self.policy).map(drop).map_err(invalid));
        check(teams::compile(self).map(drop).map_err(invalid));
        check(self.server.check_public_url());
        for channel in self.channels() {
            check(channel.validate().map_err(invalid));
        }
        let claims: Vec<_> = self.channels().iter().flat_map(|c| c.paths()).collect();
        check(crate::settings::check_path_claims(&claims).map_err(invalid));
        out.extend(reach::problems(self));
        out.extend(phone::problems(self));
        out
    }

    /// A server listening beyond loopback needs agent and operator tokens.
    fn check_exposure(&self) -> Result<(), ConfigError> {
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
        Ok(())
    }

    /// The policy rules, compiled (checked by [`Settings::validate`]).
    pub fn policy(&self) -> Result<crate::interaction::policy::Policy, ConfigError> {
        policy::compile(&self.policy).map_err(ConfigError::Invalid)
    }

    /// The people, groups and routes, compiled (checked by [`Settings::validate`]).
    pub fn teams(&self) -> Result<crate::interaction::Teams, ConfigError> {
        teams::compile(self).map_err(ConfigError::Invalid)
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
            recheck_interval: Duration::from_millis(self.store.recheck_interval_ms),
            event_buffer_bytes: i.event_buffer_bytes,
            max_pending_bytes: i.max_pending_bytes,
            max_pending_bytes_per_owner: i.max_pending_bytes_per_token,
            session_grant_ttl: Duration::from_secs(i.session_grant_hours.saturating_mul(3600)),
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

    /// Where people open an interaction in the web inbox (`<public_url>/#<id>` is the item),
    /// when `server.public_url` was set: a listen address is no link for a phone.
    pub fn inbox_url(&self) -> Option<String> {
        let url = self.server.public_url.trim().trim_end_matches('/');
        (!url.is_empty()).then(|| url.to_string())
    }
}

/// Reads the configuration file at `path` as TOML, its settings under old names read under
/// the new ones (a warning each into `renamed`): the path, the text to load, and the table.
fn read_file<'p>(
    path: &'p Path,
    renamed: &mut Vec<String>,
) -> Result<(&'p Path, String, toml::Table), ConfigError> {
    let text = std::fs::read_to_string(path).map_err(|e| {
        ConfigError::Load(format!(
            "cannot read the configuration file {}: {e}",
            path.display()
        ))
    })?;
    let mut table: toml::Table = toml::from_str(&text).map_err(|e| {
        let hint = e
            .span()
            .and_then(|at| strict::toml_hint(&text, at.start))
            .unwrap_or_default();
        ConfigError::Load(format!("{} is not valid TOML: {e}{hint}", path.display()))
    })?;
    let old = aliases::rename_in_file(&mut table, &path.display().to_string());
    let text = if old.is_empty() {
        text
    } else {
        toml::to_string(&table).map_err(|e| ConfigError::Load(e.to_string()))?
    };
    renamed.extend(old);
    Ok((path, text, table))
}

#[cfg(test)]
mod tests;
