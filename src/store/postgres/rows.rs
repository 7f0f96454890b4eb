//! An interaction's row read back: its `doc` and `resolution` columns decoded.

use std::sync::Arc;

use deadpool_postgres::GenericClient;
use tokio_postgres::Row;
use tokio_postgres::types::Json;

use super::{Schema, col, row};
use crate::interaction::{Interaction, Resolution};
use crate::store::StoreError;

/// An interaction from its `doc` and `resolution` columns (at `idx` and `idx + 1`).
pub(super) fn decode(row: &Row, idx: usize) -> Result<Arc<Interaction>, StoreError> {
    let Json(mut i): Json<Interaction> = col(row, idx)?;
    let resolution: Option<Json<Resolution>> = col(row, idx + 1)?;
    i.resolution = resolution.map(|Json(r)| Box::new(r));
    Ok(Arc::new(i))
}

/// The interaction `id` as `c` sees it.
pub(super) async fn get_in(
    c: &impl GenericClient,
    schema: &Schema,
    id: &str,
) -> Result<Option<Arc<Interaction>>, StoreError> {
    let sql = schema.sql("SELECT doc, resolution FROM {s}.interactions WHERE id = $1");
    row(c, &sql, &[&id])
        .await?
        .map(|r| decode(&r, 0))
        .transpose()
}
