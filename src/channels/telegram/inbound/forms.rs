//! A form's buttons and typed fields, as steps on the core's [`FormDraft`]: the draft is
//! read from the prompt's state, the step taken, and the draft kept again; Submit sends it.

use serde_json::{Map, Value};
use teloxide::types::{CallbackQuery, User};

use crate::channels::pipeline::Feedback;
use crate::channels::telegram::callback::Action;
use crate::channels::telegram::state::PromptState;
use crate::channels::telegram::{Telegram, responder};
use crate::channels::words::Words;
use crate::interaction::form::FieldType;
use crate::interaction::{Answer, DraftError, Form, FormDraft, Interaction};

/// What a tap on a form's buttons came to, once taken on the draft.
enum Took {
    /// A field done, toggled or asked again: the toast saying so.
    Step(String),
    /// The form is complete and sent: its content.
    Send(Map<String, Value>),
}

/// Takes the step a tap names on `draft`: a choice, a toggle, Done, Skip, Back or Submit.
/// A refusal is what the person is told, in `w`'s words.
fn take(form: &Form, draft: &mut FormDraft, action: Action, w: Words) -> Result<Took, String> {
    let bad = || Feedback::BadButton.text(w.0);
    if let Action::Skip { q: 0 } = action
        && form.is_single_text()
    {
        // Left empty: a single question's Skip is its answer.
        let mut skipped = FormDraft::new();
        skipped.skip(form, 0).map_err(|_| bad())?;
        *draft = skipped;
        return draft
            .submit(form)
            .map(Took::Send)
            .map_err(|e| refusal(e, w));
    }
    let label = |fi: u8| form.fields.get(usize::from(fi)).map(|f| f.label());
    let toast = match action {
        Action::SubmitForm => {
            return draft
                .submit(form)
                .map(Took::Send)
                .map_err(|e| refusal(e, w));
        }
        Action::Pick { q: fi, o } => {
            let label = label(fi).ok_or_else(bad)?;
            let shown = draft
                .pick(form, usize::from(fi), usize::from(o))
                .map_err(|e| refusal(e, w))?;
            w.step(label, &shown)
        }
        Action::Toggle { q: fi, o } => {
            label(fi).ok_or_else(bad)?;
            match draft.toggle(form, usize::from(fi), usize::from(o)) {
                Ok((true, label)) => format!("☑ {label}"),
                Ok((false, label)) => format!("☐ {label}"),
                Err(e) => return Err(refusal(e, w)),
            }
        }
        Action::Submit { q: fi } => {
            let label = label(fi).ok_or_else(bad)?;
            let shown = draft
                .confirm_toggled(form, usize::from(fi))
                .map_err(|e| refusal(e, w))?;
            w.step(label, &shown)
        }
        Action::Skip { q: fi } => {
            let label = label(fi).ok_or_else(bad)?;
            draft
                .skip(form, usize::from(fi))
                .map_err(|e| refusal(e, w))?;
            w.skipped(label)
        }
        Action::Back { q: fi } => match draft.back(form, usize::from(fi)) {
            Ok(label) => w.back_to(label),
            Err(_) => return Err(bad()),
        },
        _ => return Err(bad()),
    };
    Ok(Took::Step(toast))
}

/// A refused step as the person is told: a button that does not fit its field is a bad
/// button; the rest say what is wrong.
fn refusal(e: DraftError, w: Words) -> String {
    match e {
        DraftError::DoesNotFit(_) => Feedback::BadButton.text(w.0),
        e => e.to_string(),
    }
}

impl Telegram {
    /// A tap on a form's buttons: a choice, a toggle, Done, Skip, Back or Submit.
    pub(super) async fn on_form_tap(
        &self,
        q: &CallbackQuery,
        i: &Interaction,
        (chat, message): (i64, i32),
        action: Action,
    ) {
        let Ok(form) = Form::from_input(&i.input.map()) else {
            self.client
                .answer(&q.id, &self.say(Feedback::BadButton))
                .await;
            return;
        };
        let Some((guard, mut state)) = self.open_prompt(q, &i.id, chat, message).await else {
            return;
        };
        let mut draft = state.form_draft(&form);
        match take(&form, &mut draft, action, self.words()) {
            Ok(Took::Step(toast)) => {
                state.keep_form_draft(&draft);
                self.save_and_rerender(i, chat, message, &state, Some(q), &toast)
                    .await;
            }
            Ok(Took::Send(content)) => {
                state.keep_form_draft(&draft);
                let feedback = self
                    .submit_form(i, chat, message, &state, content, &q.from)
                    .await;
                drop(guard);
                self.client.answer(&q.id, &self.say(feedback)).await;
                return;
            }
            Err(e) => self.client.answer(&q.id, &e).await,
        }
        drop(guard);
    }

    /// Sends `content`, the form filled in on the prompt `message`, as `from`'s answer; once
    /// it resolves the interaction, the prompt's state is kept so its final text shows what
    /// was given. The caller holds the prompt's lock.
    async fn submit_form(
        &self,
        i: &Interaction,
        chat: i64,
        message: i32,
        state: &PromptState,
        content: Map<String, Value>,
        from: &User,
    ) -> Feedback {
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
    pub(super) async fn field_text(
        &self,
        i: &Interaction,
        chat: i64,
        prompt: i32,
        q: Option<u8>,
        text: &str,
        from: &User,
    ) -> Option<String> {
        let form = Form::from_input(&i.input.map()).ok()?;
        let guard = self.lock(chat, prompt).await;
        let mut state = self.prompt_state(chat, prompt).await;
        if state.done {
            return Some(self.say(Feedback::NotFound));
        }
        let mut draft = state.form_draft(&form);
        let field = match (q, draft.asked(&form)) {
            (_, None) => return Some(self.words().all_filled_in().into()),
            (Some(q), Some((c, _))) if usize::from(q) != c => {
                return Some(DraftError::NotAsked.to_string());
            }
            (_, Some((_, field))) => field,
        };
        if !matches!(field.ty, FieldType::Text { .. } | FieldType::Number { .. }) {
            return Some(self.words().tap_a_button(field.label()));
        }
        // The text is never blank: Telegram delivers no empty message, and it comes trimmed.
        let shown = match draft.enter_text(&form, text) {
            Ok(shown) => shown,
            Err(e) => return Some(self.words().reply_again(&e.to_string())),
        };
        let toast = self.words().step(field.label(), &shown);
        state.keep_form_draft(&draft);
        if form.is_single_text() {
            // A question of one free text: the reply is the answer, with nothing to submit.
            let content = draft.content(&form);
            let feedback = self
                .submit_form(i, chat, prompt, &state, content, from)
                .await;
            drop(guard);
            return self.failure(feedback);
        }
        let failed = self
            .save_and_rerender(i, chat, prompt, &state, None, &toast)
            .await;
        drop(guard);
        failed
    }
}
