//! Several replicas on one PostgreSQL schema: two real applications share a database, and an
//! agent waiting on one gets the answer given on the other, whichever way it came.

use std::sync::Arc;
use std::time::Duration;

use futures_util::FutureExt;
use imrelay::config::{Backend, Settings};
use libtest_mimic::Trial;
use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::postgres::{in_schema, server, url};
use crate::support::*;
use crate::telegram_fake::*;
use crate::trial;

pub(crate) fn trials() -> Vec<Trial> {
    vec![
        trial(
            "replicas::an_agent_waiting_on_one_replica_gets_the_answer_given_on_the_other",
            server,
            || in_schema(an_agent_waiting_on_one_replica_gets_the_answer_given_on_the_other),
        ),
        trial(
            "replicas::each_expiry_is_applied_once_and_never_beats_an_answer",
            server,
            || in_schema(each_expiry_is_applied_once_and_never_beats_an_answer),
        ),
        trial(
            "replicas::answers_through_every_channel_reach_a_waiter_on_the_other_replica",
            server,
            || in_schema(answers_through_every_channel_reach_a_waiter_on_the_other_replica),
        ),
        trial(
            "replicas::one_event_stream_for_the_cluster_resumes_on_another_replica",
            server,
            || in_schema(one_event_stream_for_the_cluster_resumes_on_another_replica),
        ),
        trial(
            "replicas::a_lease_has_one_holder_and_passes_on_when_it_dies",
            server,
            || in_schema(a_lease_has_one_holder_and_passes_on_when_it_dies),
        ),
        trial(
            "replicas::telegram_polling_runs_on_one_replica_and_fails_over",
            server,
            || in_schema(telegram_polling_runs_on_one_replica_and_fails_over),
        ),
        trial(
            "replicas::an_outage_gets_503_and_waiters_are_woken_after_it",
            server,
            || in_schema(an_outage_gets_503_and_waiters_are_woken_after_it),
        ),
        trial(
            "replicas::an_agent_whose_replica_died_reattaches_to_another",
            server,
            || in_schema(an_agent_whose_replica_died_reattaches_to_another),
        ),
        trial(
            "replicas::an_exhausted_pool_gets_503_after_a_bounded_wait",
            server,
            || in_schema(an_exhausted_pool_gets_503_after_a_bounded_wait),
        ),
        trial(
            "replicas::a_feishu_click_on_one_replica_answers_an_agent_waiting_on_the_other",
            server,
            || in_schema(a_feishu_click_on_one_replica_answers_an_agent_waiting_on_the_other),
        ),
        trial(
            "replicas::audit_verify_and_head_work_on_postgres",
            server,
            || in_schema(audit_verify_and_head_work_on_postgres),
        ),
    ]
}

/// Settings for a replica on `schema`.
pub(crate) fn replica_settings(schema: &str) -> Settings {
    let mut s = settings();
    s.store.backend = Backend::Postgres;
    s.store.url = imrelay::config::Secret::new(url());
    s.store.schema = schema.into();
    s
}

/// A replica on `schema`, with `settings` adjusted by `f`.
pub(crate) async fn replica_with(schema: &str, f: impl FnOnce(&mut Settings)) -> TestApp {
    let mut s = replica_settings(schema);
    f(&mut s);
    let store = imrelay::app::open_store(&s).await.expect("the store opens");
    spawn_on(s, store).await
}

/// A replica on `schema` with the test defaults.
pub(crate) async fn replica(schema: &str) -> TestApp {
    replica_with(schema, |_| {}).await
}

/// Until `app` holds `n` pending interactions (it adopted what another replica created).
pub(crate) async fn holds(app: &TestApp, n: usize) {
    let registry = app.registry.clone();
    eventually("the replica to hold the pending interactions", || {
        let registry = registry.clone();
        async move { (registry.pending_count() == n).then_some(()) }
    })
    .await;
}

