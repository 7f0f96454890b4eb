//! How an interaction ended: its icon, the outcome block of a resolved message, and the
//! short plain-text version for when Telegram refuses the HTML one.

use super::budget::{Limits, esc};
use crate::channels::words::Words;
use crate::interaction::clip;
use crate::interaction::{Interaction, Kind, Outcome};
use crate::present::render::{format_time, outcome_phrase_in, single_text_form};

/// The icon of an outcome.
pub(super) fn outcome_icon(o: Outcome) -> &'static str {
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
pub(super) fn outcome_block(i: &Interaction, lim: &Limits, w: Words) -> String {
    let Some(r) = &i.resolution else {
        return String::new();
    };
    let phrase = outcome_phrase_in(r, w.0);
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

/// The outcome as plain text (no parse mode, nothing to escape), short: what was asked
/// and how it ended, for when Telegram refuses the HTML version of the final text.
pub(crate) fn outcome_plain(i: &Interaction, w: Words) -> String {
    let what = match i.kind {
        Kind::Approval => format!("🔐 {}", w.approval_for(&clip(&i.tool_name, 100))),
        Kind::Form if single_text_form(i).is_some() => {
            format!("❓ {}", w.kind_label(Kind::Question))
        }
        Kind::Question => format!("❓ {}", w.kind_label(Kind::Question)),
        Kind::Form => format!("📝 {}", w.kind_label(Kind::Form)),
    };
    match &i.resolution {
        Some(r) => {
            let phrase = outcome_phrase_in(r, w.0);
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
