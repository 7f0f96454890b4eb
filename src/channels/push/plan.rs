//! Web Push's outbox jobs, planned in the registry's transactions: one `post` job when an
//! interaction is created (it goes to every device whose person may answer it), one more when
//! its route escalates (the devices of the people who may answer from then on), one `voted`
//! job per vote that does not decide yet (every device notified gets the votes so far), one
//! `update` job when it is resolved (every device notified gets the outcome in its place);
//! the kit's `digest` jobs (a session's digest on one device).

use super::CHANNEL;
use crate::interaction::{Interaction, Lifecycle};
use crate::outbox::{ChannelJob, created_window, resolved_window};
use crate::store::OutboxJob;

/// What the channel's outbox does.
#[derive(Debug, serde::Serialize, serde::Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub(crate) enum Job {
    /// Notify every device whose person may answer the interaction now (each once).
    Post {
        /// Whether it is the escalation's (quiet hours give way where the route says so).
        #[serde(default)]
        escalation: bool,
    },
    /// Replace every notification of a resolved interaction with its outcome.
    Update,
    /// Replace every notification of an approval that needs several people with one that
    /// shows the votes so far (the same tag), quietly.
    Voted,
    /// Bring a session's digest on one device up to date (planned by the kit as a
    /// [`DeviceJob`], which the skeleton delivers).
    Digest {},
}

impl ChannelJob for Job {
    fn channel(&self) -> std::borrow::Cow<'static, str> {
        CHANNEL.into()
    }
}

/// Plans the channel's outbox jobs inside each state change's transaction.
pub(crate) struct Planner;

impl Lifecycle for Planner {
    fn plan_created(&self, i: &Interaction, jobs: &mut Vec<OutboxJob>) {
        let (from, until) = created_window(i);
        jobs.push(Job::Post { escalation: false }.plan(i, &[], from, until));
    }

    fn plan_escalated(&self, i: &Interaction, jobs: &mut Vec<OutboxJob>) {
        let Some(e) = i.route.as_deref().and_then(|r| r.escalation.as_ref()) else {
            return;
        };
        if e.approvers.is_empty() {
            return;
        }
        let key = OutboxJob::key_for(CHANNEL, "escalate", i, &[]);
        let job = Job::Post { escalation: true };
        jobs.push(job.plan_keyed(key, i, jiff::Timestamp::now(), i.deadline));
    }

    fn plan_voted(&self, i: &Interaction, jobs: &mut Vec<OutboxJob>) {
        let (from, until) = created_window(i);
        let n = i.votes().len().to_string();
        jobs.push(Job::Voted.plan(i, &[&n], from, until));
    }

    fn plan_resolved(&self, i: &Interaction, jobs: &mut Vec<OutboxJob>) {
        let (from, until) = resolved_window(i);
        jobs.push(Job::Update.plan(i, &[], from, until));
    }
}

/// The delivery skeleton's view of a push job, one device at a time. The deliverer fans a
/// post out to the devices itself, so no such job is planned: this only says what the
/// skeleton would do with one.
#[derive(Debug, serde::Serialize, serde::Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub(crate) enum DeviceJob {
    /// Notify one device.
    Post {
        /// The device.
        device: super::devices::Device,
    },
    /// Replace every notification with the outcome.
    Update,
    /// A vote that does not decide yet: every notification shows the votes so far.
    Voted,
    /// Bring a session's digest on one device up to date.
    Digest {
        /// The device (by its id: the rest is read from the store when delivered).
        device: super::devices::Device,
        /// The session's digest key.
        session: String,
    },
}

impl ChannelJob for DeviceJob {
    fn channel(&self) -> std::borrow::Cow<'static, str> {
        CHANNEL.into()
    }
}

impl crate::channels::plan::ChatJob for DeviceJob {
    type Target = super::devices::Device;
    const POST: &'static str = "post";

    fn make(todo: crate::channels::plan::Todo<Self::Target>) -> Self {
        use crate::channels::plan::Todo;
        match todo {
            Todo::Post(device) => DeviceJob::Post { device },
            Todo::Update => DeviceJob::Update,
            Todo::Voted => DeviceJob::Voted,
            Todo::Digest { to, session } => DeviceJob::Digest {
                device: to,
                session,
            },
        }
    }

    fn todo(self) -> crate::channels::plan::Todo<Self::Target> {
        use crate::channels::plan::Todo;
        match self {
            DeviceJob::Post { device } => Todo::Post(device),
            DeviceJob::Update => Todo::Update,
            DeviceJob::Voted => Todo::Voted,
            DeviceJob::Digest { device, session } => Todo::Digest {
                to: device,
                session,
            },
        }
    }

    fn target(address: &str) -> Option<Self::Target> {
        // A device is found in the store, not named by settings or routes: a digest's job
        // names it by its id alone, and its delivery reads the rest.
        Some(super::devices::Device::named(address))
    }

    fn address(device: &Self::Target) -> String {
        device.id.clone()
    }
}
