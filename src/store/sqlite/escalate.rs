//! Escalation in SQLite: the mark and the jobs it plans, in one write, if the interaction is
//! still pending and not yet escalated.

use std::sync::Arc;

use rusqlite::params;

use super::{SqliteStore, apply_effects, corrupt, encode_jobs, get_in, ms, unavailable};
use crate::interaction::Interaction;
use crate::store::{Effects, EscalateOutcome, StoreError};

impl SqliteStore {
    /// [`crate::store::InteractionStore::escalate`].
    pub(super) async fn escalate_doc(
        &self,
        escalated: Arc<Interaction>,
        effects: Effects,
    ) -> Result<EscalateOutcome, StoreError> {
        let Some(at) = escalated.escalated_at().map(ms) else {
            return Err(StoreError::Corrupt(
                "escalate called without escalated_at".into(),
            ));
        };
        let doc = serde_json::to_string(&Interaction {
            resolution: None,
            ..(*escalated).clone()
        })
        .map_err(corrupt)?;
        let id = escalated.id.as_str().to_string();
        let jobs = encode_jobs(effects.jobs);
        let audit = effects.audit;
        self.write(move |conn| {
            let changed = conn
                .prepare_cached(
                    // The votes recorded meanwhile are kept.
                    "UPDATE interactions
                     SET doc = CASE WHEN json_extract(doc, '$.votes') IS NULL THEN ?2
                               ELSE json_set(?2, '$.votes', json(json_extract(doc, '$.votes'))) END
                     WHERE id = ?1 AND status = 'pending'
                       AND json_extract(doc, '$.escalated_at') IS NULL",
                )
                .and_then(|mut s| s.execute(params![id, doc]))
                .map_err(unavailable)?;
            if changed == 1 {
                apply_effects(conn, &jobs, audit, at)?;
                return Ok(EscalateOutcome::Escalated);
            }
            match get_in(conn, &id)? {
                Some(current) => Ok(EscalateOutcome::Unchanged(current)),
                None => Ok(EscalateOutcome::NotFound),
            }
        })
        .await
    }
}
