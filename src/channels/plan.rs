//! The one planner of every chat channel: the outbox jobs an interaction's changes need,
//! recorded in the registry's transactions, over [`destinations`].
//!
//! One policy for every chat channel:
//! - **created**: a `post` job for each place the interaction goes to (its route's places
//!   and people's direct chats when it was routed, otherwise the channel's configured
//!   places), tried from its creation until its deadline;
//! - **escalated**: a `post` job of its own (keyed `escalate`) for each place the route's
//!   escalation adds, from now until the deadline;
//! - **voted**: one job per vote that does not decide yet (its count names it), until the
//!   deadline: every copy shows the votes so far, where the platform can show them;
//! - **resolved** (answered, expired, withdrawn): one `update` job, always (copies are
//!   found in the store; a channel whose places are all a route's still has copies to
//!   update), for [`crate::outbox::UPDATE_HORIZON`] after the resolution.
//!
//! A channel whose places are one value each (a channel id, a conversation, a chat id) takes
//! the kit's jobs, [`TextJob`], naming itself with [`TextPlaces`]; one whose places are typed
//! (Feishu's receivers) names its jobs with its own enum (kept as it was, so jobs already
//! stored are read the same) and says, through [`ChatJob`], which variant does what.

use std::marker::PhantomData;

use jiff::Timestamp;

use crate::interaction::routes::destinations;
use crate::interaction::{Interaction, Lifecycle};
use crate::outbox::{ChannelJob, created_window, resolved_window};
use crate::store::OutboxJob;

/// What a chat channel's job does.
#[derive(Debug)]
pub(crate) enum Todo<T> {
    /// Post the prompt of an interaction to one place.
    Post(T),
    /// Show the outcome on every copy of a resolved interaction.
    Update,
    /// Show the votes so far on every copy of a pending interaction.
    Voted,
    /// Post, bring up to date or close the digest of one session in one place.
    Digest {
        /// Where.
        to: T,
        /// The session's digest key.
        session: String,
    },
}

/// A chat channel's job enum, as the kit reads and makes it.
pub(crate) trait ChatJob: ChannelJob + Send + Sync + Sized + 'static {
    /// Where a copy goes (a chat id, a receiver, a conversation).
    type Target: Send + Sync;

    /// The `kind` of its post job (`post`, or `send` on Feishu): a first post's key starts
    /// `<channel>:<POST>:`.
    const POST: &'static str;

    /// The job that does `todo`.
    fn make(todo: Todo<Self::Target>) -> Self;

    /// What this job does.
    fn todo(self) -> Todo<Self::Target>;

    /// The place an address (as settings and routes write it) names, if it is one.
    fn target(address: &str) -> Option<Self::Target>;

    /// The address of a place (the key of its records and its pacing).
    fn address(target: &Self::Target) -> String;
}

/// Whether a place at `address` is where interaction `i` goes on `channel`, whose configured
/// places are `places`.
pub(crate) fn goes_to(i: &Interaction, channel: &str, places: &[String], address: &str) -> bool {
    destinations(i.route.as_deref(), channel, places).contains(&address)
}

/// Whether `job` is an interaction's first post on `channel` (not a re-post, a Review or an
/// escalation's).
pub(crate) fn is_first_post<J: ChatJob>(channel: &str, job: &OutboxJob) -> bool {
    job.key
        .strip_prefix(channel)
        .and_then(|k| k.strip_prefix(':'))
        .and_then(|k| k.strip_prefix(J::POST))
        .is_some_and(|k| k.starts_with(':'))
}

/// The job that posts `i` to `to` again, on its own, under a key of its own (`kind`: what
/// asks for it, `nonce`: tells repeated asks apart), until its deadline.
pub(crate) fn repost_job<J: ChatJob>(
    channel: &str,
    i: &Interaction,
    to: J::Target,
    kind: &str,
    nonce: &str,
) -> OutboxJob {
    let address = J::address(&to);
    let key = OutboxJob::key_for(channel, kind, i, &[&address, nonce]);
    J::make(Todo::Post(to)).plan_keyed(key, i, Timestamp::now(), i.deadline)
}

/// A chat channel whose places are texts, as its jobs name it: its outbox channel, and the
/// field its stored jobs name their place with.
pub(crate) trait TextPlaces: 'static {
    /// Its outbox channel (its name).
    const CHANNEL: &'static str;
    /// The field its `post` and `digest` jobs store their place under (`channel`, `target`,
    /// `chat`, ...: each channel's own word of old, kept so a store's jobs read the same
    /// whichever version wrote them). A new channel says `to`.
    const FIELD: &'static str;
    /// The kind its update job is stored under (`update`; Telegram's of old: `resolved`).
    const UPDATE: &'static str = "update";
    /// Whether its places are stored as numbers (Telegram's chat ids, as its own jobs stored
    /// them); a place that is not one is stored as a text.
    const NUMBERS: bool = false;
}

