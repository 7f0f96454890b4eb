//! The small subset of DingTalk's OpenAPI (`api.dingtalk.com`) imrelay uses: the app's
//! access token (`POST /v1.0/oauth2/accessToken`), creating and delivering a card in one
//! call (`POST /v1.0/card/instances/createAndDeliver`) and updating a card's data for
//! everyone who sees it (`PUT /v1.0/card/instances`), and a plain text message from the
//! robot (`POST /v1.0/robot/groupMessages/send`, `POST /v1.0/robot/oToMessages/batchSend`).
//!
//! The token is fetched on demand and cached until five minutes before the `expireIn`
//! DingTalk gave (as the official Python SDK does); callers share one refresh, and a token
//! DingTalk calls invalid (HTTP 401) is dropped and fetched again once. Every failure is
//! classified: throttled (HTTP 429 or a `Throttling`/`QpsLimit` code), transient (the
//! network, HTTP 5xx), refused for good (anything else).

use std::time::Duration;

use reqwest::{Method, StatusCode};
use serde_json::{Map, Value, json};
use tokio::sync::Mutex;
use tokio::time::Instant;

use crate::settings::Secret;

/// How long before its expiry a token is replaced.
pub(crate) const TOKEN_MARGIN: Duration = Duration::from_secs(300);
/// Per-request timeout.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);
/// The header every OpenAPI call carries the token in.
pub const TOKEN_HEADER: &str = "x-acs-dingtalk-access-token";

/// Why an OpenAPI call failed.
#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    /// The request did not complete (connection refused, timeout, reset).
    #[error("cannot reach DingTalk: {0}")]
    Network(String),
    /// DingTalk asked us to slow down.
    #[error("rate limited by DingTalk ({code})")]
    Throttled {
        /// DingTalk's code, or the HTTP status.
        code: String,
    },
    /// DingTalk failed on its side (HTTP 5xx).
    #[error("DingTalk failed (HTTP {status}, {code}): {message}")]
    Unavailable {
        /// HTTP status.
        status: u16,
        /// DingTalk's code.
        code: String,
        /// DingTalk's message.
        message: String,
    },
    /// DingTalk refused the request for good (credentials, permission, a bad target).
    #[error("DingTalk refused the request (HTTP {status}, {code}): {message}")]
    Refused {
        /// HTTP status.
        status: u16,
        /// DingTalk's code.
        code: String,
        /// DingTalk's message.
        message: String,
    },
    /// The answer could not be understood.
    #[error("unexpected answer from DingTalk: {0}")]
    Malformed(String),
}

struct Token {
    value: String,
    refresh_at: Instant,
}

/// The OpenAPI client of one app.
pub struct OpenApi {
    http: reqwest::Client,
    base: String,
    client_id: String,
    client_secret: Secret,
    robot_code: String,
    token: Mutex<Option<Token>>,
}

