//! The outbox in SQLite: jobs recorded with the change that needs them, claimed under leases
//! by channel quota, finished or rescheduled.

use std::time::Duration;

use async_trait::async_trait;
use jiff::Timestamp;
use rusqlite::{Connection, params};

use super::{SqliteStore, append_audit_in, corrupt, from_ms, ms, unavailable};
use crate::audit::AuditRecord;
use crate::interaction::InteractionId;
use crate::store::prelude::*;
use crate::store::{ClaimQuota, ClaimedJob, JobUpdate, OutboxJob, StoreError};

pub(super) struct EncodedJob {
    key: String,
    channel: String,
    kind: String,
    interaction_id: Option<String>,
    payload: String,
    next_at: i64,
    horizon_at: i64,
}

pub(super) fn encode_jobs(jobs: Vec<OutboxJob>) -> Vec<EncodedJob> {
    jobs.into_iter()
        .map(|j| EncodedJob {
            payload: j.payload.to_string(),
            key: j.key,
            channel: j.channel,
            kind: j.kind,
            interaction_id: j.interaction_id.map(|i| i.as_str().to_string()),
            next_at: ms(j.not_before),
            horizon_at: ms(j.horizon),
        })
        .collect()
}

pub(super) fn insert_jobs(
    conn: &Connection,
    jobs: &[EncodedJob],
    now: i64,
) -> rusqlite::Result<()> {
    if jobs.is_empty() {
        return Ok(());
    }
    let mut stmt = conn.prepare_cached(
        "INSERT INTO outbox (key, channel, kind, interaction_id, payload, next_at, horizon_at, created_at, updated_at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?8)
         ON CONFLICT (key) DO NOTHING",
    )?;
    for j in jobs {
        stmt.execute(params![
            j.key,
            j.channel,
            j.kind,
            j.interaction_id,
            j.payload,
            j.next_at,
            j.horizon_at,
            now
        ])?;
    }
    Ok(())
}

/// Channels with unfinished outbox jobs (a few index seeks, however long the queue).
pub(super) fn pending_channels(conn: &Connection) -> Result<Vec<String>, StoreError> {
    let mut stmt = conn
        .prepare_cached(
            "WITH RECURSIVE ch(c) AS (
                 SELECT (SELECT MIN(channel) FROM outbox WHERE state = 'pending')
                 UNION ALL
                 SELECT (SELECT MIN(channel) FROM outbox WHERE state = 'pending' AND channel > ch.c)
                 FROM ch WHERE ch.c IS NOT NULL)
             SELECT c FROM ch WHERE c IS NOT NULL",
        )
        .map_err(unavailable)?;
    let rows = stmt
        .query_map([], |r| r.get::<_, String>(0))
        .map_err(unavailable)?;
    rows.collect::<rusqlite::Result<Vec<_>>>()
        .map_err(unavailable)
}

/// The channels a claim under `quota` may take jobs of, with how many each.
pub(super) fn quota_channels(
    conn: &Connection,
    quota: &ClaimQuota,
) -> Result<Vec<(String, usize)>, StoreError> {
    let pending = if quota.others > 0 {
        pending_channels(conn)?
    } else {
        Vec::new()
    };
    Ok(quota.claimable(pending))
}

#[async_trait]
impl OutboxStore for SqliteStore {
    async fn enqueue(&self, jobs: Vec<OutboxJob>) -> Result<(), StoreError> {
        let jobs = encode_jobs(jobs);
        let now = ms(Timestamp::now());
        self.write(move |conn| insert_jobs(conn, &jobs, now).map_err(unavailable))
            .await
    }

