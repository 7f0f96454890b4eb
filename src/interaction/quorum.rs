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

use super::model::{Interaction, Kind};
pub use super::model::{Quorum, Vote};
use super::people::People;
pub use super::ports::{Ballot, Count, VoteOutcome};

/// The channel name of an answer from the inbox or the API, as people know its identity
/// (an operator token's label).
pub const OPERATOR: &str = "operator";

/// The one person every administrator's token (an operator token without a label, or this
/// machine without tokens) counts as in a vote, whatever name its answers give.
pub const ADMINISTRATOR: &str = "administrator";

/// Whether `i` is decided by votes: an approval with a quorum, still pending or not.
pub fn is_voted(i: &Interaction) -> bool {
    i.kind == Kind::Approval && i.quorum().is_some()
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
    let q = i.quorum()?;
    let allows: Vec<&Vote> = i.votes().iter().filter(|v| v.allow).collect();
    let mut s = format!("{} of {}", allows.len(), q.allow);
    if !allows.is_empty() {
        s.push_str(": ");
        s.push_str(&who(&allows));
    }
    let denies: Vec<&Vote> = i.votes().iter().filter(|v| !v.allow).collect();
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
    let q = i.quorum().filter(|_| i.kind == Kind::Approval)?;
    let allows = i.votes().iter().filter(|v| v.allow).count();
    Some(format!(
        "No quorum within {} seconds: {allows} of {} people allowed it, denied",
        i.timeout_secs(),
        q.allow
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::interaction::InteractionId;
    use crate::interaction::model::Via;
    use jiff::Timestamp;

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
        i.set_quorum(q);
        i.set_votes(votes);
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
