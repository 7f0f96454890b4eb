//! The ntfy channel against a fake ntfy server on loopback that checks each publish against
//! the JSON format of ntfy's docs (fields, types, the auth header): prompts with single-use
//! action URLs, answers through them, refusals of used, forged and foreign tokens, and the
//! privacy mode.

use imrelay::config::teams::PersonSettings;
use imrelay::config::{Secret, Settings};
use reqwest::StatusCode;
use serde_json::Value;

pub(crate) use crate::ntfy_fake::FakeNtfy;
use crate::support::*;

pub(crate) fn configure(s: &mut Settings, url: &str) {
    s.ntfy.enabled = true;
    s.ntfy.api_url = url.into();
    s.ntfy.topics = vec!["phone-alice".into()];
    s.ntfy.token = Secret::new("tk_test");
    s.ntfy.person = "alice".into();
    s.people = vec![PersonSettings::named("alice").on("ntfy", ["alice-phone"])];
}

/// The path of a button's URL (the server's public URL is not where the test reaches it).
fn path_of(url: &str) -> String {
    let rest = url.split_once("://").map_or(url, |(_, r)| r);
    rest.find('/').map_or("/".into(), |i| rest[i..].to_string())
}

/// The button labelled `label` of a published prompt: the path it posts to.
pub(crate) fn button(prompt: &Value, label: &str) -> String {
    let a = prompt["actions"]
        .as_array()
        .and_then(|a| a.iter().find(|a| a["label"] == label))
        .unwrap_or_else(|| panic!("no {label} button in {prompt}"));
    path_of(a["url"].as_str().unwrap())
}

pub(crate) async fn press(app: &TestApp, path: &str) -> (StatusCode, Value) {
    split(app.client.post(app.url(path)).send().await.unwrap()).await
}

#[tokio::test]
async fn the_allow_button_answers_once_and_the_outcome_replaces_the_prompt() {
    let (fake, url) = FakeNtfy::start("Bearer tk_test").await;
    let app = spawn_with(|s| configure(s, &url)).await;
    let id = app.create_bash("n1", "cargo publish --dry-run").await;

    let prompt = fake.nth(0).await;
    assert_eq!(prompt["topic"], "phone-alice");
    assert_eq!(prompt["priority"], 4);
    assert!(
        prompt["message"]
            .as_str()
            .unwrap()
            .contains("cargo publish --dry-run"),
        "{prompt}"
    );
    assert_eq!(prompt["actions"].as_array().unwrap().len(), 2, "{prompt}");
    let (allow, deny) = (button(&prompt, "Allow"), button(&prompt, "Deny"));
    assert!(allow.starts_with("/v1/ntfy/allow/") && deny.starts_with("/v1/ntfy/deny/"));

    let (status, body) = press(&app, &allow).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["result"], "resolved");
    let (_, i) = app.get(&format!("/v1/interactions/{id}")).await;
    let r = &i["resolution"];
    assert_eq!(
        (r["outcome"].as_str(), r["by"].as_str(), r["via"].as_str()),
        (Some("allowed"), Some("alice"), Some("ntfy")),
        "{i}"
    );

    // The outcome goes to the same notification, without buttons.
    let outcome = fake.nth(1).await;
    assert_eq!(outcome["sequence_id"], prompt["sequence_id"]);
    assert_eq!(outcome["topic"], "phone-alice");
    assert!(outcome.get("actions").is_none(), "{outcome}");
    assert!(
        outcome["message"]
            .as_str()
            .unwrap()
            .contains("Allowed by alice via ntfy"),
        "{outcome}"
    );

    // A second press, and the other button, change nothing.
    let (status, body) = press(&app, &allow).await;
    assert_eq!(status, StatusCode::CONFLICT, "{body}");
    assert_eq!(body["error"]["code"], "already_resolved");
    let (status, body) = press(&app, &deny).await;
    assert_eq!(status, StatusCode::CONFLICT, "{body}");
    app.outbox_idle().await;
    assert_eq!(fake.got.lock().unwrap().len(), 2);
    assert!(fake.refused().is_empty(), "{:?}", fake.refused());
}

