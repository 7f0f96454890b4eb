//! The Web Push channel: the inbox, installed on a phone's home screen or open in a desktop
//! browser, subscribes its device ("Notify me on this device") for the person of its labelled
//! operator token; every interaction that person may answer is pushed to their devices, an
//! approval with Approve and Deny actions that the inbox's service worker answers with
//! single-use tokens; the outcome replaces the notification when it is answered, from
//! anywhere.
//!
//! - [`settings`] — `[push]`: the VAPID contact, privacy, limits.
//! - `vapid` — the server's key, kept in the store, and the signed JWT (RFC 8292).
//! - `devices` — the subscribed devices, kept in the store.
//! - `plan` — the outbox jobs a created, escalated or resolved interaction needs.
//! - `deliver` — encrypting (RFC 8291) and sending, on the shared delivery skeleton.
//! - `render` — the JSON each push carries to the service worker.
//! - `api` — the devices' endpoints and the actions' endpoint.
//! - `doctor` — `imrelay doctor`'s checks: the key, the devices, their push services.

mod api;
mod deliver;
mod devices;
mod doctor;
mod plan;
mod render;
pub mod settings;
mod vapid;

use std::sync::Arc;

pub use settings::PushSettings;

use crate::channels::Wiring;
use crate::channels::actions::{Endpoint, Tokens};
use crate::channels::digest_links::DigestLinks;
use crate::channels::pipeline::Pipeline;
use crate::interaction::Via;
use crate::interaction::quorum::OPERATOR;

/// The channel's name (its `Via`, its outbox channel).
pub const CHANNEL: &str = "push";

/// The channel's action tokens.
const TOKENS: Tokens = Tokens { channel: CHANNEL };

/// The store's name of the secret the digest links are signed with.
const LINKS_SECRET: &str = "push-digest-links";
/// The domain of the digest links' tags: good on this channel only.
const LINKS_DOMAIN: &[u8] = b"imrelay/push/digest-link/v1";

/// Installs the channel when `[push] enabled = true`.
pub async fn install(w: &mut Wiring, settings: &PushSettings) -> anyhow::Result<()> {
    if !settings.enabled {
        return Ok(());
    }
    let mistakes = settings.mistakes();
    if !mistakes.is_empty() {
        anyhow::bail!("invalid configuration: {}", mistakes.join("; "));
    }
    let Some(contact) = settings.contact(&w.server.public_url) else {
        anyhow::bail!(
            "invalid configuration: push needs a contact for the push services: set push.subject \
             = \"mailto:you@example.com\" (or server.public_url to imrelay's https:// address)"
        );
    };
    let settings = Arc::new(settings.clone());
    let vapid = vapid::Vapid::load(w.store.as_ref()).await?;
    let client = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .user_agent(format!("imrelay/{}", env!("CARGO_PKG_VERSION")))
        .build()?;
    w.registry.add_hook(Arc::new(plan::Planner));
    let links = DigestLinks::new(w.store.secret(LINKS_SECRET).await?, LINKS_DOMAIN, CHANNEL);
    let deliverer = deliver::Deliverer::new(
        deliver::Push {
            settings: settings.clone(),
            client,
            store: w.store.clone(),
            vapid: vapid.clone(),
            contact,
            links,
        },
        w.store.clone(),
        w.registry.clone(),
    );
    let messages = deliverer.messages.clone();
    w.outbox.register(CHANNEL, Arc::new(deliverer));
    let api = api::Api {
        settings: settings.clone(),
        store: w.store.clone(),
        registry: w.registry.clone(),
        vapid,
        endpoint: Endpoint {
            pipeline: Pipeline::new(w.registry.clone(), Via::new(CHANNEL)).known_as(OPERATOR),
            store: w.store.clone(),
            tokens: TOKENS,
            locale: settings.locale,
        },
        messages,
    };
    w.route(api::action_router(api.clone()));
    w.route_operator(api::operator_router(api));
    tracing::info!(
        include_command = settings.include_command,
        "push: channel enabled (the inbox offers \"Notify me on this device\")"
    );
    Ok(())
}

/// The `[push]` section in the channel registry.
impl crate::channels::Channel for PushSettings {
    fn name(&self) -> &'static str {
        CHANNEL
    }

    fn platform(&self) -> &'static str {
        "Web Push"
    }

    fn is_chat(&self) -> bool {
        false
    }

    fn is_phone(&self) -> bool {
        true
    }

    fn direct(&self, _id: &str) -> Option<String> {
        None
    }

    fn enabled(&self) -> bool {
        self.enabled
    }

    fn validate(&self) -> Result<(), String> {
        match self.mistakes().first() {
            Some(m) => Err(m.clone()),
            None => Ok(()),
        }
    }

    fn problems(&self) -> Vec<String> {
        self.mistakes().into_iter().skip(1).collect()
    }

    fn approvers(&self) -> Vec<String> {
        Vec::new()
    }

    fn warnings(&self) -> Vec<String> {
        Vec::new()
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
