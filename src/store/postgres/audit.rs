//! The audit chain in PostgreSQL. Appends from every replica are serialized by a
//! transaction-level advisory lock, taken as late as possible and held until the commit, so
//! each append continues from the head the previous one committed: one chain, no forks. The
//! lock is a statement of its own: a statement's snapshot is taken when it starts, so a read
//! in the statement that waited for the lock could miss the head committed meanwhile.
//!
//! Every replica's writes wait for that lock, so what its holder does before the commit is
//! sent in as few round trips as the chain allows: the lock and the head's read together
//! (pipelined: two statements, executed one after the other), then the entries together with
//! the statements that close the change (its event).

use std::future::Future;

use async_trait::async_trait;
use deadpool_postgres::GenericClient;
use futures_util::future::try_join;
use tokio_postgres::Statement;

use super::{PostgresStore, Schema, col, db, from_ms, ms, prepared, rows};
use crate::audit::{self, Action, AuditEntry, AuditHead, AuditRecord};
use crate::store::prelude::*;
use crate::store::{AuditQuery, StoreError};

/// Appends `records` to the chain inside transaction `tx`, and moves the recorded head.
pub(super) async fn append(
    tx: &impl GenericClient,
    schema: &Schema,
    records: Vec<AuditRecord>,
) -> Result<(), StoreError> {
    append_then(tx, schema, records, async { Ok(()) }).await
}

/// Appends `records` to the chain inside transaction `tx`, moves the recorded head, and runs
/// `then` (statements on `tx` that must follow the append: the change's event) in the same
/// round trip as the entries. `then` sends its statements when first polled; it runs alone
/// when there is nothing to append.
pub(super) async fn append_then(
    tx: &impl GenericClient,
    schema: &Schema,
    records: Vec<AuditRecord>,
    then: impl Future<Output = Result<(), StoreError>>,
) -> Result<(), StoreError> {
    if records.is_empty() {
        return then.await;
    }
    let statements = Statements::prepare(tx, schema).await?;
    let (recorded, last) = statements.lock_and_read_head(tx, schema).await?;
    let Some(appended) = audit::append(last, recorded.as_deref(), records) else {
        return then.await;
    };
    let columns = Columns::of(&appended.entries);
    let new_head = appended.head.to_string();
    // One round trip: the entries, then what closes the change.
    let write = async {
        tx.execute(
            &statements.insert,
            &[
                &columns.seqs,
                &columns.ats,
                &columns.actions,
                &columns.ids,
                &columns.actors,
                &columns.channels,
                &columns.outcomes,
                &columns.input_hashes,
                &columns.details,
                &columns.prevs,
                &columns.hashes,
                &audit::HEAD_KEY,
                &new_head,
            ],
        )
        .await
        .map_err(db)
    };
    try_join(write, then).await?;
    Ok(())
}

/// The statements of an append, prepared first (once per connection), so that the pipelined
/// ones go out in order.
struct Statements {
    /// Takes the chain's advisory lock.
    lock: Statement,
    /// Reads the recorded head and the last entry.
    ends: Statement,
    /// Inserts the entries and records the new head.
    insert: Statement,
}

impl Statements {
    async fn prepare(tx: &impl GenericClient, schema: &Schema) -> Result<Self, StoreError> {
        let lock = prepared(tx, "SELECT pg_advisory_xact_lock($1)").await?;
        let ends = prepared(
            tx,
            &schema.sql(
                "SELECT (SELECT value FROM {s}.kv WHERE key = $1), a.seq, a.hash
             FROM (SELECT 1) one
             LEFT JOIN LATERAL (SELECT seq, hash FROM {s}.audit ORDER BY seq DESC LIMIT 1) a ON true",
            ),
        )
        .await?;
        let insert = prepared(
            tx,
            &schema.sql(
                "WITH entries AS (
                 INSERT INTO {s}.audit (seq, at, action, interaction_id, actor, channel, outcome,
                                        input_hash, detail, prev_hash, hash)
                 SELECT * FROM unnest($1::bigint[], $2::bigint[], $3::text[], $4::text[], $5::text[],
                                      $6::text[], $7::text[], $8::text[], $9::text[], $10::text[],
                                      $11::text[]))
             INSERT INTO {s}.kv (key, value) VALUES ($12, $13)
             ON CONFLICT (key) DO UPDATE SET value = excluded.value",
            ),
        )
        .await?;
        Ok(Self { lock, ends, insert })
    }

    /// Takes the chain's lock, then reads the recorded head and the last entry once it is
    /// held, in one round trip.
    async fn lock_and_read_head(
        &self,
        tx: &impl GenericClient,
        schema: &Schema,
    ) -> Result<(Option<String>, Option<AuditHead>), StoreError> {
        let (_, ends) = try_join(
            tx.execute(&self.lock, &[&schema.lock_key("audit")]),
            tx.query_opt(&self.ends, &[&audit::HEAD_KEY]),
        )
        .await
        .map_err(db)?;
        let Some(r) = ends else {
            return Ok((None, None));
        };
        let recorded: Option<String> = col(&r, 0)?;
        let seq: Option<i64> = col(&r, 1)?;
        let hash: Option<String> = col(&r, 2)?;
        Ok((
            recorded,
            seq.zip(hash).map(|(seq, hash)| AuditHead { seq, hash }),
        ))
    }
}

