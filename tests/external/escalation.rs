//! Route escalation with two replicas on one PostgreSQL schema: both hold the interaction
//! and both timers fire, and it is escalated once (one mark, one copy posted, one audit
//! entry). Real time: the replicas' timers wait on the real database (a paused clock would
//! race its I/O), so the route escalates after one second.

use std::sync::Arc;

use imrelay::config::Secret;
use imrelay::config::teams::{EscalateTo, PersonSettings, RouteSettings};
use libtest_mimic::Trial;
use reqwest::StatusCode;
use serde_json::json;

use crate::postgres::{in_schema, server};
use crate::replicas::{holds, replica_with};
use crate::support::*;
use crate::telegram_fake::*;
use crate::trial;

pub(crate) fn trials() -> Vec<Trial> {
    vec![trial(
        "escalation::two_replicas_escalate_an_unanswered_request_once",
        server,
        || in_schema(two_replicas_escalate_an_unanswered_request_once),
    )]
}

const GROUP: i64 = -2001;
const LEADS: i64 = -2002;

/// Telegram against `tg` on two chats; the shop route posts to the group and escalates to
/// the leads' chat after a second.
fn escalating(s: &mut imrelay::config::Settings, tg: &FakeTelegram) {
    s.outbox.retry_base_ms = 20;
    s.outbox.retry_max_secs = 1;
    let t = &mut s.telegram;
    t.enabled = true;
    t.token = Secret::new(TOKEN);
    t.chats = vec![GROUP, LEADS];
    t.approvers = vec![1001];
    t.mode = imrelay::channels::telegram::Mode::Webhook;
    t.api_url = tg.url.clone();
    t.request_timeout_secs = 5;
    t.webhook_url = "https://relay.example.com/telegram/webhook".into();
    t.webhook_secret = Secret::new("webhook-secret_1");
    s.people = vec![PersonSettings {
        ids: imrelay::config::teams::PerChannel::from([(
            "telegram".into(),
            imrelay::config::teams::written(vec![1001]),
        )]),
        name: "alice".into(),
        ..Default::default()
    }];
    s.routes = vec![RouteSettings {
        places: imrelay::config::teams::PerChannel::from([(
            "telegram".into(),
            imrelay::config::teams::written(vec![GROUP]),
        )]),
        name: "shop".into(),
        approvers: vec!["alice".into()],
        timeout_secs: Some(60),
        escalate_after_secs: Some(1),
        escalate_to: Some(EscalateTo {
            places: imrelay::config::teams::PerChannel::from([(
                "telegram".into(),
                imrelay::config::teams::written(vec![LEADS]),
            )]),
            ..Default::default()
        }),
        ..Default::default()
    }];
}

fn sent_to(tg: &FakeTelegram, chat: i64, marker: &str) -> usize {
    tg.calls("sendMessage")
        .iter()
        .filter(|c| {
            c.params["chat_id"] == chat && c.params["text"].as_str().unwrap_or("").contains(marker)
        })
        .count()
}

async fn two_replicas_escalate_an_unanswered_request_once(schema: String) {
    let tg = Arc::new(FakeTelegram::start().await);
    let a = replica_with(&schema, |s| escalating(s, &tg)).await;
    let b = replica_with(&schema, |s| escalating(s, &tg)).await;
    let (status, body) = a
        .post(
            "/v1/interactions",
            &json!({"id": "pg-esc", "tool_name": "Bash", "input": {"command": "make pg-esc"}}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    // Both hold it, so both timers fire.
    holds(&b, 1).await;
    eventually("the escalated copy", || {
        std::future::ready((sent_to(&tg, LEADS, "make pg-esc") > 0).then_some(()))
    })
    .await;
    let (_, st) = b.get("/v1/interactions/pg-esc").await;
    assert_eq!(st["status"], "pending", "{st}");
    assert!(st["escalated_at"].is_string(), "{st}");
    // Both timers have fired (the loser found the interaction escalated already), and every
    // job is delivered.
    wait_until("both escalation timers to fire", || {
        a.registry.scheduled_escalations() == 0 && b.registry.scheduled_escalations() == 0
    })
    .await;
    eventually("the outbox to settle", || async {
        let backlog = a.store.job_backlog().await.unwrap();
        backlog.iter().all(|(_, n)| *n == 0).then_some(())
    })
    .await;
    assert_eq!(sent_to(&tg, LEADS, "make pg-esc"), 1);
    assert_eq!(sent_to(&tg, GROUP, "make pg-esc"), 1);
    let (_, audit) = a.get("/v1/audit?limit=1000").await;
    let marks = audit["entries"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["interaction_id"] == "pg-esc" && e["action"] == "escalated")
        .count();
    assert_eq!(marks, 1, "{audit}");
    for app in [&a, &b] {
        assert_eq!(app.registry.scheduled_escalations(), 0);
        let id = imrelay::interaction::InteractionId::parse("pg-esc").unwrap();
        assert!(app.registry.escalate(&id).await.unwrap().is_none());
    }
    a.stop().await;
    b.stop().await;
}
