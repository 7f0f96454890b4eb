//! A reply to one of an agent session's messages, on any chat channel, said to the session
//! ([docs/steering.md](../../docs/steering.md)): written once here, each platform only says
//! which of its messages an inbound message replies to.
//!
//! - **Which messages are a session's.** Every prompt the delivery skeleton posts for an
//!   interaction that names a session (its approvals, questions, the "finished" question) is
//!   remembered as `bound:said:<channel>:<message id>` → the interaction's id
//!   ([`remember`]), a small named value pruned with the interaction, so the map is as
//!   bounded as the interactions are; the copy itself ([`crate::store::ChannelMessage`], what
//!   Telegram's replies read) says which chat it is in. A session's digest is remembered the
//!   same way when posted ([`remember_digest`]), under one interaction it lists, its copy
//!   kept as `<channel>:said` (never edited as that interaction's). A session's thread opener
//!   is found among the threads the channel keeps (`thread:<channel>:…`, at most
//!   [`super::threads::MAX_THREADS`]).
//! - **What a reply does** ([`reply`]): to a pending question, form or "finished" question it
//!   is the answer, typed as on every channel that takes typed answers (an option's number,
//!   or the person's own words; a form's `name: value` lines) — unless the channel reads
//!   replies to its prompts itself (Matrix), which then keeps doing so. To anything else of
//!   the session's (a pending approval, a prompt already answered or expired, a digest, the
//!   thread's first message) it is a message to the session, queued by the registry and handed to the
//!   agent at its next step or when its turn ends (`Delivery`).
//! - **Who may.** The registry lets only a person who may answer the session's route message
//!   it (an approver of the route; with no approvers named, one on the channel's list):
//!   anyone else is refused with the same notice as on Telegram, in the audit trail and the
//!   channel's counters. Size and rate are the registry's bounds (`MAX_MESSAGE_CHARS`, a
//!   burst per person).
//! - **Once.** A reply the platform delivers again is taken once (`first_sighting` on its
//!   id, per channel, for a day).

use std::sync::Arc;

use serde_json::Value;

use super::pipeline::{Feedback, Pipeline, Tap, replayed};
use super::threads::Kept;
use super::typed::{form_content, question_answers};
use crate::interaction::sessions::Delivery;
use crate::interaction::{
    Answer, Grantor, Interaction, InteractionId, Kind, RegistryError, Responder,
};
use crate::present::render::Locale;
use crate::store::{BOUND_VALUE_PREFIX, ChannelMessage, Store, StoreError};

/// How long a reply's id is remembered as taken, hours.
const SEEN_HOURS: i64 = 24;

/// The named value that remembers which interaction message `message` of `channel` shows.
fn said_key(channel: &str, message: &str) -> String {
    format!("{BOUND_VALUE_PREFIX}said:{channel}:{message}")
}

/// Remembers that `message` (just posted on `channel`) shows `i`, when `i` belongs to an
/// agent session: a reply to it then reaches the session.
pub(crate) async fn remember(
    store: &dyn Store,
    channel: &str,
    i: &Interaction,
    message: &str,
) -> Result<(), StoreError> {
    if i.session.is_none() || i.agent.is_none() || message.is_empty() {
        return Ok(());
    }
    store
        .set_value(&said_key(channel, message), Some(i.id.to_string()))
        .await
}

/// The channel under which a session's other messages (its digests) are kept: copies that
/// show no interaction of their own, so no edit of an interaction's copies ever reaches them.
fn said_channel(channel: &str) -> String {
    format!("{channel}:said")
}

/// Remembers that `message` (just posted at `address` of `channel`; `state`: the chats it is
/// in beyond its address) is a digest of the session of `first`, one of the interactions it
/// lists: a reply to it then reaches the session, as a message (it answers none of them).
/// Bound to `first`, so pruned with it.
pub(crate) async fn remember_digest(
    store: &dyn Store,
    channel: &str,
    address: &str,
    first: &Interaction,
    (message, state): (String, Option<Value>),
) -> Result<(), StoreError> {
    if first.session.is_none() || first.agent.is_none() || message.is_empty() {
        return Ok(());
    }
    remember(store, channel, first, &message).await?;
    store
        .record_message(ChannelMessage {
            channel: said_channel(channel),
            address: address.to_string(),
            message_ref: message,
            interaction_id: first.id.clone(),
            state,
            created_at: jiff::Timestamp::now(),
        })
        .await
}

/// The session's agent as sessions are kept: a subagent's interactions
/// (`claude-code/Explore`) belong to its agent's session.
pub(crate) fn session_agent(agent: &str) -> &str {
    agent.split_once('/').map_or(agent, |(a, _)| a)
}

