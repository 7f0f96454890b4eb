//! The one delivery skeleton every chat platform shares: posting a prompt to one place,
//! recording it, noticing an answer that landed while the post was in flight, and editing
//! every copy not yet final to show the outcome.
//!
//! A platform implements [`Platform`] — post a prompt, edit a copy, say what a failure means
//! ([`Failure`]: retry after N s / transient / permanent) — and hands its jobs to
//! [`Messages`], which owns the algorithm:
//!
//! - **post** (`Messages::post`): the interaction is read again (a job for an earlier
//!   interaction with the same id does nothing); a copy already on record for this job is only
//!   brought up to date; nothing is posted once the interaction is resolved; otherwise the
//!   prompt is posted in the chat's turn (`Pacer`), recorded, and the interaction read once
//!   more: a resolution that landed while the post was in flight, whose final job therefore
//!   did not see this copy, is shown on it at once.
//! - **finalize** (`Messages::finalize_all`): every recorded copy not yet final is edited and
//!   marked final, so a retried job only touches what is left. A copy the platform refuses
//!   to edit for good is marked final and the job fails saying why; a throttled platform
//!   stops the round (every further call would be refused too) and the job is retried after
//!   the wait it asked for; a transient failure leaves the copy for the retry while the others
//!   are still tried.
//!
//! Hooks let a platform keep what is its own: Telegram records its button handle before it
//! sends (`Platform::before_post`), finds its copy by the job that posted it
//! (`Platform::is_copy_of`), holds a per-message lock while it edits (`Platform::hold`), and
//! keeps its own message state (`Platform::record`, `Platform::is_final`,
//! `Platform::final_state`).

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use jiff::Timestamp;
use serde_json::{Value, json};

pub(crate) use super::digest::{Digests, Edited, Sheet};
use super::digest_texts::Texts;
pub(crate) use super::pacer::Pacer;
use super::plan::{ChatJob, Todo};
use super::threads::{Kept, Opener, Threads};
use crate::health::Health;
use crate::interaction::{Interaction, InteractionId};
use crate::outbox::{ChannelJob, Delivery};
use crate::store::{ChannelMessage, OutboxJob, Store, StoreError};

/// What a failed platform call means for the job.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Failure {
    /// The platform throttled the chat: keep it quiet and retry after `after` (or, when the
    /// platform did not say, after the outbox's growing backoff while the chat waits the
    /// pacer's pause).
    Throttled {
        /// The wait the platform asked for.
        after: Option<Duration>,
        /// What the platform said.
        error: String,
    },
    /// Worth trying again with the outbox's backoff (the network, the platform's own errors,
    /// the store).
    Transient(String),
    /// Trying again will not help (the message is gone, the bot was removed, the request is
    /// refused as it is).
    Permanent(String),
}

impl Failure {
    /// The text of the failure.
    pub(crate) fn error(&self) -> &str {
        match self {
            Failure::Throttled { error, .. } | Failure::Transient(error) => error,
            Failure::Permanent(error) => error,
        }
    }

    /// What the outbox does with a job that ended in this failure.
    pub(crate) fn delivery(&self) -> Delivery {
        match self {
            Failure::Throttled { after, error } => Delivery::Retry {
                after: *after,
                error: error.clone(),
            },
            Failure::Transient(error) => Delivery::Retry {
                after: None,
                error: error.clone(),
            },
            Failure::Permanent(error) => Delivery::Failed(error.clone()),
        }
    }

    /// A store failure: retried.
    pub(crate) fn store(e: impl std::fmt::Display) -> Self {
        Failure::Transient(format!("store: {e}"))
    }
}

/// A copy the platform posted: its id in the chat and the state to record with it.
#[derive(Clone, Debug)]
pub(crate) struct Posted {
    /// The platform's id of the message (`message_ref` in the store).
    pub message_ref: String,
    /// What the platform keeps with it.
    pub state: Option<Value>,
}

/// A lock a platform holds on one message while it is edited or its state changes.
pub(crate) type Hold<'a> = Option<Box<dyn Send + 'a>>;

