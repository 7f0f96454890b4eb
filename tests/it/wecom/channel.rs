//! The WeCom channel end to end: the real server with `[wecom]` enabled, its real long
//! connection pointed at the fake WeCom on loopback. Cards sent, clicks and messages pushed
//! frame for frame as WeCom pushes them, card updates answered on the click's `req_id`, and
//! what the fake received read as a person would read it.

use std::sync::Arc;

use imrelay::channels::wecom::Transport;
use imrelay::config::{Secret, Settings};
use imrelay::present::render::Locale;
use imrelay::store::{SqliteStore, Store, Synchronous};
use reqwest::StatusCode;
use serde_json::{Value, json};

use super::fake::{BOT_ID, FakeWecom, SECRET, card_click, card_fault, card_submit, text};
use crate::support::{TestApp, settings, spawn_on, spawn_with, wait_until};

pub(crate) const APPROVER: &str = "zhangsan";
pub(crate) const STRANGER: &str = "mallory";
pub(crate) const CHATS: [&str; 2] = ["wrkGroupA", "wrkGroupB"];

/// Enables the channel in `s`, pointed at `fake`, in English.
pub(crate) fn enable(s: &mut Settings, fake: &FakeWecom) {
    let w = &mut s.wecom;
    w.enabled = true;
    w.transport = Transport::Longconn;
    w.url = fake.url.clone();
    w.bot_id = BOT_ID.into();
    w.secret = Secret::new(SECRET);
    w.chats = CHATS.iter().map(|c| c.to_string()).collect();
    w.approvers = vec![APPROVER.into()];
    w.locale = Locale::EnUs;
}

pub(crate) async fn start_with(f: impl FnOnce(&mut Settings)) -> (FakeWecom, TestApp) {
    let fake = FakeWecom::start().await;
    for c in CHATS {
        fake.state.reach(c);
    }
    let app = spawn_with(|s| {
        enable(s, &fake);
        f(s);
    })
    .await;
    connected(&fake).await;
    (fake, app)
}

async fn start() -> (FakeWecom, TestApp) {
    start_with(|_| {}).await
}

/// The open connection, once subscribed.
pub(crate) async fn connected(fake: &FakeWecom) -> usize {
    wait_until("a subscribed long connection", || {
        !fake.state.open_conns().is_empty()
    })
    .await;
    *fake.state.open_conns().last().unwrap()
}

/// Every frame the client sent with `cmd` whose body satisfies `f`.
fn sent(fake: &FakeWecom, cmd: &str, f: impl Fn(&Value) -> bool) -> Vec<Value> {
    fake.state
        .sent(cmd)
        .into_iter()
        .map(|(_, v)| v)
        .filter(|v| f(&v["body"]))
        .collect()
}

/// The cards sent for an interaction whose card title mentions `needle`, one per chat:
/// (chat, template_card).
pub(crate) async fn sent_cards(fake: &FakeWecom, needle: &str) -> Vec<(String, Value)> {
    let find = || {
        let mut found: Vec<(String, Value)> = sent(fake, "aibot_send_msg", |b| {
            b["msgtype"] == "template_card" && b.to_string().contains(needle)
        })
        .into_iter()
        .map(|f| {
            (
                f["body"]["chatid"].as_str().unwrap().to_string(),
                f["body"]["template_card"].clone(),
            )
        })
        .collect();
        found.sort_by(|a, b| a.0.cmp(&b.0));
        found
    };
    wait_until(&format!("cards showing {needle:?} in every chat"), || {
        find().len() == CHATS.len()
    })
    .await;
    let cards = find();
    for (_, card) in &cards {
        assert_eq!(card_fault(card), None, "a card WeCom would refuse: {card}");
    }
    cards
}

/// The key of the button labelled `label` on `card`.
pub(crate) fn key(card: &Value, label: &str) -> String {
    let all = card["button_list"]
        .as_array()
        .into_iter()
        .flatten()
        .chain(card.get("submit_button"));
    all.into_iter()
        .find(|b| b["text"] == label)
        .unwrap_or_else(|| panic!("no {label} button on {card}"))["key"]
        .as_str()
        .unwrap()
        .to_string()
}

