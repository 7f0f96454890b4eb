//! One request's life in the bridge: its turn among the requests waiting on imrelay, the
//! interaction it becomes, the wait for the answer, and the reply, which counts only once
//! OpenCode accepted it.
//!
//! A reply OpenCode does not take (it cannot be reached, or answers with a 5xx) is sent again
//! with backoff, [`REPLY_ATTEMPTS`] times; one it refuses (a 4xx) is not. Either way the
//! request is not marked as replied to: the next listing that still shows it takes it up
//! again (the interaction, re-attached by its id, brings the answer back at once). OpenCode
//! answers a reply to a request no longer waiting with success and ignores it, so a reply
//! sent twice (the first taken, its answer lost) does no harm.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use tokio::sync::{OwnedSemaphorePermit, TryAcquireError};
use tokio_util::sync::CancellationToken;

use super::opencode::OpenCodeError;
use super::{Bridge, MAX_WAITING, POLL_SECS};
use crate::agents::opencode::{Request, segment};
use crate::cli::client::{Backoff, ClientError, parse_interaction};
use crate::interaction::Interaction;
use crate::telemetry::escape;

/// How many times a reply is sent while OpenCode cannot take it (about 20 s with the backoff),
/// before it waits for the next listing.
const REPLY_ATTEMPTS: usize = 8;

impl Bridge {
    /// Asks imrelay about `r` in its turn, waits for the answer and replies to OpenCode,
    /// unless `stop` fires first.
    pub(super) async fn handle(self: &Arc<Self>, r: Request, stop: CancellationToken) {
        let Some(turn) = self.turn(&r, &stop).await else {
            return;
        };
        let Some(cwd) = self.directory_of(&r).await else {
            return;
        };
        let body = r.create_body(&self.url, cwd.as_deref(), self.options.timeout);
        let id = r.interaction_id(&self.url);
        let mut backoff = Backoff::default();
        let Some(interaction) = self.create(&r, &body, &id, &stop, &mut backoff).await else {
            return;
        };
        if interaction.is_pending() {
            self.log(&format!("{} asked as {id}", escape(r.id())));
        }
        let Some(interaction) = self.wait_for(&id, interaction, &stop, &mut backoff).await else {
            return;
        };
        // Replying holds no connection to imrelay: the next request may go.
        drop(turn);
        self.reply(&r, &interaction, &stop).await;
    }

    /// `r`'s turn to be asked: one of [`MAX_WAITING`], held until its answer came; `None`
    /// when `stop` fires first.
    async fn turn(&self, r: &Request, stop: &CancellationToken) -> Option<OwnedSemaphorePermit> {
        let waits = &self.options.waits;
        match waits.clone().try_acquire_owned() {
            Ok(turn) => {
                self.options.told_full.store(false, Ordering::Relaxed);
                return Some(turn);
            }
            Err(TryAcquireError::Closed) => return None,
            Err(TryAcquireError::NoPermits) => {}
        }
        if !self.options.told_full.swap(true, Ordering::Relaxed) {
            self.log(&format!(
                "{MAX_WAITING} requests wait on imrelay already: {} and the ones after it are \
                 asked in turn as those are answered (OpenCode's own interface has them \
                 meanwhile)",
                escape(r.id())
            ));
        }
        tokio::select! {
            _ = stop.cancelled() => None,
            turn = waits.clone().acquire_owned() => turn.ok(),
        }
    }

    /// The working directory of `r`'s session, if OpenCode tells it; `None` when OpenCode
    /// does not know the session, so `r` is ignored.
    async fn directory_of(&self, r: &Request) -> Option<Option<String>> {
        let session = r.session_id();
        match self.get(&format!("/session/{}", segment(session))).await {
            Ok(s) => Some(s["directory"].as_str().map(str::to_string)),
            Err(OpenCodeError::Status { status: 404, .. }) => {
                self.log(&format!(
                    "ignored {} of session {}: OpenCode does not know that session",
                    escape(r.id()),
                    escape(session)
                ));
                None
            }
            Err(e) => {
                self.log(&format!(
                    "cannot read session {} ({}); asking without its directory",
                    escape(session),
                    escape(&e.to_string())
                ));
                Some(None)
            }
        }
    }

