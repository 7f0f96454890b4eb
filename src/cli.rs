//! Command-line tools beside the server: `imrelay audit` prints the audit trail and
//! `imrelay audit verify` checks its hash chain (both read the SQLite database directly and
//! read-only, so they work while the server runs); `imrelay healthcheck` asks a running
//! server's `/healthz` (for container health checks, where there is no curl).

use std::io::Write;

use anyhow::{Context, bail};
use jiff::Timestamp;

use crate::audit::{AuditEntry, Verifier};
use crate::config::{Backend, Settings};
use crate::store::AuditQuery;
use crate::store::sqlite::{open_read_only, read_audit};

const CHUNK: usize = 1000;

/// Parses `--since`: an RFC 3339 time (`2026-11-22T08:00:00Z`) or an age (`2h`, `30m`,
/// `7d`, `1 day`).
pub fn parse_since(raw: &str, now: Timestamp) -> anyhow::Result<Timestamp> {
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

fn database(settings: &Settings) -> anyhow::Result<rusqlite::Connection> {
    if settings.store.backend != Backend::Sqlite {
        bail!(
            "the audit trail of the memory store lives only in the server process: use GET /v1/audit"
        );
    }
    Ok(open_read_only(&settings.store.path)?)
}

/// Reads the whole trail (from `since`) in chunks, calling `f` on each entry in order.
fn each_entry(
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
            writeln!(out, "{}", serde_json::to_string(e)?)?;
        } else {
            writeln!(
                out,
                "{:>6}  {:<24}  {:<15}  {:<28}  {:<16}  {:<16}  {:<10}  {}",
                e.seq,
                r.at.to_string(),
                r.action.as_str(),
                r.interaction_id.as_deref().unwrap_or("-"),
                r.actor.as_deref().unwrap_or("-"),
                r.channel,
                r.outcome,
                r.detail.as_deref().unwrap_or("")
            )?;
        }
        Ok(())
    })
}

/// `imrelay audit verify`: `Ok(true)` if the chain is intact.
pub fn audit_verify(settings: &Settings) -> anyhow::Result<bool> {
    let conn = database(settings)?;
    let mut verifier = Verifier::default();
    let mut broken = None;
    let mut last_hash = String::new();
    each_entry(&conn, None, |e| {
        if broken.is_none() {
            match verifier.check(e) {
                Ok(()) => last_hash = e.hash.clone(),
                Err(b) => broken = Some(b),
            }
        }
        Ok(())
    })?;
    match broken {
        None => {
            println!(
                "audit trail intact: {} entries{}",
                verifier.verified(),
                if last_hash.is_empty() {
                    String::new()
                } else {
                    format!(", last hash {last_hash}")
                }
            );
            Ok(true)
        }
        Some(b) => {
            println!("audit trail BROKEN: {b}");
            Ok(false)
        }
    }
}

/// The `/healthz` URL of the server these settings describe (a wildcard listen address is
/// reached on loopback).
pub fn health_url(settings: &Settings) -> String {
    let mut addr = settings.server.listen;
    if addr.ip().is_unspecified() {
        addr.set_ip(match addr {
            std::net::SocketAddr::V4(_) => std::net::Ipv4Addr::LOCALHOST.into(),
            std::net::SocketAddr::V6(_) => std::net::Ipv6Addr::LOCALHOST.into(),
        });
    }
    format!("http://{addr}/healthz")
}

/// `imrelay healthcheck`: `Ok(true)` if the server answers `/healthz` with 200 in time.
pub fn healthcheck(settings: &Settings, url: Option<&str>) -> anyhow::Result<bool> {
    let url = url
        .map(str::to_string)
        .unwrap_or_else(|| health_url(settings));
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async {
        let client = reqwest::Client::builder()
            .timeout(std::time::Duration::from_secs(3))
            .build()?;
        match client.get(&url).send().await {
            Ok(r) if r.status().is_success() => {
                println!("healthy: {url}");
                Ok(true)
            }
            Ok(r) => {
                println!("unhealthy: {url} answered {}", r.status());
                Ok(false)
            }
            Err(e) => {
                println!("unhealthy: {url}: {e}");
                Ok(false)
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

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
