//! The Slack channel: every approval, question and form becomes a Block Kit message in the
//! configured conversations; a click by an approver answers it (a modal takes a reason, an
//! edited command, a typed answer or a form), and every copy is updated to show the outcome
//! wherever the answer came from.
//!
//! - [`settings`] — `[slack]`: tokens, signing secret, mode, connections, channels, approvers.
//! - [`api`] — the Web API subset (`auth.test`, `chat.postMessage`, `chat.update`,
//!   `chat.postEphemeral`, `views.open`, `apps.connections.open`) with every failure
//!   classified as retry-after-N, transient or permanent.
//! - `deliver` — posting and updating messages on the shared delivery skeleton.
//! - [`render`] — Block Kit messages and modals, and the signed values on their buttons.
//! - [`inbound`] — the click and modal handler, shared by both transports.
//! - [`socket`] — Socket Mode (the default): several WebSocket connections, every envelope
//!   acknowledged within Slack's 3 s, copies recognised, `disconnect` answered by a
//!   replacement first.
//! - [`events`] and [`verify`] — the HTTP Events/Interactivity endpoint, the alternative: the
//!   request signatures (v0, five minutes, no replays).
//! - `doctor` — `imrelay doctor`'s checks.

pub mod api;
mod deliver;
mod digest;
mod doctor;
pub mod events;
pub mod inbound;
pub mod render;
pub mod settings;
pub mod socket;
pub mod verify;

use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use serde_json::json;

pub use settings::{Mode, SlackSettings};

use crate::channels::Wiring;
use crate::channels::kit::Kit;
use crate::channels::registry::Chat;
use crate::channels::threads::Threads;

/// The channel's name (its `Via`, its outbox channel, its health component).
pub const CHANNEL: &str = "slack";
/// The store secret that signs button values (kept across restarts, so old messages keep
/// working).
pub const SECRET_NAME: &str = "slack-buttons";

/// Slack in the kit's words.
const CHAT: Chat = Chat {
    approver_ids: "Slack user ids (U...)",
    secret: SECRET_NAME,
    signs: "button",
    posts: "messages are posted",
    refused: "a refused click logs the clicker's user id",
    no_places: Some((
        "prompts",
        "to post in a conversation, add its id (\"C...\", in its details) to slack.chats",
    )),
};

/// Slack's outbox jobs: the kit's, their place stored as `channel`.
pub(crate) type Job = crate::channels::plan::TextJob<SlackSettings>;

impl crate::channels::plan::TextPlaces for SlackSettings {
    const CHANNEL: &'static str = CHANNEL;
    const FIELD: &'static str = "channel";
}

/// Installs the channel when `[slack] enabled = true`.
pub async fn install(w: &mut Wiring, settings: &SlackSettings) -> anyhow::Result<()> {
    let Some(kit) = Kit::open(w, settings, settings.digest_after, settings.locale).await? else {
        return Ok(());
    };
    let settings = Arc::new(settings.clone());
    let api = Arc::new(
        api::WebApi::new(
            &settings.api_base(),
            settings.bot_token.clone(),
            settings.app_token.clone(),
        )
        .context("cannot build the slack HTTP client")?,
    );
    let blocks = render::Blocks::new(
        render::Buttons::new(kit.secret.clone()),
        w.server.inbox.clone(),
        settings.locale,
    );
    let digest_buttons = digest::DigestButtons::new(kit.secret.clone(), digest::DOMAIN);
    let interactions = Arc::new(
        inbound::Interactions::new(
            kit.pipeline(w),
            w.store.clone(),
            api.clone(),
            settings.clone(),
            blocks.clone(),
        )
        .with_digests(inbound::DigestClicks {
            digests: kit.digests.clone(),
            buttons: digest_buttons.clone(),
            texts: kit.texts,
        }),
    );
    kit.count(
        w,
        "imrelay_slack_interactions",
        "Slack clicks and modal submissions, by result (resolved, already_resolved, refused, invalid, modal, ignored, ...)",
        interactions.results_metric(),
    );
    let slack = deliver::Slack {
        api: api.clone(),
        blocks,
        thread_replies: settings.thread_replies,
        threads: Threads::installed(w, CHANNEL, settings.thread_per),
        digest_buttons,
        texts: kit.texts,
    };
    kit.deliver(w, slack, deliver::pacer(), "slack_api");
    transport(w, &settings, api, interactions)?;
    kit.enabled(settings.mode.as_str(), None);
    Ok(())
}

/// How clicks arrive: Socket Mode's connections, started when the server serves, or the
/// HTTP events endpoint.
fn transport(
    w: &mut Wiring,
    settings: &SlackSettings,
    api: Arc<api::WebApi>,
    interactions: Arc<inbound::Interactions>,
) -> anyhow::Result<()> {
    match settings.mode {
        Mode::SocketMode => {
            let client = socket::SocketMode::new(
                api,
                interactions,
                settings.connections,
                w.health.clone(),
                w.shutdown.clone(),
                crate::tls::client_config().context("cannot set up TLS for slack socket mode")?,
            )
            .with_connect_timeout(Duration::from_secs(settings.connect_timeout_secs));
            w.spawn_on_serve(client.run());
        }
        Mode::Http => {
            w.route(events::router(Arc::new(events::Endpoint::new(
                interactions,
                settings,
                w.registry.clone(),
            ))));
            w.health.set(
                CHANNEL,
                "listening",
                json!({"mode": "http", "events_path": settings.events_path,
                    "approvers": settings.approvers.len(), "channels": settings.channels.len()}),
            );
        }
    }
    Ok(())
}

/// The `[slack]` section in the channel registry.
impl crate::channels::Channel for SlackSettings {
    fn name(&self) -> &'static str {
        CHANNEL
    }

    fn platform(&self) -> &'static str {
        "Slack"
    }

    fn places(&self) -> Vec<String> {
        self.channels.clone()
    }

    fn chat(&self) -> Option<&'static Chat> {
        Some(&CHAT)
    }

    fn person_id(&self, written: &crate::channels::Written) -> Result<String, String> {
        let id = written.text("a Slack user id")?;
        match settings::name_not_id(&id, false) {
            Some(why) => Err(why),
            None => Ok(id),
        }
    }

    fn problems(&self) -> Vec<String> {
        let chats = self.channels.iter().enumerate().filter_map(|(j, c)| {
            settings::name_not_id(c, true).map(|why| format!("slack.chats[{j}]: {why}"))
        });
        let approvers = self.approvers.iter().enumerate().filter_map(|(j, c)| {
            settings::name_not_id(c, false).map(|why| format!("slack.approvers[{j}]: {why}"))
        });
        chats.chain(approvers).collect()
    }

    fn enabled(&self) -> bool {
        self.enabled
    }

    fn validate(&self) -> Result<(), String> {
        SlackSettings::validate(self)
    }

    fn paths(&self) -> Vec<crate::settings::PathClaim> {
        SlackSettings::paths(self)
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
