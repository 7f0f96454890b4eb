//! Agent sessions in PostgreSQL: a row each, shared by every replica. A change takes a
//! transaction-scoped lock on the session's key first (a row that does not exist yet cannot
//! be locked), so replicas' changes to one session come one after the other.

use async_trait::async_trait;
use tokio_postgres::types::Json;

use super::{PostgresStore, audit, col, corrupt, db, exec, ms, row, rows};
use crate::interaction::ports::audit::AuditRecord;
use crate::interaction::ports::{SessionChange, SessionStore, StoreError};
use crate::interaction::sessions::Session;

fn decode(r: &tokio_postgres::Row) -> Result<Session, StoreError> {
    let Json(doc): Json<serde_json::Value> = col(r, 0)?;
    serde_json::from_value(doc).map_err(corrupt)
}

#[async_trait]
impl SessionStore for PostgresStore {
    async fn change_session(
        &self,
        agent: &str,
        id: &str,
        change: SessionChange,
        audit: Vec<AuditRecord>,
        keep: usize,
    ) -> Result<Option<Session>, StoreError> {
        let mut client = self.client().await?;
        let tx = client.transaction().await.map_err(db)?;
        // One key per session, in a space of its own (the second argument). Two sessions
        // whose names join alike only share a lock, never a row.
        let key = format!("{agent}/{id}");
        exec(
            &tx,
            "SELECT pg_advisory_xact_lock(hashtextextended($1, 45))",
            &[&key],
        )
        .await?;
        let sql = self.sql("SELECT doc FROM {s}.sessions WHERE agent = $1 AND id = $2");
        let existing = row(&tx, &sql, &[&agent, &id])
            .await?
            .as_ref()
            .map(decode)
            .transpose()?;
        let Some(changed) = change(existing) else {
            return Ok(None);
        };
        let sql = self.sql(
            "INSERT INTO {s}.sessions (agent, id, last_activity, doc) VALUES ($1, $2, $3, $4)
             ON CONFLICT (agent, id) DO UPDATE
             SET last_activity = excluded.last_activity, doc = excluded.doc",
        );
        let at = ms(changed.last_activity);
        exec(&tx, &sql, &[&agent, &id, &at, &Json(&changed)]).await?;
        let sql = self.sql(
            "DELETE FROM {s}.sessions WHERE (agent, id) IN
             (SELECT agent, id FROM {s}.sessions ORDER BY last_activity DESC OFFSET $1)",
        );
        let keep = i64::try_from(keep).unwrap_or(i64::MAX);
        exec(&tx, &sql, &[&keep]).await?;
        audit::append(&tx, &self.schema, audit).await?;
        tx.commit().await.map_err(db)?;
        Ok(Some(changed))
    }

    async fn session(&self, agent: &str, id: &str) -> Result<Option<Session>, StoreError> {
        let client = self.client().await?;
        let sql = self.sql("SELECT doc FROM {s}.sessions WHERE agent = $1 AND id = $2");
        row(&client, &sql, &[&agent, &id])
            .await?
            .as_ref()
            .map(decode)
            .transpose()
    }

    async fn sessions(&self, limit: usize) -> Result<Vec<Session>, StoreError> {
        let client = self.client().await?;
        let sql = self
            .sql("SELECT doc FROM {s}.sessions ORDER BY last_activity DESC, agent, id LIMIT $1");
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        rows(&client, &sql, &[&limit])
            .await?
            .iter()
            .map(decode)
            .collect()
    }
}
