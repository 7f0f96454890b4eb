//! ntfy's digests against the fake ntfy server (`ntfy_fake.rs`, which checks each publish
//! against ntfy's JSON format, at most three actions, `http` and `view` actions): past
//! `digest_after`, and for a burst the topic cannot publish in time, a session's requests are
//! one notification, replaced in place under its `sequence_id`; Approve all asks to confirm,
//! and the confirmation answers exactly the listed members; every link answers once.

use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::ntfy::{FakeNtfy, button, configure, press};
use crate::support::*;

/// The latest publish under notification id `seq`.
fn latest(fake: &FakeNtfy, seq: &str) -> Option<Value> {
    fake.published()
        .into_iter()
        .rev()
        .find(|p| p["sequence_id"] == seq)
}

/// The first digest notification published (its id starts `imrelay-digest-`), once there is one.
async fn digest_id(fake: &FakeNtfy) -> String {
    eventually("a digest notification", || {
        let seq = fake.published().into_iter().find_map(|p| {
            let seq = p["sequence_id"].as_str()?.to_string();
            seq.starts_with("imrelay-digest-").then_some(seq)
        });
        async move { seq }
    })
    .await
}

/// The digest `seq` once its latest publish satisfies `ok`.
async fn digest_when(fake: &FakeNtfy, seq: &str, ok: impl Fn(&Value) -> bool) -> Value {
    eventually("the digest as expected", || {
        let d = latest(fake, seq).filter(&ok);
        async move { d }
    })
    .await
}

async fn create(app: &TestApp, id: &str, command: &str, timeout: u64) {
    let body = json!({"id": id, "tool_name": "Bash", "input": {"command": command},
        "session": "s-1", "cwd": "/home/dev/shop", "timeout_secs": timeout});
    let (s, v) = app.post("/v1/interactions", &body).await;
    assert_eq!(s, StatusCode::CREATED, "{v}");
}

async fn status_of(app: &TestApp, id: &str) -> Value {
    app.get(&format!("/v1/interactions/{id}")).await.1
}

fn labels(p: &Value) -> Vec<String> {
    p["actions"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|a| a["label"].as_str().unwrap_or_default().to_string())
        .collect()
}

