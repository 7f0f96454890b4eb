//! Outbox delivery for Telegram: `post` jobs send a prompt to one chat, `resolved` jobs
//! edit every recorded message of an interaction to its final state.
//!
//! Both are idempotent. A `post` job records its message with the job's key, so a
//! redelivered job does not post twice; it records the button handle before sending, so a
//! tap that arrives before the message is recorded still finds its interaction. After
//! recording, it looks at the interaction again: a resolution that landed while the post was
//! in flight (and whose `resolved` job therefore did not see this message) is shown at once.
//! A `resolved` job marks each message final once edited, so a retry only touches what is
//! left.

use std::sync::Arc;

use async_trait::async_trait;
use jiff::Timestamp;

use super::client::{Edited, Failure};
use super::render::{self, Buttons};
use super::state::{MessageState, PromptState};
use super::{CHANNEL, Job, Telegram};
use crate::interaction::{Interaction, InteractionId};
use crate::outbox::{ChannelJob, Delivery, OutboxHandler};
use crate::store::{ChannelMessage, ClaimedJob, OutboxJob};

/// The outbox handler for the `telegram` channel.
pub(super) struct Deliverer(pub(super) Arc<Telegram>);

#[async_trait]
impl OutboxHandler for Deliverer {
    async fn deliver(&self, job: &ClaimedJob) -> Delivery {
        let Some(id) = job.job.interaction_id.clone() else {
            return Delivery::Failed("a telegram job without an interaction".into());
        };
        match Job::read(&job.job) {
            Ok(Job::Post { chat }) => self.0.deliver_post(&job.job, &id, chat).await,
            Ok(Job::Resolved) => self.0.deliver_resolved(&job.job, &id).await,
            Err(failed) => failed,
        }
    }

    fn concurrency(&self) -> usize {
        8
    }
}

/// Whether `key` is a first post (not a `/pending` re-post, which was checked when asked).
fn nonce_free(key: &str) -> bool {
    key.starts_with(&format!("{CHANNEL}:post:"))
}

fn store_retry(e: impl std::fmt::Display) -> Delivery {
    Delivery::store_retry(e)
}

impl Telegram {
    async fn deliver_post(&self, job: &OutboxJob, id: &InteractionId, chat: i64) -> Delivery {
        let key = job.key.as_str();
        let i = match self.registry.get(id).await {
            Ok(Some(i)) if job.is_for(&i) => i,
            // Pruned, or the id now names a newer interaction: nothing of this one to show.
            Ok(_) => return Delivery::Done,
            Err(e) => return store_retry(e),
        };
        let posted = match self.store.messages(CHANNEL, id).await {
            Ok(ms) => ms.into_iter().find(|m| {
                m.address == chat.to_string()
                    && matches!(MessageState::from_stored(m.state.as_ref()),
                        MessageState::Prompt(p) if p.job.as_deref() == Some(key))
            }),
            Err(e) => return store_retry(e),
        };
        let message = match posted {
            Some(m) => m,
            None => {
                if nonce_free(key) && !self.is_chat(chat) {
                    tracing::info!(id = %id, chat, "telegram: chat no longer in telegram.chats; not posting");
                    return Delivery::Done;
                }
                if !i.is_pending() {
                    tracing::debug!(id = %id, chat, "telegram: resolved before it was posted; not posting");
                    return Delivery::Done;
                }
                match self.send_prompt(key, &i, chat).await {
                    Ok(m) => m,
                    Err(d) => return d,
                }
            }
        };
        // The resolution may have landed while the post was in flight.
        match self.registry.get(id).await {
            Ok(Some(latest)) if !latest.is_pending() => {
                match self.finalize_message(&latest, &message).await {
                    Ok(()) => Delivery::Done,
                    Err(f) => f.delivery(),
                }
            }
            Ok(_) => Delivery::Done,
            Err(e) => store_retry(e),
        }
    }

    /// Sends the prompt and records it; returns the recorded message.
    async fn send_prompt(
        &self,
        key: &str,
        i: &Interaction,
        chat: i64,
    ) -> Result<ChannelMessage, Delivery> {
        let handle = self.record_handle(i).await.map_err(store_retry)?;
        let state = PromptState::posted_by(key);
        let p = render::prompt(
            i,
            &state,
            &Buttons {
                codec: &self.codec,
                handle: &handle,
                inbox: self.inbox.as_deref(),
            },
        );
        let message_id = match self.client.send(chat, p.text, Some(p.keyboard), None).await {
            Ok(m) => m,
            Err(f) => {
                tracing::warn!(id = %i.id, chat, error = %f.describe(), "telegram: could not post a prompt");
                return Err(f.delivery());
            }
        };
        let address = chat.to_string();
        let message_ref = message_id.to_string();
        let _guard = self.locks.lock(chat, message_id).await;
        // A tap may have recorded state on it already (it can arrive before this point).
        let state = match self.store.message(CHANNEL, &address, &message_ref).await {
            Ok(Some(existing)) => match MessageState::from_stored(existing.state.as_ref()) {
                MessageState::Prompt(mut p) => {
                    p.job = Some(key.to_string());
                    MessageState::Prompt(p)
                }
                other => other,
            },
            _ => MessageState::Prompt(state),
        };
        let message = ChannelMessage {
            channel: CHANNEL.into(),
            address,
            message_ref,
            interaction_id: i.id.clone(),
            state: Some(state.to_stored()),
            created_at: Timestamp::now(),
        };
        if let Err(e) = self.store.record_message(message.clone()).await {
            // Retrying re-sends (a duplicate); not retrying would leave this copy out of the
            // final edit. Its buttons work either way (the handle is recorded).
            tracing::error!(id = %i.id, chat, error = %e, "telegram: posted a prompt but could not record it");
            return Err(store_retry(e));
        }
        tracing::info!(id = %i.id, chat, message = message_id, "telegram: prompt posted");
        Ok(message)
    }

