//! The Slack channel end to end: the real server with `[slack]` enabled, its real Web API and
//! Socket Mode clients pointed at the fake Slack on loopback. Messages posted and updated,
//! clicks and modal submissions delivered as Slack delivers them, and what the fake received
//! read as a person would read it.

use std::sync::Arc;
use std::time::{Duration, Instant};

use imrelay::channels::slack::Mode;
use imrelay::channels::slack::verify::signature;
use imrelay::config::{Secret, Settings};
use imrelay::store::{SqliteStore, Store, Synchronous};
use reqwest::StatusCode;
use serde_json::{Value, json};

use super::fake::{APP_TOKEN, BOT_TOKEN, CHANNELS, Failure, FakeSlack, interactive};
use crate::support::{TestApp, eventually, settings, spawn_on, spawn_with, wait_until};

pub(crate) const APPROVER: &str = "U0ALICE";
pub(crate) const STRANGER: &str = "U0MALLORY";
const SIGNING_SECRET: &str = "test-signing-secret";

/// Enables the channel in `s`, pointed at `fake`, in Socket Mode with one connection.
pub(crate) fn enable(s: &mut Settings, fake: &FakeSlack) {
    let sl = &mut s.slack;
    sl.enabled = true;
    sl.mode = Mode::SocketMode;
    sl.bot_token = Secret::new(BOT_TOKEN);
    sl.app_token = Secret::new(APP_TOKEN);
    sl.api_base = fake.api.clone();
    sl.connections = 1;
    sl.channels = CHANNELS.iter().map(|c| c.to_string()).collect();
    sl.approvers = vec![APPROVER.into()];
}

async fn start() -> (FakeSlack, TestApp) {
    let fake = FakeSlack::start().await;
    let app = spawn_with(|s| enable(s, &fake)).await;
    connected(&fake).await;
    (fake, app)
}

/// The number of the open Socket Mode connection, once there is one.
pub(crate) async fn connected(fake: &FakeSlack) -> usize {
    wait_until("a socket mode connection", || {
        !fake.state.sockets.open_conns().is_empty()
    })
    .await;
    fake.state.sockets.open_conns()[0]
}

/// Every button in `blocks`.
pub(crate) fn buttons(blocks: &Value) -> Vec<Value> {
    let mut out = Vec::new();
    fn walk(v: &Value, out: &mut Vec<Value>) {
        match v {
            Value::Object(m) => {
                if v["type"] == "button" {
                    out.push(v.clone());
                }
                m.values().for_each(|c| walk(c, out));
            }
            Value::Array(a) => a.iter().for_each(|c| walk(c, out)),
            _ => {}
        }
    }
    walk(blocks, &mut out);
    out
}

/// All text of a message or view, joined by lines: what a person reads.
pub(crate) fn text_of(v: &Value) -> String {
    let mut out = Vec::new();
    fn walk(v: &Value, out: &mut Vec<String>) {
        match v {
            Value::Object(m) => {
                if let Some(Value::String(t)) = m.get("text") {
                    out.push(t.clone());
                }
                m.iter()
                    .filter(|(k, _)| *k != "value" && *k != "private_metadata")
                    .for_each(|(_, c)| walk(c, out));
            }
            Value::Array(a) => a.iter().for_each(|c| walk(c, out)),
            _ => {}
        }
    }
    walk(&v["blocks"], &mut out);
    out.join("\n")
}

/// The messages posted for interaction `id` so far: (channel, ts) of each.
pub(crate) fn copies(fake: &FakeSlack, id: &str) -> Vec<(String, String)> {
    let mut found: Vec<(String, String)> = fake
        .state
        .calls("chat.postMessage")
        .iter()
        .filter(|c| {
            buttons(&c.body["blocks"]).iter().any(|b| {
                b["value"]
                    .as_str()
                    .is_some_and(|v| v.contains(&format!(" {id} ")))
            })
        })
        .filter_map(|c| {
            let channel = c.body["channel"].as_str()?.to_string();
            let messages = fake.state.messages.lock().unwrap();
            messages
                .iter()
                .find(|((ch, _), body)| ch == &channel && body == &&c.body)
                .map(|((ch, ts), _)| (ch.clone(), ts.clone()))
        })
        .collect();
    found.sort();
    found.dedup();
    found
}

/// The messages posted for interaction `id`: (channel, ts) of each, waiting for both.
pub(crate) async fn posted(fake: &FakeSlack, id: &str) -> Vec<(String, String)> {
    wait_until(&format!("messages for {id} in every channel"), || {
        copies(fake, id).len() == CHANNELS.len()
    })
    .await;
    copies(fake, id)
}

/// The current body of a message.
pub(crate) fn message(fake: &FakeSlack, (channel, ts): &(String, String)) -> Value {
    fake.state.message(channel, ts).unwrap()
}

/// The value of the button whose action id is `imrelay.<action>` on a message.
fn value(body: &Value, action: &str) -> String {
    buttons(&body["blocks"])
        .into_iter()
        .find(|b| b["action_id"] == format!("imrelay.{action}"))
        .unwrap_or_else(|| panic!("no {action} button in {body}"))["value"]
        .as_str()
        .unwrap()
        .to_string()
}

fn next_id() -> String {
    uuid::Uuid::now_v7().simple().to_string()
}

/// A `block_actions` payload: `user` pressed `action` carrying `value` on message `at`.
fn click_payload(user: &str, at: &(String, String), action: &str, value: &str) -> Value {
    let trigger = format!("trigger-{}", next_id());
    json!({
        "type": "block_actions",
        "user": {"id": user, "username": user.to_lowercase(), "name": user.to_lowercase(), "team_id": "T0TEAM"},
        "api_app_id": "A0APP",
        "container": {"type": "message", "message_ts": at.1, "channel_id": at.0, "is_ephemeral": false},
        "trigger_id": trigger,
        "team": {"id": "T0TEAM", "domain": "imrelay-test"},
        "channel": {"id": at.0, "name": "approvals"},
        "message": {"ts": at.1},
        "state": {"values": {}},
        "actions": [{"type": "button", "action_id": format!("imrelay.{action}"), "block_id": "decide",
            "value": value, "action_ts": "1700000001.000200"}],
    })
}