    async fn claim_jobs(
        &self,
        now: Timestamp,
        quota: &ClaimQuota,
        lease: Duration,
    ) -> Result<Vec<ClaimedJob>, StoreError> {
        let now = ms(now);
        let until = now.saturating_add(lease.as_millis() as i64);
        let quota = quota.clone();
        self.write(move |conn| {
            let mut stmt = conn
                .prepare_cached(
                    "UPDATE outbox SET lease_until = ?2, lease_token = lease_token + 1
                     WHERE id IN (
                         SELECT id FROM outbox
                         WHERE state = 'pending' AND channel = ?4 AND next_at <= ?1
                           AND (lease_until IS NULL OR lease_until <= ?1)
                         ORDER BY next_at, id LIMIT ?3)
                     RETURNING id, lease_token, attempts, key, channel, kind, interaction_id, payload,
                               next_at, horizon_at",
                )
                .map_err(unavailable)?;
            let mut out = Vec::new();
            for (channel, limit) in quota_channels(conn, &quota)? {
                let rows = stmt
                    .query_map(params![now, until, limit as i64, channel], |r| {
                        Ok((
                            (r.get::<_, i64>(0)?, r.get::<_, i64>(1)?, r.get::<_, i64>(2)?),
                            r.get::<_, String>(3)?,
                            r.get::<_, String>(4)?,
                            r.get::<_, String>(5)?,
                            r.get::<_, Option<String>>(6)?,
                            r.get::<_, String>(7)?,
                            r.get::<_, i64>(8)?,
                            r.get::<_, i64>(9)?,
                        ))
                    })
                    .map_err(unavailable)?;
                for row in rows {
                    let ((id, lease, attempts), key, channel, kind, iid, payload, next_at, horizon) =
                        row.map_err(unavailable)?;
                    out.push(ClaimedJob {
                        id,
                        lease,
                        attempts: attempts.max(0) as u32,
                        job: OutboxJob {
                            key,
                            channel,
                            kind,
                            interaction_id: match iid {
                                Some(s) => Some(InteractionId::stored(&s).map_err(corrupt)?),
                                None => None,
                            },
                            payload: serde_json::from_str(&payload).map_err(corrupt)?,
                            not_before: from_ms(next_at),
                            horizon: from_ms(horizon),
                        },
                    });
                }
            }
            out.sort_by_key(|j| (j.job.not_before, j.id));
            Ok(out)
        })
        .await
    }

    async fn finish_job(
        &self,
        job: &ClaimedJob,
        update: JobUpdate,
        audit: Vec<AuditRecord>,
    ) -> Result<bool, StoreError> {
        let now = ms(Timestamp::now());
        let (id, lease) = (job.id, job.lease);
        self.write(move |conn| {
            // Only the newest claim of a still unfinished job records its result.
            let n = match update {
                JobUpdate::Done => conn.execute(
                    "UPDATE outbox SET state = 'done', attempts = attempts + 1, lease_until = NULL,
                     last_error = NULL, updated_at = ?3
                     WHERE id = ?1 AND lease_token = ?2 AND state = 'pending'",
                    params![id, lease, now],
                ),
                JobUpdate::Retry { at, error } => conn.execute(
                    "UPDATE outbox SET attempts = attempts + 1, lease_until = NULL, next_at = ?4,
                     last_error = ?5, updated_at = ?3
                     WHERE id = ?1 AND lease_token = ?2 AND state = 'pending'",
                    params![id, lease, now, ms(at), error],
                ),
                JobUpdate::Failed { error } => conn.execute(
                    "UPDATE outbox SET state = 'failed', attempts = attempts + 1, lease_until = NULL,
                     last_error = ?4, updated_at = ?3
                     WHERE id = ?1 AND lease_token = ?2 AND state = 'pending'",
                    params![id, lease, now, error],
                ),
            }
            .map_err(unavailable)?;
            if n == 0 {
                return Ok(false);
            }
            append_audit_in(conn, audit)?;
            Ok(true)
        })
        .await
    }

    async fn next_job_at(&self, quota: &ClaimQuota) -> Result<Option<Timestamp>, StoreError> {
        let quota = quota.clone();
        self.read(move |conn| {
            // Per channel: the earliest unleased job (an index seek), and the leased ones
            // (few: those in flight), which come back when their lease runs out.
            let mut stmt = conn
                .prepare_cached(
                    "SELECT MIN(t) FROM (
                         SELECT (SELECT next_at FROM outbox
                                 WHERE state = 'pending' AND channel = ?1 AND lease_until IS NULL
                                 ORDER BY next_at LIMIT 1) AS t
                         UNION ALL
                         SELECT MIN(MAX(next_at, lease_until)) FROM outbox
                         WHERE state = 'pending' AND channel = ?1 AND lease_until IS NOT NULL)",
                )
                .map_err(unavailable)?;
            let mut next: Option<i64> = None;
            for (channel, _) in quota_channels(conn, &quota)? {
                let t: Option<i64> = stmt
                    .query_row([&channel], |r| r.get(0))
                    .map_err(unavailable)?;
                next = match (next, t) {
                    (Some(a), Some(b)) => Some(a.min(b)),
                    (a, b) => a.or(b),
                };
            }
            Ok(next.map(from_ms))
        })
        .await
    }

    async fn job_backlog(&self) -> Result<Vec<(String, u64)>, StoreError> {
        self.read(|conn| {
            let mut stmt = conn
                .prepare_cached(
                    "SELECT channel, COUNT(*) FROM outbox WHERE state = 'pending'
                     GROUP BY channel ORDER BY channel",
                )
                .map_err(unavailable)?;
            let rows = stmt
                .query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, i64>(1)?)))
                .map_err(unavailable)?;
            let mut out = Vec::new();
            for row in rows {
                let (c, n) = row.map_err(unavailable)?;
                out.push((c, n.max(0) as u64));
            }
            Ok(out)
        })
        .await
    }
}
