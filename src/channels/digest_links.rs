//! Digests on a phone's notifications (ntfy, Web Push): the kit's digest ([`super::digest`])
//! shown as one notification per session, replaced in place as it changes, whose actions
//! carry single-use links instead of a chat's signed button data.
//!
//! A notification cannot be edited in answer to a press, and its actions carry no person:
//! each action is a URL imrelay made for one digest notification, one action and the set of
//! members it listed. A link is `<action>.<place>.<session>.<set>.<message>.<nonce>.<tag>`:
//! the tag (16 bytes of the channel's secret's MAC under a domain of the channel's own) binds
//! every other field, so a link is good on its channel only and for that place, session,
//! set of members, notification and action; the nonce makes each publish's links fresh. A
//! press records the link's SHA-256 as used before anything is answered, so a replayed link
//! is refused (`409 token_used`); what a fresh press does is the kit's: Approve all and Deny
//! all ask to confirm (the notification is published again with the confirmation), and the
//! confirmation answers exactly the members that were listed, each through the answer
//! pipeline, or is refused as stale when the set changed since.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use rand::RngCore;
use serde_json::json;
use sha2::{Digest as _, Sha256};

use super::actions::{Endpoint, Person, stopped_digest};
use super::digest::{DigestAction, Sheet, Tapper};
use super::digest_flow::Press;
use super::messages::{Messages, Platform};
use super::pipeline::Feedback;
use super::words::Words;
use crate::interaction::Responder;
use crate::present::render::Locale;
use crate::wire::error::ApiError;

const TAG_BYTES: usize = 16;
/// How long a used link is remembered as used.
const USED_FOR_DAYS: i64 = 30;
/// The longest link read.
const MAX_LINK_CHARS: usize = 400;

/// Makes and reads one channel's digest links.
#[derive(Clone, Debug)]
pub(crate) struct DigestLinks {
    signer: super::token::Signer,
    domain: &'static [u8],
    channel: &'static str,
}

/// A link read back and verified.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Link {
    /// What it does.
    pub action: DigestAction,
    /// The place its digest was shown in.
    pub address: String,
    /// The session's digest key.
    pub session: String,
    /// The fingerprint of the members it listed.
    pub set: String,
    /// The platform's id of its notification.
    pub message: String,
    /// Its SHA-256 (hex): what is recorded once it is used.
    pub digest: String,
}

impl DigestLinks {
    /// Links of `channel` signed with `key` (a secret from the store) under `domain`
    /// (`imrelay/<channel>/digest-link/v1`).
    pub(crate) fn new(key: Vec<u8>, domain: &'static [u8], channel: &'static str) -> Self {
        Self {
            signer: super::token::Signer::new(key),
            domain,
            channel,
        }
    }

    /// A fresh link for `action` on the digest notification `message` showing `sheet`.
    pub(crate) fn make(&self, sheet: &Sheet, action: DigestAction, message: &str) -> String {
        let mut nonce = [0u8; 16];
        rand::rng().fill_bytes(&mut nonce);
        let nonce = URL_SAFE_NO_PAD.encode(nonce);
        let code = action.code().to_string();
        let fields = [
            code.as_str(),
            &sheet.address,
            &sheet.session,
            &sheet.set,
            message,
            &nonce,
        ];
        let tag = self.tag(&fields);
        format!("{}.{tag}", fields.join("."))
    }

    fn tag(&self, fields: &[&str; 6]) -> String {
        let parts = fields.map(str::as_bytes);
        self.signer.tag(self.domain, &parts, TAG_BYTES)
    }

    /// What `link` carries, if it is one of this channel's, whole and unchanged.
    pub(crate) fn read(&self, link: &str) -> Option<Link> {
        let well_formed = link.len() <= MAX_LINK_CHARS
            && link
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
        if !well_formed {
            return None;
        }
        let parts: Vec<&str> = link.split('.').collect();
        let [code, address, session, set, message, nonce, tag] = parts[..] else {
            return None;
        };
        let fields = [code, address, session, set, message, nonce];
        let parts = fields.map(str::as_bytes);
        if !self.signer.verify(self.domain, &parts, TAG_BYTES, tag) {
            return None;
        }
        let mut chars = code.chars();
        let action = DigestAction::from_code(chars.next()?).filter(|_| chars.next().is_none())?;
        Some(Link {
            action,
            address: address.into(),
            session: session.into(),
            set: set.into(),
            message: message.into(),
            digest: hex::encode(Sha256::digest(link.as_bytes())),
        })
    }

    /// The scope under which used links are recorded.
    fn used_scope(&self) -> String {
        format!("{}-digest-link", self.channel)
    }
}

/// A digest notification's title and text: the kit's title, then the listed members, the
/// count of the rest and the confirmation's question; in the privacy mode
/// (`include_command` false) a title with no session or folder and no member's text, only
/// that they are read in imrelay.
pub(crate) fn text(sheet: &Sheet, include_command: bool, locale: Locale) -> (String, String) {
    let title = if include_command {
        sheet.title.clone()
    } else {
        crate::channels::digest_texts::Texts(locale).private_title(sheet.count)
    };
    if sheet.is_closed() {
        return (title.clone(), title);
    }
    let mut body: Vec<String> = if include_command {
        sheet.lines.iter().map(|l| format!("• {l}")).collect()
    } else {
        vec![Words(locale).open_to_see().to_string()]
    };
    if include_command && let Some(more) = &sheet.more {
        body.push(more.clone());
    }
    if let Some(q) = &sheet.question {
        body.push(String::new());
        body.push(q.clone());
    }
    (title, body.join("\n"))
}

