//! Replies: "Deny with reason…" and "Other…" ask the tapper for one (a selective
//! ForceReply request), and what comes back — a reply to such a request, or the text
//! fallback (`allow` / `deny [reason]`, or a form field's text, as a reply to a prompt) —
//! is taken as an answer.

use jiff::Timestamp;
use teloxide::types::{CallbackQuery, Message, User};

use crate::channels::pipeline::{Decision, Feedback};
use crate::channels::telegram::render::{self, escape};
use crate::channels::telegram::state::{MessageState, ReplyKind, ReplyState};
use crate::channels::telegram::{CHANNEL, Telegram, responder};
use crate::interaction::{Answer, Form, Interaction, InteractionId, Kind, parse_questions};
use crate::present::render::single_text_form;
use crate::store::ChannelMessage;

impl Telegram {
    /// "Deny with reason…" and "Other…": asks the tapper for a reply (selective ForceReply).
    pub(super) async fn ask_for_reply(
        &self,
        q: &CallbackQuery,
        i: &Interaction,
        (chat, parent): (i64, i32),
        kind: ReplyKind,
    ) {
        if !self.still_open(q, i, chat, parent, kind).await {
            return;
        }
        let [toast, placeholder] = self
            .words()
            .reply_below(matches!(kind, ReplyKind::DenyReason));
        self.client.answer(&q.id, toast).await;
        let text = render::reply_request(i, kind, &q.from, self.words());
        // The toast promised this message: retry a 429 or an outage briefly.
        let reply_id = match self
            .client
            .retrying("asking for a reply", || {
                self.client
                    .send_force_reply(chat, text.clone(), parent, placeholder)
            })
            .await
        {
            Ok(m) => m,
            Err(f) => {
                tracing::warn!(id = %i.id, chat, error = %f.describe(), "telegram: could not ask for a reply");
                return;
            }
        };
        let request = ReplyState {
            kind,
            parent,
            user: q.from.id.0,
            done: false,
        };
        self.record_request(i, chat, reply_id, request).await;
    }

    /// Whether what a reply would answer on the prompt `parent` can still take one: "Other…"
    /// needs a question there is and not yet answered, a form field's the field being asked.
    /// When not, the tap is answered saying why.
    async fn still_open(
        &self,
        q: &CallbackQuery,
        i: &Interaction,
        chat: i64,
        parent: i32,
        kind: ReplyKind,
    ) -> bool {
        if let ReplyKind::Other { q: qi } = kind {
            let questions = parse_questions(&i.input.map()).unwrap_or_default();
            if usize::from(qi) >= questions.len() {
                let why = "a question index out of range";
                self.bad_button(q, Some(&i.id), why).await;
                return false;
            }
            if self.prompt_state(chat, parent).await.answered(qi) {
                let told = self.words().question_answered();
                self.client.answer(&q.id, told).await;
                return false;
            }
        }
        if let ReplyKind::Field { q: qi } = kind {
            let form = Form::from_input(&i.input.map()).ok();
            let current = match &form {
                Some(form) => self.prompt_state(chat, parent).await.current_field(form),
                None => None,
            };
            if current != Some(qi) {
                let told = self.words().not_the_field_asked();
                self.client.answer(&q.id, told).await;
                return false;
            }
        }
        true
    }

    /// Records the ForceReply request `reply_id` sent in `chat`, so its reply is taken; shows
    /// the outcome on it at once if the interaction was resolved meanwhile.
    async fn record_request(&self, i: &Interaction, chat: i64, reply_id: i32, request: ReplyState) {
        let message = ChannelMessage {
            channel: CHANNEL.into(),
            address: chat.to_string(),
            message_ref: reply_id.to_string(),
            interaction_id: i.id.clone(),
            state: Some(MessageState::Reply(request).to_stored()),
            created_at: Timestamp::now(),
        };
        if let Err(e) = self.store.record_message(message.clone()).await {
            tracing::error!(id = %i.id, error = %e, "telegram: could not record a reply request");
            return;
        }
        self.finalize_if_resolved(&i.id, &message).await;
    }

    /// Shows the outcome on `message` at once if its interaction was resolved meanwhile.
    async fn finalize_if_resolved(&self, id: &InteractionId, message: &ChannelMessage) {
        if let Ok(Some(latest)) = self.registry.get(id).await
            && !latest.is_pending()
            && let Err(f) = self.finalize_message(&latest, message).await
        {
            tracing::warn!(id = %id, error = %f.error(), "telegram: could not show an outcome");
        }
    }

    /// A reply to a request the bot made for another person: refused, recorded, and said
    /// so (or that it failed, when the refusal could not be recorded).
    async fn foreign_reply(&self, m: &Message, from: &User, id: &InteractionId) {
        let told = self
            .refuse(
                Some(id),
                from,
                "a reply to a request made for another user",
                "foreign_reply",
                Feedback::BadButton,
            )
            .await;
        let text = match told {
            Feedback::StoreDown => escape(&self.say(told)),
            _ => escape(self.words().not_your_request()),
        };
        self.reply(m, text).await;
    }

