//! The parity suite: docs/channels.md's table of what each channel offers, kept true.
//!
//! One suite for every channel in the registry: each row the suite drives is one check
//! written once ([`suite::Feature`], in `tests/parity/suite.rs`, shared with
//! `tests/external/parity.rs`), and each channel one harness ([`Run`]) over the loopback
//! fake its own tests use (Telegram's Bot API, Feishu's callback endpoint, Slack's Socket
//! Mode, DingTalk's Stream, WeCom's long connection, ntfy's publish endpoint, a webhook
//! receiver). Every ✅ cell of a driven row is run through its channel's fake and fails when
//! the fake does not show it; a channel registered with neither a harness here nor one in
//! the external suite ([`suite::EXTERNAL`]: Matrix, against a real Synapse) fails too, as does
//! a row the suite neither drives nor names where it is checked.
//!
//! `PARITY_ONLY=<part of "channel:Feature">` runs only the cells it names (`PARITY_ONLY=Burst`,
//! `PARITY_ONLY=slack:`), each timed on stderr (`--nocapture`).

use reqwest::StatusCode;
use serde_json::{Value, json};

use imrelay::channels::threads::ThreadPer;
use imrelay::config::Settings;

use crate::support::{TestApp, wait_until};

#[path = "../parity/suite.rs"]
pub(crate) mod suite;

use suite::{Button, Copy, Harness, Who};

/// One channel running against its fake.
enum Run {
    Telegram(crate::telegram::fake::FakeTelegram),
    Feishu(crate::feishu::fake::FakeFeishu),
    Slack(crate::slack::fake::FakeSlack),
    DingTalk(crate::dingtalk::fake::FakeDingTalk),
    WeCom(crate::wecom::fake::FakeWecom),
    Ntfy(crate::ntfy::FakeNtfy),
    Discord(crate::discord::fake::FakeDiscord),
    Push(crate::push::FakePush),
    Webhooks(crate::webhooks::Receiver),
}

/// A Telegram supergroup with topics on, where the prompts go with `thread_per`.
const TELEGRAM_FORUM: i64 = -1_003_001;

/// The prompt's marker: what the copy's text contains.
fn marker(command: &str) -> &str {
    command
}

impl Harness for Run {
    async fn start(name: &str, more: fn(&mut Settings)) -> (Run, TestApp) {
        match name {
            "telegram" => {
                let (app, tg) =
                    crate::telegram::start_with(imrelay::channels::telegram::Mode::Webhook, |s| {
                        more(s);
                        // Topics are made in a supergroup with topics on.
                        if s.telegram.thread_per == ThreadPer::Session {
                            s.telegram.chats = vec![TELEGRAM_FORUM];
                        }
                    })
                    .await;
                tg.forum(TELEGRAM_FORUM);
                (Run::Telegram(tg), app)
            }
            "feishu" => {
                let fake = crate::feishu::fake::FakeFeishu::start().await;
                let app = crate::support::spawn_with(|s| {
                    crate::feishu::enable(s, &fake);
                    more(s);
                })
                .await;
                (Run::Feishu(fake), app)
            }
            "slack" => {
                let fake = crate::slack::fake::FakeSlack::start().await;
                let app = crate::support::spawn_with(|s| {
                    crate::slack::channel::enable(s, &fake);
                    more(s);
                })
                .await;
                crate::slack::channel::connected(&fake).await;
                (Run::Slack(fake), app)
            }
            "dingtalk" => {
                let fake = crate::dingtalk::fake::FakeDingTalk::start().await;
                let app = crate::support::spawn_with(|s| {
                    crate::dingtalk::channel::enable(s, &fake);
                    more(s);
                })
                .await;
                crate::dingtalk::channel::connected(&fake).await;
                (Run::DingTalk(fake), app)
            }
            "wecom" => {
                let fake = crate::wecom::fake::FakeWecom::start().await;
                for c in crate::wecom::channel::CHATS {
                    fake.state.reach(c);
                }
                let app = crate::support::spawn_with(|s| {
                    crate::wecom::channel::enable(s, &fake);
                    more(s);
                })
                .await;
                crate::wecom::channel::connected(&fake).await;
                (Run::WeCom(fake), app)
            }
            "ntfy" => {
                let (fake, url) = crate::ntfy::FakeNtfy::start("Bearer tk_test").await;
                let app = crate::support::spawn_with(|s| {
                    crate::ntfy::configure(s, &url);
                    more(s);
                })
                .await;
                (Run::Ntfy(fake), app)
            }
            "discord" => {
                let (fake, app) = crate::discord::channel::start_with(more).await;
                (Run::Discord(fake), app)
            }
            "push" => {
                let fake = crate::push::FakePush::start(1).await;
                let app = crate::push::start(&fake, more).await;
                (Run::Push(fake), app)
            }
            "webhook" => {
                let (rx, url) = crate::webhooks::Receiver::start(&[]).await;
                let app = crate::support::spawn_with(|s| {
                    crate::webhooks::fast(s);
                    let mut target = crate::webhooks::target("ticketing", &url);
                    // Every event, as `events` is by default.
                    target
                        .events
                        .push(imrelay::channels::webhook::WebhookEvent::Voted);
                    s.webhooks = vec![target];
                    more(s);
                })
                .await;
                (Run::Webhooks(rx), app)
            }
            other => panic!(
                "channel {other:?} is registered but the parity suite has no harness for it: \
                 add one to tests/it/parity.rs (Run::start) or to tests/external/parity.rs \
                 (and name it in suite::EXTERNAL)"
            ),
        }
    }