impl Endpoint {
    /// A press on digest link `link` as `person`: the kit's answer to it (the notification
    /// shown again as it now is), or why nothing changed. A link not made here, or made for
    /// another channel, is refused (`403 invalid_token`), as is a link pressed before
    /// (`409 token_used`); each refusal is logged and recorded, never the link.
    pub(crate) async fn digest<P: Platform>(
        &self,
        messages: &Messages<P>,
        links: &DigestLinks,
        link: &str,
        person: &Person,
    ) -> Result<Response, ApiError> {
        let channel = self.tokens.channel;
        let actor = format!("{} ({channel}:{})", person.name, person.identity);
        let Some(link) = links.read(link) else {
            let status = (StatusCode::FORBIDDEN, "invalid_token");
            return Err(self
                .refuse(&actor, None, status, Words::button_not_valid)
                .await);
        };
        let until = jiff::Timestamp::now() + jiff::SignedDuration::from_hours(24 * USED_FOR_DAYS);
        let scope = links.used_scope();
        if !self
            .store
            .first_sighting(&scope, &link.digest, until)
            .await?
        {
            let status = (StatusCode::CONFLICT, "token_used");
            return Err(self.refuse(&actor, None, status, Words::button_used).await);
        }
        let identities = self.pipeline.identities();
        let responder = Responder::new(person.name.clone(), self.pipeline.via().clone())
            .with_actor_id(format!("{identities}:{}", person.identity))
            .with_identity(identities, person.identity.clone());
        let who = Tapper {
            actor: &person.name,
            identity: &person.identity,
            approver: true,
            responder,
        };
        let press = Press {
            address: &link.address,
            session: &link.session,
            action: link.action,
            set: &link.set,
            message: &link.message,
        };
        let texts = messages.platform.texts();
        let tapped = messages
            .digests
            .tap::<P::Job>(&self.pipeline, texts, &press, &who)
            .await;
        match tapped {
            Ok(t) => {
                messages.redraw(&t).await;
                tracing::info!(via = channel, chat = %link.address, action = ?link.action, "{channel}: a digest action");
                let body = json!({ "result": "done", "message": t.toast });
                Ok((StatusCode::OK, axum::Json(body)).into_response())
            }
            Err(f) => {
                if matches!(f, Feedback::StoreDown) {
                    // Not recorded: the same action may be pressed again.
                    let _ = self.store.forget_sighting(&scope, &link.digest).await;
                }
                Err(stopped_digest(channel, f, self.locale))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::channels::digest::Button;
    use crate::channels::digest_texts::Texts;

    fn sheet() -> Sheet {
        let mut s = Sheet::closed(Texts(Locale::EnUs), "phone-alice", "LMbAeCb6pWs", "t");
        s.set = "AbC-_12x9Qz".into();
        s.lines = vec!["Run: cargo test".into()];
        s.count = 1;
        s.rows = vec![vec![Button {
            label: "Approve all".into(),
            action: DigestAction::AllowAll,
        }]];
        s
    }

    #[test]
    fn links_are_fresh_bound_to_every_field_and_to_their_channel() {
        let links = DigestLinks::new(vec![7; 32], b"imrelay/ntfy/digest-link/v1", "ntfy");
        let s = sheet();
        let (a, b) = (
            links.make(&s, DigestAction::AllowAll, "imrelay-d1"),
            links.make(&s, DigestAction::AllowAll, "imrelay-d1"),
        );
        assert_ne!(a, b, "each publish's links are fresh");
        let read = links.read(&a).unwrap();
        assert_eq!(
            (read.action, read.address.as_str(), read.session.as_str()),
            (DigestAction::AllowAll, "phone-alice", "LMbAeCb6pWs")
        );
        assert_eq!(
            (read.set.as_str(), read.message.as_str()),
            ("AbC-_12x9Qz", "imrelay-d1")
        );
        assert_ne!(read.digest, links.read(&b).unwrap().digest);
        // Any field changed, another key or another channel's domain: no link.
        assert!(links.read(&a.replacen("a.", "d.", 1)).is_none());
        assert!(links.read(&a.replace("phone-alice", "phone-bob")).is_none());
        assert!(links.read(&a.replace("imrelay-d1", "imrelay-d2")).is_none());
        let other = DigestLinks::new(vec![8; 32], b"imrelay/ntfy/digest-link/v1", "ntfy");
        assert!(other.read(&a).is_none());
        let push = DigestLinks::new(vec![7; 32], b"imrelay/push/digest-link/v1", "push");
        assert!(push.read(&a).is_none());
        assert!(links.read("").is_none() && links.read("a/b").is_none());
        assert!(links.read(&"a.".repeat(300)).is_none());
    }

    #[test]
    fn the_text_lists_the_members_unless_the_privacy_mode_hides_them() {
        let s = sheet();
        let (title, body) = text(&s, true, Locale::EnUs);
        assert_eq!(title, s.title);
        assert!(body.contains("cargo test"), "{body}");
        let (private, hidden) = text(&s, false, Locale::EnUs);
        assert!(!hidden.contains("cargo test"), "{hidden}");
        assert!(hidden.contains("Open imrelay"), "{hidden}");
        assert_eq!(
            private, "1 request waiting",
            "no session or folder in the title"
        );
        let closed = Sheet::closed(Texts(Locale::EnUs), "p", "s", "2 requests from session s-1");
        assert_eq!(
            text(&closed, false, Locale::EnUs).0,
            "Requests: all answered"
        );
    }
}
