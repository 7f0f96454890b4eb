//! Route escalation on the channels whose own modules do not cover it (Slack, webhooks,
//! DingTalk), each against its fake on loopback and on a paused clock: nothing goes to the
//! escalation's place before its time; after it, one copy goes there saying why; the
//! escalation's approvers may answer on it, and every copy shows the outcome. (Telegram's and
//! Feishu's are in their own modules.)

use std::time::Duration;

use imrelay::config::Settings;
use imrelay::config::teams::{EscalateTo, PersonSettings, RouteSettings};
use serde_json::{Value, json};

mod dingtalk;
mod slack;
mod webhook;

/// What an escalated copy says (in English).
pub(crate) const ESCALATED: &str = "escalated: nobody on shop answered in 5 min";

/// Moves the clock `secs` forward (the registry's timers fire as if that time had passed),
/// then lets it run again for the HTTP that follows.
pub(crate) async fn jump(secs: u64) {
    tokio::time::pause();
    tokio::time::advance(Duration::from_secs(secs)).await;
    tokio::time::resume();
    for _ in 0..50 {
        tokio::task::yield_now().await;
    }
}

/// Alice and Bob, with the channel ids `alice` and `bob` give them.
pub(crate) fn people(alice: PersonSettings, bob: PersonSettings) -> Vec<PersonSettings> {
    vec![
        PersonSettings {
            name: "alice".into(),
            ..alice
        },
        PersonSettings {
            name: "bob".into(),
            ..bob
        },
    ]
}

/// The shop's requests go where `route` says, answered by Alice; after five minutes
/// unanswered they go where `to` says too, and Bob may answer them as well.
pub(crate) fn shop(s: &mut Settings, route: RouteSettings, to: EscalateTo) {
    s.routes = vec![RouteSettings {
        name: "shop".into(),
        cwd: vec!["/srv/shop/**".into()],
        approvers: vec!["alice".into()],
        timeout_secs: Some(3600),
        escalate_after_secs: Some(300),
        escalate_to: Some(EscalateTo {
            approvers: vec!["bob".into()],
            ..to
        }),
        ..route
    }];
}

/// A tool call from the shop's directory.
pub(crate) fn call(id: &str, command: &str) -> Value {
    json!({"id": id, "tool_name": "Bash", "input": {"command": command},
           "agent": "claude-code", "cwd": "/srv/shop"})
}
