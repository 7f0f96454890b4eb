//! Telegram's digests (see [`crate::channels::digest`]; the kit does everything else): how a
//! digest [`Sheet`] is drawn (its title in bold, a line for each of the first few, its
//! buttons as an inline keyboard) and how its buttons are encoded, and a tap on one.
//!
//! Its buttons' `callback_data` (46 ASCII bytes, within Telegram's 64):
//!
//! ```text
//! D  a  sssssssssss  fffffffffff  mmmmmmmmmmmmmmmmmmmmmm
//! │  │  │            │            └ MAC: 16 bytes of HMAC-SHA256 (the channel's button
//! │  │  │            │              secret) over the chat, the session key, the action
//! │  │  │            │              and the fingerprint, base64url
//! │  │  │            └ fingerprint of the listed interactions (`digest::fingerprint`)
//! │  │  └ the session's digest key (`digest::session_key`)
//! │  └ action (`DigestAction::code`)
//! └ format: a digest button (an interaction's button starts with its version, `1`)
//! ```

use teloxide::types::{CallbackQuery, InlineKeyboardButton, InlineKeyboardMarkup};

use super::render::escape;
use super::{Telegram, actor, responder};
use crate::channels::digest::{DigestAction, Sheet, Tapper};
use crate::channels::digest_flow::Press;
use crate::channels::messages::Platform;
use crate::channels::pipeline::Feedback;
use crate::channels::token::Signer;

/// The first byte of a digest button's data.
const FORMAT: char = 'D';
/// The domain of the MAC over a digest button.
const DOMAIN: &[u8] = b"imrelay/telegram/digest/v1";
const MAC_BYTES: usize = 16;
const KEY_LEN: usize = 11;
/// Length of a digest button's data, in bytes.
const DATA_LEN: usize = 2 + KEY_LEN + KEY_LEN + 22;

/// Whether callback `data` is a digest button's.
pub(super) fn is_digest_data(data: &str) -> bool {
    data.starts_with(FORMAT)
}

/// The callback data of digest button `action` in `chat` for `session`'s digest listing the
/// set `set`, signed by `signer`.
fn encode(signer: &Signer, chat: i64, session: &str, action: DigestAction, set: &str) -> String {
    let signed = format!("{FORMAT}{}{session}{set}", action.code());
    let chat = chat.to_string();
    let mac = signer.tag(DOMAIN, &[chat.as_bytes(), signed.as_bytes()], MAC_BYTES);
    format!("{signed}{mac}")
}

/// The session key, action and fingerprint `data` carries, if its MAC checks out for `chat`
/// (in constant time).
fn decode(signer: &Signer, chat: i64, data: &str) -> Option<(String, DigestAction, String)> {
    if data.len() != DATA_LEN || !data.is_ascii() {
        return None;
    }
    let (signed, mac) = data.split_at(DATA_LEN - 22);
    let chat_text = chat.to_string();
    if !signer.verify(
        DOMAIN,
        &[chat_text.as_bytes(), signed.as_bytes()],
        MAC_BYTES,
        mac,
    ) {
        return None;
    }
    let action = DigestAction::from_code(signed[1..2].chars().next()?)?;
    let session = signed[2..2 + KEY_LEN].to_string();
    let set = signed[2 + KEY_LEN..].to_string();
    Some((session, action, set))
}

impl Telegram {
    /// The text and keyboard of digest `sheet` in `chat` (no keyboard once it is closed).
    pub(super) fn digest_message(
        &self,
        chat: i64,
        sheet: &Sheet,
    ) -> (String, Option<InlineKeyboardMarkup>) {
        let mut text = format!("<b>{}</b>", escape(&sheet.title));
        for l in &sheet.lines {
            text.push_str(&format!("\n• {}", escape(l)));
        }
        if let Some(more) = &sheet.more {
            text.push_str(&format!("\n{}", escape(more)));
        }
        if let Some(q) = &sheet.question {
            text.push_str(&format!("\n\n{}", escape(q)));
        }
        if sheet.is_closed() {
            return (text, None);
        }
        let signer = self.codec.signer();
        let rows = sheet.rows.iter().map(|row| {
            row.iter().map(|b| {
                let data = encode(signer, chat, &sheet.session, b.action, &sheet.set);
                InlineKeyboardButton::callback(b.label.clone(), data)
            })
        });
        (
            text,
            Some(InlineKeyboardMarkup::new(rows.map(Vec::from_iter))),
        )
    }

    /// A tap on a digest button.
    pub(super) async fn on_digest_tap(&self, q: &CallbackQuery) {
        let say = |f: Feedback| self.say(f);
        let data = q.data.as_deref().unwrap_or("");
        let Some((chat, message)) = q.message.as_ref().map(|m| (m.chat().id.0, m.id().0)) else {
            self.client.answer(&q.id, &say(Feedback::BadButton)).await;
            return;
        };
        let Some((session, action, set)) = decode(self.codec.signer(), chat, data) else {
            let told = self
                .refuse(
                    None,
                    &q.from,
                    "digest button data failed its check",
                    "bad_data",
                    Feedback::BadButton,
                )
                .await;
            self.client.answer(&q.id, &say(told)).await;
            return;
        };
        let (who, identity) = (actor(&q.from), q.from.id.0.to_string());
        let tapper = Tapper {
            actor: &who,
            identity: &identity,
            approver: self.is_approver(&q.from),
            responder: responder(&q.from),
        };
        let (address, message) = (chat.to_string(), message.to_string());
        let press = Press {
            address: &address,
            session: &session,
            action,
            set: &set,
            message: &message,
        };
        let messages = self.messages();
        let texts = messages.platform.texts();
        let tapped = self
            .digests
            .tap::<super::Job>(&self.pipeline, texts, &press, &tapper)
            .await;
        let toast = match tapped {
            Ok(t) => {
                messages.redraw(&t).await;
                t.toast
            }
            Err(f) => {
                if matches!(f, Feedback::NotApprover) {
                    self.count_refused("not_approver");
                }
                say(f)
            }
        };
        self.client.answer(&q.id, &toast).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn digest_data_fits_telegram_and_is_bound_to_its_chat_and_contents() {
        let s = Signer::new(vec![7; 32]);
        let (session, set) = ("LMbAeCb6pWs", "JUwBfpYx09o");
        let data = encode(&s, -2001, session, DigestAction::ConfirmAllow, set);
        assert_eq!(data.len(), DATA_LEN);
        assert!(data.len() <= 64 && is_digest_data(&data));
        assert_eq!(
            decode(&s, -2001, &data),
            Some((session.into(), DigestAction::ConfirmAllow, set.into()))
        );
        assert_eq!(decode(&s, 1001, &data), None, "another chat");
        assert_eq!(
            decode(&Signer::new(vec![8; 32]), -2001, &data),
            None,
            "another key"
        );
        let deny = format!("DD{}", &data[2..]);
        assert_eq!(decode(&s, -2001, &deny), None, "another action");
        let mut swapped = data.clone();
        swapped.replace_range(13..24, "AAAAAAAAAAA");
        assert_eq!(decode(&s, -2001, &swapped), None, "another set");
        assert_eq!(decode(&s, -2001, &data[..DATA_LEN - 1]), None);
    }
}
