//! Creating an interaction: re-attaching to one held already, the policy's decision, the
//! write with its planned jobs and audit, and the announcement that follows, in order with
//! a resolution that lands between the store's commit and the slot.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use super::budget;
use super::records::{created_record, log_created};
use super::{Created, EventKind, NewInteraction, Registry, RegistryError, policy};
use crate::interaction::model::{Interaction, InteractionId};
use crate::interaction::policy::{Decision, Evaluation};
use crate::interaction::ports::{CreateOutcome, Effects};
use crate::sync::LockExt;

impl Registry {
    /// Creates an interaction, or re-attaches to the existing one with the same id, tool name
    /// and input. It is durable when this returns.
    pub async fn create(&self, new: NewInteraction) -> Result<Created, RegistryError> {
        self.create_for(new, None).await
    }

    /// [`Registry::create`] on behalf of `owner` (an agent token, or whatever the caller
    /// names its clients by), whose pending interactions may hold at most
    /// [`RegistryConfig::max_pending_bytes_per_owner`](super::RegistryConfig::max_pending_bytes_per_owner).
    /// A new interaction that would pass that, or
    /// [`RegistryConfig::max_pending_bytes`](super::RegistryConfig::max_pending_bytes) in all,
    /// is refused with [`RegistryError::Full`] before anything is written.
    pub async fn create_for(
        &self,
        new: NewInteraction,
        owner: Option<&str>,
    ) -> Result<Created, RegistryError> {
        let mut built = self.build(new)?;
        // One string per owner, shared by its pending interactions and their charges.
        built.owner = owner.map(|o| self.inner.budget.owner(o));
        let interaction = Arc::new(built);
        if let Some(existing) = self.held_already(&interaction).await? {
            return Self::reattach(existing, &interaction);
        }
        let evaluation = self.weigh(&interaction).await;
        if let Some(d) = evaluation
            .live
            .as_ref()
            .filter(|d| d.decision != Decision::Ask)
        {
            return self.create_decided(interaction, d, &evaluation).await;
        }
        let charge = self
            .inner
            .budget
            .reserve(interaction.owner.as_ref(), budget::cost(&interaction))?;
        let effects = self.created_effects(&interaction, &evaluation);
        let has_jobs = !effects.jobs.is_empty();
        let untracked_before = self.inner.untracked_resolutions.load(Ordering::SeqCst);
        match self
            .inner
            .store
            .create(interaction.clone(), effects)
            .await?
        {
            CreateOutcome::Created => {
                self.track_charged(interaction.clone(), Some(charge));
                let resolved_meanwhile = self.announce_new(&interaction, untracked_before).await;
                log_created(&interaction);
                self.report_policy(&interaction, &evaluation);
                for h in self.hooks().iter() {
                    h.created(&interaction);
                    if has_jobs {
                        h.jobs_recorded();
                    }
                }
                Ok(Created {
                    interaction: resolved_meanwhile.unwrap_or(interaction),
                    created: true,
                })
            }
            CreateOutcome::Exists(existing) => {
                if existing.is_pending()
                    && existing.same_request(&interaction.tool_name, &interaction.input)
                {
                    self.adopt(existing.clone()).await?;
                }
                Self::reattach(existing, &interaction)
            }
        }
    }

    /// The interaction with `asked`'s id if this process holds it as pending already, whole.
    async fn held_already(
        &self,
        asked: &Interaction,
    ) -> Result<Option<Arc<Interaction>>, RegistryError> {
        let local = self.inner.slots.locked().get(&asked.id).map(|s| s.held());
        match local {
            Some(Some(existing)) => Ok(Some(existing)),
            // Held here without its input: the store has the rest.
            Some(None) => Ok(self.inner.store.get(&asked.id).await?),
            None => Ok(None),
        }
    }

    /// The outbox jobs and audit records written with a new interaction.
    fn created_effects(&self, interaction: &Interaction, evaluation: &Evaluation) -> Effects {
        let mut jobs = Vec::new();
        for h in self.hooks().iter() {
            h.plan_created(interaction, &mut jobs);
        }
        Effects {
            jobs,
            audit: if self.inner.config.audit {
                let mut audit = vec![created_record(interaction)];
                audit.extend(policy::policy_records(interaction, evaluation));
                audit
            } else {
                Vec::new()
            },
        }
    }

    /// Announces a new interaction just tracked, unless it was resolved meanwhile: then it is
    /// settled here and returned.
    async fn announce_new(
        &self,
        interaction: &Arc<Interaction>,
        untracked_before: u64,
    ) -> Option<Arc<Interaction>> {
        // An answer can land between the commit and `track`: it finds no slot, wins in
        // the store and publishes `resolved` itself. If any resolution missed its slot
        // meanwhile, re-read first; a resolved interaction is settled here and never
        // announced as created after its resolution.
        let unchanged = self.inner.untracked_resolutions.load(Ordering::SeqCst) == untracked_before;
        if unchanged && self.announce_created(interaction) {
            return None;
        }
        let latest = self.resolved_in_store(&interaction.id).await;
        if latest.is_none() {
            self.announce_created(interaction);
        }
        latest
    }

    pub(super) fn reattach(
        existing: Arc<Interaction>,
        asked: &Interaction,
    ) -> Result<Created, RegistryError> {
        // Another client's interaction is theirs: neither re-attached to nor shown.
        if let (Some(theirs), Some(mine)) = (existing.owner.as_deref(), asked.owner.as_deref())
            && theirs != mine
        {
            tracing::warn!(id = %existing.id, client = mine, "an id another client's interaction holds was asked for; refused");
            return Err(RegistryError::Taken(existing.id.clone()));
        }
        if existing.same_request(&asked.tool_name, &asked.input) {
            Ok(Created {
                interaction: existing,
                created: false,
            })
        } else {
            Err(RegistryError::Conflict(existing))
        }
    }

    /// Publishes `interaction.created` if the interaction is still pending here. Done under
    /// the slots lock, which whoever settles the slot takes before publishing `resolved`, so
    /// `created` always comes first. Returns whether it was published.
    pub(super) fn announce_created(&self, interaction: &Arc<Interaction>) -> bool {
        let slots = self.inner.slots.locked();
        let pending = slots.get(&interaction.id).is_some_and(|s| !s.is_resolved());
        if pending {
            self.publish(EventKind::Created, interaction.clone());
        }
        pending
    }

    /// Re-reads a freshly tracked interaction and, if the store has it resolved, settles it
    /// locally and returns it. A failed read is logged: the deadline settles it later.
    async fn resolved_in_store(&self, id: &InteractionId) -> Option<Arc<Interaction>> {
        match self.inner.store.get(id).await {
            Ok(Some(latest)) if !latest.is_pending() => {
                self.settle_locally(&latest);
                Some(latest)
            }
            Ok(_) => None,
            Err(e) => {
                tracing::warn!(id = %id, error = %e, "could not re-read a new interaction; its deadline will settle it");
                None
            }
        }
    }
}