#[tokio::test]
async fn past_digest_after_a_topic_gets_one_digest_approved_all_once_confirmed() {
    let (fake, url) = FakeNtfy::start("Bearer tk_test").await;
    let app = spawn_with(|s| {
        configure(s, &url);
        s.ntfy.digest_after = 1;
        s.server.public_url = "https://relay.example.com".into();
    })
    .await;
    for k in 0..3 {
        create(&app, &format!("nd{k}"), &format!("step-{k}"), 300).await;
    }
    // The first is published on its own; the two past `digest_after` are one notification.
    let seq = digest_id(&fake).await;
    let shown = digest_when(&fake, &seq, |p| {
        p["title"]
            .as_str()
            .is_some_and(|t| t.starts_with("2 requests from session s-1"))
    })
    .await;
    let message = shown["message"].as_str().unwrap();
    assert!(
        message.contains("step-1") && message.contains("step-2"),
        "{shown}"
    );
    assert_eq!(labels(&shown), ["Review", "Approve all", "Deny all"]);
    // Review opens the inbox; the others are single-use links.
    assert_eq!(shown["actions"][0]["action"], "view");
    assert_eq!(shown["actions"][0]["url"], "https://relay.example.com/");
    let alone = |id: &str| {
        fake.published()
            .iter()
            .filter(|p| p["message"].as_str().is_some_and(|m| m.contains(id)))
            .count()
    };
    assert_eq!(alone("step-0"), 1);
    let approve_all = button(&shown, "Approve all");
    assert!(approve_all.starts_with("/v1/ntfy/digest/"), "{approve_all}");

    // Approve all asks first: the notification is published again, in place, to confirm.
    let (s, body) = press(&app, &approve_all).await;
    assert_eq!(s, StatusCode::OK, "{body}");
    let asked = digest_when(&fake, &seq, |p| {
        labels(p).iter().any(|l| l.starts_with("Yes"))
    })
    .await;
    assert!(
        asked["message"]
            .as_str()
            .unwrap()
            .contains("Approve 2 requests?"),
        "{asked}"
    );
    for id in ["nd1", "nd2"] {
        assert_eq!(status_of(&app, id).await["status"], "pending");
    }
    // A replayed link changes nothing, and says why.
    let (s, body) = press(&app, &approve_all).await;
    assert_eq!(s, StatusCode::CONFLICT, "{body}");
    assert_eq!(body["error"]["code"], "token_used", "{body}");

    // Yes answers exactly the two listed, as the configured person via ntfy.
    let yes = button(
        &asked,
        labels(&asked)
            .iter()
            .find(|l| l.starts_with("Yes"))
            .unwrap(),
    );
    let (s, body) = press(&app, &yes).await;
    assert_eq!(s, StatusCode::OK, "{body}");
    for id in ["nd1", "nd2"] {
        let i = status_of(&app, id).await;
        let r = &i["resolution"];
        assert_eq!(
            (r["outcome"].as_str(), r["by"].as_str(), r["via"].as_str()),
            (Some("allowed"), Some("alice"), Some("ntfy")),
            "{i}"
        );
    }
    assert_eq!(status_of(&app, "nd0").await["status"], "pending");
    let (s, body) = press(&app, &yes).await;
    assert_eq!(s, StatusCode::CONFLICT, "{body}");
    assert_eq!(body["error"]["code"], "token_used", "{body}");
    // The digest is closed in place: no actions left.
    let closed = digest_when(&fake, &seq, |p| p.get("actions").is_none()).await;
    assert_eq!(closed["priority"], 2, "{closed}");
    // Forged links are refused.
    let forged = format!("{}x", yes.trim_end_matches(|c: char| c != '.'));
    let (s, body) = press(&app, &forged).await;
    assert_eq!(s, StatusCode::FORBIDDEN, "{body}");
    assert_eq!(body["error"]["code"], "invalid_token", "{body}");
    assert!(fake.refused().is_empty(), "{:?}", fake.refused());
    app.stop().await;
}

#[tokio::test]
async fn a_burst_the_topic_cannot_publish_in_time_is_gathered_and_denied_all() {
    let (fake, url) = FakeNtfy::start("Bearer tk_test").await;
    let app = spawn_with(|s| configure(s, &url)).await;
    // One publish every 0.5 s with 10 s of notice: of requests of 15 s, the tenth and later
    // would be shown too late on their own.
    let n = 16;
    for k in 0..n {
        create(&app, &format!("nb{k}"), &format!("burst-{k}"), 15).await;
    }
    let seq = digest_id(&fake).await;
    let shown = digest_when(&fake, &seq, |p| p.get("actions").is_some()).await;
    // Without the inbox's address, Review is a link too (it publishes the next on its own).
    assert_eq!(labels(&shown), ["Review", "Approve all", "Deny all"]);
    app.outbox_idle().await;
    let shown = latest(&fake, &seq).unwrap();
    let listed: usize = shown["title"]
        .as_str()
        .and_then(|t| t.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{shown}"));
    assert!(listed > 0 && listed < n, "{shown}");
    let (s, body) = press(&app, &button(&shown, "Deny all")).await;
    assert_eq!(s, StatusCode::OK, "{body}");
    let asked = digest_when(&fake, &seq, |p| {
        labels(p).iter().any(|l| l.starts_with("Yes"))
    })
    .await;
    let yes = labels(&asked)
        .into_iter()
        .find(|l| l.starts_with("Yes"))
        .unwrap();
    let (s, body) = press(&app, &button(&asked, &yes)).await;
    assert_eq!(s, StatusCode::OK, "{body}");
    let mut denied = 0;
    for k in 0..n {
        let i = status_of(&app, &format!("nb{k}")).await;
        denied += usize::from(i["resolution"]["outcome"] == "denied");
    }
    assert_eq!(denied, listed, "exactly the listed ones are denied");
    assert!(fake.refused().is_empty(), "{:?}", fake.refused());
    app.stop().await;
}
