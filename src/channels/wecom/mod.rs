//! The WeCom (企业微信) channel: every approval, question and form becomes a template card
//! from the intelligent bot in the configured chats; a click by an approver answers it, and
//! every copy shows the outcome (the clicked card updated in place, the others told in their
//! chat, since WeCom lets a bot change a card only in answer to a click on it).
//!
//! - [`settings`] — `[wecom]`: the bot's credentials, the transport, chats, approvers.
//! - [`bot`] — the long connection (the default transport): `aibot_subscribe`, `ping`,
//!   callbacks, replies and card updates answered by WeCom, redeliveries handled once.
//! - [`callback`] and [`crypto`] — the callback URL, the alternative: WeCom's signature and
//!   AES-CBC message encryption, replies in the HTTP answer.
//! - `plan` — the outbox jobs a created or resolved interaction needs.
//! - `deliver` — sending cards and outcome notes on the shared delivery skeleton.
//! - `render` — the template cards, in Chinese or English.
//! - `button` — the signed button keys and `task_id`s.
//! - [`inbound`] — clicks and typed answers, through the answer pipeline.
//! - `doctor` — `imrelay doctor`'s checks.

// `bot`, `callback`, `crypto`, `inbound` and `settings` are public on purpose: the
// integration tests drive them (the fake long connection, signed callbacks, the chats seen);
// the rest is the crate's own.
pub mod bot;
mod button;
pub mod callback;
pub mod crypto;
mod deliver;
mod digest;
mod doctor;
pub mod inbound;
mod plan;
mod render;
pub mod settings;

use std::sync::Arc;

use anyhow::Context;
use serde_json::json;

pub use settings::{Transport, WeComSettings};

use crate::channels::Wiring;
use crate::channels::pipeline::Pipeline;
use crate::channels::registry::Opening;
use crate::interaction::Via;

/// The channel's name (its `Via`, its outbox channel, its health component).
pub const CHANNEL: &str = "wecom";
/// The store secret that signs button keys (kept across restarts, so old cards keep working).
pub const SECRET_NAME: &str = "wecom-buttons";

/// How the install begins: the approvers' warning and the button secret.
const OPENING: Opening = Opening {
    channel: CHANNEL,
    platform: "WeCom",
    approver_ids: "WeCom userids",
    secret: SECRET_NAME,
    signs: "button",
};

/// Installs the channel when `[wecom] enabled = true`.
pub async fn install(w: &mut Wiring, settings: &WeComSettings) -> anyhow::Result<()> {
    if !settings.enabled {
        return Ok(());
    }
    let settings = Arc::new(settings.clone());
    let approvers = settings.approvers.len();
    let secret = OPENING.open(&*w.store, &*settings, approvers).await?;
    let cards = render::Cards::new(
        settings.locale,
        button::Keys::new(secret.clone()),
        w.server.inbox.clone(),
    );
    let digests = crate::channels::digest::Digests::new(
        w.store.clone(),
        CHANNEL,
        settings.digest_after,
        settings.chats.clone(),
    );
    let digest_keys = digest::DigestKeys::new(secret);
    let inbound = Arc::new(
        inbound::Inbound::new(
            Pipeline::new(w.registry.clone(), Via::new(CHANNEL)),
            w.store.clone(),
            settings.clone(),
            cards.clone(),
        )
        .with_digests(digests.clone(), digest_keys.clone()),
    );
    w.metrics.register(
        "imrelay_wecom_callbacks",
        "WeCom card clicks and typed answers, by result (resolved, already_resolved, refused, invalid, duplicate, ignored, ...)",
        inbound.results_metric(),
    );
    match settings.transport {
        settings::Transport::Longconn => {
            longconn(w, &settings, inbound, cards, (digests, digest_keys))?
        }
        settings::Transport::Callback => {
            w.route(callback::router(Arc::new(callback::Endpoint::new(
                inbound,
                &settings,
                w.registry.clone(),
                w.store.clone(),
                cards,
            )?)));
            w.health.set(
                CHANNEL,
                "listening",
                json!({"transport": "callback", "callback_path": settings.callback_path,
                    "approvers": settings.approvers.len(), "chats": settings.chats.len()}),
            );
        }
    }
    tracing::info!(
        transport = settings.transport.as_str(),
        chats = settings.chats.len(),
        approvers = settings.approvers.len(),
        "wecom: channel enabled"
    );
    Ok(())
}

/// The long connection, the planner and the deliverer that sends over it.
fn longconn(
    w: &mut Wiring,
    settings: &WeComSettings,
    inbound: Arc<inbound::Inbound>,
    cards: render::Cards,
    (digests, digest_keys): (crate::channels::digest::Digests, digest::DigestKeys),
) -> anyhow::Result<()> {
    let bot = Arc::new(bot::BotConnection::new(
        &settings.ws_url(),
        &settings.bot_id,
        settings.secret.clone(),
        inbound,
        w.shutdown.clone(),
        crate::tls::client_config().context("cannot set up TLS for the wecom long connection")?,
    ));
    w.registry
        .add_hook(Arc::new(plan::planner(&settings.chats)));
    w.outbox.register(
        CHANNEL,
        Arc::new(deliver::Deliverer::new(
            deliver::WeCom {
                bot: bot.clone(),
                cards,
                digest_keys,
            },
            digests,
            w.store.clone(),
            w.health.clone(),
        )),
    );
    w.spawn_on_serve(bot.run());
    Ok(())
}

/// The `[wecom]` section in the channel registry.
impl crate::channels::Channel for WeComSettings {
    fn name(&self) -> &'static str {
        CHANNEL
    }

    fn platform(&self) -> &'static str {
        "WeCom"
    }

    fn places(&self) -> Vec<String> {
        self.chats.clone()
    }

    fn enabled(&self) -> bool {
        self.enabled
    }

    fn validate(&self) -> Result<(), String> {
        WeComSettings::validate(self)
    }

    fn paths(&self) -> Vec<crate::settings::PathClaim> {
        WeComSettings::paths(self)
    }

    fn approvers(&self) -> Vec<String> {
        self.approvers.clone()
    }

    fn nobody_answers(&self) -> Option<String> {
        (self.enabled && self.approvers.is_empty()).then(|| {
            "wecom is enabled but wecom.approvers is empty: cards are sent, but nobody can \
             answer them from WeCom (a refused click logs the clicker's userid)"
                .to_string()
        })
    }

    fn warnings(&self) -> Vec<String> {
        let mut out = Vec::new();
        if self.enabled && self.chats.is_empty() {
            out.push(
                "wecom.chats is empty: cards reach only people a route messages directly \
                 (`direct`); for a group's chatid, @-mention the bot in it: imrelay logs \
                 `wecom: a message from a chat not in wecom.chats` with the chat's id"
                    .to_string(),
            );
        }
        if self.enabled && self.transport == Transport::Callback {
            out.push(
                "wecom.transport = \"callback\": WeCom lets a bot send a card only as the reply to \
                 a message, so cards reach a chat when someone there messages the bot (see docs/wecom.md)"
                    .to_string(),
            );
        }
        out
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