/// Delivers `payload` in an interactive envelope on `conn`; returns the acknowledgement's
/// payload once it came.
pub(crate) async fn deliver(fake: &FakeSlack, conn: usize, payload: Value) -> Option<Value> {
    let envelope_id = next_id();
    let accepts = payload["type"] == "view_submission";
    // Slack's trigger ids: the fake accepts each once.
    if let Some(t) = payload["trigger_id"].as_str() {
        fake.state.triggers.lock().unwrap().insert(t.to_string());
    }
    fake.state
        .sockets
        .deliver(conn, &interactive(&envelope_id, payload, accepts));
    wait_until("the acknowledgement", || {
        !fake.state.sockets.acks_of(&envelope_id).is_empty()
    })
    .await;
    fake.state.sockets.acks_of(&envelope_id)[0].payload.clone()
}

/// Clicks the `action` button of the message at `at` as `user`.
pub(crate) async fn click(
    fake: &FakeSlack,
    conn: usize,
    user: &str,
    at: &(String, String),
    action: &str,
) -> Option<Value> {
    let v = value(&message(fake, at), action);
    deliver(fake, conn, click_payload(user, at, action, &v)).await
}

/// The last modal `views.open` received.
pub(crate) async fn modal(fake: &FakeSlack, n: usize) -> Value {
    wait_until("a modal", || fake.state.calls("views.open").len() >= n).await;
    fake.state.calls("views.open")[n - 1].body["view"].clone()
}

/// A `view_submission` of `view` by `user` with input `values` (block id → element state).
pub(crate) fn submission(user: &str, view: &Value, values: Value) -> Value {
    let state: serde_json::Map<String, Value> = values
        .as_object()
        .unwrap()
        .iter()
        .map(|(block, v)| (block.clone(), json!({"v": v})))
        .collect();
    json!({
        "type": "view_submission",
        "user": {"id": user, "username": user.to_lowercase(), "name": user.to_lowercase(), "team_id": "T0TEAM"},
        "api_app_id": "A0APP",
        "view": {"id": "V0MODAL", "type": "modal", "callback_id": view["callback_id"],
            "private_metadata": view["private_metadata"], "blocks": view["blocks"],
            "title": view["title"], "state": {"values": state}},
    })
}

/// The ephemeral notices `user` was shown.
pub(crate) fn ephemerals(fake: &FakeSlack, user: &str) -> Vec<String> {
    fake.state
        .calls("chat.postEphemeral")
        .iter()
        .filter(|c| c.body["user"] == user)
        .map(|c| c.body["text"].as_str().unwrap_or_default().to_string())
        .collect()
}

pub(crate) async fn status(app: &TestApp, id: &str) -> Value {
    let (s, body) = app.get(&format!("/v1/interactions/{id}")).await;
    assert_eq!(s, StatusCode::OK, "{body}");
    body
}

/// Waits until every copy of `id` shows `phrase`.
async fn every_copy_shows(fake: &FakeSlack, copies: &[(String, String)], phrase: &str) {
    wait_until(&format!("every copy showing {phrase:?}"), || {
        copies
            .iter()
            .all(|c| text_of(&message(fake, c)).contains(phrase))
    })
    .await;
    for c in copies {
        let m = message(fake, c);
        assert!(
            buttons(&m["blocks"]).is_empty(),
            "a resolved message keeps no buttons: {m}"
        );
    }
}

#[tokio::test]
async fn an_approver_approves_and_every_copy_says_who_where_and_how() {
    let (fake, app) = start().await;
    let conn = connected(&fake).await;
    app.create_bash("toolu_s1", "cargo test --workspace").await;
    let copies = posted(&fake, "toolu_s1").await;

    // What a person sees: a header asking, the command as code, four buttons.
    let m = message(&fake, &copies[0]);
    assert_eq!(m["text"], "Approval needed: Bash");
    let blocks = m["blocks"].as_array().unwrap();
    assert_eq!(blocks[0]["type"], "header");
    assert_eq!(blocks[0]["text"]["text"], "Approve Bash?");
    let code = blocks.iter().find(|b| b["type"] == "rich_text").unwrap();
    assert_eq!(
        code["elements"][0]["type"], "rich_text_preformatted",
        "{code}"
    );
    assert!(text_of(&m).contains("cargo test --workspace"));
    let labels: Vec<(String, Value)> = buttons(&m["blocks"])
        .iter()
        .map(|b| {
            (
                b["text"]["text"].as_str().unwrap().to_string(),
                b["style"].clone(),
            )
        })
        .collect();
    assert_eq!(
        labels,
        [
            ("Approve".to_string(), json!("primary")),
            ("Deny".to_string(), json!("danger")),
            ("Deny with reason…".to_string(), Value::Null),
            ("Edit & approve…".to_string(), Value::Null),
        ]
    );
    assert!(text_of(&m).contains("Deadline (denied automatically after)"));

    let ack = click(&fake, conn, APPROVER, &copies[0], "allow").await;
    assert_eq!(ack, None, "a click is acknowledged without a payload");
    let body = status(&app, "toolu_s1").await;
    assert_eq!(body["resolution"]["outcome"], "allowed", "{body}");
    assert_eq!(body["resolution"]["via"], "slack");
    assert_eq!(body["resolution"]["by"], "u0alice");
    every_copy_shows(&fake, &copies, "Allowed by u0alice via slack").await;
    let done = message(&fake, &copies[1]);
    assert_eq!(done["blocks"][0]["text"]["text"], "✅ Bash · Allowed");
    assert!(
        ephemerals(&fake, APPROVER).is_empty(),
        "the message itself says it worked"
    );
    // Each copy was updated once, in its own conversation.
    let updates = fake.state.calls("chat.update");
    assert_eq!(updates.len(), 2, "{updates:?}");
    app.stop().await;
}

