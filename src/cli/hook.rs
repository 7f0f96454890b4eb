//! `imrelay hook codex`: the command Codex runs for its `PermissionRequest` and `PreToolUse`
//! hooks (see docs/codex.md).
//!
//! It reads the hook's input on standard input, posts it unchanged to a running imrelay's
//! [`crate::agents::codex::PATH`] with an agent token (`IMRELAY_AGENT_TOKEN`), waits for a
//! person's answer, and prints the answer the server wrote in Codex's shape. Everything
//! Codex-specific is on the server ([`crate::agents::codex`]); this command only carries the
//! bytes, and decides what to do when there is no answer to carry:
//!
//! - `PermissionRequest` (Codex's terminal interface): on any failure (imrelay unreachable,
//!   a refused token, a bad answer) nothing is printed on standard output and the exit status
//!   is 1, so Codex shows its own approval prompt as if there were no hook; the reason goes
//!   to standard error. (Never exit status 2: Codex reads it as a deny.)
//! - `PreToolUse` (the only gate `codex exec` has): on any failure the call is denied with the
//!   reason, since no answer at all would let Codex run it.
//!
//! It asks imrelay for a deadline a few seconds below `--timeout` (the hook's `timeout` in
//! Codex's settings, 600 seconds by default), so the answer is back before Codex gives up on
//! the hook. When Codex does give up (its timeout, or the person interrupts the turn), it
//! kills this command: the connection closes and imrelay withdraws the interaction on every
//! channel. If a shell between Codex and this command is killed instead, this command sees
//! its parent change and exits at once, closing the connection all the same.

use std::io::{Read, Write};
use std::time::Duration;

use secrecy::ExposeSecret;

use super::client::{AgentRemoteArgs, exit};
use crate::telemetry::escape;
use crate::wire::MAX_BODY_BYTES;

/// Seconds between imrelay's deadline and the hook's timeout: time for the answer to come
/// back and be printed.
const MARGIN_SECS: u64 = 5;

/// How often the command checks that the process that started it is still there.
const PARENT_CHECK: Duration = Duration::from_millis(250);

/// `imrelay hook`'s arguments.
#[derive(Clone, clap::Args)]
pub struct HookArgs {
    #[command(subcommand)]
    agent: Agent,
}

/// The agents whose hooks this command serves.
#[derive(Clone, clap::Subcommand)]
enum Agent {
    /// Codex's `PermissionRequest` hook (its terminal interface) or `PreToolUse` hook (`codex
    /// exec`): reads the hook's input on standard input, prints the decision.
    Codex(CodexArgs),
}

/// `imrelay hook codex`'s arguments. (No `Debug`: it holds the token.)
#[derive(Clone, clap::Args)]
pub struct CodexArgs {
    /// Where the server is and the agent token to present.
    #[command(flatten)]
    pub remote: AgentRemoteArgs,
    /// The hook's `timeout` in Codex's settings, in seconds: imrelay's deadline is 5 seconds
    /// less.
    #[arg(long, value_name = "SECS", default_value_t = 600, value_parser = clap::value_parser!(u64).range(1..=31_536_000))]
    pub timeout: u64,
}

/// Runs the hook; returns the exit status.
pub fn run(args: HookArgs, config: Option<&std::path::Path>) -> i32 {
    match args.agent {
        Agent::Codex(args) => codex(args, config),
    }
}

/// The hook event named in an input, if it can be read.
fn event_of(input: &[u8]) -> Option<String> {
    #[derive(serde::Deserialize)]
    struct Probe {
        hook_event_name: Option<String>,
    }
    serde_json::from_slice::<Probe>(input)
        .ok()
        .and_then(|p| p.hook_event_name)
}

