//! Opening the database: its write, read and frozen connections, the file lock that keeps it
//! to one process, and the schema migrations (`migrations/*.sql`, numbered by
//! `PRAGMA user_version`).

use std::fs::File;
use std::path::{Path, PathBuf};
use std::time::Duration;

use rusqlite::{Connection, OpenFlags, TransactionBehavior};

use super::unavailable;
use crate::store::StoreError;

/// SQLite's `synchronous` setting: how hard a commit pushes data to the disk.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Deserialize, serde::Serialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum Synchronous {
    /// Commits survive a process crash; an OS crash or power loss may lose the last few.
    #[default]
    Normal,
    /// Every commit is flushed to the disk: survives power loss, costs an fsync per commit
    /// group.
    Full,
}

/// Read connections kept open.
pub(super) const READERS: usize = 4;

/// The schema's migrations, oldest first: version N is the Nth file in `migrations/`, each
/// applied once, in its own transaction.
pub(super) const MIGRATIONS: &[&str] = &[
    include_str!("migrations/0001_init.sql"),
    include_str!("migrations/0002_audit_and_kv.sql"),
    include_str!("migrations/0003_fenced_claims.sql"),
    include_str!("migrations/0004_no_audit_index_by_interaction.sql"),
    include_str!("migrations/0005_bound_hook_memory.sql"),
    include_str!("migrations/0006_grants.sql"),
    include_str!("migrations/0007_grant_owner.sql"),
    include_str!("migrations/0008_votes.sql"),
    include_str!("migrations/0009_sessions.sql"),
];

/// The version the newest migration brings a database to.
pub const SCHEMA_VERSION: i64 = MIGRATIONS.len() as i64;

pub(super) fn open_write_connection(
    path: &Path,
    sync: Synchronous,
) -> rusqlite::Result<Connection> {
    let conn = Connection::open(path)?;
    conn.busy_timeout(Duration::from_secs(5))?;
    conn.pragma_update(None, "journal_mode", "WAL")?;
    conn.pragma_update(
        None,
        "synchronous",
        match sync {
            Synchronous::Normal => "NORMAL",
            Synchronous::Full => "FULL",
        },
    )?;
    conn.pragma_update(None, "foreign_keys", "ON")?;
    // Every write statement stays prepared (rusqlite keeps 16 by default, fewer than the
    // writer uses, so some were parsed again and again).
    conn.set_prepared_statement_cache_capacity(64);
    Ok(conn)
}

pub(super) fn open_read_connection(path: &Path) -> rusqlite::Result<Connection> {
    let conn = Connection::open_with_flags(
        path,
        OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )?;
    conn.busy_timeout(Duration::from_secs(5))?;
    Ok(conn)
}

