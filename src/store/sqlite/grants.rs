//! Grants in SQLite: a row each, written with its audit entries in one transaction.

use async_trait::async_trait;
use jiff::Timestamp;
use rusqlite::params;

use super::audit::append_audit_in;
use super::{SqliteStore, corrupt, ms, unavailable};
use crate::interaction::policy::Grant;
use crate::interaction::ports::audit::AuditRecord;
use crate::interaction::ports::{GrantStore, StoreError};

fn decode(doc: &str) -> Result<Grant, StoreError> {
    serde_json::from_str(doc).map_err(corrupt)
}

#[async_trait]
impl GrantStore for SqliteStore {
    async fn add_grant(&self, grant: Grant, audit: Vec<AuditRecord>) -> Result<(), StoreError> {
        let doc = serde_json::to_string(&grant).map_err(corrupt)?;
        self.write(move |conn| {
            conn.execute(
                "INSERT INTO grants (id, created_at, expires_at, revoked_at, doc, owner)
                 VALUES (?1, ?2, ?3, NULL, ?4, ?5)",
                params![
                    grant.id,
                    ms(grant.created_at),
                    grant.expires_at.map(ms),
                    doc,
                    grant.owner
                ],
            )
            .map_err(unavailable)?;
            append_audit_in(conn, audit)
        })
        .await
    }

    async fn revoke_grant(
        &self,
        id: &str,
        at: Timestamp,
        audit: Vec<AuditRecord>,
    ) -> Result<Option<Grant>, StoreError> {
        let id = id.to_string();
        self.write(move |conn| {
            let now = ms(at);
            let doc: Option<String> = conn
                .query_row(
                    "UPDATE grants SET revoked_at = ?2
                     WHERE id = ?1 AND revoked_at IS NULL AND (expires_at IS NULL OR expires_at > ?2)
                     RETURNING doc",
                    params![id, now],
                    |r| r.get(0),
                )
                .map(Some)
                .or_else(|e| match e {
                    rusqlite::Error::QueryReturnedNoRows => Ok(None),
                    e => Err(unavailable(e)),
                })?;
            match doc {
                Some(doc) => {
                    append_audit_in(conn, audit)?;
                    decode(&doc).map(Some)
                }
                None => Ok(None),
            }
        })
        .await
    }

    async fn live_grants(&self, now: Timestamp) -> Result<Vec<Grant>, StoreError> {
        let now = ms(now);
        self.read(move |conn| {
            let mut stmt = conn
                .prepare_cached(
                    "SELECT doc FROM grants
                     WHERE revoked_at IS NULL AND (expires_at IS NULL OR expires_at > ?1)
                     ORDER BY created_at, id",
                )
                .map_err(unavailable)?;
            let docs = stmt
                .query_map([now], |r| r.get::<_, String>(0))
                .map_err(unavailable)?
                .collect::<Result<Vec<_>, _>>()
                .map_err(unavailable)?;
            docs.iter().map(|d| decode(d)).collect()
        })
        .await
    }
}