/// What a chat platform does for the skeleton.
#[async_trait]
pub(crate) trait Platform: Send + Sync {
    /// Where one copy goes (a chat id, a receiver, a conversation).
    type Target: Send + Sync;

    /// The channel's jobs (planned by `channels::plan::Planner`).
    type Job: ChatJob<Target = Self::Target>;

    /// The channel name under which copies are recorded.
    fn channel(&self) -> &'static str;

    /// Most of its jobs in flight at once (the outbox's default, unless its client queues
    /// and paces calls itself).
    fn concurrency(&self) -> usize {
        4
    }

    /// The chat a target names: the key of its records and of its pacing.
    fn address(&self, target: &Self::Target) -> String;

    /// Posts the prompt of pending interaction `i` to `target` for `job`.
    async fn post(
        &self,
        i: &Interaction,
        target: &Self::Target,
        job: &OutboxJob,
    ) -> Result<Posted, Failure>;

    /// Edits copy `m` to show `i` as it now is (resolved), without buttons.
    async fn edit(&self, i: &Interaction, m: &ChannelMessage) -> Result<(), Failure>;

    /// The channel's threads per session, when it has threads ([`super::threads`]).
    fn threads(&self) -> Option<&Threads> {
        None
    }

    /// Opens the thread of a session at `target`, its first message saying what `opener`
    /// names; returns the thread's id (what [`Platform::post_in_thread`] and
    /// [`Platform::close_thread`] take).
    async fn open_thread(
        &self,
        _target: &Self::Target,
        _opener: &Opener,
    ) -> Result<String, Failure> {
        Err(Failure::Permanent(format!(
            "{} has no threads",
            self.channel()
        )))
    }

    /// Posts the prompt of pending interaction `i` to `target` in thread `thread`.
    async fn post_in_thread(
        &self,
        i: &Interaction,
        target: &Self::Target,
        job: &OutboxJob,
        _thread: &str,
    ) -> Result<Posted, Failure> {
        self.post(i, target, job).await
    }

    /// Closes thread `thread` at `address` (its session ended). By default there is nothing
    /// to close.
    async fn close_thread(&self, _address: &str, _thread: &str) -> Result<(), Failure> {
        Ok(())
    }

    /// Whether the outcome is also posted as a reply to each copy (`thread_replies`).
    fn thread_replies(&self) -> bool {
        false
    }

    /// Whether a reply to one of a session's prompts reaches the session
    /// ([`super::steer`]): each prompt of a session is then remembered when posted.
    fn replies_steer(&self) -> bool {
        false
    }

    /// Whether a reply to one of a session's digests reaches the session: each digest is
    /// then remembered when posted. By default where replies to prompts do
    /// ([`Platform::replies_steer`]); a platform that reads replies to its prompts itself
    /// (Telegram) may still leave its digests' replies to the kit.
    fn digests_steer(&self) -> bool {
        self.replies_steer()
    }

    /// The id a reply names for digest message `message` (what `post_digest` returned at
    /// `address`), and the chats it is in beyond its address (as a copy's state names them),
    /// when [`Platform::digests_steer`]: a digest is one of its session's messages.
    fn digest_reply_ref(&self, _address: &str, message: &str) -> (String, Option<Value>) {
        (message.to_string(), None)
    }

    /// Posts the outcome of resolved `i` as a reply to copy `m`, in its thread.
    async fn reply_outcome(&self, _i: &Interaction, _m: &ChannelMessage) -> Result<(), Failure> {
        Ok(())
    }

    /// Edits copy `m` to show pending `i` as it now is (the votes so far on an approval
    /// that needs several people), keeping its buttons. By default nothing: the copy shows
    /// the votes when it shows the outcome.
    async fn show(&self, _i: &Interaction, _m: &ChannelMessage) -> Result<(), Failure> {
        Ok(())
    }

    /// Whether the platform shows digests (a notification service does not: every prompt is
    /// posted on its own).
    fn has_digests(&self) -> bool {
        true
    }

    /// The language of the channel's digests.
    fn texts(&self) -> Texts;

