//! Answers from Matrix: the `/sync` long poll, and the reactions and replies on prompts it
//! brings, through the answer pipeline.
//!
//! - The poll resumes from the `since` token kept in the store's named values (per bot
//!   account), saved after each batch is handled: a restart neither answers again nor misses
//!   what came meanwhile. The first poll of an account answers only what was sent since the
//!   process started (as the homeserver's timestamps say, compared with this machine's clock):
//!   history from before imrelay ran answers nothing, and a message written while the first
//!   poll was on its way is not lost.
//! - Invitations to a room on `matrix.chats`, and to direct rooms from a configured person,
//!   are accepted; others are left alone.
//! - A reaction ✅ (allow an approval), ❌ (deny, or decline a question or form) or 🔁
//!   ("Allow similar") on a prompt, or a reply to a prompt (an approval: `edit: <command>`
//!   allows it with the command changed, anything else denies it with the reply as the
//!   reason; a question: an option's number or the person's own words, one line per
//!   question; a form: `name: value` lines), is an answer. A reaction on a digest or its
//!   confirmation goes through the kit's digest flow (`digest.rs`). Each event is taken once (`first_sighting` on its
//!   id); an edit (`m.replace`) of an earlier message answers nothing.
//! - The sender must be an approver: checked on every answer by the pipeline. Whoever is
//!   refused, answered late, or wrote an answer that does not fit gets a notice in reply,
//!   in the channel's locale; an answer that resolves shows on the prompt itself (every copy
//!   is edited through the outbox).

use std::sync::Arc;
use std::time::Duration;

use jiff::Timestamp;
use ruma::events::reaction::ReactionEventContent;
use ruma::events::room::message::sanitize::remove_plain_reply_fallback;
use ruma::events::room::message::{
    AddMentions, ForwardThread, Relation, ReplyMetadata, RoomMessageEventContent,
};
use ruma::events::{
    AnySyncMessageLikeEvent, AnySyncTimelineEvent, OriginalSyncMessageLikeEvent,
    SyncMessageLikeEvent,
};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::CHANNEL;
use super::api::ApiError;
use super::deliver::{event_key, txn};
use super::render::{ALLOW, DENY, REVIEW, Render, SIMILAR};
use super::session::Session;
use super::settings::MatrixSettings;
use crate::channels::pipeline::{Decision, Feedback, Pipeline, Tap};
use crate::channels::typed::{edited_command, form_content, question_answers};
use crate::health::Health;
use crate::interaction::{Answer, Interaction, InteractionId, Kind, Responder, Via, clip};
use crate::store::Store;

/// How many times a notice is sent before it is given up.
const NOTICE_ATTEMPTS: u32 = 3;

/// The wait before a notice is sent again (times the attempt), when the homeserver did not
/// say how long.
const NOTICE_RETRY: Duration = Duration::from_secs(1);

/// The longest wait between two sends of a notice, whatever the homeserver asks.
const NOTICE_MAX_WAIT: Duration = Duration::from_secs(10);

/// How long an event id is remembered as handled, hours.
const SEEN_HOURS: i64 = 7 * 24;
/// The longest reply read as an answer.
const MAX_REPLY_CHARS: usize = 4000;

/// What a person's event means.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum Said {
    /// A reaction ✅.
    Allow,
    /// A reaction ❌.
    Deny,
    /// A reaction 🔁: "Allow similar".
    Similar,
    /// A reaction 👀: a digest's Review (on a prompt, nothing).
    Review,
    /// A reply's text.
    Reply(String),
}

/// A person's answer to a prompt, as read from one event.
#[derive(Clone, Debug)]
pub(super) struct Heard {
    /// The room it was sent in.
    pub room: String,
    /// Its event id.
    pub event_id: String,
    /// Who sent it.
    pub sender: String,
    /// The event it reacts or replies to (empty: a message in a thread that replies to no
    /// event in particular).
    pub prompt: String,
    /// The root of the thread it was written in, if any.
    pub root: Option<String>,
    /// What it says.
    pub said: Said,
}

