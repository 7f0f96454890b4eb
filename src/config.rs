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
    fn every_policy_key_is_in_the_defaults_file_and_documented() {
        let doc = include_str!("../docs/configuration.md");
        let rule: policy::PolicyRuleSettings =
            toml::from_str("name = \"x\"\nmessage = \"m\"").unwrap();
        let mut rule_keys = Vec::new();
        keys(
            &toml::Value::try_from(rule).unwrap(),
            "policy",
            &mut rule_keys,
        );
        assert!(rule_keys.len() >= 8, "{rule_keys:?}");
        for (_, key) in rule_keys {
            assert!(
                DEFAULT_TOML.contains(&format!("# {key} =")),
                "policy.{key} is missing from config/default.toml"
            );
            assert!(
                doc_section(doc, "`[[policy]]`").contains(&format!("`{key}`")),
                "policy.{key} is not in docs/configuration.md"
            );
        }
    }

    #[test]
    fn environment_wins_and_lists_split() {
        let s = Settings::load_with_env(
            None,
            env(&[
                ("IMRELAY__SERVER__LISTEN", "127.0.0.1:9000"),
                (
                    "IMRELAY__AUTH__AGENT_TOKENS",
                    "agent-token-one-01, agent-token-two-02",
                ),
                ("IMRELAY__AUTH__OPERATOR_TOKENS", "operator-token-0123"),
                ("IMRELAY__INTERACTIONS__APPROVAL_TIMEOUT_SECS", "77"),
                ("IMRELAY__HOOKS__CLAUDE_CODE__ON_TIMEOUT", "ask"),
                ("IMRELAY_CONFIG", "ignored.toml"),
            ]),
        )
        .unwrap();
        assert_eq!(s.server.listen.port(), 9000);
        assert_eq!(s.auth.agent_tokens.len(), 2);
        assert_eq!(s.auth.agent_tokens[1].expose(), "agent-token-two-02");
        assert_eq!(s.auth.operator_tokens[0].expose(), "operator-token-0123");
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
                    ("IMRELAY__AUTH__AGENT_TOKENS", "agent-token-0123456789"),
                    (
                        "IMRELAY__AUTH__OPERATOR_TOKENS",
                        "operator-token-0123456789"
                    ),
                ])
            )
            .is_ok()
        );
    }

    #[test]
    fn secrets_are_redacted() {
        let secret = "hunter2-hunter2-hunter2";
        let s = Settings::load_with_env(None, env(&[("IMRELAY__AUTH__OPERATOR_TOKENS", secret)]))
            .unwrap();
        let toml = s.redacted_toml().unwrap();
        assert!(!toml.contains(secret));
        assert!(toml.contains("[redacted]"));
        assert!(!format!("{s:?}").contains(secret));
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
    /// The message of the error loading `file` with the variables `pairs`.
    fn error_of(file: Option<&Path>, pairs: &[(&str, &str)]) -> String {
        Settings::load_with_env(file, env(pairs))
            .unwrap_err()
            .to_string()
    }

    /// The error loading `auth` from a file with these lines, or `None` if it loads.
    fn auth_file_error(lines: &str) -> Option<String> {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.toml");
        std::fs::write(&path, format!("[auth]\n{lines}\n")).unwrap();
        Settings::load_with_env(Some(&path), env(&[]))
            .err()
            .map(|e| e.to_string())
    }

    #[test]
    fn bad_tokens_are_refused_by_position_never_by_value() {
        let good = "0123456789abcdef";
        assert_eq!(
            auth_file_error(&format!("agent_tokens = [\"{good}\"]")),
            None
        );
        for (tokens, problem) in [
            ("[\"0123456789abcde\"]", "shorter than 16 characters"),
            ("[\" \"]", "whitespace"),
            ("[\"0123456789 abcdef\"]", "whitespace"),
            ("[\"0123456789abcdef\\t\"]", "whitespace"),
            ("[\"0123456789abcdef\\u0007\"]", "printable ASCII"),
            ("[\"0123456789abcdéf\"]", "printable ASCII"),
            ("[\"\"]", "empty"),
            ("[\"replace-with-an-agent-token\"]", "placeholder"),
        ] {
            let err = auth_file_error(&format!(
                "agent_tokens = [\"{good}-first\"]\noperator_tokens = [\"{good}-ok\", {}]",
                &tokens[1..tokens.len() - 1]
            ))
            .unwrap_or_else(|| panic!("{tokens} was accepted"));
            assert!(err.contains("auth.operator_tokens[1]"), "{err}");
            assert!(err.contains(problem), "{tokens}: {err}");
            assert!(err.contains("openssl rand -hex 32"), "{err}");
            assert!(err.contains("c.toml"), "names the file: {err}");
            assert!(!err.contains(good), "{err}");
        }
    }

    #[test]
    fn one_token_in_both_scopes_is_refused() {
        let shared = "shared-token-0123456789";
        let err = auth_file_error(&format!(
            "agent_tokens = [\"agent-token-0123456789\", \"{shared}\"]\n\
             operator_tokens = [\"{shared}\"]"
        ))
        .unwrap();
        assert!(
            err.contains("auth.agent_tokens[1] is also auth.operator_tokens[0]"),
            "{err}"
        );
        assert!(err.contains("approve its own requests"), "{err}");
        assert!(!err.contains(shared), "{err}");
        // The same from the environment names the variables.
        let err = error_of(
            None,
            &[
                ("IMRELAY__AUTH__AGENT_TOKENS", shared),
                ("IMRELAY__AUTH__OPERATOR_TOKENS", shared),
            ],
        );
        assert!(err.contains("IMRELAY__AUTH__OPERATOR_TOKENS"), "{err}");
        assert!(!err.contains(shared), "{err}");
    }

    #[test]
    fn empty_items_in_environment_lists_are_refused() {
        for value in [
            " ",
            "agent-token-0123456789,",
            "a-token-0123456789,,b-token-0123456789",
        ] {
            let err = error_of(None, &[("IMRELAY__AUTH__AGENT_TOKENS", value)]);
            assert!(err.contains("IMRELAY__AUTH__AGENT_TOKENS"), "{err}");
            assert!(err.contains("is empty"), "{err}");
        }
        // An empty variable is an empty list.
        let s = Settings::load_with_env(None, env(&[("IMRELAY__AUTH__AGENT_TOKENS", "")])).unwrap();
        assert!(s.auth.agent_tokens.is_empty());
    }

    #[test]
    fn errors_name_the_source_and_suggest_the_fix() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.toml");
        std::fs::write(&path, "[server]\nlisten = \"localhost:8795\"\n").unwrap();
        let err = error_of(Some(&path), &[]);
        assert!(err.contains("server.listen in "), "{err}");
        assert!(err.contains("c.toml"), "{err}");
        assert!(err.contains("listen = \"127.0.0.1:8795\""), "{err}");
        // The environment wins, and is named instead.
        let err = error_of(
            Some(&path),
            &[("IMRELAY__SERVER__LISTEN", "localhost:9000")],
        );
        assert!(
            err.contains("IMRELAY__SERVER__LISTEN=127.0.0.1:9000"),
            "{err}"
        );
        assert!(!err.contains("c.toml"), "{err}");

        let err = error_of(None, &[("IMRELAY__SERVER__LISTN", "x")]);
        assert!(err.contains("IMRELAY__SERVER__LISTN"), "{err}");
        assert!(
            err.contains("did you mean IMRELAY__SERVER__LISTEN"),
            "{err}"
        );
        let err = error_of(None, &[("IMRELAY__SERVER_LISTEN", "x")]);
        assert!(err.contains("separated by `__`"), "{err}");
        assert!(err.contains("IMRELAY__SERVER__LISTEN"), "{err}");

        std::fs::write(&path, "[servr]\nlisten = \"127.0.0.1:1\"\n").unwrap();
        let err = error_of(Some(&path), &[]);
        assert!(err.contains("`servr`"), "{err}");
        assert!(err.contains("did you mean `server`"), "{err}");
    }

    #[test]
    fn every_setting_of_a_fixed_set_of_values_lists_them() {
        assert_eq!(
            enum_values("store.backend").unwrap(),
            ["sqlite", "memory", "postgres"]
        );
        // A channel's, read from its section's type: none is named in `enum_values`.
        assert_eq!(
            enum_values("telegram.transport").unwrap(),
            ["polling", "webhook"]
        );
        assert_eq!(
            enum_values("matrix.locale").unwrap(),
            variants::<crate::present::render::Locale>()
        );
        assert_eq!(
            enum_values("feishu.domain").unwrap(),
            variants::<crate::channels::feishu::settings::Domain>()
        );
        assert_eq!(enum_values("telegram.chats"), None);
        assert_eq!(enum_values("telegram.nothing.here"), None);
        assert_eq!(enum_values("nowhere.locale"), None);
        // Every text setting that refuses a name it does not know is one of a fixed set:
        // its message lists the values it takes.
        let defaults: toml::Table = toml::from_str(DEFAULT_TOML).unwrap();
        let mut text_keys = Vec::new();
        fn walk(t: &toml::Table, prefix: &str, out: &mut Vec<String>) {
            for (k, v) in t {
                let key = if prefix.is_empty() {
                    k.clone()
                } else {
                    format!("{prefix}.{k}")
                };
                match v {
                    toml::Value::Table(t) => walk(t, &key, out),
                    toml::Value::String(_) => out.push(key),
                    _ => {}
                }
            }
        }
        walk(&defaults, "", &mut text_keys);
        for key in text_keys {
            let var = format!("IMRELAY__{}", key.replace('.', "__").to_uppercase());
            let Err(e) = Settings::load_with_env(None, env(&[(&var, "zz-not-a-value")])) else {
                continue;
            };
            let e = e.to_string();
            assert!(!e.contains("variant"), "{key}: {e}");
            if let Some(values) = enum_values(&key) {
                assert!(!values.is_empty(), "{key}");
                assert!(e.contains("is not one of the values"), "{key}: {e}");
                let default = defaults_value(&defaults, &key);
                assert!(values.contains(&default), "{key}: {default} in {values:?}");
            }
        }
    }

    fn defaults_value(t: &toml::Table, key: &str) -> String {
        let mut v = None;
        let mut table = Some(t);
        for part in key.split('.') {
            v = table.and_then(|t| t.get(part));
            table = v.and_then(toml::Value::as_table);
        }
        v.and_then(toml::Value::as_str)
            .unwrap_or_default()
            .to_string()
    }

    #[test]
    fn single_underscore_variables_are_named_in_a_warning() {
        let loaded = Settings::load_from(
            None,
            HashMap::from([
                ("IMRELAY_SERVER_LISTEN".to_string(), "0.0.0.0:1".to_string()),
                ("IMRELAY_CONFIG".to_string(), "x.toml".to_string()),
                ("IMRELAY_TOKEN".to_string(), "not a setting".to_string()),
            ]),
        )
        .unwrap();
        assert_eq!(loaded.settings.server.listen.port(), 8787, "ignored");
        assert_eq!(loaded.warnings.len(), 1, "{:?}", loaded.warnings);
        assert!(loaded.warnings[0].contains("IMRELAY_SERVER_LISTEN is ignored"));
        assert!(loaded.warnings[0].contains("IMRELAY__SERVER__LISTEN"));
    }

    #[test]
    fn a_channel_without_approvers_is_warned_about() {
        let mut s = Settings::defaults().unwrap();
        assert!(s.warnings().is_empty());
        s.telegram.enabled = true;
        s.feishu.enabled = true;
        // With a chat to post to (an empty list has a warning of its own).
        s.feishu.receivers = vec!["chat_id:oc_1".parse().unwrap()];
        let w = s.warnings();
        assert_eq!(w.len(), 2, "{w:?}");
        assert!(w[0].contains("telegram.approvers is empty"), "{w:?}");
        assert!(w[1].contains("feishu.approvers is empty"), "{w:?}");
        s.telegram.approvers = vec![1];
        s.feishu.approvers = vec!["ou_1".into()];
        assert!(s.warnings().is_empty());
    }
}
