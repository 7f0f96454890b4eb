//! The Telegram channel: approvals and questions on the phone, with inline keyboards.
//!
//! How it fits together:
//! - It is installed on the channel kit (`channels::kit`), like every chat channel: the kit's
//!   planner records its outbox jobs (`Job`: the kit's, a chat stored as `chat`, as a number,
//!   and an outcome's job as `resolved`, as Telegram's own jobs were) in the same transaction
//!   as the state change, and the kit's skeleton delivers them over `deliver`: prompts sent and
//!   every recorded message edited to its final state, through the throttled Bot API client
//!   (`api`); 429s, 5xx and transport errors are retried by the outbox, never blocking other
//!   channels or the agent API.
//! - Updates arrive by long polling or on the webhook route (`transport`) and are handled
//!   in order per chat (`lanes`); `inbound` handles taps, ForceReply answers, the text
//!   fallback and the commands.
//! - Buttons carry [`button`] data (`callback_data`): a keyed handle of one interaction plus one action, with
//!   a MAC under a secret kept in the store, so old buttons keep working after a restart and
//!   cannot be forged into acting on anything else.
//! - Every posted message is recorded in the store with its `state` (partly answered
//!   questions, multi-select toggles, what a ForceReply request is for).

// The same roles under the same names in every channel: `settings`, `deliver` (its part of
// the kit's outbox delivery), `render`, `inbound` (what people send),
// `api` (the platform's client), `button` (what a button carries), `doctor`. `button` is
// public on purpose, also as `callback` (its name in Telegram's API and in the integration
// tests, which forge and replay button data with it); the rest is the crate's own.
pub(crate) mod api;
pub mod button;
mod deliver;
mod digest;
mod doctor;
mod inbound;
pub(crate) mod render;
pub(crate) mod settings;
pub(crate) mod state;

mod lanes;
mod transport;

pub use self::button as callback;

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use anyhow::Context;
use jiff::Timestamp;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use serde_json::{Value, json};
use teloxide::types::User;

pub use settings::{Mode, TelegramSettings};

use self::api::Client;
use self::button::Codec;
use super::Wiring;
use crate::channels::digest::KeyedLocks;
use crate::channels::kit::Kit;
use crate::channels::messages::Pacer;
use crate::channels::pipeline::{Feedback, Pipeline};
use crate::channels::registry::Chat;
use crate::health::Health;
use crate::interaction::after;
use crate::interaction::{Interaction, InteractionId, Registry, Responder, Via};
use crate::store::{ChannelMessage, Store, StoreError};

/// The channel's name in the outbox, the store and `/healthz`.
pub const CHANNEL: &str = "telegram";

/// Telegram in the kit's words (an empty `chats` is not warned of here: it is how `/whoami`
/// learns a chat's id, and the channel says its own gaps).
const CHAT: Chat = Chat {
    approver_ids: "Telegram user ids (send /whoami to the bot to learn yours)",
    secret: callback::SECRET_NAME,
    signs: "button",
    posts: "prompts are posted",
    refused: "a refused click logs the clicker's user id",
    no_places: None,
};

/// Telegram's outbox jobs: the kit's, their chat stored as `chat`, a number, and the job
/// that shows an outcome as `resolved`, as the channel's own jobs of old were.
pub(crate) type Job = crate::channels::plan::TextJob<TelegramSettings>;