/// Pushes a click and returns the card update that answered it (on the click's req_id).
pub(crate) async fn click(fake: &FakeWecom, req_id: &str, body: Value) -> Value {
    let conn = connected(fake).await;
    fake.state.push(conn, "aibot_event_callback", req_id, body);
    let update = || {
        fake.state
            .sent("aibot_respond_update_msg")
            .into_iter()
            .map(|(_, v)| v)
            .find(|v| v["headers"]["req_id"] == req_id)
    };
    wait_until(&format!("the update answering {req_id}"), || {
        update().is_some()
    })
    .await;
    let update = update().unwrap();
    let card = &update["body"]["template_card"];
    assert_eq!(card_fault(card), None, "a card WeCom would refuse: {card}");
    update
}

/// The markdown notes sent to `chat`.
fn notes(fake: &FakeWecom, chat: &str) -> Vec<String> {
    sent(fake, "aibot_send_msg", |b| {
        b["msgtype"] == "markdown" && b["chatid"] == chat
    })
    .into_iter()
    .map(|f| {
        f["body"]["markdown"]["content"]
            .as_str()
            .unwrap()
            .to_string()
    })
    .collect()
}

pub(crate) async fn status(app: &TestApp, id: &str) -> Value {
    let (s, body) = app.get(&format!("/v1/interactions/{id}")).await;
    assert_eq!(s, StatusCode::OK, "{body}");
    body
}

async fn outcome(app: &TestApp, id: &str) -> Value {
    status(app, id).await["resolution"]["outcome"].clone()
}

#[tokio::test]
async fn an_approver_approves_the_card_updates_and_the_other_chat_is_told() {
    let (fake, app) = start().await;
    app.create_bash("toolu_w1", "cargo test --workspace").await;
    let cards = sent_cards(&fake, "cargo test --workspace").await;
    let (chat_a, card) = &cards[0];
    // What a person sees: what is asked, the command, Allow and Deny, a way to give a reason.
    assert_eq!(card["card_type"], "button_interaction");
    assert_eq!(card["main_title"]["title"], "Approval needed: Bash");
    assert_eq!(card["sub_title_text"], "cargo test --workspace");
    assert!(
        card["quote_area"]["quote_text"]
            .as_str()
            .unwrap()
            .starts_with("To deny with a reason, message the bot: deny ")
    );
    let task_id = card["task_id"].as_str().unwrap();
    assert_ne!(task_id, cards[1].1["task_id"], "one task_id per copy");

    let update = click(
        &fake,
        "req-w1",
        card_click("m-w1", APPROVER, chat_a, &key(card, "Allow"), task_id),
    )
    .await;
    assert_eq!(outcome(&app, "toolu_w1").await, "allowed");
    // The clicked card now says who allowed it, for everyone in the chat.
    let body = &update["body"];
    assert_eq!(body["response_type"], "update_template_card");
    assert!(body.get("userids").is_none(), "{body}");
    assert_eq!(body["template_card"]["task_id"], *task_id);
    assert_eq!(
        body["template_card"]["main_title"]["title"],
        "Allowed: Bash"
    );
    assert_eq!(
        body["template_card"]["main_title"]["desc"],
        "Allowed by zhangsan via wecom"
    );
    // The other chat's card cannot change: that chat is told in a note; the clicked one is not.
    wait_until("the note in the other chat", || {
        !notes(&fake, &cards[1].0).is_empty()
    })
    .await;
    let note = &notes(&fake, &cards[1].0)[0];
    assert!(note.contains("Allowed by zhangsan via wecom"), "{note}");
    assert!(note.contains("cargo test --workspace"), "{note}");
    assert!(notes(&fake, chat_a).is_empty());
    app.stop().await;
}

