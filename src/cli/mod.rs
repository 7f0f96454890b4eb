//! Command-line tools beside the server.
//!
//! The terminal client of a running server, over its HTTP API: `imrelay watch` answers
//! approvals and questions as they arrive ([`watch`]); `imrelay pending`, `imrelay show` and
//! `imrelay answer` do it one command at a time for scripts ([`commands`]). `imrelay mcp`
//! relays an MCP client on standard input and output to the server's `/mcp` ([`mcp`]);
//! `imrelay hook codex` is the command Codex runs for its approval hooks ([`hook`]);
//! `imrelay acp -- <agent command>` stands between an editor and an ACP agent and relays the
//! agent's permission requests ([`acp`]); `imrelay bridge opencode` relays OpenCode servers' approvals and questions ([`bridge`]).
//!
//! Tools for the machine the server runs on: `imrelay audit` prints the audit trail,
//! `imrelay audit verify` checks its hash chain, its recorded head and that every stored
//! interaction has its `created` entry, and `imrelay audit head` prints the head to keep
//! elsewhere (all read the SQLite database directly and read-only, so they work while the
//! server runs; with PostgreSQL, `audit verify` and `audit head` read the shared database,
//! and the chain is checked up to the head recorded when the check began); `imrelay healthcheck` asks a running
//! server's `/healthz`, or with `--live` its `/livez` (for container health checks, where
//! there is no curl); `imrelay backup FILE` writes a consistent copy of the database while the
//! server runs (the container images have no `sqlite3`).

/// Prints a line on standard output, like `println!`, but a closed output (`imrelay audit
/// head | true`) neither panics nor fails the command: the line is dropped, and the command's
/// verdict is still its exit status.
macro_rules! say {
    ($($arg:tt)*) => {
        $crate::cli::say_line(format_args!($($arg)*))
    };
}

pub mod acp;
pub mod bridge;
pub mod choose;
pub mod client;
pub mod commands;
pub mod devices;
pub mod doctor;
pub mod grants;
pub mod hook;
pub mod mcp;
pub mod passkeys;
pub mod policy;
pub mod route;
pub mod sessions;
pub mod term;
pub mod turns;
pub mod view;
pub mod watch;

use std::io::Write;
use std::sync::Arc;

use anyhow::{Context, bail};

use crate::telemetry::escape_json_invisible;
use jiff::Timestamp;
use rusqlite::OptionalExtension;

use crate::audit::{AuditEntry, AuditHead, Broken, Verifier};
use crate::config::{Backend, Settings};
use crate::store::sqlite::{
    interactions_without_created_entry, open_read_only, read_audit, read_audit_head, schema_version,
};
use crate::store::{AuditQuery, Store, StoreError};
use crate::telemetry::escape;

/// The exit codes, for `--help`.
pub(crate) const EXIT_CODES: &str = "\
Exit status:
  0  answered (pending, show: listed or shown)
  1  any other error (a bad configuration, an unexpected reply)
  2  the command line is wrong
  3  already resolved: answered elsewhere first, expired or cancelled
  4  no such interaction (unknown, or pruned after its retention period)
  5  refused: the answer does not fit, your vote was given already, or the token is missing
     or not accepted
  6  imrelay cannot be reached or cannot take it now: try again";

/// The login name, for `--by`: `USER` or `LOGNAME`, else the account's name.
pub(crate) fn login_name() -> Option<String> {
    ["USER", "LOGNAME"]
        .iter()
        .filter_map(|k| std::env::var(k).ok())
        .find(|v| !v.trim().is_empty())
        .or_else(|| whoami::username().ok())
        .filter(|v| !v.trim().is_empty())
}

const CHUNK: usize = 1000;

