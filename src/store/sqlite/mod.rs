//! The embedded SQLite [`Store`] (the default).
//!
//! - One writer thread owns the write connection. Writes queue up to it and are committed in
//!   groups (group commit): each write runs in its own savepoint inside one transaction, and
//!   every caller is answered only after that transaction committed. Under load this turns
//!   many small commits into few, while keeping "durable before acknowledged".
//! - Reads use a small pool of read-only connections on the blocking thread pool; WAL mode
//!   lets them run alongside the writer.
//! - A checkpointer thread copies the write-ahead log back into the database file, so the
//!   writer never does it inside a commit (in profiles that was a third of the writer's time).
//! - The database file is locked for this process (`<path>.lock`): two imrelay processes on
//!   one file would break the single-writer assumptions of the outbox leases on start-up.
//! - Schema migrations are numbered by `PRAGMA user_version` and applied at open.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, mpsc};
use std::time::Duration;

use async_trait::async_trait;
use jiff::Timestamp;
use rusqlite::{Connection, OpenFlags, OptionalExtension, params};
use serde_json::Value;
use tokio::sync::oneshot;

use super::{
    AuditQuery, BOUND_VALUE_PREFIX, ChannelMessage, ClaimQuota, ClaimedJob, CreateOutcome, Effects,
    JobUpdate, ListQuery, OutboxJob, Page, ResolveOutcome, StatusFilter, StoreError, random_secret,
};
use crate::audit::{self, Action, AuditEntry, AuditHead, AuditRecord};
use crate::interaction::{Interaction, InteractionId, Resolution};
use crate::store::prelude::*;
use crate::sync::LockExt;

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

/// Most writes committed in one transaction.
const MAX_BATCH: usize = 512;
/// Read connections kept open.
const READERS: usize = 4;

/// The schema's migrations, oldest first: version N is the Nth file in `migrations/`, each
/// applied once, in its own transaction.
const MIGRATIONS: &[&str] = &[
    include_str!("migrations/0001_init.sql"),
    include_str!("migrations/0002_audit_and_kv.sql"),
    include_str!("migrations/0003_fenced_claims.sql"),
    include_str!("migrations/0004_no_audit_index_by_interaction.sql"),
    include_str!("migrations/0005_bound_hook_memory.sql"),
];

/// The version the newest migration brings a database to.
pub const SCHEMA_VERSION: i64 = MIGRATIONS.len() as i64;

fn unavailable(e: impl std::fmt::Display) -> StoreError {
    StoreError::Unavailable(e.to_string())
}

fn corrupt(e: impl std::fmt::Display) -> StoreError {
    StoreError::Corrupt(e.to_string())
}

/// One queued write: runs inside the group transaction, answers after the commit.
trait WriteOp: Send {
    /// Runs the write; `false` if it failed (its savepoint is then rolled back).
    fn apply(&mut self, conn: &Connection) -> bool;
    /// Fails the write without running it (its savepoint could not be opened).
    fn skip(&mut self, error: String);
    /// Answers the caller once the group's commit is known.
    fn complete(self: Box<Self>, commit: Result<(), String>);
}

struct Op<R, F> {
    f: Option<F>,
    out: Option<Result<R, StoreError>>,
    reply: oneshot::Sender<Result<R, StoreError>>,
}

impl<R, F> WriteOp for Op<R, F>
where
    R: Send,
    F: FnOnce(&Connection) -> Result<R, StoreError> + Send,
{
    fn apply(&mut self, conn: &Connection) -> bool {
        let r = match self.f.take() {
            Some(f) => f(conn),
            None => Err(StoreError::Unavailable("write applied twice".into())),
        };
        let ok = r.is_ok();
        self.out = Some(r);
        ok
    }

    fn skip(&mut self, error: String) {
        self.f = None;
        self.out = Some(Err(StoreError::Unavailable(error)));
    }

    fn complete(self: Box<Self>, commit: Result<(), String>) {
        let this = *self;
        let result = match commit {
            Ok(()) => this
                .out
                .unwrap_or_else(|| Err(StoreError::Unavailable("write never applied".into()))),
            Err(e) => Err(StoreError::Unavailable(e)),
        };
        let _ = this.reply.send(result);
    }
}

/// The SQLite store.
pub struct SqliteStore {
    writer: mpsc::Sender<Box<dyn WriteOp>>,
    readers: Arc<Mutex<Vec<Connection>>>,
    path: PathBuf,
    /// Opened as an immutable file (a read-only file system): every write fails.
    frozen: bool,
    last_write: LastWrite,
    // Held for the life of the store: the exclusive lock on `<path>.lock` (none when the
    // lock file can be neither opened nor created, e.g. on a read-only disk).
    _lock: Option<File>,
}

impl std::fmt::Debug for SqliteStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SqliteStore")
            .field("path", &self.path)
            .finish()
    }
}

