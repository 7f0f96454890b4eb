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
mod render;
pub mod settings;

use std::sync::Arc;

use anyhow::Context;
use serde_json::json;

pub use settings::{Transport, WeComSettings};

use crate::channels::Wiring;
use crate::channels::kit::Kit;
use crate::channels::registry::Chat;

/// The channel's name (its `Via`, its outbox channel, its health component).
pub const CHANNEL: &str = "wecom";
/// The store secret that signs button keys (kept across restarts, so old cards keep working).
pub const SECRET_NAME: &str = "wecom-buttons";

/// WeCom in the kit's words.
const CHAT: Chat = Chat {
    approver_ids: "WeCom userids",
    secret: SECRET_NAME,
    signs: "button",
    posts: "cards are sent",
    refused: "a refused click logs the clicker's userid",
    no_places: Some((
        "cards",
        "for a group's chatid, @-mention the bot in it: imrelay logs `wecom: a message from a \
         chat not in wecom.chats` with the chat's id",
    )),
};

/// WeCom's outbox jobs: the kit's, their place stored as `chat`.
pub(crate) type Job = crate::channels::plan::TextJob<WeComSettings>;

impl crate::channels::plan::TextPlaces for WeComSettings {
    const CHANNEL: &'static str = CHANNEL;
    const FIELD: &'static str = "chat";
}

/// Installs the channel when `[wecom] enabled = true`.
pub async fn install(w: &mut Wiring, settings: &WeComSettings) -> anyhow::Result<()> {
    let Some(kit) = Kit::open(w, settings, settings.digest_after, settings.locale).await? else {
        return Ok(());
    };
    let settings = Arc::new(settings.clone());
    let cards = render::Cards::new(
        settings.locale,
        button::Keys::new(kit.secret.clone()),
        w.server.inbox.clone(),
    );
    let digest_keys = digest::DigestKeys::new(kit.secret.clone());
    let inbound = Arc::new(
        inbound::Inbound::new(
            kit.pipeline(w),
            w.store.clone(),
            settings.clone(),
            cards.clone(),
        )
        .with_digests(kit.digests.clone(), digest_keys.clone()),
    );
    kit.count(
        w,
        "imrelay_wecom_callbacks",
        "WeCom card clicks and typed answers, by result (resolved, already_resolved, refused, invalid, duplicate, ignored, ...)",
        inbound.results_metric(),
    );
    match settings.transport {
        settings::Transport::Longconn => longconn(w, &kit, &settings, inbound, cards, digest_keys)?,
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
    kit.enabled(settings.transport.as_str(), None);
    Ok(())
}

/// The long connection, and the kit's planner and delivery over it.
fn longconn(
    w: &mut Wiring,
    kit: &Kit,
    settings: &WeComSettings,
    inbound: Arc<inbound::Inbound>,
    cards: render::Cards,
    digest_keys: digest::DigestKeys,
) -> anyhow::Result<()> {
    let bot = Arc::new(
        bot::BotConnection::new(
            &settings.ws_url(),
            &settings.bot_id,
            settings.secret.clone(),
            inbound,
            w.shutdown.clone(),
            crate::tls::client_config()
                .context("cannot set up TLS for the wecom long connection")?,
        )
        .with_connect_timeout(std::time::Duration::from_secs(
            settings.connect_timeout_secs,
        )),
    );
    let wecom = deliver::WeCom {
        bot: bot.clone(),
        cards,
        digest_keys,
    };
    kit.deliver(w, wecom, deliver::pacer(), "wecom_send");
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

    fn chat(&self) -> Option<&'static Chat> {
        Some(&CHAT)
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

    fn warnings(&self) -> Vec<String> {
        let mut out: Vec<String> = crate::channels::registry::no_places(self)
            .into_iter()
            .collect();
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