/// Parses `--since`: an RFC 3339 time (`2026-11-22T08:00:00Z`) or an age (`2h`, `30m`,
/// `7d`, `1 day`).
pub(crate) fn parse_since(raw: &str, now: Timestamp) -> anyhow::Result<Timestamp> {
    if let Ok(t) = raw.parse::<Timestamp>() {
        return Ok(t);
    }
    let age: jiff::SignedDuration = raw
        .parse::<jiff::Span>()
        .ok()
        .and_then(|s| {
            s.to_duration(jiff::SpanRelativeTo::days_are_24_hours())
                .ok()
        })
        .or_else(|| raw.parse::<jiff::SignedDuration>().ok())
        .with_context(|| {
            format!(
                "--since {raw:?}: expected a time like 2026-11-22T08:00:00Z or an age like 2h or 7d"
            )
        })?;
    Ok(now.checked_sub(age.abs())?)
}

pub(crate) fn database(settings: &Settings) -> anyhow::Result<rusqlite::Connection> {
    match settings.store.backend {
        Backend::Sqlite => {}
        Backend::Memory => bail!(
            "the audit trail of the memory store lives only in the server process: use GET /v1/audit"
        ),
        Backend::Postgres => bail!(
            "`imrelay audit list` reads a SQLite file; with store.backend = \"postgres\" read \
             the trail through GET /v1/audit of any replica (`audit verify` and `audit head` \
             work on PostgreSQL)"
        ),
    }
    Ok(open_read_only(&settings.store.path)?)
}

/// Writes a consistent copy of the SQLite database to `target`, which must not exist yet, or
/// to standard output when `target` is `-`, and returns its size in bytes. Safe while the
/// server runs: the copy is one read snapshot.
pub fn backup(settings: &Settings, target: &std::path::Path) -> anyhow::Result<u64> {
    match settings.store.backend {
        Backend::Sqlite => {}
        Backend::Memory => {
            bail!("store.backend is \"memory\": there is no database on disk to back up")
        }
        Backend::Postgres => bail!(
            "store.backend is \"postgres\": back the database up with PostgreSQL's own tools \
             (pg_dump --schema={} …, or your provider's snapshots)",
            settings.store.schema
        ),
    }
    if target == std::path::Path::new("-") {
        // SQLite writes a file; it is made beside the database (the one directory known to
        // be writable, in a container with a read-only root too), streamed, and removed.
        let db = &settings.store.path;
        let dir = db.parent().unwrap_or(std::path::Path::new("."));
        let tmp = dir.join(format!(".imrelay-backup-{}.db", std::process::id()));
        let _ = std::fs::remove_file(&tmp);
        let result = backup(settings, &tmp).and_then(|_| {
            let mut file = std::fs::File::open(&tmp)?;
            let mut out = std::io::stdout().lock();
            let n = std::io::copy(&mut file, &mut out)?;
            out.flush()?;
            Ok(n)
        });
        let _ = std::fs::remove_file(&tmp);
        return result;
    }
    if target.exists() {
        bail!(
            "{} already exists: name a new file for the backup",
            target.display()
        );
    }
    let target_text = target
        .to_str()
        .context("the backup path must be valid UTF-8")?;
    let conn = open_read_only(&settings.store.path)?;
    conn.execute("VACUUM INTO ?1", [target_text])
        .with_context(|| format!("cannot write the backup to {}", target.display()))?;
    Ok(std::fs::metadata(target)?.len())
}

/// Reads the whole trail (from `since`) in chunks, calling `f` on each entry in order.
pub(crate) fn each_entry(
    conn: &rusqlite::Connection,
    since: Option<Timestamp>,
    mut f: impl FnMut(&AuditEntry) -> anyhow::Result<()>,
) -> anyhow::Result<()> {
    let mut after = 0;
    loop {
        let chunk = read_audit(
            conn,
            &AuditQuery {
                after_seq: after,
                since,
                limit: CHUNK,
            },
        )?;
        for e in &chunk {
            f(e)?;
        }
        match chunk.last() {
            Some(last) if chunk.len() == CHUNK => after = last.seq,
            _ => return Ok(()),
        }
    }
}

