//! Discord's digests (see [`crate::channels::digest`]; the kit does everything else): how a
//! digest [`Sheet`] is drawn as a message with buttons. A button's `custom_id` is
//! [`PREFIX`] and the kit's signed digest value ([`crate::channels::digest_buttons`]: at
//! most 86 characters, within Discord's 100). The digest message's id is Discord's message
//! id; the place it was posted to says which channel (a person's direct messages are opened
//! again from the cache).

use serde_json::{Value, json};

use super::render::{MAX_CONTENT, MAX_LABEL, escape};
use crate::channels::digest::{Sheet, Style};
pub(crate) use crate::channels::digest_buttons::DigestButtons;

/// The `custom_id` prefix of digest buttons (an interaction's button has none).
pub(crate) const PREFIX: &str = "imrelay-digest:";
/// The domain of the values' tags.
pub(crate) const DOMAIN: &[u8] = b"imrelay/discord/digest/v1";
/// Most buttons in one action row.
const ROW: usize = 5;

/// The message body (create and edit) of digest `sheet`: no buttons once closed.
pub(crate) fn message(buttons: &DigestButtons, sheet: &Sheet) -> Value {
    let mut lines = vec![format!("**{}**", escape(&sheet.title))];
    lines.extend(sheet.lines.iter().map(|l| format!("• {}", escape(l))));
    lines.extend(sheet.more.as_deref().map(escape));
    if let Some(q) = &sheet.question {
        lines.push(String::new());
        lines.push(escape(q));
    }
    let components: Vec<Value> = sheet
        .rows
        .iter()
        .flat_map(|row| row.chunks(ROW))
        .map(|row| {
            let buttons: Vec<Value> = row
                .iter()
                .map(|b| {
                    let style = match b.action.style() {
                        Style::Primary => 3,
                        Style::Danger => 4,
                        Style::Plain => 2,
                    };
                    json!({"type": 2, "style": style,
                        "label": crate::interaction::clip(&crate::present::visible_line(&b.label), MAX_LABEL),
                        "custom_id": format!("{PREFIX}{}", buttons.value(sheet, b.action))})
                })
                .collect();
            json!({"type": 1, "components": buttons})
        })
        .collect();
    json!({
        "content": crate::interaction::clip(&lines.join("\n"), MAX_CONTENT),
        "components": components,
        "allowed_mentions": {"parse": []},
    })
}
