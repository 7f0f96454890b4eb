//! The callback URL (`wecom.transport = "callback"`): WeCom sends the bot's callbacks to
//! `server.public_url + wecom.inbound_path`, encrypted with the EncodingAESKey and signed
//! with the Token ([`super::crypto`]).
//!
//! - `GET ?msg_signature&timestamp&nonce&echostr`: the URL check when the callback is saved in
//!   WeCom's console; the decrypted `echostr` is the answer.
//! - `POST ?msg_signature&timestamp&nonce` with `{"encrypt": ...}`: a callback. Its signature is
//!   checked (SHA-1, constant time) and its timestamp must be within five minutes before it is
//!   decrypted; the answer is the reply, encrypted and signed the same way
//!   (`{"encrypt", "msgsignature", "timestamp", "nonce"}`): a click's card update, a typed
//!   answer's acknowledgement, or, to a message, the card of the oldest interaction waiting
//!   for that chat: in this mode WeCom lets a bot send only in reply.

use std::sync::Arc;

use axum::Router;
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use serde::Deserialize;
use serde_json::{Value, json};

use super::CHANNEL;
use super::button::Keys;
use super::crypto::MsgCrypt;
use super::inbound::{Inbound, Reply};
use super::render::Cards;
use super::settings::WeComSettings;
use crate::interaction::{Registry, Via};
use crate::store::{ChannelMessage, Store};
use crate::wire::error::ApiError;
use crate::wire::extract::{ApiBytes, ApiQuery};

/// How far a callback's timestamp may be from now, seconds.
pub const MAX_SKEW_SECS: u64 = 300;

/// The signed query of every callback.
#[derive(Debug, Deserialize)]
pub struct Signed {
    /// The SHA-1 signature.
    pub msg_signature: String,
    /// Seconds since the epoch, as WeCom sent it.
    pub timestamp: String,
    /// WeCom's nonce.
    pub nonce: String,
    /// The URL check's encrypted challenge.
    #[serde(default)]
    pub echostr: Option<String>,
}

/// The endpoint's state.
pub struct Endpoint {
    inbound: Arc<Inbound>,
    crypt: MsgCrypt,
    registry: Registry,
    store: Arc<dyn Store>,
    cards: Cards,
    chats: Vec<String>,
    path: String,
}

impl Endpoint {
    /// The endpoint for `settings`, handing callbacks to `inbound`.
    pub(crate) fn new(
        inbound: Arc<Inbound>,
        settings: &WeComSettings,
        registry: Registry,
        store: Arc<dyn Store>,
        cards: Cards,
    ) -> anyhow::Result<Self> {
        // An intelligent bot's callbacks name no receiver (the ReceiveId is empty).
        let crypt = MsgCrypt::new(settings.token.clone(), &settings.encoding_aes_key, "")
            .map_err(|e| anyhow::anyhow!("wecom.encoding_aes_key: {e}"))?;
        Ok(Self {
            inbound,
            crypt,
            registry,
            store,
            cards,
            chats: settings.chats.clone(),
            path: settings.callback_path.clone(),
        })
    }

    async fn refuse(&self, reason: &str) -> ApiError {
        match self
            .registry
            .refused(None, "unknown", &Via::new(CHANNEL), reason)
            .await
        {
            Ok(()) => ApiError::unauthorized(format!("wecom callback refused: {reason}")),
            Err(e) => e.into(),
        }
    }

    /// Checks the signature and the timestamp of `encrypted`, then decrypts it.
    async fn open(&self, q: &Signed, encrypted: &str) -> Result<Vec<u8>, ApiError> {
        let sent: i64 = q
            .timestamp
            .trim()
            .parse()
            .map_err(|_| ApiError::bad_request("timestamp is not a number"))?;
        let plain = match self
            .crypt
            .open(&q.msg_signature, &q.timestamp, &q.nonce, encrypted)
        {
            Ok(p) => p,
            Err(e) => return Err(self.refuse(&e.to_string()).await),
        };
        if jiff::Timestamp::now().as_second().abs_diff(sent) > MAX_SKEW_SECS {
            return Err(self
                .refuse("the callback's timestamp is more than 5 minutes from now: a replay or a wrong clock")
                .await);
        }
        Ok(plain)
    }

