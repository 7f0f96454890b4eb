//! Telegram rendering: prompts (approvals and questions) with their inline keyboards, the
//! final state of a resolved interaction, and the ForceReply requests.
//!
//! Messages use HTML parse mode. Everything that comes from an agent or a person (tool
//! names, input, titles, questions, labels, reasons, names) is escaped. A message never
//! exceeds Telegram's 4096 characters: long tool input is cut with a note of how much was
//! left out, and question texts shrink step by step until the whole message fits. Lengths
//! are measured on the HTML source in UTF-16 code units, which is never less than what
//! Telegram counts.

use serde_json::{Map, Value};
use teloxide::types::{InlineKeyboardButton, InlineKeyboardMarkup, User};

use super::callback::{Action, Codec};
use super::state::{PromptState, ReplyKind};
use crate::channels::render::{
    context_line, cut_note, duration_words, format_time, given_answers, outcome_phrase, short,
};
use crate::interaction::{Interaction, Kind, Outcome, Question, parse_questions};

/// Longest message text Telegram accepts.
pub const MAX_TEXT: usize = 4096;
/// Longest text shown on a button, in characters.
const BUTTON_CHARS: usize = 40;
/// Longest toast (`answerCallbackQuery` text) Telegram accepts.
pub const MAX_TOAST: usize = 200;

/// Escapes text for HTML parse mode.
pub fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
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

/// Escaped, shortened to `max` characters first.
fn esc(s: &str, max: usize) -> String {
    escape(&short(s, max))
}

/// Length as Telegram may count it (UTF-16 code units).
pub fn units(s: &str) -> usize {
    s.encode_utf16().count()
}

/// A toast cut to what Telegram accepts.
pub fn toast(s: &str) -> String {
    short(s, MAX_TOAST - 10)
}

/// Escapes as much of `text` as fits in `budget` units; returns the escaped text and how
/// many characters of `text` were left out.
pub fn fit_escaped(text: &str, budget: usize) -> (String, usize) {
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
}

