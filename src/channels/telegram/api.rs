//! The Bot API client: teloxide's `Bot` behind its `Throttle` adaptor (Telegram's per-chat
//! and overall send limits), with every error sorted into "wait as told", "retry with
//! backoff" and "give up", and the token kept out of every error text.
//!
//! Two `Bot`s share the token: one for ordinary calls, bounded by
//! `telegram.request_timeout_secs` (teloxide waits 10 s after a 5xx answer before reporting
//! it; the bound keeps that from holding an outbox slot for long), and one for the
//! `getUpdates` long poll, whose requests legitimately last `poll_timeout_secs`.

use std::future::{Future, IntoFuture};
use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use teloxide::adaptors::Throttle;
use teloxide::adaptors::throttle::{Limits, Settings as ThrottleSettings};
use teloxide::prelude::*;
use teloxide::types::{
    AllowedUpdate, CallbackQueryId, ForceReply, InlineKeyboardMarkup, LinkPreviewOptions, Me,
    MessageId, ParseMode, ReplyMarkup, ReplyParameters, ThreadId, Update,
};
use teloxide::{ApiError, RequestError};

use super::settings::TelegramSettings;
use crate::metrics::Metrics;

/// The updates imrelay asks Telegram for.
pub(crate) const ALLOWED_UPDATES: [AllowedUpdate; 2] =
    [AllowedUpdate::Message, AllowedUpdate::CallbackQuery];

/// Why a Bot API call failed, sorted by what to do about it.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Failure {
    /// Telegram asked to wait this long (429 `retry_after`).
    RetryAfter(Duration),
    /// Worth retrying with backoff: 5xx answers, transport errors, timeouts, garbled answers.
    Transient(String),
    /// Retrying will not help: a bad request, a chat the bot cannot reach, a bad token.
    Permanent(String),
}

impl Failure {
    /// A short description for logs.
    pub(crate) fn describe(&self) -> String {
        match self {
            Failure::RetryAfter(d) => format!("rate limited: retry after {} s", d.as_secs()),
            Failure::Transient(e) | Failure::Permanent(e) => e.clone(),
        }
    }
}

/// What an edit achieved.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Edited {
    /// The message shows the new content (or already did: "message is not modified").
    Done,
    /// The message is gone or can no longer be edited; nothing more can be done for it.
    Gone(String),
}

/// Labels of Bot API call counts.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct CallLabels {
    method: String,
    result: String,
}

fn is_unknown_not_modified(s: &str) -> bool {
    s.starts_with("Bad Request: message is not modified")
}

/// Sorts a teloxide error; `token` is scrubbed from any text. What the Bot API answered is
/// said in its own words ("Invalid bot token", "Bad Request: chat not found"), without
/// teloxide's "A Telegram's error:" before it.
pub(crate) fn classify(e: &RequestError, token: &str) -> Failure {
    let text = match e {
        RequestError::Api(api) => redact(&api.to_string(), token),
        _ => redact(&e.to_string(), token),
    };
    match e {
        RequestError::RetryAfter(s) => {
            Failure::RetryAfter(s.duration().max(Duration::from_secs(1)))
        }
        RequestError::Network(inner) => {
            let kind = if inner.is_timeout() {
                "timed out"
            } else if inner.is_connect() {
                "cannot connect"
            } else {
                "transport error"
            };
            // The innermost cause says what happened ("Connection refused (os error 111)");
            // the ones around it ("client error (Connect)") only that something did.
            let mut cause: Option<&dyn std::error::Error> = std::error::Error::source(&**inner);
            while let Some(deeper) = cause.and_then(|c| c.source()) {
                cause = Some(deeper);
            }
            let source = cause
                .map(|s| redact(&s.to_string(), token))
                .unwrap_or_default();
            Failure::Transient(format!("Bot API {kind}: {source}"))
        }
        RequestError::Io(_) | RequestError::InvalidJson { .. } => Failure::Transient(text),
        RequestError::MigrateToChatId(to) => Failure::Permanent(format!(
            "the group was upgraded to a supergroup with id {to}: put that id in telegram.chats"
        )),
        RequestError::Api(ApiError::Unknown(s)) => {
            let permanent = [
                "Bad Request",
                "Forbidden",
                "Unauthorized",
                "Not Found",
                "Conflict",
            ]
            .iter()
            .any(|p| s.starts_with(p));
            if permanent {
                Failure::Permanent(text)
            } else {
                Failure::Transient(text)
            }
        }
        RequestError::Api(_) => Failure::Permanent(text),
    }
}