    /// How often one place may be posted to, when the pacer does not say (a platform whose
    /// client paces itself).
    fn pace(&self, _address: &str) -> Option<Duration> {
        None
    }

    /// Posts a new digest message showing `sheet` to `target`; returns its id.
    async fn post_digest(&self, target: &Self::Target, sheet: &Sheet) -> Result<String, Failure>;

    /// Changes digest message `message` at `address` to show `sheet` (a closed sheet: the
    /// digest is done, without buttons).
    async fn edit_digest(
        &self,
        address: &str,
        message: &str,
        sheet: &Sheet,
    ) -> Result<Edited, Failure>;

    /// Whether recorded copy `m` at `address` is the one `job` posts (by default: the copy
    /// in that chat).
    fn is_copy_of(&self, m: &ChannelMessage, address: &str, _job: &OutboxJob) -> bool {
        m.address == address
    }

    /// Whether `job` should still post to `target` (a chat removed from the settings since
    /// it was planned, say).
    fn still_wanted(&self, _target: &Self::Target, _job: &OutboxJob) -> bool {
        true
    }

    /// What must be on record before the prompt is sent (a button handle a tap looks up).
    async fn before_post(&self, _i: &Interaction) -> Result<(), StoreError> {
        Ok(())
    }

    /// Records a posted copy; returns what was recorded.
    async fn record(
        &self,
        store: &dyn Store,
        m: ChannelMessage,
        _job: &OutboxJob,
    ) -> Result<ChannelMessage, StoreError> {
        store.record_message(m.clone()).await?;
        Ok(m)
    }

    /// Holds copy `m` while its state is read and changed.
    async fn hold<'a>(&'a self, _m: &ChannelMessage) -> Hold<'a> {
        None
    }

    /// Whether copy `m` already shows its outcome.
    fn is_final(&self, m: &ChannelMessage) -> bool {
        m.state
            .as_ref()
            .is_some_and(|s| s["final"] == Value::Bool(true))
    }

    /// The state of copy `m` once it shows its outcome.
    fn final_state(&self, m: &ChannelMessage) -> Value {
        let mut state = m.state.clone().unwrap_or_else(|| json!({}));
        if let Value::Object(map) = &mut state {
            map.insert("final".into(), Value::Bool(true));
        }
        state
    }
}

impl Pacer {
    /// Notes `failure` for `chat` (a throttled chat is kept quiet) and passes it on.
    pub(crate) fn note(&self, chat: &str, failure: Failure) -> Failure {
        if let Failure::Throttled { after, .. } = &failure {
            self.pause(chat, *after);
        }
        failure
    }
}

/// The skeleton for one platform.
pub(crate) struct Messages<P: Platform> {
    /// The platform.
    pub platform: P,
    /// Interactions and copies.
    pub store: Arc<dyn Store>,
    /// Per-chat spacing.
    pub pacer: Pacer,
    /// The channel's digests.
    pub digests: Digests,
    /// Where the platform's state is reported: the health component, when reported.
    pub health: Option<(Arc<Health>, &'static str)>,
}

impl<P: Platform> Messages<P> {
    /// Delivers one of the channel's jobs: the one dispatch of every chat channel.
    pub(crate) async fn deliver(&self, job: &OutboxJob) -> Delivery {
        if let Some(threads) = self.platform.threads()
            && threads.sweep_due()
        {
            self.sweep(threads).await;
        }
        match P::Job::read(job).map(ChatJob::todo) {
            Ok(Todo::Post(target)) => self.post(job, &target).await,
            Ok(Todo::Update) => self.finalize_all(job).await,
            Ok(Todo::Voted) => self.show_votes(job).await,
            Ok(Todo::Digest { to, session }) => self.refresh_digest(&to, &session).await,
            Err(failed) => failed,
        }
    }

    /// Reports how the last delivery went, and passes it on.
    fn report(&self, d: Delivery) -> Delivery {
        if let Some((health, component)) = &self.health {
            match &d {
                Delivery::Done => health.set(component, "ok", json!({})),
                Delivery::Retry { error, .. } | Delivery::Failed(error) => {
                    health.set(component, "failing", json!({ "last_error": error }))
                }
            }
        }
        d
    }

