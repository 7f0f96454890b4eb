//! The small subset of the Feishu/Lark OpenAPI imrelay uses: the tenant access token, sending
//! an interactive card, updating it, and asking for a long-connection endpoint.
//!
//! The tenant token is fetched on demand and cached; it is refreshed a few minutes before it
//! expires and again when the platform calls it invalid. Concurrent callers share one refresh
//! (single flight): whoever waited while another refreshed uses the fresh token.

use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use reqwest::{Method, StatusCode};
use serde::Deserialize;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use tokio::time::Instant;

use super::settings::Receiver;
use crate::settings::Secret;
use crate::sync::LockExt;

/// How long before its expiry a token is replaced.
pub(crate) const TOKEN_MARGIN: Duration = Duration::from_secs(300);
/// Per-request timeout.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);
/// The platform's "too many requests" code.
pub(crate) const CODE_THROTTLED: i64 = 99991400;
/// Codes that mean the access token is missing, expired or invalid.
const INVALID_TOKEN_CODES: &[i64] = &[99991661, 99991663, 99991664, 99991665, 99991668];
/// Codes of transient platform-side failures.
const TRANSIENT_CODES: &[i64] = &[
    1,          // endpoint: system busy
    1000040343, // endpoint: internal error
    230020,     // im: this chat receives messages too fast
];

/// Why a platform call failed.
#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    /// The request did not complete (connection refused, timeout, reset).
    #[error("cannot reach the platform: {0}")]
    Network(String),
    /// The platform asked us to slow down.
    #[error("rate limited by the platform (code {code})")]
    Throttled {
        /// The platform's code (99991400, 230020) or the HTTP status.
        code: i64,
        /// How long the platform asked us to wait, when it said.
        retry_after: Option<Duration>,
    },
    /// The platform failed on its side (HTTP 5xx or a "system busy" code).
    #[error("the platform failed (HTTP {status}, code {code}): {msg}")]
    Unavailable {
        /// HTTP status.
        status: u16,
        /// The platform's code, or 0.
        code: i64,
        /// The platform's message.
        msg: String,
    },
    /// The app credentials were refused (check `app_id` and `app_secret`).
    #[error("the platform refused the app credentials (code {code}): {msg}")]
    Credentials {
        /// The platform's code.
        code: i64,
        /// The platform's message.
        msg: String,
    },
    /// The platform refused this request for good (bad receiver, no permission, ...).
    #[error("the platform refused the request (code {code}): {msg}")]
    Refused {
        /// The platform's code.
        code: i64,
        /// The platform's message.
        msg: String,
    },
    /// The answer could not be understood.
    #[error("unexpected answer from the platform: {0}")]
    Malformed(String),
}

impl ApiError {
    /// Whether trying again later may succeed.
    pub fn is_transient(&self) -> bool {
        matches!(
            self,
            ApiError::Network(_) | ApiError::Throttled { .. } | ApiError::Unavailable { .. }
        )
    }
}

/// A cached tenant access token.
#[derive(Clone)]
struct Cached {
    value: String,
    refresh_at: Instant,
    generation: u64,
}

/// The endpoint and client settings for a long connection.
#[derive(Clone, Debug, Deserialize, PartialEq, Eq)]
pub struct Endpoint {
    /// The `wss://` URL to connect to.
    #[serde(rename = "URL")]
    pub url: String,
    /// Ping interval, reconnect policy.
    #[serde(rename = "ClientConfig", default)]
    pub config: Option<ClientConfig>,
}

/// Connection settings the platform hands out (at the endpoint request and in pongs).
#[derive(Clone, Copy, Debug, Deserialize, PartialEq, Eq, Default)]
pub struct ClientConfig {
    /// Reconnect attempts before giving up (negative: never give up).
    #[serde(rename = "ReconnectCount", default)]
    pub reconnect_count: Option<i64>,
    /// Seconds between reconnect attempts.
    #[serde(
        rename = "ReconnectInterval",
        default,
        deserialize_with = "lenient_secs"
    )]
    pub reconnect_interval: Option<i64>,
    /// Upper bound of the random delay before the first reconnect attempt, seconds.
    #[serde(rename = "ReconnectNonce", default, deserialize_with = "lenient_secs")]
    pub reconnect_nonce: Option<i64>,
    /// Seconds between pings.
    #[serde(rename = "PingInterval", default, deserialize_with = "lenient_secs")]
    pub ping_interval: Option<i64>,
}

