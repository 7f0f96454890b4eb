//! `imrelay doctor`'s checks of the WeCom channel: the bot's long connection takes its BotID
//! and Secret (or, in callback mode, the EncodingAESKey is well formed), approvers and chats
//! are set, and with `--send-test` each chat gets a test message. WeCom delivers a bot's
//! messages only to chats where someone has messaged the bot, so a chat that refuses the
//! test is named with that fix.

use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use tokio_util::sync::CancellationToken;

use super::bot::{BotConnection, BotError, BotHandler, Frame, Replies};
use super::settings::{Transport, WeComSettings};
use crate::channels::registry::{Check, Doctor};

/// How long the long connection may take to subscribe.
const CONNECT_WAIT: Duration = Duration::from_secs(15);

/// A handler that ignores every callback (the doctor only sends).
struct Ignore;

#[async_trait::async_trait]
impl BotHandler for Ignore {
    async fn callback(&self, _frame: Frame, _replies: Replies) {}
}

/// The checks of `s` (an enabled section).
pub(super) async fn checks(s: &WeComSettings, run: &Doctor) -> Vec<Check> {
    let mut checks = Vec::new();
    if s.approvers.is_empty() {
        checks.push(Check::fail(
            "WeCom: no approvers, so nobody can answer",
            "add your WeCom userid to wecom.approvers",
        ));
    } else {
        checks.push(Check::pass(format!(
            "WeCom: {} approver(s)",
            s.approvers.len()
        )));
    }
    match s.transport {
        Transport::Longconn => longconn(s, run, &mut checks).await,
        Transport::Callback => {
            match super::crypto::MsgCrypt::new(s.token.clone(), &s.encoding_aes_key, "") {
                Ok(_) => checks.push(Check::pass(format!(
                    "WeCom: callback mode, the Token and EncodingAESKey are set; WeCom must reach {}{}",
                    run.public_url, s.callback_path
                ))),
                Err(e) => checks.push(Check::fail(
                    format!("WeCom: {e}"),
                    "copy the EncodingAESKey from the bot's callback settings into wecom.encoding_aes_key",
                )),
            }
            if run.send_test {
                checks.push(Check::pass(
                    "WeCom: no test message in callback mode (a bot sends only in reply there): message the bot in a chat and it answers with the oldest waiting card",
                ));
            }
        }
    }
    checks
}

async fn longconn(s: &WeComSettings, run: &Doctor, checks: &mut Vec<Check>) {
    let tls = match crate::tls::client_config() {
        Ok(t) => t,
        Err(e) => {
            checks.push(Check::fail(format!("WeCom: TLS: {e}"), "report this"));
            return;
        }
    };
    let shutdown = CancellationToken::new();
    let bot = Arc::new(BotConnection::new(
        &s.ws_url(),
        &s.bot_id,
        s.secret.clone(),
        Arc::new(Ignore),
        shutdown.clone(),
        tls,
    ));
    let task = tokio::spawn(bot.clone().run());
    let up = tokio::time::timeout(CONNECT_WAIT, async {
        loop {
            if let Some(r) = bot.replies() {
                return Ok(r);
            }
            if let Some(e) = bot.last_failure() {
                return Err(e);
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await
    .unwrap_or_else(|_| {
        Err(Arc::new(BotError::Timeout(
            "the connection and subscription".into(),
        )))
    });
    match up {
        Ok(replies) => {
            checks.push(Check::pass(
                "WeCom: the bot's long connection subscribed with wecom.bot_id and wecom.secret",
            ));
            if run.send_test {
                send_tests(s, &replies, checks).await;
            } else {
                checks.push(Check::pass(
                    "WeCom: cards reach only chats where someone has messaged the bot; `--send-test` tries each",
                ));
            }
        }
        Err(e) => {
            checks.push(not_connected(&e, &s.ws_url()));
            run.untried("WeCom", s.chats.iter().cloned(), checks);
        }
    }
    shutdown.cancel();
    let _ = task.await;
}

async fn send_tests(s: &WeComSettings, replies: &Replies, checks: &mut Vec<Check>) {
    for chat in &s.chats {
        let body = json!({"msgtype": "markdown",
            "markdown": {"content": "✅ imrelay doctor: this chat receives imrelay's cards."}});
        match replies.send(chat, body).await {
            Ok(()) => checks.push(Check::pass(format!(
                "WeCom: {chat} received a test message"
            ))),
            Err(e) => checks.push(Check::fail(
                format!("WeCom: {chat} did not take a test message: {e}"),
                "WeCom delivers a bot's messages only to chats where someone has messaged it: \
                 add the bot to that chat and @-mention it once (or, for a person, message it), then try again",
            )),
        }
    }
}

/// Why the long connection did not subscribe: WeCom refused the bot's credentials, another
/// program holds them, or WeCom could not be reached — each with its own fix.
fn not_connected(e: &BotError, url: &str) -> Check {
    match e {
        BotError::Refused { .. } => Check::fail(
            format!("WeCom: the long connection was refused: {e}"),
            "check wecom.bot_id and wecom.secret (the bot's API settings, long-connection mode)",
        ),
        BotError::TakenOver => Check::fail(
            format!("WeCom: {e}"),
            "only one program may use a bot's credentials at a time: stop the other (a running imrelay with this configuration?), or give this one its own bot",
        ),
        _ => Check::fail(
            format!("WeCom: cannot reach WeCom at {url}: {e}"),
            format!(
                "check that this machine reaches {url} (its name resolves, no firewall in the way), then run doctor again"
            ),
        ),
    }
}
