//! `loadgen mcp`: what MCP sessions and GET streams on `/mcp` cost a running server, and what
//! a client over the limits gets. Opens sessions (`initialize` + `initialized`) on a few
//! keep-alive connections, then GET streams on connections of their own, each held open;
//! reads the server's memory after each step, and whether `POST /v1/interactions` is still
//! served while the streams are held. With `--watch-idle-secs`, waits for the sessions to be
//! closed as idle (`imrelay_mcp_sessions` at 0) once the streams are gone.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use serde_json::json;

use super::{Conn, SETTLE, loopback, rss, stable_rss};

/// Connections the sessions are opened on, at once.
const OPENERS: usize = 8;

/// What one run saw.
#[derive(Debug, serde::Serialize)]
pub(super) struct McpReport {
    sessions_asked: usize,
    /// Answers to `initialize`, by status.
    sessions_by_status: std::collections::BTreeMap<u16, usize>,
    streams_asked: usize,
    /// Answers to the GET streams, by status (0: no answer within 5 s).
    streams_by_status: std::collections::BTreeMap<u16, usize>,
    /// `POST /v1/interactions` while the streams were held: statuses of 5 tries.
    api_while_streams: Vec<u16>,
    rss_idle_bytes: u64,
    rss_with_sessions_bytes: u64,
    bytes_per_session: f64,
    rss_with_streams_bytes: u64,
    /// Seconds from the streams' end until no session was left, if watched and reached.
    idle_closed_after_secs: Option<f64>,
    rss_after_idle_bytes: Option<u64>,
    seconds_to_open: f64,
}

/// One MCP request on `conn`: the status, the session id it gave, and the body.
async fn post(
    conn: &mut Conn,
    body: &serde_json::Value,
    session: Option<&str>,
) -> anyhow::Result<(u16, Option<String>, Bytes)> {
    conn.tx.ready().await?;
    let mut req = hyper::Request::builder()
        .method("POST")
        .uri("/mcp")
        .header("host", &conn.host)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream");
    if let Some(s) = session {
        req = req
            .header("mcp-session-id", s)
            .header("mcp-protocol-version", "2025-06-18");
    }
    let req = req.body(Full::new(Bytes::from(body.to_string())))?;
    let resp = conn.tx.send_request(req).await?;
    let status = resp.status().as_u16();
    let session = resp
        .headers()
        .get("mcp-session-id")
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    let bytes = resp.into_body().collect().await?.to_bytes();
    Ok((status, session, bytes))
}

/// Opens `count` sessions on one connection; their ids, and the statuses of the refusals.
async fn open_sessions(addr: SocketAddr, count: usize) -> anyhow::Result<(Vec<String>, Vec<u16>)> {
    let mut conn = Conn::open(addr).await?;
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "loadgen", "version": "1"}}});
    let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    let (mut opened, mut refused) = (Vec::new(), Vec::new());
    for _ in 0..count {
        let (status, session, _) = post(&mut conn, &init, None).await?;
        match (status, session) {
            (200, Some(s)) => {
                let (status, _, body) = post(&mut conn, &initialized, Some(&s)).await?;
                if status != 202 {
                    bail!("initialized: {status} {}", String::from_utf8_lossy(&body));
                }
                opened.push(s);
            }
            (status, _) => refused.push(status),
        }
    }
    Ok((opened, refused))
}

/// Opens a GET stream of `session` on a connection of its own: the status of its answer (0:
/// none within 5 s) and the connection, held open when the stream was accepted.
async fn open_stream(
    addr: SocketAddr,
    session: &str,
) -> anyhow::Result<(u16, Option<tokio::net::TcpStream>)> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut s = tokio::net::TcpStream::connect(addr).await?;
    s.write_all(
        format!(
            "GET /mcp HTTP/1.1\r\nHost: {addr}\r\nAccept: text/event-stream\r\n\
             Mcp-Session-Id: {session}\r\nMCP-Protocol-Version: 2025-06-18\r\n\r\n"
        )
        .as_bytes(),
    )
    .await?;
    let mut head = [0u8; 12];
    let status = match tokio::time::timeout(Duration::from_secs(5), s.read_exact(&mut head)).await {
        Ok(Ok(_)) => std::str::from_utf8(&head[9..12])
            .ok()
            .and_then(|c| c.parse().ok())
            .unwrap_or(0),
        _ => 0,
    };
    // A refused client goes away, as a client would.
    Ok((status, (status == 200).then_some(s)))
}

