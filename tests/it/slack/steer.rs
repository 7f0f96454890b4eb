//! Replies that talk to an agent session on Slack: a thread reply (`message` with a
//! `thread_ts`, as the Events API delivers it) under one of a session's messages answers its
//! pending "finished" question, and otherwise is queued for the session; a person who may
//! not answer the session's route is refused, and a reply delivered again is taken once.

use imrelay::agents::steer::OnFinish;
use imrelay::channels::threads::ThreadPer;
use reqwest::StatusCode;
use serde_json::{Value, json};

use super::channel::{APPROVER, STRANGER, connected, enable, posted};
use super::fake::{CHANNELS, FakeSlack};
use crate::support::{
    claude_session_start, claude_stop, continued_with, eventually, pending_one, queued_messages,
    spawn_with, wait_until,
};

/// An Events API envelope with a `message` event: `user`'s `text` in the thread of `thread`
/// in `channel`, event number `n` (a redelivery keeps the event's id and ts).
fn thread_reply(n: u32, retry: u64, user: &str, channel: &str, thread: &str, text: &str) -> Value {
    let ts = format!("1700000500.{n:06}");
    json!({"envelope_id": format!("env-steer-{n}-{retry}"), "type": "events_api",
        "accepts_response_payload": false, "retry_attempt": retry,
        "retry_reason": if retry > 0 { "timeout" } else { "" },
        "payload": {"token": "legacy-verification-token", "team_id": "T0TEAM", "api_app_id": "A0APP",
            "event": {"type": "message", "channel": channel, "user": user, "text": text,
                "ts": ts, "thread_ts": thread, "parent_user_id": "U0BOT",
                "channel_type": "channel", "event_ts": ts,
                "client_msg_id": format!("5b7c0a4e-0000-4000-8000-{n:012}")},
            "type": "event_callback", "event_id": format!("Ev0STEER{n}"), "event_time": 1700000500}})
}

/// The ephemeral notices `user` was shown.
fn notices(fake: &FakeSlack, user: &str) -> Vec<String> {
    fake.state
        .calls("chat.postEphemeral")
        .iter()
        .filter(|c| c.body["user"] == user)
        .map(|c| c.body["text"].as_str().unwrap_or_default().to_string())
        .collect()
}

#[tokio::test]
async fn a_thread_reply_answers_the_finished_question_then_reaches_the_session() {
    let fake = FakeSlack::start().await;
    let app = spawn_with(|s| {
        enable(s, &fake);
        s.hooks.claude_code.on_finish = OnFinish::Ask;
        s.hooks.claude_code.finish_wait_secs = 60;
    })
    .await;
    let conn = connected(&fake).await;
    let held = claude_stop(&app, "s-slack");
    let id = pending_one(&app).await["id"].as_str().unwrap().to_string();
    let copies = posted(&fake, &id).await;
    let (channel, ts) = (&copies[0].0, &copies[0].1);
    // A reply in the prompt's thread answers the pending "finished" question.
    let answer = thread_reply(1, 0, APPROVER, channel, ts, "<@U0BOT> now run the tests");
    fake.state.sockets.deliver(conn, &answer);
    continued_with(held, "now run the tests").await;
    // Once answered, a reply is a message to the session, queued, and the person told when
    // it reaches the agent.
    let msg = thread_reply(2, 0, APPROVER, channel, ts, "and then the linter");
    fake.state.sockets.deliver(conn, &msg);
    wait_until("the queued notice", || {
        notices(&fake, APPROVER).iter().any(|t| {
            t.starts_with(
                "✉️ Queued for the claude-code session: it reaches the agent at its next step",
            )
        })
    })
    .await;
    let queued = queued_messages(&app, "s-slack").await;
    assert_eq!(queued.len(), 1, "{queued:?}");
    assert_eq!(queued[0]["text"], "and then the linter");
    assert_eq!(queued[0]["via"], "slack");
    assert_eq!(queued[0]["delivered_at"], Value::Null);
    // The same event delivered again (a retry) is taken once.
    fake.state.sockets.deliver(
        conn,
        &thread_reply(2, 1, APPROVER, channel, ts, "and then the linter"),
    );
    wait_until("the retry acknowledged", || {
        !fake.state.sockets.acks_of("env-steer-2-1").is_empty()
    })
    .await;
    // Someone who may not answer the route is refused, told so, and the queue is unchanged.
    let stranger = thread_reply(3, 0, STRANGER, channel, ts, "drop the table");
    fake.state.sockets.deliver(conn, &stranger);
    wait_until("the refusal", || {
        notices(&fake, STRANGER)
            .iter()
            .any(|t| t.contains("may not message this session"))
    })
    .await;
    assert_eq!(queued_messages(&app, "s-slack").await.len(), 1);
    let (_, audit) = app.get("/v1/audit?limit=1000").await;
    assert!(
        audit.to_string().contains("may not message its sessions"),
        "{audit}"
    );
    app.stop().await;
}

