//! Grants in PostgreSQL: a row each, written with its audit entries in one transaction, and
//! read by every replica when it weighs a new interaction.

use async_trait::async_trait;
use jiff::Timestamp;
use tokio_postgres::types::Json;

use super::{PostgresStore, audit, col, corrupt, db, ms, row, rows};
use crate::interaction::policy::Grant;
use crate::interaction::ports::audit::AuditRecord;
use crate::interaction::ports::{GrantStore, StoreError};

fn decode(r: &tokio_postgres::Row) -> Result<Grant, StoreError> {
    let Json(doc): Json<serde_json::Value> = col(r, 0)?;
    serde_json::from_value(doc).map_err(corrupt)
}

#[async_trait]
impl GrantStore for PostgresStore {
    async fn add_grant(&self, grant: Grant, audit: Vec<AuditRecord>) -> Result<(), StoreError> {
        let mut client = self.client().await?;
        let tx = client.transaction().await.map_err(db)?;
        let sql = self.sql(
            "INSERT INTO {s}.grants (id, created_at, expires_at, revoked_at, doc, owner)
             VALUES ($1, $2, $3, NULL, $4, $5)",
        );
        let expires = grant.expires_at.map(ms);
        super::exec(
            &tx,
            &sql,
            &[
                &grant.id,
                &ms(grant.created_at),
                &expires,
                &Json(&grant),
                &grant.owner,
            ],
        )
        .await?;
        audit::append(&tx, &self.schema, audit).await?;
        tx.commit().await.map_err(db)
    }

    async fn revoke_grant(
        &self,
        id: &str,
        at: Timestamp,
        audit: Vec<AuditRecord>,
    ) -> Result<Option<Grant>, StoreError> {
        let mut client = self.client().await?;
        let tx = client.transaction().await.map_err(db)?;
        let sql = self.sql(
            "UPDATE {s}.grants SET revoked_at = $2
             WHERE id = $1 AND revoked_at IS NULL AND (expires_at IS NULL OR expires_at > $2)
             RETURNING doc",
        );
        let Some(r) = row(&tx, &sql, &[&id, &ms(at)]).await? else {
            return Ok(None);
        };
        let grant = decode(&r)?;
        audit::append(&tx, &self.schema, audit).await?;
        tx.commit().await.map_err(db)?;
        Ok(Some(grant))
    }

    async fn live_grants(&self, now: Timestamp) -> Result<Vec<Grant>, StoreError> {
        let client = self.client().await?;
        let sql = self.sql(
            "SELECT doc FROM {s}.grants
             WHERE revoked_at IS NULL AND (expires_at IS NULL OR expires_at > $1)
             ORDER BY created_at, id",
        );
        rows(&client, &sql, &[&ms(now)])
            .await?
            .iter()
            .map(decode)
            .collect()
    }
}
