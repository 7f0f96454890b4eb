//! Socket Mode against the fake: envelopes handled and acknowledged (with a payload where
//! Slack accepts one), copies handled once, a slow handler acknowledged in time, Slack's
//! `disconnect` answered by a replacement first, drops and rate limits retried, several
//! connections, a refused token, and shutdown.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use imrelay::channels::longconn::tls_config;
use imrelay::channels::slack::api::WebApi;
use imrelay::channels::slack::socket::{Envelope, EnvelopeHandler, SocketMode, SocketStats};
use imrelay::config::Secret;
use imrelay::health::Health;
use serde_json::{Value, json};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use super::fake::{APP_TOKEN, BOT_TOKEN, Failure, FakeSlack, block_action, event, interactive};
use crate::support::wait_until;

/// Records envelopes; answers with `reply`; waits for `gate` first when there is one.
#[derive(Default)]
struct Recorder {
    seen: Mutex<Vec<Envelope>>,
    reply: Option<Value>,
    gate: Option<Arc<Notify>>,
    finished: AtomicBool,
}

impl Recorder {
    fn seen(&self) -> Vec<Envelope> {
        self.seen.lock().unwrap().clone()
    }
}

#[async_trait::async_trait]
impl EnvelopeHandler for Recorder {
    async fn handle(&self, envelope: Envelope) -> Option<Value> {
        self.seen.lock().unwrap().push(envelope);
        if let Some(gate) = &self.gate {
            gate.notified().await;
        }
        self.finished.store(true, Ordering::SeqCst);
        self.reply.clone()
    }
}

struct Client {
    stats: Arc<SocketStats>,
    health: Arc<Health>,
    shutdown: CancellationToken,
    task: tokio::task::JoinHandle<()>,
}

fn start(slack: &FakeSlack, handler: Arc<Recorder>, connections: u8, app_token: &str) -> Client {
    start_with(slack, handler, connections, app_token, |s| s)
}

fn start_with(
    slack: &FakeSlack,
    handler: Arc<Recorder>,
    connections: u8,
    app_token: &str,
    tune: impl FnOnce(SocketMode) -> SocketMode,
) -> Client {
    let api =
        Arc::new(WebApi::new(&slack.api, Secret::new(BOT_TOKEN), Secret::new(app_token)).unwrap());
    let health = Arc::new(Health::default());
    let shutdown = CancellationToken::new();
    let client = tune(
        SocketMode::new(
            api,
            handler,
            connections,
            health.clone(),
            shutdown.clone(),
            tls_config().unwrap(),
        )
        .with_connect_timeout(Duration::from_secs(5)),
    );
    let stats = client.stats();
    let task = tokio::spawn(client.run());
    Client {
        stats,
        health,
        shutdown,
        task,
    }
}

impl Client {
    async fn stop(self) {
        self.shutdown.cancel();
        tokio::time::timeout(Duration::from_secs(10), self.task)
            .await
            .expect("run() ends after shutdown")
            .unwrap();
    }
}

#[tokio::test]
async fn envelopes_are_handled_and_acknowledged_with_the_handlers_payload() {
    let slack = FakeSlack::start().await;
    let reply = json!({"response_action": "errors", "errors": {"reason": "A reason is required"}});
    let handler = Arc::new(Recorder {
        reply: Some(reply.clone()),
        ..Recorder::default()
    });
    let client = start(&slack, handler.clone(), 1, APP_TOKEN);
    let s = &slack.state.sockets;
    wait_until("connected", || s.open_conns().len() == 1).await;
    assert_eq!(
        slack.state.calls("apps.connections.open")[0].token,
        APP_TOKEN
    );
    wait_until("reported connected", || {
        client.health.snapshot()["slack"]["state"] == "connected"
    })
    .await;

    let action = block_action("U0LEAD", "approve", "tok-approve", "trig-9");
    s.deliver(0, &interactive("env-1", action.clone(), true));
    wait_until("an ack", || !s.acks_of("env-1").is_empty()).await;
    let ack = &s.acks_of("env-1")[0];
    assert_eq!(
        ack.payload.as_ref(),
        Some(&reply),
        "the handler's answer rides on the ack"
    );
    let seen = handler.seen();
    assert_eq!(seen.len(), 1);
    assert_eq!(seen[0].kind, "interactive");
    assert_eq!(seen[0].payload, action);

    // Where Slack accepts no payload, the acknowledgement is bare.
    s.deliver(0, &interactive("env-2", action, false));
    wait_until("an ack", || !s.acks_of("env-2").is_empty()).await;
    assert_eq!(s.acks_of("env-2")[0].payload, None);
    client.stop().await;
}

