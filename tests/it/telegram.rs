//! The Telegram channel against a fake Bot API (teloxide pointed at it with `api_url`):
//! prompts and keyboards, taps, ForceReply answers, questions, refusals, races, edits on
//! resolution from anywhere, rate limits and outages, restarts, webhook and polling.

pub(crate) mod fake;

use std::sync::Arc;
use std::time::Duration;

use imrelay::channels::telegram::Mode;
use imrelay::config::{Secret, Settings};
use imrelay::store::{MemoryStore, Store};
use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::support::*;
use fake::*;

const ALICE: Person = Person {
    id: 1001,
    first_name: "Alice",
};
const BOB: Person = Person {
    id: 1002,
    first_name: "Bob",
};
const MALLORY: Person = Person {
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

async fn start_with(mode: Mode, f: impl FnOnce(&mut Settings)) -> (TestApp, FakeTelegram) {
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
async fn deliver(app: &TestApp, update: &Value) -> StatusCode {
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

// ---- end to end ---------------------------------------------------------------------------

#[tokio::test]
async fn one_tap_in_telegram_answers_the_agent_end_to_end() {
    let (app, tg) = start(Mode::Polling).await;
    // Polling mode removes any webhook before it polls.
    let polls = tg.wait_n("getUpdates", 1).await;
    let deletes = tg.calls("deleteWebhook");
    assert_eq!(deletes.len(), 1);
    assert!(deletes[0].at <= polls[0].at);
    assert_eq!(
        polls[0].params["allowed_updates"],
        json!(["message", "callback_query"])
    );

    let id = app.create_bash("toolu_e2e", "cargo publish").await;
    let waiter = {
        let client = app.client.clone();
        let url = app.url(&format!("/v1/interactions/{id}/wait?timeout_secs=30"));
        tokio::spawn(async move { split(client.get(url).send().await.unwrap()).await })
    };
    let private = prompt(&tg, PRIVATE, "cargo publish").await;
    let group = prompt(&tg, GROUP, "cargo publish").await;
    let u = tg.next_update_id();
    tg.push_update(tap(
        u,
        ALICE,
        PRIVATE,
        private.message_id,
        &private.button("✅ Allow"),
    ));

    let (s, body) = waiter.await.unwrap();
    assert_eq!(s, StatusCode::OK, "{body}");
    assert_eq!(
        body["result"],
        json!({"behavior": "allow", "updatedInput": {"command": "cargo publish"}})
    );
    assert_eq!(body["resolution"]["by"], "Alice");
    assert_eq!(body["resolution"]["via"], "telegram");
    assert_eq!(toast(&tg, u).await, "Allowed");
    // The audit trail names the user by their stable Telegram id, not only the display name
    // anyone can choose.
    let answered: Vec<Value> = audit_of(&app, &id)
        .await
        .into_iter()
        .filter(|e| e["action"] == "answered")
        .collect();
    assert_eq!(answered.len(), 1, "{answered:?}");
    assert_eq!(answered[0]["actor"], "Alice (tg:1001)");
    assert_eq!(answered[0]["channel"], "telegram");

    // Every copy shows who answered, where and when, without buttons.
    for p in [&private, &group] {
        let e = edited(&tg, p.chat, p.message_id, "Allowed by Alice via telegram").await;
        assert_eq!(e["reply_markup"], json!({"inline_keyboard": []}));
        assert_eq!(e["parse_mode"], "HTML");
        assert!(e["text"].as_str().unwrap().contains("cargo publish"));
        assert!(e["text"].as_str().unwrap().contains("🕑"));
    }
    app.stop().await;
}

// ---- rendering ----------------------------------------------------------------------------

#[tokio::test]
async fn approval_prompts_escape_hostile_input_and_carry_bound_buttons() {
    let (app, tg) = start(Mode::Webhook).await;
    let id = create(
        &app,
        json!({"id": "toolu_html", "tool_name": "Bash", "agent": "claude-code", "session": "s-<1>",
               "cwd": "/srv/a&b", "title": "Run <b>this</b>",
               "input": {"command": "echo '<script>alert(1)</script>' && rm -rf /tmp/x"}}),
    )
    .await;
    let p = prompt(&tg, GROUP, "rm -rf /tmp/x").await;
    assert_eq!(p.params["parse_mode"], "HTML");
    assert!(
        p.text.contains("&lt;script&gt;alert(1)&lt;/script&gt;"),
        "{}",
        p.text
    );
    assert!(p.text.contains("&amp;&amp; rm -rf /tmp/x"));
    assert!(!p.text.contains("<script>"));
    assert!(p.text.contains("Run &lt;b&gt;this&lt;/b&gt;"));
    assert!(p.text.contains("/srv/a&amp;b"));
    assert!(p.text.contains("session s-&lt;1&gt;"));
    assert!(p.text.contains("<b>Bash</b> needs approval"));
    assert!(p.text.contains("⏳ Answer within 5 min"));
    let labels: Vec<String> = p.buttons().into_iter().map(|b| b.0).collect();
    assert_eq!(labels, ["✅ Allow", "❌ Deny", "💬 Deny with reason…"]);
    for (_, data) in p.buttons() {
        assert!(data.len() <= 64, "{data}");
        assert!(!data.contains(&id), "the data carries a handle, not the id");
    }
    // Every button is distinct: one interaction, one action each.
    let mut datas: Vec<String> = p.buttons().into_iter().map(|b| b.1).collect();
    datas.sort();
    datas.dedup();
    assert_eq!(datas.len(), 3);
    app.stop().await;
}

#[tokio::test]
async fn long_input_is_cut_to_fit_with_a_note() {
    let (app, tg) = start(Mode::Webhook).await;
    let content = "<x>&".repeat(3000);
    create(
        &app,
        json!({"tool_name": "Write", "input": {"file_path": "/tmp/big", "content": content}}),
    )
    .await;
    let p = prompt(&tg, PRIVATE, "/tmp/big").await;
    assert!(p.text.encode_utf16().count() <= 4096, "{}", p.text.len());
    assert!(p.text.contains("more characters not shown"), "{}", p.text);
    app.stop().await;
}

#[tokio::test]
async fn question_prompts_show_options_descriptions_toggles_and_other() {
    let (app, tg) = start(Mode::Webhook).await;
    create(
        &app,
        json!({"tool_name": "AskUserQuestion", "input": questions_input()}),
    )
    .await;
    let p = prompt(&tg, PRIVATE, "Which color?").await;
    assert!(p.text.contains("Which toppings?"));
    assert!(p.text.contains("warm &amp; &lt;bold&gt;"), "{}", p.text);
    let labels: Vec<String> = p.buttons().into_iter().map(|b| b.0).collect();
    assert_eq!(
        labels,
        [
            "1· Red",
            "1· Blue",
            "1· ✏️ Other…",
            "2· ☐ Cheese",
            "2· ☐ Ham",
            "2· ☐ Olives",
            "2· ✏️ Other…",
            "2· 📨 Submit",
            "❌ Decline"
        ]
    );
    app.stop().await;
}

#[tokio::test]
async fn the_fake_refuses_what_telegram_refuses() {
    let tg = FakeTelegram::start().await;
    let client = reqwest::Client::new();
    let send = |method: &'static str, body: Value| {
        let req = client
            .post(format!("{}/bot{TOKEN}/{method}", tg.url))
            .json(&body);
        async move {
            let r = req.send().await.unwrap();
            (r.status(), r.json::<Value>().await.unwrap())
        }
    };
    let html = |text: &str| json!({"chat_id": 1, "text": text, "parse_mode": "HTML"});
    let fine = [
        "<b>a</b> &lt;x&gt; &amp; &quot; &#128512; <a href=\"tg://user?id=1\">A</a>",
        "<pre><code class=\"language-bash\">ls</code></pre>",
    ];
    for text in fine {
        let (s, body) = send("sendMessage", html(text)).await;
        assert_eq!(s, StatusCode::OK, "{text}: {body}");
    }
    // 4096 units of shown text are fine, though the HTML is longer.
    let (s, _) = send("sendMessage", html(&"&amp;".repeat(4096))).await;
    assert_eq!(s, StatusCode::OK);
    let bad = [
        html("<script>x</script>"),
        html("<b>unclosed"),
        html("<b><i>crossed</b></i>"),
        html("a < b"),
        html("a & b"),
        html("&lt;b&gt;&nbsp;"),
        html(&"😀".repeat(2049)),
        json!({"chat_id": 1, "text": "x".repeat(4097)}),
        json!({"chat_id": 1, "text": " "}),
        json!({"chat_id": 1, "text": "k", "reply_markup": {"inline_keyboard": [[{"text": "A", "callback_data": "x".repeat(65)}]]}}),
        json!({"chat_id": 1, "text": "k", "reply_markup": {"inline_keyboard": [[{"text": "A", "callback_data": ""}]]}}),
    ];
    for body in &bad {
        let (s, answer) = send("sendMessage", body.clone()).await;
        assert_eq!(s, StatusCode::BAD_REQUEST, "{body}");
        assert!(
            answer["description"]
                .as_str()
                .unwrap()
                .starts_with("Bad Request"),
            "{answer}"
        );
    }
    let (s, _) = send(
        "answerCallbackQuery",
        json!({"callback_query_id": "q", "text": "x".repeat(201)}),
    )
    .await;
    assert_eq!(s, StatusCode::BAD_REQUEST);
    assert_eq!(tg.take_refusals().len(), bad.len() + 1);
    assert_eq!(tg.calls("sendMessage").len(), fine.len() + 1);
}

// ---- approvals ----------------------------------------------------------------------------

#[tokio::test]
async fn deny_button_denies_with_a_message_naming_who() {
    let (app, tg) = start(Mode::Webhook).await;
    let id = app.create_bash("toolu_deny", "git push --force").await;
    let p = prompt(&tg, GROUP, "git push --force").await;
    assert_eq!(
        tap_on(&app, &tg, BOB, &p, &p.button("❌ Deny")).await,
        "Denied"
    );
    let body = status(&app, &id).await;
    assert_eq!(body["resolution"]["outcome"], "denied");
    assert_eq!(
        body["resolution"]["result"],
        json!({"behavior": "deny", "message": "Denied by Bob via telegram", "interrupt": false})
    );
    edited(&tg, GROUP, p.message_id, "Denied by Bob via telegram").await;
    app.stop().await;
}

#[tokio::test]
async fn always_allow_applies_the_agents_suggestions() {
    let (app, tg) = start(Mode::Webhook).await;
    let rule = json!([{"type": "addRules", "rules": [{"toolName": "Bash", "ruleContent": "npm test"}],
                       "behavior": "allow", "destination": "session"}]);
    let id = create(
        &app,
        json!({"tool_name": "Bash", "input": {"command": "npm test"}, "suggestions": rule}),
    )
    .await;
    let p = prompt(&tg, PRIVATE, "npm test").await;
    assert_eq!(
        tap_on(&app, &tg, ALICE, &p, &p.button("✅ Always allow")).await,
        "Allowed"
    );
    let body = status(&app, &id).await;
    assert_eq!(body["resolution"]["result"]["updatedPermissions"], rule);
    // Without suggestions there is no such button.
    app.create_bash("toolu_plain", "npm ci").await;
    let plain = prompt(&tg, PRIVATE, "npm ci").await;
    assert!(plain.buttons().iter().all(|(t, _)| t != "✅ Always allow"));
    app.stop().await;
}

#[tokio::test]
async fn deny_with_reason_asks_for_a_reply_and_uses_it() {
    let (app, tg) = start(Mode::Webhook).await;
    let id = app.create_bash("toolu_reason", "terraform destroy").await;
    let p = prompt(&tg, GROUP, "terraform destroy").await;
    let t = tap_on(&app, &tg, ALICE, &p, &p.button("💬 Deny with reason…")).await;
    assert!(t.contains("Reply"), "{t}");
    // A selective ForceReply, replying to the prompt, mentioning the tapper.
    let ask = tg
        .wait_for("sendMessage", |c| {
            c.iter()
                .any(|c| c.params["reply_markup"]["force_reply"] == true)
        })
        .await;
    let ask = ask
        .iter()
        .find(|c| c.params["reply_markup"]["force_reply"] == true)
        .unwrap()
        .clone();
    assert_eq!(ask.params["reply_markup"]["selective"], true);
    assert_eq!(ask.params["reply_parameters"]["message_id"], p.message_id);
    assert!(
        ask.params["text"]
            .as_str()
            .unwrap()
            .contains("tg://user?id=1001")
    );
    assert_eq!(status(&app, &id).await["status"], "pending");

    let reply_to = ask.message_id.unwrap();
    let u = tg.next_update_id();
    deliver(
        &app,
        &text(u, ALICE, GROUP, "not on <prod> & not today", Some(reply_to)),
    )
    .await;
    let body = status(&app, &id).await;
    assert_eq!(
        body["resolution"]["result"]["message"],
        "not on <prod> & not today"
    );
    assert_eq!(body["resolution"]["by"], "Alice");
    // The prompt shows the reason (escaped); the request shows it is settled.
    let e = edited(&tg, GROUP, p.message_id, "Denied by Alice via telegram").await;
    assert!(
        e["text"]
            .as_str()
            .unwrap()
            .contains("not on &lt;prod&gt; &amp; not today")
    );
    edited(&tg, GROUP, reply_to, "Denied by Alice").await;
    app.stop().await;
}

#[tokio::test]
async fn text_fallback_replies_allow_and_deny_the_replied_to_prompt() {
    let (app, tg) = start(Mode::Webhook).await;
    let a = app.create_bash("toolu_text_a", "make deploy").await;
    let b = app.create_bash("toolu_text_b", "make clean").await;
    let pa = prompt(&tg, PRIVATE, "make deploy").await;
    let pb = prompt(&tg, PRIVATE, "make clean").await;
    deliver(
        &app,
        &text(
            tg.next_update_id(),
            ALICE,
            PRIVATE,
            "deny too risky today",
            Some(pa.message_id),
        ),
    )
    .await;
    deliver(
        &app,
        &text(
            tg.next_update_id(),
            ALICE,
            PRIVATE,
            "Allow",
            Some(pb.message_id),
        ),
    )
    .await;
    let ra = status(&app, &a).await;
    assert_eq!(ra["resolution"]["result"]["message"], "too risky today");
    let rb = status(&app, &b).await;
    assert_eq!(rb["resolution"]["outcome"], "allowed");
    assert_eq!(rb["resolution"]["via"], "telegram");
    // Nonsense gets a hint and changes nothing.
    let c = app.create_bash("toolu_text_c", "make test").await;
    let pc = prompt(&tg, PRIVATE, "make test").await;
    deliver(
        &app,
        &text(
            tg.next_update_id(),
            ALICE,
            PRIVATE,
            "maybe?",
            Some(pc.message_id),
        ),
    )
    .await;
    tg.wait_for("sendMessage", |c| {
        c.iter().any(|c| {
            c.params["text"]
                .as_str()
                .unwrap_or("")
                .contains("reply “allow” or “deny [reason]”")
        })
    })
    .await;
    assert_eq!(status(&app, &c).await["status"], "pending");
    app.stop().await;
}

#[tokio::test]
async fn a_reply_starting_with_a_slash_is_an_answer_not_a_command() {
    let (app, tg) = start(Mode::Webhook).await;
    let id = app.create_bash("toolu_slash", "cat /etc/passwd").await;
    let p = prompt(&tg, GROUP, "cat /etc/passwd").await;
    tap_on(&app, &tg, ALICE, &p, &p.button("💬 Deny with reason…")).await;
    let ask = reply_request(&tg, 1).await;
    deliver(
        &app,
        &text(
            tg.next_update_id(),
            ALICE,
            GROUP,
            "/etc is off-limits",
            ask.message_id,
        ),
    )
    .await;
    let body = status(&app, &id).await;
    assert_eq!(
        body["resolution"]["result"]["message"],
        "/etc is off-limits"
    );

    // The same for an "Other…" answer.
    let q = create(
        &app,
        json!({"tool_name": "AskUserQuestion", "input": {"questions": [
            {"question": "Install where?", "header": "Prefix",
             "options": [{"label": "~/.local"}, {"label": "/opt"}]}]}}),
    )
    .await;
    let pq = prompt(&tg, GROUP, "Install where?").await;
    tap_on(&app, &tg, BOB, &pq, &pq.button("✏️ Other…")).await;
    let ask = reply_request(&tg, 2).await;
    deliver(
        &app,
        &text(
            tg.next_update_id(),
            BOB,
            GROUP,
            "/usr/local",
            ask.message_id,
        ),
    )
    .await;
    assert_eq!(
        status(&app, &q).await["resolution"]["result"]["updatedInput"]["answers"],
        json!({"Install where?": "/usr/local"})
    );
    // A command replying to a prompt is still a command.
    let c = app.create_bash("toolu_slash_cmd", "ls /").await;
    let pc = prompt(&tg, GROUP, "ls /").await;
    deliver(
        &app,
        &text(
            tg.next_update_id(),
            ALICE,
            GROUP,
            "/whoami",
            Some(pc.message_id),
        ),
    )
    .await;
    assert!(
        notices(&tg, GROUP)
            .iter()
            .any(|n| n.contains("<code>1001</code>")),
        "{:?}",
        notices(&tg, GROUP)
    );
    assert_eq!(status(&app, &c).await["status"], "pending");
    app.stop().await;
}

#[tokio::test]
async fn only_the_tapper_can_answer_their_reply_request() {
    let (app, tg) = start(Mode::Webhook).await;
    let id = app.create_bash("toolu_whose", "drop table users").await;
    let p = prompt(&tg, GROUP, "drop table users").await;
    tap_on(&app, &tg, ALICE, &p, &p.button("💬 Deny with reason…")).await;
    let ask = reply_request(&tg, 1).await;
    // Bob, an approver too, replies to Alice's request: not taken, and he is told why.
    deliver(
        &app,
        &text(
            tg.next_update_id(),
            BOB,
            GROUP,
            "Bob's reason",
            ask.message_id,
        ),
    )
    .await;
    assert_eq!(status(&app, &id).await["status"], "pending");
    assert!(
        notices(&tg, GROUP)
            .iter()
            .any(|n| n.contains("for the person who tapped the button")),
        "{:?}",
        notices(&tg, GROUP)
    );
    let m = app.metrics().await;
    assert!(
        m.contains("imrelay_telegram_refused_total{reason=\"foreign_reply\"} 1"),
        "{m}"
    );
    let refused: Vec<Value> = audit_of(&app, &id)
        .await
        .into_iter()
        .filter(|e| e["action"] == "refused")
        .collect();
    assert_eq!(refused.len(), 1, "{refused:?}");
    assert_eq!(refused[0]["actor"], "Bob (tg:1002)");
    // Alice's own reply is taken.
    deliver(
        &app,
        &text(
            tg.next_update_id(),
            ALICE,
            GROUP,
            "Alice's reason",
            ask.message_id,
        ),
    )
    .await;
    let body = status(&app, &id).await;
    assert_eq!(body["resolution"]["result"]["message"], "Alice's reason");
    assert_eq!(body["resolution"]["by"], "Alice");
    app.stop().await;
}

// ---- questions ----------------------------------------------------------------------------

#[tokio::test]
async fn multi_select_toggles_rerender_then_submit_answers() {
    let (app, tg) = start(Mode::Webhook).await;
    let id = create(
        &app,
        json!({"tool_name": "AskUserQuestion", "input": {"questions": [
            {"question": "Which toppings?", "header": "Toppings", "multiSelect": true,
             "options": [{"label": "Cheese"}, {"label": "Ham"}, {"label": "Olives"}]}]}}),
    )
    .await;
    let p = prompt(&tg, PRIVATE, "Which toppings?").await;
    // Submit with nothing chosen is refused, politely.
    let t = tap_on(&app, &tg, ALICE, &p, &p.button("📨 Submit")).await;
    assert!(t.contains("Choose at least one"), "{t}");

    assert_eq!(
        tap_on(&app, &tg, ALICE, &p, &p.button("☐ Cheese")).await,
        "☑ Cheese"
    );
    let e = edited(&tg, PRIVATE, p.message_id, "Which toppings?").await;
    let texts: Vec<String> = e["reply_markup"]["inline_keyboard"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|r| r.as_array().unwrap().clone())
        .map(|b| b["text"].as_str().unwrap().to_string())
        .collect();
    assert!(texts.contains(&"☑ Cheese".to_string()), "{texts:?}");
    assert!(texts.contains(&"☐ Ham".to_string()), "{texts:?}");
    assert_eq!(
        tap_on(&app, &tg, ALICE, &p, &p.button("☐ Ham")).await,
        "☑ Ham"
    );
    assert_eq!(
        tap_on(&app, &tg, ALICE, &p, &p.button("☐ Olives")).await,
        "☑ Olives"
    );
    // The same button again turns it off (the data on the old keyboard is still valid).
    assert_eq!(
        tap_on(&app, &tg, ALICE, &p, &p.button("☐ Olives")).await,
        "☐ Olives"
    );
    assert_eq!(status(&app, &id).await["status"], "pending");

    assert_eq!(
        tap_on(&app, &tg, ALICE, &p, &p.button("📨 Submit")).await,
        "Answered"
    );
    let body = status(&app, &id).await;
    assert_eq!(
        body["resolution"]["result"]["updatedInput"]["answers"],
        json!({"Which toppings?": "Cheese, Ham"})
    );
    let e = edited(&tg, PRIVATE, p.message_id, "Answered by Alice via telegram").await;
    assert!(e["text"].as_str().unwrap().contains("Cheese, Ham"));
    app.stop().await;
}

// Several worker threads, so that updates handled concurrently could really swap places.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_polled_batch_is_handled_in_order_and_each_update_once() {
    let (app, tg) = start(Mode::Polling).await;
    let id = create(
        &app,
        json!({"tool_name": "AskUserQuestion", "input": {"questions": [
            {"question": "Which toppings?", "header": "Toppings", "multiSelect": true,
             "options": [{"label": "Cheese"}, {"label": "Ham"}, {"label": "Olives"}]}]}}),
    )
    .await;
    let p = prompt(&tg, PRIVATE, "Which toppings?").await;
    let on = |u: i64, label: &str| tap(u, ALICE, PRIVATE, p.message_id, &p.button(label));
    let ids: Vec<i64> = (0..5).map(|_| tg.next_update_id()).collect();
    let first = on(ids[0], "☐ Cheese");
    // One getUpdates answer: toggles, a re-delivered update, an untoggle, then Submit.
    tg.push_updates(vec![
        first.clone(),
        on(ids[1], "☐ Ham"),
        first,
        on(ids[2], "☐ Olives"),
        on(ids[3], "☐ Olives"),
        on(ids[4], "📨 Submit"),
    ]);
    assert_eq!(toast(&tg, ids[4]).await, "Answered");
    assert_eq!(
        status(&app, &id).await["resolution"]["result"]["updatedInput"]["answers"],
        json!({"Which toppings?": "Cheese, Ham"})
    );
    assert_eq!(toast(&tg, ids[2]).await, "☑ Olives");
    assert_eq!(toast(&tg, ids[3]).await, "☐ Olives");
    // A re-delivery in a later batch (a poll after a crash) is ignored too.
    tg.push_update(on(ids[1], "☐ Ham"));
    app.metrics_with("imrelay_telegram_updates_total{kind=\"duplicate\"} 2")
        .await;
    let answers_to = |u: i64| {
        tg.calls("answerCallbackQuery")
            .iter()
            .filter(|c| c.params["callback_query_id"] == format!("cq-{u}").as_str())
            .count()
    };
    assert_eq!(answers_to(ids[0]), 1);
    assert_eq!(answers_to(ids[1]), 1);
    app.stop().await;
}

#[tokio::test]
async fn a_429_on_a_rerender_or_a_reply_request_is_waited_out() {
    let (app, tg) = start_with(Mode::Webhook, |s| s.telegram.chats = vec![PRIVATE]).await;
    let id = create(
        &app,
        json!({"tool_name": "AskUserQuestion", "input": {"questions": [
            {"question": "Which toppings?", "header": "Toppings", "multiSelect": true,
             "options": [{"label": "Cheese"}, {"label": "Ham"}]}]}}),
    )
    .await;
    let p = prompt(&tg, PRIVATE, "Which toppings?").await;
    // The re-render after a toggle meets a 429 once: it is sent again after retry_after,
    // so the keyboard does not keep showing ☐.
    tg.fail("editMessageText", Fail::RetryAfter(1), 1);
    assert_eq!(
        tap_on(&app, &tg, ALICE, &p, &p.button("☐ Cheese")).await,
        "☑ Cheese"
    );
    let edits = tg.wait_n("editMessageText", 2).await;
    assert!(edits[1].at - edits[0].at >= Duration::from_millis(990));
    let keyboard = edits[1].params["reply_markup"].to_string();
    assert!(keyboard.contains("☑ Cheese"), "{keyboard}");
    // The reply request promised by the toast meets a 429 once: it still comes.
    tg.fail("sendMessage", Fail::RetryAfter(1), 1);
    let t = tap_on(&app, &tg, ALICE, &p, &p.button("✏️ Other…")).await;
    assert!(t.contains("Reply"), "{t}");
    let asks = tg
        .wait_for("sendMessage", |c| {
            c.iter()
                .filter(|c| c.params["reply_markup"]["force_reply"] == true)
                .count()
                == 2
        })
        .await;
    let ask = asks.last().unwrap();
    deliver(
        &app,
        &text(
            tg.next_update_id(),
            ALICE,
            PRIVATE,
            "Pineapple",
            ask.message_id,
        ),
    )
    .await;
    tap_on(&app, &tg, ALICE, &p, &p.button("📨 Submit")).await;
    assert_eq!(
        status(&app, &id).await["resolution"]["result"]["updatedInput"]["answers"],
        json!({"Which toppings?": "Cheese, Pineapple"})
    );
    app.stop().await;
}

#[tokio::test]
async fn other_takes_free_text_by_reply() {
    let (app, tg) = start(Mode::Webhook).await;
    let id = create(
        &app,
        json!({"tool_name": "AskUserQuestion", "input": {"questions": [
            {"question": "Which color?", "header": "Color",
             "options": [{"label": "Red"}, {"label": "Blue"}]}]}}),
    )
    .await;
    let p = prompt(&tg, GROUP, "Which color?").await;
    let t = tap_on(&app, &tg, BOB, &p, &p.button("✏️ Other…")).await;
    assert!(t.contains("Reply"), "{t}");
    let asks = tg
        .wait_for("sendMessage", |c| {
            c.iter()
                .any(|c| c.params["reply_markup"]["force_reply"] == true)
        })
        .await;
    let ask = asks
        .iter()
        .find(|c| c.params["reply_markup"]["force_reply"] == true)
        .unwrap();
    assert!(
        ask.params["text"]
            .as_str()
            .unwrap()
            .contains("Which color?")
    );
    deliver(
        &app,
        &text(
            tg.next_update_id(),
            BOB,
            GROUP,
            "Green, please",
            ask.message_id,
        ),
    )
    .await;
    let body = status(&app, &id).await;
    assert_eq!(
        body["resolution"]["result"]["updatedInput"]["answers"],
        json!({"Which color?": "Green, please"})
    );
    assert_eq!(body["resolution"]["by"], "Bob");
    app.stop().await;
}

#[tokio::test]
async fn several_questions_resolve_only_when_all_are_answered() {
    let (app, tg) = start(Mode::Webhook).await;
    let id = create(
        &app,
        json!({"tool_name": "AskUserQuestion", "input": questions_input()}),
    )
    .await;
    let p = prompt(&tg, PRIVATE, "Which color?").await;

    assert_eq!(
        tap_on(&app, &tg, ALICE, &p, &p.button("1· Red")).await,
        "Chosen: Red"
    );
    assert_eq!(status(&app, &id).await["status"], "pending");
    // Re-rendered: the answer shows, the first question's buttons are gone.
    let e = edited(&tg, PRIVATE, p.message_id, "✔ <b>Red</b>").await;
    let rows = e["reply_markup"]["inline_keyboard"].to_string();
    assert!(!rows.contains("1· Blue"), "{rows}");
    assert!(rows.contains("2· ☐ Cheese"), "{rows}");
    // A second tap on the answered question changes nothing.
    let t = tap_on(&app, &tg, BOB, &p, &p.button("1· Blue")).await;
    assert!(t.contains("already answered"), "{t}");

    // Other text for a multi-select question joins the toggles.
    tap_on(&app, &tg, ALICE, &p, &p.button("2· ☐ Olives")).await;
    tap_on(&app, &tg, ALICE, &p, &p.button("2· ✏️ Other…")).await;
    let asks = tg
        .wait_for("sendMessage", |c| {
            c.iter()
                .any(|c| c.params["reply_markup"]["force_reply"] == true)
        })
        .await;
    let ask = asks
        .iter()
        .find(|c| c.params["reply_markup"]["force_reply"] == true)
        .unwrap();
    deliver(
        &app,
        &text(
            tg.next_update_id(),
            ALICE,
            PRIVATE,
            "Pineapple",
            ask.message_id,
        ),
    )
    .await;
    edited(&tg, PRIVATE, p.message_id, "Which toppings?").await;
    assert_eq!(status(&app, &id).await["status"], "pending");
    assert_eq!(
        tap_on(&app, &tg, ALICE, &p, &p.button("2· 📨 Submit")).await,
        "Answered"
    );
    let body = status(&app, &id).await;
    assert_eq!(
        body["resolution"]["result"]["updatedInput"]["answers"],
        json!({"Which color?": "Red", "Which toppings?": "Olives, Pineapple"})
    );
    app.stop().await;
}

// ---- who may answer, and races ------------------------------------------------------------

#[tokio::test]
async fn a_non_approver_tap_changes_nothing() {
    let (app, tg) = start(Mode::Webhook).await;
    let id = app.create_bash("toolu_mallory", "cat /etc/shadow").await;
    let p = prompt(&tg, GROUP, "cat /etc/shadow").await;
    assert_eq!(
        tap_on(&app, &tg, MALLORY, &p, &p.button("✅ Allow")).await,
        "You are not an approver for this"
    );
    // Replies do not work either.
    deliver(
        &app,
        &text(
            tg.next_update_id(),
            MALLORY,
            GROUP,
            "allow",
            Some(p.message_id),
        ),
    )
    .await;
    assert_eq!(status(&app, &id).await["status"], "pending");
    let m = app.metrics().await;
    assert!(
        m.contains("imrelay_telegram_refused_total{reason=\"not_approver\"} 2"),
        "{m}"
    );
    // Counted with every channel's refusals too; bound to an interaction, so never suppressed.
    assert!(
        m.contains("imrelay_answer_refusals_total{channel=\"telegram\"} 2"),
        "{m}"
    );
    assert!(!m.contains("imrelay_refusals_suppressed_total{"), "{m}");
    // Both attempts are in the audit trail, naming Mallory by her Telegram id.
    let refused: Vec<Value> = audit_of(&app, &id)
        .await
        .into_iter()
        .filter(|e| e["action"] == "refused")
        .collect();
    assert_eq!(refused.len(), 2, "{refused:?}");
    for r in &refused {
        assert_eq!(r["actor"], "Mallory (tg:666)");
        assert_eq!(r["channel"], "telegram");
        assert_eq!(r["outcome"], "refused");
        assert!(
            r["detail"]
                .as_str()
                .unwrap()
                .contains("not in telegram.approvers"),
            "{r}"
        );
    }
    assert!(tg.calls("editMessageText").is_empty());
    // Her reply got no answer: strangers cannot make the bot talk.
    assert_eq!(notices(&tg, GROUP), Vec::<String>::new());
    app.stop().await;
}

#[tokio::test]
async fn strangers_get_little_out_of_the_bot_and_approvers_everything() {
    let (app, tg) = start(Mode::Webhook).await;
    tg.wait_n("setWebhook", 1).await;
    let stranger_chat = MALLORY.id;
    let say = |who: Person, chat: i64, body: &str| text(tg.next_update_id(), who, chat, body, None);
    // Small talk from a stranger: no answer at all.
    deliver(&app, &say(MALLORY, stranger_chat, "hello?")).await;
    assert_eq!(notices(&tg, stranger_chat), Vec::<String>::new());
    // Commands: one answer, then a cooldown for that chat.
    for _ in 0..3 {
        deliver(&app, &say(MALLORY, stranger_chat, "/whoami")).await;
        deliver(&app, &say(MALLORY, stranger_chat, "/nonsense")).await;
    }
    let answered = notices(&tg, stranger_chat);
    assert_eq!(answered.len(), 1, "{answered:?}");
    assert!(answered[0].contains("<code>666</code>"));
    // Approvers are never limited.
    for _ in 0..3 {
        deliver(&app, &say(ALICE, PRIVATE, "/whoami")).await;
    }
    deliver(&app, &say(ALICE, PRIVATE, "hello?")).await;
    let to_alice = notices(&tg, PRIVATE);
    assert_eq!(to_alice.len(), 4, "{to_alice:?}");
    assert!(to_alice[3].contains("/pending"), "{to_alice:?}");
    app.stop().await;
}

#[tokio::test]
async fn double_taps_and_racing_approvers_have_one_winner_and_others_are_told() {
    let (app, tg) = start(Mode::Webhook).await;
    let id = app
        .create_bash("toolu_race", "kubectl delete ns prod")
        .await;
    let p = prompt(&tg, GROUP, "kubectl delete ns prod").await;
    let allow = p.button("✅ Allow");
    let deny = p.button("❌ Deny");
    let (ua, ub) = (tg.next_update_id(), tg.next_update_id());
    let (tap_a, tap_b) = (
        tap(ua, ALICE, GROUP, p.message_id, &allow),
        tap(ub, BOB, GROUP, p.message_id, &deny),
    );
    let (sa, sb) = tokio::join!(deliver(&app, &tap_a), deliver(&app, &tap_b));
    assert_eq!((sa, sb), (StatusCode::OK, StatusCode::OK));
    let (ta, tb) = (toast(&tg, ua).await, toast(&tg, ub).await);
    let body = status(&app, &id).await;
    let winner = body["resolution"]["by"].as_str().unwrap().to_string();
    match winner.as_str() {
        "Alice" => {
            assert_eq!(ta, "Allowed");
            assert_eq!(tb, "Already allowed by Alice via telegram");
        }
        "Bob" => {
            assert_eq!(tb, "Denied");
            assert_eq!(ta, "Already denied by Bob via telegram");
        }
        other => panic!("unexpected winner {other}"),
    }
    // A double tap by the winner is told too.
    let again = tap_on(&app, &tg, ALICE, &p, &allow).await;
    assert!(again.starts_with("Already"), "{again}");
    app.stop().await;
}

#[tokio::test]
async fn forged_and_malformed_callback_data_are_refused() {
    let (app, tg) = start(Mode::Webhook).await;
    let a = app.create_bash("toolu_forge_a", "echo a").await;
    let b = app.create_bash("toolu_forge_b", "echo b").await;
    let pa = prompt(&tg, PRIVATE, "echo a").await;
    let pb = prompt(&tg, PRIVATE, "echo b").await;
    let deny_a = pa.button("❌ Deny");
    // The action altered without the key: deny turned into allow.
    let forged = format!("{}a{}", &deny_a[..1], &deny_a[2..]);
    // One character of the MAC changed.
    let mut mac_flipped = deny_a.clone().into_bytes();
    mac_flipped[20] = if mac_flipped[20] == b'A' { b'B' } else { b'A' };
    let mut cases = vec![
        "perm:allow".to_string(),
        "".to_string(),
        forged,
        "x".repeat(64),
        String::from_utf8(mac_flipped).unwrap(),
    ];
    cases.push(deny_a.replace(&deny_a[4..15], "AAAAAAAAAAA"));
    for data in &cases {
        let t = tap_on(&app, &tg, ALICE, &pa, data).await;
        assert_eq!(t, "This button is not valid.", "{data:?}");
    }
    // A genuine button of B, sent from A's message, is refused too.
    let t = tap_on(&app, &tg, ALICE, &pa, &pb.button("✅ Allow")).await;
    assert_eq!(t, "This button is not valid.");
    assert_eq!(status(&app, &a).await["status"], "pending");
    assert_eq!(status(&app, &b).await["status"], "pending");
    let m = app.metrics().await;
    assert!(
        m.contains(&format!(
            "imrelay_telegram_refused_total{{reason=\"bad_data\"}} {}",
            cases.len()
        )),
        "{m}"
    );
    assert!(
        m.contains("imrelay_telegram_refused_total{reason=\"foreign_message\"} 1"),
        "{m}"
    );
    app.stop().await;
}

// ---- resolution elsewhere edits Telegram --------------------------------------------------

#[tokio::test]
async fn a_desktop_answer_edits_every_telegram_copy() {
    let (app, tg) = start(Mode::Webhook).await;
    let id = app.create_bash("toolu_desk", "npm publish").await;
    let private = prompt(&tg, PRIVATE, "npm publish").await;
    let group = prompt(&tg, GROUP, "npm publish").await;
    let (s, body) = app
        .respond(&id, &json!({"decision": "deny", "message": "wrong branch", "by": "Carol", "via": "desktop"}))
        .await;
    assert_eq!(s, StatusCode::OK, "{body}");
    for p in [&private, &group] {
        let e = edited(&tg, p.chat, p.message_id, "Denied by Carol via desktop").await;
        assert!(e["text"].as_str().unwrap().contains("wrong branch"));
        assert_eq!(e["reply_markup"], json!({"inline_keyboard": []}));
    }
    // A late tap is told who won.
    assert_eq!(
        tap_on(&app, &tg, ALICE, &private, &private.button("✅ Allow")).await,
        "Already denied by Carol via desktop"
    );
    app.stop().await;
}

#[tokio::test]
async fn expiry_edits_the_message_and_late_taps_are_told() {
    let (app, tg) = start(Mode::Webhook).await;
    let id = create(
        &app,
        json!({"tool_name": "Bash", "input": {"command": "sleep 1"}, "timeout_secs": 1}),
    )
    .await;
    let p = prompt(&tg, PRIVATE, "sleep 1").await;
    edited(&tg, PRIVATE, p.message_id, "Expired — denied automatically").await;
    assert_eq!(status(&app, &id).await["resolution"]["outcome"], "expired");
    assert_eq!(
        tap_on(&app, &tg, ALICE, &p, &p.button("✅ Allow")).await,
        "Expired — denied automatically"
    );
    app.stop().await;
}

#[tokio::test]
async fn a_resolution_during_the_post_is_shown_as_soon_as_the_post_lands() {
    let (app, tg) = start_with(Mode::Webhook, |s| s.telegram.chats = vec![PRIVATE]).await;
    tg.hold("sendMessage");
    let id = app
        .create_bash("toolu_inflight", "rm -rf node_modules")
        .await;
    tg.wait_n("sendMessage", 1).await;
    // Resolved while the post is in flight: the resolved job finds no message yet.
    let (s, _) = app
        .respond(
            &id,
            &json!({"decision": "allow", "by": "Carol", "via": "desktop"}),
        )
        .await;
    assert_eq!(s, StatusCode::OK);
    tokio::time::sleep(Duration::from_millis(200)).await;
    tg.release("sendMessage");
    let p = prompt(&tg, PRIVATE, "rm -rf node_modules").await;
    edited(&tg, PRIVATE, p.message_id, "Allowed by Carol via desktop").await;
    app.stop().await;
}

// ---- rate limits and outages --------------------------------------------------------------

#[tokio::test]
async fn a_429_retry_after_is_honoured() {
    let (app, tg) = start_with(Mode::Webhook, |s| s.telegram.chats = vec![PRIVATE]).await;
    tg.fail("sendMessage", Fail::RetryAfter(2), 1);
    app.create_bash("toolu_429", "du -sh /").await;
    let calls = tg.wait_n("sendMessage", 2).await;
    let gap = calls[1].at - calls[0].at;
    assert!(
        gap >= Duration::from_millis(1990),
        "retried after {gap:?}, before the 2 s Telegram asked for"
    );
    prompt(&tg, PRIVATE, "du -sh /").await;
    let m = app.metrics().await;
    assert!(
        m.contains(
            "imrelay_telegram_api_calls_total{method=\"sendMessage\",result=\"retry_after\"} 1"
        ),
        "{m}"
    );
    app.stop().await;
}

#[tokio::test]
async fn a_5xx_answer_is_read_and_retried() {
    // teloxide pauses 10 s after any 5xx before it reads the answer; this test waits that
    // out once, on purpose, to see a real 500 answer arrive. The request bound is the
    // largest allowed, so only a 500 that was read and judged transient is retried in time.
    let (app, tg) = start_with(Mode::Webhook, |s| {
        s.telegram.chats = vec![PRIVATE];
        s.telegram.request_timeout_secs = 300;
    })
    .await;
    let id = app.create_bash("toolu_real_500", "make bench").await;
    let p = prompt(&tg, PRIVATE, "make bench").await;
    tg.fail(
        "editMessageText",
        Fail::Status(500, "Internal Server Error".into()),
        1,
    );
    app.respond(
        &id,
        &json!({"decision": "allow", "by": "Carol", "via": "desktop"}),
    )
    .await;
    let edits = tg
        .wait_for_within("editMessageText", Duration::from_secs(60), |c| c.len() >= 2)
        .await;
    assert_eq!(edits.len(), 2);
    assert_eq!(edits[1].params["message_id"], p.message_id);
    let m = deliveries_ok(&app, 2).await;
    assert!(
        m.contains(
            "imrelay_telegram_api_calls_total{method=\"editMessageText\",result=\"transient\"} 1"
        ),
        "{m}"
    );
    assert!(
        m.contains("imrelay_outbox_deliveries_total{channel=\"telegram\",result=\"retry\"} 1"),
        "{m}"
    );
    app.stop().await;
}

#[tokio::test]
async fn calls_cut_short_by_the_request_bound_are_retried_until_they_land() {
    let (app, tg) = start_with(Mode::Webhook, |s| {
        s.telegram.chats = vec![PRIVATE];
        // teloxide pauses 10 s after a 5xx before it answers; the 1 s request bound gives
        // up first, so these calls count as unanswered, not as 500s (see the test above).
        s.telegram.request_timeout_secs = 1;
    })
    .await;
    let id = app.create_bash("toolu_500", "systemctl restart db").await;
    prompt(&tg, PRIVATE, "systemctl restart db").await;
    tg.fail(
        "editMessageText",
        Fail::Status(500, "Internal Server Error".into()),
        2,
    );
    let (s, _) = app
        .respond(
            &id,
            &json!({"decision": "allow", "by": "Carol", "via": "desktop"}),
        )
        .await;
    assert_eq!(s, StatusCode::OK);
    // Two failed attempts, then the edit lands and the job is done.
    let edits = tg.wait_n("editMessageText", 3).await;
    for e in &edits {
        assert!(
            e.params["text"]
                .as_str()
                .unwrap()
                .contains("Allowed by Carol via desktop")
        );
        assert_eq!(e.params["reply_markup"], json!({"inline_keyboard": []}));
    }
    let m = deliveries_ok(&app, 2).await;
    assert!(
        m.contains("imrelay_outbox_deliveries_total{channel=\"telegram\",result=\"retry\"} 2"),
        "{m}"
    );
    assert_eq!(tg.calls("editMessageText").len(), 3);
    app.stop().await;
}

/// Waits until the outbox has finished `n` Telegram deliveries, and returns the metrics.
async fn deliveries_ok(app: &TestApp, n: usize) -> String {
    app.metrics_with(&format!(
        "imrelay_outbox_deliveries_total{{channel=\"telegram\",result=\"ok\"}} {n}"
    ))
    .await
}

#[tokio::test]
async fn a_refused_final_edit_falls_back_to_plain_text_and_never_leaves_buttons() {
    let (app, tg) = start_with(Mode::Webhook, |s| s.telegram.chats = vec![PRIVATE]).await;
    let a = app.create_bash("toolu_refused_edit", "make release").await;
    let pa = prompt(&tg, PRIVATE, "make release").await;
    tg.fail(
        "editMessageText",
        Fail::Status(
            400,
            "Bad Request: can't parse entities: Unsupported start tag \"x\"".into(),
        ),
        1,
    );
    app.respond(
        &a,
        &json!({"decision": "allow", "by": "Carol", "via": "desktop"}),
    )
    .await;
    // The HTML edit is refused; the plain-text one shows the outcome without buttons.
    let edits = tg.wait_n("editMessageText", 2).await;
    assert_eq!(edits[0].params["parse_mode"], "HTML");
    let plain = &edits[1].params;
    assert_eq!(plain["message_id"], pa.message_id);
    assert!(plain["parse_mode"].is_null(), "{plain}");
    let t = plain["text"].as_str().unwrap();
    assert!(t.contains("Allowed by Carol via desktop"), "{t}");
    assert!(t.contains("Approval for Bash") && t.contains("🕑"), "{t}");
    assert_eq!(plain["reply_markup"], json!({"inline_keyboard": []}));

    // Both texts refused: the buttons are removed all the same.
    let b = app.create_bash("toolu_refused_twice", "make publish").await;
    let pb = prompt(&tg, PRIVATE, "make publish").await;
    tg.fail(
        "editMessageText",
        Fail::Status(400, "Bad Request: message is too long".into()),
        2,
    );
    app.respond(
        &b,
        &json!({"decision": "deny", "by": "Carol", "via": "desktop"}),
    )
    .await;
    let removed = tg.wait_n("editMessageReplyMarkup", 1).await;
    assert_eq!(removed[0].params["message_id"], pb.message_id);
    assert_eq!(
        removed[0].params["reply_markup"],
        json!({"inline_keyboard": []})
    );
    // Both jobs count as delivered: 2 posts and 2 final edits.
    let m = deliveries_ok(&app, 4).await;
    assert!(
        !m.contains("imrelay_outbox_deliveries_total{channel=\"telegram\",result=\"failed\"}"),
        "{m}"
    );
    app.stop().await;
}

#[tokio::test]
async fn a_429_on_the_final_edit_is_waited_out() {
    let (app, tg) = start_with(Mode::Webhook, |s| s.telegram.chats = vec![PRIVATE]).await;
    let id = app.create_bash("toolu_429_edit", "make docs").await;
    let p = prompt(&tg, PRIVATE, "make docs").await;
    tg.fail("editMessageText", Fail::RetryAfter(1), 1);
    app.respond(
        &id,
        &json!({"decision": "allow", "by": "Carol", "via": "desktop"}),
    )
    .await;
    let edits = tg.wait_n("editMessageText", 2).await;
    assert!(edits[1].at - edits[0].at >= Duration::from_millis(990));
    let e = edited(&tg, PRIVATE, p.message_id, "Allowed by Carol via desktop").await;
    assert_eq!(e["parse_mode"], "HTML");
    assert_eq!(e["reply_markup"], json!({"inline_keyboard": []}));
    app.stop().await;
}

#[tokio::test]
async fn hostile_names_are_escaped_in_final_edits() {
    const EVE: Person = Person {
        id: 1003,
        first_name: "<script>alert(1)</script> & Eve",
    };
    let (app, tg) = start_with(Mode::Webhook, |s| {
        s.telegram.chats = vec![PRIVATE];
        s.telegram.approvers.push(EVE.id as u64);
    })
    .await;
    // A Telegram user's name.
    let a = app.create_bash("toolu_eve", "make a").await;
    let pa = prompt(&tg, PRIVATE, "make a").await;
    assert_eq!(
        tap_on(&app, &tg, EVE, &pa, &pa.button("✅ Allow")).await,
        "Allowed"
    );
    let e = edited(&tg, PRIVATE, pa.message_id, "Allowed by").await;
    let t = e["text"].as_str().unwrap();
    assert!(
        t.contains("Allowed by &lt;script&gt;alert(1)&lt;/script&gt; &amp; Eve via telegram"),
        "{t}"
    );
    assert_eq!(
        status(&app, &a).await["resolution"]["by"],
        "<script>alert(1)</script> & Eve"
    );
    // A desktop `by` and reason.
    let b = app.create_bash("toolu_desk_hostile", "make b").await;
    let pb = prompt(&tg, PRIVATE, "make b").await;
    app.respond(
        &b,
        &json!({"decision": "deny", "by": "<b>Mallory</b> & co", "via": "desktop",
                "message": "</pre> & <i>nope"}),
    )
    .await;
    let e = edited(&tg, PRIVATE, pb.message_id, "Denied by").await;
    let t = e["text"].as_str().unwrap();
    assert!(
        t.contains("Denied by &lt;b&gt;Mallory&lt;/b&gt; &amp; co via desktop"),
        "{t}"
    );
    assert!(t.contains("&lt;/pre&gt; &amp; &lt;i&gt;nope"), "{t}");
    app.stop().await;
}

#[tokio::test]
async fn a_send_that_finally_fails_is_counted() {
    let (app, tg) = start_with(Mode::Webhook, |s| s.telegram.chats = vec![GROUP]).await;
    tg.fail(
        "sendMessage",
        Fail::Status(400, "Bad Request: chat not found".into()),
        1,
    );
    app.create_bash("toolu_gone", "ls").await;
    tg.wait_n("sendMessage", 1).await;
    app.metrics_with("imrelay_outbox_deliveries_total{channel=\"telegram\",result=\"failed\"} 1")
        .await;
    // Not retried: the chat does not exist.
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(tg.calls("sendMessage").len(), 1);
    app.stop().await;
}

// ---- restarts -----------------------------------------------------------------------------

async fn open_sqlite(path: &std::path::Path) -> Arc<dyn Store> {
    Arc::new(reopen_sqlite(path).await)
}

#[tokio::test]
async fn an_old_button_still_works_after_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("imrelay.db");
    let (s, tg) = setup(Mode::Webhook, |_| {}).await;

    let first = spawn_on(s.clone(), open_sqlite(&path).await).await;
    let id = first.create_bash("toolu_restart", "reboot").await;
    let p = prompt(&tg, PRIVATE, "reboot").await;
    prompt(&tg, GROUP, "reboot").await;
    first.stop().await;

    let second = spawn_on(s, open_sqlite(&path).await).await;
    assert_eq!(status(&second, &id).await["status"], "pending");
    assert_eq!(
        tap_on(&second, &tg, ALICE, &p, &p.button("✅ Allow")).await,
        "Allowed"
    );
    assert_eq!(status(&second, &id).await["resolution"]["via"], "telegram");
    // Both copies, posted before the restart, are edited after it.
    edited(&tg, PRIVATE, p.message_id, "Allowed by Alice via telegram").await;
    let group = tg
        .calls("sendMessage")
        .iter()
        .find(|c| c.params["chat_id"] == GROUP)
        .map(Posted::from)
        .unwrap();
    edited(
        &tg,
        GROUP,
        group.message_id,
        "Allowed by Alice via telegram",
    )
    .await;
    // Not posted again after the restart.
    assert_eq!(
        tg.calls("sendMessage")
            .iter()
            .filter(|c| c.params["text"].as_str().unwrap().contains("reboot"))
            .count(),
        2
    );
    second.stop().await;
}

