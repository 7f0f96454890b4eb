//! What a push carries: the JSON the inbox's service worker (`sw.js`) reads from each push
//! and turns into a notification. A prompt says what is asked (tool and command or the
//! question, agent, route: [`crate::channels::notification`]), where a tap opens the card, and
//! for an approval its Approve and Deny actions with their single-use URLs. An outcome
//! carries the same `tag`, so it replaces the prompt's notification ("Allowed by bob via
//! telegram").
//!
//! The payload is kept under [`MAX_PAYLOAD`] bytes: push services take 4096 encrypted.

use serde::Serialize;

use crate::channels::notification;
use crate::channels::words::Words;
use crate::interaction::Interaction;
use crate::present::render::{Locale, outcome_phrase_in};

/// The largest payload sent, in bytes (4096 less the encryption's header, tag and padding).
pub(super) const MAX_PAYLOAD: usize = 3800;

/// The longest body shown before it is cut.
const MAX_BODY_CHARS: usize = 1000;

/// One action of a notification.
#[derive(Debug, Serialize)]
pub(super) struct PushAction {
    /// `allow` or `deny` (a digest's: `allow_all`, `deny_all`, `yes`, `cancel`): what the
    /// worker's `notificationclick` reads.
    pub action: &'static str,
    /// The button's label.
    pub title: String,
    /// The single-use URL (a path on this server) the worker posts to.
    pub url: String,
}

/// A push's JSON.
#[derive(Debug, Serialize)]
pub(super) struct Payload {
    /// The format's version.
    pub v: u8,
    /// `prompt`, `digest` or `outcome`.
    #[serde(rename = "type")]
    pub kind: &'static str,
    /// The interaction's id.
    pub id: String,
    /// The notification's tag: an outcome replaces the prompt with the same tag.
    pub tag: String,
    /// The title.
    pub title: String,
    /// The text.
    pub body: String,
    /// What a tap opens (a path on this server: the inbox card).
    pub url: String,
    /// The deadline (unix ms) of a prompt.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub deadline: Option<i64>,
    /// Whether a prompt or a digest replaces one already shown (the votes so far, a digest
    /// grown or confirming a press): shown without a sound or a second alert.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub quiet: bool,
    /// Its actions (an approval's prompt only).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub actions: Vec<PushAction>,
}

impl Payload {
    /// The JSON bytes, with the body cut until it fits [`MAX_PAYLOAD`].
    pub(super) fn bytes(mut self) -> Vec<u8> {
        loop {
            let bytes = serde_json::to_vec(&self).unwrap_or_default();
            if bytes.len() <= MAX_PAYLOAD || self.body.is_empty() {
                return bytes;
            }
            let keep = self.body.chars().count() / 2;
            self.body = crate::interaction::clip(&self.body, keep);
            self.title = crate::interaction::clip(&self.title, 100);
        }
    }
}

/// The tag of interaction `i`'s notifications (per incarnation).
pub(super) fn tag(i: &Interaction) -> String {
    use sha2::{Digest, Sha256};
    let h = Sha256::digest(i.incarnation().as_bytes());
    format!("imrelay-{}", &hex::encode(h)[..24])
}

/// The prompt of pending `i`, with `actions` (an approval's allow and deny URLs), in
/// `locale`.
pub(super) fn prompt(
    i: &Interaction,
    include_command: bool,
    actions: Vec<PushAction>,
    locale: Locale,
) -> Payload {
    let (title, body) = notification::text(i, include_command, MAX_BODY_CHARS, locale);
    Payload {
        v: 1,
        kind: "prompt",
        id: i.id.to_string(),
        tag: tag(i),
        title,
        body,
        url: card(i),
        deadline: Some(i.deadline.as_millisecond()),
        quiet: false,
        actions,
    }
}

/// The outcome of resolved `i`, replacing its prompt, in `locale`.
pub(super) fn outcome(i: &Interaction, include_command: bool, locale: Locale) -> Payload {
    let (title, _) = notification::text(i, include_command, MAX_BODY_CHARS, locale);
    let body = i
        .resolution
        .as_deref()
        .map(|r| outcome_phrase_in(r, locale))
        .unwrap_or_else(|| Words(locale).resolved().into());
    Payload {
        v: 1,
        kind: "outcome",
        id: i.id.to_string(),
        tag: tag(i),
        title,
        body,
        url: card(i),
        deadline: None,
        quiet: false,
        actions: Vec::new(),
    }
}

