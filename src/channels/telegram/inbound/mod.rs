//! Handles what arrives from Telegram: taps on buttons (callback queries), replies to
//! ForceReply requests ("Deny with reason…", "Other…"), the text fallback (`allow` /
//! `deny [reason]` as a reply to a prompt), and the `/start`, `/whoami` and `/pending`
//! commands.
//!
//! Every tap is answered with a toast, first, then any edit follows. A tap is acted on only
//! when its callback data verifies, names an interaction this server knows, was tapped on
//! a message showing that interaction, and comes from a configured approver; anything else
//! changes nothing, is logged, counted, and reported to the registry's audit trail.
//!
//! A reply to a "reply to this message" request counts only from the person who tapped the
//! button that asked for it. People who are not approvers cannot make the bot talk much:
//! their plain messages and replies get no answer (refused replies are still audited), and
//! answers to their commands are rate limited per chat and overall ([`ReplyLimit`]), so
//! strangers cannot fill the send queue that prompts use.
//!
//! One file per concern: `taps.rs` checks a tap and sends it where it goes, `questions.rs`
//! and `forms.rs` answer a question's and a form's buttons, `prompt.rs` keeps a prompt's
//! state (read under its lock, saved, re-rendered), `replies.rs` asks for and takes the
//! replies (forced replies and the text fallback), `commands.rs` answers the commands, and
//! `limit.rs` is the rate limit on answers to strangers.

use std::sync::Arc;

use jiff::Timestamp;
use teloxide::types::{CallbackQuery, Message, Update, UpdateKind};

use super::render::escape;
use super::state::MessageState;
use super::{CHANNEL, DEDUPE_FOR, Telegram, after};
use crate::channels::pipeline::Feedback;
use crate::interaction::InteractionId;
use crate::present::render::Locale;

mod commands;
mod forms;
mod limit;
mod prompt;
mod questions;
mod replies;
mod steer;
mod taps;

pub(super) use self::limit::ReplyLimit;

/// What went wrong with an answer, if anything, in `locale`: `None` when it resolved the
/// interaction.
fn failure_in(feedback: Feedback, locale: Locale) -> Option<String> {
    match feedback {
        Feedback::Resolved(_) => None,
        f => Some(f.text(locale)),
    }
}

/// Where a callback's button was tapped: chat id and message id.
fn place(q: &CallbackQuery) -> Option<(i64, i32)> {
    q.message.as_ref().map(|m| (m.chat().id.0, m.id().0))
}

impl Telegram {
    /// What went wrong with an answer, if anything: `None` when it resolved the interaction.
    fn failure(&self, feedback: Feedback) -> Option<String> {
        failure_in(feedback, self.settings.locale)
    }

    /// Handles one update (from polling or the webhook), once: re-deliveries are dropped.
    pub(super) async fn handle_update(self: &Arc<Self>, update: Update) {
        let scope = format!("{CHANNEL}-update:{}", self.settings.bot_id());
        let expires = after(Timestamp::now(), DEDUPE_FOR);
        match self
            .store
            .first_sighting(&scope, &update.id.0.to_string(), expires)
            .await
        {
            Ok(true) => {}
            Ok(false) => {
                self.count_update("duplicate");
                tracing::debug!(update = update.id.0, "telegram: duplicate update ignored");
                return;
            }
            // Better to act than to drop a tap: the registry still lets only one answer win.
            Err(e) => tracing::warn!(error = %e, "telegram: cannot check for a duplicate update"),
        }
        match update.kind {
            UpdateKind::CallbackQuery(q) => {
                self.count_update("callback_query");
                self.on_callback(q).await;
            }
            UpdateKind::Message(m) => {
                self.count_update("message");
                self.on_message(m).await;
            }
            _ => self.count_update("other"),
        }
    }

    /// Answers a tap whose button does not fit what it names as a bad button, and records
    /// the refusal (`bad_data`) saying why.
    async fn bad_button(&self, q: &CallbackQuery, id: Option<&InteractionId>, why: &str) {
        let told = self
            .refuse(id, &q.from, why, "bad_data", Feedback::BadButton)
            .await;
        self.client.answer(&q.id, &self.say(told)).await;
    }

    /// A message: a reply to one of the bot's messages, a command, or (from an approver, in
    /// private) anything else, which gets a hint.
    async fn on_message(&self, m: Message) {
        let Some(text) = m.text() else { return };
        let Some(from) = m.from.as_ref() else { return };
        if from.is_bot {
            return;
        }
        let text = text.trim();
        let chat = m.chat.id.0;
        if let Some(parent) = m.reply_to_message() {
            let stored = match self
                .store
                .message(CHANNEL, &chat.to_string(), &parent.id.0.to_string())
                .await
            {
                Ok(s) => s,
                Err(e) => {
                    tracing::error!(error = %e, "telegram: cannot look up a replied-to message");
                    return;
                }
            };
            if let Some(stored) = stored {
                // A reply to a request is its answer even when it starts with "/" (a deny
                // reason like "/etc is off-limits"); a reply to a prompt that starts with
                // "/" is a command, since the text fallback never does.
                let request = matches!(
                    MessageState::from_stored(stored.state.as_ref()),
                    MessageState::Reply(_)
                );
                if request || !text.starts_with('/') {
                    self.on_reply(&m, from, parent.id.0, stored, text).await;
                    return;
                }
            } else if !text.starts_with('/')
                // Only a bot's message can be a digest: a reply to a person's costs no lookup.
                && parent.from.as_ref().is_some_and(|u| u.is_bot)
                && self.to_digest_session(&m, from, parent.id.0, text).await
            {
                return;
            }
        }
        if text.starts_with('/') {
            self.on_command(&m, from, text).await;
        } else if m.chat.is_private() && self.is_approver(from) {
            // Strangers chatting with the bot get no answer: only approvers need the hint.
            self.reply(&m, escape(self.words().hello())).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::interaction::RegistryError;

    #[test]
    fn toasts_name_the_outcome() {
        let e = Err(RegistryError::NotFound(InteractionId::parse("x").unwrap()));
        assert_eq!(
            failure_in(Feedback::of(e), Locale::EnUs).as_deref(),
            Some("This request no longer exists")
        );
    }
}