#[tokio::test]
async fn with_the_store_lost_old_buttons_are_not_valid() {
    let (s, tg) = setup(Mode::Webhook, |s| s.telegram.chats = vec![PRIVATE]).await;
    let first = spawn_on(s.clone(), Arc::new(MemoryStore::new())).await;
    first.create_bash("toolu_lost", "make lost").await;
    let p = prompt(&tg, PRIVATE, "make lost").await;
    first.stop().await;
    // A new, empty store: a new button key, so the old button's signature fails.
    let second = spawn_on(s, Arc::new(MemoryStore::new())).await;
    assert_eq!(
        tap_on(&second, &tg, ALICE, &p, &p.button("✅ Allow")).await,
        "This button is not valid."
    );
    second.stop().await;
}

#[tokio::test]
async fn an_old_button_cannot_act_on_an_id_used_again_after_pruning() {
    let (app, tg) = start_with(Mode::Webhook, |s| s.telegram.chats = vec![PRIVATE]).await;
    let id = app.create_bash("toolu_again", "make again").await;
    let old = prompt(&tg, PRIVATE, "make again").await;
    assert_eq!(app.delete(&format!("/v1/interactions/{id}")).await.0, 200);
    edited(&tg, PRIVATE, old.message_id, "Cancelled").await;
    assert_eq!(app.prune_all().await, 1);
    // The same id again, created in a later millisecond: a new interaction, a new prompt.
    app.create_bash("toolu_again", "make again").await;
    let posts = tg
        .wait_for("sendMessage", |calls| {
            calls
                .iter()
                .filter(|c| {
                    c.params["text"]
                        .as_str()
                        .unwrap_or("")
                        .contains("make again")
                })
                .count()
                == 2
        })
        .await;
    let new = Posted::from(posts.last().unwrap());
    assert_ne!(new.message_id, old.message_id);
    assert_ne!(new.button("✅ Allow"), old.button("✅ Allow"));
    // A button left on the old message (say its final edit never landed) is told it is gone,
    // and the new interaction stays pending.
    assert_eq!(
        tap_on(&app, &tg, ALICE, &old, &old.button("✅ Allow")).await,
        "This prompt is no longer known to imrelay."
    );
    assert_eq!(status(&app, &id).await["status"], "pending");
    // The new prompt's buttons answer it.
    assert_eq!(
        tap_on(&app, &tg, ALICE, &new, &new.button("✅ Allow")).await,
        "Allowed"
    );
    assert_eq!(status(&app, &id).await["resolution"]["by"], "Alice");
    app.stop().await;
}

