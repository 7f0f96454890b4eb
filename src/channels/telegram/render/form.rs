//! A form's text and keyboard, asked one field at a time: every field with what was given,
//! the buttons that fit the field being asked, Back, Skip and Submit; and a single free-text
//! question, answered by replying.

use teloxide::types::InlineKeyboardButton;

use super::PromptState;
use super::budget::{LEVELS, Limits, MAX_TEXT, esc, last_resort, units};
use super::{Action, Buttons, head};
use crate::channels::words::{FieldInput, Words};
use crate::interaction::form::{Field, FieldType};
use crate::interaction::{Form, Interaction};
use crate::present::render::{form_answers, single_text_note};

/// One form field's line: its number, label, whether it is required, and either the value
/// given, the hint for the one being asked, or nothing yet.
fn field_block(
    (n, f): (usize, &Field),
    value: Option<&str>,
    asking: bool,
    lim: &Limits,
    w: Words,
) -> String {
    let marker = if asking { "▶ " } else { "" };
    let required = if f.required { " *" } else { "" };
    let mut s = format!(
        "{marker}{}. <b>{}</b>{required}",
        n + 1,
        esc(f.label(), lim.label)
    );
    if asking {
        if let Some(d) = f.description.as_deref()
            && lim.option_description > 0
        {
            s.push_str(&format!(" — {}", esc(d, lim.option_description)));
        }
        s.push_str(&format!("\n   <i>{}</i>", esc(&f.hint(), 200)));
        if let Some(d) = &f.default {
            s.push_str(&format!(
                "\n   <i>{}</i>",
                w.default_is(&esc(&f.show(d), lim.label))
            ));
        }
    }
    if let Some(v) = value {
        s.push_str(&format!("\n   → <b>{}</b>", esc(v, lim.answer)));
    }
    s
}

/// A form's text: the head, the agent's message, every field (with what was given on this
/// message, or on any channel once resolved), and `tail`.
pub(super) fn form_text(
    i: &Interaction,
    form: &Form,
    state: Option<&PromptState>,
    tail: &str,
    w: Words,
) -> String {
    let given = form_answers(i);
    let current = state.and_then(|st| st.current_field(form));
    for lim in &LEVELS {
        let mut s = head(i, lim, w);
        s.push_str(&format!(
            "\n\n{}",
            esc(&form.message, lim.description.max(200))
        ));
        for (n, f) in form.fields.iter().enumerate() {
            let value = match state.and_then(|st| st.fields.get(&(n as u8))) {
                Some(serde_json::Value::Null) => Some(w.left_empty().to_string()),
                Some(v) => Some(f.show(v)),
                None => given
                    .iter()
                    .find(|(label, _)| label == f.label())
                    .map(|(_, v)| v.clone()),
            };
            s.push_str("\n\n");
            s.push_str(&field_block(
                (n, f),
                value.as_deref(),
                current == Some(n as u8),
                lim,
                w,
            ));
        }
        if let Some(st) = state {
            let instruction = match current.and_then(|c| form.fields.get(usize::from(c))) {
                Some(f) => w.form_instruction(Some(match &f.ty {
                    FieldType::Boolean | FieldType::Choice { .. } => FieldInput::Choice,
                    FieldType::Multi { .. } => FieldInput::Multi,
                    FieldType::Text { .. } | FieldType::Number { .. } => FieldInput::Typed,
                })),
                None if !st.fields.is_empty() => w.form_instruction(None),
                None => "",
            };
            if !instruction.is_empty() {
                s.push_str(&format!("\n\n<i>{instruction}</i>"));
            }
        }
        s.push_str("\n\n");
        s.push_str(tail);
        if units(&s) <= MAX_TEXT {
            return s;
        }
    }
    let mut plain = format!("{}\n", form.message);
    for (n, f) in form.fields.iter().enumerate() {
        plain.push_str(&format!("{}. {}\n", n + 1, f.label()));
    }
    last_resort(i, plain.trim_end(), tail, w)
}

