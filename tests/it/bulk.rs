//! Many interactions answered at once: `POST /v1/respond` answers each listed interaction on
//! its own, with its own result code, and `imrelay answer --all` uses it.

use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::support::*;

fn result<'a>(body: &'a Value, id: &str) -> &'a Value {
    body["results"]
        .as_array()
        .expect("results")
        .iter()
        .find(|r| r["id"] == id)
        .unwrap_or_else(|| panic!("no result for {id} in {body}"))
}

#[tokio::test]
async fn each_interaction_gets_its_own_result_and_the_rest_are_answered() {
    let app = spawn_app().await;
    let a = app.create_bash("bulk-a", "npm test").await;
    let b = app.create_bash("bulk-b", "npm run lint").await;
    let c = app.create_bash("bulk-c", "git status").await;
    // Already answered elsewhere: the bulk answer must not change it.
    let (status, _) = app
        .respond(
            &c,
            &json!({"decision": "deny", "by": "bob", "message": "no"}),
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    let (status, _) = app
        .post(
            "/v1/interactions",
            &json!({"id": "bulk-q", "tool_name": "AskUserQuestion", "input": {"questions": [
                {"question": "Which?", "header": "W", "options": [{"label": "x"}, {"label": "y"}]}]}}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED);

    let (status, body) = app
        .post(
            "/v1/respond",
            &json!({"ids": [a, "bulk-missing", b, c, "bulk-q", "../x"],
                    "decision": "allow", "by": "alice", "via": "desktop"}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["answered"], 2, "{body}");
    assert_eq!(body["refused"], 4, "{body}");
    // In the order given.
    let ids: Vec<&str> = body["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["id"].as_str().unwrap())
        .collect();
    assert_eq!(
        ids,
        [
            "bulk-a",
            "bulk-missing",
            "bulk-b",
            "bulk-c",
            "bulk-q",
            "../x"
        ]
    );
    assert_eq!(result(&body, &a)["status"], 200);
    assert_eq!(result(&body, &a)["outcome"], "allowed");
    assert_eq!(result(&body, &b)["status"], 200);
    assert_eq!(result(&body, "bulk-missing")["status"], 404);
    assert_eq!(result(&body, "bulk-missing")["error"]["code"], "not_found");
    assert_eq!(result(&body, "../x")["status"], 404);
    assert_eq!(result(&body, &c)["status"], 409);
    assert_eq!(result(&body, &c)["error"]["code"], "already_resolved");
    assert!(
        result(&body, &c)["error"]["message"]
            .as_str()
            .unwrap()
            .contains("bob"),
        "{body}"
    );
    // A question cannot be allowed: refused on its own, and still pending.
    assert_eq!(result(&body, "bulk-q")["status"], 400, "{body}");
    assert_eq!(result(&body, "bulk-q")["error"]["code"], "invalid_request");

    for (id, outcome, by) in [
        (&a, "allowed", "alice"),
        (&b, "allowed", "alice"),
        (&c, "denied", "bob"),
    ] {
        let (_, i) = app.get(&format!("/v1/interactions/{id}")).await;
        assert_eq!(i["resolution"]["outcome"], outcome, "{i}");
        assert_eq!(i["resolution"]["by"], by, "{i}");
        if by == "alice" {
            assert_eq!(i["resolution"]["via"], "desktop");
        }
    }
    let (_, q) = app.get("/v1/interactions/bulk-q").await;
    assert_eq!(q["status"], "pending");

    // Deny with one reason: the question is declined, each agent reads the reason.
    let (status, body) = app
        .post(
            "/v1/respond",
            &json!({"ids": ["bulk-q"], "decision": "deny", "message": "Not today", "by": "alice"}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(result(&body, "bulk-q")["outcome"], "denied");
    let (_, q) = app.get("/v1/interactions/bulk-q/wait").await;
    assert_eq!(q["result"]["message"], "Not today", "{q}");
    app.stop().await;
}

#[tokio::test]
async fn a_wrong_body_answers_nothing() {
    let app = spawn_app().await;
    let a = app.create_bash("bulk-keep", "make").await;
    let many: Vec<String> = (0..501).map(|n| format!("x{n}")).collect();
    for (body, field) in [
        (json!({"ids": [], "decision": "allow"}), "ids"),
        (json!({"ids": many, "decision": "allow"}), "ids"),
        (json!({"ids": [a, a], "decision": "allow"}), "ids[1]"),
        (
            json!({"ids": [a], "decision": "allow", "message": "x"}),
            "message",
        ),
        (json!({"ids": [a], "decision": "maybe"}), "decision"),
        (
            json!({"ids": [a], "decision": "allow", "updated_input": {}}),
            "updated_input",
        ),
        (
            json!({"ids": [a], "decision": "allow", "by": "x".repeat(201)}),
            "by",
        ),
    ] {
        let (status, err) = app.post("/v1/respond", &body).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{body}: {err}");
        assert_eq!(err["error"]["field"], field, "{err}");
    }
    let (_, i) = app.get(&format!("/v1/interactions/{a}")).await;
    assert_eq!(i["status"], "pending");
    app.stop().await;
}

#[tokio::test]
async fn only_an_operator_token_answers_many() {
    use imrelay::config::Secret;
    const AGENT: &str = "agent-secret-0123456789";
    const OPERATOR: &str = "operator-secret-0123456789";
    let mut app = spawn_with(|s| {
        s.auth.agent_tokens = vec![Secret::new(AGENT)];
        s.auth.operator_tokens = vec![imrelay::config::OperatorToken::new(OPERATOR)];
    })
    .await;
    app.token = Some(AGENT.into());
    let a = app.create_bash("bulk-auth", "ls").await;
    let body = json!({"ids": [a], "decision": "allow"});
    for (token, expected) in [
        (None, StatusCode::UNAUTHORIZED),
        (Some(AGENT), StatusCode::FORBIDDEN),
    ] {
        app.token = token.map(str::to_string);
        let (status, err) = app.post("/v1/respond", &body).await;
        assert_eq!(status, expected, "{err}");
    }
    app.token = Some(OPERATOR.into());
    let (_, i) = app.get(&format!("/v1/interactions/{a}")).await;
    assert_eq!(i["status"], "pending");
    let (status, out) = app.post("/v1/respond", &body).await;
    assert_eq!(status, StatusCode::OK, "{out}");
    assert_eq!(out["answered"], 1);
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn racing_single_answers_each_interaction_has_exactly_one_winner() {
    let app = spawn_app().await;
    let mut ids = Vec::new();
    for n in 0..40 {
        ids.push(app.create_bash(&format!("race-{n}"), "make").await);
    }
    // A bulk allow of all of them, and a single deny of each, at the same time.
    let bulk = {
        let client = app.client.clone();
        let url = app.url("/v1/respond");
        let body = json!({"ids": ids, "decision": "allow", "by": "alice"});
        tokio::spawn(async move { split(client.post(url).json(&body).send().await.unwrap()).await })
    };
    let singles: Vec<_> = ids
        .iter()
        .map(|id| {
            let client = app.client.clone();
            let url = app.url(&format!("/v1/interactions/{id}/respond"));
            tokio::spawn(async move {
                split(
                    client
                        .post(url)
                        .json(&json!({"decision": "deny", "by": "bob"}))
                        .send()
                        .await
                        .unwrap(),
                )
                .await
            })
        })
        .collect();
    let (status, body) = bulk.await.unwrap();
    assert_eq!(status, StatusCode::OK, "{body}");
    let mut bulk_won = 0;
    for (id, single) in ids.iter().zip(singles) {
        let (single_status, _) = single.await.unwrap();
        let r = result(&body, id);
        let (_, i) = app.get(&format!("/v1/interactions/{id}")).await;
        // Exactly one of the two answers won, and the interaction shows that one.
        if r["status"] == 200 {
            bulk_won += 1;
            assert_eq!(single_status, StatusCode::CONFLICT, "{id}");
            assert_eq!(i["resolution"]["by"], "alice", "{i}");
        } else {
            assert_eq!(r["status"], 409, "{r}");
            assert_eq!(single_status, StatusCode::OK, "{id}");
            assert_eq!(i["resolution"]["by"], "bob", "{i}");
        }
    }
    assert_eq!(body["answered"], bulk_won, "{body}");
    app.stop().await;
}

/// A vote recorded on an approval that needs more people is counted as a vote, not a
/// refusal.
#[tokio::test]
async fn a_recorded_vote_is_counted_as_voted_not_refused() {
    let app = spawn_with(|s| {
        s.routes = vec![imrelay::config::teams::RouteSettings {
            name: "deploy".into(),
            cwd: vec!["/srv/deploy/**".into()],
            quorum: Some(2),
            ..Default::default()
        }];
    })
    .await;
    let (status, _) = app
        .post(
            "/v1/interactions",
            &json!({"id": "bulk-v", "tool_name": "Bash", "input": {"command": "make deploy"},
                    "cwd": "/srv/deploy"}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED);
    let plain = app.create_bash("bulk-p", "npm test").await;
    let (status, body) = app
        .post(
            "/v1/respond",
            &json!({"ids": ["bulk-v", plain, "bulk-none"], "decision": "allow"}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(result(&body, "bulk-v")["status"], 202, "{body}");
    assert_eq!(
        (&body["answered"], &body["voted"], &body["refused"]),
        (&json!(1), &json!(1), &json!(1)),
        "{body}"
    );
}
