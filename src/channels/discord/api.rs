//! The subset of Discord's REST API (v10) imrelay uses, on reqwest: `GET /users/@me`,
//! `GET /channels/{id}`, `POST /users/@me/channels` (a direct-message channel),
//! `POST /channels/{id}/messages`, `PATCH /channels/{id}/messages/{id}` and
//! `POST /interactions/{id}/{token}/callback`.
//!
//! Rate limits as Discord documents them: each route with its major parameter (the channel)
//! is a bucket; a response whose `X-RateLimit-Remaining` is 0 holds that bucket for
//! `X-RateLimit-Reset-After`; an HTTP 429 holds its bucket, or every request when it says
//! `X-RateLimit-Global: true` (or `"global": true`), for its `Retry-After`; a held request
//! fails at once with the wait left, so the outbox retries it then and never asks Discord
//! early. Every failure is classified as retry-after-N, transient or permanent. The token
//! travels only in the `Authorization` header and never appears in an error or a log line.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use crate::settings::Secret;
use crate::sync::LockExt;

/// Per-request timeout.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);
/// The wait after an HTTP 429 that says none.
pub const DEFAULT_RETRY_AFTER: Duration = Duration::from_secs(1);
/// The longest wait honoured as given; longer ones are cut to this.
pub const MAX_RETRY_AFTER: Duration = Duration::from_secs(3600);
/// The most buckets remembered (the oldest are forgotten first).
const MAX_BUCKETS: usize = 1024;

/// What a caller should do after a failed call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Retry {
    /// Discord said when: wait this long, then try again.
    After(Duration),
    /// Try again with the caller's backoff.
    Transient,
    /// Trying again will not help.
    Permanent,
}

/// Why a REST call failed.
#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    /// The request did not complete (connection refused, reset, timed out).
    #[error("{route}: cannot reach Discord: {detail}")]
    Network {
        /// The route (`POST /channels/{id}/messages`).
        route: &'static str,
        /// What went wrong, without the URL.
        detail: String,
    },
    /// Discord answered HTTP 429, or the bucket is held from an earlier answer.
    #[error("{route}: rate limited by Discord{}; retry after {} ms", if *.global { " (global)" } else { "" }, retry_after.as_millis())]
    RateLimited {
        /// The route.
        route: &'static str,
        /// How long Discord asked to wait.
        retry_after: Duration,
        /// Whether it is the global limit.
        global: bool,
    },
    /// Discord failed on its side (HTTP 5xx).
    #[error("{route}: Discord failed (HTTP {status})")]
    Unavailable {
        /// The route.
        route: &'static str,
        /// The HTTP status.
        status: u16,
    },
    /// Discord refused the request (HTTP 4xx): its JSON error code and message.
    #[error("{route}: Discord refused the request (HTTP {status}, code {code}): {message}")]
    Refused {
        /// The route.
        route: &'static str,
        /// The HTTP status.
        status: u16,
        /// Discord's JSON error code (10003 unknown channel, 50001 missing access, ...).
        code: u64,
        /// Discord's message, cut.
        message: String,
    },
    /// The answer could not be understood.
    #[error("{route}: unexpected answer from Discord: {detail}")]
    Malformed {
        /// The route.
        route: &'static str,
        /// What was wrong with it.
        detail: String,
    },
}

impl ApiError {
    /// What to do next.
    pub fn retry(&self) -> Retry {
        match self {
            ApiError::RateLimited { retry_after, .. } => Retry::After(*retry_after),
            ApiError::Network { .. } | ApiError::Unavailable { .. } => Retry::Transient,
            ApiError::Refused { .. } | ApiError::Malformed { .. } => Retry::Permanent,
        }
    }

    /// Whether Discord refused the token (HTTP 401).
    pub fn is_unauthorized(&self) -> bool {
        matches!(self, ApiError::Refused { status: 401, .. })
    }
}

/// The buckets held, and the global hold; a std mutex never held across an await.
#[derive(Default)]
struct Holds {
    global: Option<Instant>,
    buckets: HashMap<String, Instant>,
}

/// The REST client.
pub struct Rest {
    http: reqwest::Client,
    base: String,
    token: Secret,
    holds: std::sync::Mutex<Holds>,
}

impl std::fmt::Debug for Rest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Rest").field("base", &self.base).finish()
    }
}