    async fn copy(&self, id: &str, command: &str) -> Copy {
        match self {
            Run::Telegram(tg) => {
                let p =
                    crate::telegram::prompt(tg, crate::telegram::PRIVATE, marker(command)).await;
                // What a person reads: the text, and the buttons' labels under it.
                let labels: Vec<String> = p.buttons().into_iter().map(|b| b.0).collect();
                Copy {
                    text: format!("{}\n{}", p.text, labels.join("\n")),
                    raw: json!({"chat": crate::telegram::PRIVATE, "message_id": p.message_id,
                                "buttons": p.buttons()}),
                }
            }
            Run::Feishu(fake) => {
                let (message_id, card) = crate::feishu::card_for(fake, id).await;
                feishu_copy(&message_id, card)
            }
            Run::Slack(fake) => {
                let copies = crate::slack::channel::posted(fake, id).await;
                let m = crate::slack::channel::message(fake, &copies[0]);
                Copy {
                    text: crate::slack::channel::text_of(&m),
                    raw: json!({"at": [copies[0].0, copies[0].1]}),
                }
            }
            Run::DingTalk(fake) => {
                let cards = crate::dingtalk::channel::cards(fake, id).await;
                let c = &cards[0];
                Copy {
                    // As a person reads it: the zero-width spaces that keep markdown inert
                    // are invisible.
                    text: c.params["markdown"]
                        .as_str()
                        .unwrap_or_default()
                        .replace('\u{200b}', ""),
                    raw: json!({"id": c.id, "space": c.space, "params": c.params}),
                }
            }
            Run::WeCom(fake) => {
                let cards = crate::wecom::channel::sent_cards(fake, command).await;
                let (chat, card) = &cards[0];
                Copy {
                    text: card.to_string(),
                    raw: json!({"chat": chat, "card": card}),
                }
            }
            Run::Ntfy(fake) => {
                let find = || {
                    fake.published()
                        .into_iter()
                        .find(|p| p["message"].as_str().is_some_and(|m| m.contains(command)))
                };
                wait_until(&format!("the ntfy prompt of {id}"), || find().is_some()).await;
                let p = find().unwrap();
                Copy {
                    text: p.to_string(),
                    raw: p,
                }
            }
            Run::Discord(fake) => {
                let copies = crate::discord::channel::posted(fake, id).await;
                let m = crate::discord::channel::message(fake, &copies[0]);
                Copy {
                    text: m["content"].as_str().unwrap_or_default().to_string(),
                    raw: json!({"at": [copies[0].0, copies[0].1]}),
                }
            }
            Run::Push(fake) => {
                let p = fake
                    .one(&format!("the push of {id}"), |p| {
                        p["type"] == "prompt" && p["id"] == id
                    })
                    .await;
                Copy {
                    text: p["payload"].to_string(),
                    raw: p["payload"].clone(),
                }
            }
            Run::Webhooks(rx) => {
                let find = || {
                    rx.received()
                        .into_iter()
                        .map(|r| r.body)
                        .find(|b| b["data"]["interaction"]["id"] == id)
                };
                wait_until(&format!("the event of {id}"), || find().is_some()).await;
                let event = find().unwrap();
                Copy {
                    text: event.to_string(),
                    raw: event,
                }
            }
        }
    }

