//! Outbox delivery for Telegram, on the shared delivery skeleton
//! ([`crate::channels::messages`]): `post` jobs send a prompt to one chat, `resolved` jobs
//! edit every recorded message of an interaction to its final state.
//!
//! Telegram's own part, as the skeleton's hooks: a `post` job finds its message by the job's
//! key (so a redelivered job does not post twice, and a `/pending` re-post is a copy of its
//! own); it records the button handle before sending, so a tap that arrives before the
//! message is recorded still finds its interaction; it records the message under the
//! message's lock, keeping state a tap may have recorded already; the final edit falls back to
//! plain text, then to removing the buttons, and holds the message's lock. The teloxide
//! throttle paces requests, so the skeleton's pacer is off.
//!
//! A chat is a place of the kit's (its id as a text); a place that is no chat id is refused
//! for good.

use async_trait::async_trait;
use serde_json::Value;

use super::api::{Edited, Failure as TgFailure};
use super::render::{self, Buttons};
use super::state::{MessageState, PromptState};
use super::{CHANNEL, Job, Telegram};
use crate::channels::digest::{Edited as DigestEdited, Sheet};
use crate::channels::digest_texts::Texts;
use crate::channels::messages::{Failure, Hold, Messages, Pacer, Platform, Posted};
use crate::channels::plan::is_first_post;
use crate::channels::threads::{Opener, Threads, outcome_line};
use crate::interaction::Interaction;
use crate::store::{ChannelMessage, OutboxJob, Store, StoreError};

/// What a Bot API failure means for the job.
pub(super) fn failure(f: TgFailure) -> Failure {
    match f {
        TgFailure::RetryAfter(after) => Failure::Throttled {
            after: Some(after),
            error: format!(
                "rate limited by Telegram: retry after {} s",
                after.as_secs()
            ),
        },
        TgFailure::Transient(e) => Failure::Transient(e),
        TgFailure::Permanent(e) => Failure::Permanent(e),
    }
}

/// The chat and message id a recorded message names.
fn ids(m: &ChannelMessage) -> Option<(i64, i32)> {
    Some((m.address.parse().ok()?, m.message_ref.parse().ok()?))
}

/// The forum topic a recorded prompt was posted in, if any.
fn topic_of(m: &ChannelMessage) -> Option<i32> {
    match MessageState::from_stored(m.state.as_ref()) {
        MessageState::Prompt(p) => p.topic,
        MessageState::Reply(_) => None,
    }
}

/// The chat a place names.
fn chat(place: &str) -> Result<i64, Failure> {
    place
        .parse()
        .map_err(|_| Failure::Permanent(format!("{place:?} is not a Telegram chat id")))
}

/// Telegram as the delivery skeleton sees it: the running channel, owned (the kit's outbox
/// handler) or borrowed (a tap that shows an outcome at once).
pub(super) struct Tg<T>(pub(super) T);

#[async_trait]
impl<T: std::ops::Deref<Target = Telegram> + Send + Sync> Platform for Tg<T> {
    type Target = String;
    type Job = Job;

    /// The throttle queues every call, so more jobs may wait in it than the outbox's
    /// default.
    fn concurrency(&self) -> usize {
        8
    }

    /// Telegram's texts are in English.
    fn texts(&self) -> Texts {
        Texts(self.0.settings.locale)
    }

    /// The throttle allows one message a second to a person and twenty a minute to a group.
    fn pace(&self, address: &str) -> Option<std::time::Duration> {
        let group = address.starts_with('-');
        Some(std::time::Duration::from_secs(if group { 3 } else { 1 }))
    }

    async fn post_digest(&self, place: &String, sheet: &Sheet) -> Result<String, Failure> {
        let chat = chat(place)?;
        let (text, keyboard) = self.0.digest_message(chat, sheet);
        let sent = self.0.client.send(chat, text, keyboard, None).await;
        Ok(sent.map_err(failure)?.to_string())
    }

    async fn edit_digest(
        &self,
        address: &str,
        message: &str,
        sheet: &Sheet,
    ) -> Result<DigestEdited, Failure> {
        let (Ok(chat), Ok(message)) = (address.parse::<i64>(), message.parse::<i32>()) else {
            return Ok(DigestEdited::Gone);
        };
        let (text, keyboard) = self.0.digest_message(chat, sheet);
        match self.0.client.edit(chat, message, text, keyboard).await {
            Ok(Edited::Done) => Ok(DigestEdited::Done),
            Ok(Edited::Gone(_)) => Ok(DigestEdited::Gone),
            Err(f) => Err(failure(f)),
        }
    }

