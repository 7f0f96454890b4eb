//! Policy rules at creation: allow and deny resolve at once (via "policy", by the rule), shadow
//! rules only audit; every decision is audited, counted in /metrics and announced on the event
//! stream; `imrelay policy report` sums them up from the audit trail.

use std::sync::Arc;
use std::time::Duration;

use imrelay::config::policy::PolicyRuleSettings;
use imrelay::interaction::policy::{Decision, Mode};
use imrelay::store::{SqliteStore, Store, Synchronous};
use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::support::*;

fn rule(name: &str, decision: Decision, mode: Mode, tools: &[&str]) -> PolicyRuleSettings {
    PolicyRuleSettings {
        mode,
        ..PolicyRuleSettings::new(name, decision, tools)
    }
}

fn rules() -> Vec<PolicyRuleSettings> {
    let mut no_rm = rule("no-rm", Decision::Deny, Mode::Live, &["Bash(rm -rf /:*)"]);
    no_rm.message = Some("Never remove the root. Ask a person.".into());
    let mut try_deny_curl = rule(
        "try-no-curl",
        Decision::Deny,
        Mode::Shadow,
        &["Bash(curl:*)"],
    );
    try_deny_curl.message = Some("no curl".into());
    vec![
        rule(
            "git-read",
            Decision::Allow,
            Mode::Live,
            &["Bash(git status:*)", "Bash(git diff:*)"],
        ),
        no_rm,
        rule(
            "push-asks",
            Decision::Ask,
            Mode::Live,
            &["Bash(git push:*)"],
        ),
        try_deny_curl,
        rule(
            "try-allow-make",
            Decision::Allow,
            Mode::Shadow,
            &["Bash(make:*)"],
        ),
    ]
}

async fn audit(app: &TestApp) -> Vec<Value> {
    let (status, body) = app.get("/v1/audit?limit=1000").await;
    assert_eq!(status, StatusCode::OK, "{body}");
    body["entries"].as_array().unwrap().clone()
}

fn entry<'a>(all: &'a [Value], action: &str, id: &str) -> Vec<&'a Value> {
    all.iter()
        .filter(|e| e["action"] == action && e["interaction_id"] == id)
        .collect()
}

async fn create(app: &TestApp, id: &str, command: &str) -> (StatusCode, Value) {
    app.post(
        "/v1/interactions",
        &json!({"id": id, "tool_name": "Bash", "input": {"command": command}, "agent": "claude-code"}),
    )
    .await
}

