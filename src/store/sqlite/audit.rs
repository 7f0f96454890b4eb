//! The audit chain in SQLite: appended in the state change's transaction, continuing from the
//! recorded head, and read back for `imrelay audit`.

use async_trait::async_trait;
use rusqlite::{Connection, OptionalExtension, params};
use serde_json::Value;

use super::{CachedRow, SqliteStore, corrupt, from_ms, ms, unavailable};
use crate::audit::{self, Action, AuditEntry, AuditHead, AuditRecord};
use crate::store::prelude::*;
use crate::store::{AuditQuery, StoreError};

/// The chain head recorded in `kv`, if any.
pub(super) fn recorded_head_value(conn: &Connection) -> Result<Option<String>, StoreError> {
    conn.cached_row(
        "SELECT value FROM kv WHERE key = ?1",
        [audit::HEAD_KEY],
        |r| r.get(0),
    )
    .optional()
    .map_err(unavailable)
}

pub(super) fn recorded_head(conn: &Connection) -> Result<Option<AuditHead>, StoreError> {
    recorded_head_value(conn)?
        .map(|v| v.parse().map_err(StoreError::Corrupt))
        .transpose()
}

pub(super) fn append_audit_in(
    conn: &Connection,
    records: Vec<AuditRecord>,
) -> Result<(), StoreError> {
    if records.is_empty() {
        return Ok(());
    }
    let last = conn
        .cached_row(
            "SELECT seq, hash FROM audit ORDER BY seq DESC LIMIT 1",
            [],
            |r| {
                Ok(AuditHead {
                    seq: r.get(0)?,
                    hash: r.get(1)?,
                })
            },
        )
        .optional()
        .map_err(unavailable)?;
    let recorded = recorded_head_value(conn)?;
    let Some(appended) = audit::append(last, recorded.as_deref(), records) else {
        return Ok(());
    };
    let mut stmt = conn
        .prepare_cached(
            "INSERT INTO audit (seq, at, action, interaction_id, actor, channel, outcome, input_hash, detail, prev_hash, hash)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)",
        )
        .map_err(unavailable)?;
    for e in &appended.entries {
        let r = &e.record;
        stmt.execute(params![
            e.seq,
            ms(r.at),
            r.action.as_str(),
            r.interaction_id,
            r.actor,
            r.channel,
            r.outcome,
            r.input_hash,
            r.detail,
            e.prev_hash,
            e.hash
        ])
        .map_err(unavailable)?;
    }
    conn.prepare_cached(
        "INSERT INTO kv (key, value) VALUES (?1, ?2)
         ON CONFLICT (key) DO UPDATE SET value = excluded.value",
    )
    .and_then(|mut s| s.execute(params![audit::HEAD_KEY, appended.head.to_string()]))
    .map_err(unavailable)?;
    Ok(())
}

pub(super) fn parse_action(s: &str) -> Result<Action, StoreError> {
    serde_json::from_value(Value::String(s.to_string())).map_err(corrupt)
}

/// Reads audit entries, oldest first, from any connection to an imrelay database (the
/// server's, or a read-only one opened by the `imrelay audit` command).
pub fn read_audit(conn: &Connection, q: &AuditQuery) -> Result<Vec<AuditEntry>, StoreError> {
    let since = q.since.map(ms).unwrap_or(i64::MIN);
    let mut stmt = conn
        .prepare_cached(
            "SELECT seq, at, action, interaction_id, actor, channel, outcome, input_hash, detail, prev_hash, hash
             FROM audit WHERE seq > ?1 AND at >= ?2 ORDER BY seq LIMIT ?3",
        )
        .map_err(unavailable)?;
    let rows = stmt
        .query_map(params![q.after_seq, since, q.limit as i64], |r| {
            Ok((
                r.get::<_, i64>(0)?,
                r.get::<_, i64>(1)?,
                r.get::<_, String>(2)?,
                r.get::<_, Option<String>>(3)?,
                r.get::<_, Option<String>>(4)?,
                r.get::<_, String>(5)?,
                r.get::<_, String>(6)?,
                r.get::<_, Option<String>>(7)?,
                r.get::<_, Option<String>>(8)?,
                r.get::<_, String>(9)?,
                r.get::<_, String>(10)?,
            ))
        })
        .map_err(unavailable)?;
    let mut out = Vec::new();
    for row in rows {
        let (
            seq,
            at,
            action,
            interaction_id,
            actor,
            channel,
            outcome,
            input_hash,
            detail,
            prev_hash,
            hash,
        ) = row.map_err(unavailable)?;
        out.push(AuditEntry {
            seq,
            record: AuditRecord {
                at: from_ms(at),
                action: parse_action(&action)?,
                interaction_id,
                actor,
                channel,
                outcome,
                input_hash,
                detail,
            },
            prev_hash,
            hash,
        });
    }
    Ok(out)
}

/// The audit chain head recorded with the last append, from any connection to an imrelay
/// database.
pub fn read_audit_head(conn: &Connection) -> Result<Option<AuditHead>, StoreError> {
    recorded_head(conn)
}

/// Stored interactions that have no `created` audit entry (at their creation time): how many,
/// and the ids of up to `sample` of them.
pub fn interactions_without_created_entry(
    conn: &Connection,
    sample: usize,
) -> Result<(u64, Vec<String>), StoreError> {
    let mut stmt = conn
        .prepare(
            "SELECT id FROM interactions i WHERE NOT EXISTS (
                 SELECT 1 FROM audit a
                 WHERE a.interaction_id = i.id AND a.action = 'created' AND a.at = i.created_at)
             ORDER BY created_at, id",
        )
        .map_err(unavailable)?;
    let rows = stmt
        .query_map([], |r| r.get::<_, String>(0))
        .map_err(unavailable)?;
    let (mut count, mut ids) = (0u64, Vec::new());
    for row in rows {
        let id = row.map_err(unavailable)?;
        count += 1;
        if ids.len() < sample {
            ids.push(id);
        }
    }
    Ok((count, ids))
}

#[async_trait]
impl AuditStore for SqliteStore {
    async fn append_audit(&self, records: Vec<AuditRecord>) -> Result<(), StoreError> {
        self.write(move |conn| append_audit_in(conn, records)).await
    }

    async fn audit(&self, query: &AuditQuery) -> Result<Vec<AuditEntry>, StoreError> {
        let q = query.clone();
        self.read(move |conn| read_audit(conn, &q)).await
    }
}
