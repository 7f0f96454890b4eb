//! A fake long-connection platform: the endpoint request (mounted on the fake OpenAPI server)
//! and a WebSocket server speaking the protobuf frame format. Tests push frames to the
//! connected client, read what it sends, drop the connection, or refuse the next handshake.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Json;
use axum::Router;
use axum::http::HeaderMap;
use axum::routing::post;
use futures_util::{SinkExt, StreamExt};
use imrelay::channels::feishu::frame::{Frame, Header, METHOD_CONTROL, METHOD_DATA};
use serde_json::{Value, json};
use tokio::sync::mpsc;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::handshake::server::{ErrorResponse, Request, Response};

use super::fake::{APP_ID, APP_SECRET, FakeFeishu, FakeState};

pub(crate) const SERVICE: i32 = 33554678;

enum Cmd {
    Send(Vec<u8>),
    Drop,
}

#[derive(Default)]
pub(crate) struct WsState {
    /// Handshakes completed.
    pub connections: AtomicUsize,
    /// When each handshake completed.
    pub connected_at: Mutex<Vec<Instant>>,
    /// Every connection is dropped as soon as its handshake completes.
    pub drop_on_accept: AtomicBool,
    /// The next TCP connection is accepted and then left without an answer.
    pub stall_next: AtomicBool,
    /// Endpoint requests (with the body and `locale` header seen).
    pub endpoint_requests: Mutex<Vec<(Value, String)>>,
    /// Frames received from the client, in order.
    pub received: Mutex<Vec<Frame>>,
    /// The next handshake is refused with (status, Handshake-Msg).
    pub refuse_next: Mutex<Option<(u16, String)>>,
    /// A config to carry in the next pong.
    pub pong_config: Mutex<Option<Value>>,
    /// The config handed out with the endpoint.
    pub endpoint_config: Mutex<Value>,
    to_client: Mutex<Option<mpsc::UnboundedSender<Cmd>>>,
}

impl WsState {
    pub(crate) fn received(&self) -> Vec<Frame> {
        self.received.lock().unwrap().clone()
    }

    pub(crate) fn pings(&self) -> usize {
        self.received()
            .iter()
            .filter(|f| f.method == METHOD_CONTROL && f.header("type") == Some("ping"))
            .count()
    }

    /// Acks (data frames from the client) for `message_id`.
    pub(crate) fn acks(&self, message_id: &str) -> Vec<Frame> {
        self.received()
            .into_iter()
            .filter(|f| f.method == METHOD_DATA && f.header("message_id") == Some(message_id))
            .collect()
    }

    pub(crate) fn send(&self, frame: &Frame) {
        let tx = self.to_client.lock().unwrap().clone();
        tx.expect("a connected client")
            .send(Cmd::Send(frame.to_bytes()))
            .unwrap();
    }

    /// Drops the TCP connection without a close frame.
    pub(crate) fn drop_connection(&self) {
        if let Some(tx) = self.to_client.lock().unwrap().take() {
            let _ = tx.send(Cmd::Drop);
        }
    }
}

pub(crate) struct FakePlatform {
    pub openapi: FakeFeishu,
    pub ws: Arc<WsState>,
}

/// A data frame delivering `payload` as part `seq` of `sum`.
pub(crate) fn data_frame(message_id: &str, sum: usize, seq: usize, payload: &[u8]) -> Frame {
    let headers = [
        ("type", "event".to_string()),
        ("message_id", message_id.to_string()),
        ("sum", sum.to_string()),
        ("seq", seq.to_string()),
        ("trace_id", format!("trace-{message_id}")),
    ];
    Frame {
        seq_id: 1,
        log_id: 42,
        service: SERVICE,
        method: METHOD_DATA,
        headers: headers
            .into_iter()
            .map(|(k, v)| Header {
                key: k.into(),
                value: v,
            })
            .collect(),
        payload: Some(payload.to_vec()),
        ..Frame::default()
    }
}

