//! Feishu's digests (see [`crate::channels::digest`]; the kit does everything else): how a
//! digest [`Sheet`] is drawn as a card, how its buttons are encoded, and a click on one,
//! answered with the card as it now is.
//!
//! A button's value: `{"imrelay": "digest", "to", "session", "action", "set", "mac"}`, the
//! MAC (the channel's button secret) over the receiver, the session key, the action and the
//! fingerprint of the listed interactions.

use serde_json::{Value, json};

use super::CHANNEL;
use super::plan::Job;
use super::render::{self, Cards};
use crate::channels::digest::{DigestAction, Sheet, Style, Tapper};
use crate::channels::digest_flow::Press;
use crate::channels::digest_texts::Texts;
use crate::channels::pipeline::Feedback;
use crate::channels::token::Signer;
use crate::interaction::Responder;

/// The domain of the MAC over a digest button's value.
const DOMAIN: &[u8] = b"imrelay/feishu/digest/v1";
const MAC_BYTES: usize = 16;

/// Whether a button value is a digest button's.
pub(crate) fn is_digest_value(value: &Value) -> bool {
    value["imrelay"] == "digest"
}

fn mac(cards: &Cards, to: &str, session: &str, action: DigestAction, set: &str) -> String {
    let code = action.code().to_string();
    Signer::new(cards.secret().to_vec()).tag(
        DOMAIN,
        &[
            to.as_bytes(),
            session.as_bytes(),
            code.as_bytes(),
            set.as_bytes(),
        ],
        MAC_BYTES,
    )
}

/// The receiver, session key, action and fingerprint a digest button value carries, if its
/// MAC checks out.
fn read_value(cards: &Cards, value: &Value) -> Option<(String, String, DigestAction, String)> {
    let to = value["to"].as_str()?;
    let session = value["session"].as_str()?;
    let action = DigestAction::from_code(value["action"].as_str()?.chars().next()?)?;
    let set = value["set"].as_str()?;
    let given = value["mac"].as_str()?;
    let code = action.code().to_string();
    let ok = Signer::new(cards.secret().to_vec()).verify(
        DOMAIN,
        &[
            to.as_bytes(),
            session.as_bytes(),
            code.as_bytes(),
            set.as_bytes(),
        ],
        MAC_BYTES,
        given,
    );
    ok.then(|| (to.into(), session.into(), action, set.into()))
}

/// A digest button's name in the card.
fn name(a: DigestAction) -> &'static str {
    match a {
        DigestAction::Review => "digest_review",
        DigestAction::AllowAll => "digest_approve_all",
        DigestAction::DenyAll => "digest_deny_all",
        DigestAction::ConfirmAllow | DigestAction::ConfirmDeny => "digest_confirm",
        DigestAction::Cancel => "digest_cancel",
    }
}

/// The card of digest `sheet` (grey and without buttons once closed).
pub(crate) fn card(cards: &Cards, sheet: &Sheet) -> Value {
    let title = &sheet.title;
    if sheet.is_closed() {
        return json!({
            "schema": "2.0",
            "config": {"update_multi": true, "summary": {"content": title}},
            "header": {"title": plain(title.clone()), "template": "grey"},
            "body": {"elements": []},
        });
    }
    let mut list: Vec<String> = sheet.lines.iter().map(|l| format!("• {l}")).collect();
    list.extend(sheet.more.clone());
    let mut elements = vec![json!({"tag": "div", "text": plain(list.join("\n"))})];
    if let Some(q) = &sheet.question {
        elements.push(json!({"tag": "div", "text": plain(q.clone())}));
    }
    let button = |label: &str, a: DigestAction| {
        let kind = match a.style() {
            Style::Primary => "primary_filled",
            Style::Danger => "danger",
            Style::Plain => "default",
        };
        json!({
            "tag": "button",
            "name": name(a),
            "text": plain(label),
            "type": kind,
            "behaviors": [{"type": "callback", "value": {
                "imrelay": "digest",
                "to": sheet.address,
                "session": sheet.session,
                "action": a.code().to_string(),
                "set": sheet.set,
                "mac": mac(cards, &sheet.address, &sheet.session, a, &sheet.set),
            }}],
        })
    };
    let columns: Vec<Value> = sheet
        .rows
        .iter()
        .flatten()
        .map(
            |b| json!({"tag": "column", "width": "auto", "elements": [button(&b.label, b.action)]}),
        )
        .collect();
    elements.push(json!({
        "tag": "column_set",
        "flex_mode": "none",
        "horizontal_spacing": "8px",
        "columns": columns,
    }));
    json!({
        "schema": "2.0",
        "config": {"update_multi": true, "summary": {"content": title}},
        "header": {"title": plain(title.clone()), "template": "orange"},
        "body": {"elements": elements},
    })
}