/// The sync loop and answer handler.
pub(crate) struct Inbound {
    /// Posting and editing (a digest's confirmation, the digest itself).
    pub matrix: super::deliver::Matrix,
    /// The channel's digests.
    pub digests: crate::channels::digest::Digests,
    /// The bot's session.
    pub session: Arc<Session>,
    /// The answer pipeline.
    pub pipeline: Pipeline,
    /// Interactions, copies, the `since` token and the events seen.
    pub store: Arc<dyn Store>,
    /// The section.
    pub settings: Arc<MatrixSettings>,
    /// Rendering of notices.
    pub render: Render,
    /// Where the connection's state is reported.
    pub health: Arc<Health>,
    /// Fires at shutdown.
    pub shutdown: CancellationToken,
}

/// Whether `event` was sent at or after `not_before` (unix ms, this process's clock, compared
/// with the homeserver's `origin_server_ts`: a skew between the two clocks moves the bound by
/// as much); every event when there is no such bound.
fn sent_since(event: &Value, not_before: Option<i64>) -> bool {
    not_before.is_none_or(|t| event["origin_server_ts"].as_i64().is_some_and(|ts| ts >= t))
}

/// Reads the sync key of account `user`.
fn since_key(user: &str) -> String {
    format!("matrix.since:{user}")
}

/// The reaction key as people mean it: without the emoji variation selector.
fn reaction(key: &str) -> Option<Said> {
    let k: String = key.chars().filter(|c| *c != '\u{fe0f}').collect();
    match k.as_str() {
        k if k == ALLOW => Some(Said::Allow),
        "✔" | "👍" => Some(Said::Allow),
        k if k == DENY => Some(Said::Deny),
        "✖" | "👎" => Some(Said::Deny),
        k if k == SIMILAR => Some(Said::Similar),
        k if k == REVIEW => Some(Said::Review),
        _ => None,
    }
}

/// What `event` in `room` says about a prompt, if anything.
fn heard(room: &str, event: &Value) -> Option<Heard> {
    let parsed: AnySyncTimelineEvent = serde_json::from_value(event.clone()).ok()?;
    let AnySyncTimelineEvent::MessageLike(m) = parsed else {
        return None;
    };
    match m {
        AnySyncMessageLikeEvent::Reaction(SyncMessageLikeEvent::Original(
            OriginalSyncMessageLikeEvent {
                content: ReactionEventContent { relates_to, .. },
                event_id,
                sender,
                ..
            },
        )) => Some(Heard {
            room: room.to_string(),
            event_id: event_id.to_string(),
            sender: sender.to_string(),
            prompt: relates_to.event_id.to_string(),
            root: None,
            said: reaction(&relates_to.key)?,
        }),
        AnySyncMessageLikeEvent::RoomMessage(SyncMessageLikeEvent::Original(ev)) => {
            let (prompt, root) = match &ev.content.relates_to {
                Some(Relation::Reply(r)) => (r.in_reply_to.event_id.to_string(), None),
                Some(Relation::Thread(t)) if !t.is_falling_back => (
                    t.in_reply_to.as_ref()?.event_id.to_string(),
                    Some(t.event_id.to_string()),
                ),
                // In a thread, replying to nothing in particular: said to the thread (a
                // session's thread takes it as a message to the session), never an answer.
                Some(Relation::Thread(t)) => (String::new(), Some(t.event_id.to_string())),
                // An edit changes nothing: the answer was the message it edits, if any.
                _ => return None,
            };
            let text = remove_plain_reply_fallback(ev.content.body()).trim();
            if text.is_empty() {
                return None;
            }
            Some(Heard {
                room: room.to_string(),
                event_id: ev.event_id.to_string(),
                sender: ev.sender.to_string(),
                prompt,
                root,
                said: Said::Reply(text.chars().take(MAX_REPLY_CHARS).collect()),
            })
        }
        _ => None,
    }
}

