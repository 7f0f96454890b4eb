//! The fake Discord (`tests/it/discord/fake.rs`) validated against a widely used client
//! library: discord.py 2.7, installed into a virtualenv under `target/discordpy` by
//! `tests/external/discord/install.sh`, logs in, identifies, heartbeats, posts a message with
//! a button, answers a click through an interaction callback, edits its message and resumes
//! after the fake's `Reconnect`, all against the fake alone. What the product's tests rely on
//! the fake for is so checked against a client written from Discord's documentation by others.
//!
//! `IMRELAY_TEST_DISCORD_PY=require` (set in CI) makes a discord.py that cannot be installed a
//! failure rather than a skip.

#[path = "../it/discord/fake.rs"]
pub(crate) mod fake;

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::atomic::Ordering;
use std::time::Duration;

use libtest_mimic::Trial;
use serde_json::Value;
use tokio::io::{AsyncBufReadExt, BufReader};

use crate::{Need, trial};
use fake::{CHANNELS, FakeDiscord};

pub(crate) fn trials() -> Vec<Trial> {
    vec![trial(
        "discord_py_speaks_to_the_fake_discord",
        need,
        discord_py_speaks_to_the_fake_discord,
    )]
}

/// The build directory (`target/`), found from cargo's per-test temporary directory.
fn target_dir() -> PathBuf {
    let tmp = PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
    tmp.parent().map(Path::to_path_buf).unwrap_or(tmp)
}

fn python() -> PathBuf {
    target_dir().join("discordpy/venv/bin/python")
}

/// discord.py installed (now if need be), or why not.
fn need() -> Need {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/external/discord/install.sh");
    let out = std::process::Command::new("bash")
        .arg(&script)
        .arg("--target")
        .arg(target_dir())
        .stdin(Stdio::null())
        .output();
    let reason = match out {
        Ok(o) if o.status.success() && python().exists() => return Need::Here,
        Ok(o) => String::from_utf8_lossy(&o.stderr)
            .lines()
            .rfind(|l| !l.trim().is_empty())
            .unwrap_or("the installer failed")
            .to_string(),
        Err(e) => format!("cannot run {}: {e}", script.display()),
    };
    let reason = format!("discord.py could not be installed: {reason}");
    if std::env::var("IMRELAY_TEST_DISCORD_PY").as_deref() == Ok("require") {
        Need::Required(format!("{reason} (IMRELAY_TEST_DISCORD_PY=require)"))
    } else {
        Need::Missing(reason)
    }
}

async fn discord_py_speaks_to_the_fake_discord() {
    let fake = FakeDiscord::start().await;
    let state = fake.state.clone();
    // A short interval, so that several heartbeats come within the test.
    state.gateway.heartbeat_ms.store(500, Ordering::SeqCst);
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/external/discord/client.py");
    let mut child = tokio::process::Command::new(python())
        .arg(&script)
        .env("FAKE", &fake.root)
        .env("GATEWAY", state.gateway.url())
        .env("TOKEN", fake::BOT_TOKEN)
        .env("CHANNEL", CHANNELS[0])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("python starts");
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut stderr = child.stderr.take().unwrap();
    let mut steps: Vec<Value> = Vec::new();
    let mut next = async |want: &str| -> Value {
        let line = tokio::time::timeout(Duration::from_secs(30), lines.next_line())
            .await
            .unwrap_or_else(|_| panic!("discord.py did not reach {want:?} in time"));
        let Some(line) = line.unwrap() else {
            let mut err = String::new();
            let _ = tokio::io::AsyncReadExt::read_to_string(&mut stderr, &mut err).await;
            panic!("discord.py ended before {want:?}:\n{err}");
        };
        let v: Value = serde_json::from_str(&line).unwrap();
        assert_eq!(v["step"], want, "{v}");
        steps.push(v.clone());
        v
    };
    let ready = next("ready").await;
    assert_eq!(ready["user"], fake::BOT_ID);
    assert_eq!(ready["application"], fake::APP_ID);
    let posted = next("posted").await;
    let message_id = posted["message"].as_str().unwrap().to_string();
    assert_eq!(
        posted["components"], 1,
        "the button came back as discord.py reads it"
    );
    let session = state.gateway.session_id().unwrap();
    // Discord asks the client to reconnect: it resumes the session from its last sequence.
    state.gateway.reconnect();
    next("resumed").await;
    assert_eq!(state.gateway.resumes(), [(session, Some(1))]);
    let click = fake::component_click(
        &state,
        1,
        "6000000000000000042",
        CHANNELS[0],
        &message_id,
        "imrelay-test-approve",
        None,
    );
    state.gateway.dispatch("INTERACTION_CREATE", click);
    let answered = next("answered").await;
    assert_eq!(answered["custom_id"], "imrelay-test-approve");
    assert_eq!(answered["user"], "6000000000000000042");
    assert_eq!(
        answered["response_type"],
        "InteractionResponseType.channel_message"
    );
    let edited = next("edited").await;
    assert_eq!(edited["content"], "done");
    assert_eq!(edited["components"], 0);
    // A person's reply to the bot's message, as the fake builds it for imrelay's tests: read
    // by discord.py as a reply naming the message, with its text (the bot is mentioned).
    let reply = fake::message_create(
        &state,
        "6000000000000000042",
        CHANNELS[0],
        Some(&message_id),
        true,
        "and then the linter",
    );
    state.gateway.dispatch("MESSAGE_CREATE", reply);
    let read = next("message").await;
    assert_eq!(read["type"], "MessageType.reply", "{read}");
    assert_eq!(read["author"], "6000000000000000042");
    assert_eq!(read["content"], "and then the linter");
    assert_eq!(read["reference"], message_id.as_str());
    assert_eq!(read["reference_type"], "MessageReferenceType.default");
    assert_eq!(read["resolved"], message_id.as_str());
    assert_eq!(read["mentions_me"], true);
    let status = tokio::time::timeout(Duration::from_secs(20), child.wait())
        .await
        .expect("discord.py closes")
        .unwrap();
    assert!(status.success(), "{status}: {steps:?}");

    // What the fake saw: one identify with no intents, heartbeats, the resume, the callback
    // asked with ?with_response=1 inside Discord's window, and no /gateway/bot.
    assert_eq!(state.gateway.identifies(), [0]);
    assert!(
        state.gateway.heartbeats() >= 2,
        "{:?}",
        state.gateway.seen()
    );
    let callbacks = state.callbacks();
    assert_eq!(callbacks.len(), 1);
    assert_eq!(callbacks[0].body["type"], 4);
    assert_eq!(callbacks[0].body["data"]["flags"], 64);
    assert!(state.late_callbacks().is_empty());
    let cb_call = &state.calls("POST", "/interactions/")[0];
    assert_eq!(
        cb_call.query.get("with_response").map(String::as_str),
        Some("1")
    );
    assert_eq!(state.calls("GET", "/users/@me").len(), 1);
    assert!(state.calls("GET", "/gateway/bot").is_empty());
    let message = state.message(CHANNELS[0], &message_id).unwrap();
    assert_eq!(message["content"], "done");
    assert_eq!(message["components"], serde_json::json!([]));
}
