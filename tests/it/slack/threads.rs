//! One thread per agent session on Slack (`slack.thread_per = "session"`): the first prompt of
//! a session in a conversation is posted under a message that names the session, every
//! later one in that thread (`thread_ts`), and a click in either thread answers its own.

use serde_json::{Value, json};

use super::channel::{APPROVER, click, connected, enable, message, posted};
use super::fake::{CHANNELS, FakeSlack};
use crate::support::{TestApp, eventually, spawn_with, wait_until};
use imrelay::channels::threads::ThreadPer;
use reqwest::StatusCode;

async fn create(app: &TestApp, id: &str, command: &str, session: &str, cwd: &str) {
    let body = json!({"id": id, "tool_name": "Bash", "input": {"command": command},
        "session": session, "agent": "claude-code", "cwd": cwd});
    let (s, created) = app.post("/v1/interactions", &body).await;
    assert_eq!(s, StatusCode::CREATED, "{created}");
}

async fn status(app: &TestApp, id: &str) -> Value {
    app.get(&format!("/v1/interactions/{id}")).await.1
}

/// The thread a copy was posted in.
fn thread_of(fake: &FakeSlack, at: &(String, String)) -> String {
    message(fake, at)["thread_ts"]
        .as_str()
        .unwrap_or_else(|| panic!("not in a thread: {at:?}"))
        .to_string()
}

#[tokio::test]
async fn each_session_gets_a_thread_per_conversation_and_a_click_in_either_answers_its_own() {
    let fake = FakeSlack::start().await;
    let app = spawn_with(|s| {
        enable(s, &fake);
        s.slack.thread_per = ThreadPer::Session;
        s.slack.thread_replies = true;
    })
    .await;
    let conn = connected(&fake).await;
    create(&app, "toolu_th1", "echo one", "s-one", "/srv/shop").await;
    let one = posted(&fake, "toolu_th1").await;
    create(&app, "toolu_th2", "echo two", "s-two", "/srv/blog").await;
    let two = posted(&fake, "toolu_th2").await;
    create(&app, "toolu_th3", "echo three", "s-one", "/srv/shop").await;
    let three = posted(&fake, "toolu_th3").await;
    for n in 0..CHANNELS.len() {
        let (t1, t2, t3) = (
            thread_of(&fake, &one[n]),
            thread_of(&fake, &two[n]),
            thread_of(&fake, &three[n]),
        );
        assert_ne!(t1, t2);
        assert_eq!(t1, t3, "a session's prompts share its thread");
        // Each thread opens with a message naming the agent, the session and the directory.
        for (t, session, dir) in [(&t1, "s-one", "/srv/shop"), (&t2, "s-two", "/srv/blog")] {
            let root = fake.state.message(CHANNELS[n], t).unwrap();
            let text = root["text"].as_str().unwrap();
            assert!(
                text.contains("Agent session: claude-code")
                    && text.contains(&format!("Session: {session}"))
                    && text.contains(&format!("Directory: {dir}")),
                "{text}"
            );
        }
    }
    // A click in the second session's thread answers the second session's request only.
    click(&fake, conn, APPROVER, &two[0], "allow").await;
    eventually("the second request resolved", || async {
        (status(&app, "toolu_th2").await["status"] == "resolved").then_some(())
    })
    .await;
    assert_eq!(status(&app, "toolu_th1").await["status"], "pending");
    assert_eq!(status(&app, "toolu_th3").await["status"], "pending");
    // The outcome is said in the thread, under its first message (Slack threads are one
    // level deep).
    let root = thread_of(&fake, &two[0]);
    wait_until("the outcome in the thread", || {
        fake.state.calls("chat.postMessage").iter().any(|c| {
            c.body["channel"] == CHANNELS[0]
                && c.body["thread_ts"] == root.as_str()
                && c.body["text"].as_str().unwrap_or("").contains("Allowed")
        })
    })
    .await;
    app.stop().await;
}