/// The decision `said` gives `i`; `Err` says why it does not fit. A reply to an approval
/// that starts with `edit:` runs the command changed ("Edit & approve"); any other reply
/// denies it, its text the reason. Whether the approval offers "Allow similar" or an edit
/// is the pipeline's to say (`Pipeline::decide`; see [`worded`]).
fn answer(i: &Interaction, said: &Said) -> Result<Decision, String> {
    let answer = match (said, i.kind) {
        (Said::Allow | Said::Similar, Kind::Question | Kind::Form) => {
            let key = if *said == Said::Allow { ALLOW } else { SIMILAR };
            return Err(format!(
                "{key} allows an approval; answer a question or form by replying to it"
            ));
        }
        (Said::Allow, Kind::Approval) => Answer::allow(),
        (Said::Similar, Kind::Approval) => return Ok(Decision::AllowSimilar),
        (Said::Deny, _) => Answer::deny(None),
        (Said::Review, _) => return Err(format!("{REVIEW} reviews a digest's requests")),
        (Said::Reply(text), Kind::Approval) => {
            if let Some(command) = edited_command(text) {
                return Ok(Decision::Edit(command.to_string()));
            }
            Answer::deny(Some(text.clone()))
        }
        (Said::Reply(text), Kind::Question) => Answer::Answers(question_answers(i, text)?),
        (Said::Reply(text), Kind::Form) => Answer::Accept(form_content(i, text)?),
    };
    Ok(Decision::Answer(answer))
}

/// The pipeline's `feedback` on `said`, in Matrix's words: a decision the approval does not
/// take ([`Decision::AllowSimilar`] or [`Decision::Edit`], which the pipeline refuses as a
/// bad button) is a reaction or reply that does not fit, and says what does.
fn worded(feedback: Feedback, said: &Said) -> Feedback {
    match (feedback, said) {
        (Feedback::BadButton, Said::Similar) => Feedback::Invalid(format!(
            "{SIMILAR} is not offered on this one (no rule is proposed for its session): react {ALLOW} to allow it"
        )),
        (Feedback::BadButton, Said::Reply(text)) if edited_command(text).is_some() => {
            Feedback::Invalid(format!(
                "this approval's input cannot be edited here: react {ALLOW} to allow it as it is"
            ))
        }
        (f, _) => f,
    }
}

impl Inbound {
    /// Polls `/sync` until shutdown.
    pub(super) async fn run(self) {
        let started = Timestamp::now().as_millisecond();
        let mut attempt = 0u32;
        let me = loop {
            match self
                .session
                .call(|c, t| async move { c.whoami(t).await })
                .await
            {
                Ok(w) => break w.user_id,
                Err(e) => {
                    self.failing(&e);
                    if !self.pause(&mut attempt).await {
                        return;
                    }
                }
            }
        };
        self.check_rooms().await;
        let key = since_key(&me);
        let mut since = match self.store.get_value(&key).await {
            Ok(s) => s,
            Err(e) => {
                tracing::error!(error = %e, "matrix: cannot read the sync position; starting from now");
                None
            }
        };
        let wait = Duration::from_secs(self.settings.sync_timeout_secs);
        loop {
            let polled = tokio::select! {
                () = self.shutdown.cancelled() => return,
                r = self.session.call(|c, t| {
                    let since = since.clone();
                    async move { c.sync(since.as_deref(), wait, t).await }
                }) => r,
            };
            let batch = match polled {
                Ok(b) => b,
                Err(e) => {
                    self.failing(&e);
                    if !self.pause(&mut attempt).await {
                        return;
                    }
                    continue;
                }
            };
            attempt = 0;
            self.health.set(
                CHANNEL,
                "connected",
                serde_json::json!({"transport": "sync", "user": me}),
            );
            self.invitations(&batch, &me).await;
            // An account's first poll answers only what was sent since this process
            // started: history from before answers nothing, and a message written while the
            // first poll was on its way is not lost.
            let not_before = since.is_none().then_some(started);
            self.timeline(&batch, &me, not_before).await;
            if let Some(next) = batch["next_batch"].as_str() {
                since = Some(next.to_string());
                if let Err(e) = self.store.set_value(&key, since.clone()).await {
                    tracing::warn!(error = %e, "matrix: cannot save the sync position");
                }
            }
        }
    }

