//! A tap on a button: its data verified, its interaction looked up, the message it was
//! tapped on checked, the tapper admitted by the answer pipeline; then the action it names
//! is done, or handed to the question, form or forced-reply steps.

use std::sync::Arc;

use teloxide::types::CallbackQuery;

use super::place;
use crate::channels::pipeline::{Decision, Feedback, Tap};
use crate::channels::telegram::callback::Action;
use crate::channels::telegram::state::ReplyKind;
use crate::channels::telegram::{CHANNEL, Telegram, actor, responder};
use crate::interaction::{Answer, Interaction, InteractionId, Kind};

impl Telegram {
    /// A tap on one of the bot's buttons (a digest's, or a prompt's).
    pub(super) async fn on_callback(&self, q: CallbackQuery) {
        let data = q.data.as_deref().unwrap_or("");
        if crate::channels::telegram::digest::is_digest_data(data) {
            return self.on_digest_tap(&q).await;
        }
        let Some((i, action)) = self.admit_tap(&q, data).await else {
            return;
        };
        self.act(&q, &i, place(&q), action).await;
    }

    /// The interaction a tap acts on, and its action: the data verifies, names an
    /// interaction this server knows, was tapped on a message showing it, and the pipeline
    /// admits the tapper and the action. `None` once the tap is answered with why not.
    async fn admit_tap(&self, q: &CallbackQuery, data: &str) -> Option<(Arc<Interaction>, Action)> {
        let (handle, action) = match self.codec.decode(data) {
            Ok(v) => v,
            Err(e) => {
                self.bad_button(q, None, &e.to_string()).await;
                return None;
            }
        };
        let id = match self.lookup_handle(&handle).await {
            Ok(Some(id)) => id,
            Ok(None) => {
                self.client
                    .answer(&q.id, &self.say(Feedback::NotFound))
                    .await;
                return None;
            }
            Err(e) => {
                tracing::error!(error = %e, "telegram: cannot look up a button");
                self.client
                    .answer(&q.id, &self.say(Feedback::StoreDown))
                    .await;
                return None;
            }
        };
        if !self.tapped_on_its_message(q, &id).await {
            return None;
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
        match self.pipeline.admit(&tap, |i| action.fits(i.kind)).await {
            Ok(i) => Some((i, action)),
            Err(stop) => {
                if let Some(label) = stop.refused {
                    self.count_refused(label);
                }
                self.client.answer(&q.id, &self.say(stop.feedback)).await;
                None
            }
        }
    }

    /// Whether the message a tap came from (if recorded) shows interaction `id`; a button
    /// of one interaction sent from a message showing another is refused and audited.
    async fn tapped_on_its_message(&self, q: &CallbackQuery, id: &InteractionId) -> bool {
        let Some((chat, message)) = place(q) else {
            return true;
        };
        match self
            .store
            .message(CHANNEL, &chat.to_string(), &message.to_string())
            .await
        {
            Ok(Some(m)) if m.interaction_id != *id => {
                let told = self
                    .refuse(
                        Some(id),
                        &q.from,
                        "a button of one interaction sent from a message showing another",
                        "foreign_message",
                        Feedback::BadButton,
                    )
                    .await;
                self.client.answer(&q.id, &self.say(told)).await;
                false
            }
            Ok(_) => true,
            Err(e) => {
                tracing::error!(error = %e, "telegram: cannot look up a message");
                self.client
                    .answer(&q.id, &self.say(Feedback::StoreDown))
                    .await;
                false
            }
        }
    }

    /// Does what an admitted tap's action says, on the message `at` it was tapped on.
    async fn act(
        &self,
        q: &CallbackQuery,
        i: &Interaction,
        at: Option<(i64, i32)>,
        action: Action,
    ) {
        match action {
            Action::Allow => self.decide(q, i, Answer::allow()).await,
            Action::AllowAlways => {
                let a = Answer::Allow {
                    updated_input: None,
                    always: true,
                };
                self.decide(q, i, a).await
            }
            Action::AllowSimilar => self.allow_similar(q, i).await,
            Action::Deny => self.decide(q, i, Answer::deny(None)).await,
            // The other buttons work on the prompt they were tapped on.
            _ => match at {
                Some(at) => self.on_prompt_tap(q, i, at, action).await,
                None => {
                    self.client
                        .answer(&q.id, &self.say(Feedback::BadButton))
                        .await
                }
            },
        }
    }

    /// A tap that works on its prompt `at`: asking for a reply, or a step on a question or
    /// a form.
    async fn on_prompt_tap(
        &self,
        q: &CallbackQuery,
        i: &Interaction,
        at: (i64, i32),
        action: Action,
    ) {
        match action {
            Action::DenyWithReason => self.ask_for_reply(q, i, at, ReplyKind::DenyReason).await,
            Action::Other { q: qi } if i.kind == Kind::Form => {
                self.ask_for_reply(q, i, at, ReplyKind::Field { q: qi })
                    .await
            }
            Action::Other { q: qi } => {
                self.ask_for_reply(q, i, at, ReplyKind::Other { q: qi })
                    .await
            }
            _ if i.kind == Kind::Form => self.on_form_tap(q, i, at, action).await,
            Action::Pick { .. }
            | Action::Toggle { .. }
            | Action::Submit { .. }
            | Action::ClearOther { .. }
            | Action::Skip { .. }
            | Action::Back { .. }
            | Action::SubmitForm => self.on_question_tap(q, i, at, action).await,
            // Done by `act`.
            Action::Allow | Action::AllowAlways | Action::AllowSimilar | Action::Deny => {}
        }
    }

    async fn decide(&self, q: &CallbackQuery, i: &Interaction, answer: Answer) {
        let feedback = self
            .pipeline
            .respond(&i.id, answer, responder(&q.from))
            .await;
        self.client.answer(&q.id, &self.say(feedback)).await;
        // The outbox edits every copy (this one included) now that it is resolved.
    }

    /// "Allow similar": allows, and grants the session a rule for calls like this one.
    async fn allow_similar(&self, q: &CallbackQuery, i: &Interaction) {
        let feedback = self
            .pipeline
            .decide(i, Decision::AllowSimilar, responder(&q.from))
            .await;
        self.client.answer(&q.id, &self.say(feedback)).await;
    }
}