/// Opens the database as an immutable file: for a disk where not even WAL's shared-memory
/// file can be created (a read-only file system). Safe only when no write-ahead log holds
/// data that is not in the main file yet, which [`can_freeze`] checks.
pub(super) fn open_frozen_connection(path: &Path) -> rusqlite::Result<Connection> {
    let mut uri = String::from("file:");
    for c in path.to_string_lossy().chars() {
        match c {
            '%' => uri.push_str("%25"),
            '?' => uri.push_str("%3f"),
            '#' => uri.push_str("%23"),
            c => uri.push(c),
        }
    }
    uri.push_str("?immutable=1");
    Connection::open_with_flags(
        uri,
        OpenFlags::SQLITE_OPEN_READ_ONLY
            | OpenFlags::SQLITE_OPEN_URI
            | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
}

/// Whether the database at `path` can be read as an immutable file: it exists and its
/// write-ahead log is absent or empty (everything committed is in the main file).
pub(super) fn can_freeze(path: &Path) -> bool {
    let mut wal = path.to_path_buf().into_os_string();
    wal.push("-wal");
    path.is_file() && std::fs::metadata(PathBuf::from(wal)).map_or(true, |m| m.len() == 0)
}

/// Applies pending migrations; returns the schema version afterwards.
pub(super) fn migrate(conn: &mut Connection) -> rusqlite::Result<i64> {
    let current: i64 = conn.pragma_query_value(None, "user_version", |r| r.get(0))?;
    for (i, sql) in MIGRATIONS.iter().enumerate() {
        let version = i as i64 + 1;
        if version <= current {
            continue;
        }
        // IMMEDIATE, as every write transaction here: the lock is waited for at BEGIN.
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        tx.execute_batch(sql)?;
        tx.pragma_update(None, "user_version", version)?;
        tx.commit()?;
        tracing::info!(version, "applied store migration");
    }
    conn.pragma_query_value(None, "user_version", |r| r.get(0))
}

/// The schema version of an imrelay database.
pub fn schema_version(conn: &Connection) -> Result<i64, StoreError> {
    conn.pragma_query_value(None, "user_version", |r| r.get(0))
        .map_err(unavailable)
}

/// Opens an imrelay database read-only, without taking the process lock (for the `imrelay
/// audit` command, which may run beside the server).
pub fn open_read_only(path: &Path) -> Result<Connection, StoreError> {
    if !path.exists() {
        return Err(unavailable(format!("{} does not exist", path.display())));
    }
    open_read_connection(path)
        .map_err(|e| unavailable(format!("cannot open {}: {e}", path.display())))
}

/// What is at a database path, as [`inspect`] found it.
#[derive(Debug)]
pub enum Inspection {
    /// No database yet (`serve` creates it). `folder` is the nearest folder that exists (the
    /// database's own, or the one its missing folders would be made in); `writable` says
    /// whether this process may create files there, or why not.
    Missing {
        /// The nearest existing folder.
        folder: PathBuf,
        /// Whether files can be created in it.
        writable: Result<(), String>,
    },
    /// Another process holds the database's lock: an imrelay is serving it.
    InUse,
    /// A database no process is using.
    Idle {
        /// Its schema version.
        version: i64,
        /// Whether this process could write it (and the journal files beside it), or why not.
        writable: Result<(), String>,
    },
}

/// Looks at the database at `path` without changing anything: nothing is created there
/// (not the database, its folder or its lock file), nothing is written to it, and its lock is
/// held only for the look (for `imrelay doctor`, which may run beside the server or before
/// the first start). A database whose write-ahead log holds changes not yet in its file is
/// read as any SQLite reader does, which updates the log's shared-memory index.
pub fn inspect(path: &Path) -> Result<Inspection, StoreError> {
    if !path.exists() {
        let mut folder = path.parent().unwrap_or(Path::new(""));
        while !folder.as_os_str().is_empty() && !folder.is_dir() {
            folder = folder.parent().unwrap_or(Path::new(""));
        }
        let folder = if folder.as_os_str().is_empty() {
            Path::new(".")
        } else {
            folder
        };
        return Ok(Inspection::Missing {
            folder: folder.to_path_buf(),
            writable: can_create_in(folder),
        });
    }
    if path.is_dir() {
        return Err(unavailable(format!("{} is a folder", path.display())));
    }
    // Servers create the lock file: without one, no server holds it.
    let _lock = match File::open(lock_path(path)) {
        Err(_) => None,
        Ok(lock) => match lock.try_lock() {
            Ok(()) => Some(lock),
            Err(std::fs::TryLockError::WouldBlock) => return Ok(Inspection::InUse),
            Err(std::fs::TryLockError::Error(e)) => {
                return Err(unavailable(format!(
                    "cannot lock {}: {e}",
                    lock_path(path).display()
                )));
            }
        },
    };
    // Immutable when everything is in the main file: then not even WAL's shared-memory file
    // is made.
    let conn = if can_freeze(path) {
        open_frozen_connection(path)
    } else {
        open_read_connection(path)
    }
    .map_err(|e| unavailable(format!("cannot open {}: {e}", path.display())))?;
    let version = schema_version(&conn)
        .map_err(|e| unavailable(format!("cannot read {}: {e}", path.display())))?;
    drop(conn);
    let folder = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    let writable = File::options()
        .write(true)
        .open(path)
        .map(drop)
        .map_err(|e| format!("cannot open {} for writing: {e}", path.display()))
        .and_then(|()| can_create_in(folder));
    Ok(Inspection::Idle { version, writable })
}

/// Whether this process may create files in `folder` (as SQLite does for its journal),
/// tried with a temporary file that is gone once closed (on Linux one that never has a name
/// there).
fn can_create_in(folder: &Path) -> Result<(), String> {
    tempfile::tempfile_in(folder)
        .map(drop)
        .map_err(|e| format!("cannot create files in {}: {e}", folder.display()))
}

fn lock_path(path: &Path) -> PathBuf {
    let mut p = path.to_path_buf().into_os_string();
    p.push(".lock");
    PathBuf::from(p)
}

/// Takes the exclusive lock on `<path>.lock` for this process. On a read-only disk the lock
/// file is opened read-only (a lock needs no write access); if it does not exist and cannot be
/// created, there is nothing to lock and the store opens without it, with a warning.
pub(super) fn lock_database(path: &Path) -> Result<Option<File>, StoreError> {
    let lock_path = lock_path(path);
    let file = File::options()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&lock_path)
        .or_else(|e| File::open(&lock_path).map_err(|_| e));
    let lock = match file {
        Ok(f) => f,
        Err(e) => {
            tracing::warn!(path = %lock_path.display(), error = %e,
                "cannot open or create the lock file; running without it (make sure no other imrelay uses this database)");
            return Ok(None);
        }
    };
    match lock.try_lock() {
        Ok(()) => Ok(Some(lock)),
        Err(std::fs::TryLockError::WouldBlock) => Err(unavailable(format!(
            "{} is in use by another imrelay process",
            path.display()
        ))),
        Err(std::fs::TryLockError::Error(e)) => Err(unavailable(format!(
            "cannot lock {}: {e}",
            lock_path.display()
        ))),
    }
}
