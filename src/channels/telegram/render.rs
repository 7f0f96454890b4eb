//! Telegram rendering: prompts (approvals and questions) with their inline keyboards, the
//! final state of a resolved interaction, and the ForceReply requests.
//!
//! Messages use HTML parse mode. Everything that comes from an agent or a person (tool
//! names, input, titles, questions, labels, reasons, names) is escaped. A message never
//! exceeds Telegram's 4096 characters: long tool input is cut with a note of how much was
//! left out, and question texts shrink step by step until the whole message fits. Lengths
//! are measured on the HTML source in UTF-16 code units, which is never less than what
//! Telegram counts; every field's budget is in those units *after* escaping (a field full of
//! `&` grows fivefold when escaped). Text is always cut before it is escaped, so a cut never
//! splits an escape or a tag, and the deadline (on a prompt) or the outcome (on a final
//! edit) is always kept.

use serde_json::Value;
use teloxide::types::{InlineKeyboardButton, InlineKeyboardMarkup, User};

use super::button::{Action, Codec};
use super::state::{PromptState, ReplyKind};
use crate::interaction::clip;
use crate::interaction::form::{Field, FieldType};
use crate::interaction::{Form, Interaction, Kind, Outcome, Question, parse_questions};
use crate::present;
use crate::present::render::{
    context_line, cut_note, duration_words, form_answers, format_time, given_answers,
    outcome_phrase, single_text_form, single_text_note,
};

/// Longest message text Telegram accepts.
pub(crate) const MAX_TEXT: usize = 4096;
/// Longest text shown on a button, in characters.
const BUTTON_CHARS: usize = 40;
/// Longest toast (`answerCallbackQuery` text) Telegram accepts.
pub(crate) const MAX_TOAST: usize = 200;

/// Escapes text for HTML parse mode, hidden characters (controls, direction overrides) shown
/// as escapes: text from outside never reorders or hides what a person reads.
pub fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in present::visible_text(s).chars() {
        push_escaped(&mut out, c);
    }
    out
}

fn push_escaped(out: &mut String, c: char) {
    match c {
        '&' => out.push_str("&amp;"),
        '<' => out.push_str("&lt;"),
        '>' => out.push_str("&gt;"),
        '"' => out.push_str("&quot;"),
        c => out.push(c),
    }
}

/// `s` escaped, in at most `max` UTF-16 units of HTML; cut with an ellipsis when longer.
fn esc(s: &str, max: usize) -> String {
    let s = &present::visible_text(s);
    let full = escape(s);
    if units(&full) <= max {
        return full;
    }
    let (mut cut, _) = fit_escaped(s, max.saturating_sub(1));
    cut.push('…');
    cut
}

/// Length as Telegram may count it (UTF-16 code units).
pub fn units(s: &str) -> usize {
    s.encode_utf16().count()
}

/// A toast cut to what Telegram accepts (plain text, counted in UTF-16 units).
pub fn toast(s: &str) -> String {
    if units(s) <= MAX_TOAST {
        return s.to_string();
    }
    let mut out = String::new();
    let mut used = 0;
    for c in s.chars() {
        if used + c.len_utf16() > MAX_TOAST - 1 {
            break;
        }
        used += c.len_utf16();
        out.push(c);
    }
    out.push('…');
    out
}

/// Escapes as much of `text` as fits in `budget` units; returns the escaped text and how
/// many characters of `text` were left out.
pub(crate) fn fit_escaped(text: &str, budget: usize) -> (String, usize) {
    let mut out = String::new();
    let mut used = 0;
    let mut taken = 0;
    let mut piece = String::new();
    for c in text.chars() {
        piece.clear();
        push_escaped(&mut piece, c);
        let n = units(&piece);
        if used + n > budget {
            break;
        }
        used += n;
        taken += 1;
        out.push_str(&piece);
    }
    (out, text.chars().count() - taken)
}

/// A prompt ready to send: text and keyboard.
#[derive(Clone, Debug)]
pub struct Prompt {
    /// The HTML text.
    pub text: String,
    /// The inline keyboard.
    pub keyboard: InlineKeyboardMarkup,
}

/// Makes callback data for the buttons of one interaction.
pub struct Buttons<'a> {
    /// The codec (keyed).
    pub codec: &'a Codec,
    /// The interaction's handle.
    pub handle: &'a str,
    /// The inbox's base URL (`server.public_url`), for a link to all of a cut tool call.
    pub inbox: Option<&'a str>,
}

impl Buttons<'_> {
    fn button(&self, text: &str, action: Action) -> InlineKeyboardButton {
        InlineKeyboardButton::callback(
            clip(text, BUTTON_CHARS),
            self.codec.encode(self.handle, action),
        )
    }
}

