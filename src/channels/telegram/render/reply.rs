//! The ForceReply requests that ask one person for a deny reason or a typed answer, and
//! what they show once answered or no longer needed.

use teloxide::types::User;

use super::ReplyKind;
use super::budget::esc;
use super::outcome::outcome_icon;
use crate::channels::words::Words;
use crate::interaction::{Form, Interaction, parse_questions};
use crate::present::render::{outcome_phrase_in, single_text_form};

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
pub(crate) fn reply_request(i: &Interaction, kind: ReplyKind, user: &User, w: Words) -> String {
    let who = mention(user);
    let [the_answer, the_question] = w.unknown_field();
    match kind {
        ReplyKind::DenyReason => format!(
            "💬 {}",
            w.ask_reason(&who, &format!("<b>{}</b>", esc(&i.tool_name, 100)))
        ),
        ReplyKind::Field { .. } if single_text_form(i).is_some() => {
            let message = single_text_form(i).map(|f| f.message).unwrap_or_default();
            format!(
                "✏️ {}",
                w.ask_answer(&who, &format!("<b>{}</b>", esc(&message, 500)))
            )
        }
        ReplyKind::Field { q } => {
            let form = Form::from_input(&i.input.map()).ok();
            let field = form.as_ref().and_then(|f| f.fields.get(usize::from(q)));
            let label = format!(
                "<b>{}</b>",
                esc(field.map_or(the_answer, |f| f.label()), 200)
            );
            let hint = esc(&field.map_or_else(|| "text".to_string(), |f| f.hint()), 200);
            format!("✏️ {}", w.ask_field(&who, &label, &hint))
        }
        ReplyKind::Other { q } => {
            let questions = parse_questions(&i.input.map()).unwrap_or_default();
            let question = questions
                .get(q as usize)
                .map(|q| q.question.as_str())
                .unwrap_or(the_question);
            format!(
                "✏️ {}",
                w.ask_answer(&who, &format!("<b>{}</b>", esc(question, 500)))
            )
        }
    }
}

/// The final text of a reply request once its interaction is resolved.
pub(crate) fn reply_closed(i: &Interaction, w: Words) -> String {
    match &i.resolution {
        Some(r) => format!(
            "{} {}",
            outcome_icon(r.outcome),
            w.no_reply_needed(Some(&esc(&outcome_phrase_in(r, w.0), 300)))
        ),
        None => w.no_reply_needed(None),
    }
}

/// The text a reply request shows once its "Other" answer was taken.
pub(crate) fn reply_taken(text: &str, w: Words) -> String {
    format!("✔ {}", w.noted(&format!("<b>{}</b>", esc(text, 500))))
}