#[tokio::test]
async fn deny_with_reason_goes_through_a_modal() {
    let (fake, app) = start().await;
    let conn = connected(&fake).await;
    app.create_bash("toolu_s2", "rm -rf build").await;
    let copies = posted(&fake, "toolu_s2").await;
    click(&fake, conn, APPROVER, &copies[0], "reason").await;
    let view = modal(&fake, 1).await;
    assert_eq!(view["title"]["text"], "Deny with reason");
    assert_eq!(view["submit"]["text"], "Deny");
    assert_eq!(view["blocks"][1]["type"], "input");
    assert_eq!(status(&app, "toolu_s2").await["status"], "pending");

    let ack = deliver(
        &fake,
        conn,
        submission(
            APPROVER,
            &view,
            json!({"reason": {"type": "plain_text_input", "value": "  not on a Friday  "}}),
        ),
    )
    .await;
    assert_eq!(ack, None, "an empty acknowledgement closes the modal");
    let body = status(&app, "toolu_s2").await;
    assert_eq!(body["resolution"]["outcome"], "denied", "{body}");
    assert_eq!(
        body["resolution"]["result"]["message"], "not on a Friday",
        "{body}"
    );
    every_copy_shows(&fake, &copies, "Reason: not on a Friday").await;
    every_copy_shows(&fake, &copies, "Denied by u0alice via slack").await;
    app.stop().await;
}

#[tokio::test]
async fn edit_then_approve_runs_the_edited_command() {
    let (fake, app) = start().await;
    let conn = connected(&fake).await;
    app.create_bash("toolu_s3", "rm -rf /").await;
    let copies = posted(&fake, "toolu_s3").await;
    click(&fake, conn, APPROVER, &copies[1], "edit").await;
    let view = modal(&fake, 1).await;
    assert_eq!(view["title"]["text"], "Edit & approve");
    assert_eq!(view["blocks"][1]["element"]["initial_value"], "rm -rf /");
    deliver(
        &fake,
        conn,
        submission(
            APPROVER,
            &view,
            json!({"command": {"type": "plain_text_input", "value": "rm -rf ./build"}}),
        ),
    )
    .await;
    let body = status(&app, "toolu_s3").await;
    assert_eq!(body["resolution"]["outcome"], "allowed", "{body}");
    assert_eq!(
        body["resolution"]["result"]["updatedInput"]["command"], "rm -rf ./build",
        "{body}"
    );
    every_copy_shows(&fake, &copies, "rm -rf ./build").await;
    assert!(text_of(&message(&fake, &copies[0])).contains("Approved as edited:"));
    app.stop().await;
}

#[tokio::test]
async fn a_non_approver_is_told_privately_and_changes_nothing() {
    let (fake, app) = start().await;
    let conn = connected(&fake).await;
    app.create_bash("toolu_s4", "make deploy").await;
    let copies = posted(&fake, "toolu_s4").await;
    click(&fake, conn, STRANGER, &copies[0], "allow").await;
    wait_until("an ephemeral notice", || {
        !ephemerals(&fake, STRANGER).is_empty()
    })
    .await;
    assert_eq!(
        ephemerals(&fake, STRANGER),
        ["You are not an approver for this"]
    );
    let e = &fake.state.calls("chat.postEphemeral")[0];
    assert_eq!(e.body["channel"], copies[0].0.as_str());
    // The modal buttons are refused before any modal opens.
    click(&fake, conn, STRANGER, &copies[0], "reason").await;
    wait_until("a second notice", || ephemerals(&fake, STRANGER).len() == 2).await;
    assert!(fake.state.calls("views.open").is_empty());
    assert_eq!(status(&app, "toolu_s4").await["status"], "pending");
    assert!(fake.state.calls("chat.update").is_empty());
    let (_, audit) = app.get("/v1/audit?limit=50").await;
    assert!(
        audit.to_string().contains("not in slack.approvers"),
        "{audit}"
    );
    app.stop().await;
}

#[tokio::test]
async fn forged_and_replayed_actions_are_refused() {
    let (fake, app) = start().await;
    let conn = connected(&fake).await;
    app.create_bash("toolu_s5", "ls").await;
    app.create_bash("toolu_s5b", "ls -la").await;
    let copies = posted(&fake, "toolu_s5").await;
    let other = posted(&fake, "toolu_s5b").await;

    // A value whose action was changed, and one moved to another interaction: refused.
    let deny = value(&message(&fake, &copies[0]), "deny");
    let forged = deny.replacen("deny", "allow", 1);
    deliver(
        &fake,
        conn,
        click_payload(APPROVER, &copies[0], "allow", &forged),
    )
    .await;
    let moved = value(&message(&fake, &other[0]), "allow").replace("toolu_s5b", "toolu_s5");
    deliver(
        &fake,
        conn,
        click_payload(APPROVER, &copies[0], "allow", &moved),
    )
    .await;
    wait_until("two notices", || ephemerals(&fake, APPROVER).len() == 2).await;
    assert!(
        ephemerals(&fake, APPROVER)
            .iter()
            .all(|t| t == "This button is not valid.")
    );
    assert_eq!(status(&app, "toolu_s5").await["status"], "pending");

    // The real click wins; the same click again, in a new envelope, is told it was answered.
    let allow = value(&message(&fake, &copies[0]), "allow");
    deliver(
        &fake,
        conn,
        click_payload(APPROVER, &copies[0], "allow", &allow),
    )
    .await;
    assert_eq!(
        status(&app, "toolu_s5").await["resolution"]["outcome"],
        "allowed"
    );
    deliver(
        &fake,
        conn,
        click_payload(APPROVER, &copies[0], "deny", &deny),
    )
    .await;
    wait_until("a third notice", || ephemerals(&fake, APPROVER).len() == 3).await;
    assert_eq!(
        ephemerals(&fake, APPROVER)[2],
        "Already allowed by u0alice via slack"
    );
    assert_eq!(
        status(&app, "toolu_s5").await["resolution"]["outcome"],
        "allowed"
    );
    app.stop().await;
}

