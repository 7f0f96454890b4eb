//! How updates reach imrelay: long polling (the default; no public URL needed) or a webhook
//! route on imrelay's own server.
//!
//! At start-up the channel asks `getMe` who it is (which also checks the token). Polling
//! mode then deletes any webhook (Telegram refuses `getUpdates` while one is set) and polls;
//! webhook mode calls `setWebhook` with the secret token and the update types it handles.
//! Webhook calls must carry the secret token in `X-Telegram-Bot-Api-Secret-Token`; it is
//! compared in constant time. Either way each update is handled once (see
//! [`Telegram::handle_update`]), the updates of one chat in the order they came (see
//! [`super::lanes`]), and the state shows in `/healthz`.

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::{Request, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use serde_json::json;
use subtle::ConstantTimeEq;
use teloxide::types::Update;
use tokio_util::sync::CancellationToken;

use super::api::Failure;
use super::{Mode, Telegram};
use crate::interaction::Via;
use crate::wire::error::ApiError;
use crate::wire::extract::{body_of, declared_size};

/// The header Telegram echoes the webhook secret token in.
pub(crate) const SECRET_HEADER: &str = "x-telegram-bot-api-secret-token";
/// Longest a webhook call waits for its update to be handled before answering anyway (the
/// handling continues).
const WEBHOOK_WAIT: Duration = Duration::from_secs(10);
/// The lease whose holder polls `getUpdates`.
const POLL_LEASE: &str = "telegram.poll";
/// The small named value the polling offset is kept in.
const OFFSET_KEY: &str = "telegram.offset";
/// How long in-flight updates may finish at shutdown.
const DRAIN: Duration = Duration::from_secs(5);
/// Longest an update holds up the later updates of its chat (see [`super::lanes`]).
pub(super) const LANE_PATIENCE: Duration = Duration::from_secs(10);

/// The lane an update is handled in: its chat (a tap's message's chat), else its sender.
fn lane_of(u: &Update) -> i64 {
    u.chat()
        .map(|c| c.id.0)
        .or_else(|| u.from().and_then(|f| i64::try_from(f.id.0).ok()))
        .unwrap_or(0)
}

/// Delay before retry number `n` (1-based) of a start-up call or a failed poll.
fn backoff(n: u32) -> Duration {
    Duration::from_millis(500u64.saturating_mul(1 << n.saturating_sub(1).min(7)))
        .min(Duration::from_secs(60))
}

/// Sleeps `d` unless shutdown fires first; `false` if it did.
async fn pause(d: Duration, shutdown: &CancellationToken) -> bool {
    tokio::select! {
        _ = shutdown.cancelled() => false,
        _ = tokio::time::sleep(d) => true,
    }
}

impl Telegram {
    /// The channel's background task: identify, then poll or register the webhook.
    pub(super) async fn run(self: Arc<Self>, shutdown: CancellationToken) {
        if !self.identify(&shutdown).await {
            return;
        }
        match self.settings.mode {
            Mode::Polling => self.poll(&shutdown).await,
            Mode::Webhook => self.register_webhook(&shutdown).await,
        }
    }

    /// Retries `call` until it succeeds or shutdown; `false` on shutdown.
    async fn until_ok<T, F, Fut>(
        &self,
        what: &str,
        shutdown: &CancellationToken,
        mut call: F,
    ) -> Option<T>
    where
        F: FnMut() -> Fut,
        Fut: std::future::Future<Output = Result<T, Failure>>,
    {
        let mut n = 0;
        loop {
            let r = tokio::select! {
                _ = shutdown.cancelled() => return None,
                r = call() => r,
            };
            match r {
                Ok(v) => return Some(v),
                Err(f) => {
                    n += 1;
                    let wait = match &f {
                        Failure::RetryAfter(d) => *d,
                        _ => backoff(n),
                    };
                    let state = if matches!(f, Failure::Permanent(_)) {
                        "error"
                    } else {
                        "retrying"
                    };
                    if matches!(f, Failure::Permanent(_)) {
                        tracing::error!(error = %f.describe(), retry_in_ms = wait.as_millis() as u64, "telegram: {what} failed");
                    } else {
                        tracing::warn!(error = %f.describe(), retry_in_ms = wait.as_millis() as u64, "telegram: {what} failed");
                    }
                    self.set_health(
                        state,
                        json!({ "last_error": format!("{what}: {}", f.describe()) }),
                    );
                    if !pause(wait, shutdown).await {
                        return None;
                    }
                }
            }
        }
    }

    async fn identify(&self, shutdown: &CancellationToken) -> bool {
        let Some(me) = self
            .until_ok("getMe (checking the bot token)", shutdown, || {
                self.client.get_me()
            })
            .await
        else {
            return false;
        };
        let name = me.username().to_string();
        tracing::info!(bot = %format!("@{name}"), id = me.user.id.0, "telegram: connected");
        let _ = self.username.set(name);
        true
    }

    async fn poll(self: &Arc<Self>, shutdown: &CancellationToken) {
        if self
            .until_ok("deleteWebhook (polling needs no webhook)", shutdown, || {
                self.client.delete_webhook()
            })
            .await
            .is_none()
        {
            return;
        }
        let timeout = self.settings.poll_timeout_secs.min(u64::from(u32::MAX)) as u32;
        // With several replicas on one store, one polls at a time (two pollers make Telegram
        // answer 409): the holder of the lease, which keeps the offset in the store.
        let mut leader = self.store.lead(POLL_LEASE, self.poll_lease);
        let mut offset: i32 = 0;
        let mut failures: u32 = 0;
        let mut starting = true;
        loop {
            if !leader.is_leading() {
                self.set_health(
                    "standby",
                    json!({ "detail": "another replica polls Telegram" }),
                );
                tokio::select! {
                    _ = shutdown.cancelled() => break,
                    _ = leader.leading() => {}
                }
                tracing::info!("telegram: this replica polls now");
                starting = true;
            }
            if starting {
                starting = false;
                failures = 0;
                self.set_health("polling", json!({}));
                offset = offset.max(self.stored_offset().await);
            }
            let r = tokio::select! {
                _ = shutdown.cancelled() => break,
                _ = leader.lost() => continue,
                r = self.client.get_updates(offset, timeout) => r,
            };
            match r {
                Ok(updates) => {
                    if failures > 0 {
                        failures = 0;
                        tracing::info!("telegram: polling again");
                        self.set_health("polling", json!({}));
                    }
                    self.hand_over(updates, &mut offset).await;
                }
                Err(f) => {
                    failures += 1;
                    if !self.poll_failed(&f, failures, shutdown).await {
                        break;
                    }
                }
            }
        }
        self.lanes.drain(DRAIN).await;
    }

    /// Hands a batch of updates to the lanes, and moves `offset` (kept in the store) past
    /// them. In order within a chat, concurrently across chats: a toggle and the Submit
    /// after it in one batch must not swap places.
    async fn hand_over(self: &Arc<Self>, updates: Vec<Update>, offset: &mut i32) {
        let before = *offset;
        for u in updates {
            *offset = (*offset).max((u.id.0 as i32).saturating_add(1));
            let this = self.clone();
            // Nobody waits for the handling here: the poll goes on.
            drop(
                self.lanes
                    .submit(lane_of(&u), async move { this.handle_update(u).await }),
            );
        }
        if *offset != before {
            self.store_offset(*offset).await;
        }
    }

    /// After failed poll number `failures` in a row: logs it, shows it in `/healthz`, and
    /// waits before the next (as long as Telegram asks, else backing off); `false` if
    /// shutdown came first.
    async fn poll_failed(&self, f: &Failure, failures: u32, shutdown: &CancellationToken) -> bool {
        let wait = match f {
            Failure::RetryAfter(d) => *d,
            _ => backoff(failures),
        };
        tracing::warn!(error = %f.describe(), retry_in_ms = wait.as_millis() as u64, "telegram: getUpdates failed");
        self.set_health(
            "error",
            json!({ "last_error": format!("getUpdates: {}", f.describe()) }),
        );
        pause(wait, shutdown).await
    }

    /// The offset the last poller got to (kept in the store, so a replica that takes over
    /// polling does not fetch again what was handled); 0 if none or unreadable.
    async fn stored_offset(&self) -> i32 {
        match self.store.get_value(OFFSET_KEY).await {
            Ok(v) => v.and_then(|v| v.parse().ok()).unwrap_or(0),
            Err(e) => {
                tracing::warn!(error = %e, "telegram: could not read the stored update offset");
                0
            }
        }
    }

    async fn store_offset(&self, offset: i32) {
        if let Err(e) = self
            .store
            .set_value(OFFSET_KEY, Some(offset.to_string()))
            .await
        {
            tracing::warn!(error = %e, "telegram: could not store the update offset; updates may be fetched again (and are ignored as duplicates)");
        }
    }

    async fn register_webhook(&self, shutdown: &CancellationToken) {
        let Ok(url) = reqwest::Url::parse(self.settings.webhook_url.trim()) else {
            return; // refused by validation already
        };
        if self
            .until_ok("setWebhook", shutdown, || {
                self.client.set_webhook(url.clone(), &self.webhook_secret)
            })
            .await
            .is_some()
        {
            tracing::info!(url = %url, "telegram: webhook set");
            self.set_health("webhook", json!({ "webhook_url": url.as_str() }));
        }
    }
}

/// The webhook route.
pub(super) fn router(tg: Arc<Telegram>, path: &str) -> Router {
    Router::new().route(path, post(webhook)).with_state(tg)
}

/// A webhook call: the secret token header is checked before the body is read.
async fn webhook(State(tg): State<Arc<Telegram>>, req: Request) -> Response {
    if let Err(e) = declared_size(&req) {
        return e.into_response();
    }
    let given = req
        .headers()
        .get(SECRET_HEADER)
        .map(|v| v.as_bytes())
        .unwrap_or_default();
    if !bool::from(given.ct_eq(tg.webhook_secret.as_bytes())) {
        tg.refused
            .get_or_create(&super::ReasonLabels {
                reason: "bad_webhook_secret".into(),
            })
            .inc();
        if let Err(e) = tg
            .registry
            .refused(
                None,
                "unknown webhook caller",
                &Via::new(crate::channels::telegram::CHANNEL),
                "missing or wrong webhook secret token",
            )
            .await
        {
            return ApiError::from(e).closing().into_response();
        }
        // The body is left unread: the connection is closed.
        return ApiError::unauthorized("missing or wrong X-Telegram-Bot-Api-Secret-Token header")
            .closing()
            .into_response();
    }
    let body = match body_of(req).await {
        Ok(body) => body,
        Err(e) => return e.into_response(),
    };
    let update: Update = match serde_json::from_slice(&body) {
        Ok(u) => u,
        Err(e) => {
            return ApiError::bad_request(format!("the body is not a Telegram update: {e}"))
                .into_response();
        }
    };
    // Handle it (after the earlier updates of its chat) before answering, since Telegram
    // waits; but never for long: the handling goes on.
    let lane = lane_of(&update);
    let this = tg.clone();
    let handled = tg
        .lanes
        .submit(lane, async move { this.handle_update(update).await });
    let _ = tokio::time::timeout(WEBHOOK_WAIT, handled).await;
    StatusCode::OK.into_response()
}