    /// Creates the interaction `id` for `r` from `body`, retrying while imrelay is out of
    /// reach; `None` when `stop` fires or imrelay refuses it (OpenCode's own interface asks).
    async fn create(
        &self,
        r: &Request,
        body: &serde_json::Value,
        id: &str,
        stop: &CancellationToken,
        backoff: &mut Backoff,
    ) -> Option<Interaction> {
        loop {
            let req = self
                .imrelay
                .request(reqwest::Method::POST, "/v1/interactions")
                .json(body);
            let result = tokio::select! {
                _ = stop.cancelled() => return None,
                r = self.imrelay.call(req, Some(id)) => r,
            };
            match result.and_then(parse_interaction) {
                Ok(i) => return Some(i),
                Err(e) if e.is_transient() => {
                    self.log(&format!("imrelay: {e}; retrying"));
                    tokio::select! {
                        _ = stop.cancelled() => return None,
                        () = tokio::time::sleep(backoff.delay()) => {}
                    }
                }
                Err(e) => {
                    self.log(&format!(
                        "imrelay refused {} ({e}); left to OpenCode's own interface",
                        escape(r.id())
                    ));
                    return None;
                }
            }
        }
    }

    /// Waits until `interaction` (`id`) is resolved, and returns it so; `None` when `stop`
    /// fires or imrelay no longer has it.
    async fn wait_for(
        &self,
        id: &str,
        mut interaction: Interaction,
        stop: &CancellationToken,
        backoff: &mut Backoff,
    ) -> Option<Interaction> {
        while interaction.is_pending() {
            let req = self.imrelay.request(
                reqwest::Method::GET,
                &format!("/v1/interactions/{id}/wait?timeout_secs={POLL_SECS}"),
            );
            let result = tokio::select! {
                _ = stop.cancelled() => return None,
                r = self.imrelay.call(req, Some(id)) => r,
            };
            match result.and_then(|mut v| parse_interaction(v["interaction"].take())) {
                Ok(i) => interaction = i,
                Err(ClientError::NotFound(_)) => {
                    self.log(&format!("{id} is gone from imrelay; left to OpenCode"));
                    return None;
                }
                Err(e) => {
                    self.log(&format!("imrelay: {e}; retrying"));
                    tokio::select! {
                        _ = stop.cancelled() => return None,
                        () = tokio::time::sleep(backoff.delay()) => {}
                    }
                }
            }
        }
        Some(interaction)
    }

    /// Sends OpenCode the reply for the resolved `i` until it accepts it, within
    /// [`REPLY_ATTEMPTS`]; `stop` (OpenCode settled the request) ends the attempts.
    async fn reply(self: &Arc<Self>, r: &Request, i: &Interaction, stop: &CancellationToken) {
        let request = r.id();
        let Some(reply) = r.reply(i, self.options.on_timeout) else {
            if !stop.is_cancelled() {
                self.finished(request);
            }
            self.log(&format!(
                "{} ended without an answer for OpenCode; left to its own interface",
                i.id
            ));
            return;
        };
        let mut backoff = Backoff::default();
        for attempt in 1..=REPLY_ATTEMPTS {
            // Not cut short when OpenCode settles the request meanwhile: that may be this
            // very reply taking effect.
            let e = match self.post(&reply.path, reply.body.as_ref()).await {
                Ok(()) => {
                    self.finished(request);
                    self.log(&format!("replied to {}", escape(request)));
                    return;
                }
                Err(e) => e,
            };
            if !e.is_transient() || attempt == REPLY_ATTEMPTS {
                self.log(&format!(
                    "the reply to {} did not get through ({}); it is sent again if OpenCode \
                     still lists the request at the next listing",
                    escape(request),
                    escape(&e.to_string())
                ));
                return;
            }
            if attempt == 1 {
                self.log(&format!(
                    "{}; sending the reply to {} again",
                    escape(&e.to_string()),
                    escape(request)
                ));
            }
            tokio::select! {
                _ = stop.cancelled() => return,
                () = tokio::time::sleep(backoff.delay()) => {}
            }
        }
    }
}
