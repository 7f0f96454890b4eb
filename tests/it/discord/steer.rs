//! Replies that talk to an agent session on Discord: a `MESSAGE_CREATE` replying to one of a
//! session's messages (a `message_reference`), or written in the session's thread, answers
//! its pending "finished" question and otherwise is queued for the session; the person is
//! answered in a reply; someone who may not answer the session's route is refused; a reply
//! whose text Discord withheld (its @mention off, no Message Content intent) is told why.

use imrelay::agents::steer::OnFinish;
use imrelay::channels::threads::ThreadPer;
use reqwest::StatusCode;
use serde_json::json;

use super::channel::{APPROVER, STRANGER, posted, start_with};
use super::fake::{CHANNELS, FakeDiscord, message_create};
use crate::support::{
    claude_session_start, claude_stop, continued_with, eventually, pending_one, queued_messages,
    wait_until,
};

/// Dispatches `user`'s message in `channel` (replying to `to`, @mention on or off); its id.
fn say(
    fake: &FakeDiscord,
    user: &str,
    channel: &str,
    to: Option<&str>,
    ping: bool,
    text: &str,
) -> String {
    let m = message_create(&fake.state, user, channel, to, ping, text);
    fake.state.gateway.dispatch("MESSAGE_CREATE", m.clone());
    m["id"].as_str().unwrap().to_string()
}

/// The bot's answer to message `id` in `channel`, once posted.
async fn answer_to(fake: &FakeDiscord, channel: &str, id: &str) -> String {
    let find = || {
        fake.state
            .messages_in(channel)
            .into_iter()
            .find(|(_, m)| m["message_reference"]["message_id"] == id)
            .map(|(_, m)| m)
    };
    wait_until(&format!("an answer to {id}"), || find().is_some()).await;
    let m = find().unwrap();
    assert_eq!(m["allowed_mentions"], json!({"parse": []}), "{m}");
    // What the person reads: Discord shows the escaped markdown as plain text.
    m["content"].as_str().unwrap().replace('\\', "")
}

#[tokio::test]
async fn a_reply_answers_the_finished_question_then_reaches_the_session() {
    let (fake, app) = start_with(|s| {
        s.hooks.claude_code.on_finish = OnFinish::Ask;
        s.hooks.claude_code.finish_wait_secs = 60;
    })
    .await;
    let held = claude_stop(&app, "s-discord");
    let id = pending_one(&app).await["id"].as_str().unwrap().to_string();
    let copies = posted(&fake, &id).await;
    let (channel, prompt) = (&copies[0].0, &copies[0].1);
    // A reply to the pending "finished" question is its answer: the turn goes on with it.
    say(
        &fake,
        APPROVER,
        channel,
        Some(prompt),
        true,
        "now run the tests",
    );
    continued_with(held, "now run the tests").await;
    // Once answered, a reply is queued for the session, and the person told in a reply.
    let m = say(
        &fake,
        APPROVER,
        channel,
        Some(prompt),
        true,
        "and then the linter",
    );
    let told = answer_to(&fake, channel, &m).await;
    assert!(
        told.starts_with("✉️ Queued for the claude-code session"),
        "{told}"
    );
    let queued = queued_messages(&app, "s-discord").await;
    assert_eq!(queued.len(), 1, "{queued:?}");
    assert_eq!(queued[0]["text"], "and then the linter");
    assert_eq!(queued[0]["by"], "Alice");
    assert_eq!(queued[0]["via"], "discord");
    // A stranger is refused and told so; nothing is queued.
    let m = say(
        &fake,
        STRANGER,
        channel,
        Some(prompt),
        true,
        "drop the table",
    );
    let told = answer_to(&fake, channel, &m).await;
    assert!(told.contains("may not message this session"), "{told}");
    // A reply with its @mention off reaches the bot without its text: told to keep it on.
    let m = say(
        &fake,
        APPROVER,
        channel,
        Some(prompt),
        false,
        "and the docs",
    );
    let told = answer_to(&fake, channel, &m).await;
    assert!(told.contains("@mention on"), "{told}");
    assert_eq!(queued_messages(&app, "s-discord").await.len(), 1);
    // A reply to a message that is no session's is a conversation: nothing is said.
    let m = say(&fake, APPROVER, CHANNELS[1], None, false, "lunch?");
    let m2 = say(
        &fake,
        APPROVER,
        channel,
        Some(&m),
        true,
        "<@1000000000000000001> hi",
    );
    let last = say(&fake, APPROVER, channel, Some(prompt), true, "last one");
    answer_to(&fake, channel, &last).await;
    assert!(
        fake.state
            .messages_in(channel)
            .iter()
            .all(|(_, b)| b["message_reference"]["message_id"] != m2.as_str()),
        "{:?}",
        fake.state.messages_in(channel)
    );
    app.stop().await;
}

#[tokio::test]
async fn a_message_in_a_sessions_thread_reaches_the_session() {
    let (fake, app) = start_with(|s| s.discord.thread_per = ThreadPer::Session).await;
    claude_session_start(&app, "s-thread").await;
    let body = json!({"id": "toolu_dsteer", "tool_name": "Bash", "input": {"command": "make"},
        "session": "s-thread", "agent": "claude-code", "cwd": "/srv/shop"});
    let (s, created) = app.post("/v1/interactions", &body).await;
    assert_eq!(s, StatusCode::CREATED, "{created}");
    let thread = eventually("the session's thread", || async {
        fake.state.threads.lock().unwrap().keys().next().cloned()
    })
    .await;
    // A message in the thread, replying to nothing, mentioning the bot: said to the session;
    // the approval stays pending.
    let m = say(
        &fake,
        APPROVER,
        &thread,
        None,
        false,
        "<@1000000000000000001> use staging",
    );
    let told = answer_to(&fake, &thread, &m).await;
    assert!(told.starts_with("✉️ Queued"), "{told}");
    // One that mentions no one comes without its text: left alone, nothing said.
    let chat = say(&fake, STRANGER, &thread, None, false, "shall we get lunch?");
    let last = say(
        &fake,
        APPROVER,
        &thread,
        None,
        false,
        "<@1000000000000000001> and lint",
    );
    answer_to(&fake, &thread, &last).await;
    assert!(
        fake.state
            .messages_in(&thread)
            .iter()
            .all(|(_, b)| b["message_reference"]["message_id"] != chat.as_str())
    );
    assert_eq!(queued_messages(&app, "s-thread").await.len(), 2);
    let queued = queued_messages(&app, "s-thread").await;
    assert_eq!(queued[0]["text"], "use staging", "{queued:?}");
    let (_, i) = app.get("/v1/interactions/toolu_dsteer").await;
    assert_eq!(i["status"], "pending", "{i}");
    app.stop().await;
}