    async fn verify_url(&self, q: Signed) -> Result<Response, ApiError> {
        let echostr = q
            .echostr
            .clone()
            .ok_or_else(|| ApiError::bad_request("echostr is missing"))?;
        let plain = self.open(&q, &echostr).await?;
        tracing::info!("wecom: answered the callback URL check");
        Ok(String::from_utf8_lossy(&plain).into_owned().into_response())
    }

    async fn callback(&self, q: Signed, body: &[u8]) -> Result<Response, ApiError> {
        let outer: Value = serde_json::from_slice(body)
            .map_err(|e| ApiError::bad_request(format!("malformed JSON: {e}")))?;
        let encrypted = outer["encrypt"]
            .as_str()
            .ok_or_else(|| ApiError::bad_request("expected {\"encrypt\": ...}"))?;
        let plain = self.open(&q, encrypted).await?;
        let callback: Value = serde_json::from_slice(&plain).map_err(|e| {
            ApiError::bad_request(format!("the decrypted callback is not JSON: {e}"))
        })?;
        let msgid = callback["msgid"].as_str().unwrap_or_default().to_string();
        let reply = match self.inbound.handle(&msgid, &callback).await {
            Reply::None => return Ok(axum::http::StatusCode::OK.into_response()),
            Reply::Update { card, userids } => {
                let mut r = json!({"response_type": "update_template_card", "template_card": card});
                if !userids.is_empty() {
                    r["userids"] = json!(userids);
                }
                r
            }
            Reply::Respond(text) => self.waiting_card(&callback).await.unwrap_or(text),
        };
        let (encrypt, signature) =
            self.crypt
                .seal(reply.to_string().as_bytes(), &q.timestamp, &q.nonce);
        Ok(
            axum::Json(json!({"encrypt": encrypt, "msgsignature": signature,
            "timestamp": q.timestamp.trim(), "nonce": q.nonce}))
            .into_response(),
        )
    }

    /// The card of the oldest interaction waiting for the chat a plain message came from (a
    /// typed command gets its own acknowledgement), recorded as that chat's copy.
    async fn waiting_card(&self, callback: &Value) -> Option<Value> {
        let text = callback["text"]["content"].as_str().unwrap_or_default();
        if text
            .split_whitespace()
            .any(|w| matches!(w, "deny" | "拒绝" | "answer" | "回答"))
        {
            return None;
        }
        let chat = callback["chatid"]
            .as_str()
            .or_else(|| callback["from"]["userid"].as_str())?
            .to_string();
        let pending = self.store.pending().await.ok()?;
        let i = pending
            .iter()
            .filter(|i| crate::channels::plan::goes_to(i, CHANNEL, &self.chats, &chat))
            .min_by_key(|i| i.created_at)?;
        let copy = ChannelMessage {
            channel: CHANNEL.into(),
            address: chat.clone(),
            message_ref: Keys::task_id(i, &chat),
            interaction_id: i.id.clone(),
            state: None,
            created_at: jiff::Timestamp::now(),
        };
        if let Err(e) = self.store.record_message(copy).await {
            tracing::warn!(error = %e, "wecom: cannot record a card sent in reply");
        }
        Some(json!({"msgtype": "template_card", "template_card": self.cards.card(i, &chat)}))
    }
}

/// The router serving `wecom.inbound_path`.
pub(crate) fn router(endpoint: Arc<Endpoint>) -> Router {
    let path = endpoint.path.clone();
    Router::new()
        .route(&path, get(url_check).post(post_callback))
        .with_state(endpoint)
}

async fn url_check(State(e): State<Arc<Endpoint>>, ApiQuery(q): ApiQuery<Signed>) -> Response {
    match e.verify_url(q).await {
        Ok(r) => r,
        Err(err) => err.into_response(),
    }
}

async fn post_callback(
    State(e): State<Arc<Endpoint>>,
    ApiQuery(q): ApiQuery<Signed>,
    ApiBytes(body): ApiBytes,
) -> Response {
    match e.callback(q, &body).await {
        Ok(r) => r,
        Err(err) => err.into_response(),
    }
}
