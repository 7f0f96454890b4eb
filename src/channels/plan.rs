//! The one planner of every chat channel: the outbox jobs an interaction's changes need,
//! recorded in the registry's transactions, over [`destinations`].
//!
//! One policy for every chat channel:
//! - **created**: a `post` job for each place the interaction goes to (its route's places
//!   and people's direct chats when it was routed, otherwise the channel's configured
//!   places), tried from its creation until its deadline;
//! - **escalated**: a `post` job of its own (keyed `escalate`) for each place the route's
//!   escalation adds, from now until the deadline;
//! - **voted**: one job per vote that does not decide yet (its count names it), until the
//!   deadline: every copy shows the votes so far, where the platform can show them;
//! - **resolved** (answered, expired, withdrawn): one `update` job, always (copies are
//!   found in the store; a channel whose places are all a route's still has copies to
//!   update), for [`crate::outbox::UPDATE_HORIZON`] after the resolution.
//!
//! A channel names its jobs with its own enum (kept as it was, so jobs already stored are
//! read the same) and says, through [`ChatJob`], which variant does what.

use std::marker::PhantomData;

use jiff::Timestamp;

use crate::interaction::routes::destinations;
use crate::interaction::{Interaction, Lifecycle};
use crate::outbox::{ChannelJob, created_window, resolved_window};
use crate::store::OutboxJob;

/// What a chat channel's job does.
#[derive(Debug)]
pub(crate) enum Todo<T> {
    /// Post the prompt of an interaction to one place.
    Post(T),
    /// Show the outcome on every copy of a resolved interaction.
    Update,
    /// Show the votes so far on every copy of a pending interaction.
    Voted,
    /// Post, bring up to date or close the digest of one session in one place.
    Digest {
        /// Where.
        to: T,
        /// The session's digest key.
        session: String,
    },
}

/// A chat channel's job enum, as the kit reads and makes it.
pub(crate) trait ChatJob: ChannelJob + Send + Sync + Sized + 'static {
    /// Where a copy goes (a chat id, a receiver, a conversation).
    type Target: Send + Sync;

    /// The `kind` of its post job (`post`, or `send` on Feishu): a first post's key starts
    /// `<channel>:<POST>:`.
    const POST: &'static str;

    /// The job that does `todo`.
    fn make(todo: Todo<Self::Target>) -> Self;

    /// What this job does.
    fn todo(self) -> Todo<Self::Target>;

    /// The place an address (as settings and routes write it) names, if it is one.
    fn target(address: &str) -> Option<Self::Target>;

    /// The address of a place (the key of its records and its pacing).
    fn address(target: &Self::Target) -> String;
}

/// Whether a place at `address` is where interaction `i` goes on `channel`, whose configured
/// places are `places`.
pub(crate) fn goes_to(i: &Interaction, channel: &str, places: &[String], address: &str) -> bool {
    destinations(i.route.as_deref(), channel, places).contains(&address)
}

/// Whether `job` is an interaction's first post on `channel` (not a re-post, a Review or an
/// escalation's).
pub(crate) fn is_first_post<J: ChatJob>(channel: &str, job: &OutboxJob) -> bool {
    job.key
        .strip_prefix(channel)
        .and_then(|k| k.strip_prefix(':'))
        .and_then(|k| k.strip_prefix(J::POST))
        .is_some_and(|k| k.starts_with(':'))
}

/// The job that posts `i` to `to` again, on its own, under a key of its own (`kind`: what
/// asks for it, `nonce`: tells repeated asks apart), until its deadline.
pub(crate) fn repost_job<J: ChatJob>(
    channel: &str,
    i: &Interaction,
    to: J::Target,
    kind: &str,
    nonce: &str,
) -> OutboxJob {
    let address = J::address(&to);
    let key = OutboxJob::key_for(channel, kind, i, &[&address, nonce]);
    J::make(Todo::Post(to)).plan_keyed(key, i, Timestamp::now(), i.deadline)
}

/// The planner of one chat channel.
pub(crate) struct Planner<J> {
    /// The channel's name.
    pub channel: &'static str,
    /// Its configured places, as addresses.
    pub places: Vec<String>,
    jobs: PhantomData<fn() -> J>,
}

impl<J: ChatJob> Planner<J> {
    /// The planner of `channel`, posting to `places` what names no route.
    pub(crate) fn new(channel: &'static str, places: Vec<String>) -> Self {
        Self {
            channel,
            places,
            jobs: PhantomData,
        }
    }
}

impl<J: ChatJob> Lifecycle for Planner<J> {
    fn plan_created(&self, i: &Interaction, jobs: &mut Vec<OutboxJob>) {
        let (from, until) = created_window(i);
        // A routed interaction goes to its route's places (and people's direct chats) only.
        for a in destinations(i.route.as_deref(), self.channel, &self.places) {
            let Some(to) = J::target(a) else {
                continue;
            };
            let address = J::address(&to);
            jobs.push(J::make(Todo::Post(to)).plan(i, &[&address], from, until));
        }
    }

    fn plan_voted(&self, i: &Interaction, jobs: &mut Vec<OutboxJob>) {
        let (from, until) = created_window(i);
        let n = i.votes().len().to_string();
        jobs.push(J::make(Todo::Voted).plan(i, &[&n], from, until));
    }

    fn plan_escalated(&self, i: &Interaction, jobs: &mut Vec<OutboxJob>) {
        let Some(stamp) = i.route.as_deref() else {
            return;
        };
        let (from, until) = (Timestamp::now(), i.deadline);
        for a in stamp.escalation_addresses(self.channel) {
            let Some(to) = J::target(a) else {
                continue;
            };
            let key = OutboxJob::key_for(self.channel, "escalate", i, &[a]);
            jobs.push(J::make(Todo::Post(to)).plan_keyed(key, i, from, until));
        }
    }

    fn plan_resolved(&self, i: &Interaction, jobs: &mut Vec<OutboxJob>) {
        let (from, until) = resolved_window(i);
        jobs.push(J::make(Todo::Update).plan(i, &[], from, until));
    }
}
