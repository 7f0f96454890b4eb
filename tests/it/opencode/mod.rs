//! `imrelay bridge opencode`, the real command, between the real server and a fake OpenCode
//! server on loopback that serves OpenCode's HTTP API with the events captured from the real
//! OpenCode (`tests/fixtures/opencode`): requests become interactions, answers go back once,
//! answers given in OpenCode withdraw imrelay's copy, pending requests are found again after
//! restarts, and bad input changes nothing; what OpenCode does wrong is in [`failures`].

mod failures;
mod fake;

use std::sync::Arc;
use std::time::Duration;

use imrelay::interaction::{InteractionId, Outcome};
use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::support::*;
use fake::*;

#[tokio::test]
async fn a_permission_is_an_approval_answered_back_once() {
    let app = spawn_app().await;
    let asked = captured("server_permission_always", "permission.asked");
    let oc = FakeOpenCode::start(0, with_session(&asked), Some("s3cret")).await;
    let bridge = BridgeProcess::start(&app.url(""), &oc.url(), Some("s3cret"), &[]);
    oc.connected().await;
    oc.emit(&asked);
    let request = asked["properties"]["id"].as_str().unwrap();
    let id = interaction_id(&oc.url(), request);
    let i = pending(&app, &id).await;
    assert_eq!(i["tool_name"], "Bash", "{i}");
    assert_eq!(i["input"]["command"], "echo ok > oc-proof.txt", "{i}");
    assert_eq!(i["agent"], "opencode");
    assert_eq!(i["cwd"], "/home/dev/project");
    assert_eq!(i["session"], asked["properties"]["sessionID"]);
    let description = i["description"].as_str().unwrap_or_default();
    assert!(
        description.contains("`echo *`")
            && description.contains("in every session")
            && description.contains("for as long as this OpenCode server runs"),
        "{description}"
    );
    // OpenCode runs the original command whatever an answer says: an edit is refused.
    let (status, refused) = app
        .respond(
            &id,
            &json!({"decision": "allow", "updated_input": {"command": "echo edited"}}),
        )
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{refused}");
    assert!(
        refused["error"]["message"]
            .as_str()
            .unwrap_or_default()
            .contains("opencode cannot run an edited input"),
        "{refused}"
    );
    // The same request announced again is not asked twice.
    oc.emit_raw(&asked.to_string());
    let (status, _) = app
        .respond(&id, &json!({"decision": "allow", "always": true}))
        .await;
    assert_eq!(status, StatusCode::OK);
    let r = replies(&oc, 1).await;
    assert_eq!(
        r[0],
        (
            format!("/permission/{request}/reply"),
            json!({"reply": "always"})
        )
    );
    // Once: the announcement seen twice, and the settling event after the reply, add nothing.
    after_the_events_so_far(&app, &oc, &asked).await;
    assert_eq!(oc.replies().len(), 1, "{:?}", oc.replies());
    let err = bridge.stop().await;
    assert!(err.contains("replied to"), "{err}");
}

#[tokio::test]
async fn answered_in_opencode_withdraws_the_copy_everywhere() {
    let app = spawn_app().await;
    let asked = captured("server_permission_once", "permission.asked");
    let oc = FakeOpenCode::start(0, with_session(&asked), None).await;
    let bridge = BridgeProcess::start(&app.url(""), &oc.url(), None, &[]);
    oc.connected().await;
    oc.emit(&asked);
    let request = asked["properties"]["id"].as_str().unwrap();
    let id = interaction_id(&oc.url(), request);
    pending(&app, &id).await;
    let mut replied = captured("server_permission_once", "permission.replied");
    replied["properties"]["requestID"] = json!(request);
    oc.fake.inner.lock().unwrap().permissions.clear();
    oc.emit(&replied);
    let i = resolved(&app, &id).await;
    assert_eq!(i["resolution"]["outcome"], "cancelled", "{i}");
    assert!(
        i["resolution"]["result"]["message"]
            .as_str()
            .unwrap_or_default()
            .contains("Answered in OpenCode itself"),
        "{i}"
    );
    after_the_events_so_far(&app, &oc, &asked).await;
    assert!(oc.replies().is_empty(), "{:?}", oc.replies());
    bridge.stop().await;
}

