//! The subset of Slack's Web API imrelay uses, on reqwest: `auth.test`, `chat.postMessage`,
//! `chat.update`, `chat.postEphemeral`, `views.open` (bot token) and
//! `apps.connections.open` (app-level token).
//!
//! Every failure is classified the way a delivery loop needs it ([`ApiError::retry`]): retry
//! after the `Retry-After` Slack gave on HTTP 429 (and until then, calls of a method Slack
//! limits per workspace fail at once without asking Slack again), retry with backoff (the network, HTTP 5xx,
//! Slack's `internal_error` and friends), or give up (a refused token, a missing scope, an
//! unknown channel, invalid blocks). Tokens travel only in the `Authorization` header and
//! never appear in an error or a log line.

use std::time::Duration;

use reqwest::StatusCode;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::settings::Secret;
use crate::sync::LockExt;

/// Per-request timeout.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);
/// The wait after an HTTP 429 without a usable `Retry-After` (the official Python SDK waits
/// one second plus jitter in that case).
pub const DEFAULT_RETRY_AFTER: Duration = Duration::from_secs(1);
/// The longest `Retry-After` honoured as given; longer ones are cut to this.
pub const MAX_RETRY_AFTER: Duration = Duration::from_secs(3600);
/// Slack error names that mean "try again later".
const TRANSIENT_ERRORS: &[&str] = &[
    "internal_error",
    "fatal_error",
    "service_unavailable",
    "request_timeout",
    "ratelimited",
    "rate_limited",
];
/// Slack error names that mean the token itself is unusable (wrong, revoked, of the wrong
/// kind, or its workspace or user is gone).
const CREDENTIAL_ERRORS: &[&str] = &[
    "not_authed",
    "invalid_auth",
    "account_inactive",
    "token_revoked",
    "token_expired",
    "not_allowed_token_type",
    "team_disabled",
    "user_removed_from_team",
];

/// What a caller should do after a failed call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Retry {
    /// Slack said when: wait this long, then try again.
    After(Duration),
    /// Try again with the caller's backoff.
    Transient,
    /// Trying again will not help.
    Permanent,
}

/// Why a Web API call failed.
#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    /// The request did not complete (connection refused, reset, timed out).
    #[error("{method}: cannot reach Slack: {detail}")]
    Network {
        /// The Web API method.
        method: &'static str,
        /// What went wrong, without the URL.
        detail: String,
    },
    /// Slack answered HTTP 429 (or `ratelimited`): wait `retry_after`.
    #[error("{method}: rate limited by Slack; retry after {} s", retry_after.as_secs())]
    RateLimited {
        /// The Web API method.
        method: &'static str,
        /// How long Slack asked to wait.
        retry_after: Duration,
    },
    /// Slack failed on its side (HTTP 5xx, `internal_error`, `service_unavailable`, ...).
    #[error("{method}: Slack failed (HTTP {status}): {error}")]
    Unavailable {
        /// The Web API method.
        method: &'static str,
        /// The HTTP status.
        status: u16,
        /// Slack's error name, or a short excerpt of the body.
        error: String,
    },
    /// The token was refused (`invalid_auth`, `token_revoked`, `not_allowed_token_type`, ...).
    #[error("{method}: Slack refused the token: {error}")]
    Credentials {
        /// The Web API method.
        method: &'static str,
        /// Slack's error name.
        error: String,
    },
    /// Slack refused this request for good (`channel_not_found`, `not_in_channel`,
    /// `missing_scope`, `invalid_blocks`, `expired_trigger_id`, ...).
    #[error("{method}: Slack refused the request: {error}{}", detail_suffix(.detail))]
    Refused {
        /// The Web API method.
        method: &'static str,
        /// Slack's error name.
        error: String,
        /// Slack's explanations (`response_metadata.messages`, `needed` for a missing scope).
        detail: Vec<String>,
    },
    /// The answer could not be understood.
    #[error("{method}: unexpected answer from Slack: {detail}")]
    Malformed {
        /// The Web API method.
        method: &'static str,
        /// What was wrong with it.
        detail: String,
    },
}

fn detail_suffix(detail: &[String]) -> String {
    if detail.is_empty() {
        String::new()
    } else {
        format!(" ({})", detail.join("; "))
    }
}

impl ApiError {
    /// What to do next.
    pub fn retry(&self) -> Retry {
        match self {
            ApiError::RateLimited { retry_after, .. } => Retry::After(*retry_after),
            ApiError::Network { .. } | ApiError::Unavailable { .. } => Retry::Transient,
            ApiError::Credentials { .. }
            | ApiError::Refused { .. }
            | ApiError::Malformed { .. } => Retry::Permanent,
        }
    }

