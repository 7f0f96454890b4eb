//! The cluster's lifecycle events in PostgreSQL: every create and resolution appends one, in
//! the same transaction, with an id from a sequence taken under a transaction-level advisory
//! lock held until the commit. Ids are thus given in commit order, so a reader following
//! `id > last` never skips an event that commits later with a lower id.

use std::sync::Arc;

use deadpool_postgres::GenericClient;
use tokio_postgres::types::Json;

use super::{Schema, col, decode, exec, row, rows};
use crate::interaction::{EventKind, Interaction};
use crate::store::{StoreError, StoredEvent};

fn kind_name(kind: EventKind) -> &'static str {
    match kind {
        EventKind::Created => "created",
        EventKind::Resolved => "resolved",
    }
}

/// Appends the event `kind` of `interaction` inside transaction `tx`. Call it last before
/// the commit: the lock it takes orders every replica's commits until then.
pub(super) async fn append(
    tx: &impl GenericClient,
    schema: &Schema,
    kind: EventKind,
    interaction: &Interaction,
    at: i64,
) -> Result<(), StoreError> {
    exec(
        tx,
        "SELECT pg_advisory_xact_lock($1)",
        &[&schema.lock_key("events")],
    )
    .await?;
    let doc = Interaction {
        resolution: None,
        ..interaction.clone()
    };
    let resolution = interaction.resolution.as_deref().map(Json);
    exec(
        tx,
        &schema.sql(
            "INSERT INTO {s}.events (id, at, kind, interaction_id, doc, resolution)
             VALUES (nextval('{s}.event_ids'), $1, $2, $3, $4, $5)",
        ),
        &[
            &at,
            &kind_name(kind),
            &interaction.id.as_str(),
            &Json(&doc),
            &resolution,
        ],
    )
    .await?;
    Ok(())
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
