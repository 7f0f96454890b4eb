//! The Matrix channel: a bot account on any homeserver posts every approval, question and
//! form as a formatted message in the configured rooms (and in direct rooms with the people a
//! route messages directly); people answer by reacting ✅ / ❌ or by replying, and every copy
//! is edited (`m.replace`) to show the outcome, wherever the answer came from.
//!
//! - [`settings`] — `[matrix]`: the homeserver, the bot's token or login, rooms, approvers.
//! - `api` — the client-server calls (reqwest, with ruma's event types), every failure
//!   classified as throttled, transient or permanent.
//! - `session` — the token, or a login when first needed.
//! - `plan` — the outbox jobs a created, escalated, voted or resolved interaction needs.
//! - `deliver` — posting and editing messages on the shared delivery skeleton.
//! - `render` — the messages, with how to answer written on them.
//! - `inbound` — the `/sync` long poll and the answers it brings, through the pipeline.
//! - `digest` — a reaction on a digest (Approve all, Deny all, Review) or on its
//!   confirmation, through the kit's digest flow.
//! - `commands` — `whoami` and `sessions` written to the bot in a room.
//! - `doctor` — `imrelay doctor`'s checks.
//!
//! End-to-end encrypted rooms get no prompts (see docs/matrix.md): start-up and the doctor
//! say so for each configured room that is encrypted.

mod api;
mod commands;
mod deliver;
mod digest;
mod doctor;
#[cfg(test)]
mod fake;
mod inbound;
mod render;
mod session;
pub mod settings;

use std::sync::Arc;

pub use settings::{MatrixSettings, Transport};

use crate::channels::Wiring;
use crate::channels::kit::Kit;
use crate::channels::registry::Chat;
use crate::channels::threads::Threads;

/// The channel's name (its `Via`, its outbox channel, its health component, its people's key).
pub const CHANNEL: &str = "matrix";
/// The store secret the bot's login device is named from ([`api::device_id`]): one per
/// deployment, shared by its replicas.
const DEVICE_SECRET: &str = "matrix-device";

/// Matrix's outbox jobs: the kit's, their place stored as `room`.
pub(crate) type Job = crate::channels::plan::TextJob<MatrixSettings>;

impl crate::channels::plan::TextPlaces for MatrixSettings {
    const CHANNEL: &'static str = CHANNEL;
    const FIELD: &'static str = "room";
}

/// Matrix in the kit's words. It signs nothing: an answer is a reaction or a reply, which
/// the homeserver says who sent, so it has no button secret.
const CHAT: Chat = Chat {
    approver_ids: "Matrix user ids (@alice:example.org)",
    secret: "",
    signs: "nothing",
    posts: "prompts are posted",
    refused: "a refused answer is told to its sender",
    no_places: Some((
        "prompts",
        "to post in a room, invite the bot to it and add its id (\"!...:server\") to matrix.chats",
    )),
};

/// Installs the channel when `[matrix] enabled = true`.
pub async fn install(w: &mut Wiring, settings: &MatrixSettings) -> anyhow::Result<()> {
    let Some(kit) = Kit::open(w, settings, settings.digest_after, settings.locale).await? else {
        return Ok(());
    };
    let settings = Arc::new(settings.clone());
    let device = api::device_id(&w.store.secret(DEVICE_SECRET).await?);
    let session = Arc::new(session::Session::new(&settings, device)?);
    let render = render::Render {
        locale: settings.locale,
        inbox: w.server.inbox.clone(),
    };
    // One platform serves the outbox and the `/sync` loop (a digest's confirmation, the
    // digest edited after a reaction): one session, one cache of rooms' encryption.
    let threads = Threads::installed(w, CHANNEL, settings.thread_per);
    let matrix = deliver::Matrix::new(session.clone(), render.clone(), w.store.clone())
        .with_threads(threads, settings.thread_replies)
        .with_digests(kit.digests.clone());
    let inbound = inbound::Inbound {
        matrix: matrix.clone(),
        digests: kit.digests.clone(),
        session,
        pipeline: kit.pipeline(w),
        store: w.store.clone(),
        settings: settings.clone(),
        render,
        health: w.health.clone(),
        shutdown: w.shutdown.clone(),
    };
    kit.count(
        w,
        "imrelay_matrix_answers",
        "Matrix reactions and replies read as answers, by result (resolved, already_resolved, refused, invalid, voted, ...)",
        inbound.pipeline.results_metric(),
    );
    kit.deliver(w, matrix, deliver::pacer(), "matrix_api");
    w.spawn_on_serve(inbound.run());
    kit.enabled(settings.transport.as_str(), Some(settings.base()));
    Ok(())
}

/// The `[matrix]` section in the channel registry.
impl crate::channels::Channel for MatrixSettings {
    fn name(&self) -> &'static str {
        CHANNEL
    }

    fn platform(&self) -> &'static str {
        "Matrix"
    }

    fn places(&self) -> Vec<String> {
        self.chats.clone()
    }

    fn chat(&self) -> Option<&'static Chat> {
        Some(&CHAT)
    }

    fn unanswerable(&self) -> Option<&'static str> {
        Some(
            "matrix.approvers is EMPTY, so only people a route names may answer from Matrix. \
             Add the Matrix user ids (@alice:example.org) of the people who may approve.",
        )
    }

    fn unlisted(&self, place: &str) -> String {
        format!("{place:?} is not in matrix.chats")
    }

    fn place(&self, written: &crate::channels::Written) -> Result<String, String> {
        let room = written.text("a Matrix room id")?;
        match settings::not_a_room_id(&room) {
            Some(why) => Err(why),
            None => Ok(room),
        }
    }

    fn person_id(&self, written: &crate::channels::Written) -> Result<String, String> {
        let id = written.text("a Matrix user id")?;
        match settings::not_a_user_id(&id) {
            Some(why) => Err(why),
            None => Ok(id),
        }
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
        let mut out: Vec<String> = self.mistakes().into_iter().skip(1).collect();
        out.extend(self.wrong_ids());
        out
    }

    fn approvers(&self) -> Vec<String> {
        self.approvers.clone()
    }

    fn warnings(&self) -> Vec<String> {
        let mut out: Vec<String> = crate::channels::registry::no_places(self)
            .into_iter()
            .collect();
        if self.enabled && self.api_url.trim().starts_with("http://") {
            let host = self.api_url.trim().trim_start_matches("http://");
            if !(host.starts_with("127.")
                || host.starts_with("localhost")
                || host.starts_with("[::1]"))
            {
                out.push(format!(
                    "matrix.api_url = {:?} is plain http: the bot's token and every message cross the network unencrypted",
                    self.api_url
                ));
            }
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
