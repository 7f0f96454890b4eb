//! A message to the robot that quotes one of its cards (DingTalk's 引用 / "reply"): said to
//! the agent session the card belongs to, through the kit (`channels/steer.rs`).
//!
//! DingTalk names no message of the robot's in what it sends or answers (a card is created
//! with an `outTrackId` of imrelay's own; `createAndDeliver` answers no message id), and a
//! quote's `repliedMsg.msgId` is DingTalk's own id of the quoted message, which nothing the
//! robot sent can be matched with. What a quote of a card does bring back is the card's
//! variables: `text.isReplyMsg` and `text.repliedMsg` `{msgType: "interactiveCard", msgId,
//! senderId, content: {cardData: {cardParamMap}}}`, `content` and `cardData` as objects or
//! JSON text. DingTalk does not document these fields (the official SDKs' message models
//! drop them or keep them as unknown keys); their shape is the one read by DingTalk
//! connectors in use (see docs/dingtalk.md).
//!
//! Among the variables is the card's `token`, the one every button carries: signed for one
//! interaction (a digest's: for its place and session) under the server's secret, so no one
//! can make up another's, and a person can send no interactive card of their own to quote.
//! The quoted card must moreover be one sent to the chat the quote was written in (a
//! prompt's, of the interaction it was made for, not an earlier one under the same id; a
//! digest's, while its session's digest lives there: any card of that digest names the same
//! session, whichever requests it listed). The kit then applies its rules:
//! who may message the session (its route's approvers), the size and rate, taken once.
//! A quote of anything else keeps the message's usual meaning.

use serde_json::Value;

use super::CHANNEL;
use super::api::{OpenApi, Space};
use super::button::Tokens;
use super::digest::DigestTokens;
use crate::channels::digest::Digests;
use crate::channels::pipeline::{Feedback, Pipeline};
use crate::channels::steer::{Heard, Reply, reply};
use crate::interaction::InteractionId;
use crate::interaction::Responder;
use crate::present::render::Locale;

/// The most characters of a quoted card's content read.
const MAX_QUOTE_CHARS: usize = 64 * 1024;

/// A person's message that quotes one of imrelay's cards.
pub(super) struct Quote {
    /// The message's own id (`msgId`), taken once.
    id: String,
    /// Who wrote it (`senderStaffId`).
    user: String,
    /// The group (`conversationId`), or `None` in a person's chat with the robot.
    group: Option<String>,
    /// What it says.
    text: String,
    /// The quoted card, from its verified token.
    card: Quoted,
}

/// Which card a quote names.
#[derive(Debug, PartialEq)]
enum Quoted {
    /// A prompt: the interaction it shows, and its creation time (unix ms), so that a card
    /// of an earlier interaction under the same id names nothing.
    Prompt(InteractionId, i64),
    /// A digest: its place and its session's key.
    Digest(String, String),
}

/// `value`, or the JSON it holds as text.
fn object(value: &Value) -> Option<Value> {
    match value {
        Value::Object(_) => Some(value.clone()),
        Value::String(s) if s.len() <= MAX_QUOTE_CHARS => serde_json::from_str(s).ok(),
        _ => None,
    }
}

/// The `token` variable of the interactive card message `data` quotes, if it quotes one.
fn quoted_token(data: &Value) -> Option<String> {
    let text = &data["text"];
    if text["isReplyMsg"].as_bool() != Some(true) {
        return None;
    }
    let replied = &text["repliedMsg"];
    if replied["msgType"].as_str() != Some("interactiveCard") {
        return None;
    }
    let content = object(&replied["content"])?;
    let card = object(&content["cardData"])?;
    card["cardParamMap"]["token"].as_str().map(str::to_string)
}

impl Quote {
    /// The quote in `data` (a message to the robot) of one of imrelay's cards, its token
    /// verified by `tokens` (a prompt's) or `digests` (a digest's); `None` when it quotes
    /// none.
    pub(super) fn read(
        data: &Value,
        tokens: &Tokens,
        digests: Option<&DigestTokens>,
    ) -> Option<Self> {
        let token = quoted_token(data)?;
        let card = match tokens.verify(&token) {
            Some((id, created)) => Quoted::Prompt(id, created),
            None => {
                let (place, session) = digests?.digest_of(&token)?;
                Quoted::Digest(place, session)
            }
        };
        let s = |k: &str| data[k].as_str().unwrap_or_default().to_string();
        let group = (data["conversationType"].as_str() == Some("2")).then(|| s("conversationId"));
        let quote = Quote {
            id: s("msgId"),
            user: s("senderStaffId"),
            group,
            text: data["text"]["content"]
                .as_str()
                .unwrap_or_default()
                .trim()
                .to_string(),
            card,
        };
        let complete = !quote.id.is_empty()
            && !quote.user.is_empty()
            && quote.group.as_ref().is_none_or(|g| !g.is_empty());
        complete.then_some(quote)
    }

    /// Who wrote it (their userId).
    pub(super) fn user(&self) -> &str {
        &self.user
    }

    /// The chat's address, as the channel's copies name it.
    fn address(&self) -> String {
        match &self.group {
            Some(g) => g.clone(),
            None => format!("user:{}", self.user),
        }
    }
}

/// Says `q` to the session of the card it quotes, and tells the person what became of it in
/// the chat.
pub(super) async fn steer(
    (pipeline, digests): (Pipeline, Option<Digests>),
    api: std::sync::Arc<OpenApi>,
    q: Quote,
    approver: bool,
    locale: Locale,
) {
    let told = said(&pipeline, digests.as_ref(), &q, approver, locale).await;
    let Some(told) = told else {
        return;
    };
    let space = match &q.group {
        Some(g) => Space::Group(g),
        None => Space::User(&q.user),
    };
    if let Err(e) = api.send_text(space, &told).await {
        tracing::warn!(error = %e, "dingtalk: cannot answer a reply to a session's card");
    }
}

