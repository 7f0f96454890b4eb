//! Posting and updating Slack messages through the durable outbox, on the shared delivery
//! skeleton ([`crate::channels::messages`]): a `post` job posts to one conversation, an
//! `update` job runs `chat.update` on every copy recorded for the interaction. Slack allows
//! about one message a second per conversation over time: requests to one conversation are
//! spaced by [`CHANNEL_GAP`], an HTTP 429 keeps that conversation quiet for the
//! `Retry-After` Slack gave and the job is retried after it. A Slack outage only delays
//! Slack's jobs: the outbox retries them on their own and every other channel carries on.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use serde_json::{Value, json};

use super::CHANNEL;
use super::Job;
use super::api::{ApiError, NewMessage, Retry, WebApi};
use super::digest::{self, DigestButtons};
use super::render::{Blocks, escape};
use crate::channels::digest::{Edited, Sheet};
use crate::channels::digest_texts::Texts;
use crate::channels::messages::{Failure, Pacer, Platform, Posted};
use crate::channels::threads::{Opener, Threads};
use crate::interaction::Interaction;
use crate::store::{ChannelMessage, OutboxJob};

/// Smallest gap between two requests to one conversation.
pub(crate) const CHANNEL_GAP: Duration = Duration::from_secs(1);
/// How long a throttled conversation is kept quiet when Slack does not say.
pub(crate) const THROTTLE_PAUSE: Duration = Duration::from_secs(1);

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
    /// A thread per agent session (`thread_per`): under the session's first message.
    pub threads: Threads,
    /// Signs digest buttons.
    pub digest_buttons: DigestButtons,
    /// The language of digests.
    pub texts: Texts,
}

#[async_trait]
impl Platform for Slack {
    type Target = String;
    type Job = Job;

    fn texts(&self) -> Texts {
        self.texts
    }

    async fn post_digest(&self, channel: &String, sheet: &Sheet) -> Result<String, Failure> {
        let (text, blocks) = digest::message(&self.digest_buttons, sheet);
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
        Ok(format!("{}:{}", posted.channel, posted.ts))
    }

    async fn edit_digest(
        &self,
        _address: &str,
        message: &str,
        sheet: &Sheet,
    ) -> Result<Edited, Failure> {
        let Some((channel, ts)) = message.split_once(':') else {
            return Ok(Edited::Gone);
        };
        let (text, blocks) = digest::message(&self.digest_buttons, sheet);
        match self.api.update(channel, ts, &text, &blocks).await {
            Ok(()) => Ok(Edited::Done),
            Err(e) => match failure(&e) {
                // Deleted in the conversation: a new one is posted.
                Failure::Permanent(_) if e.to_string().contains("message_not_found") => {
                    Ok(Edited::Gone)
                }
                f => Err(f),
            },
        }
    }

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
        self.post_to(i, channel, None).await
    }

    fn threads(&self) -> Option<&Threads> {
        Some(&self.threads)
    }

    async fn open_thread(&self, channel: &String, opener: &Opener) -> Result<String, Failure> {
        let text = escape(&opener.lines(self.texts.0).join("\n"));
        let posted = self
            .api
            .post_message(&NewMessage {
                channel,
                text: &text,
                blocks: None,
                thread_ts: None,
            })
            .await
            .map_err(|e| failure(&e))?;
        // A thread is the `ts` of its first message.
        Ok(posted.ts)
    }

    async fn post_in_thread(
        &self,
        i: &Interaction,
        channel: &String,
        _job: &OutboxJob,
        thread: &str,
    ) -> Result<Posted, Failure> {
        self.post_to(i, channel, Some(thread)).await
    }

    fn digest_reply_ref(&self, _address: &str, message: &str) -> (String, Option<Value>) {
        // `<channel>:<ts>`: a reply in its thread names the ts, in that channel.
        match message.split_once(':') {
            Some((channel, ts)) => (ts.to_string(), Some(json!({ "channel": channel }))),
            None => (message.to_string(), None),
        }
    }

    fn replies_steer(&self) -> bool {
        true
    }

    fn thread_replies(&self) -> bool {
        self.thread_replies
    }

    async fn reply_outcome(&self, i: &Interaction, m: &ChannelMessage) -> Result<(), Failure> {
        let Some((text, blocks)) = self.blocks.outcome_reply(i) else {
            return Ok(());
        };
        let reply = NewMessage {
            channel: Self::conversation(m),
            text: &text,
            blocks: Some(&blocks),
            // A copy in a session's thread is answered in that thread (Slack threads are
            // one level deep: a reply names the thread's first message).
            thread_ts: Some(
                m.state
                    .as_ref()
                    .and_then(|s| s["thread"].as_str())
                    .unwrap_or(&m.message_ref),
            ),
        };
        self.api
            .post_message(&reply)
            .await
            .map_err(|e| failure(&e))?;
        Ok(())
    }

    async fn show(&self, i: &Interaction, m: &ChannelMessage) -> Result<(), Failure> {
        // A pending interaction's message carries its buttons and the votes so far.
        let (text, blocks) = self.blocks.message(i);
        self.api
            .update(Self::conversation(m), &m.message_ref, &text, &blocks)
            .await
            .map_err(|e| failure(&e))
    }

    async fn edit(&self, i: &Interaction, m: &ChannelMessage) -> Result<(), Failure> {
        let (text, blocks) = self.blocks.message(i);
        self.api
            .update(Self::conversation(m), &m.message_ref, &text, &blocks)
            .await
            .map_err(|e| failure(&e))
    }
}

impl Slack {
    /// The conversation a recorded copy is in.
    fn conversation(m: &ChannelMessage) -> &str {
        m.state
            .as_ref()
            .and_then(|s| s["channel"].as_str())
            .unwrap_or(&m.address)
    }

    /// Posts the prompt of `i` to `channel`, in thread `thread` when given.
    async fn post_to(
        &self,
        i: &Interaction,
        channel: &str,
        thread: Option<&str>,
    ) -> Result<Posted, Failure> {
        let (text, blocks) = self.blocks.message(i);
        let posted = self
            .api
            .post_message(&NewMessage {
                channel,
                text: &text,
                blocks: Some(&blocks),
                thread_ts: thread,
            })
            .await
            .map_err(|e| failure(&e))?;
        // A user id given as the channel comes back as the id of the direct conversation,
        // which is what chat.update needs.
        let state = match thread {
            Some(t) => json!({ "channel": posted.channel, "thread": t }),
            None => json!({ "channel": posted.channel }),
        };
        Ok(Posted {
            message_ref: posted.ts,
            state: Some(state),
        })
    }
}

/// The pacer for Slack's posting rate per conversation.
pub(crate) fn pacer() -> Pacer {
    Pacer::new(CHANNEL_GAP, THROTTLE_PAUSE)
}
