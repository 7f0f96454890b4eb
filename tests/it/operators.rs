//! Operator tokens with labels: an answer from the inbox, the terminal or the API is
//! recorded under the person whose token it is, and such an operator answers only the
//! routes they approve (`403 not_an_approver` otherwise, on a single and on a bulk answer);
//! a token without a label is the administrator's and answers everything.

use imrelay::config::teams::{PersonSettings, RouteSettings};
use imrelay::config::{OperatorToken, Secret, Settings};
use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::support::*;

const AGENT: &str = "agent-token-0123456789";
const ADMIN: &str = "admin-token-0123456789";
const ALICE: &str = "alice-token-0123456789";
const BOB: &str = "bob-token-0123456789";
const NOBODY: &str = "nobody-token-0123456789";

/// Alice approves the shop; bob is a person with no route of his own; `kiosk` is a label
/// nobody lists.
fn teams(s: &mut Settings) {
    s.auth.agent_tokens = vec![Secret::new(AGENT)];
    s.auth.operator_tokens = vec![
        OperatorToken::new(ADMIN),
        OperatorToken::labelled(ALICE, "alice-laptop"),
        // The environment's form: the label, a space, the token.
        format!("bob-phone {BOB}").parse().unwrap(),
        OperatorToken::labelled(NOBODY, "kiosk"),
    ];
    s.people = vec![
        PersonSettings {
            name: "alice".into(),
            operator: vec!["alice-laptop".into()],
            ..Default::default()
        },
        PersonSettings {
            name: "bob".into(),
            operator: vec!["bob-phone".into()],
            ..Default::default()
        },
    ];
    s.routes = vec![RouteSettings {
        name: "shop".into(),
        cwd: vec!["/srv/shop/**".into()],
        approvers: vec!["alice".into()],
        ..Default::default()
    }];
}

async fn create(app: &mut TestApp, id: &str, cwd: &str) -> String {
    app.token = Some(AGENT.into());
    let (status, body) = app
        .post(
            "/v1/interactions",
            &json!({"id": id, "tool_name": "Bash", "input": {"command": "make"}, "cwd": cwd}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    id.to_string()
}

async fn answer_as(app: &mut TestApp, token: &str, id: &str, body: Value) -> (StatusCode, Value) {
    app.token = Some(token.into());
    app.respond(id, &body).await
}

#[tokio::test]
async fn a_labelled_token_answers_under_its_persons_name() {
    let mut app = spawn_with(teams).await;
    let a = create(&mut app, "op-a", "/tmp/x").await;
    // The body's name is not who answers: the token says so.
    let (status, out) = answer_as(
        &mut app,
        BOB,
        &a,
        json!({"decision": "allow", "by": "mallory", "via": "desktop"}),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{out}");
    assert_eq!(out["resolution"]["by"], "bob", "{out}");
    assert_eq!(out["resolution"]["via"], "desktop", "{out}");
    // A label nobody lists is recorded as the label.
    let k = create(&mut app, "op-k", "/tmp/x").await;
    let (_, out) = answer_as(&mut app, NOBODY, &k, json!({"decision": "deny"})).await;
    assert_eq!(out["resolution"]["by"], "kiosk", "{out}");
    // The administrator's token keeps the name it gives.
    let d = create(&mut app, "op-d", "/tmp/x").await;
    let (_, out) = answer_as(
        &mut app,
        ADMIN,
        &d,
        json!({"decision": "allow", "by": "dana", "via": "terminal"}),
    )
    .await;
    assert_eq!(out["resolution"]["by"], "dana", "{out}");
    let (_, audit) = app.get("/v1/audit?limit=100").await;
    let actors: Vec<&str> = audit["entries"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["action"] == "answered")
        .filter_map(|e| e["actor"].as_str())
        .collect();
    assert!(actors.contains(&"bob (operator:bob-phone)"), "{actors:?}");
    assert!(actors.contains(&"kiosk (operator:kiosk)"), "{actors:?}");
    app.stop().await;
}

#[tokio::test]
async fn only_a_routes_approvers_answer_it_from_the_api_and_the_inbox() {
    let mut app = spawn_with(teams).await;
    let shop = create(&mut app, "op-shop", "/srv/shop/api").await;
    for token in [BOB, NOBODY] {
        let (status, err) = answer_as(&mut app, token, &shop, json!({"decision": "allow"})).await;
        assert_eq!(status, StatusCode::FORBIDDEN, "{err}");
        assert_eq!(err["error"]["code"], "not_an_approver", "{err}");
        let message = err["error"]["message"].as_str().unwrap();
        assert!(message.contains("route \"shop\""), "{message}");
    }
    // Refused answers change nothing, and are in the audit trail.
    let (_, i) = app.get(&format!("/v1/interactions/{shop}")).await;
    assert_eq!(i["status"], "pending", "{i}");
    let (_, audit) = app.get("/v1/audit?limit=100").await;
    assert!(
        audit["entries"]
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e["action"] == "refused"
                && e["actor"] == "bob (operator:bob-phone)"
                && e["detail"].as_str().unwrap_or("").contains("shop")),
        "{audit}"
    );
    // Bulk: each item on its own; the route's approver and the default route are answered.
    let other = create(&mut app, "op-other", "/tmp/x").await;
    app.token = Some(BOB.into());
    let (status, out) = app
        .post(
            "/v1/respond",
            &json!({"ids": [shop, other], "decision": "deny", "via": "desktop"}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{out}");
    assert_eq!(out["results"][0]["status"], 403, "{out}");
    assert_eq!(
        out["results"][0]["error"]["code"], "not_an_approver",
        "{out}"
    );
    assert_eq!(out["results"][1]["status"], 200, "{out}");
    let (status, out) = answer_as(&mut app, ALICE, &shop, json!({"decision": "allow"})).await;
    assert_eq!(status, StatusCode::OK, "{out}");
    assert_eq!(out["resolution"]["by"], "alice", "{out}");
    // The administrator's token answers any route.
    let again = create(&mut app, "op-shop-2", "/srv/shop/web").await;
    let (status, out) = answer_as(&mut app, ADMIN, &again, json!({"decision": "deny"})).await;
    assert_eq!(status, StatusCode::OK, "{out}");
    app.stop().await;
}

#[test]
fn a_person_naming_a_label_no_token_has_is_refused() {
    let mut s = settings();
    teams(&mut s);
    s.people[0].operator = vec!["alice-desktop".into()];
    let e = s.validate().unwrap_err().to_string();
    assert!(
        e.contains("people[0] (\"alice\").operator[0]") && e.contains("auth.operator_tokens"),
        "{e}"
    );
}

#[tokio::test]
async fn me_says_who_a_token_answers_as() {
    let mut app = spawn_with(teams).await;
    for (token, expected) in [
        (ALICE, json!({"label": "alice-laptop", "name": "alice"})),
        // A label nobody lists answers under the label itself.
        (NOBODY, json!({"label": "kiosk", "name": "kiosk"})),
        // The administrator's token answers under the name each answer gives.
        (ADMIN, json!({"label": null, "name": null})),
    ] {
        app.token = Some(token.into());
        let (status, me) = app.get("/v1/me").await;
        assert_eq!(status, StatusCode::OK, "{me}");
        assert_eq!(me, expected);
    }
    // It is an operator's question: an agent token is refused.
    app.token = Some(AGENT.into());
    let (status, _) = app.get("/v1/me").await;
    assert_eq!(status, StatusCode::FORBIDDEN);
}
