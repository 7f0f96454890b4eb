//! The ForceReply requests that ask one person for a deny reason or a typed answer, and
//! what they show once answered or no longer needed.

use teloxide::types::User;

use super::ReplyKind;
use super::budget::esc;
use super::outcome::outcome_icon;
use crate::interaction::{Form, Interaction, parse_questions};
use crate::present::render::{outcome_phrase, single_text_form};

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
