//! Web Push's digests against the fake push service (`push.rs`, which decrypts each push with
//! the subscription's keys and checks its VAPID header): past `digest_after`, a session's
//! requests are one notification, replaced in place under its tag; it carries two actions at
//! most (Chromium's `Notification.maxActions`), Approve all and Deny all, each a single-use
//! link bound to the device and the listed members; the confirmation answers exactly those.

use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::ntfy::press;
use crate::push::{FakePush, start};
use crate::support::*;

/// The latest push with tag `tag`, once one satisfies `ok`.
async fn latest_when(fake: &FakePush, tag: &str, ok: impl Fn(&Value) -> bool) -> Value {
    eventually("the digest as expected", || {
        let p = fake
            .received()
            .into_iter()
            .rev()
            .map(|r| r["payload"].clone())
            .find(|p| p["tag"] == tag)
            .filter(&ok);
        async move { p }
    })
    .await
}

fn action(p: &Value, name: &str) -> String {
    p["actions"]
        .as_array()
        .and_then(|a| a.iter().find(|a| a["action"] == name))
        .and_then(|a| a["url"].as_str())
        .unwrap_or_else(|| panic!("no {name} action in {p}"))
        .to_string()
}

#[tokio::test]
async fn past_digest_after_a_device_gets_one_digest_approved_all_once_confirmed() {
    let fake = FakePush::start(1).await;
    let app = start(&fake, |s| s.push.digest_after = 1).await;
    for k in 0..3 {
        let body = json!({"id": format!("pd{k}"), "tool_name": "Bash",
            "input": {"command": format!("step-{k}")}, "session": "s-1", "cwd": "/home/dev/shop"});
        let (s, v) = app.post("/v1/interactions", &body).await;
        assert_eq!(s, StatusCode::CREATED, "{v}");
    }
    let first = fake.one("a digest", |p| p["type"] == "digest").await;
    let tag = first["payload"]["tag"].as_str().unwrap().to_string();
    let shown = latest_when(&fake, &tag, |p| {
        p["title"]
            .as_str()
            .is_some_and(|t| t.starts_with("2 requests from session s-1"))
    })
    .await;
    let body = shown["body"].as_str().unwrap();
    assert!(
        body.contains("step-1") && body.contains("step-2"),
        "{shown}"
    );
    assert_eq!(shown["url"], "/", "a tap opens the inbox (Review): {shown}");
    let names: Vec<&str> = shown["actions"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|a| a["action"].as_str())
        .collect();
    assert_eq!(names, ["allow_all", "deny_all"], "{shown}");
    let prompts = fake
        .received()
        .iter()
        .filter(|r| r["payload"]["type"] == "prompt")
        .count();
    assert_eq!(prompts, 1, "only the first is pushed on its own");

    let approve_all = action(&shown, "allow_all");
    let (s, body) = press(&app, &approve_all).await;
    assert_eq!(s, StatusCode::OK, "{body}");
    let asked = latest_when(&fake, &tag, |p| {
        p["actions"]
            .as_array()
            .is_some_and(|a| a.iter().any(|a| a["action"] == "yes"))
    })
    .await;
    assert!(
        asked["body"]
            .as_str()
            .unwrap()
            .contains("Approve 2 requests?"),
        "{asked}"
    );
    let (s, body) = press(&app, &approve_all).await;
    assert_eq!(s, StatusCode::CONFLICT, "{body}");
    assert_eq!(body["error"]["code"], "token_used", "{body}");

    let yes = action(&asked, "yes");
    let (s, body) = press(&app, &yes).await;
    assert_eq!(s, StatusCode::OK, "{body}");
    for id in ["pd1", "pd2"] {
        let (_, i) = app.get(&format!("/v1/interactions/{id}")).await;
        let r = &i["resolution"];
        assert_eq!(
            (r["outcome"].as_str(), r["by"].as_str(), r["via"].as_str()),
            (Some("allowed"), Some("ann"), Some("push")),
            "{i}"
        );
    }
    let (_, i) = app.get("/v1/interactions/pd0").await;
    assert_eq!(i["status"], "pending", "{i}");
    let (s, body) = press(&app, &yes).await;
    assert_eq!(s, StatusCode::CONFLICT, "{body}");
    assert_eq!(body["error"]["code"], "token_used", "{body}");
    // The digest is closed in place.
    latest_when(&fake, &tag, |p| p["type"] == "outcome").await;
    // A link changed in any part is no link.
    // (Yes on the confirmation of Approve all carries the action `A`: made `D`, it would
    // deny.)
    let forged = yes.replacen("/v1/push/digest/A.", "/v1/push/digest/D.", 1);
    assert_ne!(forged, yes);
    let (s, body) = press(&app, &forged).await;
    assert_eq!(s, StatusCode::FORBIDDEN, "{body}");
    assert_eq!(body["error"]["code"], "invalid_token", "{body}");
    app.stop().await;
}

/// A device removed while its digest is shown: the digest's next change pushes nothing to
/// the old endpoint and fails no job. (A device removed between a job's planning and its
/// delivery is the unit test `a_digest_on_a_device_removed_since_is_left_alone`.)
#[tokio::test]
async fn a_device_removed_while_its_digest_is_shown_gets_nothing_more() {
    let fake = FakePush::start(1).await;
    let app = start(&fake, |s| s.push.digest_after = 1).await;
    for k in 0..3 {
        let body = json!({"id": format!("rm{k}"), "tool_name": "Bash",
            "input": {"command": format!("step-{k}")}, "session": "s-2", "cwd": "/home/dev/shop"});
        let (s, v) = app.post("/v1/interactions", &body).await;
        assert_eq!(s, StatusCode::CREATED, "{v}");
    }
    let first = fake.one("a digest", |p| p["type"] == "digest").await;
    let tag = first["payload"]["tag"].as_str().unwrap().to_string();
    latest_when(&fake, &tag, |p| {
        p["title"]
            .as_str()
            .is_some_and(|t| t.starts_with("2 requests"))
    })
    .await;
    let (_, overview) = app.get("/v1/push").await;
    let device = overview["devices"][0]["id"].as_str().unwrap().to_string();
    let (s, body) = app.delete(&format!("/v1/push/devices/{device}")).await;
    assert!(s.is_success(), "{s} {body}");
    let pushed = fake.received().len();
    // A member of the digest answered elsewhere: the digest changes.
    let (s, body) = app
        .post(
            "/v1/interactions/rm1/respond",
            &json!({"decision": "deny", "by": "admin"}),
        )
        .await;
    assert_eq!(s, StatusCode::OK, "{body}");
    let metrics = app
        .metrics_with("imrelay_outbox_backlog{channel=\"push\"} 0")
        .await;
    let failed = metrics.lines().find(|l| {
        l.starts_with("imrelay_outbox_deliveries_total{channel=\"push\",result=\"failed\"}")
    });
    assert!(
        failed.is_none_or(|l| l.ends_with(" 0")),
        "a removed device failed the digest's job: {failed:?}"
    );
    assert_eq!(fake.received().len(), pushed, "pushed to a removed device");
    app.stop().await;
}
