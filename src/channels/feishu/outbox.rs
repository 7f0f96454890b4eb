//! Posting and updating cards through the durable outbox, on the shared delivery skeleton
//! (`channels::messages`).
//!
//! A new interaction plans one `send` job per receiver; a resolution plans one `update` job
//! that PATCHes every card recorded for it. Sends carry a dedupe `uuid`, so a retried send
//! never posts twice; every posted card is recorded in the store, so updates find it after a
//! restart. Requests to one chat are spaced to respect the platform's 5 QPS per chat, and
//! throttling answers push that chat back.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use serde_json::json;

use super::api::{ApiError, OpenApi, send_uuid};
use super::card::Cards;
use super::settings::Receiver;
use crate::channels::messages::{Failure, Messages, Pacer, Platform, Posted};
use crate::health::Health;
use crate::interaction::{Interaction, Lifecycle};
use crate::outbox::{ChannelJob, Delivery, OutboxHandler, created_window, resolved_window};
use crate::store::{ChannelMessage, ClaimedJob, OutboxJob, Store};

/// The outbox channel name.
pub const CHANNEL: &str = "feishu";
/// Smallest gap between two requests to one chat (5 per second).
pub(crate) const CHAT_GAP: Duration = Duration::from_millis(200);
/// How long a throttled chat is kept quiet when the platform does not say.
pub(crate) const THROTTLE_PAUSE: Duration = Duration::from_secs(1);
/// What the channel's outbox does.
#[derive(Debug, serde::Serialize, serde::Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub(crate) enum Job {
    /// Post the card of a new interaction to one receiver.
    Send {
        /// Where.
        receiver: Receiver,
    },
    /// Update every card of a resolved interaction to its outcome.
    Update,
}

impl ChannelJob for Job {
    fn channel(&self) -> std::borrow::Cow<'static, str> {
        CHANNEL.into()
    }
}

/// Plans the channel's outbox jobs inside each state change's transaction.
pub(crate) struct Planner {
    /// Where cards go.
    pub receivers: Vec<Receiver>,
}

impl Lifecycle for Planner {
    fn plan_created(&self, i: &Interaction, jobs: &mut Vec<OutboxJob>) {
        let (from, until) = created_window(i);
        // A routed interaction goes to its route's receivers (and people's direct chats) only.
        let routed: Option<Vec<Receiver>> = i
            .route
            .as_deref()
            .and_then(|r| r.addresses(CHANNEL))
            .map(|to| to.filter_map(|a| a.parse().ok()).collect());
        for r in routed.as_ref().unwrap_or(&self.receivers) {
            let job = Job::Send {
                receiver: r.clone(),
            };
            jobs.push(job.plan(i, &[&r.address()], from, until));
        }
    }

    fn plan_resolved(&self, i: &Interaction, jobs: &mut Vec<OutboxJob>) {
        if self.receivers.is_empty() {
            return;
        }
        let (from, until) = resolved_window(i);
        jobs.push(Job::Update.plan(i, &[], from, until));
    }
}

/// Feishu as the delivery skeleton sees it.
pub(crate) struct Feishu {
    /// The platform client.
    pub api: Arc<OpenApi>,
    /// Card rendering.
    pub cards: Cards,
}

/// The pacer for Feishu's 5 requests per second per chat.
pub(crate) fn pacer() -> Pacer {
    Pacer::new(CHAT_GAP, THROTTLE_PAUSE)
}

/// What a failed platform call means: throttling is retried after the platform's wait if it
/// gave one (and the chat kept quiet), a refusal is for good, anything else is retried.
fn failure(e: ApiError) -> Failure {
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
            Ok(Job::Send { receiver }) => self.0.post(&job.job, &receiver).await,
            Ok(Job::Update) => self.0.finalize_all(&job.job).await,
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
    use crate::channels::feishu::settings::ReceiverType;
    use crate::interaction::InteractionId;
    use jiff::Timestamp;

    fn interaction(created_ms: i64) -> Interaction {
        let created_at = Timestamp::from_millisecond(created_ms).unwrap();
        Interaction {
            deadline: created_at,
            ..Interaction::pending(
                InteractionId::parse("toolu_reused").unwrap(),
                "Bash",
                serde_json::Map::new(),
                created_at,
                300,
            )
        }
    }

    #[test]
    fn a_reused_id_gets_fresh_job_keys() {
        let planner = Planner {
            receivers: vec![Receiver {
                kind: ReceiverType::ChatId,
                id: "oc_1".into(),
            }],
        };
        let jobs = |i: &Interaction| {
            let mut jobs = Vec::new();
            planner.plan_created(i, &mut jobs);
            planner.plan_resolved(i, &mut jobs);
            jobs
        };
        let keys = |i: &Interaction| jobs(i).into_iter().map(|j| j.key).collect::<Vec<_>>();
        let (old, new) = (
            interaction(1_700_000_000_000),
            interaction(1_700_000_086_400),
        );
        let old_keys = keys(&old);
        assert_eq!(old_keys.len(), 2);
        for k in &old_keys {
            assert!(k.contains("toolu_reused:1700000000000"), "{k}");
            assert!(!keys(&new).contains(k), "{k} is planned again");
        }
        // The same interaction plans the same keys (a repeat stays deduplicated).
        assert_eq!(keys(&old), old_keys);
        // And the old interaction's jobs do nothing for the new one.
        for j in jobs(&old) {
            assert!(j.is_for(&old) && !j.is_for(&new), "{}", j.key);
        }
    }

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