#[tokio::test]
async fn deny_with_reason_is_typed_to_the_bot() {
    let (fake, app) = start().await;
    app.create_bash("toolu_w2", "rm -rf build").await;
    let cards = sent_cards(&fake, "rm -rf build").await;
    let hint = cards[0].1["quote_area"]["quote_text"].as_str().unwrap();
    let handle = hint
        .rsplit("deny ")
        .next()
        .unwrap()
        .split(' ')
        .next()
        .unwrap();
    let conn = connected(&fake).await;
    let message = text(
        "m-w2",
        APPROVER,
        CHATS[0],
        &format!("@imrelay deny {handle} keep the cache"),
    );
    fake.state
        .push(conn, "aibot_msg_callback", "req-w2", message);
    wait_until("the reply", || {
        !fake.state.sent("aibot_respond_msg").is_empty()
    })
    .await;
    let (_, reply) = fake.state.sent("aibot_respond_msg")[0].clone();
    assert_eq!(reply["headers"]["req_id"], "req-w2");
    assert_eq!(reply["body"]["stream"]["content"], "Denied");
    assert_eq!(reply["body"]["stream"]["finish"], true);
    let s = status(&app, "toolu_w2").await;
    assert_eq!(s["resolution"]["outcome"], "denied");
    assert_eq!(s["resolution"]["result"]["message"], "keep the cache");
    for (chat, _) in &cards {
        wait_until("the notes", || !notes(&fake, chat).is_empty()).await;
        assert!(notes(&fake, chat)[0].contains("Reason: keep the cache"));
    }
    app.stop().await;
}

fn question(n: usize, multi: bool) -> Value {
    let qs: Vec<Value> = (0..n)
        .map(|k| json!({"question": format!("Which database {k}?"), "header": format!("DB{k}"), "multiSelect": multi,
            "options": [{"label": "Postgres"}, {"label": "SQLite"}, {"label": "Memory"}]}))
        .collect();
    json!({"questions": qs})
}

async fn create(app: &TestApp, body: Value) {
    let (s, b) = app.post("/v1/interactions", &body).await;
    assert_eq!(s, StatusCode::CREATED, "{b}");
}

#[tokio::test]
async fn questions_are_answered_with_buttons_or_select_lists() {
    let (fake, app) = start().await;
    create(
        &app,
        json!({"id": "q_w1", "tool_name": "AskUserQuestion", "input": question(1, false)}),
    )
    .await;
    let cards = sent_cards(&fake, "Which database 0?").await;
    let card = &cards[0].1;
    assert_eq!(card["card_type"], "button_interaction");
    let labels: Vec<&str> = card["button_list"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b["text"].as_str().unwrap())
        .collect();
    assert_eq!(labels, ["Postgres", "SQLite", "Memory", "Deny"]);
    let task = card["task_id"].as_str().unwrap();
    click(
        &fake,
        "req-q1",
        card_click("m-q1", APPROVER, &cards[0].0, &key(card, "SQLite"), task),
    )
    .await;
    let s = status(&app, "q_w1").await;
    assert_eq!(s["resolution"]["outcome"], "answered");
    assert!(s.to_string().contains("SQLite"), "{s}");

    create(
        &app,
        json!({"id": "q_w2", "tool_name": "AskUserQuestion", "input": question(2, false)}),
    )
    .await;
    let cards = sent_cards(&fake, "Which database 1?").await;
    let card = &cards[1].1;
    assert_eq!(card["card_type"], "multiple_interaction");
    assert_eq!(card["select_list"].as_array().unwrap().len(), 2);
    let task = card["task_id"].as_str().unwrap();
    let submit = key(card, "Submit");
    // One list left unchosen: told so, for the clicker only, and nothing changes.
    let update = click(
        &fake,
        "req-q2",
        card_submit("m-q2", APPROVER, &cards[1].0, &submit, task, &[("q0", "2")]),
    )
    .await;
    assert_eq!(update["body"]["userids"], json!([APPROVER]));
    let shown = update["body"]["template_card"]["sub_title_text"]
        .as_str()
        .unwrap();
    assert!(shown.starts_with("⚠ Not accepted: DB1"), "{shown}");
    assert!(status(&app, "q_w2").await["resolution"].is_null());
    click(
        &fake,
        "req-q3",
        card_submit(
            "m-q3",
            APPROVER,
            &cards[1].0,
            &submit,
            task,
            &[("q0", "2"), ("q1", "0")],
        ),
    )
    .await;
    let s = status(&app, "q_w2").await;
    assert_eq!(s["resolution"]["outcome"], "answered");
    assert!(
        s.to_string().contains("Memory") && s.to_string().contains("Postgres"),
        "{s}"
    );
    app.stop().await;
}

