//! Posting and editing Matrix messages through the durable outbox, on the shared delivery
//! skeleton ([`crate::channels::messages`]): a `post` job sends the prompt to one room (a
//! person messaged directly gets a direct room, made once and remembered), an `update` job
//! edits every copy (`m.replace`) to show the outcome, a `voted` job edits them to show the
//! votes so far. Each send carries a transaction id derived from what it does, so a retried
//! send after a lost answer is not posted twice. A room that is end-to-end encrypted gets
//! nothing (see docs/matrix.md): the job fails saying so.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use ruma::events::room::message::{ReplacementMetadata, RoomMessageEventContent};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use super::CHANNEL;
use super::Job;
use super::api::{ApiError, Retry};
use super::render::{Render, Text};
use super::session::Session;
use crate::channels::digest::{Digests, Edited, Sheet};
use crate::channels::digest_texts::Texts;
use crate::channels::messages::{Failure, Pacer, Platform, Posted};
use crate::channels::threads::{Opener, ThreadPer, Threads, outcome_line};
use crate::interaction::Interaction;
use crate::store::{BOUND_VALUE_PREFIX, ChannelMessage, OutboxJob, Store, StoreError};
use crate::sync::LockExt;

/// Smallest gap between two requests to one room (homeservers limit a sender's messages;
/// Synapse's default is about 0.2 a second sustained with bursts of 10).
pub(crate) const ROOM_GAP: Duration = Duration::from_millis(200);
/// How long a throttled room is kept quiet when the homeserver does not say.
pub(crate) const THROTTLE_PAUSE: Duration = Duration::from_secs(2);
/// How long a room's encryption, once looked up, is trusted.
const ENCRYPTION_TTL: Duration = Duration::from_secs(300);

/// What a failed call means for the job.
pub(crate) fn failure(e: &ApiError) -> Failure {
    match e.retry() {
        Retry::After(after) => Failure::Throttled {
            after,
            error: e.to_string(),
        },
        Retry::Transient => Failure::Transient(e.to_string()),
        Retry::Permanent => Failure::Permanent(e.to_string()),
    }
}

/// The named value that maps a posted event to its interaction (pruned with it).
pub(crate) fn event_key(event_id: &str) -> String {
    format!("{BOUND_VALUE_PREFIX}matrix.event:{event_id}")
}

/// The named value that marks event `event_id` as a digest the bot posted: the id of its
/// first member (pruned with it). A reaction finds its digest by it, one read.
pub(crate) fn digest_key(event_id: &str) -> String {
    format!("{BOUND_VALUE_PREFIX}matrix.digest:{event_id}")
}

/// The named value that marks event `event_id` as a digest's confirmation the bot posted:
/// the id of the first member it confirms (pruned with it).
pub(crate) fn confirmation_key(event_id: &str) -> String {
    format!("{BOUND_VALUE_PREFIX}matrix.confirmation:{event_id}")
}

/// The named value that remembers the direct room with `user`.
pub(crate) fn direct_key(user: &str) -> String {
    format!("matrix.direct:{user}")
}

/// A transaction id for what `parts` describe: the same parts, the same id.
pub(crate) fn txn(parts: &[&str]) -> String {
    let mut h = Sha256::new();
    for p in parts {
        h.update(p.as_bytes());
        h.update([0u8]);
    }
    format!("imrelay-{}", &hex::encode(h.finalize())[..40])
}

/// The content of a formatted message.
pub(crate) fn formatted(t: &Text) -> RoomMessageEventContent {
    RoomMessageEventContent::text_html(t.plain.clone(), t.html.clone())
}