/// Replaces the token (which appears in request URLs) in `text`.
pub(crate) fn redact(text: &str, token: &str) -> String {
    if token.is_empty() {
        text.to_string()
    } else {
        text.replace(token, "[redacted]")
    }
}

/// The Bot API, as the channel uses it.
#[derive(Clone)]
pub(crate) struct Client {
    bot: Throttle<Bot>,
    poller: Bot,
    token: String,
    /// Bound for one call; sends get [`QUEUE_ALLOWANCE`] more for the throttle's queue.
    timeout: Duration,
    calls: Family<CallLabels, Counter>,
}

/// Extra time a send may spend in the throttle's queue (Telegram allows about one message
/// per second per chat, and twenty per minute per group).
const QUEUE_ALLOWANCE: Duration = Duration::from_secs(60);
/// Most attempts of a call made while someone waits for it (see [`Client::retrying`]).
pub(crate) const INLINE_ATTEMPTS: u32 = 4;
/// Longest `retry_after` waited out inline; a longer one is not worth a person's wait.
pub(crate) const MAX_INLINE_WAIT: Duration = Duration::from_secs(10);

/// Delay before inline retry number `n` (1-based) after a transient failure.
fn inline_backoff(n: u32) -> Duration {
    Duration::from_millis(250u64 << n.saturating_sub(1).min(3))
}

impl Client {
    /// Builds the client and returns the throttle's worker, which must run for sends to
    /// leave.
    pub(crate) fn new(
        s: &TelegramSettings,
        metrics: &Metrics,
    ) -> anyhow::Result<(Self, impl Future<Output = ()> + Send + 'static)> {
        let url = reqwest::Url::parse(s.api_url.trim())
            .map_err(|e| anyhow::anyhow!("telegram.api_url is not a URL: {e}"))?;
        let timeout = Duration::from_secs(s.request_timeout_secs);
        let client = teloxide::net::default_reqwest_settings()
            .timeout(timeout)
            .build()
            .map_err(|e| anyhow::anyhow!("cannot build the Telegram HTTP client: {e}"))?;
        let poll_client = teloxide::net::default_reqwest_settings()
            .timeout(timeout + Duration::from_secs(s.poll_timeout_secs))
            .build()
            .map_err(|e| anyhow::anyhow!("cannot build the Telegram HTTP client: {e}"))?;
        let token = s.token.expose().to_string();
        let bot = Bot::with_client(token.clone(), client).set_api_url(url.clone());
        let poller = Bot::with_client(token.clone(), poll_client).set_api_url(url);
        // No automatic retry: a 429 comes back to the outbox, which waits as told without
        // holding a delivery slot. The throttle still pauses its queue for that long.
        let (bot, worker) = Throttle::with_settings(
            bot,
            ThrottleSettings::default()
                .limits(Limits::default())
                .no_retry(),
        );
        let calls = Family::<CallLabels, Counter>::default();
        metrics.register(
            "imrelay_telegram_api_calls",
            "Telegram Bot API calls, by method and result (ok, retry_after, transient, permanent)",
            calls.clone(),
        );
        Ok((
            Self {
                bot,
                poller,
                token,
                timeout,
                calls,
            },
            worker,
        ))
    }

    fn tally(&self, method: &str, result: &str) {
        self.calls
            .get_or_create(&CallLabels {
                method: method.to_string(),
                result: result.to_string(),
            })
            .inc();
    }