    /// Reports a failed call and logs it.
    fn failing(&self, e: &ApiError) {
        tracing::warn!(error = %e, "matrix: the homeserver did not answer as expected; trying again");
        self.health.set(
            CHANNEL,
            "failing",
            serde_json::json!({"last_error": e.to_string()}),
        );
    }

    /// Waits before the next try; `false` at shutdown.
    async fn pause(&self, attempt: &mut u32) -> bool {
        *attempt = attempt.saturating_add(1);
        let wait = crate::channels::longconn::backoff(
            *attempt,
            Duration::from_secs(1),
            Duration::from_secs(60),
        );
        tokio::select! {
            () = self.shutdown.cancelled() => false,
            () = tokio::time::sleep(wait) => true,
        }
    }

    /// Joins the configured rooms the bot is not in yet, and warns about encrypted ones.
    async fn check_rooms(&self) {
        let joined = self
            .session
            .call(|c, t| async move { c.joined_rooms(t).await })
            .await
            .unwrap_or_default();
        for room in &self.settings.chats {
            if !joined.contains(room) {
                match self
                    .session
                    .call(|c, t| async move { c.join(room, t).await })
                    .await
                {
                    Ok(_) => tracing::info!(room = %room, "matrix: joined a configured room"),
                    Err(e) => tracing::warn!(room = %room, error = %e,
                        "matrix: the bot is not in a configured room and cannot join it: invite the bot's account to it"),
                }
            }
            if let Ok(true) = self
                .session
                .call(|c, t| async move { c.is_encrypted(room, t).await })
                .await
            {
                tracing::warn!(room = %room,
                    "matrix: this configured room is end-to-end encrypted; imrelay does not post into encrypted rooms yet, \
                     so it gets no prompts: use an unencrypted room (docs/matrix.md)");
            }
        }
    }

    /// Accepts invitations to configured rooms and direct rooms from configured people.
    async fn invitations(&self, batch: &Value, me: &str) {
        let Some(invites) = batch["rooms"]["invite"].as_object() else {
            return;
        };
        for (room, data) in invites {
            let inviter = data["invite_state"]["events"]
                .as_array()
                .into_iter()
                .flatten()
                .find(|e| e["type"] == "m.room.member" && e["state_key"] == me)
                .and_then(|e| e["sender"].as_str())
                .unwrap_or_default();
            let known = self.settings.is_approver(inviter)
                || self
                    .pipeline
                    .registry()
                    .teams()
                    .people
                    .name_of(CHANNEL, inviter)
                    .is_some();
            if !self.settings.chats.contains(room) && !known {
                tracing::info!(room = %room, inviter = %inviter.escape_debug(),
                    "matrix: not joining a room that is not on matrix.chats, from someone not configured");
                continue;
            }
            match self
                .session
                .call(|c, t| async move { c.join(room, t).await })
                .await
            {
                Ok(_) => {
                    tracing::info!(room = %room, inviter = %inviter.escape_debug(), "matrix: accepted an invitation")
                }
                Err(e) => {
                    tracing::warn!(room = %room, error = %e, "matrix: cannot accept an invitation")
                }
            }
        }
    }

    /// Handles every answer in the joined rooms' timelines.
    async fn timeline(&self, batch: &Value, me: &str, not_before: Option<i64>) {
        let Some(rooms) = batch["rooms"]["join"].as_object() else {
            return;
        };
        for (room, data) in rooms {
            for event in data["timeline"]["events"].as_array().into_iter().flatten() {
                if event["sender"] == me || !sent_since(event, not_before) {
                    continue;
                }
                if let Some(h) = heard(room, event) {
                    self.answer(h, me).await;
                } else {
                    self.command(room, event).await;
                }
            }
        }
    }