/// Matrix as the delivery skeleton sees it; one, cloned, serves the outbox and the `/sync`
/// loop.
#[derive(Clone)]
pub(crate) struct Matrix {
    /// The bot's session with the homeserver.
    pub session: Arc<Session>,
    /// Message rendering.
    pub render: Render,
    /// Where direct rooms and posted events are remembered.
    pub store: Arc<dyn Store>,
    /// Rooms whose encryption was looked up, and when.
    encrypted: Arc<Mutex<HashMap<String, (bool, Instant)>>>,
    /// The channel's digests (what one shows before it is edited).
    digests: Option<Digests>,
    /// A thread per agent session (`matrix.thread_per`).
    threads: Threads,
    /// Whether the outcome is also posted as a reply to each message.
    thread_replies: bool,
}

impl Matrix {
    /// The platform over `session`.
    pub(super) fn new(session: Arc<Session>, render: Render, store: Arc<dyn Store>) -> Self {
        Self {
            session,
            render,
            threads: Threads::new(store.clone(), CHANNEL, ThreadPer::None),
            store,
            encrypted: Arc::default(),
            digests: None,
            thread_replies: false,
        }
    }

    /// The same, with its threads per session and `thread_replies` as set.
    pub(super) fn with_threads(mut self, threads: Threads, thread_replies: bool) -> Self {
        self.threads = threads;
        self.thread_replies = thread_replies;
        self
    }

    /// The same, over the channel's `digests`.
    pub(super) fn with_digests(mut self, digests: Digests) -> Self {
        self.digests = Some(digests);
        self
    }

    /// Marks event `event` as the bot's under `key` (its [`digest_key`] or
    /// [`confirmation_key`]), bound to the first member of `sheet`.
    pub(super) async fn mark(
        &self,
        key: fn(&str) -> String,
        event: &str,
        sheet: &Sheet,
    ) -> Result<(), Failure> {
        let Some((first, _)) = crate::channels::digest::parse_incarnation(&sheet.first) else {
            return Ok(());
        };
        self.store
            .set_value(&key(event), Some(first.to_string()))
            .await
            .map_err(Failure::store)
    }

    /// The transaction of the edit of digest `message` at `address` to `text`: the same
    /// edit (a retry), the same id. The set the kit keeps for the digest when the edit is
    /// asked tells a list shown again after another from the first time it was shown (the
    /// homeserver would take the second for a retry of the first, and drop it).
    async fn digest_edit_txn(
        &self,
        address: &str,
        message: &str,
        sheet: &Sheet,
        text: &Text,
    ) -> Result<String, Failure> {
        let before = match &self.digests {
            Some(d) => d
                .shown(address, &sheet.session)
                .await
                .map_err(Failure::store)?,
            None => None,
        };
        let before = before.map(|s| s.set).unwrap_or_default();
        Ok(txn(&["digest-edit", message, &before, &text.plain]))
    }

    /// Posts the prompt of `i` to `target`, in the thread under event `thread` when given.
    async fn post_to(
        &self,
        i: &Interaction,
        target: &str,
        job: &OutboxJob,
        thread: Option<&str>,
    ) -> Result<Posted, Failure> {
        let room = self.room_of(target).await?;
        self.check_unencrypted(&room).await?;
        let mut content = serde_json::to_value(formatted(&self.render.message(i)))
            .map_err(|e| Failure::Permanent(format!("cannot encode the prompt: {e}")))?;
        if let Some(root) = thread {
            content["m.relates_to"] = in_thread(root, root, true);
        }
        let event_id = self
            .send(&room, &txn(&["post", &job.key, target]), content)
            .await?;
        let mut state = json!({
            "room": room,
            "created": i.created_at.as_millisecond(),
        });
        if let Some(root) = thread {
            state["thread"] = json!(root);
        }
        Ok(Posted {
            message_ref: event_id,
            state: Some(state),
        })
    }

    /// The room a target names: a room id as it is; a user id, the direct room with them
    /// (made and remembered on first use).
    pub(super) async fn room_of(&self, target: &str) -> Result<String, Failure> {
        if !target.starts_with('@') {
            return Ok(target.to_string());
        }
        let key = direct_key(target);
        if let Some(room) = self.store.get_value(&key).await.map_err(Failure::store)? {
            return Ok(room);
        }
        let room = self
            .session
            .call(|c, t| async move { c.create_direct(target, t).await })
            .await
            .map_err(|e| failure(&e))?;
        tracing::info!(user = %target.escape_debug(), room = %room, "matrix: made a direct room");
        self.store
            .set_value(&key, Some(room.clone()))
            .await
            .map_err(Failure::store)?;
        Ok(room)
    }

