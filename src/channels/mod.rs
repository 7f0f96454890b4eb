//! Channels present interactions outside imrelay (chats, phones, webhooks: the list is
//! `each_channel!` below) and hand answers back to the registry.
//!
//! Every channel is listed once, in `each_channel!` below (each settings section is a
//! [`Channel`], see [`registry`]; the settings tree makes its fields, `Settings::channels` and
//! the rest of what it knows of channels from that list), and plugs in through [`Wiring`] at
//! start-up:
//! - a [`crate::interaction::Lifecycle`] hook plans its outbox jobs (post a prompt, update a
//!   message) in the same transaction as the state change;
//! - an [`crate::outbox::OutboxHandler`] delivers those jobs, with retries;
//! - its inbound endpoints (a webhook, a callback URL) are merged into the router;
//! - long-running work (Telegram polling, a Feishu long connection) is a background task
//!   stopped by the shutdown token.
//!
//! Answers come back through [`crate::interaction::Registry::respond`], whose first-answer-wins
//! rule makes every channel equal. What a person reads (a tool call, outcome phrases, times)
//! comes from [`crate::present`], shared with the inbox and the terminal.

pub(crate) mod actions;
pub(crate) mod desk;
pub(crate) mod digest;
pub(crate) mod digest_buttons;
pub(crate) mod digest_flow;
pub(crate) mod digest_links;
pub(crate) mod digest_texts;
pub mod dingtalk;
pub mod discord;
pub mod feishu;
pub(crate) mod kit;
pub mod longconn;
pub mod matrix;
pub(crate) mod messages;
pub(crate) mod notification;
pub mod ntfy;
mod pacer;
pub(crate) mod pipeline;
pub(crate) mod plan;
pub mod push;
pub mod registry;
pub(crate) mod sessions;
pub mod slack;
pub(crate) mod steer;
pub mod telegram;
pub mod threads;
pub mod token;
pub(crate) mod typed;
pub mod webhook;
pub mod wecom;
pub(crate) mod words;

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use tokio_util::sync::CancellationToken;

use crate::health::Health;
use crate::interaction::Registry;
use crate::metrics::Metrics;
use crate::outbox::Outbox;
use crate::store::Store;

pub use registry::{Channel, Chat, Check, Doctor, Kept, Written, in_words, install};

/// The list of channels: the one place a channel is named outside its folder (besides its
/// `pub mod` line above: rustfmt does not see a module declared inside a macro, and
/// `cargo fmt --check` passes a misformatted file declared so). Each line is its section's
/// name in the settings (`[telegram]`, `[[webhooks]]`), its module and its settings type, a
/// [`Channel`]. A section is read over `config/default.toml`, where each has its documented
/// defaults; a list section (`[[webhooks]]`) has none there and is empty when absent. The
/// order is the registry's: channels are checked, installed, tried by `imrelay doctor`,
/// printed by `check-config` and named to people in it.
///
/// `each_channel!(then)` calls the macro `then` with the list; the settings tree (`config`)
/// makes from it the channels' fields of `Settings` (so `settings.telegram` is a plain field),
/// `Settings::channels`, each section read on its own for its mistakes, the sections
/// `check-config` prints and the values a setting of a fixed set takes.
macro_rules! each_channel {
    ($then:ident) => {
        $then! {
            telegram: telegram::TelegramSettings,
            feishu: feishu::FeishuSettings,
            slack: slack::SlackSettings,
            wecom: wecom::WeComSettings,
            dingtalk: dingtalk::DingTalkSettings,
            ntfy: ntfy::NtfySettings,
            discord: discord::DiscordSettings,
            matrix: matrix::MatrixSettings,
            push: push::PushSettings,
            #[serde(default)] webhooks: webhook::WebhookTargets,
        }
    };
}
pub(crate) use each_channel;

/// A background task a channel runs while the server serves.
pub type Task = Pin<Box<dyn Future<Output = ()> + Send + 'static>>;

/// What every channel may read of the server's settings besides its own section.
#[derive(Clone, Debug)]
pub struct Server {
    /// Where the server is reached from outside (`server.public_url`, or the listen address
    /// when unset): the base of the webhook endpoints a channel registers with a platform.
    pub public_url: String,
    /// Where people open an interaction in the web inbox (`<inbox>/#<id>`), when
    /// `server.public_url` was set.
    pub inbox: Option<String>,
    /// How long resolved interactions are kept (`interactions.retention_hours`).
    pub retention: Duration,
    /// How long a replica's lease on a singleton task lasts (`store.leader_lease_ms`).
    pub leader_lease: Duration,
}

/// Everything a channel needs to plug itself in.
pub struct Wiring {
    /// The server-wide settings channels read.
    pub server: Server,
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
    /// Endpoints for people with an operator token (the inbox's), merged into the server's
    /// router behind the operator-token check; a handler reads who called as
    /// [`crate::wire::Principal`].
    pub operator_routes: Router,
    /// Background tasks, started when the server starts serving.
    pub tasks: Vec<Task>,
    /// Fires at shutdown.
    pub shutdown: CancellationToken,
}

impl Wiring {
    /// Adds inbound endpoints.
    pub fn route(&mut self, routes: Router) {
        let current = std::mem::take(&mut self.routes);
        self.routes = current.merge(routes);
    }

    /// Adds endpoints behind the operator-token check.
    pub fn route_operator(&mut self, routes: Router) {
        let current = std::mem::take(&mut self.operator_routes);
        self.operator_routes = current.merge(routes);
    }

    /// Adds a background task.
    pub fn spawn_on_serve(&mut self, task: impl Future<Output = ()> + Send + 'static) {
        self.tasks.push(Box::pin(task));
    }
}
