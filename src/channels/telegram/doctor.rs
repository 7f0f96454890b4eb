//! `imrelay doctor`'s checks of the Telegram channel: the bot token works (`getMe`),
//! approvers and chats are set, and with `--send-test` each chat takes a test message.

use crate::channels::registry::{Check, Doctor};
use crate::metrics::Metrics;

use super::TelegramSettings;
use super::api::Client as TelegramClient;

/// The checks of `s` (an enabled section).
pub(super) async fn checks(s: &TelegramSettings, run: &Doctor) -> Vec<Check> {
    let mut checks = Vec::new();
    check(s, run, &mut checks).await;
    checks
}

async fn check(s: &TelegramSettings, run: &Doctor, checks: &mut Vec<Check>) {
    let send_test = run.send_test;
    let client = match TelegramClient::new(s, &Metrics::new()) {
        Ok((client, worker)) => {
            tokio::spawn(worker);
            client
        }
        Err(e) => {
            checks.push(Check::fail(
                format!("Telegram: {e:#}"),
                "fix telegram.api_url",
            ));
            run.untried(
                "Telegram",
                s.chats.iter().map(|c| format!("chat {c}")),
                checks,
            );
            return;
        }
    };
    match client.get_me().await {
        Ok(me) => checks.push(Check::pass(format!(
            "Telegram: the bot token works (@{})",
            me.username()
        ))),
        Err(e) => {
            checks.push(Check::fail(
                format!("Telegram: getMe failed: {}", e.describe()),
                format!(
                    "check telegram.token (from @BotFather) and that {} is reachable",
                    s.api_url.trim()
                ),
            ));
            run.untried(
                "Telegram",
                s.chats.iter().map(|c| format!("chat {c}")),
                checks,
            );
            return;
        }
    }
    if s.approvers.is_empty() {
        checks.push(Check::fail(
            "Telegram: no approvers, so nobody can answer",
            "add your numeric user id to telegram.approvers (e.g. from @userinfobot)",
        ));
    } else {
        checks.push(Check::pass(format!(
            "Telegram: {} approver(s)",
            s.approvers.len()
        )));
    }
    if s.chats.is_empty() {
        checks.push(Check::fail(
            "Telegram: no chats to post to",
            "add a chat id to telegram.chats (your user id for a private chat)",
        ));
    }
    for &chat in &s.chats {
        if !send_test {
            continue;
        }
        let text = "✅ imrelay doctor: this chat receives imrelay's questions.".to_string();
        match client.send(chat, text, None, None).await {
            Ok(_) => checks.push(Check::pass(format!(
                "Telegram: chat {chat} received a test message"
            ))),
            Err(e) => checks.push(Check::fail(
                format!(
                    "Telegram: chat {chat} did not take a test message: {}",
                    e.describe()
                ),
                "start a chat with the bot first (send it /start), or add it to the group",
            )),
        }
    }
}
