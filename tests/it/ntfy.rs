//! The ntfy channel against a fake ntfy server on loopback that checks each publish against
//! the JSON format of ntfy's docs (fields, types, the auth header): prompts with single-use
//! action URLs, answers through them, refusals of used, forged and foreign tokens, and the
//! privacy mode.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode as AxumStatus};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use imrelay::config::teams::PersonSettings;
use imrelay::config::{Secret, Settings};
use reqwest::StatusCode;
use serde_json::Value;

use crate::support::*;

/// A fake ntfy server: records each publish, refuses (400) one not in ntfy's format or
/// without the expected `Authorization`.
#[derive(Clone)]
pub(crate) struct FakeNtfy {
    auth: String,
    got: Arc<Mutex<Vec<Value>>>,
    refused: Arc<Mutex<Vec<String>>>,
    /// Statuses to answer well-formed publishes with before accepting them (a `429` says
    /// `Retry-After: 0`).
    failures: Arc<Mutex<VecDeque<u16>>>,
}

/// What is wrong with `body` as ntfy's "publish as JSON" takes it.
fn format_mistakes(body: &Value) -> Vec<String> {
    let mut out = Vec::new();
    let Some(o) = body.as_object() else {
        return vec!["not a JSON object".into()];
    };
    let known = [
        "topic",
        "title",
        "message",
        "priority",
        "tags",
        "click",
        "actions",
        "sequence_id",
    ];
    for k in o.keys().filter(|k| !known.contains(&k.as_str())) {
        out.push(format!("unexpected field {k}"));
    }
    for k in ["topic", "title", "message"] {
        if !o.get(k).is_some_and(Value::is_string) {
            out.push(format!("{k} is not a string"));
        }
    }
    for k in ["click", "sequence_id"] {
        if o.get(k).is_some_and(|v| !v.is_string()) {
            out.push(format!("{k} is not a string"));
        }
    }
    if !o
        .get("priority")
        .and_then(Value::as_u64)
        .is_some_and(|p| (1..=5).contains(&p))
    {
        out.push("priority is not an integer 1 to 5".into());
    }
    if !o
        .get("tags")
        .and_then(Value::as_array)
        .is_some_and(|t| t.iter().all(Value::is_string))
    {
        out.push("tags is not a list of strings".into());
    }
    for a in o
        .get("actions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let ok = a["action"] == "http"
            && a["label"].is_string()
            && a["url"].as_str().is_some_and(|u| u.starts_with("http"))
            && a["method"] == "POST"
            && a["clear"].is_boolean();
        if !ok {
            out.push(format!("action {a} is not an http action"));
        }
    }
    if o.get("actions")
        .is_some_and(|a| a.as_array().is_none_or(|a| a.len() > 3))
    {
        out.push("actions is not a list of at most 3".into());
    }
    out
}

async fn publish(State(f): State<FakeNtfy>, headers: HeaderMap, body: String) -> Response {
    let status = check(&f, &headers, &body);
    if status == AxumStatus::OK
        && let Some(code) = f.failures.lock().unwrap().pop_front()
    {
        let code = AxumStatus::from_u16(code).unwrap();
        return (code, [("retry-after", "0")]).into_response();
    }
    if status == AxumStatus::OK {
        f.got
            .lock()
            .unwrap()
            .push(serde_json::from_str(&body).unwrap());
    }
    status.into_response()
}

/// Whether a publish is authorized and in ntfy's format.
fn check(f: &FakeNtfy, headers: &HeaderMap, body: &str) -> AxumStatus {
    let auth = headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    if auth != f.auth {
        f.refused
            .lock()
            .unwrap()
            .push(format!("authorization {auth:?}"));
        return AxumStatus::UNAUTHORIZED;
    }
    let Ok(body) = serde_json::from_str::<Value>(body) else {
        f.refused.lock().unwrap().push("not JSON".into());
        return AxumStatus::BAD_REQUEST;
    };
    let mistakes = format_mistakes(&body);
    if !mistakes.is_empty() {
        f.refused.lock().unwrap().extend(mistakes);
        return AxumStatus::BAD_REQUEST;
    }
    AxumStatus::OK
}

impl FakeNtfy {
    pub(crate) async fn start(auth: &str) -> (FakeNtfy, String) {
        let f = FakeNtfy {
            auth: auth.into(),
            got: Arc::default(),
            refused: Arc::default(),
            failures: Arc::default(),
        };
        let app = Router::new()
            .route("/", post(publish))
            .route(
                "/v1/health",
                axum::routing::get(|| async { axum::Json(serde_json::json!({"healthy": true})) }),
            )
            .with_state(f.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        (f, url)
    }

    /// The `n`th publish, once there is one.
    async fn nth(&self, n: usize) -> Value {
        eventually(&format!("publish #{n}"), || {
            let got = self.got.lock().unwrap().get(n).cloned();
            async move { got }
        })
        .await
    }

    /// Every publish so far.
    pub(crate) fn published(&self) -> Vec<Value> {
        self.got.lock().unwrap().clone()
    }

    fn refused(&self) -> Vec<String> {
        self.refused.lock().unwrap().clone()
    }
}

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
