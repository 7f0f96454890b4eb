//! The few client-server API calls the channel makes, over reqwest: log in, `whoami`, the
//! rooms joined, join, a room's encryption state, send an event (with a transaction id, so a
//! retried send is not posted twice), create a direct room, and the `/sync` long poll. Event
//! contents are ruma's types; every failure is classified as throttled (with the wait the
//! homeserver asked for), transient or permanent.

use std::time::Duration;

use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use crate::settings::Secret;

/// The client-server API's path prefix.
const PREFIX: [&str; 3] = ["_matrix", "client", "v3"];

/// The device id the bot logs in with, so that a restart reuses its device.
pub(crate) const DEVICE_ID: &str = "IMRELAY";

/// A failed call.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ApiError {
    /// The homeserver answered with an error.
    #[error("{method} {what}: HTTP {status} {errcode}: {message}")]
    Status {
        /// The request's method.
        method: &'static str,
        /// What was asked (the endpoint, without ids).
        what: &'static str,
        /// The HTTP status.
        status: u16,
        /// Matrix's error code (`M_FORBIDDEN`, `M_LIMIT_EXCEEDED`), or empty.
        errcode: String,
        /// The homeserver's words.
        message: String,
        /// How long the homeserver asked to wait (a 429).
        retry_after: Option<Duration>,
    },
    /// The homeserver could not be reached, or did not answer in time.
    #[error("{what}: {error}")]
    Network {
        /// What was asked.
        what: &'static str,
        /// What went wrong.
        error: String,
    },
    /// The answer was not what the API describes.
    #[error("{what}: unexpected answer: {error}")]
    Decode {
        /// What was asked.
        what: &'static str,
        /// What did not fit.
        error: String,
    },
}

/// What a failure means for a retry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Retry {
    /// Throttled: after this wait, or the caller's own when the homeserver did not say.
    After(Option<Duration>),
    /// Worth trying again later.
    Transient,
    /// Trying again will not help.
    Permanent,
}

impl ApiError {
    /// Whether to try again, and when.
    pub(super) fn retry(&self) -> Retry {
        match self {
            ApiError::Status {
                status: 429,
                retry_after,
                ..
            } => Retry::After(*retry_after),
            ApiError::Status { errcode, .. } if errcode == "M_LIMIT_EXCEEDED" => Retry::After(None),
            ApiError::Status { status, .. } if *status >= 500 || *status == 408 => Retry::Transient,
            ApiError::Status { .. } => Retry::Permanent,
            ApiError::Network { .. } | ApiError::Decode { .. } => Retry::Transient,
        }
    }

    /// Matrix's error code, when the homeserver gave one.
    pub(super) fn errcode(&self) -> &str {
        match self {
            ApiError::Status { errcode, .. } => errcode,
            _ => "",
        }
    }

    /// The HTTP status, when the homeserver answered.
    pub(super) fn status(&self) -> Option<u16> {
        match self {
            ApiError::Status { status, .. } => Some(*status),
            _ => None,
        }
    }
}

/// The bot's account as the homeserver knows it.
#[derive(Clone, Debug, Deserialize)]
pub(crate) struct WhoAmI {
    /// Its user id.
    pub user_id: String,
    /// Its device, when the token has one.
    #[serde(default)]
    pub device_id: Option<String>,
}

/// A client of one homeserver, with the bot's access token.
#[derive(Clone)]
pub(crate) struct Client {
    http: reqwest::Client,
    base: url::Url,
    token: Secret,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("base", &self.base.as_str())
            .finish_non_exhaustive()
    }
}

/// The HTTP client every call goes through.
pub(crate) fn http(connect_timeout: Duration) -> anyhow::Result<reqwest::Client> {
    Ok(reqwest::Client::builder()
        .connect_timeout(connect_timeout)
        .redirect(reqwest::redirect::Policy::none())
        .user_agent(format!("imrelay/{}", env!("CARGO_PKG_VERSION")))
        .build()?)
}

