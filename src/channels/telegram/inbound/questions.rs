//! A question's buttons and "Other…" text: an option picked, toggled, cleared or submitted,
//! and the interaction answered once every question has an answer.

use teloxide::types::{CallbackQuery, User};

use crate::channels::pipeline::Feedback;
use crate::channels::telegram::callback::Action;
use crate::channels::telegram::state::PromptState;
use crate::channels::telegram::{Telegram, responder};
use crate::channels::words::Words;
use crate::interaction::{Answer, Interaction, Question, parse_questions};

/// What a tap does to one question.
#[derive(Clone, Copy)]
enum Step {
    /// Option `o` chosen: the question's answer.
    Pick(u8),
    /// Option `o` of a multi-select toggled.
    Toggle(u8),
    /// A multi-select's "Other" text removed.
    ClearOther,
    /// A multi-select's choice sent as its answer.
    Submit,
}

impl Step {
    /// The question a tap is for, and what it does to it; `None` for an action a question
    /// has no button for.
    fn of(action: Action) -> Option<(u8, Step)> {
        match action {
            Action::Pick { q, o } => Some((q, Step::Pick(o))),
            Action::Toggle { q, o } => Some((q, Step::Toggle(o))),
            Action::ClearOther { q } => Some((q, Step::ClearOther)),
            Action::Submit { q } => Some((q, Step::Submit)),
            _ => None,
        }
    }

    /// Whether the step fits `question`: a pick on a single choice, the rest on a
    /// multi-select, an option it has.
    fn fits(self, question: &Question) -> bool {
        let (multi, option) = match self {
            Step::Pick(o) => (false, Some(o)),
            Step::Toggle(o) => (true, Some(o)),
            Step::ClearOther | Step::Submit => (true, None),
        };
        question.multi_select == multi
            && option.is_none_or(|o| usize::from(o) < question.options.len())
    }

    /// Takes the step on question `qi` of a prompt's `state`; returns the toast saying
    /// what it did, or the one saying why not, in `w`'s words.
    fn take(
        self,
        state: &mut PromptState,
        qi: u8,
        question: &Question,
        w: Words,
    ) -> Result<String, &'static str> {
        let [chosen_word, submitted] = w.chosen_submitted();
        Ok(match self {
            Step::Pick(o) => {
                let label = question.options[usize::from(o)].label.clone();
                state.answers.insert(qi, vec![label.clone()]);
                w.step(chosen_word, &label)
            }
            Step::Toggle(o) => {
                let label = &question.options[usize::from(o)].label;
                if state.toggle(qi, o) {
                    format!("☑ {label}")
                } else {
                    format!("☐ {label}")
                }
            }
            Step::ClearOther => {
                state.other.remove(&qi);
                w.other_removed().to_string()
            }
            Step::Submit => {
                let chosen = state.selection(qi, question);
                if chosen.is_empty() {
                    return Err(w.choose_first());
                }
                state.answers.insert(qi, chosen.clone());
                state.toggled.remove(&qi);
                state.other.remove(&qi);
                w.step(submitted, &chosen.join(", "))
            }
        })
    }
}

impl Telegram {
    /// A tap on a question's option, toggle or Submit.
    pub(super) async fn on_question_tap(
        &self,
        q: &CallbackQuery,
        i: &Interaction,
        (chat, message): (i64, i32),
        action: Action,
    ) {
        let questions = parse_questions(&i.input.map()).unwrap_or_default();
        let Some((qi, step)) = Step::of(action) else {
            return;
        };
        let Some(question) = questions.get(usize::from(qi)).filter(|x| step.fits(x)) else {
            let why = "an option that does not fit the question";
            return self.bad_button(q, Some(&i.id), why).await;
        };
        let Some((guard, mut state)) = self.open_prompt(q, &i.id, chat, message).await else {
            return;
        };
        if state.answered(qi) {
            let told = self.words().question_answered();
            self.client.answer(&q.id, told).await;
            return;
        }
        let toast = match step.take(&mut state, qi, question, self.words()) {
            Ok(toast) => toast,
            Err(why) => return self.client.answer(&q.id, why).await,
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
            let text = self.say(feedback);
            if let Some(q) = q {
                self.client.answer(&q.id, &text).await;
            }
            return (!resolved).then_some(text);
        }
        self.save_and_rerender(i, chat, message, &state, q, &toast)
            .await
    }

    /// Free "Other" text for question `q` of the prompt `prompt`, sent as a reply to the
    /// request message `request`. Returns what went wrong, if anything.
    #[allow(clippy::too_many_arguments)]
    pub(super) async fn other_text(
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
        let guard = self.lock(chat, prompt).await;
        let mut state = self.prompt_state(chat, prompt).await;
        if state.done {
            return Some(self.say(Feedback::NotFound));
        }
        if state.answered(q) {
            return Some(self.words().question_answered().to_string());
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
}
