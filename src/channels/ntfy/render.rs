//! What a notification says: the JSON ntfy publishes (`POST` to the server root, as ntfy's
//! "publish as JSON" describes), for a prompt with its action buttons and for its outcome.
//!
//! With `include_command = false` a prompt says only what kind of thing waits and where
//! ("An approval is waiting in shop"): ntfy carries every text in the clear. A session's
//! digest lists its members' texts only when commands are shown.

use serde::Serialize;

use crate::channels::digest::Sheet;
use crate::channels::notification;
use crate::channels::words::Words;
use crate::interaction::Interaction;
use crate::present::render::{Locale, outcome_phrase_in};

/// The longest message body published (ntfy keeps up to 4096 bytes as text).
const MAX_MESSAGE_CHARS: usize = 3000;

/// One action button: an `http` action (a single-use URL imrelay answers) or a `view`
/// action (a page the phone opens), as ntfy's JSON publishing takes them.
#[derive(Debug, Serialize)]
pub(super) struct HttpAction {
    /// `"http"` or `"view"`.
    pub action: &'static str,
    /// The button's label.
    pub label: String,
    /// The single-use URL it calls, or the page it opens.
    pub url: String,
    /// `"POST"` for an `http` action.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub method: Option<&'static str>,
    /// Whether the notification is dismissed once the call succeeds.
    pub clear: bool,
}

impl HttpAction {
    /// An `http` action posting to `url`.
    pub(super) fn post(label: impl Into<String>, url: String, clear: bool) -> Self {
        HttpAction {
            action: "http",
            label: label.into(),
            url,
            method: Some("POST"),
            clear,
        }
    }

    /// A `view` action opening `url`.
    pub(super) fn view(label: impl Into<String>, url: String) -> Self {
        HttpAction {
            action: "view",
            label: label.into(),
            url,
            method: None,
            clear: false,
        }
    }
}

/// A message as ntfy's JSON publishing takes it.
#[derive(Debug, Serialize)]
pub(super) struct Publish<'a> {
    /// The topic.
    pub topic: &'a str,
    /// The notification's title.
    pub title: String,
    /// Its text.
    pub message: String,
    /// 1 (min) to 5 (max).
    pub priority: u8,
    /// Tags (emoji short codes among them).
    pub tags: Vec<&'static str>,
    /// What a tap on the notification opens (the inbox card), when known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub click: Option<String>,
    /// Its buttons.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub actions: Vec<HttpAction>,
    /// The id under which later messages replace this notification (ntfy 2.16 and newer;
    /// older servers show them as new notifications).
    pub sequence_id: &'a str,
}

/// The single-use URLs of an approval's buttons.
pub(super) struct Urls {
    /// Allow.
    pub allow: String,
    /// Deny.
    pub deny: String,
    /// "Allow similar", when offered (ntfy takes up to three action buttons).
    pub similar: Option<String>,
}

/// The rule "Allow similar" grants for `i`, when offered (the kit's).
pub(super) fn similar_rule(i: &Interaction) -> Option<String> {
    crate::present::render::similar_rule(i)
}

/// What a prompt needs besides the interaction.
pub(super) struct PromptParts<'a> {
    /// The topic.
    pub topic: &'a str,
    /// Its notification id.
    pub sequence_id: &'a str,
    /// Its priority.
    pub priority: u8,
    /// Whether the command text is shown.
    pub include_command: bool,
    /// The inbox card's address, when known.
    pub click: Option<String>,
    /// The buttons' URLs (approvals only).
    pub urls: Option<Urls>,
    /// The language of its text and buttons.
    pub locale: Locale,
}

/// The prompt of pending `i`.
pub(super) fn prompt<'a>(i: &Interaction, p: PromptParts<'a>) -> Publish<'a> {
    let (title, mut message) =
        notification::text(i, p.include_command, MAX_MESSAGE_CHARS, p.locale);
    let w = Words(p.locale);
    let button = |label: &'static str, url: String| HttpAction::post(label, url, true);
    let mut actions = Vec::new();
    if let Some(urls) = p.urls {
        actions.push(button(w.allow(), urls.allow));
        actions.push(button(w.deny(), urls.deny));
        if let Some((url, rule)) = urls.similar.zip(similar_rule(i)) {
            // The rule it grants, in full, under the text: what the press allows.
            let rule = crate::interaction::clip(&rule, 200);
            message = format!("{message}\n\n{}{rule}", w.similar_note());
            actions.push(button(w.allow_similar(), url));
        }
    }
    Publish {
        topic: p.topic,
        title,
        message,
        priority: p.priority,
        tags: vec!["bell"],
        click: p.click,
        actions,
        sequence_id: p.sequence_id,
    }
}

/// A session's digest notification showing `sheet` under notification id `sequence_id`,
/// with `actions` (none once it is closed: then quiet, priority 2).
pub(super) fn digest<'a>(
    sheet: &'a Sheet,
    sequence_id: &'a str,
    (priority, include_command, locale): (u8, bool, Locale),
    click: Option<String>,
    actions: Vec<HttpAction>,
) -> Publish<'a> {
    let (title, message) = crate::channels::digest_links::text(sheet, include_command, locale);
    let closed = sheet.is_closed();
    Publish {
        topic: &sheet.address,
        title,
        message: crate::interaction::clip(&message, MAX_MESSAGE_CHARS),
        priority: if closed { 2 } else { priority },
        tags: vec![if closed { "white_check_mark" } else { "bell" }],
        click,
        actions,
        sequence_id,
    }
}

/// The outcome of resolved `i`, replacing its prompt: quiet (priority 2), no buttons.
pub(super) fn outcome<'a>(
    i: &Interaction,
    topic: &'a str,
    sequence_id: &'a str,
    include_command: bool,
    locale: Locale,
) -> Publish<'a> {
    let phrase = i
        .resolution
        .as_deref()
        .map(|r| outcome_phrase_in(r, locale))
        .unwrap_or_else(|| Words(locale).resolved().into());
    let (title, _) = notification::text(i, include_command, MAX_MESSAGE_CHARS, locale);
    let tag = match i.resolution.as_deref().map(|r| r.outcome) {
        Some(crate::interaction::Outcome::Allowed | crate::interaction::Outcome::Answered) => {
            "white_check_mark"
        }
        _ => "x",
    };
    Publish {
        topic,
        title,
        message: phrase,
        priority: 2,
        tags: vec![tag],
        click: None,
        actions: Vec::new(),
        sequence_id,
    }
}
