//! "Desk first", applied in one place for every channel: a lifecycle hook installed after
//! the channels', which moves the start of the phone copies planned for a new interaction to
//! the time its route's hold ends ([`Interaction::phones_at`], stamped by the registry when
//! one of the route's approvers was at the desk).
//!
//! Held are the copies on channels that ring a phone by themselves ([`Channel::is_phone`]:
//! push, ntfy), direct messages on chat channels (a job whose address is a configured
//! person's id there), and, when the route says `desk_first_chats`, every chat copy. A
//! held copy of an interaction answered in the meantime is never posted: the delivery
//! skeleton posts nothing once the interaction is resolved ([`super::messages`]).
//!
//! [`Channel::is_phone`]: super::registry::Channel::is_phone

use std::collections::HashSet;

use crate::interaction::{Interaction, Lifecycle, Registry};
use crate::store::OutboxJob;

/// The hook (see the module's documentation).
pub(crate) struct DeskFirst {
    /// The channels whose copies ring a phone by themselves.
    pub phones: HashSet<&'static str>,
    /// The chat channels (direct messages, and with `desk_first_chats` every copy).
    pub chats: HashSet<&'static str>,
    /// Whose ids are direct messages.
    pub registry: Registry,
}

impl DeskFirst {
    /// Whether `job`, one of `i`'s, is a copy the hold applies to.
    fn held(&self, i: &Interaction, job: &OutboxJob) -> bool {
        let channel = job.channel.as_str();
        if self.phones.contains(channel) {
            return true;
        }
        if !self.chats.contains(channel) {
            return false;
        }
        if i.route.as_ref().is_some_and(|r| r.desk_first_chats) {
            return true;
        }
        // `<channel>:<kind>:<incarnation>:<address>`: a person's id is a direct message.
        let head = format!("{channel}:{}:{}:", job.kind, i.incarnation());
        let Some(address) = job.key.strip_prefix(&head) else {
            return false;
        };
        let address = address.split(':').next().unwrap_or_default();
        self.registry
            .teams()
            .people
            .name_of(channel, address)
            .is_some()
    }
}

impl Lifecycle for DeskFirst {
    fn plan_created(&self, i: &Interaction, jobs: &mut Vec<OutboxJob>) {
        let Some(at) = i.phones_at else {
            return;
        };
        for job in jobs.iter_mut() {
            if job.not_before < at
                && job.interaction_id.as_ref() == Some(&i.id)
                && self.held(i, job)
            {
                job.not_before = at;
            }
        }
    }
}
