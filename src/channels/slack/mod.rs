//! The Slack channel: every approval, question and form becomes a Block Kit message in the
//! configured conversations; a click by an approver answers it (a modal takes a reason, an
//! edited command, a typed answer or a form), and every copy is updated to show the outcome
//! wherever the answer came from.
//!
//! - [`settings`] — `[slack]`: tokens, signing secret, mode, connections, channels, approvers.
//! - [`api`] — the Web API subset (`auth.test`, `chat.postMessage`, `chat.update`,
//!   `chat.postEphemeral`, `views.open`, `apps.connections.open`) with every failure
//!   classified as retry-after-N, transient or permanent.
//! - `plan` — the outbox jobs a created or resolved interaction needs.
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
mod plan;
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
use crate::channels::pipeline::Pipeline;
use crate::channels::registry::Opening;
use crate::channels::threads::Threads;
use crate::interaction::Via;

/// The channel's name (its `Via`, its outbox channel, its health component).
pub const CHANNEL: &str = "slack";
/// The store secret that signs button values (kept across restarts, so old messages keep
/// working).
pub const SECRET_NAME: &str = "slack-buttons";

/// How the install begins: the approvers' warning and the button secret.
const OPENING: Opening = Opening {
    channel: CHANNEL,
    platform: "Slack",
    approver_ids: "Slack user ids (U...)",
    secret: SECRET_NAME,
    signs: "button",
};

/// Installs the channel when `[slack] enabled = true`.
pub async fn install(w: &mut Wiring, settings: &SlackSettings) -> anyhow::Result<()> {
    if !settings.enabled {
        return Ok(());
    }
    let settings = Arc::new(settings.clone());
    let approvers = settings.approvers.len();
    let secret = OPENING.open(&*w.store, &*settings, approvers).await?;
    let api = Arc::new(
        api::WebApi::new(
            &settings.api_base(),
            settings.bot_token.clone(),
            settings.app_token.clone(),
        )
        .context("cannot build the slack HTTP client")?,
    );
    let blocks = render::Blocks::new(
        render::Buttons::new(secret.clone()),
        w.server.inbox.clone(),
        settings.locale,
    );
    let digests = crate::channels::digest::Digests::new(
        w.store.clone(),
        CHANNEL,
        settings.digest_after,
        settings.channels.clone(),
    );
    let digest_buttons = digest::DigestButtons::new(secret, digest::DOMAIN);
    let texts = crate::channels::digest_texts::Texts(settings.locale);
    let interactions = Arc::new(
        inbound::Interactions::new(
            Pipeline::new(w.registry.clone(), Via::new(CHANNEL)),
            w.store.clone(),
            api.clone(),
            settings.clone(),
            blocks.clone(),
        )
        .with_digests(inbound::DigestClicks {
            digests: digests.clone(),
            buttons: digest_buttons.clone(),
            texts,
        }),
    );
    w.metrics.register(
        "imrelay_slack_interactions",
        "Slack clicks and modal submissions, by result (resolved, already_resolved, refused, invalid, modal, ignored, ...)",
        interactions.results_metric(),
    );
    w.registry
        .add_hook(Arc::new(plan::planner(&settings.channels)));
    w.outbox.register(
        CHANNEL,
        Arc::new(deliver::Deliverer::new(
            deliver::Slack {
                api: api.clone(),
                blocks,
                thread_replies: settings.thread_replies,
                threads: Threads::installed(w, CHANNEL, settings.thread_per),
                digest_buttons,
                texts,
            },
            digests,
            w.store.clone(),
            w.health.clone(),
        )),
    );
    transport(w, &settings, api, interactions)?;
    tracing::info!(
        mode = settings.mode.as_str(),
        channels = settings.channels.len(),
        approvers = settings.approvers.len(),
        "slack: channel enabled"
    );
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

    fn unlisted(&self, place: &str) -> String {
        format!("{place:?} is not in slack.chats")
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

    fn nobody_answers(&self) -> Option<String> {
        if self.enabled && self.approvers.is_empty() {
            Some(
                "slack is enabled but slack.approvers is empty: messages are posted, but nobody \
                 can answer them from Slack (a refused click logs the clicker's user id)"
                    .to_string(),
            )
        } else {
            None
        }
    }

    fn warnings(&self) -> Vec<String> {
        if self.enabled && self.channels.is_empty() {
            vec![
                "slack.chats is empty: prompts reach only people a route messages directly \
                 (`direct`); to post in a conversation, add its id (\"C...\", in its details) \
                 to slack.chats"
                    .to_string(),
            ]
        } else {
            Vec::new()
        }
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
