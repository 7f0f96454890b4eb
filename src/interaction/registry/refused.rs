//! Refused answer attempts: logged and audited, those not bound to an interaction only up
//! to a rate per channel. An attempt whose audit entry cannot be written fails with
//! [`Unrecorded`]: the caller answers it as a store failure (try again), never as if it had
//! been recorded.

use tokio::time::Instant;

use super::Registry;
use super::records::clip;
use crate::interaction::model::{InteractionId, Via, now};
use crate::interaction::ports::StoreError;
use crate::interaction::ports::audit::{Action, AuditRecord};

/// A refused answer attempt whose audit entry could not be written (the store refused the
/// write). The attempt is refused all the same and nothing changed; whoever sent it is told
/// to try again, as for any write the store refused.
#[derive(Debug, thiserror::Error)]
#[error("the refused attempt could not be written to the audit trail: {0}")]
pub struct Unrecorded(pub StoreError);

impl Registry {
    /// Records an answer attempt that was refused before reaching the registry's decision
    /// (a non-approver's tap, a bad signature, a forged button): it changes nothing, but it
    /// is part of the record of who tried what.
    ///
    /// Anyone can send refusals that are not bound to an interaction (`id` is `None`: a bad
    /// signature, a wrong secret), so those are rate-limited per channel: beyond a burst, they
    /// are counted instead of logged and audited, and the count goes into the next entry.
    /// `actor` and `reason` are cut to a bounded length.
    ///
    /// Fails with [`Unrecorded`] when the audit entry could not be written: the request that
    /// made the attempt must then fail as a store failure.
    pub async fn refused(
        &self,
        id: Option<&InteractionId>,
        actor: &str,
        via: &Via,
        reason: &str,
    ) -> Result<(), Unrecorded> {
        /// Longest actor recorded, in characters.
        const MAX_ACTOR: usize = 128;
        let admitted = match id {
            Some(_) => Some(0),
            None => self
                .inner
                .refusals
                .admit(via.as_str(), Instant::now().into_std()),
        };
        for h in self.hooks().iter() {
            h.refused(via, admitted.is_some());
        }
        let Some(suppressed) = admitted else {
            return Ok(());
        };
        let actor = crate::interaction::clip(actor, MAX_ACTOR);
        let mut detail = clip(reason);
        if suppressed > 0 {
            detail.push_str(&format!(
                " (and {suppressed} similar refusals on this channel before it, not recorded)"
            ));
        }
        tracing::warn!(
            id = id.map(|i| i.as_str()).unwrap_or(""),
            actor,
            via = %via,
            reason = detail,
            "answer attempt refused"
        );
        if !self.inner.config.audit {
            return Ok(());
        }
        let input_hash = match id {
            Some(id) => self.get(id).await.ok().flatten().map(|i| i.input_digest()),
            None => None,
        };
        let record = AuditRecord {
            at: now(),
            action: Action::Refused,
            interaction_id: id.map(|i| i.as_str().to_string()),
            actor: (!actor.is_empty()).then_some(actor),
            channel: via.as_str().to_string(),
            outcome: "refused".into(),
            input_hash,
            detail: Some(detail),
        };
        self.inner.store.append_audit(vec![record]).await.map_err(|e| {
            tracing::error!(error = %e,
                "could not append a refusal to the audit trail; the attempt is answered as a store failure");
            Unrecorded(e)
        })
    }

    /// Records a passkey event in the audit trail ([`Action::Passkey`]): `outcome` is
    /// `registered`, `asserted`, `refused` or `removed`, `detail` names the credential.
    /// A store that cannot take it fails the request that caused it.
    pub async fn audit_passkey(
        &self,
        id: Option<&InteractionId>,
        actor: &str,
        via: &Via,
        outcome: &str,
        detail: &str,
    ) -> Result<(), Unrecorded> {
        tracing::info!(
            id = id.map(|i| i.as_str()).unwrap_or(""),
            actor = %actor.escape_debug(),
            via = %via,
            outcome,
            detail = %detail.escape_debug(),
            "passkey"
        );
        if !self.inner.config.audit {
            return Ok(());
        }
        let record = AuditRecord {
            at: now(),
            action: Action::Passkey,
            interaction_id: id.map(|i| i.as_str().to_string()),
            actor: (!actor.is_empty()).then(|| crate::interaction::clip(actor, 128)),
            channel: via.as_str().to_string(),
            outcome: outcome.into(),
            input_hash: None,
            detail: Some(clip(detail)),
        };
        self.inner
            .store
            .append_audit(vec![record])
            .await
            .map_err(|e| {
                tracing::error!(error = %e, "could not append a passkey event to the audit trail");
                Unrecorded(e)
            })
    }
}