// The handshake callback's error type is fixed by tungstenite.
#[allow(clippy::result_large_err)]
async fn serve_ws(listener: tokio::net::TcpListener, state: Arc<WsState>) {
    loop {
        let Ok((tcp, _)) = listener.accept().await else {
            return;
        };
        let state = state.clone();
        tokio::spawn(async move {
            if state.stall_next.swap(false, Ordering::SeqCst) {
                // Hold the socket open, say nothing.
                tokio::time::sleep(Duration::from_secs(30)).await;
                drop(tcp);
                return;
            }
            let refuse = state.refuse_next.lock().unwrap().take();
            let callback =
                move |_req: &Request, resp: Response| -> Result<Response, ErrorResponse> {
                    match refuse {
                        Some((status, msg)) => Err(axum::http::Response::builder()
                            .status(status)
                            .header("handshake-status", status.to_string())
                            .header("handshake-msg", msg)
                            .body(None)
                            .unwrap()),
                        None => Ok(resp),
                    }
                };
            let Ok(ws) = tokio_tungstenite::accept_hdr_async(tcp, callback).await else {
                return;
            };
            state.connections.fetch_add(1, Ordering::SeqCst);
            state.connected_at.lock().unwrap().push(Instant::now());
            if state.drop_on_accept.load(Ordering::SeqCst) {
                return;
            }
            let (tx, mut rx) = mpsc::unbounded_channel();
            *state.to_client.lock().unwrap() = Some(tx);
            let (mut sink, mut stream) = ws.split();
            loop {
                tokio::select! {
                    cmd = rx.recv() => match cmd {
                        Some(Cmd::Send(bytes)) => { let _ = sink.send(Message::Binary(bytes.into())).await; }
                        Some(Cmd::Drop) | None => return, // dropping the stream closes the socket
                    },
                    msg = stream.next() => match msg {
                        Some(Ok(Message::Binary(b))) => {
                            let frame = Frame::from_bytes(&b).expect("the client sends valid frames");
                            let is_ping = frame.method == METHOD_CONTROL && frame.header("type") == Some("ping");
                            state.received.lock().unwrap().push(frame.clone());
                            if is_ping {
                                let mut pong = Frame::ping(frame.service);
                                pong.set_header("type", "pong");
                                if let Some(c) = state.pong_config.lock().unwrap().take() {
                                    pong.payload = Some(c.to_string().into_bytes());
                                }
                                let _ = sink.send(Message::Binary(pong.to_bytes().into())).await;
                            }
                        }
                        Some(Ok(_)) => {}
                        _ => return,
                    },
                }
            }
        });
    }
}

impl FakePlatform {
    pub(crate) async fn start() -> Self {
        let ws = Arc::new(WsState::default());
        *ws.endpoint_config.lock().unwrap() = json!({"ReconnectCount": -1, "ReconnectInterval": 1, "ReconnectNonce": 0, "PingInterval": 1});
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let ws_url = format!(
            "ws://{}/ws/v2?fpid=493&aid=552564&device_id=dev-1&access_key=k&service_id={SERVICE}&ticket=t",
            listener.local_addr().unwrap()
        );
        tokio::spawn(serve_ws(listener, ws.clone()));
        let endpoint_state = ws.clone();
        let openapi = FakeFeishu::start_with(move |r: Router<Arc<FakeState>>| {
            r.route(
                "/callback/ws/endpoint",
                post(move |headers: HeaderMap, Json(body): Json<Value>| {
                    let state = endpoint_state.clone();
                    let url = ws_url.clone();
                    async move {
                        let locale = headers
                            .get("locale")
                            .and_then(|v| v.to_str().ok())
                            .unwrap_or_default()
                            .to_string();
                        state.endpoint_requests.lock().unwrap().push((body.clone(), locale));
                        if body["AppID"] != APP_ID || body["AppSecret"] != APP_SECRET {
                            return Json(json!({"code": 1000040344, "msg": "no credential"}));
                        }
                        let config = state.endpoint_config.lock().unwrap().clone();
                        Json(json!({"code": 0, "msg": "ok", "data": {"URL": url, "ClientConfig": config}}))
                    }
                }),
            )
        })
        .await;
        FakePlatform { openapi, ws }
    }
}
