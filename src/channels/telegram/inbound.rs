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

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use jiff::Timestamp;
use teloxide::types::{CallbackQuery, Message, Update, UpdateKind, User};

use super::callback::Action;
use super::render::{self, Buttons, escape};
use super::state::{MessageState, PromptState, ReplyKind, ReplyState};
use super::{CHANNEL, DEDUPE_FOR, Telegram, actor, after, display_name, post_job, responder};
use crate::channels::pipeline::{Feedback, Tap};
use crate::interaction::form::FieldType;
use crate::interaction::{
    Answer, Form, Interaction, InteractionId, Kind, Question, parse_questions,
};
use crate::present::render::{Locale, single_text_form};
use crate::store::ChannelMessage;
use crate::sync::LockExt;

const NOT_YOUR_REQUEST: &str = "This request is for the person who tapped the button. To answer, tap “Deny with reason…” or “Other…” yourself.";

/// Shortest gap between two answers to non-approvers in one chat.
const PER_CHAT_COOLDOWN: Duration = Duration::from_secs(10);
/// Most answers to non-approvers in [`WINDOW`], over all chats.
const PER_WINDOW: u32 = 20;
/// The window of [`PER_WINDOW`].
const WINDOW: Duration = Duration::from_secs(60);

/// Limits the bot's answers to people who are not approvers (`/whoami` from strangers, say):
/// at most one per chat every [`PER_CHAT_COOLDOWN`], and [`PER_WINDOW`] per [`WINDOW`] in
/// all. Answers to approvers are never limited.
#[derive(Debug)]
pub(super) struct ReplyLimit {
    // A std mutex: a few map operations, never held across an await.
    state: Mutex<LimitState>,
}

#[derive(Debug)]
struct LimitState {
    /// When each chat last got an answer (only chats answered in the current window or
    /// within the cooldown are kept).
    last: HashMap<i64, Instant>,
    window_start: Instant,
    used: u32,
}

impl ReplyLimit {
    pub(super) fn new() -> Self {
        Self {
            state: Mutex::new(LimitState {
                last: HashMap::new(),
                window_start: Instant::now(),
                used: 0,
            }),
        }
    }

    /// Whether a non-approver in `chat` may get an answer at `now`; counts it if so.
    fn allow(&self, chat: i64, now: Instant) -> bool {
        let mut st = self.state.locked();
        if now.saturating_duration_since(st.window_start) >= WINDOW {
            st.window_start = now;
            st.used = 0;
            st.last
                .retain(|_, t| now.saturating_duration_since(*t) < PER_CHAT_COOLDOWN);
        }
        if st.used >= PER_WINDOW
            || st
                .last
                .get(&chat)
                .is_some_and(|t| now.saturating_duration_since(*t) < PER_CHAT_COOLDOWN)
        {
            return false;
        }
        st.last.insert(chat, now);
        st.used += 1;
        true
    }
}
/// What a person is told, in the messages every channel shares (Telegram's in English).
fn say(feedback: Feedback) -> String {
    feedback.text(Locale::EnUs)
}

/// What went wrong with an answer, if anything: `None` when it resolved the interaction.
fn failure(feedback: Feedback) -> Option<String> {
    match feedback {
        Feedback::Resolved(_) => None,
        f => Some(say(f)),
    }
}

/// Where a callback's button was tapped: chat id and message id.
fn place(q: &CallbackQuery) -> Option<(i64, i32)> {
    q.message.as_ref().map(|m| (m.chat().id.0, m.id().0))
}

impl Telegram {
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

    // ---- taps --------------------------------------------------------------------------