#[tokio::test]
async fn a_keyboard_from_before_incarnation_handles_keeps_working_and_is_rerendered_with_them() {
    use base64::Engine;
    use hmac::{Hmac, Mac};
    use imrelay::channels::telegram::callback::{Action, Codec, SECRET_NAME};

    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("imrelay.db");
    let (s, tg) = setup(Mode::Webhook, |s| s.telegram.chats = vec![PRIVATE]).await;
    let app = spawn_on(s, open_sqlite(&path).await).await;
    let id = create(
        &app,
        json!({"tool_name": "AskUserQuestion", "input": {"questions": [
            {"question": "Which toppings?", "header": "Toppings", "multiSelect": true,
             "options": [{"label": "Cheese"}, {"label": "Ham"}]}]}}),
    )
    .await;
    let p = prompt(&tg, PRIVATE, "Which toppings?").await;
    let current = p.button("📨 Submit")[4..15].to_string();
    // Make the database look as an earlier version left it: the prompt's only handle is one
    // of the id alone.
    let key = app.store.secret(SECRET_NAME).await.unwrap();
    let mut mac = <Hmac<sha2::Sha256> as Mac>::new_from_slice(&key).unwrap();
    mac.update(b"imrelay/telegram/handle/v1\n");
    mac.update(id.as_bytes());
    let legacy =
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(&mac.finalize().into_bytes()[..8]);
    let conn = rusqlite::Connection::open(&path).unwrap();
    conn.busy_timeout(Duration::from_secs(5)).unwrap();
    let changed = conn
        .execute(
            "UPDATE channel_messages SET message_ref = ?1 WHERE channel = 'telegram:handle'",
            [&legacy],
        )
        .unwrap();
    assert_eq!(changed, 1);
    drop(conn);

    // A button of the old kind works...
    let toggle = Codec::new(key).encode(&legacy, Action::Toggle { q: 0, o: 0 });
    assert_eq!(tap_on(&app, &tg, ALICE, &p, &toggle).await, "☑ Cheese");
    // ...and the keyboard it re-renders carries the new handle, which works too.
    let e = edited(&tg, PRIVATE, p.message_id, "Which toppings?").await;
    let rerendered = Posted {
        params: e,
        ..p.clone()
    };
    assert!(
        rerendered
            .buttons()
            .iter()
            .all(|(_, data)| data[4..15] == current),
        "{:?}",
        rerendered.buttons()
    );
    assert_eq!(
        tap_on(
            &app,
            &tg,
            ALICE,
            &rerendered,
            &rerendered.button("📨 Submit")
        )
        .await,
        "Answered"
    );
    app.stop().await;
}