#[tokio::test]
async fn a_small_form_is_filled_with_select_lists() {
    let (fake, app) = start().await;
    let schema = json!({"type": "object", "properties": {
        "plan": {"type": "string", "title": "Plan", "oneOf": [{"const": "free", "title": "Free"}, {"const": "pro", "title": "Pro"}]},
        "newsletter": {"type": "boolean", "title": "Newsletter"}}, "required": ["plan"]});
    create(
        &app,
        json!({"id": "f_w1", "kind": "form", "message": "Pick a plan", "schema": schema}),
    )
    .await;
    let cards = sent_cards(&fake, "Pick a plan").await;
    let card = &cards[0].1;
    assert_eq!(card["card_type"], "multiple_interaction");
    let lists = card["select_list"].as_array().unwrap();
    assert_eq!(lists[0]["title"], "Plan");
    assert_eq!(lists[0]["option_list"][1]["text"], "Pro");
    assert_eq!(lists[1]["option_list"][0]["text"], "Yes");
    let task = card["task_id"].as_str().unwrap();
    let update = click(
        &fake,
        "req-f1",
        card_submit(
            "m-f1",
            APPROVER,
            &cards[0].0,
            &key(card, "Submit"),
            task,
            &[("q0", "1"), ("q1", "0")],
        ),
    )
    .await;
    assert!(update["body"].get("userids").is_none());
    let s = status(&app, "f_w1").await;
    assert_eq!(s["resolution"]["outcome"], "answered", "{s}");
    assert!(s.to_string().contains("\"pro\""), "{s}");
    app.stop().await;
}

#[tokio::test]
async fn a_non_approver_is_told_on_their_own_card_and_nothing_changes() {
    let (fake, app) = start().await;
    app.create_bash("toolu_w3", "make deploy").await;
    let cards = sent_cards(&fake, "make deploy").await;
    let (chat, card) = &cards[0];
    let task = card["task_id"].as_str().unwrap();
    let update = click(
        &fake,
        "req-w3",
        card_click("m-w3", STRANGER, chat, &key(card, "Allow"), task),
    )
    .await;
    assert_eq!(update["body"]["userids"], json!([STRANGER]));
    let shown = &update["body"]["template_card"];
    assert_eq!(
        shown["sub_title_text"],
        "⚠ You are not an approver for this\nmake deploy"
    );
    assert_eq!(
        shown["button_list"].as_array().unwrap().len(),
        2,
        "still pending"
    );
    assert!(status(&app, "toolu_w3").await["resolution"].is_null());
    let (_, audit) = app.get("/v1/audit?limit=50").await;
    assert!(audit.to_string().contains("mallory"), "{audit}");
    app.stop().await;
}

#[tokio::test]
async fn forged_moved_and_replayed_clicks_are_refused() {
    let (fake, app) = start().await;
    app.create_bash("toolu_w4", "ls").await;
    let cards = sent_cards(&fake, "\"ls\"").await;
    let (chat, card) = &cards[0];
    let task = card["task_id"].as_str().unwrap();
    let allow = key(card, "Allow");
    // A key whose action was changed.
    let forged = key(card, "Deny").replacen("deny", "allow", 1);
    let update = click(
        &fake,
        "req-f",
        card_click("m-f", APPROVER, chat, &forged, task),
    )
    .await;
    assert_eq!(update["body"]["userids"], json!([APPROVER]));
    assert_eq!(
        update["body"]["template_card"]["sub_title_text"],
        "This button is not valid."
    );
    // A key taken to another card.
    let other = cards[1].1["task_id"].as_str().unwrap();
    let update = click(
        &fake,
        "req-m",
        card_click("m-m", APPROVER, &cards[1].0, &allow, other),
    )
    .await;
    assert_eq!(
        update["body"]["template_card"]["sub_title_text"],
        "This button is not valid."
    );
    assert!(status(&app, "toolu_w4").await["resolution"].is_null());
    // The real click, then the same click again later (a new delivery): already allowed.
    click(
        &fake,
        "req-ok",
        card_click("m-ok", APPROVER, chat, &allow, task),
    )
    .await;
    assert_eq!(outcome(&app, "toolu_w4").await, "allowed");
    let deny = key(card, "Deny");
    let update = click(
        &fake,
        "req-late",
        card_click("m-late", APPROVER, chat, &deny, task),
    )
    .await;
    assert_eq!(
        update["body"]["template_card"]["main_title"]["desc"],
        "Allowed by zhangsan via wecom"
    );
    assert_eq!(outcome(&app, "toolu_w4").await, "allowed");
    // The old card's key on a new interaction with the same id: refused.
    app.prune_all().await;
    app.create_bash("toolu_w4", "rm -rf /").await;
    let update = click(
        &fake,
        "req-old",
        card_click("m-old", APPROVER, chat, &allow, task),
    )
    .await;
    assert!(
        update["body"]["template_card"]
            .to_string()
            .contains("no longer exists"),
        "{update}"
    );
    assert!(status(&app, "toolu_w4").await["resolution"].is_null());
    app.stop().await;
}

