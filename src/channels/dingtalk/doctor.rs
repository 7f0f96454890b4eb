//! `imrelay doctor`'s checks of the DingTalk channel: the app credentials get an access
//! token, the Stream gateway hands out a connection, approvers and groups are set, and with
//! `--send-test` each group gets a test card drawn with the configured template.
//! (`imrelay doctor` escapes every line it prints.)

use serde_json::{Map, Value};

use super::DingTalkSettings;
use super::api::{ApiError, OpenApi, Space};
use super::stream::{CARD_CALLBACK_TOPIC, Gateway, StreamError};
use crate::channels::registry::{Check, Doctor};

/// The checks of `s` (an enabled section).
pub(super) async fn checks(s: &DingTalkSettings, run: &Doctor) -> Vec<Check> {
    let mut checks = Vec::new();
    check(s, run, &mut checks).await;
    checks
}

/// The variables of the test card.
fn test_card() -> Map<String, Value> {
    let mut p = Map::new();
    for (k, v) in [
        ("title", "imrelay doctor"),
        ("status", "allowed"),
        ("kind", "approval"),
        (
            "markdown",
            "✅ This group receives imrelay's approvals and questions. 本群会收到 imrelay 的审批与提问。",
        ),
        ("outcome", ""),
        ("token", ""),
        ("options", "[]"),
        ("input_hint", ""),
        ("allow_label", ""),
        ("deny_label", ""),
        ("submit_label", ""),
        ("notice", ""),
    ] {
        p.insert(k.into(), Value::String(v.into()));
    }
    p
}

async fn check(s: &DingTalkSettings, run: &Doctor, checks: &mut Vec<Check>) {
    let groups = || s.conversations.iter().map(|c| format!("group {c}"));
    let api = match OpenApi::new(
        &s.api_base(),
        &s.client_id,
        s.client_secret.clone(),
        s.robot_code(),
    ) {
        Ok(api) => api,
        Err(e) => {
            checks.push(Check::fail(
                format!("DingTalk: {e}"),
                "fix dingtalk.api_url",
            ));
            run.untried("DingTalk", groups(), checks);
            return;
        }
    };
    if let Err(e) = api.access_token().await {
        checks.push(no_token(&e, &s.api_base()));
        run.untried("DingTalk", groups(), checks);
        return;
    }
    checks.push(Check::pass(
        "DingTalk: the app credentials get an access token",
    ));
    checks.push(gateway(s).await);
    if s.approvers.is_empty() {
        checks.push(Check::fail(
            "DingTalk: no approvers, so nobody can answer",
            "add your DingTalk userId to dingtalk.approvers (admin console → Contacts → the member's details)",
        ));
    } else {
        checks.push(Check::pass(format!(
            "DingTalk: {} approver(s)",
            s.approvers.len()
        )));
    }
    if s.conversations.is_empty() {
        checks.push(Check::fail(
            "DingTalk: no groups to send cards to",
            "add a group's openConversationId to dingtalk.chats",
        ));
    }
    if !run.send_test {
        return;
    }
    for (n, c) in s.conversations.iter().enumerate() {
        let id = format!("imrelay-doctor-{}-{n}", uuid::Uuid::now_v7().simple());
        match api
            .create_and_deliver(&s.card_template_id, &id, &test_card(), Space::Group(c))
            .await
        {
            Ok(()) => checks.push(Check::pass(format!(
                "DingTalk: group {c} received a test card"
            ))),
            Err(e) => checks.push(Check::fail(
                format!("DingTalk: group {c} did not take a test card: {e}"),
                "add the app's robot to that group, check dingtalk.card_template_id, and grant the app Card.Instance.Write",
            )),
        }
    }
}

/// Why the app got no access token: DingTalk refused the credentials, or could not be
/// reached, or failed on its side — each with its own fix.
fn no_token(e: &ApiError, api_base: &str) -> Check {
    let fix = match e {
        ApiError::Refused { .. } => {
            "check dingtalk.client_id (the app's Client ID / AppKey) and dingtalk.client_secret"
                .to_string()
        }
        ApiError::Network(_) => unreachable_fix(api_base),
        ApiError::Throttled { .. } | ApiError::Unavailable { .. } => {
            "DingTalk failed on its side or asked to slow down: run doctor again in a minute"
                .to_string()
        }
        ApiError::Malformed(_) => {
            format!("check dingtalk.api_url: what answers at {api_base} is not DingTalk's OpenAPI")
        }
    };
    let what = match e {
        ApiError::Network(_) => format!("DingTalk: cannot reach {api_base} for an access token"),
        _ => "DingTalk: no access token for the app credentials".to_string(),
    };
    Check::fail(format!("{what}: {e}"), fix)
}

/// The fix for a server this machine could not reach.
fn unreachable_fix(base: &str) -> String {
    format!(
        "check that this machine reaches {base} (its name resolves, no firewall in the way), then run doctor again"
    )
}

/// Whether the Stream gateway hands out a connection: refused (Stream mode is off), out of
/// reach, or not DingTalk's gateway at all.
async fn gateway(s: &DingTalkSettings) -> Check {
    let base = s.gateway_base();
    let g = match Gateway::new(&base, &s.client_id, s.client_secret.clone()) {
        Ok(g) => g,
        Err(e) => return Check::fail(format!("DingTalk: {e}"), "fix dingtalk.gateway_url"),
    };
    match g.open(&[CARD_CALLBACK_TOPIC.to_string()]).await {
        Ok(_) => Check::pass("DingTalk: the Stream gateway hands out a connection"),
        Err(e @ StreamError::Refused { .. }) => Check::fail(
            format!("DingTalk: the Stream gateway refused: {e}"),
            "turn on Stream mode for the app's robot and card callbacks (Developer Console → the app)",
        ),
        Err(e @ StreamError::Network(_)) => Check::fail(
            format!("DingTalk: cannot reach the Stream gateway at {base}: {e}"),
            unreachable_fix(&base),
        ),
        Err(e) => Check::fail(
            format!("DingTalk: the Stream gateway gave no connection: {e}"),
            format!(
                "check dingtalk.gateway_url: what answers at {base} is not DingTalk's Stream gateway"
            ),
        ),
    }
}
