//! The Claude Code HTTP hook endpoint, with bodies exactly as Claude Code posts them.

use std::time::Duration;

use imrelay::config::OnTimeout;
use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::support::*;

#[tokio::test]
async fn pre_tool_use_allow() {
    let app = spawn_app().await;
    let hook = post_hook(&app, fixture("claude-code/pre_tool_use.json"));
    let i = pending_one(&app).await;
    assert_eq!(i["id"], "toolu_01HkQ8mN4vRZ2xT6yB3wLpE9");
    assert_eq!(i["session"], "5f8a2c1e-3b7d-4e9f-a1c2-6d8e0f4b2a91");
    assert_eq!(i["cwd"], "/home/dev/shop");
    assert_eq!(i["agent"], "claude-code");
    app.post(
        "/v1/interactions/toolu_01HkQ8mN4vRZ2xT6yB3wLpE9/respond",
        &json!({"decision": "allow", "by": "alice"}),
    )
    .await;
    let (status, out) = hook.await.unwrap();
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        out,
        json!({"hookSpecificOutput": {
            "hookEventName": "PreToolUse",
            "permissionDecision": "allow",
            "permissionDecisionReason": "Allowed through imrelay by alice via api",
            "updatedInput": {"command": "rm -rf build", "description": "Remove the build directory"}
        }})
    );
}

#[tokio::test]
async fn permission_suggestions_that_do_not_fit_are_left_out_and_the_hook_still_decides() {
    let app = spawn_app().await;
    let good = json!({"type": "addRules", "rules": [{"toolName": "Bash", "ruleContent": "npm test:*"}],
                      "behavior": "allow", "destination": "localSettings"});
    for (n, (suggestions, kept)) in [
        (json!("x"), Value::Null),
        (json!({}), Value::Null),
        (json!([]), Value::Null),
        (json!([5, good, {"type": "grantAll"}]), json!([good])),
    ]
    .into_iter()
    .enumerate()
    {
        let mut body = fixture("claude-code/permission_request.json");
        body["session_id"] = json!(format!("sugg-{n}"));
        body["permission_suggestions"] = suggestions.clone();
        let hook = post_hook(&app, body);
        let i = pending_one(&app).await;
        assert_eq!(
            i.get("suggestions").cloned().unwrap_or(Value::Null),
            kept,
            "{suggestions}"
        );
        let always = !kept.is_null();
        let id = i["id"].as_str().unwrap();
        let (status, answer) = app
            .respond(id, &json!({"decision": "allow", "always": always}))
            .await;
        assert_eq!(status, StatusCode::OK, "{answer}");
        let (status, out) = hook.await.unwrap();
        assert_eq!(status, StatusCode::OK, "{suggestions}: {out}");
        let decision = &out["hookSpecificOutput"]["decision"];
        assert_eq!(decision["behavior"], "allow", "{out}");
        if always {
            assert_eq!(
                decision["updatedPermissions"][0]["destination"], "session",
                "{out}"
            );
            assert_eq!(decision["updatedPermissions"].as_array().unwrap().len(), 1);
        } else {
            assert!(decision.get("updatedPermissions").is_none(), "{out}");
        }
    }
}

#[tokio::test]
async fn pre_tool_use_deny() {
    let app = spawn_app().await;
    let hook = post_hook(&app, fixture("claude-code/pre_tool_use.json"));
    let i = pending_one(&app).await;
    app.post(
        &format!("/v1/interactions/{}/respond", i["id"].as_str().unwrap()),
        &json!({"decision": "deny", "message": "Keep the build, it is needed"}),
    )
    .await;
    let (_, out) = hook.await.unwrap();
    assert_eq!(
        out,
        json!({"hookSpecificOutput": {
            "hookEventName": "PreToolUse",
            "permissionDecision": "deny",
            "permissionDecisionReason": "Keep the build, it is needed"
        }})
    );
}

#[tokio::test]
async fn permission_request_allow_deny_and_repeat() {
    let app = spawn_app().await;
    let body = fixture("claude-code/permission_request.json");
    let hook = post_hook(&app, body.clone());
    let i = pending_one(&app).await;
    let id = i["id"].as_str().unwrap().to_string();
    assert!(id.starts_with("cc-"), "{id}");
    assert!(i["suggestions"].is_array());
    app.respond(&id, &json!({"decision": "allow"})).await;
    let (_, out) = hook.await.unwrap();
    assert_eq!(
        out,
        json!({"hookSpecificOutput": {
            "hookEventName": "PermissionRequest",
            "decision": {"behavior": "allow", "updatedInput": {"command": "npm test", "description": "Run the test suite"}}
        }})
    );

    // The same command later in the session asks again (a new generation), and can be denied.
    let hook = post_hook(&app, body);
    let j = pending_one(&app).await;
    assert_eq!(j["id"], format!("{id}.2"));
    app.post(
        &format!("/v1/interactions/{}/respond", j["id"].as_str().unwrap()),
        &json!({"decision": "deny", "message": "not twice"}),
    )
    .await;
    let (_, out) = hook.await.unwrap();
    assert_eq!(
        out,
        json!({"hookSpecificOutput": {
            "hookEventName": "PermissionRequest",
            "decision": {"behavior": "deny", "message": "not twice", "interrupt": false}
        }})
    );
}

