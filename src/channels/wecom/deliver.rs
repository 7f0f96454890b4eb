//! Sending cards and outcomes through the durable outbox, on the shared delivery skeleton
//! (`channels::messages`), over the bot's long connection.
//!
//! A card goes out with `aibot_send_msg`; its copy is recorded under its `task_id`. WeCom
//! gives a bot no way to change a card except in answer to a click on it, so a copy whose
//! interaction was answered elsewhere (another chat, another channel, expiry) is told the
//! outcome in a markdown note in its chat; a copy clicked in WeCom was already updated in
//! place and is final. Each chat gets at most one message every two seconds (WeCom allows
//! a bot about 30 a minute per chat), and a throttled chat is kept quiet.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use serde_json::{Value, json};

use super::CHANNEL;
use super::Job;
use super::bot::{BotConnection, BotError};
use super::button::Keys;
use super::digest::{self, DigestKeys};
use super::render::Cards;
use crate::channels::digest::{Edited, Sheet};
use crate::channels::digest_texts::Texts;
use crate::channels::messages::{Failure, Pacer, Platform, Posted};
use crate::interaction::Interaction;
use crate::store::{ChannelMessage, OutboxJob};

/// Smallest gap between two messages to one chat.
pub(crate) const CHAT_GAP: Duration = Duration::from_secs(2);
/// How long a throttled chat is kept quiet.
pub(crate) const THROTTLE_PAUSE: Duration = Duration::from_secs(60);
/// WeCom's codes for "too many requests" (`api freq out of limit` and its per-chat kin).
const THROTTLED: &[i64] = &[45009, 45033, 45035];

/// WeCom as the delivery skeleton sees it.
pub(crate) struct WeCom {
    /// The long connection.
    pub bot: Arc<BotConnection>,
    /// Card rendering.
    pub cards: Cards,
    /// Signs digest cards' buttons.
    pub digest_keys: DigestKeys,
}

/// What a failed send means: throttling waits, a refusal is for good (said with the reason
/// WeCom most often has), anything else is retried.
fn failure(e: BotError) -> Failure {
    match e {
        BotError::Failed { errcode, .. } if THROTTLED.contains(&errcode) => Failure::Throttled {
            after: Some(THROTTLE_PAUSE),
            error: e.to_string(),
        },
        BotError::Failed { .. } => Failure::Permanent(format!(
            "{e} (WeCom delivers a bot's messages only to chats where someone has messaged the bot: \
             message it there once, then run `imrelay doctor --send-test`)"
        )),
        other => Failure::Transient(other.to_string()),
    }
}

impl WeCom {
    async fn send(&self, chat: &str, body: Value) -> Result<(), Failure> {
        let replies = self
            .bot
            .replies()
            .ok_or_else(|| Failure::Transient("the WeCom long connection is not up".into()))?;
        replies.send(chat, body).await.map_err(failure)
    }
}

#[async_trait]
impl Platform for WeCom {
    type Target = String;
    type Job = Job;

    fn texts(&self) -> Texts {
        Texts(self.cards.locale())
    }

    async fn post_digest(&self, chat: &String, sheet: &Sheet) -> Result<String, Failure> {
        let task_id = digest::task_id(sheet, chat);
        let card = self.digest_keys.card(sheet, &task_id, None);
        self.send(
            chat,
            json!({"msgtype": "template_card", "template_card": card}),
        )
        .await?;
        Ok(task_id)
    }

    /// WeCom changes a card only in answer to a click on it.
    async fn edit_digest(
        &self,
        _address: &str,
        _message: &str,
        _sheet: &Sheet,
    ) -> Result<Edited, Failure> {
        Ok(Edited::Cannot)
    }

    fn channel(&self) -> &'static str {
        CHANNEL
    }

    fn address(&self, chat: &String) -> String {
        chat.clone()
    }

    async fn post(
        &self,
        i: &Interaction,
        chat: &String,
        _job: &OutboxJob,
    ) -> Result<Posted, Failure> {
        let card = self.cards.card(i, chat);
        self.send(
            chat,
            json!({"msgtype": "template_card", "template_card": card}),
        )
        .await?;
        Ok(Posted {
            message_ref: Keys::task_id(i, chat),
            state: None,
        })
    }

    async fn edit(&self, i: &Interaction, m: &ChannelMessage) -> Result<(), Failure> {
        self.send(&m.address, self.cards.note(i)).await
    }
}

/// The pacer for WeCom's sending rate per chat.
pub(crate) fn pacer() -> Pacer {
    Pacer::new(CHAT_GAP, THROTTLE_PAUSE)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn throttling_waits_and_a_refusal_says_what_to_do() {
        let f = failure(BotError::Failed {
            cmd: "aibot_send_msg".into(),
            errcode: 45009,
            errmsg: "api freq out of limit".into(),
        });
        assert!(matches!(f, Failure::Throttled { .. }), "{f:?}");
        let f = failure(BotError::Failed {
            cmd: "aibot_send_msg".into(),
            errcode: 93006,
            errmsg: "invalid chatid".into(),
        });
        assert!(f.error().contains("messaged the bot"), "{f:?}");
        assert!(matches!(
            failure(BotError::NotConnected),
            Failure::Transient(_)
        ));
    }
}
