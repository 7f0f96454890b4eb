//! Slack's digests (see [`crate::channels::digest`]; the kit does everything else): how a
//! digest [`Sheet`] is drawn in Block Kit, with the kit's signed values on its buttons.
//!
//! A button's `action_id` is `imrelay-digest.<action>`; its `value` is the kit's signed digest
//! value ([`crate::channels::digest_buttons`]). The digest message's id is
//! `<conversation>:<ts>` (a digest posted to a person lives in their direct conversation,
//! which is what an update names).

use serde_json::{Value, json};

use super::render::escape;
use crate::channels::digest::{Sheet, Style};
pub(crate) use crate::channels::digest_buttons::DigestButtons;

/// The `action_id` prefix of digest buttons (not imrelay's interaction buttons' `imrelay.`).
pub(crate) const ACTION_PREFIX: &str = "imrelay-digest.";
/// The domain of the values' tags.
pub(crate) const DOMAIN: &[u8] = b"imrelay/slack/digest/v1";

/// The text and blocks of digest `sheet` (no buttons once closed).
pub(crate) fn message(buttons: &DigestButtons, sheet: &Sheet) -> (String, Value) {
    let mut body: Vec<String> = sheet
        .lines
        .iter()
        .map(|l| format!("• {}", escape(l)))
        .collect();
    body.extend(sheet.more.as_deref().map(escape));
    if let Some(q) = &sheet.question {
        body.push(String::new());
        body.push(escape(q));
    }
    let mut blocks = vec![json!({"type": "section",
        "text": {"type": "mrkdwn", "text": format!("*{}*", escape(&sheet.title))}})];
    if !body.is_empty() {
        blocks.push(json!({"type": "section",
            "text": {"type": "mrkdwn", "text": body.join("\n")}}));
    }
    let elements: Vec<Value> = sheet
        .rows
        .iter()
        .flatten()
        .map(|b| {
            let mut v = json!({
                "type": "button",
                "action_id": format!("{ACTION_PREFIX}{}", b.action.code()),
                "text": {"type": "plain_text", "text": crate::present::visible_line(&b.label)},
                "value": buttons.value(sheet, b.action),
            });
            match b.action.style() {
                Style::Primary => v["style"] = json!("primary"),
                Style::Danger => v["style"] = json!("danger"),
                Style::Plain => {}
            }
            v
        })
        .collect();
    if !elements.is_empty() {
        blocks.push(json!({"type": "actions", "elements": elements}));
    }
    (escape(&sheet.title), Value::Array(blocks))
}
