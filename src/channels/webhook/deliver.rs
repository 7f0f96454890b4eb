//! Delivering the webhook channel's jobs: each target's events signed and posted, retried on
//! failure (honouring `Retry-After`), and the target disabled when it answers `410 Gone`.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use serde_json::json;

use super::plan::Job;
use super::{Target, Webhooks, disabled_key, url_digest};
use crate::interaction::Millis;
use crate::outbox::{ChannelJob, Delivery, OutboxHandler};
use crate::store::ClaimedJob;
use crate::sync::RwLockExt;

/// Delivers the jobs of one target.
pub(super) struct Deliverer {
    /// The channel's targets and state.
    pub hooks: Arc<Webhooks>,
    /// The target whose queue this is.
    pub name: String,
}

fn retry_after(headers: &reqwest::header::HeaderMap) -> Option<Duration> {
    headers
        .get(reqwest::header::RETRY_AFTER)?
        .to_str()
        .ok()?
        .trim()
        .parse::<u64>()
        .ok()
        .map(|s| Duration::from_secs(s.min(3600)))
}

#[async_trait]
impl OutboxHandler for Deliverer {
    async fn deliver(&self, job: &ClaimedJob) -> Delivery {
        let Some(target) = self.hooks.targets.get(&self.name) else {
            return Delivery::Failed(format!("webhook {} is no longer configured", self.name));
        };
        if self.hooks.is_disabled(&self.name) {
            return Delivery::Failed(format!(
                "webhook {} is disabled (it answered 410 Gone)",
                self.name
            ));
        }
        let Job { msg_id, body, .. } = match Job::read(&job.job) {
            Ok(j) => j,
            Err(unreadable) => return unreadable,
        };
        let sent = self.send(target, &msg_id, body).await;
        match sent {
            Ok(r) if r.status().is_success() => Delivery::Done,
            Ok(r) if r.status() == reqwest::StatusCode::GONE => {
                self.hooks
                    .disable(
                        &self.name,
                        &target.settings.url,
                        "the target answered 410 Gone",
                    )
                    .await;
                Delivery::Failed("410 Gone: target disabled".into())
            }
            Ok(r) => Delivery::Retry {
                after: retry_after(r.headers()),
                error: format!("HTTP {}", r.status()),
            },
            Err(e) => Delivery::Retry {
                after: None,
                error: if e.is_timeout() {
                    format!("timed out after {} s", target.settings.timeout_secs)
                } else {
                    format!("request failed: {e}")
                },
            },
        }
    }
}

impl Deliverer {
    /// Posts one event to the target, signed now.
    async fn send(
        &self,
        target: &Target,
        msg_id: &str,
        body: String,
    ) -> reqwest::Result<reqwest::Response> {
        let ts = jiff::Timestamp::now().as_second();
        let signature = target.key.sign(msg_id, ts, body.as_bytes());
        self.hooks
            .client
            .post(&target.settings.url)
            .timeout(Duration::from_secs(target.settings.timeout_secs))
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .header("webhook-id", msg_id)
            .header("webhook-timestamp", ts.to_string())
            .header("webhook-signature", signature)
            .body(body)
            .send()
            .await
    }
}

impl Webhooks {
    /// Stops delivering to a target until its URL changes, remembered in the store.
    async fn disable(&self, name: &str, url: &str, reason: &str) {
        tracing::error!(
            webhook = name,
            reason,
            "webhook target disabled; change its url to enable it again"
        );
        self.disabled.writing().insert(name.to_string());
        let value = json!({"url_sha256": url_digest(url), "reason": reason, "at": Millis(crate::interaction::now())});
        if let Err(e) = self
            .store
            .set_value(&disabled_key(name), Some(value.to_string()))
            .await
        {
            tracing::error!(webhook = name, error = %e, "could not record that the target is disabled");
        }
    }
}