#[tokio::test]
async fn a_click_delivered_twice_is_answered_once() {
    let (fake, app) = start().await;
    app.create_bash("toolu_w5", "cargo build").await;
    let cards = sent_cards(&fake, "cargo build").await;
    let (chat, card) = &cards[0];
    let task = card["task_id"].as_str().unwrap();
    let body = card_click("m-w5", APPROVER, chat, &key(card, "Allow"), task);
    click(&fake, "req-w5", body.clone()).await;
    let conn = connected(&fake).await;
    fake.state
        .push(conn, "aibot_event_callback", "req-w5", body);
    app.metrics_with("imrelay_wecom_callbacks_total{result=\"resolved\"} 1")
        .await;
    let (_, audit) = app.get("/v1/audit?limit=50").await;
    let answers = audit.to_string().matches("\"resolved\"").count();
    assert!(answers <= 1, "{audit}");
    assert_eq!(fake.state.sent("aibot_respond_update_msg").len(), 1);
    app.stop().await;
}

#[tokio::test]
async fn after_a_disconnect_the_connection_comes_back_and_clicks_work() {
    let (fake, app) = start().await;
    let first = connected(&fake).await;
    fake.state.drop_conn(first);
    wait_until("a new connection", || {
        fake.state.open_conns().iter().any(|c| *c > first)
    })
    .await;
    app.create_bash("toolu_w6", "echo back").await;
    let cards = sent_cards(&fake, "echo back").await;
    let (chat, card) = &cards[0];
    let task = card["task_id"].as_str().unwrap();
    click(
        &fake,
        "req-w6",
        card_click("m-w6", APPROVER, chat, &key(card, "Allow"), task),
    )
    .await;
    assert_eq!(outcome(&app, "toolu_w6").await, "allowed");
    app.stop().await;
}

#[tokio::test]
async fn answered_elsewhere_every_chat_is_told_who_where_and_why() {
    let (fake, app) = start().await;
    app.create_bash("toolu_w7", "terraform apply").await;
    let cards = sent_cards(&fake, "terraform apply").await;
    let (s, body) = app
        .respond(
            "toolu_w7",
            &json!({"decision": "deny", "message": "use the plan", "by": "bob"}),
        )
        .await;
    assert_eq!(s, StatusCode::OK, "{body}");
    for (chat, _) in &cards {
        wait_until("a note", || !notes(&fake, chat).is_empty()).await;
        let n = &notes(&fake, chat)[0];
        assert!(
            n.contains("Denied by bob via api") && n.contains("use the plan"),
            "{n}"
        );
    }
    // A later click on a stale card turns it into the outcome.
    let (chat, card) = &cards[0];
    let task = card["task_id"].as_str().unwrap();
    let update = click(
        &fake,
        "req-w7",
        card_click("m-w7", APPROVER, chat, &key(card, "Allow"), task),
    )
    .await;
    assert!(update["body"].get("userids").is_none());
    assert_eq!(
        update["body"]["template_card"]["main_title"]["title"],
        "Denied: Bash"
    );
    assert_eq!(outcome(&app, "toolu_w7").await, "denied");
    app.stop().await;
}

#[tokio::test]
async fn a_chat_nobody_messaged_is_refused_with_the_fix_and_seen_chats_are_remembered() {
    let (fake, app) = start_with(|s| s.wecom.chats.push("wrkSilent".into())).await;
    app.create_bash("toolu_w8", "du -sh").await;
    wait_until("a send to every chat", || {
        sent(&fake, "aibot_send_msg", |b| {
            b.to_string().contains("du -sh")
        })
        .len()
            == 3
    })
    .await;
    let health = crate::support::eventually("the refusal in /healthz", || {
        let app = &app;
        async move {
            let (_, h) = app.get("/healthz").await;
            h.to_string().contains("messaged the bot").then_some(h)
        }
    })
    .await;
    assert!(health.to_string().contains("846609"), "{health}");
    // A message in that chat: remembered as seen.
    let conn = connected(&fake).await;
    fake.state.push(
        conn,
        "aibot_msg_callback",
        "req-w8",
        text("m-w8", APPROVER, "wrkSilent", "hi"),
    );
    let key = format!(
        "{}wrkSilent",
        imrelay::channels::wecom::inbound::SEEN_PREFIX
    );
    crate::support::eventually("the chat remembered as seen", || {
        let store = app.store.clone();
        let key = key.clone();
        async move { store.get_value(&key).await.unwrap() }
    })
    .await;
    // It was told how to answer.
    wait_until("the help", || {
        !fake.state.sent("aibot_respond_msg").is_empty()
    })
    .await;
    app.stop().await;
}