    /// The interaction whose prompt is event `prompt` in `room`, and the creation time its
    /// copy was posted for.
    async fn prompt_of(&self, h: &Heard) -> Option<(InteractionId, Option<i64>)> {
        let id = self.store.get_value(&event_key(&h.prompt)).await.ok()??;
        let id = InteractionId::parse(&id).ok()?;
        let copies = self.store.messages(CHANNEL, &id).await.ok()?;
        let copy = copies
            .into_iter()
            .find(|m| m.message_ref == h.prompt && super::deliver::room_of_copy(m) == h.room)?;
        let created = copy.state.as_ref().and_then(|s| s["created"].as_i64());
        Some((id, created))
    }

    /// Takes one answer through the pipeline, and tells the person what became of it unless
    /// the prompt itself shows it.
    async fn answer(&self, h: Heard, me: &str) {
        if let Said::Reply(text) = &h.said
            && self.to_session(&h, text).await
        {
            return;
        }
        let Some((id, created)) = self.prompt_of(&h).await else {
            // A reaction on a digest or its confirmation; otherwise not an answer to a
            // message of imrelay's: a conversation, left alone.
            if !matches!(h.said, Said::Reply(_)) {
                self.digest_reaction(&h, me).await;
            }
            return;
        };
        // 👀 on a prompt is someone looking at it: nothing to answer.
        if h.said == Said::Review {
            return;
        }
        if !self.taken_once(&h).await {
            return;
        }
        let responder = self.responder(&h.sender);
        let actor = responder.audit_actor().unwrap_or_default();
        let tap = Tap {
            id: &id,
            created,
            actor: &actor,
            identity: &h.sender,
            approver: self.settings.is_approver(&h.sender),
            audit: true,
        };
        let read = |i: &Interaction| answer(i, &h.said);
        let feedback = self.pipeline.answer(&tap, |_| true, read, responder).await;
        let feedback = worded(feedback, &h.said);
        if !matches!(feedback, Feedback::Resolved(_)) {
            self.tell(&h, &feedback.text(self.render.locale)).await;
        }
    }

    /// `sender` as the registry names them.
    pub(super) fn responder(&self, sender: &str) -> Responder {
        let teams = self.pipeline.registry().teams();
        let name = teams
            .people
            .name_of(CHANNEL, sender)
            .map_or_else(|| sender.to_string(), str::to_string);
        Responder::new(name, Via::new(CHANNEL))
            .with_actor_id(format!("matrix:{}", clip(sender, 255)))
            .with_identity(CHANNEL, sender.to_string())
    }

    /// A reply `text` to one of a session's events that is not a pending prompt (an answered
    /// or expired one, the thread's root, or anything in the session's thread): said to the
    /// session through the kit ([`crate::channels::steer`]), and the person told. `false`:
    /// the reply keeps its usual meaning (an answer to a pending prompt, or nothing).
    async fn to_session(&self, h: &Heard, text: &str) -> bool {
        let to: Vec<&str> = [Some(h.prompt.as_str()), h.root.as_deref()]
            .into_iter()
            .flatten()
            .collect();
        let reply = crate::channels::steer::Reply {
            id: &h.event_id,
            // Event ids are unique across rooms.
            chat: None,
            to: &to,
            text,
            responder: self.responder(&h.sender),
            identity: &h.sender,
            approver: self.settings.is_approver(&h.sender),
        };
        let heard = crate::channels::steer::reply(
            &self.pipeline,
            self.store.as_ref(),
            reply,
            self.render.locale,
            true,
        )
        .await;
        match heard {
            crate::channels::steer::Heard::Told(Some(told)) => {
                self.tell(h, &told).await;
                true
            }
            crate::channels::steer::Heard::Told(None) | crate::channels::steer::Heard::Empty => {
                true
            }
            crate::channels::steer::Heard::NotASession | crate::channels::steer::Heard::Prompt => {
                false
            }
        }
    }

