//! Posting and editing Discord messages through the durable outbox, on the kit's delivery
//! skeleton ([`crate::channels::messages`]): a `post` job posts to one channel (or opens the
//! direct-message channel of a person first), an `update` job edits every copy recorded for
//! the interaction, a `voted` job shows the votes so far, a `digest` job posts or edits one
//! session's digest (drawn by [`super::digest`]). Requests to one channel are spaced
//! by [`CHANNEL_GAP`] (Discord allows about five messages in five seconds per channel); a 429,
//! or a bucket Discord said is empty, keeps that channel quiet for the wait Discord gave and
//! the job is retried after it ([`super::api`] keeps the buckets and the global limit).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use serde_json::{Value, json};

use super::CHANNEL;
use super::Job;
use super::api::{ApiError, Rest, Retry};
use super::digest::{self, DigestButtons};
use super::render::Render;
use crate::channels::digest::{Edited, Sheet};
use crate::channels::digest_texts::Texts;
use crate::channels::messages::{Failure, Pacer, Platform, Posted};
use crate::channels::threads::{Opener, Threads, outcome_line};
use crate::interaction::Interaction;
use crate::store::{ChannelMessage, OutboxJob};
use crate::sync::LockExt;

/// Smallest gap between two requests to one channel.
pub(crate) const CHANNEL_GAP: Duration = Duration::from_millis(250);
/// How long a throttled channel is kept quiet when Discord does not say.
pub(crate) const THROTTLE_PAUSE: Duration = Duration::from_secs(1);
/// Most direct-message channels remembered.
const MAX_DMS: usize = 4096;

/// What a failed REST call means for the job.
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

/// Discord as the delivery skeleton sees it.
pub(crate) struct Discord {
    /// The REST client.
    pub rest: Arc<Rest>,
    /// Messages.
    pub render: Render,
    /// Direct-message channels opened, by user id.
    pub dms: Mutex<HashMap<String, String>>,
    /// Signs digest buttons.
    pub digest_buttons: DigestButtons,
    /// A thread per agent session (`discord.thread_per`).
    pub threads: Threads,
    /// Whether the outcome is also posted as a reply to each message.
    pub thread_replies: bool,
}

impl Discord {
    /// The channel id an address names: itself, or a person's direct-message channel.
    async fn channel_of(&self, address: &str) -> Result<String, Failure> {
        let Some(user) = address.strip_prefix('@') else {
            return Ok(address.to_string());
        };
        if let Some(dm) = self.dms.locked().get(user).cloned() {
            return Ok(dm);
        }
        let dm = self.rest.open_dm(user).await.map_err(|e| failure(&e))?;
        let mut dms = self.dms.locked();
        if dms.len() >= MAX_DMS {
            dms.clear();
        }
        dms.insert(user.to_string(), dm.clone());
        Ok(dm)
    }

    fn recorded_channel(m: &ChannelMessage) -> String {
        m.state
            .as_ref()
            .and_then(|s| s["channel"].as_str())
            .unwrap_or(&m.address)
            .to_string()
    }
}

#[async_trait]
impl Platform for Discord {
    type Target = String;
    type Job = Job;

    fn texts(&self) -> Texts {
        Texts(self.render.locale())
    }

    async fn post_digest(&self, to: &String, sheet: &Sheet) -> Result<String, Failure> {
        let channel = self.channel_of(to).await?;
        self.rest
            .post(&channel, &digest::message(&self.digest_buttons, sheet))
            .await
            .map_err(|e| failure(&e))
    }

    async fn edit_digest(
        &self,
        address: &str,
        message: &str,
        sheet: &Sheet,
    ) -> Result<Edited, Failure> {
        let channel = self.channel_of(address).await?;
        let body = digest::message(&self.digest_buttons, sheet);
        match self.rest.edit(&channel, message, &body).await {
            Ok(()) => Ok(Edited::Done),
            // Unknown Message: deleted in the channel; a new one is posted.
            Err(ApiError::Refused { code: 10008, .. }) => Ok(Edited::Gone),
            Err(e) => Err(failure(&e)),
        }
    }

    fn channel(&self) -> &'static str {
        CHANNEL
    }

    fn address(&self, target: &String) -> String {
        target.clone()
    }

    async fn post(
        &self,
        i: &Interaction,
        target: &String,
        _job: &OutboxJob,
    ) -> Result<Posted, Failure> {
        let channel = self.channel_of(target).await?;
        let id = self
            .rest
            .post(&channel, &self.render.message(i))
            .await
            .map_err(|e| failure(&e))?;
        Ok(Posted {
            message_ref: id,
            state: Some(json!({ "channel": channel })),
        })
    }

    fn threads(&self) -> Option<&Threads> {
        Some(&self.threads)
    }

    /// A first message naming the session, and a thread started from it.
    async fn open_thread(&self, target: &String, opener: &Opener) -> Result<String, Failure> {
        let channel = self.channel_of(target).await?;
        let text = opener.lines(self.render.locale()).join("\n");
        let first = self
            .rest
            .post(&channel, &self.render.plain(&text))
            .await
            .map_err(|e| failure(&e))?;
        self.rest
            .start_thread(&channel, &first, &opener.title(100))
            .await
            .map_err(|e| failure(&e))
    }

    async fn post_in_thread(
        &self,
        i: &Interaction,
        _target: &String,
        _job: &OutboxJob,
        thread: &str,
    ) -> Result<Posted, Failure> {
        // A thread is a channel of its own: the prompt is posted (and edited) there.
        let id = self
            .rest
            .post(thread, &self.render.message(i))
            .await
            .map_err(|e| failure(&e))?;
        Ok(Posted {
            message_ref: id,
            state: Some(json!({ "channel": thread })),
        })
    }

    async fn close_thread(&self, _address: &str, thread: &str) -> Result<(), Failure> {
        self.rest
            .close_thread(thread)
            .await
            .map_err(|e| failure(&e))
    }

    fn digest_reply_ref(&self, address: &str, message: &str) -> (String, Option<Value>) {
        // A direct message's digest is in the DM channel it was posted to.
        let dm = address
            .strip_prefix('@')
            .and_then(|user| self.dms.locked().get(user).cloned());
        (message.to_string(), dm.map(|c| json!({ "channel": c })))
    }

    fn replies_steer(&self) -> bool {
        true
    }

    fn thread_replies(&self) -> bool {
        self.thread_replies
    }

    /// The outcome as a reply to the prompt (`message_reference`), where the prompt is.
    async fn reply_outcome(&self, i: &Interaction, m: &ChannelMessage) -> Result<(), Failure> {
        let Some(line) = outcome_line(i, self.render.locale()) else {
            return Ok(());
        };
        let mut reply = self.render.plain(&line);
        reply["message_reference"] =
            json!({ "message_id": m.message_ref, "fail_if_not_exists": false });
        self.rest
            .post(&Self::recorded_channel(m), &reply)
            .await
            .map_err(|e| failure(&e))?;
        Ok(())
    }

    async fn show(&self, i: &Interaction, m: &ChannelMessage) -> Result<(), Failure> {
        self.edit(i, m).await
    }

    async fn edit(&self, i: &Interaction, m: &ChannelMessage) -> Result<(), Failure> {
        self.rest
            .edit(
                &Self::recorded_channel(m),
                &m.message_ref,
                &self.render.message(i),
            )
            .await
            .map_err(|e| failure(&e))
    }
}

/// The pacer for Discord's posting rate per channel.
pub(crate) fn pacer() -> Pacer {
    Pacer::new(CHANNEL_GAP, THROTTLE_PAUSE)
}