/// How much of each text field to show; shrinks when a message would not fit.
#[derive(Clone, Copy)]
struct Limits {
    title: usize,
    description: usize,
    question: usize,
    label: usize,
    option_description: usize,
    answer: usize,
}

const LEVELS: [Limits; 4] = [
    Limits {
        title: 300,
        description: 800,
        question: 500,
        label: 100,
        option_description: 250,
        answer: 600,
    },
    Limits {
        title: 150,
        description: 300,
        question: 250,
        label: 60,
        option_description: 100,
        answer: 250,
    },
    Limits {
        title: 80,
        description: 120,
        question: 120,
        label: 40,
        option_description: 0,
        answer: 120,
    },
    Limits {
        title: 40,
        description: 0,
        question: 60,
        label: 30,
        option_description: 0,
        answer: 60,
    },
];

/// Shows the tool call as a person reads it (see [`present`](crate::present)): a
/// command as itself, an edit as a diff, a file as its path and first lines. Returns the
/// text and the code block's language.
fn input_text(i: &Interaction) -> (String, &'static str) {
    present::chat_block(&i.tool_name, &i.input.map(), i.cwd.as_deref())
}

/// The first line: what this is, and whether it still waits for an answer.
fn headline(i: &Interaction) -> String {
    match (i.kind, i.is_pending()) {
        (Kind::Approval, true) => format!("🔐 <b>{}</b> needs approval", esc(&i.tool_name, 100)),
        (Kind::Approval, false) => format!("🔐 Approval for <b>{}</b>", esc(&i.tool_name, 100)),
        (Kind::Question, _) => "❓ <b>Question</b>".to_string(),
        (Kind::Form, _) if single_text_form(i).is_some() => "❓ <b>Question</b>".to_string(),
        (Kind::Form, _) => "📝 <b>Form</b>".to_string(),
    }
}

fn head(i: &Interaction, lim: &Limits) -> String {
    let mut s = headline(i);
    if let Some(t) = i
        .title
        .as_deref()
        .filter(|t| !t.trim().is_empty() && lim.title > 0)
    {
        s.push_str(&format!("\n<b>{}</b>", esc(t, lim.title)));
    }
    // A Bash call's own `description` says what the command is for.
    let input = i.input.map();
    let description = match i.kind {
        Kind::Approval => i
            .description
            .as_deref()
            .or_else(|| input.get("description").and_then(Value::as_str)),
        Kind::Question | Kind::Form => i.description.as_deref(),
    }
    .filter(|d| !d.trim().is_empty() && lim.description > 0);
    if let Some(d) = description {
        s.push_str(&format!("\n{}", esc(d, lim.description)));
    }
    let ctx = context_line(i);
    if !ctx.is_empty() {
        s.push_str(&format!("\n<i>{}</i>", esc(&ctx, 300)));
    }
    s
}

fn deadline_line(i: &Interaction) -> String {
    format!(
        "⏳ Answer within {} — by {}",
        duration_words(i.timeout_secs),
        format_time(i.deadline)
    )
}

fn outcome_icon(o: Outcome) -> &'static str {
    match o {
        Outcome::Allowed => "✅",
        Outcome::Denied => "❌",
        Outcome::Answered => "✅",
        Outcome::Expired => "⌛",
        Outcome::Cancelled => "🚫",
    }
}

/// The outcome block of a resolved interaction: what, who, via which channel, when, and
/// the reason given to the agent when it differs from the headline.
fn outcome_block(i: &Interaction, lim: &Limits) -> String {
    let Some(r) = &i.resolution else {
        return String::new();
    };
    let phrase = outcome_phrase(r);
    let mut s = format!(
        "{} <b>{}</b>\n🕑 {}",
        outcome_icon(r.outcome),
        esc(&phrase, 300),
        format_time(r.at)
    );
    if let Some(m) = r.message().filter(|m| *m != phrase) {
        s.push_str(&format!("\n💬 {}", esc(m, lim.answer.max(200))));
    }
    s
}

/// Wraps escaped code in a block.
fn code_block(escaped: &str, lang: &str) -> String {
    format!("<pre><code class=\"language-{lang}\">{escaped}</code></pre>")
}

/// Room kept for the note under cut input ("\n✂️ <i>1,234 more characters not shown</i>").
const CUT_NOTE_RESERVE: usize = 80;

