//! Forms and free-text prompts: created over the API, the Claude Code `Elicitation` hook and
//! MCP's `ask_human`; answered over the API, Feishu and signed webhooks; expiry and cancel
//! as `cancel`. (Telegram's step-by-step form is in `telegram.rs`, the inbox's in
//! `tests/external/inbox.rs`.)

use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::feishu::fake::FakeFeishu;
use crate::feishu::{APPROVER, card_for, click, enable, event_id, post_callback, tagged};
use crate::support::*;

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

async fn create_form(app: &TestApp, id: &str) -> Value {
    let (status, body) = app
        .post(
            "/v1/interactions",
            &json!({"id": id, "kind": "form", "message": "Sign up for the beta", "schema": signup_schema(), "agent": "workflow"}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    body
}

#[tokio::test]
async fn a_form_is_answered_with_mcps_elicit_result() {
    let app = spawn_app().await;
    let created = create_form(&app, "f1").await;
    assert_eq!(created["kind"], "form");
    assert_eq!(created["tool_name"], "imrelay:form");
    // The input is the elicitation request's own parameters.
    assert_eq!(created["input"]["message"], "Sign up for the beta");
    assert_eq!(created["input"]["requestedSchema"], signup_schema());

    // Every error names the field, and changes nothing.
    for (content, field) in [
        (json!({"age": 30, "plan": "pro"}), "content.name"),
        (
            json!({"name": "Ann", "age": 17, "plan": "pro"}),
            "content.age",
        ),
        (
            json!({"name": "Ann", "age": 30, "plan": "gold"}),
            "content.plan",
        ),
        (
            json!({"name": "Ann", "age": 30, "plan": "pro", "start": "tomorrow"}),
            "content.start",
        ),
        (
            json!({"name": "Ann", "age": 30, "plan": "pro", "extras": ["gold"]}),
            "content.extras",
        ),
        (
            json!({"name": "Ann", "age": 30, "plan": "pro", "colour": "red"}),
            "content.colour",
        ),
    ] {
        let (status, body) = app
            .respond("f1", &json!({"action": "accept", "content": content}))
            .await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
        assert_eq!(body["error"]["field"], field, "{body}");
    }
    // The fields of other kinds are refused for a form, and `action` for the others.
    let (status, body) = app.respond("f1", &json!({"decision": "allow"})).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert_eq!(body["error"]["field"], "action");
    let (_, still) = app.get("/v1/interactions/f1").await;
    assert_eq!(still["status"], "pending");

    let (status, body) = app
        .respond(
            "f1",
            &json!({"action": "accept", "content": {"plan": "pro", "name": "Ann", "age": 30,
                "extras": ["support"], "start": "2026-12-01"}, "by": "ann"}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["resolution"]["outcome"], "answered");
    // Exactly an ElicitResult, defaults filled in, in the schema's order.
    assert_eq!(
        body["result"],
        json!({"action": "accept", "content": {"name": "Ann", "age": 30, "plan": "pro",
            "extras": ["support"], "start": "2026-12-01", "newsletter": false}})
    );
    let keys: Vec<&String> = body["result"]["content"]
        .as_object()
        .unwrap()
        .keys()
        .collect();
    assert_eq!(
        keys,
        ["name", "age", "plan", "extras", "start", "newsletter"]
    );
    // /wait gives the same.
    let (_, waited) = app.get("/v1/interactions/f1/wait?timeout_secs=1").await;
    assert_eq!(waited["result"], body["result"]);
    app.stop().await;
}

#[tokio::test]
async fn a_prompt_is_one_text_field_and_can_be_declined() {
    let app = spawn_app().await;
    let (status, created) = app
        .post(
            "/v1/interactions",
            &json!({"id": "p1", "kind": "prompt", "message": "What is your favorite color?", "multiline": true}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{created}");
    assert_eq!(
        created["input"]["requestedSchema"]["properties"]["answer"]["multiline"],
        true
    );
    let (status, body) = app
        .respond(
            "p1",
            &json!({"action": "accept", "content": {"answer": "Teal"}}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(
        body["result"],
        json!({"action": "accept", "content": {"answer": "Teal"}})
    );

    app.post(
        "/v1/interactions",
        &json!({"id": "p2", "kind": "prompt", "message": "Anything else?"}),
    )
    .await;
    let (status, body) = app
        .respond("p2", &json!({"action": "decline", "by": "bob"}))
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["resolution"]["outcome"], "denied");
    assert_eq!(body["result"]["action"], "decline");
    assert!(body["result"].get("content").is_none(), "{body}");
    assert_eq!(
        body["result"]["message"],
        "The form was declined by bob via api"
    );
    app.stop().await;
}

#[tokio::test]
async fn creation_refuses_schemas_outside_the_subset_naming_the_property() {
    let app = spawn_app().await;
    let cases = [
        (
            json!({"kind": "form", "message": "m", "schema": {"type": "object", "properties": {"a": {"type": "object"}}}}),
            "schema.properties.a.type",
        ),
        (
            json!({"kind": "form", "message": "m", "schema": {"type": "object", "properties": {"a": {"type": "string", "format": "ipv6"}}}}),
            "schema.properties.a.format",
        ),
        (
            json!({"kind": "form", "message": "m", "schema": {"type": "object", "properties": {"a": {"type": "string", "pattern": "(["}}}}),
            "schema.properties.a.pattern",
        ),
        (json!({"kind": "form", "message": "m"}), "schema"),
        (
            json!({"kind": "form", "schema": signup_schema()}),
            "message",
        ),
        (
            json!({"kind": "prompt", "message": "m", "schema": signup_schema()}),
            "schema",
        ),
        (
            json!({"kind": "prompt", "message": "m", "tool_name": "Bash"}),
            "tool_name",
        ),
        (
            json!({"tool_name": "imrelay:form", "input": {"message": "m"}}),
            "tool_name",
        ),
        (
            json!({"tool_name": "Bash", "input": {}, "message": "m"}),
            "message",
        ),
    ];
    for (body, field) in cases {
        let (status, reply) = app.post("/v1/interactions", &body).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{body} → {reply}");
        assert_eq!(reply["error"]["field"], field, "{body} → {reply}");
        assert!(reply["error"]["message"].as_str().unwrap().len() > 5);
    }
    let (_, list) = app.get("/v1/interactions").await;
    assert_eq!(list["interactions"], json!([]), "nothing was created");
    app.stop().await;
}

#[tokio::test]
async fn expiry_and_cancel_resolve_a_form_as_cancel_with_a_message() {
    let app = spawn_app().await;
    app.post(
        "/v1/interactions",
        &json!({"id": "e1", "kind": "prompt", "message": "Quick?", "timeout_secs": 1}),
    )
    .await;
    let (_, waited) = app.get("/v1/interactions/e1/wait?timeout_secs=10").await;
    assert_eq!(waited["resolution"]["outcome"], "expired");
    assert_eq!(
        waited["result"],
        json!({"action": "cancel", "message": "No response within 1 seconds"})
    );

    create_form(&app, "c1").await;
    let (status, body) = app
        .delete("/v1/interactions/c1?reason=plan%20changed")
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["resolution"]["outcome"], "cancelled");
    assert_eq!(
        body["result"],
        json!({"action": "cancel", "message": "Cancelled by the agent: plan changed"})
    );
    app.stop().await;
}

/// The Elicitation hook input, as Claude Code posts it.
fn elicitation(schema: Value) -> Value {
    json!({
        "session_id": "9b1c2d3e-4f50-6172-8394-a5b6c7d8e9f0",
        "transcript_path": "/home/dev/.claude/projects/shop/9b1c2d3e.jsonl",
        "cwd": "/home/dev/shop",
        "permission_mode": "default",
        "hook_event_name": "Elicitation",
        "mcp_server_name": "deploy-tools",
        "message": "Which environment should I deploy to?",
        "mode": "form",
        "elicitation_id": "el-42",
        "requested_schema": schema
    })
}

#[tokio::test]
async fn the_elicitation_hook_carries_an_mcp_servers_form_to_people_and_back() {
    let app = spawn_app().await;
    let schema = json!({"type": "object", "properties": {
        "env": {"type": "string", "enum": ["staging", "production"]},
        "confirm": {"type": "boolean", "title": "I have checked the release notes"}
    }, "required": ["env", "confirm"]});
    let hook = post_hook(&app, elicitation(schema.clone()));
    let i = pending_one(&app).await;
    assert_eq!(i["kind"], "form");
    assert_eq!(i["title"], "deploy-tools asks");
    assert_eq!(i["session"], "9b1c2d3e-4f50-6172-8394-a5b6c7d8e9f0");
    assert_eq!(i["cwd"], "/home/dev/shop");
    assert_eq!(i["input"]["requestedSchema"], schema);
    let id = i["id"].as_str().unwrap();
    let (status, body) = app
        .respond(
            id,
            &json!({"action": "accept", "content": {"env": "staging", "confirm": true}}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let (status, out) = hook.await.unwrap();
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        out,
        json!({"hookSpecificOutput": {"hookEventName": "Elicitation", "action": "accept",
            "content": {"env": "staging", "confirm": true}}})
    );

    // Declined: the action alone.
    let hook = post_hook(
        &app,
        elicitation(json!({"type": "object", "properties": {"why": {"type": "string"}}})),
    );
    let i = pending_one(&app).await;
    app.respond(i["id"].as_str().unwrap(), &json!({"action": "decline"}))
        .await;
    let (_, out) = hook.await.unwrap();
    assert_eq!(
        out,
        json!({"hookSpecificOutput": {"hookEventName": "Elicitation", "action": "decline"}})
    );

    // A URL hand-off, and a schema imrelay cannot carry, are left to Claude Code.
    let mut url_mode = elicitation(json!({}));
    url_mode["mode"] = json!("url");
    url_mode["url"] = json!("https://example.com/oauth");
    let (status, out) = app.post("/v1/hooks/claude-code", &url_mode).await;
    assert_eq!((status, out), (StatusCode::OK, json!({})));
    let nested = elicitation(
        json!({"type": "object", "properties": {"a": {"type": "object", "properties": {}}}}),
    );
    let (status, out) = app.post("/v1/hooks/claude-code", &nested).await;
    assert_eq!((status, out), (StatusCode::OK, json!({})));
    let (_, list) = app.get("/v1/interactions?status=pending").await;
    assert_eq!(list["interactions"], json!([]));
    app.stop().await;
}

#[tokio::test]
async fn an_unanswered_elicitation_hands_back_to_claude_code_or_cancels() {
    use imrelay::config::OnTimeout;
    for (on_timeout, reply) in [
        // Claude Code shows its own form.
        (OnTimeout::Ask, json!({})),
        // The form is cancelled.
        (
            OnTimeout::Deny,
            json!({"hookSpecificOutput": {"hookEventName": "Elicitation", "action": "cancel"}}),
        ),
    ] {
        let app = spawn_with(|s| {
            s.hooks.claude_code.timeout_secs = 1;
            s.hooks.claude_code.on_timeout = on_timeout;
        })
        .await;
        let form = json!({"type": "object", "properties": {"x": {"type": "string"}}});
        let (status, out) = app.post("/v1/hooks/claude-code", &elicitation(form)).await;
        assert_eq!((status, out), (StatusCode::OK, reply));
        app.stop().await;
    }
}

#[tokio::test]
async fn a_feishu_card_form_is_submitted_and_checked() {
    let fake = FakeFeishu::start().await;
    let app = spawn_with(|s| enable(s, &fake)).await;
    create_form(&app, "fs1").await;
    let (_, card) = card_for(&fake, "fs1").await;
    let form = tagged(&card, "form")[0];
    // Each field as the input that fits it, named by index.
    let tags: Vec<(String, String)> = form["elements"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|e| {
            Some((
                e["tag"].as_str()?.to_string(),
                e["name"].as_str()?.to_string(),
            ))
        })
        .filter(|(t, _)| t != "button")
        .collect();
    assert_eq!(
        tags,
        [
            ("input", "f0"),
            ("input", "f1"),
            ("select_static", "f2"),
            ("multi_select_static", "f3"),
            ("date_picker", "f4"),
            ("checker", "f5"),
        ]
        .map(|(a, b)| (a.to_string(), b.to_string()))
    );
    let text = crate::feishu::card_text(&card);
    assert!(text.contains("Sign up for the beta"), "{text}");
    assert!(text.contains("Your name *"), "{text}");
    let submit = tagged(form, "button")[0]["behaviors"][0]["value"].clone();

    // A value out of bounds comes back as a toast, and changes nothing.
    let (status, reply) = post_callback(
        &app,
        &click(
            &event_id(),
            APPROVER,
            &submit,
            Some(json!({"f0": "Ann", "f1": "12", "f2": "1"})),
        ),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(reply["toast"]["type"], "error", "{reply}");
    let toast = reply["toast"]["content"].as_str().unwrap();
    assert!(
        toast.contains("age") && toast.contains("at least 18"),
        "{toast}"
    );
    let (_, still) = app.get("/v1/interactions/fs1").await;
    assert_eq!(still["status"], "pending");

    let (status, reply) = post_callback(
        &app,
        &click(
            &event_id(),
            APPROVER,
            &submit,
            Some(json!({"f0": "Ann", "f1": "30", "f2": "1", "f3": ["0", "1"],
                "f4": "2026-12-01 +0800", "f5": true})),
        ),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(reply["toast"]["type"], "success", "{reply}");
    let (_, done) = app.get("/v1/interactions/fs1").await;
    assert_eq!(
        done["resolution"]["result"],
        json!({"action": "accept", "content": {"name": "Ann", "age": 30, "plan": "pro",
            "extras": ["backup", "support"], "start": "2026-12-01", "newsletter": true}})
    );
    assert_eq!(done["resolution"]["via"], "feishu");
    // The resolved card shows what was answered, by label.
    let resolved = crate::feishu::card_text(&reply["card"]["data"]);
    for shown in [
        "Your name → Ann",
        "plan → Pro",
        "extras → backup, support",
        "newsletter → Yes",
    ] {
        assert!(resolved.contains(shown), "{shown} in {resolved}");
    }
    app.stop().await;
}

/// `n` distinct option values.
fn many(n: usize) -> Vec<Value> {
    (0..n).map(|k| json!(format!("o{k}"))).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn choices_past_the_limit_are_refused_before_they_are_compared() {
    let app = spawn_app().await;
    // 51 options whose last is not even a string: refused for their number, before any of
    // them is looked at (the count used to come after comparing every pair).
    let mut options = many(50);
    options.push(json!(7));
    let (status, reply) = app
        .post(
            "/v1/interactions",
            &json!({"kind": "form", "message": "m", "schema": {"type": "object",
                    "properties": {"a": {"type": "string", "enum": options}}}}),
        )
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{reply}");
    assert_eq!(reply["error"]["field"], "schema.properties.a", "{reply}");
    assert!(
        reply["error"]["message"]
            .as_str()
            .unwrap()
            .contains("1 to 50 options (got 51)"),
        "{reply}"
    );

    // The 100,000 options, four requests at once, on each way in: a clear 400 (the
    // Elicitation hook leaves a form it cannot carry to Claude Code), and the server answers
    // meanwhile.
    let big = many(100_000);
    let forms = [
        json!({"type": "string", "enum": big}),
        json!({"type": "array", "items": {"type": "string", "enum": big}}),
        // As many as fit in a body (each option is an object here).
        json!({"type": "string", "oneOf": big[..20_000].iter().map(|v| json!({"const": v, "title": v})).collect::<Vec<_>>()}),
    ];
    let mut calls = Vec::new();
    for field in &forms {
        let body = json!({"kind": "form", "message": "m",
                          "schema": {"type": "object", "properties": {"a": field}}});
        let (client, url) = (app.client.clone(), app.url("/v1/interactions"));
        calls.push(tokio::spawn(async move {
            split(client.post(url).json(&body).send().await.unwrap()).await
        }));
    }
    let hook = post_hook(
        &app,
        elicitation(json!({"type": "object", "properties": {"a": forms[0]}})),
    );
    let (status, live) = app.get("/livez").await;
    assert_eq!(status, StatusCode::OK, "{live}");
    for (call, (field, n)) in calls.into_iter().zip([
        ("schema.properties.a", 100_000),
        ("schema.properties.a.items", 100_000),
        ("schema.properties.a", 20_000),
    ]) {
        let (status, reply) = call.await.unwrap();
        assert_eq!(status, StatusCode::BAD_REQUEST, "{reply}");
        assert_eq!(reply["error"]["field"], field, "{reply}");
        let says = format!("1 to 50 options (got {n})");
        assert!(
            reply["error"]["message"].as_str().unwrap().contains(&says),
            "{reply}"
        );
    }
    let (status, reply) = hook.await.unwrap();
    assert_eq!(status, StatusCode::OK, "{reply}");
    let (_, list) = app.get("/v1/interactions").await;
    assert_eq!(list["interactions"], json!([]), "nothing was created");
    app.stop().await;
}

#[tokio::test]
async fn an_integer_field_no_whole_number_fits_is_refused() {
    let app = spawn_app().await;
    for (min, max, ok) in [
        (0.5, 0.6, false),
        (1.2, 1.9, false),
        (0.5, 1.0, true),
        (2.0, 2.0, true),
    ] {
        let (status, reply) = app
            .post(
                "/v1/interactions",
                &json!({"kind": "form", "message": "m", "schema": {"type": "object",
                        "properties": {"n": {"type": "integer", "minimum": min, "maximum": max}}}}),
            )
            .await;
        if ok {
            assert_eq!(status, StatusCode::CREATED, "{min}..{max}: {reply}");
        } else {
            assert_eq!(status, StatusCode::BAD_REQUEST, "{min}..{max}: {reply}");
            assert_eq!(
                reply["error"]["field"], "schema.properties.n.minimum",
                "{reply}"
            );
            assert!(
                reply["error"]["message"]
                    .as_str()
                    .unwrap()
                    .contains("no whole number"),
                "{reply}"
            );
        }
    }
    app.stop().await;
}