    /// Refuses a room that is end-to-end encrypted (looked up at most every few minutes).
    async fn check_unencrypted(&self, room: &str) -> Result<(), Failure> {
        let known = self
            .encrypted
            .locked()
            .get(room)
            .filter(|(_, at)| at.elapsed() < ENCRYPTION_TTL)
            .map(|(e, _)| *e);
        let encrypted = match known {
            Some(e) => e,
            None => {
                let e = self
                    .session
                    .call(|c, t| async move { c.is_encrypted(room, t).await })
                    .await
                    .map_err(|e| failure(&e))?;
                self.encrypted
                    .locked()
                    .insert(room.to_string(), (e, Instant::now()));
                e
            }
        };
        if encrypted {
            return Err(Failure::Permanent(format!(
                "room {room} is end-to-end encrypted, and imrelay does not post into encrypted \
                 rooms yet (the prompt would be in the clear there): use an unencrypted room \
                 (docs/matrix.md)"
            )));
        }
        Ok(())
    }

    /// Sends `content` as an `m.room.message` to `room` under transaction `txn`.
    async fn send(&self, room: &str, txn: &str, content: Value) -> Result<String, Failure> {
        self.session
            .call(|c, t| {
                let content = content.clone();
                async move { c.send(room, "m.room.message", txn, &content, t).await }
            })
            .await
            .map_err(|e| failure(&e))
    }

    /// Edits copy `m` to read as `i` does now; `what` tells this edit from others.
    async fn replace(
        &self,
        i: &Interaction,
        m: &ChannelMessage,
        what: &str,
    ) -> Result<(), Failure> {
        let id = txn(&[what, &m.message_ref, &i.incarnation()]);
        let text = self.render.message(i);
        self.replace_with(room_of_copy(m), &m.message_ref, &text, &id)
            .await
    }

    /// Edits event `event` in `room` to read `text` (`m.replace`), under transaction `txn`.
    pub(super) async fn replace_with(
        &self,
        room: &str,
        event: &str,
        text: &Text,
        txn: &str,
    ) -> Result<(), Failure> {
        let Ok(event_id) = ruma::OwnedEventId::try_from(event) else {
            return Err(Failure::Permanent(format!("{event:?} is not an event id")));
        };
        let content = formatted(text).make_replacement(ReplacementMetadata::new(event_id, None));
        let content = serde_json::to_value(&content)
            .map_err(|e| Failure::Permanent(format!("cannot encode the edit: {e}")))?;
        self.send(room, txn, content).await.map(|_| ())
    }

    /// Sends `content` (an `m.room.message`) to the room `target` names, once per `txn`
    /// parts; returns its event id.
    pub(super) async fn post_content(
        &self,
        target: &str,
        content: Value,
        parts: &[&str],
    ) -> Result<String, Failure> {
        let room = self.room_of(target).await?;
        self.check_unencrypted(&room).await?;
        self.send(&room, &txn(parts), content).await
    }
}

/// The relation that puts an event in the thread under `root`, replying to `reply_to`
/// (`falling_back`: only so that clients without threads show it under the thread).
pub(crate) fn in_thread(root: &str, reply_to: &str, falling_back: bool) -> Value {
    json!({
        "rel_type": "m.thread",
        "event_id": root,
        "is_falling_back": falling_back,
        "m.in_reply_to": { "event_id": reply_to },
    })
}

/// The room a recorded copy is in.
pub(crate) fn room_of_copy(m: &ChannelMessage) -> &str {
    m.state
        .as_ref()
        .and_then(|s| s["room"].as_str())
        .unwrap_or(&m.address)
}

