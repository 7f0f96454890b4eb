//! Where the PostgreSQL server is and how to connect to it: the URL parsed once, TLS, the
//! pool of connections for queries, and single connections (the listener's) outside it.
//!
//! The URL is a secret: it is shown only as [`Target::shown`] (no password), and every message
//! built from a connection error passes through [`Target::scrub`], which removes the password
//! in every form the URL carried it.

use std::sync::Arc;
use std::time::Duration;

use deadpool_postgres::{
    Hook, HookError, Manager, ManagerConfig, Pool, PoolError, RecyclingMethod, Runtime,
};
use futures_util::stream::BoxStream;
use secrecy::{ExposeSecret, SecretString};
use tokio_postgres::config::{Host, SslMode};
use tokio_postgres::{AsyncMessage, Client, Config, NoTls};
use tokio_postgres_rustls::MakeRustlsConnect;

use super::describe;
use crate::store::StoreError;

/// How long opening a connection may take, unless the URL says (`connect_timeout`).
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// A connection whose server stopped answering is given up after about this long (TCP
/// keepalives, and unacknowledged writes), rather than waiting for the operating system's
/// defaults (hours).
const DEAD_PEER: Duration = Duration::from_secs(30);

/// How long a session may stay inside a transaction without sending its next statement
/// before the server ends it, releasing its locks. imrelay never waits for anything but the
/// database inside a transaction (its statements are sent back to back, or pipelined), so a
/// session idle this long in one belongs to a process that stopped (SIGSTOP, a debugger, a
/// frozen VM or container) or lost its network. While it holds the cluster's write locks (the
/// audit chain's and the events') every replica's writes wait for it: this is the longest a
/// frozen replica can stall the cluster.
pub(crate) const IDLE_IN_TRANSACTION: Duration = Duration::from_secs(2);

/// Limits set on every connection imrelay opens, so that nothing waits or holds without
/// bound inside the server:
///
/// - `idle_in_transaction_session_timeout` ([`IDLE_IN_TRANSACTION`], 2 s): a session left
///   idle inside a transaction is ended, and its locks with it.
/// - `lock_timeout` (5 s): a statement waits at most this long for a lock; longer than the
///   idle limit, so a write queued behind a frozen replica outlasts it and goes through,
///   while a lock held by something that is not imrelay (an open transaction in `psql`)
///   fails the request with 503 instead of hanging it.
/// - `statement_timeout` (30 s): a runaway statement (a listing, a prune) is cancelled.
///
/// The server's own TCP keepalive settings are left to the operator: a session inside a
/// transaction is bounded by the idle limit whatever became of its client, and one outside
/// holds no lock.
const SESSION_LIMITS: &str = "SET idle_in_transaction_session_timeout = '2s'; \
                              SET lock_timeout = '5s'; SET statement_timeout = '30s'";

/// The server a store talks to.
pub(crate) struct Target {
    config: Config,
    tls: Option<MakeRustlsConnect>,
    shown: String,
    /// The password as the URL spelled it and as decoded, to remove from messages.
    hidden: Vec<String>,
}

impl std::fmt::Debug for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Target").field("url", &self.shown).finish()
    }
}

impl Target {
    /// Parses a connection URL (`postgres://user:password@host:port/database?sslmode=…`, or
    /// libpq's `key=value` form).
    ///
    /// TLS: `sslmode=require` (and libpq's `verify-ca` and `verify-full`, which mean the same
    /// here) encrypts and verifies the server's certificate against the Mozilla roots and the
    /// system's trusted certificates. Any other mode connects without TLS: there is no
    /// unverified TLS, and no opportunistic `prefer`.
    pub(crate) fn parse(url: &SecretString) -> Result<Self, StoreError> {
        let raw = url.expose_secret();
        let hidden = password_forms(raw);
        let normalized = raw
            .replace("sslmode=verify-full", "sslmode=require")
            .replace("sslmode=verify-ca", "sslmode=require");
        let mut config: Config = normalized.parse().map_err(|e| {
            StoreError::Unavailable(scrub_with(
                &hidden,
                format!(
                    "store.url is not a PostgreSQL connection URL: {}",
                    describe(&e)
                ),
            ))
        })?;
        if config.get_hosts().is_empty() {
            return Err(StoreError::Unavailable(
                "store.url names no host (postgres://user@host:5432/database)".into(),
            ));
        }
        if config.get_application_name().is_none() {
            config.application_name("imrelay");
        }
        if config.get_connect_timeout().is_none() {
            config.connect_timeout(CONNECT_TIMEOUT);
        }
        if config.get_tcp_user_timeout().is_none() {
            config.tcp_user_timeout(DEAD_PEER);
        }
        config
            .keepalives(true)
            .keepalives_idle(DEAD_PEER / 3)
            .keepalives_interval(DEAD_PEER / 6)
            .keepalives_retries(3);
        let tls = match config.get_ssl_mode() {
            SslMode::Require => Some(tls_connector()?),
            _ => {
                config.ssl_mode(SslMode::Disable);
                None
            }
        };
        let shown = show(&config);
        Ok(Self {
            config,
            tls,
            shown,
            hidden,
        })
    }