#[tokio::test]
async fn allow_and_deny_rules_resolve_at_creation_and_are_audited_counted_and_announced() {
    let app = spawn_with(|s| s.policy = rules()).await;
    let mut events = Sse::connect(&app, None).await;

    let (status, allowed) = create(&app, "p-allow", "git status -s").await;
    assert_eq!(status, StatusCode::CREATED, "{allowed}");
    assert_eq!(allowed["status"], "resolved");
    let r = &allowed["resolution"];
    assert_eq!(
        (r["outcome"].as_str(), r["via"].as_str(), r["by"].as_str()),
        (Some("allowed"), Some("policy"), Some("git-read"))
    );
    assert_eq!(
        r["result"],
        json!({"behavior": "allow", "updatedInput": {"command": "git status -s"}})
    );

    let (status, denied) = create(&app, "p-deny", "rm -rf / --no-preserve-root").await;
    assert_eq!(status, StatusCode::CREATED);
    let r = &denied["resolution"];
    assert_eq!(
        (r["outcome"].as_str(), r["by"].as_str()),
        (Some("denied"), Some("no-rm"))
    );
    assert_eq!(
        r["result"]["message"],
        "Never remove the root. Ask a person."
    );

    // A compound command with one part no rule allows goes to a person, as does an ask rule.
    for (id, cmd) in [
        ("p-mixed", "git status && make install"),
        ("p-ask", "git push origin main"),
        ("p-none", "cargo build"),
    ] {
        let (status, body) = create(&app, id, cmd).await;
        assert_eq!(status, StatusCode::CREATED);
        assert_eq!(body["status"], "pending", "{cmd}: {body}");
    }
    // Shadow rules decide nothing.
    let (_, shadowed) = create(&app, "p-shadow", "curl https://example.com").await;
    assert_eq!(shadowed["status"], "pending");
    let (_, made) = create(&app, "p-make", "make all").await;
    assert_eq!(made["status"], "pending");

    // The wait returns the decision at once, and an agent re-sending the same call gets it again.
    let (status, waited) = app
        .get("/v1/interactions/p-allow/wait?timeout_secs=5")
        .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(waited["resolution"]["via"], "policy");
    let (status, again) = create(&app, "p-allow", "git status -s").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(again["resolution"]["by"], "git-read");

    // Announced as resolved (never as pending): what the inbox's recent list and `watch` show.
    let first = events.next().await;
    assert_eq!(first.event, "interaction.resolved");
    let shown = &first.data;
    assert_eq!(
        (shown["id"].as_str(), shown["resolution"]["by"].as_str()),
        (Some("p-allow"), Some("git-read"))
    );
    let second = events.next().await;
    assert_eq!(second.event, "interaction.resolved");

    let all = audit(&app).await;
    let policy = entry(&all, "policy", "p-allow");
    assert_eq!(policy.len(), 1, "{all:#?}");
    assert_eq!(
        (
            policy[0]["actor"].as_str(),
            policy[0]["outcome"].as_str(),
            policy[0]["channel"].as_str()
        ),
        (Some("git-read"), Some("allow"), Some("policy"))
    );
    assert_eq!(policy[0]["detail"], "rule \"git-read\": Bash(git status:*)");
    let answered = entry(&all, "answered", "p-allow");
    assert_eq!(
        (
            answered[0]["actor"].as_str(),
            answered[0]["channel"].as_str(),
            answered[0]["outcome"].as_str()
        ),
        (Some("git-read"), Some("policy"), Some("allowed"))
    );
    assert_eq!(entry(&all, "created", "p-allow").len(), 1);
    let denied = entry(&all, "answered", "p-deny");
    assert_eq!(denied[0]["detail"], "Never remove the root. Ask a person.");
    let ask = entry(&all, "policy", "p-ask");
    assert_eq!(
        (ask[0]["actor"].as_str(), ask[0]["outcome"].as_str()),
        (Some("push-asks"), Some("ask"))
    );
    let shadow = entry(&all, "policy", "p-shadow");
    assert_eq!(
        (shadow[0]["actor"].as_str(), shadow[0]["outcome"].as_str()),
        (Some("try-no-curl"), Some("would_deny"))
    );
    let shadow = entry(&all, "policy", "p-make");
    assert_eq!(shadow[0]["outcome"], "would_allow");
    assert!(entry(&all, "policy", "p-none").is_empty());
    assert!(entry(&all, "policy", "p-mixed").is_empty());
    // Nothing a rule decided is pending; the shadowed ones are.
    let (_, pending) = app.get("/v1/interactions?status=pending").await;
    let ids: Vec<&str> = pending["interactions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["id"].as_str().unwrap())
        .collect();
    assert!(
        !ids.contains(&"p-allow") && !ids.contains(&"p-deny"),
        "{ids:?}"
    );
    assert!(
        ids.contains(&"p-shadow") && ids.contains(&"p-make"),
        "{ids:?}"
    );

    let m = app.metrics().await;
    for line in [
        r#"imrelay_policy_decisions_total{rule="git-read",decision="allow",mode="live"} 1"#,
        r#"imrelay_policy_decisions_total{rule="no-rm",decision="deny",mode="live"} 1"#,
        r#"imrelay_policy_decisions_total{rule="push-asks",decision="ask",mode="live"} 1"#,
        r#"imrelay_policy_decisions_total{rule="try-no-curl",decision="deny",mode="shadow"} 1"#,
        r#"imrelay_policy_decisions_total{rule="try-allow-make",decision="allow",mode="shadow"} 1"#,
        r#"imrelay_interactions_resolved_total{kind="approval",outcome="allowed",via="policy"} 1"#,
        r#"imrelay_interactions_resolved_total{kind="approval",outcome="denied",via="policy"} 1"#,
    ] {
        assert!(m.contains(line), "{line} not in\n{m}");
    }
    app.stop().await;
}

#[tokio::test]
async fn the_hook_of_a_call_a_rule_allows_returns_at_once() {
    let app = spawn_with(|s| s.policy = rules()).await;
    let (status, body) = tokio::time::timeout(
        Duration::from_secs(10),
        post_hook(&app, {
            let mut body = fixture("claude-code/permission_request.json");
            body["tool_input"]["command"] = json!("git diff HEAD");
            body
        }),
    )
    .await
    .expect("answered at once")
    .unwrap();
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(
        body["hookSpecificOutput"]["decision"]["behavior"], "allow",
        "{body}"
    );
    app.stop().await;
}

#[tokio::test]
async fn policy_report_sums_up_live_and_shadow_decisions_from_the_audit_trail() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("imrelay.db");
    {
        let store: Arc<dyn Store> = Arc::new(SqliteStore::open(&db, Synchronous::Normal).unwrap());
        let mut s = settings();
        s.policy = rules();
        let app = spawn_on(s, store).await;
        for (id, cmd) in [
            ("r1", "git status"),
            ("r2", "git diff"),
            ("r3", "curl x"),
            ("r4", "curl y"),
            ("r5", "make"),
        ] {
            create(&app, id, cmd).await;
        }
        app.stop().await;
    }
    let config = dir.path().join("imrelay.toml");
    std::fs::write(
        &config,
        "[[policy]]\nname = \"git-read\"\ntools = [\"Bash(git status:*)\", \"Bash(git diff:*)\"]\ndecision = \"allow\"\n\n\
         [[policy]]\nname = \"try-no-curl\"\ntools = [\"Bash(curl:*)\"]\ndecision = \"deny\"\nmode = \"shadow\"\n\n\
         [[policy]]\nname = \"never-fires\"\ntools = [\"Bash(shutdown:*)\"]\ndecision = \"deny\"\n",
    )
    .unwrap();
    let (ok, out, err) = cli(
        &db,
        &[
            "--config",
            config.to_str().unwrap(),
            "policy",
            "report",
            "--since",
            "1h",
        ],
    );
    assert!(ok, "{err}");
    let line = |rule: &str| {
        out.lines()
            .find(|l| l.starts_with(rule))
            .unwrap_or_else(|| panic!("{rule} not in\n{out}"))
            .split_whitespace()
            .take(5)
            .collect::<Vec<_>>()
            .join(" ")
    };
    assert_eq!(line("git-read"), "git-read live 2 0 0");
    assert_eq!(line("try-no-curl"), "try-no-curl shadow 0 2 0");
    assert_eq!(line("try-allow-make"), "try-allow-make shadow 1 0 0");
    assert!(out.contains("(not configured now)"), "{out}");
    assert_eq!(line("never-fires"), "never-fires live 0 0 0");
    assert!(out.contains("Shadow rules decided nothing"), "{out}");
    let (ok, json, _) = cli(
        &db,
        &[
            "--config",
            config.to_str().unwrap(),
            "policy",
            "report",
            "--json",
        ],
    );
    assert!(ok);
    let rows: Vec<Value> = json
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert!(
        rows.iter()
            .any(|r| r["rule"] == "try-no-curl" && r["deny"] == 2 && r["mode"] == "shadow"),
        "{json}"
    );
    // The trail still verifies with the new entries in it.
    let (ok, out, _) = cli(&db, &["audit", "verify"]);
    assert!(ok, "{out}");
}

#[tokio::test]
async fn a_pattern_that_cannot_be_read_is_refused_with_its_position() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("imrelay.toml");
    std::fs::write(&config, "[[policy]]\nname = \"bad\"\ntools = [\"Bash(git status:*)\", \"Bash(npm run\"]\ndecision = \"allow\"\n").unwrap();
    let db = dir.path().join("x.db");
    let (ok, _, err) = cli(&db, &["--config", config.to_str().unwrap(), "check-config"]);
    assert!(!ok);
    assert!(
        err.contains(r#"policy[0] ("bad"): tools[1]: "Bash(npm run" at character 12: the specifier is not closed"#),
        "{err}"
    );
}