fn open_write_connection(path: &Path, sync: Synchronous) -> rusqlite::Result<Connection> {
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

fn open_read_connection(path: &Path) -> rusqlite::Result<Connection> {
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
fn open_frozen_connection(path: &Path) -> rusqlite::Result<Connection> {
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
fn can_freeze(path: &Path) -> bool {
    let mut wal = path.to_path_buf().into_os_string();
    wal.push("-wal");
    path.is_file() && std::fs::metadata(PathBuf::from(wal)).map_or(true, |m| m.len() == 0)
}

/// Applies pending migrations; returns the schema version afterwards.
fn migrate(conn: &mut Connection) -> rusqlite::Result<i64> {
    let current: i64 = conn.pragma_query_value(None, "user_version", |r| r.get(0))?;
    for (i, sql) in MIGRATIONS.iter().enumerate() {
        let version = i as i64 + 1;
        if version <= current {
            continue;
        }
        let tx = conn.transaction()?;
        tx.execute_batch(sql)?;
        tx.pragma_update(None, "user_version", version)?;
        tx.commit()?;
        tracing::info!(version, "applied store migration");
    }
    conn.pragma_query_value(None, "user_version", |r| r.get(0))
}

/// How long the checkpointer lets log frames gather before copying them back: a page the
/// writer changes many times in that window is copied once.
const CHECKPOINT_EVERY: Duration = Duration::from_millis(200);
/// Log size (frames, 4 KiB pages) past which the checkpointer also restarts the log (writing
/// it again from its start), briefly waiting for the writer, so the file does not keep
/// growing under sustained load.
const CHECKPOINT_RESTART_FRAMES: i64 = 4096;

/// Starts the checkpointer: a thread with its own connection that runs passive checkpoints
/// after the writer commits, and a truncating one when the log has grown long. Returns the
/// nudge the writer sends after each commit; `None` (the writer then checkpoints itself, as
/// SQLite does by default) if the thread cannot start.
fn start_checkpointer(path: &Path) -> Option<mpsc::SyncSender<()>> {
    // A restart waits for readers while holding off the writer: it waits briefly, and tries
    // again at the next nudge rather than stall commits behind a long read (`audit verify`).
    let conn = match Connection::open(path).and_then(|c| {
        c.busy_timeout(Duration::from_millis(100))?;
        Ok(c)
    }) {
        Ok(c) => c,
        Err(e) => {
            tracing::warn!(error = %e, "cannot open the checkpointer's connection; the writer checkpoints itself");
            return None;
        }
    };
    let (tx, rx) = mpsc::sync_channel::<()>(1);
    std::thread::Builder::new()
        .name("imrelay-sqlite-checkpoint".into())
        .spawn(move || run_checkpointer(conn, rx))
        .map_err(|e| tracing::warn!(error = %e, "cannot start the checkpointer; the writer checkpoints itself"))
        .ok()?;
    Some(tx)
}

fn run_checkpointer(conn: Connection, nudges: mpsc::Receiver<()>) {
    // Ends when the writer (the only sender) is gone, after a last full checkpoint.
    while nudges.recv().is_ok() {
        std::thread::sleep(CHECKPOINT_EVERY);
        // Nudges sent while sleeping are covered by this checkpoint.
        while nudges.try_recv().is_ok() {}
        match checkpoint(&conn, "PASSIVE") {
            // Restart only once everything is copied: then it has nothing left to copy
            // while it holds the writer off.
            Ok((frames, copied)) if frames >= CHECKPOINT_RESTART_FRAMES && copied == frames => {
                if let Err(e) = checkpoint(&conn, "RESTART") {
                    tracing::debug!(error = %e, frames, "could not restart the write-ahead log yet; will retry");
                }
            }
            Ok(_) => {}
            Err(e) => tracing::warn!(error = %e, "checkpoint failed; will retry"),
        }
    }
    let _ = checkpoint(&conn, "TRUNCATE");
}

/// Runs `PRAGMA wal_checkpoint(mode)`; returns the log's length in frames and how many of
/// them are in the database file now.
fn checkpoint(conn: &Connection, mode: &str) -> rusqlite::Result<(i64, i64)> {
    conn.query_row(&format!("PRAGMA wal_checkpoint({mode})"), [], |r| {
        Ok((r.get::<_, i64>(1)?, r.get::<_, i64>(2)?))
    })
}

/// When the writer last committed a transaction that changed something.
type LastWrite = Arc<Mutex<Option<std::time::Instant>>>;

/// How long a committed change vouches for [`Store::check_writable`] before a probe write.
const WRITE_FRESH: Duration = Duration::from_secs(5);

fn run_writer(
    mut conn: Connection,
    rx: mpsc::Receiver<Box<dyn WriteOp>>,
    last: LastWrite,
    checkpoints: Option<mpsc::SyncSender<()>>,
) {
    let mut batch: Vec<Box<dyn WriteOp>> = Vec::with_capacity(MAX_BATCH);
    while let Ok(first) = rx.recv() {
        batch.push(first);
        while batch.len() < MAX_BATCH {
            match rx.try_recv() {
                Ok(op) => batch.push(op),
                Err(_) => break,
            }
        }
        let changes = conn.total_changes();
        let commit = write_batch(&mut conn, &mut batch);
        if commit.is_ok() && conn.total_changes() > changes {
            *last.locked() = Some(std::time::Instant::now());
            if let Some(nudge) = &checkpoints {
                // Full means a nudge is already waiting: nothing to add.
                let _ = nudge.try_send(());
            }
        }
        for op in batch.drain(..) {
            op.complete(commit.clone());
        }
    }
}

fn write_batch(conn: &mut Connection, batch: &mut [Box<dyn WriteOp>]) -> Result<(), String> {
    let tx = conn.transaction().map_err(|e| e.to_string())?;
    for op in batch.iter_mut() {
        // Without its savepoint a failing write could not be undone alone, and the group's
        // commit would keep its first half: such a write fails without running.
        // (Cached statements: parsing these per write showed in profiles.)
        if let Err(e) = run_cached(&tx, "SAVEPOINT op") {
            op.skip(format!("cannot start the write: {e}"));
            continue;
        }
        let end = if op.apply(&tx) {
            run_cached(&tx, "RELEASE op")
        } else {
            run_cached(&tx, "ROLLBACK TO op").and_then(|_| run_cached(&tx, "RELEASE op"))
        };
        if let Err(e) = end {
            return Err(e.to_string());
        }
    }
    tx.commit().map_err(|e| {
        tracing::error!(error = %e, "store commit failed; the writes were not acknowledged");
        e.to_string()
    })
}

/// `query_row` through the connection's statement cache: the queries on the write path
/// run thousands of times a second, and parsing them each time showed in profiles.
trait CachedRow {
    fn cached_row<T, P: rusqlite::Params>(
        &self,
        sql: &str,
        params: P,
        f: impl FnOnce(&rusqlite::Row<'_>) -> rusqlite::Result<T>,
    ) -> rusqlite::Result<T>;
}

impl CachedRow for Connection {
    fn cached_row<T, P: rusqlite::Params>(
        &self,
        sql: &str,
        params: P,
        f: impl FnOnce(&rusqlite::Row<'_>) -> rusqlite::Result<T>,
    ) -> rusqlite::Result<T> {
        self.prepare_cached(sql)?.query_row(params, f)
    }
}

/// Runs a parameterless statement through the connection's statement cache.
fn run_cached(conn: &Connection, sql: &str) -> rusqlite::Result<usize> {
    conn.prepare_cached(sql)?.execute([])
}

fn ms(t: Timestamp) -> i64 {
    t.as_millisecond()
}

fn from_ms(v: i64) -> Timestamp {
    Timestamp::from_millisecond(v).unwrap_or(Timestamp::UNIX_EPOCH)
}

fn decode(doc: &str, resolution: Option<&str>) -> Result<Interaction, StoreError> {
    let mut i: Interaction = serde_json::from_str(doc).map_err(corrupt)?;
    i.resolution = match resolution {
        Some(r) => Some(Box::new(
            serde_json::from_str::<Resolution>(r).map_err(corrupt)?,
        )),
        None => None,
    };
    Ok(i)
}

fn read_interaction(row: &rusqlite::Row<'_>) -> rusqlite::Result<(String, Option<String>)> {
    Ok((row.get(0)?, row.get(1)?))
}

fn get_in(conn: &Connection, id: &str) -> Result<Option<Arc<Interaction>>, StoreError> {
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

struct EncodedJob {
    key: String,
    channel: String,
    kind: String,
    interaction_id: Option<String>,
    payload: String,
    next_at: i64,
    horizon_at: i64,
}

fn encode_jobs(jobs: Vec<OutboxJob>) -> Vec<EncodedJob> {
    jobs.into_iter()
        .map(|j| EncodedJob {
            payload: j.payload.to_string(),
            key: j.key,
            channel: j.channel,
            kind: j.kind,
            interaction_id: j.interaction_id.map(|i| i.as_str().to_string()),
            next_at: ms(j.not_before),
            horizon_at: ms(j.horizon),
        })
        .collect()
}

fn insert_jobs(conn: &Connection, jobs: &[EncodedJob], now: i64) -> rusqlite::Result<()> {
    if jobs.is_empty() {
        return Ok(());
    }
    let mut stmt = conn.prepare_cached(
        "INSERT INTO outbox (key, channel, kind, interaction_id, payload, next_at, horizon_at, created_at, updated_at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?8)
         ON CONFLICT (key) DO NOTHING",
    )?;
    for j in jobs {
        stmt.execute(params![
            j.key,
            j.channel,
            j.kind,
            j.interaction_id,
            j.payload,
            j.next_at,
            j.horizon_at,
            now
        ])?;
    }
    Ok(())
}

/// The chain head recorded in `kv`, if any.
fn recorded_head_value(conn: &Connection) -> Result<Option<String>, StoreError> {
    conn.cached_row(
        "SELECT value FROM kv WHERE key = ?1",
        [audit::HEAD_KEY],
        |r| r.get(0),
    )
    .optional()
    .map_err(unavailable)
}

fn recorded_head(conn: &Connection) -> Result<Option<AuditHead>, StoreError> {
    recorded_head_value(conn)?
        .map(|v| v.parse().map_err(StoreError::Corrupt))
        .transpose()
}

fn append_audit_in(conn: &Connection, records: Vec<AuditRecord>) -> Result<(), StoreError> {
    if records.is_empty() {
        return Ok(());
    }
    let last = conn
        .cached_row(
            "SELECT seq, hash FROM audit ORDER BY seq DESC LIMIT 1",
            [],
            |r| {
                Ok(AuditHead {
                    seq: r.get(0)?,
                    hash: r.get(1)?,
                })
            },
        )
        .optional()
        .map_err(unavailable)?;
    let recorded = recorded_head_value(conn)?;
    let Some(appended) = audit::append(last, recorded.as_deref(), records) else {
        return Ok(());
    };
    let mut stmt = conn
        .prepare_cached(
            "INSERT INTO audit (seq, at, action, interaction_id, actor, channel, outcome, input_hash, detail, prev_hash, hash)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)",
        )
        .map_err(unavailable)?;
    for e in &appended.entries {
        let r = &e.record;
        stmt.execute(params![
            e.seq,
            ms(r.at),
            r.action.as_str(),
            r.interaction_id,
            r.actor,
            r.channel,
            r.outcome,
            r.input_hash,
            r.detail,
            e.prev_hash,
            e.hash
        ])
        .map_err(unavailable)?;
    }
    conn.prepare_cached(
        "INSERT INTO kv (key, value) VALUES (?1, ?2)
         ON CONFLICT (key) DO UPDATE SET value = excluded.value",
    )
    .and_then(|mut s| s.execute(params![audit::HEAD_KEY, appended.head.to_string()]))
    .map_err(unavailable)?;
    Ok(())
}

fn apply_effects(
    conn: &Connection,
    jobs: &[EncodedJob],
    audit: Vec<AuditRecord>,
    now: i64,
) -> Result<(), StoreError> {
    insert_jobs(conn, jobs, now).map_err(unavailable)?;
    append_audit_in(conn, audit)
}

fn parse_action(s: &str) -> Result<Action, StoreError> {
    serde_json::from_value(Value::String(s.to_string())).map_err(corrupt)
}

/// Reads audit entries, oldest first, from any connection to an imrelay database (the
/// server's, or a read-only one opened by the `imrelay audit` command).
pub fn read_audit(conn: &Connection, q: &AuditQuery) -> Result<Vec<AuditEntry>, StoreError> {
    let since = q.since.map(ms).unwrap_or(i64::MIN);
    let mut stmt = conn
        .prepare_cached(
            "SELECT seq, at, action, interaction_id, actor, channel, outcome, input_hash, detail, prev_hash, hash
             FROM audit WHERE seq > ?1 AND at >= ?2 ORDER BY seq LIMIT ?3",
        )
        .map_err(unavailable)?;
    let rows = stmt
        .query_map(params![q.after_seq, since, q.limit as i64], |r| {
            Ok((
                r.get::<_, i64>(0)?,
                r.get::<_, i64>(1)?,
                r.get::<_, String>(2)?,
                r.get::<_, Option<String>>(3)?,
                r.get::<_, Option<String>>(4)?,
                r.get::<_, String>(5)?,
                r.get::<_, String>(6)?,
                r.get::<_, Option<String>>(7)?,
                r.get::<_, Option<String>>(8)?,
                r.get::<_, String>(9)?,
                r.get::<_, String>(10)?,
            ))
        })
        .map_err(unavailable)?;
    let mut out = Vec::new();
    for row in rows {
        let (
            seq,
            at,
            action,
            interaction_id,
            actor,
            channel,
            outcome,
            input_hash,
            detail,
            prev_hash,
            hash,
        ) = row.map_err(unavailable)?;
        out.push(AuditEntry {
            seq,
            record: AuditRecord {
                at: from_ms(at),
                action: parse_action(&action)?,
                interaction_id,
                actor,
                channel,
                outcome,
                input_hash,
                detail,
            },
            prev_hash,
            hash,
        });
    }
    Ok(out)
}

/// The audit chain head recorded with the last append, from any connection to an imrelay
/// database.
pub fn read_audit_head(conn: &Connection) -> Result<Option<AuditHead>, StoreError> {
    recorded_head(conn)
}

/// The schema version of an imrelay database.
pub fn schema_version(conn: &Connection) -> Result<i64, StoreError> {
    conn.pragma_query_value(None, "user_version", |r| r.get(0))
        .map_err(unavailable)
}

/// Stored interactions that have no `created` audit entry (at their creation time): how many,
/// and the ids of up to `sample` of them.
pub fn interactions_without_created_entry(
    conn: &Connection,
    sample: usize,
) -> Result<(u64, Vec<String>), StoreError> {
    let mut stmt = conn
        .prepare(
            "SELECT id FROM interactions i WHERE NOT EXISTS (
                 SELECT 1 FROM audit a
                 WHERE a.interaction_id = i.id AND a.action = 'created' AND a.at = i.created_at)
             ORDER BY created_at, id",
        )
        .map_err(unavailable)?;
    let rows = stmt
        .query_map([], |r| r.get::<_, String>(0))
        .map_err(unavailable)?;
    let (mut count, mut ids) = (0u64, Vec::new());
    for row in rows {
        let id = row.map_err(unavailable)?;
        count += 1;
        if ids.len() < sample {
            ids.push(id);
        }
    }
    Ok((count, ids))
}

/// Channels with unfinished outbox jobs (a few index seeks, however long the queue).
fn pending_channels(conn: &Connection) -> Result<Vec<String>, StoreError> {
    let mut stmt = conn
        .prepare_cached(
            "WITH RECURSIVE ch(c) AS (
                 SELECT (SELECT MIN(channel) FROM outbox WHERE state = 'pending')
                 UNION ALL
                 SELECT (SELECT MIN(channel) FROM outbox WHERE state = 'pending' AND channel > ch.c)
                 FROM ch WHERE ch.c IS NOT NULL)
             SELECT c FROM ch WHERE c IS NOT NULL",
        )
        .map_err(unavailable)?;
    let rows = stmt
        .query_map([], |r| r.get::<_, String>(0))
        .map_err(unavailable)?;
    rows.collect::<rusqlite::Result<Vec<_>>>()
        .map_err(unavailable)
}

/// The channels a claim under `quota` may take jobs of, with how many each.
fn quota_channels(
    conn: &Connection,
    quota: &ClaimQuota,
) -> Result<Vec<(String, usize)>, StoreError> {
    let pending = if quota.others > 0 {
        pending_channels(conn)?
    } else {
        Vec::new()
    };
    Ok(quota.claimable(pending))
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

/// Takes the exclusive lock on `<path>.lock` for this process. On a read-only disk the lock
/// file is opened read-only (a lock needs no write access); if it does not exist and cannot be
/// created, there is nothing to lock and the store opens without it, with a warning.
fn lock_database(path: &Path) -> Result<Option<File>, StoreError> {
    let lock_path = {
        let mut p = path.to_path_buf().into_os_string();
        p.push(".lock");
        PathBuf::from(p)
    };
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

impl SqliteStore {
    /// Opens (creating if needed, with its folder) the database at `path`, applies
    /// migrations, and starts the writer thread. This blocks: from async code use
    /// [`SqliteStore::open_async`].
    ///
    /// A database on a read-only or full disk still opens, as long as it exists and needs no
    /// migration: reads work and writes fail (then `/healthz` reports it, and new interactions
    /// are refused with 503).
    pub fn open(path: impl AsRef<Path>, sync: Synchronous) -> Result<Self, StoreError> {
        let path = path.as_ref().to_path_buf();
        if let Some(dir) = path.parent()
            && !dir.as_os_str().is_empty()
            && !dir.is_dir()
        {
            std::fs::create_dir_all(dir)
                .map_err(|e| unavailable(format!("cannot create folder {}: {e}", dir.display())))?;
        }
        let lock = lock_database(&path)?;
        let (mut conn, frozen) = match open_write_connection(&path, sync) {
            Ok(conn) => (conn, false),
            // On a read-only file system an existing database can still be served read-only.
            Err(e) if can_freeze(&path) => match open_frozen_connection(&path) {
                Ok(conn) => {
                    tracing::error!(path = %path.display(), error = %e,
                        "the database cannot be opened for writing; serving it read-only: new interactions and answers are refused until it is writable and imrelay restarts");
                    (conn, true)
                }
                Err(_) => {
                    return Err(unavailable(format!("cannot open {}: {e}", path.display())));
                }
            },
            Err(e) => return Err(unavailable(format!("cannot open {}: {e}", path.display()))),
        };
        let version = migrate(&mut conn)
            .map_err(|e| unavailable(format!("cannot migrate {}: {e}", path.display())))?;
        if version > SCHEMA_VERSION {
            return Err(unavailable(format!(
                "{} has schema version {version}, newer than this imrelay understands ({SCHEMA_VERSION})",
                path.display()
            )));
        }
        // This process holds the file lock: any lease on an outbox job was taken by a process
        // that is gone, so its jobs are due again now. On a disk that takes no writes this
        // fails; the leases then run out by themselves.
        if let Err(e) = conn.execute(
            "UPDATE outbox SET lease_until = NULL WHERE lease_until IS NOT NULL",
            [],
        ) {
            tracing::warn!(error = %e, path = %path.display(),
                "cannot release the outbox leases of the previous run; those jobs resume when their leases run out");
        }
        let last_write = LastWrite::default();
        let checkpoints = if frozen {
            None
        } else {
            start_checkpointer(&path)
        };
        if checkpoints.is_some()
            && let Err(e) = conn.pragma_update(None, "wal_autocheckpoint", 0)
        {
            tracing::warn!(error = %e, "cannot hand checkpoints to the checkpointer");
        }
        let (tx, rx) = mpsc::channel::<Box<dyn WriteOp>>();
        let last = last_write.clone();
        std::thread::Builder::new()
            .name("imrelay-sqlite-writer".into())
            .spawn(move || run_writer(conn, rx, last, checkpoints))
            .map_err(|e| unavailable(format!("cannot start the writer thread: {e}")))?;
        Ok(Self {
            writer: tx,
            readers: Arc::new(Mutex::new(Vec::new())),
            path,
            frozen,
            last_write,
            _lock: lock,
        })
    }

    /// [`SqliteStore::open`] on the blocking thread pool, so the async threads keep serving.
    pub async fn open_async(path: impl AsRef<Path>, sync: Synchronous) -> Result<Self, StoreError> {
        let path = path.as_ref().to_path_buf();
        tokio::task::spawn_blocking(move || Self::open(path, sync))
            .await
            .map_err(|e| unavailable(format!("the open task failed: {e}")))?
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Queues a write; resolves after the transaction containing it committed.
    async fn write<R, F>(&self, f: F) -> Result<R, StoreError>
    where
        R: Send + 'static,
        F: FnOnce(&Connection) -> Result<R, StoreError> + Send + 'static,
    {
        let (reply, rx) = oneshot::channel();
        let op: Box<dyn WriteOp> = Box::new(Op {
            f: Some(f),
            out: None,
            reply,
        });
        self.writer
            .send(op)
            .map_err(|_| StoreError::Unavailable("the writer thread has stopped".into()))?;
        rx.await
            .map_err(|_| StoreError::Unavailable("the writer thread has stopped".into()))?
    }

    /// Runs a read on a pooled read-only connection, off the async threads.
    async fn read<R, F>(&self, f: F) -> Result<R, StoreError>
    where
        R: Send + 'static,
        F: FnOnce(&Connection) -> Result<R, StoreError> + Send + 'static,
    {
        let pool = self.readers.clone();
        let path = self.path.clone();
        let frozen = self.frozen;
        tokio::task::spawn_blocking(move || {
            let conn = pool.locked().pop();
            let conn = match conn {
                Some(c) => c,
                None if frozen => open_frozen_connection(&path).map_err(unavailable)?,
                None => open_read_connection(&path).map_err(unavailable)?,
            };
            let out = f(&conn);
            let mut pool = pool.locked();
            if pool.len() < READERS {
                pool.push(conn);
            }
            out
        })
        .await
        .map_err(|e| StoreError::Unavailable(format!("read task failed: {e}")))?
    }
}

#[async_trait]
impl InteractionStore for SqliteStore {
    async fn create(
        &self,
        interaction: Arc<Interaction>,
        effects: Effects,
    ) -> Result<CreateOutcome, StoreError> {
        let doc = serde_json::to_string(&Interaction {
            resolution: None,
            ..(*interaction).clone()
        })
        .map_err(corrupt)?;
        let resolution = match &interaction.resolution {
            Some(r) => Some(serde_json::to_string(r).map_err(corrupt)?),
            None => None,
        };
        let id = interaction.id.as_str().to_string();
        let created = ms(interaction.created_at);
        let deadline = ms(interaction.deadline);
        let resolved_at = interaction.resolution.as_ref().map(|r| ms(r.at));
        let jobs = encode_jobs(effects.jobs);
        let audit = effects.audit;
        self.write(move |conn| {
            let inserted = conn
                .prepare_cached(
                    "INSERT INTO interactions (id, created_at, deadline, status, resolved_at, doc, resolution)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)
                     ON CONFLICT (id) DO NOTHING",
                )
                .and_then(|mut s| {
                    s.execute(params![
                        id,
                        created,
                        deadline,
                        if resolution.is_some() { "resolved" } else { "pending" },
                        resolved_at,
                        doc,
                        resolution
                    ])
                })
                .map_err(unavailable)?;
            if inserted == 0 {
                return match get_in(conn, &id)? {
                    Some(existing) => Ok(CreateOutcome::Exists(existing)),
                    None => Err(StoreError::Unavailable("insert conflict without a row".into())),
                };
            }
            apply_effects(conn, &jobs, audit, created)?;
            Ok(CreateOutcome::Created)
        })
        .await
    }

    async fn resolve(
        &self,
        resolved: Arc<Interaction>,
        effects: Effects,
    ) -> Result<ResolveOutcome, StoreError> {
        let Some(resolution) = &resolved.resolution else {
            return Err(StoreError::Corrupt(
                "resolve called without a resolution".into(),
            ));
        };
        let res_json = serde_json::to_string(resolution).map_err(corrupt)?;
        let at = ms(resolution.at);
        let id = resolved.id.as_str().to_string();
        let jobs = encode_jobs(effects.jobs);
        let audit = effects.audit;
        self.write(move |conn| {
            let changed = conn
                .prepare_cached(
                    "UPDATE interactions SET status = 'resolved', resolved_at = ?2, resolution = ?3
                     WHERE id = ?1 AND status = 'pending'",
                )
                .and_then(|mut s| s.execute(params![id, at, res_json]))
                .map_err(unavailable)?;
            if changed == 1 {
                apply_effects(conn, &jobs, audit, at)?;
                return Ok(ResolveOutcome::Resolved);
            }
            match get_in(conn, &id)? {
                Some(existing) => Ok(ResolveOutcome::AlreadyResolved(existing)),
                None => Ok(ResolveOutcome::NotFound),
            }
        })
        .await
    }

    async fn get(&self, id: &InteractionId) -> Result<Option<Arc<Interaction>>, StoreError> {
        let id = id.as_str().to_string();
        self.read(move |conn| get_in(conn, &id)).await
    }

    async fn list(&self, query: &ListQuery) -> Result<Page, StoreError> {
        let query = query.clone();
        self.read(move |conn| {
            let status = match query.status {
                StatusFilter::Pending => Some("pending"),
                StatusFilter::Resolved => Some("resolved"),
                StatusFilter::All => None,
            };
            let mut sql = String::from("SELECT doc, resolution FROM interactions WHERE 1 = 1");
            let mut args: Vec<Box<dyn rusqlite::ToSql>> = Vec::new();
            if let Some(status) = status {
                args.push(Box::new(status));
                sql.push_str(&format!(" AND status = ?{}", args.len()));
            }
            if let Some(c) = &query.after {
                args.push(Box::new(c.created_ms));
                args.push(Box::new(c.id.as_str().to_string()));
                sql.push_str(&format!(
                    " AND (created_at, id) < (?{}, ?{})",
                    args.len() - 1,
                    args.len()
                ));
            }
            args.push(Box::new(query.limit as i64 + 1));
            sql.push_str(&format!(
                " ORDER BY created_at DESC, id DESC LIMIT ?{}",
                args.len()
            ));
            let mut stmt = conn.prepare_cached(&sql).map_err(unavailable)?;
            let rows = stmt
                .query_map(rusqlite::params_from_iter(args.iter()), read_interaction)
                .map_err(unavailable)?;
            let mut out = Vec::new();
            for row in rows {
                let (doc, res) = row.map_err(unavailable)?;
                out.push(Arc::new(decode(&doc, res.as_deref())?));
            }
            Ok(Page::from_overfetch(out, query.limit))
        })
        .await
    }

    async fn pending(&self) -> Result<Vec<Arc<Interaction>>, StoreError> {
        self.read(|conn| {
            let mut stmt = conn
                .prepare(
                    "SELECT doc, resolution FROM interactions WHERE status = 'pending'
                     ORDER BY created_at, id",
                )
                .map_err(unavailable)?;
            let rows = stmt.query_map([], read_interaction).map_err(unavailable)?;
            let mut out = Vec::new();
            for row in rows {
                let (doc, res) = row.map_err(unavailable)?;
                out.push(Arc::new(decode(&doc, res.as_deref())?));
            }
            Ok(out)
        })
        .await
    }

    async fn prune(&self, before: Timestamp) -> Result<u64, StoreError> {
        let cutoff = ms(before);
        let now = ms(Timestamp::now());
        let mut total = 0u64;
        loop {
            // Bounded chunks keep each write transaction short.
            let n = self
                .write(move |conn| {
                    conn.execute(
                        "DELETE FROM channel_messages WHERE interaction_id IN (
                             SELECT id FROM interactions
                             WHERE status = 'resolved' AND resolved_at < ?1 LIMIT 1000)",
                        [cutoff],
                    )
                    .map_err(unavailable)?;
                    let n = conn
                        .execute(
                            "DELETE FROM interactions WHERE id IN (
                                 SELECT id FROM interactions
                                 WHERE status = 'resolved' AND resolved_at < ?1 LIMIT 1000)",
                            [cutoff],
                        )
                        .map_err(unavailable)?;
                    Ok(n as u64)
                })
                .await?;
            total += n;
            if n < 1000 {
                break;
            }
        }
        self.write(move |conn| {
            conn.execute(
                "DELETE FROM outbox WHERE state <> 'pending' AND updated_at < ?1",
                [cutoff],
            )
            .map_err(unavailable)?;
            conn.execute("DELETE FROM seen WHERE expires_at <= ?1", [now])
                .map_err(unavailable)?;
            // A range scan of the key index (the prefix has no GLOB metacharacters).
            conn.execute(
                "DELETE FROM kv WHERE key GLOB ?1
                 AND NOT EXISTS (SELECT 1 FROM interactions WHERE id = kv.value)",
                [format!("{BOUND_VALUE_PREFIX}*")],
            )
            .map_err(unavailable)?;
            Ok(())
        })
        .await?;
        Ok(total)
    }
}

#[async_trait]
impl ChannelStore for SqliteStore {
    async fn record_message(&self, m: ChannelMessage) -> Result<(), StoreError> {
        let state = m.state.as_ref().map(|s| s.to_string());
        self.write(move |conn| {
            conn.execute(
                "INSERT INTO channel_messages (channel, address, message_ref, interaction_id, state, created_at)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6)
                 ON CONFLICT (channel, address, message_ref) DO UPDATE
                 SET interaction_id = excluded.interaction_id, state = excluded.state",
                params![
                    m.channel,
                    m.address,
                    m.message_ref,
                    m.interaction_id.as_str(),
                    state,
                    ms(m.created_at)
                ],
            )
            .map_err(unavailable)?;
            Ok(())
        })
        .await
    }

    async fn messages(
        &self,
        channel: &str,
        id: &InteractionId,
    ) -> Result<Vec<ChannelMessage>, StoreError> {
        let channel = channel.to_string();
        let id = id.clone();
        self.read(move |conn| {
            let mut stmt = conn
                .prepare_cached(
                    "SELECT address, message_ref, state, created_at FROM channel_messages
                     WHERE interaction_id = ?1 AND channel = ?2 ORDER BY created_at, address",
                )
                .map_err(unavailable)?;
            let rows = stmt
                .query_map(params![id.as_str(), channel], |r| {
                    Ok((
                        r.get::<_, String>(0)?,
                        r.get::<_, String>(1)?,
                        r.get::<_, Option<String>>(2)?,
                        r.get::<_, i64>(3)?,
                    ))
                })
                .map_err(unavailable)?;
            let mut out = Vec::new();
            for row in rows {
                let (address, message_ref, state, created) = row.map_err(unavailable)?;
                out.push(ChannelMessage {
                    channel: channel.clone(),
                    address,
                    message_ref,
                    interaction_id: id.clone(),
                    state: parse_state(state)?,
                    created_at: from_ms(created),
                });
            }
            Ok(out)
        })
        .await
    }

    async fn message(
        &self,
        channel: &str,
        address: &str,
        message_ref: &str,
    ) -> Result<Option<ChannelMessage>, StoreError> {
        let (channel, address, message_ref) = (
            channel.to_string(),
            address.to_string(),
            message_ref.to_string(),
        );
        self.read(move |conn| {
            let row = conn
                .cached_row(
                    "SELECT interaction_id, state, created_at FROM channel_messages
                     WHERE channel = ?1 AND address = ?2 AND message_ref = ?3",
                    params![channel, address, message_ref],
                    |r| {
                        Ok((
                            r.get::<_, String>(0)?,
                            r.get::<_, Option<String>>(1)?,
                            r.get::<_, i64>(2)?,
                        ))
                    },
                )
                .optional()
                .map_err(unavailable)?;
            let Some((id, state, created)) = row else {
                return Ok(None);
            };
            Ok(Some(ChannelMessage {
                channel,
                address,
                message_ref,
                interaction_id: InteractionId::stored(&id).map_err(corrupt)?,
                state: parse_state(state)?,
                created_at: from_ms(created),
            }))
        })
        .await
    }

    async fn set_message_state(
        &self,
        channel: &str,
        address: &str,
        message_ref: &str,
        state: Option<Value>,
    ) -> Result<bool, StoreError> {
        let (channel, address, message_ref) = (
            channel.to_string(),
            address.to_string(),
            message_ref.to_string(),
        );
        let state = state.map(|s| s.to_string());
        self.write(move |conn| {
            let n = conn
                .execute(
                    "UPDATE channel_messages SET state = ?4
                     WHERE channel = ?1 AND address = ?2 AND message_ref = ?3",
                    params![channel, address, message_ref, state],
                )
                .map_err(unavailable)?;
            Ok(n == 1)
        })
        .await
    }
}

#[async_trait]
impl OutboxStore for SqliteStore {
    async fn enqueue(&self, jobs: Vec<OutboxJob>) -> Result<(), StoreError> {
        let jobs = encode_jobs(jobs);
        let now = ms(Timestamp::now());
        self.write(move |conn| insert_jobs(conn, &jobs, now).map_err(unavailable))
            .await
    }

    async fn claim_jobs(
        &self,
        now: Timestamp,
        quota: &ClaimQuota,
        lease: Duration,
    ) -> Result<Vec<ClaimedJob>, StoreError> {
        let now = ms(now);
        let until = now.saturating_add(lease.as_millis() as i64);
        let quota = quota.clone();
        self.write(move |conn| {
            let mut stmt = conn
                .prepare_cached(
                    "UPDATE outbox SET lease_until = ?2, lease_token = lease_token + 1
                     WHERE id IN (
                         SELECT id FROM outbox
                         WHERE state = 'pending' AND channel = ?4 AND next_at <= ?1
                           AND (lease_until IS NULL OR lease_until <= ?1)
                         ORDER BY next_at, id LIMIT ?3)
                     RETURNING id, lease_token, attempts, key, channel, kind, interaction_id, payload,
                               next_at, horizon_at",
                )
                .map_err(unavailable)?;
            let mut out = Vec::new();
            for (channel, limit) in quota_channels(conn, &quota)? {
                let rows = stmt
                    .query_map(params![now, until, limit as i64, channel], |r| {
                        Ok((
                            (r.get::<_, i64>(0)?, r.get::<_, i64>(1)?, r.get::<_, i64>(2)?),
                            r.get::<_, String>(3)?,
                            r.get::<_, String>(4)?,
                            r.get::<_, String>(5)?,
                            r.get::<_, Option<String>>(6)?,
                            r.get::<_, String>(7)?,
                            r.get::<_, i64>(8)?,
                            r.get::<_, i64>(9)?,
                        ))
                    })
                    .map_err(unavailable)?;
                for row in rows {
                    let ((id, lease, attempts), key, channel, kind, iid, payload, next_at, horizon) =
                        row.map_err(unavailable)?;
                    out.push(ClaimedJob {
                        id,
                        lease,
                        attempts: attempts.max(0) as u32,
                        job: OutboxJob {
                            key,
                            channel,
                            kind,
                            interaction_id: match iid {
                                Some(s) => Some(InteractionId::stored(&s).map_err(corrupt)?),
                                None => None,
                            },
                            payload: serde_json::from_str(&payload).map_err(corrupt)?,
                            not_before: from_ms(next_at),
                            horizon: from_ms(horizon),
                        },
                    });
                }
            }
            out.sort_by_key(|j| (j.job.not_before, j.id));
            Ok(out)
        })
        .await
    }

    async fn finish_job(
        &self,
        job: &ClaimedJob,
        update: JobUpdate,
        audit: Vec<AuditRecord>,
    ) -> Result<bool, StoreError> {
        let now = ms(Timestamp::now());
        let (id, lease) = (job.id, job.lease);
        self.write(move |conn| {
            // Only the newest claim of a still unfinished job records its result.
            let n = match update {
                JobUpdate::Done => conn.execute(
                    "UPDATE outbox SET state = 'done', attempts = attempts + 1, lease_until = NULL,
                     last_error = NULL, updated_at = ?3
                     WHERE id = ?1 AND lease_token = ?2 AND state = 'pending'",
                    params![id, lease, now],
                ),
                JobUpdate::Retry { at, error } => conn.execute(
                    "UPDATE outbox SET attempts = attempts + 1, lease_until = NULL, next_at = ?4,
                     last_error = ?5, updated_at = ?3
                     WHERE id = ?1 AND lease_token = ?2 AND state = 'pending'",
                    params![id, lease, now, ms(at), error],
                ),
                JobUpdate::Failed { error } => conn.execute(
                    "UPDATE outbox SET state = 'failed', attempts = attempts + 1, lease_until = NULL,
                     last_error = ?4, updated_at = ?3
                     WHERE id = ?1 AND lease_token = ?2 AND state = 'pending'",
                    params![id, lease, now, error],
                ),
            }
            .map_err(unavailable)?;
            if n == 0 {
                return Ok(false);
            }
            append_audit_in(conn, audit)?;
            Ok(true)
        })
        .await
    }

    async fn next_job_at(&self, quota: &ClaimQuota) -> Result<Option<Timestamp>, StoreError> {
        let quota = quota.clone();
        self.read(move |conn| {
            // Per channel: the earliest unleased job (an index seek), and the leased ones
            // (few: those in flight), which come back when their lease runs out.
            let mut stmt = conn
                .prepare_cached(
                    "SELECT MIN(t) FROM (
                         SELECT (SELECT next_at FROM outbox
                                 WHERE state = 'pending' AND channel = ?1 AND lease_until IS NULL
                                 ORDER BY next_at LIMIT 1) AS t
                         UNION ALL
                         SELECT MIN(MAX(next_at, lease_until)) FROM outbox
                         WHERE state = 'pending' AND channel = ?1 AND lease_until IS NOT NULL)",
                )
                .map_err(unavailable)?;
            let mut next: Option<i64> = None;
            for (channel, _) in quota_channels(conn, &quota)? {
                let t: Option<i64> = stmt
                    .query_row([&channel], |r| r.get(0))
                    .map_err(unavailable)?;
                next = match (next, t) {
                    (Some(a), Some(b)) => Some(a.min(b)),
                    (a, b) => a.or(b),
                };
            }
            Ok(next.map(from_ms))
        })
        .await
    }

    async fn job_backlog(&self) -> Result<Vec<(String, u64)>, StoreError> {
        self.read(|conn| {
            let mut stmt = conn
                .prepare_cached(
                    "SELECT channel, COUNT(*) FROM outbox WHERE state = 'pending'
                     GROUP BY channel ORDER BY channel",
                )
                .map_err(unavailable)?;
            let rows = stmt
                .query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, i64>(1)?)))
                .map_err(unavailable)?;
            let mut out = Vec::new();
            for row in rows {
                let (c, n) = row.map_err(unavailable)?;
                out.push((c, n.max(0) as u64));
            }
            Ok(out)
        })
        .await
    }
}

#[async_trait]
impl AuditStore for SqliteStore {
    async fn append_audit(&self, records: Vec<AuditRecord>) -> Result<(), StoreError> {
        self.write(move |conn| append_audit_in(conn, records)).await
    }

    async fn audit(&self, query: &AuditQuery) -> Result<Vec<AuditEntry>, StoreError> {
        let q = query.clone();
        self.read(move |conn| read_audit(conn, &q)).await
    }
}

#[async_trait]
impl KvStore for SqliteStore {
    async fn get_value(&self, key: &str) -> Result<Option<String>, StoreError> {
        let key = key.to_string();
        self.read(move |conn| {
            conn.cached_row("SELECT value FROM kv WHERE key = ?1", [&key], |r| r.get(0))
                .optional()
                .map_err(unavailable)
        })
        .await
    }

    async fn set_value(&self, key: &str, value: Option<String>) -> Result<(), StoreError> {
        let key = key.to_string();
        self.write(move |conn| {
            match value {
                Some(v) => conn.execute(
                    "INSERT INTO kv (key, value) VALUES (?1, ?2)
                     ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                    params![key, v],
                ),
                None => conn.execute("DELETE FROM kv WHERE key = ?1", [&key]),
            }
            .map_err(unavailable)?;
            Ok(())
        })
        .await
    }

    async fn secret(&self, name: &str) -> Result<Vec<u8>, StoreError> {
        let name = name.to_string();
        let fresh = random_secret();
        self.write(move |conn| {
            conn.execute(
                "INSERT INTO secrets (name, value) VALUES (?1, ?2) ON CONFLICT (name) DO NOTHING",
                params![name, fresh],
            )
            .map_err(unavailable)?;
            conn.cached_row("SELECT value FROM secrets WHERE name = ?1", [&name], |r| {
                r.get::<_, Vec<u8>>(0)
            })
            .map_err(unavailable)
        })
        .await
    }

    async fn first_sighting(
        &self,
        scope: &str,
        key: &str,
        expires_at: Timestamp,
    ) -> Result<bool, StoreError> {
        let (scope, key) = (scope.to_string(), key.to_string());
        let now = ms(Timestamp::now());
        let exp = ms(expires_at);
        self.write(move |conn| {
            conn.execute(
                "DELETE FROM seen WHERE scope = ?1 AND key = ?2 AND expires_at <= ?3",
                params![scope, key, now],
            )
            .map_err(unavailable)?;
            let n = conn
                .execute(
                    "INSERT INTO seen (scope, key, expires_at) VALUES (?1, ?2, ?3)
                     ON CONFLICT (scope, key) DO NOTHING",
                    params![scope, key, exp],
                )
                .map_err(unavailable)?;
            Ok(n == 1)
        })
        .await
    }

    async fn forget_sighting(&self, scope: &str, key: &str) -> Result<(), StoreError> {
        let (scope, key) = (scope.to_string(), key.to_string());
        self.write(move |conn| {
            conn.execute(
                "DELETE FROM seen WHERE scope = ?1 AND key = ?2",
                params![scope, key],
            )
            .map_err(unavailable)?;
            Ok(())
        })
        .await
    }

    async fn check_writable(&self) -> Result<(), StoreError> {
        // A change committed a moment ago says it all; otherwise a small probe write.
        let recent = self
            .last_write
            .locked()
            .is_some_and(|at| at.elapsed() < WRITE_FRESH);
        if recent {
            return Ok(());
        }
        self.set_value("health.write_probe", Some(ms(Timestamp::now()).to_string()))
            .await
    }
}

/// Only this process writes it: no change feed, its own events, always the leader.
impl ClusterStore for SqliteStore {}

fn parse_state(s: Option<String>) -> Result<Option<Value>, StoreError> {
    match s {
        Some(s) => Ok(Some(serde_json::from_str(&s).map_err(corrupt)?)),
        None => Ok(None),
    }
}
