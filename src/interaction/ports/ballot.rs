//! One vote for the store to record and count in one transaction ([`Ballot`]), and what
//! counting it did: the port the two-person rule (`interaction::quorum`) hands the store.

use std::sync::Arc;

use super::Effects;
use crate::interaction::Interaction;
use crate::interaction::model::Vote;

/// One vote for the store to record and count in one transaction.
#[derive(Clone, Debug)]
pub struct Ballot {
    /// The interaction voted on, as the voter saw it (its id and creation time name it).
    pub interaction: Arc<Interaction>,
    /// The vote.
    pub vote: Vote,
    /// How many votes on the vote's side decide.
    pub needed: u32,
    /// The interaction resolved by this vote, should it decide (its votes are filled in
    /// by the store with every vote counted).
    pub decided: Arc<Interaction>,
    /// What a deciding vote records: its resolution's outbox jobs and audit entries.
    pub decided_effects: Effects,
    /// What a vote that does not decide records: the outbox jobs that show the votes on
    /// every copy, and its audit entry.
    pub recorded_effects: Effects,
}

impl Ballot {
    /// `current` with the votes `votes` (what the store counted), decided or not.
    pub fn with_votes(i: &Interaction, votes: Vec<Vote>) -> Interaction {
        let mut i = i.clone();
        i.set_votes(votes);
        i
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
    pub fn count(&self, stored: Option<&Arc<Interaction>>) -> Count {
        let Some(current) = stored.filter(|s| s.created_at == self.interaction.created_at) else {
            return Count::Refused(VoteOutcome::NotFound);
        };
        if !current.is_pending() {
            return Count::Refused(VoteOutcome::AlreadyResolved(current.clone()));
        }
        if let Some(earlier) = current
            .votes()
            .iter()
            .find(|v| v.person == self.vote.person)
        {
            return Count::Refused(VoteOutcome::AlreadyVoted(
                Box::new(earlier.clone()),
                current.clone(),
            ));
        }
        let mut votes = current.votes().to_vec();
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
    Recorded(Arc<Interaction>),
    /// Recorded, and it decided: the interaction resolved, with every vote.
    Decided(Arc<Interaction>),
    /// This person voted already: their earlier vote, and the interaction as it is.
    AlreadyVoted(Box<Vote>, Arc<Interaction>),
    /// It was resolved already: the winner.
    AlreadyResolved(Arc<Interaction>),
    /// No such interaction (or another incarnation of its id).
    NotFound,
}
