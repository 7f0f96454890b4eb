//! One reply thread per agent session on Feishu (`feishu.thread_per = "session"`): the first
//! prompt of a session is sent as a reply in the thread of a message naming the session
//! (`/im/v1/messages/{id}/reply` with `reply_in_thread`), every later one in that thread,
//! and a click on a card in either thread answers its own request.

use serde_json::{Value, json};

use super::*;
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

/// The reply carrying the card of interaction `id` in the chat's thread: (thread root, the
/// thread's id, the card).
async fn threaded_card(fake: &fake::FakeFeishu, id: &str) -> (String, String, Value) {
    let find = || {
        fake.state.replies().into_iter().find(|r| {
            r.msg_type == "interactive" && {
                let mut ids = Vec::new();
                find_all(
                    &r.content,
                    &|v| v["id"] == id && v.get("mac").is_some(),
                    &mut ids,
                );
                !ids.is_empty()
            }
        })
    };
    wait_until(&format!("a card for {id} in a thread"), || find().is_some()).await;
    let r = find().unwrap();
    assert!(r.reply_in_thread);
    assert!(!r.uuid.is_empty(), "a retried reply must not post twice");
    (r.parent, r.thread_id.unwrap(), r.content)
}

#[tokio::test]
async fn each_session_gets_a_reply_thread_and_a_click_in_either_answers_its_own() {
    let fake = fake::FakeFeishu::start().await;
    let app = spawn_with(|s| {
        enable(s, &fake);
        s.feishu.receivers.truncate(1);
        s.feishu.thread_per = ThreadPer::Session;
        s.feishu.thread_replies = true;
    })
    .await;
    create(&app, "toolu_ft1", "echo one", "s-one", "/srv/shop").await;
    let (root1, thread1, _) = threaded_card(&fake, "toolu_ft1").await;
    create(&app, "toolu_ft2", "echo two", "s-two", "/srv/blog").await;
    let (root2, thread2, card2) = threaded_card(&fake, "toolu_ft2").await;
    create(&app, "toolu_ft3", "echo three", "s-one", "/srv/shop").await;
    let (root3, _, _) = threaded_card(&fake, "toolu_ft3").await;
    assert_ne!(thread1, thread2, "two sessions, two threads");
    assert_eq!(root1, root3, "a session's prompts share its thread");
    // Each thread hangs under a text message naming the agent, the session and the directory.
    for (root, session, dir) in [
        (&root1, "s-one", "/srv/shop"),
        (&root2, "s-two", "/srv/blog"),
    ] {
        let first = fake
            .state
            .delivered()
            .into_iter()
            .find(|s| s.message_id.as_deref() == Some(root.as_str()))
            .unwrap();
        let text = first.card["text"].as_str().unwrap();
        assert!(
            text.contains("Agent session: claude-code")
                && text.contains(&format!("Session: {session}"))
                && text.contains(&format!("Directory: {dir}")),
            "{text}"
        );
    }
    // A click on the second session's card answers its request only.
    let approve = button_value(&card2, "approve");
    post_callback(&app, &click(&event_id(), APPROVER, &approve, None)).await;
    eventually("the second request resolved", || async {
        (status(&app, "toolu_ft2").await == "resolved").then_some(())
    })
    .await;
    assert_eq!(status(&app, "toolu_ft1").await, "pending");
    assert_eq!(status(&app, "toolu_ft3").await, "pending");
    // The outcome is said in the card's thread (`thread_replies`).
    wait_until("the outcome in the thread", || {
        fake.state.replies().iter().any(|r| {
            r.msg_type == "text"
                && r.thread_id.as_deref() == Some(thread2.as_str())
                && r.content["text"].as_str().unwrap_or("").contains("Allowed")
        })
    })
    .await;
    app.stop().await;
}

/// A text message `text` from `sender` in chat `chat`, as the platform delivers it.
fn message(chat: &str, sender: &str, text: &str) -> Value {
    json!({
        "schema": "2.0",
        "header": {"event_id": event_id(), "token": VERIFICATION_TOKEN,
                   "create_time": "1700000000000", "event_type": "im.message.receive_v1",
                   "tenant_key": "tenant", "app_id": fake::APP_ID},
        "event": {
            "sender": {"sender_id": {"open_id": sender, "user_id": format!("u_{sender}")}, "sender_type": "user"},
            "message": {"message_id": format!("om_in_{}", event_id()), "chat_id": chat, "chat_type": "group",
                        "message_type": "text",
                        "content": json!({"text": format!("@_user_1 {text}")}).to_string(),
                        "mentions": [{"key": "@_user_1", "name": "imrelay"}]}
        }
    })
}

#[tokio::test]
async fn sessions_lists_the_chats_agent_sessions_to_an_approver_only() {
    let fake = fake::FakeFeishu::start().await;
    let app = spawn_with(|s| enable(s, &fake)).await;
    crate::support::claude_session_start(&app, "s-feishu").await;
    let answers = || -> Vec<String> {
        fake.state
            .delivered()
            .into_iter()
            .filter(|s| s.receive_id == CHAT)
            .filter_map(|s| s.card["text"].as_str().map(str::to_string))
            .collect()
    };
    let (s, _) = post_callback(&app, &message(CHAT, APPROVER, "/sessions")).await;
    assert_eq!(s, StatusCode::OK);
    wait_until("the listing", || !answers().is_empty()).await;
    let listed = &answers()[0];
    assert!(
        listed.starts_with("Sessions")
            && listed.contains("claude-code")
            && listed.contains("/srv/shop"),
        "{listed}"
    );
    post_callback(&app, &message(CHAT, STRANGER, "sessions")).await;
    wait_until("the refusal", || answers().len() == 2).await;
    assert_eq!(answers()[1], "Only approvers can list the sessions.");
    app.stop().await;
}