#[async_trait]
impl Platform for Matrix {
    type Target = String;
    type Job = Job;

    /// A digest is answered by reactions on it (see `render::Render::digest`).
    fn has_digests(&self) -> bool {
        true
    }

    fn texts(&self) -> Texts {
        Texts(self.render.locale)
    }

    async fn post_digest(&self, room: &String, sheet: &Sheet) -> Result<String, Failure> {
        let content = serde_json::to_value(formatted(&self.render.digest(sheet)))
            .map_err(|e| Failure::Permanent(format!("cannot encode the digest: {e}")))?;
        let parts = ["digest", room, &sheet.session, &sheet.first];
        let event = self.post_content(room, content, &parts).await?;
        // A retry posts nothing new (the same transaction) and marks it again.
        self.mark(digest_key, &event, sheet).await?;
        Ok(event)
    }

    async fn edit_digest(
        &self,
        address: &str,
        message: &str,
        sheet: &Sheet,
    ) -> Result<Edited, Failure> {
        let room = self.room_of(address).await?;
        let text = self.render.digest(sheet);
        let id = self.digest_edit_txn(address, message, sheet, &text).await?;
        self.replace_with(&room, message, &text, &id).await?;
        // Marked again under the first member it lists now: a mark outlives its member's
        // pruning, and a digest posted before marks were kept gets one.
        self.mark(digest_key, message, sheet).await?;
        Ok(Edited::Done)
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
        job: &OutboxJob,
    ) -> Result<Posted, Failure> {
        self.post_to(i, target, job, None).await
    }

    fn threads(&self) -> Option<&Threads> {
        Some(&self.threads)
    }

    /// A first message naming the session: its event is the thread's root.
    async fn open_thread(&self, target: &String, opener: &Opener) -> Result<String, Failure> {
        let room = self.room_of(target).await?;
        self.check_unencrypted(&room).await?;
        let lines = opener.lines(self.render.locale);
        let html: Vec<String> = lines.iter().map(|l| super::render::esc(l)).collect();
        let content = serde_json::to_value(RoomMessageEventContent::text_html(
            lines.join("\n"),
            html.join("<br>"),
        ))
        .map_err(|e| Failure::Permanent(format!("cannot encode the thread's root: {e}")))?;
        let id = txn(&["thread", &room, &opener.agent, &opener.session]);
        self.send(&room, &id, content).await
    }

    async fn post_in_thread(
        &self,
        i: &Interaction,
        target: &String,
        job: &OutboxJob,
        thread: &str,
    ) -> Result<Posted, Failure> {
        self.post_to(i, target, job, Some(thread)).await
    }

    fn replies_steer(&self) -> bool {
        true
    }

    fn thread_replies(&self) -> bool {
        self.thread_replies
    }

    /// The outcome as a reply to the prompt (`m.in_reply_to`), in its thread if it has one.
    async fn reply_outcome(&self, i: &Interaction, m: &ChannelMessage) -> Result<(), Failure> {
        let Some(line) = outcome_line(i, self.render.locale) else {
            return Ok(());
        };
        let mut content = serde_json::to_value(RoomMessageEventContent::text_html(
            line.clone(),
            super::render::esc(&line),
        ))
        .map_err(|e| Failure::Permanent(format!("cannot encode the reply: {e}")))?;
        let thread = m.state.as_ref().and_then(|s| s["thread"].as_str());
        content["m.relates_to"] = match thread {
            Some(root) => in_thread(root, &m.message_ref, false),
            None => json!({ "m.in_reply_to": { "event_id": m.message_ref } }),
        };
        let id = txn(&["outcome", &m.message_ref, &i.incarnation()]);
        self.send(room_of_copy(m), &id, content).await.map(|_| ())
    }

    async fn record(
        &self,
        store: &dyn Store,
        m: ChannelMessage,
        _job: &OutboxJob,
    ) -> Result<ChannelMessage, StoreError> {
        // The event's id leads an answer (a reaction, a reply) back to its interaction.
        store
            .set_value(
                &event_key(&m.message_ref),
                Some(m.interaction_id.to_string()),
            )
            .await?;
        store.record_message(m.clone()).await?;
        Ok(m)
    }

