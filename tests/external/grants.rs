//! Grants and policy rules on replicas sharing PostgreSQL: a grant made on one replica allows
//! the next matching call on the other at once, a revocation on either stops it, and a
//! policy decision on one is announced as resolved on the other's event stream.

use libtest_mimic::Trial;
use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::postgres::{in_schema, server};
use crate::replicas::{replica, replica_with};
use crate::support::*;
use crate::trial;

pub(crate) fn trials() -> Vec<Trial> {
    vec![
        trial(
            "grants::a_grant_made_on_one_replica_counts_on_the_other_until_revoked",
            server,
            || in_schema(a_grant_made_on_one_replica_counts_on_the_other_until_revoked),
        ),
        trial(
            "grants::a_session_grant_counts_on_the_other_replica_for_its_token_alone",
            server,
            || in_schema(a_session_grant_counts_on_the_other_replica_for_its_token_alone),
        ),
    ]
}

async fn create(app: &TestApp, id: &str, command: &str) -> Value {
    let (status, body) = app
        .post(
            "/v1/interactions",
            &json!({"id": id, "tool_name": "Bash", "input": {"command": command},
                    "session": "s-1", "agent": "claude-code", "cwd": "/srv/shop"}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    body
}

async fn a_grant_made_on_one_replica_counts_on_the_other_until_revoked(schema: String) {
    let a = replica(&schema).await;
    let b = replica_with(&schema, |s| {
        s.policy = vec![imrelay::config::policy::PolicyRuleSettings::new(
            "git-read",
            imrelay::interaction::policy::Decision::Allow,
            &["Bash(git status:*)"],
        )];
    })
    .await;
    let mut events_a = Sse::connect(&a, None).await;

    assert_eq!(
        create(&a, "r-1", "npm run test -- --watch").await["status"],
        "pending"
    );
    let (status, answered) = a
        .respond(
            "r-1",
            &json!({"decision": "allow", "by": "alice", "grant": {"scope": "standing"}}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{answered}");
    let grant_id = answered["grant"]["id"].as_str().unwrap().to_string();

    // On B at once: no waiting for a change feed.
    let next = create(&b, "r-2", "npm run test").await;
    assert_eq!(next["status"], "resolved", "{next}");
    assert_eq!(next["resolution"]["by"], "grant Bash(npm run test:*)");
    let (_, listed) = b.get("/v1/grants").await;
    assert_eq!(listed["grants"][0]["id"], grant_id.as_str());

    // Revoked on B: A asks a person again.
    let (status, _) = b.delete(&format!("/v1/grants/{grant_id}?by=bob")).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(create(&a, "r-3", "npm run test").await["status"], "pending");
    let (status, _) = a.delete(&format!("/v1/grants/{grant_id}")).await;
    assert_eq!(status, StatusCode::NOT_FOUND);

    // A decision on B reaches A's event stream as resolved, never as created.
    let decided = create(&b, "r-4", "git status").await;
    assert_eq!(decided["resolution"]["via"], "policy");
    let seen = loop {
        let e = tokio::time::timeout(std::time::Duration::from_secs(10), events_a.next())
            .await
            .expect("A's stream announces r-4");
        if e.data["id"] == "r-4" {
            break e;
        }
    };
    assert_eq!(seen.event, "interaction.resolved");
    assert_eq!(seen.data["resolution"]["by"], "git-read");
    a.stop().await;
    b.stop().await;
}

/// Agent tokens A and B, and an operator token, on every replica.
fn tokens(s: &mut imrelay::config::Settings) {
    s.auth.agent_tokens = vec![
        imrelay::config::Secret::new(AGENT_A),
        imrelay::config::Secret::new(AGENT_B),
    ];
    s.auth.operator_tokens = vec![imrelay::config::OperatorToken::new(OPERATOR)];
}

const AGENT_A: &str = "agent-a-token-0123456789";
const AGENT_B: &str = "agent-b-token-0123456789";
const OPERATOR: &str = "operator-token-0123456789";

async fn a_session_grant_counts_on_the_other_replica_for_its_token_alone(schema: String) {
    let mut a = replica_with(&schema, tokens).await;
    let mut b = replica_with(&schema, tokens).await;
    a.token = Some(AGENT_A.into());
    assert_eq!(
        create(&a, "o-1", "npm run test -- --watch").await["status"],
        "pending"
    );
    a.token = Some(OPERATOR.into());
    let (status, answered) = a
        .respond(
            "o-1",
            &json!({"decision": "allow", "by": "alice", "grant": {"scope": "session"}}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{answered}");
    // On B, the same token's next call of the session is allowed at once...
    b.token = Some(AGENT_A.into());
    let next = create(&b, "o-2", "npm run test").await;
    assert_eq!(next["status"], "resolved", "{next}");
    assert_eq!(next["resolution"]["by"], "grant Bash(npm run test:*)");
    // ...and another token naming the same session is asked about.
    b.token = Some(AGENT_B.into());
    assert_eq!(create(&b, "o-3", "npm run test").await["status"], "pending");
    a.stop().await;
    b.stop().await;
}
