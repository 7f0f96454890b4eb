//! Helpers for tests of the Feishu/Lark channel: settings pointed at the fake, card lookups,
//! and callbacks posted as the platform posts them (shared with `tests/external`).

use imrelay::channels::feishu::crypto;
use imrelay::channels::feishu::settings::{Locale, Mode, Receiver};
use imrelay::config::{Secret, Settings};
use reqwest::StatusCode;
use serde_json::{Value, json};

use super::fake::{self, FakeFeishu};
use crate::support::{TestApp, split};

pub(crate) const ENCRYPT_KEY: &str = "test-encrypt-key";
pub(crate) const VERIFICATION_TOKEN: &str = "test-verification-token";
pub(crate) const APPROVER: &str = "ou_approver";
pub(crate) const STRANGER: &str = "ou_stranger";
pub(crate) const CHAT: &str = "oc_team";
pub(crate) const DM: &str = "ou_boss";

/// Enables the channel in `s` in webhook mode, pointed at `fake`, in English, with two
/// receivers.
pub(crate) fn enable(s: &mut Settings, fake: &FakeFeishu) {
    let f = &mut s.feishu;
    f.enabled = true;
    f.mode = Mode::Webhook;
    f.base_url = fake.url.clone();
    f.app_id = fake::APP_ID.into();
    f.app_secret = Secret::new(fake::APP_SECRET);
    f.verification_token = Secret::new(VERIFICATION_TOKEN);
    f.encrypt_key = Secret::new(ENCRYPT_KEY);
    f.receivers = vec![
        format!("chat_id:{CHAT}").parse::<Receiver>().unwrap(),
        format!("open_id:{DM}").parse::<Receiver>().unwrap(),
    ];
    f.approvers = vec![APPROVER.into()];
    f.locale = Locale::EnUs;
}

/// Every JSON object inside `v` (depth first) for which `pred` holds.
pub(crate) fn find_all<'a>(v: &'a Value, pred: &dyn Fn(&Value) -> bool, out: &mut Vec<&'a Value>) {
    if pred(v) {
        out.push(v);
    }
    match v {
        Value::Object(m) => m.values().for_each(|c| find_all(c, pred, out)),
        Value::Array(a) => a.iter().for_each(|c| find_all(c, pred, out)),
        _ => {}
    }
}

/// Elements of `card` with `tag`.
pub(crate) fn tagged<'a>(card: &'a Value, tag: &str) -> Vec<&'a Value> {
    let mut out = Vec::new();
    find_all(card, &|v| v["tag"] == tag, &mut out);
    out
}

/// The callback value of the button named `name` in `card`.
pub(crate) fn button_value(card: &Value, name: &str) -> Value {
    tagged(card, "button")
        .into_iter()
        .find(|b| b["name"] == name)
        .unwrap_or_else(|| panic!("no button {name:?} in {card}"))["behaviors"][0]["value"]
        .clone()
}

/// All plain text and markdown of a card, joined.
pub(crate) fn card_text(card: &Value) -> String {
    let mut out = Vec::new();
    find_all(
        card,
        &|v| v.get("content").is_some_and(Value::is_string),
        &mut out,
    );
    out.iter()
        .filter_map(|v| v["content"].as_str())
        .collect::<Vec<_>>()
        .join("\n")
}

/// Waits for the first card delivered for interaction `id`, to the chat receiver.
pub(crate) async fn card_for(fake: &FakeFeishu, id: &str) -> (String, Value) {
    let find = || {
        fake.state.delivered().into_iter().find(|s| {
            s.receive_id == CHAT && {
                let mut ids = Vec::new();
                find_all(
                    &s.card,
                    &|v| v["id"] == id && v.get("mac").is_some(),
                    &mut ids,
                );
                !ids.is_empty()
            }
        })
    };
    crate::support::wait_until(&format!("a card for {id}"), || find().is_some()).await;
    let s = find().unwrap();
    (s.message_id.unwrap(), s.card)
}

/// A `card.action.trigger` envelope.
pub(crate) fn click(
    event_id: &str,
    open_id: &str,
    value: &Value,
    form_value: Option<Value>,
) -> Value {
    let mut action = json!({"value": value, "tag": "button"});
    if let Some(f) = form_value {
        action["form_value"] = f;
        action["name"] = json!("submit");
    }
    json!({
        "schema": "2.0",
        "header": {
            "event_id": event_id,
            "token": VERIFICATION_TOKEN,
            "create_time": "1700000000000",
            "event_type": "card.action.trigger",
            "tenant_key": "tenant",
            "app_id": fake::APP_ID,
        },
        "event": {
            "operator": {"tenant_key": "tenant", "open_id": open_id, "user_id": format!("u_{open_id}")},
            "token": "c-token",
            "action": action,
            "host": "im_message",
            "context": {"open_message_id": "om_x", "open_chat_id": CHAT},
        }
    })
}

/// POSTs `payload` to the callback endpoint as the platform does: encrypted and signed now.
pub(crate) async fn post_callback(app: &TestApp, payload: &Value) -> (StatusCode, Value) {
    let body = json!({"encrypt": crypto::encrypt(ENCRYPT_KEY, &payload.to_string())}).to_string();
    post_signed(
        app,
        body,
        &jiff::Timestamp::now().as_second().to_string(),
        None,
    )
    .await
}

/// POSTs a raw body with signature headers for `timestamp` (or `signature` if given).
pub(crate) async fn post_signed(
    app: &TestApp,
    body: String,
    timestamp: &str,
    signature: Option<&str>,
) -> (StatusCode, Value) {
    let nonce = "nonce-1";
    let sig = signature
        .map(str::to_string)
        .unwrap_or_else(|| crypto::signature(timestamp, nonce, ENCRYPT_KEY, body.as_bytes()));
    let resp = app
        .client
        .post(app.url("/feishu/callback"))
        .header("content-type", "application/json")
        .header("X-Lark-Request-Timestamp", timestamp)
        .header("X-Lark-Request-Nonce", nonce)
        .header("X-Lark-Signature", sig)
        .body(body)
        .send()
        .await
        .unwrap();
    split(resp).await
}

/// A unique event id.
pub(crate) fn event_id() -> String {
    uuid::Uuid::now_v7().simple().to_string()
}
