//! WeCom's digests (see [`crate::channels::digest`]; the kit does everything else): a digest
//! [`Sheet`] drawn as a `button_interaction` template card, and its buttons.
//!
//! WeCom lets a bot change a card only in answer to a click on it: a digest card keeps the
//! list it was sent with until someone clicks it, and a click is answered with the digest as
//! it now is (a click on a list that changed since is refused as stale and shows the new
//! list, as on every channel). A button's key is `d|<action>|<place>|<session>|<set>|<tag>`,
//! the tag (the channel's card secret) over those and the card's `task_id`, so a key works
//! only on the card it was put on.

use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use crate::channels::digest::{DigestAction, Sheet, Style};
use crate::channels::token::Signer;

/// The first part of a digest button's key.
const FORMAT: &str = "d";
const SEP: char = '|';
const DOMAIN: &[u8] = b"imrelay/wecom/digest/v1";
const TAG_BYTES: usize = 16;
/// Characters of the card's title and body WeCom shows.
const TITLE_CHARS: usize = 26;
const BODY_CHARS: usize = 112;

/// Whether a button key is a digest button's.
pub(crate) fn is_digest_key(key: &str) -> bool {
    key.starts_with("d|")
}

/// The `task_id` of a new digest card: the same on every attempt.
pub(crate) fn task_id(sheet: &Sheet, chat: &str) -> String {
    let mut h = Sha256::new();
    for part in ["digest", &sheet.session, &sheet.first, chat] {
        h.update(part.as_bytes());
        h.update(b"\n");
    }
    format!("imrelay-d-{}", hex::encode(&h.finalize()[..12]))
}

/// Signs and reads digest button keys.
#[derive(Clone, Debug)]
pub(crate) struct DigestKeys(Signer);

impl DigestKeys {
    /// Keys under `secret` (the channel's card secret).
    pub(crate) fn new(secret: Vec<u8>) -> Self {
        Self(Signer::new(secret))
    }

    fn tag(&self, code: &str, place: &str, session: &str, set: &str, task_id: &str) -> String {
        let parts = [
            code.as_bytes(),
            place.as_bytes(),
            session.as_bytes(),
            set.as_bytes(),
            task_id.as_bytes(),
        ];
        self.0.tag(DOMAIN, &parts, TAG_BYTES)
    }

    fn key(&self, sheet: &Sheet, action: DigestAction, task_id: &str) -> String {
        let code = action.code().to_string();
        let tag = self.tag(&code, &sheet.address, &sheet.session, &sheet.set, task_id);
        [
            FORMAT,
            &code,
            &sheet.address,
            &sheet.session,
            &sheet.set,
            &tag,
        ]
        .join("|")
    }

    /// The action, place, session and set `key`, clicked on card `task_id`, carries, if its
    /// tag checks out.
    pub(crate) fn read(
        &self,
        key: &str,
        task_id: &str,
    ) -> Option<(DigestAction, String, String, String)> {
        let parts: Vec<&str> = key.split(SEP).collect();
        let [format, code, place, session, set, tag] = parts.as_slice() else {
            return None;
        };
        if *format != FORMAT {
            return None;
        }
        let signed = [
            code.as_bytes(),
            place.as_bytes(),
            session.as_bytes(),
            set.as_bytes(),
            task_id.as_bytes(),
        ];
        if !self.0.verify(DOMAIN, &signed, TAG_BYTES, tag) {
            return None;
        }
        let action = DigestAction::from_code(code.chars().next()?)?;
        Some((
            action,
            place.to_string(),
            session.to_string(),
            set.to_string(),
        ))
    }

    /// The card of digest `sheet` as card `task_id`, with `note` (what became of a click)
    /// quoted under it.
    pub(crate) fn card(&self, sheet: &Sheet, task_id: &str, note: Option<&str>) -> Value {
        let mut body: Vec<String> = sheet.lines.iter().map(|l| format!("· {l}")).collect();
        body.extend(sheet.more.clone());
        if let Some(q) = &sheet.question {
            body.insert(0, q.clone());
        }
        let buttons: Vec<Value> = if sheet.is_closed() {
            vec![json!({"text": "✓", "style": 2, "key": "done"})]
        } else {
            sheet
                .rows
                .iter()
                .flatten()
                .map(|b| {
                    let style = match b.action.style() {
                        Style::Primary => 1,
                        Style::Danger => 3,
                        Style::Plain => 2,
                    };
                    json!({"text": cut(&b.label, 20), "style": style, "key": self.key(sheet, b.action, task_id)})
                })
                .collect()
        };
        let mut card = json!({
            "card_type": "button_interaction",
            "task_id": task_id,
            "source": {"desc": "imrelay"},
            "main_title": {"title": cut(&sheet.title, TITLE_CHARS)},
            "button_list": buttons,
        });
        if !body.is_empty() {
            card["sub_title_text"] = json!(cut(&body.join("\n"), BODY_CHARS));
        }
        if let Some(n) = note {
            card["quote_area"] = json!({"type": 0, "quote_text": cut(n, 200)});
        }
        card
    }
}

/// `s` made visible and cut to `max` characters.
fn cut(s: &str, max: usize) -> String {
    crate::interaction::clip(&crate::present::visible_text(s), max)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::channels::digest::View;
    use crate::channels::digest_texts::Texts;
    use crate::interaction::{Interaction, InteractionId};
    use crate::present::render::Locale;
    use std::sync::Arc;

    #[test]
    fn keys_work_only_on_their_card_and_as_signed() {
        let keys = DigestKeys::new(vec![7; 32]);
        let i = Arc::new(Interaction::pending(
            InteractionId::parse("t1").unwrap(),
            "Bash",
            serde_json::Map::new(),
            jiff::Timestamp::now(),
            300,
        ));
        let sheet = Sheet::of(
            Texts(Locale::ZhCn),
            "chat1",
            "LMbAeCb6pWs",
            &[i],
            View::List,
        );
        let task = task_id(&sheet, "chat1");
        let card = keys.card(&sheet, &task, None);
        let key = card["button_list"][1]["key"].as_str().unwrap();
        assert!(is_digest_key(key));
        let (a, place, ..) = keys.read(key, &task).unwrap();
        assert_eq!((a, place.as_str()), (DigestAction::AllowAll, "chat1"));
        assert!(keys.read(key, "imrelay-other").is_none());
        assert!(keys.read(&key.replacen("|a|", "|A|", 1), &task).is_none());
        assert!(DigestKeys::new(vec![8; 32]).read(key, &task).is_none());
    }
}
