//! The outbox in PostgreSQL: jobs recorded with the state change that plans them, claimed
//! with a lease by `FOR UPDATE SKIP LOCKED` (so replicas never take the same job, and never
//! wait for each other's claims), and finished only by the newest claim (the lease token
//! fences a claimant whose lease ran out).

use std::time::Duration;

use async_trait::async_trait;
use deadpool_postgres::GenericClient;
use jiff::Timestamp;
use tokio_postgres::types::Json;

use super::{PostgresStore, Schema, audit, col, db, exec, from_ms, ms, rows};
use crate::audit::AuditRecord;
use crate::interaction::InteractionId;
use crate::store::prelude::*;
use crate::store::{ClaimQuota, ClaimedJob, JobUpdate, OutboxJob, StoreError};

/// Records `jobs` (one statement, whatever their number); a key already present is skipped.
pub(super) async fn insert(
    c: &impl GenericClient,
    schema: &Schema,
    jobs: &[OutboxJob],
    now: i64,
) -> Result<(), StoreError> {
    let jobs: Vec<(&OutboxJob, i64)> = jobs.iter().map(|j| (j, now)).collect();
    insert_at(c, schema, &jobs).await
}

/// Records `jobs`, each with the time it was planned at (unix ms), in one statement; a key
/// already present (or earlier in `jobs`) is skipped.
pub(super) async fn insert_at(
    c: &impl GenericClient,
    schema: &Schema,
    jobs: &[(&OutboxJob, i64)],
) -> Result<(), StoreError> {
    if jobs.is_empty() {
        return Ok(());
    }
    let keys: Vec<&str> = jobs.iter().map(|(j, _)| j.key.as_str()).collect();
    let channels: Vec<&str> = jobs.iter().map(|(j, _)| j.channel.as_str()).collect();
    let kinds: Vec<&str> = jobs.iter().map(|(j, _)| j.kind.as_str()).collect();
    let ids: Vec<Option<&str>> = jobs
        .iter()
        .map(|(j, _)| j.interaction_id.as_ref().map(InteractionId::as_str))
        .collect();
    let payloads: Vec<Json<&serde_json::Value>> =
        jobs.iter().map(|(j, _)| Json(&j.payload)).collect();
    let next: Vec<i64> = jobs.iter().map(|(j, _)| ms(j.not_before)).collect();
    let horizons: Vec<i64> = jobs.iter().map(|(j, _)| ms(j.horizon)).collect();
    let nows: Vec<i64> = jobs.iter().map(|(_, at)| *at).collect();
    let sql = schema.sql(
        "INSERT INTO {s}.outbox
             (key, channel, kind, interaction_id, payload, next_at, horizon_at, created_at, updated_at)
         SELECT k, c, kd, i, p, n, h, t, t
         FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::json[], $6::bigint[],
                     $7::bigint[], $8::bigint[]) AS j(k, c, kd, i, p, n, h, t)
         ON CONFLICT (key) DO NOTHING",
    );
    exec(
        c,
        &sql,
        &[
            &keys, &channels, &kinds, &ids, &payloads, &next, &horizons, &nows,
        ],
    )
    .await?;
    Ok(())
}

/// Channels with unfinished jobs (a few index seeks, however long the queue).
async fn pending_channels(
    c: &impl GenericClient,
    schema: &Schema,
) -> Result<Vec<String>, StoreError> {
    let sql = schema.sql(
        "WITH RECURSIVE ch(c) AS (
             SELECT (SELECT min(channel) FROM {s}.outbox WHERE state = 'pending')
             UNION ALL
             SELECT (SELECT min(channel) FROM {s}.outbox WHERE state = 'pending' AND channel > ch.c)
             FROM ch WHERE ch.c IS NOT NULL)
         SELECT c FROM ch WHERE c IS NOT NULL",
    );
    rows(c, &sql, &[])
        .await?
        .iter()
        .map(|r| col(r, 0))
        .collect()
}

