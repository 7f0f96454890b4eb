//! The parity suite: docs/channels.md's table of what each channel offers, kept true.
//!
//! One suite for every channel in the registry: each row the suite drives is one check
//! written once ([`Feature`]), and each channel one harness ([`Run`]) over the loopback
//! fake its own tests use (Telegram's Bot API, Feishu's callback endpoint, Slack's Socket
//! Mode, DingTalk's Stream, WeCom's long connection, ntfy's publish endpoint, a webhook
//! receiver). Every ✅ cell of a driven row is run through its channel's fake and fails when
//! the fake does not show it; a channel registered without a harness fails too, as does a
//! row the suite neither drives nor names where it is checked.

use reqwest::StatusCode;
use serde_json::{Value, json};

use imrelay::config::Settings;

use crate::support::{TestApp, wait_until};

/// The table: one row per feature, one column per registered channel (by its `platform`).
fn table() -> (Vec<String>, Vec<(String, Vec<String>)>) {
    let doc = include_str!("../../docs/channels.md");
    let lines: Vec<&str> = doc
        .split("## What each channel offers today")
        .nth(1)
        .expect("docs/channels.md has its table")
        .lines()
        .skip_while(|l| !l.starts_with('|'))
        .take_while(|l| l.starts_with('|'))
        .collect();
    let cells = |l: &str| -> Vec<String> {
        l.trim_matches('|')
            .split('|')
            .map(|c| c.trim().to_string())
            .collect()
    };
    let header = cells(lines[0]);
    let rows = lines[2..]
        .iter()
        .map(|l| {
            let c = cells(l);
            (c[0].clone(), c[1..].to_vec())
        })
        .collect();
    (header[1..].to_vec(), rows)
}

/// A row this suite drives through every channel that claims it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Feature {
    /// An approver allows one request and denies another from the prompt.
    ApproveDeny,
    /// Someone not allowed to answer is told the kit's one refusal text, and nothing changes.
    RefusalText,
    /// "Allow similar" allows and grants the proposed rule for the session.
    AllowSimilar,
    /// "Edit & approve" allows with the command as the person changed it.
    EditApprove,
    /// `whoami` from a chat not configured answers with the chat's and the sender's ids.
    Whoami,
    /// A vote that does not decide an approval yet shows on the channel's copy.
    VoteTally,
    /// With `locale = "zh_cn"`, the prompt is in Chinese: its deadline or Deny says 拒绝, and
    /// no English "Deny" or "Deadline" is left on it.
    Locale,
}

impl Feature {
    /// The feature a row of the table stands for, if the suite drives it.
    fn of_row(row: &str) -> Option<Self> {
        Some(match row {
            "Approve, deny" => Feature::ApproveDeny,
            "The same refusal text" => Feature::RefusalText,
            "\"Allow similar\"" => Feature::AllowSimilar,
            "Edit & approve" => Feature::EditApprove,
            "`whoami` tells the chat's and the sender's ids" => Feature::Whoami,
            "The vote tally on every copy" => Feature::VoteTally,
            "`locale` (English and Chinese)" => Feature::Locale,
            _ => return None,
        })
    }
}

/// Channels this suite has no harness for, with the tests that check their ✅ cells (each
/// prints as such when the suite runs): Matrix is tested against a real homeserver (Synapse,
/// a Python program started by `tests/external/matrix.rs`), which this suite's loopback
/// fakes cannot stand in for.
const OWN_SUITE: &[(&str, &str)] = &[("matrix", "tests/external/matrix.rs (a real Synapse)")];