impl Rest {
    /// A client for the REST API at `base` (`https://discord.com/api/v10`).
    pub fn new(base: &str, token: Secret) -> Result<Self, ApiError> {
        let http = reqwest::Client::builder()
            .timeout(REQUEST_TIMEOUT)
            .connect_timeout(Duration::from_secs(5))
            .redirect(reqwest::redirect::Policy::none())
            .user_agent(format!(
                "DiscordBot (https://github.com/imrelay/imrelay, {})",
                env!("CARGO_PKG_VERSION")
            ))
            .build()
            .map_err(|e| ApiError::Network {
                route: "client",
                detail: e.to_string(),
            })?;
        Ok(Self {
            http,
            base: base.trim_end_matches('/').to_string(),
            token,
            holds: std::sync::Mutex::default(),
        })
    }

    /// The bot's own user (checks the token).
    pub async fn me(&self) -> Result<Value, ApiError> {
        self.call(Method::GET, "GET /users/@me", "/users/@me", "", None, true)
            .await
    }

    /// The application's id (the bot's application).
    pub async fn application_id(&self) -> Result<String, ApiError> {
        let route = "GET /oauth2/applications/@me";
        let v = self
            .call(
                Method::GET,
                route,
                "/oauth2/applications/@me",
                "",
                None,
                true,
            )
            .await?;
        id_of(route, &v)
    }

    /// Replaces application `app`'s global commands with `commands`.
    pub async fn put_commands(&self, app: &str, commands: &Value) -> Result<(), ApiError> {
        let path = format!("/applications/{app}/commands");
        let route = "PUT /applications/{id}/commands";
        self.call(Method::PUT, route, &path, app, Some(commands), true)
            .await
            .map(|_| ())
    }

    /// A channel the bot can see.
    pub async fn channel(&self, id: &str) -> Result<Value, ApiError> {
        let path = format!("/channels/{id}");
        self.call(Method::GET, "GET /channels/{id}", &path, id, None, true)
            .await
    }

    /// The direct-message channel with user `user` (opened if need be): its id.
    pub async fn open_dm(&self, user: &str) -> Result<String, ApiError> {
        let body = json!({ "recipient_id": user });
        let v = self
            .call(
                Method::POST,
                "POST /users/@me/channels",
                "/users/@me/channels",
                "",
                Some(&body),
                true,
            )
            .await?;
        id_of("POST /users/@me/channels", &v)
    }

    /// Posts `message` to `channel`: the message's id.
    pub async fn post(&self, channel: &str, message: &Value) -> Result<String, ApiError> {
        let path = format!("/channels/{channel}/messages");
        let route = "POST /channels/{id}/messages";
        let v = self
            .call(Method::POST, route, &path, channel, Some(message), true)
            .await?;
        id_of(route, &v)
    }

    /// Replaces message `id` in `channel` with `message`.
    pub async fn edit(&self, channel: &str, id: &str, message: &Value) -> Result<(), ApiError> {
        let path = format!("/channels/{channel}/messages/{id}");
        let route = "PATCH /channels/{id}/messages/{id}";
        self.call(Method::PATCH, route, &path, channel, Some(message), true)
            .await
            .map(|_| ())
    }

    /// Starts a public thread named `name` from message `message` in `channel`: the
    /// thread's channel id (Discord gives it the message's id).
    pub async fn start_thread(
        &self,
        channel: &str,
        message: &str,
        name: &str,
    ) -> Result<String, ApiError> {
        let path = format!("/channels/{channel}/messages/{message}/threads");
        let route = "POST /channels/{id}/messages/{id}/threads";
        // A day of silence archives it (Discord's choices: 60, 1440, 4320, 10080 minutes).
        let body = json!({ "name": name, "auto_archive_duration": 1440 });
        let v = self
            .call(Method::POST, route, &path, channel, Some(&body), true)
            .await?;
        id_of(route, &v)
    }

    /// Archives and locks thread `thread`: it stays readable, nobody posts in it.
    pub async fn close_thread(&self, thread: &str) -> Result<(), ApiError> {
        let path = format!("/channels/{thread}");
        let route = "PATCH /channels/{id}";
        let body = json!({ "archived": true, "locked": true });
        self.call(Method::PATCH, route, &path, thread, Some(&body), true)
            .await
            .map(|_| ())
    }

    /// Answers interaction `id` (with its `token`) with `response`; interaction callbacks
    /// are not bound to the bot's token nor to the global limit.
    pub async fn callback(&self, id: &str, token: &str, response: &Value) -> Result<(), ApiError> {
        let path = format!("/interactions/{id}/{token}/callback");
        let route = "POST /interactions/{id}/{token}/callback";
        self.call(Method::POST, route, &path, id, Some(response), false)
            .await
            .map(|_| ())
    }

    /// The wait left on `bucket` or the global limit, if any.
    fn held(&self, bucket: &str, global: bool) -> Option<(Duration, bool)> {
        let now = Instant::now();
        let mut holds = self.holds.locked();
        if global && let Some(until) = holds.global {
            if until > now {
                return Some((until - now, true));
            }
            holds.global = None;
        }
        match holds.buckets.get(bucket) {
            Some(until) if *until > now => Some((*until - now, false)),
            Some(_) => {
                holds.buckets.remove(bucket);
                None
            }
            None => None,
        }
    }