/// Writes one line on standard output; see [`say!`]. Any other failure to write is reported
/// on standard error (quietly dropped when that is closed too).
pub(crate) fn say_line(line: std::fmt::Arguments<'_>) {
    let mut out = std::io::stdout().lock();
    if let Err(e) = out.write_fmt(line).and_then(|()| out.write_all(b"\n"))
        && !is_closed_output(&e)
    {
        let _ = writeln!(
            std::io::stderr(),
            "imrelay: cannot write to standard output: {e}"
        );
    }
}

/// Whether `e` says the reader of an output went away (a closed pipe): the conventional end
/// of a command piped into `head`, not a failure.
pub fn is_closed_output(e: &std::io::Error) -> bool {
    e.kind() == std::io::ErrorKind::BrokenPipe
}

/// Whether `e`, or any error it wraps, is a closed output ([`is_closed_output`]).
pub fn ended_by_closed_output(e: &anyhow::Error) -> bool {
    e.chain()
        .filter_map(|cause| cause.downcast_ref::<std::io::Error>())
        .any(is_closed_output)
}

/// `imrelay audit [--since ...] [--json]`
pub fn audit_print(settings: &Settings, since: Option<&str>, json: bool) -> anyhow::Result<()> {
    let since = since
        .map(|s| parse_since(s, Timestamp::now()))
        .transpose()?;
    let conn = database(settings)?;
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    if !json {
        writeln!(
            out,
            "{:>6}  {:<24}  {:<15}  {:<28}  {:<16}  {:<16}  {:<10}  detail",
            "seq", "time", "action", "interaction", "actor", "channel", "outcome"
        )?;
    }
    each_entry(&conn, since, |e| {
        let r = &e.record;
        if json {
            writeln!(out, "{}", escape_json_invisible(&serde_json::to_string(e)?))?;
        } else {
            writeln!(
                out,
                "{:>6}  {:<24}  {:<15}  {:<28}  {:<16}  {:<16}  {:<10}  {}",
                e.seq,
                crate::interaction::Millis(r.at).to_string(),
                r.action.as_str(),
                r.interaction_id.as_deref().unwrap_or("-"),
                // Names and messages came from outside: nothing in them reaches the terminal
                // as a control sequence or a line of its own.
                escape(r.actor.as_deref().unwrap_or("-")),
                r.channel,
                r.outcome,
                escape(r.detail.as_deref().unwrap_or(""))
            )?;
        }
        Ok(())
    })
}

/// The first schema version that records the audit chain's head.
const HEAD_SCHEMA: i64 = 3;

/// `imrelay audit verify [--expect SEQ:HASH]`: `Ok(true)` if the chain is intact, ends at
/// the head the store recorded, passes through `expect` (a head kept elsewhere earlier), and
/// every stored interaction has its `created` entry.
pub fn audit_verify(settings: &Settings, expect: Option<&str>) -> anyhow::Result<bool> {
    let expect: Option<AuditHead> = expect
        .map(|e| {
            e.parse()
                .map_err(|e: String| anyhow::anyhow!("--expect: {e}"))
        })
        .transpose()?;
    if settings.store.backend == Backend::Postgres {
        return on_postgres(settings, |store| audit_verify_shared(store, expect));
    }
    let conn = database(settings)?;
    // One read transaction: the chain, its head and the interactions as of one moment, even
    // while the server appends.
    let tx = conn.unchecked_transaction()?;
    let mut verifier = match expect {
        Some(head) => Verifier::expecting(head),
        None => Verifier::default(),
    };
    let mut broken = None;
    each_entry(&tx, None, |e| {
        if broken.is_none()
            && let Err(b) = verifier.check(e)
        {
            broken = Some(b);
        }
        Ok(())
    })?;
    let has_head = schema_version(&tx)? >= HEAD_SCHEMA;
    if broken.is_none() {
        let recorded = if has_head {
            read_audit_head(&tx)
        } else {
            Ok(verifier.end())
        };
        broken = match recorded {
            Ok(recorded) => verifier.finish(recorded.as_ref()).err(),
            Err(StoreError::Corrupt(e)) => Some(Broken {
                seq: verifier.verified(),
                reason: format!("the recorded chain head is unreadable: {e}"),
            }),
            Err(e) => return Err(e.into()),
        };
    }
    let (missing, sample) = interactions_without_created_entry(&tx, 5)?;
    tx.finish()?;
    if let Some(b) = broken {
        say!("audit trail BROKEN: {b}");
        return Ok(false);
    }
    if missing > 0 {
        say!(
            "audit trail INCOMPLETE: {missing} stored interaction(s) have no `created` entry \
             (e.g. {}): their entries were deleted, or they were created while [audit] was \
             disabled",
            sample.join(", ")
        );
        return Ok(false);
    }
    match verifier.end() {
        None => say!("audit trail intact: 0 entries"),
        Some(end) => say!(
            "audit trail intact: {} entries, head {end}{}",
            verifier.verified(),
            if has_head {
                ""
            } else {
                " (this database predates recorded heads: the end of the chain was not checked)"
            }
        ),
    }
    Ok(true)
}

