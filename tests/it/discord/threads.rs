//! One thread per agent session on Discord (`discord.thread_per = "session"`): the first
//! prompt of a session in a channel starts a thread from a message naming the session
//! (`POST /channels/{id}/messages/{id}/threads`), every prompt of it is posted in that thread,
//! a click in either thread answers its own request, and the thread is archived and locked
//! when the session ends.

use std::sync::atomic::Ordering;

use serde_json::{Value, json};

use super::channel::{APPROVER, custom_id, deliver, enable};
use super::fake::{CHANNELS, FakeDiscord, component_click};
use crate::support::{TestApp, eventually, spawn_with, wait_until};
use imrelay::channels::threads::ThreadPer;
use reqwest::StatusCode;

async fn create(app: &TestApp, id: &str, command: &str, session: &str, cwd: &str) {
    let body = json!({"id": id, "tool_name": "Bash", "input": {"command": command},
        "session": session, "agent": "claude-code", "cwd": cwd});
    let (s, created) = app.post("/v1/interactions", &body).await;
    assert_eq!(s, StatusCode::CREATED, "{created}");
}

async fn status(app: &TestApp, id: &str) -> String {
    let (_, body) = app.get(&format!("/v1/interactions/{id}")).await;
    body["status"].as_str().unwrap_or_default().to_string()
}

/// The copies of interaction `id` in threads: (thread, message id, the thread's parent).
async fn in_threads(fake: &FakeDiscord, id: &str) -> Vec<(String, String, String)> {
    let find = || -> Vec<(String, String, String)> {
        let threads = fake.state.threads.lock().unwrap().clone();
        let mut found: Vec<(String, String, String)> = threads
            .iter()
            .flat_map(|(t, thread)| {
                let parent = thread["parent_id"].as_str().unwrap().to_string();
                fake.state
                    .messages_in(t)
                    .into_iter()
                    .filter(|(_, m)| m.to_string().contains(&format!(":{id}\"")))
                    .map(move |(mid, _)| (t.clone(), mid, parent.clone()))
            })
            .collect();
        found.sort_by(|a, b| a.2.cmp(&b.2));
        found
    };
    wait_until(
        &format!("a copy of {id} in a thread of every channel"),
        || find().len() == CHANNELS.len(),
    )
    .await;
    find()
}

/// Tells imrelay, as Claude Code's hook does, that session `id` ended.
async fn session_ended(app: &TestApp, id: &str) {
    let body = json!({"session_id": id, "cwd": "/srv/shop", "hook_event_name": "SessionEnd",
        "transcript_path": "/tmp/t.jsonl", "permission_mode": "default", "reason": "exit"});
    let resp = app
        .client
        .post(app.url("/v1/hooks/claude-code"))
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::OK);
}

async fn click(
    fake: &FakeDiscord,
    n: u64,
    (thread, message, _): &(String, String, String),
    label: &str,
) -> Value {
    let m = fake.state.message(thread, message).unwrap();
    let cid = custom_id(&m, label);
    deliver(
        fake,
        component_click(&fake.state, n, APPROVER, thread, message, &cid, None),
    )
    .await
}

#[tokio::test]
async fn each_session_gets_a_thread_per_channel_and_a_click_in_either_answers_its_own() {
    let fake = FakeDiscord::start().await;
    fake.state
        .gateway
        .heartbeat_ms
        .store(1000, Ordering::SeqCst);
    let app = spawn_with(|s| {
        enable(s, &fake);
        s.discord.thread_per = ThreadPer::Session;
        s.discord.thread_replies = true;
    })
    .await;
    wait_until("a Gateway session", || fake.state.gateway.ready()).await;
    create(&app, "toolu_dt1", "echo one", "s-one", "/srv/shop").await;
    let one = in_threads(&fake, "toolu_dt1").await;
    create(&app, "toolu_dt2", "echo two", "s-two", "/srv/blog").await;
    let two = in_threads(&fake, "toolu_dt2").await;
    create(&app, "toolu_dt3", "echo three", "s-one", "/srv/shop").await;
    let three = in_threads(&fake, "toolu_dt3").await;
    for n in 0..CHANNELS.len() {
        assert_ne!(one[n].0, two[n].0, "two sessions, two threads");
        assert_eq!(one[n].0, three[n].0, "a session's prompts share its thread");
        // A thread starts from a message in its channel naming the agent, session, directory.
        for (copy, session, dir) in [
            (&one[n], "s-one", "/srv/shop"),
            (&two[n], "s-two", "/srv/blog"),
        ] {
            let root = fake.state.message(&copy.2, &copy.0).unwrap();
            // As a person reads it: Discord's markdown escapes dropped.
            let text = root["content"].as_str().unwrap().replace('\\', "");
            assert!(
                text.contains("Agent session: claude-code")
                    && text.contains(&format!("Session: {session}"))
                    && text.contains(&format!("Directory: {dir}")),
                "{text}"
            );
        }
    }
    assert_eq!(fake.state.threads.lock().unwrap().len(), 2 * CHANNELS.len());
    // A click in the second session's thread answers the second session's request only.
    click(&fake, 9001, &two[0], "Approve").await;
    eventually("the second request resolved", || async {
        (status(&app, "toolu_dt2").await == "resolved").then_some(())
    })
    .await;
    assert_eq!(status(&app, "toolu_dt1").await, "pending");
    assert_eq!(status(&app, "toolu_dt3").await, "pending");
    // The outcome is a reply to the prompt, in its thread (`thread_replies`).
    wait_until("the outcome as a reply", || {
        fake.state.messages_in(&two[0].0).iter().any(|(_, m)| {
            m["content"].as_str().unwrap_or("").contains("Allowed")
                && m.to_string().contains(&two[0].1)
        })
    })
    .await;
    // The first session ends: its threads are archived and locked at the next delivery.
    session_ended(&app, "s-one").await;
    click(&fake, 9002, &one[0], "Deny").await;
    wait_until("the first session's threads closed", || {
        let threads = fake.state.threads.lock().unwrap();
        one.iter()
            .all(|c| threads[&c.0]["thread_metadata"]["locked"] == true)
    })
    .await;
    let threads = fake.state.threads.lock().unwrap().clone();
    assert!(
        two.iter()
            .all(|c| threads[&c.0]["thread_metadata"]["archived"] == false)
    );
    app.stop().await;
}