    /// Whether `h` is taken now: seen for the first time. A store that cannot record it is
    /// told to the person (the event is not taken).
    pub(super) async fn taken_once(&self, h: &Heard) -> bool {
        match self.first_time(&h.event_id).await {
            Some(seen_first) => seen_first,
            None => {
                self.tell(h, &Feedback::StoreDown.text(self.render.locale))
                    .await;
                false
            }
        }
    }

    /// Whether event `event_id` is seen for the first time (recorded now); `None` when the
    /// store cannot record it (logged; the event is not taken).
    pub(super) async fn first_time(&self, event_id: &str) -> Option<bool> {
        let until = Timestamp::now()
            .checked_add(jiff::SignedDuration::from_hours(SEEN_HOURS))
            .unwrap_or(Timestamp::MAX);
        match self
            .store
            .first_sighting("matrix.event", event_id, until)
            .await
        {
            Ok(true) => Some(true),
            Ok(false) => {
                tracing::debug!(event = %event_id, "matrix: an event seen before; ignored");
                Some(false)
            }
            Err(e) => {
                tracing::warn!(error = %e, "matrix: cannot record an event as seen; not answering it");
                None
            }
        }
    }

    /// Answers the person's event with a notice only they are mentioned in.
    pub(super) async fn tell(&self, h: &Heard, text: &str) {
        self.notice(&h.room, &h.event_id, &h.sender, text).await;
    }