    /// The URL without its password, for messages.
    pub(crate) fn shown(&self) -> &str {
        &self.shown
    }

    /// `message` without the URL's password.
    pub(crate) fn scrub(&self, message: impl std::fmt::Display) -> String {
        scrub_with(&self.hidden, message.to_string())
    }

    /// A connection error as a [`StoreError`], without the password.
    pub(crate) fn unavailable(&self, e: &tokio_postgres::Error) -> StoreError {
        StoreError::Unavailable(self.scrub(format!(
            "PostgreSQL at {}: {}",
            self.shown,
            describe(e)
        )))
    }

    /// A pool of at most `size` connections, each opened on first need. Taking a connection
    /// waits at most `wait` when all are in use, then fails.
    pub(crate) fn pool(&self, size: usize, wait: Duration) -> Result<Pool, StoreError> {
        let manager_config = ManagerConfig {
            // A closed connection is noticed without a query; a broken one fails its next
            // query (reported as unavailable) and is then dropped.
            recycling_method: RecyclingMethod::Fast,
        };
        let manager = match &self.tls {
            Some(tls) => Manager::from_config(self.config.clone(), tls.clone(), manager_config),
            None => Manager::from_config(self.config.clone(), NoTls, manager_config),
        };
        let connect = self
            .config
            .get_connect_timeout()
            .copied()
            .unwrap_or(CONNECT_TIMEOUT);
        Pool::builder(manager)
            .post_create(Hook::async_fn(|client, _| {
                Box::pin(async move {
                    client
                        .batch_execute(SESSION_LIMITS)
                        .await
                        .map_err(HookError::Backend)
                })
            }))
            .max_size(size)
            .wait_timeout(Some(wait))
            .create_timeout(Some(connect + Duration::from_secs(1)))
            .recycle_timeout(Some(connect))
            .runtime(Runtime::Tokio1)
            .build()
            .map_err(|e| StoreError::Unavailable(format!("cannot build the connection pool: {e}")))
    }

    /// The statements that set a session's limits (see [`SESSION_LIMITS`]).
    pub(crate) fn session_limits() -> &'static str {
        SESSION_LIMITS
    }

    /// A pool error as a [`StoreError`].
    pub(crate) fn pool_error(&self, e: PoolError) -> StoreError {
        match e {
            PoolError::Backend(e) | PoolError::PostCreateHook(HookError::Backend(e)) => {
                self.unavailable(&e)
            }
            PoolError::Timeout(deadpool_postgres::TimeoutType::Wait) => {
                StoreError::Unavailable(format!(
                    "every connection to PostgreSQL at {} is busy (store.pool_size): try again",
                    self.shown
                ))
            }
            other => StoreError::Unavailable(
                self.scrub(format!("PostgreSQL at {}: {other}", self.shown)),
            ),
        }
    }

    /// One connection outside the pool, named `application_name`, with the stream of what
    /// the server sends unasked (notifications, notices). The connection lives as long as
    /// that stream is polled; it ends (with an error, or `None`) when the connection is lost.
    /// Its caller sets [`Target::session_limits`] where it runs statements that lock.
    pub(crate) async fn connect(
        &self,
        application_name: &str,
    ) -> Result<
        (
            Client,
            BoxStream<'static, Result<AsyncMessage, tokio_postgres::Error>>,
        ),
        StoreError,
    > {
        let mut config = self.config.clone();
        config.application_name(application_name);
        match &self.tls {
            Some(tls) => {
                let (client, conn) = config
                    .connect(tls.clone())
                    .await
                    .map_err(|e| self.unavailable(&e))?;
                Ok((client, messages(conn)))
            }
            None => {
                let (client, conn) = config
                    .connect(NoTls)
                    .await
                    .map_err(|e| self.unavailable(&e))?;
                Ok((client, messages(conn)))
            }
        }
    }
}

/// What a connection sends unasked, as a stream that drives the connection while polled.
fn messages<S, T>(
    mut conn: tokio_postgres::Connection<S, T>,
) -> BoxStream<'static, Result<AsyncMessage, tokio_postgres::Error>>
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
    T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    Box::pin(futures_util::stream::poll_fn(move |cx| {
        conn.poll_message(cx)
    }))
}

/// TLS that verifies the server: the Mozilla roots and the system's trusted certificates
/// (where a private CA is installed, e.g. with `update-ca-certificates`).
fn tls_connector() -> Result<MakeRustlsConnect, StoreError> {
    let mut roots = rustls::RootCertStore::empty();
    roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
    let (added, _ignored) =
        roots.add_parsable_certificates(rustls_native_certs::load_native_certs().certs);
    tracing::debug!(
        system_certificates = added,
        "TLS to PostgreSQL trusts the Mozilla roots and the system's certificates"
    );
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| StoreError::Unavailable(format!("cannot set up TLS: {e}")))?
        .with_root_certificates(roots)
        .with_no_client_auth();
    Ok(MakeRustlsConnect::new(config))
}