/// Runs `f` on the configured PostgreSQL store (opened, and so migrated, as a replica
/// would), on a runtime of its own.
pub(crate) fn on_postgres<T, F, Fut>(settings: &Settings, f: F) -> anyhow::Result<T>
where
    F: FnOnce(Arc<dyn Store>) -> Fut,
    Fut: std::future::Future<Output = anyhow::Result<T>>,
{
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    rt.block_on(async {
        let store = crate::app::open_store(settings).await?;
        f(store).await
    })
}

/// `audit verify` on a store other processes may be appending to: the chain is checked up to
/// the head recorded when the check began (entries appended since are left for the next
/// check), through `expect` if given.
async fn audit_verify_shared(
    store: Arc<dyn Store>,
    expect: Option<AuditHead>,
) -> anyhow::Result<bool> {
    /// Entries read at once.
    const PAGE: usize = 1000;
    let recorded = match store.audit_head().await {
        Ok(head) => head,
        Err(StoreError::Corrupt(e)) => {
            say!("audit trail BROKEN: the recorded chain head is unreadable: {e}");
            return Ok(false);
        }
        Err(e) => return Err(e.into()),
    };
    let end = recorded.as_ref().map_or(i64::MAX, |h| h.seq);
    let mut verifier = match expect {
        Some(head) => Verifier::expecting(head),
        None => Verifier::default(),
    };
    let mut after = 0;
    'pages: loop {
        let page = store
            .audit(&AuditQuery {
                after_seq: after,
                since: None,
                limit: PAGE,
            })
            .await?;
        let n = page.len();
        for e in &page {
            if e.seq > end {
                break 'pages;
            }
            if let Err(b) = verifier.check(e) {
                say!("audit trail BROKEN: {b}");
                return Ok(false);
            }
            after = e.seq;
        }
        if n < PAGE {
            break;
        }
    }
    if let Err(b) = verifier.finish(recorded.as_ref()) {
        say!("audit trail BROKEN: {b}");
        return Ok(false);
    }
    match verifier.end() {
        None => say!("audit trail intact: 0 entries"),
        Some(end) => say!(
            "audit trail intact: {} entries, head {end}",
            verifier.verified()
        ),
    }
    Ok(true)
}