/// The tag of the digest of `session` on device `device` whose first member is `first`
/// (not hex after `imrelay-`, so never a prompt's).
pub(super) fn digest_tag(device: &str, session: &str, first: &str) -> String {
    use sha2::{Digest, Sha256};
    let h = Sha256::digest(format!("digest\n{device}\n{session}\n{first}").as_bytes());
    format!("imrelay-dg{}", &hex::encode(h)[..22])
}

/// A session's digest notification showing `sheet` under `tag`, with `actions` (none once
/// closed: then quiet); a tap opens the inbox.
pub(super) fn digest(
    sheet: &crate::channels::digest::Sheet,
    tag: &str,
    include_command: bool,
    actions: Vec<PushAction>,
    locale: Locale,
) -> Payload {
    let (title, body) = crate::channels::digest_links::text(sheet, include_command, locale);
    let closed = sheet.is_closed();
    Payload {
        v: 1,
        kind: if closed { "outcome" } else { "digest" },
        id: String::new(),
        tag: tag.to_string(),
        title,
        body: crate::interaction::clip(&body, MAX_BODY_CHARS),
        url: "/".into(),
        deadline: None,
        quiet: false,
        actions,
    }
}

/// The inbox card of `i`, as a path.
fn card(i: &Interaction) -> String {
    let id: String = form_urlencoded::byte_serialize(i.id.as_ref().as_bytes()).collect();
    format!("/#{id}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::interaction::InteractionId;

    fn bash(command: &str) -> Interaction {
        let mut input = serde_json::Map::new();
        input.insert("command".into(), command.into());
        let mut i = Interaction::pending(
            InteractionId::parse("p1").unwrap(),
            "Bash",
            input,
            jiff::Timestamp::from_millisecond(1_700_000_000_000).unwrap(),
            60,
        );
        i.agent = Some("claude-code".into());
        i
    }

    #[test]
    fn a_prompt_says_the_command_unless_told_not_to_and_always_fits() {
        let i = bash("cargo publish --allow-dirty");
        let p = prompt(&i, true, Vec::new(), Locale::EnUs);
        assert!(p.title.contains("cargo publish"), "{}", p.title);
        assert_eq!(p.url, "/#p1");
        let quiet = prompt(&i, false, Vec::new(), Locale::EnUs);
        let json = String::from_utf8(quiet.bytes()).unwrap();
        assert!(!json.contains("cargo publish"), "{json}");
        assert!(json.contains("An approval is waiting"), "{json}");
        let long = bash(&"é".repeat(5000));
        assert!(prompt(&long, true, Vec::new(), Locale::EnUs).bytes().len() <= MAX_PAYLOAD);
        assert_eq!(tag(&i), tag(&bash("other")));
    }

    #[test]
    fn in_chinese_the_title_the_privacy_text_and_the_outcome_are_chinese() {
        let mut i = bash("cargo publish");
        let quiet = prompt(&i, false, Vec::new(), Locale::ZhCn);
        assert_eq!(
            (quiet.title.as_str(), quiet.body.as_str()),
            (
                "claude-code 有待处理的审批请求",
                "打开 imrelay 查看请求内容。"
            )
        );
        i.resolution = Some(Box::new(crate::interaction::Resolution {
            outcome: crate::interaction::Outcome::Allowed,
            by: Some("bob".into()),
            via: crate::interaction::Via::new("telegram"),
            at: i.created_at,
            result: crate::interaction::PermissionResult::Allow {
                updated_input: crate::interaction::Input::default(),
                updated_permissions: None,
            }
            .into(),
        }));
        assert_eq!(
            outcome(&i, true, Locale::ZhCn).body,
            "由 bob 通过 telegram 批准"
        );
        assert_eq!(
            outcome(&i, true, Locale::EnUs).body,
            "Allowed by bob via telegram"
        );
    }
}
