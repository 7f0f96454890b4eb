//! The Telegram channel against a fake Bot API (teloxide pointed at it with `api_url`):
//! prompts and keyboards, taps, ForceReply answers, questions, refusals, races, edits on
//! resolution from anywhere, rate limits and outages, restarts, webhook and polling.

mod access;
mod burst;
mod commands;
mod digest;
mod escalation;
pub(crate) mod fake;
mod flow;
mod grants;
mod locale;
mod passkey;
mod questions;
mod quiet;
mod quorum;
mod reliability;
mod rendering;
mod routes;
mod sessions;
mod threads;
mod webhook;

use std::sync::Arc;
use std::time::Duration;

use imrelay::channels::telegram::Mode;
use imrelay::config::{Secret, Settings};
use imrelay::store::{MemoryStore, Store};
use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::support::*;
use fake::*;

pub(crate) const ALICE: Person = Person {
    id: 1001,
    first_name: "Alice",
};
const BOB: Person = Person {
    id: 1002,
    first_name: "Bob",
};
pub(crate) const MALLORY: Person = Person {
    id: 666,
    first_name: "Mallory",
};
/// Alice's private chat with the bot (a private chat's id is the user's id).
pub(crate) const PRIVATE: i64 = 1001;
const GROUP: i64 = -2001;
const SECRET: &str = "webhook-secret_1";

fn telegram_settings(s: &mut Settings, tg: &FakeTelegram, mode: Mode) {
    // Quick retries: the tests wait for them.
    s.outbox.retry_base_ms = 20;
    s.outbox.retry_max_secs = 1;
    let t = &mut s.telegram;
    t.enabled = true;
    t.token = Secret::new(TOKEN);
    t.chats = vec![PRIVATE, GROUP];
    t.approvers = vec![ALICE.id as u64, BOB.id as u64];
    t.mode = mode;
    t.api_url = tg.url.clone();
    t.poll_timeout_secs = 2;
    t.request_timeout_secs = 5;
    if mode == Mode::Webhook {
        t.webhook_url = "https://relay.example.com/telegram/webhook".into();
        t.webhook_secret = Secret::new(SECRET);
    }
}

/// Test settings with Telegram on in `mode` against a new fake Bot API, adjusted by `f`.
pub(crate) async fn setup(mode: Mode, f: impl FnOnce(&mut Settings)) -> (Settings, FakeTelegram) {
    let tg = FakeTelegram::start().await;
    let mut s = settings();
    telegram_settings(&mut s, &tg, mode);
    f(&mut s);
    (s, tg)
}

pub(crate) async fn start_with(
    mode: Mode,
    f: impl FnOnce(&mut Settings),
) -> (TestApp, FakeTelegram) {
    let (s, tg) = setup(mode, f).await;
    let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
    (spawn_on(s, store).await, tg)
}

pub(crate) async fn start(mode: Mode) -> (TestApp, FakeTelegram) {
    start_with(mode, |_| {}).await
}

/// A prompt as sent to Telegram.
#[derive(Debug, Clone)]
pub(crate) struct Posted {
    chat: i64,
    pub(crate) message_id: i64,
    pub(crate) text: String,
    params: Value,
}

impl Posted {
    fn from(c: &Call) -> Self {
        Posted {
            chat: c.params["chat_id"].as_i64().unwrap(),
            message_id: c.message_id.unwrap(),
            text: c.params["text"].as_str().unwrap().to_string(),
            params: c.params.clone(),
        }
    }

    pub(crate) fn buttons(&self) -> Vec<(String, String)> {
        self.params["reply_markup"]["inline_keyboard"]
            .as_array()
            .map(|rows| {
                rows.iter()
                    .flat_map(|r| r.as_array().unwrap().clone())
                    .map(|b| {
                        (
                            b["text"].as_str().unwrap().to_string(),
                            b["callback_data"].as_str().unwrap().to_string(),
                        )
                    })
                    .collect()
            })
            .unwrap_or_default()
    }

    /// The callback data of the button whose text is `label`.
    fn button(&self, label: &str) -> String {
        self.buttons()
            .into_iter()
            .find(|(t, _)| t == label)
            .unwrap_or_else(|| panic!("no button {label:?} in {:?}", self.buttons()))
            .1
    }
}

/// Waits for the prompt posted to `chat` whose text contains `marker`.
pub(crate) async fn prompt(tg: &FakeTelegram, chat: i64, marker: &str) -> Posted {
    let calls = tg
        .wait_for("sendMessage", |calls| {
            calls.iter().any(|c| {
                c.params["chat_id"] == chat
                    && c.params["text"].as_str().unwrap_or("").contains(marker)
                    && c.params["reply_markup"]["inline_keyboard"].is_array()
            })
        })
        .await;
    let c = calls
        .iter()
        .rev()
        .find(|c| {
            c.params["chat_id"] == chat && c.params["text"].as_str().unwrap().contains(marker)
        })
        .unwrap();
    Posted::from(c)
}

