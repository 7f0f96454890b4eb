//! The DingTalk channel end to end: the real server with `[dingtalk]` enabled, its real
//! OpenAPI and Stream clients pointed at the fake DingTalk on loopback. Cards created and
//! updated, clicks delivered on the card callback topic as DingTalk delivers them, and what
//! the fake holds read as a person would read it.

use std::sync::Arc;

use imrelay::config::{Secret, Settings};
use imrelay::store::{SqliteStore, Store, Synchronous};
use reqwest::StatusCode;
use serde_json::{Value, json};

use super::fake::{
    CLIENT_ID, CLIENT_SECRET, Card, FakeDingTalk, TEMPLATE, bot_message, card_action,
};
use crate::support::{TestApp, settings, spawn_on, spawn_with, wait_until};

pub(crate) const APPROVER: &str = "manager0412";
pub(crate) const STRANGER: &str = "intern9";
/// The groups cards go to.
pub(crate) const GROUPS: [&str; 2] = ["cidGroupOps==", "cidGroupDev=="];
const CALLBACK: &str = "/v1.0/card/instances/callback";

/// Enables the channel in `s`, pointed at `fake`.
pub(crate) fn enable(s: &mut Settings, fake: &FakeDingTalk) {
    let d = &mut s.dingtalk;
    d.enabled = true;
    d.client_id = CLIENT_ID.into();
    d.client_secret = Secret::new(CLIENT_SECRET);
    d.card_template_id = TEMPLATE.into();
    d.api_base = fake.api.clone();
    d.conversations = GROUPS.iter().map(|c| c.to_string()).collect();
    d.approvers = vec![APPROVER.into()];
}

async fn start() -> (FakeDingTalk, TestApp) {
    let fake = FakeDingTalk::start().await;
    let app = spawn_with(|s| enable(s, &fake)).await;
    connected(&fake).await;
    (fake, app)
}

/// The open Stream connection, once there is one.
pub(crate) async fn connected(fake: &FakeDingTalk) -> usize {
    wait_until("a stream connection", || {
        !fake.state.open_conns().is_empty()
    })
    .await;
    fake.state.open_conns()[0]
}

/// The cards of interaction `id`, once there is one in every group.
pub(crate) async fn cards(fake: &FakeDingTalk, id: &str) -> Vec<Card> {
    wait_until(&format!("cards for {id} in every group"), || {
        fake.state.cards_of(id).len() == GROUPS.len()
    })
    .await;
    fake.state.cards_of(id)
}

fn next_id() -> String {
    uuid::Uuid::now_v7().simple().to_string()
}

/// Delivers a click of `action` by `user` on `card` with `params` (the card's token added
/// unless given); returns the acknowledgement's `response`.
pub(crate) async fn click(
    fake: &FakeDingTalk,
    conn: usize,
    user: &str,
    card: &Card,
    action: &str,
    mut params: Value,
) -> Value {
    if params.get("token").is_none() {
        params["token"] = card.params["token"].clone();
    }
    let message_id = next_id();
    let data = card_action(&card.id, user, action, params);
    fake.state
        .push(conn, "CALLBACK", CALLBACK, &message_id, &data);
    ack(fake, &message_id).await
}

/// The `response` of the acknowledgement of message `id`.
async fn ack(fake: &FakeDingTalk, id: &str) -> Value {
    wait_until("the acknowledgement", || !fake.state.acks_of(id).is_empty()).await;
    let (_, a) = &fake.state.acks_of(id)[0];
    assert_eq!(a["code"], 200, "{a}");
    let data: Value = serde_json::from_str(a["data"].as_str().unwrap()).unwrap();
    data["response"].clone()
}

