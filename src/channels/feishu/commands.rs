//! Messages to the bot: `whoami` (in a group, with the bot @-mentioned; or in its direct
//! chat) is answered in that chat with its chat_id and the sender's open_id and user_id, what
//! `feishu.chats` and `feishu.approvers` need; `/sessions` (or `sessions`, `会话`) with the
//! agent sessions of the routes that post to the chat (the kit's listing,
//! [`crate::channels::sessions`]). Anything else is ignored. Answers are sent off the
//! acknowledgement's path.

use serde_json::{Value, json};

use super::inbound::Callbacks;
use super::settings::Locale;

/// What a text message asks of the bot, if anything.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Command {
    WhoAmI,
    Sessions,
}

/// The command of a text message's `text` (mentions arrive as `@_user_1` placeholders).
fn command_in(text: &str) -> Option<Command> {
    let words: Vec<&str> = text
        .split_whitespace()
        .filter(|w| !w.starts_with("@_user"))
        .collect();
    match words.as_slice() {
        [w] if w.trim_start_matches('/').eq_ignore_ascii_case("whoami") => Some(Command::WhoAmI),
        [w] if crate::channels::sessions::is_command(w) => Some(Command::Sessions),
        _ => None,
    }
}

/// `whoami`'s answer.
fn whoami(chat: &str, open_id: &str, user_id: &str, zh: bool) -> String {
    let mut reply = if zh {
        format!(
            "本会话的 chat_id（填入 feishu.chats，写作 chat_id:…）：{chat}\n你的 open_id（填入 feishu.approvers）：{open_id}"
        )
    } else {
        format!(
            "This chat's chat_id (for feishu.chats, as chat_id:…): {chat}\nYour open_id (for feishu.approvers): {open_id}"
        )
    };
    if !user_id.is_empty() {
        reply.push_str(&if zh {
            format!("\n你的 user_id：{user_id}")
        } else {
            format!("\nYour user_id: {user_id}")
        });
    }
    reply
}

impl Callbacks {
    /// A message to the bot (`im.message.receive_v1`): `whoami` or `/sessions` answered in
    /// its chat, anything else ignored.
    pub(super) fn message(&self, envelope: &Value) -> Value {
        let event = &envelope["event"];
        let message = &event["message"];
        let content: Value = message["content"]
            .as_str()
            .and_then(|c| serde_json::from_str(c).ok())
            .unwrap_or(Value::Null);
        let command = (message["message_type"] == "text")
            .then(|| command_in(content["text"].as_str().unwrap_or_default()))
            .flatten();
        let chat = message["chat_id"].as_str().unwrap_or_default().to_string();
        let sender = &event["sender"]["sender_id"];
        let open_id = sender["open_id"].as_str().unwrap_or_default().to_string();
        let user_id = sender["user_id"].as_str().unwrap_or_default().to_string();
        let (Some(api), Some(command)) = (self.api.clone().filter(|_| !chat.is_empty()), command)
        else {
            self.count("ignored");
            return json!({});
        };
        let locale = self.cards.locale();
        match command {
            Command::WhoAmI => {
                self.count("whoami");
                let reply = whoami(&chat, &open_id, &user_id, locale == Locale::ZhCn);
                tokio::spawn(async move {
                    if let Err(e) = api.send_text(&chat, &reply).await {
                        tracing::warn!(error = %e, "feishu: cannot answer whoami");
                    }
                });
            }
            Command::Sessions => {
                self.count("sessions");
                let address = format!("chat_id:{chat}");
                let configured = self
                    .settings
                    .receivers
                    .iter()
                    .any(|r| r.address() == address);
                let approver = self.settings.is_approver(&open_id)
                    || (!user_id.is_empty() && self.settings.is_approver(&user_id));
                let registry = self.registry.clone();
                tokio::spawn(async move {
                    let reply = crate::channels::sessions::answer(
                        &registry,
                        super::CHANNEL,
                        &address,
                        configured,
                        (&open_id, approver),
                        locale,
                    )
                    .await;
                    if let Err(e) = api.send_text(&chat, &reply).await {
                        tracing::warn!(error = %e, "feishu: cannot answer /sessions");
                    }
                });
            }
        }
        json!({})
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_are_read_past_mentions() {
        assert_eq!(command_in("@_user_1 whoami"), Some(Command::WhoAmI));
        assert_eq!(command_in("/sessions"), Some(Command::Sessions));
        assert_eq!(command_in("@_user_1 会话"), Some(Command::Sessions));
        assert_eq!(command_in("whoami please"), None);
        assert!(whoami("oc_1", "ou_1", "u_1", false).ends_with("Your user_id: u_1"));
    }
}