/// The channels a claim under `quota` may take jobs of, with how many each.
async fn quota_channels(
    c: &impl GenericClient,
    schema: &Schema,
    quota: &ClaimQuota,
) -> Result<(Vec<String>, Vec<i64>), StoreError> {
    let pending = if quota.others > 0 {
        pending_channels(c, schema).await?
    } else {
        Vec::new()
    };
    let listed = quota.claimable(pending);
    Ok(listed
        .into_iter()
        .map(|(ch, n)| (ch, i64::try_from(n).unwrap_or(i64::MAX)))
        .unzip())
}

/// Claims due jobs for `lease`, as many per channel as `quota` allows, in one statement.
pub(super) async fn claim(
    c: &impl GenericClient,
    schema: &Schema,
    now: i64,
    quota: &ClaimQuota,
    lease: Duration,
) -> Result<Vec<ClaimedJob>, StoreError> {
    let (channels, limits) = quota_channels(c, schema, quota).await?;
    if channels.is_empty() {
        return Ok(Vec::new());
    }
    let until = now.saturating_add(i64::try_from(lease.as_millis()).unwrap_or(i64::MAX));
    let sql = schema.sql(
        "UPDATE {s}.outbox o SET lease_until = $2, lease_token = o.lease_token + 1
         FROM (SELECT j.id FROM unnest($3::text[], $4::bigint[]) AS q(channel, lim)
               CROSS JOIN LATERAL (
                   SELECT id FROM {s}.outbox
                   WHERE state = 'pending' AND channel = q.channel AND next_at <= $1
                     AND (lease_until IS NULL OR lease_until <= $1)
                   ORDER BY next_at, id LIMIT q.lim
                   FOR UPDATE SKIP LOCKED) j) due
         WHERE o.id = due.id
         RETURNING o.id, o.lease_token, o.attempts, o.key, o.channel, o.kind, o.interaction_id,
                   o.payload, o.next_at, o.horizon_at",
    );
    let mut out = rows(c, &sql, &[&now, &until, &channels, &limits])
        .await?
        .iter()
        .map(|r| {
            let attempts: i32 = col(r, 2)?;
            let id: Option<String> = col(r, 6)?;
            let Json(payload) = col(r, 7)?;
            Ok(ClaimedJob {
                id: col(r, 0)?,
                lease: col(r, 1)?,
                attempts: attempts.max(0) as u32,
                job: OutboxJob {
                    key: col(r, 3)?,
                    channel: col(r, 4)?,
                    kind: col(r, 5)?,
                    interaction_id: id
                        .map(|s| InteractionId::parse(&s))
                        .transpose()
                        .map_err(super::corrupt)?,
                    payload,
                    not_before: from_ms(col(r, 8)?),
                    horizon: from_ms(col(r, 9)?),
                },
            })
        })
        .collect::<Result<Vec<_>, StoreError>>()?;
    out.sort_by_key(|j| (j.job.not_before, j.id));
    Ok(out)
}

/// Records how the claim `job` ended, if it is still the job's newest claim and the job is
/// unfinished; `false` (nothing changed) otherwise.
pub(super) async fn finish(
    c: &impl GenericClient,
    schema: &Schema,
    job: &ClaimedJob,
    update: JobUpdate,
    now: i64,
) -> Result<bool, StoreError> {
    let fence = "id = $1 AND lease_token = $2 AND state = 'pending'";
    let n = match update {
        JobUpdate::Done => {
            exec(
                c,
                &schema.sql(&format!(
                    "UPDATE {{s}}.outbox SET state = 'done', attempts = attempts + 1,
                     lease_until = NULL, last_error = NULL, updated_at = $3 WHERE {fence}"
                )),
                &[&job.id, &job.lease, &now],
            )
            .await?
        }
        JobUpdate::Retry { at, error } => {
            exec(
                c,
                &schema.sql(&format!(
                    "UPDATE {{s}}.outbox SET attempts = attempts + 1, lease_until = NULL,
                     next_at = $4, last_error = $5, updated_at = $3 WHERE {fence}"
                )),
                &[&job.id, &job.lease, &now, &ms(at), &error],
            )
            .await?
        }
        JobUpdate::Failed { error } => {
            exec(
                c,
                &schema.sql(&format!(
                    "UPDATE {{s}}.outbox SET state = 'failed', attempts = attempts + 1,
                     lease_until = NULL, last_error = $4, updated_at = $3 WHERE {fence}"
                )),
                &[&job.id, &job.lease, &now, &error],
            )
            .await?
        }
    };
    Ok(n == 1)
}

