//! The ntfy channel: every interaction is published to the configured ntfy topics (a
//! self-hosted server or ntfy.sh); an approval carries Allow and Deny buttons whose
//! single-use URLs answer it as the person the channel is configured for; the outcome is
//! published under the same notification id when it is answered, from anywhere. Past
//! `digest_after` pending, or in a burst, a session's requests are one digest notification.
//!
//! - [`settings`] — `[ntfy]`: the server, credentials, topics, the person, priority, privacy.
//! - `deliver` — publishing prompts and outcomes on the shared delivery skeleton.
//! - `render` — the JSON ntfy publishes.
//! - `inbound` — the buttons' endpoint: the kit's single-use action tokens
//!   (`channels/actions.rs`) through the answer pipeline, and the digests' links
//!   (`channels/digest_links.rs`) through the kit's digest flow.
//! - `doctor` — `imrelay doctor`'s checks.

mod deliver;
mod doctor;
mod inbound;
mod render;
pub mod settings;

use std::sync::Arc;

pub use settings::NtfySettings;

use crate::channels::Wiring;
use crate::channels::actions::{Endpoint, Person, Tokens};
use crate::channels::digest_links::DigestLinks;
use crate::channels::pipeline::Pipeline;
use crate::interaction::Via;

/// The channel's name (its `Via`, its outbox channel, its people's key).
pub const CHANNEL: &str = "ntfy";

/// ntfy's outbox jobs: the kit's, their place stored as `topic`.
pub(crate) type Job = crate::channels::plan::TextJob<NtfySettings>;

impl crate::channels::plan::TextPlaces for NtfySettings {
    const CHANNEL: &'static str = CHANNEL;
    const FIELD: &'static str = "topic";
}

/// The channel's action tokens.
const TOKENS: Tokens = Tokens { channel: CHANNEL };

/// The store's name of the secret the digest links are signed with.
const LINKS_SECRET: &str = "ntfy-digest-links";
/// The domain of the digest links' tags: good on this channel only.
const LINKS_DOMAIN: &[u8] = b"imrelay/ntfy/digest-link/v1";

/// Who answers through the buttons, as `[[people]]` knows them.
fn person(w: &Wiring, name: &str) -> anyhow::Result<Person> {
    let teams = w.registry.teams();
    let Some(p) = teams.people.person(name) else {
        anyhow::bail!(
            "invalid configuration: ntfy.person = {name:?} is not a [[people]] entry: add \
             [[people]] name = {name:?} (with ntfy = [\"{name}\"] if routes name approvers)"
        );
    };
    let identity = p
        .ids_on(CHANNEL)
        .next()
        .map_or_else(|| p.name().to_string(), str::to_string);
    Ok(Person {
        name: p.name().to_string(),
        identity,
    })
}

/// Installs the channel when `[ntfy] enabled = true`.
pub async fn install(w: &mut Wiring, settings: &NtfySettings) -> anyhow::Result<()> {
    if !settings.enabled {
        return Ok(());
    }
    let mistakes = settings.mistakes();
    if !mistakes.is_empty() {
        anyhow::bail!("invalid configuration: {}", mistakes.join("; "));
    }
    let person = person(w, settings.person.trim())?;
    let settings = Arc::new(settings.clone());
    if settings.public_url.trim().is_empty() && w.server.inbox.is_none() {
        tracing::warn!(
            "ntfy: neither ntfy.public_url nor server.public_url is set, so the buttons call {}, \
             which a phone cannot reach: set one to imrelay's address as the phone reaches it",
            w.server.public_url
        );
    }
    let actions_base = match settings.public_url.trim().trim_end_matches('/') {
        "" => w.server.public_url.clone(),
        url => url.to_string(),
    };
    let client = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .user_agent(format!("imrelay/{}", env!("CARGO_PKG_VERSION")))
        .build()?;
    let links = DigestLinks::new(w.store.secret(LINKS_SECRET).await?, LINKS_DOMAIN, CHANNEL);
    let planner = crate::channels::plan::Planner::<Job>::new(CHANNEL, settings.topics.clone());
    w.registry.add_hook(Arc::new(planner));
    let ntfy = deliver::Ntfy {
        settings: settings.clone(),
        client,
        store: w.store.clone(),
        actions_base,
        inbox: w.server.inbox.clone(),
        links,
    };
    let messages = Arc::new(deliver::messages(ntfy, w.store.clone()));
    w.outbox.register(
        CHANNEL,
        Arc::new(deliver::Deliverer::new(
            messages.clone(),
            w.registry.clone(),
            person.name.clone(),
        )),
    );
    w.route(inbound::router(inbound::Inbound {
        endpoint: Endpoint {
            pipeline: Pipeline::new(w.registry.clone(), Via::new(CHANNEL)),
            store: w.store.clone(),
            tokens: TOKENS,
            locale: settings.locale,
        },
        person: person.clone(),
        messages,
    }));
    tracing::info!(
        topics = settings.topics.len(),
        person = %person.name.escape_debug(),
        include_command = settings.include_command,
        "ntfy: channel enabled"
    );
    Ok(())
}

/// The `[ntfy]` section in the channel registry.
impl crate::channels::Channel for NtfySettings {
    fn is_phone(&self) -> bool {
        true
    }

    fn name(&self) -> &'static str {
        CHANNEL
    }

    fn platform(&self) -> &'static str {
        "ntfy"
    }

    fn places(&self) -> Vec<String> {
        self.topics.clone()
    }

    fn direct(&self, _id: &str) -> Option<String> {
        // A person's ntfy id names them, not a topic: prompts go to the topics.
        None
    }

    fn unlisted(&self, place: &str) -> String {
        format!("{place:?} is not in ntfy.chats")
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
        let mut out = Vec::new();
        if self.enabled && self.api_url.starts_with("http://") {
            out.push(format!(
                "ntfy.api_url = {:?} is plain http: the token and every text cross the network unencrypted",
                self.api_url
            ));
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
