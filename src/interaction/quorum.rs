//! The two-person rule: an approval that needs allows from several different people.
//!
//! A route or a policy rule may ask for a [`Quorum`]: `allow` different people must allow
//! an approval before the agent may go ahead, and `deny` different people denying it deny it
//! (one, unless configured otherwise). The quorum is stamped on the interaction when it is
//! created (the route's and the matching rules', the larger allow count and the smaller
//! deny count winning), so every process agrees on it.
//!
//! Each answer is a [`Vote`] of a person: a configured person is the same person on every
//! channel; an identity nobody configured is a person of its own. The store records a vote
//! and counts the votes in one transaction ([`Ballot`]): a person's second vote, from any
//! channel, is refused; the vote that reaches the count decides. Questions and forms are
//! not voted on: the first answer resolves them.

use jiff::Timestamp;
use serde::{Deserialize, Serialize};

use super::model::{Interaction, Kind, Via, millis};
use super::people::People;
use super::ports::Effects;

/// The channel name of an answer from the inbox or the API, as people know its identity
/// (an operator token's label).
pub const OPERATOR: &str = "operator";

/// The one person every administrator's token (an operator token without a label, or this
/// machine without tokens) counts as in a vote, whatever name its answers give.
pub const ADMINISTRATOR: &str = "administrator";

/// How many different people decide an approval.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Quorum {
    /// Different people who must allow it (at least 2 for a quorum to mean anything).
    pub allow: u32,
    /// Different people whose deny denies it (1: one deny denies).
    #[serde(default = "one")]
    pub deny: u32,
}

fn one() -> u32 {
    1
}

impl Quorum {
    /// The quorum of a route or rule configured with `allow` and `deny` (`None`: none, or
    /// one person, which is no quorum at all).
    pub fn of(allow: Option<u32>, deny: Option<u32>) -> Option<Self> {
        let allow = allow.filter(|a| *a > 1)?;
        Some(Self {
            allow,
            deny: deny.unwrap_or(1).clamp(1, allow),
        })
    }

    /// The stricter of two quorums: the larger allow count, the smaller deny count.
    pub fn stricter(a: Option<Self>, b: Option<Self>) -> Option<Self> {
        match (a, b) {
            (Some(a), Some(b)) => Some(Self {
                allow: a.allow.max(b.allow),
                deny: a.deny.min(b.deny),
            }),
            (a, b) => a.or(b),
        }
    }

    /// How many votes on `allow`'s side decide.
    pub fn needed(&self, allow: bool) -> u32 {
        if allow { self.allow } else { self.deny }
    }
}

/// One person's vote on an approval.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Vote {
    /// Who, as a person: a configured person's name, or `channel:id` for an identity nobody
    /// configured. One vote per person.
    pub person: String,
    /// The name shown ("alice").
    pub by: String,
    /// The channel it came through.
    pub via: Via,
    /// Allow (`true`) or deny.
    pub allow: bool,
    /// When.
    #[serde(serialize_with = "millis")]
    pub at: Timestamp,
}

/// Whether `i` is decided by votes: an approval with a quorum, still pending or not.
pub fn is_voted(i: &Interaction) -> bool {
    i.kind == Kind::Approval && i.quorum.is_some()
}

/// The person behind an answer's identity (`channel`, `id`), as `people` know them: a
/// configured person's name, or `channel:id` for an identity nobody configured.
pub fn person_of(people: &People, channel: &str, id: &str) -> String {
    match people.name_of(channel, id) {
        Some(name) => name.to_string(),
        None => format!("{channel}:{id}"),
    }
}

/// The votes so far on allow's side, as every copy shows them: `1 of 2: alice via
/// telegram` (and a deny's `denied by bob via feishu` when a deny was recorded without
/// deciding). `None` when `i` has no quorum.
pub fn tally(i: &Interaction) -> Option<String> {
    let q = i.quorum?;
    let allows: Vec<&Vote> = i.votes.iter().filter(|v| v.allow).collect();
    let mut s = format!("{} of {}", allows.len(), q.allow);
    if !allows.is_empty() {
        s.push_str(": ");
        s.push_str(&who(&allows));
    }
    let denies: Vec<&Vote> = i.votes.iter().filter(|v| !v.allow).collect();
    if !denies.is_empty() {
        s.push_str(&format!(
            "; {} of {} to deny: {}",
            denies.len(),
            q.deny,
            who(&denies)
        ));
    }
    Some(s)
}

