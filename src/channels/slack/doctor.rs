//! `imrelay doctor`'s checks of the Slack channel: the bot token passes `auth.test`, the
//! app-level token opens a Socket Mode URL, approvers are set, and with `--send-test` each
//! conversation gets a test message. (`imrelay doctor` escapes every line it prints.)

use serde_json::json;

use crate::channels::registry::{Check, Doctor};

use super::SlackSettings;

/// The checks of `s` (an enabled section).
pub(super) async fn checks(s: &SlackSettings, run: &Doctor) -> Vec<Check> {
    let mut checks = Vec::new();
    check(s, run, &mut checks).await;
    checks
}

async fn check(s: &SlackSettings, run: &Doctor, checks: &mut Vec<Check>) {
    use crate::channels::slack::Mode;
    use crate::channels::slack::api::{NewMessage, WebApi};
    let send_test = run.send_test;
    let channels = || s.channels.iter().map(|c| format!("conversation {c}"));
    let api = match WebApi::new(&s.api_base(), s.bot_token.clone(), s.app_token.clone()) {
        Ok(api) => api,
        Err(e) => {
            checks.push(Check::fail(format!("Slack: {e}"), "fix slack.api_url"));
            run.untried("Slack", channels(), checks);
            return;
        }
    };
    match api.auth_test().await {
        Ok(who) => checks.push(Check::pass(format!(
            "Slack: the bot token works (bot {} in workspace {})",
            who.user, who.team
        ))),
        Err(e) => {
            checks.push(Check::fail(
                format!("Slack: auth.test refused the bot token: {e}"),
                "check slack.bot_token (xoxb-..., OAuth & Permissions) and that the app is installed in the workspace",
            ));
            run.untried("Slack", channels(), checks);
            return;
        }
    }
    if s.mode == Mode::SocketMode {
        match api.connections_open().await {
            Ok(_) => checks.push(Check::pass(
                "Slack: the app-level token opens Socket Mode connections",
            )),
            Err(e) => checks.push(Check::fail(
                format!("Slack: apps.connections.open failed: {e}"),
                "check slack.app_token (xapp-..., scope connections:write) and that Socket Mode is on in the app's settings",
            )),
        }
    }
    if s.approvers.is_empty() {
        checks.push(Check::fail(
            "Slack: no approvers, so nobody can answer",
            "add your Slack user id (U...) to slack.approvers (profile → ⋮ → Copy member ID)",
        ));
    } else {
        checks.push(Check::pass(format!(
            "Slack: {} approver(s)",
            s.approvers.len()
        )));
    }
    if !send_test {
        return;
    }
    let blocks = json!([{"type": "section", "text": {"type": "plain_text",
        "text": "✅ This conversation receives imrelay's approvals and questions."}}]);
    for channel in &s.channels {
        let message = NewMessage {
            channel,
            text: "imrelay doctor: test message",
            blocks: Some(&blocks),
            thread_ts: None,
        };
        match api.post_message(&message).await {
            Ok(_) => checks.push(Check::pass(format!(
                "Slack: conversation {} received a test message",
                channel
            ))),
            Err(e) => checks.push(Check::fail(
                format!(
                    "Slack: conversation {} did not take a test message: {e}",
                    channel
                ),
                "invite the bot to that conversation (/invite @yourbot), and give it the chat:write scope",
            )),
        }
    }
}