    /// Runs a call within `limit`. teloxide pauses 10 s after a 5xx answer before reporting
    /// it, outside reqwest's own timeout; this bound covers that pause too.
    async fn within<T>(
        &self,
        method: &str,
        limit: Duration,
        call: impl IntoFuture<Output = Result<T, RequestError>>,
    ) -> Result<Result<T, RequestError>, Failure> {
        match tokio::time::timeout(limit, call.into_future()).await {
            Ok(r) => Ok(r),
            Err(_) => {
                self.tally(method, "transient");
                Err(Failure::Transient(format!(
                    "Bot API {method} gave no answer within {} s",
                    limit.as_secs()
                )))
            }
        }
    }

    fn count<T>(&self, method: &str, r: Result<T, RequestError>) -> Result<T, Failure> {
        match r {
            Ok(v) => {
                self.tally(method, "ok");
                Ok(v)
            }
            Err(e) => {
                let f = classify(&e, &self.token);
                self.tally(
                    method,
                    match f {
                        Failure::RetryAfter(_) => "retry_after",
                        Failure::Transient(_) => "transient",
                        Failure::Permanent(_) => "permanent",
                    },
                );
                Err(f)
            }
        }
    }

    /// Runs `call` until it succeeds, retrying 429s (waiting out a `retry_after` of at most
    /// `MAX_INLINE_WAIT`) and transient failures (short backoff), at most
    /// `INLINE_ATTEMPTS` times; for calls a person waits for right now (a re-rendered
    /// keyboard, a reply request) that are not worth an outbox job. Permanent failures are
    /// returned at once.
    pub(crate) async fn retrying<T, F, Fut>(&self, what: &str, mut call: F) -> Result<T, Failure>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<T, Failure>>,
    {
        let mut attempt = 0;
        loop {
            attempt += 1;
            let f = match call().await {
                Ok(v) => return Ok(v),
                Err(f @ Failure::Permanent(_)) => return Err(f),
                Err(f) => f,
            };
            let wait = match &f {
                Failure::RetryAfter(d) => *d,
                _ => inline_backoff(attempt),
            };
            if attempt >= INLINE_ATTEMPTS || wait > MAX_INLINE_WAIT {
                return Err(f);
            }
            tracing::info!(error = %f.describe(), retry_in_ms = wait.as_millis() as u64, "telegram: {what} failed; retrying");
            tokio::time::sleep(wait).await;
        }
    }

    /// Sends an HTML message, optionally with a keyboard and as a reply; returns its id.
    pub(crate) async fn send(
        &self,
        chat: i64,
        text: String,
        keyboard: Option<InlineKeyboardMarkup>,
        reply_to: Option<i32>,
    ) -> Result<i32, Failure> {
        self.send_in(chat, None, text, keyboard, reply_to).await
    }

    /// Sends an HTML message into forum topic `topic` (`message_thread_id`) of `chat`, or
    /// into the chat itself, optionally with a keyboard and as a reply; returns its id.
    pub(crate) async fn send_in(
        &self,
        chat: i64,
        topic: Option<i32>,
        text: String,
        keyboard: Option<InlineKeyboardMarkup>,
        reply_to: Option<i32>,
    ) -> Result<i32, Failure> {
        let mut req = self
            .bot
            .send_message(ChatId(chat), text)
            .parse_mode(ParseMode::Html)
            .link_preview_options(no_preview());
        if let Some(t) = topic {
            req = req.message_thread_id(ThreadId(MessageId(t)));
        }
        if let Some(k) = keyboard {
            req = req.reply_markup(ReplyMarkup::InlineKeyboard(k));
        }
        if let Some(m) = reply_to {
            req = req
                .reply_parameters(ReplyParameters::new(MessageId(m)).allow_sending_without_reply());
        }
        let r = self
            .within("sendMessage", self.timeout + QUEUE_ALLOWANCE, req)
            .await?;
        self.count("sendMessage", r).map(|m| m.id.0)
    }

    /// Sends an HTML message that asks for a reply (selective ForceReply), as a reply to
    /// `reply_to`; returns its id.
    pub(crate) async fn send_force_reply(
        &self,
        chat: i64,
        text: String,
        reply_to: i32,
        placeholder: &str,
    ) -> Result<i32, Failure> {
        let req = self
            .bot
            .send_message(ChatId(chat), text)
            .parse_mode(ParseMode::Html)
            .link_preview_options(no_preview())
            .reply_parameters(
                ReplyParameters::new(MessageId(reply_to)).allow_sending_without_reply(),
            )
            .reply_markup(ReplyMarkup::ForceReply(
                ForceReply::new()
                    .selective()
                    .input_field_placeholder(Some(placeholder.to_string())),
            ));
        let r = self
            .within("sendMessage", self.timeout + QUEUE_ALLOWANCE, req)
            .await?;
        self.count("sendMessage", r).map(|m| m.id.0)
    }

