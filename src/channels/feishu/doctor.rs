//! `imrelay doctor`'s checks of the Feishu/Lark channel: the app credentials get a tenant
//! token, approvers and receivers are set, and with `--send-test` each receiver gets a test
//! card.

use serde_json::json;

use crate::channels::registry::{Check, Doctor};

use super::FeishuSettings;
use super::api::OpenApi;

/// The checks of `s` (an enabled section).
pub(super) async fn checks(s: &FeishuSettings, run: &Doctor) -> Vec<Check> {
    let mut checks = Vec::new();
    check(s, run, &mut checks).await;
    checks
}

async fn check(s: &FeishuSettings, run: &Doctor, checks: &mut Vec<Check>) {
    let send_test = run.send_test;
    let api = match OpenApi::new(&s.api_base(), &s.app_id, s.app_secret.clone()) {
        Ok(api) => api,
        Err(e) => {
            checks.push(Check::fail(format!("Feishu: {e}"), "fix feishu.api_url"));
            run.untried("Feishu", s.receivers.iter().map(|r| r.address()), checks);
            return;
        }
    };
    match api.tenant_token().await {
        Ok(_) => checks.push(Check::pass("Feishu: the app credentials get a token")),
        Err(e) => {
            checks.push(Check::fail(
                format!("Feishu: no token for the app credentials: {e}"),
                "check feishu.app_id and feishu.app_secret, and feishu.domain (feishu or lark)",
            ));
            run.untried("Feishu", s.receivers.iter().map(|r| r.address()), checks);
            return;
        }
    }
    if s.approvers.is_empty() {
        checks.push(Check::fail(
            "Feishu: no approvers, so nobody can answer",
            "add your open_id to feishu.approvers",
        ));
    } else {
        checks.push(Check::pass(format!(
            "Feishu: {} approver(s)",
            s.approvers.len()
        )));
    }
    if s.receivers.is_empty() {
        checks.push(Check::fail(
            "Feishu: no receivers to post to",
            "add a chat or user to feishu.chats",
        ));
    }
    for receiver in &s.receivers {
        if !send_test {
            continue;
        }
        let card = json!({
            "schema": "2.0",
            "header": {"title": {"tag": "plain_text", "content": "imrelay doctor"}, "template": "green"},
            "body": {"elements": [{"tag": "markdown", "content": "✅ This chat receives imrelay's questions."}]},
        });
        let uuid = uuid::Uuid::now_v7().to_string();
        match api.send_card(receiver, &card, &uuid).await {
            Ok(_) => checks.push(Check::pass(format!(
                "Feishu: {} received a test card",
                receiver.address()
            ))),
            Err(e) => checks.push(Check::fail(
                format!(
                    "Feishu: {} did not take a test card: {e}",
                    receiver.address()
                ),
                "add the app (bot) to that chat, and give it the im:message:send_as_bot permission",
            )),
        }
    }
}