/// `head`, the input in a code block cut to what fits, a note of how much was cut (with
/// `more`, a link to all of it, when given), and `tail`; `None` if `head` and `tail` leave
/// no room.
fn with_input(
    head: &str,
    input: &str,
    lang: &str,
    tail: &str,
    more: Option<&str>,
) -> Option<String> {
    let link = more
        .map(|url| format!(" · <a href=\"{}\">all of it in the inbox</a>", escape(url)))
        .unwrap_or_default();
    let fixed = units(head)
        + units(&code_block("", lang))
        + units(tail)
        + 4
        + CUT_NOTE_RESERVE
        + units(&link);
    if fixed >= MAX_TEXT {
        return None;
    }
    let (body, cut) = fit_escaped(input, MAX_TEXT - fixed);
    let mut s = format!("{head}\n\n{}", code_block(&body, lang));
    if cut > 0 {
        s.push_str(&format!("\n✂️ <i>{}</i>{link}", cut_note(cut)));
    }
    s.push_str("\n\n");
    s.push_str(tail);
    Some(s)
}

/// The approval text: head, input (cut to what fits, linking to the inbox item under
/// `inbox` when given), and `tail`.
fn approval_text(i: &Interaction, tail: &str, inbox: Option<&str>) -> String {
    let (input, lang) = input_text(i);
    let more = inbox.map(|base| format!("{base}/#{}", i.id));
    LEVELS
        .iter()
        .map(|lim| head(i, lim))
        .chain(std::iter::once(headline(i)))
        .find_map(|head| with_input(&head, &input, lang, tail, more.as_deref()))
        // Only if `tail` alone were too long, which the field budgets rule out.
        .unwrap_or_else(|| last_resort(i, "", tail))
}

/// The last resort when nothing else fits: the first line, as much of `plain` (cut before
/// it is escaped) as fits, and `tail` — the deadline or the outcome — always.
fn last_resort(i: &Interaction, plain: &str, tail: &str) -> String {
    let top = headline(i);
    let budget = MAX_TEXT.saturating_sub(units(&top) + units(tail) + 4);
    let (body, _) = fit_escaped(plain, budget);
    if body.is_empty() {
        format!("{top}\n\n{tail}")
    } else {
        format!("{top}\n\n{body}\n\n{tail}")
    }
}

/// One question's text block.
fn question_block(
    n: usize,
    total: usize,
    q: &Question,
    state: Option<&PromptState>,
    qi: u8,
    lim: &Limits,
    given: Option<&str>,
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
        s.push_str(if q.multi_select {
            "\n  <i>Choose any, then Submit (or Other… to type).</i>"
        } else {
            "\n  <i>Choose one (or Other… to type).</i>"
        });
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

fn question_text(
    i: &Interaction,
    questions: &[Question],
    state: Option<&PromptState>,
    tail: &str,
) -> String {
    let answers = given_answers(i);
    for lim in &LEVELS {
        let mut s = head(i, lim);
        for (n, q) in questions.iter().enumerate() {
            let given = answers
                .iter()
                .find(|(text, _)| *text == q.question)
                .map(|(_, a)| a.as_str());
            s.push_str("\n\n");
            s.push_str(&question_block(
                n,
                questions.len(),
                q,
                state,
                n as u8,
                lim,
                given,
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
    last_resort(i, plain.trim_end(), tail)
}

fn question_keyboard(
    questions: &[Question],
    state: &PromptState,
    b: &Buttons,
) -> Vec<Vec<InlineKeyboardButton>> {
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
                    &format!("{prefix}☑ Other: {text}"),
                    Action::ClearOther { q: qi },
                )]);
            }
            rows.push(vec![
                b.button(&format!("{prefix}✏️ Other…"), Action::Other { q: qi }),
                b.button(&format!("{prefix}📨 Submit"), Action::Submit { q: qi }),
            ]);
        } else {
            rows.push(vec![
                b.button(&format!("{prefix}✏️ Other…"), Action::Other { q: qi }),
            ]);
        }
    }
    rows.push(vec![b.button("❌ Decline", Action::Deny)]);
    rows
}

