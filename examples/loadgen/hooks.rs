//! `loadgen hooks`: the round trip of an agent's session hooks through a running server.
//! Each of `--agents` simulated Claude Code sessions, on a keep-alive connection of its own,
//! loops: `PostToolUse` (a tool ran: the session is recorded as working, and any queued
//! message would be handed over), then every `--tools-per-turn` tools a `Stop` (the turn
//! ended: the session is recorded as finished, and with `on_finish = "off"` the hook is
//! answered at once). Every hook is a `POST /v1/hooks/claude-code` as Claude Code's `http`
//! hook sends it; its latency is from the request's first byte to the answer's last.
//!
//! With `--message-every N`, every N-th turn an operator first queues a message for the
//! session (`POST /v1/sessions/claude-code/{id}/messages`, under a name of its own per
//! session, within the per-person rate), and the next `PostToolUse` carries it to the agent:
//! those hooks are counted apart.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use anyhow::bail;
use hdrhistogram::Histogram;
use serde_json::json;

use super::{Conn, Percentiles, hist, percentiles};

/// What one run saw.
#[derive(Debug, serde::Serialize)]
pub(super) struct HooksReport {
    agents: usize,
    seconds: f64,
    /// `PostToolUse` hooks answered, and their latency in microseconds.
    post_tool_use: usize,
    post_tool_use_us: Percentiles,
    /// Of those, the ones that carried a queued message to the agent.
    delivering: usize,
    delivering_us: Option<Percentiles>,
    /// `Stop` hooks answered (`on_finish = "off"`), and their latency in microseconds.
    stop: usize,
    stop_us: Percentiles,
    /// Hook events per second, all kinds.
    hooks_per_sec: f64,
}

/// One simulated session's histograms.
struct Seen {
    tool: Histogram<u64>,
    delivering: Histogram<u64>,
    stop: Histogram<u64>,
}

/// A Claude Code hook input of `event` in session `id`.
fn input(id: &str, event: &str) -> String {
    let mut body = json!({
        "session_id": id,
        "transcript_path": format!("/home/dev/.claude/projects/bench/{id}.jsonl"),
        "cwd": "/home/dev/project",
        "permission_mode": "default",
        "hook_event_name": event,
    });
    match event {
        "PostToolUse" => {
            body["tool_name"] = json!("Bash");
            body["tool_input"] =
                json!({"command": "cargo test --package crate-1", "description": "Run the tests"});
            body["tool_response"] =
                json!({"stdout": "test result: ok. 12 passed", "stderr": "", "interrupted": false});
        }
        "Stop" => {
            body["stop_hook_active"] = json!(false);
            body["last_assistant_message"] =
                json!("The tests pass; the change is ready for review.");
        }
        _ => {}
    }
    body.to_string()
}

/// One session's loop until `until`.
async fn session(
    addr: SocketAddr,
    k: usize,
    tools_per_turn: usize,
    message_every: Option<usize>,
    until: Instant,
) -> anyhow::Result<Seen> {
    let mut conn = Conn::open(addr).await?;
    let id = format!("bench-{k:05}-0190f1e2-a3b4-c5d6-e7f8-091a2b3c4d5e");
    let mut seen = Seen {
        tool: hist(),
        delivering: hist(),
        stop: hist(),
    };
    let (status, body) = conn
        .call(
            "POST",
            "/v1/hooks/claude-code",
            Some(input(&id, "SessionStart")),
        )
        .await?;
    if status != 200 {
        bail!("SessionStart: {status} {}", String::from_utf8_lossy(&body));
    }
    let mut turn = 0usize;
    while Instant::now() < until {
        turn += 1;
        let mut queued = message_every.is_some_and(|n| n > 0 && turn.is_multiple_of(n));
        if queued {
            let message = json!({"text": format!("Turn {turn}: also run the linter."),
                                 "by": format!("op-{k}")});
            let path = format!("/v1/sessions/claude-code/{id}/messages");
            let (status, body) = conn.call("POST", &path, Some(message.to_string())).await?;
            match status {
                202 => {}
                // The per-person rate (10 at once, then one every 6 s): this turn goes without.
                400 => queued = false,
                _ => bail!("a message: {status} {}", String::from_utf8_lossy(&body)),
            }
        }
        for t in 0..tools_per_turn {
            let start = Instant::now();
            let (status, body) = conn
                .call(
                    "POST",
                    "/v1/hooks/claude-code",
                    Some(input(&id, "PostToolUse")),
                )
                .await?;
            let us = start.elapsed().as_micros() as u64;
            if status != 200 {
                bail!("PostToolUse: {status} {}", String::from_utf8_lossy(&body));
            }
            if queued && t == 0 {
                if !String::from_utf8_lossy(&body).contains("additionalContext") {
                    bail!(
                        "a queued message was not handed over: {}",
                        String::from_utf8_lossy(&body)
                    );
                }
                seen.delivering.record(us.max(1))?;
            } else {
                seen.tool.record(us.max(1))?;
            }
        }
        let start = Instant::now();
        let (status, body) = conn
            .call("POST", "/v1/hooks/claude-code", Some(input(&id, "Stop")))
            .await?;
        let us = start.elapsed().as_micros() as u64;
        if status != 200 || body.as_ref() != b"{}" {
            bail!("Stop: {status} {}", String::from_utf8_lossy(&body));
        }
        seen.stop.record(us.max(1))?;
    }
    Ok(seen)
}

/// Runs `agents` sessions against `url` for `duration` (after a one-second warm-up that is
/// not counted).
pub(super) async fn run(
    url: &str,
    agents: usize,
    tools_per_turn: usize,
    message_every: Option<usize>,
    duration: Duration,
) -> anyhow::Result<HooksReport> {
    let addr = super::loopback(url)?;
    // Warm-up: every session started and a turn run, not counted.
    let warm = Instant::now() + Duration::from_secs(1);
    let mut tasks = Vec::new();
    for k in 0..agents {
        tasks.push(tokio::spawn(session(addr, k, tools_per_turn, None, warm)));
    }
    for t in tasks {
        t.await??;
    }
    let start = Instant::now();
    let until = start + duration;
    let mut tasks = Vec::new();
    for k in 0..agents {
        tasks.push(tokio::spawn(session(
            addr,
            k,
            tools_per_turn,
            message_every,
            until,
        )));
    }
    let (mut tool, mut delivering, mut stop) = (hist(), hist(), hist());
    for t in tasks {
        let s = t.await??;
        tool.add(&s.tool)?;
        delivering.add(&s.delivering)?;
        stop.add(&s.stop)?;
    }
    let seconds = start.elapsed().as_secs_f64();
    let total = tool.len() + delivering.len() + stop.len();
    Ok(HooksReport {
        agents,
        seconds,
        post_tool_use: (tool.len() + delivering.len()) as usize,
        post_tool_use_us: percentiles(&tool),
        delivering: delivering.len() as usize,
        delivering_us: (!delivering.is_empty()).then(|| percentiles(&delivering)),
        stop: stop.len() as usize,
        stop_us: percentiles(&stop),
        hooks_per_sec: total as f64 / seconds,
    })
}