/// Whether copy `m` is in `chat` (its address, or a chat its platform state names: the
/// channel a direct message went to, the room, the thread).
fn in_chat(m: &ChannelMessage, chat: &str) -> bool {
    m.address == chat
        || m.state
            .as_ref()
            .and_then(Value::as_object)
            .is_some_and(|s| s.values().any(|v| v.as_str() == Some(chat)))
}

/// The session a message of the channel belongs to, and the interaction it shows when it is
/// a prompt.
struct Target {
    agent: String,
    session: String,
    interaction: Option<Arc<Interaction>>,
}

/// The session message `to` (in `chat`, when the platform's message ids are only unique per
/// chat) belongs to: one of its prompts, or its thread's first message.
async fn target(
    pipeline: &Pipeline,
    store: &dyn Store,
    channel: &str,
    chat: Option<&str>,
    to: &str,
) -> Result<Option<Target>, StoreError> {
    let fits = |m: &ChannelMessage| m.message_ref == to && chat.is_none_or(|c| in_chat(m, c));
    if let Some(id) = store.get_value(&said_key(channel, to)).await?
        && let Ok(id) = InteractionId::parse(&id)
    {
        // One of its prompts (the interaction it shows), or one of its digests (only the
        // session: a reply to a digest answers none of the requests it lists).
        let prompt = store.messages(channel, &id).await?.iter().any(fits);
        let digest = !prompt
            && store
                .messages(&said_channel(channel), &id)
                .await?
                .iter()
                .any(fits);
        // A message that is neither (another chat's with the same id) costs no read.
        let i = if prompt || digest {
            match pipeline.registry().get(&id).await {
                Ok(i) => i,
                Err(RegistryError::Store(e)) => return Err(e),
                Err(_) => None,
            }
        } else {
            None
        };
        if let Some(i) = i
            && let (Some(agent), Some(session)) = (i.agent.clone(), i.session.clone())
        {
            return Ok(Some(Target {
                agent: session_agent(&agent).to_string(),
                session: session.to_string(),
                interaction: prompt.then_some(i),
            }));
        }
    }
    let threads = store
        .values_under(
            &format!("thread:{channel}:"),
            super::threads::MAX_THREADS + 1,
        )
        .await?;
    Ok(threads
        .into_iter()
        .filter_map(|(_, v)| serde_json::from_str::<Kept>(&v).ok())
        .find(|k| {
            k.thread == to
                && !k.session.is_empty()
                && chat.is_none_or(|c| c == k.address || c == k.thread)
        })
        .map(|k| Target {
            agent: session_agent(&k.agent).to_string(),
            session: k.session,
            interaction: None,
        }))
}

/// A person's message that replies to one of the channel's messages.
pub(crate) struct Reply<'a> {
    /// The platform's id of the reply itself (taken once).
    pub id: &'a str,
    /// The chat it was written in, when the platform's message ids are only unique per chat
    /// or a reply could name a message of another chat; `None` when ids are unique.
    pub chat: Option<&'a str>,
    /// The messages it replies to, the nearest first (a reply's parent, then its thread's
    /// first message).
    pub to: &'a [&'a str],
    /// What it says (mentions of the bot taken out).
    pub text: &'a str,
    /// Who wrote it, as the channel names people.
    pub responder: Responder,
    /// Their id on the channel.
    pub identity: &'a str,
    /// Whether they are on the channel's approver list.
    pub approver: bool,
}

/// What became of a reply.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Heard {
    /// It replies to no message of a session's: it keeps the channel's usual meaning.
    NotASession,
    /// A reply to a pending prompt of a channel that reads such replies itself.
    Prompt,
    /// A reply to a session's message without any text (a platform that withheld it).
    Empty,
    /// Taken: the person is told this (`None`: nothing to say — the prompt shows the
    /// answer, or the reply was delivered again).
    Told(Option<String>),
}