impl Buttons<'_> {
    fn button(&self, text: &str, action: Action) -> InlineKeyboardButton {
        InlineKeyboardButton::callback(
            short(text, BUTTON_CHARS),
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

/// Shows the tool input: a `command` as itself (that is what a person needs to read), any
/// other input as pretty-printed JSON.
fn input_text(input: &Map<String, Value>) -> (String, &'static str) {
    if let Some(Value::String(command)) = input.get("command") {
        let rest: Map<String, Value> = input
            .iter()
            .filter(|(k, _)| k.as_str() != "command" && k.as_str() != "description")
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        let mut text = command.clone();
        if !rest.is_empty() {
            text.push_str("\n\n");
            text.push_str(&serde_json::to_string_pretty(&Value::Object(rest)).unwrap_or_default());
        }
        (text, "bash")
    } else {
        (
            serde_json::to_string_pretty(&Value::Object(input.clone())).unwrap_or_default(),
            "json",
        )
    }
}

fn head(i: &Interaction, lim: &Limits) -> String {
    let mut s = match (i.kind, i.is_pending()) {
        (Kind::Approval, true) => format!("🔐 <b>{}</b> needs approval", esc(&i.tool_name, 100)),
        (Kind::Approval, false) => format!("🔐 Approval for <b>{}</b>", esc(&i.tool_name, 100)),
        (Kind::Question, _) => "❓ <b>Question</b>".to_string(),
    };
    if let Some(t) = i
        .title
        .as_deref()
        .filter(|t| !t.trim().is_empty() && lim.title > 0)
    {
        s.push_str(&format!("\n<b>{}</b>", esc(t, lim.title)));
    }
    // A Bash call's own `description` says what the command is for.
    let description = match i.kind {
        Kind::Approval => i
            .description
            .as_deref()
            .or_else(|| i.input.get("description").and_then(Value::as_str)),
        Kind::Question => i.description.as_deref(),
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

/// The approval text: head, input (cut to what fits), and `tail`.
fn approval_text(i: &Interaction, tail: &str) -> String {
    let (input, lang) = input_text(&i.input);
    for lim in &LEVELS {
        let head = head(i, lim);
        let empty_block = code_block("", lang);
        let reserve = 80; // the cut note
        let fixed = units(&head) + units(&empty_block) + units(tail) + 4 + reserve;
        if fixed >= MAX_TEXT {
            continue;
        }
        let (body, cut) = fit_escaped(&input, MAX_TEXT - fixed);
        let mut s = format!("{head}\n\n{}", code_block(&body, lang));
        if cut > 0 {
            s.push_str(&format!("\n✂️ <i>{}</i>", cut_note(cut)));
        }
        s.push_str("\n\n");
        s.push_str(tail);
        return s;
    }
    // Unreachable with the limits above; keep the message valid anyway.
    format!(
        "🔐 <b>{}</b> needs approval\n\n{tail}",
        esc(&i.tool_name, 100)
    )
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
    let mut last = String::new();
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
        last = s;
    }
    // Cannot happen with 4 questions of 4 options at the smallest limits; stay valid anyway.
    let (cut, _) = fit_escaped(&last, MAX_TEXT / 2);
    cut
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

/// The prompt for a pending interaction, with its keyboard; `state` holds the answers given
/// on this message so far.
pub fn prompt(i: &Interaction, state: &PromptState, b: &Buttons) -> Prompt {
    let tail = deadline_line(i);
    match i.kind {
        Kind::Approval => {
            let mut rows = vec![vec![
                b.button("✅ Allow", Action::Allow),
                b.button("❌ Deny", Action::Deny),
            ]];
            if i.suggestions.is_some() {
                rows.push(vec![b.button("✅ Always allow", Action::AllowAlways)]);
            }
            rows.push(vec![
                b.button("💬 Deny with reason…", Action::DenyWithReason),
            ]);
            Prompt {
                text: approval_text(i, &tail),
                keyboard: InlineKeyboardMarkup::new(rows),
            }
        }
        Kind::Question => {
            let questions = parse_questions(&i.input).unwrap_or_default();
            Prompt {
                text: question_text(i, &questions, Some(state), &tail),
                keyboard: InlineKeyboardMarkup::new(question_keyboard(&questions, state, b)),
            }
        }
    }
}

/// The final text of a resolved interaction's prompt: what was asked, the outcome, who,
/// via which channel and when. It has no keyboard.
pub fn resolved(i: &Interaction) -> String {
    let tail = outcome_block(i, &LEVELS[1]);
    match i.kind {
        Kind::Approval => approval_text(i, &tail),
        Kind::Question => {
            let questions = parse_questions(&i.input).unwrap_or_default();
            question_text(i, &questions, None, &tail)
        }
    }
}

/// A mention of `user` that Telegram links to them (it also targets a selective
/// ForceReply at them).
pub fn mention(user: &User) -> String {
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
        ReplyKind::Other { q } => {
            let questions = parse_questions(&i.input).unwrap_or_default();
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
pub fn reply_closed(i: &Interaction) -> String {
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
pub fn reply_taken(text: &str) -> String {
    format!("✔ Noted: <b>{}</b>", esc(text, 500))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::interaction::{InteractionId, now};
    use serde_json::json;

    fn interaction(tool: &str, input: Value) -> Interaction {
        Interaction {
            id: InteractionId::parse("t1").unwrap(),
            kind: Kind::of_tool(tool),
            tool_name: tool.into(),
            input: input.as_object().unwrap().clone(),
            session: Some("s1".into()),
            agent: Some("claude-code".into()),
            title: None,
            description: None,
            cwd: Some("/home/dev/<shop>".into()),
            suggestions: None,
            created_at: now(),
            deadline: now(),
            timeout_secs: 300,
            resolution: None,
            digest: Default::default(),
        }
    }

    fn buttons(codec: &Codec) -> Buttons<'_> {
        Buttons {
            codec,
            handle: "AAAAAAAAAAA",
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
