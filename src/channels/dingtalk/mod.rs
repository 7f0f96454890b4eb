//! The DingTalk (钉钉) channel: every approval, question and form becomes an interactive card
//! (drawn with the app's card template) in the configured groups, or in a route's people's
//! chats with the robot; a click by an approver answers it, and every card is updated to
//! show the outcome wherever the answer came from. Clicks arrive over Stream mode, so no
//! public URL is needed.
//!
//! - [`settings`] — `[dingtalk]`.
//! - `deliver` — creating and updating cards on the shared delivery skeleton.
//! - `render` — the card template's variables for every state, in Chinese or English.
//! - [`inbound`] — the click handler the Stream connection calls.
//! - [`api`] — the OpenAPI subset (access token, card create-and-deliver, card update).
//! - `button` — the token that binds a card's buttons to one interaction.
//! - [`stream`] — the Stream mode transport: the gateway request, the WebSocket, `SYSTEM`
//!   ping/disconnect, `CALLBACK` acknowledgements carrying the handler's response,
//!   redeliveries answered once.
//! - `doctor` — `imrelay doctor`'s checks.

// `api`, `inbound`, `settings` and `stream` are public on purpose: the integration tests
// drive them (the fake gateway and OpenAPI); the rest is the crate's own.
pub mod api;
mod button;
mod deliver;
mod digest;
mod doctor;
pub mod inbound;
mod quotes;
mod render;
pub mod settings;
pub mod stream;

use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;

pub use settings::DingTalkSettings;

use crate::channels::Wiring;
use crate::channels::kit::Kit;
use crate::channels::registry::Chat;

/// The channel's name (its `Via`, its outbox channel, its health component).
pub const CHANNEL: &str = "dingtalk";
/// The store secret that signs card tokens (kept across restarts, so old cards keep
/// working).
pub const SECRET_NAME: &str = "dingtalk-cards";

/// DingTalk in the kit's words (an empty `chats` is not warned of: it is how `whoami`
/// learns a group's id).
const CHAT: Chat = Chat {
    approver_ids: "DingTalk userIds",
    secret: SECRET_NAME,
    signs: "card",
    posts: "cards are sent",
    refused: "a refused click logs the clicker's userId",
    no_places: None,
};

/// DingTalk's outbox jobs: the kit's, their place stored as `target`.
pub(crate) type Job = crate::channels::plan::TextJob<DingTalkSettings>;

impl crate::channels::plan::TextPlaces for DingTalkSettings {
    const CHANNEL: &'static str = CHANNEL;
    const FIELD: &'static str = "target";
}

/// Installs the channel when `[dingtalk] enabled = true`.
pub async fn install(w: &mut Wiring, settings: &DingTalkSettings) -> anyhow::Result<()> {
    let Some(kit) = Kit::open(w, settings, settings.digest_after, settings.locale).await? else {
        return Ok(());
    };
    let settings = Arc::new(settings.clone());
    let api = Arc::new(
        api::OpenApi::new(
            &settings.api_base(),
            &settings.client_id,
            settings.client_secret.clone(),
            settings.robot_code(),
        )
        .context("cannot build the dingtalk HTTP client")?,
    );
    let cards = render::Cards::new(
        settings.locale,
        button::Tokens::new(kit.secret.clone()),
        w.server.inbox.clone(),
    );
    let digest_tokens = digest::DigestTokens::new(kit.secret.clone());
    let clicks = Arc::new(
        inbound::Clicks::new(
            kit.pipeline(w),
            api.clone(),
            settings.clone(),
            cards.clone(),
        )
        .with_digests(kit.digests.clone(), digest_tokens.clone()),
    );
    kit.count(
        w,
        "imrelay_dingtalk_clicks",
        "DingTalk card clicks, by result (resolved, already_resolved, refused, invalid, ignored, ...)",
        clicks.results_metric(),
    );
    let dingtalk = deliver::DingTalk {
        api,
        cards,
        template: settings.card_template_id.clone(),
        digest_tokens,
    };
    kit.deliver(w, dingtalk, deliver::pacer(), "dingtalk_api");
    stream(w, &settings, clicks)?;
    kit.enabled("stream", None);
    Ok(())
}

/// The Stream mode connection that brings clicks, started when the server serves.
fn stream(
    w: &mut Wiring,
    settings: &DingTalkSettings,
    clicks: Arc<inbound::Clicks>,
) -> anyhow::Result<()> {
    let gateway = Arc::new(
        stream::Gateway::new(
            &settings.gateway_base(),
            &settings.client_id,
            settings.client_secret.clone(),
        )
        .context("cannot build the dingtalk gateway client")?,
    );
    w.health.set(
        CHANNEL,
        "connecting",
        serde_json::json!({"mode": "stream", "approvers": settings.approvers.len(),
            "conversations": settings.conversations.len()}),
    );
    let client = stream::Stream::new(
        gateway,
        vec![
            stream::CARD_CALLBACK_TOPIC.to_string(),
            stream::BOT_MESSAGE_TOPIC.to_string(),
        ],
        clicks,
        w.shutdown.clone(),
        crate::tls::client_config().context("cannot set up TLS for the dingtalk stream")?,
    )
    .with_health(w.health.clone())
    .with_connect_timeout(Duration::from_secs(settings.connect_timeout_secs));
    w.spawn_on_serve(Arc::new(client).run());
    Ok(())
}

/// The `[dingtalk]` section in the channel registry.
impl crate::channels::Channel for DingTalkSettings {
    fn name(&self) -> &'static str {
        CHANNEL
    }

    fn platform(&self) -> &'static str {
        "DingTalk"
    }

    fn places(&self) -> Vec<String> {
        self.conversations.clone()
    }

    fn chat(&self) -> Option<&'static Chat> {
        Some(&CHAT)
    }

    fn direct(&self, id: &str) -> Option<String> {
        Some(format!("user:{id}"))
    }

    fn enabled(&self) -> bool {
        self.enabled
    }

    fn validate(&self) -> Result<(), String> {
        DingTalkSettings::validate(self)
    }

    fn paths(&self) -> Vec<crate::settings::PathClaim> {
        DingTalkSettings::paths(self)
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
