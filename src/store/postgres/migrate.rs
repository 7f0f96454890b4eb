//! Versioned schema migrations, embedded in the binary as `migrations/NNNN_name.sql`.
//!
//! Applied at start-up in one transaction that first takes a transaction-level advisory lock
//! (one per schema): replicas starting together wait for each other instead of racing, and
//! the lock is released with the commit, so it holds through a transaction-pooling proxy
//! too. The versions applied are rows of `<schema>.migrations`. A database that has a version
//! this binary does not know was migrated by a newer imrelay: this one refuses to start
//! rather than write to tables it does not understand.

use sha2::{Digest, Sha256};
use tokio_postgres::{Client, Transaction};

use super::{Schema, describe};
use crate::store::StoreError;

/// One migration: its version (the file's number), name and SQL.
struct Migration {
    version: i32,
    name: &'static str,
    sql: &'static str,
}

/// Every migration, oldest first. A new one is a new file and a new line here; applied
/// migrations are never edited.
const MIGRATIONS: &[Migration] = &[
    Migration {
        version: 1,
        name: "init",
        sql: include_str!("migrations/0001_init.sql"),
    },
    Migration {
        version: 2,
        name: "events",
        sql: include_str!("migrations/0002_events.sql"),
    },
    Migration {
        version: 3,
        name: "leases",
        sql: include_str!("migrations/0003_leases.sql"),
    },
    Migration {
        version: 4,
        name: "grants",
        sql: include_str!("migrations/0004_grants.sql"),
    },
    Migration {
        version: 5,
        name: "grant_owner",
        sql: include_str!("migrations/0005_grant_owner.sql"),
    },
    Migration {
        version: 6,
        name: "votes",
        sql: include_str!("migrations/0006_votes.sql"),
    },
    Migration {
        version: 7,
        name: "sessions",
        sql: include_str!("migrations/0007_sessions.sql"),
    },
];

/// The version the newest migration brings a database to.
pub const SCHEMA_VERSION: i32 = MIGRATIONS[MIGRATIONS.len() - 1].version;

fn checksum(sql: &str) -> String {
    hex::encode(Sha256::digest(sql.as_bytes()))
}

/// Brings `schema` to [`SCHEMA_VERSION`], creating it if needed; returns the version it
/// was at before.
pub(super) async fn migrate(client: &mut Client, schema: &Schema) -> Result<i32, StoreError> {
    let tx = client
        .transaction()
        .await
        .map_err(|e| failed(schema, "begin", &e))?;
    lock(&tx, schema).await?;
    create_tables(&tx, schema).await?;
    let applied = applied(&tx, schema).await?;
    let before = applied.last().map_or(0, |(v, _, _)| *v);
    if before > SCHEMA_VERSION {
        let (_, name, _) = &applied[applied.len() - 1];
        return Err(StoreError::Unavailable(format!(
            "schema {} is at version {before} ({name}), newer than this imrelay knows \
             (version {SCHEMA_VERSION}): it was migrated by a newer imrelay. Run that version \
             (or newer) on every replica; this one refuses to start rather than write to \
             tables it does not understand",
            schema.name()
        )));
    }
    for m in MIGRATIONS {
        if let Some((_, _, sum)) = applied.iter().find(|(v, _, _)| *v == m.version) {
            if *sum != checksum(m.sql) {
                tracing::warn!(
                    schema = schema.name(),
                    version = m.version,
                    "an applied migration differs from the one in this binary; it is not applied again"
                );
            }
            continue;
        }
        apply(&tx, schema, m).await?;
    }
    tx.commit()
        .await
        .map_err(|e| failed(schema, "commit", &e))?;
    Ok(before)
}

/// A step of the migration of `schema` that failed, as a [`StoreError`].
fn failed(schema: &Schema, what: &str, e: &tokio_postgres::Error) -> StoreError {
    StoreError::Unavailable(format!(
        "cannot migrate schema {}: {what}: {}",
        schema.name(),
        describe(e)
    ))
}

/// Takes the schema's migration lock in `tx`, waiting as long as it takes.
async fn lock(tx: &Transaction<'_>, schema: &Schema) -> Result<(), StoreError> {
    let fail = |what: &str, e: tokio_postgres::Error| failed(schema, what, &e);
    // Another replica may be migrating (a long step): wait for it, whatever the pooled
    // connection's limits.
    tx.batch_execute("SET LOCAL lock_timeout = 0; SET LOCAL statement_timeout = 0")
        .await
        .map_err(|e| fail("begin", e))?;
    tx.execute(
        "SELECT pg_advisory_xact_lock($1)",
        &[&schema.lock_key("migrations")],
    )
    .await
    .map_err(|e| fail("lock", e))?;
    Ok(())
}

/// Creates the schema if it is missing, and its `migrations` table; sets the transaction's
/// `search_path` to the schema, which the migrations' statements rely on.
async fn create_tables(tx: &Transaction<'_>, schema: &Schema) -> Result<(), StoreError> {
    let fail = |what: &str, e: tokio_postgres::Error| failed(schema, what, &e);
    // Created only when missing: CREATE SCHEMA checks for the database's CREATE privilege
    // even with IF NOT EXISTS, and a schema made beforehand by an administrator needs none.
    let exists = tx
        .query_opt(
            "SELECT 1 FROM pg_namespace WHERE nspname = $1",
            &[&schema.name()],
        )
        .await
        .map_err(|e| fail("look for the schema", e))?
        .is_some();
    let q = schema.quoted();
    if !exists {
        tx.batch_execute(&format!("CREATE SCHEMA {q}"))
            .await
            .map_err(|e| fail("create the schema", e))?;
    }
    tx.batch_execute(&format!(
        "SET LOCAL search_path TO {q};
         CREATE TABLE IF NOT EXISTS migrations (
             version    integer PRIMARY KEY,
             name       text NOT NULL,
             checksum   text NOT NULL,
             applied_at bigint NOT NULL
         );"
    ))
    .await
    .map_err(|e| fail("create the migrations table", e))
}

/// The migrations applied so far, as (version, name, checksum), oldest first.
async fn applied(
    tx: &Transaction<'_>,
    schema: &Schema,
) -> Result<Vec<(i32, String, String)>, StoreError> {
    Ok(tx
        .query(
            "SELECT version, name, checksum FROM migrations ORDER BY version",
            &[],
        )
        .await
        .map_err(|e| failed(schema, "read the applied versions", &e))?
        .iter()
        .map(|r| (r.get(0), r.get(1), r.get(2)))
        .collect())
}

/// Applies `m` and records its version.
async fn apply(tx: &Transaction<'_>, schema: &Schema, m: &Migration) -> Result<(), StoreError> {
    tx.batch_execute(m.sql)
        .await
        .map_err(|e| failed(schema, &format!("apply {:04}_{}", m.version, m.name), &e))?;
    tx.execute(
        "INSERT INTO migrations (version, name, checksum, applied_at) VALUES ($1, $2, $3, $4)",
        &[
            &m.version,
            &m.name,
            &checksum(m.sql),
            &jiff::Timestamp::now().as_millisecond(),
        ],
    )
    .await
    .map_err(|e| failed(schema, "record the version", &e))?;
    tracing::info!(
        schema = schema.name(),
        version = m.version,
        name = m.name,
        "applied store migration"
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_follow_the_file_numbers_without_gaps() {
        let numbers: Vec<i32> = (1..=SCHEMA_VERSION).collect();
        for (m, n) in MIGRATIONS.iter().zip(&numbers) {
            assert_eq!(m.version, *n, "{}", m.name);
        }
        assert_eq!(numbers.len(), MIGRATIONS.len());
    }
}
