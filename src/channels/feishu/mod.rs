//! The Feishu/Lark channel: every approval and question becomes an interactive card in the
//! configured chats; a click by an approver answers it, and every card is updated to show
//! the outcome wherever the answer came from.
//!
//! - [`settings`] — `[feishu]`.
//! - `plan` — the outbox jobs a created or resolved interaction needs.
//! - `deliver` — posting and updating cards through the durable outbox.
//! - `render` — card JSON 2.0 for every state, in Simplified Chinese or English.
//! - `inbound` — the click handler and the webhook endpoint.
//! - `commands` — `whoami` and `/sessions` written to the bot.
//! - [`api`] — the OpenAPI subset (tenant token, send, update) on reqwest.
//! - `button` — the MAC binding a button to one interaction and action.
//! - [`crypto`] — callback decryption and signatures.
//! - `ws` and [`frame`] — the long connection (WebSocket, protobuf frames) that delivers
//!   clicks to the same handler without a public URL.
//! - `doctor` — `imrelay doctor`'s checks.

// `api`, `crypto`, `frame` and `settings` are public on purpose: the integration tests drive
// them (the fake OpenAPI and long connection, signed callbacks); the rest is the crate's own.
pub mod api;
mod button;
mod commands;
pub mod crypto;
mod deliver;
mod digest;
mod doctor;
pub mod frame;
pub(crate) mod inbound;
mod plan;
pub(crate) mod render;
pub mod settings;
pub(crate) mod ws;

use std::sync::Arc;

use anyhow::Context;
use serde_json::json;

pub use settings::{FeishuSettings, Mode};

use crate::channels::Wiring;
use crate::channels::kit::Kit;
use crate::channels::registry::Chat;

/// The channel's name in the outbox, the store and `/healthz`.
pub const CHANNEL: &str = "feishu";

/// The store secret that signs card buttons (kept across restarts, so old cards keep working).
pub const SECRET_NAME: &str = "feishu-callback";

/// Feishu in the kit's words.
const CHAT: Chat = Chat {
    approver_ids: "open_ids (ou_...) or user_ids",
    secret: SECRET_NAME,
    signs: "button",
    posts: "cards are posted",
    refused: "a refused click logs the clicker's id",
    no_places: Some((
        "cards",
        "to post in a group, add it to feishu.chats (\"chat_id:oc_...\")",
    )),
};

/// Installs the channel when `[feishu] enabled = true`.
pub async fn install(w: &mut Wiring, settings: &FeishuSettings) -> anyhow::Result<()> {
    let Some(kit) = Kit::open(w, settings, settings.digest_after, settings.locale).await? else {
        return Ok(());
    };
    let settings = Arc::new(settings.clone());
    let api = Arc::new(
        api::OpenApi::new(
            &settings.api_base(),
            &settings.app_id,
            settings.app_secret.clone(),
        )
        .context("cannot build the feishu HTTP client")?,
    );
    let cards =
        render::Cards::new(settings.locale, kit.secret.clone()).with_inbox(w.server.inbox.clone());
    let callbacks = Arc::new(
        inbound::Callbacks::new(
            w.registry.clone(),
            w.store.clone(),
            settings.clone(),
            cards.clone(),
            kit.secret.clone(),
            kit.digests.clone(),
        )
        .with_api(api.clone()),
    );
    kit.count(
        w,
        "imrelay_feishu_callbacks",
        "Feishu card clicks, by result (resolved, already_resolved, refused, invalid, duplicate, ...)",
        callbacks.results_metric(),
    );
    let feishu = deliver::Feishu {
        api: api.clone(),
        cards,
        threads: crate::channels::threads::Threads::installed(w, CHANNEL, settings.thread_per),
        thread_replies: settings.thread_replies,
    };
    kit.deliver(w, feishu, deliver::pacer(), "feishu_api");
    let callback = match settings.mode {
        Mode::Webhook => {
            webhook_mode(w, &settings, callbacks);
            format!("{}{}", w.server.public_url, settings.callback_path)
        }
        Mode::Websocket => {
            long_connection(w, &settings, api, callbacks)?;
            "long connection".to_string()
        }
    };
    let detail = format!("domain {:?}, callback {callback}", settings.domain);
    kit.enabled(settings.mode.as_str(), Some(&detail));
    Ok(())
}