/// Waits for an edit of message `id` in `chat` whose text contains `marker`.
pub(crate) async fn edited(tg: &FakeTelegram, chat: i64, id: i64, marker: &str) -> Value {
    let calls = tg
        .wait_for("editMessageText", |calls| {
            calls.iter().any(|c| {
                c.params["chat_id"] == chat
                    && c.params["message_id"] == id
                    && c.params["text"].as_str().unwrap_or("").contains(marker)
            })
        })
        .await;
    calls
        .iter()
        .rev()
        .find(|c| c.params["chat_id"] == chat && c.params["message_id"] == id)
        .unwrap()
        .params
        .clone()
}

/// Posts an update to the webhook route with the right secret; returns the status.
pub(crate) async fn deliver(app: &TestApp, update: &Value) -> StatusCode {
    app.client
        .post(app.url("/telegram/webhook"))
        .header("X-Telegram-Bot-Api-Secret-Token", SECRET)
        .json(update)
        .send()
        .await
        .unwrap()
        .status()
}

/// The toast given for callback query `cq-<update_id>`.
async fn toast(tg: &FakeTelegram, update_id: i64) -> String {
    let want = format!("cq-{update_id}");
    let calls = tg
        .wait_for("answerCallbackQuery", |c| {
            c.iter()
                .any(|c| c.params["callback_query_id"] == want.as_str())
        })
        .await;
    calls
        .iter()
        .find(|c| c.params["callback_query_id"] == want.as_str())
        .unwrap()
        .params["text"]
        .as_str()
        .unwrap_or("")
        .to_string()
}

/// Taps `data` on `p` as `who` through the webhook; returns the toast.
async fn tap_on(app: &TestApp, tg: &FakeTelegram, who: Person, p: &Posted, data: &str) -> String {
    let u = tg.next_update_id();
    assert_eq!(
        deliver(app, &tap(u, who, p.chat, p.message_id, data)).await,
        StatusCode::OK
    );
    toast(tg, u).await
}

/// Taps `data` on message `message` in `chat` as `who` through the webhook; returns the
/// toast.
pub(crate) async fn tap_at(
    app: &TestApp,
    tg: &FakeTelegram,
    who: Person,
    chat: i64,
    message: i64,
    data: &str,
) -> String {
    let u = tg.next_update_id();
    assert_eq!(
        deliver(app, &tap(u, who, chat, message, data)).await,
        StatusCode::OK
    );
    toast(tg, u).await
}

/// Sends `body` as `who`'s reply to message `message` in `chat` through the webhook.
pub(crate) async fn reply_to(
    app: &TestApp,
    tg: &FakeTelegram,
    who: Person,
    chat: i64,
    message: i64,
    body: &str,
) {
    let u = tg.next_update_id();
    assert_eq!(
        deliver(app, &text(u, who, chat, body, Some(message))).await,
        StatusCode::OK
    );
}

/// Waits for the `n`th (1-based) ForceReply request and returns it.
async fn reply_request(tg: &FakeTelegram, n: usize) -> Call {
    let is_request = |c: &Call| c.params["reply_markup"]["force_reply"] == true;
    let calls = tg
        .wait_for("sendMessage", |c| {
            c.iter().filter(|c| is_request(c)).count() >= n
        })
        .await;
    calls.into_iter().filter(is_request).nth(n - 1).unwrap()
}

/// The texts of the messages sent to `chat` that are not prompts or reply requests.
fn notices(tg: &FakeTelegram, chat: i64) -> Vec<String> {
    tg.calls("sendMessage")
        .iter()
        .filter(|c| c.params["chat_id"] == chat && c.params["reply_markup"].is_null())
        .map(|c| c.params["text"].as_str().unwrap().to_string())
        .collect()
}

async fn status(app: &TestApp, id: &str) -> Value {
    let (s, body) = app.get(&format!("/v1/interactions/{id}")).await;
    assert_eq!(s, StatusCode::OK, "{body}");
    body
}

async fn create(app: &TestApp, body: Value) -> String {
    let (s, created) = app.post("/v1/interactions", &body).await;
    assert_eq!(s, StatusCode::CREATED, "{created}");
    created["id"].as_str().unwrap().to_string()
}

fn questions_input() -> Value {
    json!({"questions": [
        {"question": "Which color?", "header": "Color", "multiSelect": false,
         "options": [{"label": "Red", "description": "warm & <bold>"}, {"label": "Blue", "description": "cool"}]},
        {"question": "Which toppings?", "header": "Toppings", "multiSelect": true,
         "options": [{"label": "Cheese"}, {"label": "Ham"}, {"label": "Olives"}]}
    ]})
}

/// The audit trail's entries about interaction `id`.
async fn audit_of(app: &TestApp, id: &str) -> Vec<Value> {
    let (s, body) = app.get("/v1/audit?limit=1000").await;
    assert_eq!(s, StatusCode::OK, "{body}");
    body["entries"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["interaction_id"] == id)
        .cloned()
        .collect()
}

pub(crate) async fn open_sqlite(path: &std::path::Path) -> Arc<dyn Store> {
    Arc::new(reopen_sqlite(path).await)
}