    async fn on_callback(&self, q: CallbackQuery) {
        let data = q.data.as_deref().unwrap_or("");
        if super::digest::is_digest_data(data) {
            return self.on_digest_tap(&q).await;
        }
        let (handle, action) = match self.codec.decode(data) {
            Ok(v) => v,
            Err(e) => {
                self.client.answer(&q.id, &say(Feedback::BadButton)).await;
                self.refuse(None, &q.from, &e.to_string(), "bad_data").await;
                return;
            }
        };
        let id = match self.lookup_handle(&handle).await {
            Ok(Some(id)) => id,
            Ok(None) => {
                self.client.answer(&q.id, &say(Feedback::NotFound)).await;
                return;
            }
            Err(e) => {
                tracing::error!(error = %e, "telegram: cannot look up a button");
                self.client.answer(&q.id, &say(Feedback::StoreDown)).await;
                return;
            }
        };
        let at = place(&q);
        if let Some((chat, message)) = at {
            match self
                .store
                .message(CHANNEL, &chat.to_string(), &message.to_string())
                .await
            {
                Ok(Some(m)) if m.interaction_id != id => {
                    self.client.answer(&q.id, &say(Feedback::BadButton)).await;
                    self.refuse(
                        Some(&id),
                        &q.from,
                        "a button of one interaction sent from a message showing another",
                        "foreign_message",
                    )
                    .await;
                    return;
                }
                Ok(_) => {}
                Err(e) => {
                    tracing::error!(error = %e, "telegram: cannot look up a message");
                    self.client.answer(&q.id, &say(Feedback::StoreDown)).await;
                    return;
                }
            }
        }
        let who = actor(&q.from);
        let identity = q.from.id.0.to_string();
        let tap = Tap {
            id: &id,
            // The handle binds the button to this incarnation: it is deleted with it.
            created: None,
            actor: &who,
            identity: &identity,
            approver: self.is_approver(&q.from),
            audit: true,
        };
        let i = match self.pipeline.admit(&tap, |i| action.fits(i.kind)).await {
            Ok(i) => i,
            Err(stop) => {
                if let Some(label) = stop.refused {
                    self.count_refused(label);
                }
                self.client.answer(&q.id, &say(stop.feedback)).await;
                return;
            }
        };
        match action {
            Action::Allow => self.decide(&q, &i, Answer::allow()).await,
            Action::AllowAlways => {
                let a = Answer::Allow {
                    updated_input: None,
                    always: true,
                };
                self.decide(&q, &i, a).await
            }
            Action::AllowSimilar => {
                let feedback = match crate::present::render::similar_rule(&i) {
                    Some(rule) => {
                        let request = crate::interaction::GrantRequest {
                            rule: Some(rule),
                            scope: crate::interaction::policy::GrantScope::Session,
                        };
                        self.pipeline
                            .respond_granting(&i.id, Answer::allow(), responder(&q.from), &request)
                            .await
                    }
                    None => Feedback::BadButton,
                };
                self.client.answer(&q.id, &say(feedback)).await;
            }
            Action::Deny => self.decide(&q, &i, Answer::deny(None)).await,
            Action::DenyWithReason => self.ask_for_reply(&q, &i, at, ReplyKind::DenyReason).await,
            Action::Other { q: qi } if i.kind == Kind::Form => {
                self.ask_for_reply(&q, &i, at, ReplyKind::Field { q: qi })
                    .await
            }
            Action::Other { q: qi } => {
                self.ask_for_reply(&q, &i, at, ReplyKind::Other { q: qi })
                    .await
            }
            _ if i.kind == Kind::Form => self.on_form_tap(&q, &i, at, action).await,
            Action::Pick { .. }
            | Action::Toggle { .. }
            | Action::Submit { .. }
            | Action::ClearOther { .. }
            | Action::Skip { .. }
            | Action::Back { .. }
            | Action::SubmitForm => self.on_question_tap(&q, &i, at, action).await,
        }
    }

    async fn decide(&self, q: &CallbackQuery, i: &Interaction, answer: Answer) {
        let feedback = self
            .pipeline
            .respond(&i.id, answer, responder(&q.from))
            .await;
        self.client.answer(&q.id, &say(feedback)).await;
        // The outbox edits every copy (this one included) now that it is resolved.
    }