    async fn press(&self, app: &TestApp, copy: &Copy, button: Button, who: Who) -> String {
        match self {
            Run::Telegram(tg) => {
                // Its label in English or in Chinese (`locale`).
                let (label, zh) = match button {
                    Button::Allow => ("✅ Allow", "✅ 批准"),
                    Button::Deny => ("❌ Deny", "❌ 拒绝"),
                    Button::Similar => ("🔁 Allow similar (this session)", "🔁 批准同类（本会话）"),
                };
                let data = copy.raw["buttons"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .find(|b| b[0] == label || b[0] == zh)
                    .unwrap_or_else(|| panic!("no {label} on {}", copy.raw))[1]
                    .as_str()
                    .unwrap()
                    .to_string();
                let person = match who {
                    Who::Approver => crate::telegram::ALICE,
                    Who::Stranger => crate::telegram::MALLORY,
                };
                crate::telegram::tap_at(
                    app,
                    tg,
                    person,
                    copy.raw["chat"].as_i64().unwrap(),
                    copy.raw["message_id"].as_i64().unwrap(),
                    &data,
                )
                .await
            }
            Run::Feishu(_) => {
                let name = match button {
                    Button::Allow => "approve",
                    Button::Deny => "deny",
                    Button::Similar => "allow_similar",
                };
                let value = crate::feishu::button_value(&copy.raw, name);
                let user = match who {
                    Who::Approver => crate::feishu::APPROVER,
                    Who::Stranger => crate::feishu::STRANGER,
                };
                let envelope = crate::feishu::click(&crate::feishu::event_id(), user, &value, None);
                let (s, reply) = crate::feishu::post_callback(app, &envelope).await;
                assert_eq!(s, StatusCode::OK, "{reply}");
                reply["toast"]["content"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string()
            }
            Run::Slack(fake) => {
                let action = match button {
                    Button::Allow => "allow",
                    Button::Deny => "deny",
                    Button::Similar => "allow_similar",
                };
                let user = match who {
                    Who::Approver => crate::slack::channel::APPROVER,
                    Who::Stranger => crate::slack::channel::STRANGER,
                };
                let at = (
                    copy.raw["at"][0].as_str().unwrap().to_string(),
                    copy.raw["at"][1].as_str().unwrap().to_string(),
                );
                let conn = crate::slack::channel::connected(fake).await;
                let before = crate::slack::channel::ephemerals(fake, user).len();
                crate::slack::channel::click(fake, conn, user, &at, action).await;
                if who == Who::Stranger {
                    wait_until("an ephemeral notice", || {
                        crate::slack::channel::ephemerals(fake, user).len() > before
                    })
                    .await;
                }
                crate::slack::channel::ephemerals(fake, user)
                    .get(before)
                    .cloned()
                    .unwrap_or_default()
            }
            Run::DingTalk(fake) => {
                let action = match button {
                    Button::Allow => "allow",
                    Button::Deny => "deny",
                    Button::Similar => "similar",
                };
                let user = match who {
                    Who::Approver => crate::dingtalk::channel::APPROVER,
                    Who::Stranger => crate::dingtalk::channel::STRANGER,
                };
                let card = dingtalk_card(copy);
                let conn = crate::dingtalk::channel::connected(fake).await;
                let response =
                    crate::dingtalk::channel::click(fake, conn, user, &card, action, json!({}))
                        .await;
                crate::dingtalk::channel::notice(&response)
            }
            Run::WeCom(fake) => {
                let label = match button {
                    Button::Allow => "Allow",
                    Button::Deny => "Deny",
                    Button::Similar => "Allow similar",
                };
                let card = &copy.raw["card"];
                let user = match who {
                    Who::Approver => crate::wecom::channel::APPROVER,
                    Who::Stranger => crate::wecom::channel::STRANGER,
                };
                let n = uuid::Uuid::now_v7().simple().to_string();
                let update = crate::wecom::channel::click(
                    fake,
                    &format!("req-{n}"),
                    crate::wecom::fake::card_click(
                        &format!("m-{n}"),
                        user,
                        copy.raw["chat"].as_str().unwrap(),
                        &crate::wecom::channel::key(card, label),
                        card["task_id"].as_str().unwrap(),
                    ),
                )
                .await;
                update["body"]["template_card"].to_string()
            }
            Run::Ntfy(_) => {
                assert_eq!(who, Who::Approver, "ntfy presses carry no person");
                // Its label in English or in Chinese (`locale`).
                let label = match button {
                    Button::Allow => ["Allow", "批准"],
                    Button::Deny => ["Deny", "拒绝"],
                    Button::Similar => ["Allow similar (this session)", "批准同类（本会话）"],
                };
                let shown = copy.raw["actions"]
                    .as_array()
                    .and_then(|a| {
                        a.iter()
                            .find(|a| label.contains(&a["label"].as_str().unwrap_or("")))
                    })
                    .and_then(|a| a["label"].as_str())
                    .unwrap_or(label[0]);
                let path = crate::ntfy::button(&copy.raw, shown);
                let (s, body) = crate::ntfy::press(app, &path).await;
                assert_eq!(s, StatusCode::OK, "{body}");
                // ntfy shows no answer to an `http` action: the outcome replaces the prompt.
                String::new()
            }
            Run::Discord(fake) => {
                let label = match button {
                    Button::Allow => "Approve",
                    Button::Deny => "Deny",
                    Button::Similar => "Allow similar (this session)",
                };
                let user = match who {
                    Who::Approver => crate::discord::channel::APPROVER,
                    Who::Stranger => crate::discord::channel::STRANGER,
                };
                let response =
                    crate::discord::channel::click(fake, user, &at_of(copy), label).await;
                // Told ephemerally (flag 64); otherwise the message itself shows it.
                if response["data"]["flags"] == 64 {
                    response["data"]["content"]
                        .as_str()
                        .unwrap_or_default()
                        .to_string()
                } else {
                    String::new()
                }
            }
            Run::Push(_) => {
                assert_eq!(who, Who::Approver, "a push action is its device's person's");
                let action = match button {
                    Button::Allow => "allow",
                    Button::Deny => "deny",
                    Button::Similar => panic!("a push has Approve and Deny only"),
                };
                let url = copy.raw["actions"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .find(|a| a["action"] == action)
                    .unwrap_or_else(|| panic!("no {action} action in {}", copy.raw))["url"]
                    .as_str()
                    .unwrap()
                    .to_string();
                let r = app.client.post(app.url(&url)).send().await.unwrap();
                assert_eq!(r.status(), StatusCode::OK);
                // What the service worker shows in place of the notification.
                let body: Value = r.json().await.unwrap();
                body["message"].as_str().unwrap_or_default().to_string()
            }
            Run::Webhooks(_) => {
                assert_eq!(
                    who,
                    Who::Approver,
                    "a webhook's answer is signed, not a person's"
                );
                let decision = match button {
                    Button::Allow => "allow",
                    Button::Deny => "deny",
                    Button::Similar => panic!("webhooks have no buttons"),
                };
                let id = copy.raw["data"]["interaction"]["id"].as_str().unwrap();
                let body = json!({"id": id, "decision": decision, "by": "jira"});
                let now = jiff::Timestamp::now().as_second();
                let msg = format!("msg_{}", uuid::Uuid::now_v7().simple());
                let (raw, headers) = crate::webhooks::signed(&body, &msg, now);
                let (s, out) = crate::webhooks::post_signed(app, "ticketing", raw, headers).await;
                assert_eq!(s, StatusCode::OK, "{out}");
                String::new()
            }
        }
    }

    async fn shows(&self, id: &str, copy: &Copy, phrase: &str) {
        let what = format!("the copy of {id} showing {phrase:?}");
        match self {
            Run::Telegram(tg) => {
                crate::telegram::edited(
                    tg,
                    copy.raw["chat"].as_i64().unwrap(),
                    copy.raw["message_id"].as_i64().unwrap(),
                    phrase,
                )
                .await;
            }
            Run::Feishu(fake) => {
                let message = copy.raw["message_id"].as_str().unwrap().to_string();
                wait_until(&what, || {
                    fake.state.patches().iter().any(|p| {
                        p.message_id == message
                            && crate::feishu::card_text(&p.card).contains(phrase)
                    })
                })
                .await;
            }
            Run::Slack(fake) => {
                let at = at_of(copy);
                wait_until(&what, || {
                    crate::slack::channel::text_of(&crate::slack::channel::message(fake, &at))
                        .contains(phrase)
                })
                .await;
            }
            Run::DingTalk(fake) => {
                let card = copy.raw["id"].as_str().unwrap().to_string();
                wait_until(&what, || {
                    fake.state.cards_of(id).iter().any(|c| {
                        c.id == card
                            && c.params["markdown"]
                                .as_str()
                                .is_some_and(|m| m.replace('\u{200b}', "").contains(phrase))
                    })
                })
                .await;
            }
            Run::Discord(fake) => {
                let at = at_of(copy);
                wait_until(&what, || {
                    crate::discord::channel::message(fake, &at)["content"]
                        .as_str()
                        .is_some_and(|c| c.contains(phrase))
                })
                .await;
            }
            Run::Webhooks(rx) => {
                wait_until(&what, || {
                    rx.received().iter().any(|r| {
                        r.body["type"] == "interaction.voted"
                            && r.body["data"]["interaction"]["id"] == id
                            && r.body["data"]["votes"]
                                .as_str()
                                .is_some_and(|v| v.contains(phrase))
                    })
                })
                .await;
            }
            Run::Ntfy(fake) => {
                // Published again under the prompt's notification id, which ntfy replaces.
                let seq = copy.raw["sequence_id"].clone();
                wait_until(&what, || {
                    fake.published().iter().any(|p| {
                        p["sequence_id"] == seq
                            && p["message"].as_str().is_some_and(|m| m.contains(phrase))
                            && p.get("actions").is_some()
                    })
                })
                .await;
            }
            Run::Push(fake) => {
                // Pushed again under the prompt's tag, which the notification replaces.
                let tag = copy.raw["tag"].clone();
                wait_until(&what, || {
                    fake.received().iter().any(|r| {
                        let p = &r["payload"];
                        p["type"] == "prompt"
                            && p["tag"] == tag
                            && p["quiet"] == true
                            && p["body"].as_str().is_some_and(|b| b.contains(phrase))
                    })
                })
                .await;
            }
            Run::WeCom(_) => panic!("{what}: no harness for it"),
        }
    }

    async fn whoami(&self, app: &TestApp) -> (String, String, String) {
        match self {
            Run::Telegram(tg) => {
                let chat = -4004_i64;
                let u = tg.next_update_id();
                let update =
                    crate::telegram::fake::text(u, crate::telegram::ALICE, chat, "/whoami", None);
                crate::telegram::deliver(app, &update).await;
                let calls = tg
                    .wait_for("sendMessage", |c| {
                        c.iter().any(|c| c.params["chat_id"] == chat)
                    })
                    .await;
                let reply = calls
                    .iter()
                    .find(|c| c.params["chat_id"] == chat)
                    .unwrap()
                    .params["text"]
                    .as_str()
                    .unwrap()
                    .to_string();
                (
                    reply,
                    chat.to_string(),
                    crate::telegram::ALICE.id.to_string(),
                )
            }
            Run::Feishu(fake) => {
                let (chat, sender) = ("oc_not_yet_configured", "ou_newcomer");
                let envelope = json!({
                    "schema": "2.0",
                    "header": {"event_id": crate::feishu::event_id(), "token": crate::feishu::VERIFICATION_TOKEN,
                               "create_time": "1700000000000", "event_type": "im.message.receive_v1",
                               "tenant_key": "tenant", "app_id": crate::feishu::fake::APP_ID},
                    "event": {
                        "sender": {"sender_id": {"open_id": sender, "user_id": "u_newcomer"}, "sender_type": "user"},
                        "message": {"message_id": "om_in_1", "chat_id": chat, "chat_type": "group",
                                    "message_type": "text",
                                    "content": json!({"text": "@_user_1 whoami"}).to_string(),
                                    "mentions": [{"key": "@_user_1", "name": "imrelay"}]}
                    }
                });
                let (s, reply) = crate::feishu::post_callback(app, &envelope).await;
                assert_eq!(s, StatusCode::OK, "{reply}");
                let find = || {
                    fake.state
                        .delivered()
                        .into_iter()
                        .find(|s| s.receive_id == chat)
                        .map(|s| s.card["text"].as_str().unwrap_or_default().to_string())
                };
                wait_until("the whoami answer", || find().is_some()).await;
                (find().unwrap(), chat.into(), sender.into())
            }
            Run::Slack(fake) => {
                let (chat, sender) = ("C0NOTYET", "U0NEWCOMER");
                let conn = crate::slack::channel::connected(fake).await;
                let envelope = json!({
                    "envelope_id": uuid::Uuid::now_v7().simple().to_string(),
                    "type": "events_api", "accepts_response_payload": false,
                    "retry_attempt": 0, "retry_reason": "",
                    "payload": {"type": "event_callback", "team_id": "T0TEAM", "api_app_id": "A0APP",
                                "event_id": "Ev0WHOAMI", "event_time": 1_700_000_000,
                                "event": {"type": "app_mention", "user": sender, "channel": chat,
                                          "text": "<@U0BOT> whoami", "ts": "1700000000.000100"}},
                });
                fake.state.sockets.deliver(conn, &envelope);
                wait_until("the whoami answer", || {
                    !crate::slack::channel::ephemerals(fake, sender).is_empty()
                })
                .await;
                let reply = crate::slack::channel::ephemerals(fake, sender)[0].clone();
                (reply, chat.into(), sender.into())
            }
            Run::DingTalk(fake) => {
                let (chat, sender) = ("cidNotYet==", "staff7");
                let conn = crate::dingtalk::channel::connected(fake).await;
                let msg = crate::dingtalk::fake::bot_message(chat, true, sender, " whoami ");
                fake.state
                    .push(conn, "CALLBACK", "/v1.0/im/bot/messages/get", "m-who", &msg);
                wait_until("the whoami answer", || {
                    !fake.state.calls_to("groupMessages").is_empty()
                })
                .await;
                let sent = &fake.state.calls_to("groupMessages")[0];
                let param: Value =
                    serde_json::from_str(sent["msgParam"].as_str().unwrap()).unwrap();
                (
                    param["content"].as_str().unwrap().to_string(),
                    chat.into(),
                    sender.into(),
                )
            }
            Run::WeCom(fake) => {
                let (chat, sender) = ("wrkNotYet", "lisi");
                let conn = crate::wecom::channel::connected(fake).await;
                fake.state.push(
                    conn,
                    "aibot_msg_callback",
                    "req-who",
                    crate::wecom::fake::text("m-who", sender, chat, "@imrelay whoami"),
                );
                wait_until("the whoami answer", || {
                    !fake.state.sent("aibot_respond_msg").is_empty()
                })
                .await;
                let (_, reply) = fake.state.sent("aibot_respond_msg")[0].clone();
                (
                    reply["body"]["stream"]["content"]
                        .as_str()
                        .unwrap()
                        .to_string(),
                    chat.into(),
                    sender.into(),
                )
            }
            Run::Discord(fake) => {
                let (chat, sender) = ("2000000000000000099", "6000000000000000077");
                let n =
                    crate::discord::channel::NEXT.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                let response = crate::discord::channel::deliver(
                    fake,
                    crate::discord::fake::command_use(
                        &fake.state,
                        8000 + n,
                        sender,
                        chat,
                        "whoami",
                    ),
                )
                .await;
                let told = response["data"]["content"]
                    .as_str()
                    .unwrap_or_default()
                    .replace('\\', "");
                (told, chat.into(), sender.into())
            }
            Run::Ntfy(_) | Run::Push(_) | Run::Webhooks(_) => panic!("no chat to ask whoami in"),
        }
    }

    async fn edit(&self, app: &TestApp, copy: &Copy, command: &str) {
        match self {
            Run::Telegram(tg) => telegram_reply(app, tg, copy, &format!("edit {command}")).await,
            Run::Feishu(_) => {
                let value = crate::feishu::button_value(&copy.raw, "edit");
                let envelope = crate::feishu::click(
                    &crate::feishu::event_id(),
                    crate::feishu::APPROVER,
                    &value,
                    Some(json!({"command": command})),
                );
                let (s, reply) = crate::feishu::post_callback(app, &envelope).await;
                assert_eq!(s, StatusCode::OK, "{reply}");
            }
            Run::Slack(fake) => {
                let at = (
                    copy.raw["at"][0].as_str().unwrap().to_string(),
                    copy.raw["at"][1].as_str().unwrap().to_string(),
                );
                let conn = crate::slack::channel::connected(fake).await;
                let n = fake.state.calls("views.open").len() + 1;
                crate::slack::channel::click(
                    fake,
                    conn,
                    crate::slack::channel::APPROVER,
                    &at,
                    "edit",
                )
                .await;
                let view = crate::slack::channel::modal(fake, n).await;
                crate::slack::channel::deliver(
                    fake,
                    conn,
                    crate::slack::channel::submission(
                        crate::slack::channel::APPROVER,
                        &view,
                        json!({"command": {"type": "plain_text_input", "value": command}}),
                    ),
                )
                .await;
            }
            Run::DingTalk(fake) => {
                let card = dingtalk_card(copy);
                let conn = crate::dingtalk::channel::connected(fake).await;
                crate::dingtalk::channel::click(
                    fake,
                    conn,
                    crate::dingtalk::channel::APPROVER,
                    &card,
                    "edit",
                    json!({"text": command}),
                )
                .await;
            }
            Run::WeCom(fake) => {
                let hint = copy.raw["card"]["quote_area"]["quote_text"]
                    .as_str()
                    .unwrap();
                let handle = hint
                    .rsplit("edit ")
                    .next()
                    .unwrap()
                    .split(' ')
                    .next()
                    .unwrap();
                let n = uuid::Uuid::now_v7().simple().to_string();
                let conn = crate::wecom::channel::connected(fake).await;
                let before = fake.state.sent("aibot_respond_msg").len();
                fake.state.push(
                    conn,
                    "aibot_msg_callback",
                    &format!("req-{n}"),
                    crate::wecom::fake::text(
                        &format!("m-{n}"),
                        crate::wecom::channel::APPROVER,
                        copy.raw["chat"].as_str().unwrap(),
                        &format!("@imrelay edit {handle} {command}"),
                    ),
                );
                wait_until("the reply", || {
                    fake.state.sent("aibot_respond_msg").len() > before
                })
                .await;
            }
            Run::Webhooks(_) => {
                let id = copy.raw["data"]["interaction"]["id"].as_str().unwrap();
                let mut input = copy.raw["data"]["interaction"]["input"].clone();
                input["command"] = json!(command);
                let body =
                    json!({"id": id, "decision": "allow", "updated_input": input, "by": "jira"});
                let now = jiff::Timestamp::now().as_second();
                let msg = format!("msg_{}", uuid::Uuid::now_v7().simple());
                let (raw, headers) = crate::webhooks::signed(&body, &msg, now);
                let (s, out) = crate::webhooks::post_signed(app, "ticketing", raw, headers).await;
                assert_eq!(s, StatusCode::OK, "{out}");
            }
            Run::Discord(fake) => {
                let at = at_of(copy);
                let response = crate::discord::channel::click(
                    fake,
                    crate::discord::channel::APPROVER,
                    &at,
                    "Edit & approve…",
                )
                .await;
                assert_eq!(response["type"], 9, "a modal: {response}");
                let modal = &response["data"];
                let input = &modal["components"][0]["components"][0];
                let n =
                    crate::discord::channel::NEXT.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                let submit = crate::discord::fake::modal_submit(
                    &fake.state,
                    n,
                    crate::discord::channel::APPROVER,
                    &at.0,
                    &at.1,
                    modal["custom_id"].as_str().unwrap(),
                    &[(input["custom_id"].as_str().unwrap(), command)],
                );
                crate::discord::channel::deliver(fake, submit).await;
            }
            Run::Ntfy(_) | Run::Push(_) => panic!("no Edit & approve on {}", "a notification"),
        }
    }

    async fn digest(&self, phrase: &str) -> Copy {
        let what = format!("a digest showing {phrase:?}");
        match self {
            Run::Telegram(tg) => {
                let chat = crate::telegram::PRIVATE;
                // Sent, or edited as requests join it: the newest that shows the phrase.
                let find = || {
                    let sent = tg
                        .calls("sendMessage")
                        .into_iter()
                        .filter_map(|c| Some((c.message_id?, c.params)));
                    let edited = tg
                        .calls("editMessageText")
                        .into_iter()
                        .filter_map(|c| Some((c.params["message_id"].as_i64()?, c.params)));
                    sent.chain(edited).rfind(|(_, p)| {
                        p["chat_id"] == chat
                            && p["text"].as_str().is_some_and(|t| t.contains(phrase))
                            && p["reply_markup"]["inline_keyboard"].is_array()
                    })
                };
                let (message_id, p) = found(&what, find).await;
                Copy {
                    text: p["text"].as_str().unwrap_or_default().to_string(),
                    raw: json!({"chat": chat, "message_id": message_id,
                                "buttons": telegram_buttons(&p)}),
                }
            }
            Run::Feishu(fake) => {
                let title = |c: &Value| {
                    c["header"]["title"]["content"]
                        .as_str()
                        .is_some_and(|t| t.contains(phrase))
                };
                let find = || {
                    let sent = fake
                        .state
                        .delivered()
                        .into_iter()
                        .filter_map(|s| Some((s.message_id?, s.card)));
                    let patched = fake
                        .state
                        .patches()
                        .into_iter()
                        .map(|p| (p.message_id, p.card));
                    sent.chain(patched).rfind(|(_, c)| title(c))
                };
                let (message_id, card) = found(&what, find).await;
                feishu_copy(&message_id, card)
            }
            Run::Slack(fake) => {
                let find = || {
                    fake.state
                        .messages
                        .lock()
                        .unwrap()
                        .iter()
                        .find(|(_, m)| crate::slack::channel::text_of(m).contains(phrase))
                        .map(|(at, m)| (at.clone(), m.clone()))
                };
                let (at, m) = found(&what, find).await;
                Copy {
                    text: crate::slack::channel::text_of(&m),
                    raw: json!({"at": [at.0, at.1]}),
                }
            }
            Run::DingTalk(fake) => {
                let find = || {
                    fake.state
                        .cards
                        .lock()
                        .unwrap()
                        .iter()
                        .find(|c| {
                            c.params["title"]
                                .as_str()
                                .is_some_and(|t| t.contains(phrase))
                        })
                        .cloned()
                };
                let c = found(&what, find).await;
                Copy {
                    text: c.params["markdown"]
                        .as_str()
                        .unwrap_or_default()
                        .replace('\u{200b}', ""),
                    raw: json!({"id": c.id, "params": c.params}),
                }
            }
            Run::WeCom(fake) => {
                // A WeCom card changes only in answer to a click on it, and its title is cut
                // short: the first digest card (its task id `imrelay-d-…`), whatever it listed
                // when it was sent (a click shows the list as it is).
                let find = || {
                    fake.state
                        .sent("aibot_send_msg")
                        .into_iter()
                        .map(|(_, f)| f["body"].clone())
                        .find(|b| {
                            b["template_card"]["task_id"]
                                .as_str()
                                .is_some_and(|t| t.starts_with("imrelay-d-"))
                        })
                };
                let b = found(&what, find).await;
                Copy {
                    text: b["template_card"].to_string(),
                    raw: json!({"chat": b["chatid"], "card": b["template_card"]}),
                }
            }
            Run::Ntfy(fake) => {
                let find = || {
                    fake.published().into_iter().rfind(|p| {
                        p["sequence_id"]
                            .as_str()
                            .is_some_and(|s| s.starts_with("imrelay-digest-"))
                            && p["title"].as_str().is_some_and(|t| t.contains(phrase))
                    })
                };
                whole(found(&what, find).await)
            }
            Run::Discord(fake) => {
                // As Discord's markdown is escaped: `s\-parity`.
                let marker = phrase.replace('-', "\\-");
                let find = || {
                    crate::discord::fake::CHANNELS.iter().find_map(|c| {
                        fake.state
                            .messages_in(c)
                            .into_iter()
                            .find(|(_, m)| {
                                m["content"].as_str().is_some_and(|t| t.contains(&marker))
                            })
                            .map(|(id, m)| (c.to_string(), id, m))
                    })
                };
                let (channel, id, m) = found(&what, find).await;
                Copy {
                    text: m["content"].as_str().unwrap_or_default().to_string(),
                    raw: json!({"at": [channel, id]}),
                }
            }
            Run::Push(fake) => {
                let find = || {
                    fake.received()
                        .into_iter()
                        .map(|r| r["payload"].clone())
                        .rfind(|p| {
                            p["type"] == "digest"
                                && p["title"].as_str().is_some_and(|t| t.contains(phrase))
                        })
                };
                whole(found(&what, find).await)
            }
            Run::Webhooks(_) => panic!("{what}: webhooks have no digests"),
        }
    }

    async fn approve_all(&self, app: &TestApp, digest: &Copy) {
        match self {
            Run::Telegram(tg) => {
                let chat = digest.raw["chat"].as_i64().unwrap();
                let message = digest.raw["message_id"].as_i64().unwrap();
                let data = |buttons: &Value, label: &str| {
                    buttons
                        .as_array()
                        .unwrap()
                        .iter()
                        .find(|b| b[0].as_str().is_some_and(|l| l.starts_with(label)))
                        .unwrap_or_else(|| panic!("no {label} on {buttons}"))[1]
                        .as_str()
                        .unwrap()
                        .to_string()
                };
                let all = data(&digest.raw["buttons"], "Approve all");
                let alice = crate::telegram::ALICE;
                crate::telegram::tap_at(app, tg, alice, chat, message, &all).await;
                // The message is edited to ask; its Yes answers what it lists.
                let asked = || {
                    tg.calls("editMessageText").into_iter().rev().find_map(|c| {
                        let buttons = json!(telegram_buttons(&c.params));
                        (c.params["message_id"] == message
                            && buttons.to_string().contains("Yes, approve"))
                        .then_some(buttons)
                    })
                };
                wait_until("the confirmation", || asked().is_some()).await;
                let yes = data(&asked().unwrap(), "Yes, approve");
                crate::telegram::tap_at(app, tg, alice, chat, message, &yes).await;
            }
            Run::Feishu(_) => {
                let message = digest.raw["message_id"].as_str().unwrap();
                let press = |card: Value, button: &'static str| async move {
                    let mut env = crate::feishu::click(
                        &crate::feishu::event_id(),
                        crate::feishu::APPROVER,
                        &crate::feishu::button_value(&card, button),
                        None,
                    );
                    env["event"]["context"]["open_message_id"] = json!(message);
                    let (s, reply) = crate::feishu::post_callback(app, &env).await;
                    assert_eq!(s, StatusCode::OK, "{reply}");
                    reply["card"]["data"].clone()
                };
                let confirm = press(digest.raw.clone(), "digest_approve_all").await;
                press(confirm, "digest_confirm").await;
            }
            Run::Slack(fake) => {
                let (at, conn) = (at_of(digest), crate::slack::channel::connected(fake).await);
                crate::slack::channel::click_digest(fake, conn, &at, "a").await;
                crate::slack::channel::click_digest(fake, conn, &at, "A").await;
            }
            Run::DingTalk(fake) => {
                let card = dingtalk_card(digest);
                let conn = crate::dingtalk::channel::connected(fake).await;
                let approver = crate::dingtalk::channel::APPROVER;
                // The reply redraws the card as the confirmation, whose allow button is Yes.
                let asked = crate::dingtalk::channel::click(
                    fake,
                    conn,
                    approver,
                    &card,
                    "allow",
                    json!({}),
                )
                .await;
                let confirming = crate::dingtalk::fake::Card {
                    params: asked["cardData"]["cardParamMap"]
                        .as_object()
                        .unwrap()
                        .clone(),
                    ..card
                };
                crate::dingtalk::channel::click(
                    fake,
                    conn,
                    approver,
                    &confirming,
                    "allow",
                    json!({}),
                )
                .await;
            }
            Run::WeCom(fake) => {
                let chat = digest.raw["chat"].as_str().unwrap();
                let task = digest.raw["card"]["task_id"].as_str().unwrap();
                let approver = crate::wecom::channel::APPROVER;
                let click = |card: &Value, label: &str| {
                    let n = uuid::Uuid::now_v7().simple().to_string();
                    let body = crate::wecom::fake::card_click(
                        &format!("m-{n}"),
                        approver,
                        chat,
                        &crate::wecom::channel::key(card, label),
                        task,
                    );
                    async move { crate::wecom::channel::click(fake, &format!("req-{n}"), body).await }
                };
                // A card that listed less than the digest holds now is shown anew first.
                let mut shown = digest.raw["card"].clone();
                let confirm = loop {
                    let redrawn =
                        click(&shown, "Approve all").await["body"]["template_card"].clone();
                    if redrawn["button_list"][0]["text"]
                        .as_str()
                        .is_some_and(|t| t.starts_with("Yes"))
                    {
                        break redrawn;
                    }
                    shown = redrawn;
                };
                let yes = confirm["button_list"][0]["text"].as_str().unwrap();
                click(&confirm, yes).await;
            }
            Run::Ntfy(fake) => {
                let all = crate::ntfy::button(&digest.raw, "Approve all");
                let (s, body) = crate::ntfy::press(app, &all).await;
                assert_eq!(s, StatusCode::OK, "{body}");
                // Published again in place, to confirm.
                let seq = digest.raw["sequence_id"].clone();
                let yes_of = |p: &Value| {
                    p["actions"].as_array().and_then(|a| {
                        a.iter()
                            .filter_map(|a| a["label"].as_str())
                            .find(|l| l.starts_with("Yes"))
                            .map(str::to_string)
                    })
                };
                let asked = || {
                    fake.published()
                        .into_iter()
                        .rfind(|p| p["sequence_id"] == seq && yes_of(p).is_some())
                };
                wait_until("the confirmation", || asked().is_some()).await;
                let asked = asked().unwrap();
                let yes = crate::ntfy::button(&asked, &yes_of(&asked).unwrap());
                let (s, body) = crate::ntfy::press(app, &yes).await;
                assert_eq!(s, StatusCode::OK, "{body}");
            }
            Run::Discord(fake) => {
                let at = at_of(digest);
                let approver = crate::discord::channel::APPROVER;
                let asked =
                    crate::discord::channel::click(fake, approver, &at, "Approve all").await;
                assert_eq!(asked["type"], 7, "the digest asks in place: {asked}");
                let yes = crate::discord::channel::components(&asked["data"])
                    .into_iter()
                    .filter_map(|c| c["custom_id"].as_str().map(str::to_string))
                    .find(|c| c.starts_with("imrelay-digest:A "))
                    .unwrap_or_else(|| panic!("no Yes in {asked}"));
                let n =
                    crate::discord::channel::NEXT.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                crate::discord::channel::deliver(
                    fake,
                    crate::discord::fake::component_click(
                        &fake.state,
                        n,
                        approver,
                        &at.0,
                        &at.1,
                        &yes,
                        None,
                    ),
                )
                .await;
            }
            Run::Push(fake) => {
                let action = |p: &Value, name: &str| {
                    p["actions"]
                        .as_array()
                        .and_then(|a| a.iter().find(|a| a["action"] == name))
                        .and_then(|a| a["url"].as_str())
                        .map(str::to_string)
                };
                let all = action(&digest.raw, "allow_all").unwrap();
                let (s, body) = crate::ntfy::press(app, &all).await;
                assert_eq!(s, StatusCode::OK, "{body}");
                let tag = digest.raw["tag"].clone();
                let asked = || {
                    fake.received()
                        .into_iter()
                        .map(|r| r["payload"].clone())
                        .rfind(|p| p["tag"] == tag)
                        .and_then(|p| action(&p, "yes"))
                };
                wait_until("the confirmation", || asked().is_some()).await;
                let (s, body) = crate::ntfy::press(app, &asked().unwrap()).await;
                assert_eq!(s, StatusCode::OK, "{body}");
            }
            Run::Webhooks(_) => panic!("webhooks have no digests"),
        }
    }

    async fn steer(&self, app: &TestApp, copy: &Copy, text: &str) {
        match self {
            Run::Telegram(tg) => telegram_reply(app, tg, copy, text).await,
            Run::Feishu(fake) => {
                // A text message replying to the card, the bot @-mentioned (in a group the bot
                // receives only those).
                let parent = copy.raw["message_id"].as_str().unwrap();
                let id = format!("om_in_{}", crate::feishu::event_id());
                fake.state.written(&id, Some(parent));
                let envelope = json!({
                    "schema": "2.0",
                    "header": {"event_id": crate::feishu::event_id(), "token": crate::feishu::VERIFICATION_TOKEN,
                               "create_time": "1700000000000", "event_type": "im.message.receive_v1",
                               "tenant_key": "tenant", "app_id": crate::feishu::fake::APP_ID},
                    "event": {
                        "sender": {"sender_id": {"open_id": crate::feishu::APPROVER, "user_id": "u_approver"},
                                   "sender_type": "user", "tenant_key": "tenant"},
                        "message": {"message_id": id, "root_id": parent, "parent_id": parent,
                                    "create_time": "1700000000000", "chat_id": crate::feishu::CHAT,
                                    "chat_type": "group", "message_type": "text",
                                    "content": json!({"text": format!("@_user_1 {text}")}).to_string(),
                                    "mentions": [{"key": "@_user_1", "id": {"open_id": "ou_bot"}, "name": "imrelay"}]}
                    }
                });
                let (s, reply) = crate::feishu::post_callback(app, &envelope).await;
                assert_eq!(s, StatusCode::OK, "{reply}");
            }
            Run::Slack(fake) => {
                // A `message` event in the prompt's thread, as the Events API delivers it.
                let (channel, thread) = at_of(copy);
                let conn = crate::slack::channel::connected(fake).await;
                let n = uuid::Uuid::now_v7().simple().to_string();
                let ts = "1700000500.000100";
                let envelope = json!({"envelope_id": format!("env-{n}"), "type": "events_api",
                    "accepts_response_payload": false, "retry_attempt": 0, "retry_reason": "",
                    "payload": {"team_id": "T0TEAM", "api_app_id": "A0APP",
                        "event": {"type": "message", "channel": channel,
                            "user": crate::slack::channel::APPROVER, "text": text, "ts": ts,
                            "thread_ts": thread, "parent_user_id": "U0BOT", "channel_type": "channel",
                            "event_ts": ts},
                        "type": "event_callback", "event_id": format!("Ev{n}"), "event_time": 1_700_000_500}});
                fake.state.sockets.deliver(conn, &envelope);
            }
            Run::DingTalk(fake) => {
                // A message to the robot quoting (引用) the card, in the card's group.
                let card = dingtalk_card(copy);
                let group = crate::dingtalk::channel::GROUPS
                    .iter()
                    .find(|g| card.space.ends_with(*g))
                    .unwrap_or_else(|| panic!("the card's group: {}", card.space));
                let conn = crate::dingtalk::channel::connected(fake).await;
                let quote = crate::dingtalk::fake::quoting_message(
                    group,
                    crate::dingtalk::channel::APPROVER,
                    "msgSteer1",
                    &format!(" {text}"),
                    &card,
                );
                fake.state.push(
                    conn,
                    "CALLBACK",
                    "/v1.0/im/bot/messages/get",
                    "m-steer",
                    &quote,
                );
            }
            Run::Discord(fake) => {
                let (channel, prompt) = at_of(copy);
                let m = crate::discord::fake::message_create(
                    &fake.state,
                    crate::discord::channel::APPROVER,
                    &channel,
                    Some(&prompt),
                    true,
                    text,
                );
                fake.state.gateway.dispatch("MESSAGE_CREATE", m);
            }
            Run::WeCom(_) | Run::Ntfy(_) | Run::Push(_) | Run::Webhooks(_) => {
                panic!("no reply to a session's message here")
            }
        }
    }

    async fn outcome_in_thread(&self, copy: &Copy, phrase: &str) {
        let what = format!("the outcome {phrase:?} in reply to the prompt");
        match self {
            Run::Telegram(tg) => {
                let message = copy.raw["message_id"].clone();
                let chat = copy.raw["chat"].clone();
                wait_until(&what, || {
                    tg.calls("sendMessage").iter().any(|c| {
                        c.params["chat_id"] == chat
                            && c.params["reply_parameters"]["message_id"] == message
                            && c.params["text"]
                                .as_str()
                                .is_some_and(|t| t.contains(phrase))
                    })
                })
                .await;
            }
            Run::Feishu(fake) => {
                let message = copy.raw["message_id"].as_str().unwrap();
                wait_until(&what, || {
                    fake.state.replies().iter().any(|r| {
                        r.parent == message
                            && r.reply_in_thread
                            && r.content["text"]
                                .as_str()
                                .is_some_and(|t| t.contains(phrase))
                    })
                })
                .await;
            }
            Run::Slack(fake) => {
                let (channel, ts) = at_of(copy);
                wait_until(&what, || {
                    fake.state.calls("chat.postMessage").iter().any(|c| {
                        c.body["channel"] == channel.as_str()
                            && c.body["thread_ts"] == ts.as_str()
                            && c.body["text"].as_str().is_some_and(|t| t.contains(phrase))
                    })
                })
                .await;
            }
            Run::Discord(fake) => {
                let (channel, prompt) = at_of(copy);
                wait_until(&what, || {
                    fake.state.messages_in(&channel).iter().any(|(_, m)| {
                        m["message_reference"]["message_id"] == prompt.as_str()
                            && m["content"].as_str().is_some_and(|t| t.contains(phrase))
                    })
                })
                .await;
            }
            _ => panic!("{what}: no threads here"),
        }
    }

    async fn thread(&self, id: &str, command: &str) -> String {
        let what = format!("the prompt of {id} in a thread");
        match self {
            Run::Telegram(tg) => {
                let find = || {
                    tg.calls("sendMessage").into_iter().find_map(|c| {
                        (c.params["chat_id"] == TELEGRAM_FORUM
                            && c.params["text"]
                                .as_str()
                                .is_some_and(|t| t.contains(command)))
                        .then(|| c.params["message_thread_id"].clone())
                    })
                };
                let topic = found(&what, find).await;
                topic
                    .as_i64()
                    .unwrap_or_else(|| panic!("{id} posted outside a topic"))
                    .to_string()
            }
            Run::Feishu(fake) => {
                // The reply carrying the card, in the thread of a message sent to the chat.
                let find = || {
                    let roots: Vec<String> = fake
                        .state
                        .delivered()
                        .into_iter()
                        .filter(|d| d.receive_id == crate::feishu::CHAT)
                        .filter_map(|d| d.message_id)
                        .collect();
                    fake.state.replies().into_iter().find(|r| {
                        r.msg_type == "interactive"
                            && roots.contains(&r.parent)
                            && r.content.to_string().contains(&format!("\"{id}\""))
                    })
                };
                let r = found(&what, find).await;
                assert!(r.reply_in_thread, "{what}: {r:?}");
                r.thread_id
                    .clone()
                    .unwrap_or_else(|| panic!("{what}: not in a thread: {r:?}"))
            }
            Run::Slack(fake) => {
                let copies = crate::slack::channel::posted(fake, id).await;
                crate::slack::channel::message(fake, &copies[0])["thread_ts"]
                    .as_str()
                    .unwrap_or_else(|| panic!("{what}: not in a thread: {copies:?}"))
                    .to_string()
            }
            Run::Discord(fake) => {
                // A thread started in the first channel, holding a copy of the prompt.
                let parent = crate::discord::fake::CHANNELS[0];
                let find = || {
                    let threads = fake.state.threads.lock().unwrap().clone();
                    threads.into_iter().find_map(|(t, thread)| {
                        (thread["parent_id"] == parent
                            && fake
                                .state
                                .messages_in(&t)
                                .iter()
                                .any(|(_, m)| m.to_string().contains(&format!(":{id}\""))))
                        .then_some(t)
                    })
                };
                found(&what, find).await
            }
            _ => panic!("{what}: no threads here"),
        }
    }

    fn burst(&self) -> (usize, u64) {
        // Its place's pace (each channel's `deliver.rs`), and four jobs in flight at once.
        match self {
            // A private chat takes a message a second (the client's throttle, which queues
            // every call: eight in flight).
            Run::Telegram(_) => (5, 12),
            // 200 ms a chat.
            Run::Feishu(_) => (20, 12),
            // A second a conversation.
            Run::Slack(_) => (6, 14),
            // 3 s a chat.
            Run::DingTalk(_) => (3, 15),
            // 2 s a chat.
            Run::WeCom(_) => (4, 15),
            // 500 ms a topic.
            Run::Ntfy(_) => (12, 13),
            // 250 ms a channel.
            Run::Discord(_) => (20, 13),
            Run::Push(_) | Run::Webhooks(_) => panic!("never gathered by pace here"),
        }
    }

    fn presses_in_chinese(&self) -> bool {
        matches!(self, Run::Telegram(_) | Run::Ntfy(_) | Run::Push(_))
    }
}

/// The message a Discord or Slack copy stands for: (channel, message id or ts).
fn at_of(copy: &Copy) -> (String, String) {
    (
        copy.raw["at"][0].as_str().unwrap().to_string(),
        copy.raw["at"][1].as_str().unwrap().to_string(),
    )
}

/// What `find` finds, once it does (for at most ten seconds); panics naming `what` if never.
async fn found<T>(what: &str, find: impl Fn() -> Option<T>) -> T {
    crate::support::eventually(what, || std::future::ready(find())).await
}

/// A notification or an event, shown whole, as a copy.
fn whole(v: Value) -> Copy {
    Copy {
        text: v.to_string(),
        raw: v,
    }
}

/// The Feishu card `card`, sent as message `message_id`, as a copy.
fn feishu_copy(message_id: &str, card: Value) -> Copy {
    let text = crate::feishu::card_text(&card);
    let mut raw = card;
    raw["message_id"] = json!(message_id);
    Copy { text, raw }
}

/// The approver's reply to the Telegram message `copy` stands for, saying `text`.
async fn telegram_reply(
    app: &TestApp,
    tg: &crate::telegram::fake::FakeTelegram,
    copy: &Copy,
    text: &str,
) {
    crate::telegram::reply_to(
        app,
        tg,
        crate::telegram::ALICE,
        copy.raw["chat"].as_i64().unwrap(),
        copy.raw["message_id"].as_i64().unwrap(),
        text,
    )
    .await;
}

/// The inline keyboard of a Telegram message's parameters, as (label, callback data).
fn telegram_buttons(params: &Value) -> Vec<(String, String)> {
    params["reply_markup"]["inline_keyboard"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_array)
        .flatten()
        .map(|b| {
            let s = |k: &str| b[k].as_str().unwrap_or_default().to_string();
            (s("text"), s("callback_data"))
        })
        .collect()
}

/// The DingTalk card a copy stands for.
fn dingtalk_card(copy: &Copy) -> crate::dingtalk::fake::Card {
    crate::dingtalk::fake::Card {
        id: copy.raw["id"].as_str().unwrap().to_string(),
        space: copy.raw["space"].as_str().unwrap_or_default().to_string(),
        template: String::new(),
        params: copy.raw["params"].as_object().unwrap().clone(),
        updates: 0,
    }
}

/// Every row is driven here or named with where it is checked; every registered channel
/// has a harness here or in the external suite; every ✅ cell of a driven row of a channel
/// with a harness here shows through the channel's fake.
#[tokio::test]
async fn every_claimed_cell_shows_through_its_channels_fake() {
    for (name, feature) in suite::claimed() {
        if std::env::var("PARITY_ONLY").is_ok_and(|f| !format!("{name}:{feature:?}").contains(&f)) {
            continue;
        }
        if let Some((_, test)) = suite::EXTERNAL.iter().find(|(n, _)| *n == name) {
            eprintln!("parity: {name} · {feature:?}: driven by {test}");
            continue;
        }
        let began = std::time::Instant::now();
        suite::drive::<Run>(name, feature).await;
        eprintln!("parity: {name} · {feature:?} in {:.1?}", began.elapsed());
    }
}
