//! A fake WeCom bot endpoint: a WebSocket server that checks `aibot_subscribe` (bot id and
//! secret), answers `ping`, pushes the callbacks a test gives, answers the client's
//! commands (`aibot_respond_update_msg` only on a card click's `req_id` and only within the
//! window, `aibot_send_msg` only to chats where someone messaged the bot), refuses a
//! template card whose shape the smart bot's card reference does not allow ([`card_fault`]),
//! and records everything, as the official Node SDK exchanges it.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio::sync::mpsc;
use tokio_tungstenite::tungstenite::Message;

pub(crate) const BOT_ID: &str = "aibtest0001";
pub(crate) const SECRET: &str = "wecom-test-secret";

enum Cmd {
    Text(String),
    Drop,
}

#[derive(Default)]
pub(crate) struct FakeState {
    next_conn: AtomicUsize,
    open: Mutex<HashMap<usize, mpsc::UnboundedSender<Cmd>>>,
    /// Every frame the client sent, with its connection.
    pub received: Mutex<Vec<(usize, Value)>>,
    /// Card clicks delivered: req_id → when.
    clicks: Mutex<HashMap<String, Instant>>,
    /// Chats where someone messaged the bot.
    pub reachable: Mutex<HashSet<String>>,
    /// How long a click's req_id accepts an update.
    pub update_window: Mutex<Option<Duration>>,
    /// Pings are not answered while set.
    pub mute_pings: std::sync::atomic::AtomicBool,
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

    /// Pushes `cmd` with `req_id` and `body` to the client on `conn`.
    pub(crate) fn push(&self, conn: usize, cmd: &str, req_id: &str, body: Value) {
        if body.pointer("/event/eventtype") == Some(&json!("template_card_event")) {
            self.clicks
                .lock()
                .unwrap()
                .insert(req_id.to_string(), Instant::now());
        }
        if cmd == "aibot_msg_callback" {
            let chat = body["chatid"]
                .as_str()
                .or(body["from"]["userid"].as_str())
                .unwrap_or_default();
            self.reachable.lock().unwrap().insert(chat.to_string());
        }
        let f = json!({"cmd": cmd, "headers": {"req_id": req_id}, "body": body});
        self.send(conn, Cmd::Text(f.to_string()));
    }

    /// Marks `chat` as one where someone messaged the bot (as a message callback would).
    pub(crate) fn reach(&self, chat: &str) {
        self.reachable.lock().unwrap().insert(chat.to_string());
    }

    pub(crate) fn drop_conn(&self, conn: usize) {
        self.send(conn, Cmd::Drop);
    }

    /// Frames the client sent with command `cmd`.
    pub(crate) fn sent(&self, cmd: &str) -> Vec<(usize, Value)> {
        self.received
            .lock()
            .unwrap()
            .iter()
            .filter(|(_, f)| f["cmd"] == cmd)
            .cloned()
            .collect()
    }

    /// What the fake answers a client command.
    fn answer(&self, frame: &Value) -> Option<Value> {
        let req_id = frame["headers"]["req_id"].as_str().unwrap_or_default();
        if let Some(fault) = frame["body"].get("template_card").and_then(card_fault) {
            return Some(
                json!({"headers": {"req_id": req_id}, "errcode": 40058, "errmsg": format!("invalid template_card: {fault}")}),
            );
        }
        let (errcode, errmsg) = match frame["cmd"].as_str()? {
            "ping" if self.mute_pings.load(Ordering::SeqCst) => return None,
            "ping" => (0, "ok"),
            "aibot_respond_update_msg" => {
                let window = self
                    .update_window
                    .lock()
                    .unwrap()
                    .unwrap_or(Duration::from_secs(5));
                match self.clicks.lock().unwrap().get(req_id) {
                    None => (846605, "invalid req_id for update"),
                    Some(at) if at.elapsed() > window => (846608, "update window expired"),
                    Some(_) if frame["body"]["response_type"] != "update_template_card" => {
                        (40058, "invalid response_type")
                    }
                    Some(_) => (0, "ok"),
                }
            }
            "aibot_send_msg" => {
                let chat = frame["body"]["chatid"].as_str().unwrap_or_default();
                if self.reachable.lock().unwrap().contains(chat) {
                    (0, "ok")
                } else {
                    (
                        846609,
                        "chat not reachable: nobody has messaged the bot here",
                    )
                }
            }
            "aibot_respond_msg" => (0, "ok"),
            _ => (40008, "unknown cmd"),
        };
        Some(json!({"headers": {"req_id": req_id}, "errcode": errcode, "errmsg": errmsg}))
    }
}