/// A number of seconds as the platform writes it, read leniently so that one odd value does
/// not make the whole endpoint answer unreadable: any JSON number (beyond the range of i64
/// saturated, fractions cut) or a numeric string; anything else reads as absent. Range checks
/// are the caller's.
fn lenient_secs<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<i64>, D::Error> {
    Ok(match Option::<Value>::deserialize(d)? {
        Some(Value::Number(n)) => n
            .as_i64()
            .or_else(|| n.as_u64().map(|_| i64::MAX))
            .or_else(|| n.as_f64().map(|f| f as i64)),
        Some(Value::String(s)) => s.trim().parse().ok(),
        _ => None,
    })
}

/// The OpenAPI client.
pub struct OpenApi {
    http: reqwest::Client,
    base: String,
    app_id: String,
    app_secret: Secret,
    // A std mutex: read and replaced without awaiting while held.
    token: Mutex<Option<Cached>>,
    // Held across the token request so concurrent callers share one refresh.
    refresh: tokio::sync::Mutex<()>,
    token_fetches: AtomicU64,
}

#[derive(Deserialize)]
struct Envelope {
    #[serde(default)]
    code: i64,
    #[serde(default)]
    msg: String,
    #[serde(default)]
    data: Value,
}

#[derive(Deserialize)]
struct TokenAnswer {
    #[serde(default)]
    code: i64,
    #[serde(default)]
    msg: String,
    #[serde(default)]
    tenant_access_token: String,
    #[serde(default)]
    expire: u64,
}

/// The dedupe `uuid` of the send of one interaction to `receiver` (at most 50 characters, as
/// the platform requires): a retried send never posts a second card. `incarnation` names the
/// interaction by id and creation time ([`crate::interaction::Interaction::incarnation`]), so an id used again
/// after the first interaction was pruned gets a card of its own.
pub(crate) fn send_uuid(incarnation: &str, receiver: &Receiver) -> String {
    let mut h = Sha256::new();
    h.update(b"imrelay/feishu/send\n");
    h.update(incarnation.as_bytes());
    h.update(b"\n");
    h.update(receiver.address().as_bytes());
    hex::encode(&h.finalize()[..16])
}

fn retry_after(headers: &reqwest::header::HeaderMap) -> Option<Duration> {
    ["x-ogw-ratelimit-reset", "retry-after"]
        .iter()
        .find_map(|h| headers.get(*h)?.to_str().ok()?.trim().parse::<u64>().ok())
        .map(|s| Duration::from_secs(s.clamp(1, 60)))
}

impl OpenApi {
    /// A client for the platform at `base` (no trailing slash).
    pub fn new(base: &str, app_id: &str, app_secret: Secret) -> Result<Self, ApiError> {
        let http = reqwest::Client::builder()
            .timeout(REQUEST_TIMEOUT)
            .connect_timeout(Duration::from_secs(5))
            .user_agent(format!("imrelay/{}", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| ApiError::Network(e.to_string()))?;
        Ok(Self {
            http,
            base: base.trim_end_matches('/').to_string(),
            app_id: app_id.to_string(),
            app_secret,
            token: Mutex::new(None),
            refresh: tokio::sync::Mutex::new(()),
            token_fetches: AtomicU64::new(0),
        })
    }

    /// How many times a tenant token was requested from the platform.
    pub fn token_fetches(&self) -> u64 {
        self.token_fetches.load(Ordering::Relaxed)
    }

    fn cached(&self) -> std::sync::MutexGuard<'_, Option<Cached>> {
        self.token.locked()
    }