    /// A reply to `stored`, one of the bot's messages (`parent`): a ForceReply answer or the
    /// text fallback.
    pub(super) async fn on_reply(
        &self,
        m: &Message,
        from: &User,
        parent: i32,
        stored: ChannelMessage,
        text: &str,
    ) {
        let chat = m.chat.id.0;
        let id = stored.interaction_id.clone();
        if !self.is_approver(from) {
            // Refused and audited, but not answered: strangers cannot make the bot talk (not
            // even to say the refusal could not be recorded; the log says it).
            self.refuse(
                Some(&id),
                from,
                "not in telegram.approvers",
                "not_approver",
                Feedback::NotApprover,
            )
            .await;
            return;
        }
        let state = MessageState::from_stored(stored.state.as_ref());
        if let MessageState::Reply(r) = &state
            && r.user != from.id.0
        {
            return self.foreign_reply(m, from, &id).await;
        }
        let i = match self.registry.get(&id).await {
            Ok(Some(i)) => i,
            Ok(None) => return self.reply(m, self.say(Feedback::NotFound)).await,
            Err(_) => return self.reply(m, self.say(Feedback::StoreDown)).await,
        };
        // A reply to one of a session's prompts may be said to the session.
        if matches!(state, MessageState::Prompt(_)) && self.to_session(m, from, &i, text).await {
            return;
        }
        if !i.is_pending() {
            self.reply(m, escape(&self.say(Feedback::Already(i.clone()))))
                .await;
            return;
        }
        let failure = match state {
            MessageState::Reply(r) => match r.kind {
                ReplyKind::DenyReason => {
                    let answer = Answer::deny(Some(text.to_string()));
                    self.failure(self.pipeline.respond(&id, answer, responder(from)).await)
                }
                ReplyKind::Other { q } => {
                    self.other_text(&i, chat, parent, r.parent, q, text, from)
                        .await
                }
                ReplyKind::Field { q } => {
                    let failed = self
                        .field_text(&i, chat, r.parent, Some(q), text, from)
                        .await;
                    if failed.is_none() {
                        self.close_request(chat, parent, text).await;
                    }
                    failed
                }
            },
            // A reply answers a single free-text question whatever it says (its Decline
            // button declines); on a form of several fields "deny [reason]" declines.
            MessageState::Prompt(_)
                if i.kind == Kind::Form
                    && (!is_deny_word(text) || single_text_form(&i).is_some()) =>
            {
                self.field_text(&i, chat, parent, None, text, from).await
            }
            MessageState::Prompt(_) => self.text_fallback(&i, text, from).await,
        };
        if let Some(f) = failure {
            self.reply(m, escape(&f)).await;
        }
    }

    /// Marks a ForceReply request as answered and shows what was taken.
    pub(super) async fn close_request(&self, chat: i64, request: i32, text: &str) {
        let _guard = self.lock(chat, request).await;
        let (address, message_ref) = (chat.to_string(), request.to_string());
        if let Ok(Some(m)) = self.store.message(CHANNEL, &address, &message_ref).await {
            let mut state = MessageState::from_stored(m.state.as_ref());
            if state.is_final() {
                return;
            }
            if let Err(f) = self
                .client
                .retrying("updating a reply request", || {
                    self.client
                        .edit(chat, request, render::reply_taken(text, self.words()), None)
                })
                .await
            {
                tracing::warn!(error = %f.describe(), "telegram: could not update a reply request");
                return;
            }
            state.set_final();
            let _ = self
                .store
                .set_message_state(CHANNEL, &address, &message_ref, Some(state.to_stored()))
                .await;
        }
    }

    /// `allow` / `deny [reason]` / `edit <command>` as a reply to a prompt. Returns what went
    /// wrong, if anything.
    async fn text_fallback(&self, i: &Interaction, text: &str, from: &User) -> Option<String> {
        let (word, rest) = match text.split_once(char::is_whitespace) {
            Some((w, r)) => (w, r.trim()),
            None => (text, ""),
        };
        let word = word.to_ascii_lowercase();
        if word == "edit" && i.kind == Kind::Approval {
            // "Edit & approve": the command as typed runs in place of the agent's.
            let decision = Decision::Edit(rest.to_string());
            return self.failure(self.pipeline.decide(i, decision, responder(from)).await);
        }
        let answer = match (word.as_str(), i.kind) {
            ("allow" | "approve", Kind::Approval) if rest.is_empty() => Answer::allow(),
            ("allow" | "approve", Kind::Question | Kind::Form) => {
                return Some(self.words().allow_a_question().into());
            }
            ("deny" | "reject", _) => Answer::deny((!rest.is_empty()).then(|| rest.to_string())),
            _ => {
                let editable = crate::present::render::editable_command(i).is_some();
                return Some(self.words().how_to_reply(i.kind, editable).into());
            }
        };
        self.failure(self.pipeline.respond(&i.id, answer, responder(from)).await)
    }
}

/// Whether a reply to a prompt is the text fallback's "deny [reason]" (which declines a form
/// rather than filling in its field).
fn is_deny_word(text: &str) -> bool {
    let word = text.split_whitespace().next().unwrap_or("");
    word.eq_ignore_ascii_case("deny") || word.eq_ignore_ascii_case("reject")
}
