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
