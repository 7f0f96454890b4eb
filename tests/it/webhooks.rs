//! Webhooks: signed deliveries to a fake receiver on loopback, signed answers in, and the
//! Standard Webhooks signature checked against the reference implementation's vectors.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode as AxumStatus};
use axum::routing::post;
use imrelay::channels::webhook::WebhookSettings;
use imrelay::channels::webhook::signature::SigningKey;
use imrelay::config::{Secret, Settings};
use imrelay::store::{SqliteStore, Store, Synchronous};
use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::support::*;

const SECRET: &str = "whsec_dGhpcyBpcyBhIDMyIGJ5dGUgc2VjcmV0IGtleSEh";

#[test]
fn signatures_match_the_reference_implementation() {
    // tests/fixtures/webhooks/standard_webhooks_vectors.json was produced by the
    // `standardwebhooks` package (see make_vectors.py beside it).
    let vectors = fixture("webhooks/standard_webhooks_vectors.json");
    for v in vectors.as_array().unwrap() {
        let key = SigningKey::parse(v["secret"].as_str().unwrap()).unwrap();
        let (id, ts, payload) = (
            v["msg_id"].as_str().unwrap(),
            v["timestamp"].as_i64().unwrap(),
            v["payload"].as_str().unwrap(),
        );
        let expected = v["signature"].as_str().unwrap();
        assert_eq!(key.sign(id, ts, payload.as_bytes()), expected);
        assert!(
            key.verify(
                Some(id),
                Some(&ts.to_string()),
                Some(expected),
                payload.as_bytes(),
                ts
            )
            .is_ok()
        );
    }
}

/// One request the receiver got.
#[derive(Clone, Debug)]
struct Received {
    headers: HeaderMap,
    body: Value,
    raw: Bytes,
}

/// A fake webhook receiver: records requests, answers with queued statuses (then 204).
#[derive(Clone, Default)]
struct Receiver {
    got: Arc<Mutex<Vec<Received>>>,
    statuses: Arc<Mutex<VecDeque<u16>>>,
}

async fn receive(State(r): State<Receiver>, headers: HeaderMap, raw: Bytes) -> AxumStatus {
    let body = serde_json::from_slice(&raw).unwrap_or(Value::Null);
    r.got.lock().unwrap().push(Received { headers, body, raw });
    let status = r.statuses.lock().unwrap().pop_front().unwrap_or(204);
    AxumStatus::from_u16(status).unwrap()
}

