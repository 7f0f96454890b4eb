//! `imrelay doctor`: checks a configuration before a person relies on it.
//!
//! It reads the same settings as `serve` and tries what `serve` will need: the store opens
//! and takes writes; tokens are set where the listen address needs them; Telegram's token
//! works and approvers are set (and, with `--send-test`, each chat receives a test message);
//! Feishu's app credentials get a token and approvers are set (each receiver gets a test card);
//! Slack's bot token passes `auth.test`, the app-level token opens a Socket Mode URL, approvers
//! are set (each conversation gets a test message);
//! each webhook target answers a signed test event (`--send-test`). One line per check, `✓`
//! or `✗` with what to do; the exit code says whether everything passed.
//!
//! Each channel's checks are its own (`channels/<name>/doctor.rs`), run through the channel
//! registry.
//!
//! A SQLite store is looked at without changing anything (doctor runs where a person happens
//! to be, beside a running server or before the first start): a database a server is using is
//! checked through that server's `/healthz`; one nobody uses is opened read-only and its
//! write access checked without writing; a missing one is not created.

use std::sync::Arc;

pub use crate::channels::Check;
use crate::channels::registry::BoxFuture;
use crate::channels::{Doctor, Kept};
use crate::config::{Backend, Settings};
use crate::store::StoreError;
use crate::store::sqlite::{self, Inspection};
use crate::telemetry::escape;

/// Runs every check that applies to `settings`; with `send_test`, sends test messages.
pub async fn run(settings: &Settings, send_test: bool) -> Vec<Check> {
    let mut checks = Vec::new();
    store(settings, &mut checks).await;
    tokens(settings, &mut checks);
    let run = Doctor {
        send_test,
        public_url: settings.server.public_url.clone(),
        kept: kept(settings),
    };
    let mut destinations = false;
    for channel in settings.channels() {
        if channel.enabled() {
            destinations = true;
            checks.extend(channel.doctor(&run).await);
        }
    }
    if !send_test && destinations {
        checks.push(Check::pass(
            "no test messages sent (run `imrelay doctor --send-test` to send one to every chat, receiver and webhook)",
        ));
    }
    if send_test && !destinations {
        checks.push(Check::fail(
            format!(
                "--send-test: no test message sent, as nothing is configured to send to (none of {} is enabled)",
                crate::channels::in_words(&settings.channels())
            ),
            "set one up (docs/channels.md names each channel's page); the inbox and `imrelay watch` need none",
        ));
    }
    checks
}

/// What the store keeps for channels, read without writing: a SQLite database through a
/// read-only connection (nothing when it does not exist yet), PostgreSQL through the store
/// itself (opened when a channel first asks), nothing for the memory store.
fn kept(settings: &Settings) -> Option<Arc<dyn Kept>> {
    match settings.store.backend {
        Backend::Memory => None,
        Backend::Sqlite => Some(Arc::new(SqliteKept(settings.store.path.clone()))),
        Backend::Postgres => Some(Arc::new(StoreKept {
            settings: settings.clone(),
            store: tokio::sync::OnceCell::new(),
        })),
    }
}

/// A SQLite database, read-only.
struct SqliteKept(std::path::PathBuf);

impl SqliteKept {
    /// `read` on a read-only connection; `empty` when there is no database yet.
    async fn read<T: Send + 'static>(
        &self,
        empty: T,
        read: impl FnOnce(&rusqlite::Connection) -> Result<T, StoreError> + Send + 'static,
    ) -> Result<T, StoreError> {
        let path = self.0.clone();
        if !path.exists() {
            return Ok(empty);
        }
        tokio::task::spawn_blocking(move || read(&sqlite::open_read_only(&path)?))
            .await
            .map_err(|e| StoreError::Unavailable(e.to_string()))?
    }
}

