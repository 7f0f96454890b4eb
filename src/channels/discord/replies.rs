//! Messages that reply to one of an agent session's messages (`MESSAGE_CREATE` with a
//! `message_reference`), or are written in a session's thread: said to the session through
//! the kit ([`crate::channels::steer`]), and the person answered in a reply to their
//! message.
//!
//! Only the Gateway brings messages (the HTTP interactions endpoint gets none). Discord hands
//! a bot a message's text without the privileged Message Content intent when the bot is
//! mentioned, which a reply to the bot's message is while its @mention is on (the default):
//! a reply that arrives without its text (the mention turned off) is told to keep it on; a
//! message in a session's thread is read only when it mentions the bot.

use serde_json::{Value, json};

use super::inbound::Interactions;
use crate::channels::steer::{self, Heard, Reply};
use crate::interaction::{Responder, Via};
use crate::present::render::Locale;

/// A reference of this type is a reply (a forward is 1).
const REPLY: u64 = 0;

/// What a reply whose text Discord withheld is told.
fn no_text(locale: Locale) -> &'static str {
    if locale == Locale::ZhCn {
        "读不到这条回复的文字：回复时请保持“@提及”开启。"
    } else {
        "This reply's text did not reach imrelay: keep the reply's @mention on when you reply."
    }
}

impl Interactions {
    /// A `MESSAGE_CREATE`: when it replies to one of a session's messages (or is written in a
    /// session's thread), what to post in its channel in reply (`None`: nothing).
    pub async fn message(&self, m: &Value) -> Option<Value> {
        let author = &m["author"];
        if author["bot"].as_bool() == Some(true) || m["webhook_id"].is_string() {
            return None;
        }
        let s = |v: &Value| v.as_str().unwrap_or_default().to_string();
        let (id, channel, user) = (s(&m["id"]), s(&m["channel_id"]), s(&author["id"]));
        let reference = &m["message_reference"];
        let replied = match reference["type"].as_u64().unwrap_or(REPLY) {
            REPLY => s(&reference["message_id"]),
            // A forward names a message of another chat: not a reply.
            _ => return None,
        };
        if id.is_empty() || channel.is_empty() || user.is_empty() {
            return None;
        }
        let words: Vec<&str> = m["content"]
            .as_str()
            .unwrap_or_default()
            .split(' ')
            .filter(|w| !(w.starts_with("<@") && w.ends_with('>')))
            .collect();
        let text = words.join(" ");
        // In a thread, a message that mentions no one comes without its text: people talking
        // among themselves, not to the session (only a reply is told why it was not taken).
        if text.trim().is_empty() && replied.is_empty() {
            return None;
        }
        let name = ["global_name", "username"]
            .iter()
            .filter_map(|k| author[*k].as_str())
            .map(str::trim)
            .find(|n| !n.is_empty())
            .map_or_else(
                || format!("user {user}"),
                |n| crate::interaction::clip(n, 100),
            );
        let responder = Responder::new(name, Via::new(super::CHANNEL))
            .with_actor_id(format!("discord:{user}"))
            .with_identity(super::CHANNEL, user.clone());
        // A message in a session's thread replies to the thread: its id is the first message's.
        let to = [replied.as_str(), channel.as_str()];
        let reply = Reply {
            id: &id,
            chat: Some(&channel),
            to: &to,
            text: &text,
            responder,
            identity: &user,
            approver: self.is_approver(&user),
        };
        match steer::reply(self.pipeline(), self.store(), reply, self.locale(), false).await {
            Heard::Told(Some(told)) => Some(self.answer_to(&id, &told)),
            Heard::Empty => Some(self.answer_to(&id, no_text(self.locale()))),
            Heard::NotASession => {
                self.count("ignored");
                None
            }
            _ => None,
        }
    }

    /// A message of `text` in reply to message `id`, mentioning no one.
    fn answer_to(&self, id: &str, text: &str) -> Value {
        let mut body = self.plain_of(text);
        body["message_reference"] = json!({"message_id": id, "fail_if_not_exists": false});
        body
    }
}