#[tokio::test]
async fn forged_and_foreign_tokens_are_refused_and_change_nothing() {
    let (fake, url) = FakeNtfy::start("Bearer tk_test").await;
    let app = spawn_with(|s| configure(s, &url)).await;
    let a = app.create_bash("na", "rm -rf build").await;
    let first = fake.nth(0).await;
    let b = app.create_bash("nb", "ls").await;
    fake.nth(1).await;
    let allow_a = button(&first, "Allow");
    let token = allow_a.rsplit('/').next().unwrap().to_string();

    let mut forged = token.clone();
    let last = forged.pop().unwrap();
    forged.push(if last == 'A' { 'B' } else { 'A' });
    let tries = [
        format!("/v1/ntfy/allow/{forged}"),
        // Allow's token on the deny button.
        format!("/v1/ntfy/deny/{token}"),
        // Another interaction's creation time in front of the token.
        format!("/v1/ntfy/allow/1{token}"),
        "/v1/ntfy/allow/not-a-token".into(),
        format!("/v1/ntfy/approve/{token}"),
    ];
    for path in &tries {
        let (status, body) = press(&app, path).await;
        assert_eq!(status, StatusCode::FORBIDDEN, "{path}: {body}");
        assert_eq!(body["error"]["code"], "invalid_token", "{path}: {body}");
        assert!(
            !body.to_string().contains(&token),
            "the token is never echoed: {body}"
        );
    }
    for id in [&a, &b] {
        let (_, i) = app.get(&format!("/v1/interactions/{id}")).await;
        assert_eq!(i["status"], "pending", "{i}");
    }
    // The real button still works, once.
    assert_eq!(press(&app, &allow_a).await.0, StatusCode::OK);
    let (_, i) = app.get(&format!("/v1/interactions/{b}")).await;
    assert_eq!(i["status"], "pending", "{i}");
}

#[tokio::test]
async fn the_privacy_mode_leaves_the_command_out_and_basic_auth_is_sent() {
    // "alice:pw" in base64.
    let (fake, url) = FakeNtfy::start("Basic YWxpY2U6cHc=").await;
    let app = spawn_with(|s| {
        configure(s, &url);
        s.ntfy.token = Secret::new("");
        s.ntfy.username = "alice".into();
        s.ntfy.password = Secret::new("pw");
        s.ntfy.include_command = false;
    })
    .await;
    app.create_bash("np", "curl https://secret.example/deploy")
        .await;
    let prompt = fake.nth(0).await;
    let text = prompt.to_string();
    assert!(
        !text.contains("secret.example") && !text.contains("curl"),
        "{text}"
    );
    assert!(
        prompt["title"]
            .as_str()
            .unwrap()
            .starts_with("An approval is waiting"),
        "{prompt}"
    );
    assert_eq!(prompt["actions"].as_array().unwrap().len(), 2);
    assert!(fake.refused().is_empty(), "{:?}", fake.refused());
}

#[tokio::test]
async fn a_throttled_or_failing_server_is_retried_through_the_outbox() {
    let (fake, url) = FakeNtfy::start("Bearer tk_test").await;
    fake.failures.lock().unwrap().extend([503, 429]);
    let app = spawn_with(|s| {
        configure(s, &url);
        s.outbox.retry_base_ms = 10;
    })
    .await;
    app.create_bash("nr", "make release").await;
    let prompt = fake.nth(0).await;
    assert!(
        fake.failures.lock().unwrap().is_empty(),
        "both refusals were met"
    );
    assert!(prompt["message"].as_str().unwrap().contains("make release"));
    app.outbox_idle().await;
    assert_eq!(fake.got.lock().unwrap().len(), 1, "published once");
}

#[tokio::test]
async fn doctor_checks_the_server_and_publishes_a_test_to_each_topic() {
    let (fake, url) = FakeNtfy::start("Bearer tk_test").await;
    let config = format!(
        "[ntfy]\nenabled = true\napi_url = \"{url}\"\nchats = [\"phone-alice\"]\n\
         token = \"tk_test\"\nperson = \"alice\"\n\n[[people]]\nname = \"alice\"\nntfy = [\"alice\"]\n"
    );
    let (_, out) = crate::doctor::doctor(config, &["--send-test"]).await;
    assert!(out.contains(&format!("✓ ntfy: {url} answers")), "{out}");
    assert!(
        out.contains("✓ ntfy: a test message was published to topic phone-alice"),
        "{out}"
    );
    let test = fake.nth(0).await;
    assert_eq!(test["title"], "imrelay doctor");
    assert!(fake.refused().is_empty(), "{:?}", fake.refused());
}

/// `topics`, ntfy's old name for its `chats`, still starts the service, with the warning
/// naming the new spelling.
#[tokio::test]
async fn the_old_name_topics_still_starts_the_service_with_a_warning() {
    let (fake, url) = FakeNtfy::start("Bearer tk_test").await;
    let config = format!(
        "[ntfy]\nenabled = true\napi_url = \"{url}\"\ntopics = [\"phone-alice\"]\n\
         token = \"tk_test\"\nperson = \"alice\"\n\n[[people]]\nname = \"alice\"\nntfy = [\"alice\"]\n"
    );
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("imrelay.toml");
    std::fs::write(&path, config).unwrap();
    let loaded =
        Settings::load_from(Some(&path), std::collections::HashMap::new()).expect("it loads");
    assert!(
        loaded
            .warnings
            .iter()
            .any(|w| w.contains("`ntfy.topics`") && w.contains("`ntfy.chats`")),
        "{:?}",
        loaded.warnings
    );
    assert_eq!(loaded.settings.ntfy.topics, ["phone-alice"]);
    drop(fake);
}

