//! `imrelay doctor`'s checks of the ntfy channel: the server answers its health endpoint, and
//! with `--send-test` each topic takes a test message with the configured credentials.

use std::time::Duration;

use serde_json::json;

use super::NtfySettings;
use crate::channels::registry::{Check, Doctor};

/// The checks, in order.
pub(super) async fn checks(s: &NtfySettings, run: &Doctor) -> Vec<Check> {
    let mut checks = Vec::new();
    let client = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .timeout(Duration::from_secs(s.timeout_secs.max(1)))
        .build()
        .unwrap_or_default();
    let health = format!("{}/v1/health", s.base());
    match client.get(&health).send().await {
        Ok(r) if r.status().is_success() => {
            checks.push(Check::pass(format!("ntfy: {} answers", s.base())));
        }
        Ok(r) => checks.push(Check::fail(
            format!("ntfy: {health} answered {}", r.status()),
            "check ntfy.api_url: it is the server's root, like https://ntfy.sh",
        )),
        Err(e) => {
            checks.push(Check::fail(
                format!("ntfy: {} unreachable: {e}", s.base()),
                "check ntfy.api_url and that the server is running",
            ));
            run.untried(
                "ntfy",
                s.topics.iter().map(|t| format!("topic {t}")),
                &mut checks,
            );
            return checks;
        }
    }
    if !run.send_test {
        return checks;
    }
    for topic in &s.topics {
        let body = json!({
            "topic": topic,
            "title": "imrelay doctor",
            "message": "A test message: imrelay can publish here.",
            "priority": 3,
            "tags": ["white_check_mark"],
        });
        let sent = s
            .authorize(client.post(format!("{}/", s.base())).json(&body))
            .send()
            .await;
        match sent {
            Ok(r) if r.status().is_success() => checks.push(Check::pass(format!(
                "ntfy: a test message was published to topic {topic}"
            ))),
            Ok(r) => checks.push(Check::fail(
                format!("ntfy: publishing to topic {topic} answered {}", r.status()),
                "check ntfy.token (or ntfy.username and ntfy.password) and the user's write access to the topic",
            )),
            Err(e) => checks.push(Check::fail(
                format!("ntfy: publishing to topic {topic} failed: {e}"),
                "check ntfy.api_url and that the server is running",
            )),
        }
    }
    checks
}