    /// Delivers a post job: `target` gets the prompt of interaction `id` once.
    pub(crate) async fn post(&self, job: &OutboxJob, target: &P::Target) -> Delivery {
        let d = self.post_inner(job, target).await;
        self.report(d)
    }

    async fn post_inner(&self, job: &OutboxJob, target: &P::Target) -> Delivery {
        let channel = self.platform.channel();
        let Some(id) = &job.interaction_id else {
            return Delivery::Failed(format!("a {channel} post job without an interaction"));
        };
        let address = self.platform.address(target);
        let i = match self.store.get(id).await {
            Ok(Some(i)) if job.is_for(&i) => i,
            // Pruned, or the id now names a newer interaction: nothing of this one to show.
            Ok(_) => return Delivery::Done,
            Err(e) => return Delivery::store_retry(e),
        };
        let recorded = match self.store.messages(channel, id).await {
            Ok(all) => all
                .into_iter()
                .find(|m| self.platform.is_copy_of(m, &address, job)),
            Err(e) => return Delivery::store_retry(e),
        };
        let message = match recorded {
            // Posted by an earlier attempt that did not finish; made current below.
            Some(m) => m,
            None => {
                if !self.platform.still_wanted(target, job) {
                    tracing::info!(id = %id, chat = %address, "{channel}: no longer configured to post there; not posting");
                    return Delivery::Done;
                }
                if !i.is_pending() {
                    tracing::debug!(id = %id, chat = %address, "{channel}: resolved before it was posted; not posting");
                    return Delivery::Done;
                }
                // Every reason not to post it now is asked here, in one place.
                if let Some(held) = self.hold_for_digest(job, &i, target).await {
                    return held;
                }
                match self.send(job, &i, target, &address).await {
                    Ok(m) => m,
                    Err(f) => return f.delivery(),
                }
            }
        };
        // The resolution may have landed while the post was in flight, and its final job may
        // have run before this copy was on record: bring the copy up to date now.
        match self.store.get(id).await {
            Ok(Some(latest)) if !latest.is_pending() && job.is_for(&latest) => {
                match self.finalize(&latest, &message).await {
                    Ok(()) => Delivery::Done,
                    Err(f) => f.delivery(),
                }
            }
            Ok(_) => Delivery::Done,
            Err(e) => Delivery::store_retry(e),
        }
    }

    /// Posts the prompt and records it; returns the recorded copy.
    async fn send(
        &self,
        job: &OutboxJob,
        i: &Interaction,
        target: &P::Target,
        address: &str,
    ) -> Result<ChannelMessage, Failure> {
        let channel = self.platform.channel();
        self.platform.before_post(i).await.map_err(Failure::store)?;
        let thread = self.thread_of(i, target, address).await?;
        self.pacer.turn(address).await;
        let posted = match thread {
            Some(t) => self.platform.post_in_thread(i, target, job, &t).await,
            None => self.platform.post(i, target, job).await,
        };
        let posted = match posted {
            Ok(p) => p,
            Err(f) => {
                tracing::warn!(id = %i.id, chat = %address, error = %f.error(), "{channel}: could not post a prompt");
                return Err(self.pacer.note(address, f));
            }
        };
        let message = ChannelMessage {
            channel: channel.into(),
            address: address.to_string(),
            message_ref: posted.message_ref.clone(),
            interaction_id: i.id.clone(),
            state: posted.state,
            created_at: Timestamp::now(),
        };
        match self
            .platform
            .record(self.store.as_ref(), message, job)
            .await
        {
            Ok(m) => {
                tracing::info!(id = %i.id, chat = %address, message = %m.message_ref, "{channel}: prompt posted");
                if self.platform.replies_steer()
                    && let Err(e) =
                        super::steer::remember(self.store.as_ref(), channel, i, &m.message_ref)
                            .await
                {
                    // The prompt is posted and answerable; only a reply to it cannot reach
                    // the session.
                    tracing::warn!(id = %i.id, error = %e, "{channel}: could not remember a session's prompt");
                }
                Ok(m)
            }
            Err(e) => {
                // Retrying may post again; not retrying would leave this copy out of the
                // final edit.
                tracing::error!(id = %i.id, chat = %address, error = %e, "{channel}: posted a prompt but could not record it");
                Err(Failure::store(e))
            }
        }
    }

