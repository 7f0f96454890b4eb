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
        let allow = self.allows(&current, &answer, &responder).await?;
        let person = self.person(&responder);
        // A name the credential does not prove (an administrator's token, a webhook's body)
        // is neither counted nor recorded: the vote is the credential's.
        let by = match &responder.credential {
            Some(c) => c.clone(),
            None => responder.by.clone().unwrap_or_else(|| person.clone()),
        };
        let mut responder = responder;
        if responder.credential.is_some() {
            responder.actor_id = responder.identity.as_ref().map(ToString::to_string);
            responder.by = Some(by.clone());
        }
        let vote = Vote {
            by,
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
                    .await?;
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

    /// Whether `answer` is a vote to allow: an allow with an edited input or "always" does
    /// not fit an approval that needs several people, and is refused (and recorded so).
    async fn allows(
        &self,
        current: &Interaction,
        answer: &Answer,
        responder: &Responder,
    ) -> Result<bool, RegistryError> {
        match answer {
            Answer::Allow {
                updated_input: None,
                always: false,
            } => Ok(true),
            Answer::Allow { always, .. } => {
                let e = ValidationError::new(
                    if *always { "always" } else { "updated_input" },
                    "an approval that needs several people is allowed as it is: no edited input and no \"always\"",
                );
                let who = clip(&responder.audit_actor().unwrap_or_default());
                self.refused(
                    Some(&current.id),
                    &who,
                    &responder.via,
                    &format!("invalid answer: {e}"),
                )
                .await?;
                Err(e.into())
            }
            _ => Ok(false),
        }
    }

    /// The person behind an answer: one vote each, whatever channel they answer from. The
    /// credential's where that is the person (every administrator's token is one,
    /// [`quorum::ADMINISTRATOR`]; a webhook without a person is one), else the channel's
    /// identity as people know it (a labelled operator token's label, a chat user); an
    /// answer with neither counts as its channel's one person.
    fn person(&self, responder: &Responder) -> String {
        responder
            .person(&self.inner.teams.reading().people)
            .or_else(|| responder.actor_id.clone())
            .unwrap_or_else(|| responder.via.as_str().to_string())
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
            .quorum()
            .unwrap_or(quorum::Quorum { allow: 1, deny: 1 });
        let needed = q.needed(vote.allow);
        let mut votes = current.votes().to_vec();
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

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::interaction::people::{Identity, People, PersonSpec};
    use crate::interaction::policy::{Decision, Policy, Rule, RuleSpec};
    use crate::interaction::routes::{RouteSpec, Routes};
    use crate::interaction::{NewInteraction, Outcome, RegistryConfig, Teams, Via};
    use crate::store::MemoryStore;

    fn registry(quorum: u32) -> Registry {
        let reg = Registry::new(Arc::new(MemoryStore::new()), RegistryConfig::default());
        let people = People::new(
            vec![PersonSpec {
                name: "alice".into(),
                identities: vec![
                    Identity::new("telegram", "1"),
                    Identity::new("feishu", "ou_a"),
                ],
                groups: Vec::new(),
                quiet: None,
            }],
            Vec::new(),
        )
        .unwrap();
        let routes = Routes::new(
            vec![RouteSpec {
                name: "deploy".into(),
                tools: vec!["Bash".into()],
                quorum: Some(quorum),
                ..RouteSpec::default()
            }],
            &people,
        )
        .unwrap();
        reg.set_teams(Teams { people, routes });
        reg
    }

    fn bash(id: &str, command: &str) -> NewInteraction {
        NewInteraction {
            id: Some(id.into()),
            ..NewInteraction::new(
                "Bash",
                json!({"command": command}).as_object().cloned().unwrap(),
            )
        }
    }

    fn on(channel: &str, id: &str) -> Responder {
        Responder::new(id, Via::new(channel)).with_identity(channel, id)
    }

    #[tokio::test]
    async fn votes_at_once_from_many_people_are_all_counted_and_decide_once() {
        let reg = registry(3);
        let id = reg
            .create(bash("q1", "make deploy"))
            .await
            .unwrap()
            .interaction
            .id
            .clone();
        let (_, mut events) = reg.events().subscribe();
        let answers = (0..6).map(|k| {
            let reg = reg.clone();
            let id = id.clone();
            tokio::spawn(async move {
                reg.respond(
                    &id,
                    Answer::allow(),
                    on("telegram", &format!("{}", 100 + k)),
                )
                .await
            })
        });
        let mut decided = 0;
        let mut voted = 0;
        let mut late = 0;
        for a in answers {
            match a.await.unwrap() {
                Ok(i) => {
                    decided += 1;
                    assert_eq!(i.votes().len(), 3);
                }
                Err(RegistryError::Voted(_)) => voted += 1,
                Err(RegistryError::AlreadyResolved(_)) => late += 1,
                Err(e) => panic!("{e}"),
            }
        }
        assert_eq!((decided, voted, late), (1, 2, 3));
        let i = reg.get(&id).await.unwrap().unwrap();
        assert_eq!(i.resolution.as_ref().unwrap().outcome, Outcome::Allowed);
        assert_eq!(i.votes().len(), 3);
        // Announced: two votes, then one resolution.
        let mut kinds = Vec::new();
        while let Some(crate::interaction::Next::Event(e)) = events.try_next() {
            kinds.push(e.kind);
        }
        assert_eq!(
            kinds,
            [EventKind::Voted, EventKind::Voted, EventKind::Resolved]
        );
    }

    #[tokio::test]
    async fn a_person_is_one_vote_whatever_channel_they_answer_from() {
        let reg = registry(2);
        let id = reg
            .create(bash("q2", "make deploy"))
            .await
            .unwrap()
            .interaction
            .id
            .clone();
        let first = reg.respond(&id, Answer::allow(), on("telegram", "1")).await;
        let Err(RegistryError::Voted(i)) = first else {
            panic!("{first:?}")
        };
        assert_eq!(quorum::tally(&i).unwrap(), "1 of 2: alice via telegram");
        let again = reg
            .respond(&id, Answer::deny(None), on("feishu", "ou_a"))
            .await;
        let Err(RegistryError::AlreadyVoted(v, _)) = again else {
            panic!("{again:?}")
        };
        assert!(v.allow && v.via.as_str() == "telegram");
        // An identity nobody configured is a person of its own: a deny denies at once.
        let denied = reg
            .respond(&id, Answer::deny(None), on("feishu", "ou_b"))
            .await
            .unwrap();
        assert_eq!(denied.resolution.as_ref().unwrap().outcome, Outcome::Denied);
    }

    #[tokio::test]
    async fn the_stricter_of_a_routes_and_an_ask_rules_quorum_is_stamped() {
        let reg = registry(2);
        reg.set_policy(Policy::new(vec![
            Rule::new(RuleSpec {
                name: "force-push".into(),
                tools: vec!["Bash(git push --force:*)".into()],
                decision: Some(Decision::Ask),
                quorum: Some(3),
                ..RuleSpec::default()
            })
            .unwrap(),
        ]));
        let push = reg
            .create(bash("q3", "git push --force origin main"))
            .await
            .unwrap();
        assert_eq!(push.interaction.quorum().map(|q| q.allow), Some(3));
        let plain = reg.create(bash("q4", "git status")).await.unwrap();
        assert_eq!(plain.interaction.quorum().map(|q| q.allow), Some(2));
        // A grant or an allow rule never stands for the quorum: people decide.
        reg.set_policy(Policy::new(vec![
            Rule::new(RuleSpec {
                name: "make".into(),
                tools: vec!["Bash(make:*)".into()],
                decision: Some(Decision::Allow),
                ..RuleSpec::default()
            })
            .unwrap(),
        ]));
        let make = reg.create(bash("q5", "make deploy")).await.unwrap();
        assert!(make.interaction.is_pending());
        assert_eq!(make.interaction.quorum().map(|q| q.allow), Some(2));
        // A rule's quorum is for ask rules only.
        let allow = Rule::new(RuleSpec {
            name: "x".into(),
            decision: Some(Decision::Allow),
            quorum: Some(2),
            ..RuleSpec::default()
        });
        assert_eq!(allow.unwrap_err().field, "quorum");
    }
}