async fn an_agent_waiting_on_one_replica_gets_the_answer_given_on_the_other(schema: String) {
    let a = Arc::new(replica(&schema).await);
    let b = replica(&schema).await;

    // Created and awaited on A (POST ?wait_secs), answered on B.
    let waiting = {
        let a = a.clone();
        tokio::spawn(async move {
            a.post(
                "/v1/interactions?wait_secs=60",
                &json!({"id": "across-1", "tool_name": "Bash", "input": {"command": "make"}}),
            )
            .await
        })
    };
    eventually("the interaction to reach the store", || async {
        let (status, _) = b.get("/v1/interactions/across-1").await;
        (status == StatusCode::OK).then_some(())
    })
    .await;
    let (status, body) = b
        .respond("across-1", &json!({"decision": "allow", "by": "Ada"}))
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let (status, body) = waiting.await.unwrap();
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["status"], "resolved", "{body}");
    assert_eq!(body["result"]["behavior"], "allow", "{body}");

    // Created on A, awaited on B (/wait), answered on A.
    let id = a.create_bash("across-2", "make test").await;
    let waiting = {
        let url = b.url(&format!("/v1/interactions/{id}/wait?timeout_secs=60"));
        let client = b.client.clone();
        tokio::spawn(async move { split(client.get(url).send().await.unwrap()).await })
    };
    holds(&b, 1).await;
    let (status, body) = a
        .respond(
            &id,
            &json!({"decision": "deny", "message": "not now", "by": "Bo"}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let (_, body) = waiting.await.unwrap();
    assert_eq!(body["result"]["behavior"], "deny", "{body}");
    // Neither holds it as pending any more.
    holds(&a, 0).await;
    holds(&b, 0).await;

    // A second answer, on either replica, loses with the winner's resolution.
    let (status, body) = a
        .respond(&id, &json!({"decision": "allow", "by": "Cy"}))
        .await;
    assert_eq!(status, StatusCode::CONFLICT, "{body}");
    assert_eq!(body["error"]["code"], "already_resolved", "{body}");
    Arc::into_inner(a).expect("one owner").stop().await;
    b.stop().await;
}

/// The audit entries of `action` about `id`, as the API lists them.
async fn audited(app: &TestApp, id: &str, action: &str) -> Vec<Value> {
    let (status, body) = app.get("/v1/audit?limit=1000").await;
    assert_eq!(status, StatusCode::OK, "{body}");
    body["entries"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .into_iter()
        .filter(|e| e["interaction_id"] == id && e["action"] == action)
        .collect()
}

async fn each_expiry_is_applied_once_and_never_beats_an_answer(schema: String) {
    let a = replica(&schema).await;
    let b = replica(&schema).await;
    // Both replicas hold it, so both deadlines fire; the store applies one.
    let (status, body) = a
        .post(
            "/v1/interactions",
            &json!({"id": "short", "tool_name": "Bash", "input": {"command": "x"}, "timeout_secs": 1}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    holds(&b, 1).await;
    let (_, body) = b.get("/v1/interactions/short/wait?timeout_secs=30").await;
    assert_eq!(body["resolution"]["outcome"], "expired", "{body}");
    holds(&a, 0).await;
    holds(&b, 0).await;
    // Give the losing deadline every chance to write.
    let expired = eventually("the one expiry in the audit trail", || async {
        let e = audited(&a, "short", "expired").await;
        (!e.is_empty()).then_some(e)
    })
    .await;
    assert_eq!(expired.len(), 1, "{expired:?}");

    // Answered on B before its deadline: the expiry that A and B schedule never wins.
    let (status, body) = a
        .post(
            "/v1/interactions",
            &json!({"id": "answered", "tool_name": "Bash", "input": {"command": "y"}, "timeout_secs": 2}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    holds(&b, 1).await;
    let (status, body) = b
        .respond("answered", &json!({"decision": "allow", "by": "Ada"}))
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    // Both replicas dropped its deadline: no expiry can follow.
    for app in [&a, &b] {
        let registry = app.registry.clone();
        wait_until("the deadline to leave the queue", || {
            registry.scheduled_deadlines() == 0
        })
        .await;
    }
    let (_, body) = a.get("/v1/interactions/answered").await;
    assert_eq!(body["resolution"]["outcome"], "allowed", "{body}");
    assert!(audited(&a, "answered", "expired").await.is_empty());
    a.stop().await;
    b.stop().await;
}

const TG_SECRET: &str = "webhook-secret_1";
const WH_SECRET: &str = "whsec_dGhpcyBpcyBhIDMyIGJ5dGUgc2VjcmV0IGtleSEh";
const ALICE: Person = Person {
    id: 1001,
    first_name: "Alice",
};
const CHAT: i64 = 1001;

/// Telegram in webhook mode against `tg`, and a webhook target `ticketing` that answers in.
fn channels(s: &mut Settings, tg: &FakeTelegram) {
    use imrelay::config::Secret;
    s.outbox.retry_base_ms = 20;
    s.outbox.retry_max_secs = 1;
    s.server.public_url = "https://relay.example.com".into();
    let t = &mut s.telegram;
    t.enabled = true;
    t.token = Secret::new(TOKEN);
    t.chats = vec![CHAT];
    t.approvers = vec![ALICE.id as u64];
    t.mode = imrelay::channels::telegram::Mode::Webhook;
    t.api_url = tg.url.clone();
    t.request_timeout_secs = 5;
    t.webhook_url = "https://relay.example.com/telegram/webhook".into();
    t.webhook_secret = Secret::new(TG_SECRET);
    s.webhooks = vec![imrelay::channels::webhook::WebhookSettings {
        name: "ticketing".into(),
        // Deliveries out go nowhere that answers; only answers in matter here.
        url: "http://127.0.0.1:9/hook".into(),
        secret: Secret::new(WH_SECRET),
        events: vec![],
        sessions: vec![],
        agents: vec![],
        timeout_secs: 1,
        horizon_hours: 1,
    }];
}

/// The prompt posted for the interaction whose command is `marker`: (message id, the
/// callback data of its "Allow" button). Fails if it was posted more than once.
async fn posted_once(tg: &FakeTelegram, marker: &str) -> (i64, String) {
    let is_it = |c: &Call| {
        c.params["text"].as_str().unwrap_or("").contains(marker)
            && c.params["reply_markup"]["inline_keyboard"].is_array()
    };
    let calls = tg
        .wait_for("sendMessage", |calls| calls.iter().any(is_it))
        .await;
    let prompts: Vec<&Call> = calls.iter().filter(|c| is_it(c)).collect();
    assert_eq!(prompts.len(), 1, "posted once: {prompts:?}");
    let p = prompts[0];
    let allow = p.params["reply_markup"]["inline_keyboard"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|row| row.as_array().unwrap().clone())
        .find(|b| b["text"].as_str().unwrap_or("").contains("Allow"))
        .expect("an Allow button");
    (
        p.message_id.unwrap(),
        allow["callback_data"].as_str().unwrap().to_string(),
    )
}

/// Posts a Claude Code `PreToolUse` hook for `Bash` `command` with tool use id `id`.
fn hook(app: &TestApp, id: &str, command: &str) -> tokio::task::JoinHandle<(StatusCode, Value)> {
    let mut body = fixture("claude-code/pre_tool_use.json");
    body["tool_use_id"] = json!(id);
    body["tool_name"] = json!("Bash");
    body["tool_input"] = json!({"command": command});
    let client = app.client.clone();
    let url = app.url("/v1/hooks/claude-code");
    tokio::spawn(async move { split(client.post(url).json(&body).send().await.unwrap()).await })
}

async fn answers_through_every_channel_reach_a_waiter_on_the_other_replica(schema: String) {
    let tg = FakeTelegram::start().await;
    let a = replica_with(&schema, |s| channels(s, &tg)).await;
    let b = replica_with(&schema, |s| channels(s, &tg)).await;

    // A Claude Code hook waits on A; Alice taps "Allow" on the prompt, delivered to B.
    let waiting = hook(&a, "toolu_tg", "make release");
    let (message_id, allow) = posted_once(&tg, "make release").await;
    let update = tap(tg.next_update_id(), ALICE, CHAT, message_id, &allow);
    let delivered = b
        .client
        .post(b.url("/telegram/webhook"))
        .header("X-Telegram-Bot-Api-Secret-Token", TG_SECRET)
        .json(&update)
        .send()
        .await
        .unwrap()
        .status();
    assert_eq!(delivered, StatusCode::OK);
    let (status, out) = waiting.await.unwrap();
    assert_eq!(status, StatusCode::OK, "{out}");
    assert_eq!(
        out["hookSpecificOutput"]["permissionDecision"], "allow",
        "{out}"
    );
    // The same update re-delivered to A: deduplicated across replicas.
    let again = a
        .client
        .post(a.url("/telegram/webhook"))
        .header("X-Telegram-Bot-Api-Secret-Token", TG_SECRET)
        .json(&update)
        .send()
        .await
        .unwrap()
        .status();
    assert_eq!(again, StatusCode::OK);
    // The prompt is edited once to show the answer, and was never posted again.
    tg.wait_for("editMessageText", |c| {
        c.iter().any(|c| c.params["message_id"] == message_id)
    })
    .await;
    posted_once(&tg, "make release").await;

    // A signed webhook answer on B reaches an agent waiting on A; its id replayed to A is
    // refused (the ids seen are shared).
    let waiting = {
        let a_url = a.url("/v1/interactions?wait_secs=60");
        let client = a.client.clone();
        tokio::spawn(async move {
            split(
                client
                    .post(a_url)
                    .json(&json!({"id": "by-webhook", "tool_name": "Bash", "input": {"command": "migrate"}}))
                    .send()
                    .await
                    .unwrap(),
            )
            .await
        })
    };
    posted_once(&tg, "migrate").await;
    let raw = json!({"id": "by-webhook", "decision": "deny", "message": "not today", "by": "jira"})
        .to_string();
    let ts = jiff::Timestamp::now().as_second();
    let key = imrelay::channels::webhook::signature::SigningKey::parse(WH_SECRET).unwrap();
    let sig = key.sign("msg_1", ts, raw.as_bytes());
    let post_signed = |app: &TestApp| {
        app.client
            .post(app.url("/v1/webhooks/ticketing/respond"))
            .header("content-type", "application/json")
            .header("webhook-id", "msg_1")
            .header("webhook-timestamp", ts.to_string())
            .header("webhook-signature", sig.clone())
            .body(raw.clone())
            .send()
    };
    let (status, body) = split(post_signed(&b).await.unwrap()).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let (_, body) = waiting.await.unwrap();
    assert_eq!(body["result"]["behavior"], "deny", "{body}");
    assert_eq!(body["resolution"]["via"], "webhook:ticketing", "{body}");
    let (status, body) = split(post_signed(&a).await.unwrap()).await;
    assert_ne!(status, StatusCode::OK, "a replayed webhook id: {body}");
    a.stop().await;
    b.stop().await;
    assert!(tg.take_refusals().is_empty());
}

async fn a_feishu_click_on_one_replica_answers_an_agent_waiting_on_the_other(schema: String) {
    use crate::feishu::fake::FakeFeishu;
    use crate::feishu::helpers::{
        APPROVER, button_value, card_for, click, enable, event_id, post_callback, tagged,
    };
    let fake = FakeFeishu::start().await;
    let a = replica_with(&schema, |s| enable(s, &fake)).await;
    let b = replica_with(&schema, |s| enable(s, &fake)).await;

    // Claude Code waits on A; the approver's click is delivered to B (the platform picks
    // any replica behind the callback URL).
    let waiting = hook(&a, "toolu_fs", "make deploy");
    let (message_id, card) = card_for(&fake, "toolu_fs").await;
    // Both receivers' cards are out before the click (a card not yet sent when the
    // interaction is answered is, rightly, never sent).
    wait_until("a card for each receiver", || {
        fake.state
            .delivered()
            .iter()
            .filter(|s| s.card.to_string().contains("toolu_fs"))
            .count()
            == 2
    })
    .await;
    let approve = button_value(&card, "approve");
    let event = event_id();
    let (status, reply) = post_callback(&b, &click(&event, APPROVER, &approve, None)).await;
    assert_eq!(status, StatusCode::OK, "{reply}");
    assert_eq!(reply["toast"]["type"], "success", "{reply}");
    let (status, out) = waiting.await.unwrap();
    assert_eq!(status, StatusCode::OK, "{out}");
    assert_eq!(
        out["hookSpecificOutput"]["permissionDecision"], "allow",
        "{out}"
    );

    // The same event delivered again, to A this time: deduplicated across replicas.
    let (status, _) = post_callback(&a, &click(&event, APPROVER, &approve, None)).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(audited(&a, "toolu_fs", "answered").await.len(), 1);
    // One card per receiver, each sent once whichever replica's outbox ran it, and each
    // updated to the outcome.
    let sent: Vec<_> = fake
        .state
        .delivered()
        .into_iter()
        .filter(|s| s.card.to_string().contains("toolu_fs"))
        .collect();
    assert_eq!(sent.len(), 2, "one card per receiver: {sent:?}");
    wait_until("both cards show the outcome", || {
        let patched: Vec<String> = fake
            .state
            .patches()
            .into_iter()
            .filter(|p| {
                tagged(&p.card, "button").is_empty() && p.card.to_string().contains("via feishu")
            })
            .map(|p| p.message_id)
            .collect();
        sent.iter()
            .all(|s| patched.contains(s.message_id.as_ref().unwrap()))
    })
    .await;
    assert!(
        fake.state
            .patches()
            .iter()
            .any(|p| p.message_id == message_id),
        "the clicked card is updated"
    );
    a.stop().await;
    b.stop().await;
}

async fn one_event_stream_for_the_cluster_resumes_on_another_replica(schema: String) {
    let a = replica(&schema).await;
    let b = replica(&schema).await;
    let mut on_b = Sse::connect(&b, None).await;
    let mut on_a = Sse::connect(&a, None).await;

    // Created on A, resolved on B: both streams show both, with the same ids.
    let id = a.create_bash("ev-1", "make").await;
    let created_b = on_b.next().await;
    assert_eq!(created_b.event, "interaction.created");
    assert_eq!(created_b.data["id"], id.as_str());
    let (status, _) = b.respond(&id, &json!({"decision": "allow"})).await;
    assert_eq!(status, StatusCode::OK);
    let resolved_b = on_b.next().await;
    assert_eq!(resolved_b.event, "interaction.resolved");
    assert_eq!(resolved_b.data["status"], "resolved");
    let created_a = on_a.next().await;
    let resolved_a = on_a.next().await;
    assert_eq!(created_a.id, created_b.id);
    assert_eq!(resolved_a.id, resolved_b.id);
    let ids: Vec<u64> = [&created_a, &resolved_a]
        .iter()
        .map(|e| e.id.as_deref().unwrap().parse().unwrap())
        .collect();
    assert!(ids[0] < ids[1], "{ids:?}");

    // The inbox on A goes away; meanwhile B creates two and A resolves one.
    drop(on_a);
    let last = resolved_a.id.clone().unwrap();
    b.create_bash("ev-2", "make test").await;
    b.create_bash("ev-3", "make lint").await;
    let (status, _) = a.respond("ev-2", &json!({"decision": "deny"})).await;
    assert_eq!(status, StatusCode::OK);
    for _ in 0..3 {
        on_b.next().await;
    }
    // It reconnects to B with the last id A gave it: exactly what it missed, in order.
    let mut resumed = Sse::connect(&b, Some(&last)).await;
    let mut got = Vec::new();
    for _ in 0..3 {
        let e = resumed.next().await;
        got.push((e.event, e.data["id"].as_str().unwrap().to_string()));
    }
    assert_eq!(
        got,
        [
            ("interaction.created".to_string(), "ev-2".to_string()),
            ("interaction.created".to_string(), "ev-3".to_string()),
            ("interaction.resolved".to_string(), "ev-2".to_string()),
        ]
    );
    assert!(
        resumed
            .next_within(Duration::from_millis(300))
            .await
            .is_none(),
        "nothing else"
    );
    // A restarted replica serves the same ids: resuming on it from the start replays all.
    a.stop().await;
    let a = replica(&schema).await;
    let mut again = Sse::connect(&a, created_a.id.as_deref()).await;
    let e = again.next().await;
    assert_eq!(e.id, resolved_a.id);
    a.stop().await;
    b.stop().await;
}

async fn a_lease_has_one_holder_and_passes_on_when_it_dies(schema: String) {
    use imrelay::store::PostgresStore;
    use imrelay::store::prelude::*;
    let open = || async {
        PostgresStore::connect(&imrelay::store::PostgresOptions {
            schema: schema.clone(),
            ..imrelay::store::PostgresOptions::new(url().into())
        })
        .await
        .expect("the store opens")
    };
    let (one, two) = (open().await, open().await);
    let lease = Duration::from_millis(1000);
    let mut first = one.lead("drill", lease);
    tokio::time::timeout(Duration::from_secs(10), first.leading())
        .await
        .expect("the first takes the free lease");
    let mut second = two.lead("drill", lease);
    // Several renewals later the second still waits.
    tokio::time::sleep(lease * 2).await;
    assert!(first.is_leading());
    assert!(!second.is_leading());

    // The holder dies without giving the lease up: the other takes it once it runs out,
    // and the dead one had stopped counting itself leader.
    first.abandon();
    tokio::time::timeout(Duration::from_secs(1), first.lost())
        .await
        .expect("an abandoned lease is no longer counted as held");
    tokio::time::timeout(lease * 3, second.leading())
        .await
        .expect("the lease passes on within its time");

    // Given up on purpose (dropped), it passes on at the next renewal.
    let mut third = one.lead("drill", lease);
    assert!(!third.is_leading());
    drop(second);
    tokio::time::timeout(lease, third.leading())
        .await
        .expect("a released lease is taken at once");
    assert!(third.lost().now_or_never().is_none(), "it holds it");
}

/// `app`'s Telegram state in /healthz.
async fn telegram_state(app: &TestApp) -> String {
    let (_, health) = app.get("/healthz").await;
    health["components"]["telegram"]["state"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

async fn until_telegram(app: &TestApp, state: &str) {
    eventually(&format!("telegram to be {state}"), || async {
        (telegram_state(app).await == state).then_some(())
    })
    .await;
}

async fn telegram_polling_runs_on_one_replica_and_fails_over(schema: String) {
    let tg = FakeTelegram::start().await;
    let polling = |s: &mut Settings| {
        channels(s, &tg);
        s.telegram.mode = imrelay::channels::telegram::Mode::Polling;
        s.telegram.webhook_url = String::new();
        s.telegram.webhook_secret = imrelay::config::Secret::new("");
        s.telegram.poll_timeout_secs = 1;
        s.store.leader_lease_ms = 1000;
    };
    let a = replica_with(&schema, polling).await;
    until_telegram(&a, "polling").await;
    let b = replica_with(&schema, polling).await;
    until_telegram(&b, "standby").await;

    // A tap is fetched by the one that polls; the agent waits on the other.
    let tap_allow = |marker: &'static str| {
        let tg = &tg;
        async move {
            let (message_id, allow) = posted_once(tg, marker).await;
            tg.push_update(tap(tg.next_update_id(), ALICE, CHAT, message_id, &allow));
        }
    };
    let waiting = {
        let url = b.url("/v1/interactions?wait_secs=60");
        let client = b.client.clone();
        tokio::spawn(async move {
            split(client.post(url).json(&json!({"id": "poll-1", "tool_name": "Bash", "input": {"command": "first"}})).send().await.unwrap()).await
        })
    };
    tap_allow("first").await;
    let (_, body) = waiting.await.unwrap();
    assert_eq!(body["result"]["behavior"], "allow", "{body}");
    assert_eq!(telegram_state(&b).await, "standby");

    // The poller goes away: the other takes over within the lease, from the stored offset.
    let offset = a.store.get_value("telegram.offset").await.unwrap();
    assert!(offset.is_some(), "the offset is kept in the store");
    a.stop().await;
    until_telegram(&b, "polling").await;
    let waiting = {
        let url = b.url("/v1/interactions?wait_secs=60");
        let client = b.client.clone();
        tokio::spawn(async move {
            split(client.post(url).json(&json!({"id": "poll-2", "tool_name": "Bash", "input": {"command": "second"}})).send().await.unwrap()).await
        })
    };
    tap_allow("second").await;
    let (_, body) = waiting.await.unwrap();
    assert_eq!(body["result"]["behavior"], "allow", "{body}");
    let polls = tg.calls("getUpdates");
    assert!(!polls.is_empty());
    let first_offset_on_b = polls
        .iter()
        .rev()
        .map(|c| c.params["offset"].as_i64().unwrap_or(0))
        .next()
        .unwrap();
    assert!(
        first_offset_on_b >= offset.unwrap().parse::<i64>().unwrap(),
        "the new poller continues from the stored offset"
    );
    b.stop().await;
    assert!(tg.take_refusals().is_empty());
}

/// The test server's URL with its host and port replaced by `addr`.
pub(crate) fn through(addr: std::net::SocketAddr) -> String {
    let config: tokio_postgres::Config = url().parse().expect("the test URL parses");
    let mut out = format!(
        "host={} port={} user={} dbname={} connect_timeout=2",
        addr.ip(),
        addr.port(),
        config.get_user().unwrap_or("postgres"),
        config.get_dbname().unwrap_or("postgres"),
    );
    if let Some(p) = config.get_password() {
        out.push_str(&format!(" password='{}'", String::from_utf8_lossy(p)));
    }
    out
}

/// The test server's address.
pub(crate) async fn upstream() -> std::net::SocketAddr {
    let config: tokio_postgres::Config = url().parse().expect("the test URL parses");
    let host = match &config.get_hosts()[0] {
        tokio_postgres::config::Host::Tcp(h) => h.clone(),
        #[allow(unreachable_patterns)]
        _ => panic!("the outage test needs a TCP server"),
    };
    let port = config.get_ports().first().copied().unwrap_or(5432);
    tokio::net::lookup_host((host.as_str(), port))
        .await
        .expect("resolve")
        .next()
        .expect("an address")
}

/// Posts `body` to `path` on `app` in the background.
fn post_later(
    app: &TestApp,
    path: &str,
    body: Value,
) -> tokio::task::JoinHandle<(StatusCode, Value)> {
    let url = app.url(path);
    let client = app.client.clone();
    tokio::spawn(async move { split(client.post(url).json(&body).send().await.unwrap()).await })
}

async fn an_outage_gets_503_and_waiters_are_woken_after_it(schema: String) {
    let proxy = proxy_for_test().await;
    let via_proxy = |s: &mut Settings| {
        s.store.url = imrelay::config::Secret::new(through(proxy.addr));
        s.store.pool_wait_ms = 500;
    };
    let a = replica_with(&schema, via_proxy).await;
    let b = replica_with(&schema, via_proxy).await;
    let waiting = post_later(
        &a,
        "/v1/interactions?wait_secs=120",
        json!({"id": "outage-1", "tool_name": "Bash", "input": {"command": "deploy"}}),
    );
    holds(&b, 1).await;

    proxy.cut();
    // Every request that needs the database gets a clear 503 in bounded time, never a hang.
    let limit = Duration::from_secs(15);
    let (status, body) =
        tokio::time::timeout(limit, b.respond("outage-1", &json!({"decision": "allow"})))
            .await
            .expect("an answer, not a hang");
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{body}");
    assert_eq!(body["error"]["code"], "store_unavailable", "{body}");
    let (status, body) = tokio::time::timeout(
        limit,
        a.post(
            "/v1/interactions",
            &json!({"id": "outage-2", "tool_name": "Bash", "input": {"command": "x"}}),
        ),
    )
    .await
    .expect("an answer, not a hang");
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{body}");
    assert_eq!(body["error"]["code"], "store_unavailable", "{body}");
    for app in [&a, &b] {
        let (status, health) = tokio::time::timeout(limit, app.get("/healthz"))
            .await
            .expect("health answers");
        assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{health}");
        assert_eq!(health["store"], "unavailable", "{health}");
    }
    assert!(!waiting.is_finished(), "the agent still waits");

    // Back: the answer given on B wakes the agent waiting on A, and health says so.
    proxy.restore();
    eventually(
        "the answer to be taken once the database is back",
        || async {
            let (status, _) = b
                .respond("outage-1", &json!({"decision": "allow", "by": "Ada"}))
                .await;
            (status == StatusCode::OK).then_some(())
        },
    )
    .await;
    let (status, body) = tokio::time::timeout(Duration::from_secs(30), waiting)
        .await
        .expect("the waiter is woken")
        .unwrap();
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["result"]["behavior"], "allow", "{body}");
    for app in [&a, &b] {
        eventually("health to recover", || async {
            let (status, _) = app.get("/healthz").await;
            (status == StatusCode::OK).then_some(())
        })
        .await;
    }
    a.stop().await;
    b.stop().await;
}

async fn proxy_for_test() -> crate::proxy::Proxy {
    crate::proxy::Proxy::start(upstream().await).await
}

async fn an_agent_whose_replica_died_reattaches_to_another(schema: String) {
    let a = replica(&schema).await;
    let b = replica(&schema).await;
    let ask =
        json!({"id": "reattach-1", "tool_name": "Bash", "input": {"command": "rm -rf build"}});
    let waiting = post_later(&a, "/v1/interactions?wait_secs=120", ask.clone());
    holds(&b, 1).await;
    // A goes away mid-wait; the answer is given on B meanwhile.
    a.stop().await;
    let _ = waiting.await;
    let (status, body) = b
        .respond(
            "reattach-1",
            &json!({"decision": "deny", "message": "keep it", "by": "Ada"}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    // The agent asks B with the same id and request: it gets the answer given meanwhile.
    let (status, body) = b.post("/v1/interactions?wait_secs=120", &ask).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["status"], "resolved", "{body}");
    assert_eq!(body["result"]["behavior"], "deny", "{body}");
    assert_eq!(body["result"]["message"], "keep it", "{body}");

    // And if the answer comes after it re-attached, the wait on B ends with it.
    let c = replica(&schema).await;
    let ask = json!({"id": "reattach-2", "tool_name": "Bash", "input": {"command": "ls"}});
    let first = post_later(&c, "/v1/interactions?wait_secs=120", ask.clone());
    holds(&b, 1).await;
    c.stop().await;
    let _ = first.await;
    let again = post_later(&b, "/v1/interactions?wait_secs=120", ask);
    let d = replica(&schema).await;
    holds(&d, 1).await;
    let (status, _) = d.respond("reattach-2", &json!({"decision": "allow"})).await;
    assert_eq!(status, StatusCode::OK);
    let (status, body) = again.await.unwrap();
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["result"]["behavior"], "allow", "{body}");
    b.stop().await;
    d.stop().await;
}

async fn an_exhausted_pool_gets_503_after_a_bounded_wait(schema: String) {
    let a = replica_with(&schema, |s| {
        s.store.pool_size = 1;
        s.store.pool_wait_ms = 300;
    })
    .await;
    a.create_bash("busy", "make").await;
    // Another session locks the row: an answer to it holds the one connection while it
    // waits for the lock.
    let mut locker = crate::postgres::raw().await;
    let tx = locker.transaction().await.unwrap();
    tx.execute(
        &format!("SELECT 1 FROM \"{schema}\".interactions WHERE id = 'busy' FOR UPDATE"),
        &[],
    )
    .await
    .unwrap();
    let held = {
        let url = a.url("/v1/interactions/busy/respond");
        let client = a.client.clone();
        tokio::spawn(async move {
            split(
                client
                    .post(url)
                    .json(&json!({"decision": "allow"}))
                    .send()
                    .await
                    .unwrap(),
            )
            .await
        })
    };
    // Meanwhile a read waits for a connection, a bounded time, then gets 503.
    let (status, body) = eventually("a request to find the pool exhausted", || async {
        let (status, body) = tokio::time::timeout(
            Duration::from_secs(10),
            a.get("/v1/interactions?status=all"),
        )
        .await
        .expect("an answer, not a hang");
        (status == StatusCode::SERVICE_UNAVAILABLE).then_some((status, body))
    })
    .await;
    assert_eq!(
        body["error"]["code"], "store_unavailable",
        "{status} {body}"
    );
    tx.rollback().await.unwrap();
    let (status, body) = held.await.unwrap();
    assert_eq!(status, StatusCode::OK, "{body}");
    a.stop().await;
}

/// Runs the `imrelay` binary with `args` on PostgreSQL schema `schema`: (success, stdout,
/// stderr).
async fn cli_on(schema: &str, args: &[&str]) -> (bool, String, String) {
    let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_imrelay"));
    cmd.args(args)
        .env("IMRELAY__STORE__BACKEND", "postgres")
        .env("IMRELAY__STORE__URL", url())
        .env("IMRELAY__STORE__SCHEMA", schema);
    let out = cmd.output().await.expect("runs");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

async fn audit_verify_and_head_work_on_postgres(schema: String) {
    let a = replica(&schema).await;
    let b = replica(&schema).await;
    for (n, app) in [&a, &b, &a].into_iter().enumerate() {
        let id = app.create_bash(&format!("audited-{n}"), "make").await;
        let (status, _) = app
            .respond(&id, &json!({"decision": "allow", "by": "Ada"}))
            .await;
        assert_eq!(status, StatusCode::OK);
    }
    let (ok, head, err) = cli_on(&schema, &["audit", "head"]).await;
    assert!(ok, "{err}");
    let head = head.trim().to_string();
    assert!(head.starts_with("6:"), "{head}");
    let (ok, out, err) = cli_on(&schema, &["audit", "verify", "--expect", &head]).await;
    assert!(ok, "{out}{err}");
    assert!(out.contains("audit trail intact: 6 entries"), "{out}");

    // An entry altered behind imrelay's back is found.
    crate::postgres::raw()
        .await
        .batch_execute(&format!(
            "UPDATE \"{schema}\".audit SET actor = 'Mallory' WHERE seq = 2"
        ))
        .await
        .unwrap();
    let (ok, out, _) = cli_on(&schema, &["audit", "verify"]).await;
    assert!(!ok, "{out}");
    assert!(out.contains("audit trail BROKEN"), "{out}");
    // `backup` says what to use instead.
    let (ok, _, err) = cli_on(&schema, &["backup", "-"]).await;
    assert!(!ok);
    assert!(err.contains("pg_dump"), "{err}");
    a.stop().await;
    b.stop().await;
}
