//! Escalation in PostgreSQL: the mark, the jobs it plans and its audit entry, in one
//! transaction, if the interaction is still pending and not yet escalated; announced on the
//! change feed like a create or a resolution, so the other replicas look again.

use std::sync::Arc;

use tokio_postgres::types::Json;

use super::{PostgresStore, audit, db, ms, outbox, rows};
use crate::interaction::Interaction;
use crate::store::{Effects, EscalateOutcome, StoreError};

impl PostgresStore {
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
        let doc = Interaction {
            resolution: None,
            ..(*escalated).clone()
        };
        let id = escalated.id.as_str();
        let sql = self.sql(
            // The votes recorded meanwhile (under the row's lock) are kept.
            "UPDATE {s}.interactions
             SET doc = CASE WHEN doc->'votes' IS NULL THEN $2::json
                       ELSE jsonb_set($2::jsonb, '{votes}', (doc->'votes')::jsonb)::json END
             WHERE id = $1 AND status = 'pending' AND (doc->>'escalated_at') IS NULL
             RETURNING pg_notify($3, id)",
        );
        let mut client = self.client().await?;
        let tx = client.transaction().await.map_err(db)?;
        let marked = tx
            .query(&sql, &[&id, &Json(&doc), &self.schema.channel()])
            .await
            .map_err(db)?;
        if marked.is_empty() {
            tx.rollback().await.map_err(db)?;
            return Ok(match rows::get_in(&client, &self.schema, id).await? {
                Some(current) => EscalateOutcome::Unchanged(current),
                None => EscalateOutcome::NotFound,
            });
        }
        outbox::insert(&tx, &self.schema, &effects.jobs, at).await?;
        audit::append(&tx, &self.schema, effects.audit).await?;
        tx.commit().await.map_err(db)?;
        Ok(EscalateOutcome::Escalated)
    }
}
