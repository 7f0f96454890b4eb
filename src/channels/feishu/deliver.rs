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
use crate::channels::messages::{Failure, Messages, Pacer, Platform, Posted};
use crate::health::Health;
use crate::interaction::Interaction;
use crate::outbox::{ChannelJob, Delivery, OutboxHandler};
use crate::store::{ChannelMessage, ClaimedJob, OutboxJob, Store};

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
    /// The digests of sessions with many interactions pending (`feishu.digest_after`).
    pub digests: crate::channels::digest::Digests,
    /// Where cards go when an interaction names no route.
    pub receivers: Vec<Receiver>,
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

/// Delivers the channel's jobs.
pub(crate) struct Deliverer(pub Messages<Feishu>);

impl Deliverer {
    /// The deliverer of `feishu`'s jobs, reporting to `health`.
    pub fn new(feishu: Feishu, store: Arc<dyn Store>, health: Arc<Health>) -> Self {
        Deliverer(Messages {
            platform: feishu,
            store,
            pacer: pacer(),
            health: Some((health, "feishu_api")),
        })
    }
}

#[async_trait]
impl OutboxHandler for Deliverer {
    async fn deliver(&self, job: &ClaimedJob) -> Delivery {
        match Job::read(&job.job) {
            Ok(Job::Send { receiver }) => match self.hold_for_digest(&job.job, &receiver).await {
                Some(held) => held,
                None => self.0.post(&job.job, &receiver).await,
            },
            Ok(Job::Update) => match self.digests_of_resolved(&job.job).await {
                Err(e) => Delivery::store_retry(e),
                Ok(()) => self.0.finalize_all(&job.job).await,
            },
            Ok(Job::Digest { receiver, session }) => self.refresh_digest(&receiver, &session).await,
            Ok(Job::Voted) => self.0.show_votes(&job.job).await,
            Err(failed) => failed,
        }
    }

    fn concurrency(&self) -> usize {
        4
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