impl Kept for SqliteKept {
    fn values_under<'a>(
        &'a self,
        prefix: &'a str,
        limit: usize,
    ) -> BoxFuture<'a, Result<Vec<(String, String)>, StoreError>> {
        let prefix = prefix.to_string();
        Box::pin(self.read(Vec::new(), move |c| {
            sqlite::read_values_under(c, &prefix, limit)
        }))
    }

    fn secret<'a>(&'a self, name: &'a str) -> BoxFuture<'a, Result<Option<Vec<u8>>, StoreError>> {
        let name = name.to_string();
        Box::pin(self.read(None, move |c| sqlite::read_secret(c, &name)))
    }
}

/// A store opened as `serve` opens it (PostgreSQL), on first use.
struct StoreKept {
    settings: Settings,
    store: tokio::sync::OnceCell<Arc<dyn crate::store::Store>>,
}

impl StoreKept {
    async fn store(&self) -> Result<&Arc<dyn crate::store::Store>, StoreError> {
        self.store
            .get_or_try_init(|| async {
                crate::app::open_store(&self.settings)
                    .await
                    .map_err(|e| StoreError::Unavailable(format!("{e:#}")))
            })
            .await
    }
}

impl Kept for StoreKept {
    fn values_under<'a>(
        &'a self,
        prefix: &'a str,
        limit: usize,
    ) -> BoxFuture<'a, Result<Vec<(String, String)>, StoreError>> {
        Box::pin(async move { self.store().await?.values_under(prefix, limit).await })
    }

    /// The secret, made if missing, as `serve` would at its start (PostgreSQL takes writes
    /// from doctor anyway: the store check writes a probe value).
    fn secret<'a>(&'a self, name: &'a str) -> BoxFuture<'a, Result<Option<Vec<u8>>, StoreError>> {
        Box::pin(async move { self.store().await?.secret(name).await.map(Some) })
    }
}

async fn store(settings: &Settings, checks: &mut Vec<Check>) {
    if settings.store.backend == Backend::Sqlite {
        sqlite(settings, checks).await;
        return;
    }
    match crate::app::open_store(settings).await {
        Err(e) => checks.push(Check::fail(
            format!("store ({}): cannot open it: {e:#}", backend(settings)),
            "check store.path (SQLite) or store.url (PostgreSQL) and that imrelay may write there",
        )),
        Ok(store) => match store.check_writable().await {
            Ok(()) => checks.push(Check::pass(format!(
                "store ({}) opens and takes writes",
                backend(settings)
            ))),
            Err(e) => checks.push(Check::fail(
                format!(
                    "store ({}) opens but refuses writes: {e}",
                    backend(settings)
                ),
                "free disk space, or give imrelay write access to its data directory",
            )),
        },
    }
}