#[tokio::test]
async fn a_step_up_approval_has_no_buttons_and_says_the_inbox_answers_it() {
    let (fake, url) = FakeNtfy::start("Bearer tk_test").await;
    let app = spawn_with(|s| {
        configure(s, &url);
        s.server.public_url = "https://relay.example.com".into();
        s.routes = vec![imrelay::config::teams::RouteSettings {
            name: "prod".into(),
            places: imrelay::config::teams::PerChannel::from([(
                "ntfy".into(),
                imrelay::config::teams::written(vec!["phone-alice"]),
            )]),
            step_up: true,
            ..Default::default()
        }];
    })
    .await;
    app.create_bash("ns", "make deploy-prod").await;
    let prompt = fake.nth(0).await;
    assert!(prompt.get("actions").is_none(), "{prompt}");
    assert_eq!(prompt["click"], "https://relay.example.com/#ns", "{prompt}");
    assert!(
        prompt["message"].as_str().unwrap().contains(
            "This needs a passkey (route \"prod\"): open it in the imrelay inbox and answer there"
        ),
        "{prompt}"
    );
    assert!(fake.refused().is_empty(), "{:?}", fake.refused());
}

/// "Allow similar", ntfy's third button: offered with the rule it grants when imrelay
/// proposes one, it allows and grants that rule for the session, audited as the person's; its
/// token is good for that action only, and the privacy mode, which hides the rule, offers no
/// such button.
#[tokio::test]
async fn allow_similar_is_the_third_button_and_grants_the_rule_for_the_session() {
    let (fake, url) = FakeNtfy::start("Bearer tk_test").await;
    let app = spawn_with(|s| configure(s, &url)).await;
    let body = serde_json::json!({"id": "nsim", "tool_name": "Bash",
        "input": {"command": "npm run test -- --watch"}, "session": "s-ntfy", "cwd": "/srv/shop"});
    let (s, created) = app.post("/v1/interactions", &body).await;
    assert_eq!(s, StatusCode::CREATED, "{created}");
    let prompt = fake.nth(0).await;
    assert_eq!(prompt["actions"].as_array().unwrap().len(), 3, "{prompt}");
    assert!(
        prompt["message"]
            .as_str()
            .unwrap()
            .ends_with("Allow similar also allows, for this session: Bash(npm run test:*)"),
        "{prompt}"
    );
    let similar = button(&prompt, "Allow similar (this session)");
    assert!(similar.starts_with("/v1/ntfy/similar/"), "{similar}");
    let token = similar.rsplit('/').next().unwrap();

    // Its token on the Allow path is not a token at all.
    let (status, body) = press(&app, &format!("/v1/ntfy/allow/{token}")).await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{body}");
    assert_eq!(status_of(&app, "nsim").await, "pending");

    let (status, body) = press(&app, &similar).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let (_, i) = app.get("/v1/interactions/nsim").await;
    let r = &i["resolution"];
    assert_eq!(
        (r["outcome"].as_str(), r["by"].as_str(), r["via"].as_str()),
        (Some("allowed"), Some("alice"), Some("ntfy")),
        "{i}"
    );
    let (_, grants) = app.get("/v1/grants").await;
    let g = &grants["grants"][0];
    assert_eq!(
        (g["rule"].as_str(), g["scope"].as_str(), g["via"].as_str()),
        (Some("Bash(npm run test:*)"), Some("session"), Some("ntfy")),
        "{grants}"
    );
    let (_, audit) = app.get("/v1/audit?limit=1000").await;
    assert!(
        audit.to_string().contains("Bash(npm run test:*)"),
        "the grant is in the audit trail: {audit}"
    );
    // Once only.
    let (status, _) = press(&app, &similar).await;
    assert_eq!(status, StatusCode::CONFLICT);

    // A call with no session has no rule to offer, and so two buttons.
    app.create_bash("nsim2", "npm run lint").await;
    let plain = fake.nth(2).await;
    assert_eq!(plain["actions"].as_array().unwrap().len(), 2, "{plain}");
    assert!(fake.refused().is_empty(), "{:?}", fake.refused());
}

#[tokio::test]
async fn the_privacy_mode_offers_no_allow_similar() {
    let (fake, url) = FakeNtfy::start("Bearer tk_test").await;
    let app = spawn_with(|s| {
        configure(s, &url);
        s.ntfy.include_command = false;
    })
    .await;
    let body = serde_json::json!({"id": "nq", "tool_name": "Bash",
        "input": {"command": "npm run test"}, "session": "s-ntfy"});
    let (s, created) = app.post("/v1/interactions", &body).await;
    assert_eq!(s, StatusCode::CREATED, "{created}");
    let prompt = fake.nth(0).await;
    assert_eq!(prompt["actions"].as_array().unwrap().len(), 2, "{prompt}");
    assert!(!prompt.to_string().contains("npm"), "{prompt}");
}

async fn status_of(app: &TestApp, id: &str) -> String {
    let (_, i) = app.get(&format!("/v1/interactions/{id}")).await;
    i["status"].as_str().unwrap_or_default().to_string()
}