// ---- commands -----------------------------------------------------------------------------

#[tokio::test]
async fn whoami_tells_ids_and_approver_status() {
    let (app, tg) = start(Mode::Webhook).await;
    tg.wait_n("setWebhook", 1).await;
    deliver(
        &app,
        &text(tg.next_update_id(), ALICE, GROUP, "/whoami", None),
    )
    .await;
    deliver(
        &app,
        &text(
            tg.next_update_id(),
            MALLORY,
            -3003,
            &format!("/start@{BOT_USERNAME}"),
            None,
        ),
    )
    .await;
    // Addressed to another bot: ignored.
    deliver(
        &app,
        &text(tg.next_update_id(), ALICE, GROUP, "/whoami@other_bot", None),
    )
    .await;
    let calls = tg.wait_n("sendMessage", 2).await;
    let alice = &calls[0].params;
    assert_eq!(alice["chat_id"], GROUP);
    let t = alice["text"].as_str().unwrap();
    assert!(t.contains("<code>-2001</code>"), "{t}");
    assert!(t.contains("<code>1001</code>"), "{t}");
    assert!(t.contains("you are an approver"), "{t}");
    assert!(t.contains("prompts are posted here"), "{t}");
    let mallory = calls[1].params["text"].as_str().unwrap();
    assert!(mallory.contains("<code>666</code>"), "{mallory}");
    assert!(mallory.contains("you are not an approver"), "{mallory}");
    assert!(
        mallory.contains("not in <code>telegram.chats</code>"),
        "{mallory}"
    );
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(tg.calls("sendMessage").len(), 2);
    app.stop().await;
}