/// The outbox jobs of a chat channel whose places are texts: the kit's [`Todo`] under the
/// channel's name `C`. Stored as `{"kind": "post" | C::UPDATE | "voted" | "digest",
/// <C::FIELD>: place, "session": key}` (a place a number when `C::NUMBERS`); read under any
/// channel's field name and update kind, its place a text or a number.
pub(crate) struct TextJob<C> {
    todo: Todo<String>,
    channel: PhantomData<fn() -> C>,
}

/// A stored text job as it reads: its place under the kit's name or any channel's own.
#[derive(serde::Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
enum Stored {
    Post {
        #[serde(alias = "channel", alias = "target", alias = "chat")]
        #[serde(alias = "room", alias = "topic")]
        #[serde(deserialize_with = "place")]
        to: String,
    },
    #[serde(alias = "resolved")]
    Update,
    Voted,
    Digest {
        #[serde(alias = "channel", alias = "target", alias = "chat")]
        #[serde(alias = "room", alias = "topic")]
        #[serde(deserialize_with = "place")]
        to: String,
        session: String,
    },
}

/// A stored place: a text, or a number (a chat id of Telegram's).
fn place<'de, D: serde::Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    #[derive(serde::Deserialize)]
    #[serde(untagged)]
    enum Place {
        Text(String),
        Number(i64),
    }
    Ok(match <Place as serde::Deserialize>::deserialize(d)? {
        Place::Text(t) => t,
        Place::Number(n) => n.to_string(),
    })
}

/// Place `to` as channel `C` stores it.
fn stored<C: TextPlaces>(to: &str) -> serde_json::Value {
    match to.parse::<i64>() {
        Ok(n) if C::NUMBERS => n.into(),
        _ => to.into(),
    }
}

impl<C> std::fmt::Debug for TextJob<C> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.todo.fmt(f)
    }
}

impl<C: TextPlaces> serde::Serialize for TextJob<C> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut m = s.serialize_map(None)?;
        match &self.todo {
            Todo::Post(to) => {
                m.serialize_entry("kind", "post")?;
                m.serialize_entry(C::FIELD, &stored::<C>(to))?;
            }
            Todo::Update => m.serialize_entry("kind", C::UPDATE)?,
            Todo::Voted => m.serialize_entry("kind", "voted")?,
            Todo::Digest { to, session } => {
                m.serialize_entry("kind", "digest")?;
                m.serialize_entry(C::FIELD, &stored::<C>(to))?;
                m.serialize_entry("session", session)?;
            }
        }
        m.end()
    }
}

impl<'de, C> serde::Deserialize<'de> for TextJob<C> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let todo = match <Stored as serde::Deserialize>::deserialize(d)? {
            Stored::Post { to } => Todo::Post(to),
            Stored::Update => Todo::Update,
            Stored::Voted => Todo::Voted,
            Stored::Digest { to, session } => Todo::Digest { to, session },
        };
        Ok(Self {
            todo,
            channel: PhantomData,
        })
    }
}

impl<C: TextPlaces> ChannelJob for TextJob<C> {
    fn channel(&self) -> std::borrow::Cow<'static, str> {
        C::CHANNEL.into()
    }
}

impl<C: TextPlaces> ChatJob for TextJob<C> {
    type Target = String;
    const POST: &'static str = "post";

    fn make(todo: Todo<String>) -> Self {
        Self {
            todo,
            channel: PhantomData,
        }
    }

    fn todo(self) -> Todo<String> {
        self.todo
    }

    fn target(address: &str) -> Option<String> {
        Some(address.to_string())
    }

    fn address(target: &String) -> String {
        target.clone()
    }
}

/// The planner of one chat channel.
pub(crate) struct Planner<J> {
    /// The channel's name.
    pub channel: &'static str,
    /// Its configured places, as addresses.
    pub places: Vec<String>,
    jobs: PhantomData<fn() -> J>,
}

impl<J: ChatJob> Planner<J> {
    /// The planner of `channel`, posting to `places` what names no route.
    pub(crate) fn new(channel: &'static str, places: Vec<String>) -> Self {
        Self {
            channel,
            places,
            jobs: PhantomData,
        }
    }
}

impl<J: ChatJob> Lifecycle for Planner<J> {
    fn plan_created(&self, i: &Interaction, jobs: &mut Vec<OutboxJob>) {
        let (from, until) = created_window(i);
        // A routed interaction goes to its route's places (and people's direct chats) only.
        for a in destinations(i.route.as_deref(), self.channel, &self.places) {
            let Some(to) = J::target(a) else {
                continue;
            };
            let address = J::address(&to);
            jobs.push(J::make(Todo::Post(to)).plan(i, &[&address], from, until));
        }
    }