#[tokio::test]
async fn a_question_goes_back_as_labels_and_a_deny_as_a_rejection() {
    let app = spawn_app().await;
    let asked = captured("server_question_reply", "question.asked");
    let oc = FakeOpenCode::start(0, with_session(&asked), None).await;
    let bridge = BridgeProcess::start(&app.url(""), &oc.url(), None, &[]);
    oc.connected().await;
    oc.emit(&asked);
    let request = asked["properties"]["id"].as_str().unwrap();
    let id = interaction_id(&oc.url(), request);
    let i = pending(&app, &id).await;
    assert_eq!(i["kind"], "question", "{i}");
    assert_eq!(
        i["input"]["questions"][0]["options"][0]["label"], "SQLite",
        "{i}"
    );
    let (status, body) = app
        .respond(&id, &json!({"answers": {"Which database?": "SQLite"}}))
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let r = replies(&oc, 1).await;
    assert_eq!(
        r[0],
        (
            format!("/question/{request}/reply"),
            json!({"answers": [["SQLite"]]})
        )
    );
    // A second question, denied: OpenCode's rejection.
    let mut second = captured("server_question_reject", "question.asked");
    second["properties"]["sessionID"] = asked["properties"]["sessionID"].clone();
    oc.emit(&second);
    let request = second["properties"]["id"].as_str().unwrap();
    let id = interaction_id(&oc.url(), request);
    pending(&app, &id).await;
    let (status, _) = app.respond(&id, &json!({"decision": "deny"})).await;
    assert_eq!(status, StatusCode::OK);
    let r = replies(&oc, 2).await;
    assert_eq!(r[1], (format!("/question/{request}/reject"), Value::Null));
    bridge.stop().await;
}