#[tokio::test]
async fn pending_reposts_pending_prompts_with_working_keyboards() {
    let (app, tg) = start_with(Mode::Webhook, |s| s.telegram.chats = vec![GROUP]).await;
    deliver(
        &app,
        &text(tg.next_update_id(), ALICE, GROUP, "/pending", None),
    )
    .await;
    tg.wait_for("sendMessage", |c| {
        c.iter().any(|c| c.params["text"] == "Nothing is pending.")
    })
    .await;
    let id = app.create_bash("toolu_repost", "docker system prune").await;
    let first = prompt(&tg, GROUP, "docker system prune").await;
    // Non-approvers cannot ask.
    deliver(
        &app,
        &text(tg.next_update_id(), MALLORY, GROUP, "/pending", None),
    )
    .await;
    deliver(
        &app,
        &text(tg.next_update_id(), BOB, GROUP, "/pending", None),
    )
    .await;
    let again = tg
        .wait_for("sendMessage", |c| {
            c.iter()
                .filter(|c| {
                    c.params["text"]
                        .as_str()
                        .unwrap_or("")
                        .contains("docker system prune")
                })
                .count()
                == 2
        })
        .await;
    let second = Posted::from(
        again
            .iter()
            .rev()
            .find(|c| {
                c.params["text"]
                    .as_str()
                    .unwrap()
                    .contains("docker system prune")
            })
            .unwrap(),
    );
    assert_ne!(first.message_id, second.message_id);
    assert!(
        tg.calls("sendMessage")
            .iter()
            .any(|c| c.params["text"] == "Only approvers can ask for the pending prompts.")
    );
    // The re-posted button works, and both copies are edited.
    assert_eq!(
        tap_on(&app, &tg, BOB, &second, &second.button("✅ Allow")).await,
        "Allowed"
    );
    assert_eq!(status(&app, &id).await["resolution"]["by"], "Bob");
    edited(&tg, GROUP, first.message_id, "Allowed by Bob via telegram").await;
    edited(&tg, GROUP, second.message_id, "Allowed by Bob via telegram").await;
    app.stop().await;
}

