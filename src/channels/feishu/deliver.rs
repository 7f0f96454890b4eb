//! Posting and updating cards through the durable outbox, on the shared delivery skeleton
//! (`channels::messages`).
//!
//! Sends carry a dedupe `uuid`, so a retried send never posts twice; every posted card is
//! recorded in the store, so updates find it after a restart. Requests to one chat are
//! spaced to respect the platform's 5 QPS per chat, and throttling answers push that chat
//! back.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use serde_json::json;

use super::CHANNEL;
use super::api::{ApiError, OpenApi, send_uuid};
use super::plan::Job;
use super::render::Cards;
use super::settings::Receiver;
use crate::channels::digest::{Edited, Sheet};
use crate::channels::digest_texts::Texts;
use crate::channels::messages::{Failure, Pacer, Platform, Posted};
use crate::channels::threads::{Opener, Threads, outcome_line};
use crate::interaction::Interaction;
use crate::store::{ChannelMessage, OutboxJob};

/// Smallest gap between two requests to one chat (5 per second).
pub(crate) const CHAT_GAP: Duration = Duration::from_millis(200);
/// How long a throttled chat is kept quiet when the platform does not say.
pub(crate) const THROTTLE_PAUSE: Duration = Duration::from_secs(1);
/// Feishu as the delivery skeleton sees it.
pub(crate) struct Feishu {
    /// The platform client.
    pub api: Arc<OpenApi>,
    /// Card rendering.
    pub cards: Cards,
    /// A reply thread per agent session (`feishu.thread_per`).
    pub threads: Threads,
    /// Whether the outcome is also posted as a reply in each message's thread.
    pub thread_replies: bool,
}

/// The pacer for Feishu's 5 requests per second per chat.
pub(crate) fn pacer() -> Pacer {
    Pacer::new(CHAT_GAP, THROTTLE_PAUSE)
}

/// What a failed platform call means: throttling is retried after the platform's wait if it
/// gave one (and the chat kept quiet), a refusal is for good, anything else is retried.
pub(crate) fn failure(e: ApiError) -> Failure {
    match e {
        ApiError::Throttled { retry_after, .. } => Failure::Throttled {
            after: retry_after,
            error: e.to_string(),
        },
        ApiError::Refused { .. } => Failure::Permanent(e.to_string()),
        other => Failure::Transient(other.to_string()),
    }
}

#[async_trait]
impl Platform for Feishu {
    type Target = Receiver;
    type Job = Job;

    fn texts(&self) -> Texts {
        Texts(self.cards.locale())
    }

    async fn post_digest(&self, receiver: &Receiver, sheet: &Sheet) -> Result<String, Failure> {
        // The uuid makes a retried send answer with the card already sent.
        let uuid = send_uuid(
            &format!("digest:{}:{}", sheet.session, sheet.first),
            receiver,
        );
        let card = super::digest::card(&self.cards, sheet);
        self.api
            .send_card(receiver, &card, &uuid)
            .await
            .map_err(failure)
    }

    async fn edit_digest(
        &self,
        _address: &str,
        message: &str,
        sheet: &Sheet,
    ) -> Result<Edited, Failure> {
        let card = super::digest::card(&self.cards, sheet);
        self.api
            .update_card(message, &card)
            .await
            .map_err(failure)?;
        Ok(Edited::Done)
    }

    fn channel(&self) -> &'static str {
        CHANNEL
    }

    fn address(&self, receiver: &Receiver) -> String {
        receiver.address()
    }

    async fn post(
        &self,
        i: &Interaction,
        receiver: &Receiver,
        _job: &OutboxJob,
    ) -> Result<Posted, Failure> {
        // The uuid makes a retried send answer with the message already sent.
        let message_id = self
            .api
            .send_card(
                receiver,
                &self.cards.render(i),
                &send_uuid(&i.incarnation(), receiver),
            )
            .await
            .map_err(failure)?;
        Ok(Posted {
            message_ref: message_id,
            state: Some(json!({ "receiver": receiver })),
        })
    }

    fn threads(&self) -> Option<&Threads> {
        Some(&self.threads)
    }

    /// A first message naming the session: its thread holds the session's cards.
    async fn open_thread(&self, receiver: &Receiver, opener: &Opener) -> Result<String, Failure> {
        let text = opener.lines(self.cards.locale()).join("\n");
        let uuid = send_uuid(
            &format!("thread:{}:{}", opener.agent, opener.session),
            receiver,
        );
        self.api
            .send_text_to(receiver, &text, &uuid)
            .await
            .map_err(failure)
    }

    /// The card as a reply in the thread of the session's first message.
    async fn post_in_thread(
        &self,
        i: &Interaction,
        receiver: &Receiver,
        _job: &OutboxJob,
        thread: &str,
    ) -> Result<Posted, Failure> {
        let uuid = send_uuid(&i.incarnation(), receiver);
        let message_id = self
            .api
            .reply(thread, "interactive", &self.cards.render(i), true, &uuid)
            .await
            .map_err(failure)?;
        Ok(Posted {
            message_ref: message_id,
            state: Some(json!({ "receiver": receiver, "thread": thread })),
        })
    }

    fn replies_steer(&self) -> bool {
        true
    }

    fn thread_replies(&self) -> bool {
        self.thread_replies
    }

    /// The outcome as a reply in the card's thread.
    async fn reply_outcome(&self, i: &Interaction, m: &ChannelMessage) -> Result<(), Failure> {
        let Some(line) = outcome_line(i, self.cards.locale()) else {
            return Ok(());
        };
        let Ok(receiver) = m.address.parse::<Receiver>() else {
            return Ok(());
        };
        let uuid = send_uuid(
            &format!("outcome:{}:{}", i.incarnation(), m.message_ref),
            &receiver,
        );
        self.api
            .reply(
                &m.message_ref,
                "text",
                &json!({ "text": line }),
                true,
                &uuid,
            )
            .await
            .map_err(failure)?;
        Ok(())
    }

    async fn show(&self, i: &Interaction, m: &ChannelMessage) -> Result<(), Failure> {
        // A pending interaction's card carries its buttons and the votes so far.
        self.edit(i, m).await
    }

    async fn edit(&self, i: &Interaction, m: &ChannelMessage) -> Result<(), Failure> {
        self.api
            .update_card(&m.message_ref, &self.cards.render(i))
            .await
            .map_err(failure)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::outbox::Delivery;

    #[test]
    fn throttling_is_retried_after_the_platforms_wait_and_a_refusal_is_for_good() {
        let hint = Duration::from_secs(3);
        let f = failure(ApiError::Throttled {
            code: 99991400,
            retry_after: Some(hint),
        });
        assert!(matches!(f.delivery(), Delivery::Retry { after: Some(a), .. } if a == hint));
        let f = failure(ApiError::Throttled {
            code: 99991400,
            retry_after: None,
        });
        assert!(
            matches!(f.delivery(), Delivery::Retry { after: None, .. }),
            "{f:?}"
        );
    }
}