fn codex(args: CodexArgs, config: Option<&std::path::Path>) -> i32 {
    let mut input = Vec::new();
    let read = std::io::stdin()
        .lock()
        .take(MAX_BODY_BYTES as u64 + 1)
        .read_to_end(&mut input);
    let event = event_of(&input);
    let outcome = match read {
        Err(e) => Err(format!("cannot read the hook's input: {e}")),
        Ok(_) if input.len() > MAX_BODY_BYTES => Err(format!(
            "the hook's input is larger than {MAX_BODY_BYTES} bytes"
        )),
        Ok(_) => tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| format!("cannot start the async runtime: {e}"))
            .and_then(|rt| rt.block_on(ask(&args, config, input))),
    };
    let mut out = std::io::stdout().lock();
    match outcome {
        Ok(answer) => {
            // A closed output is Codex gone: nothing left to tell.
            let _ = out.write_all(&answer).and_then(|()| out.write_all(b"\n"));
            exit::OK
        }
        Err(why) if event.as_deref() == Some("PreToolUse") => {
            // No answer would let the call go on: deny it, saying why.
            let reason = format!("imrelay could not ask anyone: {why}");
            let deny = serde_json::json!({"hookSpecificOutput": {
                "hookEventName": "PreToolUse",
                "permissionDecision": "deny",
                "permissionDecisionReason": reason,
            }});
            let _ = writeln!(out, "{deny}");
            eprintln!("imrelay hook codex: {}", escape(&why));
            exit::OK
        }
        Err(why) => {
            // Nothing on standard output: Codex asks in its own prompt.
            eprintln!("imrelay hook codex: {}", escape(&why));
            exit::ERROR
        }
    }
}

/// Posts `input` and returns the answer to print, or why there is none.
async fn ask(
    args: &CodexArgs,
    config: Option<&std::path::Path>,
    input: Vec<u8>,
) -> Result<Vec<u8>, String> {
    let base = args.remote.base_url(config).map_err(|e| format!("{e:#}"))?;
    let deadline = args.timeout.saturating_sub(MARGIN_SECS).max(1);
    let url = format!("{base}{}?timeout={deadline}", crate::agents::codex::PATH);
    let http = reqwest::Client::builder()
        .connect_timeout(Duration::from_secs(5))
        // Give up a little before Codex would kill the command.
        .timeout(Duration::from_secs(args.timeout.saturating_sub(2).max(1)))
        .user_agent(concat!("imrelay-hook/", env!("CARGO_PKG_VERSION")))
        .build()
        .map_err(|e| format!("cannot build the HTTP client: {e}"))?;
    let mut request = http
        .post(&url)
        .header(reqwest::header::CONTENT_TYPE, "application/json")
        .body(input);
    let token = args.remote.token();
    if let Some(t) = &token {
        request = request.bearer_auth(t.expose_secret());
    }
    let answer = async {
        let response = request
            .send()
            .await
            .map_err(|e| format!("cannot reach imrelay at {base}: {e}"))?;
        let status = response.status();
        let body = response
            .bytes()
            .await
            .map_err(|e| format!("imrelay's answer was cut off: {e}"))?;
        if !status.is_success() {
            let message = serde_json::from_slice::<serde_json::Value>(&body)
                .ok()
                .and_then(|v| v["error"]["message"].as_str().map(str::to_string))
                .unwrap_or_default();
            return Err(format!("imrelay answered {status}: {message}"));
        }
        match serde_json::from_slice::<serde_json::Value>(&body) {
            Ok(serde_json::Value::Object(_)) if body.len() <= MAX_BODY_BYTES => Ok(body.to_vec()),
            _ => Err(format!(
                "imrelay at {base} did not answer with a JSON object"
            )),
        }
    };
    tokio::select! {
        a = answer => a,
        () = parent_gone() => Err("the process that ran the hook is gone".into()),
    }
}

/// Resolves when the process that started this one has gone (this one was reparented).
async fn parent_gone() {
    #[cfg(unix)]
    {
        let parent = std::os::unix::process::parent_id();
        loop {
            tokio::time::sleep(PARENT_CHECK).await;
            if std::os::unix::process::parent_id() != parent {
                return;
            }
        }
    }
    #[cfg(not(unix))]
    std::future::pending::<()>().await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_event_is_read_from_any_input() {
        assert_eq!(
            event_of(br#"{"hook_event_name":"PreToolUse","tool_name":"Bash"}"#).as_deref(),
            Some("PreToolUse")
        );
        assert_eq!(event_of(b"{not json"), None);
        assert_eq!(event_of(br#"{"hook_event_name":5}"#), None);
    }
}