// ---- webhook and health -------------------------------------------------------------------

#[tokio::test]
async fn webhook_mode_registers_checks_the_secret_and_ignores_duplicates() {
    let (app, tg) = start(Mode::Webhook).await;
    let set = tg.wait_n("setWebhook", 1).await;
    assert_eq!(
        set[0].params["url"],
        "https://relay.example.com/telegram/webhook"
    );
    assert_eq!(set[0].params["secret_token"], SECRET);
    assert_eq!(
        set[0].params["allowed_updates"],
        json!(["message", "callback_query"])
    );
    assert!(
        tg.calls("getUpdates").is_empty(),
        "webhook mode does not poll"
    );

    let id = create(
        &app,
        json!({"tool_name": "AskUserQuestion", "input": {"questions": [
            {"question": "Which toppings?", "header": "Toppings", "multiSelect": true,
             "options": [{"label": "Cheese"}, {"label": "Ham"}]}]}}),
    )
    .await;
    let p = prompt(&tg, PRIVATE, "Which toppings?").await;
    let update = tap(
        tg.next_update_id(),
        ALICE,
        PRIVATE,
        p.message_id,
        &p.button("☐ Cheese"),
    );

    // Wrong or missing secret: refused with a JSON error, nothing happens.
    for secret in [Some("wrong"), None] {
        let mut req = app.client.post(app.url("/telegram/webhook")).json(&update);
        if let Some(s) = secret {
            req = req.header("X-Telegram-Bot-Api-Secret-Token", s);
        }
        let (s, body) = split(req.send().await.unwrap()).await;
        assert_eq!(s, StatusCode::UNAUTHORIZED);
        assert_eq!(body["error"]["code"], "unauthorized");
    }
    assert!(tg.calls("answerCallbackQuery").is_empty());
    // Garbage with the right secret: a 400 JSON error.
    let (s, body) = split(
        app.client
            .post(app.url("/telegram/webhook"))
            .header("X-Telegram-Bot-Api-Secret-Token", SECRET)
            .body("{not json")
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(s, StatusCode::BAD_REQUEST);
    assert_eq!(body["error"]["code"], "invalid_request");

    // The same update delivered twice toggles once.
    assert_eq!(deliver(&app, &update).await, StatusCode::OK);
    assert_eq!(deliver(&app, &update).await, StatusCode::OK);
    assert_eq!(tg.calls("answerCallbackQuery").len(), 1);
    tap_on(&app, &tg, ALICE, &p, &p.button("📨 Submit")).await;
    assert_eq!(
        status(&app, &id).await["resolution"]["result"]["updatedInput"]["answers"],
        json!({"Which toppings?": "Cheese"})
    );
    let m = app.metrics().await;
    assert!(
        m.contains("imrelay_telegram_updates_total{kind=\"duplicate\"} 1"),
        "{m}"
    );
    app.stop().await;
}

#[tokio::test]
async fn without_a_configured_secret_one_is_derived_and_kept() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("imrelay.db");
    let (s, tg) = setup(Mode::Webhook, |s| {
        s.telegram.webhook_secret = Secret::new("")
    })
    .await;

    let first = spawn_on(s.clone(), open_sqlite(&path).await).await;
    let set = tg.wait_n("setWebhook", 1).await;
    let secret = set[0].params["secret_token"].as_str().unwrap().to_string();
    assert_eq!(secret.len(), 64);
    assert!(secret.chars().all(|c| c.is_ascii_hexdigit()));
    let update = text(tg.next_update_id(), ALICE, PRIVATE, "/whoami", None);
    let post = |app: &TestApp, secret: &str| {
        app.client
            .post(app.url("/telegram/webhook"))
            .header("X-Telegram-Bot-Api-Secret-Token", secret)
            .json(&update)
            .send()
    };
    assert_eq!(
        post(&first, SECRET).await.unwrap().status(),
        StatusCode::UNAUTHORIZED
    );
    assert_eq!(
        post(&first, &secret).await.unwrap().status(),
        StatusCode::OK
    );
    tg.wait_n("sendMessage", 1).await;
    first.stop().await;

    // The same secret after a restart.
    let second = spawn_on(s, open_sqlite(&path).await).await;
    let set = tg.wait_n("setWebhook", 2).await;
    assert_eq!(set[1].params["secret_token"], secret.as_str());
    second.stop().await;
}