    async fn show(&self, i: &Interaction, m: &ChannelMessage) -> Result<(), Failure> {
        let votes = i.votes().len().to_string();
        self.replace(i, m, &format!("votes:{votes}")).await
    }

    async fn edit(&self, i: &Interaction, m: &ChannelMessage) -> Result<(), Failure> {
        self.replace(i, m, "final").await
    }
}

/// The pacer for the homeserver's sending rate per room.
pub(crate) fn pacer() -> Pacer {
    Pacer::new(ROOM_GAP, THROTTLE_PAUSE)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::channels::matrix::fake;

    #[test]
    fn a_transaction_id_names_what_it_sends() {
        assert_eq!(txn(&["post", "k", "!r:x"]), txn(&["post", "k", "!r:x"]));
        assert_ne!(txn(&["post", "k", "!r:x"]), txn(&["post", "k", "!s:x"]));
        assert_ne!(txn(&["ab", "c"]), txn(&["a", "bc"]));
    }

    #[tokio::test]
    async fn a_retried_digest_edit_reuses_its_transaction_and_a_list_shown_again_does_not() {
        let (_, matrix, inbound) = fake::channel().await;
        let show = |set: &str| {
            let shown = crate::channels::digest::Shown {
                message_ref: Some("$d:fake".into()),
                set: set.into(),
                ..Default::default()
            };
            let digests = inbound.digests.clone();
            async move {
                digests
                    .set_shown(fake::ROOM, "s", Some(&shown))
                    .await
                    .unwrap()
            }
        };
        let (a, b) = (fake::sheet("s", "A", ""), fake::sheet("s", "B", ""));
        let text = |s: &Sheet| matrix.render.digest(s);
        let edit = |s: &Sheet| {
            let (matrix, t) = (&matrix, text(s));
            let s = s.clone();
            async move {
                matrix
                    .digest_edit_txn(fake::ROOM, "$d:fake", &s, &t)
                    .await
                    .unwrap()
            }
        };
        show("A").await;
        let first = edit(&b).await;
        assert_eq!(edit(&b).await, first, "a retry is the same edit");
        show("B").await;
        let back = edit(&a).await;
        assert_eq!(edit(&a).await, back, "a retry is the same edit");
        // The list of A shown again, after another: a new edit, not one the homeserver
        // would take for a retry of the last and drop.
        show("C").await;
        assert_ne!(edit(&a).await, back);
    }

    #[tokio::test]
    async fn the_sync_loops_platform_is_the_outboxs_one_client() {
        let (hs, matrix, inbound) = fake::channel().await;
        matrix.check_unencrypted(fake::ROOM).await.unwrap();
        inbound.matrix.check_unencrypted(fake::ROOM).await.unwrap();
        let asked = hs.requests();
        assert_eq!(
            asked.len(),
            1,
            "one lookup of the room's encryption: {asked:?}"
        );
        assert!(Arc::ptr_eq(&matrix.session, &inbound.matrix.session));
    }

    #[test]
    fn an_edit_replaces_the_prompt_and_carries_the_new_text() {
        let t = Text {
            plain: "done".into(),
            html: "<b>done</b>".into(),
        };
        let id = ruma::OwnedEventId::try_from("$abc:example.org").unwrap();
        let c = formatted(&t).make_replacement(ReplacementMetadata::new(id, None));
        let v = serde_json::to_value(&c).unwrap();
        assert_eq!(v["m.relates_to"]["rel_type"], "m.replace");
        assert_eq!(v["m.relates_to"]["event_id"], "$abc:example.org");
        assert_eq!(v["m.new_content"]["formatted_body"], "<b>done</b>");
        assert_eq!(v["m.new_content"]["format"], "org.matrix.custom.html");
    }
}
