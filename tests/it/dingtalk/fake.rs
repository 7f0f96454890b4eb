//! A fake DingTalk: the Stream gateway (`POST /v1.0/gateway/connections/open`: credentials
//! checked, one-time tickets issued, the subscriptions recorded), a WebSocket server that
//! sends the frames a test pushes (`SYSTEM` ping and disconnect, `CALLBACK`s) and records
//! every acknowledgement, as the official SDKs exchange them, and the OpenAPI the channel
//! calls: the access token (`POST /v1.0/oauth2/accessToken`), cards created and delivered
//! (`POST /v1.0/card/instances/createAndDeliver`) and updated (`PUT /v1.0/card/instances`),
//! each checked for the token header and kept as the card's current variables.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use axum::Json;
use axum::Router;
use axum::extract::State;
use axum::http::HeaderMap;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{post, put};
use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio::sync::mpsc;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::handshake::server::{
    ErrorResponse, Request, Response as WsResponse,
};

pub(crate) const CLIENT_ID: &str = "dingtestappkey";
pub(crate) const CLIENT_SECRET: &str = "dingtest-app-secret";
/// The access token the fake hands out.
pub(crate) const ACCESS_TOKEN: &str = "dt-access-token-1";
/// The card template the tests configure.
pub(crate) const TEMPLATE: &str = "imrelay-test-template.schema";

/// One card as the fake holds it.
#[derive(Clone, Debug)]
pub(crate) struct Card {
    /// Its outTrackId.
    pub id: String,
    /// `dtv1.card//IM_GROUP.<cid>` or `dtv1.card//IM_ROBOT.<userId>`.
    pub space: String,
    /// The template it was created from.
    pub template: String,
    /// Its variables now.
    pub params: serde_json::Map<String, Value>,
    /// How many times it was updated.
    pub updates: usize,
}

enum Cmd {
    Text(String),
    Drop,
}

#[derive(Default)]
pub(crate) struct FakeState {
    ws_url: Mutex<String>,
    tickets: Mutex<HashSet<String>>,
    next_ticket: AtomicU64,
    next_conn: AtomicUsize,
    /// Gateway requests as received.
    pub opens: Mutex<Vec<Value>>,
    open: Mutex<HashMap<usize, mpsc::UnboundedSender<Cmd>>>,
    /// Every connection opened, and every one closed, in order.
    pub log: Mutex<Vec<(String, usize)>>,
    /// Acknowledgements received: (connection, the ack JSON).
    pub acks: Mutex<Vec<(usize, Value)>>,
    /// Cards, in the order they were created.
    pub cards: Mutex<Vec<Card>>,
    /// OpenAPI requests: (path, body).
    pub calls: Mutex<Vec<(String, Value)>>,
    /// createAndDeliver requests still to be answered with HTTP 429.
    pub throttle_next: AtomicUsize,
}

impl FakeState {
    pub(crate) fn open_conns(&self) -> Vec<usize> {
        let mut v: Vec<usize> = self.open.lock().unwrap().keys().copied().collect();
        v.sort_unstable();
        v
    }

    fn send(&self, conn: usize, cmd: Cmd) {
        let tx = self.open.lock().unwrap().get(&conn).cloned();
        tx.unwrap_or_else(|| panic!("connection {conn} is not open"))
            .send(cmd)
            .unwrap();
    }

    /// Sends a frame of `kind` on `topic` with message id `id` and `data` (sent as a string).
    pub(crate) fn push(&self, conn: usize, kind: &str, topic: &str, id: &str, data: &Value) {
        let frame = json!({"specVersion": "1.0", "type": kind,
            "headers": {"appId": "app-1", "connectionId": "c-1", "contentType": "application/json",
                        "messageId": id, "time": "1700000000000", "topic": topic},
            "data": data.to_string()});
        self.send(conn, Cmd::Text(frame.to_string()));
    }

    pub(crate) fn drop_conn(&self, conn: usize) {
        self.send(conn, Cmd::Drop);
    }

    /// The cards whose token names interaction `id`.
    pub(crate) fn cards_of(&self, id: &str) -> Vec<Card> {
        self.cards
            .lock()
            .unwrap()
            .iter()
            .filter(|c| {
                c.params["token"]
                    .as_str()
                    .is_some_and(|t| t.splitn(3, '.').nth(2) == Some(id))
            })
            .cloned()
            .collect()
    }