    /// Creates a forum topic named `name` in forum supergroup `chat`; returns its
    /// `message_thread_id`.
    pub(crate) async fn create_topic(&self, chat: i64, name: String) -> Result<i32, Failure> {
        let req = self.bot.create_forum_topic(ChatId(chat), name);
        let r = self.within("createForumTopic", self.timeout, req).await?;
        self.count("createForumTopic", r).map(|t| t.thread_id.0.0)
    }

    /// Closes forum topic `topic` of `chat` (it stays readable; nobody posts in it).
    pub(crate) async fn close_topic(&self, chat: i64, topic: i32) -> Result<(), Failure> {
        let req = self
            .bot
            .close_forum_topic(ChatId(chat), ThreadId(MessageId(topic)));
        let r = self.within("closeForumTopic", self.timeout, req).await?;
        self.count("closeForumTopic", r).map(|_| ())
    }

    /// Replaces a message's HTML text and keyboard (`None` removes the keyboard).
    pub(crate) async fn edit(
        &self,
        chat: i64,
        message: i32,
        text: String,
        keyboard: Option<InlineKeyboardMarkup>,
    ) -> Result<Edited, Failure> {
        let req = self
            .bot
            .edit_message_text(ChatId(chat), MessageId(message), text)
            .parse_mode(ParseMode::Html)
            .link_preview_options(no_preview())
            .reply_markup(keyboard.unwrap_or_else(no_keyboard));
        let method = "editMessageText";
        let r = self.within(method, self.timeout, req).await?;
        self.edited(method, r)
    }

    /// Replaces a message's text with plain text (no parse mode) and removes its keyboard:
    /// the fallback when Telegram refuses the HTML version.
    pub(crate) async fn edit_plain(
        &self,
        chat: i64,
        message: i32,
        text: String,
    ) -> Result<Edited, Failure> {
        let req = self
            .bot
            .edit_message_text(ChatId(chat), MessageId(message), text)
            .link_preview_options(no_preview())
            .reply_markup(no_keyboard());
        let method = "editMessageText";
        let r = self.within(method, self.timeout, req).await?;
        self.edited(method, r)
    }

    /// Removes a message's keyboard, leaving its text: the last resort when Telegram refuses
    /// every new text.
    pub(crate) async fn remove_keyboard(&self, chat: i64, message: i32) -> Result<Edited, Failure> {
        let req = self
            .bot
            .edit_message_reply_markup(ChatId(chat), MessageId(message))
            .reply_markup(no_keyboard());
        let method = "editMessageReplyMarkup";
        let r = self.within(method, self.timeout, req).await?;
        self.edited(method, r)
    }

    /// Sorts an edit's result: "not modified" is done, a message that is gone or can no
    /// longer be edited is [`Edited::Gone`].
    fn edited<T>(&self, method: &str, r: Result<T, RequestError>) -> Result<Edited, Failure> {
        match r {
            Ok(_) => self.count(method, Ok(Edited::Done)),
            Err(RequestError::Api(ApiError::MessageNotModified)) => {
                self.count(method, Ok(Edited::Done))
            }
            Err(RequestError::Api(ApiError::Unknown(s))) if is_unknown_not_modified(&s) => {
                self.count(method, Ok(Edited::Done))
            }
            Err(RequestError::Api(
                e @ (ApiError::MessageToEditNotFound
                | ApiError::MessageCantBeEdited
                | ApiError::MessageIdInvalid
                | ApiError::ChatNotFound
                | ApiError::BotBlocked
                | ApiError::BotKicked
                | ApiError::BotKickedFromSupergroup
                | ApiError::GroupDeactivated),
            )) => {
                let why = e.to_string();
                self.count(method, Ok(Edited::Gone(why)))
            }
            Err(e) => self.count(method, Err(e)),
        }
    }