/// Where a card goes: a group, or a person's chat with the robot.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Space<'a> {
    /// A group conversation, by its openConversationId.
    Group(&'a str),
    /// A person, by userId.
    User(&'a str),
}

impl<'a> Space<'a> {
    /// The space a target names: `user:<userId>` or an openConversationId.
    pub fn of(target: &'a str) -> Self {
        match target.strip_prefix(super::settings::USER_PREFIX) {
            Some(user) => Space::User(user),
            None => Space::Group(target),
        }
    }

    /// The card platform's `openSpaceId`.
    pub fn open_space_id(self) -> String {
        match self {
            Space::Group(cid) => format!("dtv1.card//IM_GROUP.{cid}"),
            Space::User(user) => format!("dtv1.card//IM_ROBOT.{user}"),
        }
    }
}

fn error_of(status: StatusCode, body: &str) -> ApiError {
    let v: Value = serde_json::from_str(body).unwrap_or(Value::Null);
    let code = v["code"].as_str().unwrap_or_default().to_string();
    let message = match v["message"].as_str() {
        Some(m) => crate::interaction::clip(m, 300),
        None => crate::interaction::clip(body.trim(), 200),
    };
    let throttled = ["Throttling", "QpsLimit", "FlowControl"]
        .iter()
        .any(|t| code.contains(t));
    if status == StatusCode::TOO_MANY_REQUESTS || throttled {
        ApiError::Throttled {
            code: if code.is_empty() {
                status.as_u16().to_string()
            } else {
                code
            },
        }
    } else if status.is_server_error() {
        ApiError::Unavailable {
            status: status.as_u16(),
            code,
            message,
        }
    } else {
        ApiError::Refused {
            status: status.as_u16(),
            code,
            message,
        }
    }
}

impl OpenApi {
    /// A client for the app `client_id` at `base`, delivering to groups as `robot_code`.
    pub fn new(
        base: &str,
        client_id: &str,
        client_secret: Secret,
        robot_code: &str,
    ) -> Result<Self, ApiError> {
        let http = reqwest::Client::builder()
            .timeout(REQUEST_TIMEOUT)
            .user_agent(format!("imrelay/{}", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| ApiError::Network(e.to_string()))?;
        Ok(Self {
            http,
            base: base.trim_end_matches('/').to_string(),
            client_id: client_id.to_string(),
            client_secret,
            robot_code: robot_code.to_string(),
            token: Mutex::new(None),
        })
    }

    async fn send(
        &self,
        method: Method,
        path: &str,
        token: Option<&str>,
        body: &Value,
    ) -> Result<Value, ApiError> {
        let mut req = self
            .http
            .request(method, format!("{}{path}", self.base))
            .header(reqwest::header::ACCEPT, "application/json")
            .json(body);
        if let Some(t) = token {
            req = req.header(TOKEN_HEADER, t);
        }
        let resp = req
            .send()
            .await
            .map_err(|e| ApiError::Network(e.without_url().to_string()))?;
        let status = resp.status();
        let text = resp
            .text()
            .await
            .map_err(|e| ApiError::Network(e.without_url().to_string()))?;
        if !status.is_success() {
            return Err(error_of(status, &text));
        }
        serde_json::from_str(&text).map_err(|e| ApiError::Malformed(e.to_string()))
    }

    /// The app's access token, fetched when none is cached or it is about to expire.
    pub async fn access_token(&self) -> Result<String, ApiError> {
        let mut cached = self.token.lock().await;
        if let Some(t) = cached.as_ref()
            && Instant::now() < t.refresh_at
        {
            return Ok(t.value.clone());
        }
        let body = json!({"appKey": self.client_id, "appSecret": self.client_secret.expose()});
        let v = self
            .send(Method::POST, "/v1.0/oauth2/accessToken", None, &body)
            .await?;
        let value = v["accessToken"]
            .as_str()
            .filter(|t| !t.is_empty())
            .ok_or_else(|| ApiError::Malformed("no accessToken".into()))?
            .to_string();
        let expire = Duration::from_secs(v["expireIn"].as_u64().unwrap_or(7200));
        *cached = Some(Token {
            value: value.clone(),
            refresh_at: Instant::now() + expire.saturating_sub(TOKEN_MARGIN),
        });
        Ok(value)
    }

    /// Calls `path` with the token; a token DingTalk refuses (HTTP 401) is fetched again
    /// and the call tried once more.
    async fn call(&self, method: Method, path: &str, body: &Value) -> Result<Value, ApiError> {
        let token = self.access_token().await?;
        match self.send(method.clone(), path, Some(&token), body).await {
            Err(ApiError::Refused { status: 401, .. }) => {
                *self.token.lock().await = None;
                let token = self.access_token().await?;
                self.send(method, path, Some(&token), body).await
            }
            other => other,
        }
    }

    /// Creates card `out_track_id` from `template` with `params` and delivers it to
    /// `space`; clicks come back over the Stream connection.
    pub async fn create_and_deliver(
        &self,
        template: &str,
        out_track_id: &str,
        params: &Map<String, Value>,
        space: Space<'_>,
    ) -> Result<(), ApiError> {
        let mut body = json!({
            "cardTemplateId": template,
            "outTrackId": out_track_id,
            "callbackType": "STREAM",
            "cardData": {"cardParamMap": params},
            "openSpaceId": space.open_space_id(),
            "userIdType": 1,
        });
        match space {
            Space::Group(_) => {
                body["imGroupOpenSpaceModel"] = json!({"supportForward": false});
                body["imGroupOpenDeliverModel"] = json!({"robotCode": self.robot_code});
            }
            Space::User(_) => {
                body["imRobotOpenSpaceModel"] = json!({"supportForward": false});
                body["imRobotOpenDeliverModel"] =
                    json!({"spaceType": "IM_ROBOT", "robotCode": self.robot_code});
            }
        }
        let v = self
            .call(Method::POST, "/v1.0/card/instances/createAndDeliver", &body)
            .await?;
        // Delivery is reported per space: a refusal there is a refusal.
        let refused = v["result"]["deliverResults"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|r| r["success"] == Value::Bool(false));
        if let Some(r) = refused {
            return Err(ApiError::Refused {
                status: 200,
                code: "deliverResults".into(),
                message: crate::interaction::clip(r["errorMsg"].as_str().unwrap_or("?"), 300),
            });
        }
        Ok(())
    }

    /// Replaces the named `params` of card `out_track_id` for everyone who sees it.
    pub async fn update_card(
        &self,
        out_track_id: &str,
        params: &Map<String, Value>,
    ) -> Result<(), ApiError> {
        let body = json!({
            "outTrackId": out_track_id,
            "cardData": {"cardParamMap": params},
            "cardUpdateOptions": {"updateCardDataByKey": true},
            "userIdType": 1,
        });
        self.call(Method::PUT, "/v1.0/card/instances", &body)
            .await
            .map(|_| ())
    }
}

impl OpenApi {
    /// Sends `text` from the robot to `space`, as a plain text message.
    pub async fn send_text(&self, space: Space<'_>, text: &str) -> Result<(), ApiError> {
        let param = json!({ "content": text }).to_string();
        let (path, body) = match space {
            Space::Group(cid) => (
                "/v1.0/robot/groupMessages/send",
                json!({"robotCode": self.robot_code, "openConversationId": cid,
                    "msgKey": "sampleText", "msgParam": param}),
            ),
            Space::User(user) => (
                "/v1.0/robot/oToMessages/batchSend",
                json!({"robotCode": self.robot_code, "userIds": [user],
                    "msgKey": "sampleText", "msgParam": param}),
            ),
        };
        self.call(Method::POST, path, &body).await.map(|_| ())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failures_are_classified() {
        let e = error_of(
            StatusCode::FORBIDDEN,
            r#"{"code":"Forbidden.AccessDenied.QpsLimitForAppkeyAndApi","message":"qps"}"#,
        );
        assert!(matches!(e, ApiError::Throttled { .. }), "{e}");
        let e = error_of(StatusCode::TOO_MANY_REQUESTS, "");
        assert!(matches!(e, ApiError::Throttled { .. }), "{e}");
        let e = error_of(StatusCode::BAD_GATEWAY, "down");
        assert!(matches!(e, ApiError::Unavailable { .. }), "{e}");
        let e = error_of(
            StatusCode::BAD_REQUEST,
            r#"{"code":"param.error","message":"openSpaceId"}"#,
        );
        assert!(
            matches!(&e, ApiError::Refused { code, .. } if code == "param.error"),
            "{e}"
        );
    }

    #[test]
    fn spaces_are_named_as_the_card_platform_does() {
        assert_eq!(
            Space::of("cid123").open_space_id(),
            "dtv1.card//IM_GROUP.cid123"
        );
        assert_eq!(
            Space::of("user:manager1").open_space_id(),
            "dtv1.card//IM_ROBOT.manager1"
        );
    }
}
