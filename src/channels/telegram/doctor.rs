//! `imrelay doctor`'s checks of the Telegram channel: the bot token works (`getMe`),
//! approvers and chats are set, and with `--send-test` each chat takes a test message.

use crate::channels::registry::{Check, Doctor};
use crate::metrics::Metrics;

use super::TelegramSettings;
use super::api::{Client as TelegramClient, Failure};

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
            checks.push(get_me_failed(&e, s.api_url.trim()));
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

/// What a failed `getMe` means: Telegram refused the token, or imrelay could not reach it
/// (or was told to wait), each with its own fix.
fn get_me_failed(e: &Failure, api_url: &str) -> Check {
    match e {
        Failure::Permanent(why) => Check::fail(
            format!("Telegram: the bot token was refused (getMe: {why})"),
            "check telegram.token: the token @BotFather gave, whole (digits, a colon, then letters)",
        ),
        Failure::Transient(why) => Check::fail(
            format!("Telegram: cannot reach the Bot API at {api_url} ({why})"),
            format!(
                "check that this machine reaches {api_url} (its name resolves, no firewall in the way), then run doctor again"
            ),
        ),
        Failure::RetryAfter(_) => Check::fail(
            format!("Telegram: getMe was {}", e.describe()),
            "run doctor again after that wait",
        ),
    }
}