    fn channel(&self) -> &'static str {
        CHANNEL
    }

    /// A reply to a session's prompt is read by Telegram's own inbound code; a reply to its
    /// digest by the kit's (`channels::steer`).
    fn digests_steer(&self) -> bool {
        true
    }

    /// A message id is unique in its chat only: a digest is named `<chat>:<message id>`.
    fn digest_reply_ref(&self, address: &str, message: &str) -> (String, Option<Value>) {
        (format!("{address}:{message}"), None)
    }

    fn address(&self, place: &String) -> String {
        place.clone()
    }

    fn is_copy_of(&self, m: &ChannelMessage, address: &str, job: &OutboxJob) -> bool {
        m.address == address
            && matches!(MessageState::from_stored(m.state.as_ref()),
                MessageState::Prompt(p) if p.job.as_deref() == Some(job.key.as_str()))
    }

    /// A first post only to a chat still listed (a `/pending` re-post was checked when
    /// asked).
    fn still_wanted(&self, place: &String, job: &OutboxJob) -> bool {
        !is_first_post::<Job>(CHANNEL, job) || chat(place).is_ok_and(|c| self.0.is_chat(c))
    }

    async fn before_post(&self, i: &Interaction) -> Result<(), StoreError> {
        self.0.record_handle(i).await.map(|_| ())
    }

    async fn post(
        &self,
        i: &Interaction,
        place: &String,
        job: &OutboxJob,
    ) -> Result<Posted, Failure> {
        self.post_to(i, chat(place)?, job, None).await
    }

    fn threads(&self) -> Option<&Threads> {
        Some(&self.0.threads)
    }

    /// A forum topic named after the session, whose first message names it in full.
    async fn open_thread(&self, place: &String, opener: &Opener) -> Result<String, Failure> {
        let chat = chat(place)?;
        let topic = self
            .0
            .client
            .create_topic(chat, opener.title(128))
            .await
            .map_err(failure)?;
        let text = render::escape(&opener.lines(self.0.settings.locale).join("\n"));
        self.0
            .client
            .send_in(chat, Some(topic), text, None, None)
            .await
            .map_err(failure)?;
        Ok(topic.to_string())
    }

    async fn post_in_thread(
        &self,
        i: &Interaction,
        place: &String,
        job: &OutboxJob,
        thread: &str,
    ) -> Result<Posted, Failure> {
        let topic = thread.parse::<i32>().ok();
        self.post_to(i, chat(place)?, job, topic).await
    }

    async fn close_thread(&self, address: &str, thread: &str) -> Result<(), Failure> {
        let (Ok(chat), Ok(topic)) = (address.parse::<i64>(), thread.parse::<i32>()) else {
            return Ok(());
        };
        self.0
            .client
            .close_topic(chat, topic)
            .await
            .map_err(failure)
    }

    fn thread_replies(&self) -> bool {
        self.0.settings.thread_replies
    }

    /// The outcome as a reply to the prompt (in its topic, where the prompt is).
    async fn reply_outcome(&self, i: &Interaction, m: &ChannelMessage) -> Result<(), Failure> {
        let (Some((chat, message)), Some(line)) = (ids(m), outcome_line(i, self.0.settings.locale))
        else {
            return Ok(());
        };
        let topic = topic_of(m);
        self.0
            .client
            .send_in(chat, topic, render::escape(&line), None, Some(message))
            .await
            .map_err(failure)?;
        Ok(())
    }

    async fn record(
        &self,
        store: &dyn Store,
        mut m: ChannelMessage,
        job: &OutboxJob,
    ) -> Result<ChannelMessage, StoreError> {
        let _guard = match ids(&m) {
            Some((chat, message)) => Some(self.0.lock(chat, message).await),
            None => None,
        };
        // A tap may have recorded state on it already (it can arrive before this point).
        if let Ok(Some(existing)) = store.message(CHANNEL, &m.address, &m.message_ref).await {
            let state = match MessageState::from_stored(existing.state.as_ref()) {
                MessageState::Prompt(mut p) => {
                    p.job = Some(job.key.clone());
                    p.topic = p.topic.or(topic_of(&m));
                    MessageState::Prompt(p)
                }
                other => other,
            };
            m.state = Some(state.to_stored());
        }
        // On failure the skeleton retries, which re-sends (a duplicate); not retrying would
        // leave this copy out of the final edit. Its buttons work either way (the handle is
        // recorded).
        store.record_message(m.clone()).await?;
        Ok(m)
    }

    async fn hold<'b>(&'b self, m: &ChannelMessage) -> Hold<'b> {
        let (chat, message) = ids(m)?;
        Some(Box::new(self.0.lock(chat, message).await))
    }

    fn is_final(&self, m: &ChannelMessage) -> bool {
        MessageState::from_stored(m.state.as_ref()).is_final()
    }

    fn final_state(&self, m: &ChannelMessage) -> Value {
        let mut state = MessageState::from_stored(m.state.as_ref());
        state.set_final();
        state.to_stored()
    }

    async fn show(&self, i: &Interaction, m: &ChannelMessage) -> Result<(), Failure> {
        let Some((chat, message)) = ids(m) else {
            return Ok(());
        };
        let MessageState::Prompt(state) = MessageState::from_stored(m.state.as_ref()) else {
            return Ok(());
        };
        let handle = self.0.codec.handle(i);
        let p = render::prompt(
            i,
            &state,
            &Buttons {
                codec: &self.0.codec,
                handle: &handle,
                inbox: self.0.inbox.as_deref(),
                words: self.0.words(),
            },
        );
        self.0
            .client
            .edit(chat, message, p.text, Some(p.keyboard))
            .await
            .map_err(failure)?;
        Ok(())
    }

    async fn edit(&self, i: &Interaction, m: &ChannelMessage) -> Result<(), Failure> {
        let Some((chat, message)) = ids(m) else {
            return Ok(());
        };
        let text = match MessageState::from_stored(m.state.as_ref()) {
            MessageState::Prompt(_) => render::resolved(i, self.0.words()),
            MessageState::Reply(_) => render::reply_closed(i, self.0.words()),
        };
        match self
            .0
            .final_edit(i, chat, message, text)
            .await
            .map_err(failure)?
        {
            Edited::Done => {}
            Edited::Gone(why) => {
                tracing::info!(id = %i.id, chat, message, reason = %why, "telegram: message can no longer be edited");
            }
        }
        Ok(())
    }
}

