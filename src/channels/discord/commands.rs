//! Discord's application commands, the platform's way to talk to a bot that reads no messages
//! (the Gateway asks for no intents): `/whoami` tells the channel's and the person's ids (for
//! `discord.chats` and `discord.approvers`), `/sessions` lists the agent sessions of the
//! routes that post to the channel (the kit's listing, [`crate::channels::sessions`]). Both
//! answer with an ephemeral message only the person sees.
//!
//! The commands are registered once at start-up as global commands
//! (`PUT /applications/{id}/commands`, which replaces the set: running it again changes
//! nothing), the application's id read from `GET /oauth2/applications/@me`.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use super::api::Rest;
use super::inbound::Interactions;
use crate::present::render::Locale;

/// How many times registering the commands is tried at start-up.
const ATTEMPTS: u32 = 5;

/// The commands imrelay registers: chat input commands (type 1), usable in servers and in
/// direct messages with the bot.
pub(crate) fn definitions() -> Value {
    json!([
        {"name": "whoami", "type": 1,
         "description": "This channel's id and yours, for imrelay's settings"},
        {"name": "sessions", "type": 1,
         "description": "The agent sessions whose prompts come to this channel"},
    ])
}

/// Registers the commands, retrying a failure a few times with a growing pause; a failure
/// at the end is logged (the buttons work without the commands).
pub(crate) async fn register(rest: Arc<Rest>, shutdown: CancellationToken) {
    for attempt in 1..=ATTEMPTS {
        let done = match rest.application_id().await {
            Ok(app) => rest.put_commands(&app, &definitions()).await,
            Err(e) => Err(e),
        };
        match done {
            Ok(()) => {
                tracing::info!("discord: the /whoami and /sessions commands are registered");
                return;
            }
            Err(e) if attempt == ATTEMPTS => {
                tracing::warn!(error = %e, "discord: cannot register the /whoami and /sessions commands");
                return;
            }
            Err(e) => {
                tracing::info!(error = %e, attempt, "discord: registering the commands failed; trying again")
            }
        }
        let wait = crate::channels::longconn::backoff(
            attempt,
            Duration::from_secs(1),
            Duration::from_secs(30),
        );
        tokio::select! {
            () = shutdown.cancelled() => return,
            () = tokio::time::sleep(wait) => {}
        }
    }
}

/// `/whoami`'s answer: the channel's id and the person's, and where each goes.
fn whoami(channel: &str, user: &str, locale: Locale) -> String {
    if locale == Locale::ZhCn {
        format!(
            "本频道的 id（填入 discord.chats）：{channel}\n你的用户 id（填入 discord.approvers）：{user}"
        )
    } else {
        format!(
            "This channel's id (for discord.chats): {channel}\nYour user id (for discord.approvers): {user}"
        )
    }
}

impl Interactions {
    /// Answers application command `payload` (`/whoami`, `/sessions`) with an ephemeral
    /// message.
    pub(super) async fn command(&self, payload: &Value) -> Value {
        let user = if payload["member"]["user"].is_object() {
            &payload["member"]["user"]
        } else {
            &payload["user"]
        };
        let user = user["id"].as_str().unwrap_or_default();
        // In a thread, the channel whose routes matter is the one the thread is in.
        let channel = payload["channel"]["parent_id"]
            .as_str()
            .or_else(|| payload["channel_id"].as_str())
            .unwrap_or_default();
        let locale = self.locale();
        match payload["data"]["name"].as_str() {
            Some("whoami") => {
                self.count("whoami");
                self.notice_of(&whoami(channel, user, locale))
            }
            Some("sessions") => {
                self.count("sessions");
                let text = crate::channels::sessions::answer(
                    self.registry(),
                    super::CHANNEL,
                    channel,
                    self.is_chat(channel),
                    (user, self.is_approver(user)),
                    locale,
                )
                .await;
                self.notice_of(&text)
            }
            _ => {
                self.count("ignored");
                self.notice_of(
                    "imrelay knows /whoami and /sessions; answer prompts with their buttons.",
                )
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_commands_keep_discords_naming_rules() {
        for c in definitions().as_array().unwrap() {
            let name = c["name"].as_str().unwrap();
            assert!((1..=32).contains(&name.len()));
            assert!(
                name.chars()
                    .all(|ch| ch.is_ascii_lowercase() || ch == '_' || ch == '-')
            );
            let description = c["description"].as_str().unwrap().chars().count();
            assert!((1..=100).contains(&description));
        }
        assert!(whoami("1", "2", Locale::EnUs).contains("discord.approvers): 2"));
    }
}
