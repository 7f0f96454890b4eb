//! Commands written to the bot in a room: `whoami` (the room's id and the sender's, for
//! `matrix.chats` and `matrix.approvers`) and `sessions` (the agent sessions of the routes
//! that post to the room: the kit's listing, [`crate::channels::sessions`]). Each may be
//! written with a leading `!` or `/`, and is answered with a notice in reply to it.

use serde_json::Value;

use super::inbound::Inbound;
use crate::present::render::Locale;

/// What a message asks of the bot, if it is a command.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Command {
    /// `whoami`.
    WhoAmI,
    /// `sessions` (or `会话`).
    Sessions,
}

/// The command plain message `event` (not a reply, an edit or a reaction) gives, if any.
fn command_in(event: &Value) -> Option<Command> {
    if event["type"] != "m.room.message" || event["content"]["m.relates_to"].is_object() {
        return None;
    }
    let body = event["content"]["body"].as_str()?.trim();
    let word = body.strip_prefix('!').unwrap_or(body);
    if word.trim_start_matches('/').eq_ignore_ascii_case("whoami") {
        Some(Command::WhoAmI)
    } else if crate::channels::sessions::is_command(word) {
        Some(Command::Sessions)
    } else {
        None
    }
}

/// `whoami`'s answer.
fn whoami(room: &str, sender: &str, locale: Locale) -> String {
    if locale == Locale::ZhCn {
        format!(
            "本房间的 id（填入 matrix.chats）：{room}\n你的用户 id（填入 matrix.approvers）：{sender}"
        )
    } else {
        format!(
            "This room's id (for matrix.chats): {room}\nYour user id (for matrix.approvers): {sender}"
        )
    }
}

impl Inbound {
    /// Answers `event` in `room` if it is a command (anything else is left alone).
    pub(super) async fn command(&self, room: &str, event: &Value) {
        let (Some(c), Some(event_id), Some(sender)) = (
            command_in(event),
            event["event_id"].as_str(),
            event["sender"].as_str(),
        ) else {
            return;
        };
        if self.first_time(event_id).await != Some(true) {
            return;
        }
        let locale = self.render.locale;
        let text = match c {
            Command::WhoAmI => whoami(room, sender, locale),
            Command::Sessions => {
                crate::channels::sessions::answer(
                    self.pipeline.registry(),
                    super::CHANNEL,
                    room,
                    self.settings.chats.iter().any(|r| r == room),
                    (sender, self.settings.is_approver(sender)),
                    locale,
                )
                .await
            }
        };
        self.notice(room, event_id, sender, &text).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_plain_message_is_a_command_and_a_reply_is_not() {
        let msg = |body: &str| json!({"type": "m.room.message", "content": {"msgtype": "m.text", "body": body}});
        assert_eq!(command_in(&msg("whoami")), Some(Command::WhoAmI));
        assert_eq!(command_in(&msg(" !WhoAmI ")), Some(Command::WhoAmI));
        assert_eq!(command_in(&msg("/sessions")), Some(Command::Sessions));
        assert_eq!(command_in(&msg("!sessions")), Some(Command::Sessions));
        assert_eq!(command_in(&msg("who am i")), None);
        let mut reply = msg("whoami");
        reply["content"]["m.relates_to"] = json!({"m.in_reply_to": {"event_id": "$p:x"}});
        assert_eq!(command_in(&reply), None);
        assert!(whoami("!r:x", "@a:x", Locale::EnUs).contains("matrix.approvers): @a:x"));
    }
}