#[tokio::test]
async fn a_card_sent_before_a_restart_still_answers() {
    let fake = FakeWecom::start().await;
    for c in CHATS {
        fake.state.reach(c);
    }
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("imrelay.db");
    let mut s = settings();
    enable(&mut s, &fake);
    let store = Arc::new(SqliteStore::open(&path, Synchronous::Normal).unwrap()) as Arc<dyn Store>;
    let app = spawn_on(s.clone(), store).await;
    connected(&fake).await;
    app.create_bash("toolu_w9", "ls -la").await;
    let cards = sent_cards(&fake, "ls -la").await;
    // Both copies recorded before the stop: a stop between WeCom taking a card and its
    // answer leaves that copy unrecorded (at-least-once), which is not what this tests.
    app.outbox_idle().await;
    app.stop().await;

    let app = spawn_on(s, Arc::new(crate::support::reopen_sqlite(&path).await)).await;
    wait_until("subscribed again", || {
        fake.state.sent("aibot_subscribe").len() >= 2
    })
    .await;
    let (chat, card) = &cards[0];
    let task = card["task_id"].as_str().unwrap();
    click(
        &fake,
        "req-w9",
        card_click("m-w9", APPROVER, chat, &key(card, "Allow"), task),
    )
    .await;
    assert_eq!(outcome(&app, "toolu_w9").await, "allowed");
    wait_until("the note in the other chat", || {
        !notes(&fake, &cards[1].0).is_empty()
    })
    .await;
    let sends = sent(&fake, "aibot_send_msg", |b| b["msgtype"] == "template_card");
    assert_eq!(sends.len(), 2, "nothing sent twice");
    app.stop().await;
}

const TOKEN: &str = "QDG6eK";
const AES_KEY: &str = "jWmYm7qr5nMoAUwZRjGtBxmz3KA1tkAj3ykkR6q2B2C";

fn crypt() -> imrelay::channels::wecom::crypto::MsgCrypt {
    imrelay::channels::wecom::crypto::MsgCrypt::new(Secret::new(TOKEN), &Secret::new(AES_KEY), "")
        .unwrap()
}

/// POSTs `callback` to the endpoint as WeCom does (encrypted, signed, at `ts`); returns the
/// status and the decrypted reply (if any).
async fn post_callback(app: &TestApp, callback: &Value, ts: i64) -> (StatusCode, Option<Value>) {
    let ts = ts.to_string();
    let (encrypted, sig) = crypt().seal(callback.to_string().as_bytes(), &ts, "nonce1");
    let resp = app
        .client
        .post(app.url(&format!(
            "/wecom/callback?msg_signature={sig}&timestamp={ts}&nonce=nonce1"
        )))
        .json(&json!({"encrypt": encrypted}))
        .send()
        .await
        .unwrap();
    let status = resp.status();
    let body = resp.text().await.unwrap();
    if !status.is_success() || body.is_empty() {
        return (status, None);
    }
    let outer: Value = serde_json::from_str(&body).unwrap();
    let plain = crypt()
        .open(
            outer["msgsignature"].as_str().unwrap(),
            outer["timestamp"]
                .as_str()
                .expect("the timestamp is a string"),
            outer["nonce"].as_str().unwrap(),
            outer["encrypt"].as_str().unwrap(),
        )
        .expect("the reply is signed and encrypted");
    (status, Some(serde_json::from_slice(&plain).unwrap()))
}