    /// Answers a callback query with a toast. Failures are logged: the toast is a courtesy,
    /// the decision does not depend on it.
    pub(crate) async fn answer(&self, query: &CallbackQueryId, text: &str) {
        let method = "answerCallbackQuery";
        let req = self
            .bot
            .answer_callback_query(query.clone())
            .text(super::render::toast(text));
        let r = self
            .within(method, self.timeout, req)
            .await
            .and_then(|r| self.count(method, r));
        if let Err(f) = r {
            tracing::warn!(error = %f.describe(), "telegram: could not answer a callback query");
        }
    }

    /// Who the bot is (also checks the token).
    pub(crate) async fn get_me(&self) -> Result<Me, Failure> {
        let r = self
            .within("getMe", self.timeout, self.bot.get_me())
            .await?;
        self.count("getMe", r)
    }

    /// Removes any webhook so `getUpdates` works.
    pub(crate) async fn delete_webhook(&self) -> Result<(), Failure> {
        let r = self
            .within("deleteWebhook", self.timeout, self.bot.delete_webhook())
            .await?;
        self.count("deleteWebhook", r).map(|_| ())
    }

    /// Points Telegram at `url` with `secret`, for the updates imrelay handles.
    pub(crate) async fn set_webhook(&self, url: reqwest::Url, secret: &str) -> Result<(), Failure> {
        let req = self
            .bot
            .set_webhook(url)
            .secret_token(secret.to_string())
            .allowed_updates(ALLOWED_UPDATES);
        let r = self.within("setWebhook", self.timeout, req).await?;
        self.count("setWebhook", r).map(|_| ())
    }

    /// One long poll for updates after `offset`.
    pub(crate) async fn get_updates(
        &self,
        offset: i32,
        timeout_secs: u32,
    ) -> Result<Vec<Update>, Failure> {
        let req = self
            .poller
            .get_updates()
            .offset(offset)
            .timeout(timeout_secs)
            .allowed_updates(ALLOWED_UPDATES);
        let limit = self.timeout + Duration::from_secs(u64::from(timeout_secs));
        let r = self.within("getUpdates", limit, req).await?;
        let conflict = matches!(
            r,
            Err(RequestError::Api(ApiError::TerminatedByOtherGetUpdates))
        );
        self.count("getUpdates", r).map_err(|f| {
            if conflict {
                Failure::Transient(
                    "another process polls with this bot token (\"terminated by other getUpdates request\"): run one imrelay per bot, or use webhook mode".into(),
                )
            } else {
                f
            }
        })
    }
}

fn no_keyboard() -> InlineKeyboardMarkup {
    InlineKeyboardMarkup::new(Vec::<Vec<_>>::new())
}

fn no_preview() -> LinkPreviewOptions {
    LinkPreviewOptions {
        is_disabled: true,
        url: None,
        prefer_small_media: false,
        prefer_large_media: false,
        show_above_text: false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_are_sorted_by_what_to_do() {
        let t = "123:SECRET";
        assert_eq!(
            classify(
                &RequestError::RetryAfter(teloxide::types::Seconds::from_seconds(7)),
                t
            ),
            Failure::RetryAfter(Duration::from_secs(7))
        );
        assert!(matches!(
            classify(&RequestError::Api(ApiError::ChatNotFound), t),
            Failure::Permanent(_)
        ));
        // Telegram's words, as Telegram says them.
        assert_eq!(
            classify(&RequestError::Api(ApiError::InvalidToken), t),
            Failure::Permanent("Invalid bot token".into())
        );
        assert!(matches!(
            classify(
                &RequestError::Api(ApiError::Unknown("Internal Server Error".into())),
                t
            ),
            Failure::Transient(_)
        ));
        assert!(matches!(
            classify(
                &RequestError::Api(ApiError::Unknown("Bad Request: odd".into())),
                t
            ),
            Failure::Permanent(_)
        ));
        assert_eq!(
            redact("url /bot123:SECRET/sendMessage", t),
            "url /bot[redacted]/sendMessage"
        );
    }
}