    fn hold(&self, bucket: &str, wait: Duration, global: bool) {
        let until = Instant::now() + wait.min(MAX_RETRY_AFTER);
        let mut holds = self.holds.locked();
        if global {
            holds.global = Some(until);
            return;
        }
        if holds.buckets.len() >= MAX_BUCKETS {
            let now = Instant::now();
            holds.buckets.retain(|_, u| *u > now);
            if holds.buckets.len() >= MAX_BUCKETS {
                holds.buckets.clear();
            }
        }
        holds.buckets.insert(bucket.to_string(), until);
    }

    /// Calls `route` (`path` under the base; `major` its major parameter) with `body` as
    /// JSON; returns the JSON answer (`null` for 204).
    async fn call(
        &self,
        method: Method,
        route: &'static str,
        path: &str,
        major: &str,
        body: Option<&Value>,
        authorized: bool,
    ) -> Result<Value, ApiError> {
        let bucket = format!("{route} {major}");
        if let Some((retry_after, global)) = self.held(&bucket, authorized) {
            return Err(ApiError::RateLimited {
                route,
                retry_after,
                global,
            });
        }
        let mut req = self.http.request(method, format!("{}{path}", self.base));
        if authorized {
            req = req.header(
                reqwest::header::AUTHORIZATION,
                format!("Bot {}", self.token.expose()),
            );
        }
        if let Some(b) = body {
            req = req.json(b);
        }
        let network = |e: reqwest::Error| ApiError::Network {
            route,
            detail: e.without_url().to_string(),
        };
        let resp = req.send().await.map_err(network)?;
        let status = resp.status();
        let headers = resp.headers().clone();
        if header(&headers, "x-ratelimit-remaining").as_deref() == Some("0")
            && let Some(wait) = seconds(header(&headers, "x-ratelimit-reset-after"))
        {
            self.hold(&bucket, wait, false);
        }
        let bytes = resp.bytes().await.map_err(network)?;
        let json: Option<Value> = serde_json::from_slice(&bytes).ok();
        if status == StatusCode::TOO_MANY_REQUESTS {
            let global = header(&headers, "x-ratelimit-global").as_deref() == Some("true")
                || json.as_ref().is_some_and(|j| j["global"] == true);
            let retry_after = seconds(header(&headers, "retry-after"))
                .or_else(|| seconds(json.as_ref().map(|j| j["retry_after"].to_string())))
                .unwrap_or(DEFAULT_RETRY_AFTER);
            self.hold(&bucket, retry_after, global);
            return Err(ApiError::RateLimited {
                route,
                retry_after,
                global,
            });
        }
        classify(route, status, bytes.is_empty(), json)
    }
}

/// Header `name`, as text.
fn header(headers: &reqwest::header::HeaderMap, name: &str) -> Option<String> {
    headers
        .get(name)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string)
}

/// A number of seconds as Discord writes them (`"1.5"`), within [`MAX_RETRY_AFTER`].
fn seconds(v: Option<String>) -> Option<Duration> {
    v.and_then(|s| s.trim().parse::<f64>().ok())
        .filter(|s| s.is_finite() && *s >= 0.0)
        .map(|s| Duration::from_secs_f64(s.min(MAX_RETRY_AFTER.as_secs_f64())))
}

/// The result of an answer that is not a 429.
fn classify(
    route: &'static str,
    status: StatusCode,
    empty: bool,
    json: Option<Value>,
) -> Result<Value, ApiError> {
    if status.is_server_error() {
        return Err(ApiError::Unavailable {
            route,
            status: status.as_u16(),
        });
    }
    if !status.is_success() {
        let j = json.unwrap_or(Value::Null);
        return Err(ApiError::Refused {
            route,
            status: status.as_u16(),
            code: j["code"].as_u64().unwrap_or(0),
            message: crate::interaction::clip(j["message"].as_str().unwrap_or("(no message)"), 200),
        });
    }
    if status == StatusCode::NO_CONTENT || empty {
        return Ok(Value::Null);
    }
    json.ok_or_else(|| ApiError::Malformed {
        route,
        detail: "the answer is not JSON".into(),
    })
}

fn id_of(route: &'static str, v: &Value) -> Result<String, ApiError> {
    v["id"]
        .as_str()
        .filter(|s| !s.is_empty())
        .map(str::to_string)
        .ok_or_else(|| ApiError::Malformed {
            route,
            detail: "the answer carries no id".into(),
        })
}