    /// Slack's error name (`channel_not_found`, ...), when Slack gave one.
    pub fn slack_error(&self) -> Option<&str> {
        match self {
            ApiError::Credentials { error, .. } | ApiError::Refused { error, .. } => Some(error),
            ApiError::Unavailable { error, .. } if !error.contains(' ') => Some(error),
            _ => None,
        }
    }
}

/// What `auth.test` says about the bot token.
#[derive(Clone, Debug, Deserialize, PartialEq, Eq)]
pub struct AuthTest {
    /// The workspace URL (`https://team.slack.com/`).
    #[serde(default)]
    pub url: String,
    /// The workspace name.
    #[serde(default)]
    pub team: String,
    /// The bot user's name.
    #[serde(default)]
    pub user: String,
    /// The workspace id (`T...`).
    #[serde(default)]
    pub team_id: String,
    /// The bot user's id (`U...`).
    #[serde(default)]
    pub user_id: String,
    /// The bot's id (`B...`), for a bot token.
    #[serde(default)]
    pub bot_id: Option<String>,
}

/// A message to post: Block Kit blocks, with `text` as the notification and fallback text.
#[derive(Clone, Debug, Serialize)]
pub struct NewMessage<'a> {
    /// The conversation id (`C...`, `G...`, `D...`) or a user id (its direct messages).
    pub channel: &'a str,
    /// The notification and fallback text (Slack requires it when blocks are given to be
    /// accessible; at most 40,000 characters).
    pub text: &'a str,
    /// The Block Kit blocks (a JSON array, at most 50 blocks).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub blocks: Option<&'a Value>,
    /// Posts as a reply in this thread.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub thread_ts: Option<&'a str>,
}

/// A posted message, as Slack names it.
#[derive(Clone, Debug, Deserialize, PartialEq, Eq)]
pub struct Posted {
    /// The conversation id (a user id given as `channel` comes back as the DM's id).
    pub channel: String,
    /// The message's timestamp, its id within the conversation.
    pub ts: String,
}

#[derive(Deserialize)]
struct Envelope {
    #[serde(default)]
    ok: bool,
    #[serde(default)]
    error: Option<String>,
    #[serde(default)]
    needed: Option<String>,
    #[serde(default)]
    response_metadata: Option<ResponseMetadata>,
}

#[derive(Deserialize)]
struct ResponseMetadata {
    #[serde(default)]
    messages: Vec<String>,
}

/// The method whose rate limit Slack keeps per conversation rather than per workspace: a 429
/// on it says nothing about other conversations (the delivery skeleton paces those).
const PER_CONVERSATION: &str = "chat.postMessage";

/// The Web API client.
pub struct WebApi {
    http: reqwest::Client,
    base: String,
    bot_token: Secret,
    app_token: Secret,
    /// Methods Slack rate-limited for the workspace, until when: calls before then fail at
    /// once with the remaining wait instead of asking Slack again. A std mutex: never held
    /// across an await; one entry per method at most.
    held: std::sync::Mutex<std::collections::HashMap<&'static str, std::time::Instant>>,
}

impl std::fmt::Debug for WebApi {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WebApi").field("base", &self.base).finish()
    }
}