/// The device a deployment logs in as: [`DEVICE_ID`] and a tag of `secret` (a secret kept
/// in its store), so every start and every replica of one deployment reuses one device —
/// the homeserver takes their sends of one transaction id as one — while another deployment
/// on the same account (staging beside production) has its own, and none of its messages
/// is dropped as a repeat of the other's.
pub(crate) fn device_id(secret: &[u8]) -> String {
    use sha2::{Digest, Sha256};
    let h = Sha256::digest([b"imrelay matrix device\n".as_slice(), secret].concat());
    format!("{DEVICE_ID}{}", &hex::encode_upper(h)[..8])
}

/// Logs in as `user` with `password` on the homeserver at `base` as device `device` (see
/// [`device_id`]); returns the access token and the user id.
pub(crate) async fn login(
    http: &reqwest::Client,
    base: &str,
    (user, device): (&str, &str),
    password: &Secret,
    timeout: Duration,
) -> Result<(Secret, String), ApiError> {
    const WHAT: &str = "login";
    let url =
        endpoint(base, &["login"]).map_err(|error| ApiError::Network { what: WHAT, error })?;
    let body = json!({
        "type": "m.login.password",
        "identifier": {"type": "m.id.user", "user": user},
        "password": password.expose(),
        "device_id": device,
        "initial_device_display_name": "imrelay",
    });
    let req = http.post(url).timeout(timeout).json(&body);
    let v: Value = finish(WHAT, "POST", req).await?;
    let token = v["access_token"].as_str().unwrap_or_default();
    let user_id = v["user_id"].as_str().unwrap_or_default();
    if token.is_empty() || user_id.is_empty() {
        return Err(ApiError::Decode {
            what: WHAT,
            error: "no access_token or user_id".into(),
        });
    }
    Ok((Secret::new(token), user_id.to_string()))
}

/// `base` + the client-server prefix + `segments`, each segment percent-encoded.
fn endpoint(base: &str, segments: &[&str]) -> Result<url::Url, String> {
    let mut url = url::Url::parse(base).map_err(|e| format!("{base:?}: {e}"))?;
    url.path_segments_mut()
        .map_err(|()| format!("{base:?} cannot be a base URL"))?
        .pop_if_empty()
        .extend(PREFIX)
        .extend(segments);
    Ok(url)
}

/// Sends `req` and reads its JSON answer, or the homeserver's error.
async fn finish<T: DeserializeOwned>(
    what: &'static str,
    method: &'static str,
    req: reqwest::RequestBuilder,
) -> Result<T, ApiError> {
    let resp = req.send().await.map_err(|e| ApiError::Network {
        what,
        error: without_url(&e),
    })?;
    let status = resp.status().as_u16();
    let header_wait = resp
        .headers()
        .get(reqwest::header::RETRY_AFTER)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok())
        .map(Duration::from_secs);
    // A bound on what is read: a sync answer is the largest, and far below this.
    let bytes = resp.bytes().await.map_err(|e| ApiError::Network {
        what,
        error: without_url(&e),
    })?;
    if bytes.len() > 32 << 20 {
        return Err(ApiError::Decode {
            what,
            error: format!("{} bytes", bytes.len()),
        });
    }
    if !(200..300).contains(&status) {
        let v: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
        let retry_after = v["retry_after_ms"]
            .as_u64()
            .map(Duration::from_millis)
            .or(header_wait);
        return Err(ApiError::Status {
            method,
            what,
            status,
            errcode: v["errcode"].as_str().unwrap_or_default().to_string(),
            message: crate::interaction::clip(v["error"].as_str().unwrap_or_default(), 300),
            retry_after,
        });
    }
    serde_json::from_slice(&bytes).map_err(|e| ApiError::Decode {
        what,
        error: e.to_string(),
    })
}

/// A reqwest error's text without its URL (which holds ids, never the token, but is long).
fn without_url(e: &reqwest::Error) -> String {
    let mut s = e.to_string();
    if let Some(url) = e.url() {
        s = s.replace(url.as_str(), "<homeserver>");
    }
    if e.is_timeout() {
        s.push_str(" (timed out)");
    }
    s
}