    /// "Deny with reason…" and "Other…": asks the tapper for a reply (selective ForceReply).
    async fn ask_for_reply(
        &self,
        q: &CallbackQuery,
        i: &Interaction,
        at: Option<(i64, i32)>,
        kind: ReplyKind,
    ) {
        let Some((chat, parent)) = at else {
            self.client.answer(&q.id, &say(Feedback::BadButton)).await;
            return;
        };
        if let ReplyKind::Other { q: qi } = kind {
            let questions = parse_questions(&i.input.map()).unwrap_or_default();
            if usize::from(qi) >= questions.len() {
                self.client.answer(&q.id, &say(Feedback::BadButton)).await;
                self.refuse(
                    Some(&i.id),
                    &q.from,
                    "a question index out of range",
                    "bad_data",
                )
                .await;
                return;
            }
            if self.prompt_state(chat, parent).await.answered(qi) {
                self.client
                    .answer(&q.id, "That question is already answered.")
                    .await;
                return;
            }
        }
        if let ReplyKind::Field { q: qi } = kind {
            let form = Form::from_input(&i.input.map()).ok();
            let current = match &form {
                Some(form) => self.prompt_state(chat, parent).await.current_field(form),
                None => None,
            };
            if current != Some(qi) {
                self.client
                    .answer(&q.id, "That field is not the one being asked now.")
                    .await;
                return;
            }
        }
        let (toast, placeholder) = match kind {
            ReplyKind::DenyReason => (
                "Reply to the message below with your reason.",
                "Reason for denying",
            ),
            ReplyKind::Other { .. } | ReplyKind::Field { .. } => (
                "Reply to the message below with your answer.",
                "Your answer",
            ),
        };
        self.client.answer(&q.id, toast).await;
        let text = render::reply_request(i, kind, &q.from);
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
        let message = ChannelMessage {
            channel: CHANNEL.into(),
            address: chat.to_string(),
            message_ref: reply_id.to_string(),
            interaction_id: i.id.clone(),
            state: Some(
                MessageState::Reply(ReplyState {
                    kind,
                    parent,
                    user: q.from.id.0,
                    done: false,
                })
                .to_stored(),
            ),
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

    /// The prompt state recorded for a message (fresh if none).
    async fn prompt_state(&self, chat: i64, message: i32) -> PromptState {
        match self
            .store
            .message(CHANNEL, &chat.to_string(), &message.to_string())
            .await
        {
            Ok(Some(m)) => match MessageState::from_stored(m.state.as_ref()) {
                MessageState::Prompt(p) => p,
                MessageState::Reply(_) => PromptState::default(),
            },
            _ => PromptState::default(),
        }
    }

    /// Saves a prompt's state (recording the message if its post has not yet).
    async fn save_prompt_state(
        &self,
        id: &InteractionId,
        chat: i64,
        message: i32,
        state: &PromptState,
    ) -> bool {
        let stored = MessageState::Prompt(state.clone()).to_stored();
        let (address, message_ref) = (chat.to_string(), message.to_string());
        match self
            .store
            .set_message_state(CHANNEL, &address, &message_ref, Some(stored.clone()))
            .await
        {
            Ok(true) => true,
            Ok(false) => self
                .store
                .record_message(ChannelMessage {
                    channel: CHANNEL.into(),
                    address,
                    message_ref,
                    interaction_id: id.clone(),
                    state: Some(stored),
                    created_at: Timestamp::now(),
                })
                .await
                .is_ok(),
            Err(e) => {
                tracing::error!(id = %id, error = %e, "telegram: cannot save a message's state");
                false
            }
        }
    }

    /// A tap on a question's option, toggle or Submit.
    async fn on_question_tap(
        &self,
        q: &CallbackQuery,
        i: &Interaction,
        at: Option<(i64, i32)>,
        action: Action,
    ) {
        let Some((chat, message)) = at else {
            self.client.answer(&q.id, &say(Feedback::BadButton)).await;
            return;
        };
        let questions = parse_questions(&i.input.map()).unwrap_or_default();
        let (qi, oi) = match action {
            Action::Pick { q, o } | Action::Toggle { q, o } => (q, Some(o)),
            Action::Submit { q } | Action::ClearOther { q } => (q, None),
            _ => return,
        };
        let fits = questions.get(usize::from(qi)).is_some_and(|question| {
            let multi_action = matches!(
                action,
                Action::Toggle { .. } | Action::Submit { .. } | Action::ClearOther { .. }
            );
            question.multi_select == multi_action
                && oi.is_none_or(|o| usize::from(o) < question.options.len())
        });
        if !fits {
            self.client.answer(&q.id, &say(Feedback::BadButton)).await;
            self.refuse(
                Some(&i.id),
                &q.from,
                "an option that does not fit the question",
                "bad_data",
            )
            .await;
            return;
        }
        let question = &questions[usize::from(qi)];
        let Some((guard, mut state)) = self.open_prompt(q, &i.id, chat, message).await else {
            return;
        };
        if state.answered(qi) {
            self.client
                .answer(&q.id, "That question is already answered.")
                .await;
            return;
        }
        let toast = match action {
            Action::Pick { o, .. } => {
                let label = question.options[usize::from(o)].label.clone();
                state.answers.insert(qi, vec![label.clone()]);
                format!("Chosen: {label}")
            }
            Action::Toggle { o, .. } => {
                let label = &question.options[usize::from(o)].label;
                if state.toggle(qi, o) {
                    format!("☑ {label}")
                } else {
                    format!("☐ {label}")
                }
            }
            Action::ClearOther { .. } => {
                state.other.remove(&qi);
                "Other answer removed".to_string()
            }
            Action::Submit { .. } => {
                let chosen = state.selection(qi, question);
                if chosen.is_empty() {
                    self.client
                        .answer(&q.id, "Choose at least one option first (or Other…).")
                        .await;
                    return;
                }
                state.answers.insert(qi, chosen.clone());
                state.toggled.remove(&qi);
                state.other.remove(&qi);
                format!("Submitted: {}", chosen.join(", "))
            }
            _ => return,
        };
        self.advance_questions(i, &questions, chat, message, state, Some(q), toast, &q.from)
            .await;
        drop(guard);
    }

    /// After a question was answered or toggled on a prompt (whose lock the caller holds):
    /// resolves the interaction when every question has an answer, otherwise saves the state
    /// and re-renders the prompt. `q` is answered with `toast` (or the outcome) first.
    #[allow(clippy::too_many_arguments)]
    async fn advance_questions(
        &self,
        i: &Interaction,
        questions: &[Question],
        chat: i64,
        message: i32,
        state: PromptState,
        q: Option<&CallbackQuery>,
        toast: String,
        user: &User,
    ) -> Option<String> {
        if state.complete(questions) {
            let feedback = self
                .pipeline
                .respond(
                    &i.id,
                    Answer::Answers(state.answer_map(questions)),
                    responder(user),
                )
                .await;
            let resolved = matches!(feedback, Feedback::Resolved(_));
            if resolved {
                self.save_prompt_state(&i.id, chat, message, &state).await;
            }
            let text = say(feedback);
            if let Some(q) = q {
                self.client.answer(&q.id, &text).await;
            }
            return (!resolved).then_some(text);
        }
        self.save_and_rerender(i, chat, message, &state, q, &toast)
            .await
    }

    /// Saves a prompt's state (whose lock the caller holds), answers `q` with `toast`, and
    /// re-renders the prompt while its interaction is pending. Returns what went wrong, if
    /// anything.
    async fn save_and_rerender(
        &self,
        i: &Interaction,
        chat: i64,
        message: i32,
        state: &PromptState,
        q: Option<&CallbackQuery>,
        toast: &str,
    ) -> Option<String> {
        if !self.save_prompt_state(&i.id, chat, message, state).await {
            if let Some(q) = q {
                self.client.answer(&q.id, &say(Feedback::StoreDown)).await;
            }
            return Some(say(Feedback::StoreDown));
        }
        if let Some(q) = q {
            self.client.answer(&q.id, toast).await;
        }
        // Re-render only while it is still pending: the final edit must stay the last one.
        if let Ok(Some(latest)) = self.registry.get(&i.id).await
            && latest.is_pending()
        {
            // Recorded if it is not yet: a keyboard posted by an earlier version carries a
            // handle of another form, and this one replaces it.
            let handle = match self.record_handle(&latest).await {
                Ok(h) => h,
                Err(e) => {
                    tracing::warn!(id = %i.id, error = %e, "telegram: cannot record a button handle; not re-rendering");
                    return None;
                }
            };
            let p = render::prompt(
                &latest,
                state,
                &Buttons {
                    codec: &self.codec,
                    handle: &handle,
                    inbox: self.inbox.as_deref(),
                },
            );
            // Under the message's lock: a retried render cannot overtake a newer one, and
            // the final edit waits for it.
            if let Err(f) = self
                .client
                .retrying("re-rendering a prompt", || {
                    self.client
                        .edit(chat, message, p.text.clone(), Some(p.keyboard.clone()))
                })
                .await
            {
                tracing::warn!(id = %i.id, error = %f.describe(), "telegram: could not re-render a prompt");
            }
        }
        None
    }

    /// A tap on a form's buttons: a choice, a toggle, Done, Skip, Back or Submit.
    async fn on_form_tap(
        &self,
        q: &CallbackQuery,
        i: &Interaction,
        at: Option<(i64, i32)>,
        action: Action,
    ) {
        let (Some((chat, message)), Ok(form)) = (at, Form::from_input(&i.input.map())) else {
            self.client.answer(&q.id, &say(Feedback::BadButton)).await;
            return;
        };
        let Some((guard, mut state)) = self.open_prompt(q, &i.id, chat, message).await else {
            return;
        };
        let current = state.current_field(&form);
        let asked = |fi: u8| -> Result<&crate::interaction::form::Field, String> {
            match form.fields.get(usize::from(fi)) {
                None => Err(say(Feedback::BadButton)),
                Some(_) if current != Some(fi) => {
                    Err("That field is not the one being asked now.".to_string())
                }
                Some(f) => Ok(f),
            }
        };
        let step: Result<String, String> = match action {
            Action::Skip { q: 0 } if form.is_single_text() => {
                if form.fields.first().is_some_and(|f| f.required) {
                    Err(say(Feedback::BadButton))
                } else {
                    // Left empty: a single question's Skip is its answer.
                    state.fields.insert(0, serde_json::Value::Null);
                    let feedback = self
                        .submit_form(i, &form, chat, message, &state, &q.from)
                        .await;
                    drop(guard);
                    self.client.answer(&q.id, &say(feedback)).await;
                    return;
                }
            }
            Action::Pick { q: fi, o } => asked(fi).and_then(|f| {
                let value = match &f.ty {
                    FieldType::Boolean if o <= 1 => serde_json::Value::Bool(o == 1),
                    FieldType::Choice { options } => options
                        .get(usize::from(o))
                        .map(|c| serde_json::Value::String(c.value.clone()))
                        .ok_or_else(|| say(Feedback::BadButton))?,
                    _ => return Err(say(Feedback::BadButton)),
                };
                let shown = f.show(&value);
                state.fields.insert(fi, value);
                Ok(format!("{}: {shown}", f.label()))
            }),
            Action::Toggle { q: fi, o } => asked(fi).and_then(|f| {
                let label = f
                    .options()
                    .get(usize::from(o))
                    .filter(|_| matches!(f.ty, FieldType::Multi { .. }))
                    .map(|c| c.label.clone())
                    .ok_or_else(|| say(Feedback::BadButton))?;
                Ok(if state.toggle(fi, o) {
                    format!("☑ {label}")
                } else {
                    format!("☐ {label}")
                })
            }),
            Action::Submit { q: fi } => asked(fi).and_then(|f| {
                if !matches!(f.ty, FieldType::Multi { .. }) {
                    return Err(say(Feedback::BadButton));
                }
                let chosen: Vec<serde_json::Value> = f
                    .options()
                    .iter()
                    .enumerate()
                    .filter(|(n, _)| state.is_toggled(fi, *n as u8))
                    .map(|(_, c)| serde_json::Value::String(c.value.clone()))
                    .collect();
                let value = f
                    .check(&serde_json::Value::Array(chosen))
                    .map_err(|e| format!("{}: {e}", f.label()))?;
                let shown = f.show(&value);
                state.fields.insert(fi, value);
                state.toggled.remove(&fi);
                Ok(format!("{}: {shown}", f.label()))
            }),
            Action::Skip { q: fi } => asked(fi).and_then(|f| {
                if f.required {
                    return Err(format!("{} is required.", f.label()));
                }
                state.fields.insert(fi, serde_json::Value::Null);
                state.toggled.remove(&fi);
                Ok(format!("{}: skipped", f.label()))
            }),
            Action::Back { q: fi } => match form.fields.get(usize::from(fi)) {
                Some(f) => {
                    state.fields.retain(|n, _| *n < fi);
                    state.toggled.retain(|n, _| *n < fi);
                    Ok(format!("Back to {}", f.label()))
                }
                None => Err(say(Feedback::BadButton)),
            },
            Action::SubmitForm => {
                if current.is_some() {
                    Err("Fill in every field first.".to_string())
                } else {
                    let feedback = self
                        .submit_form(i, &form, chat, message, &state, &q.from)
                        .await;
                    drop(guard);
                    self.client.answer(&q.id, &say(feedback)).await;
                    return;
                }
            }
            _ => Err(say(Feedback::BadButton)),
        };
        match step {
            Ok(toast) => {
                self.save_and_rerender(i, chat, message, &state, Some(q), &toast)
                    .await;
            }
            Err(e) => self.client.answer(&q.id, &e).await,
        }
        drop(guard);
    }

    /// Sends the form filled in on the prompt `message` as `from`'s answer; once it resolves
    /// the interaction, the prompt's state is kept so its final text shows what was given.
    /// The caller holds the prompt's lock.
    async fn submit_form(
        &self,
        i: &Interaction,
        form: &Form,
        chat: i64,
        message: i32,
        state: &PromptState,
        from: &User,
    ) -> Feedback {
        let content = state.form_content(form);
        let feedback = self
            .pipeline
            .respond(&i.id, Answer::Accept(content), responder(from))
            .await;
        if matches!(feedback, Feedback::Resolved(_)) {
            self.save_prompt_state(&i.id, chat, message, state).await;
        }
        feedback
    }

    /// Typed text for form field `q` of the prompt `prompt` (a reply to a request for it, or
    /// to the prompt itself). Returns what went wrong, if anything.
    async fn field_text(
        &self,
        i: &Interaction,
        chat: i64,
        prompt: i32,
        q: Option<u8>,
        text: &str,
        from: &User,
    ) -> Option<String> {
        let form = Form::from_input(&i.input.map()).ok()?;
        let guard = self.locks.lock(chat, prompt).await;
        let mut state = self.prompt_state(chat, prompt).await;
        if state.done {
            return Some(say(Feedback::NotFound));
        }
        let current = state.current_field(&form);
        let fi = match (q, current) {
            (_, None) => return Some("Every field is filled in: tap Submit (or Back).".into()),
            (Some(q), Some(c)) if q != c => {
                return Some("That field is not the one being asked now.".into());
            }
            (_, Some(c)) => c,
        };
        let field = form.fields.get(usize::from(fi))?;
        if !matches!(field.ty, FieldType::Text { .. } | FieldType::Number { .. }) {
            return Some(format!("{}: tap one of the buttons.", field.label()));
        }
        let value = match field.parse_text(text) {
            Ok(v) => v,
            Err(e) => return Some(format!("{}: {e}. Reply again.", field.label())),
        };
        let toast = format!("{}: {}", field.label(), field.show(&value));
        state.fields.insert(fi, value);
        if form.is_single_text() {
            // A question of one free text: the reply is the answer, with nothing to submit.
            let feedback = self.submit_form(i, &form, chat, prompt, &state, from).await;
            drop(guard);
            return failure(feedback);
        }
        let failed = self
            .save_and_rerender(i, chat, prompt, &state, None, &toast)
            .await;
        drop(guard);
        failed
    }

    /// Takes a prompt's lock and reads its state for a tap on it; `None` (the tap answered
    /// as stale) when the prompt already shows its outcome.
    async fn open_prompt(
        &self,
        q: &CallbackQuery,
        id: &InteractionId,
        chat: i64,
        message: i32,
    ) -> Option<(super::LockGuard<'_>, PromptState)> {
        let guard = self.locks.lock(chat, message).await;
        let state = self.prompt_state(chat, message).await;
        if state.done {
            drop(guard);
            self.answer_stale(q, id).await;
            return None;
        }
        Some((guard, state))
    }

    async fn answer_stale(&self, q: &CallbackQuery, id: &InteractionId) {
        let text = match self.registry.get(id).await {
            Ok(Some(i)) if !i.is_pending() => say(Feedback::Already(i)),
            _ => say(Feedback::NotFound),
        };
        self.client.answer(&q.id, &text).await;
    }

    // ---- messages ----------------------------------------------------------------------

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
            }
        }
        if text.starts_with('/') {
            self.on_command(&m, from, text).await;
        } else if m.chat.is_private() && self.is_approver(from) {
            // Strangers chatting with the bot get no answer: only approvers need the hint.
            self.reply(&m, "Hello! I post approval prompts from imrelay. Send /whoami to see your ids, /pending to see what is waiting.".into())
                .await;
        }
    }

    /// Answers `m` in its chat. Answers to non-approvers are rate limited ([`ReplyLimit`]).
    async fn reply(&self, m: &Message, html: String) {
        let chat = m.chat.id.0;
        let approver = m.from.as_ref().is_some_and(|u| self.is_approver(u));
        if !approver && !self.reply_limit.allow(chat, Instant::now()) {
            tracing::debug!(
                chat,
                "telegram: not answering a non-approver (rate limited)"
            );
            return;
        }
        if let Err(f) = self.client.send(chat, html, None, Some(m.id.0)).await {
            tracing::warn!(chat, error = %f.describe(), "telegram: could not reply");
        }
    }

    /// The command in `text` if it is addressed to this bot (`/cmd` or `/cmd@thisbot`).
    fn command(&self, text: &str) -> Option<String> {
        let first = text.split_whitespace().next()?.strip_prefix('/')?;
        let (cmd, to) = match first.split_once('@') {
            Some((c, bot)) => (c, Some(bot)),
            None => (first, None),
        };
        if let Some(bot) = to {
            let mine = self.username.get()?;
            if !bot.eq_ignore_ascii_case(mine) {
                return None;
            }
        }
        Some(cmd.to_ascii_lowercase())
    }

    async fn on_command(&self, m: &Message, from: &User, text: &str) {
        let Some(cmd) = self.command(text) else {
            return;
        };
        match cmd.as_str() {
            "start" | "whoami" | "help" => self.whoami(m, from, cmd == "start").await,
            "pending" => self.pending(m, from).await,
            _ if m.chat.is_private() => {
                self.reply(m, "Unknown command. Try /whoami or /pending.".into())
                    .await
            }
            _ => {}
        }
    }

    async fn whoami(&self, m: &Message, from: &User, greeting: bool) {
        let chat = m.chat.id.0;
        let mut s = String::new();
        if greeting {
            s.push_str("👋 <b>imrelay</b> posts your agents' tool approvals and questions here; tap to answer.\n\n");
        }
        s.push_str(&format!(
            "Chat id: <code>{chat}</code> — {}\n",
            if self.is_chat(chat) {
                "prompts are posted here."
            } else {
                "not in <code>telegram.chats</code>, so prompts are not posted here."
            }
        ));
        s.push_str(&format!(
            "Your user id: <code>{}</code> ({}) — {}",
            from.id.0,
            escape(&display_name(from)),
            if self.is_approver(from) {
                "you are an approver."
            } else {
                "you are not an approver (add this id to <code>telegram.approvers</code>)."
            }
        ));
        if self.settings.approvers.is_empty() {
            s.push_str(
                "\n\n⚠️ <code>telegram.approvers</code> is empty: nobody can answer from Telegram.",
            );
        }
        self.reply(m, s).await;
    }

    async fn pending(&self, m: &Message, from: &User) {
        let chat = m.chat.id.0;
        if !self.is_chat(chat) {
            self.reply(
                m,
                format!("Prompts are not posted in this chat: add <code>{chat}</code> to <code>telegram.chats</code> first."),
            )
            .await;
            return;
        }
        if !self.is_approver(from) {
            tracing::info!(user = %actor(from), chat, "telegram: /pending from a non-approver");
            self.reply(m, "Only approvers can ask for the pending prompts.".into())
                .await;
            return;
        }
        let now = Timestamp::now();
        let nonce = m.id.0.to_string();
        // A page at a time (a re-post needs each interaction only to plan its job), newest
        // first; re-posted oldest first, as they were asked.
        let (mut jobs, mut after) = (Vec::new(), None);
        loop {
            let page = match self.registry.pending_page(after).await {
                Ok(p) => p,
                Err(e) => {
                    tracing::error!(error = %e, "telegram: cannot list pending interactions");
                    self.reply(m, say(Feedback::StoreDown)).await;
                    return;
                }
            };
            jobs.extend(
                page.interactions
                    .iter()
                    .filter(|i| i.deadline > now)
                    .map(|i| post_job(i, chat, Some(&nonce))),
            );
            match page.next {
                Some(next) => after = Some(next),
                None => break,
            }
        }
        if jobs.is_empty() {
            self.reply(m, "Nothing is pending.".into()).await;
            return;
        }
        jobs.reverse();
        let n = jobs.len();
        if let Err(e) = self.store.enqueue(jobs).await {
            tracing::error!(error = %e, "telegram: cannot queue re-posts");
            self.reply(m, say(Feedback::StoreDown)).await;
            return;
        }
        self.reply(
            m,
            format!(
                "Re-posting {n} pending {}.",
                if n == 1 {
                    "interaction"
                } else {
                    "interactions"
                }
            ),
        )
        .await;
    }

    /// A reply to `stored`, one of the bot's messages (`parent`): a ForceReply answer or the
    /// text fallback.
    async fn on_reply(
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
            // Refused and audited, but not answered: strangers cannot make the bot talk.
            self.refuse(Some(&id), from, "not in telegram.approvers", "not_approver")
                .await;
            return;
        }
        let state = MessageState::from_stored(stored.state.as_ref());
        if let MessageState::Reply(r) = &state
            && r.user != from.id.0
        {
            self.refuse(
                Some(&id),
                from,
                "a reply to a request made for another user",
                "foreign_reply",
            )
            .await;
            self.reply(m, escape(NOT_YOUR_REQUEST)).await;
            return;
        }
        let i = match self.registry.get(&id).await {
            Ok(Some(i)) => i,
            Ok(None) => return self.reply(m, say(Feedback::NotFound)).await,
            Err(_) => return self.reply(m, say(Feedback::StoreDown)).await,
        };
        if !i.is_pending() {
            self.reply(m, escape(&say(Feedback::Already(i.clone()))))
                .await;
            return;
        }
        let failure = match state {
            MessageState::Reply(r) => match r.kind {
                ReplyKind::DenyReason => {
                    let answer = Answer::deny(Some(text.to_string()));
                    failure(self.pipeline.respond(&id, answer, responder(from)).await)
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

    /// Free "Other" text for question `q` of the prompt `prompt`, sent as a reply to the
    /// request message `request`. Returns what went wrong, if anything.
    #[allow(clippy::too_many_arguments)]
    async fn other_text(
        &self,
        i: &Interaction,
        chat: i64,
        request: i32,
        prompt: i32,
        q: u8,
        text: &str,
        from: &User,
    ) -> Option<String> {
        let questions = parse_questions(&i.input.map()).unwrap_or_default();
        let question = questions.get(usize::from(q))?;
        let guard = self.locks.lock(chat, prompt).await;
        let mut state = self.prompt_state(chat, prompt).await;
        if state.done {
            return Some(say(Feedback::NotFound));
        }
        if state.answered(q) {
            return Some("That question is already answered.".to_string());
        }
        if question.multi_select {
            // Joins the toggled options; Submit sends them together.
            state.other.insert(q, text.to_string());
        } else {
            state.answers.insert(q, vec![text.to_string()]);
        }
        let failed = self
            .advance_questions(
                i,
                &questions,
                chat,
                prompt,
                state,
                None,
                String::new(),
                from,
            )
            .await;
        drop(guard);
        if failed.is_none() {
            self.close_request(chat, request, text).await;
        }
        failed
    }

    /// Marks a ForceReply request as answered and shows what was taken.
    async fn close_request(&self, chat: i64, request: i32, text: &str) {
        let _guard = self.locks.lock(chat, request).await;
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
                        .edit(chat, request, render::reply_taken(text), None)
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

    /// `allow` / `deny [reason]` as a reply to a prompt. Returns what went wrong, if anything.
    async fn text_fallback(&self, i: &Interaction, text: &str, from: &User) -> Option<String> {
        let (word, rest) = match text.split_once(char::is_whitespace) {
            Some((w, r)) => (w, r.trim()),
            None => (text, ""),
        };
        let answer = match (word.to_ascii_lowercase().as_str(), i.kind) {
            ("allow" | "approve", Kind::Approval) if rest.is_empty() => Answer::allow(),
            ("allow" | "approve", Kind::Question | Kind::Form) => {
                return Some(
                    "This is a question: tap an option (or Other…), or reply “deny [reason]” to decline it."
                        .into(),
                );
            }
            ("deny" | "reject", _) => Answer::deny((!rest.is_empty()).then(|| rest.to_string())),
            _ => {
                return Some(match i.kind {
                    Kind::Approval => {
                        "To answer by text, reply “allow” or “deny [reason]” to the prompt."
                    }
                    Kind::Question => {
                        "To answer, tap an option (or Other…), or reply “deny [reason]” to decline."
                    }
                    Kind::Form => "To answer, tap the buttons, or reply “deny [reason]” to decline.",
                }
                .into());
            }
        };
        failure(self.pipeline.respond(&i.id, answer, responder(from)).await)
    }
}

/// Whether a reply to a prompt is the text fallback's "deny [reason]" (which declines a form
/// rather than filling in its field).
fn is_deny_word(text: &str) -> bool {
    let word = text.split_whitespace().next().unwrap_or("");
    word.eq_ignore_ascii_case("deny") || word.eq_ignore_ascii_case("reject")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::interaction::RegistryError;

    #[test]
    fn answers_to_strangers_are_limited_per_chat_and_overall() {
        let limit = ReplyLimit::new();
        let t0 = Instant::now(); // after the window opened
        assert!(limit.allow(1, t0));
        assert!(
            !limit.allow(1, t0 + Duration::from_secs(9)),
            "within the cooldown"
        );
        assert!(limit.allow(2, t0), "another chat has its own cooldown");
        assert!(limit.allow(1, t0 + PER_CHAT_COOLDOWN));
        // Overall: at most PER_WINDOW answers per window, whatever the chats.
        let limit = ReplyLimit::new();
        let t0 = Instant::now();
        let n = (0..100).filter(|c| limit.allow(*c, t0)).count();
        assert_eq!(n, PER_WINDOW as usize);
        assert!(!limit.allow(1000, t0 + Duration::from_secs(59)));
        assert!(limit.allow(1000, t0 + WINDOW));
        // Chats past their cooldown are forgotten at the window's turn.
        assert!(limit.state.lock().unwrap().last.len() <= 1);
    }

    #[test]
    fn toasts_name_the_outcome() {
        let e = Err(RegistryError::NotFound(InteractionId::parse("x").unwrap()));
        assert_eq!(
            failure(Feedback::of(e)).as_deref(),
            Some("This request no longer exists")
        );
    }
}
