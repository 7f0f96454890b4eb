//! `/whoami` and `/sessions` on Discord: registered as the application's global commands at
//! start-up (`PUT /applications/{id}/commands`, checked by the fake as Discord checks it),
//! and answered with an ephemeral message when used.

use std::sync::atomic::Ordering;

use serde_json::Value;

use super::channel::{APPROVER, STRANGER, deliver, enable};
use super::fake::{CHANNELS, FakeDiscord, command_use};
use crate::support::{spawn_with, wait_until};

/// The text of an ephemeral answer, as a person reads it (markdown escapes dropped).
fn ephemeral(response: &Value) -> String {
    assert_eq!(response["type"], 4, "{response}");
    assert_eq!(
        response["data"]["flags"], 64,
        "only the person sees it: {response}"
    );
    response["data"]["content"]
        .as_str()
        .unwrap_or_default()
        .replace('\\', "")
}

#[tokio::test]
async fn whoami_and_sessions_are_commands_answered_to_the_person_alone() {
    let fake = FakeDiscord::start().await;
    fake.state
        .gateway
        .heartbeat_ms
        .store(1000, Ordering::SeqCst);
    let app = spawn_with(|s| enable(s, &fake)).await;
    wait_until("a Gateway session", || fake.state.gateway.ready()).await;
    wait_until("the commands registered", || {
        let names: Vec<String> = fake
            .state
            .commands
            .lock()
            .unwrap()
            .iter()
            .map(|c| c["name"].as_str().unwrap_or_default().to_string())
            .collect();
        names == ["whoami", "sessions"]
    })
    .await;
    let who = ephemeral(
        &deliver(
            &fake,
            command_use(&fake.state, 7001, STRANGER, CHANNELS[0], "whoami"),
        )
        .await,
    );
    assert!(
        who.contains(&format!("(for discord.chats): {}", CHANNELS[0]))
            && who.contains(&format!("(for discord.approvers): {STRANGER}")),
        "{who}"
    );
    // A session Claude Code reported is listed to an approver, not to anyone else.
    crate::support::claude_session_start(&app, "s-disc").await;
    let listed = ephemeral(
        &deliver(
            &fake,
            command_use(&fake.state, 7002, APPROVER, CHANNELS[0], "sessions"),
        )
        .await,
    );
    assert!(
        listed.starts_with("Sessions")
            && listed.contains("claude-code")
            && listed.contains("/srv/shop"),
        "{listed}"
    );
    let refused = ephemeral(
        &deliver(
            &fake,
            command_use(&fake.state, 7003, STRANGER, CHANNELS[0], "sessions"),
        )
        .await,
    );
    assert_eq!(refused, "Only approvers can list the sessions.");
    app.stop().await;
}
