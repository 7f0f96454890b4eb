//! Agent sessions in SQLite: a row each, changed on the writer thread (so one change at a
//! time), with the bound on how many are kept applied in the same transaction.

use async_trait::async_trait;
use rusqlite::{OptionalExtension, params};

use super::audit::append_audit_in;
use super::{SqliteStore, corrupt, ms, unavailable};
use crate::interaction::ports::audit::AuditRecord;
use crate::interaction::ports::{SessionChange, SessionStore, StoreError};
use crate::interaction::sessions::Session;

fn decode(doc: &str) -> Result<Session, StoreError> {
    serde_json::from_str(doc).map_err(corrupt)
}

fn read_one(
    conn: &rusqlite::Connection,
    agent: &str,
    id: &str,
) -> Result<Option<Session>, StoreError> {
    let doc: Option<String> = conn
        .query_row(
            "SELECT doc FROM sessions WHERE agent = ?1 AND id = ?2",
            params![agent, id],
            |r| r.get(0),
        )
        .optional()
        .map_err(unavailable)?;
    doc.as_deref().map(decode).transpose()
}

#[async_trait]
impl SessionStore for SqliteStore {
    async fn change_session(
        &self,
        agent: &str,
        id: &str,
        change: SessionChange,
        audit: Vec<AuditRecord>,
        keep: usize,
    ) -> Result<Option<Session>, StoreError> {
        let (agent, id) = (agent.to_string(), id.to_string());
        self.write(move |conn| {
            let Some(changed) = change(read_one(conn, &agent, &id)?) else {
                return Ok(None);
            };
            let doc = serde_json::to_string(&changed).map_err(corrupt)?;
            conn.execute(
                "INSERT INTO sessions (agent, id, last_activity, doc) VALUES (?1, ?2, ?3, ?4)
                 ON CONFLICT (agent, id) DO UPDATE
                 SET last_activity = excluded.last_activity, doc = excluded.doc",
                params![agent, id, ms(changed.last_activity), doc],
            )
            .map_err(unavailable)?;
            conn.execute(
                "DELETE FROM sessions WHERE rowid IN
                 (SELECT rowid FROM sessions ORDER BY last_activity DESC LIMIT -1 OFFSET ?1)",
                [i64::try_from(keep).unwrap_or(i64::MAX)],
            )
            .map_err(unavailable)?;
            append_audit_in(conn, audit)?;
            Ok(Some(changed))
        })
        .await
    }

    async fn session(&self, agent: &str, id: &str) -> Result<Option<Session>, StoreError> {
        let (agent, id) = (agent.to_string(), id.to_string());
        self.read(move |conn| read_one(conn, &agent, &id)).await
    }

    async fn sessions(&self, limit: usize) -> Result<Vec<Session>, StoreError> {
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        self.read(move |conn| {
            let mut stmt = conn
                .prepare_cached(
                    "SELECT doc FROM sessions ORDER BY last_activity DESC, agent, id LIMIT ?1",
                )
                .map_err(unavailable)?;
            let docs = stmt
                .query_map([limit], |r| r.get::<_, String>(0))
                .map_err(unavailable)?
                .collect::<Result<Vec<_>, _>>()
                .map_err(unavailable)?;
            docs.iter().map(|d| decode(d)).collect()
        })
        .await
    }
}
