//! Votes on approvals that need several people, shared by every replica: a vote is one
//! transaction of its own that locks its interaction's row (`FOR UPDATE`), so votes from
//! several replicas are counted one after the other and only one decides. In it: the vote
//! (in `votes`, one per person by its primary key, and in the interaction's `doc`), the
//! resolution when it decides, the outbox jobs, the audit entries and the event
//! (`voted`, or `resolved` for the vote that decides), and the notifications that tell the
//! other replicas.

use std::sync::Arc;

use deadpool_postgres::GenericClient;
use tokio_postgres::types::Json;

use super::{PostgresStore, audit, db, decode, events, listener, ms, outbox, row};
use crate::interaction::quorum::{Ballot, Count, Vote, VoteOutcome};
use crate::interaction::{EventKind, Interaction};
use crate::store::StoreError;

impl PostgresStore {
    /// [`crate::store::InteractionStore::vote`] on PostgreSQL.
    pub(super) async fn record_vote(&self, ballot: Ballot) -> Result<VoteOutcome, StoreError> {
        let mut client = self
            .pool
            .get()
            .await
            .map_err(|e| self.target.pool_error(e))?;
        let tx = client.transaction().await.map_err(db)?;
        let id = ballot.interaction.id.as_str().to_string();
        let locked =
            self.sql("SELECT doc, resolution FROM {s}.interactions WHERE id = $1 FOR UPDATE");
        let stored = row(&tx, &locked, &[&id])
            .await?
            .map(|r| decode(&r, 0))
            .transpose()?;
        let (updated, effects, decided) = match ballot.count(stored.as_ref()) {
            Count::Refused(outcome) => return Ok(outcome),
            Count::Recorded(i) => (i, ballot.recorded_effects, false),
            Count::Decided(i) => (i, ballot.decided_effects, true),
        };
        self.insert_vote(&tx, &ballot.vote, &updated).await?;
        let doc = Interaction {
            resolution: None,
            ..updated.clone()
        };
        let at = self.write_row(&tx, &doc, &updated, decided).await?;
        let jobs: Vec<_> = effects.jobs.iter().map(|j| (j, at)).collect();
        outbox::insert_at(&tx, &self.schema, &jobs).await?;
        let appender = events::Appender::prepare(&tx, &self.schema).await?;
        let event = [events::New {
            kind: if decided {
                EventKind::Resolved
            } else {
                EventKind::Voted
            },
            id: &id,
            doc: &doc,
            resolution: updated.resolution.as_deref(),
            at,
        }];
        audit::append_then(
            &tx,
            &self.schema,
            effects.audit,
            appender.append(&tx, &event),
        )
        .await?;
        tx.commit().await.map_err(db)?;
        let updated = Arc::new(updated);
        Ok(if decided {
            VoteOutcome::Decided(updated)
        } else {
            VoteOutcome::Recorded(updated)
        })
    }

    async fn insert_vote(
        &self,
        tx: &impl GenericClient,
        v: &Vote,
        updated: &Interaction,
    ) -> Result<(), StoreError> {
        let sql = self.sql(
            "INSERT INTO {s}.votes (interaction_id, created_at, person, allow, via, at, doc)
             VALUES ($1, $2, $3, $4, $5, $6, $7)
             ON CONFLICT DO NOTHING",
        );
        let n = super::exec(
            tx,
            &sql,
            &[
                &updated.id.as_str(),
                &ms(updated.created_at),
                &v.person,
                &v.allow,
                &v.via.as_str(),
                &ms(v.at),
                &Json(v),
            ],
        )
        .await?;
        if n == 0 {
            // The doc and the table disagree: the table is the record.
            return Err(StoreError::Corrupt(format!(
                "a vote of {:?} on {:?} is recorded but missing from the interaction",
                v.person,
                updated.id.as_str()
            )));
        }
        Ok(())
    }

    /// Writes the interaction's row: its votes, and its resolution when the vote decided;
    /// announces the change. Returns the change's time (unix ms).
    async fn write_row(
        &self,
        tx: &impl GenericClient,
        doc: &Interaction,
        updated: &Interaction,
        decided: bool,
    ) -> Result<i64, StoreError> {
        let id = updated.id.as_str();
        let channel = self.schema.channel();
        match (decided, updated.resolution.as_deref()) {
            (true, Some(r)) => {
                let sql = self.sql(
                    "UPDATE {s}.interactions
                     SET doc = $2, status = 'resolved', resolved_at = $3, resolution = $4
                     WHERE id = $1 AND status = 'pending'",
                );
                super::exec(tx, &sql, &[&id, &Json(doc), &ms(r.at), &Json(r)]).await?;
                if let Some(note) = listener::settled_payload(id, r) {
                    let settled = self.schema.settled_channel();
                    super::exec(tx, "SELECT pg_notify($1, $2)", &[&settled, &note]).await?;
                }
                super::exec(tx, "SELECT pg_notify($1, $2)", &[&channel, &id]).await?;
                Ok(ms(r.at))
            }
            (true, None) => Err(StoreError::Corrupt(
                "a deciding vote without a resolution".into(),
            )),
            (false, _) => {
                let sql = self.sql("UPDATE {s}.interactions SET doc = $2 WHERE id = $1");
                super::exec(tx, &sql, &[&id, &Json(doc)]).await?;
                super::exec(tx, "SELECT pg_notify($1, $2)", &[&channel, &id]).await?;
                let at = updated.votes().last().map_or(0, |v| ms(v.at));
                Ok(at)
            }
        }
    }
}