    /// OpenAPI requests to `path`.
    pub(crate) fn calls_to(&self, path: &str) -> Vec<Value> {
        self.calls
            .lock()
            .unwrap()
            .iter()
            .filter(|(p, _)| p == path)
            .map(|(_, b)| b.clone())
            .collect()
    }

    /// Acknowledgements naming message `id`.
    pub(crate) fn acks_of(&self, id: &str) -> Vec<(usize, Value)> {
        self.acks
            .lock()
            .unwrap()
            .iter()
            .filter(|(_, a)| a["headers"]["messageId"] == id)
            .cloned()
            .collect()
    }
}

pub(crate) struct FakeDingTalk {
    pub api: String,
    pub state: Arc<FakeState>,
}

async fn open(State(state): State<Arc<FakeState>>, Json(body): Json<Value>) -> Response {
    state.opens.lock().unwrap().push(body.clone());
    if body["clientId"] != CLIENT_ID || body["clientSecret"] != CLIENT_SECRET {
        return (
            StatusCode::UNAUTHORIZED,
            Json(json!({"code": "InvalidAuthentication", "requestid": "r-1", "message": "clientId or clientSecret is invalid"})),
        )
            .into_response();
    }
    let n = state.next_ticket.fetch_add(1, Ordering::SeqCst);
    // Tickets carry characters that must be escaped in a query.
    let ticket = format!("tk+{n}/=");
    state.tickets.lock().unwrap().insert(ticket.clone());
    Json(json!({"endpoint": state.ws_url.lock().unwrap().clone(), "ticket": ticket}))
        .into_response()
}

async fn access_token(State(state): State<Arc<FakeState>>, Json(body): Json<Value>) -> Response {
    state
        .calls
        .lock()
        .unwrap()
        .push(("accessToken".into(), body.clone()));
    if body["appKey"] != CLIENT_ID || body["appSecret"] != CLIENT_SECRET {
        return (
            StatusCode::BAD_REQUEST,
            Json(json!({"code": "invalidClientIdOrSecret", "requestid": "r-2", "message": "无效的clientId或者clientSecret"})),
        )
            .into_response();
    }
    Json(json!({"accessToken": ACCESS_TOKEN, "expireIn": 7200})).into_response()
}

fn authorized(headers: &HeaderMap) -> bool {
    headers
        .get("x-acs-dingtalk-access-token")
        .is_some_and(|v| v == ACCESS_TOKEN)
}

fn unauthorized() -> Response {
    (
        StatusCode::UNAUTHORIZED,
        Json(json!({"code": "InvalidAuthentication", "message": "不合法的access_token"})),
    )
        .into_response()
}

async fn create_and_deliver(
    State(state): State<Arc<FakeState>>,
    headers: HeaderMap,
    Json(body): Json<Value>,
) -> Response {
    state
        .calls
        .lock()
        .unwrap()
        .push(("createAndDeliver".into(), body.clone()));
    if !authorized(&headers) {
        return unauthorized();
    }
    let throttled = state
        .throttle_next
        .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
        .is_ok();
    if throttled {
        return (
            StatusCode::TOO_MANY_REQUESTS,
            Json(json!({"code": "Throttling.Api", "message": "too many requests"})),
        )
            .into_response();
    }
    let params = body["cardData"]["cardParamMap"]
        .as_object()
        .cloned()
        .unwrap_or_default();
    let id = body["outTrackId"].as_str().unwrap_or_default().to_string();
    let space = body["openSpaceId"].as_str().unwrap_or_default().to_string();
    assert!(
        params.values().all(Value::is_string),
        "cardParamMap values are strings: {params:?}"
    );
    assert_eq!(body["callbackType"], "STREAM");
    let mut cards = state.cards.lock().unwrap();
    if cards.iter().any(|c| c.id == id) {
        return (
            StatusCode::BAD_REQUEST,
            Json(json!({"code": "param.outTrackIdExist", "message": "outTrackId already exists"})),
        )
            .into_response();
    }
    cards.push(Card {
        id: id.clone(),
        space: space.clone(),
        template: body["cardTemplateId"]
            .as_str()
            .unwrap_or_default()
            .to_string(),
        params,
        updates: 0,
    });
    let (kind, space_id) = space
        .trim_start_matches("dtv1.card//")
        .split_once('.')
        .unwrap_or_default();
    // A group the robot is not in: created, but not delivered there.
    let delivered = !space_id.contains("NotMember");
    let result = if delivered {
        json!({"spaceType": kind, "spaceId": space_id, "success": true, "carrierId": "c1"})
    } else {
        json!({"spaceType": kind, "spaceId": space_id, "success": false, "errorMsg": "robot is not in the group"})
    };
    Json(json!({"success": true, "result": {"outTrackId": id, "deliverResults": [result]}}))
        .into_response()
}