pub(crate) fn notice(response: &Value) -> String {
    response["userPrivateData"]["cardParamMap"]["notice"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

pub(crate) async fn status(app: &TestApp, id: &str) -> Value {
    let (s, body) = app.get(&format!("/v1/interactions/{id}")).await;
    assert_eq!(s, StatusCode::OK, "{body}");
    body
}

/// Waits until every card of `id` is resolved and shows `phrase`.
pub(crate) async fn every_card_shows(fake: &FakeDingTalk, id: &str, phrase: &str) {
    wait_until(&format!("every card showing {phrase:?}"), || {
        let cards = fake.state.cards_of(id);
        !cards.is_empty()
            && cards.iter().all(|c| {
                c.params["status"] != "pending"
                    && c.params["markdown"]
                        .as_str()
                        .is_some_and(|m| m.contains(phrase))
            })
    })
    .await;
}

#[tokio::test]
async fn an_approver_approves_and_every_card_says_who_where_and_how() {
    let (fake, app) = start().await;
    let conn = connected(&fake).await;
    app.create_bash("toolu_d1", "cargo test --workspace").await;
    let cards = cards(&fake, "toolu_d1").await;
    let mut spaces: Vec<&str> = cards.iter().map(|c| c.space.as_str()).collect();
    spaces.sort();
    assert_eq!(
        spaces,
        [
            "dtv1.card//IM_GROUP.cidGroupDev==",
            "dtv1.card//IM_GROUP.cidGroupOps=="
        ]
    );
    let created = fake.state.calls_to("createAndDeliver");
    assert!(cards.iter().all(|c| c.template == TEMPLATE));
    assert_eq!(
        created[0]["imGroupOpenDeliverModel"]["robotCode"],
        CLIENT_ID
    );
    let p = &cards[0].params;
    assert_eq!(p["title"], "审批请求：Bash");
    assert_eq!(p["status"], "pending");
    assert_eq!(p["kind"], "approval");
    assert_eq!(p["allow_label"], "批准");
    let md = p["markdown"].as_str().unwrap();
    assert!(md.contains("```bash\ncargo test --workspace\n```"), "{md}");
    assert!(md.contains("截止时间"), "{md}");

    let response = click(&fake, conn, APPROVER, &cards[0], "allow", json!({})).await;
    assert_eq!(notice(&response), "已批准");
    assert_eq!(response["cardData"]["cardParamMap"]["status"], "allowed");
    assert_eq!(
        response["cardUpdateOptions"],
        json!({"updateCardDataByKey": true, "updatePrivateDataByKey": true})
    );
    let body = status(&app, "toolu_d1").await;
    assert_eq!(body["resolution"]["outcome"], "allowed", "{body}");
    assert_eq!(body["resolution"]["via"], "dingtalk");
    assert_eq!(body["resolution"]["by"], APPROVER);
    every_card_shows(
        &fake,
        "toolu_d1",
        &format!("由 {APPROVER} 通过 dingtalk 批准"),
    )
    .await;
    let done = &fake.state.cards_of("toolu_d1")[1];
    assert_eq!(done.params["title"], "审批请求：Bash · 已批准");
    assert_eq!(done.updates, 1, "each card updated once");
    app.stop().await;
}

#[tokio::test]
async fn deny_with_a_reason_typed_in_the_card() {
    let (fake, app) = start().await;
    let conn = connected(&fake).await;
    app.create_bash("toolu_d2", "rm -rf build").await;
    let cards = cards(&fake, "toolu_d2").await;
    let response = click(
        &fake,
        conn,
        APPROVER,
        &cards[1],
        "deny",
        json!({"text": "  not on a Friday  "}),
    )
    .await;
    assert_eq!(notice(&response), "已拒绝");
    let body = status(&app, "toolu_d2").await;
    assert_eq!(body["resolution"]["outcome"], "denied", "{body}");
    assert_eq!(body["resolution"]["result"]["message"], "not on a Friday");
    every_card_shows(&fake, "toolu_d2", "原因：not on a Friday").await;
    app.stop().await;
}

fn one_question() -> Value {
    json!({"questions": [{"question": "Which database?", "header": "DB", "multiSelect": false,
        "options": [{"label": "Postgres", "description": "Shared by replicas"},
                    {"label": "SQLite", "description": "Embedded"}]}]})
}

async fn create(app: &TestApp, body: Value) {
    let (s, body) = app.post("/v1/interactions", &body).await;
    assert_eq!(s, StatusCode::CREATED, "{body}");
}

#[tokio::test]
async fn a_question_is_answered_with_an_option_button_or_typed_words() {
    let (fake, app) = start().await;
    let conn = connected(&fake).await;
    create(
        &app,
        json!({"id": "q_d1", "tool_name": "AskUserQuestion", "input": one_question()}),
    )
    .await;
    let cards = cards(&fake, "q_d1").await;
    let options: Value =
        serde_json::from_str(cards[0].params["options"].as_str().unwrap()).unwrap();
    assert_eq!(
        options,
        json!([{"label": "Postgres", "index": "0"}, {"label": "SQLite", "index": "1"}])
    );
    let md = cards[0].params["markdown"].as_str().unwrap();
    assert!(md.contains("2) SQLite — Embedded"), "{md}");
    let response = click(
        &fake,
        conn,
        APPROVER,
        &cards[0],
        "pick",
        json!({"index": "1"}),
    )
    .await;
    assert_eq!(notice(&response), "已提交回答");
    let body = status(&app, "q_d1").await;
    assert_eq!(
        body["resolution"]["result"]["updatedInput"]["answers"]["Which database?"], "SQLite",
        "{body}"
    );
    every_card_shows(&fake, "q_d1", "Which database? → SQLite").await;

    // Two questions: one line each, an option's number or one's own words.
    create(
        &app,
        json!({"id": "q_d2", "tool_name": "AskUserQuestion", "input": {"questions": [
            {"question": "Which database?", "header": "DB", "multiSelect": false,
             "options": [{"label": "Postgres"}, {"label": "SQLite"}]},
            {"question": "Which parts?", "header": "Parts", "multiSelect": true,
             "options": [{"label": "api"}, {"label": "ui"}]}]}}),
    )
    .await;
    let cards = self::cards(&fake, "q_d2").await;
    assert_eq!(cards[0].params["options"], "[]", "typed, not buttons");
    let response = click(
        &fake,
        conn,
        APPROVER,
        &cards[0],
        "submit",
        json!({"text": "1"}),
    )
    .await;
    assert!(notice(&response).starts_with("回答无效："), "{response}");
    assert_eq!(status(&app, "q_d2").await["status"], "pending");
    click(
        &fake,
        conn,
        APPROVER,
        &cards[0],
        "submit",
        json!({"text": "MySQL\n1,2"}),
    )
    .await;
    let body = status(&app, "q_d2").await;
    let answers = &body["resolution"]["result"]["updatedInput"]["answers"];
    assert_eq!(answers["Which database?"], "MySQL", "{body}");
    assert_eq!(answers["Which parts?"], "api, ui", "{body}");
    app.stop().await;
}

#[tokio::test]
async fn a_form_is_filled_in_the_card_and_a_bad_value_is_said_to_the_clicker() {
    let (fake, app) = start().await;
    let conn = connected(&fake).await;
    create(
        &app,
        json!({"id": "f_d1", "kind": "form", "message": "Sign up for the beta", "schema": {
            "type": "object",
            "properties": {
                "name": {"type": "string", "title": "Your name", "minLength": 2},
                "age": {"type": "integer", "minimum": 18},
                "plan": {"type": "string", "oneOf": [
                    {"const": "free", "title": "Free"}, {"const": "pro", "title": "Pro"}]}
            },
            "required": ["name", "age", "plan"]}}),
    )
    .await;
    let cards = cards(&fake, "f_d1").await;
    let md = cards[0].params["markdown"].as_str().unwrap();
    assert!(
        md.contains("- plan \u{200b}*: one of the options — 1) Free, 2) Pro"),
        "{md}"
    );
    let response = click(
        &fake,
        conn,
        APPROVER,
        &cards[0],
        "submit",
        json!({"text": "name: Ann\nage: 12\nplan: 2"}),
    )
    .await;
    let said = notice(&response);
    assert!(
        said.starts_with("回答无效：age") && said.contains("18"),
        "{said}"
    );
    assert!(
        response.get("cardData").is_none(),
        "the card stays as it is"
    );
    assert_eq!(status(&app, "f_d1").await["status"], "pending");
    click(
        &fake,
        conn,
        APPROVER,
        &cards[0],
        "submit",
        json!({"text": "Your name: Ann\nage：30\nplan = Pro"}),
    )
    .await;
    let body = status(&app, "f_d1").await;
    assert_eq!(
        body["resolution"]["result"]["content"],
        json!({"name": "Ann", "age": 30, "plan": "pro"}),
        "{body}"
    );
    every_card_shows(&fake, "f_d1", "Your name → Ann").await;
    app.stop().await;
}

#[tokio::test]
async fn a_non_approver_is_told_alone_and_changes_nothing() {
    let (fake, app) = start().await;
    let conn = connected(&fake).await;
    app.create_bash("toolu_d3", "ls").await;
    let cards = cards(&fake, "toolu_d3").await;
    let response = click(&fake, conn, STRANGER, &cards[0], "allow", json!({})).await;
    assert_eq!(notice(&response), "你不在审批人名单中，无法处理此请求");
    assert!(response.get("cardData").is_none());
    assert_eq!(status(&app, "toolu_d3").await["status"], "pending");
    let (_, audit) = app.get("/v1/audit?limit=50").await;
    let text = audit.to_string();
    assert!(text.contains("not in dingtalk.approvers"), "{text}");
    app.stop().await;
}

#[tokio::test]
async fn forged_replayed_and_misfit_clicks_are_refused() {
    let (fake, app) = start().await;
    let conn = connected(&fake).await;
    app.create_bash("toolu_d4", "ls").await;
    let cards = cards(&fake, "toolu_d4").await;
    let token = cards[0].params["token"].as_str().unwrap().to_string();
    // A token with another tag, or naming another interaction with this one's tag.
    let forged = format!("{}AAAA", &token[..token.len() - 4]);
    for bad in [
        forged,
        token.replace("toolu_d4", "toolu_other"),
        String::new(),
    ] {
        let r = click(
            &fake,
            conn,
            APPROVER,
            &cards[0],
            "allow",
            json!({"token": bad}),
        )
        .await;
        assert_eq!(notice(&r), "此按钮无效，未做任何更改", "{r}");
    }
    // An action the card of an approval does not carry.
    let r = click(
        &fake,
        conn,
        APPROVER,
        &cards[0],
        "pick",
        json!({"index": "0"}),
    )
    .await;
    assert_eq!(notice(&r), "此按钮无效，未做任何更改", "{r}");
    assert_eq!(status(&app, "toolu_d4").await["status"], "pending");

    // The real click, then the same click replayed as a new message.
    click(&fake, conn, APPROVER, &cards[0], "deny", json!({})).await;
    let r = click(&fake, conn, APPROVER, &cards[0], "allow", json!({})).await;
    assert_eq!(
        notice(&r),
        format!("已处理：由 {APPROVER} 通过 dingtalk 拒绝")
    );
    assert_eq!(r["cardData"]["cardParamMap"]["status"], "denied");
    assert_eq!(
        status(&app, "toolu_d4").await["resolution"]["outcome"],
        "denied"
    );
    // A card of an earlier interaction whose id is used again acts on nothing.
    assert_eq!(app.prune_all().await, 1);
    app.create_bash("toolu_d4", "rm -rf /").await;
    wait_until("the new cards", || {
        fake.state.cards_of("toolu_d4").len() == 4
    })
    .await;
    let r = click(&fake, conn, APPROVER, &cards[0], "allow", json!({})).await;
    assert_eq!(notice(&r), "该请求已不存在", "{r}");
    assert_eq!(status(&app, "toolu_d4").await["status"], "pending");
    app.stop().await;
}

#[tokio::test]
async fn a_click_delivered_twice_is_handled_once() {
    let (fake, app) = start().await;
    let conn = connected(&fake).await;
    app.create_bash("toolu_d5", "ls").await;
    let cards = cards(&fake, "toolu_d5").await;
    let data = card_action(
        &cards[0].id,
        APPROVER,
        "allow",
        json!({"token": cards[0].params["token"]}),
    );
    fake.state.push(conn, "CALLBACK", CALLBACK, "dup-1", &data);
    let first = ack(&fake, "dup-1").await;
    fake.state.push(conn, "CALLBACK", CALLBACK, "dup-1", &data);
    wait_until("the second ack", || fake.state.acks_of("dup-1").len() == 2).await;
    let acks = fake.state.acks_of("dup-1");
    assert_eq!(acks[0].1, acks[1].1, "the same answer twice");
    assert_eq!(notice(&first), "已批准");
    let metrics = app.metrics().await;
    assert!(
        metrics.contains("imrelay_dingtalk_clicks_total{result=\"resolved\"} 1"),
        "{metrics}"
    );
    assert!(
        !metrics.contains("result=\"already_resolved\""),
        "{metrics}"
    );
    app.stop().await;
}

#[tokio::test]
async fn a_disconnect_is_answered_by_a_new_connection_and_clicks_keep_working() {
    let (fake, app) = start().await;
    let first = connected(&fake).await;
    app.create_bash("toolu_d6", "ls").await;
    let cards = cards(&fake, "toolu_d6").await;
    fake.state
        .push(first, "SYSTEM", "disconnect", "dc-1", &json!({}));
    wait_until("a replacement", || {
        let open = fake.state.open_conns();
        open.len() == 1 && open[0] != first
    })
    .await;
    let second = fake.state.open_conns()[0];
    click(&fake, second, APPROVER, &cards[0], "allow", json!({})).await;
    assert_eq!(
        status(&app, "toolu_d6").await["resolution"]["outcome"],
        "allowed"
    );
    // A dropped connection is replaced after a backoff, and health says so meanwhile.
    fake.state.drop_conn(second);
    wait_until("reconnected", || {
        fake.state.open_conns().iter().any(|c| *c > second)
    })
    .await;
    app.stop().await;
}

#[tokio::test]
async fn answered_elsewhere_updates_every_card() {
    let (fake, app) = start().await;
    app.create_bash("toolu_d7", "terraform apply").await;
    cards(&fake, "toolu_d7").await;
    let (s, body) = app
        .respond(
            "toolu_d7",
            &json!({"decision": "deny", "message": "use the plan", "by": "bob"}),
        )
        .await;
    assert_eq!(s, StatusCode::OK, "{body}");
    every_card_shows(&fake, "toolu_d7", "由 bob 通过 api 拒绝").await;
    every_card_shows(&fake, "toolu_d7", "原因：use the plan").await;
    for c in fake.state.cards_of("toolu_d7") {
        assert_eq!(c.params["status"], "denied");
        assert_eq!(c.params["outcome"], "由 bob 通过 api 拒绝");
    }
    app.stop().await;
}

#[tokio::test]
async fn a_throttled_group_is_retried_and_english_cards_read_in_english() {
    let fake = FakeDingTalk::start().await;
    fake.state
        .throttle_next
        .store(1, std::sync::atomic::Ordering::SeqCst);
    let app = spawn_with(|s| {
        enable(s, &fake);
        s.dingtalk.locale = imrelay::channels::dingtalk::settings::Locale::EnUs;
    })
    .await;
    connected(&fake).await;
    app.create_bash("toolu_d8", "ls").await;
    let cards = cards(&fake, "toolu_d8").await;
    assert_eq!(fake.state.calls_to("createAndDeliver").len(), 3);
    assert_eq!(cards[0].params["title"], "Approve Bash?");
    assert_eq!(cards[0].params["deny_label"], "Deny");
    app.stop().await;
}

#[tokio::test]
async fn pending_cards_survive_a_restart_without_a_second_card() {
    let fake = FakeDingTalk::start().await;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("imrelay.db");
    let mut s = settings();
    enable(&mut s, &fake);
    let store = Arc::new(SqliteStore::open(&path, Synchronous::Normal).unwrap()) as Arc<dyn Store>;
    let app = spawn_on(s.clone(), store).await;
    connected(&fake).await;
    app.create_bash("toolu_d9", "ls").await;
    let cards = cards(&fake, "toolu_d9").await;
    app.stop().await;

    let app = spawn_on(s, Arc::new(crate::support::reopen_sqlite(&path).await)).await;
    wait_until("a connection after the restart", || {
        fake.state.opens.lock().unwrap().len() >= 2 && !fake.state.open_conns().is_empty()
    })
    .await;
    let conn = fake.state.open_conns()[0];
    // The card sent before the restart still works.
    let r = click(&fake, conn, APPROVER, &cards[0], "allow", json!({})).await;
    assert_eq!(notice(&r), "已批准", "{r}");
    every_card_shows(&fake, "toolu_d9", "通过 dingtalk 批准").await;
    assert_eq!(
        fake.state.calls_to("createAndDeliver").len(),
        2,
        "nothing sent twice"
    );
    app.stop().await;
}

#[tokio::test]
async fn whoami_to_the_robot_tells_the_ids_the_settings_need() {
    let (fake, app) = start().await;
    let conn = connected(&fake).await;
    let open = fake.state.opens.lock().unwrap()[0].clone();
    assert_eq!(
        open["subscriptions"],
        json!([{"type": "CALLBACK", "topic": CALLBACK},
               {"type": "CALLBACK", "topic": "/v1.0/im/bot/messages/get"}])
    );
    let topic = "/v1.0/im/bot/messages/get";
    let msg = bot_message("cidNewGroup==", true, "staff7", " whoami ");
    fake.state.push(conn, "CALLBACK", topic, "m-1", &msg);
    wait_until("the reply", || {
        !fake.state.calls_to("groupMessages").is_empty()
    })
    .await;
    let sent = &fake.state.calls_to("groupMessages")[0];
    assert_eq!(sent["openConversationId"], "cidNewGroup==");
    assert_eq!(sent["robotCode"], CLIENT_ID);
    assert_eq!(sent["msgKey"], "sampleText");
    let param: Value = serde_json::from_str(sent["msgParam"].as_str().unwrap()).unwrap();
    assert_eq!(
        param["content"],
        "你的 userId：staff7\n本群的 openConversationId：cidNewGroup=="
    );
    // In a person's chat with the robot, the reply goes to them; anything else is ignored.
    let chat = bot_message("cidPrivate==", false, "staff7", "/WHOAMI");
    fake.state.push(conn, "CALLBACK", topic, "m-2", &chat);
    fake.state.push(
        conn,
        "CALLBACK",
        topic,
        "m-3",
        &bot_message("cidNewGroup==", true, "staff7", "hello"),
    );
    wait_until("the second reply", || {
        !fake.state.calls_to("oToMessages").is_empty()
    })
    .await;
    let sent = &fake.state.calls_to("oToMessages")[0];
    assert_eq!(sent["userIds"], json!(["staff7"]));
    ack(&fake, "m-3").await;
    assert_eq!(fake.state.calls_to("groupMessages").len(), 1);
    app.stop().await;
}

fn doctor_config(fake: &FakeDingTalk, secret: &str) -> String {
    format!(
        r#"
[dingtalk]
enabled = true
client_id = "{CLIENT_ID}"
client_secret = "{secret}"
card_template_id = "{TEMPLATE}"
api_base = "{api}"
conversations = ["cidGroupOps==", "cidNotMember=="]
approvers = ["{APPROVER}"]
"#,
        api = fake.api,
    )
}

#[tokio::test]
async fn doctor_checks_the_app_the_stream_and_sends_each_group_a_test_card() {
    let fake = FakeDingTalk::start().await;
    let (ok, out) =
        crate::doctor::doctor(doctor_config(&fake, CLIENT_SECRET), &["--send-test"]).await;
    assert!(!ok, "one group refuses: {out}");
    for line in [
        "✓ DingTalk: the app credentials get an access token",
        "✓ DingTalk: the Stream gateway hands out a connection",
        "✓ DingTalk: 1 approver(s)",
        "✓ DingTalk: group cidGroupOps== received a test card",
        "✗ DingTalk: group cidNotMember== did not take a test card: DingTalk refused the request (HTTP 200, deliverResults): robot is not in the group\n    → add the app's robot to that group",
    ] {
        assert!(out.contains(line), "{line:?} in:\n{out}");
    }
    let cards = fake.state.cards.lock().unwrap().clone();
    assert_eq!(cards.len(), 2);
    assert_eq!(cards[0].template, TEMPLATE);
    assert!(
        cards[0].params["markdown"]
            .as_str()
            .unwrap()
            .contains("imrelay")
    );

    // Refused credentials send nothing and say which settings to fix.
    let fake = FakeDingTalk::start().await;
    let (ok, out) = crate::doctor::doctor(doctor_config(&fake, "wrong"), &["--send-test"]).await;
    assert!(!ok);
    assert!(
        out.contains("✗ DingTalk: no access token for the app credentials: DingTalk refused the request (HTTP 400, invalidClientIdOrSecret)"),
        "{out}"
    );
    assert!(out.contains("→ check dingtalk.client_id"), "{out}");
    assert!(!out.contains("wrong"), "the secret is never shown: {out}");
    assert!(
        out.contains("✗ DingTalk: no test message sent to group cidGroupOps=="),
        "{out}"
    );
    assert!(fake.state.cards.lock().unwrap().is_empty());
}

#[tokio::test]
async fn a_route_sends_to_its_group_and_its_person_and_only_its_approver_answers() {
    use imrelay::config::teams::{PersonSettings, RouteSettings};
    let fake = FakeDingTalk::start().await;
    let app = spawn_with(|s| {
        enable(s, &fake);
        s.people = vec![PersonSettings {
            ids: imrelay::config::teams::PerChannel::from([(
                "dingtalk".into(),
                imrelay::config::teams::written(vec![STRANGER]),
            )]),
            name: "ann".into(),
            ..Default::default()
        }];
        s.routes = vec![RouteSettings {
            places: imrelay::config::teams::PerChannel::from([(
                "dingtalk".into(),
                imrelay::config::teams::written(vec![GROUPS[1]]),
            )]),
            name: "shop".into(),
            cwd: vec!["/srv/shop/**".into()],
            direct: vec!["ann".into()],
            approvers: vec!["ann".into()],
            ..Default::default()
        }];
    })
    .await;
    let conn = connected(&fake).await;
    create(
        &app,
        json!({"id": "toolu_r1", "tool_name": "Bash", "input": {"command": "make shop"},
            "cwd": "/srv/shop"}),
    )
    .await;
    wait_until("the route's cards", || {
        fake.state.cards_of("toolu_r1").len() == 2
    })
    .await;
    let cards = fake.state.cards_of("toolu_r1");
    let mut spaces: Vec<&str> = cards.iter().map(|c| c.space.as_str()).collect();
    spaces.sort();
    assert_eq!(
        spaces,
        [
            "dtv1.card//IM_GROUP.cidGroupDev==",
            "dtv1.card//IM_ROBOT.intern9"
        ]
    );
    let robot = &fake.state.calls_to("createAndDeliver");
    let to_ann = robot
        .iter()
        .find(|b| b["openSpaceId"] == "dtv1.card//IM_ROBOT.intern9")
        .unwrap();
    assert_eq!(to_ann["imRobotOpenDeliverModel"]["spaceType"], "IM_ROBOT");
    let md = cards[0].params["markdown"].as_str().unwrap();
    assert!(
        md.contains("route shop"),
        "every card names its route: {md}"
    );

    // On dingtalk.approvers, but not the route's approver.
    let r = click(&fake, conn, APPROVER, &cards[0], "allow", json!({})).await;
    assert_eq!(
        notice(&r),
        "此请求属于路由「shop」，只有该路由的审批人可以处理"
    );
    assert_eq!(status(&app, "toolu_r1").await["status"], "pending");
    // Ann is not on dingtalk.approvers, but the route names her: recorded under her name.
    let r = click(&fake, conn, STRANGER, &cards[1], "allow", json!({})).await;
    assert_eq!(notice(&r), "已批准", "{r}");
    let body = status(&app, "toolu_r1").await;
    assert_eq!(body["resolution"]["by"], "ann", "{body}");
    every_card_shows(&fake, "toolu_r1", "由 ann 通过 dingtalk 批准").await;
    app.stop().await;
}

/// `sessions` to the robot: the shared listing of the group's sessions, for approvers only.
#[tokio::test]
async fn sessions_to_the_robot_lists_the_groups_agent_sessions() {
    let (fake, app) = start().await;
    let conn = connected(&fake).await;
    let stop = json!({"hook_event_name": "Stop", "session_id": "s-dt", "cwd": "/srv/shop",
        "stop_hook_active": false, "last_assistant_message": "Deployed to staging."});
    let (status, out) = app.post("/v1/hooks/claude-code", &stop).await;
    assert_eq!(status, 200, "{out}");
    let topic = "/v1.0/im/bot/messages/get";
    let asked = bot_message(GROUPS[0], true, APPROVER, "/sessions");
    fake.state.push(conn, "CALLBACK", topic, "m-s1", &asked);
    let stranger = bot_message(GROUPS[0], true, STRANGER, "会话");
    fake.state.push(conn, "CALLBACK", topic, "m-s2", &stranger);
    wait_until("both replies", || {
        fake.state.calls_to("groupMessages").len() >= 2
    })
    .await;
    let texts: Vec<String> = fake
        .state
        .calls_to("groupMessages")
        .iter()
        .map(|sent| {
            assert_eq!(sent["openConversationId"], GROUPS[0]);
            let param: Value = serde_json::from_str(sent["msgParam"].as_str().unwrap()).unwrap();
            param["content"].as_str().unwrap().to_string()
        })
        .collect();
    let listing = texts
        .iter()
        .find(|t| t.starts_with("会话\n"))
        .expect("the listing");
    assert!(
        listing.contains("finished · claude-code · /srv/shop"),
        "{listing}"
    );
    assert!(listing.contains("Deployed to staging."), "{listing}");
    assert!(
        texts.iter().any(|t| t == "只有审批人可以查看会话。"),
        "{texts:?}"
    );
    app.stop().await;
}
/// The digest card of session `session`, once one was created.
pub(crate) async fn digest_card(fake: &FakeDingTalk, session: &str) -> Card {
    let marker = format!("from session {session}");
    let find = || {
        fake.state
            .cards
            .lock()
            .unwrap()
            .iter()
            .find(|c| {
                c.params["title"]
                    .as_str()
                    .is_some_and(|t| t.contains(&marker))
            })
            .cloned()
    };
    wait_until("a digest card", || find().is_some()).await;
    find().unwrap()
}

/// A server sending to the first group only, in English, with digests past one pending;
/// its Stream connection.
pub(crate) async fn digest_app() -> (FakeDingTalk, TestApp, usize) {
    let fake = FakeDingTalk::start().await;
    let app = spawn_with(|s| {
        enable(s, &fake);
        s.dingtalk.conversations = vec![GROUPS[0].to_string()];
        s.dingtalk.digest_after = 1;
        s.dingtalk.locale = imrelay::channels::dingtalk::settings::Locale::EnUs;
    })
    .await;
    let conn = connected(&fake).await;
    (fake, app, conn)
}

#[tokio::test]
async fn past_digest_after_a_group_gets_one_digest_card_approved_all_once_confirmed() {
    let (fake, app, conn) = digest_app().await;
    for k in 0..3 {
        create(
            &app,
            json!({"id": format!("toolu_dd{k}"), "tool_name": "Bash",
                "input": {"command": format!("step-{k}")}, "session": "s-1", "cwd": "/srv/app"}),
        )
        .await;
    }
    // The first gets its own card; the two past `digest_after` share one digest card, drawn
    // with the same template: Approve all and Deny all are its allow and deny buttons.
    let digest = digest_card(&fake, "s-1").await;
    wait_until("the digest lists both", || {
        digest_card_now(&fake, &digest.id)["title"]
            .as_str()
            .is_some_and(|t| t.starts_with("2 requests"))
    })
    .await;
    assert_eq!(fake.state.cards_of("toolu_dd0").len(), 1);
    let digest = digest_card_of(&fake, &digest.id);
    assert_eq!(digest.params["allow_label"], "Approve all");
    assert_eq!(digest.params["status"], "pending");
    // Approve all asks first (the reply redraws the card as the confirmation), Yes answers.
    let asked = click(&fake, conn, APPROVER, &digest, "allow", json!({})).await;
    let confirm = asked["cardData"]["cardParamMap"].clone();
    assert!(
        confirm["allow_label"].as_str().unwrap().starts_with("Yes"),
        "{confirm}"
    );
    let confirming = Card {
        params: confirm.as_object().unwrap().clone(),
        ..digest.clone()
    };
    let done = click(&fake, conn, APPROVER, &confirming, "allow", json!({})).await;
    assert!(notice(&done).contains("Approved 2"), "{done}");
    assert_eq!(
        done["cardData"]["cardParamMap"]["status"], "answered",
        "{done}"
    );
    for k in 1..3 {
        let body = status(&app, &format!("toolu_dd{k}")).await;
        assert_eq!(body["resolution"]["outcome"], "allowed", "{body}");
    }
    assert_eq!(status(&app, "toolu_dd0").await["status"], "pending");
    app.stop().await;
}

fn digest_card_of(fake: &FakeDingTalk, id: &str) -> Card {
    fake.state
        .cards
        .lock()
        .unwrap()
        .iter()
        .find(|c| c.id == id)
        .cloned()
        .unwrap()
}

fn digest_card_now(fake: &FakeDingTalk, id: &str) -> serde_json::Map<String, Value> {
    digest_card_of(fake, id).params
}