/// Takes `r`, a reply on `channel`, as said to the session of the message it replies to
/// (see the module's description). `reads_prompts`: the channel answers a reply to a
/// pending prompt itself ([`Heard::Prompt`]).
pub(crate) async fn reply(
    pipeline: &Pipeline,
    store: &dyn Store,
    r: Reply<'_>,
    locale: Locale,
    reads_prompts: bool,
) -> Heard {
    let channel = pipeline.via().as_str().to_string();
    let mut found = None;
    for to in r.to.iter().filter(|t| !t.is_empty()) {
        match target(pipeline, store, &channel, r.chat, to).await {
            Ok(Some(t)) => {
                found = Some(t);
                break;
            }
            Ok(None) => {}
            Err(e) => {
                tracing::error!(channel, error = %e, "cannot look up the message a reply answers");
                return Heard::Told(Some(Feedback::StoreDown.text(locale)));
            }
        }
    }
    let Some(t) = found else {
        return Heard::NotASession;
    };
    let pending = t.interaction.as_ref().filter(|i| i.is_pending());
    if reads_prompts && pending.is_some() {
        return Heard::Prompt;
    }
    if r.text.trim().is_empty() {
        return Heard::Empty;
    }
    if replayed(store, &format!("steer-{channel}"), r.id, SEEN_HOURS).await {
        tracing::debug!(channel, reply = r.id, "a reply delivered again; taken once");
        return Heard::Told(None);
    }
    if let Some(i) = pending
        && i.kind != Kind::Approval
    {
        return Heard::Told(answer(pipeline, i, &r, locale).await);
    }
    Heard::Told(Some(steer(pipeline, &t, &r, locale).await))
}

/// Answers pending question or form `i` with the reply's text; what the person is told
/// when it did not resolve it.
async fn answer(
    pipeline: &Pipeline,
    i: &Interaction,
    r: &Reply<'_>,
    locale: Locale,
) -> Option<String> {
    let actor = r.responder.audit_actor().unwrap_or_default();
    let tap = Tap {
        id: &i.id,
        created: Some(i.created_at.as_millisecond()),
        actor: &actor,
        identity: r.identity,
        approver: r.approver,
        audit: true,
    };
    let i = match pipeline.admit(&tap, |_| true).await {
        Ok(i) => i,
        Err(stop) => {
            pipeline.count(stop.result());
            return Some(stop.feedback.text(locale));
        }
    };
    let given = match i.kind {
        // The "finished" question too: the person's words are what the agent goes on with.
        Kind::Question => question_answers(&i, r.text).map(Answer::Answers),
        Kind::Form => form_content(&i, r.text).map(Answer::Accept),
        Kind::Approval => Err("an approval is answered with its buttons".into()),
    };
    let feedback = match given {
        Ok(a) => pipeline.respond(&i.id, a, r.responder.clone()).await,
        Err(why) => Feedback::Invalid(why),
    };
    pipeline.count(feedback.result());
    match feedback {
        Feedback::Resolved(_) | Feedback::Voted(_) => None,
        f => Some(f.text(locale)),
    }
}

/// Queues the reply's text for session `t`; what the person is told.
async fn steer(pipeline: &Pipeline, t: &Target, r: &Reply<'_>, locale: Locale) -> String {
    let sender = Grantor::Person {
        responder: r.responder.clone(),
        listed: r.approver,
    };
    let zh = locale == Locale::ZhCn;
    match pipeline
        .registry()
        .message_session(&t.agent, &t.session, r.text, &sender)
        .await
    {
        Ok(view) => {
            pipeline.count("steered");
            queued(&t.agent, view.delivery, locale)
        }
        Err(RegistryError::SessionNotFound(why)) => {
            pipeline.count("not_found");
            if zh {
                "找不到这个会话（已结束并被清理，或从未上报过）。".into()
            } else {
                why
            }
        }
        Err(e) => {
            let refused = matches!(e, RegistryError::Forbidden(_));
            let feedback = Feedback::of(Err(e));
            pipeline.count(if refused {
                "refused"
            } else {
                feedback.result()
            });
            feedback.text(locale)
        }
    }
}