/// The outTrackId of the card `q` quotes, in the chat it was written in: what the kit knows
/// the session's message by (`None`: no such card there; a digest's while it lives).
async fn card_in_chat(
    pipeline: &Pipeline,
    digests: Option<&Digests>,
    q: &Quote,
) -> Result<Option<String>, crate::store::StoreError> {
    let address = q.address();
    match &q.card {
        Quoted::Prompt(id, created) => {
            let store = pipeline.registry().store();
            let Some(i) = store.get(id).await? else {
                return Ok(None);
            };
            if i.created_at.as_millisecond() != *created {
                return Ok(None);
            }
            let copies = store.messages(CHANNEL, id).await?;
            Ok(copies
                .into_iter()
                .find(|m| m.address == address)
                .map(|m| m.message_ref))
        }
        Quoted::Digest(place, session) if *place == address => match digests {
            Some(d) => Ok(d.shown(place, session).await?.and_then(|s| s.message_ref)),
            None => Ok(None),
        },
        Quoted::Digest(..) => Ok(None),
    }
}

/// What the person is told of `q`, said to its session (`None`: nothing).
async fn said(
    pipeline: &Pipeline,
    digests: Option<&Digests>,
    q: &Quote,
    approver: bool,
    locale: Locale,
) -> Option<String> {
    let address = q.address();
    let store = pipeline.registry().store().clone();
    let card = match card_in_chat(pipeline, digests, q).await {
        Ok(card) => card,
        Err(e) => {
            tracing::error!(error = %e, "dingtalk: cannot look up a quoted card");
            return Some(Feedback::StoreDown.text(locale));
        }
    };
    let Some(card) = card else {
        pipeline.count("ignored");
        return None;
    };
    let shown = pipeline
        .registry()
        .teams()
        .people
        .name_of(CHANNEL, &q.user)
        .map_or_else(|| q.user.clone(), str::to_string);
    let responder = Responder::new(shown, pipeline.via().clone())
        .with_actor_id(format!("dingtalk:{}", q.user))
        .with_identity(CHANNEL, &q.user);
    let r = Reply {
        id: &q.id,
        chat: Some(&address),
        to: &[&card],
        text: &q.text,
        responder,
        identity: &q.user,
        approver,
    };
    match reply(pipeline, store.as_ref(), r, locale, false).await {
        Heard::Told(told) => told,
        Heard::NotASession | Heard::Prompt | Heard::Empty => {
            pipeline.count("ignored");
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn quoting(content: Value) -> Value {
        json!({"msgId": "msgA", "senderStaffId": "manager0412", "conversationType": "2",
            "conversationId": "cid1", "msgtype": "text",
            "text": {"content": " use staging", "isReplyMsg": true,
                "repliedMsg": {"msgType": "interactiveCard", "msgId": "msgB",
                    "senderId": "$:LWCP_v1:$bot", "content": content}}})
    }

    #[test]
    fn a_quoted_cards_token_is_read_from_objects_or_json_text() {
        let object = quoting(json!({"cardData": {"cardParamMap": {"token": "t1"}}}));
        assert_eq!(quoted_token(&object).as_deref(), Some("t1"));
        let text = json!({"cardData": {"cardParamMap": {"token": "t2"}}}).to_string();
        assert_eq!(
            quoted_token(&quoting(Value::String(text))).as_deref(),
            Some("t2")
        );
        let nested = json!({"cardData": json!({"cardParamMap": {"token": "t3"}}).to_string()});
        assert_eq!(quoted_token(&quoting(nested)).as_deref(), Some("t3"));
        // A quote of a person's text, or no quote, names no card.
        let mut person = quoting(json!({"text": "hello"}));
        person["text"]["repliedMsg"]["msgType"] = json!("text");
        assert_eq!(quoted_token(&person), None);
        let mut plain = quoting(json!({"cardData": {"cardParamMap": {"token": "t1"}}}));
        plain["text"]["isReplyMsg"] = json!(false);
        assert_eq!(quoted_token(&plain), None);
    }

    #[test]
    fn only_a_verified_token_makes_a_quote() {
        let tokens = Tokens::new(vec![7; 32]);
        let digests = DigestTokens::new(vec![7; 32]);
        let i = crate::interaction::Interaction::pending(
            crate::interaction::InteractionId::parse("toolu_1").unwrap(),
            "Bash",
            serde_json::Map::new(),
            jiff::Timestamp::now(),
            300,
        );
        let good = quoting(json!({"cardData": {"cardParamMap": {"token": tokens.token(&i)}}}));
        let q = Quote::read(&good, &tokens, Some(&digests)).unwrap();
        assert_eq!(
            q.card,
            Quoted::Prompt(
                InteractionId::parse("toolu_1").unwrap(),
                i.created_at.as_millisecond()
            )
        );
        assert_eq!(
            (q.text.as_str(), q.address()),
            ("use staging", "cid1".to_string())
        );
        let forged = quoting(json!({"cardData": {"cardParamMap": {"token": "1.AAAA.toolu_1"}}}));
        assert!(Quote::read(&forged, &tokens, Some(&digests)).is_none());
        let mut direct = good.clone();
        direct["conversationType"] = json!("1");
        let q = Quote::read(&direct, &tokens, Some(&digests)).unwrap();
        assert_eq!(q.address(), "user:manager0412");
    }
}