#[tokio::test]
async fn an_envelope_delivered_twice_is_handled_once() {
    let (fake, app) = start().await;
    let conn = connected(&fake).await;
    app.create_bash("toolu_s6", "ls").await;
    let copies = posted(&fake, "toolu_s6").await;
    let v = value(&message(&fake, &copies[0]), "deny");
    let envelope = interactive(
        "env-twice",
        click_payload(APPROVER, &copies[0], "deny", &v),
        false,
    );
    fake.state.sockets.deliver(conn, &envelope);
    fake.state.sockets.deliver(conn, &envelope);
    wait_until("both copies acknowledged", || {
        fake.state.sockets.acks_of("env-twice").len() == 2
    })
    .await;
    assert_eq!(
        status(&app, "toolu_s6").await["resolution"]["outcome"],
        "denied"
    );
    every_copy_shows(&fake, &copies, "Denied by u0alice via slack").await;
    // Handled once: the copy got no "already denied" notice. A notice for it would have been
    // on its way before the copy was acknowledged; one asked for after that (a stranger's
    // click) arrives after it would have.
    deliver(&fake, conn, click_payload(STRANGER, &copies[0], "deny", &v)).await;
    wait_until("the stranger's notice", || {
        !ephemerals(&fake, STRANGER).is_empty()
    })
    .await;
    assert!(ephemerals(&fake, APPROVER).is_empty());
    app.stop().await;
}

fn one_question(multi: bool) -> Value {
    json!({"questions": [{"question": "Which database?", "header": "DB", "multiSelect": multi,
        "options": [{"label": "Postgres", "description": "Shared by replicas"},
                    {"label": "SQLite", "description": "Embedded"},
                    {"label": "Memory"}]}]})
}

async fn create_question(app: &TestApp, id: &str, input: Value) {
    let (s, body) = app
        .post(
            "/v1/interactions",
            &json!({"id": id, "tool_name": "AskUserQuestion", "input": input}),
        )
        .await;
    assert_eq!(s, StatusCode::CREATED, "{body}");
}

#[tokio::test]
async fn a_question_is_answered_with_its_buttons_or_other() {
    let (fake, app) = start().await;
    let conn = connected(&fake).await;
    create_question(&app, "q_s1", one_question(false)).await;
    let copies = posted(&fake, "q_s1").await;
    let m = message(&fake, &copies[0]);
    let shown = text_of(&m);
    assert!(shown.contains("[DB] Which database?"), "{shown}");
    assert!(shown.contains("Postgres: Shared by replicas"), "{shown}");
    let labels: Vec<String> = buttons(&m["blocks"])
        .iter()
        .map(|b| b["text"]["text"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(
        labels,
        ["Postgres", "SQLite", "Memory", "Other…", "Decline"]
    );
    click(&fake, conn, APPROVER, &copies[0], "pick.1").await;
    let body = status(&app, "q_s1").await;
    assert_eq!(body["resolution"]["outcome"], "answered", "{body}");
    assert_eq!(
        body["resolution"]["result"]["updatedInput"]["answers"]["Which database?"], "SQLite",
        "{body}"
    );
    every_copy_shows(&fake, &copies, "Which database? → SQLite").await;

    // "Other…" takes a typed answer in a modal.
    create_question(&app, "q_s2", one_question(false)).await;
    let copies = posted(&fake, "q_s2").await;
    click(&fake, conn, APPROVER, &copies[0], "other").await;
    let view = modal(&fake, 1).await;
    assert!(text_of(&view).contains("Which database?"));
    deliver(
        &fake,
        conn,
        submission(
            APPROVER,
            &view,
            json!({"answer": {"type": "plain_text_input", "value": "CockroachDB"}}),
        ),
    )
    .await;
    let body = status(&app, "q_s2").await;
    assert_eq!(
        body["resolution"]["result"]["updatedInput"]["answers"]["Which database?"], "CockroachDB",
        "{body}"
    );
    app.stop().await;
}

#[tokio::test]
async fn a_multi_select_question_is_ticked_and_submitted() {
    let (fake, app) = start().await;
    let conn = connected(&fake).await;
    create_question(&app, "q_m1", one_question(true)).await;
    let copies = posted(&fake, "q_m1").await;
    let m = message(&fake, &copies[0]);
    let checks = m["blocks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|b| b["block_id"] == "checks")
        .unwrap()
        .clone();
    assert_eq!(checks["elements"][0]["type"], "checkboxes");
    assert_eq!(
        checks["elements"][0]["options"].as_array().unwrap().len(),
        3
    );
    // Ticking a box is acknowledged and changes nothing.
    let mut tick = click_payload(APPROVER, &copies[0], "checks", "");
    tick["actions"][0]["action_id"] = json!("imrelay.checks");
    tick["actions"][0]["type"] = json!("checkboxes");
    deliver(&fake, conn, tick).await;
    assert_eq!(status(&app, "q_m1").await["status"], "pending");

    // Submit with nothing ticked is refused privately; with two ticked, answered.
    let submit = value(&m, "submit");
    deliver(
        &fake,
        conn,
        click_payload(APPROVER, &copies[0], "submit", &submit),
    )
    .await;
    wait_until("a notice", || !ephemerals(&fake, APPROVER).is_empty()).await;
    assert!(ephemerals(&fake, APPROVER)[0].contains("tick at least one option"));
    let mut payload = click_payload(APPROVER, &copies[0], "submit", &submit);
    payload["state"] = json!({"values": {"checks": {"imrelay.checks": {"type": "checkboxes",
        "selected_options": [{"value": "0"}, {"value": "2"}]}}}});
    deliver(&fake, conn, payload).await;
    let body = status(&app, "q_m1").await;
    assert_eq!(body["resolution"]["outcome"], "answered", "{body}");
    assert_eq!(
        body["resolution"]["result"]["updatedInput"]["answers"]["Which database?"],
        "Postgres, Memory",
        "{body}"
    );
    every_copy_shows(&fake, &copies, "Which database? → Postgres, Memory").await;
    app.stop().await;
}

fn signup_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "name": {"type": "string", "title": "Your name", "minLength": 2},
            "age": {"type": "integer", "minimum": 18, "maximum": 130},
            "plan": {"type": "string", "oneOf": [
                {"const": "free", "title": "Free"}, {"const": "pro", "title": "Pro"}]},
            "extras": {"type": "array", "items": {"enum": ["backup", "support"]}},
            "start": {"type": "string", "format": "date"},
            "newsletter": {"type": "boolean", "default": false}
        },
        "required": ["name", "age", "plan"]
    })
}

