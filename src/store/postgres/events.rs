//! The cluster's lifecycle events in PostgreSQL: every create and resolution appends one, in
//! the same transaction, with an id from a sequence taken under a transaction-level advisory
//! lock held until the commit. Ids are thus given in commit order, so a reader following
//! `id > last` never skips an event that commits later with a lower id.

use std::sync::Arc;

use deadpool_postgres::GenericClient;
use futures_util::future::try_join;
use tokio_postgres::Statement;
use tokio_postgres::types::Json;

use super::{Schema, col, db, decode, exec, prepared, row, rows};
use crate::interaction::{EventKind, Interaction};
use crate::store::{StoreError, StoredEvent};

fn kind_name(kind: EventKind) -> &'static str {
    match kind {
        EventKind::Created => "created",
        EventKind::Resolved => "resolved",
    }
}

/// The statements that append an event, prepared (once per connection) before any lock is
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
                     VALUES (nextval('{s}.event_ids'), $1, $2, $3, $4, $5)",
                ),
            )
            .await?,
            lock_key: schema.lock_key("events"),
        })
    }

    /// Appends the event `kind` of `interaction` inside transaction `tx`. Call it last
    /// before the commit: the lock it takes orders every replica's commits until then. The
    /// lock and the insert go out together (one round trip; the insert, a statement of its
    /// own, takes its id once the lock is held).
    pub(super) async fn append(
        &self,
        tx: &impl GenericClient,
        kind: EventKind,
        interaction: &Interaction,
        at: i64,
    ) -> Result<(), StoreError> {
        let doc = Interaction {
            resolution: None,
            ..interaction.clone()
        };
        let resolution = interaction.resolution.as_deref().map(Json);
        try_join(
            tx.execute(&self.lock, &[&self.lock_key]),
            tx.execute(
                &self.insert,
                &[
                    &at,
                    &kind_name(kind),
                    &interaction.id.as_str(),
                    &Json(&doc),
                    &resolution,
                ],
            ),
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
