//! Named values: read by prefix (a range over the `kv` table's primary key), and swapped only
//! over what a writer read.

use rusqlite::params;

use super::{SqliteStore, unavailable};
use crate::interaction::ports::StoreError;

/// Sets (or with `None` removes) value `key` if it is still `expected` (`None`: absent):
/// whether it was set.
pub(super) async fn swap_value(
    store: &SqliteStore,
    key: &str,
    expected: Option<&str>,
    value: Option<String>,
) -> Result<bool, StoreError> {
    let key = key.to_string();
    let expected = expected.map(str::to_string);
    store
        .write(move |conn| {
            let changed = match (expected, value) {
                (None, Some(v)) => conn.execute(
                    "INSERT INTO kv (key, value) VALUES (?1, ?2) ON CONFLICT (key) DO NOTHING",
                    params![key, v],
                ),
                (Some(e), Some(v)) => conn.execute(
                    "UPDATE kv SET value = ?2 WHERE key = ?1 AND value = ?3",
                    params![key, v, e],
                ),
                (Some(e), None) => conn.execute(
                    "DELETE FROM kv WHERE key = ?1 AND value = ?2",
                    params![key, e],
                ),
                (None, None) => conn
                    .query_row("SELECT count(*) FROM kv WHERE key = ?1", [&key], |r| {
                        r.get::<_, i64>(0)
                    })
                    .map(|n| usize::from(n == 0)),
            }
            .map_err(unavailable)?;
            Ok(changed == 1)
        })
        .await
}

/// The values whose keys start with `prefix`, by key, at most `limit`.
pub(super) async fn values_under(
    store: &SqliteStore,
    prefix: &str,
    limit: usize,
) -> Result<Vec<(String, String)>, StoreError> {
    let prefix = prefix.to_string();
    let limit = i64::try_from(limit).unwrap_or(i64::MAX);
    store
        .read(move |conn| {
            // A range over the primary key: every key that starts with the prefix sorts
            // at or after it and before it with U+10FFFF appended.
            let mut stmt = conn
                .prepare_cached(
                    "SELECT key, value FROM kv WHERE key >= ?1 AND key < ?1 || char(1114111)
                 ORDER BY key LIMIT ?2",
                )
                .map_err(unavailable)?;
            let rows = stmt
                .query_map(params![prefix, limit], |r| Ok((r.get(0)?, r.get(1)?)))
                .map_err(unavailable)?
                .collect::<Result<Vec<(String, String)>, _>>()
                .map_err(unavailable)?;
            Ok(rows
                .into_iter()
                .filter(|(k, _)| k.starts_with(&prefix))
                .collect())
        })
        .await
}

/// The values whose keys start with `prefix`, by key, at most `limit`, read on `conn` (a
/// read-only connection: for `imrelay doctor`, beside a running server).
pub fn read_values_under(
    conn: &rusqlite::Connection,
    prefix: &str,
    limit: usize,
) -> Result<Vec<(String, String)>, StoreError> {
    let limit = i64::try_from(limit).unwrap_or(i64::MAX);
    let mut stmt = conn
        .prepare("SELECT key, value FROM kv WHERE key >= ?1 AND key < ?1 || char(1114111) ORDER BY key LIMIT ?2")
        .map_err(unavailable)?;
    let rows = stmt
        .query_map(params![prefix, limit], |r| Ok((r.get(0)?, r.get(1)?)))
        .map_err(unavailable)?
        .collect::<Result<Vec<(String, String)>, _>>()
        .map_err(unavailable)?;
    Ok(rows
        .into_iter()
        .filter(|(k, _)| k.starts_with(prefix))
        .collect())
}

/// The server secret `name`, if it was made, read on `conn` (read-only, as above).
pub fn read_secret(conn: &rusqlite::Connection, name: &str) -> Result<Option<Vec<u8>>, StoreError> {
    use rusqlite::OptionalExtension;
    conn.query_row(
        "SELECT value FROM secrets WHERE name = ?1",
        params![name],
        |r| r.get(0),
    )
    .optional()
    .map_err(unavailable)
}