/// When the earliest unfinished job `quota` lets a claim take can next be claimed.
pub(super) async fn next_at(
    c: &impl GenericClient,
    schema: &Schema,
    quota: &ClaimQuota,
) -> Result<Option<jiff::Timestamp>, StoreError> {
    let (channels, _) = quota_channels(c, schema, quota).await?;
    if channels.is_empty() {
        return Ok(None);
    }
    // Per channel: the earliest unleased job (an index seek), and the leased ones (few:
    // those in flight), which come back when their lease runs out.
    let sql = schema.sql(
        "SELECT min(least(
             (SELECT next_at FROM {s}.outbox
              WHERE state = 'pending' AND channel = q.channel AND lease_until IS NULL
              ORDER BY next_at LIMIT 1),
             (SELECT min(greatest(next_at, lease_until)) FROM {s}.outbox
              WHERE state = 'pending' AND channel = q.channel AND lease_until IS NOT NULL)))
         FROM unnest($1::text[]) AS q(channel)",
    );
    let found = rows(c, &sql, &[&channels]).await?;
    let next: Option<i64> = match found.first() {
        Some(r) => col(r, 0)?,
        None => None,
    };
    Ok(next.map(from_ms))
}

/// Unfinished jobs by channel.
pub(super) async fn backlog(
    c: &impl GenericClient,
    schema: &Schema,
) -> Result<Vec<(String, u64)>, StoreError> {
    let sql = schema.sql(
        "SELECT channel, count(*) FROM {s}.outbox WHERE state = 'pending'
         GROUP BY channel ORDER BY channel",
    );
    rows(c, &sql, &[])
        .await?
        .iter()
        .map(|r| {
            let n: i64 = col(r, 1)?;
            Ok((col(r, 0)?, n.max(0) as u64))
        })
        .collect()
}

#[async_trait]
impl OutboxStore for PostgresStore {
    async fn enqueue(&self, jobs: Vec<OutboxJob>) -> Result<(), StoreError> {
        let client = self.client().await?;
        insert(&client, &self.schema, &jobs, ms(Timestamp::now())).await
    }

    async fn claim_jobs(
        &self,
        now: Timestamp,
        quota: &ClaimQuota,
        lease: Duration,
    ) -> Result<Vec<ClaimedJob>, StoreError> {
        let client = self.client().await?;
        claim(&client, &self.schema, ms(now), quota, lease).await
    }

    async fn finish_job(
        &self,
        job: &ClaimedJob,
        update: JobUpdate,
        audit: Vec<AuditRecord>,
    ) -> Result<bool, StoreError> {
        let mut client = self.client().await?;
        let tx = client.transaction().await.map_err(db)?;
        if !finish(&tx, &self.schema, job, update, ms(Timestamp::now())).await? {
            return Ok(false);
        }
        audit::append(&tx, &self.schema, audit).await?;
        tx.commit().await.map_err(db)?;
        Ok(true)
    }

    async fn next_job_at(&self, quota: &ClaimQuota) -> Result<Option<Timestamp>, StoreError> {
        let client = self.client().await?;
        next_at(&client, &self.schema, quota).await
    }

    async fn job_backlog(&self) -> Result<Vec<(String, u64)>, StoreError> {
        let client = self.client().await?;
        backlog(&client, &self.schema).await
    }
}
