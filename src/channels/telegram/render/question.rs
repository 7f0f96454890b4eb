//! A question's text and keyboard: each question with its options while it can be answered,
//! the answers given so far, and a button per option, Other… and Submit.

use teloxide::types::InlineKeyboardButton;

use super::PromptState;
use super::budget::{LEVELS, Limits, MAX_TEXT, esc, last_resort, units};
use super::{Action, Buttons, head};
use crate::channels::words::Words;
use crate::interaction::{Interaction, Question};
use crate::present::render::given_answers;

/// One question's text block.
fn question_block(
    (n, total): (usize, usize),
    q: &Question,
    state: Option<&PromptState>,
    qi: u8,
    lim: &Limits,
    given: Option<&str>,
    w: Words,
) -> String {
    let number = if total > 1 {
        format!("{}. ", n + 1)
    } else {
        String::new()
    };
    let mut s = format!(
        "<b>{number}{}</b> — {}",
        esc(&q.header, 40),
        esc(&q.question, lim.question)
    );
    // Options are shown while the question can still be answered (`state` is only given
    // for a pending prompt).
    let show_options = state.is_some_and(|st| !st.answered(qi));
    if show_options {
        for opt in &q.options {
            s.push_str(&format!("\n  • <b>{}</b>", esc(&opt.label, lim.label)));
            if let Some(d) = opt.description.as_deref().filter(|d| !d.trim().is_empty())
                && lim.option_description > 0
            {
                s.push_str(&format!(" — {}", esc(d, lim.option_description)));
            }
        }
        let how = if q.multi_select {
            w.choose_any()
        } else {
            w.choose_one()
        };
        s.push_str(&format!("\n  <i>{how}</i>"));
    }
    if let Some(a) = given {
        s.push_str(&format!("\n  → <b>{}</b>", esc(a, lim.answer)));
    } else if let Some(st) = state
        && let Some(a) = st.answers.get(&qi)
    {
        s.push_str(&format!("\n  ✔ <b>{}</b>", esc(&a.join(", "), lim.answer)));
    }
    s
}

/// The questions' text: the head, each question (with what was answered here, or on any
/// channel once resolved), and `tail`.
pub(super) fn question_text(
    i: &Interaction,
    questions: &[Question],
    state: Option<&PromptState>,
    tail: &str,
    w: Words,
) -> String {
    let answers = given_answers(i);
    for lim in &LEVELS {
        let mut s = head(i, lim, w);
        for (n, q) in questions.iter().enumerate() {
            let given = answers
                .iter()
                .find(|(text, _)| *text == q.question)
                .map(|(_, a)| a.as_str());
            s.push_str("\n\n");
            s.push_str(&question_block(
                (n, questions.len()),
                q,
                state,
                n as u8,
                lim,
                given,
                w,
            ));
        }
        s.push_str("\n\n");
        s.push_str(tail);
        if units(&s) <= MAX_TEXT {
            return s;
        }
    }
    // Cannot happen with 4 questions of 4 options at the smallest limits; stay valid anyway:
    // the questions and answers as plain text, cut before escaping, and the tail.
    let mut plain = String::new();
    for (n, q) in questions.iter().enumerate() {
        plain.push_str(&format!("{}. {} — {}\n", n + 1, q.header, q.question));
        let given = answers
            .iter()
            .find(|(text, _)| *text == q.question)
            .map(|(_, a)| a.clone())
            .or_else(|| state.and_then(|st| st.answers.get(&(n as u8)).map(|a| a.join(", "))));
        if let Some(a) = given {
            plain.push_str(&format!("  → {a}\n"));
        }
    }
    last_resort(i, plain.trim_end(), tail, w)
}

/// A button per option of each question not yet answered (ticks and Submit for a
/// multi-select one), Other…, and Decline.
pub(super) fn question_keyboard(
    questions: &[Question],
    state: &PromptState,
    b: &Buttons,
) -> Vec<Vec<InlineKeyboardButton>> {
    let w = b.words;
    let mut rows = Vec::new();
    let several = questions.len() > 1;
    for (n, q) in questions.iter().enumerate() {
        let qi = n as u8;
        if state.answered(qi) {
            continue;
        }
        let prefix = if several {
            format!("{}· ", n + 1)
        } else {
            String::new()
        };
        for (o, opt) in q.options.iter().enumerate() {
            let o = o as u8;
            if q.multi_select {
                let mark = if state.is_toggled(qi, o) {
                    "☑"
                } else {
                    "☐"
                };
                rows.push(vec![b.button(
                    &format!("{prefix}{mark} {}", opt.label),
                    Action::Toggle { q: qi, o },
                )]);
            } else {
                rows.push(vec![b.button(
                    &format!("{prefix}{}", opt.label),
                    Action::Pick { q: qi, o },
                )]);
            }
        }
        if q.multi_select {
            if let Some(text) = state.other.get(&qi) {
                rows.push(vec![b.button(
                    &format!("{prefix}☑ {}", w.other_is(text)),
                    Action::ClearOther { q: qi },
                )]);
            }
            rows.push(vec![
                b.button(
                    &format!("{prefix}✏️ {}", w.other()),
                    Action::Other { q: qi },
                ),
                b.button(
                    &format!("{prefix}📨 {}", w.submit()),
                    Action::Submit { q: qi },
                ),
            ]);
        } else {
            rows.push(vec![b.button(
                &format!("{prefix}✏️ {}", w.other()),
                Action::Other { q: qi },
            )]);
        }
    }
    rows.push(vec![b.button(&format!("❌ {}", w.decline()), Action::Deny)]);
    rows
}