/// The notice that a message was queued for `agent`'s session, and when it reaches it.
pub(crate) fn queued(agent: &str, delivery: Delivery, locale: Locale) -> String {
    let agent = crate::present::visible_line(agent);
    if locale == Locale::ZhCn {
        let when = match delivery {
            Delivery::NextStep => "会在智能体的下一步送达",
            Delivery::TurnEnd => "会在智能体本轮结束时送达",
        };
        format!("✉️ 已排队发给 {agent} 会话：{when}。")
    } else {
        format!("✉️ Queued for the {agent} session: {}.", delivery.note())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::channels::threads::{ThreadPer, Threads};
    use crate::interaction::{Registry, RegistryConfig, Via};
    use crate::store::MemoryStore;

    /// A pending interaction of claude-code's session `s-1`.
    fn asked(id: &str) -> Arc<Interaction> {
        let mut i = Interaction::pending(
            InteractionId::parse(id).unwrap(),
            "Bash",
            serde_json::Map::new(),
            jiff::Timestamp::now(),
            300,
        );
        i.session = Some("s-1".into());
        i.agent = Some("claude-code/Explore".into());
        Arc::new(i)
    }

    fn copy(i: &Interaction, address: &str, message: &str) -> ChannelMessage {
        ChannelMessage {
            channel: "fake".into(),
            address: address.into(),
            message_ref: message.into(),
            interaction_id: i.id.clone(),
            state: None,
            created_at: jiff::Timestamp::now(),
        }
    }

    fn from<'a>(id: &'a str, to: &'a [&'a str], chat: Option<&'a str>, text: &'a str) -> Reply<'a> {
        Reply {
            id,
            chat,
            to,
            text,
            responder: Responder::new("alice", Via::new("fake")),
            identity: "alice",
            approver: true,
        }
    }

    #[tokio::test]
    async fn a_sessions_prompts_and_thread_opener_are_found_in_their_chat_only() {
        let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
        let pipeline = Pipeline::new(
            Registry::new(store.clone(), RegistryConfig::default()),
            Via::new("fake"),
        );
        let i = asked("toolu_s1");
        store.create(i.clone(), Default::default()).await.unwrap();
        store
            .record_message(copy(&i, "chat-a", "m1"))
            .await
            .unwrap();
        remember(store.as_ref(), "fake", &i, "m1").await.unwrap();
        let threads = Threads::new(store.clone(), "fake", ThreadPer::Session);
        threads.keep("chat-a", &i, "t1").await.unwrap();
        let found = |chat, to| {
            let (pipeline, store) = (&pipeline, store.as_ref());
            async move { target(pipeline, store, "fake", chat, to).await.unwrap() }
        };
        let prompt = found(Some("chat-a"), "m1").await.unwrap();
        assert_eq!(
            (prompt.agent.as_str(), prompt.session.as_str()),
            ("claude-code", "s-1")
        );
        assert!(prompt.interaction.is_some());
        let opener = found(None, "t1").await.unwrap();
        assert!(opener.interaction.is_none());
        // A digest of the session is the session's, and shows no interaction of its own.
        remember_digest(store.as_ref(), "fake", "chat-a", &i, ("d1".into(), None))
            .await
            .unwrap();
        let digest = found(Some("chat-a"), "d1").await.unwrap();
        assert_eq!(digest.session, "s-1");
        assert!(digest.interaction.is_none());
        assert!(found(Some("chat-b"), "d1").await.is_none());
        // Another chat's message with the same id, or an unknown one, is no session's.
        assert!(found(Some("chat-b"), "m1").await.is_none());
        assert!(found(Some("chat-b"), "t1").await.is_none());
        assert!(found(None, "m2").await.is_none());

        // A pending prompt is the channel's to answer when it reads replies itself; a reply
        // without text is said to be one; a session the store does not know is said so.
        let r = || from("r1", &["m1"], Some("chat-a"), "go on");
        let heard = reply(&pipeline, store.as_ref(), r(), Locale::EnUs, true).await;
        assert_eq!(heard, Heard::Prompt);
        let heard = reply(
            &pipeline,
            store.as_ref(),
            from("r0", &["t1"], None, " "),
            Locale::EnUs,
            false,
        )
        .await;
        assert_eq!(heard, Heard::Empty);
        let r = || from("r2", &["", "t1"], None, "use staging");
        let Heard::Told(Some(told)) =
            reply(&pipeline, store.as_ref(), r(), Locale::EnUs, false).await
        else {
            panic!("told nothing");
        };
        assert!(
            told.contains("no claude-code session s-1 is known"),
            "{told}"
        );
        // Delivered again: taken once, nothing said.
        let again = reply(&pipeline, store.as_ref(), r(), Locale::EnUs, false).await;
        assert_eq!(again, Heard::Told(None));
        let none = from("r3", &["x"], None, "hello");
        let heard = reply(&pipeline, store.as_ref(), none, Locale::EnUs, false).await;
        assert_eq!(heard, Heard::NotASession);
    }

    #[test]
    fn a_copy_is_in_the_chat_its_address_or_state_names() {
        let m = ChannelMessage {
            channel: "discord".into(),
            address: "user:1".into(),
            message_ref: "9".into(),
            interaction_id: InteractionId::parse("t-1").unwrap(),
            state: Some(serde_json::json!({"channel": "55", "final": true})),
            created_at: jiff::Timestamp::now(),
        };
        assert!(in_chat(&m, "user:1"));
        assert!(in_chat(&m, "55"));
        assert!(!in_chat(&m, "56"));
        assert_eq!(session_agent("claude-code/Explore"), "claude-code");
        assert!(queued("codex", Delivery::TurnEnd, Locale::ZhCn).contains("本轮结束"));
        assert_eq!(
            queued("codex", Delivery::NextStep, Locale::EnUs),
            "✉️ Queued for the codex session: it reaches the agent at its next step."
        );
    }
}
