//! Channels present interactions outside imrelay (Telegram, Feishu/Lark, webhooks) and hand
//! answers back to the registry.
//!
//! A channel plugs in through [`Wiring`] at start-up:
//! - a [`crate::interaction::Lifecycle`] hook plans its outbox jobs (post a prompt, update a
//!   message) in the same transaction as the state change;
//! - an [`crate::outbox::OutboxHandler`] delivers those jobs, with retries;
//! - its inbound endpoints (a webhook, a callback URL) are merged into the router;
//! - long-running work (Telegram polling, a Feishu long connection) is a background task
//!   stopped by the shutdown token.
//!
//! Answers come back through [`crate::interaction::Registry::respond`], whose first-answer-wins
//! rule makes every channel equal. Shared rendering helpers live in [`render`]; [`present`]
//! turns a tool call into what a person checks before saying yes, for any surface to render.

pub mod feishu;
pub mod present;
pub mod render;
pub mod telegram;
pub mod token;
pub mod webhook;

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use axum::Router;
use tokio_util::sync::CancellationToken;

use crate::config::Settings;
use crate::health::Health;
use crate::interaction::Registry;
use crate::metrics::Metrics;
use crate::outbox::Outbox;
use crate::store::Store;

/// A background task a channel runs while the server serves.
pub type Task = Pin<Box<dyn Future<Output = ()> + Send + 'static>>;

/// Everything a channel needs to plug itself in.
pub struct Wiring {
    /// The effective settings.
    pub settings: Arc<Settings>,
    /// The registry (to answer, and to register lifecycle hooks).
    pub registry: Registry,
    /// The store (channel bookkeeping, secrets, deduplication).
    pub store: Arc<dyn Store>,
    /// The outbox worker (register delivery handlers).
    pub outbox: Outbox,
    /// Metrics (register channel metrics).
    pub metrics: Arc<Metrics>,
    /// Component health for `/healthz`.
    pub health: Arc<Health>,
    /// Inbound endpoints, merged into the server's router.
    pub routes: Router,
    /// Background tasks, started when the server starts serving.
    pub tasks: Vec<Task>,
    /// Fires at shutdown.
    pub shutdown: CancellationToken,
}

/// Installs every enabled channel.
pub async fn install(wiring: &mut Wiring) -> anyhow::Result<()> {
    webhook::install(wiring).await?;
    feishu::install(wiring).await?;
    telegram::install(wiring).await?;
    Ok(())
}

impl Wiring {
    /// Adds inbound endpoints.
    pub fn route(&mut self, routes: Router) {
        let current = std::mem::take(&mut self.routes);
        self.routes = current.merge(routes);
    }

    /// Adds a background task.
    pub fn spawn_on_serve(&mut self, task: impl Future<Output = ()> + Send + 'static) {
        self.tasks.push(Box::pin(task));
    }
}
