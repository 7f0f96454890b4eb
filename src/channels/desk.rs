//! "Desk first" and quiet hours for direct messages, applied in one place for every channel:
//! a lifecycle hook installed after the channels', which moves the start of the phone copies
//! they planned.
//!
//! **Desk first**: the copies planned for a new interaction start when its route's hold ends
//! ([`Interaction::phones_at`], stamped by the registry when one of the route's approvers
//! was at the desk). Held are the copies on channels that ring a phone by themselves
//! ([`Channel::is_phone`]: push, ntfy), direct messages on chat channels (a job whose
//! address is a configured person's id there), and, when the route says `desk_first_chats`,
//! every chat copy.
//!
//! **Quiet hours**: a direct message on a chat channel to a person in their quiet hours
//! (`[[people]] quiet`) starts when the hours end, and is not planned at all when they end
//! only at the deadline or later; an escalation's goes through when its route says so
//! (`escalate_to.through_quiet`). (Push and ntfy check the same hours when they deliver,
//! through [`super::notification::held_until`].)
//!
//! A held copy of an interaction answered in the meantime is never posted: the delivery
//! skeleton posts nothing once the interaction is resolved ([`super::messages`]).
//!
//! [`Channel::is_phone`]: super::registry::Channel::is_phone

use std::collections::{HashMap, HashSet};

use crate::interaction::{Interaction, Lifecycle, Registry};
use crate::store::OutboxJob;

/// The hook (see the module's documentation).
pub(crate) struct DeskFirst {
    /// The channels whose copies ring a phone by themselves.
    pub phones: HashSet<&'static str>,
    /// The chat channels (direct messages, and with `desk_first_chats` every copy).
    pub chats: HashSet<&'static str>,
    /// Where each configured person is messaged directly, as each chat channel addresses
    /// it ([`Channel::direct`] of their ids: `@123` on Discord, `user:abc` on DingTalk), by
    /// channel and address: whose direct message a job is.
    ///
    /// [`Channel::direct`]: super::registry::Channel::direct
    pub direct: HashMap<(&'static str, String), String>,
    /// The people's quiet hours.
    pub registry: Registry,
}

/// The heads of a job's address part (`<address>[:<more>]`), longest first: an address may
/// hold `:` itself (`open_id:ou_1` on Feishu, `@alice:example.org` on Matrix).
fn heads(rest: &str) -> impl Iterator<Item = &str> {
    std::iter::successors(Some(rest), |r| r.rfind(':').map(|k| &r[..k]))
}

impl DeskFirst {
    /// The person `job`, one of `i`'s on a chat channel, messages directly, if it is a
    /// direct message: its address is where a configured person is messaged directly.
    fn recipient(&self, i: &Interaction, job: &OutboxJob) -> Option<String> {
        let channel = *self.chats.get(job.channel.as_str())?;
        // `<channel>:<kind>:<incarnation>:<address>[:<more>]`.
        let rest = job.key.strip_prefix(channel)?.strip_prefix(':')?;
        let (_, rest) = rest.split_once(':')?;
        let rest = rest.strip_prefix(&i.incarnation())?.strip_prefix(':')?;
        heads(rest).find_map(|a| self.direct.get(&(channel, a.to_string())).cloned())
    }

    /// Whether `job`, one of `i`'s, is a copy the desk-first hold applies to.
    fn held(&self, i: &Interaction, job: &OutboxJob) -> bool {
        let channel = job.channel.as_str();
        if self.phones.contains(channel) {
            return true;
        }
        if !self.chats.contains(channel) {
            return false;
        }
        i.route.as_ref().is_some_and(|r| r.desk_first_chats) || self.recipient(i, job).is_some()
    }

    /// Holds `i`'s direct messages among `jobs` for their people's quiet hours, and drops
    /// those whose hours last to the deadline (`escalation`: planned by an escalation).
    fn quiet(&self, i: &Interaction, jobs: &mut Vec<OutboxJob>, escalation: bool) {
        let teams = self.registry.teams();
        jobs.retain_mut(|job| {
            if job.interaction_id.as_ref() != Some(&i.id) {
                return true;
            }
            let Some(person) = self.recipient(i, job) else {
                return true;
            };
            let at = job.not_before;
            match super::notification::held_until(&teams.people, &person, i, escalation, at) {
                None => true,
                Some(end) if end < i.deadline => {
                    job.not_before = job.not_before.max(end);
                    true
                }
                Some(_) => false,
            }
        });
    }
}

impl Lifecycle for DeskFirst {
    fn plan_created(&self, i: &Interaction, jobs: &mut Vec<OutboxJob>) {
        if let Some(at) = i.phones_at() {
            for job in jobs.iter_mut() {
                if job.not_before < at
                    && job.interaction_id.as_ref() == Some(&i.id)
                    && self.held(i, job)
                {
                    job.not_before = at;
                }
            }
        }
        self.quiet(i, jobs, false);
    }

    fn plan_escalated(&self, i: &Interaction, jobs: &mut Vec<OutboxJob>) {
        self.quiet(i, jobs, true);
    }
}

#[cfg(test)]
mod tests {
    use super::heads;

    #[test]
    fn an_address_is_tried_whole_then_without_each_last_part() {
        let all: Vec<&str> = heads("open_id:ou_1:nonce").collect();
        assert_eq!(all, ["open_id:ou_1:nonce", "open_id:ou_1", "open_id"]);
        assert_eq!(heads("1001").collect::<Vec<_>>(), ["1001"]);
    }
}