/// New entries as one array per column, as the insert's `unnest` takes them.
struct Columns<'e> {
    seqs: Vec<i64>,
    ats: Vec<i64>,
    actions: Vec<Option<&'e str>>,
    ids: Vec<Option<&'e str>>,
    actors: Vec<Option<&'e str>>,
    channels: Vec<Option<&'e str>>,
    outcomes: Vec<Option<&'e str>>,
    input_hashes: Vec<Option<&'e str>>,
    details: Vec<Option<&'e str>>,
    prevs: Vec<Option<&'e str>>,
    hashes: Vec<Option<&'e str>>,
}

impl<'e> Columns<'e> {
    fn of(entries: &'e [AuditEntry]) -> Self {
        let column = |f: for<'a> fn(&'a AuditEntry) -> Option<&'a str>| -> Vec<Option<&'e str>> {
            entries.iter().map(f).collect()
        };
        Self {
            seqs: entries.iter().map(|e| e.seq).collect(),
            ats: entries.iter().map(|e| ms(e.record.at)).collect(),
            actions: column(|e| Some(e.record.action.as_str())),
            ids: column(|e| e.record.interaction_id.as_deref()),
            actors: column(|e| e.record.actor.as_deref()),
            channels: column(|e| Some(e.record.channel.as_str())),
            outcomes: column(|e| Some(e.record.outcome.as_str())),
            input_hashes: column(|e| e.record.input_hash.as_deref()),
            details: column(|e| e.record.detail.as_deref()),
            prevs: column(|e| Some(e.prev_hash.as_str())),
            hashes: column(|e| Some(e.hash.as_str())),
        }
    }
}

fn parse_action(s: &str) -> Result<Action, StoreError> {
    serde_json::from_value(serde_json::Value::String(s.to_string()))
        .map_err(|e| StoreError::Corrupt(e.to_string()))
}

/// Audit entries, oldest first.
pub(super) async fn read(
    c: &impl GenericClient,
    schema: &Schema,
    q: &AuditQuery,
) -> Result<Vec<AuditEntry>, StoreError> {
    let since = q.since.map(ms).unwrap_or(i64::MIN);
    let limit = i64::try_from(q.limit).unwrap_or(i64::MAX);
    let sql = schema.sql(
        "SELECT seq, at, action, interaction_id, actor, channel, outcome, input_hash, detail,
                prev_hash, hash
         FROM {s}.audit WHERE seq > $1 AND at >= $2 ORDER BY seq LIMIT $3",
    );
    rows(c, &sql, &[&q.after_seq, &since, &limit])
        .await?
        .iter()
        .map(|r| {
            let action: String = col(r, 2)?;
            Ok(AuditEntry {
                seq: col(r, 0)?,
                record: AuditRecord {
                    at: from_ms(col(r, 1)?),
                    action: parse_action(&action)?,
                    interaction_id: col(r, 3)?,
                    actor: col(r, 4)?,
                    channel: col(r, 5)?,
                    outcome: col(r, 6)?,
                    input_hash: col(r, 7)?,
                    detail: col(r, 8)?,
                },
                prev_hash: col(r, 9)?,
                hash: col(r, 10)?,
            })
        })
        .collect()
}

#[async_trait]
impl AuditStore for PostgresStore {
    async fn append_audit(&self, records: Vec<AuditRecord>) -> Result<(), StoreError> {
        if records.is_empty() {
            return Ok(());
        }
        let mut client = self.client().await?;
        let tx = client.transaction().await.map_err(db)?;
        append(&tx, &self.schema, records).await?;
        tx.commit().await.map_err(db)
    }

    async fn audit(&self, query: &AuditQuery) -> Result<Vec<AuditEntry>, StoreError> {
        let client = self.client().await?;
        read(&client, &self.schema, query).await
    }
}
