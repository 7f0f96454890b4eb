//! Posting and updating Slack messages through the durable outbox, on the shared delivery
//! skeleton ([`crate::channels::messages`]).
//!
//! A new interaction plans one `post` job per configured conversation; a resolution (an
//! answer from anywhere, expiry, withdrawal) plans one `update` job that runs `chat.update`
//! on every copy recorded for it. Slack allows about one message a second per conversation
//! over time: requests to one conversation are spaced by [`CHANNEL_GAP`], an HTTP 429 keeps
//! that conversation quiet for the `Retry-After` Slack gave and the job is retried after it.
//! A Slack outage only delays Slack's jobs: the outbox retries them on their own and every
//! other channel carries on.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use serde_json::json;

use super::CHANNEL;
use super::api::{ApiError, NewMessage, Retry, WebApi};
use super::blocks::Blocks;
use crate::channels::messages::{Failure, Messages, Pacer, Platform, Posted};
use crate::health::Health;
use crate::interaction::{Interaction, Lifecycle};
use crate::outbox::{ChannelJob, Delivery, OutboxHandler, created_window, resolved_window};
use crate::store::{ChannelMessage, ClaimedJob, OutboxJob, Store};

/// Smallest gap between two requests to one conversation.
pub(crate) const CHANNEL_GAP: Duration = Duration::from_secs(1);
/// How long a throttled conversation is kept quiet when Slack does not say.
pub(crate) const THROTTLE_PAUSE: Duration = Duration::from_secs(1);

/// What the channel's outbox does.
#[derive(Debug, serde::Serialize, serde::Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub(crate) enum Job {
    /// Post the message of a new interaction to one conversation.
    Post {
        /// The conversation id (`C...`, `G...`, `D...`) or a user id.
        channel: String,
    },
    /// Update every message of a resolved interaction to its outcome.
    Update,
}

impl ChannelJob for Job {
    fn channel(&self) -> std::borrow::Cow<'static, str> {
        CHANNEL.into()
    }
}

/// Plans the channel's outbox jobs inside each state change's transaction.
pub(crate) struct Planner {
    /// Where messages go.
    pub channels: Vec<String>,
}

impl Lifecycle for Planner {
    fn plan_created(&self, i: &Interaction, jobs: &mut Vec<OutboxJob>) {
        let (from, until) = created_window(i);
        // A routed interaction goes to its route's conversations (and people's DMs) only.
        let routed: Option<Vec<String>> = i
            .route
            .as_deref()
            .and_then(|r| r.addresses(super::CHANNEL))
            .map(|to| to.map(str::to_string).collect());
        for c in routed.as_ref().unwrap_or(&self.channels) {
            let job = Job::Post { channel: c.clone() };
            jobs.push(job.plan(i, &[c], from, until));
        }
    }

    fn plan_resolved(&self, i: &Interaction, jobs: &mut Vec<OutboxJob>) {
        if self.channels.is_empty() {
            return;
        }
        let (from, until) = resolved_window(i);
        jobs.push(Job::Update.plan(i, &[], from, until));
    }
}

/// What a failed Web API call means for the job.
pub(crate) fn failure(e: &ApiError) -> Failure {
    match e.retry() {
        Retry::After(d) => Failure::Throttled {
            after: Some(d),
            error: e.to_string(),
        },
        Retry::Transient => Failure::Transient(e.to_string()),
        Retry::Permanent => Failure::Permanent(e.to_string()),
    }
}

/// Slack as the delivery skeleton sees it.
pub(crate) struct Slack {
    /// The Web API client.
    pub api: Arc<WebApi>,
    /// Block Kit rendering.
    pub blocks: Blocks,
    /// Whether the outcome is also posted as a reply in each message's thread.
    pub thread_replies: bool,
}

#[async_trait]
impl Platform for Slack {
    type Target = String;

    fn channel(&self) -> &'static str {
        CHANNEL
    }

    fn address(&self, channel: &String) -> String {
        channel.clone()
    }

    async fn post(
        &self,
        i: &Interaction,
        channel: &String,
        _job: &OutboxJob,
    ) -> Result<Posted, Failure> {
        let (text, blocks) = self.blocks.message(i);
        let posted = self
            .api
            .post_message(&NewMessage {
                channel,
                text: &text,
                blocks: Some(&blocks),
                thread_ts: None,
            })
            .await
            .map_err(|e| failure(&e))?;
        // A user id given as the channel comes back as the id of the direct conversation,
        // which is what chat.update needs.
        Ok(Posted {
            message_ref: posted.ts,
            state: Some(json!({ "channel": posted.channel })),
        })
    }

    async fn edit(&self, i: &Interaction, m: &ChannelMessage) -> Result<(), Failure> {
        let channel = m
            .state
            .as_ref()
            .and_then(|s| s["channel"].as_str())
            .unwrap_or(&m.address);
        let (text, blocks) = self.blocks.message(i);
        self.api
            .update(channel, &m.message_ref, &text, &blocks)
            .await
            .map_err(|e| failure(&e))?;
        if self.thread_replies
            && let Some((text, blocks)) = self.blocks.outcome_reply(i)
        {
            // The message itself shows the outcome already: a reply that fails is logged,
            // not retried (a retry would update the message again for nothing).
            let reply = NewMessage {
                channel,
                text: &text,
                blocks: Some(&blocks),
                thread_ts: Some(&m.message_ref),
            };
            if let Err(e) = self.api.post_message(&reply).await {
                tracing::warn!(id = %i.id, channel, error = %e, "slack: cannot post the outcome in the thread");
            }
        }
        Ok(())
    }
}

/// The pacer for Slack's posting rate per conversation.
pub(crate) fn pacer() -> Pacer {
    Pacer::new(CHANNEL_GAP, THROTTLE_PAUSE)
}

/// Delivers the channel's jobs.
pub(crate) struct Deliverer(pub Messages<Slack>);

impl Deliverer {
    /// The deliverer of Slack's jobs, reporting to `health`.
    pub fn new(slack: Slack, store: Arc<dyn Store>, health: Arc<Health>) -> Self {
        Deliverer(Messages {
            platform: slack,
            store,
            pacer: pacer(),
            health: Some((health, "slack_api")),
        })
    }
}

#[async_trait]
impl OutboxHandler for Deliverer {
    async fn deliver(&self, job: &ClaimedJob) -> Delivery {
        match Job::read(&job.job) {
            Ok(Job::Post { channel }) => self.0.post(&job.job, &channel).await,
            Ok(Job::Update) => self.0.finalize_all(&job.job).await,
            Err(failed) => failed,
        }
    }

    fn concurrency(&self) -> usize {
        4
    }
}
