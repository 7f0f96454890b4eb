//! One forum topic per agent session (`telegram.thread_per = "session"`) against the fake Bot
//! API, which refuses what Telegram refuses: a topic in a chat whose topics are off, a name
//! outside 1–128 characters, a message into a topic never made or closed, closing one twice.

use super::*;
use imrelay::channels::threads::ThreadPer;

/// A supergroup with topics on.
const FORUM: i64 = -1_003_001;

fn in_session(command: &str, session: &str, cwd: &str) -> Value {
    json!({"tool_name": "Bash", "input": {"command": command}, "session": session,
        "agent": "claude-code", "cwd": cwd})
}

/// The topic a posted message went into.
fn topic(p: &Posted) -> i64 {
    p.params["message_thread_id"]
        .as_i64()
        .unwrap_or_else(|| panic!("posted outside a topic: {:?}", p.params))
}

/// Tells imrelay, as Claude Code's hook does, that session `id` ended.
async fn session_ended(app: &TestApp, id: &str, cwd: &str) {
    let body = json!({"session_id": id, "cwd": cwd, "hook_event_name": "SessionEnd",
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

#[tokio::test]
async fn each_session_gets_a_topic_and_an_answer_in_either_resolves_its_own() {
    let (app, tg) = start_with(Mode::Webhook, |s| {
        s.telegram.chats = vec![FORUM];
        s.telegram.thread_per = ThreadPer::Session;
        s.telegram.thread_replies = true;
    })
    .await;
    tg.forum(FORUM);
    let one = create(&app, in_session("echo one", "s-one", "/srv/shop")).await;
    let p1 = prompt(&tg, FORUM, "echo one").await;
    let two = create(&app, in_session("echo two", "s-two", "/srv/blog")).await;
    let p2 = prompt(&tg, FORUM, "echo two").await;
    let (t1, t2) = (topic(&p1), topic(&p2));
    assert_ne!(t1, t2);
    // Each topic is named after its session and opens with which agent, session, directory.
    let names: Vec<String> = tg
        .calls("createForumTopic")
        .iter()
        .map(|c| c.params["name"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(
        names,
        ["claude-code · shop · s-one", "claude-code · blog · s-two"]
    );
    for (t, session, dir) in [(t1, "s-one", "/srv/shop"), (t2, "s-two", "/srv/blog")] {
        let first = tg
            .calls("sendMessage")
            .into_iter()
            .find(|c| c.params["message_thread_id"] == t)
            .unwrap();
        let text = first.params["text"].as_str().unwrap();
        assert!(
            text.contains("Agent session: claude-code")
                && text.contains(&format!("Session: {session}"))
                && text.contains(&format!("Directory: {dir}")),
            "{text}"
        );
    }
    // The session's next prompt goes into its topic; no new topic is made.
    let three = create(&app, in_session("echo three", "s-one", "/srv/shop")).await;
    let p3 = prompt(&tg, FORUM, "echo three").await;
    assert_eq!(topic(&p3), t1);
    assert_eq!(tg.calls("createForumTopic").len(), 2);
    // An answer in the second topic resolves the second session's request only.
    assert_eq!(
        tap_on(&app, &tg, ALICE, &p2, &p2.button("✅ Allow")).await,
        "Allowed"
    );
    assert_eq!(status(&app, &two).await["status"], "resolved");
    assert_eq!(status(&app, &one).await["status"], "pending");
    assert_eq!(status(&app, &three).await["status"], "pending");
    // The outcome is a reply to the prompt, in its topic (`thread_replies`).
    let replies = tg
        .wait_for("sendMessage", |c| {
            c.iter()
                .any(|c| c.params["reply_parameters"]["message_id"] == p2.message_id)
        })
        .await;
    let reply = replies
        .iter()
        .find(|c| c.params["reply_parameters"]["message_id"] == p2.message_id)
        .unwrap();
    assert_eq!(reply.params["message_thread_id"], t2, "{:?}", reply.params);
    assert!(reply.params["text"].as_str().unwrap().contains("Allowed"));
    // The first session ends: its topic is closed at the next delivery; the other stays open.
    session_ended(&app, "s-one", "/srv/shop").await;
    tap_on(&app, &tg, ALICE, &p1, &p1.button("❌ Deny")).await;
    tg.wait_for("closeForumTopic", |c| !c.is_empty()).await;
    assert_eq!(tg.topic_closed(FORUM, t1), Some(true));
    assert_eq!(tg.topic_closed(FORUM, t2), Some(false));
    app.stop().await;
}

#[tokio::test]
async fn a_sessions_topic_survives_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("imrelay.db");
    let (s, tg) = setup(Mode::Webhook, |s| {
        s.telegram.chats = vec![FORUM];
        s.telegram.thread_per = ThreadPer::Session;
    })
    .await;
    tg.forum(FORUM);
    let first = spawn_on(s.clone(), open_sqlite(&path).await).await;
    create(&first, in_session("echo before", "s-one", "/srv/shop")).await;
    let before = prompt(&tg, FORUM, "echo before").await;
    first.stop().await;

    let second = spawn_on(s, open_sqlite(&path).await).await;
    create(&second, in_session("echo after", "s-one", "/srv/shop")).await;
    let after = prompt(&tg, FORUM, "echo after").await;
    assert_eq!(topic(&after), topic(&before));
    assert_eq!(tg.calls("createForumTopic").len(), 1);
    second.stop().await;
}

#[tokio::test]
async fn a_group_without_topics_gets_the_prompt_in_the_chat() {
    let (app, tg) = start_with(Mode::Webhook, |s| {
        s.telegram.chats = vec![GROUP];
        s.telegram.thread_per = ThreadPer::Session;
    })
    .await;
    create(&app, in_session("echo plain", "s-one", "/srv/shop")).await;
    let p = prompt(&tg, GROUP, "echo plain").await;
    assert!(p.params["message_thread_id"].is_null(), "{:?}", p.params);
    // Telegram refused the topic, as it does in a group whose topics are off.
    let refused = tg.take_refusals();
    assert!(
        refused
            .iter()
            .all(|(m, why)| m == "createForumTopic" && why.contains("not a forum")),
        "{refused:?}"
    );
    assert!(!refused.is_empty());
    app.stop().await;
}