#[tokio::test]
async fn pending_requests_are_found_again_after_restarts() {
    let port = free_port();
    let store: Arc<dyn imrelay::store::Store> = Arc::new(imrelay::store::MemoryStore::new());
    let on_port = || {
        let mut s = settings();
        s.server.listen = format!("127.0.0.1:{port}").parse().unwrap();
        s
    };
    let app = spawn_on(on_port(), store.clone()).await;
    let asked = captured("server_permission_reject", "permission.asked");
    let request = asked["properties"]["id"].as_str().unwrap().to_string();
    // Asked before any bridge runs: found in OpenCode's listing.
    let oc_port = free_port();
    let oc = FakeOpenCode::start(oc_port, with_session(&asked), None).await;
    oc.emit(&asked);
    let bridge = BridgeProcess::start(&app.url(""), &oc.url(), None, &[]);
    let id = interaction_id(&oc.url(), &request);
    pending(&app, &id).await;
    // The bridge goes away; the answer is given meanwhile.
    bridge.stop().await;
    let (status, _) = app
        .respond(
            &id,
            &json!({"decision": "deny", "message": "Not on a Friday"}),
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    assert!(oc.replies().is_empty());
    // imrelay restarts too; a new bridge finds the request and carries the answer over.
    app.stop().await;
    let app = spawn_on(on_port(), store.clone()).await;
    let bridge = BridgeProcess::start(&app.url(""), &oc.url(), None, &[]);
    let r = replies(&oc, 1).await;
    assert_eq!(
        r[0],
        (
            format!("/permission/{request}/reply"),
            json!({"reply": "reject", "message": "Not on a Friday"})
        )
    );
    // imrelay away while OpenCode asks: the bridge keeps trying, and asks once it is back.
    app.stop().await;
    let mut later = asked.clone();
    later["properties"]["id"] = json!("per_later");
    // What answers on imrelay's address meanwhile takes the bridge's attempt and drops it.
    let away = tokio::net::TcpListener::bind(("127.0.0.1", port))
        .await
        .expect("imrelay's address");
    oc.emit(&later);
    let attempt = tokio::time::timeout(Duration::from_secs(10), away.accept())
        .await
        .expect("the bridge tries imrelay while it is away")
        .expect("accept");
    drop((attempt, away));
    let app = spawn_on(on_port(), store).await;
    let later_id = interaction_id(&oc.url(), "per_later");
    pending(&app, &later_id).await;
    // OpenCode goes away and comes back without the request (its server restarted): the copy
    // is withdrawn.
    oc.shut();
    wait_until("the bridge's event stream ends", || {
        oc.fake.events.receiver_count() == 0
    })
    .await;
    eventually("OpenCode's address is free", || async {
        tokio::net::TcpListener::bind(("127.0.0.1", oc_port))
            .await
            .ok()
            .map(drop)
    })
    .await;
    let inner = with_session(&asked);
    let oc2 = FakeOpenCode::start(oc_port, inner, None).await;
    let i = resolved(&app, &later_id).await;
    assert_eq!(i["resolution"]["outcome"], "cancelled", "{i}");
    assert!(
        i["resolution"]["result"]["message"]
            .as_str()
            .unwrap_or_default()
            .contains("OpenCode no longer waits for this answer"),
        "{i}"
    );
    assert_eq!(oc.replies().len(), 1);
    assert!(oc2.replies().is_empty());
    bridge.stop().await;
}

#[tokio::test]
async fn bad_input_from_opencode_changes_nothing() {
    let app = spawn_app().await;
    let asked = captured("server_permission_once", "permission.asked");
    let oc = FakeOpenCode::start(0, with_session(&asked), None).await;
    let bridge = BridgeProcess::start(&app.url(""), &oc.url(), None, &[]);
    oc.connected().await;
    oc.emit_raw("{not json");
    oc.emit_raw(r#"{"type":"permission.asked","properties":{"id":7}}"#);
    let mut stranger = asked.clone();
    stranger["properties"]["id"] = json!("per_stranger");
    stranger["properties"]["sessionID"] = json!("ses_nobody\u{1b}[31m");
    oc.emit(&stranger);
    // The stream goes on: a good request after them is asked.
    oc.emit(&asked);
    let id = interaction_id(&oc.url(), asked["properties"]["id"].as_str().unwrap());
    pending(&app, &id).await;
    let stranger_id = interaction_id(&oc.url(), "per_stranger");
    let (status, _) = app.get(&format!("/v1/interactions/{stranger_id}")).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert!(InteractionId::parse(&stranger_id).is_ok());
    let (_, listed) = app.get("/v1/interactions?status=pending").await;
    assert_eq!(
        listed["interactions"].as_array().map(Vec::len),
        Some(1),
        "{listed}"
    );
    let err = bridge.stop().await;
    assert!(err.contains("ignored an event it could not read"), "{err}");
    assert!(
        err.contains("does not know that session") && !err.contains('\u{1b}'),
        "{err}"
    );
    assert_eq!(
        app.registry
            .get(&InteractionId::parse(&id).unwrap())
            .await
            .unwrap()
            .map(|i| i.resolution.as_ref().map(|r| r.outcome)),
        Some(None::<Outcome>)
    );
}

#[tokio::test]
async fn allow_similar_is_answered_once_never_as_opencodes_always() {
    let app = spawn_app().await;
    let mut asked = captured("server_permission_once", "permission.asked");
    // A command a grant can cover (a redirection is never granted).
    asked["properties"]["metadata"]["command"] = json!("npm run test");
    asked["properties"]["patterns"] = json!(["npm run test"]);
    asked["properties"]["always"] = json!(["npm run *"]);
    let oc = FakeOpenCode::start(0, with_session(&asked), None).await;
    let bridge = BridgeProcess::start(&app.url(""), &oc.url(), None, &[]);
    oc.connected().await;
    oc.emit(&asked);
    let request = asked["properties"]["id"].as_str().unwrap();
    let id = interaction_id(&oc.url(), request);
    pending(&app, &id).await;
    let (_, display) = app.get(&format!("/v1/interactions/{id}/display")).await;
    let rule = display["proposed_rule"]
        .as_str()
        .expect("a proposed rule")
        .to_string();
    // A grant allows what its rule says, for this session: OpenCode's "always" would allow
    // `echo *` in every session while its server runs.
    let (status, body) = app
        .respond(
            &id,
            &json!({"decision": "allow", "grant": {"rule": rule, "scope": "session"}}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let r = replies(&oc, 1).await;
    assert_eq!(
        r[0],
        (
            format!("/permission/{request}/reply"),
            json!({"reply": "once"})
        )
    );
    bridge.stop().await;
}