#[tokio::test]
async fn the_callback_url_checks_signatures_and_answers_in_its_replies() {
    let app = spawn_with(|s| {
        let w = &mut s.wecom;
        w.enabled = true;
        w.transport = Transport::Callback;
        w.token = Secret::new(TOKEN);
        w.encoding_aes_key = Secret::new(AES_KEY);
        w.chats = CHATS.iter().map(|c| c.to_string()).collect();
        w.approvers = vec![APPROVER.into()];
        w.locale = Locale::EnUs;
    })
    .await;
    let now = jiff::Timestamp::now().as_second();
    // The URL check when the callback is saved in WeCom's console.
    let (echo, sig) = crypt().seal(b"echo-1234", &now.to_string(), "n0");
    let resp = app
        .client
        .get(app.url(&format!(
            "/wecom/callback?msg_signature={sig}&timestamp={now}&nonce=n0&echostr={}",
            urlencode(&echo)
        )))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::OK);
    assert_eq!(resp.text().await.unwrap(), "echo-1234");

    // A message gets the card of the oldest interaction waiting for its chat.
    app.create_bash("toolu_c1", "git push --force").await;
    let (s, reply) =
        post_callback(&app, &text("m-c1", APPROVER, CHATS[0], "@imrelay hi"), now).await;
    assert_eq!(s, StatusCode::OK);
    let reply = reply.unwrap();
    assert_eq!(reply["msgtype"], "template_card");
    let card = &reply["template_card"];
    assert_eq!(card["sub_title_text"], "git push --force");
    let task = card["task_id"].as_str().unwrap();

    // A forged signature and a replayed old callback are refused and change nothing.
    let click = card_click("m-c2", APPROVER, CHATS[0], &key(card, "Allow"), task);
    let (encrypted, _) = crypt().seal(click.to_string().as_bytes(), &now.to_string(), "n1");
    let resp = app
        .client
        .post(app.url(&format!(
            "/wecom/callback?msg_signature={}&timestamp={now}&nonce=n1",
            "0".repeat(40)
        )))
        .json(&json!({"encrypt": encrypted}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::UNAUTHORIZED);
    let (s, _) = post_callback(&app, &click, now - 3600).await;
    assert_eq!(s, StatusCode::UNAUTHORIZED);
    assert!(status(&app, "toolu_c1").await["resolution"].is_null());

    // The click, signed: answered with the card update in the reply.
    let (s, reply) = post_callback(&app, &click, now).await;
    assert_eq!(s, StatusCode::OK);
    let reply = reply.unwrap();
    assert_eq!(reply["response_type"], "update_template_card");
    assert_eq!(
        reply["template_card"]["main_title"]["desc"],
        "Allowed by zhangsan via wecom"
    );
    assert_eq!(outcome(&app, "toolu_c1").await, "allowed");
    app.stop().await;
}

fn urlencode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// With no chats configured the channel starts, sends nothing, and `whoami` in a group tells
/// its chatid and the sender's userid: how docs/wecom.md has a person learn them.
#[tokio::test]
async fn an_empty_chat_list_starts_and_whoami_tells_the_ids() {
    let fake = FakeWecom::start().await;
    let app = spawn_with(|s| {
        enable(s, &fake);
        s.wecom.chats.clear();
        s.wecom.approvers.clear();
    })
    .await;
    let conn = connected(&fake).await;
    fake.state.push(
        conn,
        "aibot_msg_callback",
        "req-who",
        text("m-who", "lisi", "wrkNewGroup", "@imrelay whoami"),
    );
    wait_until("the reply", || {
        !fake.state.sent("aibot_respond_msg").is_empty()
    })
    .await;
    let (_, reply) = fake.state.sent("aibot_respond_msg")[0].clone();
    assert_eq!(reply["headers"]["req_id"], "req-who");
    assert_eq!(
        reply["body"]["stream"]["content"],
        "This chat's id (for wecom.chats): wrkNewGroup; your userid (for wecom.approvers): lisi"
    );
    assert!(
        fake.state.sent("aibot_send_msg").is_empty(),
        "nothing is sent to a chat nobody configured"
    );
    app.stop().await;
}