#[tokio::test]
async fn polling_mode_has_no_webhook_route_and_reports_health() {
    let (app, tg) = start_with(Mode::Polling, |s| s.telegram.approvers.clear()).await;
    tg.wait_n("getUpdates", 1).await;
    let (s, _) = app.post("/telegram/webhook", &json!({})).await;
    assert_eq!(s, StatusCode::NOT_FOUND);
    let mut health = Value::Null;
    for _ in 0..100 {
        let (_, body) = app.get("/healthz").await;
        health = body["components"]["telegram"].clone();
        if health["state"] == "polling" && health["bot"].is_string() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(health["state"], "polling", "{health}");
    assert_eq!(health["bot"], format!("@{BOT_USERNAME}"));
    assert_eq!(health["approvers"], 0);
    // An empty approver list is said loudly.
    assert!(
        health["warning"]
            .as_str()
            .unwrap()
            .contains("nobody can answer")
    );
    app.stop().await;
}

#[tokio::test]
async fn a_polling_outage_shows_in_health_and_polling_resumes() {
    let (app, tg) = start(Mode::Polling).await;
    tg.wait_n("getUpdates", 1).await;
    // Another process polls with the same token, twice; then it stops.
    tg.fail(
        "getUpdates",
        Fail::Status(
            409,
            "Conflict: terminated by other getUpdates request; make sure that only one bot instance is running".into(),
        ),
        2,
    );
    let mut seen_error = Value::Null;
    for _ in 0..500 {
        let (_, body) = app.get("/healthz").await;
        let t = body["components"]["telegram"].clone();
        if t["state"] == "error" {
            seen_error = t;
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(
        seen_error["last_error"]
            .as_str()
            .unwrap_or("")
            .contains("another process polls with this bot token"),
        "{seen_error}"
    );
    // Polling resumes: a tap still gets through.
    let id = app.create_bash("toolu_poll", "whoami").await;
    let p = prompt(&tg, PRIVATE, "whoami").await;
    let u = tg.next_update_id();
    tg.push_update(tap(u, BOB, PRIVATE, p.message_id, &p.button("❌ Deny")));
    assert_eq!(toast(&tg, u).await, "Denied");
    assert_eq!(status(&app, &id).await["resolution"]["outcome"], "denied");
    let (_, body) = app.get("/healthz").await;
    assert_eq!(body["components"]["telegram"]["state"], "polling");
    app.stop().await;
}

#[tokio::test]
async fn a_refused_token_shows_in_health_without_the_token() {
    let (app, _tg) = start_with(Mode::Polling, |s| {
        s.telegram.token = Secret::new("999:WRONG-secret-part");
    })
    .await;
    let mut health = Value::Null;
    for _ in 0..200 {
        let (_, body) = app.get("/healthz").await;
        health = body["components"]["telegram"].clone();
        if health["state"] == "error" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(health["state"], "error", "{health}");
    let last = health["last_error"].as_str().unwrap();
    assert!(last.contains("getMe"), "{last}");
    assert!(
        !health.to_string().contains("WRONG-secret-part"),
        "{health}"
    );
    app.stop().await;
}

// ---- configuration ------------------------------------------------------------------------

fn env(pairs: &[(&str, &str)]) -> Option<std::collections::HashMap<String, String>> {
    Some(
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
    )
}

#[test]
fn configuration_is_validated_and_lists_come_from_the_environment() {
    let s = Settings::load_with_env(
        None,
        env(&[
            ("IMRELAY__TELEGRAM__ENABLED", "true"),
            ("IMRELAY__TELEGRAM__TOKEN", TOKEN),
            ("IMRELAY__TELEGRAM__CHATS", "-1001234,42"),
            ("IMRELAY__TELEGRAM__APPROVERS", "42"),
        ]),
    )
    .unwrap();
    assert_eq!(s.telegram.chats, vec![-1001234, 42]);
    assert_eq!(s.telegram.approvers, vec![42]);
    assert_eq!(s.telegram.mode, Mode::Polling);
    assert!(!s.redacted_toml().unwrap().contains("TEST-token"));

    let no_token = Settings::load_with_env(None, env(&[("IMRELAY__TELEGRAM__ENABLED", "true")]))
        .unwrap_err()
        .to_string();
    assert!(no_token.contains("telegram.token"), "{no_token}");
    let no_url = Settings::load_with_env(
        None,
        env(&[
            ("IMRELAY__TELEGRAM__ENABLED", "true"),
            ("IMRELAY__TELEGRAM__TOKEN", TOKEN),
            ("IMRELAY__TELEGRAM__MODE", "webhook"),
        ]),
    )
    .unwrap_err()
    .to_string();
    assert!(no_url.contains("telegram.webhook_url"), "{no_url}");
    let plain_http = Settings::load_with_env(
        None,
        env(&[
            ("IMRELAY__TELEGRAM__ENABLED", "true"),
            ("IMRELAY__TELEGRAM__TOKEN", TOKEN),
            ("IMRELAY__TELEGRAM__MODE", "webhook"),
            (
                "IMRELAY__TELEGRAM__WEBHOOK_URL",
                "http://relay.example.com/telegram/webhook",
            ),
        ]),
    )
    .unwrap_err()
    .to_string();
    assert!(
        plain_http.contains("telegram.webhook_url") && plain_http.contains("https://"),
        "{plain_http}"
    );
    let unknown = Settings::load_with_env(None, env(&[("IMRELAY__TELEGRAM__CHAT", "1")]))
        .unwrap_err()
        .to_string();
    assert!(unknown.contains("chat"), "{unknown}");
}

#[tokio::test]
async fn a_cut_tool_call_links_to_its_inbox_item_when_the_public_url_is_set() {
    let (app, tg) = start_with(Mode::Webhook, |s| {
        s.server.public_url = "https://relay.example.com".into();
    })
    .await;
    app.create_bash("toolu_long", &"make all && ".repeat(1_000))
        .await;
    let p = prompt(&tg, PRIVATE, "make all").await;
    assert!(
        p.text.contains(
            "more characters not shown</i> · <a href=\"https://relay.example.com/#toolu_long\">all of it in the inbox</a>"
        ),
        "{}",
        p.text
    );
    assert!(p.text.chars().count() <= 4096);
    app.create_bash("toolu_short", "ls -la").await;
    let p = prompt(&tg, PRIVATE, "ls -la").await;
    assert!(
        !p.text.contains("inbox"),
        "nothing cut, no link: {}",
        p.text
    );
    app.stop().await;
}

// ---- forms --------------------------------------------------------------------------------

/// The keyboard of the latest edit of `p`, as a prompt to tap on.
fn as_edited(p: &Posted, edit: Value) -> Posted {
    Posted {
        chat: p.chat,
        message_id: p.message_id,
        text: edit["text"].as_str().unwrap().to_string(),
        params: edit,
    }
}

#[tokio::test]
async fn a_two_field_form_is_filled_in_with_a_typed_reply_and_a_button() {
    let (app, tg) = start(Mode::Webhook).await;
    let id = create(
        &app,
        json!({"kind": "form", "message": "Book the <team> offsite", "schema": {
            "type": "object",
            "properties": {
                "people": {"type": "integer", "title": "How many people", "minimum": 2, "maximum": 40},
                "city": {"type": "string", "title": "City", "oneOf": [
                    {"const": "ber", "title": "Berlin"}, {"const": "lis", "title": "Lisbon"}]}
            },
            "required": ["people", "city"]}}),
    )
    .await;
    let p = prompt(&tg, PRIVATE, "Book the &lt;team&gt; offsite").await;
    // A person reads: what is asked, every field, the one being asked with what it takes.
    assert!(p.text.starts_with("📝 <b>Form</b>"), "{}", p.text);
    assert!(
        p.text.contains("▶ 1. <b>How many people</b> *"),
        "{}",
        p.text
    );
    assert!(p.text.contains("a whole number from 2 to 40"), "{}", p.text);
    assert!(p.text.contains("2. <b>City</b> *"), "{}", p.text);
    let labels: Vec<String> = p.buttons().into_iter().map(|(t, _)| t).collect();
    assert_eq!(labels, ["✏️ Type the answer…", "❌ Decline"]);

    // A reply to the prompt itself is taken for the field being asked, and checked.
    deliver(
        &app,
        &text(
            tg.next_update_id(),
            ALICE,
            PRIVATE,
            "99",
            Some(p.message_id),
        ),
    )
    .await;
    let said = tg
        .wait_for("sendMessage", |c| {
            c.iter().any(|c| {
                c.params["text"]
                    .as_str()
                    .is_some_and(|t| t.contains("must be at most 40"))
            })
        })
        .await;
    let complaint = said
        .iter()
        .find(|c| c.params["text"].as_str().unwrap().contains("at most 40"))
        .unwrap();
    assert_eq!(
        complaint.params["text"],
        "How many people: must be at most 40. Reply again."
    );
    assert_eq!(status(&app, &id).await["status"], "pending");

    // "Type the answer…" asks for a reply, bound to the person who tapped.
    tap_on(&app, &tg, ALICE, &p, &p.button("✏️ Type the answer…")).await;
    let ask = reply_request(&tg, 1).await;
    assert!(
        ask.params["text"].as_str().unwrap().contains(
            "reply to this message with <b>How many people</b> (a whole number from 2 to 40)"
        ),
        "{}",
        ask.params["text"]
    );
    deliver(
        &app,
        &text(tg.next_update_id(), ALICE, PRIVATE, " 12 ", ask.message_id),
    )
    .await;
    let e = edited(&tg, PRIVATE, p.message_id, "→ <b>12</b>").await;
    let now = as_edited(&p, e);
    assert!(now.text.contains("▶ 2. <b>City</b> *"), "{}", now.text);
    let labels: Vec<String> = now.buttons().into_iter().map(|(t, _)| t).collect();
    assert_eq!(labels, ["Berlin", "Lisbon", "↩ Back", "❌ Decline"]);

    // The choice is a button; then a summary with Submit.
    assert_eq!(
        tap_on(&app, &tg, BOB, &now, &now.button("Lisbon")).await,
        "City: Lisbon"
    );
    let e = edited(&tg, PRIVATE, p.message_id, "→ <b>Lisbon</b>").await;
    let ready = as_edited(&p, e);
    assert!(ready.text.contains("All filled in"), "{}", ready.text);
    assert_eq!(status(&app, &id).await["status"], "pending");
    assert_eq!(
        tap_on(&app, &tg, ALICE, &ready, &ready.button("📨 Submit")).await,
        "Answered"
    );
    let body = status(&app, &id).await;
    assert_eq!(
        body["resolution"]["result"],
        json!({"action": "accept", "content": {"people": 12, "city": "lis"}})
    );
    assert_eq!(body["resolution"]["via"], "telegram");
    // Every copy ends showing what was answered, by label, and who answered.
    let done = edited(&tg, PRIVATE, p.message_id, "Answered by Alice").await;
    let text = done["text"].as_str().unwrap();
    assert!(
        text.contains("→ <b>12</b>") && text.contains("→ <b>Lisbon</b>"),
        "{text}"
    );
    assert_eq!(
        done["reply_markup"]["inline_keyboard"],
        json!([]),
        "no buttons left: {done}"
    );
    app.stop().await;
}

#[tokio::test]
async fn a_form_on_telegram_goes_back_skips_and_declines() {
    let (app, tg) = start(Mode::Webhook).await;
    let id = create(
        &app,
        json!({"kind": "form", "message": "Release checklist", "schema": {
            "type": "object",
            "properties": {
                "tested": {"type": "boolean", "title": "Tests pass"},
                "notes": {"type": "string", "title": "Notes"},
                "areas": {"type": "array", "title": "Areas", "items": {"enum": ["api", "ui", "db"]}, "minItems": 1}
            },
            "required": ["tested", "areas"]}}),
    )
    .await;
    let p = prompt(&tg, PRIVATE, "Release checklist").await;
    tap_on(&app, &tg, ALICE, &p, &p.button("✅ Yes")).await;
    let now = as_edited(&p, edited(&tg, PRIVATE, p.message_id, "→ <b>Yes</b>").await);
    // An optional field can be skipped; Back forgets it again.
    assert_eq!(
        tap_on(&app, &tg, ALICE, &now, &now.button("⏭ Skip")).await,
        "Notes: skipped"
    );
    let now = as_edited(&p, edited(&tg, PRIVATE, p.message_id, "(left empty)").await);
    // Multiple choice: toggles, then Done, checked against minItems.
    assert_eq!(
        tap_on(&app, &tg, ALICE, &now, &now.button("📨 Done")).await,
        "Areas: choose at least 1"
    );
    assert_eq!(
        tap_on(&app, &tg, ALICE, &now, &now.button("☐ ui")).await,
        "☑ ui"
    );
    // A tap for a field that is not being asked is refused.
    let t = tap_on(&app, &tg, ALICE, &p, &p.button("✅ Yes")).await;
    assert_eq!(t, "That field is not the one being asked now.");
    let decline = now.button("❌ Decline");
    assert_eq!(tap_on(&app, &tg, ALICE, &now, &decline).await, "Denied");
    let body = status(&app, &id).await;
    assert_eq!(body["resolution"]["result"]["action"], "decline");
    assert_eq!(body["resolution"]["outcome"], "denied");
    app.stop().await;
}