impl Client {
    /// A client of the homeserver at `base` (its client-server API's base URL).
    pub(super) fn new(http: reqwest::Client, base: &str, token: Secret) -> anyhow::Result<Self> {
        let base = url::Url::parse(base)?;
        Ok(Self { http, base, token })
    }

    fn url(&self, what: &'static str, segments: &[&str]) -> Result<url::Url, ApiError> {
        endpoint(self.base.as_str(), segments).map_err(|error| ApiError::Network { what, error })
    }

    async fn get<T: DeserializeOwned>(
        &self,
        what: &'static str,
        segments: &[&str],
        query: &[(&str, String)],
        timeout: Duration,
    ) -> Result<T, ApiError> {
        let req = self
            .http
            .get(self.url(what, segments)?)
            .query(query)
            .bearer_auth(self.token.expose())
            .timeout(timeout);
        finish(what, "GET", req).await
    }

    async fn send_json<T: DeserializeOwned>(
        &self,
        what: &'static str,
        method: reqwest::Method,
        segments: &[&str],
        body: &Value,
        timeout: Duration,
    ) -> Result<T, ApiError> {
        let label = if method == reqwest::Method::PUT {
            "PUT"
        } else {
            "POST"
        };
        let req = self
            .http
            .request(method, self.url(what, segments)?)
            .bearer_auth(self.token.expose())
            .timeout(timeout)
            .json(body);
        finish(what, label, req).await
    }

    /// Who the token belongs to.
    pub(super) async fn whoami(&self, timeout: Duration) -> Result<WhoAmI, ApiError> {
        self.get("whoami", &["account", "whoami"], &[], timeout)
            .await
    }

    /// The rooms the bot has joined.
    pub(super) async fn joined_rooms(&self, timeout: Duration) -> Result<Vec<String>, ApiError> {
        #[derive(Deserialize)]
        struct Joined {
            joined_rooms: Vec<String>,
        }
        let j: Joined = self
            .get("joined_rooms", &["joined_rooms"], &[], timeout)
            .await?;
        Ok(j.joined_rooms)
    }

    /// Joins `room` (an id, or a room the bot was invited to); returns its id.
    pub(super) async fn join(&self, room: &str, timeout: Duration) -> Result<String, ApiError> {
        let v: Value = self
            .send_json(
                "join",
                reqwest::Method::POST,
                &["join", room],
                &json!({}),
                timeout,
            )
            .await?;
        Ok(v["room_id"].as_str().unwrap_or(room).to_string())
    }

    /// Event `event` of `room`, as the homeserver keeps it
    /// (`GET /_matrix/client/v3/rooms/{roomId}/event/{eventId}`).
    pub(super) async fn event(
        &self,
        room: &str,
        event: &str,
        timeout: Duration,
    ) -> Result<Value, ApiError> {
        self.get("an event", &["rooms", room, "event", event], &[], timeout)
            .await
    }