#[tokio::test]
async fn a_copy_reaches_the_handler_once_and_gets_the_same_answer() {
    let slack = FakeSlack::start().await;
    let handler = Arc::new(Recorder {
        reply: Some(json!({"text": "done"})),
        ..Recorder::default()
    });
    let client = start(&slack, handler.clone(), 2, APP_TOKEN);
    let s = &slack.state.sockets;
    wait_until("two connections", || s.open_conns().len() == 2).await;
    let conns = s.open_conns();

    // Slack did not see the first acknowledgement and sends the envelope again, on the other
    // connection.
    let env = interactive(
        "env-dup",
        block_action("U0LEAD", "approve", "tok", "trig"),
        true,
    );
    s.deliver(conns[0], &env);
    wait_until("the first ack", || s.acks_of("env-dup").len() == 1).await;
    s.deliver(conns[1], &env);
    wait_until("the copy's ack", || s.acks_of("env-dup").len() == 2).await;
    let acks = s.acks_of("env-dup");
    assert_eq!(acks[0].conn, conns[0]);
    assert_eq!(
        acks[1].conn, conns[1],
        "each copy is acknowledged where it came"
    );
    assert_eq!(acks[0].payload, acks[1].payload);

    // A retried Events API event comes in a new envelope with the same event id.
    s.deliver(conns[0], &event("env-ev-1", "Ev0001", 0));
    s.deliver(conns[1], &event("env-ev-2", "Ev0001", 1));
    wait_until("both acked", || {
        !s.acks_of("env-ev-1").is_empty() && !s.acks_of("env-ev-2").is_empty()
    })
    .await;
    let kinds: Vec<String> = handler.seen().iter().map(|e| e.kind.clone()).collect();
    assert_eq!(
        kinds,
        ["interactive", "events_api"],
        "each delivery handled once"
    );
    assert_eq!(client.stats.duplicates.load(Ordering::Relaxed), 2);
    client.stop().await;
}

#[tokio::test]
async fn a_slow_handler_does_not_hold_the_acknowledgement_back() {
    let slack = FakeSlack::start().await;
    let gate = Arc::new(Notify::new());
    let handler = Arc::new(Recorder {
        reply: Some(json!({"response_action": "clear"})),
        gate: Some(gate.clone()),
        ..Recorder::default()
    });
    let client = start_with(&slack, handler.clone(), 1, APP_TOKEN, |c| {
        c.with_ack_budget(Duration::from_millis(100))
    });
    let s = &slack.state.sockets;
    wait_until("connected", || s.open_conns().len() == 1).await;
    s.deliver(
        0,
        &interactive("env-slow", json!({"type": "view_submission"}), true),
    );
    wait_until("an ack", || !s.acks_of("env-slow").is_empty()).await;
    assert!(
        !handler.finished.load(Ordering::SeqCst),
        "acknowledged while the handler still works"
    );
    assert_eq!(
        s.acks_of("env-slow")[0].payload,
        None,
        "the answer was not ready"
    );
    assert_eq!(client.stats.slow.load(Ordering::Relaxed), 1);
    assert!(
        s.late_acks().is_empty(),
        "inside Slack's window: {:?}",
        s.late_acks()
    );
    // The handler is not abandoned: it runs to the end.
    gate.notify_one();
    wait_until("the handler finished", || {
        handler.finished.load(Ordering::SeqCst)
    })
    .await;
    // A copy arriving now gets the answer it finally gave, without running it again.
    s.deliver(
        0,
        &interactive("env-slow", json!({"type": "view_submission"}), true),
    );
    wait_until("the copy's ack", || s.acks_of("env-slow").len() == 2).await;
    assert_eq!(
        s.acks_of("env-slow")[1].payload,
        Some(json!({"response_action": "clear"}))
    );
    assert_eq!(handler.seen().len(), 1);
    client.stop().await;
}

#[tokio::test]
async fn a_disconnect_message_is_answered_by_a_replacement_first() {
    let slack = FakeSlack::start().await;
    let handler = Arc::new(Recorder::default());
    let client = start(&slack, handler.clone(), 1, APP_TOKEN);
    let s = &slack.state.sockets;
    wait_until("connected", || s.open_conns() == [0]).await;

    s.disconnect(0, "refresh_requested");
    wait_until("the old connection retired", || s.open_conns() == [1]).await;
    let opened = s.position("open", 1).unwrap();
    let closed = s.position("closed", 0).unwrap();
    assert!(
        opened < closed,
        "the replacement was up before the old one closed: {:?}",
        s.log.lock().unwrap()
    );
    assert_eq!(slack.state.calls("apps.connections.open").len(), 2);
    assert_eq!(client.stats.rotations.load(Ordering::Relaxed), 1);
    assert_eq!(
        client.stats.reconnects.load(Ordering::Relaxed),
        0,
        "no backoff"
    );

    s.deliver(
        1,
        &interactive("env-after", json!({"type": "block_actions"}), false),
    );
    wait_until("handled on the new connection", || {
        s.acks_of("env-after").iter().any(|a| a.conn == 1)
    })
    .await;
    assert_eq!(handler.seen().len(), 1);
    client.stop().await;
}

