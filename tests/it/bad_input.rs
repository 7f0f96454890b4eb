//! Bad input gets the right 4xx with a JSON error body, and changes nothing.

use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::support::*;

async fn assert_nothing_created(app: &TestApp) {
    let (_, list) = app.get("/v1/interactions?status=all").await;
    assert_eq!(list["interactions"], json!([]), "something was created");
}

#[tokio::test]
async fn malformed_and_mistyped_bodies() {
    let app = spawn_app().await;
    let raw = |body: &'static str, content_type: Option<&'static str>| {
        let mut req = app.client.post(app.url("/v1/interactions")).body(body);
        if let Some(ct) = content_type {
            req = req.header("content-type", ct);
        }
        req
    };
    let cases: Vec<(reqwest::RequestBuilder, StatusCode, &str)> = vec![
        (
            raw("{not json", Some("application/json")),
            StatusCode::BAD_REQUEST,
            "invalid_request",
        ),
        (
            raw(r#"{"tool_name": 7, "input": {}}"#, Some("application/json")),
            StatusCode::BAD_REQUEST,
            "invalid_request",
        ),
        (
            raw(r#"{"input": {}}"#, Some("application/json")),
            StatusCode::BAD_REQUEST,
            "invalid_request",
        ),
        (
            raw(
                r#"{"tool_name": "Bash", "input": [1]}"#,
                Some("application/json"),
            ),
            StatusCode::BAD_REQUEST,
            "invalid_request",
        ),
        (
            raw(
                r#"{"tool_name": "Bash", "input": {}, "timeout_secs": "soon"}"#,
                Some("application/json"),
            ),
            StatusCode::BAD_REQUEST,
            "invalid_request",
        ),
        (
            raw(
                r#"{"tool_name": "Bash", "input": {}, "timeout_secs": 0}"#,
                Some("application/json"),
            ),
            StatusCode::BAD_REQUEST,
            "invalid_request",
        ),
        (
            raw(
                r#"{"tool_name": "Bash", "input": {}, "surprise": 1}"#,
                Some("application/json"),
            ),
            StatusCode::BAD_REQUEST,
            "invalid_request",
        ),
        (
            raw(
                r#"{"tool_name": "", "input": {}}"#,
                Some("application/json"),
            ),
            StatusCode::BAD_REQUEST,
            "invalid_request",
        ),
        (
            raw(
                r#"{"tool_name": "Bash", "input": {}, "id": "has space"}"#,
                Some("application/json"),
            ),
            StatusCode::BAD_REQUEST,
            "invalid_request",
        ),
        (
            raw(r#"{"tool_name": "Bash", "input": {}}"#, None),
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "unsupported_media_type",
        ),
    ];
    for (req, status, code) in cases {
        let (got, body) = split(req.send().await.unwrap()).await;
        assert_eq!(got, status, "{body}");
        assert_eq!(body["error"]["code"], code, "{body}");
        assert!(
            body["error"]["message"]
                .as_str()
                .is_some_and(|m| !m.is_empty())
        );
    }
    assert_nothing_created(&app).await;
}

fn question(options: usize) -> Value {
    json!({"question": format!("q with {options}"), "header": "H",
           "options": (0..options).map(|i| json!({"label": format!("o{i}")})).collect::<Vec<_>>()})
}

#[tokio::test]
async fn invalid_questions_name_the_field() {
    let app = spawn_app().await;
    let five: Vec<Value> = (0..5)
        .map(|i| json!({"question": format!("q{i}"), "header": "H", "options": [{"label": "a"}, {"label": "b"}]}))
        .collect();
    let cases = [
        (
            json!({"questions": five}),
            "questions: expected 1 to 4 questions, got 5",
        ),
        (
            json!({"questions": [question(2), question(1)]}),
            "questions[1].options: expected 2 to 4 options, got 1",
        ),
        (
            json!({"questions": [question(5)]}),
            "questions[0].options: expected 2 to 4 options, got 5",
        ),
        (
            json!({"questions": []}),
            "questions: expected 1 to 4 questions, got 0",
        ),
        (json!({}), "questions: is required"),
        (
            json!({"questions": [{"question": "", "header": "H", "options": [{"label": "a"}, {"label": "b"}]}]}),
            "questions[0].question: must not be empty",
        ),
        (
            json!({"questions": [{"question": "q", "header": "H", "multiSelect": 1, "options": [{"label": "a"}, {"label": "b"}]}]}),
            "questions[0].multiSelect: expected a boolean, got a number",
        ),
    ];
    for (input, message) in cases {
        let (status, body) = app
            .post(
                "/v1/interactions",
                &json!({"tool_name": "AskUserQuestion", "input": input}),
            )
            .await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
        assert_eq!(body["error"]["message"], message);
        assert!(body["error"]["field"].is_string());
    }
    assert_nothing_created(&app).await;
}

#[tokio::test]
async fn oversized_bodies_are_413() {
    let app = spawn_app().await;
    let big = "x".repeat(1024 * 1024 + 10);
    let body = json!({"tool_name": "Bash", "input": {"command": big}});
    let (status, err) = app.post("/v1/interactions", &body).await;
    assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE);
    assert_eq!(err["error"]["code"], "payload_too_large");
    assert_nothing_created(&app).await;
}

#[tokio::test]
async fn bad_queries_and_unknown_routes() {
    let app = spawn_app().await;
    app.create_bash("qq", "ls").await;
    for path in [
        "/v1/interactions/qq/wait?timeout_secs=soon",
        "/v1/interactions?status=everything",
        "/v1/interactions?limit=0",
        "/v1/interactions?cursor=garbage",
    ] {
        let (status, body) = app.get(path).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{path}: {body}");
        assert_eq!(body["error"]["code"], "invalid_request");
    }
    let (status, body) = app.get("/v2/nothing").await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert_eq!(body["error"]["code"], "not_found");
    let resp = app
        .client
        .put(app.url("/v1/interactions"))
        .send()
        .await
        .unwrap();
    let (status, body) = split(resp).await;
    assert_eq!(status, StatusCode::METHOD_NOT_ALLOWED);
    assert_eq!(body["error"]["code"], "method_not_allowed");
}

#[tokio::test]
async fn respond_bodies_that_contradict_themselves() {
    let app = spawn_app().await;
    app.create_bash("rb", "ls").await;
    for bad in [
        json!({"decision": "maybe"}),
        json!({"decision": "allow", "message": "why"}),
        json!({"decision": "deny", "updated_input": {"command": "x"}}),
        json!({"decision": "allow", "updated_input": "rm"}),
        json!({"decision": "allow", "via": "telegram"}),
        json!({"decision": "allow", "always": true}),
        json!({"decision": "allow", "by": "x".repeat(201)}),
    ] {
        let (status, body) = app.post("/v1/interactions/rb/respond", &bad).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{bad} -> {body}");
    }
    let (_, still) = app.get("/v1/interactions/rb").await;
    assert_eq!(still["status"], "pending");
}

#[tokio::test]
async fn undecodable_path_ids_get_the_json_error_shape() {
    let app = spawn_app().await;
    let id = app.create_bash("pp", "ls").await;
    let bad = "pp%FF%FE";
    let requests = [
        app.client.get(app.url(&format!("/v1/interactions/{bad}"))),
        app.client
            .get(app.url(&format!("/v1/interactions/{bad}/wait"))),
        app.client
            .delete(app.url(&format!("/v1/interactions/{bad}"))),
        app.client
            .post(app.url(&format!("/v1/interactions/{bad}/respond")))
            .json(&json!({"decision": "allow"})),
    ];
    for req in requests {
        let (status, body) = split(req.send().await.unwrap()).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
        assert_eq!(body["error"]["code"], "invalid_request", "{body}");
        assert!(
            body["error"]["message"].as_str().unwrap().contains("path"),
            "{body}"
        );
    }
    let (_, still) = app.get(&format!("/v1/interactions/{id}")).await;
    assert_eq!(still["status"], "pending");
}

#[tokio::test]
async fn a_refused_answers_oversized_by_is_clipped_in_the_audit_trail() {
    let app = spawn_app().await;
    let id = app.create_bash("clip", "ls").await;
    let respond = format!("/v1/interactions/{id}/respond");
    assert_eq!(
        app.post(&respond, &json!({"decision": "allow"})).await.0,
        StatusCode::OK
    );
    let (status, _) = app
        .post(
            &respond,
            &json!({"decision": "deny", "by": "x".repeat(100_000)}),
        )
        .await;
    assert_eq!(status, StatusCode::CONFLICT);
    let (_, audit) = app.get("/v1/audit?limit=1000").await;
    let refused: Vec<_> = audit["entries"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["action"] == "refused")
        .collect();
    assert_eq!(refused.len(), 1, "{audit}");
    let actor = refused[0]["actor"].as_str().unwrap();
    assert!(actor.chars().count() <= 501, "{}", actor.len());
}

#[tokio::test]
async fn dot_segment_ids_are_refused() {
    let app = spawn_app().await;
    for id in [".", ".."] {
        let (status, body) = app
            .post(
                "/v1/interactions",
                &json!({"id": id, "tool_name": "Bash", "input": {}}),
            )
            .await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{id}: {body}");
        assert_eq!(body["error"]["field"], "id", "{body}");
    }
    assert_nothing_created(&app).await;
    // Dots elsewhere in an id are fine.
    for id in ["...", ".x", "a.b"] {
        assert_eq!(app.create_bash(id, "ls").await, id);
    }
}

#[tokio::test]
async fn suggestions_must_be_the_sdks_permission_updates() {
    let app = spawn_app().await;
    let good = json!({"type": "setMode", "mode": "acceptEdits", "destination": "session"});
    for (suggestions, field) in [
        (json!("x"), "suggestions"),
        (json!(5), "suggestions"),
        (json!(false), "suggestions"),
        (json!({}), "suggestions"),
        (
            json!([good, {"type": "grantAll", "destination": "session"}]),
            "suggestions[1].type",
        ),
        (
            json!([{"type": "addRules", "rules": [{"toolName": 1}], "behavior": "allow",
                 "destination": "session"}]),
            "suggestions[0].rules[0].toolName",
        ),
    ] {
        let (status, body) = app
            .post(
                "/v1/interactions",
                &json!({"tool_name": "Bash", "input": {}, "suggestions": suggestions}),
            )
            .await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{suggestions}: {body}");
        assert_eq!(body["error"]["field"], field, "{body}");
    }
    assert_nothing_created(&app).await;
    // An empty list is no suggestions: nothing to apply "always".
    let (status, created) = app
        .post(
            "/v1/interactions",
            &json!({"id": "no-sugg", "tool_name": "Bash", "input": {}, "suggestions": []}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{created}");
    assert!(created.get("suggestions").is_none(), "{created}");
    let (status, body) = app
        .respond("no-sugg", &json!({"decision": "allow", "always": true}))
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert_eq!(body["error"]["field"], "always");
}

/// Whether `body` is an error in the documented shape, `{"error": {"code", "message",
/// "field"?}}`, with code `code`.
fn documented(content_type: &str, body: &Value, code: &str) -> bool {
    let e = &body["error"];
    content_type.starts_with("application/json")
        && e["code"] == code
        && e["message"].as_str().is_some_and(|m| !m.is_empty())
        && (e.get("field").is_none() || e["field"].is_string())
}

async fn send(req: reqwest::RequestBuilder) -> (StatusCode, String, Value) {
    let resp = req.send().await.unwrap();
    let content_type = resp
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_string();
    let (status, body) = split(resp).await;
    (status, content_type, body)
}

#[tokio::test]
async fn every_route_answers_errors_in_the_documented_shape() {
    let tg = crate::telegram::fake::FakeTelegram::start().await;
    let feishu = crate::feishu::fake::FakeFeishu::start().await;
    let defaults = settings();
    let tg_path = defaults.telegram.webhook_path.clone();
    let feishu_path = defaults.feishu.callback_path.clone();
    let app = spawn_with(|s| {
        let t = &mut s.telegram;
        t.enabled = true;
        t.token = imrelay::config::Secret::new(crate::telegram::fake::TOKEN);
        t.chats = vec![1];
        t.approvers = vec![1];
        t.mode = imrelay::channels::telegram::Mode::Webhook;
        t.api_url = tg.url.clone();
        t.webhook_url = format!("https://relay.example.com{tg_path}");
        t.webhook_secret = imrelay::config::Secret::new("webhook-secret_1");
        crate::feishu::enable(s, &feishu);
        s.webhooks = vec![imrelay::channels::webhook::WebhookSettings {
            name: "ci".into(),
            url: "http://127.0.0.1:9/hook".into(),
            secret: imrelay::config::Secret::new("whsec_dGhpcyBpcyBhIDMyIGJ5dGUgc2VjcmV0IGtleSEh"),
            events: vec![],
            sessions: vec![],
            agents: vec![],
            timeout_secs: 1,
            horizon_hours: 1,
        }];
    })
    .await;
    app.create_bash("r-1", "ls").await;

    // Every route imrelay serves, and whether it reads a body.
    let routes: Vec<(&str, String, bool)> = [
        ("GET", "/", false),
        ("GET", "/livez", false),
        ("GET", "/healthz", false),
        ("GET", "/metrics", false),
        ("GET", "/inbox.js", false),
        ("GET", "/inbox.css", false),
        ("POST", "/v1/interactions", true),
        ("GET", "/v1/interactions", false),
        ("GET", "/v1/interactions/r-1", false),
        ("DELETE", "/v1/interactions/r-1", false),
        ("GET", "/v1/interactions/r-1/wait", false),
        ("POST", "/v1/interactions/r-1/respond", true),
        ("GET", "/v1/events", false),
        ("GET", "/v1/audit", false),
        ("POST", "/v1/hooks/claude-code", true),
        ("POST", "/v1/webhooks/ci/respond", true),
        ("POST", tg_path.as_str(), true),
        ("POST", feishu_path.as_str(), true),
    ]
    .into_iter()
    .map(|(m, p, b)| (m, p.to_string(), b))
    .collect();
    for (method, path, takes_body) in &routes {
        // A method the route does not have.
        let (status, ct, body) = send(app.client.put(app.url(path))).await;
        assert_eq!(status, StatusCode::METHOD_NOT_ALLOWED, "PUT {path}: {body}");
        assert!(
            documented(&ct, &body, "method_not_allowed"),
            "PUT {path}: {ct} {body}"
        );
        if !takes_body {
            continue;
        }
        let post = |body: Vec<u8>| {
            app.client
                .request(method.parse().unwrap(), app.url(path))
                .header("content-type", "application/json")
                .body(body)
        };
        // A body over the limit.
        let (status, ct, body) = send(post(vec![b' '; 1024 * 1024 + 1])).await;
        assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE, "{path}: {body}");
        assert!(
            documented(&ct, &body, "payload_too_large"),
            "{path}: {ct} {body}"
        );
        // A body that is not JSON: refused (for a bad signature or token first, on the
        // channels' endpoints), in the same shape.
        let (status, ct, body) = send(post(b"{".to_vec())).await;
        assert!(status.is_client_error(), "{path}: {status} {body}");
        let code = body["error"]["code"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        assert!(documented(&ct, &body, &code), "{path}: {ct} {body}");
    }
    let (status, ct, body) = send(app.client.get(app.url("/v2/none"))).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert!(documented(&ct, &body, "not_found"), "{body}");
    assert_eq!(tg.take_refusals().len(), 0);
}

#[tokio::test]
async fn misfits_name_their_field() {
    let app = spawn_app().await;
    app.create_bash("f-1", "ls").await;
    let cases = [
        (
            "/v1/interactions",
            json!({"tool_name": "Bash", "input": {}, "surprise": 1}),
            "surprise",
        ),
        ("/v1/interactions", json!({"input": {}}), "tool_name"),
        ("/v1/interactions", json!({"tool_name": "Bash"}), "input"),
        (
            "/v1/interactions",
            json!({"tool_name": 7, "input": {}}),
            "tool_name",
        ),
        (
            "/v1/interactions",
            json!({"tool_name": "Bash", "input": [1]}),
            "input",
        ),
        (
            "/v1/interactions",
            json!({"tool_name": "Bash", "input": {}, "timeout_secs": "soon"}),
            "timeout_secs",
        ),
        (
            "/v1/hooks/claude-code",
            json!({"hook_event_name": "PreToolUse", "tool_name": "Bash"}),
            "tool_input",
        ),
        (
            "/v1/hooks/claude-code",
            json!({"hook_event_name": "PreToolUse", "tool_name": "Bash", "tool_input": "ls"}),
            "tool_input",
        ),
        (
            "/v1/hooks/claude-code",
            json!({"hook_event_name": "PermissionRequest", "tool_input": {}}),
            "tool_name",
        ),
        (
            "/v1/interactions/f-1/respond",
            json!({"decision": "maybe"}),
            "decision",
        ),
        ("/v1/interactions/f-1/respond", json!({}), "decision"),
        (
            "/v1/interactions/f-1/respond",
            json!({"decision": "allow", "message": "why"}),
            "message",
        ),
        (
            "/v1/interactions/f-1/respond",
            json!({"decision": "allow", "surprise": 1}),
            "surprise",
        ),
    ];
    for (path, body, field) in cases {
        let (status, err) = app.post(path, &body).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{path} {body}: {err}");
        assert_eq!(err["error"]["field"], field, "{path} {body}: {err}");
    }
    for (path, field) in [
        (
            "/v1/interactions/f-1/wait?timeout_secs=soon",
            "timeout_secs",
        ),
        ("/v1/interactions?status=everything", "status"),
        ("/v1/interactions?limit=0", "limit"),
        ("/v1/interactions?cursor=garbage", "cursor"),
        ("/v1/interactions?surprise=1", "surprise"),
        ("/v1/audit?since=yesterday", "since"),
        ("/v1/interactions/f%FF", "id"),
    ] {
        let (status, err) = app.get(path).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{path}: {err}");
        assert_eq!(err["error"]["field"], field, "{path}: {err}");
    }
    let (_, still) = app.get("/v1/interactions/f-1").await;
    assert_eq!(still["status"], "pending");
}