    /// Whether `room` is end-to-end encrypted (it has an `m.room.encryption` state event).
    pub(super) async fn is_encrypted(
        &self,
        room: &str,
        timeout: Duration,
    ) -> Result<bool, ApiError> {
        let r: Result<Value, ApiError> = self
            .get(
                "room encryption state",
                &["rooms", room, "state", "m.room.encryption", ""],
                &[],
                timeout,
            )
            .await;
        match r {
            Ok(v) => Ok(v.get("algorithm").is_some()),
            Err(e) if e.errcode() == "M_NOT_FOUND" => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// Sends an event of `kind` with `content` to `room` under transaction id `txn` (the same
    /// id sends nothing new); returns the event's id.
    pub(super) async fn send(
        &self,
        room: &str,
        kind: &str,
        txn: &str,
        content: &Value,
        timeout: Duration,
    ) -> Result<String, ApiError> {
        const WHAT: &str = "send";
        let v: Value = self
            .send_json(
                WHAT,
                reqwest::Method::PUT,
                &["rooms", room, "send", kind, txn],
                content,
                timeout,
            )
            .await?;
        match v["event_id"].as_str() {
            Some(id) if !id.is_empty() => Ok(id.to_string()),
            _ => Err(ApiError::Decode {
                what: WHAT,
                error: "no event_id".into(),
            }),
        }
    }

    /// Creates a direct room with `user` (invited), unencrypted; returns its id.
    pub(super) async fn create_direct(
        &self,
        user: &str,
        timeout: Duration,
    ) -> Result<String, ApiError> {
        const WHAT: &str = "createRoom";
        let body = json!({
            "is_direct": true,
            "invite": [user],
            "preset": "trusted_private_chat",
            "name": "imrelay",
        });
        let v: Value = self
            .send_json(WHAT, reqwest::Method::POST, &["createRoom"], &body, timeout)
            .await?;
        match v["room_id"].as_str() {
            Some(id) if !id.is_empty() => Ok(id.to_string()),
            _ => Err(ApiError::Decode {
                what: WHAT,
                error: "no room_id".into(),
            }),
        }
    }

    /// One `/sync` long poll: what happened since `since` (from now when `None`), waiting up
    /// to `wait` at the homeserver for news.
    pub(super) async fn sync(
        &self,
        since: Option<&str>,
        wait: Duration,
        timeout: Duration,
    ) -> Result<Value, ApiError> {
        let mut query = vec![
            ("filter", SYNC_FILTER.to_string()),
            ("timeout", wait.as_millis().to_string()),
        ];
        if let Some(s) = since {
            query.push(("since", s.to_string()));
        }
        self.get("sync", &["sync"], &query, wait + timeout).await
    }
}

/// What `/sync` sends: the messages and reactions of rooms joined and invitations, nothing
/// else (no presence, typing, receipts or account data).
const SYNC_FILTER: &str = r#"{"presence":{"not_types":["*"]},"account_data":{"not_types":["*"]},"room":{"timeline":{"types":["m.room.message","m.reaction","m.room.encrypted"],"limit":100},"state":{"types":["m.room.encryption"],"lazy_load_members":true},"ephemeral":{"not_types":["*"]},"account_data":{"not_types":["*"]}}}"#;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_deployment_logs_in_as_one_device_of_its_own() {
        let prod = device_id(&[1; 32]);
        assert_eq!(
            prod,
            device_id(&[1; 32]),
            "every start and replica: one device"
        );
        assert_ne!(
            prod,
            device_id(&[2; 32]),
            "another deployment: another device"
        );
        assert!(
            prod.starts_with(DEVICE_ID) && prod.len() == DEVICE_ID.len() + 8,
            "{prod}"
        );
    }

    #[test]
    fn ids_in_paths_are_percent_encoded() {
        let u = endpoint(
            "https://m.example.org/",
            &["rooms", "!abc:example.org", "send", "m.room.message", "t1"],
        )
        .unwrap();
        assert_eq!(
            u.as_str(),
            "https://m.example.org/_matrix/client/v3/rooms/!abc:example.org/send/m.room.message/t1"
        );
        let u = endpoint("https://m.example.org/base", &["join", "#a b:x"]).unwrap();
        assert_eq!(
            u.as_str(),
            "https://m.example.org/base/_matrix/client/v3/join/%23a%20b:x"
        );
    }

    #[test]
    fn failures_are_classified() {
        let status = |status, errcode: &str, retry_after| ApiError::Status {
            method: "PUT",
            what: "send",
            status,
            errcode: errcode.into(),
            message: String::new(),
            retry_after,
        };
        let wait = Some(Duration::from_millis(1500));
        assert_eq!(
            status(429, "M_LIMIT_EXCEEDED", wait).retry(),
            Retry::After(wait)
        );
        assert_eq!(status(502, "", None).retry(), Retry::Transient);
        assert_eq!(status(403, "M_FORBIDDEN", None).retry(), Retry::Permanent);
        let json: Value = serde_json::from_str(SYNC_FILTER).unwrap();
        assert!(json["room"]["timeline"]["types"].is_array());
    }
}
