//! The cluster's lifecycle events in PostgreSQL: every create and resolution appends one, in
//! the same transaction (a group of them, in one statement), with an id from a sequence taken
//! under a transaction-level advisory lock held until the commit. Ids are thus given in commit
//! order, so a reader following `id > last` never skips an event that commits later with a
//! lower id.

use std::sync::Arc;

use deadpool_postgres::GenericClient;
use futures_util::future::try_join;
use tokio_postgres::Statement;
use tokio_postgres::types::Json;

use super::{Schema, col, db, decode, exec, prepared, row, rows};
use crate::interaction::{EventKind, Interaction, Resolution};
use crate::store::{StoreError, StoredEvent};

fn kind_name(kind: EventKind) -> &'static str {
    match kind {
        EventKind::Created => "created",
        EventKind::Resolved => "resolved",
        EventKind::Voted => "voted",
    }
}

/// An event to append: what happened to which interaction, and when (unix ms).
pub(super) struct New<'a> {
    pub(super) kind: EventKind,
    pub(super) id: &'a str,
    /// The interaction without its resolution.
    pub(super) doc: &'a Interaction,
    pub(super) resolution: Option<&'a Resolution>,
    pub(super) at: i64,
}

/// The statements that append events, prepared (once per connection) before any lock is
/// taken, so that the lock holder only sends them.
pub(super) struct Appender {
    lock: Statement,
    insert: Statement,
    lock_key: i64,
}

impl Appender {
    pub(super) async fn prepare(
        tx: &impl GenericClient,
        schema: &Schema,
    ) -> Result<Self, StoreError> {
        Ok(Self {
            lock: prepared(tx, "SELECT pg_advisory_xact_lock($1)").await?,
            insert: prepared(
                tx,
                &schema.sql(
                    "INSERT INTO {s}.events (id, at, kind, interaction_id, doc, resolution)
                     SELECT nextval('{s}.event_ids'), e.at, e.kind, e.id, e.doc, e.res
                     FROM unnest($1::bigint[], $2::text[], $3::text[], $4::json[], $5::json[])
                          WITH ORDINALITY AS e(at, kind, id, doc, res, n)
                     ORDER BY e.n",
                ),
            )
            .await?,
            lock_key: schema.lock_key("events"),
        })
    }

    /// Appends `events` (in their order) inside transaction `tx`. Call it last before the
    /// commit: the lock it takes orders every replica's commits until then. The lock and the
    /// insert go out together (one round trip; the insert, a statement of its own, takes its
    /// ids once the lock is held).
    pub(super) async fn append(
        &self,
        tx: &impl GenericClient,
        events: &[New<'_>],
    ) -> Result<(), StoreError> {
        if events.is_empty() {
            return Ok(());
        }
        let ats: Vec<i64> = events.iter().map(|e| e.at).collect();
        let kinds: Vec<&str> = events.iter().map(|e| kind_name(e.kind)).collect();
        let ids: Vec<&str> = events.iter().map(|e| e.id).collect();
        let docs: Vec<Json<&Interaction>> = events.iter().map(|e| Json(e.doc)).collect();
        let resolutions: Vec<Option<Json<&Resolution>>> =
            events.iter().map(|e| e.resolution.map(Json)).collect();
        try_join(
            tx.execute(&self.lock, &[&self.lock_key]),
            tx.execute(&self.insert, &[&ats, &kinds, &ids, &docs, &resolutions]),
        )
        .await
        .map_err(db)?;
        Ok(())
    }
}

/// Events after id `after`, oldest first, at most `limit`.
pub(super) async fn after(
    c: &impl GenericClient,
    schema: &Schema,
    after: u64,
    limit: usize,
) -> Result<Vec<StoredEvent>, StoreError> {
    let after = i64::try_from(after).unwrap_or(i64::MAX);
    let limit = i64::try_from(limit).unwrap_or(i64::MAX);
    let sql = schema
        .sql("SELECT id, kind, doc, resolution FROM {s}.events WHERE id > $1 ORDER BY id LIMIT $2");
    rows(c, &sql, &[&after, &limit])
        .await?
        .iter()
        .map(|r| {
            let id: i64 = col(r, 0)?;
            let kind: String = col(r, 1)?;
            let kind = match kind.as_str() {
                "created" => EventKind::Created,
                "resolved" => EventKind::Resolved,
                "voted" => EventKind::Voted,
                other => {
                    return Err(StoreError::Corrupt(format!(
                        "an event of unknown kind {:?}",
                        other.escape_debug().to_string()
                    )));
                }
            };
            let interaction: Arc<Interaction> = decode(r, 2)?;
            Ok(StoredEvent {
                id: u64::try_from(id).unwrap_or(0),
                kind,
                interaction,
            })
        })
        .collect()
}

/// The newest event's id (0 before the first).
pub(super) async fn head(c: &impl GenericClient, schema: &Schema) -> Result<u64, StoreError> {
    let sql = schema.sql("SELECT coalesce(max(id), 0) FROM {s}.events");
    let id: i64 = match row(c, &sql, &[]).await? {
        Some(r) => col(&r, 0)?,
        None => 0,
    };
    Ok(u64::try_from(id).unwrap_or(0))
}

/// Deletes events from before `cutoff` (unix milliseconds).
pub(super) async fn prune(
    c: &impl GenericClient,
    schema: &Schema,
    cutoff: i64,
) -> Result<(), StoreError> {
    exec(
        c,
        &schema.sql("DELETE FROM {s}.events WHERE at < $1"),
        &[&cutoff],
    )
    .await?;
    Ok(())
}
