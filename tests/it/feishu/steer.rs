//! Replies that talk to an agent session on Feishu: a text message (`im.message.receive_v1`)
//! that replies to one of a session's cards (`parent_id`) or is in the session's thread
//! (`root_id`) answers its pending "finished" question, and otherwise is queued for the
//! session; the person is answered in a reply to their message; someone who may not answer
//! the session's route is refused.

use imrelay::agents::steer::OnFinish;
use imrelay::channels::threads::ThreadPer;
use reqwest::StatusCode;
use serde_json::json;

use super::*;
use crate::support::{
    TestApp, claude_session_start, claude_stop, continued_with, eventually, pending_one,
    queued_messages, spawn_with, wait_until,
};

/// `sender`'s text message in the group chat replying to `parent` (in the thread of `root`),
/// with the bot @-mentioned (in a group the bot receives only those), as the platform
/// delivers it; its message id.
async fn say(
    app: &TestApp,
    fake: &fake::FakeFeishu,
    sender: &str,
    (parent, root): (&str, &str),
    text: &str,
) -> String {
    let id = format!("om_in_{}", event_id());
    let thread = fake.state.written(&id, Some(parent));
    let mut message = json!({"message_id": id, "root_id": root, "parent_id": parent,
        "create_time": "1700000000000", "update_time": "1700000000000", "chat_id": CHAT,
        "chat_type": "group", "message_type": "text",
        "content": json!({"text": format!("@_user_1 {text}")}).to_string(),
        "mentions": [{"key": "@_user_1", "id": {"open_id": "ou_bot", "union_id": "on_bot", "user_id": ""},
            "name": "imrelay", "tenant_key": "tenant"}],
        "user_agent": "Mozilla/5.0 Lark/7.1.0"});
    if let Some(t) = thread {
        message["thread_id"] = json!(t);
    }
    let envelope = json!({
        "schema": "2.0",
        "header": {"event_id": event_id(), "token": VERIFICATION_TOKEN,
                   "create_time": "1700000000000", "event_type": "im.message.receive_v1",
                   "tenant_key": "tenant", "app_id": fake::APP_ID},
        "event": {
            "sender": {"sender_id": {"open_id": sender, "union_id": format!("on_{sender}"),
                "user_id": format!("u_{sender}")}, "sender_type": "user", "tenant_key": "tenant"},
            "message": message,
        }
    });
    let (status, _) = post_callback(app, &envelope).await;
    assert_eq!(status, StatusCode::OK);
    id
}

/// The text of the bot's reply to message `id`, once sent.
async fn answer_to(fake: &fake::FakeFeishu, id: &str) -> String {
    let find = || fake.state.replies().into_iter().find(|r| r.parent == id);
    wait_until(&format!("an answer to {id}"), || find().is_some()).await;
    let r = find().unwrap();
    assert_eq!(r.msg_type, "text");
    r.content["text"].as_str().unwrap().to_string()
}

#[tokio::test]
async fn a_reply_to_a_card_answers_the_finished_question_then_reaches_the_session() {
    let fake = fake::FakeFeishu::start().await;
    let app = spawn_with(|s| {
        enable(s, &fake);
        s.feishu.receivers.truncate(1);
        s.hooks.claude_code.on_finish = OnFinish::Ask;
        s.hooks.claude_code.finish_wait_secs = 60;
    })
    .await;
    let held = claude_stop(&app, "s-feishu");
    let id = pending_one(&app).await["id"].as_str().unwrap().to_string();
    let (card, _) = card_for(&fake, &id).await;
    // A reply to the pending "finished" question's card is its answer.
    say(&app, &fake, APPROVER, (&card, &card), "now run the tests").await;
    continued_with(held, "now run the tests").await;
    // Once answered, a reply is queued for the session and the person told in a reply.
    let m = say(&app, &fake, APPROVER, (&card, &card), "and then the linter").await;
    let told = answer_to(&fake, &m).await;
    assert!(
        told.starts_with("✉️ Queued for the claude-code session"),
        "{told}"
    );
    let queued = queued_messages(&app, "s-feishu").await;
    assert_eq!(queued.len(), 1, "{queued:?}");
    assert_eq!(queued[0]["text"], "and then the linter");
    assert_eq!(queued[0]["via"], "feishu");
    // A stranger is refused and told so; nothing more is queued.
    let m = say(&app, &fake, STRANGER, (&card, &card), "drop the table").await;
    let told = answer_to(&fake, &m).await;
    assert!(told.contains("may not message this session"), "{told}");
    assert_eq!(queued_messages(&app, "s-feishu").await.len(), 1);
    app.stop().await;
}

#[tokio::test]
async fn a_reply_in_a_sessions_thread_reaches_the_session() {
    let fake = fake::FakeFeishu::start().await;
    let app = spawn_with(|s| {
        enable(s, &fake);
        s.feishu.receivers.truncate(1);
        s.feishu.thread_per = ThreadPer::Session;
        s.feishu.locale = imrelay::channels::feishu::settings::Locale::ZhCn;
    })
    .await;
    claude_session_start(&app, "s-thread").await;
    let body = json!({"id": "toolu_fsteer", "tool_name": "Bash", "input": {"command": "make"},
        "session": "s-thread", "agent": "claude-code", "cwd": "/srv/shop"});
    let (s, created) = app.post("/v1/interactions", &body).await;
    assert_eq!(s, StatusCode::CREATED, "{created}");
    let root = eventually("the session's card in its thread", || async {
        fake.state
            .replies()
            .into_iter()
            .find(|r| r.msg_type == "interactive")
            .map(|r| r.parent)
    })
    .await;
    // A reply in the thread to its first message: said to the session, told in Chinese; the
    // approval stays pending.
    let m = say(&app, &fake, APPROVER, (&root, &root), "用预发环境").await;
    let told = answer_to(&fake, &m).await;
    assert!(told.starts_with("✉️ 已排队发给 claude-code 会话"), "{told}");
    let r = fake
        .state
        .replies()
        .into_iter()
        .find(|r| r.parent == m)
        .unwrap();
    assert!(r.thread_id.is_some(), "the answer stays in the thread");
    assert_eq!(
        queued_messages(&app, "s-thread").await[0]["text"],
        "用预发环境"
    );
    let (_, i) = app.get("/v1/interactions/toolu_fsteer").await;
    assert_eq!(i["status"], "pending", "{i}");
    app.stop().await;
}