async fn update_card(
    State(state): State<Arc<FakeState>>,
    headers: HeaderMap,
    Json(body): Json<Value>,
) -> Response {
    state
        .calls
        .lock()
        .unwrap()
        .push(("update".into(), body.clone()));
    if !authorized(&headers) {
        return unauthorized();
    }
    let id = body["outTrackId"].as_str().unwrap_or_default();
    let mut cards = state.cards.lock().unwrap();
    let Some(card) = cards.iter_mut().find(|c| c.id == id) else {
        return (
            StatusCode::BAD_REQUEST,
            Json(json!({"code": "param.cardNotExist", "message": "card not found"})),
        )
            .into_response();
    };
    for (k, v) in body["cardData"]["cardParamMap"]
        .as_object()
        .cloned()
        .unwrap_or_default()
    {
        card.params.insert(k, v);
    }
    card.updates += 1;
    Json(json!({"success": true, "result": true})).into_response()
}

async fn robot_message(
    State(state): State<Arc<FakeState>>,
    axum::extract::Path(kind): axum::extract::Path<String>,
    headers: HeaderMap,
    Json(body): Json<Value>,
) -> Response {
    state.calls.lock().unwrap().push((kind, body));
    if !authorized(&headers) {
        return unauthorized();
    }
    Json(json!({"processQueryKey": "pqk-1"})).into_response()
}

// The handshake callback's error type is fixed by tungstenite.
#[allow(clippy::result_large_err)]
async fn serve_ws(listener: tokio::net::TcpListener, state: Arc<FakeState>) {
    loop {
        let Ok((tcp, _)) = listener.accept().await else {
            return;
        };
        let state = state.clone();
        tokio::spawn(async move {
            let check = |req: &Request, resp: WsResponse| -> Result<WsResponse, ErrorResponse> {
                let ticket =
                    url::form_urlencoded::parse(req.uri().query().unwrap_or_default().as_bytes())
                        .find(|(k, _)| k == "ticket")
                        .map(|(_, v)| v.into_owned())
                        .unwrap_or_default();
                if state.tickets.lock().unwrap().remove(&ticket) {
                    Ok(resp)
                } else {
                    Err(axum::http::Response::builder()
                        .status(401)
                        .body(None)
                        .unwrap())
                }
            };
            let Ok(ws) = tokio_tungstenite::accept_hdr_async(tcp, check).await else {
                return;
            };
            let conn = state.next_conn.fetch_add(1, Ordering::SeqCst);
            let (tx, mut rx) = mpsc::unbounded_channel();
            state.open.lock().unwrap().insert(conn, tx);
            state.log.lock().unwrap().push(("open".into(), conn));
            let (mut sink, mut stream) = ws.split();
            loop {
                tokio::select! {
                    cmd = rx.recv() => match cmd {
                        Some(Cmd::Text(t)) => { let _ = sink.send(Message::Text(t.into())).await; }
                        Some(Cmd::Drop) | None => break,
                    },
                    msg = stream.next() => match msg {
                        Some(Ok(Message::Text(t))) => {
                            let v: Value = serde_json::from_str(t.as_str()).expect("acks are JSON");
                            state.acks.lock().unwrap().push((conn, v));
                        }
                        Some(Ok(Message::Close(_))) | None | Some(Err(_)) => break,
                        Some(Ok(_)) => {}
                    },
                }
            }
            state.open.lock().unwrap().remove(&conn);
            state.log.lock().unwrap().push(("closed".into(), conn));
        });
    }
}