#[tokio::test]
async fn a_form_opens_as_a_modal_and_shows_validation_errors_there() {
    let (fake, app) = start().await;
    let conn = connected(&fake).await;
    let (s, body) = app
        .post(
            "/v1/interactions",
            &json!({"id": "f_s1", "kind": "form", "message": "Sign up for the beta", "schema": signup_schema()}),
        )
        .await;
    assert_eq!(s, StatusCode::CREATED, "{body}");
    let copies = posted(&fake, "f_s1").await;
    let m = message(&fake, &copies[0]);
    assert!(text_of(&m).contains("Sign up for the beta"));
    click(&fake, conn, APPROVER, &copies[0], "fill").await;
    let view = modal(&fake, 1).await;
    let blocks = view["blocks"].as_array().unwrap();
    let kinds: Vec<(&str, &str, bool)> = blocks
        .iter()
        .filter(|b| b["type"] == "input")
        .map(|b| {
            (
                b["label"]["text"].as_str().unwrap(),
                b["element"]["type"].as_str().unwrap(),
                b["optional"].as_bool().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        kinds,
        [
            ("Your name", "plain_text_input", false),
            ("age", "number_input", false),
            ("plan", "static_select", false),
            ("extras", "multi_static_select", true),
            ("start", "datepicker", true),
            ("newsletter", "checkboxes", true),
        ]
    );
    let values = |age: &str| {
        json!({
            "f0": {"type": "plain_text_input", "value": "Ann"},
            "f1": {"type": "number_input", "value": age},
            "f2": {"type": "static_select", "selected_option": {"value": "1"}},
            "f3": {"type": "multi_static_select", "selected_options": [{"value": "0"}]},
            "f4": {"type": "datepicker", "selected_date": "2026-12-01"},
            "f5": {"type": "checkboxes", "selected_options": []},
        })
    };
    let ack = deliver(&fake, conn, submission(APPROVER, &view, values("12"))).await;
    let ack = ack.expect("errors come back in the acknowledgement");
    assert_eq!(ack["response_action"], "errors");
    let error = ack["errors"]["f1"].as_str().unwrap();
    assert!(error.contains("18"), "{ack}");
    assert_eq!(status(&app, "f_s1").await["status"], "pending");

    assert_eq!(
        deliver(&fake, conn, submission(APPROVER, &view, values("30"))).await,
        None
    );
    let body = status(&app, "f_s1").await;
    assert_eq!(body["resolution"]["outcome"], "answered", "{body}");
    assert_eq!(
        body["resolution"]["result"]["content"],
        json!({"name": "Ann", "age": 30, "plan": "pro", "extras": ["backup"], "start": "2026-12-01", "newsletter": false}),
        "{body}"
    );
    every_copy_shows(&fake, &copies, "Your name → Ann").await;
    app.stop().await;
}

#[tokio::test]
async fn answered_elsewhere_updates_every_slack_copy() {
    let (fake, app) = start().await;
    app.create_bash("toolu_s7", "terraform apply").await;
    let copies = posted(&fake, "toolu_s7").await;
    let (s, body) = app
        .respond(
            "toolu_s7",
            &json!({"decision": "deny", "message": "use the plan", "by": "bob"}),
        )
        .await;
    assert_eq!(s, StatusCode::OK, "{body}");
    every_copy_shows(&fake, &copies, "Denied by bob via api").await;
    every_copy_shows(&fake, &copies, "Reason: use the plan").await;

    // Withdrawn by the agent and expired say so too.
    app.create_bash("toolu_s8", "sleep 1").await;
    let copies = posted(&fake, "toolu_s8").await;
    let (s, _) = app.delete("/v1/interactions/toolu_s8").await;
    assert!(s.is_success(), "{s}");
    wait_until("the withdrawn copies", || {
        copies.iter().all(|c| {
            let m = message(&fake, c);
            m["blocks"][0]["text"]["text"]
                .as_str()
                .is_some_and(|t| t.contains("Cancelled"))
        })
    })
    .await;
    let (s, body) = app
        .post(
            "/v1/interactions",
            &json!({"id": "toolu_s15", "tool_name": "Bash", "input": {"command": "sleep 9"}, "timeout_secs": 4}),
        )
        .await;
    assert_eq!(s, StatusCode::CREATED, "{body}");
    let copies = posted(&fake, "toolu_s15").await;
    every_copy_shows(&fake, &copies, "Expired — denied automatically").await;
    assert_eq!(
        message(&fake, &copies[0])["blocks"][0]["text"]["text"],
        "⌛ Bash · Expired — denied automatically"
    );
    app.stop().await;
}

#[tokio::test]
async fn retry_after_is_honoured_and_other_channels_are_not_held_up() {
    let fake = FakeSlack::start().await;
    let feishu = crate::feishu::fake::FakeFeishu::start().await;
    let app = spawn_with(|s| {
        enable(s, &fake);
        crate::feishu::enable(s, &feishu);
    })
    .await;
    connected(&fake).await;
    fake.state.fail(
        "chat.postMessage",
        &[Failure::RateLimited(2), Failure::ServerError],
    );
    let t0 = Instant::now();
    app.create_bash("toolu_s9", "ls").await;
    // Feishu does not wait for Slack.
    wait_until("the feishu cards", || feishu.state.delivered().len() == 2).await;
    let feishu_done = t0.elapsed();
    let copies = posted(&fake, "toolu_s9").await;
    let slack_done = t0.elapsed();
    // Slack waited out its Retry-After; Feishu had finished before that.
    assert!(slack_done >= Duration::from_secs(2), "{slack_done:?}");
    assert!(feishu_done < slack_done, "{feishu_done:?} {slack_done:?}");
    assert_eq!(copies.len(), 2);
    // Three tries of chat.postMessage for the throttled copy, each copy posted once.
    let posts = fake.state.calls("chat.postMessage");
    assert_eq!(posts.len(), 4, "{posts:?}");
    app.stop().await;
}

#[tokio::test]
async fn a_disconnect_mid_run_is_answered_by_a_new_connection_and_clicks_keep_working() {
    let (fake, app) = start().await;
    let first = connected(&fake).await;
    app.create_bash("toolu_s10", "ls").await;
    let copies = posted(&fake, "toolu_s10").await;
    fake.state.sockets.disconnect(first, "refresh_requested");
    wait_until("a replacement", || {
        fake.state.sockets.open_conns().iter().any(|c| *c != first)
            && !fake.state.sockets.open_conns().contains(&first)
    })
    .await;
    let second = fake.state.sockets.open_conns()[0];
    click(&fake, second, APPROVER, &copies[0], "allow").await;
    assert_eq!(
        status(&app, "toolu_s10").await["resolution"]["outcome"],
        "allowed"
    );
    app.stop().await;
}

#[tokio::test]
async fn pending_prompts_survive_a_restart_without_a_second_post() {
    let fake = FakeSlack::start().await;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("imrelay.db");
    let open = || async {
        Arc::new(SqliteStore::open(&path, Synchronous::Normal).unwrap()) as Arc<dyn Store>
    };
    let mut s = settings();
    enable(&mut s, &fake);
    let app = spawn_on(s.clone(), open().await).await;
    connected(&fake).await;
    app.create_bash("toolu_s11", "ls").await;
    let copies = posted(&fake, "toolu_s11").await;
    app.stop().await;

    let app = spawn_on(s, Arc::new(crate::support::reopen_sqlite(&path).await)).await;
    wait_until("a connection after the restart", || {
        fake.state.sockets.opened() >= 2 && !fake.state.sockets.open_conns().is_empty()
    })
    .await;
    let conn = fake.state.sockets.open_conns()[0];
    // The button on the message posted before the restart still works.
    click(&fake, conn, APPROVER, &copies[0], "allow").await;
    assert_eq!(
        status(&app, "toolu_s11").await["resolution"]["outcome"],
        "allowed"
    );
    every_copy_shows(&fake, &copies, "Allowed by u0alice via slack").await;
    assert_eq!(
        fake.state.calls("chat.postMessage").len(),
        2,
        "nothing posted twice"
    );
    app.stop().await;
}

async fn post_signed(
    app: &TestApp,
    body: &str,
    content_type: &str,
    ts: i64,
) -> (StatusCode, String) {
    let ts = ts.to_string();
    let resp = app
        .client
        .post(app.url("/slack/events"))
        .header("content-type", content_type)
        .header("X-Slack-Request-Timestamp", &ts)
        .header(
            "X-Slack-Signature",
            signature(SIGNING_SECRET, &ts, body.as_bytes()),
        )
        .body(body.to_string())
        .send()
        .await
        .unwrap();
    (resp.status(), resp.text().await.unwrap())
}

#[tokio::test]
async fn the_http_endpoint_verifies_signatures_and_refuses_replays() {
    let fake = FakeSlack::start().await;
    let app = spawn_with(|s| {
        enable(s, &fake);
        s.slack.mode = Mode::Http;
        s.slack.signing_secret = Secret::new(SIGNING_SECRET);
    })
    .await;
    let now = jiff::Timestamp::now().as_second();
    let (s, body) = post_signed(
        &app,
        r#"{"type":"url_verification","challenge":"c-123"}"#,
        "application/json",
        now,
    )
    .await;
    assert_eq!(
        (s, body.as_str()),
        (StatusCode::OK, r#"{"challenge":"c-123"}"#)
    );

    app.create_bash("toolu_s12", "ls").await;
    let copies = posted(&fake, "toolu_s12").await;
    let v = value(&message(&fake, &copies[0]), "allow");
    let form = |p: &Value| {
        form_urlencoded::Serializer::new(String::new())
            .append_pair("payload", &p.to_string())
            .finish()
    };
    let body = form(&click_payload(APPROVER, &copies[0], "allow", &v));
    let ct = "application/x-www-form-urlencoded";

    // Stale, badly signed: 401, nothing changes.
    let (s, _) = post_signed(&app, &body, ct, now - 301).await;
    assert_eq!(s, StatusCode::UNAUTHORIZED);
    let resp = app
        .client
        .post(app.url("/slack/events"))
        .header("content-type", ct)
        .header("X-Slack-Request-Timestamp", now.to_string())
        .header("X-Slack-Signature", "v0=00")
        .body(body.clone())
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::UNAUTHORIZED);
    assert_eq!(status(&app, "toolu_s12").await["status"], "pending");

    let (s, _) = post_signed(&app, &body, ct, now).await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(
        status(&app, "toolu_s12").await["resolution"]["outcome"],
        "allowed"
    );
    // The same signed request again is a replay.
    let (s, text) = post_signed(&app, &body, ct, now).await;
    assert_eq!(s, StatusCode::UNAUTHORIZED, "{text}");
    assert!(text.contains("replay"), "{text}");
    every_copy_shows(&fake, &copies, "Allowed by u0alice via slack").await;

    // A modal over HTTP: the errors come back in the response body.
    app.create_bash("toolu_s14", "ls").await;
    let copies = posted(&fake, "toolu_s14").await;
    let v = value(&message(&fake, &copies[0]), "edit");
    let click = click_payload(APPROVER, &copies[0], "edit", &v);
    fake.state
        .triggers
        .lock()
        .unwrap()
        .insert(click["trigger_id"].as_str().unwrap().to_string());
    let (s, _) = post_signed(&app, &form(&click), ct, now).await;
    assert_eq!(s, StatusCode::OK);
    let view = modal(&fake, 1).await;
    let empty = submission(
        APPROVER,
        &view,
        json!({"command": {"type": "plain_text_input", "value": "   "}}),
    );
    let (s, text) = post_signed(&app, &form(&empty), ct, now).await;
    assert_eq!(s, StatusCode::OK);
    let reply: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(
        reply,
        json!({"response_action": "errors", "errors": {"command": "Type the command to run."}})
    );
    assert_eq!(status(&app, "toolu_s14").await["status"], "pending");
    app.stop().await;
}

#[tokio::test]
async fn with_thread_replies_the_outcome_is_also_said_in_each_thread() {
    let fake = FakeSlack::start().await;
    let app = spawn_with(|s| {
        enable(s, &fake);
        s.slack.thread_replies = true;
    })
    .await;
    app.create_bash("toolu_s13", "ls").await;
    let copies = posted(&fake, "toolu_s13").await;
    app.respond(
        "toolu_s13",
        &json!({"decision": "allow", "by": "<!channel> bob"}),
    )
    .await;
    every_copy_shows(&fake, &copies, "Allowed by <!channel> bob via api").await;
    let replies = || {
        fake.state
            .calls("chat.postMessage")
            .into_iter()
            .filter(|c| c.body["thread_ts"].is_string())
            .collect::<Vec<_>>()
    };
    wait_until("a reply in each thread", || replies().len() == 2).await;
    for (channel, ts) in &copies {
        let all = replies();
        let reply = all
            .iter()
            .find(|r| r.body["channel"] == channel.as_str())
            .unwrap();
        assert_eq!(reply.body["thread_ts"], ts.as_str());
        // The notification text is escaped; the block shows the name as written.
        let text = reply.body["text"].as_str().unwrap();
        assert!(
            text.starts_with("✅ Allowed by &lt;!channel&gt; bob via api · "),
            "{text}"
        );
        assert_eq!(reply.body["blocks"][0]["text"]["type"], "plain_text");
    }
    app.stop().await;
}

#[tokio::test]
async fn allow_similar_approves_and_grants_the_proposed_rule_for_the_session() {
    let (fake, app) = start().await;
    let conn = connected(&fake).await;
    let call = |id: &str, command: &str| {
        json!({"id": id, "tool_name": "Bash", "input": {"command": command},
               "session": "s-slack", "agent": "claude-code", "cwd": "/srv/shop"})
    };
    let (created, _) = app
        .post(
            "/v1/interactions",
            &call("toolu_sim1", "npm run test -- --watch"),
        )
        .await;
    assert_eq!(created, StatusCode::CREATED);
    let copies = posted(&fake, "toolu_sim1").await;
    let m = message(&fake, &copies[0]);
    // The button, and the rule it adds, in full.
    assert!(
        buttons(&m["blocks"])
            .iter()
            .any(|b| b["text"]["text"] == "Allow similar (this session)"),
        "{m}"
    );
    assert!(
        text_of(&m).contains("Allow similar also allows, for this session: Bash(npm run test:*)"),
        "{m}"
    );
    click(&fake, conn, APPROVER, &copies[0], "allow_similar").await;
    let body = status(&app, "toolu_sim1").await;
    assert_eq!(body["resolution"]["outcome"], "allowed", "{body}");
    assert_eq!(body["resolution"]["via"], "slack");
    let (_, grants) = app.get("/v1/grants").await;
    let g = &grants["grants"][0];
    assert_eq!(g["rule"], "Bash(npm run test:*)", "{grants}");
    assert_eq!(
        (g["scope"].as_str(), g["via"].as_str()),
        (Some("session"), Some("slack"))
    );
    // The next matching call of the session is allowed by the grant.
    let (_, next) = app
        .post("/v1/interactions", &call("toolu_sim2", "npm run test"))
        .await;
    assert_eq!(next["status"], "resolved", "{next}");
    assert_eq!(next["resolution"]["by"], "grant Bash(npm run test:*)");
    // A call without a session carries no such button.
    app.create_bash("toolu_sim3", "npm run test").await;
    let plain = message(&fake, &posted(&fake, "toolu_sim3").await[0]);
    assert!(
        !buttons(&plain["blocks"])
            .iter()
            .any(|b| b["action_id"] == "imrelay.allow_similar"),
        "{plain}"
    );
    app.stop().await;
}

/// The `/sessions` slash command (Socket Mode): the shared listing of the channel's sessions
/// in the acknowledgement, shown to the person who typed it; for approvers only.
#[tokio::test]
async fn the_sessions_slash_command_lists_the_channels_agent_sessions() {
    let (fake, app) = start().await;
    let conn = connected(&fake).await;
    let stop = json!({"hook_event_name": "Stop", "session_id": "s-sl", "cwd": "/srv/<shop>",
        "stop_hook_active": false, "last_assistant_message": "Deployed to staging."});
    let (status, out) = app.post("/v1/hooks/claude-code", &stop).await;
    assert_eq!(status, 200, "{out}");
    let command = |id: &str, user: &str| {
        json!({"envelope_id": id, "type": "slash_commands", "accepts_response_payload": true,
            "payload": {"command": "/sessions", "text": "", "user_id": user,
                "channel_id": CHANNELS[0], "team_id": "T0TEAM",
                "response_url": "https://hooks.slack.com/commands/T0TEAM/1/x", "trigger_id": "t.1"}})
    };
    fake.state
        .sockets
        .deliver(conn, &command("env-sessions", APPROVER));
    fake.state
        .sockets
        .deliver(conn, &command("env-sessions-2", STRANGER));
    wait_until("both acknowledged", || {
        !fake.state.sockets.acks_of("env-sessions").is_empty()
            && !fake.state.sockets.acks_of("env-sessions-2").is_empty()
    })
    .await;
    let listing = fake.state.sockets.acks_of("env-sessions")[0]
        .payload
        .clone()
        .expect("a response");
    assert_eq!(listing["response_type"], "ephemeral", "{listing}");
    let text = listing["text"].as_str().unwrap();
    assert!(text.starts_with("Sessions\n"), "{text}");
    // Outside text escaped for Slack.
    assert!(
        text.contains("finished · claude-code · /srv/&lt;shop&gt;"),
        "{text}"
    );
    let refused = fake.state.sockets.acks_of("env-sessions-2")[0]
        .payload
        .clone()
        .expect("a response");
    assert_eq!(refused["text"], "Only approvers can list the sessions.");
    app.stop().await;
}

/// The digest message of session `session` (its conversation and ts), once one was posted.
pub(super) async fn digest_of(fake: &FakeSlack, session: &str) -> (String, String) {
    let marker = format!("from session {session}");
    let find = || {
        let messages = fake.state.messages.lock().unwrap();
        messages
            .iter()
            .find(|(_, body)| text_of(body).contains(&marker))
            .map(|(k, _)| k.clone())
    };
    wait_until("a digest message", || find().is_some()).await;
    find().unwrap()
}

/// Clicks the digest button `code` (`a`: Approve all, `A`: confirm) of the digest at `at`.
pub(crate) async fn click_digest(fake: &FakeSlack, conn: usize, at: &(String, String), code: &str) {
    let action_id = format!("imrelay-digest.{code}");
    wait_until(&format!("a {action_id} button"), || {
        buttons(&message(fake, at)["blocks"])
            .iter()
            .any(|b| b["action_id"] == action_id)
    })
    .await;
    let v = buttons(&message(fake, at)["blocks"])
        .into_iter()
        .find(|b| b["action_id"] == action_id)
        .unwrap()["value"]
        .as_str()
        .unwrap()
        .to_string();
    let mut payload = click_payload(APPROVER, at, "allow", &v);
    payload["actions"][0]["action_id"] = json!(action_id);
    deliver(fake, conn, payload).await;
}

#[tokio::test]
async fn past_digest_after_a_conversation_gets_one_digest_approved_all_once_confirmed() {
    let fake = FakeSlack::start().await;
    let app = spawn_with(|s| {
        enable(s, &fake);
        s.slack.channels = vec![CHANNELS[0].to_string()];
        s.slack.digest_after = 1;
    })
    .await;
    let conn = connected(&fake).await;
    let mut ids = Vec::new();
    for k in 0..3 {
        let id = format!("toolu_dg{k}");
        let (s, body) = app
            .post(
                "/v1/interactions",
                &json!({"id": id, "tool_name": "Bash", "input": {"command": format!("step-{k}")},
                    "session": "s-1", "cwd": "/home/dev/shop"}),
            )
            .await;
        assert_eq!(s, StatusCode::CREATED, "{body}");
        ids.push(id);
    }
    // The first is posted on its own; the two past `digest_after` are in one digest.
    let at = digest_of(&fake, "s-1").await;
    wait_until("the digest lists both", || {
        text_of(&message(&fake, &at)).contains("2 requests from session s-1")
    })
    .await;
    assert_eq!(copies(&fake, "toolu_dg0").len(), 1);
    assert!(copies(&fake, "toolu_dg1").is_empty() && copies(&fake, "toolu_dg2").is_empty());
    // Approve all asks first; Yes answers exactly the two listed.
    click_digest(&fake, conn, &at, "a").await;
    click_digest(&fake, conn, &at, "A").await;
    for id in &ids[1..] {
        let body = eventually(&format!("{id} answered"), || async {
            let b = status(&app, id).await;
            (b["status"] == "resolved").then_some(b)
        })
        .await;
        assert_eq!(body["resolution"]["outcome"], "allowed", "{body}");
        assert_eq!(body["resolution"]["via"], "slack");
    }
    assert_eq!(status(&app, "toolu_dg0").await["status"], "pending");
    wait_until("the digest reads all answered", || {
        let m = message(&fake, &at);
        text_of(&m).contains("all answered") && buttons(&m["blocks"]).is_empty()
    })
    .await;
    app.stop().await;
}