fn plain(content: impl Into<String>) -> Value {
    json!({"tag": "plain_text", "content": crate::present::visible_text(&content.into())})
}

/// Who clicked, as a digest click is answered.
pub(crate) struct Clicker<'a> {
    /// The clicker's id on the list or among the people, else the id they came with.
    pub by: &'a str,
    /// Whether they are on `feishu.approvers`.
    pub approver: bool,
    /// The event id was seen before (a repeat is not audited again).
    pub again: bool,
}

/// What a click on a digest card needs of the callback handler (which hands it over, so
/// this file does not import the handler that imports it).
pub(crate) struct DigestClicks<'a> {
    /// The shared answer pipeline.
    pub pipeline: &'a crate::channels::pipeline::Pipeline,
    /// The card renderer.
    pub cards: &'a Cards,
    /// The digests of this channel.
    pub digests: &'a crate::channels::digest::Digests,
}

impl DigestClicks<'_> {
    fn reply(&self, feedback: Feedback) -> (Value, &'static str) {
        render::feedback_reply(self.cards, feedback)
    }

    /// A click on a digest card's button: the reply (a toast, and the card as it now is) and
    /// the result it is counted under.
    pub(crate) async fn digest_click(
        &self,
        event: &Value,
        who: Clicker<'_>,
    ) -> (Value, &'static str) {
        let Some((to, session, action, set)) = read_value(self.cards, &event["action"]["value"])
        else {
            if !who.again
                && self
                    .pipeline
                    .registry()
                    .refused(
                        None,
                        who.by,
                        self.pipeline.via(),
                        "digest card data failed its integrity check",
                    )
                    .await
                    .is_err()
            {
                return self.reply(Feedback::StoreDown);
            }
            return self.reply(Feedback::BadButton);
        };
        let tapper = Tapper {
            actor: who.by,
            identity: who.by,
            approver: who.approver,
            responder: Responder::new(who.by, self.pipeline.via().clone())
                .with_identity(CHANNEL, who.by),
        };
        let clicked = event["context"]["open_message_id"]
            .as_str()
            .unwrap_or_default();
        let press = Press {
            address: &to,
            session: &session,
            action,
            set: &set,
            message: clicked,
        };
        let texts = Texts(self.cards.locale());
        match self
            .digests
            .tap::<Job>(self.pipeline, texts, &press, &tapper)
            .await
        {
            Ok(t) => {
                let card = t.redraw.as_ref().map(|s| card(self.cards, s));
                (render::reply("info", &t.toast, card), "digest")
            }
            Err(f) => self.reply(f),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::interaction::{Interaction, InteractionId};
    use crate::present::render::Locale;
    use std::sync::Arc;

    #[test]
    fn digest_buttons_verify_only_as_signed() {
        let cards = Cards::new(Locale::EnUs, vec![7; 32]);
        let i = Arc::new(Interaction::pending(
            InteractionId::parse("toolu_1").unwrap(),
            "Bash",
            serde_json::Map::new(),
            jiff::Timestamp::now(),
            300,
        ));
        let texts = Texts(Locale::EnUs);
        let sheet = Sheet::of(
            texts,
            "chat_id:oc_1",
            "LMbAeCb6pWs",
            &[i],
            crate::channels::digest::View::List,
        );
        let card = card(&cards, &sheet);
        let mut values = Vec::new();
        for col in card["body"]["elements"][1]["columns"].as_array().unwrap() {
            values.push(col["elements"][0]["behaviors"][0]["value"].clone());
        }
        assert_eq!(values.len(), 3);
        let approve = &values[1];
        assert!(is_digest_value(approve));
        let (to, _, action, _) = read_value(&cards, approve).unwrap();
        assert_eq!(
            (to.as_str(), action),
            ("chat_id:oc_1", DigestAction::AllowAll)
        );
        for (field, forged) in [
            ("action", "A"),
            ("to", "chat_id:oc_2"),
            ("set", "AAAAAAAAAAA"),
        ] {
            let mut v = approve.clone();
            v[field] = json!(forged);
            assert!(read_value(&cards, &v).is_none(), "{field}");
        }
        assert!(read_value(&Cards::new(Locale::EnUs, vec![8; 32]), approve).is_none());
    }
}