    fn plan_voted(&self, i: &Interaction, jobs: &mut Vec<OutboxJob>) {
        let (from, until) = created_window(i);
        let n = i.votes().len().to_string();
        jobs.push(J::make(Todo::Voted).plan(i, &[&n], from, until));
    }

    fn plan_escalated(&self, i: &Interaction, jobs: &mut Vec<OutboxJob>) {
        let Some(stamp) = i.route.as_deref() else {
            return;
        };
        let (from, until) = (Timestamp::now(), i.deadline);
        for a in stamp.escalation_addresses(self.channel) {
            let Some(to) = J::target(a) else {
                continue;
            };
            let key = OutboxJob::key_for(self.channel, "escalate", i, &[a]);
            jobs.push(J::make(Todo::Post(to)).plan_keyed(key, i, from, until));
        }
    }

    fn plan_resolved(&self, i: &Interaction, jobs: &mut Vec<OutboxJob>) {
        let (from, until) = resolved_window(i);
        jobs.push(J::make(Todo::Update).plan(i, &[], from, until));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    /// Channel `C`'s job of `kind` stored with `payload`, read the way the outbox reads it,
    /// and written back as the kit writes it.
    fn reread<C: TextPlaces>(kind: &str, payload: &Value) -> (String, String, Value) {
        let stored = OutboxJob {
            key: format!("{}:{kind}:toolu_1:1", C::CHANNEL),
            channel: C::CHANNEL.into(),
            kind: kind.into(),
            interaction_id: None,
            payload: payload.clone(),
            not_before: Timestamp::now(),
            horizon: Timestamp::now(),
        };
        let job = match TextJob::<C>::read(&stored) {
            Ok(job) => job,
            Err(e) => panic!("{} {kind} {payload}: {e:?}", C::CHANNEL),
        };
        let i = Interaction::pending(
            crate::interaction::InteractionId::parse("toolu_1").unwrap(),
            "Bash",
            serde_json::Map::new(),
            Timestamp::now(),
            300,
        );
        let again = job.plan(&i, &[], Timestamp::now(), Timestamp::now());
        (format!("{job:?}"), again.kind, again.payload)
    }

    /// Every job channel `C`'s own enum stored under `field` (its place `place`, a text or a
    /// number) reads as the kit's, and is written back the same, so old and new versions
    /// read each other's jobs.
    fn old_jobs_read<C: TextPlaces>(field: &str, place: impl Into<Value>) {
        let place: Value = place.into();
        let text = place
            .as_str()
            .map_or_else(|| place.to_string(), str::to_string);
        let cases = [
            ("post", json!({ field: place }), format!("Post({text:?})")),
            (C::UPDATE, json!({}), "Update".into()),
            ("voted", json!({}), "Voted".into()),
            (
                "digest",
                json!({ field: place, "session": "s-1" }),
                format!("Digest {{ to: {text:?}, session: \"s-1\" }}"),
            ),
        ];
        for (kind, payload, todo) in cases {
            let read = reread::<C>(kind, &payload);
            assert_eq!(read, (todo, kind.to_string(), payload), "{}", C::CHANNEL);
        }
    }

    #[test]
    fn jobs_stored_by_each_channel_before_the_kit_still_read() {
        use crate::channels::{dingtalk, discord, matrix, ntfy, slack, wecom};
        old_jobs_read::<slack::SlackSettings>("channel", "C0APPROVALS");
        old_jobs_read::<discord::DiscordSettings>("channel", "@80351110224678912");
        old_jobs_read::<dingtalk::DingTalkSettings>("target", "user:manager1234");
        old_jobs_read::<wecom::WeComSettings>("chat", "wrkSFfCgAAxxxx");
        old_jobs_read::<matrix::MatrixSettings>("room", "!approvals:example.org");
        old_jobs_read::<ntfy::NtfySettings>("topic", "imrelay-approvals");
    }

    /// Telegram's own jobs of old (`{"kind": "post", "chat": -100…}`, `{"kind": "resolved"}`)
    /// read as the kit's and are written back in their old shape, chat ids as numbers.
    #[test]
    fn telegram_jobs_stored_before_the_kit_still_read() {
        use crate::channels::telegram::TelegramSettings;
        old_jobs_read::<TelegramSettings>("chat", -1001234567890_i64);
        old_jobs_read::<TelegramSettings>("chat", 42_i64);
        let (todo, kind, _) = reread::<TelegramSettings>("update", &json!({}));
        assert_eq!((todo.as_str(), kind.as_str()), ("Update", "resolved"));
    }
}
