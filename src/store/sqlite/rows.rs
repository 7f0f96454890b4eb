//! An interaction's row read back: its `doc` and `resolution` columns decoded.

use std::sync::Arc;

use rusqlite::{Connection, OptionalExtension};

use super::{CachedRow, corrupt, unavailable};
use crate::interaction::{Interaction, Resolution};
use crate::store::StoreError;

pub(super) fn decode(doc: &str, resolution: Option<&str>) -> Result<Interaction, StoreError> {
    let mut i: Interaction = serde_json::from_str(doc).map_err(corrupt)?;
    i.resolution = match resolution {
        Some(r) => Some(Box::new(
            serde_json::from_str::<Resolution>(r).map_err(corrupt)?,
        )),
        None => None,
    };
    Ok(i)
}

pub(super) fn read_interaction(
    row: &rusqlite::Row<'_>,
) -> rusqlite::Result<(String, Option<String>)> {
    Ok((row.get(0)?, row.get(1)?))
}

pub(super) fn get_in(conn: &Connection, id: &str) -> Result<Option<Arc<Interaction>>, StoreError> {
    let row = conn
        .cached_row(
            "SELECT doc, resolution FROM interactions WHERE id = ?1",
            [id],
            read_interaction,
        )
        .optional()
        .map_err(unavailable)?;
    match row {
        Some((doc, res)) => Ok(Some(Arc::new(decode(&doc, res.as_deref())?))),
        None => Ok(None),
    }
}