/// Webhook mode: the callback endpoint, and the channel's health as listening on it.
fn webhook_mode(
    w: &mut Wiring,
    settings: &Arc<FeishuSettings>,
    callbacks: Arc<inbound::Callbacks>,
) {
    w.route(inbound::router(Arc::new(inbound::Webhook {
        callbacks,
        settings: settings.clone(),
        registry: w.registry.clone(),
    })));
    if settings.encrypt_key.is_empty() {
        tracing::warn!(
            "feishu: no encrypt_key: callbacks are neither encrypted nor signed; only the verification token \
             authenticates them. Set an Encrypt Key in the developer console and in feishu.encrypt_key."
        );
    }
    w.health.set(
        "feishu",
        "webhook",
        json!({
            "mode": "webhook",
            "callback_path": settings.callback_path,
            "approvers": settings.approvers.len(),
            "receivers": settings.receivers.len(),
        }),
    );
}

/// Websocket mode: the long connection's metrics, and the connection itself, started when
/// the server serves.
fn long_connection(
    w: &mut Wiring,
    settings: &FeishuSettings,
    api: Arc<api::OpenApi>,
    callbacks: Arc<inbound::Callbacks>,
) -> anyhow::Result<()> {
    let reconnects = prometheus_client::metrics::counter::Counter::default();
    let connected =
        prometheus_client::metrics::gauge::Gauge::<i64, std::sync::atomic::AtomicI64>::default();
    w.metrics.register(
        "imrelay_feishu_ws_reconnects",
        "Times the Feishu long connection was lost or could not be opened and was retried",
        reconnects.clone(),
    );
    w.metrics.register(
        "imrelay_feishu_ws_connected",
        "1 while the Feishu long connection is open",
        connected.clone(),
    );
    w.health.set(
        "feishu",
        "connecting",
        json!({"mode": "websocket", "approvers": settings.approvers.len()}),
    );
    let client = ws::LongConnection {
        api,
        callbacks,
        health: w.health.clone(),
        reconnects,
        connected,
        shutdown: w.shutdown.clone(),
        connect_timeout: std::time::Duration::from_secs(settings.connect_timeout_secs),
        tls: crate::tls::client_config()
            .context("cannot set up TLS for the feishu long connection")?,
    };
    w.spawn_on_serve(client.run());
    Ok(())
}

/// The `[feishu]` section in the channel registry.
impl crate::channels::Channel for FeishuSettings {
    fn name(&self) -> &'static str {
        CHANNEL
    }

    fn platform(&self) -> &'static str {
        "Feishu/Lark"
    }

    fn places(&self) -> Vec<String> {
        self.receivers
            .iter()
            .map(settings::Receiver::address)
            .collect()
    }

    fn chat(&self) -> Option<&'static Chat> {
        Some(&CHAT)
    }

    fn unlisted(&self, place: &str) -> String {
        format!("{place:?} is not in feishu.chats (written `type:id`, e.g. \"chat_id:oc_...\")")
    }

    /// An open_id (`ou_...`) is messaged as one, anything else as a user_id.
    fn direct(&self, id: &str) -> Option<String> {
        Some(if id.starts_with("ou_") {
            format!("open_id:{id}")
        } else {
            format!("user_id:{id}")
        })
    }

    fn enabled(&self) -> bool {
        self.enabled
    }

    fn validate(&self) -> Result<(), String> {
        FeishuSettings::validate(self)
    }

    fn paths(&self) -> Vec<crate::settings::PathClaim> {
        FeishuSettings::paths(self)
    }

    fn approvers(&self) -> Vec<String> {
        self.approvers.clone()
    }

    fn install<'a>(
        &'a self,
        wiring: &'a mut Wiring,
    ) -> crate::channels::registry::BoxFuture<'a, anyhow::Result<()>> {
        Box::pin(install(wiring, self))
    }

    fn doctor<'a>(
        &'a self,
        run: &'a crate::channels::Doctor,
    ) -> crate::channels::registry::BoxFuture<'a, Vec<crate::channels::Check>> {
        Box::pin(doctor::checks(self, run))
    }
}