    async fn deliver_resolved(&self, job: &OutboxJob, id: &InteractionId) -> Delivery {
        let i = match self.registry.get(id).await {
            Ok(Some(i)) if !i.is_pending() && job.is_for(&i) => i,
            Ok(_) => return Delivery::Done,
            Err(e) => return store_retry(e),
        };
        let messages = match self.store.messages(CHANNEL, id).await {
            Ok(ms) => ms,
            Err(e) => return store_retry(e),
        };
        let mut transient: Option<Failure> = None;
        let mut permanent: Option<String> = None;
        for m in &messages {
            match self.finalize_message(&i, m).await {
                Ok(()) => {}
                Err(Failure::Permanent(e)) => {
                    tracing::error!(id = %id, chat = %m.address, message = %m.message_ref, error = %e,
                        "telegram: cannot show the outcome on a message; giving up on it");
                    self.mark_final(m).await;
                    permanent = Some(e);
                }
                Err(f @ Failure::RetryAfter(_)) => {
                    // Stop here: every further call would be refused too.
                    transient = Some(f);
                    break;
                }
                Err(f) => transient = Some(f),
            }
        }
        match (transient, permanent) {
            (Some(f), _) => f.delivery(),
            (None, Some(e)) => Delivery::Failed(e),
            (None, None) => Delivery::Done,
        }
    }

    /// Edits one recorded message to show `i`'s outcome and removes its keyboard, unless it
    /// already does.
    pub(super) async fn finalize_message(
        &self,
        i: &Interaction,
        m: &ChannelMessage,
    ) -> Result<(), Failure> {
        let (Ok(chat), Ok(message)) = (m.address.parse::<i64>(), m.message_ref.parse::<i32>())
        else {
            return Ok(());
        };
        let _guard = self.locks.lock(chat, message).await;
        let current = match self
            .store
            .message(CHANNEL, &m.address, &m.message_ref)
            .await
        {
            Ok(Some(c)) => c,
            Ok(None) => m.clone(),
            Err(e) => return Err(Failure::Transient(format!("store: {e}"))),
        };
        let mut state = MessageState::from_stored(current.state.as_ref());
        if state.is_final() {
            return Ok(());
        }
        let text = match state {
            MessageState::Prompt(_) => render::resolved(i),
            MessageState::Reply(_) => render::reply_closed(i),
        };
        match self.final_edit(i, chat, message, text).await? {
            Edited::Done => {}
            Edited::Gone(why) => {
                tracing::info!(id = %i.id, chat, message, reason = %why, "telegram: message can no longer be edited");
            }
        }
        state.set_final();
        if let Err(e) = self
            .store
            .set_message_state(CHANNEL, &m.address, &m.message_ref, Some(state.to_stored()))
            .await
        {
            // The edit happened; a repeat is harmless ("message is not modified").
            tracing::warn!(id = %i.id, error = %e, "telegram: could not record a final edit");
        }
        Ok(())
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
    ) -> Result<Edited, Failure> {
        let why = match self.client.edit(chat, message, html, None).await {
            Err(Failure::Permanent(why)) => why,
            other => return other,
        };
        tracing::warn!(id = %i.id, chat, message, error = %why,
            "telegram: the final text was refused; showing the outcome as plain text");
        let why = match self
            .client
            .edit_plain(chat, message, render::outcome_plain(i))
            .await
        {
            Err(Failure::Permanent(why)) => why,
            other => return other,
        };
        tracing::warn!(id = %i.id, chat, message, error = %why,
            "telegram: the plain outcome was refused too; removing the buttons only");
        self.client.remove_keyboard(chat, message).await
    }

    async fn mark_final(&self, m: &ChannelMessage) {
        let mut state = MessageState::from_stored(m.state.as_ref());
        state.set_final();
        let _ = self
            .store
            .set_message_state(CHANNEL, &m.address, &m.message_ref, Some(state.to_stored()))
            .await;
    }
}
