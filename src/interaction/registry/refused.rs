//! Refused answer attempts: logged and audited, those not bound to an interaction only up
//! to a rate per channel.

use tokio::time::Instant;

use super::Registry;
use super::records::clip;
use crate::interaction::model::{InteractionId, Via, now};
use crate::interaction::ports::audit::{Action, AuditRecord};

impl Registry {
    /// Records an answer attempt that was refused before reaching the registry's decision
    /// (a non-approver's tap, a bad signature, a forged button): it changes nothing, but it
    /// is part of the record of who tried what.
    ///
    /// Anyone can send refusals that are not bound to an interaction (`id` is `None`: a bad
    /// signature, a wrong secret), so those are rate-limited per channel: beyond a burst, they
    /// are counted instead of logged and audited, and the count goes into the next entry.
    /// `actor` and `reason` are cut to a bounded length.
    pub async fn refused(&self, id: Option<&InteractionId>, actor: &str, via: &Via, reason: &str) {
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
        let Some(suppressed) = admitted else { return };
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
            return;
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
        if let Err(e) = self.inner.store.append_audit(vec![record]).await {
            tracing::error!(error = %e, "could not append a refusal to the audit trail");
        }
    }
}
