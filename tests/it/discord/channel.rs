//! The Discord channel end to end: the real server with `[discord]` enabled, its REST client
//! and Gateway pointed at the fake Discord on loopback (validated against discord.py in
//! `tests/external/discord.rs`). Messages posted and edited, clicks, select menus and modal
//! submissions delivered as Discord delivers them, the interaction responses read as Discord
//! reads them, and the HTTP interactions endpoint's signature checks.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use imrelay::channels::discord::Transport;
use imrelay::config::{Secret, Settings};
use reqwest::StatusCode;
use ring::signature::{Ed25519KeyPair, KeyPair};
use serde_json::{Value, json};

use super::fake::{BOT_TOKEN, CHANNELS, FakeDiscord, component_click, modal_submit};
use crate::support::{TestApp, spawn_with, wait_until};

pub(crate) const APPROVER: &str = "6000000000000000001";
pub(crate) const STRANGER: &str = "6000000000000000066";

pub(crate) static NEXT: AtomicU64 = AtomicU64::new(1);

/// Enables the channel in `s`, pointed at `fake`, over the Gateway.
pub(crate) fn enable(s: &mut Settings, fake: &FakeDiscord) {
    let d = &mut s.discord;
    d.enabled = true;
    d.transport = Transport::Gateway;
    d.bot_token = Secret::new(BOT_TOKEN);
    d.api_url = fake.api.clone();
    d.gateway_url = fake.state.gateway.url();
    d.chats = CHANNELS.iter().map(|c| c.to_string()).collect();
    d.approvers = vec![APPROVER.into()];
}

pub(crate) async fn start() -> (FakeDiscord, TestApp) {
    start_with(|_| {}).await
}

/// [`start`], with more settings.
pub(crate) async fn start_with(f: impl FnOnce(&mut Settings)) -> (FakeDiscord, TestApp) {
    let fake = FakeDiscord::start().await;
    fake.state
        .gateway
        .heartbeat_ms
        .store(1000, Ordering::SeqCst);
    let app = spawn_with(|s| {
        enable(s, &fake);
        f(s);
    })
    .await;
    wait_until("a Gateway session", || fake.state.gateway.ready()).await;
    (fake, app)
}

/// The messages posted for interaction `id` in every channel: (channel, message id).
pub(crate) async fn posted(fake: &FakeDiscord, id: &str) -> Vec<(String, String)> {
    let find = || -> Vec<(String, String)> {
        CHANNELS
            .iter()
            .flat_map(|c| {
                fake.state
                    .messages_in(c)
                    .into_iter()
                    .filter(|(_, m)| m.to_string().contains(&format!(":{id}\"")))
                    .map(|(mid, _)| (c.to_string(), mid))
            })
            .collect()
    };
    wait_until(&format!("a copy of {id} in every channel"), || {
        find().len() == CHANNELS.len()
    })
    .await;
    find()
}

pub(crate) fn message(fake: &FakeDiscord, (channel, id): &(String, String)) -> Value {
    fake.state.message(channel, id).unwrap()
}

/// Every component of a message (buttons and selects), flattened.
pub(crate) fn components(m: &Value) -> Vec<Value> {
    m["components"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|row| row["components"].as_array().cloned().unwrap_or_default())
        .collect()
}

/// The `custom_id` of the component labelled `label` (or the select, for `"select"`).
pub(crate) fn custom_id(m: &Value, label: &str) -> String {
    components(m)
        .into_iter()
        .find(|c| c["label"] == label || (label == "select" && c["type"] == 3))
        .unwrap_or_else(|| panic!("no {label} in {m}"))["custom_id"]
        .as_str()
        .unwrap()
        .to_string()
}

/// Dispatches `interaction` over the Gateway; returns the callback imrelay made for it.
pub(crate) async fn deliver(fake: &FakeDiscord, interaction: Value) -> Value {
    let id = interaction["id"].as_str().unwrap().to_string();
    fake.state
        .gateway
        .dispatch("INTERACTION_CREATE", interaction);
    wait_until("the interaction's callback", || {
        fake.state.callbacks().iter().any(|c| c.interaction == id)
    })
    .await;
    let cb = fake
        .state
        .callbacks()
        .into_iter()
        .find(|c| c.interaction == id)
        .unwrap();
    assert!(
        cb.latency.is_some_and(|l| l < Duration::from_secs(3)),
        "answered within Discord's 3 s: {:?}",
        cb.latency
    );
    cb.body
}