/// Rows the suite does not drive yet, and the tests that check them channel by channel.
const CHECKED_ELSEWHERE: &[(&str, &str)] = &[
    (
        "The one settings vocabulary",
        "tests/it/config_checks.rs (aliases and their warnings)",
    ),
    (
        "Starts with an empty `chats` (learn ids first)",
        "each channel's empty-list test (tests/it/<channel>/)",
    ),
    (
        "Digests (`digest_after`)",
        "each channel's digest tests (tests/it/<channel>/, Discord's in tests/it/discord/channel.rs, ntfy's in tests/it/ntfy_digest.rs, Web Push's in tests/it/push_digest.rs, and the kit's)",
    ),
    (
        "A burst gathered into a digest",
        "the kit's burst tests (digest_flow.rs) and each channel's digest tests (ntfy's burst in tests/it/ntfy_digest.rs)",
    ),
    (
        "A `step_up` approval links to its inbox card",
        "tests/it/{telegram,slack,discord,wecom,dingtalk}/passkey.rs, tests/it/ntfy.rs, feishu's, matrix's and push's unit tests",
    ),
    (
        "The outcome in the message's thread",
        "tests/it/{telegram,slack,discord,feishu}/threads.rs (thread_replies) and tests/external/matrix.rs",
    ),
    (
        "One thread per agent session (`thread_per`)",
        "tests/it/{telegram,slack,discord,feishu}/threads.rs and tests/external/matrix.rs (a real Synapse)",
    ),
    (
        "A reply to a session's message steers it",
        "tests/it/{telegram/sessions,slack/steer,discord/steer,feishu/steer,dingtalk/steer}.rs and tests/external/matrix.rs (a real Synapse)",
    ),
    (
        "`connect_timeout_secs`",
        "each long-connection channel's settings tests",
    ),
];

/// The channels whose harness finds a button on a Chinese copy too (the others' by its
/// English label): with `locale` they are pressed, and what the person is told is checked.
const PRESSED_IN_CHINESE: &[&str] = &["telegram", "ntfy", "push"];

/// Who presses a button.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Who {
    /// A configured approver.
    Approver,
    /// Someone the channel does not let answer.
    Stranger,
}

/// A button of a prompt, by what it does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Button {
    Allow,
    Deny,
    Similar,
}

/// A channel's copy of a prompt, as its fake holds it.
struct Copy {
    /// What a person reads on it.
    text: String,
    /// Everything the harness needs to press its buttons.
    raw: Value,
}

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

/// The prompt's marker: what the copy's text contains.
fn marker(command: &str) -> &str {
    command
}

impl Run {
    /// The server with the channel named `name` on, pointed at a new fake, and `more`
    /// settings.
    async fn start(name: &str, more: fn(&mut Settings)) -> (Run, TestApp) {
        match name {
            "telegram" => {
                let (app, tg) =
                    crate::telegram::start_with(imrelay::channels::telegram::Mode::Webhook, more)
                        .await;
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
                 add one to tests/it/parity.rs (Run::start)"
            ),
        }
    }

    /// The first copy of the prompt of interaction `id`, whose text shows `command`.
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
                let mut raw = card.clone();
                raw["message_id"] = json!(message_id);
                Copy {
                    text: crate::feishu::card_text(&card),
                    raw,
                }
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
                    raw: json!({"id": c.id, "params": c.params}),
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

    /// Presses `button` on `copy` as `who`; returns what the person is told ("" when the
    /// message itself shows it).
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

    /// Waits until the channel's copy of interaction `id` (first seen as `copy`) shows
    /// `phrase`.
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

    /// `whoami` sent from a chat no setting names: the answer, the chat's id and the
    /// sender's id it must tell.
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