    /// The thread `i`'s prompt goes into at `target`, when the channel puts each session in
    /// a thread of its own: the one on record, or one opened now. `None`: in the chat (no
    /// threads, no session, or a thread the platform refused to open).
    async fn thread_of(
        &self,
        i: &Interaction,
        target: &P::Target,
        address: &str,
    ) -> Result<Option<String>, Failure> {
        let channel = self.platform.channel();
        let Some(threads) = self.platform.threads().filter(|t| t.on()) else {
            return Ok(None);
        };
        let Some(opener) = Opener::of(i) else {
            return Ok(None);
        };
        let _hold = threads.lock(address, i).await;
        if let Some(kept) = threads.kept(address, i).await.map_err(Failure::store)? {
            return Ok(Some(kept.thread));
        }
        self.pacer.turn(address).await;
        match self.platform.open_thread(target, &opener).await {
            Ok(thread) => {
                tracing::info!(id = %i.id, chat = %address, thread = %thread, "{channel}: opened a session's thread");
                let evicted = threads
                    .keep(address, i, &thread)
                    .await
                    .map_err(Failure::store)?;
                self.close_threads(evicted).await;
                Ok(Some(thread))
            }
            Err(Failure::Permanent(e)) => {
                tracing::warn!(id = %i.id, chat = %address, error = %e, "{channel}: cannot open a thread for the session; posting in the chat");
                Ok(None)
            }
            Err(f) => Err(self.pacer.note(address, f)),
        }
    }

    /// Closes the threads of sessions that ended (the store's sessions say so).
    async fn sweep(&self, threads: &Threads) {
        match threads.ended().await {
            Ok(ended) => self.close_threads(ended).await,
            Err(e) => {
                tracing::warn!(error = %e, "{}: cannot look for ended sessions' threads", self.platform.channel())
            }
        }
    }

    /// Closes threads already forgotten; a failure is logged (the thread stays open).
    async fn close_threads(&self, threads: Vec<Kept>) {
        let channel = self.platform.channel();
        for t in threads {
            self.pacer.turn(&t.address).await;
            match self.platform.close_thread(&t.address, &t.thread).await {
                Ok(()) => {
                    tracing::info!(chat = %t.address, thread = %t.thread, "{channel}: closed the thread of an ended session")
                }
                Err(f) => {
                    tracing::warn!(chat = %t.address, thread = %t.thread, error = %f.error(), "{channel}: cannot close a session's thread")
                }
            }
        }
    }

    /// Delivers a final job: every copy of resolved interaction `id` shows its outcome.
    pub(crate) async fn finalize_all(&self, job: &OutboxJob) -> Delivery {
        let d = self.finalize_all_inner(job).await;
        self.report(d)
    }

    async fn finalize_all_inner(&self, job: &OutboxJob) -> Delivery {
        if let Err(e) = self.digests_of_resolved(job).await {
            return Delivery::store_retry(e);
        }
        let channel = self.platform.channel();
        let Some(id) = &job.interaction_id else {
            return Delivery::Failed(format!("a {channel} update job without an interaction"));
        };
        let i = match self.store.get(id).await {
            Ok(Some(i)) if !i.is_pending() && job.is_for(&i) => i,
            Ok(_) => return Delivery::Done,
            Err(e) => return Delivery::store_retry(e),
        };
        self.finalize_copies(&i, id).await
    }

