//! Text made safe and fitted for Telegram: HTML escaping with hidden characters shown, lengths
//! as Telegram counts them, the budgets of each field (smaller at each level), and the last
//! resort when nothing else fits.

use super::headline;
use crate::channels::words::Words;
use crate::interaction::Interaction;
use crate::present;

/// Longest message text Telegram accepts.
pub(crate) const MAX_TEXT: usize = 4096;

/// Longest toast (`answerCallbackQuery` text) Telegram accepts.
pub(crate) const MAX_TOAST: usize = 200;

/// Escapes text for HTML parse mode, hidden characters (controls, direction overrides) shown
/// as escapes: text from outside never reorders or hides what a person reads.
pub(crate) fn escape(s: &str) -> String {
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
pub(super) fn esc(s: &str, max: usize) -> String {
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
pub(super) fn units(s: &str) -> usize {
    s.encode_utf16().count()
}

/// A toast cut to what Telegram accepts (plain text, counted in UTF-16 units).
pub(crate) fn toast(s: &str) -> String {
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

/// How much of each text field to show; shrinks when a message would not fit.
#[derive(Clone, Copy)]
pub(super) struct Limits {
    pub(super) title: usize,
    pub(super) description: usize,
    pub(super) question: usize,
    pub(super) label: usize,
    pub(super) option_description: usize,
    pub(super) answer: usize,
}

/// The field budgets, from the most generous down.
pub(super) const LEVELS: [Limits; 4] = [
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

/// The last resort when nothing else fits: the first line, as much of `plain` (cut before
/// it is escaped) as fits, and `tail` — the deadline or the outcome — always.
pub(super) fn last_resort(i: &Interaction, plain: &str, tail: &str, w: Words) -> String {
    let top = headline(i, w);
    let budget = MAX_TEXT.saturating_sub(units(&top) + units(tail) + 4);
    let (body, _) = fit_escaped(plain, budget);
    if body.is_empty() {
        format!("{top}\n\n{tail}")
    } else {
        format!("{top}\n\n{body}\n\n{tail}")
    }
}