impl Receiver {
    async fn start(statuses: &[u16]) -> (Receiver, String) {
        let r = Receiver::default();
        r.statuses.lock().unwrap().extend(statuses.iter().copied());
        let app = Router::new()
            .route("/hook", post(receive))
            .with_state(r.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/hook", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, app).await });
        (r, url)
    }

    fn received(&self) -> Vec<Received> {
        self.got.lock().unwrap().clone()
    }

    async fn wait_for(&self, n: usize) -> Vec<Received> {
        for _ in 0..500 {
            let got = self.received();
            if got.len() >= n {
                return got;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        panic!(
            "the receiver got {} requests, expected {n}",
            self.received().len()
        );
    }
}

fn target(name: &str, url: &str) -> WebhookSettings {
    WebhookSettings {
        name: name.into(),
        url: url.into(),
        secret: Secret::new(SECRET),
        events: vec![
            imrelay::channels::webhook::WebhookEvent::Created,
            imrelay::channels::webhook::WebhookEvent::Resolved,
        ],
        sessions: vec![],
        agents: vec![],
        timeout_secs: 5,
        horizon_hours: 1,
    }
}

fn fast(s: &mut Settings) {
    s.outbox.retry_base_ms = 20;
    s.outbox.retry_max_secs = 1;
    s.server.public_url = "https://imrelay.example.com".into();
}

fn verify(r: &Received) {
    let key = SigningKey::parse(SECRET).unwrap();
    let h = |n: &str| r.headers.get(n).and_then(|v| v.to_str().ok());
    key.verify(
        h("webhook-id"),
        h("webhook-timestamp"),
        h("webhook-signature"),
        &r.raw,
        jiff::Timestamp::now().as_second(),
    )
    .expect("a valid Standard Webhooks signature");
}

#[tokio::test]
async fn events_are_signed_and_carry_the_interaction_and_respond_url() {
    let (rx, url) = Receiver::start(&[]).await;
    let app = spawn_with(|s| {
        fast(s);
        s.webhooks = vec![target("oncall", &url)];
    })
    .await;
    let id = app.create_bash("wh-1", "terraform apply").await;
    let got = rx.wait_for(1).await;
    verify(&got[0]);
    let e = &got[0].body;
    assert_eq!(e["type"], "interaction.created");
    assert_eq!(e["data"]["interaction"]["id"], id);
    assert_eq!(
        e["data"]["interaction"]["input"]["command"],
        "terraform apply"
    );
    assert_eq!(
        e["data"]["respond_url"],
        "https://imrelay.example.com/v1/webhooks/oncall/respond"
    );
    assert_eq!(e["id"].as_str(), got[0].headers["webhook-id"].to_str().ok());
    // The tool call as a person reads it, for receivers that show it to one.
    assert_eq!(
        e["data"]["display"],
        json!({"summary": "Run: terraform apply", "text": "terraform apply"})
    );

    app.respond(&id, &json!({"decision": "deny", "by": "ops"}))
        .await;
    let got = rx.wait_for(2).await;
    verify(&got[1]);
    assert_eq!(got[1].body["type"], "interaction.resolved");
    assert_eq!(got[1].body["data"]["resolution"]["outcome"], "denied");
    assert_eq!(got[1].body["data"]["resolution"]["by"], "ops");
}

#[tokio::test]
async fn a_payload_carries_the_input_and_times_as_kept() {
    let (rx, url) = Receiver::start(&[]).await;
    let app = spawn_with(|s| {
        fast(s);
        s.webhooks = vec![target("oncall", &url)];
    })
    .await;
    let resp = app
        .client
        .post(app.url("/v1/interactions"))
        .header("content-type", "application/json")
        .body(r#"{"id": "wh-n", "tool_name": "Bash", "input": {"n": 1e2, "z": -0, "big": 18446744073709551617}}"#)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::CREATED);
    let got = rx.wait_for(1).await;
    verify(&got[0]);
    let raw = String::from_utf8_lossy(&got[0].raw);
    assert!(
        raw.contains(r#""input":{"n":1e2,"z":-0,"big":18446744073709551617}"#),
        "{raw}"
    );
    for t in [
        &got[0].body["timestamp"],
        &got[0].body["data"]["interaction"]["created_at"],
    ] {
        let t = t.as_str().unwrap();
        assert_eq!(t.len(), 24, "{t}");
        assert_eq!(&t[19..20], ".", "{t}");
    }
}

#[tokio::test]
async fn filters_by_event_session_and_agent() {
    let (rx, url) = Receiver::start(&[]).await;
    let app = spawn_with(|s| {
        fast(s);
        let mut t = target("ci", &url);
        t.events = vec![imrelay::channels::webhook::WebhookEvent::Resolved];
        t.sessions = vec!["nightly".into()];
        s.webhooks = vec![t];
    })
    .await;
    for (id, session) in [("f-1", "nightly"), ("f-2", "other")] {
        app.post(
            "/v1/interactions",
            &json!({"id": id, "tool_name": "Bash", "input": {}, "session": session}),
        )
        .await;
        app.respond(id, &json!({"decision": "allow"})).await;
    }
    let got = rx.wait_for(1).await;
    app.outbox_idle().await;
    let got_all = rx.received();
    assert_eq!(
        got_all.len(),
        1,
        "only the resolved event of session nightly"
    );
    assert_eq!(got[0].body["type"], "interaction.resolved");
    assert_eq!(got[0].body["data"]["interaction"]["id"], "f-1");
}

#[tokio::test]
async fn failures_are_retried_with_the_same_id_until_delivered() {
    let (rx, url) = Receiver::start(&[500, 503, 500]).await;
    let app = spawn_with(|s| {
        fast(s);
        s.webhooks = vec![target("flaky", &url)];
    })
    .await;
    app.create_bash("retry-1", "ls").await;
    let got = rx.wait_for(4).await;
    let ids: Vec<_> = got
        .iter()
        .map(|r| r.headers["webhook-id"].clone())
        .collect();
    assert!(
        ids.windows(2).all(|w| w[0] == w[1]),
        "retries reuse the webhook-id"
    );
    for r in &got {
        verify(r);
    }
    app.outbox_idle().await;
    assert_eq!(rx.received().len(), 4, "no more attempts after success");
}

#[tokio::test]
async fn a_channels_metrics_start_at_zero_and_count_from_there() {
    let (rx, url) = Receiver::start(&[500]).await;
    let app = spawn_with(|s| {
        fast(s);
        s.webhooks = vec![target("oncall", &url)];
    })
    .await;
    // Before anything happened, every series of the channel is there, at 0.
    let metrics = app.metrics().await;
    for line in [
        r#"imrelay_outbox_backlog{channel="webhook:oncall"} 0"#,
        r#"imrelay_outbox_deliveries_total{channel="webhook:oncall",result="ok"} 0"#,
        r#"imrelay_outbox_deliveries_total{channel="webhook:oncall",result="retry"} 0"#,
        r#"imrelay_outbox_deliveries_total{channel="webhook:oncall",result="failed"} 0"#,
        r#"imrelay_answer_refusals_total{channel="webhook:oncall"} 0"#,
        r#"imrelay_refusals_suppressed_total{channel="webhook:oncall"} 0"#,
    ] {
        assert!(metrics.lines().any(|l| l == line), "{line} in:\n{metrics}");
    }
    // One delivery, refused once and then taken: counted, and the backlog is back at 0
    // (still there).
    app.create_bash("metrics-1", "ls").await;
    rx.wait_for(2).await;
    app.metrics_with(r#"imrelay_outbox_deliveries_total{channel="webhook:oncall",result="ok"} 1"#)
        .await;
    let metrics = app
        .metrics_with(r#"imrelay_outbox_backlog{channel="webhook:oncall"} 0"#)
        .await;
    assert!(
        metrics.contains(
            r#"imrelay_outbox_deliveries_total{channel="webhook:oncall",result="retry"} 1"#
        ),
        "{metrics}"
    );
}

#[tokio::test]
async fn gone_disables_the_target_and_is_audited() {
    let (rx, url) = Receiver::start(&[410]).await;
    let app = spawn_with(|s| {
        fast(s);
        s.webhooks = vec![target("retired", &url)];
    })
    .await;
    app.create_bash("gone-1", "ls").await;
    rx.wait_for(1).await;
    // Wait for the failure to be recorded, then no more deliveries for new events.
    let mut disabled = false;
    for _ in 0..200 {
        if app
            .store
            .get_value("webhook.disabled.retired")
            .await
            .unwrap()
            .is_some()
        {
            disabled = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(disabled);
    app.create_bash("gone-2", "ls").await;
    app.outbox_idle().await;
    assert_eq!(rx.received().len(), 1);
    let (_, audit) = app.get("/v1/audit").await;
    let failed: Vec<&Value> = audit["entries"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["action"] == "delivery_failed")
        .collect();
    assert_eq!(failed.len(), 1);
    assert_eq!(failed[0]["channel"], "webhook:retired");
    // It carries the hash of what was shown, like every entry about the interaction.
    let created = audit["entries"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["action"] == "created" && e["interaction_id"] == "gone-1")
        .unwrap();
    assert!(failed[0]["input_hash"].is_string());
    assert_eq!(failed[0]["input_hash"], created["input_hash"]);
}

#[tokio::test]
async fn a_dead_target_does_not_delay_a_live_one() {
    // A target that never answers (a listener that accepts and stays silent).
    let silent = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let dead_url = format!("http://{}/hook", silent.local_addr().unwrap());
    tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((s, _)) = silent.accept().await {
            held.push(s);
        }
    });
    let (rx, url) = Receiver::start(&[]).await;
    let app = spawn_with(|s| {
        fast(s);
        let mut dead = target("dead", &dead_url);
        dead.timeout_secs = 30;
        s.webhooks = vec![dead, target("live", &url)];
    })
    .await;
    for n in 0..6 {
        app.create_bash(&format!("d-{n}"), "ls").await;
    }
    let got = rx.wait_for(6).await;
    assert_eq!(got.len(), 6);
}

#[tokio::test]
async fn a_restart_mid_retry_resumes_delivery() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("wh.db");
    let (rx, url) = Receiver::start(&[500]).await;
    let settings = |url: &str| {
        let mut s = crate::support::settings();
        fast(&mut s);
        s.outbox.retry_base_ms = 2000; // the retry would come after the restart
        s.webhooks = vec![target("resume", url)];
        s
    };
    {
        let store: Arc<dyn Store> =
            Arc::new(SqliteStore::open(&path, Synchronous::Normal).unwrap());
        let app = spawn_on(settings(&url), store).await;
        app.create_bash("resume-1", "ls").await;
        rx.wait_for(1).await;
        app.stop().await;
    }
    let store = reopen_sqlite(&path).await;
    let mut s = settings(&url);
    s.outbox.retry_base_ms = 20;
    let _app = spawn_on(s, Arc::new(store)).await;
    let got = rx.wait_for(2).await;
    assert_eq!(got[1].body["data"]["interaction"]["id"], "resume-1");
    assert_eq!(got[0].headers["webhook-id"], got[1].headers["webhook-id"]);
}

fn signed(body: &Value, id: &str, ts: i64) -> (String, Vec<(&'static str, String)>) {
    let raw = body.to_string();
    let key = SigningKey::parse(SECRET).unwrap();
    let sig = key.sign(id, ts, raw.as_bytes());
    (
        raw,
        vec![
            ("webhook-id", id.to_string()),
            ("webhook-timestamp", ts.to_string()),
            ("webhook-signature", sig),
        ],
    )
}

async fn post_signed(
    app: &TestApp,
    name: &str,
    raw: String,
    headers: Vec<(&str, String)>,
) -> (StatusCode, Value) {
    let mut req = app
        .client
        .post(app.url(&format!("/v1/webhooks/{name}/respond")))
        .header("content-type", "application/json")
        .body(raw);
    for (k, v) in headers {
        req = req.header(k, v);
    }
    split(req.send().await.unwrap()).await
}

#[tokio::test]
async fn a_form_goes_out_with_its_schema_and_a_signed_answer_fills_it_in() {
    let (rx, url) = Receiver::start(&[]).await;
    let app = spawn_with(|s| {
        fast(s);
        s.webhooks = vec![target("ticketing", &url)];
    })
    .await;
    let schema = json!({"type": "object", "properties": {
        "ticket": {"type": "string", "pattern": "^OPS-[0-9]+$"},
        "urgent": {"type": "boolean", "default": false}}, "required": ["ticket"]});
    let (status, _) = app
        .post(
            "/v1/interactions",
            &json!({"id": "wf-1", "kind": "form", "message": "Which ticket is this for?", "schema": schema}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED);
    let got = rx.wait_for(1).await;
    assert_eq!(got[0].body["type"], "interaction.created");
    assert_eq!(got[0].body["data"]["interaction"]["kind"], "form");
    assert_eq!(
        got[0].body["data"]["interaction"]["input"]["requestedSchema"],
        schema
    );
    let now = jiff::Timestamp::now().as_second();
    // A value that does not fit is refused with the field named.
    let bad =
        json!({"id": "wf-1", "action": "accept", "content": {"ticket": "JIRA-1"}, "by": "jira"});
    let (raw, headers) = signed(&bad, "msg_f1", now);
    let (status, err) = post_signed(&app, "ticketing", raw, headers).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{err}");
    assert_eq!(err["error"]["field"], "content.ticket");
    let good =
        json!({"id": "wf-1", "action": "accept", "content": {"ticket": "OPS-7"}, "by": "jira"});
    let (raw, headers) = signed(&good, "msg_f2", now);
    let (status, ok) = post_signed(&app, "ticketing", raw, headers).await;
    assert_eq!(status, StatusCode::OK, "{ok}");
    assert_eq!(
        ok["result"],
        json!({"action": "accept", "content": {"ticket": "OPS-7", "urgent": false}})
    );
    assert_eq!(ok["resolution"]["via"], "webhook:ticketing");
    let got = rx.wait_for(2).await;
    assert_eq!(got[1].body["type"], "interaction.resolved");
    assert_eq!(
        got[1].body["data"]["interaction"]["resolution"]["result"],
        ok["result"]
    );
    app.stop().await;
}

#[tokio::test]
async fn signed_answers_in() {
    let (_rx, url) = Receiver::start(&[]).await;
    let mut app = spawn_with(|s| {
        fast(s);
        s.webhooks = vec![target("ticketing", &url)];
        s.auth.operator_tokens = vec![imrelay::config::OperatorToken::new(
            "operator-token-0123456789",
        )];
        s.auth.agent_tokens = vec![Secret::new("agent-token-0123456789")];
    })
    .await;
    let mut agent = app
        .client
        .post(app.url("/v1/interactions"))
        .bearer_auth("agent-token-0123456789");
    agent = agent.json(&json!({"id": "in-1", "tool_name": "Bash", "input": {"command": "deploy"}}));
    assert_eq!(agent.send().await.unwrap().status(), StatusCode::CREATED);
    let now = jiff::Timestamp::now().as_second();

    // Wrong signature.
    let body = json!({"id": "in-1", "decision": "allow", "by": "jira"});
    let (raw, mut headers) = signed(&body, "msg_a", now);
    headers[2].1 = "v1,AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=".into();
    let (status, err) = post_signed(&app, "ticketing", raw, headers).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    assert_eq!(err["error"]["code"], "invalid_signature");

    // Stale timestamp.
    let (raw, headers) = signed(&body, "msg_b", now - 600);
    let (status, err) = post_signed(&app, "ticketing", raw, headers).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    assert!(
        err["error"]["message"]
            .as_str()
            .unwrap()
            .contains("5 minutes")
    );

    // Unknown webhook.
    let (raw, headers) = signed(&body, "msg_c", now);
    let (status, _) = post_signed(&app, "nobody", raw, headers).await;
    assert_eq!(status, StatusCode::NOT_FOUND);

    // Nothing changed so far.
    app.token = Some("operator-token-0123456789".into());
    let (_, i) = app.get("/v1/interactions/in-1").await;
    assert_eq!(i["status"], "pending");

    // Valid: recorded via webhook:ticketing.
    let (raw, headers) = signed(&body, "msg_d", now);
    let (status, ok) = post_signed(&app, "ticketing", raw.clone(), headers.clone()).await;
    assert_eq!(status, StatusCode::OK, "{ok}");
    assert_eq!(ok["resolution"]["via"], "webhook:ticketing");
    assert_eq!(ok["resolution"]["by"], "jira");

    // Replayed id.
    let (status, err) = post_signed(&app, "ticketing", raw, headers).await;
    assert_eq!(status, StatusCode::CONFLICT);
    assert_eq!(err["error"]["code"], "replayed");

    // A fresh, valid answer to a resolved interaction.
    let (raw, headers) = signed(&json!({"id": "in-1", "decision": "deny"}), "msg_e", now);
    let (status, err) = post_signed(&app, "ticketing", raw, headers).await;
    assert_eq!(status, StatusCode::CONFLICT);
    assert_eq!(err["error"]["code"], "already_resolved");
    assert_eq!(err["error"]["resolution"]["by"], "jira");

    // Spoofing another channel is refused.
    let (raw, headers) = signed(
        &json!({"id": "in-1", "decision": "deny", "via": "desktop"}),
        "msg_f",
        now,
    );
    let (status, _) = post_signed(&app, "ticketing", raw, headers).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);

    // Each refusal is in the audit trail, with its reason, on the webhook's channel.
    let (_, audit) = app.get("/v1/audit?limit=1000").await;
    let refusals: Vec<(&str, &str)> = audit["entries"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["action"] == "refused")
        .map(|e| {
            assert_eq!(e["channel"], "webhook:ticketing");
            (
                e["actor"].as_str().unwrap_or(""),
                e["detail"].as_str().unwrap_or(""),
            )
        })
        .collect();
    let has = |actor: &str, detail: &str| {
        refusals
            .iter()
            .any(|(a, d)| *a == actor && d.contains(detail))
    };
    assert!(
        has(
            "msg_a",
            "bad signature: the webhook-signature does not match"
        ),
        "{refusals:?}"
    );
    assert!(
        has(
            "msg_b",
            "bad signature: the webhook-timestamp is more than 5 minutes"
        ),
        "{refusals:?}"
    );
    assert!(has("msg_d", "replayed webhook-id"), "{refusals:?}");
    assert!(has("", "already resolved"), "{refusals:?}");
}

#[tokio::test]
async fn an_undecodable_webhook_name_gets_the_json_error_shape() {
    let (_rx, url) = Receiver::start(&[]).await;
    let app = spawn_with(|s| {
        fast(s);
        s.webhooks = vec![target("ticketing", &url)];
    })
    .await;
    app.create_bash("path-1", "ls").await;
    let body = json!({"id": "path-1", "decision": "allow"});
    let (raw, headers) = signed(&body, "msg_path", jiff::Timestamp::now().as_second());
    let (status, err) = post_signed(&app, "ticketing%FF%FE", raw, headers).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{err}");
    assert_eq!(err["error"]["code"], "invalid_request", "{err}");
    assert!(
        err["error"]["message"].as_str().unwrap().contains("path"),
        "{err}"
    );
    assert_eq!(
        app.get("/v1/interactions/path-1").await.1["status"],
        "pending"
    );
}

#[tokio::test]
async fn a_refused_body_or_an_unknown_interaction_does_not_use_up_the_webhook_id() {
    let (_rx, url) = Receiver::start(&[]).await;
    let app = spawn_with(|s| {
        fast(s);
        s.webhooks = vec![target("ticketing", &url)];
    })
    .await;
    let now = jiff::Timestamp::now().as_second();
    // A body the endpoint refuses, then the fixed body under the same id.
    let (raw, headers) = signed(&json!({"decision": "allow"}), "msg_retry", now);
    let (status, err) = post_signed(&app, "ticketing", raw, headers).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{err}");
    // An interaction that does not exist yet.
    let body = json!({"id": "late-1", "decision": "allow", "by": "jira"});
    let (raw, headers) = signed(&body, "msg_retry", now);
    let (status, _) = post_signed(&app, "ticketing", raw.clone(), headers.clone()).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    app.create_bash("late-1", "deploy").await;
    // The sender's retry of the same request is applied, not taken for a replay.
    let (status, ok) = post_signed(&app, "ticketing", raw.clone(), headers.clone()).await;
    assert_eq!(status, StatusCode::OK, "{ok}");
    assert_eq!(ok["resolution"]["by"], "jira");
    // Once applied, the id is used up.
    let (status, err) = post_signed(&app, "ticketing", raw, headers).await;
    assert_eq!(status, StatusCode::CONFLICT);
    assert_eq!(err["error"]["code"], "replayed");
}

#[tokio::test]
async fn a_flood_of_bad_signatures_is_audited_within_bounds() {
    let (_rx, url) = Receiver::start(&[]).await;
    let app = spawn_with(|s| {
        fast(s);
        s.webhooks = vec![target("ticketing", &url)];
    })
    .await;
    let now = jiff::Timestamp::now().as_second();
    let huge_id = "x".repeat(10_000);
    for n in 0..40 {
        let id = if n == 0 {
            huge_id.clone()
        } else {
            format!("msg_{n}")
        };
        let (raw, mut headers) = signed(&json!({"id": "nope", "decision": "allow"}), &id, now);
        headers[2].1 = "v1,AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=".into();
        let (status, _) = post_signed(&app, "ticketing", raw, headers).await;
        assert_eq!(status, StatusCode::UNAUTHORIZED);
    }
    let (_, audit) = app.get("/v1/audit?limit=1000").await;
    let refusals: Vec<&Value> = audit["entries"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["action"] == "refused")
        .collect();
    // A burst is recorded; the rest is counted, not written.
    assert!(
        !refusals.is_empty() && refusals.len() <= 10,
        "{} refusals recorded",
        refusals.len()
    );
    let actor = refusals[0]["actor"].as_str().unwrap();
    assert!(
        actor.starts_with("xxxx") && actor.chars().count() <= 65,
        "{}",
        actor.len()
    );
    // Every refusal is counted, and the ones that were not written show as suppressed.
    let metrics = app.metrics().await;
    let count = |name: &str| -> usize {
        let prefix = format!("{name}{{channel=\"webhook:ticketing\"}} ");
        metrics
            .lines()
            .find_map(|l| l.strip_prefix(&prefix))
            .unwrap_or_else(|| panic!("no {prefix} in {metrics}"))
            .parse()
            .unwrap()
    };
    assert_eq!(count("imrelay_answer_refusals_total"), 40);
    assert_eq!(
        count("imrelay_refusals_suppressed_total"),
        40 - refusals.len()
    );
}

#[tokio::test]
async fn an_id_used_again_after_pruning_gets_its_own_deliveries() {
    // A target that keeps failing: the first interaction's delivery is still being retried
    // when the interaction itself is pruned and its id is used again.
    let (rx, url) = Receiver::start(&[500; 1000]).await;
    let app = spawn_with(|s| {
        fast(s);
        let mut t = target("slowpoke", &url);
        t.events = vec![imrelay::channels::webhook::WebhookEvent::Created];
        s.webhooks = vec![t];
    })
    .await;
    app.create_bash("reused", "ls").await;
    rx.wait_for(1).await;
    app.delete("/v1/interactions/reused").await;
    assert_eq!(app.prune_all().await, 1);
    app.create_bash("reused", "ls").await;
    let mut ids = std::collections::HashSet::new();
    for _ in 0..500 {
        ids = rx
            .received()
            .iter()
            .map(|r| r.headers["webhook-id"].to_str().unwrap().to_string())
            .collect();
        if ids.len() >= 2 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(ids.len(), 2, "each incarnation has its own event: {ids:?}");
}

#[tokio::test]
async fn horizon_hours_reaches_the_planned_job() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("horizon.db");
    let (_rx, url) = Receiver::start(&[500; 1000]).await;
    let store: Arc<dyn Store> = Arc::new(SqliteStore::open(&path, Synchronous::Normal).unwrap());
    let app = spawn_on(
        {
            let mut s = crate::support::settings();
            fast(&mut s);
            let mut t = target("patient", &url);
            t.horizon_hours = 3;
            s.webhooks = vec![t];
            s
        },
        store,
    )
    .await;
    app.create_bash("h-1", "ls").await;
    let conn =
        rusqlite::Connection::open_with_flags(&path, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
            .unwrap();
    let (created, horizon): (i64, i64) = conn
        .query_row(
            "SELECT created_at, horizon_at FROM outbox WHERE channel = 'webhook:patient'",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .unwrap();
    let three_hours = 3 * 3600 * 1000;
    assert!(
        (three_hours..three_hours + 5000).contains(&(horizon - created)),
        "horizon {} ms after creation",
        horizon - created
    );
    app.stop().await;
}

#[tokio::test]
async fn invalid_webhook_configuration_is_refused() {
    let mut s = crate::support::settings();
    s.webhooks = vec![
        target("a", "http://127.0.0.1:1/x"),
        target("a", "http://127.0.0.1:1/y"),
    ];
    assert!(s.validate().unwrap_err().to_string().contains("used twice"));
    let mut bad = target("b", "http://127.0.0.1:1/x");
    bad.secret = Secret::new("not-a-whsec");
    s.webhooks = vec![bad];
    assert!(s.validate().unwrap_err().to_string().contains("whsec_"));
}