impl FakeDingTalk {
    pub(crate) async fn start() -> Self {
        let state = Arc::new(FakeState::default());
        let ws = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        *state.ws_url.lock().unwrap() = format!("ws://{}/connect", ws.local_addr().unwrap());
        tokio::spawn(serve_ws(ws, state.clone()));
        let app = Router::new()
            .route("/v1.0/gateway/connections/open", post(open))
            .route("/v1.0/oauth2/accessToken", post(access_token))
            .route(
                "/v1.0/card/instances/createAndDeliver",
                post(create_and_deliver),
            )
            .route("/v1.0/card/instances", put(update_card))
            .route("/v1.0/robot/{kind}/send", post(robot_message))
            .route("/v1.0/robot/{kind}/batchSend", post(robot_message))
            .with_state(state.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let api = format!("http://{}", listener.local_addr().unwrap());
        tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        FakeDingTalk { api, state }
    }
}

/// A text message to the robot, as the bot message topic carries it (`conversationType` "2"
/// in a group, "1" in a person's chat with the robot).
pub(crate) fn bot_message(conversation: &str, group: bool, sender: &str, text: &str) -> Value {
    json!({
        "conversationId": conversation, "conversationType": if group { "2" } else { "1" },
        "chatbotCorpId": "dingcorp1", "chatbotUserId": "$:LWCP_v1:$robot", "msgId": "msg0001",
        "senderNick": "Ann", "isAdmin": false, "senderStaffId": sender,
        "sessionWebhookExpiredTime": 1_700_000_000_000u64, "createAt": 1_700_000_000_000u64,
        "senderCorpId": "dingcorp1", "senderId": "$:LWCP_v1:$sender", "robotCode": CLIENT_ID,
        "sessionWebhook": "https://oapi.dingtalk.com/robot/sendBySession?session=s1",
        "msgtype": "text", "text": {"content": text},
    })
}

/// A text message to the robot that quotes (引用) card `card`, as DingTalk delivers one:
/// `text.isReplyMsg` and `text.repliedMsg` `{msgType: "interactiveCard", msgId, senderId,
/// content: {cardData: {cardParamMap}}}` beside the usual fields. DingTalk documents none of
/// these; the official SDKs keep the message's `text` keys beyond `content` as they come
/// (python `chatbot.py`: `TextContent.extensions`). The shape is the one DingTalk connectors
/// read: `isReplyMsg` / `repliedMsg {msgType, content, msgId, senderId}`
/// (DingTalk-Real-AI/dingtalk-openclaw-connector `src/core/message-handler.ts`), a quoted
/// card's `content.cardData.cardParamMap`, an object or JSON text (chenhg5/cc-connect
/// `platform/dingtalk`, PR #1121).
pub(crate) fn quoting_message(
    conversation: &str,
    sender: &str,
    msg_id: &str,
    text: &str,
    card: &Card,
) -> Value {
    let mut m = bot_message(conversation, true, sender, text);
    m["msgId"] = json!(msg_id);
    m["text"]["isReplyMsg"] = json!(true);
    m["text"]["repliedMsg"] = json!({
        "msgType": "interactiveCard", "msgId": "msgQuotedCard0001==",
        "senderId": "$:LWCP_v1:$robot", "createdAt": 1_700_000_000_000u64,
        "content": {"cardData": {"cardParamMap": card.params}},
    });
    m
}

/// A card click's callback data, as the card callback topic carries it.
pub(crate) fn card_click(out_track_id: &str, user_id: &str, action: &str, token: &str) -> Value {
    card_action(out_track_id, user_id, action, json!({"token": token}))
}

/// A card click with the action's parameters `params`.
pub(crate) fn card_action(out_track_id: &str, user_id: &str, action: &str, params: Value) -> Value {
    json!({
        "extension": "{}", "corpId": "dingcorp1", "type": "actionCallback", "userId": user_id,
        "outTrackId": out_track_id, "spaceType": "IM_GROUP", "spaceId": "cidGroup1", "userIdType": 1,
        "content": json!({"cardPrivateData": {"actionIds": [action], "params": params}}).to_string(),
    })
}
