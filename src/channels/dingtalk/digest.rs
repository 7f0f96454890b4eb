//! DingTalk's digests (see [`crate::channels::digest`]; the kit does everything else): a
//! digest [`Sheet`] drawn with the same card template as every card (docs/dingtalk.md), and
//! its buttons.
//!
//! The template's buttons serve a digest as they are: `${allow_label}` (actionId `allow`) is
//! "Approve all" (on a confirmation: "Yes"), `${deny_label}` (`deny`) is "Deny all" (on a
//! confirmation: "Cancel"), and the one option of `${options}` (`pick`, index 0) is
//! "Review". Which is which follows from the view the card shows, which its `token` carries:
//! `digest1 <view> <place> <session> <set> <tag>`, the tag (the channel's card secret) over
//! the view, the place, the session key and the fingerprint of the listed interactions.

use serde_json::{Map, Value, json};

use super::render::escape;
use crate::channels::digest::{DigestAction, Sheet};
use crate::channels::token::Signer;

/// The first word of a digest token (an interaction's token starts with a number).
const FORMAT: &str = "digest1";
/// The domain of the tag.
const DOMAIN: &[u8] = b"imrelay/dingtalk/digest/v1";
const TAG_BYTES: usize = 16;
/// The most characters of a token read.
const MAX_TOKEN_CHARS: usize = 600;

/// Whether a card's token is a digest's.
pub(crate) fn is_digest_token(token: &str) -> bool {
    token.starts_with(FORMAT)
}

/// The view a sheet shows, as its token writes it: the list, or confirming allow or deny.
fn view_of(sheet: &Sheet) -> char {
    let has = |a| sheet.rows.iter().flatten().any(|b| b.action == a);
    if has(DigestAction::ConfirmAllow) {
        'A'
    } else if has(DigestAction::ConfirmDeny) {
        'D'
    } else {
        'L'
    }
}

/// Signs and reads digest tokens.
#[derive(Clone, Debug)]
pub(crate) struct DigestTokens(Signer);

impl DigestTokens {
    /// Tokens under `secret` (the store's `dingtalk-cards`).
    pub(crate) fn new(secret: Vec<u8>) -> Self {
        Self(Signer::new(secret))
    }

    fn tag(&self, view: &str, place: &str, session: &str, set: &str) -> String {
        let parts = [
            view.as_bytes(),
            place.as_bytes(),
            session.as_bytes(),
            set.as_bytes(),
        ];
        self.0.tag(DOMAIN, &parts, TAG_BYTES)
    }

    /// The token of digest `sheet`.
    pub(crate) fn token(&self, sheet: &Sheet) -> String {
        let view = view_of(sheet).to_string();
        let tag = self.tag(&view, &sheet.address, &sheet.session, &sheet.set);
        format!(
            "{FORMAT} {view} {} {} {} {tag}",
            sheet.address, sheet.session, sheet.set
        )
    }

    /// The place and session of the digest card carrying `token`, if its tag checks out.
    pub(crate) fn digest_of(&self, token: &str) -> Option<(String, String)> {
        let (_, place, session, _) = self.verified(token)?;
        Some((place.into(), session.into()))
    }

    /// What a click with action id `action` (and option `index`) on a card carrying `token`
    /// asks: the action, place, session and set, if the token's tag checks out.
    pub(crate) fn read(
        &self,
        token: &str,
        action: &str,
        index: Option<u64>,
    ) -> Option<(DigestAction, String, String, String)> {
        let (view, place, session, set) = self.verified(token)?;
        let what = match (view, action, index) {
            ("L", "allow", _) => DigestAction::AllowAll,
            ("L", "deny", _) => DigestAction::DenyAll,
            ("L", "pick", Some(0)) => DigestAction::Review,
            ("A", "allow", _) => DigestAction::ConfirmAllow,
            ("D", "allow", _) => DigestAction::ConfirmDeny,
            ("A" | "D", "deny", _) => DigestAction::Cancel,
            _ => return None,
        };
        Some((what, place.into(), session.into(), set.into()))
    }