#[tokio::test]
async fn an_envelope_in_flight_when_the_connection_is_retired_is_still_acknowledged() {
    let slack = FakeSlack::start().await;
    let gate = Arc::new(Notify::new());
    let handler = Arc::new(Recorder {
        reply: Some(json!({"ok": 1})),
        gate: Some(gate.clone()),
        ..Recorder::default()
    });
    let client = start(&slack, handler.clone(), 1, APP_TOKEN);
    let s = &slack.state.sockets;
    wait_until("connected", || s.open_conns() == [0]).await;
    s.deliver(
        0,
        &interactive("env-inflight", json!({"type": "block_actions"}), true),
    );
    wait_until("the handler started", || handler.seen().len() == 1).await;
    s.disconnect(0, "warning");
    wait_until("the replacement", || s.opened() == 2).await;
    // The old connection waits for its envelope before it closes.
    assert!(s.open_conns().contains(&0));
    gate.notify_one();
    wait_until("acked on the old connection", || {
        s.acks_of("env-inflight").iter().any(|a| a.conn == 0)
    })
    .await;
    assert_eq!(s.acks_of("env-inflight")[0].payload, Some(json!({"ok": 1})));
    wait_until("then it closes", || s.open_conns() == [1]).await;
    client.stop().await;
}

#[tokio::test]
async fn a_dropped_connection_is_reopened_and_reported() {
    let slack = FakeSlack::start().await;
    let handler = Arc::new(Recorder::default());
    let client = start(&slack, handler.clone(), 1, APP_TOKEN);
    let s = &slack.state.sockets;
    wait_until("connected", || s.open_conns() == [0]).await;
    s.drop_conn(0);
    wait_until("reopened", || s.open_conns() == [1]).await;
    assert_eq!(client.stats.reconnects.load(Ordering::Relaxed), 1);
    s.deliver(
        1,
        &interactive("env-x", json!({"type": "block_actions"}), false),
    );
    wait_until("handled", || !s.acks_of("env-x").is_empty()).await;

    // A close frame from Slack is a drop too.
    s.close(1);
    wait_until("reopened again", || s.open_conns() == [2]).await;
    let h = client.health.snapshot()["slack"].clone();
    assert!(
        h["last_error"]
            .as_str()
            .unwrap_or_default()
            .contains("closed by Slack"),
        "{h}"
    );
    client.stop().await;
}

#[tokio::test]
async fn a_rate_limited_connections_open_waits_as_told() {
    let slack = FakeSlack::start().await;
    slack.state.fail(
        "apps.connections.open",
        &[Failure::RateLimited(1), Failure::Error("internal_error")],
    );
    let client = start(&slack, Arc::new(Recorder::default()), 1, APP_TOKEN);
    let s = &slack.state.sockets;
    wait_until("connected in the end", || s.open_conns().len() == 1).await;
    assert_eq!(slack.state.calls("apps.connections.open").len(), 3);
    assert_eq!(client.stats.reconnects.load(Ordering::Relaxed), 2);
    client.stop().await;
}

#[tokio::test]
async fn several_connections_are_held_and_all_close_at_shutdown() {
    let slack = FakeSlack::start().await;
    let client = start(&slack, Arc::new(Recorder::default()), 3, APP_TOKEN);
    let s = &slack.state.sockets;
    wait_until("three connections", || s.open_conns().len() == 3).await;
    wait_until("all counted", || {
        client.stats.live.load(Ordering::SeqCst) == 3
    })
    .await;
    assert_eq!(client.health.snapshot()["slack"]["connections"], 3);
    let health = client.health.clone();
    client.stop().await;
    wait_until("all closed", || s.open_conns().is_empty()).await;
    assert_eq!(health.snapshot()["slack"]["state"], "stopped");
    assert_eq!(s.refused.load(Ordering::SeqCst), 0, "each URL used once");
}

#[tokio::test]
async fn too_many_websockets_backs_off_instead_of_fighting() {
    let slack = FakeSlack::start().await;
    let client = start(&slack, Arc::new(Recorder::default()), 1, APP_TOKEN);
    let s = &slack.state.sockets;
    wait_until("connected", || s.open_conns() == [0]).await;
    s.disconnect(0, "too_many_websockets");
    wait_until("reopened after a wait", || s.open_conns() == [1]).await;
    assert_eq!(client.stats.rotations.load(Ordering::Relaxed), 0);
    assert_eq!(client.stats.reconnects.load(Ordering::Relaxed), 1);
    client.stop().await;
}

#[tokio::test]
async fn a_refused_app_token_is_reported_and_retried_without_connecting() {
    let slack = FakeSlack::start().await;
    let client = start(&slack, Arc::new(Recorder::default()), 1, "xapp-wrong");
    wait_until("reported", || {
        client.health.snapshot()["slack"]["state"] == "disconnected"
    })
    .await;
    let h = client.health.snapshot()["slack"].clone();
    let error = h["last_error"].as_str().unwrap_or_default().to_string();
    assert!(error.contains("invalid_auth"), "{h}");
    assert!(
        !error.contains("xapp-wrong"),
        "the token is never shown: {h}"
    );
    assert!(slack.state.sockets.open_conns().is_empty());
    client.stop().await;
}
