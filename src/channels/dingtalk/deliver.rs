//! Creating, delivering and updating cards through the durable outbox, on the shared
//! delivery skeleton ([`crate::channels::messages`]): a `post` job creates and delivers one
//! card (its `outTrackId` derived from the interaction and the place, so every retry names
//! the same card), an `update` job replaces the data of every card recorded for the
//! interaction. DingTalk lets a robot send about 20 messages a minute to one group, so
//! requests to one place are spaced by [`CHAT_GAP`]; a throttled place is kept quiet and the
//! job retried.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use serde_json::json;
use sha2::{Digest, Sha256};

use super::CHANNEL;
use super::Job;
use super::api::{ApiError, OpenApi, Space};
use super::digest::{self, DigestTokens};
use super::render::Cards;
use crate::channels::digest::{Edited, Sheet};
use crate::channels::digest_texts::Texts;
use crate::channels::messages::{Failure, Pacer, Platform, Posted};
use crate::interaction::Interaction;
use crate::store::{ChannelMessage, OutboxJob};

/// Smallest gap between two requests to one place (20 a minute).
pub(crate) const CHAT_GAP: Duration = Duration::from_secs(3);
/// How long a throttled place is kept quiet, and the job waits, before it is tried again
/// (DingTalk's limits are per second and it does not say how long).
pub(crate) const THROTTLE_PAUSE: Duration = Duration::from_secs(2);

/// What a failed OpenAPI call means for the job.
fn failure(e: ApiError) -> Failure {
    match e {
        ApiError::Throttled { .. } => Failure::Throttled {
            after: Some(THROTTLE_PAUSE),
            error: e.to_string(),
        },
        ApiError::Refused { .. } => Failure::Permanent(e.to_string()),
        other => Failure::Transient(other.to_string()),
    }
}

/// The card id of `i`'s card at `target`: the same on every attempt.
pub(crate) fn out_track_id(i: &Interaction, target: &str) -> String {
    let mut h = Sha256::new();
    for part in [
        i.id.as_str(),
        &i.created_at.as_millisecond().to_string(),
        target,
    ] {
        h.update(part.as_bytes());
        h.update(b"\n");
    }
    let digest = h.finalize();
    let hex: String = digest[..16].iter().map(|b| format!("{b:02x}")).collect();
    format!("imrelay-{hex}")
}

/// DingTalk as the delivery skeleton sees it.
pub(crate) struct DingTalk {
    /// The OpenAPI client.
    pub api: Arc<OpenApi>,
    /// Card rendering.
    pub cards: Cards,
    /// The card template.
    pub template: String,
    /// Signs digest cards' tokens.
    pub digest_tokens: DigestTokens,
}

#[async_trait]
impl Platform for DingTalk {
    type Target = String;
    type Job = Job;

    fn texts(&self) -> Texts {
        Texts(self.cards.locale())
    }

    async fn post_digest(&self, target: &String, sheet: &Sheet) -> Result<String, Failure> {
        // The same id on every attempt: a retry names the same card.
        let mut h = Sha256::new();
        for part in ["digest", &sheet.session, &sheet.first, target] {
            h.update(part.as_bytes());
            h.update(b"\n");
        }
        let id = format!("imrelay-d-{}", hex::encode(&h.finalize()[..16]));
        let params = digest::params(&self.digest_tokens, sheet);
        self.api
            .create_and_deliver(&self.template, &id, &params, Space::of(target))
            .await
            .map_err(failure)?;
        Ok(id)
    }

    async fn edit_digest(
        &self,
        _address: &str,
        message: &str,
        sheet: &Sheet,
    ) -> Result<Edited, Failure> {
        let params = digest::params(&self.digest_tokens, sheet);
        self.api
            .update_card(message, &params)
            .await
            .map_err(failure)?;
        Ok(Edited::Done)
    }

    fn channel(&self) -> &'static str {
        CHANNEL
    }

    fn address(&self, target: &String) -> String {
        target.clone()
    }

    /// A reply quoting a session's card reaches the session (`quotes.rs`), which finds the
    /// card by its prompt remembered here.
    fn replies_steer(&self) -> bool {
        true
    }

    async fn post(
        &self,
        i: &Interaction,
        target: &String,
        _job: &OutboxJob,
    ) -> Result<Posted, Failure> {
        let id = out_track_id(i, target);
        self.api
            .create_and_deliver(
                &self.template,
                &id,
                &self.cards.params(i),
                Space::of(target),
            )
            .await
            .map_err(failure)?;
        Ok(Posted {
            message_ref: id,
            state: Some(json!({})),
        })
    }

    async fn edit(&self, i: &Interaction, m: &ChannelMessage) -> Result<(), Failure> {
        self.api
            .update_card(&m.message_ref, &self.cards.params(i))
            .await
            .map_err(failure)
    }

    /// The votes so far: the card is drawn again as it now is, its buttons kept.
    async fn show(&self, i: &Interaction, m: &ChannelMessage) -> Result<(), Failure> {
        self.edit(i, m).await
    }
}

/// The pacer for DingTalk's sending rate per chat.
pub(crate) fn pacer() -> Pacer {
    Pacer::new(CHAT_GAP, THROTTLE_PAUSE)
}
