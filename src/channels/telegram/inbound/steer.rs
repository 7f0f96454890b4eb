//! Replies that talk to an agent session: a reply to any of a session's prompts (its
//! "finished" question, an approval or question it asked) reaches the session.
//!
//! - A reply to a pending "finished" question is its answer: the agent goes on with the
//!   text (as "Other…" would).
//! - A reply to a session's prompt that no longer waits (answered, expired), or to a pending
//!   approval with words other than `allow` / `deny [reason]`, is queued as a message to
//!   the session, handed to the agent at its next step (docs/sessions.md).
//!
//! A reply to one of a session's digests is a message to the session too (it answers none of
//! the requests it lists), read by the kit (`channels::steer`).
//!
//! Everything else keeps its meaning (the text fallback, a form's field). Who may: the
//! session's route's approvers, as for answers; the registry checks and records refusals.

use serde_json::{Map, Value};
use teloxide::types::{Message, User};

use crate::channels::pipeline::Feedback;
use crate::channels::steer::{Heard, Reply, queued, session_agent};
use crate::channels::telegram::render::escape;
use crate::channels::telegram::{Telegram, responder};
use crate::interaction::sessions::is_finished_question;
use crate::interaction::{Answer, Grantor, Interaction, Kind, RegistryError};

/// Whether `text` is the text fallback's answer to an approval (`allow`, `deny [reason]`,
/// `edit <command>`).
fn is_answer_word(text: &str) -> bool {
    let word = text.split_whitespace().next().unwrap_or("");
    ["allow", "approve", "deny", "reject", "edit"]
        .iter()
        .any(|w| word.eq_ignore_ascii_case(w))
}

impl Telegram {
    /// Takes `text`, a reply to message `parent` of `m`'s chat that shows no request, as said
    /// to the session whose digest `parent` is; `false` when it is none, and the message
    /// keeps its usual meaning.
    pub(super) async fn to_digest_session(
        &self,
        m: &Message,
        from: &User,
        parent: i32,
        text: &str,
    ) -> bool {
        let chat = m.chat.id.0;
        let (id, to) = (format!("{chat}:{}", m.id.0), format!("{chat}:{parent}"));
        let identity = from.id.0.to_string();
        let reply = Reply {
            id: &id,
            chat: None,
            to: &[to.as_str()],
            text,
            responder: responder(from),
            identity: &identity,
            approver: self.is_approver(from),
        };
        let store = self.store.as_ref();
        let locale = self.settings.locale;
        match crate::channels::steer::reply(&self.pipeline, store, reply, locale, true).await {
            Heard::NotASession | Heard::Prompt => false,
            Heard::Empty | Heard::Told(None) => true,
            Heard::Told(Some(told)) => {
                self.reply(m, escape(&told)).await;
                true
            }
        }
    }

    /// Takes `text`, a reply from an approver to the prompt of `i`, as said to `i`'s agent
    /// session when it is one (see the module's description); `false` when it is not, and
    /// the reply keeps its usual meaning.
    pub(super) async fn to_session(
        &self,
        m: &Message,
        from: &User,
        i: &Interaction,
        text: &str,
    ) -> bool {
        let (Some(agent), Some(session)) = (i.agent.as_deref(), i.session.as_deref()) else {
            return false;
        };
        let finished = i.is_pending() && is_finished_question(i);
        // `allow` / `deny [reason]` / `edit <command>` keep their meaning (and "already answered" its notice).
        if is_answer_word(text) && !finished {
            return false;
        }
        if i.is_pending() {
            if finished {
                let mut answers = Map::new();
                answers.insert("0".into(), Value::String(text.to_string()));
                let answered = self
                    .pipeline
                    .respond(&i.id, Answer::Answers(answers), responder(from))
                    .await;
                if let Some(f) = self.failure(answered) {
                    self.reply(m, escape(&f)).await;
                }
                return true;
            }
            if i.kind != Kind::Approval {
                return false;
            }
        }
        let sender = Grantor::Person {
            responder: responder(from),
            listed: self.is_approver(from),
        };
        let told = match self
            .registry
            .message_session(session_agent(agent), session, text, &sender)
            .await
        {
            Ok(view) => escape(&queued(
                session_agent(agent),
                view.delivery,
                self.settings.locale,
            )),
            Err(RegistryError::SessionNotFound(why)) => escape(&why),
            Err(e) => escape(&self.say(Feedback::of(Err(e)))),
        };
        self.reply(m, told).await;
        true
    }
}