    /// A token's view, place, session and set, if its tag checks out.
    fn verified<'t>(&self, token: &'t str) -> Option<(&'t str, &'t str, &'t str, &'t str)> {
        if token.len() > MAX_TOKEN_CHARS {
            return None;
        }
        let mut parts = token.split(' ');
        let (format, view, place, session, set, tag) = (
            parts.next()?,
            parts.next()?,
            parts.next()?,
            parts.next()?,
            parts.next()?,
            parts.next()?,
        );
        if format != FORMAT || parts.next().is_some() {
            return None;
        }
        if !self.0.verify(
            DOMAIN,
            &[
                view.as_bytes(),
                place.as_bytes(),
                session.as_bytes(),
                set.as_bytes(),
            ],
            TAG_BYTES,
            tag,
        ) {
            return None;
        }
        Some((view, place, session, set))
    }
}

/// The card variables of digest `sheet`, signed by `tokens`.
pub(crate) fn params(tokens: &DigestTokens, sheet: &Sheet) -> Map<String, Value> {
    let mut lines: Vec<String> = sheet
        .lines
        .iter()
        .map(|l| format!("- {}", escape(l)))
        .collect();
    lines.extend(sheet.more.as_deref().map(escape));
    if let Some(q) = &sheet.question {
        lines.push(String::new());
        lines.push(escape(q));
    }
    let label = |a: DigestAction| {
        sheet
            .rows
            .iter()
            .flatten()
            .find(|b| b.action == a)
            .map(|b| b.label.clone())
            .unwrap_or_default()
    };
    let (allow, deny, options) = match view_of(sheet) {
        'A' => (
            label(DigestAction::ConfirmAllow),
            label(DigestAction::Cancel),
            json!([]),
        ),
        'D' => (
            label(DigestAction::ConfirmDeny),
            label(DigestAction::Cancel),
            json!([]),
        ),
        _ => (
            label(DigestAction::AllowAll),
            label(DigestAction::DenyAll),
            json!([{"label": label(DigestAction::Review), "index": 0}]),
        ),
    };
    let s = |v: &str| Value::String(v.to_string());
    let mut p = Map::new();
    p.insert("title".into(), s(&sheet.title));
    // Closed: no buttons (the template shows them only while pending).
    let status = if sheet.is_closed() {
        "answered"
    } else {
        "pending"
    };
    p.insert("status".into(), s(status));
    p.insert("kind".into(), s("approval"));
    p.insert("markdown".into(), Value::String(lines.join("\n\n")));
    p.insert(
        "outcome".into(),
        s(if sheet.is_closed() { &sheet.title } else { "" }),
    );
    p.insert("token".into(), Value::String(tokens.token(sheet)));
    p.insert("options".into(), Value::String(options.to_string()));
    p.insert("input_hint".into(), s(""));
    p.insert("allow_label".into(), Value::String(allow));
    p.insert("deny_label".into(), Value::String(deny));
    p.insert("submit_label".into(), s(""));
    p.insert("notice".into(), s(""));
    p
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
    fn the_templates_buttons_mean_what_the_view_shows_and_the_token_is_bound() {
        let t = DigestTokens::new(vec![7; 32]);
        let i = Arc::new(Interaction::pending(
            InteractionId::parse("t1").unwrap(),
            "Bash",
            serde_json::Map::new(),
            jiff::Timestamp::now(),
            300,
        ));
        let texts = Texts(Locale::EnUs);
        let list = Sheet::of(
            texts,
            "cid1==",
            "LMbAeCb6pWs",
            std::slice::from_ref(&i),
            View::List,
        );
        let p = params(&t, &list);
        let token = p["token"].as_str().unwrap();
        assert!(is_digest_token(token));
        assert_eq!(
            t.read(token, "allow", None).unwrap().0,
            DigestAction::AllowAll
        );
        assert_eq!(
            t.read(token, "pick", Some(0)).unwrap().0,
            DigestAction::Review
        );
        assert_eq!(t.read(token, "submit", None), None);
        let confirm = Sheet::of(
            texts,
            "cid1==",
            "LMbAeCb6pWs",
            &[i],
            View::Confirm { allow: false },
        );
        let token = params(&t, &confirm)["token"].as_str().unwrap().to_string();
        assert_eq!(
            t.read(&token, "allow", None).unwrap().0,
            DigestAction::ConfirmDeny
        );
        assert_eq!(
            t.read(&token, "deny", None).unwrap().0,
            DigestAction::Cancel
        );
        assert_eq!(
            t.read(&token.replacen(" D ", " A ", 1), "allow", None),
            None
        );
        assert_eq!(
            t.read(&token.replacen("cid1==", "cid2==", 1), "allow", None),
            None
        );
        assert_eq!(
            DigestTokens::new(vec![8; 32]).read(&token, "allow", None),
            None
        );
    }
}
