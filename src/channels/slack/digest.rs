//! Slack's digests (see [`crate::channels::digest`]; the kit does everything else): how a
//! digest [`Sheet`] is drawn in Block Kit, how its buttons are encoded, and a click on one.
//!
//! A button's `action_id` is `imrelay-digest.<action>`; its `value` is
//! `<action> <place> <session> <set> <tag>`, the tag (the channel's button secret) over the
//! place the digest was posted to, the session key, the action and the fingerprint of the
//! listed interactions. The digest message's id is `<conversation>:<ts>` (a digest posted to
//! a person lives in their direct conversation, which is what an update names).

use serde_json::{Value, json};

use super::plan::Job;
use super::render::escape;
use crate::channels::digest::{DigestAction, Digests, Sheet, Style, Tapper};
use crate::channels::digest_flow::{Press, Tapped};
use crate::channels::digest_texts::Texts;
use crate::channels::pipeline::{Feedback, Pipeline};
use crate::channels::token::Signer;

/// The `action_id` prefix of digest buttons (not imrelay's interaction buttons' `imrelay.`).
pub(crate) const ACTION_PREFIX: &str = "imrelay-digest.";
/// The domain of the tag.
const DOMAIN: &[u8] = b"imrelay/slack/digest/v1";
const TAG_BYTES: usize = 16;

/// Signs and reads digest button values.
#[derive(Clone, Debug)]
pub(crate) struct DigestButtons(Signer);

impl DigestButtons {
    /// Values signed with `key` (the channel's button secret).
    pub fn new(key: Vec<u8>) -> Self {
        Self(Signer::new(key))
    }

    fn tag(&self, code: &str, place: &str, session: &str, set: &str) -> String {
        let parts = [
            code.as_bytes(),
            place.as_bytes(),
            session.as_bytes(),
            set.as_bytes(),
        ];
        self.0.tag(DOMAIN, &parts, TAG_BYTES)
    }

    /// The value of digest button `action` on `sheet`.
    pub fn value(&self, sheet: &Sheet, action: DigestAction) -> String {
        let code = action.code().to_string();
        let tag = self.tag(&code, &sheet.address, &sheet.session, &sheet.set);
        format!(
            "{code} {} {} {} {tag}",
            sheet.address, sheet.session, sheet.set
        )
    }

    /// The action, place, session and set a value carries, if its tag checks out.
    pub fn read(&self, value: &str) -> Option<(DigestAction, String, String, String)> {
        let mut parts = value.split(' ');
        let (code, place, session, set, tag) = (
            parts.next()?,
            parts.next()?,
            parts.next()?,
            parts.next()?,
            parts.next()?,
        );
        if parts.next().is_some() {
            return None;
        }
        let parts = [
            code.as_bytes(),
            place.as_bytes(),
            session.as_bytes(),
            set.as_bytes(),
        ];
        if !self.0.verify(DOMAIN, &parts, TAG_BYTES, tag) {
            return None;
        }
        let action = DigestAction::from_code(code.chars().next()?)?;
        Some((action, place.into(), session.into(), set.into()))
    }
}

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

/// A click on a digest button `value` on message `ts` in `conversation` by the person
/// `who`: what it did (the caller shows the redraw), or what to tell them.
pub(crate) async fn click(
    digests: &Digests,
    pipeline: &Pipeline,
    buttons: &DigestButtons,
    texts: Texts,
    value: &str,
    message: &str,
    who: &Tapper<'_>,
) -> Result<Tapped, Feedback> {
    let Some((action, place, session, set)) = buttons.read(value) else {
        let recorded = pipeline
            .registry()
            .refused(
                None,
                who.actor,
                pipeline.via(),
                "digest button data failed its integrity check",
            )
            .await;
        return Err(match recorded {
            Ok(()) => Feedback::BadButton,
            Err(_) => Feedback::StoreDown,
        });
    };
    let press = Press {
        address: &place,
        session: &session,
        action,
        set: &set,
        message,
    };
    digests.tap::<Job>(pipeline, texts, &press, who).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_are_bound_to_their_place_session_action_and_set() {
        let b = DigestButtons::new(vec![7; 32]);
        let sheet = Sheet::closed(
            Texts(crate::present::render::Locale::EnUs),
            "C1",
            "LMbAeCb6pWs",
            "x",
        );
        let v = b.value(&sheet, DigestAction::ConfirmAllow);
        let (a, place, session, _) = b.read(&v).unwrap();
        assert_eq!(
            (a, place.as_str(), session.as_str()),
            (DigestAction::ConfirmAllow, "C1", "LMbAeCb6pWs")
        );
        assert!(b.read(&v.replacen("C1", "C2", 1)).is_none());
        assert!(b.read(&v.replacen('A', "D", 1)).is_none());
        assert!(DigestButtons::new(vec![8; 32]).read(&v).is_none());
        assert!(b.read("").is_none());
    }
}