impl WebApi {
    /// A client for the Web API at `base` (`https://slack.com/api`, no trailing slash).
    pub fn new(base: &str, bot_token: Secret, app_token: Secret) -> Result<Self, ApiError> {
        let http = reqwest::Client::builder()
            .timeout(REQUEST_TIMEOUT)
            .connect_timeout(Duration::from_secs(5))
            .redirect(reqwest::redirect::Policy::none())
            .user_agent(format!("imrelay/{}", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| ApiError::Network {
                method: "client",
                detail: e.to_string(),
            })?;
        Ok(Self {
            http,
            base: base.trim_end_matches('/').to_string(),
            bot_token,
            app_token,
            held: std::sync::Mutex::default(),
        })
    }

    /// Checks the bot token: who it is and in which workspace.
    pub async fn auth_test(&self) -> Result<AuthTest, ApiError> {
        let data = self.call("auth.test", &self.bot_token, None).await?;
        parse("auth.test", data)
    }

    /// Posts a message.
    pub async fn post_message(&self, message: &NewMessage<'_>) -> Result<Posted, ApiError> {
        let body = to_value("chat.postMessage", message)?;
        let data = self
            .call("chat.postMessage", &self.bot_token, Some(&body))
            .await?;
        parse("chat.postMessage", data)
    }

    /// Replaces the text and blocks of message `ts` in `channel`.
    pub async fn update(
        &self,
        channel: &str,
        ts: &str,
        text: &str,
        blocks: &Value,
    ) -> Result<(), ApiError> {
        let body =
            serde_json::json!({"channel": channel, "ts": ts, "text": text, "blocks": blocks});
        self.call("chat.update", &self.bot_token, Some(&body))
            .await
            .map(|_| ())
    }

    /// Shows `text` to `user` alone in `channel`; returns the ephemeral message's timestamp.
    pub async fn post_ephemeral(
        &self,
        channel: &str,
        user: &str,
        text: &str,
    ) -> Result<String, ApiError> {
        let body = serde_json::json!({"channel": channel, "user": user, "text": text});
        let data = self
            .call("chat.postEphemeral", &self.bot_token, Some(&body))
            .await?;
        string_field("chat.postEphemeral", &data, "message_ts")
    }

    /// Opens modal `view` for the person whose action carried `trigger_id` (valid for about
    /// 3 s after the action); returns the view's id.
    pub async fn views_open(&self, trigger_id: &str, view: &Value) -> Result<String, ApiError> {
        let body = serde_json::json!({"trigger_id": trigger_id, "view": view});
        let data = self
            .call("views.open", &self.bot_token, Some(&body))
            .await?;
        data.get("view")
            .and_then(|v| v.get("id"))
            .and_then(Value::as_str)
            .filter(|id| !id.is_empty())
            .map(str::to_string)
            .ok_or_else(|| ApiError::Malformed {
                method: "views.open",
                detail: "the answer carries no view.id".into(),
            })
    }

    /// Asks for a Socket Mode WebSocket URL with the app-level token. Each URL serves one
    /// connection.
    pub async fn connections_open(&self) -> Result<String, ApiError> {
        let data = self
            .call("apps.connections.open", &self.app_token, None)
            .await?;
        string_field("apps.connections.open", &data, "url")
    }

    /// Calls `method` with `token`; `body` is sent as JSON (none: an empty form). Returns the
    /// whole answer when `ok` is true.
    async fn call(
        &self,
        method: &'static str,
        token: &Secret,
        body: Option<&Value>,
    ) -> Result<Value, ApiError> {
        if let Some(wait) = self.held_for(method) {
            return Err(ApiError::RateLimited {
                method,
                retry_after: wait,
            });
        }
        let url = format!("{}/{method}", self.base);
        let request = self.http.post(&url).bearer_auth(token.expose());
        let request = match body {
            Some(b) => request.json(b),
            None => request.header(
                reqwest::header::CONTENT_TYPE,
                "application/x-www-form-urlencoded",
            ),
        };
        let network = |e: reqwest::Error| ApiError::Network {
            method,
            detail: e.without_url().to_string(),
        };
        let resp = request.send().await.map_err(network)?;
        let status = resp.status();
        let retry_after = retry_after(resp.headers());
        let text = resp.text().await.map_err(network)?;
        let answer = classify(method, status, retry_after, &text);
        if let Err(ApiError::RateLimited { retry_after, .. }) = &answer
            && method != PER_CONVERSATION
        {
            let until = std::time::Instant::now() + *retry_after;
            self.held.locked().insert(method, until);
        }
        answer
    }

    /// How much longer `method` is held after Slack rate-limited it, if it is.
    fn held_for(&self, method: &'static str) -> Option<Duration> {
        let mut held = self.held.locked();
        let until = *held.get(method)?;
        let now = std::time::Instant::now();
        if until <= now {
            held.remove(method);
            return None;
        }
        Some(until - now)
    }
}

fn to_value<T: Serialize>(method: &'static str, v: &T) -> Result<Value, ApiError> {
    serde_json::to_value(v).map_err(|e| ApiError::Malformed {
        method,
        detail: format!("cannot encode the request: {e}"),
    })
}

fn parse<T: serde::de::DeserializeOwned>(method: &'static str, data: Value) -> Result<T, ApiError> {
    serde_json::from_value(data).map_err(|e| ApiError::Malformed {
        method,
        detail: e.to_string(),
    })
}

fn string_field(method: &'static str, data: &Value, field: &str) -> Result<String, ApiError> {
    data.get(field)
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        .map(str::to_string)
        .ok_or_else(|| ApiError::Malformed {
            method,
            detail: format!("the answer carries no {field}"),
        })
}

/// The `Retry-After` header in seconds, as Slack sends it on HTTP 429.
fn retry_after(headers: &reqwest::header::HeaderMap) -> Option<Duration> {
    let secs: u64 = headers
        .get(reqwest::header::RETRY_AFTER)?
        .to_str()
        .ok()?
        .trim()
        .parse()
        .ok()?;
    Some(Duration::from_secs(secs).clamp(Duration::from_secs(1), MAX_RETRY_AFTER))
}

fn short(text: &str) -> String {
    crate::interaction::clip(text.trim(), 200)
}

/// Reads an answer: `ok:true` gives the body; everything else becomes the matching error.
fn classify(
    method: &'static str,
    status: StatusCode,
    retry_after: Option<Duration>,
    text: &str,
) -> Result<Value, ApiError> {
    let rate_limited = || ApiError::RateLimited {
        method,
        retry_after: retry_after.unwrap_or(DEFAULT_RETRY_AFTER),
    };
    if status == StatusCode::TOO_MANY_REQUESTS {
        return Err(rate_limited());
    }
    let value: Option<Value> = serde_json::from_str(text).ok();
    let envelope = value.as_ref().and_then(|v| Envelope::deserialize(v).ok());
    match (envelope, value) {
        (Some(e), Some(v)) if e.ok && status.is_success() => Ok(v),
        (Some(e), _) if !e.ok => {
            let error = e.error.unwrap_or_else(|| "unknown_error".into());
            if error == "ratelimited" || error == "rate_limited" {
                return Err(rate_limited());
            }
            if status.is_server_error() || TRANSIENT_ERRORS.contains(&error.as_str()) {
                return Err(ApiError::Unavailable {
                    method,
                    status: status.as_u16(),
                    error,
                });
            }
            if CREDENTIAL_ERRORS.contains(&error.as_str()) {
                return Err(ApiError::Credentials { method, error });
            }
            let mut detail = e.response_metadata.map(|m| m.messages).unwrap_or_default();
            if let Some(needed) = e.needed {
                detail.push(format!("needed: {needed}"));
            }
            Err(ApiError::Refused {
                method,
                error,
                detail: detail.iter().map(|d| short(d)).collect(),
            })
        }
        _ if status.is_server_error() => Err(ApiError::Unavailable {
            method,
            status: status.as_u16(),
            error: short(text),
        }),
        _ => Err(ApiError::Malformed {
            method,
            detail: format!("HTTP {status}: {}", short(text)),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn err(status: u16, after: Option<u64>, body: &str) -> ApiError {
        classify(
            "chat.postMessage",
            StatusCode::from_u16(status).unwrap(),
            after.map(Duration::from_secs),
            body,
        )
        .unwrap_err()
    }

    #[test]
    fn answers_are_classified_for_the_delivery_loop() {
        assert_eq!(
            err(429, Some(7), r#"{"ok":false,"error":"ratelimited"}"#).retry(),
            Retry::After(Duration::from_secs(7))
        );
        assert_eq!(
            err(429, None, "").retry(),
            Retry::After(DEFAULT_RETRY_AFTER),
            "a 429 without Retry-After still waits"
        );
        assert_eq!(
            err(200, None, r#"{"ok":false,"error":"internal_error"}"#).retry(),
            Retry::Transient
        );
        assert_eq!(
            err(503, None, "<html>busy</html>").retry(),
            Retry::Transient
        );
        let e = err(200, None, r#"{"ok":false,"error":"invalid_auth"}"#);
        assert!(matches!(e, ApiError::Credentials { .. }), "{e}");
        assert_eq!(e.retry(), Retry::Permanent);
        let e = err(
            200,
            None,
            r#"{"ok":false,"error":"invalid_blocks","response_metadata":{"messages":["[ERROR] must be more than 0 characters [json-pointer:/blocks/0/text/text]"]}}"#,
        );
        assert_eq!(e.slack_error(), Some("invalid_blocks"));
        assert!(e.to_string().contains("json-pointer:/blocks/0"), "{e}");
        let e = err(
            200,
            None,
            r#"{"ok":false,"error":"missing_scope","needed":"chat:write"}"#,
        );
        assert!(e.to_string().contains("needed: chat:write"), "{e}");
        assert_eq!(err(404, None, "Not Found").retry(), Retry::Permanent);
        assert!(
            classify(
                "auth.test",
                StatusCode::OK,
                None,
                r#"{"ok":true,"user_id":"U1"}"#
            )
            .is_ok()
        );
    }

    #[test]
    fn retry_after_is_held_to_sane_bounds() {
        let mut h = reqwest::header::HeaderMap::new();
        h.insert("retry-after", "0".parse().unwrap());
        assert_eq!(retry_after(&h), Some(Duration::from_secs(1)));
        h.insert("retry-after", "99999999".parse().unwrap());
        assert_eq!(retry_after(&h), Some(MAX_RETRY_AFTER));
        h.insert("retry-after", "soon".parse().unwrap());
        assert_eq!(retry_after(&h), None);
    }
}