    /// Answers event `event_id` of `sender` in `room` with a notice of `text`, in reply to
    /// it, mentioning them only.
    pub(super) async fn notice(&self, room: &str, event_id: &str, sender: &str, text: &str) {
        let (Ok(event), Ok(who)) = (
            ruma::OwnedEventId::try_from(event_id),
            ruma::OwnedUserId::try_from(sender),
        ) else {
            return;
        };
        let t = self.render.notice(sender, text);
        let content = RoomMessageEventContent::notice_html(t.plain, t.html).make_reply_to(
            ReplyMetadata::new(&event, &who, None),
            ForwardThread::Yes,
            AddMentions::Yes,
        );
        let Ok(content) = serde_json::to_value(&content) else {
            return;
        };
        let txn = txn(&["notice", event_id]);
        // A notice is the only answer the person gets (a refusal, `whoami`, `sessions`): a
        // throttled or failed send is tried again a few times. The transaction id is the
        // same every time, so a send that did land is not shown twice.
        for attempt in 1..=NOTICE_ATTEMPTS {
            let sent = self
                .session
                .call(|c, t| {
                    let content = content.clone();
                    let txn = txn.clone();
                    async move { c.send(room, "m.room.message", &txn, &content, t).await }
                })
                .await;
            let Err(e) = sent else { return };
            let wait = match e.retry() {
                super::api::Retry::Permanent => None,
                super::api::Retry::After(wait) => Some(wait.unwrap_or(NOTICE_RETRY)),
                super::api::Retry::Transient => Some(NOTICE_RETRY * attempt),
            };
            match wait.filter(|_| attempt < NOTICE_ATTEMPTS) {
                Some(wait) => tokio::time::sleep(wait.min(NOTICE_MAX_WAIT)).await,
                None => {
                    tracing::warn!(room = %room, error = %e, attempt, "matrix: cannot send a notice");
                    return;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_first_poll_answers_only_what_was_sent_since_the_start() {
        let at = |ts: i64| serde_json::json!({"type": "m.room.message", "origin_server_ts": ts});
        assert!(sent_since(&at(5), Some(5)) && sent_since(&at(9), Some(5)));
        assert!(
            !sent_since(&at(4), Some(5)),
            "history from before the start"
        );
        assert!(
            !sent_since(&serde_json::json!({}), Some(5)),
            "no time: not known to be new"
        );
        assert!(sent_since(&at(1), None), "a later poll: every event");
    }
    use serde_json::json;

    #[test]
    fn reactions_and_replies_are_read_and_edits_are_not() {
        let r = json!({"type": "m.reaction", "event_id": "$r:x", "sender": "@a:x",
            "origin_server_ts": 1, "content": {"m.relates_to": {"rel_type": "m.annotation",
            "event_id": "$p:x", "key": "✅\u{fe0f}"}}});
        let h = heard("!room:x", &r).unwrap();
        assert_eq!(h.said, Said::Allow);
        assert_eq!(h.prompt, "$p:x");
        let reply = json!({"type": "m.room.message", "event_id": "$m:x", "sender": "@a:x",
            "origin_server_ts": 1, "content": {"msgtype": "m.text",
            "body": "> <@bot:x> 🔐 Bash\n\nnot on prod",
            "m.relates_to": {"m.in_reply_to": {"event_id": "$p:x"}}}});
        let h = heard("!room:x", &reply).unwrap();
        assert_eq!(h.said, Said::Reply("not on prod".into()));
        let edit = json!({"type": "m.room.message", "event_id": "$e:x", "sender": "@a:x",
            "origin_server_ts": 1, "content": {"msgtype": "m.text", "body": "* 1",
            "m.new_content": {"msgtype": "m.text", "body": "1"},
            "m.relates_to": {"rel_type": "m.replace", "event_id": "$m:x"}}});
        assert!(heard("!room:x", &edit).is_none());
        // In a thread, replying to nothing in particular: said to the thread's root only.
        let threaded = json!({"type": "m.room.message", "event_id": "$t:x", "sender": "@a:x",
            "origin_server_ts": 1, "content": {"msgtype": "m.text", "body": "use staging",
            "m.relates_to": {"rel_type": "m.thread", "event_id": "$root:x",
                "is_falling_back": true, "m.in_reply_to": {"event_id": "$last:x"}}}});
        let h = heard("!room:x", &threaded).unwrap();
        assert_eq!(
            (h.prompt.as_str(), h.root.as_deref()),
            ("", Some("$root:x"))
        );
        let other = json!({"type": "m.reaction", "event_id": "$r2:x", "sender": "@a:x",
            "origin_server_ts": 1, "content": {"m.relates_to": {"rel_type": "m.annotation",
            "event_id": "$p:x", "key": "🎉"}}});
        assert!(heard("!room:x", &other).is_none());
    }

    #[tokio::test]
    async fn allow_similar_and_edit_are_the_pipelines_to_refuse_in_matrixs_words() {
        let (_, _, inbound) = super::super::fake::channel().await;
        let id = InteractionId::parse("toolu_plain").unwrap();
        let mut i = Interaction::pending(
            id.clone(),
            "Read",
            serde_json::Map::new(),
            Timestamp::now(),
            300,
        );
        i.session = None;
        let i = Arc::new(i);
        inbound
            .store
            .create(i.clone(), Default::default())
            .await
            .unwrap();
        // No rule proposed, nothing to edit: read as asked, refused by the pipeline.
        for said in [Said::Similar, Said::Reply("edit: ls".into())] {
            assert!(answer(&i, &said).is_ok(), "{said:?}");
            let tap = Tap {
                id: &id,
                created: None,
                actor: "alice",
                identity: super::super::fake::ALICE,
                approver: true,
                audit: true,
            };
            let read = |i: &Interaction| answer(i, &said);
            let by = inbound.responder(super::super::fake::ALICE);
            let feedback = inbound.pipeline.answer(&tap, |_| true, read, by).await;
            assert!(matches!(feedback, Feedback::BadButton), "{feedback:?}");
            let Feedback::Invalid(why) = worded(feedback, &said) else {
                panic!("not worded for {said:?}");
            };
            assert!(why.contains(ALLOW), "{why}");
        }
        assert!(inbound.store.get(&id).await.unwrap().unwrap().is_pending());
        let counted = crate::channels::pipeline::ResultLabels {
            result: "refused".into(),
        };
        assert_eq!(
            inbound
                .pipeline
                .results_metric()
                .get_or_create(&counted)
                .get(),
            2
        );
    }
}