    /// A valid tenant access token, from the cache or freshly fetched.
    pub async fn tenant_token(&self) -> Result<String, ApiError> {
        let seen = {
            let cached = self.cached();
            match &*cached {
                Some(c) if Instant::now() < c.refresh_at => return Ok(c.value.clone()),
                Some(c) => c.generation,
                None => 0,
            }
        };
        let _flight = self.refresh.lock().await;
        {
            let cached = self.cached();
            if let Some(c) = &*cached
                && (c.generation != seen || Instant::now() < c.refresh_at)
            {
                // Refreshed by another caller while we waited.
                return Ok(c.value.clone());
            }
        }
        let (value, expire) = self.fetch_token().await?;
        let lifetime = Duration::from_secs(expire).saturating_sub(TOKEN_MARGIN);
        *self.cached() = Some(Cached {
            value: value.clone(),
            refresh_at: Instant::now() + lifetime,
            generation: seen + 1,
        });
        Ok(value)
    }

    /// Marks `stale` as unusable (the platform called it invalid), unless it was already
    /// replaced.
    pub fn invalidate(&self, stale: &str) {
        if let Some(c) = self.cached().as_mut()
            && c.value == stale
        {
            c.refresh_at = Instant::now();
        }
    }

    async fn fetch_token(&self) -> Result<(String, u64), ApiError> {
        self.token_fetches.fetch_add(1, Ordering::Relaxed);
        let url = format!(
            "{}/open-apis/auth/v3/tenant_access_token/internal",
            self.base
        );
        let (status, headers, text) = exchange(
            self.http
                .post(&url)
                .json(&json!({"app_id": self.app_id, "app_secret": self.app_secret.expose()})),
        )
        .await?;
        let answer: Option<TokenAnswer> = serde_json::from_str(&text).ok();
        match answer {
            Some(a) if status.is_success() && a.code == 0 && !a.tenant_access_token.is_empty() => {
                tracing::debug!(
                    expire_secs = a.expire,
                    "feishu: fetched a tenant access token"
                );
                Ok((a.tenant_access_token, a.expire))
            }
            Some(a) if a.code != 0 => Err(match classify(status, a.code, a.msg, &headers) {
                ApiError::Refused { code, msg } => ApiError::Credentials { code, msg },
                other => other,
            }),
            _ => Err(classify(status, 0, short(&text), &headers)),
        }
    }

    /// Calls an OpenAPI method with the tenant token; retries once with a fresh token if the
    /// platform calls the token invalid. Returns the answer's `data`.
    async fn call(
        &self,
        method: Method,
        path_and_query: &str,
        body: &Value,
    ) -> Result<Value, ApiError> {
        let mut attempt = 0;
        loop {
            attempt += 1;
            let token = self.tenant_token().await?;
            let url = format!("{}{}", self.base, path_and_query);
            let (status, headers, text) = exchange(
                self.http
                    .request(method.clone(), &url)
                    .bearer_auth(&token)
                    .json(body),
            )
            .await?;
            let envelope: Option<Envelope> = serde_json::from_str(&text).ok();
            match envelope {
                Some(e) if e.code == 0 && status.is_success() => return Ok(e.data),
                Some(e) if INVALID_TOKEN_CODES.contains(&e.code) => {
                    self.invalidate(&token);
                    if attempt >= 2 {
                        return Err(ApiError::Credentials {
                            code: e.code,
                            msg: e.msg,
                        });
                    }
                    tracing::info!(
                        code = e.code,
                        "feishu: the access token was refused; refreshing it"
                    );
                }
                Some(e) => return Err(classify(status, e.code, e.msg, &headers)),
                None => return Err(classify(status, 0, short(&text), &headers)),
            }
        }
    }

    /// Sends `card` to `receiver`; `uuid` makes a retried send a no-op. Returns the message id.
    pub async fn send_card(
        &self,
        receiver: &Receiver,
        card: &Value,
        uuid: &str,
    ) -> Result<String, ApiError> {
        self.send(receiver, "interactive", card, uuid).await
    }

    /// Sends the plain text `text` to `receiver`; `uuid` makes a retried send a no-op.
    /// Returns the message id.
    pub async fn send_text_to(
        &self,
        receiver: &Receiver,
        text: &str,
        uuid: &str,
    ) -> Result<String, ApiError> {
        self.send(receiver, "text", &json!({ "text": text }), uuid)
            .await
    }