impl crate::channels::plan::TextPlaces for TelegramSettings {
    const CHANNEL: &'static str = CHANNEL;
    const FIELD: &'static str = "chat";
    const UPDATE: &'static str = "resolved";
    const NUMBERS: bool = true;
}
/// Store channel under which callback handles map to interaction ids.
const HANDLES: &str = "telegram:handle";
/// The store secret a webhook secret token is derived from when none is configured.
const WEBHOOK_SECRET_NAME: &str = "telegram-webhook";
/// How long an update id is remembered to drop re-deliveries (Telegram keeps undelivered
/// updates for 24 hours).
const DEDUPE_FOR: Duration = Duration::from_secs(24 * 3600);

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct KindLabels {
    kind: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ReasonLabels {
    reason: String,
}

/// A held message lock (see [`Telegram::lock`]).
pub(crate) type LockGuard = tokio::sync::OwnedMutexGuard<()>;

/// The running channel: everything its handlers share.
pub(crate) struct Telegram {
    settings: TelegramSettings,
    registry: Registry,
    /// The shared steps from a verified tap to the registry.
    pipeline: Pipeline,
    store: Arc<dyn Store>,
    client: Client,
    codec: Codec,
    /// The inbox's base URL, for links to all of a cut tool call (`server.public_url`).
    inbox: Option<String>,
    health: Arc<Health>,
    /// Per-message locks, so a message's state is read, changed and re-rendered by one task
    /// at a time (two taps on one multi-select, a tap racing the final edit).
    locks: KeyedLocks,
    /// The bot's username (from `getMe`), to tell `/cmd@thisbot` from `/cmd@otherbot`.
    username: OnceLock<String>,
    /// The secret token webhook calls must carry (webhook mode).
    webhook_secret: String,
    /// Limits answers to people who are not approvers.
    reply_limit: inbound::ReplyLimit,
    /// Per-chat queues that keep each chat's updates in order.
    lanes: lanes::Lanes,
    refused: Family<ReasonLabels, Counter>,
    updates: Family<KindLabels, Counter>,
    /// How long the lease of the one replica that polls lasts (see [`crate::store::Leader`]).
    poll_lease: Duration,
    /// The digests of sessions with many interactions pending (`telegram.digest_after`).
    digests: crate::channels::digest::Digests,
    /// A forum topic per agent session (`telegram.thread_per`).
    threads: crate::channels::threads::Threads,
}

impl Telegram {
    /// The words of its messages, in `telegram.locale`.
    fn words(&self) -> crate::channels::words::Words {
        crate::channels::words::Words(self.settings.locale)
    }

    /// What a person is told, in the messages every channel shares, in `telegram.locale`.
    fn say(&self, feedback: Feedback) -> String {
        feedback.text(self.settings.locale)
    }

    /// Holds message `message` of `chat` until the guard is dropped.
    async fn lock(&self, chat: i64, message: i32) -> LockGuard {
        self.locks.lock(&format!("{chat}:{message}")).await
    }

    fn is_approver(&self, user: &User) -> bool {
        self.settings.approvers.contains(&user.id.0)
    }

    fn is_chat(&self, chat: i64) -> bool {
        self.settings.chats.contains(&chat)
    }

    fn count_update(&self, kind: &str) {
        self.updates
            .get_or_create(&KindLabels { kind: kind.into() })
            .inc();
    }

    /// Records a refused attempt: counted, logged, and fed to the registry's audit trail.
    /// Returns what the person is to be told: `told`, or that it failed and may be tried
    /// again when the refusal could not be recorded.
    async fn refuse(
        &self,
        id: Option<&InteractionId>,
        user: &User,
        reason: &str,
        label: &str,
        told: Feedback,
    ) -> Feedback {
        self.count_refused(label);
        match self
            .registry
            .refused(id, &actor(user), &Via::new(CHANNEL), reason)
            .await
        {
            Ok(()) => told,
            Err(_) => Feedback::StoreDown,
        }
    }

    /// Counts a refused attempt (the caller records it in the audit trail).
    fn count_refused(&self, label: &str) {
        self.refused
            .get_or_create(&ReasonLabels {
                reason: label.into(),
            })
            .inc();
    }

    fn set_health(&self, state: &str, detail: Value) {
        let mut d = json!({
            "mode": self.settings.mode.as_str(),
            "chats": self.settings.chats.len(),
            "approvers": self.settings.approvers.len(),
        });
        if let Some(u) = self.username.get() {
            d["bot"] = Value::String(format!("@{u}"));
        }
        if self.settings.approvers.is_empty() {
            d["warning"] = Value::String(
                "telegram.approvers is empty: nobody can answer from Telegram".into(),
            );
        }
        if let (Some(obj), Value::Object(extra)) = (d.as_object_mut(), detail) {
            obj.extend(extra);
        }
        self.health.set(CHANNEL, state, d);
    }

    /// Maps `handle` back to its interaction (recorded before any button carrying it was
    /// sent).
    async fn lookup_handle(&self, handle: &str) -> Result<Option<InteractionId>, StoreError> {
        Ok(self
            .store
            .message(HANDLES, "h", handle)
            .await?
            .map(|m| m.interaction_id))
    }

    /// Records the handle of interaction `i` so buttons carrying it resolve to it (the record
    /// is deleted with the interaction).
    async fn record_handle(&self, i: &Interaction) -> Result<String, StoreError> {
        let id = &i.id;
        let handle = self.codec.handle(i);
        if self.lookup_handle(&handle).await?.as_ref() != Some(id) {
            self.store
                .record_message(ChannelMessage {
                    channel: HANDLES.into(),
                    address: "h".into(),
                    message_ref: handle.clone(),
                    interaction_id: id.clone(),
                    state: None,
                    created_at: Timestamp::now(),
                })
                .await?;
        }
        Ok(handle)
    }
}

/// How a Telegram user is named in resolutions ("Allowed by Alice via telegram").
pub(crate) fn display_name(u: &User) -> String {
    let full = u.full_name();
    let full = full.trim();
    if !full.is_empty() {
        crate::interaction::clip(full, 100)
    } else if let Some(name) = &u.username {
        format!("@{name}")
    } else {
        format!("user {}", u.id.0)
    }
}

/// A Telegram user as the registry records an answer: shown by display name, audited with
/// the numeric user id (`tg:12345`), which, unlike the name, the user cannot change.
pub(crate) fn responder(u: &User) -> Responder {
    Responder::new(display_name(u), Via::new(CHANNEL))
        .with_actor_id(format!("tg:{}", u.id.0))
        .with_identity(CHANNEL, u.id.0.to_string())
}

/// How a Telegram user is named in logs and the audit trail: "Alice (tg:12345)".
pub(crate) fn actor(u: &User) -> String {
    responder(u).audit_actor().unwrap_or_default()
}

/// Installs the Telegram channel when `telegram.enabled` is set.
pub async fn install(w: &mut Wiring, settings: &TelegramSettings) -> anyhow::Result<()> {
    let Some(kit) = Kit::open(w, settings, settings.digest_after, settings.locale).await? else {
        return Ok(());
    };
    warn_of_gaps(settings);
    let webhook_secret = webhook_secret(w.store.as_ref(), settings).await?;
    let (client, worker) = Client::new(settings, &w.metrics)?;
    let tg = Arc::new(Telegram {
        settings: settings.clone(),
        registry: w.registry.clone(),
        pipeline: kit.pipeline(w),
        store: w.store.clone(),
        client,
        codec: Codec::new(kit.secret.clone()),
        inbox: w.server.inbox.clone(),
        health: w.health.clone(),
        locks: KeyedLocks::default(),
        username: OnceLock::new(),
        webhook_secret,
        reply_limit: inbound::ReplyLimit::new(),
        lanes: lanes::Lanes::new(transport::LANE_PATIENCE),
        refused: Family::default(),
        updates: Family::default(),
        poll_lease: w.server.leader_lease,
        digests: kit.digests.clone(),
        threads: crate::channels::threads::Threads::installed(w, CHANNEL, settings.thread_per),
    });
    kit.count(
        w,
        "imrelay_telegram_refused",
        "Telegram answer attempts refused, by reason (not_approver, bad_data, foreign_message, foreign_reply, bad_webhook_secret)",
        tg.refused.clone(),
    );
    kit.count(
        w,
        "imrelay_telegram_updates",
        "Telegram updates handled, by kind (callback_query, message, duplicate)",
        tg.updates.clone(),
    );
    kit.deliver(w, deliver::Tg(tg.clone()), Pacer::off(), "telegram_api");
    transport(w, tg, worker);
    kit.enabled(settings.mode.as_str(), None);
    Ok(())
}

/// How updates arrive: the webhook route, or long polling; either way the task that
/// identifies the bot first, started when the server serves.
fn transport(w: &mut Wiring, tg: Arc<Telegram>, worker: impl Future<Output = ()> + Send + 'static) {
    if tg.settings.mode == Mode::Webhook {
        w.route(transport::router(tg.clone(), &tg.settings.webhook_path));
    }
    // The throttle's worker runs until the last handle to the bot is dropped. It is not
    // stopped at shutdown: dropping it under a queued send makes teloxide panic.
    tokio::spawn(worker);
    tg.set_health("starting", json!({}));
    w.spawn_on_serve(tg.run(w.shutdown.clone()));
}

/// Says at start-up what a configuration leaves nobody to do: answer (no approvers) or
/// see prompts (no chats).
fn warn_of_gaps(s: &TelegramSettings) {
    // Nobody answering is the kit's opening line, in the words `unanswerable` gives.
    if let Some(Gap::NothingPosted(line)) = gaps(s) {
        tracing::warn!("{line}");
    }
}

/// What a configuration leaves undone at start-up, in one line.
#[derive(Debug, PartialEq)]
enum Gap {
    /// Nobody can answer from Telegram (and maybe nothing is posted either).
    NobodyAnswers(&'static str),
    /// Prompts are posted nowhere of telegram's own.
    NothingPosted(&'static str),
}

fn gaps(s: &TelegramSettings) -> Option<Gap> {
    match (s.approvers.is_empty(), s.chats.is_empty()) {
        (true, false) => Some(Gap::NobodyAnswers(
            "telegram.approvers is empty: NOBODY can answer from Telegram. Prompts are still posted to telegram.chats; send /whoami to the bot to learn your user id and add it to telegram.approvers",
        )),
        (true, true) => Some(Gap::NobodyAnswers(
            "telegram.approvers and telegram.chats are empty: NOBODY can answer from Telegram, and prompts reach only people a route messages directly. Send /whoami to the bot in a chat: it says your user id (for telegram.approvers) and the chat's id (for telegram.chats)",
        )),
        (false, true) => Some(Gap::NothingPosted(
            "telegram.chats is empty: prompts reach only people a route messages directly (`direct`). Send /whoami to the bot in a chat to learn its id and add it to telegram.chats",
        )),
        (false, false) => None,
    }
}

/// The webhook secret token: derived from a secret kept in the store, unless
/// `telegram.webhook_secret` sets it.
async fn webhook_secret(store: &dyn Store, s: &TelegramSettings) -> anyhow::Result<String> {
    if !s.webhook_secret.is_empty() {
        return Ok(s.webhook_secret.expose().to_string());
    }
    let secret = store
        .secret(WEBHOOK_SECRET_NAME)
        .await
        .context("cannot read the Telegram webhook secret from the store")?;
    Ok(hex::encode(secret))
}

/// A topic per session asked for where no listed chat can have topics: only a supergroup
/// (id `-100…`) can be a forum.
fn topics_warning(s: &TelegramSettings) -> Option<String> {
    let session = s.thread_per == crate::channels::threads::ThreadPer::Session;
    let supergroup = s.chats.iter().any(|c| c.to_string().starts_with("-100"));
    (s.enabled && session && !s.chats.is_empty() && !supergroup).then(|| {
        "telegram.thread_per = \"session\" puts each session's prompts in a forum topic, which \
         only a supergroup with Topics on has (its id starts with -100), and no chat in \
         telegram.chats is one: prompts are posted in the chats themselves. Turn Topics on in \
         the group (it becomes a supergroup with a new id: send /whoami there) and list that \
         id, or set thread_per = \"none\""
            .to_string()
    })
}

/// The `[telegram]` section in the channel registry.
impl crate::channels::Channel for TelegramSettings {
    fn name(&self) -> &'static str {
        CHANNEL
    }

    fn platform(&self) -> &'static str {
        "Telegram"
    }

    fn places(&self) -> Vec<String> {
        self.chats.iter().map(i64::to_string).collect()
    }

    fn chat(&self) -> Option<&'static Chat> {
        Some(&CHAT)
    }

    fn place(&self, written: &crate::channels::Written) -> Result<String, String> {
        written.number("a Telegram chat id", i64::MIN)
    }

    fn unlisted(&self, place: &str) -> String {
        format!("chat {place} is not in telegram.chats: add it there, or route to a listed chat")
    }

    fn person_id(&self, written: &crate::channels::Written) -> Result<String, String> {
        written.number("a Telegram user id (a positive number)", 1)
    }

    fn enabled(&self) -> bool {
        self.enabled
    }

    fn validate(&self) -> Result<(), String> {
        TelegramSettings::validate(self)
    }

    fn paths(&self) -> Vec<crate::settings::PathClaim> {
        TelegramSettings::paths(self)
    }

    fn approvers(&self) -> Vec<String> {
        self.approvers.iter().map(u64::to_string).collect()
    }

    fn warnings(&self) -> Vec<String> {
        topics_warning(self).into_iter().collect()
    }

    fn unanswerable(&self) -> Option<&'static str> {
        match gaps(self)? {
            Gap::NobodyAnswers(line) => Some(line),
            Gap::NothingPosted(_) => None,
        }
    }

    fn nobody_answers(&self) -> Option<String> {
        if !self.enabled || !self.approvers.is_empty() {
            return None;
        }
        Some(
            if self.chats.is_empty() {
                "telegram is enabled but telegram.approvers is empty, and so is telegram.chats: \
             nobody can answer from Telegram, and prompts reach only people a route messages \
             directly (send /whoami to the bot in a chat for your user id and the chat's id)"
            } else {
                "telegram is enabled but telegram.approvers is empty: prompts are posted, but \
             nobody can answer them from Telegram (send /whoami to the bot for your user id)"
            }
            .to_string(),
        )
    }

    fn install<'a>(
        &'a self,
        wiring: &'a mut Wiring,
    ) -> crate::channels::registry::BoxFuture<'a, anyhow::Result<()>> {
        Box::pin(install(wiring, self))
    }

    fn doctor<'a>(
        &'a self,
        run: &'a crate::channels::Doctor,
    ) -> crate::channels::registry::BoxFuture<'a, Vec<crate::channels::Check>> {
        Box::pin(doctor::checks(self, run))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn interaction(created_at: Timestamp) -> Interaction {
        Interaction {
            deadline: crate::interaction::now(),
            ..Interaction::pending(
                InteractionId::parse("toolu_reused").unwrap(),
                "Bash",
                serde_json::Map::new(),
                created_at,
                300,
            )
        }
    }

    #[test]
    fn a_reused_id_gets_fresh_outbox_keys() {
        use crate::channels::plan::{Planner, repost_job};
        use crate::interaction::Lifecycle;
        let planner = Planner::<Job>::new(CHANNEL, vec!["7".into()]);
        let jobs = |i: &Interaction| {
            let mut jobs = Vec::new();
            planner.plan_created(i, &mut jobs);
            planner.plan_resolved(i, &mut jobs);
            jobs.push(repost_job::<Job>(CHANNEL, i, "7".into(), "repost", "42"));
            jobs
        };
        let keys = |i: &Interaction| jobs(i).into_iter().map(|j| j.key).collect::<Vec<_>>();
        let old = interaction(Timestamp::from_millisecond(1_700_000_000_000).unwrap());
        let new = interaction(Timestamp::from_millisecond(1_700_000_086_400).unwrap());
        let (old_keys, new_keys) = (keys(&old), keys(&new));
        assert_eq!(old_keys.len(), 3);
        for k in &old_keys {
            assert!(k.contains("toolu_reused:1700000000000"), "{k}");
            assert!(!new_keys.contains(k), "{k} is reused");
        }
        // The same interaction plans the same keys (redelivery stays idempotent).
        assert_eq!(keys(&old), old_keys);
        // And the old interaction's jobs do nothing for the new one.
        for j in jobs(&old) {
            assert!(j.is_for(&old) && !j.is_for(&new), "{}", j.key);
        }
    }

    #[test]
    fn a_gap_at_start_up_says_only_what_is_true() {
        let topics = |chats: Vec<i64>| {
            topics_warning(&TelegramSettings {
                enabled: true,
                token: crate::settings::Secret::new("123:abc"),
                chats,
                approvers: vec![1],
                mode: Mode::Polling,
                webhook_url: String::new(),
                webhook_path: "/telegram/webhook".into(),
                webhook_secret: crate::settings::Secret::new(""),
                api_url: "https://api.telegram.org".into(),
                poll_timeout_secs: 25,
                request_timeout_secs: 30,
                digest_after: 0,
                thread_per: crate::channels::threads::ThreadPer::Session,
                thread_replies: false,
                locale: crate::present::render::Locale::EnUs,
            })
        };
        assert!(topics(vec![-2001, 42]).is_some_and(|w| w.contains("-100")));
        assert_eq!(topics(vec![-1001234567890]), None);
        let with = |approvers: Vec<u64>, chats: Vec<i64>| {
            gaps(&TelegramSettings {
                enabled: true,
                token: crate::settings::Secret::new("123:abc"),
                chats,
                approvers,
                mode: Mode::Polling,
                webhook_url: String::new(),
                webhook_path: "/telegram/webhook".into(),
                webhook_secret: crate::settings::Secret::new(""),
                api_url: "https://api.telegram.org".into(),
                poll_timeout_secs: 25,
                request_timeout_secs: 30,
                digest_after: 0,
                thread_per: Default::default(),
                thread_replies: false,
                locale: crate::present::render::Locale::EnUs,
            })
        };
        assert_eq!(with(vec![1], vec![1]), None);
        let Some(Gap::NobodyAnswers(line)) = with(vec![], vec![1]) else {
            panic!("nobody answers")
        };
        assert!(
            line.contains("Prompts are still posted to telegram.chats"),
            "{line}"
        );
        // Nothing is posted to chats there are none of: said once, with both fixes.
        let Some(Gap::NobodyAnswers(line)) = with(vec![], vec![]) else {
            panic!("nobody answers")
        };
        assert!(!line.contains("still posted"), "{line}");
        assert!(
            line.contains("telegram.approvers and telegram.chats are empty"),
            "{line}"
        );
        assert!(matches!(with(vec![1], vec![]), Some(Gap::NothingPosted(_))));
    }
}