#[tokio::test]
async fn identical_requests_in_flight_share_one_interaction_until_the_last_leaves() {
    let app = spawn_app().await;
    let body = fixture("claude-code/permission_request.json");
    // Claude Code asks the same thing twice at once (parallel tool calls): one interaction.
    let first = post_hook(&app, body.clone());
    let i = pending_one(&app).await;
    let second = post_hook(&app, body);
    app.metrics_with("imrelay_hook_calls_waiting 2").await;
    let (_, list) = app.get("/v1/interactions?status=all").await;
    assert_eq!(list["interactions"].as_array().unwrap().len(), 1);
    // One of them is dropped: the other still waits, so nothing is withdrawn.
    first.abort();
    app.metrics_with("imrelay_hook_calls_waiting 1").await;
    let (_, still) = app
        .get(&format!("/v1/interactions/{}", i["id"].as_str().unwrap()))
        .await;
    assert_eq!(still["status"], "pending");
    app.respond(i["id"].as_str().unwrap(), &json!({"decision": "allow"}))
        .await;
    let (_, out) = second.await.unwrap();
    assert_eq!(out["hookSpecificOutput"]["decision"]["behavior"], "allow");
    app.metrics_with("imrelay_hook_calls_waiting 0").await;
}

#[tokio::test]
async fn a_permission_request_answered_in_claude_code_is_withdrawn_everywhere() {
    use crate::telegram::{PRIVATE, edited, prompt, start};
    use imrelay::channels::telegram::Mode;

    let (app, tg) = start(Mode::Webhook).await;
    let mut events = Sse::connect(&app, None).await;
    let body = fixture("claude-code/permission_request.json");
    let hook = post_hook(&app, body.clone());
    let id = pending_one(&app).await["id"].as_str().unwrap().to_string();
    let posted = prompt(&tg, PRIVATE, "npm test").await;
    let created = events.next().await;
    assert_eq!(created.event, "interaction.created");
    assert_eq!(created.data["id"], id.as_str());

    // The person answers Claude Code's own dialog (or presses Esc): Claude Code closes the
    // hook's connection.
    hook.abort();
    let withdrawn = eventually_within(
        "the interaction is withdrawn",
        Duration::from_secs(1),
        || async {
            let (_, i) = app.get(&format!("/v1/interactions/{id}")).await;
            (i["status"] == "resolved").then_some(i)
        },
    )
    .await;
    let message = "Answered in Claude Code, or abandoned there";
    assert_eq!(withdrawn["resolution"]["outcome"], "cancelled");
    assert_eq!(withdrawn["resolution"]["by"], "claude-code");
    assert_eq!(withdrawn["resolution"]["result"]["message"], message);
    // Every copy says so, without buttons...
    let edit = edited(&tg, PRIVATE, posted.message_id, message).await;
    assert_eq!(edit["reply_markup"], json!({"inline_keyboard": []}));
    // ...and so does the event stream.
    let resolved = events.next().await;
    assert_eq!(resolved.event, "interaction.resolved");
    assert_eq!(resolved.data["id"], id.as_str());
    assert_eq!(resolved.data["resolution"]["outcome"], "cancelled");
    assert_eq!(resolved.data["resolution"]["result"]["message"], message);
    // A late answer is told it came too late.
    let (status, _) = app.respond(&id, &json!({"decision": "allow"})).await;
    assert_eq!(status, StatusCode::CONFLICT);

    // The same request again is a new question, not the withdrawn one.
    let again = post_hook(&app, body);
    let next = pending_one(&app).await;
    assert_eq!(next["id"], format!("{id}.2"));
    app.respond(
        &format!("{id}.2"),
        &json!({"decision": "deny", "message": "not now"}),
    )
    .await;
    let (_, out) = again.await.unwrap();
    assert_eq!(
        out["hookSpecificOutput"]["decision"],
        json!({"behavior": "deny", "message": "not now", "interrupt": false})
    );
    app.stop().await;
}