    /// Sends a message of `msg_type` with `content` to `receiver` under `uuid`.
    async fn send(
        &self,
        receiver: &Receiver,
        msg_type: &str,
        content: &Value,
        uuid: &str,
    ) -> Result<String, ApiError> {
        let data = self
            .call(
                Method::POST,
                &format!(
                    "/open-apis/im/v1/messages?receive_id_type={}",
                    receiver.kind.as_str()
                ),
                &json!({
                    "receive_id": receiver.id,
                    "msg_type": msg_type,
                    "content": content.to_string(),
                    "uuid": uuid,
                }),
            )
            .await?;
        message_id(&data)
    }

    /// Replies to message `message_id` with a message of `msg_type` (`text`,
    /// `interactive`) and `content`; `in_thread`: in the message's thread (a thread is
    /// made under it when it has none), else as a quoted reply in the chat. `uuid` makes a
    /// retried reply a no-op. Returns the reply's message id.
    pub async fn reply(
        &self,
        message_id_: &str,
        msg_type: &str,
        content: &Value,
        in_thread: bool,
        uuid: &str,
    ) -> Result<String, ApiError> {
        if !is_message_id(message_id_) {
            return Err(ApiError::Refused {
                code: 0,
                msg: format!("{message_id_:?} is not a message id"),
            });
        }
        let data = self
            .call(
                Method::POST,
                &format!("/open-apis/im/v1/messages/{message_id_}/reply"),
                &json!({
                    "msg_type": msg_type,
                    "content": content.to_string(),
                    "reply_in_thread": in_thread,
                    "uuid": uuid,
                }),
            )
            .await?;
        message_id(&data)
    }

    /// Sends the plain text `text` to the chat `chat_id`. Returns the message id.
    pub async fn send_text(&self, chat_id: &str, text: &str) -> Result<String, ApiError> {
        let data = self
            .call(
                Method::POST,
                "/open-apis/im/v1/messages?receive_id_type=chat_id",
                &json!({
                    "receive_id": chat_id,
                    "msg_type": "text",
                    "content": json!({"text": text}).to_string(),
                }),
            )
            .await?;
        Ok(data
            .get("message_id")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string())
    }

    /// Replaces the content of card message `message_id`.
    pub async fn update_card(&self, message_id: &str, card: &Value) -> Result<(), ApiError> {
        if !is_message_id(message_id) {
            return Err(ApiError::Refused {
                code: 0,
                msg: format!("{message_id:?} is not a message id"),
            });
        }
        self.call(
            Method::PATCH,
            &format!("/open-apis/im/v1/messages/{message_id}"),
            &json!({"content": card.to_string()}),
        )
        .await
        .map(|_| ())
    }

    /// Asks for a long-connection endpoint with the app credentials.
    pub async fn ws_endpoint(&self) -> Result<Endpoint, ApiError> {
        let url = format!("{}/callback/ws/endpoint", self.base);
        let (status, headers, text) = exchange(
            self.http
                .post(&url)
                .header("locale", "zh")
                .json(&json!({"AppID": self.app_id, "AppSecret": self.app_secret.expose()})),
        )
        .await?;
        match serde_json::from_str::<Envelope>(&text) {
            Ok(e) if e.code == 0 && status.is_success() => serde_json::from_value(e.data)
                .map_err(|err| ApiError::Malformed(format!("endpoint answer: {err}"))),
            Ok(e) => Err(classify(status, e.code, e.msg, &headers)),
            Err(_) => Err(classify(status, 0, short(&text), &headers)),
        }
    }
}

/// Sends `request` and reads the whole answer: its status, headers and text. A failure to
/// send or read is a network error, named without the URL (which may carry a token).
async fn exchange(
    request: reqwest::RequestBuilder,
) -> Result<(reqwest::StatusCode, reqwest::header::HeaderMap, String), ApiError> {
    let network = |e: reqwest::Error| ApiError::Network(e.without_url().to_string());
    let resp = request.send().await.map_err(network)?;
    let status = resp.status();
    let headers = resp.headers().clone();
    let text = resp.text().await.map_err(network)?;
    Ok((status, headers, text))
}

fn short(text: &str) -> String {
    crate::interaction::clip(text.trim(), 200)
}