    /// Delivers a votes job: every copy of pending interaction `id` not yet final shows the
    /// votes so far (`Platform::show`). A resolution that lands meanwhile may have had its
    /// copies edited before these edits: then they are shown the outcome again, so no copy
    /// of a resolved interaction keeps its buttons.
    pub(crate) async fn show_votes(&self, job: &OutboxJob) -> Delivery {
        let channel = self.platform.channel();
        let Some(id) = &job.interaction_id else {
            return Delivery::Failed(format!("a {channel} update job without an interaction"));
        };
        let i = match self.store.get(id).await {
            Ok(Some(i)) if i.is_pending() && job.is_for(&i) => i,
            Ok(_) => return Delivery::Done,
            Err(e) => return Delivery::store_retry(e),
        };
        let copies = match self.store.messages(channel, id).await {
            Ok(ms) => ms,
            Err(e) => return Delivery::store_retry(e),
        };
        let mut failed = None;
        let mut shown = Vec::new();
        for m in copies.iter().filter(|m| !self.platform.is_final(m)) {
            let _hold = self.platform.hold(m).await;
            self.pacer.turn(&m.address).await;
            match self.platform.show(&i, m).await {
                Ok(()) => shown.push(m),
                Err(f) => {
                    let throttled = matches!(f, Failure::Throttled { .. });
                    failed = Some(self.pacer.note(&m.address, f));
                    if throttled {
                        break;
                    }
                }
            }
        }
        match self.store.get(id).await {
            Ok(Some(latest)) if !latest.is_pending() => {
                for m in shown {
                    let _hold = self.platform.hold(m).await;
                    if let Err(f) = self.platform.edit(&latest, m).await {
                        failed = Some(f);
                    }
                }
            }
            Ok(_) => {}
            Err(e) => return Delivery::store_retry(e),
        }
        self.report(failed.map_or(Delivery::Done, |f| f.delivery()))
    }

