//! The install every chat channel shares: the steps its `install` took in each copy, taken
//! here once, so that a chat channel's install supplies only its parts (its API client, its
//! rendering, its buttons, its inbound handler, its transport) and its settings.
//!
//! ```text
//! let Some(kit) = Kit::open(w, settings, settings.digest_after, settings.locale).await? else {
//!     return Ok(()); // disabled
//! };
//! // the platform's client, rendering and buttons over `kit.secret`, its inbound handler
//! // over `kit.pipeline(w)`, `kit.digests` and `kit.texts`
//! kit.count(w, "imrelay_<name>_clicks", "...", handler.results_metric());
//! kit.deliver(w, platform, pacer, "<name>_api");
//! // the transport
//! kit.enabled("<transport>", None);
//! ```
//!
//! - [`Kit::open`]: disabled channels stop; the section validated, "nobody can answer" logged,
//!   the button secret loaded ([`crate::channels::registry::Chat::open`]); its digests over its
//!   places.
//! - [`Kit::count`]: its inbound results counted under its metric.
//! - [`Kit::deliver`]: the kit's planner over its places (`channels::plan`) and the kit's
//!   outbox dispatch (`channels::messages`) over the platform.
//! - [`Kit::enabled`]: the one "channel enabled" line.

use std::sync::Arc;

use prometheus_client::registry::Metric;

use super::Wiring;
use super::digest::Digests;
use super::digest_texts::Texts;
use super::messages::{Messages, Pacer, Platform};
use super::pipeline::Pipeline;
use super::plan::Planner;
use super::registry::Channel;
use crate::interaction::Via;
use crate::outbox::{Delivery, OutboxHandler};
use crate::present::render::Locale;
use crate::store::ClaimedJob;

/// A chat channel's install under way: what the kit made for it at the opening.
pub(crate) struct Kit {
    /// The channel's name.
    channel: &'static str,
    /// Its configured places, as addresses.
    places: Vec<String>,
    /// How many approvers its own list has.
    approvers: usize,
    /// The store secret that signs its buttons.
    pub secret: Vec<u8>,
    /// Its digests (`digest_after`) over its places.
    pub digests: Digests,
    /// The words of its digests, in its locale.
    pub texts: Texts,
}

impl Kit {
    /// Opens the install of chat channel `section`: `None` when it is disabled; otherwise
    /// its section validated, an error logged when nobody may answer, its button secret
    /// loaded, its digests (after `digest_after` pending, in `locale`) over its places.
    pub(crate) async fn open(
        w: &mut Wiring,
        section: &dyn Channel,
        digest_after: u32,
        locale: Locale,
    ) -> anyhow::Result<Option<Self>> {
        if !section.enabled() {
            return Ok(None);
        }
        let channel = section.name();
        let chat = section
            .chat()
            .ok_or_else(|| anyhow::anyhow!("{channel} is not a chat channel"))?;
        let secret = chat.open(&*w.store, section).await?;
        let places = section.places();
        Ok(Some(Self {
            channel,
            digests: Digests::new(w.store.clone(), channel, digest_after, places.clone()),
            places,
            approvers: section.approvers().len(),
            secret,
            texts: Texts(locale),
        }))
    }

    /// The answer pipeline, answering as the channel.
    pub(crate) fn pipeline(&self, w: &Wiring) -> Pipeline {
        Pipeline::new(w.registry.clone(), Via::new(self.channel))
    }

    /// Counts its inbound handler's `results` as metric `name` (`help` says what it counts).
    pub(crate) fn count(&self, w: &Wiring, name: &str, help: &str, results: impl Metric) {
        w.metrics.register(name, help, results);
    }

    /// Plans its jobs with the kit's planner over its places, and delivers them on the kit's
    /// skeleton over `platform`, paced by `pacer`, its health reported as `health`.
    pub(crate) fn deliver<P: Platform + 'static>(
        &self,
        w: &mut Wiring,
        platform: P,
        pacer: Pacer,
        health: &'static str,
    ) {
        let places = self.places.clone();
        let skeleton = (platform, pacer, health);
        deliver(w, self.channel, places, self.digests.clone(), skeleton);
    }

    /// Says the channel is enabled, receiving by `transport`, with `detail` if any.
    pub(crate) fn enabled(&self, transport: &str, detail: Option<&str>) {
        tracing::info!(
            transport,
            chats = self.places.len(),
            approvers = self.approvers,
            detail,
            "{}: channel enabled",
            self.channel
        );
    }
}

/// Plans chat channel `channel`'s jobs with the kit's planner over `places`, and delivers
/// them on the kit's skeleton: `(platform, pacer, health)`, its `digests`.
fn deliver<P: Platform + 'static>(
    w: &mut Wiring,
    channel: &'static str,
    places: Vec<String>,
    digests: Digests,
    (platform, pacer, health): (P, Pacer, &'static str),
) {
    let messages = Messages {
        platform,
        store: w.store.clone(),
        pacer,
        digests,
        health: Some((w.health.clone(), health)),
    };
    w.registry
        .add_hook(Arc::new(Planner::<P::Job>::new(channel, places)));
    w.outbox.register(channel, Arc::new(Skeleton(messages)));
}

/// The kit's outbox handler of one chat platform: every job through its skeleton.
struct Skeleton<P: Platform>(Messages<P>);

#[async_trait::async_trait]
impl<P: Platform + 'static> OutboxHandler for Skeleton<P> {
    async fn deliver(&self, job: &ClaimedJob) -> Delivery {
        self.0.deliver(&job.job).await
    }

    fn concurrency(&self) -> usize {
        self.0.platform.concurrency()
    }
}