/// `user` clicks `label` on copy `at`; returns the interaction response.
pub(crate) async fn click(
    fake: &FakeDiscord,
    user: &str,
    at: &(String, String),
    label: &str,
) -> Value {
    let cid = custom_id(&message(fake, at), label);
    let n = NEXT.fetch_add(1, Ordering::SeqCst);
    deliver(
        fake,
        component_click(&fake.state, n, user, &at.0, &at.1, &cid, None),
    )
    .await
}

async fn status(app: &TestApp, id: &str) -> Value {
    let (s, body) = app.get(&format!("/v1/interactions/{id}")).await;
    assert_eq!(s, StatusCode::OK, "{body}");
    body
}

/// Waits until every copy shows `phrase` with no components left.
async fn every_copy_shows(fake: &FakeDiscord, copies: &[(String, String)], phrase: &str) {
    wait_until(&format!("every copy showing {phrase:?}"), || {
        copies.iter().all(|c| {
            let m = message(fake, c);
            m["content"].as_str().is_some_and(|t| t.contains(phrase)) && components(&m).is_empty()
        })
    })
    .await;
}

#[tokio::test]
async fn the_gateway_identifies_with_unprivileged_intents_heartbeats_and_resumes() {
    let (fake, app) = start().await;
    let g = &fake.state.gateway;
    assert_eq!(
        g.identifies(),
        [(1 << 9) | (1 << 12)],
        "GUILD_MESSAGES and DIRECT_MESSAGES (replies to a session's messages), nothing privileged"
    );
    wait_until("two heartbeats", || g.heartbeats() >= 2).await;
    let session = g.session_id().unwrap();
    g.reconnect();
    wait_until("a resume", || !g.resumes().is_empty()).await;
    assert_eq!(g.resumes()[0].0, session);
    assert_eq!(g.resumes()[0].1, Some(1), "the last sequence seen (READY)");
    assert_eq!(g.identifies().len(), 1, "resumed, not identified again");
    // A session Discord invalidates is identified anew.
    wait_until("the resumed connection", || g.open_conns().len() == 1).await;
    g.invalid_session(false);
    tokio::time::timeout(Duration::from_secs(15), async {
        while g.identifies().len() < 2 {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await
    .expect("identified anew after an invalid session");
    app.stop().await;
}

#[tokio::test]
async fn an_approver_approves_and_every_copy_is_edited_to_the_outcome() {
    let (fake, app) = start().await;
    app.create_bash("toolu_d1", "cargo test --workspace").await;
    let copies = posted(&fake, "toolu_d1").await;
    let m = message(&fake, &copies[0]);
    let content = m["content"].as_str().unwrap();
    assert!(
        content.contains("```bash\n"),
        "the command as code: {content}"
    );
    assert!(content.contains("cargo test --workspace"), "{content}");
    assert_eq!(m["allowed_mentions"], json!({"parse": []}));
    let labels: Vec<Value> = components(&m).iter().map(|c| c["label"].clone()).collect();
    assert_eq!(
        labels,
        ["Approve", "Deny", "Deny with reason…", "Edit & approve…"]
    );
    let response = click(&fake, APPROVER, &copies[0], "Approve").await;
    assert_eq!(
        response["type"], 7,
        "the clicked message is updated at once: {response}"
    );
    assert!(
        response["data"]["content"]
            .as_str()
            .unwrap()
            .contains("Allowed")
    );
    assert_eq!(
        status(&app, "toolu_d1").await["resolution"]["outcome"],
        "allowed"
    );
    every_copy_shows(&fake, &copies, "Allowed").await;
    assert!(fake.state.late_callbacks().is_empty());
    app.stop().await;
}

#[tokio::test]
async fn a_stranger_or_a_forged_click_gets_an_ephemeral_refusal_and_nothing_changes() {
    let (fake, app) = start().await;
    app.create_bash("toolu_d2", "rm -rf build").await;
    let copies = posted(&fake, "toolu_d2").await;
    let before = message(&fake, &copies[0]);
    let response = click(&fake, STRANGER, &copies[0], "Approve").await;
    assert_eq!(response["type"], 4, "{response}");
    assert_eq!(response["data"]["flags"], 64, "ephemeral");
    assert_eq!(
        response["data"]["content"],
        "You are not an approver for this"
    );
    // A custom_id changed by a modified client: refused as not valid.
    let forged = custom_id(&before, "Deny").replacen(":deny:", ":allow:", 1);
    let n = NEXT.fetch_add(1, Ordering::SeqCst);
    let response = deliver(
        &fake,
        component_click(
            &fake.state,
            n,
            APPROVER,
            &copies[0].0,
            &copies[0].1,
            &forged,
            None,
        ),
    )
    .await;
    assert_eq!(response["data"]["flags"], 64, "{response}");
    assert_eq!(response["data"]["content"], "This button is not valid.");
    assert_eq!(status(&app, "toolu_d2").await["status"], "pending");
    assert_eq!(message(&fake, &copies[0]), before, "nothing changed");
    // A late click, after someone else answered: told so, ephemerally.
    click(&fake, APPROVER, &copies[0], "Deny").await;
    every_copy_shows(&fake, &copies, "Denied").await;
    let n = NEXT.fetch_add(1, Ordering::SeqCst);
    let late = custom_id(&before, "Approve");
    let response = deliver(
        &fake,
        component_click(
            &fake.state,
            n,
            APPROVER,
            &copies[1].0,
            &copies[1].1,
            &late,
            None,
        ),
    )
    .await;
    assert_eq!(response["data"]["flags"], 64, "{response}");
    assert!(
        response["data"]["content"]
            .as_str()
            .unwrap()
            .contains("Already denied"),
        "{response}"
    );
    app.stop().await;
}

#[tokio::test]
async fn deny_with_reason_opens_a_modal_whose_reason_reaches_the_agent() {
    let (fake, app) = start().await;
    app.create_bash("toolu_d3", "git push --force").await;
    let copies = posted(&fake, "toolu_d3").await;
    let response = click(&fake, APPROVER, &copies[0], "Deny with reason…").await;
    assert_eq!(response["type"], 9, "a modal: {response}");
    let modal = &response["data"];
    let input = &modal["components"][0]["components"][0];
    assert_eq!(input["type"], 4, "a text input: {modal}");
    let n = NEXT.fetch_add(1, Ordering::SeqCst);
    let submit = modal_submit(
        &fake.state,
        n,
        APPROVER,
        &copies[0].0,
        &copies[0].1,
        modal["custom_id"].as_str().unwrap(),
        &[(input["custom_id"].as_str().unwrap(), "  not on a Friday  ")],
    );
    let response = deliver(&fake, submit).await;
    assert_eq!(response["type"], 7, "{response}");
    let body = status(&app, "toolu_d3").await;
    assert_eq!(body["resolution"]["outcome"], "denied", "{body}");
    assert_eq!(body["resolution"]["result"]["message"], "not on a Friday");
    every_copy_shows(&fake, &copies, "Reason: not on a Friday").await;
    app.stop().await;
}

#[tokio::test]
async fn a_question_is_answered_from_its_select_menu() {
    let (fake, app) = start().await;
    let input = json!({"questions": [{"question": "Which database?", "header": "DB", "multiSelect": false,
        "options": [{"label": "Postgres", "description": "Shared by replicas"},
                    {"label": "SQLite", "description": "Embedded"}]}]});
    let (s, body) = app
        .post(
            "/v1/interactions",
            &json!({"id": "q_d1", "tool_name": "AskUserQuestion", "input": input}),
        )
        .await;
    assert_eq!(s, StatusCode::CREATED, "{body}");
    let copies = posted(&fake, "q_d1").await;
    let m = message(&fake, &copies[0]);
    let select = components(&m).into_iter().find(|c| c["type"] == 3).unwrap();
    assert_eq!(select["options"][1]["label"], "SQLite");
    let n = NEXT.fetch_add(1, Ordering::SeqCst);
    let pick = component_click(
        &fake.state,
        n,
        APPROVER,
        &copies[0].0,
        &copies[0].1,
        select["custom_id"].as_str().unwrap(),
        Some(vec!["1"]),
    );
    let response = deliver(&fake, pick).await;
    assert_eq!(response["type"], 7, "{response}");
    let body = status(&app, "q_d1").await;
    assert_eq!(
        body["resolution"]["result"]["updatedInput"]["answers"]["Which database?"], "SQLite",
        "{body}"
    );
    every_copy_shows(&fake, &copies, "SQLite").await;
    app.stop().await;
}

/// Signs `body` as Discord does at `timestamp`.
fn sign(key: &Ed25519KeyPair, timestamp: &str, body: &str) -> String {
    let msg = format!("{timestamp}{body}");
    key.sign(msg.as_bytes())
        .as_ref()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

#[tokio::test]
async fn the_interactions_endpoint_refuses_a_bad_signature_and_an_old_timestamp() {
    let fake = FakeDiscord::start().await;
    let key = Ed25519KeyPair::from_seed_unchecked(&[42; 32]).unwrap();
    let public: String = key
        .public_key()
        .as_ref()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    let app = spawn_with(|s| {
        enable(s, &fake);
        s.discord.transport = Transport::Interactions;
        s.discord.public_key = public.clone();
    })
    .await;
    let url = app.url("/discord/interactions");
    let send = async |body: &str, ts: &str, sig: &str| {
        let r = app
            .client
            .post(&url)
            .header("content-type", "application/json")
            .header("x-signature-ed25519", sig)
            .header("x-signature-timestamp", ts)
            .body(body.to_string())
            .send()
            .await
            .unwrap();
        let ct = r
            .headers()
            .get("content-type")
            .map(|v| v.to_str().unwrap().to_string());
        (
            r.status(),
            ct,
            r.json::<Value>().await.unwrap_or(Value::Null),
        )
    };
    let now = jiff::Timestamp::now().as_second().to_string();
    let ping = r#"{"type":1,"id":"1","application_id":"2","token":"t","version":1}"#;
    let (s, ct, body) = send(ping, &now, &sign(&key, &now, ping)).await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(ct.as_deref(), Some("application/json"));
    assert_eq!(body, json!({"type": 1}));
    // The same request again: a replay.
    let (s, _, _) = send(ping, &now, &sign(&key, &now, ping)).await;
    assert_eq!(s, StatusCode::UNAUTHORIZED);
    // Signed by another key, or the body changed: refused.
    let other = Ed25519KeyPair::from_seed_unchecked(&[7; 32]).unwrap();
    let (s, _, body) = send(ping, &now, &sign(&other, &now, ping)).await;
    assert_eq!(s, StatusCode::UNAUTHORIZED, "{body}");
    let tampered = ping.replace("\"t\"", "\"u\"");
    let (s, _, _) = send(&tampered, &now, &sign(&key, &now, ping)).await;
    assert_eq!(s, StatusCode::UNAUTHORIZED);
    // Signed, but ten minutes old.
    let old = (jiff::Timestamp::now().as_second() - 600).to_string();
    let (s, _, body) = send(ping, &old, &sign(&key, &old, ping)).await;
    assert_eq!(s, StatusCode::UNAUTHORIZED, "{body}");
    // A signed click is answered in the response body.
    app.create_bash("toolu_d4", "make release").await;
    let copies = posted(&fake, "toolu_d4").await;
    let cid = custom_id(&message(&fake, &copies[0]), "Approve");
    let click = component_click(
        &fake.state,
        900,
        APPROVER,
        &copies[0].0,
        &copies[0].1,
        &cid,
        None,
    );
    let click = click.to_string();
    let (s, ct, body) = send(&click, &now, &sign(&key, &now, &click)).await;
    assert_eq!(s, StatusCode::OK, "{body}");
    assert_eq!(ct.as_deref(), Some("application/json"));
    assert_eq!(body["type"], 7, "{body}");
    assert_eq!(
        status(&app, "toolu_d4").await["resolution"]["outcome"],
        "allowed"
    );
    every_copy_shows(&fake, &copies, "Allowed").await;
    app.stop().await;
}

#[tokio::test]
async fn edit_and_approve_runs_the_command_as_edited_in_the_modal() {
    let (fake, app) = start().await;
    app.create_bash("toolu_d5", "rm -rf /").await;
    let copies = posted(&fake, "toolu_d5").await;
    let response = click(&fake, APPROVER, &copies[1], "Edit & approve…").await;
    assert_eq!(response["type"], 9, "{response}");
    let modal = &response["data"];
    let input = &modal["components"][0]["components"][0];
    assert_eq!(input["value"], "rm -rf /", "the command to edit: {modal}");
    let n = NEXT.fetch_add(1, Ordering::SeqCst);
    let submit = modal_submit(
        &fake.state,
        n,
        APPROVER,
        &copies[1].0,
        &copies[1].1,
        modal["custom_id"].as_str().unwrap(),
        &[(input["custom_id"].as_str().unwrap(), "rm -rf ./build")],
    );
    assert_eq!(deliver(&fake, submit).await["type"], 7);
    let body = status(&app, "toolu_d5").await;
    assert_eq!(
        body["resolution"]["result"]["updatedInput"]["command"], "rm -rf ./build",
        "{body}"
    );
    every_copy_shows(&fake, &copies, "Approved as edited").await;
    app.stop().await;
}

/// The digest message of session `session` in `channel` (its message id), once posted.
async fn digest_of(fake: &FakeDiscord, channel: &str, session: &str) -> String {
    // As Discord's markdown is escaped: `s\-1`.
    let marker = format!("from session {}", session.replace('-', "\\-"));
    let find = || {
        fake.state
            .messages_in(channel)
            .into_iter()
            .find(|(_, m)| m["content"].as_str().is_some_and(|c| c.contains(&marker)))
            .map(|(id, _)| id)
    };
    wait_until("a digest message", || find().is_some()).await;
    find().unwrap()
}

/// The `custom_id` of the digest button whose action code is `code` on `message`.
fn digest_button(message: &Value, code: &str) -> String {
    components(message)
        .into_iter()
        .filter_map(|c| c["custom_id"].as_str().map(str::to_string))
        .find(|c| c.starts_with(&format!("imrelay-digest:{code} ")))
        .unwrap_or_else(|| panic!("no digest button {code} in {message}"))
}

#[tokio::test]
async fn past_digest_after_a_channel_gets_one_digest_approved_all_once_confirmed() {
    let (fake, app) = start_with(|s| {
        s.discord.chats = vec![CHANNELS[0].to_string()];
        s.discord.digest_after = 1;
    })
    .await;
    let mut ids = Vec::new();
    for k in 0..3 {
        let id = format!("toolu_ddg{k}");
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
    // The first is posted on its own; the two past `digest_after` are in one digest, which
    // the fake checked against Discord's limits (custom_ids within 100 characters).
    let digest = digest_of(&fake, CHANNELS[0], "s-1").await;
    let at = (CHANNELS[0].to_string(), digest);
    wait_until("the digest lists both", || {
        message(&fake, &at)["content"]
            .as_str()
            .is_some_and(|c| c.contains("2 requests from session s\\-1"))
    })
    .await;
    let prompts = |id: &str| {
        fake.state
            .messages_in(CHANNELS[0])
            .into_iter()
            .filter(|(_, m)| m.to_string().contains(&format!(":{id}\"")))
            .count()
    };
    assert_eq!(prompts("toolu_ddg0"), 1);
    assert_eq!(prompts("toolu_ddg1") + prompts("toolu_ddg2"), 0);
    let labels: Vec<Value> = components(&message(&fake, &at))
        .iter()
        .map(|c| c["label"].clone())
        .collect();
    assert_eq!(labels, ["Review", "Approve all", "Deny all"]);
    // A stranger is refused; Approve all asks first; Yes answers exactly the two listed.
    let refused = click(&fake, STRANGER, &at, "Approve all").await;
    assert_eq!(refused["data"]["flags"], 64, "{refused}");
    let asked = click(&fake, APPROVER, &at, "Approve all").await;
    assert_eq!(asked["type"], 7, "the digest asks in place: {asked}");
    let yes = digest_button(&asked["data"], "A");
    let n = NEXT.fetch_add(1, Ordering::SeqCst);
    let done = deliver(
        &fake,
        component_click(&fake.state, n, APPROVER, &at.0, &at.1, &yes, None),
    )
    .await;
    assert_eq!(done["type"], 7, "{done}");
    for id in &ids[1..] {
        let body = status(&app, id).await;
        assert_eq!(body["resolution"]["outcome"], "allowed", "{body}");
        assert_eq!(body["resolution"]["via"], "discord");
    }
    assert_eq!(status(&app, "toolu_ddg0").await["status"], "pending");
    // The clicked message is redrawn in place by the response: all answered, no buttons.
    assert!(
        done["data"]["content"]
            .as_str()
            .is_some_and(|c| c.contains("all answered"))
            && components(&done["data"]).is_empty(),
        "{done}"
    );
    app.stop().await;
}
