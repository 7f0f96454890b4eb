//! What a notification says: the JSON ntfy publishes (`POST` to the server root, as ntfy's
//! "publish as JSON" describes), for a prompt with its action buttons and for its outcome.
//!
//! With `include_command = false` a prompt says only what kind of thing waits and where
//! ("An approval is waiting in shop"): ntfy carries every text in the clear.

use serde::Serialize;

use crate::channels::notification;
use crate::channels::words::Words;
use crate::interaction::Interaction;
use crate::present::render::{Locale, outcome_phrase_in};

/// The longest message body published (ntfy keeps up to 4096 bytes as text).
const MAX_MESSAGE_CHARS: usize = 3000;

/// One `http` action button (ntfy's `"action": "http"`).
#[derive(Debug, Serialize)]
pub(super) struct HttpAction {
    /// Always `"http"`.
    pub action: &'static str,
    /// The button's label.
    pub label: &'static str,
    /// The single-use URL it calls.
    pub url: String,
    /// Always `"POST"`.
    pub method: &'static str,
    /// Whether the notification is dismissed once the call succeeds.
    pub clear: bool,
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
    /// The allow and deny URLs (approvals only).
    pub urls: Option<(String, String)>,
    /// The language of its text and buttons.
    pub locale: Locale,
}

/// The prompt of pending `i`.
pub(super) fn prompt<'a>(i: &Interaction, p: PromptParts<'a>) -> Publish<'a> {
    let (title, message) = notification::text(i, p.include_command, MAX_MESSAGE_CHARS, p.locale);
    let w = Words(p.locale);
    let actions = p
        .urls
        .map(|(allow, deny)| {
            vec![
                HttpAction {
                    action: "http",
                    label: w.allow(),
                    url: allow,
                    method: "POST",
                    clear: true,
                },
                HttpAction {
                    action: "http",
                    label: w.deny(),
                    url: deny,
                    method: "POST",
                    clear: true,
                },
            ]
        })
        .unwrap_or_default();
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
