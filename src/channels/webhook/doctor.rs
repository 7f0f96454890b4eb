//! `imrelay doctor`'s checks of the webhook channel: each target's secret parses, and with
//! `--send-test` it answers a signed test event.

use serde_json::json;

use crate::channels::registry::{Check, Doctor};

use super::WebhookSettings;
use super::signature::SigningKey;

/// The checks of every target, in order.
pub(super) async fn checks(targets: &[WebhookSettings], run: &Doctor) -> Vec<Check> {
    let mut checks = Vec::new();
    for target in targets {
        check(target, run, &mut checks).await;
    }
    checks
}

async fn check(target: &WebhookSettings, run: &Doctor, checks: &mut Vec<Check>) {
    let send_test = run.send_test;
    let name = &target.name;
    let key = match SigningKey::parse(target.secret.expose()) {
        Ok(key) => key,
        Err(e) => {
            checks.push(Check::fail(
                format!("webhook {name}: {e}"),
                "set its secret to whsec_ followed by base64 of at least 16 random bytes",
            ));
            run.untried(&format!("webhook {name}"), [target.url.clone()], checks);
            return;
        }
    };
    if !send_test {
        checks.push(Check::pass(format!(
            "webhook {name}: {} (not tried)",
            target.url
        )));
        return;
    }
    let id = format!("msg_doctor_{}", uuid::Uuid::now_v7().simple());
    let now = jiff::Timestamp::now();
    let body = json!({
        "type": "imrelay.test",
        "id": id,
        "timestamp": now.to_string(),
        "data": {"message": "imrelay doctor: a signed test event", "public_url": run.public_url},
    })
    .to_string();
    let signature = key.sign(&id, now.as_second(), body.as_bytes());
    let sent = reqwest::Client::new()
        .post(&target.url)
        .timeout(std::time::Duration::from_secs(target.timeout_secs.max(1)))
        .header("content-type", "application/json")
        .header("webhook-id", &id)
        .header("webhook-timestamp", now.as_second().to_string())
        .header("webhook-signature", signature)
        .body(body)
        .send()
        .await;
    match sent {
        Ok(r) if r.status().is_success() => checks.push(Check::pass(format!(
            "webhook {name}: {} answered a signed test event ({})",
            target.url,
            r.status()
        ))),
        Ok(r) => checks.push(Check::fail(
            format!("webhook {name}: {} answered {}", target.url, r.status()),
            "the receiver must answer 2xx to a correctly signed event (check it verifies with this secret)",
        )),
        Err(e) => checks.push(Check::fail(
            format!("webhook {name}: {} unreachable: {e}", target.url),
            "check the URL and that the receiver is running",
        )),
    }
}