/// One form field's line: its number, label, whether it is required, and either the value
/// given, the hint for the one being asked, or nothing yet.
fn field_block(n: usize, f: &Field, value: Option<&str>, asking: bool, lim: &Limits) -> String {
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
                "\n   <i>Default: {}</i>",
                esc(&f.show(d), lim.label)
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
fn form_text(i: &Interaction, form: &Form, state: Option<&PromptState>, tail: &str) -> String {
    let given = form_answers(i);
    let current = state.and_then(|st| st.current_field(form));
    for lim in &LEVELS {
        let mut s = head(i, lim);
        s.push_str(&format!(
            "\n\n{}",
            esc(&form.message, lim.description.max(200))
        ));
        for (n, f) in form.fields.iter().enumerate() {
            let value = match state.and_then(|st| st.fields.get(&(n as u8))) {
                Some(serde_json::Value::Null) => Some("(left empty)".to_string()),
                Some(v) => Some(f.show(v)),
                None => given
                    .iter()
                    .find(|(label, _)| label == f.label())
                    .map(|(_, v)| v.clone()),
            };
            s.push_str("\n\n");
            s.push_str(&field_block(
                n,
                f,
                value.as_deref(),
                current == Some(n as u8),
                lim,
            ));
        }
        if let Some(st) = state {
            let instruction = match current.and_then(|c| form.fields.get(usize::from(c))) {
                Some(f) => match &f.ty {
                    FieldType::Boolean | FieldType::Choice { .. } => "Tap your answer.",
                    FieldType::Multi { .. } => "Tap to choose any, then Done.",
                    FieldType::Text { .. } | FieldType::Number { .. } => {
                        "Reply to this message with the answer, or tap ✏️ Type the answer."
                    }
                },
                None if !st.fields.is_empty() => "All filled in: check the answers, then Submit.",
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
    last_resort(i, plain.trim_end(), tail)
}

/// A single free-text question's text: the head, the question, what its field adds, the
/// answer once given (here or on any channel), how to answer while pending, and `tail`.
fn single_text(i: &Interaction, form: &Form, pending: bool, tail: &str) -> String {
    let given = form_answers(i);
    let note = form
        .fields
        .first()
        .map(single_text_note)
        .unwrap_or_default();
    for lim in &LEVELS {
        let mut s = head(i, lim);
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
            s.push_str("\n\n<i>Reply to this message with your answer.</i>");
        }
        s.push_str("\n\n");
        s.push_str(tail);
        if units(&s) <= MAX_TEXT {
            return s;
        }
    }
    last_resort(i, &form.message, tail)
}

/// A single free-text question's keyboard: the reply request, Skip when it may be left
/// empty, and Decline. The reply itself is the answer: there is nothing to submit.
fn single_text_keyboard(form: &Form, b: &Buttons) -> Vec<Vec<InlineKeyboardButton>> {
    let mut rows = vec![vec![b.button("✏️ Answer…", Action::Other { q: 0 })]];
    if form.fields.first().is_some_and(|f| !f.required) {
        rows.push(vec![b.button("⏭ Skip", Action::Skip { q: 0 })]);
    }
    rows.push(vec![b.button("❌ Decline", Action::Deny)]);
    rows
}

/// The keyboard for the field being asked (or Submit once all are filled in), with Back
/// and Decline.
fn form_keyboard(form: &Form, state: &PromptState, b: &Buttons) -> Vec<Vec<InlineKeyboardButton>> {
    let mut rows = Vec::new();
    let current = state.current_field(form);
    match current.and_then(|c| form.fields.get(usize::from(c)).map(|f| (c, f))) {
        Some((q, f)) => {
            match &f.ty {
                FieldType::Boolean => rows.push(vec![
                    b.button("✅ Yes", Action::Pick { q, o: 1 }),
                    b.button("❌ No", Action::Pick { q, o: 0 }),
                ]),
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
                    rows.push(vec![b.button("📨 Done", Action::Submit { q })]);
                }
                FieldType::Text { .. } | FieldType::Number { .. } => {
                    rows.push(vec![b.button("✏️ Type the answer…", Action::Other { q })]);
                }
            }
            if !f.required {
                let label = if f.default.is_some() {
                    "⏭ Skip (use the default)"
                } else {
                    "⏭ Skip"
                };
                rows.push(vec![b.button(label, Action::Skip { q })]);
            }
            if q > 0 {
                rows.push(vec![b.button("↩ Back", Action::Back { q: q - 1 })]);
            }
        }
        None => {
            rows.push(vec![b.button("📨 Submit", Action::SubmitForm)]);
            if let Some(last) = form.fields.len().checked_sub(1) {
                rows.push(vec![b.button("↩ Back", Action::Back { q: last as u8 })]);
            }
        }
    }
    rows.push(vec![b.button("❌ Decline", Action::Deny)]);
    rows
}

/// The prompt for a pending interaction, with its keyboard; `state` holds the answers given
/// on this message so far.
pub fn prompt(i: &Interaction, state: &PromptState, b: &Buttons) -> Prompt {
    let mut tail = deadline_line(i);
    if let Some(line) =
        crate::present::render::escalated_line(i, crate::present::render::Locale::EnUs)
    {
        tail = format!("⏫ <b>{}</b>\n{tail}", escape(&line));
    }
    match i.kind {
        Kind::Approval => {
            let mut rows = vec![vec![
                b.button("✅ Allow", Action::Allow),
                b.button("❌ Deny", Action::Deny),
            ]];
            // Several people decide it: each allows it as it is, once.
            let voted = crate::interaction::quorum::is_voted(i);
            if let Some(votes) =
                crate::present::render::votes_line(i, crate::present::render::Locale::EnUs)
            {
                tail = format!("👥 {}\n{tail}", escape(&votes));
            }
            if i.suggestions.is_some() && !voted {
                rows.push(vec![b.button("✅ Always allow", Action::AllowAlways)]);
            }
            // "Allow similar": the rule it adds is in the message, in full.
            if let Some(rule) = crate::present::render::similar_rule(i).filter(|_| !voted) {
                rows.push(vec![
                    b.button("🔁 Allow similar (this session)", Action::AllowSimilar),
                ]);
                let native = if i
                    .suggestions
                    .as_deref()
                    .is_some_and(crate::interaction::applied_with_a_grant)
                {
                    " (the agent also remembers its own suggestion for this session)"
                } else {
                    ""
                };
                tail = format!(
                    "🔁 <i>Allow similar</i> also allows, for this session: <code>{}</code>{native}\n{tail}",
                    escape(&clip(&rule, 200))
                );
            }
            rows.push(vec![
                b.button("💬 Deny with reason…", Action::DenyWithReason),
            ]);
            Prompt {
                text: approval_text(i, &tail, b.inbox),
                keyboard: InlineKeyboardMarkup::new(rows),
            }
        }
        Kind::Question => {
            let questions = parse_questions(&i.input.map()).unwrap_or_default();
            Prompt {
                text: question_text(i, &questions, Some(state), &tail),
                keyboard: InlineKeyboardMarkup::new(question_keyboard(&questions, state, b)),
            }
        }
        Kind::Form => match Form::from_input(&i.input.map()) {
            Ok(form) if form.is_single_text() => Prompt {
                text: single_text(i, &form, true, &tail),
                keyboard: InlineKeyboardMarkup::new(single_text_keyboard(&form, b)),
            },
            Ok(form) => Prompt {
                text: form_text(i, &form, Some(state), &tail),
                keyboard: InlineKeyboardMarkup::new(form_keyboard(&form, state, b)),
            },
            Err(e) => Prompt {
                text: last_resort(i, &format!("This form cannot be shown: {e}"), &tail),
                keyboard: InlineKeyboardMarkup::new(vec![vec![
                    b.button("❌ Decline", Action::Deny),
                ]]),
            },
        },
    }
}

/// The final text of a resolved interaction's prompt: what was asked, the outcome, who,
/// via which channel and when. It has no keyboard.
pub fn resolved(i: &Interaction) -> String {
    let mut tail = outcome_block(i, &LEVELS[1]);
    if let Some(votes) = crate::present::render::votes_line(i, crate::present::render::Locale::EnUs)
    {
        tail = format!("👥 {}\n{tail}", escape(&votes));
    }
    match i.kind {
        Kind::Approval => approval_text(i, &tail, None),
        Kind::Question => {
            let questions = parse_questions(&i.input.map()).unwrap_or_default();
            question_text(i, &questions, None, &tail)
        }
        Kind::Form => match Form::from_input(&i.input.map()) {
            Ok(form) if form.is_single_text() => single_text(i, &form, false, &tail),
            Ok(form) => form_text(i, &form, None, &tail),
            Err(_) => last_resort(i, "", &tail),
        },
    }
}

/// The outcome as plain text (no parse mode, nothing to escape), short: what was asked
/// and how it ended, for when Telegram refuses the HTML version of the final text.
pub(crate) fn outcome_plain(i: &Interaction) -> String {
    let what = match i.kind {
        Kind::Approval => format!("🔐 Approval for {}", clip(&i.tool_name, 100)),
        Kind::Question => "❓ Question".to_string(),
        Kind::Form if single_text_form(i).is_some() => "❓ Question".to_string(),
        Kind::Form => "📝 Form".to_string(),
    };
    match &i.resolution {
        Some(r) => {
            let phrase = outcome_phrase(r);
            let mut s = format!(
                "{what}\n{} {}\n🕑 {}",
                outcome_icon(r.outcome),
                clip(&phrase, 300),
                format_time(r.at)
            );
            if let Some(m) = r.message().filter(|m| *m != phrase) {
                s.push_str(&format!("\n💬 {}", clip(m, 500)));
            }
            s
        }
        None => what,
    }
}

/// A mention of `user` that Telegram links to them (it also targets a selective
/// ForceReply at them).
pub(crate) fn mention(user: &User) -> String {
    format!(
        "<a href=\"tg://user?id={}\">{}</a>",
        user.id.0,
        esc(&user.full_name(), 64)
    )
}

/// The text asking `user` to reply with a deny reason or "Other" text.
pub fn reply_request(i: &Interaction, kind: ReplyKind, user: &User) -> String {
    match kind {
        ReplyKind::DenyReason => format!(
            "💬 {}, reply to this message with the reason for denying <b>{}</b>.",
            mention(user),
            esc(&i.tool_name, 100)
        ),
        ReplyKind::Field { .. } if single_text_form(i).is_some() => format!(
            "✏️ {}, reply to this message with your answer to: <b>{}</b>",
            mention(user),
            esc(
                &single_text_form(i).map(|f| f.message).unwrap_or_default(),
                500
            )
        ),
        ReplyKind::Field { q } => {
            let form = Form::from_input(&i.input.map()).ok();
            let field = form.as_ref().and_then(|f| f.fields.get(usize::from(q)));
            format!(
                "✏️ {}, reply to this message with <b>{}</b> ({}).",
                mention(user),
                esc(field.map_or("the answer", |f| f.label()), 200),
                esc(&field.map_or_else(|| "text".to_string(), |f| f.hint()), 200)
            )
        }
        ReplyKind::Other { q } => {
            let questions = parse_questions(&i.input.map()).unwrap_or_default();
            let question = questions
                .get(q as usize)
                .map(|q| q.question.as_str())
                .unwrap_or("the question");
            format!(
                "✏️ {}, reply to this message with your answer to: <b>{}</b>",
                mention(user),
                esc(question, 500)
            )
        }
    }
}

/// The final text of a reply request once its interaction is resolved.
pub(crate) fn reply_closed(i: &Interaction) -> String {
    match &i.resolution {
        Some(r) => format!(
            "{} No reply needed any more: {}",
            outcome_icon(r.outcome),
            esc(&outcome_phrase(r), 300)
        ),
        None => "No reply needed any more.".to_string(),
    }
}

/// The text a reply request shows once its "Other" answer was taken.
pub(crate) fn reply_taken(text: &str) -> String {
    format!("✔ Noted: <b>{}</b>", esc(text, 500))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::interaction::{InteractionId, now};
    use serde_json::json;

    fn interaction(tool: &str, input: Value) -> Interaction {
        Interaction {
            session: Some("s1".into()),
            agent: Some("claude-code".into()),
            cwd: Some("/home/dev/<shop>".into()),
            ..Interaction::pending(
                InteractionId::parse("t1").unwrap(),
                tool,
                input.as_object().unwrap().clone(),
                now(),
                300,
            )
        }
    }

    fn buttons(codec: &Codec) -> Buttons<'_> {
        Buttons {
            codec,
            handle: "AAAAAAAAAAA",
            inbox: None,
        }
    }

    #[test]
    fn hostile_input_is_escaped() {
        let codec = Codec::new(vec![1; 32]);
        let i = interaction(
            "Bash",
            json!({"command": "echo '<script>alert(1)</script>' && rm -rf /"}),
        );
        let p = prompt(&i, &PromptState::default(), &buttons(&codec));
        assert!(
            p.text.contains("&lt;script&gt;alert(1)&lt;/script&gt;"),
            "{}",
            p.text
        );
        assert!(p.text.contains("&amp;&amp; rm -rf /"));
        assert!(!p.text.contains("<script>"));
        assert!(p.text.contains("/home/dev/&lt;shop&gt;"));
    }

    #[test]
    fn long_input_is_cut_to_fit_with_a_note() {
        let codec = Codec::new(vec![1; 32]);
        let i = interaction("Write", json!({"content": "<&>".repeat(5000)}));
        let p = prompt(&i, &PromptState::default(), &buttons(&codec));
        assert!(units(&p.text) <= MAX_TEXT, "{}", units(&p.text));
        assert!(p.text.contains("more characters not shown"));
        let r = resolved(&i);
        assert!(units(&r) <= MAX_TEXT);
    }

    #[test]
    fn fit_never_splits_an_escape() {
        let (s, cut) = fit_escaped("a&b", 3);
        assert_eq!((s.as_str(), cut), ("a", 2));
        let (s, cut) = fit_escaped("a&b", 6);
        assert_eq!((s.as_str(), cut), ("a&amp;", 1));
    }

    /// The text of HTML as Telegram shows it (tags dropped, entities decoded).
    fn shown(html: &str) -> String {
        let mut out = String::new();
        let mut rest = html;
        while let Some(c) = rest.chars().next() {
            if c == '<' {
                rest = &rest[rest.find('>').unwrap() + 1..];
            } else if c == '&' {
                let end = rest.find(';').unwrap();
                out.push(match &rest[..=end] {
                    "&lt;" => '<',
                    "&gt;" => '>',
                    "&amp;" => '&',
                    "&quot;" => '"',
                    other => panic!("unexpected entity {other}"),
                });
                rest = &rest[end + 1..];
            } else {
                out.push(c);
                rest = &rest[c.len_utf8()..];
            }
        }
        out
    }

    /// The number in "1,234 more characters not shown".
    fn cut_count(text: &str) -> usize {
        let end = text.find(" more characters not shown").expect("a cut note");
        let start = text[..end].rfind('>').unwrap() + 1;
        text[start..end].replace(',', "").parse().unwrap()
    }

    /// Text that grows about fivefold when escaped.
    fn hostile(n: usize) -> String {
        "\"\"😀\"&".repeat(n)
    }

    /// Text that grows more than fivefold when escaped: quotes and an emoji.
    fn quotes(n: usize) -> String {
        "\"\"\"\"\"😀".repeat(n)
    }

    fn resolve(mut i: Interaction, by: &str, message: &str) -> Interaction {
        i.resolution = Some(Box::new(crate::interaction::Resolution {
            outcome: Outcome::Denied,
            by: Some(by.into()),
            via: crate::interaction::Via::new(crate::channels::telegram::CHANNEL),
            at: now(),
            result: crate::interaction::PermissionResult::Deny {
                message: message.into(),
                interrupt: false,
            }
            .into(),
        }));
        i
    }

    #[test]
    fn fields_are_budgeted_after_escaping() {
        // Every character escapes to 6 units (or is an emoji of 2): the budget is still kept.
        let e = esc(&"\"".repeat(1000), 300);
        assert!(units(&e) <= 300, "{}", units(&e));
        assert!(e.ends_with('…') && !e.contains("&quot…") && !e.contains("&qu…"));
        let e = esc(&"😀".repeat(1000), 301);
        assert!(units(&e) <= 301);
        assert_eq!(esc("a&b", 100), "a&amp;b");
        assert!(units(&toast(&"😀".repeat(300))) <= MAX_TOAST);
        assert_eq!(toast("Allowed"), "Allowed");
    }

    #[test]
    fn tool_calls_show_as_people_read_them() {
        let codec = Codec::new(vec![1; 32]);
        // An edit is a diff with its file, escaped for Telegram's HTML.
        let edit = interaction(
            "Edit",
            json!({"file_path": "/home/dev/<shop>/src/a.rs", "old_string": "let x = 1;\nkeep();", "new_string": "let x = \"<b>2</b>\";\nkeep();"}),
        );
        let p = prompt(&edit, &PromptState::default(), &buttons(&codec));
        assert!(
            p.text.contains("<code class=\"language-diff\">"),
            "{}",
            p.text
        );
        assert!(p.text.contains("File: src/a.rs"), "{}", p.text);
        assert!(p.text.contains("\n-let x = 1;"), "{}", p.text);
        assert!(
            p.text
                .contains("\n+let x = &quot;&lt;b&gt;2&lt;/b&gt;&quot;;"),
            "{}",
            p.text
        );
        assert!(!p.text.contains("old_string"), "{}", p.text);
        // A write is its file and first lines; a command is itself, with no JSON around it.
        let write = interaction(
            "Write",
            json!({"file_path": "/etc/hosts", "content": "127.0.0.1 localhost\n"}),
        );
        let p = prompt(&write, &PromptState::default(), &buttons(&codec));
        assert!(p.text.contains("/etc/hosts"), "{}", p.text);
        assert!(p.text.contains("127.0.0.1 localhost"), "{}", p.text);
        assert!(!p.text.contains("\\n"), "no JSON escapes: {}", p.text);
        let bash = interaction("Bash", json!({"command": "ls -la\ncat x"}));
        let p = prompt(&bash, &PromptState::default(), &buttons(&codec));
        assert!(
            p.text
                .contains("<code class=\"language-bash\">ls -la\ncat x</code>"),
            "{}",
            p.text
        );
    }

    #[test]
    fn hostile_approvals_keep_the_deadline_an_exact_cut_count_and_the_outcome() {
        let codec = Codec::new(vec![1; 32]);
        let command = hostile(3000);
        let mut i = interaction("Bash", json!({ "command": command }));
        i.title = Some(hostile(500).into());
        i.description = Some(hostile(1000).into());
        i.cwd = Some(hostile(500).into());
        i.agent = Some(hostile(100).into());
        i.tool_name = hostile(100);
        let p = prompt(&i, &PromptState::default(), &buttons(&codec));
        assert!(units(&p.text) <= MAX_TEXT, "{}", units(&p.text));
        assert!(p.text.contains("⏳ Answer within 5 min"), "{}", p.text);
        assert!(!p.text.contains("&lt;b&gt;") && !p.text.contains("&amp;lt;"));
        // The count is exact: what is shown plus what was cut is the whole tool call as a
        // person reads it (a tool of unknown name: its input field by field).
        let full =
            present::present(&i.tool_name, &i.input.map(), None, present::Budget::ALL).plain_text();
        assert!(full.starts_with("command: "), "{full}");
        let start = p.text.find("<code class=\"language-text\">").unwrap();
        let block = &p.text[start..p.text.find("</code>").unwrap()];
        let shown_input = shown(&format!("{block}</code>"));
        assert!(full.starts_with(&shown_input));
        assert_eq!(
            shown_input.chars().count() + cut_count(&p.text),
            full.chars().count()
        );

        let r = resolved(&resolve(i, &hostile(50), &hostile(2000)));
        assert!(units(&r) <= MAX_TEXT, "{}", units(&r));
        assert!(r.starts_with("🔐 Approval for"), "{r}");
        assert!(r.contains("❌ <b>Denied by"), "{r}");
        assert!(r.contains("🕑"), "{r}");
        assert!(!r.contains("&lt;b&gt;"));
    }

    #[test]
    fn hostile_questions_keep_the_deadline_and_the_outcome() {
        let codec = Codec::new(vec![1; 32]);
        let q = |n: usize, multi: bool| {
            json!({"question": format!("{n}{}", quotes(3000)), "header": quotes(50), "multiSelect": multi,
                "options": (0..4).map(|o| json!({"label": format!("{o}{}", quotes(300)), "description": quotes(500)})).collect::<Vec<_>>()})
        };
        let mut i = interaction(
            "AskUserQuestion",
            json!({"questions": [q(0, false), q(1, true), q(2, false), q(3, true)]}),
        );
        assert_eq!(parse_questions(&i.input.map()).unwrap().len(), 4);
        i.title = Some(hostile(500).into());
        i.description = Some(hostile(1000).into());
        i.cwd = Some(hostile(500).into());
        let mut partly = PromptState::default();
        partly.answers.insert(0, vec![hostile(4000)]);
        partly.other.insert(1, hostile(4000));
        for state in [PromptState::default(), partly] {
            let p = prompt(&i, &state, &buttons(&codec));
            assert!(units(&p.text) <= MAX_TEXT, "{}", units(&p.text));
            assert!(p.text.contains("⏳ Answer within"), "{}", p.text);
            assert!(!p.text.contains("&lt;b&gt;") && !p.text.contains("&amp;lt;"));
        }
        let r = resolved(&resolve(i, "Alice", &hostile(2000)));
        assert!(units(&r) <= MAX_TEXT, "{}", units(&r));
        assert!(r.contains("Denied by Alice via telegram"), "{r}");
        assert!(!r.contains("&lt;b&gt;"));
    }

    #[test]
    fn the_last_resort_cuts_plain_text_and_keeps_the_tail() {
        let i = interaction("Bash", json!({}));
        let tail = "⏳ Answer within 5 min — by then";
        let m = last_resort(&i, &format!("<b>{}</b>", hostile(5000)), tail);
        assert!(units(&m) <= MAX_TEXT, "{}", units(&m));
        assert!(m.ends_with(tail), "{m}");
        assert!(m.starts_with("🔐 <b>Bash</b> needs approval"));
        // The plain text was escaped once, after cutting: its tag shows as text, and no
        // escape is split or doubled.
        assert!(m.contains("&lt;b&gt;&quot;&quot;😀&quot;&amp;"), "{m}");
        assert!(!m.contains("&amp;lt;"));
        let resolved_one = resolve(i, "Alice", "no");
        assert!(last_resort(&resolved_one, "x", "t").starts_with("🔐 Approval for"));
    }

    #[test]
    fn huge_questions_still_fit() {
        let codec = Codec::new(vec![1; 32]);
        let q = |n: usize| {
            json!({"question": format!("{n}{}", "Q&".repeat(3000)), "header": "H", "multiSelect": n.is_multiple_of(2),
                "options": (0..4).map(|o| json!({"label": format!("{o}{}", "L".repeat(300)), "description": "<d>".repeat(500)})).collect::<Vec<_>>()})
        };
        let i = interaction(
            "AskUserQuestion",
            json!({"questions": [q(0), q(1), q(2), q(3)]}),
        );
        let p = prompt(&i, &PromptState::default(), &buttons(&codec));
        assert!(units(&p.text) <= MAX_TEXT, "{}", units(&p.text));
        let buttons: usize = p.keyboard.inline_keyboard.iter().map(Vec::len).sum();
        assert!(buttons <= 100);
    }
}
