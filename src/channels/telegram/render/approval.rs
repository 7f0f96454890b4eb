//! An approval's text and keyboard: the tool call as a person reads it in a code block, cut to
//! what fits with a note of how much was left out, and the buttons that decide it.

use teloxide::types::InlineKeyboardMarkup;

use super::budget::{MAX_TEXT, escape, fit_escaped, last_resort, units};
use super::{Action, Buttons, LEVELS, Prompt, head, headline};
use crate::channels::words::Words;
use crate::interaction::Interaction;
use crate::interaction::clip;
use crate::present;

/// Shows the tool call as a person reads it (see [`present`](crate::present)): a
/// command as itself, an edit as a diff, a file as its path and first lines. Returns the
/// text and the code block's language.
fn input_text(i: &Interaction) -> (String, &'static str) {
    present::chat_block(&i.tool_name, &i.input.map(), i.cwd.as_deref())
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
    (input, lang): (&str, &str),
    tail: &str,
    more: Option<&str>,
    w: Words,
) -> Option<String> {
    let link = more
        .map(|url| format!(" · <a href=\"{}\">{}</a>", escape(url), w.all_in_inbox()))
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
        s.push_str(&format!("\n✂️ <i>{}</i>{link}", w.not_shown(cut)));
    }
    s.push_str("\n\n");
    s.push_str(tail);
    Some(s)
}

/// The approval text: head, input (cut to what fits, linking to the inbox item under
/// `inbox` when given), and `tail`.
pub(super) fn approval_text(i: &Interaction, tail: &str, inbox: Option<&str>, w: Words) -> String {
    let (input, lang) = input_text(i);
    let more = inbox.map(|base| format!("{base}/#{}", i.id));
    LEVELS
        .iter()
        .map(|lim| head(i, lim, w))
        .chain(std::iter::once(headline(i, w)))
        .find_map(|head| with_input(&head, (&input, lang), tail, more.as_deref(), w))
        // Only if `tail` alone were too long, which the field budgets rule out.
        .unwrap_or_else(|| last_resort(i, "", tail, w))
}

/// The prompt of a pending approval: its buttons, and above `tail` the votes so far and the
/// rule "Allow similar" adds.
pub(super) fn approval_prompt(i: &Interaction, mut tail: String, b: &Buttons) -> Prompt {
    let w = b.words;
    let mut rows = vec![vec![
        b.button(&format!("✅ {}", w.allow()), Action::Allow),
        b.button(&format!("❌ {}", w.deny()), Action::Deny),
    ]];
    // Several people decide it: each allows it as it is, once.
    let voted = crate::interaction::quorum::is_voted(i);
    if let Some(votes) = crate::present::render::votes_line(i, w.0) {
        tail = format!("👥 {}\n{tail}", escape(&votes));
    }
    if i.suggestions.is_some() && !voted {
        rows.push(vec![
            b.button(&format!("✅ {}", w.always_allow()), Action::AllowAlways),
        ]);
    }
    // "Allow similar": the rule it adds is in the message, in full.
    if let Some(rule) = crate::present::render::similar_rule(i).filter(|_| !voted) {
        rows.push(vec![b.button(
            &format!("🔁 {}", w.allow_similar()),
            Action::AllowSimilar,
        )]);
        let native = w.also_remembers_for(i);
        let note = w.similar_note_of(&format!("<i>{}</i>", w.similar_name()));
        tail = format!(
            "🔁 {note}<code>{}</code>{native}\n{tail}",
            escape(&clip(&rule, 200))
        );
    }
    // "Edit & approve": a reply with the command changed (the keyboard stays as it is).
    if crate::present::render::editable_command(i).is_some() && !voted {
        tail = format!("✏️ {}\n{tail}", w.edit_by_reply("<code>edit</code>"));
    }
    rows.push(vec![b.button(
        &format!("💬 {}", w.deny_with_reason()),
        Action::DenyWithReason,
    )]);
    Prompt {
        text: approval_text(i, &tail, b.inbox, w),
        keyboard: InlineKeyboardMarkup::new(rows),
    }
}