fn classify(
    status: StatusCode,
    code: i64,
    msg: String,
    headers: &reqwest::header::HeaderMap,
) -> ApiError {
    if code == CODE_THROTTLED || status == StatusCode::TOO_MANY_REQUESTS || code == 230020 {
        return ApiError::Throttled {
            code: if code != 0 {
                code
            } else {
                i64::from(status.as_u16())
            },
            retry_after: retry_after(headers),
        };
    }
    if status.is_server_error() || TRANSIENT_CODES.contains(&code) {
        return ApiError::Unavailable {
            status: status.as_u16(),
            code,
            msg,
        };
    }
    if code == 0 {
        return ApiError::Malformed(format!("HTTP {status}: {msg}"));
    }
    ApiError::Refused { code, msg }
}

/// Whether `id` can be a message id in a path (`om_…`: letters, digits, `_` and `-`).
fn is_message_id(id: &str) -> bool {
    !id.is_empty()
        && id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

/// The `message_id` of a sent message.
fn message_id(data: &Value) -> Result<String, ApiError> {
    data.get("message_id")
        .and_then(Value::as_str)
        .filter(|m| !m.is_empty())
        .map(str::to_string)
        .ok_or_else(|| ApiError::Malformed("the send answer carries no message_id".into()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::channels::feishu::settings::ReceiverType;

    #[test]
    fn send_uuid_is_stable_short_and_distinct() {
        let a = Receiver {
            kind: ReceiverType::ChatId,
            id: "oc_1".into(),
        };
        let b = Receiver {
            kind: ReceiverType::OpenId,
            id: "oc_1".into(),
        };
        let t1 = "t1:1700000000000";
        assert_eq!(send_uuid(t1, &a), send_uuid(t1, &a));
        assert_ne!(send_uuid(t1, &a), send_uuid(t1, &b));
        assert_ne!(send_uuid(t1, &a), send_uuid("t2:1700000000000", &a));
        // The same id, created again later.
        assert_ne!(send_uuid(t1, &a), send_uuid("t1:1700000086400", &a));
        assert!(send_uuid(t1, &a).len() <= 50);
    }

    #[test]
    fn client_config_numbers_are_read_leniently() {
        let c: ClientConfig = serde_json::from_value(json!({
            "PingInterval": 18446744073709551615u64,
            "ReconnectInterval": -5,
            "ReconnectNonce": "30",
            "ReconnectCount": -1,
        }))
        .unwrap();
        assert_eq!(c.ping_interval, Some(i64::MAX));
        assert_eq!(c.reconnect_interval, Some(-5));
        assert_eq!(c.reconnect_nonce, Some(30));
        let c: ClientConfig =
            serde_json::from_value(json!({"PingInterval": 1e300, "ReconnectNonce": [1]})).unwrap();
        assert_eq!(c.ping_interval, Some(i64::MAX));
        assert_eq!(c.reconnect_nonce, None);
        let e: Endpoint = serde_json::from_value(
            json!({"URL": "wss://x/?service_id=1", "ClientConfig": {"PingInterval": -1}}),
        )
        .unwrap();
        assert_eq!(e.config.unwrap().ping_interval, Some(-1));
    }

    #[test]
    fn answers_are_classified() {
        let h = reqwest::header::HeaderMap::new();
        assert!(matches!(
            classify(StatusCode::BAD_REQUEST, CODE_THROTTLED, "x".into(), &h),
            ApiError::Throttled {
                code: CODE_THROTTLED,
                ..
            }
        ));
        assert!(classify(StatusCode::BAD_GATEWAY, 0, "x".into(), &h).is_transient());
        let refused = classify(
            StatusCode::BAD_REQUEST,
            230002,
            "bot not in chat".into(),
            &h,
        );
        assert!(!refused.is_transient());
        let mut h = reqwest::header::HeaderMap::new();
        h.insert("x-ogw-ratelimit-reset", "3".parse().unwrap());
        assert!(matches!(
            classify(StatusCode::TOO_MANY_REQUESTS, 0, String::new(), &h),
            ApiError::Throttled { retry_after: Some(d), .. } if d == Duration::from_secs(3)
        ));
    }
}
