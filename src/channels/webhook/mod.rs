//! Webhook integrations: signed lifecycle events out, signed answers in.
//!
//! Outbound: each `[[webhooks]]` target receives `interaction.created` and
//! `interaction.resolved` events (filtered by event, session and agent), signed with the
//! Standard Webhooks scheme and delivered through the outbox: at least once, retried with
//! jittered exponential backoff until the target's horizon, surviving restarts. Each target is
//! its own outbox channel (`webhook:<name>`), so a slow or dead target never delays another.
//! A `410 Gone` disables the target until its URL changes.
//!
//! Inbound: `POST /v1/webhooks/{name}/respond` takes an answer signed with that target's
//! secret (timestamps within 5 minutes, `webhook-id`s never replayed) and records it with
//! `via = "webhook:<name>"`, so a system that cannot hold an operator token can answer.
//!
//! - `settings` — `[[webhooks]]`: each target's URL, secret, filters and horizon.
//! - `plan` — the signed event each target gets, planned as its outbox job.
//! - `deliver` — posting those events, and disabling a target that answers `410 Gone`.
//! - `inbound` — the answer endpoint.
//! - [`signature`] — the Standard Webhooks signatures, both ways.
//! - `doctor` — `imrelay doctor`'s checks.

mod deliver;
mod doctor;
mod inbound;
mod plan;
pub(crate) mod settings;
// Public on purpose: the integration tests sign and verify deliveries with it.
pub mod signature;

pub use settings::{WebhookEvent, WebhookSettings, validate_all};

/// The `[[webhooks]]` targets: the channel's section in the settings, a list.
pub type WebhookTargets = Vec<WebhookSettings>;

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, RwLock};

use serde_json::Value;
use sha2::{Digest, Sha256};

use super::Wiring;
use crate::store::Store;
use crate::sync::RwLockExt;
use signature::SigningKey;

/// The channel name people's webhook identities are given under (`webhook = ["ci-bot"]`).
pub const CHANNEL_IDENTITY: &str = "webhook";

struct Target {
    settings: WebhookSettings,
    key: SigningKey,
}

/// The outbox channel name of a target.
fn channel_name(name: &str) -> String {
    format!("webhook:{name}")
}

fn disabled_key(name: &str) -> String {
    format!("webhook.disabled.{name}")
}

fn url_digest(url: &str) -> String {
    hex::encode(Sha256::digest(url.as_bytes()))
}

/// The webhook channel's targets and state: plans and delivers events. (It holds no
/// registry, so registering it as a registry hook makes no reference cycle.)
pub struct Webhooks {
    targets: HashMap<String, Target>,
    /// Targets disabled by a 410 (kept in the store; read synchronously while planning).
    disabled: RwLock<HashSet<String>>,
    store: Arc<dyn Store>,
    client: reqwest::Client,
    public_url: String,
}

impl Webhooks {
    fn is_disabled(&self, name: &str) -> bool {
        self.disabled.reading().contains(name)
    }
}

/// Installs the webhook channel when targets are configured.
pub async fn install(w: &mut Wiring, configured: &[WebhookSettings]) -> anyhow::Result<()> {
    if configured.is_empty() {
        return Ok(());
    }
    let (targets, disabled) = targets(w.store.as_ref(), configured).await?;
    let client = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .user_agent(format!("imrelay/{}", env!("CARGO_PKG_VERSION")))
        .build()?;
    let hooks = Arc::new(Webhooks {
        targets,
        disabled: RwLock::new(disabled),
        store: w.store.clone(),
        client,
        public_url: w.server.public_url.clone(),
    });
    for name in hooks.targets.keys() {
        w.outbox.register(
            &channel_name(name),
            Arc::new(deliver::Deliverer {
                hooks: hooks.clone(),
                name: name.clone(),
            }),
        );
    }
    w.registry.add_hook(Arc::new(plan::Planner(hooks.clone())));
    w.route(inbound::router(hooks.clone(), w.registry.clone()));
    tracing::info!(targets = hooks.targets.len(), "webhooks enabled");
    Ok(())
}

/// The configured targets with their signing keys, and those still disabled by a `410`
/// (a target whose URL changed since is enabled again).
async fn targets(
    store: &dyn Store,
    configured: &[WebhookSettings],
) -> anyhow::Result<(HashMap<String, Target>, HashSet<String>)> {
    let mut targets = HashMap::new();
    let mut disabled = HashSet::new();
    for s in configured {
        let key = SigningKey::parse(s.secret.expose())
            .map_err(|e| anyhow::anyhow!("webhooks.{}: {e}", s.name))?;
        if let Some(v) = store.get_value(&disabled_key(&s.name)).await? {
            let same_url = serde_json::from_str::<Value>(&v)
                .ok()
                .and_then(|v| v["url_sha256"].as_str().map(str::to_string))
                .is_some_and(|d| d == url_digest(&s.url));
            if same_url {
                tracing::warn!(webhook = %s.name, "webhook target is disabled (it answered 410 Gone); change its url to enable it again");
                disabled.insert(s.name.clone());
            } else {
                store.set_value(&disabled_key(&s.name), None).await?;
            }
        }
        targets.insert(
            s.name.clone(),
            Target {
                settings: s.clone(),
                key,
            },
        );
    }
    Ok((targets, disabled))
}

/// The `[[webhooks]]` targets in the channel registry: enabled when any is configured.
impl crate::channels::Channel for Vec<WebhookSettings> {
    fn name(&self) -> &'static str {
        CHANNEL_IDENTITY
    }

    fn platform(&self) -> &'static str {
        "webhooks"
    }

    fn route_key(&self) -> &'static str {
        "webhooks"
    }

    fn is_chat(&self) -> bool {
        false
    }

    fn places(&self) -> Vec<String> {
        self.iter().map(|w| w.name.clone()).collect()
    }

    fn unlisted(&self, place: &str) -> String {
        format!("{place:?} is not the name of a [[webhooks]] entry")
    }

    fn direct(&self, _id: &str) -> Option<String> {
        None
    }

    fn enabled(&self) -> bool {
        !self.is_empty()
    }

    fn validate(&self) -> Result<(), String> {
        validate_all(self)
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
