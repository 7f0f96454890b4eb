//! Bearer tokens and scopes.

use imrelay::config::Secret;
use reqwest::StatusCode;
use serde_json::json;

use crate::support::*;

const AGENT: &str = "agent-secret-0123456789";
const OPERATOR: &str = "operator-secret-0123456789";

async fn app_with_tokens() -> TestApp {
    spawn_with(|s| {
        s.auth.agent_tokens = vec![Secret::new(AGENT)];
        s.auth.operator_tokens = vec![imrelay::config::OperatorToken::new(OPERATOR)];
    })
    .await
}

#[tokio::test]
async fn missing_wrong_and_right_tokens() {
    let mut app = app_with_tokens().await;
    let create = json!({"id": "auth-1", "tool_name": "Bash", "input": {"command": "ls"}});

    let (status, body) = app.post("/v1/interactions", &create).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    assert_eq!(body["error"]["code"], "unauthorized");

    app.token = Some("guess".into());
    let (status, body) = app.post("/v1/interactions", &create).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    assert_eq!(body["error"]["code"], "unauthorized");

    // The operator token does not carry the agent scope.
    app.token = Some(OPERATOR.into());
    let (status, body) = app.post("/v1/interactions", &create).await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    assert_eq!(body["error"]["code"], "forbidden");

    app.token = Some(AGENT.into());
    let (status, _) = app.post("/v1/interactions", &create).await;
    assert_eq!(status, StatusCode::CREATED);
    // ... and the agent token cannot answer or list.
    let (status, _) = app
        .post(
            "/v1/interactions/auth-1/respond",
            &json!({"decision": "allow"}),
        )
        .await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    let (status, _) = app.get("/v1/interactions").await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    let resp = app
        .client
        .get(app.url("/v1/events"))
        .bearer_auth(AGENT)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::FORBIDDEN);
    // Both may read one interaction.
    let (status, _) = app.get("/v1/interactions/auth-1").await;
    assert_eq!(status, StatusCode::OK);

    app.token = Some(OPERATOR.into());
    let (status, _) = app.get("/v1/interactions/auth-1").await;
    assert_eq!(status, StatusCode::OK);
    let (status, _) = app
        .post(
            "/v1/interactions/auth-1/respond",
            &json!({"decision": "allow"}),
        )
        .await;
    assert_eq!(status, StatusCode::OK);

    // Health, metrics and the inbox page need no token.
    app.token = None;
    assert_eq!(app.get("/healthz").await.0, StatusCode::OK);
    assert_eq!(app.get("/livez").await.0, StatusCode::OK);
    assert_eq!(
        app.client.get(app.url("/")).send().await.unwrap().status(),
        StatusCode::OK
    );
}

#[tokio::test]
async fn hook_requires_the_agent_scope() {
    let mut app = app_with_tokens().await;
    let hook = fixture("claude-code/notification.json");
    assert_eq!(
        app.post("/v1/hooks/claude-code", &hook).await.0,
        StatusCode::UNAUTHORIZED
    );
    app.token = Some(AGENT.into());
    assert_eq!(
        app.post("/v1/hooks/claude-code", &hook).await.0,
        StatusCode::OK
    );
}

#[tokio::test]
async fn without_tokens_only_loopback_host_names_are_accepted() {
    let app = spawn_app().await;
    // A browser page on another origin that resolved its own name to 127.0.0.1 (DNS
    // rebinding) sends its own Host header.
    let resp = app
        .client
        .get(app.url("/v1/interactions"))
        .header("host", "attacker.example")
        .send()
        .await
        .unwrap();
    let (status, body) = split(resp).await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    assert_eq!(body["error"]["code"], "forbidden");
    let (status, _) = app.get("/v1/interactions").await;
    assert_eq!(status, StatusCode::OK);
}

#[tokio::test]
async fn each_scope_is_refused_where_it_does_not_belong() {
    let mut app = app_with_tokens().await;
    app.token = Some(AGENT.into());
    let id = app.create_bash("auth-scope", "ls").await;
    // Cancelling is the agent's: an operator token is refused and nothing changes.
    app.token = Some(OPERATOR.into());
    let (status, body) = app.delete(&format!("/v1/interactions/{id}")).await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{body}");
    assert_eq!(body["error"]["code"], "forbidden");
    let (_, still) = app.get(&format!("/v1/interactions/{id}")).await;
    assert_eq!(still["status"], "pending");
    // The audit trail is the operator's.
    app.token = Some(AGENT.into());
    let (status, body) = app.get("/v1/audit").await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{body}");
    assert_eq!(body["error"]["code"], "forbidden");
}

