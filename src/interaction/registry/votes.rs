//! The vote step of [`Registry::respond`] for an approval that needs several people (see
//! [`crate::interaction::quorum`]): the answer becomes a person's vote, the store records
//! and counts it in one transaction, and only the vote that reaches the count resolves the
//! interaction (the agent hears once, then). A vote that does not decide yet is announced
//! (`interaction.voted`) so every copy shows the votes so far.

use std::sync::Arc;

use jiff::Timestamp;

use super::records::{clip, log_resolution};
use super::{EventKind, Registry, RegistryError, Resolving};
use crate::interaction::ValidationError;
use crate::interaction::answer::{self, Answer, Responder};
use crate::interaction::model::Interaction;
use crate::interaction::ports::Effects;
use crate::interaction::ports::audit::{Action, AuditRecord};
use crate::interaction::quorum::{self, Ballot, Vote, VoteOutcome};
use crate::sync::RwLockExt;

impl Registry {
    /// Records `answer` as `responder`'s vote on `current` (pending, with a quorum).
    pub(super) async fn vote(
        &self,
        current: Arc<Interaction>,
        answer: Answer,
        responder: Responder,
        at: Timestamp,
    ) -> Result<Arc<Interaction>, RegistryError> {
        let allow = match &answer {
            Answer::Allow {
                updated_input: None,
                always: false,
            } => true,
            Answer::Allow { .. } => {
                let e = ValidationError::new(
                    "updated_input",
                    "an approval that needs several people is allowed as it is: no edited input and no \"always\"",
                );
                let who = clip(&responder.audit_actor().unwrap_or_default());
                self.refused(
                    Some(&current.id),
                    &who,
                    &responder.via,
                    &format!("invalid answer: {e}"),
                )
                .await;
                return Err(e.into());
            }
            _ => false,
        };
        let person = self.person(&responder);
        let vote = Vote {
            by: responder.by.clone().unwrap_or_else(|| person.clone()),
            person,
            via: responder.via.clone(),
            allow,
            at,
        };
        let actor = clip(&responder.audit_actor().unwrap_or_else(|| vote.by.clone()));
        let decided =
            Arc::new(current.resolved(answer::resolution_for(&current, answer, responder, at)?));
        let ballot = self.ballot(&current, vote, decided, &actor);
        let resolving = Resolving::start(&self.inner.resolving, &current.id);
        match self.inner.store.vote(ballot).await? {
            VoteOutcome::Recorded(i) => {
                drop(resolving);
                self.publish(EventKind::Voted, i.clone());
                tracing::info!(id = %i.id, votes = %quorum::tally(&i).unwrap_or_default(), "vote recorded");
                for h in self.hooks().iter() {
                    h.voted(&i);
                    h.jobs_recorded();
                }
                Err(RegistryError::Voted(i))
            }
            VoteOutcome::Decided(i) => {
                drop(resolving);
                self.settle_locally(&i);
                self.publish(EventKind::Resolved, i.clone());
                log_resolution(&i, "interaction resolved by its quorum");
                for h in self.hooks().iter() {
                    h.resolved(&i);
                    h.jobs_recorded();
                }
                Ok(i)
            }
            VoteOutcome::AlreadyVoted(earlier, i) => {
                drop(resolving);
                let reason = format!(
                    "already voted ({} via {})",
                    if earlier.allow { "allow" } else { "deny" },
                    earlier.via
                );
                self.refused(Some(&i.id), &actor, &earlier.via, &reason)
                    .await;
                Err(RegistryError::AlreadyVoted(earlier, i))
            }
            VoteOutcome::AlreadyResolved(winner) => {
                if resolving.finish() && self.settle_locally(&winner) {
                    self.publish(EventKind::Resolved, winner.clone());
                }
                Err(RegistryError::AlreadyResolved(winner))
            }
            VoteOutcome::NotFound => Err(RegistryError::NotFound(current.id.clone())),
        }
    }

    /// The person behind an answer: one vote each, whatever channel they answer from. The
    /// channel's identity as people know it; an inbox or API answer is its operator
    /// token's identity (channel [`quorum::OPERATOR`]), which the HTTP layer sets; an answer with
    /// no identity counts as its channel's one person.
    fn person(&self, responder: &Responder) -> String {
        match &responder.identity {
            Some(id) => quorum::person_of(&self.inner.teams.reading().people, &id.channel, &id.id),
            None => responder
                .actor_id
                .clone()
                .unwrap_or_else(|| responder.via.as_str().to_string()),
        }
    }

    /// The ballot for `vote` on `current`: what it records whether it decides or not.
    fn ballot(
        &self,
        current: &Arc<Interaction>,
        vote: Vote,
        decided: Arc<Interaction>,
        actor: &str,
    ) -> Ballot {
        let q = current
            .quorum
            .unwrap_or(quorum::Quorum { allow: 1, deny: 1 });
        let needed = q.needed(vote.allow);
        let mut votes = current.votes.to_vec();
        votes.push(vote.clone());
        let after = Ballot::with_votes(current, votes);
        let record = self.inner.config.audit.then(|| AuditRecord {
            at: vote.at,
            action: Action::Voted,
            interaction_id: Some(current.id.as_str().to_string()),
            actor: Some(actor.to_string()),
            channel: vote.via.as_str().to_string(),
            outcome: if vote.allow { "allow" } else { "deny" }.into(),
            input_hash: Some(current.input_digest()),
            detail: quorum::tally(&after).map(|t| clip(&t)),
        });
        let mut decided_effects = self.resolution_effects(&decided, Some(actor));
        decided_effects.audit.splice(0..0, record.clone());
        let mut jobs = Vec::new();
        for h in self.hooks().iter() {
            h.plan_voted(&after, &mut jobs);
        }
        Ballot {
            interaction: current.clone(),
            vote,
            needed,
            decided,
            decided_effects,
            recorded_effects: Effects {
                jobs,
                audit: record.into_iter().collect(),
            },
        }
    }
}