/// `postgres://user@host:port/database`: the parts of `config` that say where, never the
/// password.
fn show(config: &Config) -> String {
    let user = config
        .get_user()
        .map(|u| format!("{u}@"))
        .unwrap_or_default();
    let ports = config.get_ports();
    let hosts: Vec<String> = config
        .get_hosts()
        .iter()
        .enumerate()
        .map(|(n, h)| {
            let host = match h {
                Host::Tcp(name) if name.contains(':') => format!("[{name}]"),
                Host::Tcp(name) => name.clone(),
                #[cfg(unix)]
                Host::Unix(path) => path.display().to_string(),
            };
            // libpq's rule: one port for every host, or one per host; 5432 when none.
            let port = ports.get(n).or(ports.first()).copied().unwrap_or(5432);
            format!("{host}:{port}")
        })
        .collect();
    let db = config.get_dbname().unwrap_or_default();
    format!("postgres://{user}{}/{db}", hosts.join(","))
}

/// The forms of the password a URL carries: as written (percent-encoded, in a URL) and
/// decoded, longest first so that a longer form is removed whole.
fn password_forms(raw: &str) -> Vec<String> {
    let mut forms = Vec::new();
    if let Ok(config) = raw.parse::<Config>()
        && let Some(p) = config.get_password()
    {
        forms.push(String::from_utf8_lossy(p).into_owned());
    }
    // In URL form, the text between the user's `:` and the last `@` of the authority.
    if let Some(rest) = raw
        .strip_prefix("postgres://")
        .or_else(|| raw.strip_prefix("postgresql://"))
    {
        let authority = rest.split(['/', '?']).next().unwrap_or_default();
        if let Some((userinfo, _)) = authority.rsplit_once('@')
            && let Some((_, written)) = userinfo.split_once(':')
        {
            forms.push(written.to_string());
        }
    }
    // In key=value form, the value of `password` (quoted or not).
    for part in raw.split_whitespace() {
        if let Some(v) = part.strip_prefix("password=") {
            forms.push(v.trim_matches('\'').to_string());
        }
    }
    forms.retain(|f| !f.is_empty());
    forms.sort_by_key(|f| std::cmp::Reverse(f.len()));
    forms.dedup();
    forms
}

fn scrub_with(hidden: &[String], mut message: String) -> String {
    for secret in hidden {
        if message.contains(secret.as_str()) {
            message = message.replace(secret.as_str(), "[redacted]");
        }
    }
    message
}

#[cfg(test)]
mod tests {
    use super::*;

    fn target(url: &str) -> Result<Target, StoreError> {
        Target::parse(&SecretString::from(url.to_string()))
    }

    #[test]
    fn the_shown_url_never_has_the_password() {
        let t = target("postgres://app:s3cr%40t@db.example:6543/relay?sslmode=disable").unwrap();
        assert_eq!(t.shown(), "postgres://app@db.example:6543/relay");
        assert!(!format!("{t:?}").contains("s3cr"));
        let t = target("host=db.example user=app password='pa ss' dbname=relay").unwrap();
        assert_eq!(t.shown(), "postgres://app@db.example:5432/relay");
    }

    #[test]
    fn messages_lose_the_password_in_every_form() {
        let t = target("postgres://app:s3cr%40t@db.example/relay").unwrap();
        assert_eq!(
            t.scrub("at postgres://app:s3cr%40t@db.example said s3cr@t"),
            "at postgres://app:[redacted]@db.example said [redacted]"
        );
    }

    #[test]
    fn a_bad_url_is_refused_without_echoing_the_password() {
        for url in [
            "postgres://app:hunter2hunter2@db.example:notaport/relay",
            "postgres://app:hunter2hunter2@db.example/relay?sslmode=sometimes",
            "postgres://app:hunter2hunter2@db.example/relay?nonsense=1",
        ] {
            let err = target(url).unwrap_err().to_string();
            assert!(err.contains("store.url"), "{err}");
            assert!(!err.contains("hunter2"), "{err}");
        }
    }

    #[test]
    fn tls_only_when_asked_for_and_then_verified() {
        assert!(target("postgres://a@h/d").unwrap().tls.is_none());
        assert!(
            target("postgres://a@h/d?sslmode=prefer")
                .unwrap()
                .tls
                .is_none()
        );
        assert!(
            target("postgres://a@h/d?sslmode=require")
                .unwrap()
                .tls
                .is_some()
        );
        assert!(
            target("postgres://a@h/d?sslmode=verify-full")
                .unwrap()
                .tls
                .is_some()
        );
    }
}
