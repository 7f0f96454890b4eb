//! A vote's person comes from its credential, never from the name a request body gives: one
//! person cannot meet a quorum of two alone, and the record never says someone else
//! approved (the hardening report's five ways: an administrator's token beside alice's with
//! `"by": "bob"`, two administrator tokens, one token under made-up names or through two
//! surfaces, and one webhook secret sending two senders).

use imrelay::config::teams::{PersonSettings, RouteSettings};
use imrelay::config::{OperatorToken, Secret, Settings};
use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::support::*;
use crate::webhooks::{Receiver, fast, post_signed, signed, target};

const AGENT: &str = "agent-token-0123456789";
const ADMIN: &str = "admin-token-0123456789";
const ADMIN2: &str = "admin2-token-0123456789";
const ALICE: &str = "alice-token-0123456789";
const BOB: &str = "bob-token-01234567890";

fn teams(s: &mut Settings, webhook_url: &str) {
    fast(s);
    s.webhooks = vec![target("ops", webhook_url)];
    s.auth.agent_tokens = vec![Secret::new(AGENT)];
    s.auth.operator_tokens = vec![
        OperatorToken::new(ADMIN),
        OperatorToken::new(ADMIN2),
        OperatorToken::labelled(ALICE, "alice-laptop"),
        OperatorToken::labelled(BOB, "bob-laptop"),
    ];
    s.people = ["alice", "bob"]
        .iter()
        .map(|n| PersonSettings {
            ids: imrelay::config::teams::PerChannel::from([(
                "webhook".into(),
                imrelay::config::teams::written(vec![n.to_string()]),
            )]),
            name: n.to_string(),
            operator: vec![format!("{n}-laptop")],
            ..Default::default()
        })
        .collect();
    s.routes = vec![RouteSettings {
        name: "deploy".into(),
        approvers: vec!["alice".into(), "bob".into()],
        quorum: Some(2),
        ..Default::default()
    }];
}

async fn setup() -> (TestApp, Receiver) {
    let (rx, url) = Receiver::start(&[]).await;
    let app = spawn_with(|s| teams(s, &url)).await;
    (app, rx)
}

async fn create(app: &mut TestApp, id: &str) {
    app.token = Some(AGENT.into());
    let (status, body) = app
        .post(
            "/v1/interactions",
            &json!({"id": id, "tool_name": "Bash", "input": {"command": "make deploy"}}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    assert_eq!(body["quorum"]["allow"], 2, "{body}");
}

async fn vote(app: &mut TestApp, token: &str, id: &str, body: Value) -> (StatusCode, Value) {
    app.token = Some(token.into());
    app.respond(id, &body).await
}

async fn webhook_vote(app: &TestApp, id: &str, by: &str, msg: &str) -> (StatusCode, Value) {
    let body = json!({"id": id, "decision": "allow", "by": by});
    let (raw, headers) = signed(&body, msg, jiff::Timestamp::now().as_second());
    post_signed(app, "ops", raw, headers).await
}

async fn actors(app: &mut TestApp, id: &str) -> Vec<String> {
    app.token = Some(ADMIN.into());
    let (_, body) = app.get("/v1/audit?limit=1000").await;
    body["entries"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["interaction_id"] == id)
        .filter_map(|e| e["actor"].as_str().map(str::to_string))
        .collect()
}

#[tokio::test]
async fn an_administrators_token_votes_as_the_administrator_whatever_name_it_gives() {
    let (mut app, _rx) = setup().await;
    create(&mut app, "v-1").await;
    let (status, out) = vote(
        &mut app,
        ADMIN,
        "v-1",
        json!({"decision": "allow", "by": "bob"}),
    )
    .await;
    assert_eq!(status, StatusCode::ACCEPTED, "{out}");
    assert_eq!(out["votes"], "1 of 2: administrator via api", "{out}");
    let (status, done) = vote(
        &mut app,
        ALICE,
        "v-1",
        json!({"decision": "allow", "by": "bob"}),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{done}");
    assert_eq!(done["resolution"]["by"], "alice", "{done}");
    app.token = Some(ADMIN.into());
    let (_, i) = app.get("/v1/interactions/v-1").await;
    let voters: Vec<&str> = i["votes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["by"].as_str().unwrap())
        .collect();
    assert_eq!(voters, ["administrator", "alice"], "{i}");
    let actors = actors(&mut app, "v-1").await;
    assert!(
        !actors.iter().any(|a| a.starts_with("bob")),
        "nobody recorded bob: {actors:?}"
    );
    assert!(
        actors
            .iter()
            .any(|a| a.starts_with("administrator (operator:token:")),
        "{actors:?}"
    );
}

#[tokio::test]
async fn every_administrators_token_under_any_name_and_surface_is_one_person() {
    let (mut app, _rx) = setup().await;
    create(&mut app, "v-2").await;
    let (status, out) = vote(
        &mut app,
        ADMIN,
        "v-2",
        json!({"decision": "allow", "by": "x", "via": "desktop"}),
    )
    .await;
    assert_eq!(status, StatusCode::ACCEPTED, "{out}");
    for (token, body) in [
        (ADMIN2, json!({"decision": "allow", "by": "bob"})),
        (
            ADMIN,
            json!({"decision": "allow", "by": "y", "via": "terminal"}),
        ),
        (ADMIN, json!({"decision": "allow"})),
    ] {
        let (status, err) = vote(&mut app, token, "v-2", body).await;
        assert_eq!(status, StatusCode::CONFLICT, "{err}");
        assert_eq!(err["error"]["code"], "already_voted", "{err}");
    }
    app.token = Some(ADMIN.into());
    let (_, i) = app.get("/v1/interactions/v-2").await;
    assert_eq!(i["status"], "pending", "{i}");
}

#[tokio::test]
async fn one_webhook_secret_is_one_voter_whatever_sender_it_names() {
    let (mut app, _rx) = setup().await;
    create(&mut app, "v-3").await;
    let (status, out) = webhook_vote(&app, "v-3", "alice", "m-1").await;
    assert_eq!(status, StatusCode::ACCEPTED, "{out}");
    let (status, err) = webhook_vote(&app, "v-3", "bob", "m-2").await;
    assert_eq!(status, StatusCode::CONFLICT, "{err}");
    assert_eq!(err["error"]["code"], "already_voted", "{err}");
    app.token = Some(ADMIN.into());
    let (_, i) = app.get("/v1/interactions/v-3").await;
    assert_eq!(
        i["votes"][0]["by"], "webhook ops",
        "the record says which credential voted: {i}"
    );
    // Alice through her own token is a second person; the tally shows both as they are.
    let (status, done) = vote(&mut app, ALICE, "v-3", json!({"decision": "allow"})).await;
    assert_eq!(status, StatusCode::OK, "{done}");
    let actors = actors(&mut app, "v-3").await;
    assert!(!actors.iter().any(|a| a.starts_with("bob")), "{actors:?}");
}