/// What is wrong with a template card, by the smart bot's card reference (WeCom's
/// `document/path/101032`, and the official Node SDK's `TemplateCard` in
/// `src/types/api.ts`): its `card_type` is one of the five; a button (`TemplateCardButton`)
/// is `text`, `style` and `key` only, with `text` and `key` (a button is a callback, never a
/// link); at most 6 buttons, and a `button_interaction` card has at least one; a jump link
/// (`TemplateCardJumpAction`, at most 3) has a `title`, and type 1 a `url`; the card's own
/// action (`TemplateCardAction`) of type 1 has a `url`, and a `text_notice` card has one.
pub(crate) fn card_fault(card: &Value) -> Option<String> {
    const TYPES: [&str; 5] = [
        "text_notice",
        "news_notice",
        "button_interaction",
        "vote_interaction",
        "multiple_interaction",
    ];
    let card_type = card["card_type"].as_str().unwrap_or_default();
    if !TYPES.contains(&card_type) {
        return Some(format!("card_type {card_type:?}"));
    }
    let buttons = card["button_list"].as_array().cloned().unwrap_or_default();
    if buttons.len() > 6 || (card_type == "button_interaction" && buttons.is_empty()) {
        return Some(format!("{} buttons on a {card_type} card", buttons.len()));
    }
    for b in &buttons {
        let fields = b.as_object().map(|o| o.keys().cloned().collect::<Vec<_>>());
        let fits = fields.as_ref().is_some_and(|f| {
            f.iter()
                .all(|k| ["text", "style", "key"].contains(&k.as_str()))
                && b["text"].is_string()
                && b["key"].is_string()
        });
        if !fits {
            return Some(format!("button {b}"));
        }
    }
    let jumps = card["jump_list"].as_array().cloned().unwrap_or_default();
    if jumps.len() > 3 {
        return Some(format!("{} jump links", jumps.len()));
    }
    let links = |v: &Value| v["type"] != 1 || v["url"].as_str().is_some_and(|u| !u.is_empty());
    if let Some(j) = jumps.iter().find(|j| !j["title"].is_string() || !links(j)) {
        return Some(format!("jump link {j}"));
    }
    match card.get("card_action") {
        Some(a) if !links(a) => Some(format!("card_action {a}")),
        None if card_type == "text_notice" => Some("a text_notice card without card_action".into()),
        _ => None,
    }
}

pub(crate) struct FakeWecom {
    pub url: String,
    pub state: Arc<FakeState>,
}

async fn serve(listener: tokio::net::TcpListener, state: Arc<FakeState>) {
    loop {
        let Ok((tcp, _)) = listener.accept().await else {
            return;
        };
        let state = state.clone();
        tokio::spawn(async move {
            let Ok(ws) = tokio_tungstenite::accept_async(tcp).await else {
                return;
            };
            let conn = state.next_conn.fetch_add(1, Ordering::SeqCst);
            let (mut sink, mut stream) = ws.split();
            // The first frame must be the subscription.
            let Some(Ok(Message::Text(t))) = stream.next().await else {
                return;
            };
            let sub: Value = serde_json::from_str(t.as_str()).unwrap();
            state.received.lock().unwrap().push((conn, sub.clone()));
            let ok = sub["cmd"] == "aibot_subscribe"
                && sub["body"]["bot_id"] == BOT_ID
                && sub["body"]["secret"] == SECRET;
            let answer = if ok {
                json!({"headers": {"req_id": sub["headers"]["req_id"]}, "errcode": 0, "errmsg": "ok"})
            } else {
                json!({"headers": {"req_id": sub["headers"]["req_id"]}, "errcode": 40014, "errmsg": "invalid bot_id or secret"})
            };
            let _ = sink.send(Message::Text(answer.to_string().into())).await;
            if !ok {
                let _ = sink.send(Message::Close(None)).await;
                return;
            }
            let (tx, mut rx) = mpsc::unbounded_channel();
            state.open.lock().unwrap().insert(conn, tx);
            loop {
                tokio::select! {
                    cmd = rx.recv() => match cmd {
                        Some(Cmd::Text(t)) => { let _ = sink.send(Message::Text(t.into())).await; }
                        Some(Cmd::Drop) | None => break,
                    },
                    msg = stream.next() => match msg {
                        Some(Ok(Message::Text(t))) => {
                            let f: Value = serde_json::from_str(t.as_str()).expect("frames are JSON");
                            state.received.lock().unwrap().push((conn, f.clone()));
                            if let Some(a) = state.answer(&f) {
                                let _ = sink.send(Message::Text(a.to_string().into())).await;
                            }
                        }
                        Some(Ok(Message::Close(_))) | None | Some(Err(_)) => break,
                        Some(Ok(_)) => {}
                    },
                }
            }
            state.open.lock().unwrap().remove(&conn);
        });
    }
}

impl FakeWecom {
    pub(crate) async fn start() -> Self {
        let state = Arc::new(FakeState::default());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("ws://{}", listener.local_addr().unwrap());
        tokio::spawn(serve(listener, state.clone()));
        FakeWecom { url, state }
    }
}

/// A template card click by `userid` on button `key` of card `task_id` in group `chatid`.
pub(crate) fn card_click(
    msgid: &str,
    userid: &str,
    chatid: &str,
    key: &str,
    task_id: &str,
) -> Value {
    json!({"msgid": msgid, "create_time": 1700000000, "aibotid": BOT_ID, "chatid": chatid,
        "chattype": "group", "from": {"userid": userid}, "msgtype": "event",
        "event": {"eventtype": "template_card_event", "event_key": key, "task_id": task_id}})
}

/// A text message from `userid` in `chatid`.
pub(crate) fn text(msgid: &str, userid: &str, chatid: &str, content: &str) -> Value {
    json!({"msgid": msgid, "aibotid": BOT_ID, "chatid": chatid, "chattype": "group",
        "from": {"userid": userid}, "msgtype": "text", "text": {"content": content}})
}

/// A template card submission in WeCom's nested shape (`event.template_card_event`), with
/// the select lists' choices (`question_key` → option ids).
pub(crate) fn card_submit(
    msgid: &str,
    userid: &str,
    chatid: &str,
    key: &str,
    task_id: &str,
    selected: &[(&str, &str)],
) -> Value {
    let items: Vec<Value> = selected
        .iter()
        .map(|(q, o)| json!({"question_key": q, "option_ids": {"option_id": [o]}}))
        .collect();
    json!({"msgid": msgid, "create_time": 1700000000, "aibotid": BOT_ID, "chatid": chatid,
        "chattype": "group", "from": {"userid": userid}, "msgtype": "event",
        "event": {"eventtype": "template_card_event", "template_card_event": {
            "card_type": "multiple_interaction", "event_key": key, "task_id": task_id,
            "selected_items": {"selected_item": items}}}})
}
