//! The Discord channel: every approval, question and form becomes a message with components
//! in the configured channels (and in people's direct messages); a click, a select menu or a
//! modal by an approver answers it, and every copy is edited to the outcome wherever the
//! answer came from.
//!
//! - [`settings`] — `[discord]`: the bot token, the transport, the public key, the chats,
//!   approvers, locale.
//! - [`api`] — the REST subset, with Discord's per-route buckets, `Retry-After` and the
//!   global limit; every failure classified as retry-after-N, transient or permanent.
//! - `deliver` — posting and editing messages on the kit's delivery skeleton.
//! - `digest` — how a digest is drawn, its buttons signed by the kit.
//! - [`render`] — the messages (content within 2,000 characters, code blocks, buttons, select
//!   menus) and modals; [`button`] — the signed `custom_id`s.
//! - [`inbound`] — clicks, selects and modal submissions through the kit's answer pipeline,
//!   shared by both transports, answered within Discord's 3 s.
//! - `commands` — the `/whoami` and `/sessions` application commands, registered at start-up.
//! - [`gateway`] — the Gateway (the default): identify with no intents, heartbeats, resume.
//! - [`endpoint`] — the HTTP interactions endpoint, the alternative: Ed25519 signatures, a
//!   replay window.
//! - `doctor` — `imrelay doctor`'s checks.

pub mod api;
pub mod button;
mod commands;
mod deliver;
mod digest;
mod doctor;
pub mod endpoint;
pub mod gateway;
pub mod inbound;
pub mod render;
mod replies;
pub mod settings;

use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use serde_json::json;

pub use settings::{DiscordSettings, Transport};

use crate::channels::Wiring;
use crate::channels::kit::Kit;
use crate::channels::registry::Chat;

/// The channel's name (its `Via`, its outbox channel, its health component).
pub const CHANNEL: &str = "discord";
/// The store secret that signs `custom_id`s (kept across restarts, so old messages keep
/// working).
pub const SECRET_NAME: &str = "discord-components";

/// Discord in the kit's words.
const CHAT: Chat = Chat {
    approver_ids: "Discord user ids",
    secret: SECRET_NAME,
    signs: "component",
    posts: "messages are posted",
    refused: "a refused click logs the clicker's user id",
    no_places: Some((
        "prompts",
        "to post in a channel, add its id (Developer Mode on, right-click the channel → Copy \
         Channel ID) to discord.chats",
    )),
};

/// Discord's outbox jobs: the kit's, their place stored as `channel`.
pub(crate) type Job = crate::channels::plan::TextJob<DiscordSettings>;

impl crate::channels::plan::TextPlaces for DiscordSettings {
    const CHANNEL: &'static str = CHANNEL;
    const FIELD: &'static str = "channel";
}

/// Installs the channel when `[discord] enabled = true`.
pub async fn install(w: &mut Wiring, settings: &DiscordSettings) -> anyhow::Result<()> {
    let Some(kit) = Kit::open(w, settings, settings.digest_after, settings.locale).await? else {
        return Ok(());
    };
    let settings = Arc::new(settings.clone());
    let rest = Arc::new(
        api::Rest::new(&settings.api_url(), settings.bot_token.clone())
            .context("cannot build the discord HTTP client")?,
    );
    let render = render::Render::new(
        button::Buttons::new(kit.secret.clone()),
        w.server.inbox.clone(),
        settings.locale,
    );
    let digest_buttons = digest::DigestButtons::new(kit.secret.clone(), digest::DOMAIN);
    let interactions = Arc::new(
        inbound::Interactions::new(
            kit.pipeline(w),
            render.clone(),
            settings.clone(),
            w.store.clone(),
        )
        .with_digests(inbound::DigestClicks {
            digests: kit.digests.clone(),
            buttons: digest_buttons.clone(),
            texts: kit.texts,
        }),
    );
    kit.count(
        w,
        "imrelay_discord_interactions",
        "Discord clicks, selects and modal submissions, by result (resolved, already_resolved, refused, invalid, modal, slow, ...)",
        interactions.results_metric(),
    );
    let discord = deliver::Discord {
        rest: rest.clone(),
        render,
        dms: Default::default(),
        digest_buttons,
        threads: crate::channels::threads::Threads::installed(w, CHANNEL, settings.thread_per),
        thread_replies: settings.thread_replies,
    };
    kit.deliver(w, discord, deliver::pacer(), "discord_api");
    w.spawn_on_serve(commands::register(rest.clone(), w.shutdown.clone()));
    transport(w, &settings, rest, interactions)?;
    kit.enabled(settings.transport.as_str(), None);
    Ok(())
}

/// How clicks arrive: the Gateway, started when the server serves, or the HTTP interactions
/// endpoint.
fn transport(
    w: &mut Wiring,
    settings: &DiscordSettings,
    rest: Arc<api::Rest>,
    interactions: Arc<inbound::Interactions>,
) -> anyhow::Result<()> {
    match settings.transport {
        Transport::Gateway => {
            let gateway = gateway::Gateway {
                url: settings.gateway_url(),
                token: settings.bot_token.clone(),
                rest,
                handler: interactions,
                health: w.health.clone(),
                shutdown: w.shutdown.clone(),
                tls: crate::tls::client_config()
                    .context("cannot set up TLS for the discord gateway")?,
                connect_timeout: Duration::from_secs(settings.connect_timeout_secs),
            };
            w.spawn_on_serve(gateway.run());
        }
        Transport::Interactions => {
            let key = settings
                .public_key_bytes()
                .context("discord.public_key must be 64 hex characters")?;
            w.route(endpoint::router(Arc::new(endpoint::Endpoint::new(
                interactions,
                key,
                &settings.inbound_path,
                w.registry.clone(),
            ))));
            w.health.set(
                CHANNEL,
                "listening",
                json!({"transport": "interactions", "inbound_path": settings.inbound_path}),
            );
        }
    }
    Ok(())
}

/// A Discord id as `[[people]]` and `[[routes]]` write it: a text of digits (a number is
/// taken too).
fn snowflake(written: &crate::channels::Written, what: &str) -> Result<String, String> {
    let id = match written {
        crate::channels::Written::Number(n) if *n > 0 => n.to_string(),
        other => other.text(&format!("a Discord {what} id"))?,
    };
    match settings::not_an_id(&id, what) {
        Some(why) => Err(why),
        None => Ok(id),
    }
}

/// The `[discord]` section in the channel registry.
impl crate::channels::Channel for DiscordSettings {
    fn name(&self) -> &'static str {
        CHANNEL
    }

    fn platform(&self) -> &'static str {
        "Discord"
    }

    fn places(&self) -> Vec<String> {
        self.chats.clone()
    }

    fn chat(&self) -> Option<&'static Chat> {
        Some(&CHAT)
    }

    fn place(&self, written: &crate::channels::Written) -> Result<String, String> {
        snowflake(written, "channel")
    }

    fn person_id(&self, written: &crate::channels::Written) -> Result<String, String> {
        snowflake(written, "user")
    }

    fn direct(&self, id: &str) -> Option<String> {
        Some(format!("@{id}"))
    }

    fn enabled(&self) -> bool {
        self.enabled
    }

    fn validate(&self) -> Result<(), String> {
        DiscordSettings::validate(self)
    }

    fn paths(&self) -> Vec<crate::settings::PathClaim> {
        DiscordSettings::paths(self)
    }

    fn approvers(&self) -> Vec<String> {
        self.approvers.clone()
    }

    fn problems(&self) -> Vec<String> {
        DiscordSettings::problems(self)
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