#[tokio::test]
async fn either_scope_routes_pass_when_either_scope_would() {
    // Only operators have tokens: a local agent needs none, and may read what it created.
    let mut app = spawn_with(|s| {
        s.auth.operator_tokens = vec![imrelay::config::OperatorToken::new(OPERATOR)];
    })
    .await;
    let id = app.create_bash("either-1", "ls").await;
    let (status, body) = app.get(&format!("/v1/interactions/{id}")).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["status"], "pending");
    // ... while the operator's own routes still want the token.
    let (status, _) = app.get("/v1/interactions").await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    app.token = Some(OPERATOR.into());
    assert_eq!(
        app.get(&format!("/v1/interactions/{id}")).await.0,
        StatusCode::OK
    );

    // Only agents have tokens: a local operator needs none for the same route.
    let mut app = spawn_with(|s| {
        s.auth.agent_tokens = vec![Secret::new(AGENT)];
    })
    .await;
    app.token = Some(AGENT.into());
    let id = app.create_bash("either-2", "ls").await;
    app.token = None;
    let (status, body) = app.get(&format!("/v1/interactions/{id}")).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    // A wrong token from this machine is not a reason to refuse a scope that needs none.
    app.token = Some("guess".into());
    assert_eq!(
        app.get(&format!("/v1/interactions/{id}")).await.0,
        StatusCode::OK
    );
}

#[tokio::test]
async fn the_scheme_is_case_insensitive_over_http_and_the_token_is_exact() {
    let app = app_with_tokens().await;
    let list = |authorization: String| {
        app.client
            .get(app.url("/v1/interactions"))
            .header("authorization", authorization)
            .send()
    };
    for scheme in ["Bearer", "bearer", "BEARER"] {
        let status = list(format!("{scheme} {OPERATOR}")).await.unwrap().status();
        assert_eq!(status, StatusCode::OK, "{scheme}");
    }
    let status = list(format!("Bearer {}", OPERATOR.to_uppercase()))
        .await
        .unwrap()
        .status();
    assert_eq!(status, StatusCode::UNAUTHORIZED);
}

#[tokio::test]
async fn settings_built_in_code_with_weak_tokens_do_not_start() {
    let mut s = settings();
    s.auth.agent_tokens = vec![Secret::new("tok-42")];
    let Err(e) = imrelay::app::App::build(s).await else {
        panic!("a 6-character token was accepted");
    };
    assert!(e.to_string().contains("auth.agent_tokens[0]"), "{e}");
    assert!(e.to_string().contains("shorter than 16"), "{e}");
    assert!(!e.to_string().contains("tok-42"), "{e}");
}

/// One agent token cannot read, wait on, re-attach to or cancel another's interaction: each
/// is answered as if there were none, and nothing changes. Operators see every one.
#[tokio::test]
async fn an_agent_token_reaches_only_its_own_interactions() {
    const OTHER: &str = "other-agent-secret-0123456789";
    let mut app = spawn_with(|s| {
        s.auth.agent_tokens = vec![Secret::new(AGENT), Secret::new(OTHER)];
        s.auth.operator_tokens = vec![imrelay::config::OperatorToken::new(OPERATOR)];
    })
    .await;
    let create = json!({"id": "mine-1", "tool_name": "Bash", "input": {"command": "make"}});
    app.token = Some(AGENT.into());
    let (status, _) = app.post("/v1/interactions", &create).await;
    assert_eq!(status, StatusCode::CREATED);

    app.token = Some(OTHER.into());
    for path in [
        "/v1/interactions/mine-1",
        "/v1/interactions/mine-1/wait?timeout_secs=0",
    ] {
        let (status, body) = app.get(path).await;
        assert_eq!(status, StatusCode::NOT_FOUND, "{path}: {body}");
        assert!(body.get("interaction").is_none(), "{body}");
    }
    let (status, body) = app.delete("/v1/interactions/mine-1").await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{body}");
    // The same id and request: not re-attached to, and nothing of it told.
    let (status, body) = app.post("/v1/interactions", &create).await;
    assert_eq!(status, StatusCode::CONFLICT, "{body}");
    assert_eq!(body["error"]["code"], "id_conflict", "{body}");
    assert!(body["error"].get("interaction").is_none(), "{body}");

    app.token = Some(AGENT.into());
    let (status, mine) = app.get("/v1/interactions/mine-1").await;
    assert_eq!(
        (status, mine["status"].as_str()),
        (StatusCode::OK, Some("pending"))
    );
    let (status, again) = app.post("/v1/interactions", &create).await;
    assert_eq!(
        status,
        StatusCode::OK,
        "its own client re-attaches: {again}"
    );
    app.token = Some(OPERATOR.into());
    let (status, seen) = app.get("/v1/interactions/mine-1").await;
    assert_eq!(
        (status, seen["status"].as_str()),
        (StatusCode::OK, Some("pending"))
    );
}