#[tokio::test]
async fn a_pre_tool_use_call_claude_code_gives_up_on_is_withdrawn() {
    let app = spawn_app().await;
    let hook = post_hook(&app, fixture("claude-code/pre_tool_use.json"));
    let i = pending_one(&app).await;
    let id = i["id"].as_str().unwrap().to_string();
    // Claude Code drops the call (the person pressed Esc, or its own timeout passed).
    hook.abort();
    let body = eventually("the interaction is withdrawn", || async {
        let (_, body) = app.get(&format!("/v1/interactions/{id}")).await;
        (body["status"] == "resolved").then_some(body)
    })
    .await;
    assert_eq!(body["resolution"]["outcome"], "cancelled");
    assert_eq!(
        body["resolution"]["result"]["message"],
        "Claude Code stopped waiting for this answer"
    );
    // A late answer is told it came too late.
    let (status, _) = app.respond(&id, &json!({"decision": "allow"})).await;
    assert_eq!(status, StatusCode::CONFLICT);
}

#[tokio::test]
async fn timeout_denies_by_default() {
    let app = spawn_with(|s| s.hooks.claude_code.timeout_secs = 1).await;
    let (status, out) = post_hook(&app, fixture("claude-code/pre_tool_use.json"))
        .await
        .unwrap();
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        out,
        json!({"hookSpecificOutput": {
            "hookEventName": "PreToolUse",
            "permissionDecision": "deny",
            "permissionDecisionReason": "No response within 1 seconds"
        }})
    );
    let (_, i) = app
        .get("/v1/interactions/toolu_01HkQ8mN4vRZ2xT6yB3wLpE9")
        .await;
    assert_eq!(i["resolution"]["outcome"], "expired");

    let (_, out) = post_hook(&app, fixture("claude-code/permission_request.json"))
        .await
        .unwrap();
    assert_eq!(
        out["hookSpecificOutput"]["decision"],
        json!({"behavior": "deny", "message": "No response within 1 seconds", "interrupt": false})
    );
}

#[tokio::test]
async fn timeout_can_fall_back_to_claude_codes_prompt() {
    let app = spawn_with(|s| {
        s.hooks.claude_code.timeout_secs = 1;
        s.hooks.claude_code.on_timeout = OnTimeout::Ask;
    })
    .await;
    let (_, out) = post_hook(&app, fixture("claude-code/pre_tool_use.json"))
        .await
        .unwrap();
    assert_eq!(out["hookSpecificOutput"]["permissionDecision"], "ask");
    assert_eq!(out["hookSpecificOutput"]["hookEventName"], "PreToolUse");
    let (_, out) = post_hook(&app, fixture("claude-code/permission_request.json"))
        .await
        .unwrap();
    assert_eq!(out, json!({}));
}