fn who(votes: &[&Vote]) -> String {
    votes
        .iter()
        .map(|v| format!("{} via {}", v.by, v.via))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The message an approval that expired before its quorum gives the agent: how many allowed.
pub fn expiry_message(i: &Interaction) -> Option<String> {
    let q = i.quorum.filter(|_| i.kind == Kind::Approval)?;
    let allows = i.votes.iter().filter(|v| v.allow).count();
    Some(format!(
        "No quorum within {} seconds: {allows} of {} people allowed it, denied",
        i.timeout_secs, q.allow
    ))
}

/// One vote for the store to record and count in one transaction.
#[derive(Clone, Debug)]
pub struct Ballot {
    /// The interaction voted on, as the voter saw it (its id and creation time name it).
    pub interaction: std::sync::Arc<Interaction>,
    /// The vote.
    pub vote: Vote,
    /// How many votes on the vote's side decide.
    pub needed: u32,
    /// The interaction resolved by this vote, should it decide (its votes are filled in
    /// by the store with every vote counted).
    pub decided: std::sync::Arc<Interaction>,
    /// What a deciding vote records: its resolution's outbox jobs and audit entries.
    pub decided_effects: Effects,
    /// What a vote that does not decide records: the outbox jobs that show the votes on
    /// every copy, and its audit entry.
    pub recorded_effects: Effects,
}

impl Ballot {
    /// `current` with the votes `votes` (what the store counted), decided or not.
    pub fn with_votes(i: &Interaction, votes: Vec<Vote>) -> Interaction {
        Interaction {
            votes: votes.into_boxed_slice(),
            ..i.clone()
        }
    }

    /// Whether `votes` (every vote counted, this one included) decide on the vote's side.
    pub fn decides(&self, votes: &[Vote]) -> bool {
        let same = votes.iter().filter(|v| v.allow == self.vote.allow).count();
        u32::try_from(same).unwrap_or(u32::MAX) >= self.needed
    }
}

/// What a store does with a ballot, given the interaction as it is stored now (read under
/// the transaction's lock), votes included.
#[derive(Debug)]
pub enum Count {
    /// Nothing to record: the outcome as it is.
    Refused(VoteOutcome),
    /// Record the vote and keep the interaction pending with these votes (the
    /// `recorded_effects` go with it).
    Recorded(Interaction),
    /// Record the vote and resolve: the interaction resolved with every vote (the
    /// `decided_effects` go with it).
    Decided(Interaction),
}

impl Ballot {
    /// What this ballot does to `stored` (`None`: no row with its id).
    pub fn count(&self, stored: Option<&std::sync::Arc<Interaction>>) -> Count {
        let Some(current) = stored.filter(|s| s.created_at == self.interaction.created_at) else {
            return Count::Refused(VoteOutcome::NotFound);
        };
        if !current.is_pending() {
            return Count::Refused(VoteOutcome::AlreadyResolved(current.clone()));
        }
        if let Some(earlier) = current.votes.iter().find(|v| v.person == self.vote.person) {
            return Count::Refused(VoteOutcome::AlreadyVoted(
                Box::new(earlier.clone()),
                current.clone(),
            ));
        }
        let mut votes = current.votes.to_vec();
        votes.push(self.vote.clone());
        if self.decides(&votes) {
            Count::Decided(Self::with_votes(&self.decided, votes))
        } else {
            Count::Recorded(Self::with_votes(current, votes))
        }
    }
}

/// What recording a vote did.
#[derive(Clone, Debug)]
pub enum VoteOutcome {
    /// Recorded; not decided yet: the interaction with every vote so far.
    Recorded(std::sync::Arc<Interaction>),
    /// Recorded, and it decided: the interaction resolved, with every vote.
    Decided(std::sync::Arc<Interaction>),
    /// This person voted already: their earlier vote, and the interaction as it is.
    AlreadyVoted(Box<Vote>, std::sync::Arc<Interaction>),
    /// It was resolved already: the winner.
    AlreadyResolved(std::sync::Arc<Interaction>),
    /// No such interaction (or another incarnation of its id).
    NotFound,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::interaction::InteractionId;

    fn vote(person: &str, via: &str, allow: bool) -> Vote {
        Vote {
            person: person.into(),
            by: person.into(),
            via: Via::new(via),
            allow,
            at: Timestamp::UNIX_EPOCH,
        }
    }

    fn approval(q: Option<Quorum>, votes: Vec<Vote>) -> Interaction {
        let mut i = Interaction::pending(
            InteractionId::parse("q1").unwrap(),
            "Bash",
            serde_json::Map::new(),
            Timestamp::UNIX_EPOCH,
            60,
        );
        i.quorum = q;
        i.votes = votes.into_boxed_slice();
        i
    }

    #[test]
    fn a_quorum_needs_two_people_and_one_deny_denies_unless_configured() {
        assert_eq!(Quorum::of(Some(1), None), None);
        assert_eq!(Quorum::of(None, Some(2)), None);
        assert_eq!(
            Quorum::of(Some(2), None),
            Some(Quorum { allow: 2, deny: 1 })
        );
        // More denies than people to allow would never deny before the quorum allows.
        assert_eq!(
            Quorum::of(Some(2), Some(5)),
            Some(Quorum { allow: 2, deny: 2 })
        );
        let stricter = Quorum::stricter(Quorum::of(Some(3), Some(2)), Quorum::of(Some(2), None));
        assert_eq!(stricter, Some(Quorum { allow: 3, deny: 1 }));
    }

    #[test]
    fn every_copy_shows_the_votes_so_far() {
        let q = Quorum::of(Some(2), None);
        let i = approval(q, vec![vote("alice", "telegram", true)]);
        assert_eq!(tally(&i).unwrap(), "1 of 2: alice via telegram");
        assert_eq!(tally(&approval(q, vec![])).unwrap(), "0 of 2");
        let i = approval(
            Quorum::of(Some(3), Some(2)),
            vec![
                vote("alice", "telegram", true),
                vote("bob", "feishu", false),
            ],
        );
        assert_eq!(
            tally(&i).unwrap(),
            "1 of 3: alice via telegram; 1 of 2 to deny: bob via feishu"
        );
        assert_eq!(tally(&approval(None, vec![])), None);
        assert!(
            expiry_message(&approval(q, vec![vote("alice", "telegram", true)]))
                .unwrap()
                .contains("1 of 2 people allowed it")
        );
    }
}