impl<T: std::ops::Deref<Target = Telegram> + Send + Sync> Tg<T> {
    /// Posts the prompt of `i` to `chat`, into forum topic `topic` when given.
    async fn post_to(
        &self,
        i: &Interaction,
        chat: i64,
        job: &OutboxJob,
        topic: Option<i32>,
    ) -> Result<Posted, Failure> {
        let handle = self.0.codec.handle(i);
        let state = PromptState {
            topic,
            ..PromptState::posted_by(&job.key)
        };
        let p = render::prompt(
            i,
            &state,
            &Buttons {
                codec: &self.0.codec,
                handle: &handle,
                inbox: self.0.inbox.as_deref(),
                words: self.0.words(),
            },
        );
        let message_id = self
            .0
            .client
            .send_in(chat, topic, p.text, Some(p.keyboard), None)
            .await
            .map_err(failure)?;
        Ok(Posted {
            message_ref: message_id.to_string(),
            state: Some(MessageState::Prompt(state).to_stored()),
        })
    }
}

impl Telegram {
    /// The delivery skeleton over this channel, for what a tap shows at once.
    pub(super) fn messages(&self) -> Messages<Tg<&Self>> {
        Messages {
            platform: Tg(self),
            digests: self.digests.clone(),
            store: self.store.clone(),
            pacer: Pacer::off(),
            health: None,
        }
    }

    /// Edits one recorded message to show `i`'s outcome and removes its keyboard, unless it
    /// already does.
    pub(super) async fn finalize_message(
        &self,
        i: &Interaction,
        m: &ChannelMessage,
    ) -> Result<(), Failure> {
        self.messages().finalize(i, m).await
    }

    /// Shows the outcome on a message and removes its buttons. When Telegram refuses the
    /// HTML text for good ("can't parse entities", "message is too long"), it falls back to
    /// a short plain-text outcome, and if that is refused too, to removing the buttons only:
    /// a resolved prompt must never keep live buttons.
    async fn final_edit(
        &self,
        i: &Interaction,
        chat: i64,
        message: i32,
        html: String,
    ) -> Result<Edited, TgFailure> {
        let why = match self.client.edit(chat, message, html, None).await {
            Err(TgFailure::Permanent(why)) => why,
            other => return other,
        };
        tracing::warn!(id = %i.id, chat, message, error = %why,
            "telegram: the final text was refused; showing the outcome as plain text");
        let why = match self
            .client
            .edit_plain(chat, message, render::outcome_plain(i, self.words()))
            .await
        {
            Err(TgFailure::Permanent(why)) => why,
            other => return other,
        };
        tracing::warn!(id = %i.id, chat, message, error = %why,
            "telegram: the plain outcome was refused too; removing the buttons only");
        self.client.remove_keyboard(chat, message).await
    }
}