/// The SQLite store, looked at without creating or writing anything: through the server that
/// is using it, else read-only.
async fn sqlite(settings: &Settings, checks: &mut Vec<Check>) {
    let path = settings.store.path.clone();
    let shown = shown_path(&path);
    let inspected = tokio::task::spawn_blocking(move || sqlite::inspect(&path)).await;
    let check = match inspected {
        Err(e) => Check::fail(
            format!("store (sqlite): could not look at {shown}: {e}"),
            "run doctor again",
        ),
        Ok(Err(e)) => Check::fail(
            format!("store (sqlite): cannot read {shown}: {e}"),
            "check store.path, and that imrelay may read it",
        ),
        Ok(Ok(Inspection::Missing {
            folder,
            writable: Ok(()),
        })) => match server_health(settings).await {
            // Its server runs, but not on this database: doctor is looking in the wrong place.
            (url, Ok(_)) => Check::fail(
                format!(
                    "store (sqlite): {shown} does not exist, yet an imrelay answers at {url}: it keeps its database elsewhere"
                ),
                if settings.store.path.is_relative() {
                    "store.path is relative: run doctor in the folder that server was started from (or make store.path absolute)"
                } else {
                    "run doctor with that server's configuration (--config)"
                },
            ),
            (_, Err(_)) => Check::pass(format!(
                "store (sqlite): {shown} does not exist yet; `imrelay serve` will create it (it may write in {})",
                std::path::absolute(&folder).unwrap_or(folder).display()
            )),
        },
        Ok(Ok(Inspection::Missing {
            folder,
            writable: Err(e),
        })) => Check::fail(
            format!("store (sqlite): {shown} does not exist, and imrelay could not create it: {e}"),
            format!(
                "give imrelay write access to {}, or set store.path to a folder it may write",
                folder.display()
            ),
        ),
        Ok(Ok(Inspection::Idle { version, .. })) if version > sqlite::SCHEMA_VERSION => {
            Check::fail(
                format!(
                    "store (sqlite): {shown} has schema version {version}, newer than this imrelay understands ({})",
                    sqlite::SCHEMA_VERSION
                ),
                "run the imrelay version that wrote it, or a newer one",
            )
        }
        Ok(Ok(Inspection::Idle {
            writable: Err(e), ..
        })) => Check::fail(
            format!("store (sqlite): {shown} can be read but not written: {e}"),
            "give imrelay write access to the database and its folder",
        ),
        Ok(Ok(Inspection::Idle {
            writable: Ok(()), ..
        })) => Check::pass(format!(
            "store (sqlite): {shown} opens, and imrelay may write it (no server is using it; checked without writing)"
        )),
        Ok(Ok(Inspection::InUse)) => through_server(settings, &shown).await,
    };
    checks.push(check);
}

/// What the server of these settings says at `/healthz` (its URL, then its status and body
/// if an imrelay answers there, or why not).
async fn server_health(
    settings: &Settings,
) -> (
    String,
    Result<(reqwest::StatusCode, serde_json::Value), String>,
) {
    let url = super::health_url(settings, super::Probe::Ready);
    let answer = async {
        let r = reqwest::Client::builder()
            .timeout(std::time::Duration::from_secs(3))
            .build()?
            .get(&url)
            .send()
            .await?;
        let status = r.status();
        r.json::<serde_json::Value>()
            .await
            .map(|body| (status, body))
    };
    let result = match answer.await {
        Err(e) => Err(format!("no server answers at {url} ({e})")),
        Ok((_, body)) if body.get("store").and_then(|s| s.as_str()).is_none() => {
            Err(format!("what answers at {url} is not imrelay"))
        }
        Ok(answered) => Ok(answered),
    };
    (url, result)
}

/// A database another process holds: checked through the server of these settings, if it
/// is the one answering.
async fn through_server(settings: &Settings, shown: &str) -> Check {
    let elsewhere = |why: String| {
        Check::fail(
            format!("store (sqlite): {shown} is in use by another imrelay process, and {why}"),
            "that process holds the database, so `imrelay serve` cannot start with this configuration: \
             stop it, or give this configuration its own store.path (if that process is its server, check server.listen)",
        )
    };
    match server_health(settings).await {
        (_, Err(why)) => elsewhere(why),
        (url, Ok((status, body))) => {
            let state = body["store"].as_str().unwrap_or_default();
            if status.is_success() && state == "ok" {
                Check::pass(format!(
                    "store (sqlite): {shown} is in use by the running server; checked through it ({url}): it takes writes"
                ))
            } else {
                let why = escape(body["store_error"].as_str().unwrap_or("no reason given"));
                Check::fail(
                    format!(
                        "store (sqlite): {shown} is in use by the running server, which says (at {url}) that its store is {}: {why}",
                        escape(state)
                    ),
                    "free disk space, or give imrelay write access to its data directory",
                )
            }
        }
    }
}

/// A path as given, and where that is when it is relative (doctor may run anywhere).
fn shown_path(path: &std::path::Path) -> String {
    match std::path::absolute(path) {
        Ok(abs) if path.is_relative() => format!("{} ({})", path.display(), abs.display()),
        _ => path.display().to_string(),
    }
}