/// `imrelay audit head`: prints the chain's head (`SEQ:HASH`) to keep outside the store, for a
/// later `audit verify --expect`.
pub fn audit_head(settings: &Settings) -> anyhow::Result<()> {
    if settings.store.backend == Backend::Postgres {
        return on_postgres(settings, |store| async move {
            match store.audit_head().await? {
                Some(head) => say!("{head}"),
                None => bail!("the audit trail is empty"),
            }
            Ok(())
        });
    }
    let conn = database(settings)?;
    let tx = conn.unchecked_transaction()?;
    let records_heads = schema_version(&tx)? >= HEAD_SCHEMA;
    let recorded = if records_heads {
        read_audit_head(&tx)?
    } else {
        None
    };
    let last_row = || -> anyhow::Result<Option<AuditHead>> {
        Ok(tx
            .query_row(
                "SELECT seq, hash FROM audit ORDER BY seq DESC LIMIT 1",
                [],
                |r| {
                    Ok(AuditHead {
                        seq: r.get(0)?,
                        hash: r.get(1)?,
                    })
                },
            )
            .optional()?)
    };
    let head = match recorded {
        Some(h) => h,
        // A database that records heads and has entries but no head lost it: the last row
        // is then no head to trust.
        None if records_heads && last_row()?.is_some() => {
            bail!("the audit trail's recorded head is missing; run `imrelay audit verify`")
        }
        None => match last_row()? {
            Some(h) => h,
            None => bail!("the audit trail is empty"),
        },
    };
    tx.finish()?;
    say!("{head}");
    Ok(())
}

/// Which health endpoint `imrelay healthcheck` asks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Probe {
    /// `/healthz`: ready, with a store that can take writes.
    Ready,
    /// `/livez`: the process serves requests.
    Live,
}

/// The URL of `probe` on the server these settings describe (a wildcard listen address is
/// reached on loopback).
pub(crate) fn health_url(settings: &Settings, probe: Probe) -> String {
    let path = match probe {
        Probe::Ready => "/healthz",
        Probe::Live => "/livez",
    };
    format!("{}{path}", client::local_url(settings))
}

/// `imrelay healthcheck`: `Ok(true)` if the server answers `probe` (or `url`) with 200 in
/// time.
pub fn healthcheck(settings: &Settings, probe: Probe, url: Option<&str>) -> anyhow::Result<bool> {
    let url = url
        .map(str::to_string)
        .unwrap_or_else(|| health_url(settings, probe));
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async {
        let client = reqwest::Client::builder()
            .timeout(std::time::Duration::from_secs(3))
            .build()?;
        match client.get(&url).send().await {
            Ok(r) if r.status().is_success() => {
                say!("healthy: {url}");
                Ok(true)
            }
            Ok(r) => {
                say!("unhealthy: {url} answered {}", r.status());
                Ok(false)
            }
            Err(e) => {
                say!("unhealthy: {url}: {e}");
                Ok(false)
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn health_urls_reach_a_wildcard_listener_on_loopback() {
        let mut s = Settings::defaults().unwrap();
        s.server.listen = "0.0.0.0:9000".parse().unwrap();
        assert_eq!(
            health_url(&s, Probe::Ready),
            "http://127.0.0.1:9000/healthz"
        );
        assert_eq!(health_url(&s, Probe::Live), "http://127.0.0.1:9000/livez");
        s.server.listen = "[::]:9000".parse().unwrap();
        assert_eq!(health_url(&s, Probe::Live), "http://[::1]:9000/livez");
    }

    #[test]
    fn since_accepts_times_and_ages() {
        let now: Timestamp = "2026-11-22T10:00:00Z".parse().unwrap();
        assert_eq!(
            parse_since("2026-11-22T08:00:00Z", now)
                .unwrap()
                .to_string(),
            "2026-11-22T08:00:00Z"
        );
        assert_eq!(
            parse_since("2h", now).unwrap().to_string(),
            "2026-11-22T08:00:00Z"
        );
        assert_eq!(
            parse_since("1d", now).unwrap().to_string(),
            "2026-11-21T10:00:00Z"
        );
        assert_eq!(
            parse_since("30m", now).unwrap().to_string(),
            "2026-11-22T09:30:00Z"
        );
        assert!(parse_since("yesterday-ish", now).is_err());
    }
}