#[tokio::test]
async fn a_reply_in_a_sessions_thread_reaches_the_session_and_other_threads_are_left_alone() {
    let fake = FakeSlack::start().await;
    let app = spawn_with(|s| {
        enable(s, &fake);
        s.slack.thread_per = ThreadPer::Session;
    })
    .await;
    let conn = connected(&fake).await;
    // The session is known from its agent's hook, then asks for an approval.
    claude_session_start(&app, "s-thread").await;
    let body = json!({"id": "toolu_steer1", "tool_name": "Bash", "input": {"command": "make"},
        "session": "s-thread", "agent": "claude-code", "cwd": "/srv/shop"});
    let (s, created) = app.post("/v1/interactions", &body).await;
    assert_eq!(s, StatusCode::CREATED, "{created}");
    let copies = posted(&fake, "toolu_steer1").await;
    let root = fake.state.message(&copies[0].0, &copies[0].1).unwrap()["thread_ts"]
        .as_str()
        .unwrap()
        .to_string();
    // Any reply in the session's thread (Slack names its first message) is said to it;
    // the approval stays pending.
    // "Also send to #channel" (`thread_broadcast`) is a reply too.
    let mut msg = thread_reply(
        4,
        0,
        APPROVER,
        CHANNELS[0],
        &root,
        "use the staging database",
    );
    msg["payload"]["event"]["subtype"] = json!("thread_broadcast");
    fake.state.sockets.deliver(conn, &msg);
    eventually("the message queued", || async {
        let m = queued_messages(&app, "s-thread").await;
        (m.len() == 1).then_some(m)
    })
    .await;
    let (_, i) = app.get("/v1/interactions/toolu_steer1").await;
    assert_eq!(i["status"], "pending", "{i}");
    // A thread under a message that is no session's is a conversation: nothing happens.
    let other = thread_reply(5, 0, APPROVER, CHANNELS[0], "1600000000.000001", "lunch?");
    fake.state.sockets.deliver(conn, &other);
    wait_until("acknowledged", || {
        !fake.state.sockets.acks_of("env-steer-5-0").is_empty()
    })
    .await;
    assert_eq!(queued_messages(&app, "s-thread").await.len(), 1);
    assert!(
        notices(&fake, APPROVER).len() == 1,
        "{:?}",
        notices(&fake, APPROVER)
    );
    app.stop().await;
}

#[tokio::test]
async fn a_reply_under_a_sessions_digest_reaches_the_session_and_answers_none_of_it() {
    let fake = FakeSlack::start().await;
    let app = spawn_with(|s| {
        enable(s, &fake);
        s.slack.channels = vec![CHANNELS[0].to_string()];
        s.slack.digest_after = 1;
    })
    .await;
    let conn = connected(&fake).await;
    claude_session_start(&app, "s-digest").await;
    for k in 0..3 {
        let body = json!({"id": format!("toolu_sd{k}"), "tool_name": "Bash",
            "input": {"command": format!("step-{k}")}, "session": "s-digest",
            "agent": "claude-code", "cwd": "/srv/shop"});
        let (s, created) = app.post("/v1/interactions", &body).await;
        assert_eq!(s, StatusCode::CREATED, "{created}");
    }
    // The first is posted on its own, the two past `digest_after` in the session's digest.
    let (channel, ts) = super::channel::digest_of(&fake, "s-digest").await;
    let msg = thread_reply(6, 0, APPROVER, &channel, &ts, "stop after step-1");
    fake.state.sockets.deliver(conn, &msg);
    let queued = eventually("the message queued", || async {
        let m = queued_messages(&app, "s-digest").await;
        (m.len() == 1).then_some(m)
    })
    .await;
    assert_eq!(queued[0]["text"], "stop after step-1");
    assert_eq!(queued[0]["via"], "slack");
    // It answered none of the requests the digest lists.
    for k in 0..3 {
        let (_, i) = app.get(&format!("/v1/interactions/toolu_sd{k}")).await;
        assert_eq!(i["status"], "pending", "{i}");
    }
    // Someone who may not answer the route is refused, told so, and nothing is queued.
    let stranger = thread_reply(7, 0, STRANGER, &channel, &ts, "drop the table");
    fake.state.sockets.deliver(conn, &stranger);
    wait_until("the refusal", || {
        notices(&fake, STRANGER)
            .iter()
            .any(|t| t.contains("may not message this session"))
    })
    .await;
    assert_eq!(queued_messages(&app, "s-digest").await.len(), 1);
    app.stop().await;
}