/// The store backend's name as configured (`sqlite`, `memory`, `postgres`).
fn backend(settings: &Settings) -> String {
    format!("{:?}", settings.store.backend).to_lowercase()
}

fn tokens(settings: &Settings, checks: &mut Vec<Check>) {
    let listen = settings.server.listen;
    let (agent, operator) = (
        settings.auth.agent_tokens.len(),
        settings.auth.operator_tokens.len(),
    );
    if listen.ip().is_loopback() {
        checks.push(Check::pass(format!(
            "listens on {listen}: only this machine can connect ({agent} agent and {operator} operator tokens set)"
        )));
    } else if agent > 0 && operator > 0 {
        checks.push(Check::pass(format!(
            "listens on {listen} with {agent} agent and {operator} operator tokens"
        )));
    } else {
        checks.push(Check::fail(
            format!("listens on {listen} without agent and operator tokens"),
            "set auth.agent_tokens and auth.operator_tokens (e.g. `openssl rand -hex 32`)",
        ));
    }
}

/// Prints the checks, one per line; true when all passed.
pub fn print(checks: &[Check]) -> bool {
    for c in checks {
        // Checks quote what platforms and servers answered: nothing of it reaches the
        // terminal unescaped.
        let shown = Check {
            ok: c.ok,
            what: escape(&c.what).into_owned(),
            fix: c.fix.as_deref().map(|f| escape(f).into_owned()),
        };
        say!("{shown}");
    }
    let failed = checks.iter().filter(|c| !c.ok).count();
    if failed == 0 {
        say!("\nall {} checks passed", checks.len());
    } else {
        say!("\n{failed} of {} checks failed", checks.len());
    }
    failed == 0
}

/// The id asked about to check an agent token: an agent's request that reads nothing and
/// changes nothing (no interaction has it, so a token that passes gets 404).
const TOKEN_PROBE_ID: &str = "imrelay-doctor-token-check";

/// Checks `token` as an agent token against the server this configuration describes: the
/// same check an agent's hook meets, without creating anything. Names the token by its
/// fingerprint only.
pub async fn agent_token(settings: &Settings, token: &str) -> Check {
    let base = super::client::local_url(settings);
    let fp = crate::settings::fingerprint(token);
    let url = format!("{base}/v1/interactions/{TOKEN_PROBE_ID}/wait?timeout_secs=0");
    let sent = async {
        reqwest::Client::builder()
            .timeout(std::time::Duration::from_secs(5))
            .build()?
            .get(&url)
            .bearer_auth(token)
            .send()
            .await
    };
    let status = match sent.await {
        Ok(r) => r.status(),
        Err(e) => {
            return Check::fail(
                format!("agent token {fp}: no server answers at {base} ({e})"),
                "start `imrelay serve` with this configuration, then run doctor again",
            );
        }
    };
    match status.as_u16() {
        401 => Check::fail(
            format!("agent token {fp}: the server at {base} does not know it (401)"),
            "use one of auth.agent_tokens (the server logs each refused token with its fingerprint)",
        ),
        403 => Check::fail(
            format!(
                "agent token {fp}: the server at {base} knows it, but not as an agent token (403): an operator token?"
            ),
            "give agents a token from auth.agent_tokens (IMRELAY_AGENT_TOKEN); operator tokens are for people (IMRELAY_OPERATOR_TOKEN)",
        ),
        _ if settings.auth.agent_tokens.is_empty() => Check::pass(format!(
            "agent token {fp}: the server at {base} has no agent tokens, so agents on this machine need none"
        )),
        200 | 404 | 408 | 410 => Check::pass(format!(
            "agent token {fp} is accepted by the server at {base}"
        )),
        other => Check::fail(
            format!("agent token {fp}: the server at {base} answered {other}"),
            "look at the server's log",
        ),
    }
}