#[tokio::test]
async fn other_hook_events_get_no_opinion() {
    let app = spawn_app().await;
    let (status, out) = app
        .post(
            "/v1/hooks/claude-code",
            &fixture("claude-code/notification.json"),
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(out, json!({}));
    // Fields a known event would need in another shape do not matter for other events.
    let (status, out) = app
        .post(
            "/v1/hooks/claude-code",
            &json!({"hook_event_name": "SomeFutureEvent", "session_id": 42,
                    "tool_input": "not an object", "cwd": ["x"]}),
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(out, json!({}));
    let (status, out) = app
        .post(
            "/v1/hooks/claude-code",
            &json!({"hook_event_name": "PreToolUse", "session_id": "s"}),
        )
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{out}");
    assert_eq!(out["error"]["code"], "invalid_request");
    let (status, out) = app
        .post(
            "/v1/hooks/claude-code",
            &json!({"hook_event_name": "PreToolUse", "session_id": 42, "tool_name": "Bash",
                    "tool_input": {}}),
        )
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{out}");
    assert!(
        out["error"]["message"]
            .as_str()
            .unwrap()
            .contains("PreToolUse"),
        "{out}"
    );
    let (status, out) = app
        .post("/v1/hooks/claude-code", &json!({"session_id": "s"}))
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{out}");
    assert_eq!(out["error"]["field"], "hook_event_name");
    assert_eq!(app.registry.pending_count(), 0);
}

/// Answers the one pending interaction of a permission request hook; returns its id.
async fn answer_permission_request(app: &TestApp) -> String {
    let hook = post_hook(app, fixture("claude-code/permission_request.json"));
    let id = pending_one(app).await["id"].as_str().unwrap().to_string();
    app.respond(&id, &json!({"decision": "allow"})).await;
    hook.await.unwrap();
    id
}

#[tokio::test]
async fn permission_request_generations_are_remembered_until_pruned() {
    let app = spawn_app().await;
    let base = answer_permission_request(&app).await;
    assert!(!base.contains('.'), "{base}");
    let key = format!("bound:hooks.claude_code.latest:{base}");
    let remembered = || async { app.store.get_value(&key).await.unwrap() };
    assert_eq!(remembered().await.as_deref(), Some(base.as_str()));
    assert_eq!(answer_permission_request(&app).await, format!("{base}.2"));
    assert_eq!(remembered().await, Some(format!("{base}.2")));

    // The walk starts at the remembered generation rather than scanning from the first (and
    // has no upper limit): a memory of generation 50000 leads straight past it.
    app.store
        .set_value(&key, Some(format!("{base}.50000")))
        .await
        .unwrap();
    assert_eq!(
        answer_permission_request(&app).await,
        format!("{base}.50001")
    );
    assert_eq!(remembered().await, Some(format!("{base}.50001")));

    // Pruning the answered generations takes the memory with them: nothing is kept per
    // command beyond the retention period...
    app.store
        .prune(jiff::Timestamp::now() + jiff::SignedDuration::from_hours(1))
        .await
        .unwrap();
    assert_eq!(remembered().await, None);
    assert_eq!(
        app.get(&format!("/v1/interactions/{base}")).await.0,
        StatusCode::NOT_FOUND
    );
    // ...and the same command asks again under the first generation, which nobody holds.
    assert_eq!(answer_permission_request(&app).await, base);
}

#[tokio::test]
async fn the_memory_of_a_pending_generation_outlives_pruning() {
    let app = spawn_app().await;
    let base = answer_permission_request(&app).await;
    // The next generation is asked and left pending.
    let hook = post_hook(&app, fixture("claude-code/permission_request.json"));
    let second = format!("{base}.2");
    let key = format!("bound:hooks.claude_code.latest:{base}");
    eventually("the second generation is remembered", || async {
        let remembered = app.store.get_value(&key).await.unwrap();
        (remembered.as_deref() == Some(second.as_str())).then_some(())
    })
    .await;
    // Pruning removes the answered first generation, not the memory of the pending second.
    app.store
        .prune(jiff::Timestamp::now() + jiff::SignedDuration::from_hours(1))
        .await
        .unwrap();
    assert_eq!(
        app.store.get_value(&key).await.unwrap().as_deref(),
        Some(second.as_str())
    );
    app.respond(&second, &json!({"decision": "deny"})).await;
    let (_, out) = hook.await.unwrap();
    assert_eq!(out["hookSpecificOutput"]["decision"]["behavior"], "deny");
    // So the walk goes on after it, rather than back to the pruned first generation while
    // the second still exists.
    assert_eq!(answer_permission_request(&app).await, format!("{base}.3"));
}

#[tokio::test]
async fn questions_through_the_hook_carry_the_answers() {
    let app = spawn_app().await;
    let mut body = fixture("claude-code/pre_tool_use.json");
    body["tool_name"] = json!("AskUserQuestion");
    body["tool_use_id"] = json!("toolu_question");
    body["tool_input"] = json!({"questions": [{"question": "Ship it?", "header": "Ship",
        "multiSelect": false, "options": [{"label": "Yes"}, {"label": "No"}]}]});
    let hook = post_hook(&app, body);
    let i = pending_one(&app).await;
    assert_eq!(i["kind"], "question");
    app.post(
        "/v1/interactions/toolu_question/respond",
        &json!({"answers": {"Ship it?": "Yes"}}),
    )
    .await;
    let (_, out) = hook.await.unwrap();
    assert_eq!(out["hookSpecificOutput"]["permissionDecision"], "allow");
    assert_eq!(
        out["hookSpecificOutput"]["updatedInput"]["answers"],
        json!({"Ship it?": "Yes"})
    );
}

#[tokio::test]
async fn permission_request_generations_survive_a_restart_until_pruned() {
    use imrelay::store::Store;
    use std::sync::Arc;

    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("gen.db");
    let reopen = || async { Arc::new(reopen_sqlite(&path).await) as Arc<dyn Store> };
    let base = {
        let app = spawn_on(settings(), reopen().await).await;
        let base = answer_permission_request(&app).await;
        assert_eq!(answer_permission_request(&app).await, format!("{base}.2"));
        app.stop().await;
        base
    };
    // The memory survives the restart: the walk goes on from the second generation.
    let app = spawn_on(settings(), reopen().await).await;
    assert_eq!(answer_permission_request(&app).await, format!("{base}.3"));
    // Every answered generation passes its retention and is pruned, with the memory.
    app.store
        .prune(jiff::Timestamp::now() + jiff::SignedDuration::from_hours(1))
        .await
        .unwrap();
    app.stop().await;
    let conn = rusqlite::Connection::open(&path).unwrap();
    let kept: i64 = conn
        .query_row(
            "SELECT count(*) FROM kv WHERE key LIKE 'bound:%'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(kept, 0);
    drop(conn);
    let app = spawn_on(settings(), reopen().await).await;
    assert_eq!(answer_permission_request(&app).await, base);
}