/// A single free-text question's text: the head, the question, what its field adds, the
/// answer once given (here or on any channel), how to answer while pending, and `tail`.
pub(super) fn single_text(
    i: &Interaction,
    form: &Form,
    pending: bool,
    tail: &str,
    w: Words,
) -> String {
    let given = form_answers(i);
    let note = form
        .fields
        .first()
        .map(single_text_note)
        .unwrap_or_default();
    for lim in &LEVELS {
        let mut s = head(i, lim, w);
        s.push_str(&format!(
            "\n\n<b>{}</b>",
            esc(&form.message, lim.description.max(200))
        ));
        if !note.is_empty() {
            s.push_str(&format!("\n<i>{}</i>", esc(&note, 300)));
        }
        if let Some((_, v)) = given.first() {
            s.push_str(&format!("\n\n→ <b>{}</b>", esc(v, lim.answer.max(200))));
        }
        if pending {
            s.push_str(&format!("\n\n<i>{}</i>", w.reply_with_answer()));
        }
        s.push_str("\n\n");
        s.push_str(tail);
        if units(&s) <= MAX_TEXT {
            return s;
        }
    }
    last_resort(i, &form.message, tail, w)
}

/// A single free-text question's keyboard: the reply request, Skip when it may be left
/// empty, and Decline. The reply itself is the answer: there is nothing to submit.
pub(super) fn single_text_keyboard(form: &Form, b: &Buttons) -> Vec<Vec<InlineKeyboardButton>> {
    let w = b.words;
    let mut rows =
        vec![vec![b.button(
            &format!("✏️ {}", w.answer()),
            Action::Other { q: 0 },
        )]];
    if form.fields.first().is_some_and(|f| !f.required) {
        rows.push(vec![
            b.button(&format!("⏭ {}", w.skip()), Action::Skip { q: 0 }),
        ]);
    }
    rows.push(vec![b.button(&format!("❌ {}", w.decline()), Action::Deny)]);
    rows
}

/// The keyboard for the field being asked (or Submit once all are filled in), with Back
/// and Decline.
pub(super) fn form_keyboard(
    form: &Form,
    state: &PromptState,
    b: &Buttons,
) -> Vec<Vec<InlineKeyboardButton>> {
    let w = b.words;
    let mut rows = Vec::new();
    let current = state.current_field(form);
    match current.and_then(|c| form.fields.get(usize::from(c)).map(|f| (c, f))) {
        Some((q, f)) => {
            match &f.ty {
                FieldType::Boolean => {
                    let [yes, no] = w.yes_no();
                    rows.push(vec![
                        b.button(&format!("✅ {yes}"), Action::Pick { q, o: 1 }),
                        b.button(&format!("❌ {no}"), Action::Pick { q, o: 0 }),
                    ])
                }
                FieldType::Choice { options } => {
                    for pair in options.chunks(2).enumerate() {
                        let (row, chunk) = pair;
                        rows.push(
                            chunk
                                .iter()
                                .enumerate()
                                .map(|(k, o)| {
                                    b.button(
                                        &o.label,
                                        Action::Pick {
                                            q,
                                            o: (row * 2 + k) as u8,
                                        },
                                    )
                                })
                                .collect(),
                        );
                    }
                }
                FieldType::Multi { options, .. } => {
                    for (n, o) in options.iter().enumerate() {
                        let on = state.is_toggled(q, n as u8);
                        let mark = if on { "☑" } else { "☐" };
                        rows.push(vec![b.button(
                            &format!("{mark} {}", o.label),
                            Action::Toggle { q, o: n as u8 },
                        )]);
                    }
                    rows.push(vec![
                        b.button(&format!("📨 {}", w.done()), Action::Submit { q }),
                    ]);
                }
                FieldType::Text { .. } | FieldType::Number { .. } => {
                    rows.push(vec![
                        b.button(&format!("✏️ {}", w.type_answer()), Action::Other { q }),
                    ]);
                }
            }
            if !f.required {
                let label = if f.default.is_some() {
                    w.skip_to_default()
                } else {
                    w.skip()
                };
                rows.push(vec![b.button(&format!("⏭ {label}"), Action::Skip { q })]);
            }
            if q > 0 {
                let back = format!("↩ {}", w.back());
                rows.push(vec![b.button(&back, Action::Back { q: q - 1 })]);
            }
        }
        None => {
            rows.push(vec![
                b.button(&format!("📨 {}", w.submit()), Action::SubmitForm),
            ]);
            if let Some(last) = form.fields.len().checked_sub(1) {
                let back = format!("↩ {}", w.back());
                rows.push(vec![b.button(&back, Action::Back { q: last as u8 })]);
            }
        }
    }
    rows.push(vec![b.button(&format!("❌ {}", w.decline()), Action::Deny)]);
    rows
}