/// The value of the `imrelay_mcp_sessions` gauge.
async fn open_sessions_gauge(addr: SocketAddr) -> anyhow::Result<Option<u64>> {
    let mut conn = Conn::open(addr).await?;
    let (_, body) = conn.call("GET", "/metrics", None).await?;
    Ok(String::from_utf8_lossy(&body)
        .lines()
        .find_map(|l| l.strip_prefix("imrelay_mcp_sessions "))
        .and_then(|v| v.trim().parse().ok()))
}

/// Runs the steps against the server at `url` (process `pid`).
pub(super) async fn run(
    url: &str,
    sessions: usize,
    streams: usize,
    watch_idle: Option<Duration>,
    pid: u32,
    timeout: Duration,
) -> anyhow::Result<McpReport> {
    let addr = loopback(url)?;
    tokio::time::sleep(SETTLE).await;
    let idle = rss(pid)?;
    let t = Instant::now();
    let per = sessions.div_ceil(OPENERS);
    let openers: Vec<_> = (0..OPENERS)
        .map(|i| {
            let n = per.min(sessions.saturating_sub(i * per));
            tokio::spawn(open_sessions(addr, n))
        })
        .collect();
    let mut opened = Vec::new();
    let mut sessions_by_status = std::collections::BTreeMap::new();
    let all = tokio::time::timeout(timeout, futures_util::future::join_all(openers))
        .await
        .context("the sessions were not opened in time")?;
    for r in all {
        let (ok, refused) = r??;
        *sessions_by_status.entry(200).or_insert(0) += ok.len();
        for s in refused {
            *sessions_by_status.entry(s).or_insert(0) += 1;
        }
        opened.extend(ok);
    }
    let seconds_to_open = t.elapsed().as_secs_f64();
    let (with_sessions, _) = stable_rss(pid, Duration::from_secs(10)).await?;
    let mut held = Vec::new();
    let mut streams_by_status = std::collections::BTreeMap::new();
    if !opened.is_empty() {
        for n in 0..streams {
            let (status, conn) = open_stream(addr, &opened[n % opened.len()]).await?;
            *streams_by_status.entry(status).or_insert(0) += 1;
            held.extend(conn);
        }
    }
    let mut api_while_streams = Vec::new();
    for n in 0..5 {
        let status = match Conn::open(addr).await {
            Ok(mut conn) => {
                let body = json!({"id": format!("mcp-probe-{}-{n}", std::process::id()),
                    "tool_name": "Bash", "agent": "loadgen", "input": {"command": "true"}});
                conn.call("POST", "/v1/interactions", Some(body.to_string()))
                    .await
                    .map(|(s, _)| s)
                    .unwrap_or(0)
            }
            Err(_) => 0,
        };
        api_while_streams.push(status);
    }
    let (with_streams, _) = stable_rss(pid, Duration::from_secs(10)).await?;
    drop(held);
    let (mut idle_closed_after_secs, mut rss_after_idle_bytes) = (None, None);
    if let Some(limit) = watch_idle {
        let since = Instant::now();
        while since.elapsed() < limit {
            if open_sessions_gauge(addr).await? == Some(0) {
                idle_closed_after_secs = Some(since.elapsed().as_secs_f64());
                rss_after_idle_bytes = Some(stable_rss(pid, Duration::from_secs(10)).await?.0);
                break;
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    }
    let accepted = opened.len().max(1) as f64;
    Ok(McpReport {
        sessions_asked: sessions,
        sessions_by_status,
        streams_asked: streams,
        streams_by_status,
        api_while_streams,
        rss_idle_bytes: idle,
        rss_with_sessions_bytes: with_sessions,
        bytes_per_session: with_sessions.saturating_sub(idle) as f64 / accepted,
        rss_with_streams_bytes: with_streams,
        idle_closed_after_secs,
        rss_after_idle_bytes,
        seconds_to_open,
    })
}