    /// "Edit & approve" on `copy` as the approver, with `command` in place of the agent's.
    async fn edit(&self, app: &TestApp, copy: &Copy, command: &str) {
        match self {
            Run::Telegram(tg) => {
                crate::telegram::reply_to(
                    app,
                    tg,
                    crate::telegram::ALICE,
                    copy.raw["chat"].as_i64().unwrap(),
                    copy.raw["message_id"].as_i64().unwrap(),
                    &format!("edit {command}"),
                )
                .await;
            }
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
}

/// `make parity-votes` needs two people (a policy rule's quorum: no route, so every channel
/// posts it where it posts everything and lets its own approvers answer).
fn two_people_needed(s: &mut Settings) {
    s.policy = vec![imrelay::config::policy::PolicyRuleSettings {
        name: "pairs".into(),
        tools: vec!["Bash(make parity-votes)".into()],
        decision: imrelay::interaction::policy::Decision::Ask,
        message: None,
        mode: imrelay::interaction::policy::Mode::Live,
        kind: Vec::new(),
        agent: Vec::new(),
        cwd: Vec::new(),
        route: Vec::new(),
        quorum: Some(2),
        deny_quorum: None,
        step_up: false,
    }];
}

/// Every channel's `locale` set to Chinese.
fn in_chinese(s: &mut Settings) {
    use imrelay::present::render::Locale;
    s.slack.locale = Locale::ZhCn;
    s.discord.locale = Locale::ZhCn;
    s.feishu.locale = Locale::ZhCn;
    s.dingtalk.locale = Locale::ZhCn;
    s.wecom.locale = Locale::ZhCn;
    s.matrix.locale = Locale::ZhCn;
    s.telegram.locale = Locale::ZhCn;
    s.ntfy.locale = Locale::ZhCn;
    s.push.locale = Locale::ZhCn;
}

/// The message a Discord or Slack copy stands for: (channel, message id or ts).
fn at_of(copy: &Copy) -> (String, String) {
    (
        copy.raw["at"][0].as_str().unwrap().to_string(),
        copy.raw["at"][1].as_str().unwrap().to_string(),
    )
}

/// The DingTalk card a copy stands for.
fn dingtalk_card(copy: &Copy) -> crate::dingtalk::fake::Card {
    crate::dingtalk::fake::Card {
        id: copy.raw["id"].as_str().unwrap().to_string(),
        space: String::new(),
        template: String::new(),
        params: copy.raw["params"].as_object().unwrap().clone(),
        updates: 0,
    }
}

async fn status(app: &TestApp, id: &str) -> Value {
    let (s, body) = app.get(&format!("/v1/interactions/{id}")).await;
    assert_eq!(s, StatusCode::OK, "{body}");
    body
}

/// Waits until interaction `id` is resolved; its resolution.
async fn resolved(app: &TestApp, id: &str) -> Value {
    let mut last = Value::Null;
    for _ in 0..400 {
        last = status(app, id).await;
        if last["status"] != "pending" {
            return last["resolution"].clone();
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    panic!("{id} was not resolved: {last}");
}

/// A Bash call of a session (so "Allow similar" has a rule to offer).
fn call(id: &str, command: &str) -> Value {
    json!({"id": id, "tool_name": "Bash", "input": {"command": command},
           "session": "s-parity", "agent": "claude-code", "cwd": "/srv/shop"})
}

async fn create(app: &TestApp, body: Value) -> String {
    let (s, created) = app.post("/v1/interactions", &body).await;
    assert_eq!(s, StatusCode::CREATED, "{created}");
    created["id"].as_str().unwrap().to_string()
}

/// Drives `feature` through channel `name`'s fake; panics with what the fake did not show.
async fn drive(name: &str, feature: Feature) {
    let more: fn(&mut Settings) = match feature {
        Feature::VoteTally => two_people_needed,
        Feature::Locale => in_chinese,
        _ => |_| {},
    };
    let (run, app) = Run::start(name, more).await;
    match feature {
        Feature::ApproveDeny => {
            let id = create(&app, call("p-allow", "make parity-allow")).await;
            let copy = run.copy(&id, "make parity-allow").await;
            run.press(&app, &copy, Button::Allow, Who::Approver).await;
            let r = resolved(&app, &id).await;
            assert_eq!(r["outcome"], "allowed", "{name}: {r}");
            assert!(
                r["via"]
                    .as_str()
                    .unwrap_or_default()
                    .starts_with(name.trim_end_matches('s')),
                "{name}: {r}"
            );
            let id = create(&app, call("p-deny", "make parity-deny")).await;
            let copy = run.copy(&id, "make parity-deny").await;
            run.press(&app, &copy, Button::Deny, Who::Approver).await;
            let r = resolved(&app, &id).await;
            assert_eq!(r["outcome"], "denied", "{name}: {r}");
        }
        Feature::RefusalText => {
            let id = create(&app, call("p-refuse", "make parity-refuse")).await;
            let copy = run.copy(&id, "make parity-refuse").await;
            let told = run.press(&app, &copy, Button::Allow, Who::Stranger).await;
            // The kit's one text, in the channel's language.
            assert!(
                told.contains("You are not an approver for this")
                    || told.contains("你不在审批人名单中，无法处理此请求"),
                "{name}: told {told:?}"
            );
            assert_eq!(status(&app, &id).await["status"], "pending", "{name}");
        }
        Feature::AllowSimilar => {
            let id = create(&app, call("p-similar", "npm run test -- --watch")).await;
            let copy = run.copy(&id, "npm run test -- --watch").await;
            assert!(
                copy.text.contains("Bash(npm run test:*)"),
                "{name}: the rule is not shown: {}",
                copy.text
            );
            run.press(&app, &copy, Button::Similar, Who::Approver).await;
            let r = resolved(&app, &id).await;
            assert_eq!(r["outcome"], "allowed", "{name}: {r}");
            let (_, grants) = app.get("/v1/grants").await;
            let g = &grants["grants"][0];
            assert_eq!(
                (g["rule"].as_str(), g["scope"].as_str(), g["via"].as_str()),
                (Some("Bash(npm run test:*)"), Some("session"), Some(name)),
                "{name}: {grants}"
            );
        }
        Feature::VoteTally => {
            let id = create(&app, call("p-votes", "make parity-votes")).await;
            let copy = run.copy(&id, "make parity-votes").await;
            let (s, body) = app
                .post(
                    &format!("/v1/interactions/{id}/respond"),
                    &json!({"decision": "allow", "by": "vera"}),
                )
                .await;
            assert_eq!(
                s,
                StatusCode::ACCEPTED,
                "{name}: a vote, not a decision: {body}"
            );
            run.shows(&id, &copy, "1 of 2").await;
        }
        Feature::Locale => {
            let id = create(&app, call("p-zh", "make parity-zh")).await;
            let copy = run.copy(&id, "make parity-zh").await;
            assert!(
                copy.text.contains("拒绝")
                    && !copy.text.contains("Deadline")
                    && !copy.text.contains("\"Deny\""),
                "{name}: not in Chinese: {}",
                copy.text
            );
            // What the person is told after a tap, where the channel tells them (the
            // harnesses that press a Chinese copy's buttons).
            if PRESSED_IN_CHINESE.contains(&name) {
                let told = run.press(&app, &copy, Button::Deny, Who::Approver).await;
                assert!(
                    told.is_empty() || !told.is_ascii(),
                    "{name}: told in English: {told:?}"
                );
                assert_eq!(resolved(&app, &id).await["outcome"], "denied", "{name}");
            }
        }
        Feature::Whoami => {
            let (reply, chat, sender) = run.whoami(&app).await;
            assert!(
                reply.contains(&chat) && reply.contains(&sender),
                "{name}: whoami told {reply:?}, not the chat {chat} and the sender {sender}"
            );
        }
        Feature::EditApprove => {
            let id = create(&app, call("p-edit", "rm -rf parity-build")).await;
            let copy = run.copy(&id, "rm -rf parity-build").await;
            run.edit(&app, &copy, "rm -rf parity-build/tmp").await;
            let r = resolved(&app, &id).await;
            assert_eq!(r["outcome"], "allowed", "{name}: {r}");
            assert_eq!(
                r["result"]["updatedInput"]["command"], "rm -rf parity-build/tmp",
                "{name}: {r}"
            );
        }
    }
    app.stop().await;
}

/// Every row is driven here or named with where it is checked; every registered channel
/// has a harness; every ✅ cell of a driven row shows through the channel's fake.
#[tokio::test]
async fn every_claimed_cell_shows_through_its_channels_fake() {
    let (columns, rows) = table();
    let settings = imrelay::config::Settings::defaults().unwrap();
    let channels: Vec<(&str, &str)> = settings
        .channels()
        .iter()
        .map(|c| (c.name(), c.platform()))
        .collect();
    let platforms: Vec<&str> = channels.iter().map(|c| c.1).collect();
    assert_eq!(columns, platforms, "docs/channels.md's columns");
    let mut driven = Vec::new();
    for (row, cells) in &rows {
        let elsewhere = CHECKED_ELSEWHERE.iter().any(|(r, _)| r == row);
        let Some(feature) = Feature::of_row(row) else {
            assert!(
                elsewhere,
                "row {row:?} is neither driven by the parity suite nor named in CHECKED_ELSEWHERE"
            );
            continue;
        };
        for ((name, _), cell) in channels.iter().zip(cells) {
            // A mark may carry a footnote ("✅ ¹").
            if cell.split_whitespace().next() == Some("✅") {
                driven.push((*name, feature));
            }
        }
    }
    assert!(driven.len() >= 15, "{driven:?}");
    for (name, feature) in driven {
        if let Some((_, suite)) = OWN_SUITE.iter().find(|(n, _)| *n == name) {
            eprintln!("parity: {name} · {feature:?}: not driven here yet, checked by {suite}");
            continue;
        }
        eprintln!("parity: {name} · {feature:?}");
        drive(name, feature).await;
    }
}
