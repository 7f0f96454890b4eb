//! A prompt's recorded state (its questions answered, its form filled in so far): read under
//! the message's lock, saved, and the prompt re-rendered to show it.

use jiff::Timestamp;
use teloxide::types::CallbackQuery;

use crate::channels::pipeline::Feedback;
use crate::channels::telegram::render::{self, Buttons};
use crate::channels::telegram::state::{MessageState, PromptState};
use crate::channels::telegram::{CHANNEL, LockGuard, Telegram};
use crate::interaction::{Interaction, InteractionId};
use crate::store::ChannelMessage;

impl Telegram {
    /// The prompt state recorded for a message (fresh if none).
    pub(super) async fn prompt_state(&self, chat: i64, message: i32) -> PromptState {
        match self
            .store
            .message(CHANNEL, &chat.to_string(), &message.to_string())
            .await
        {
            Ok(Some(m)) => match MessageState::from_stored(m.state.as_ref()) {
                MessageState::Prompt(p) => p,
                MessageState::Reply(_) => PromptState::default(),
            },
            _ => PromptState::default(),
        }
    }

    /// Saves a prompt's state (recording the message if its post has not yet).
    pub(super) async fn save_prompt_state(
        &self,
        id: &InteractionId,
        chat: i64,
        message: i32,
        state: &PromptState,
    ) -> bool {
        let stored = MessageState::Prompt(state.clone()).to_stored();
        let (address, message_ref) = (chat.to_string(), message.to_string());
        match self
            .store
            .set_message_state(CHANNEL, &address, &message_ref, Some(stored.clone()))
            .await
        {
            Ok(true) => true,
            Ok(false) => self
                .store
                .record_message(ChannelMessage {
                    channel: CHANNEL.into(),
                    address,
                    message_ref,
                    interaction_id: id.clone(),
                    state: Some(stored),
                    created_at: Timestamp::now(),
                })
                .await
                .is_ok(),
            Err(e) => {
                tracing::error!(id = %id, error = %e, "telegram: cannot save a message's state");
                false
            }
        }
    }

    /// Saves a prompt's state (whose lock the caller holds), answers `q` with `toast`, and
    /// re-renders the prompt while its interaction is pending. Returns what went wrong, if
    /// anything.
    pub(super) async fn save_and_rerender(
        &self,
        i: &Interaction,
        chat: i64,
        message: i32,
        state: &PromptState,
        q: Option<&CallbackQuery>,
        toast: &str,
    ) -> Option<String> {
        if !self.save_prompt_state(&i.id, chat, message, state).await {
            if let Some(q) = q {
                self.client
                    .answer(&q.id, &self.say(Feedback::StoreDown))
                    .await;
            }
            return Some(self.say(Feedback::StoreDown));
        }
        if let Some(q) = q {
            self.client.answer(&q.id, toast).await;
        }
        // Re-render only while it is still pending: the final edit must stay the last one.
        if let Ok(Some(latest)) = self.registry.get(&i.id).await
            && latest.is_pending()
        {
            self.rerender(&latest, chat, message, state).await;
        }
        None
    }

    /// Edits the prompt `message` of pending interaction `latest` to show `state`.
    async fn rerender(&self, latest: &Interaction, chat: i64, message: i32, state: &PromptState) {
        // Recorded if it is not yet: a keyboard posted by an earlier version carries a
        // handle of another form, and this one replaces it.
        let handle = match self.record_handle(latest).await {
            Ok(h) => h,
            Err(e) => {
                tracing::warn!(id = %latest.id, error = %e, "telegram: cannot record a button handle; not re-rendering");
                return;
            }
        };
        let p = render::prompt(
            latest,
            state,
            &Buttons {
                codec: &self.codec,
                handle: &handle,
                inbox: self.inbox.as_deref(),
                words: self.words(),
            },
        );
        // Under the message's lock: a retried render cannot overtake a newer one, and
        // the final edit waits for it.
        if let Err(f) = self
            .client
            .retrying("re-rendering a prompt", || {
                self.client
                    .edit(chat, message, p.text.clone(), Some(p.keyboard.clone()))
            })
            .await
        {
            tracing::warn!(id = %latest.id, error = %f.describe(), "telegram: could not re-render a prompt");
        }
    }

    /// Takes a prompt's lock and reads its state for a tap on it; `None` (the tap answered
    /// as stale) when the prompt already shows its outcome.
    pub(super) async fn open_prompt(
        &self,
        q: &CallbackQuery,
        id: &InteractionId,
        chat: i64,
        message: i32,
    ) -> Option<(LockGuard, PromptState)> {
        let guard = self.lock(chat, message).await;
        let state = self.prompt_state(chat, message).await;
        if state.done {
            drop(guard);
            self.answer_stale(q, id).await;
            return None;
        }
        Some((guard, state))
    }

    async fn answer_stale(&self, q: &CallbackQuery, id: &InteractionId) {
        let text = match self.registry.get(id).await {
            Ok(Some(i)) if !i.is_pending() => self.say(Feedback::Already(i)),
            _ => self.say(Feedback::NotFound),
        };
        self.client.answer(&q.id, &text).await;
    }
}
