//! Messages to the bot: `whoami` (in a group, with the bot @-mentioned; or in its direct
//! chat) is answered in that chat with its chat_id and the sender's open_id and user_id, what
//! `feishu.chats` and `feishu.approvers` need; `/sessions` (or `sessions`, `会话`) with the
//! agent sessions of the routes that post to the chat (the kit's listing,
//! [`crate::channels::sessions`]). Other text that replies to a message, or is written in a
//! thread, goes to the kit's replies ([`crate::channels::steer`]): said to the session whose
//! message it is. Anything else is ignored. Answers are sent off the acknowledgement's path.

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
        // A command keeps its meaning wherever it is written; other text replying to a
        // message may be said to a session.
        if command.is_none()
            && message["message_type"] == "text"
            && self.replies_to_something(envelope, &content)
        {
            return json!({});
        }
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

impl Callbacks {
    /// A text message that replies to another (`parent_id`) or is in a thread (`root_id`):
    /// said, off the acknowledgement's path, to the session whose message it replies to
    /// ([`crate::channels::steer`]), and the person told in a reply. `false` when it replies
    /// to nothing.
    fn replies_to_something(&self, envelope: &Value, content: &Value) -> bool {
        let message = &envelope["event"]["message"];
        let s = |k: &str| message[k].as_str().unwrap_or_default().to_string();
        let (id, parent, root, thread) = (
            s("message_id"),
            s("parent_id"),
            s("root_id"),
            s("thread_id"),
        );
        let Some(api) = self.api.clone() else {
            return false;
        };
        if id.is_empty() || (parent.is_empty() && root.is_empty()) {
            return false;
        }
        // Mentions arrive as `@_user_1` placeholders: the message is the rest.
        let text: Vec<&str> = content["text"]
            .as_str()
            .unwrap_or_default()
            .split(' ')
            .filter(|w| !w.starts_with("@_user"))
            .collect();
        let text = text.join(" ");
        let operator = json!({"operator": envelope["event"]["sender"]["sender_id"]});
        let teams = self.registry.teams();
        let who = self.operator(&operator, &teams);
        let (actor, by, approver) = (
            who.actor.to_string(),
            who.by.map(str::to_string),
            who.approver,
        );
        let (pipeline, store, locale) = (
            self.pipeline.clone(),
            self.store.clone(),
            self.cards.locale(),
        );
        tokio::spawn(async move {
            let by = by.unwrap_or(actor);
            let shown = pipeline
                .registry()
                .teams()
                .people
                .name_of(super::CHANNEL, &by)
                .map_or_else(|| by.clone(), str::to_string);
            let responder = crate::interaction::Responder::new(shown, pipeline.via().clone())
                .with_identity(super::CHANNEL, by.clone());
            let reply = crate::channels::steer::Reply {
                id: &id,
                chat: None,
                to: &[&parent, &root],
                text: &text,
                responder,
                identity: &by,
                approver,
            };
            let heard =
                crate::channels::steer::reply(&pipeline, store.as_ref(), reply, locale, false)
                    .await;
            if let crate::channels::steer::Heard::Told(Some(told)) = heard {
                let content = json!({ "text": told });
                let uuid = format!("steer:{id}");
                if let Err(e) = api
                    .reply(&id, "text", &content, !thread.is_empty(), &uuid)
                    .await
                {
                    tracing::warn!(error = %e, "feishu: cannot answer a reply to a session's message");
                }
            }
        });
        true
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
