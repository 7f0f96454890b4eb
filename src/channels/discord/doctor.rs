//! `imrelay doctor`'s checks of the Discord channel: the bot token works (`GET /users/@me`),
//! the bot can see each configured channel (`GET /channels/{id}`), approvers are set, the
//! interactions transport has its public key and a public URL, and with `--send-test` each
//! channel gets a test message. (`imrelay doctor` escapes every line it prints.)

use serde_json::json;

use super::DiscordSettings;
use super::api::Rest;
use super::settings::Transport;
use crate::channels::registry::{Check, Doctor};

/// The checks of `s` (an enabled section).
pub(super) async fn checks(s: &DiscordSettings, run: &Doctor) -> Vec<Check> {
    let mut checks = Vec::new();
    check(s, run, &mut checks).await;
    checks
}

async fn check(s: &DiscordSettings, run: &Doctor, checks: &mut Vec<Check>) {
    let chats = || s.chats.iter().map(|c| format!("channel {c}"));
    let rest = match Rest::new(&s.api_url(), s.bot_token.clone()) {
        Ok(r) => r,
        Err(e) => {
            checks.push(Check::fail(format!("Discord: {e}"), "fix discord.api_url"));
            run.untried("Discord", chats(), checks);
            return;
        }
    };
    match rest.me().await {
        Ok(me) => checks.push(Check::pass(format!(
            "Discord: the bot token works (bot {} with id {})",
            me["username"].as_str().unwrap_or("?"),
            me["id"].as_str().unwrap_or("?")
        ))),
        Err(e) => {
            checks.push(Check::fail(
                format!("Discord: GET /users/@me refused the bot token: {e}"),
                "check discord.bot_token (Developer Portal → your application → Bot → Reset Token)",
            ));
            run.untried("Discord", chats(), checks);
            return;
        }
    }
    let reachable = channels(s, &rest, checks).await;
    if s.approvers.is_empty() {
        checks.push(Check::fail(
            "Discord: no approvers, so nobody can answer",
            "add your Discord user id to discord.approvers (Developer Mode on, then right-click \
             your name → Copy User ID)",
        ));
    } else {
        checks.push(Check::pass(format!(
            "Discord: {} approver(s)",
            s.approvers.len()
        )));
    }
    if s.transport == Transport::Interactions {
        if run.public_url.trim().is_empty() {
            checks.push(Check::fail(
                "Discord: transport = \"interactions\" but server.public_url is not set",
                "set server.public_url to the https:// address Discord reaches this server at, \
                 and enter <public_url> + discord.inbound_path as the Interactions Endpoint URL",
            ));
        } else {
            checks.push(Check::pass(format!(
                "Discord: the Interactions Endpoint URL to enter is {}{}",
                run.public_url.trim_end_matches('/'),
                s.inbound_path
            )));
        }
    }
    if run.send_test {
        send_tests(s, run, &rest, &reachable, checks).await;
    }
}

/// Whether the bot sees each channel: the ones it does.
async fn channels<'a>(
    s: &'a DiscordSettings,
    rest: &Rest,
    checks: &mut Vec<Check>,
) -> Vec<&'a String> {
    let mut reachable = Vec::new();
    for c in &s.chats {
        match rest.channel(c).await {
            Ok(ch) => {
                checks.push(Check::pass(format!(
                    "Discord: the bot sees channel {c} (#{})",
                    ch["name"].as_str().unwrap_or("direct messages")
                )));
                reachable.push(c);
            }
            Err(e) => checks.push(Check::fail(
                format!("Discord: the bot cannot see channel {c}: {e}"),
                "invite the bot with the URL in docs/discord.md (View Channel, Send Messages), or \
                 give its role those permissions in the channel's settings",
            )),
        }
    }
    reachable
}

/// A test message to each channel the bot sees.
async fn send_tests(
    s: &DiscordSettings,
    run: &Doctor,
    rest: &Rest,
    reachable: &[&String],
    checks: &mut Vec<Check>,
) {
    let message = json!({"content": "✅ This channel receives imrelay's approvals and questions.",
        "allowed_mentions": {"parse": []}});
    for c in &s.chats {
        if !reachable.contains(&c) {
            run.untried("Discord", [format!("channel {c}")], checks);
            continue;
        }
        match rest.post(c, &message).await {
            Ok(_) => checks.push(Check::pass(format!(
                "Discord: channel {c} received a test message"
            ))),
            Err(e) => checks.push(Check::fail(
                format!("Discord: channel {c} did not take a test message: {e}"),
                "give the bot Send Messages in that channel",
            )),
        }
    }
}