    /// Edits every copy of `i` not yet final.
    async fn finalize_copies(&self, i: &Interaction, id: &InteractionId) -> Delivery {
        let channel = self.platform.channel();
        let copies = match self.store.messages(channel, id).await {
            Ok(ms) => ms,
            Err(e) => return Delivery::store_retry(e),
        };
        let mut transient: Option<Failure> = None;
        let mut permanent: Option<String> = None;
        for m in copies.iter().filter(|m| !self.platform.is_final(m)) {
            match self.finalize(i, m).await {
                Ok(()) => {}
                Err(Failure::Permanent(e)) => permanent = Some(e),
                Err(f @ Failure::Throttled { .. }) => {
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

    /// Edits copy `m` to show resolved `i` and marks it final, unless it already is. A copy
    /// the platform refuses to edit for good is marked final too (it is never retried) and
    /// the failure is returned.
    pub(crate) async fn finalize(
        &self,
        i: &Interaction,
        m: &ChannelMessage,
    ) -> Result<(), Failure> {
        let channel = self.platform.channel();
        let _hold = self.platform.hold(m).await;
        let current = match self
            .store
            .message(channel, &m.address, &m.message_ref)
            .await
        {
            Ok(Some(c)) => c,
            Ok(None) => m.clone(),
            Err(e) => return Err(Failure::store(e)),
        };
        if self.platform.is_final(&current) {
            return Ok(());
        }
        self.pacer.turn(&current.address).await;
        let refused = match self.platform.edit(i, &current).await {
            Ok(()) => {
                tracing::info!(id = %i.id, chat = %current.address, message = %current.message_ref, "{channel}: copy updated");
                self.reply_outcome(i, &current).await;
                None
            }
            Err(Failure::Permanent(e)) => {
                tracing::error!(id = %i.id, chat = %current.address, message = %current.message_ref, error = %e,
                    "{channel}: cannot show the outcome on a copy; giving up on it");
                Some(e)
            }
            Err(f) => return Err(self.pacer.note(&current.address, f)),
        };
        let state = self.platform.final_state(&current);
        let recorded = self
            .store
            .set_message_state(channel, &current.address, &current.message_ref, Some(state))
            .await;
        if let Err(e) = recorded
            && refused.is_none()
        {
            // The edit happened; a repeat shows the same.
            tracing::warn!(id = %i.id, error = %e, "{channel}: could not record a final edit");
            return Err(Failure::store(e));
        }
        match refused {
            Some(e) => Err(Failure::Permanent(e)),
            None => Ok(()),
        }
    }
}

impl<P: Platform> Messages<P> {
    /// Posts the outcome of `i` as a reply to copy `m` when the channel says so
    /// (`thread_replies`). The copy itself shows the outcome already: a reply that fails is
    /// logged, not retried (a retry would edit the copy again for nothing).
    async fn reply_outcome(&self, i: &Interaction, m: &ChannelMessage) {
        if !self.platform.thread_replies() {
            return;
        }
        if let Err(f) = self.platform.reply_outcome(i, m).await {
            tracing::warn!(id = %i.id, chat = %m.address, error = %f.error(), "{}: cannot post the outcome in the message's thread", self.platform.channel());
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use super::*;
    use crate::interaction::InteractionId;
    use crate::sync::LockExt;

    /// A platform that records what it did, and can resolve the interaction while posting
    /// or fail edits as told.
    struct Fake {
        store: Arc<dyn Store>,
        resolve_while_posting: bool,
        edits: Mutex<Vec<String>>,
        failures: Mutex<std::collections::VecDeque<Failure>>,
        posts: std::sync::atomic::AtomicUsize,
    }

    #[derive(serde::Serialize, serde::Deserialize)]
    #[serde(tag = "kind", rename_all = "snake_case")]
    enum TestJob {
        Post,
        Update,
    }

    impl crate::outbox::ChannelJob for TestJob {
        fn channel(&self) -> std::borrow::Cow<'static, str> {
            "fake".into()
        }
    }

    impl ChatJob for TestJob {
        type Target = String;
        const POST: &'static str = "post";

        fn make(todo: Todo<String>) -> Self {
            match todo {
                Todo::Post(_) | Todo::Digest { .. } => TestJob::Post,
                Todo::Update | Todo::Voted => TestJob::Update,
            }
        }

        fn todo(self) -> Todo<String> {
            match self {
                TestJob::Post => Todo::Post("a".into()),
                TestJob::Update => Todo::Update,
            }
        }

        fn target(address: &str) -> Option<String> {
            Some(address.into())
        }

        fn address(target: &String) -> String {
            target.clone()
        }
    }

    async fn resolve(store: &dyn Store, i: &Interaction) {
        use crate::interaction::{Answer, Responder, Via, resolution_for};
        let r = resolution_for(
            i,
            Answer::allow(),
            Responder::new("alice", Via::new("api")),
            Timestamp::now(),
        )
        .unwrap();
        store
            .resolve(Arc::new(i.resolved(r)), Default::default())
            .await
            .unwrap();
    }

    #[async_trait]
    impl Platform for Fake {
        type Target = String;
        type Job = TestJob;

        fn texts(&self) -> Texts {
            Texts(crate::present::render::Locale::EnUs)
        }

        async fn post_digest(&self, _t: &String, _s: &Sheet) -> Result<String, Failure> {
            Err(Failure::Permanent("no digests here".into()))
        }

        async fn edit_digest(&self, _a: &str, _m: &str, _s: &Sheet) -> Result<Edited, Failure> {
            Ok(Edited::Gone)
        }

        fn channel(&self) -> &'static str {
            "fake"
        }

        fn address(&self, t: &String) -> String {
            t.clone()
        }

        async fn post(
            &self,
            i: &Interaction,
            t: &String,
            _job: &OutboxJob,
        ) -> Result<Posted, Failure> {
            let n = self.posts.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            if self.resolve_while_posting {
                resolve(self.store.as_ref(), i).await;
            }
            Ok(Posted {
                message_ref: format!("{t}-{n}"),
                state: None,
            })
        }

        async fn edit(&self, _i: &Interaction, m: &ChannelMessage) -> Result<(), Failure> {
            if let Some(f) = self.failures.locked().pop_front() {
                return Err(f);
            }
            self.edits.locked().push(m.message_ref.clone());
            Ok(())
        }
    }

    async fn setup(resolve_while_posting: bool) -> (Messages<Fake>, Arc<Interaction>) {
        let store: Arc<dyn Store> = Arc::new(crate::store::MemoryStore::new());
        let i = Arc::new(Interaction::pending(
            InteractionId::parse("toolu_x").unwrap(),
            "Bash",
            serde_json::Map::new(),
            Timestamp::now(),
            300,
        ));
        store.create(i.clone(), Default::default()).await.unwrap();
        let fake = Fake {
            store: store.clone(),
            resolve_while_posting,
            edits: Mutex::default(),
            failures: Mutex::default(),
            posts: Default::default(),
        };
        let m = Messages {
            platform: fake,
            digests: Digests::new(store.clone(), "fake", 0, vec!["a".into()]),
            store,
            pacer: Pacer::off(),
            health: None,
        };
        (m, i)
    }

    fn job(i: &Interaction, kind: TestJob, chat: &str) -> OutboxJob {
        use crate::outbox::ChannelJob;
        let now = Timestamp::now();
        kind.plan(i, &[chat], now, i.deadline)
    }

    #[tokio::test]
    async fn an_answer_that_lands_mid_post_is_shown_on_the_new_copy_at_once() {
        let (m, i) = setup(true).await;
        let post = job(&i, TestJob::Post, "a");
        assert_eq!(m.post(&post, &"a".to_string()).await, Delivery::Done);
        assert_eq!(*m.platform.edits.locked(), ["a-0"]);
        // The final job that ran before the copy was recorded finds nothing left to do,
        // and the post job delivered again neither posts nor edits again.
        let latest = m.store.get(&i.id).await.unwrap().unwrap();
        let update = job(&latest, TestJob::Update, "");
        assert_eq!(m.finalize_all(&update).await, Delivery::Done);
        assert_eq!(m.post(&post, &"a".to_string()).await, Delivery::Done);
        assert_eq!(m.platform.edits.locked().len(), 1);
        assert_eq!(
            m.platform.posts.load(std::sync::atomic::Ordering::SeqCst),
            1
        );
    }

    #[tokio::test]
    async fn finalizing_skips_final_copies_gives_up_on_refused_ones_and_stops_when_throttled() {
        let (m, i) = setup(false).await;
        for chat in ["a", "b", "c"] {
            let d = m
                .post(&job(&i, TestJob::Post, chat), &chat.to_string())
                .await;
            assert_eq!(d, Delivery::Done);
        }
        resolve(m.store.as_ref(), &i).await;
        let latest = m.store.get(&i.id).await.unwrap().unwrap();
        let update = job(&latest, TestJob::Update, "");
        // One copy refuses for good, one fails for now: the third is still edited.
        m.platform.failures.locked().extend([
            Failure::Permanent("message_not_found".into()),
            Failure::Transient("503".into()),
        ]);
        let d = m.finalize_all(&update).await;
        assert!(matches!(d, Delivery::Retry { after: None, .. }), "{d:?}");
        assert_eq!(m.platform.edits.locked().len(), 1);
        // Throttled: the round stops at once.
        m.platform.failures.locked().push_back(Failure::Throttled {
            after: Some(Duration::from_secs(2)),
            error: "ratelimited".into(),
        });
        let d = m.finalize_all(&update).await;
        assert!(
            matches!(d, Delivery::Retry { after: Some(a), .. } if a == Duration::from_secs(2)),
            "{d:?}"
        );
        // The retry edits only the copy left; the refused one is never tried again.
        assert_eq!(m.finalize_all(&update).await, Delivery::Done);
        assert_eq!(m.platform.edits.locked().len(), 2);
        assert_eq!(m.finalize_all(&update).await, Delivery::Done);
        assert_eq!(m.platform.edits.locked().len(), 2);
    }

    #[test]
    fn failures_map_to_what_the_outbox_does() {
        assert!(matches!(
            Failure::Transient("x".into()).delivery(),
            Delivery::Retry { after: None, .. }
        ));
        assert_eq!(
            Failure::Permanent("gone".into()).delivery(),
            Delivery::Failed("gone".into())
        );
    }
}