/// `@bot sessions`: the shared listing of the chat's sessions, for approvers only.
#[tokio::test]
async fn sessions_to_the_bot_lists_the_chats_agent_sessions() {
    let (fake, app) = start_with(|_| {}).await;
    let conn = connected(&fake).await;
    let stop = json!({"hook_event_name": "Stop", "session_id": "s-wc", "cwd": "/srv/shop",
        "stop_hook_active": false, "last_assistant_message": "Deployed to staging."});
    let (status, out) = app.post("/v1/hooks/claude-code", &stop).await;
    assert_eq!(status, 200, "{out}");
    fake.state.push(
        conn,
        "aibot_msg_callback",
        "req-s1",
        text("m-s1", APPROVER, CHATS[0], "@imrelay sessions"),
    );
    wait_until("the listing", || {
        !fake.state.sent("aibot_respond_msg").is_empty()
    })
    .await;
    let (_, reply) = fake.state.sent("aibot_respond_msg")[0].clone();
    assert_eq!(reply["headers"]["req_id"], "req-s1");
    let listing = reply["body"]["stream"]["content"].as_str().unwrap();
    assert!(listing.starts_with("Sessions\n"), "{listing}");
    assert!(
        listing.contains("finished · claude-code · /srv/shop"),
        "{listing}"
    );
    fake.state.push(
        conn,
        "aibot_msg_callback",
        "req-s2",
        text("m-s2", "stranger", CHATS[0], "/sessions"),
    );
    wait_until("the refusal", || {
        fake.state.sent("aibot_respond_msg").len() >= 2
    })
    .await;
    let (_, reply) = fake.state.sent("aibot_respond_msg")[1].clone();
    assert_eq!(
        reply["body"]["stream"]["content"],
        "Only approvers can list the sessions."
    );
    app.stop().await;
}

#[tokio::test]
async fn past_digest_after_a_chat_gets_one_digest_card_approved_all_once_confirmed() {
    let (fake, app) = start_with(|s| {
        s.wecom.chats = vec![CHATS[0].to_string()];
        s.wecom.digest_after = 1;
    })
    .await;
    for k in 0..3 {
        let (s, body) = app
            .post(
                "/v1/interactions",
                &json!({"id": format!("toolu_wd{k}"), "tool_name": "Bash",
                    "input": {"command": format!("step-{k}")}, "session": "s-1", "cwd": "/srv/app"}),
            )
            .await;
        assert_eq!(s, StatusCode::CREATED, "{body}");
    }
    // The first gets its own card; the two past `digest_after` share one digest card.
    let digest = || {
        sent(&fake, "aibot_send_msg", |b| {
            b["msgtype"] == "template_card" && b.to_string().contains("requests from session")
        })
        .last()
        .map(|f| f["body"]["template_card"].clone())
    };
    wait_until("a digest card", || digest().is_some()).await;
    let card = digest().unwrap();
    let task = card["task_id"].as_str().unwrap().to_string();
    // WeCom changes a card only in answer to a click: the card lists what was held when it
    // was sent, and a click shows the list as it now is.
    let title = card["main_title"]["title"].as_str().unwrap();
    assert!(title.contains("requests"), "{card}");
    // A list that grew since the card was sent is shown anew first (stale, nothing answered).
    let mut shown = card.clone();
    let mut confirm = Value::Null;
    for n in 0..3 {
        let body = card_click(
            &format!("m-wd1-{n}"),
            APPROVER,
            CHATS[0],
            &key(&shown, "Approve all"),
            &task,
        );
        let asked = click(&fake, &format!("req-wd1-{n}"), body).await;
        let redrawn = asked["body"]["template_card"].clone();
        if redrawn["button_list"][0]["text"]
            .as_str()
            .unwrap_or("")
            .starts_with("Yes")
        {
            confirm = redrawn;
            break;
        }
        shown = redrawn;
    }
    let confirm = &confirm;
    let yes = confirm["button_list"][0]["text"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(yes.starts_with("Yes"), "{confirm}");
    let listed: u32 = yes
        .chars()
        .filter(char::is_ascii_digit)
        .collect::<String>()
        .parse()
        .unwrap();
    let body = card_click("m-wd2", APPROVER, CHATS[0], &key(confirm, &yes), &task);
    let done = click(&fake, "req-wd2", body).await;
    assert!(done.to_string().contains("Approved"), "{done}");
    let mut allowed = 0;
    for k in 0..3 {
        let (_, i) = app.get(&format!("/v1/interactions/toolu_wd{k}")).await;
        if i["resolution"]["outcome"] == "allowed" {
            allowed += 1;
        }
    }
    assert_eq!(
        allowed, listed,
        "the confirmation answered exactly what it listed"
    );
    assert!(listed >= 1);
    app.stop().await;
}
