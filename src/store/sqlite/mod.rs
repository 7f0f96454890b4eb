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
//!
//! Here: the store and its interaction, channel and small-value roles. Beside it: `writer`
//! (the writer thread, group commit, the checkpointer), `connect` (connections, the file lock,
//! migrations), `audit` (the chain's appends and reads) and `outbox` (jobs, claims, leases).

use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, mpsc};

use async_trait::async_trait;
use jiff::Timestamp;
use rusqlite::{Connection, OptionalExtension, params};
use serde_json::Value;
use tokio::sync::oneshot;

use super::{
    BOUND_VALUE_PREFIX, ChannelMessage, CreateOutcome, Effects, EscalateOutcome, ListQuery, Page,
    ResolveOutcome, StatusFilter, StoreError, random_secret,
};
use crate::audit::AuditRecord;
use crate::interaction::quorum::{Ballot, VoteOutcome};
use crate::interaction::{Interaction, InteractionId};
use crate::store::StoreHealth;
use crate::store::prelude::*;
use crate::store::probe::Probe;
use crate::sync::LockExt;

mod audit;
mod connect;
mod escalate;
mod grants;
mod kv;
mod outbox;
mod rows;
mod sessions;
mod votes;
mod writer;

use audit::append_audit_in;
pub use audit::{interactions_without_created_entry, read_audit, read_audit_head};
pub use connect::{
    Inspection, SCHEMA_VERSION, Synchronous, inspect, open_read_only, schema_version,
};
use connect::{
    READERS, can_freeze, lock_database, migrate, open_frozen_connection, open_read_connection,
    open_write_connection,
};
pub use kv::{read_secret, read_values_under};
use outbox::{EncodedJob, encode_jobs, insert_jobs};
use rows::{decode, get_in, read_interaction};
use writer::{Op, WriteOp, run_writer, start_checkpointer};

fn unavailable(e: impl std::fmt::Display) -> StoreError {
    StoreError::Unavailable(e.to_string())
}

fn corrupt(e: impl std::fmt::Display) -> StoreError {
    StoreError::Corrupt(e.to_string())
}

/// The SQLite store.
pub struct SqliteStore {
    writer: mpsc::Sender<Box<dyn WriteOp>>,
    readers: Arc<Mutex<Vec<Connection>>>,
    path: PathBuf,
    /// Opened as an immutable file (a read-only file system): every write fails.
    frozen: bool,
    /// `/healthz`'s probe, bounded in how often it runs.
    probe: Probe,
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

fn apply_effects(
    conn: &Connection,
    jobs: &[EncodedJob],
    audit: Vec<AuditRecord>,
    now: i64,
) -> Result<(), StoreError> {
    insert_jobs(conn, jobs, now).map_err(unavailable)?;
    append_audit_in(conn, audit)
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
        std::thread::Builder::new()
            .name("imrelay-sqlite-writer".into())
            .spawn(move || run_writer(conn, rx, checkpoints))
            .map_err(|e| unavailable(format!("cannot start the writer thread: {e}")))?;
        Ok(Self {
            writer: tx,
            readers: Arc::new(Mutex::new(Vec::new())),
            path,
            frozen,
            probe: Probe::default(),
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

    async fn vote(&self, ballot: Ballot) -> Result<VoteOutcome, StoreError> {
        self.record_vote(ballot).await
    }

    async fn escalate(
        &self,
        i: Arc<Interaction>,
        e: Effects,
    ) -> Result<EscalateOutcome, StoreError> {
        self.escalate_doc(i, e).await
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
            let mut loaded = 0usize;
            for row in rows {
                let (doc, res) = row.map_err(unavailable)?;
                loaded = loaded.saturating_add(doc.len() + res.as_ref().map_or(0, String::len));
                out.push(Arc::new(decode(&doc, res.as_deref())?));
                // Rows are read one at a time: stop once the page holds its bytes.
                if query.max_bytes.is_some_and(|max| loaded > max) && out.len() <= query.limit {
                    return Ok(Page::cut_short(out));
                }
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

    async fn pending_ids(&self) -> Result<Vec<InteractionId>, StoreError> {
        self.read(|conn| {
            let mut stmt = conn
                .prepare_cached(
                    "SELECT id FROM interactions WHERE status = 'pending' ORDER BY created_at, id",
                )
                .map_err(unavailable)?;
            let rows = stmt
                .query_map([], |r| r.get::<_, String>(0))
                .map_err(unavailable)?;
            let mut out = Vec::new();
            for row in rows {
                out.push(InteractionId::stored(&row.map_err(unavailable)?).map_err(corrupt)?);
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
            // Grants revoked or expired before the retention horizon (their audit entries stay).
            conn.execute(
                "DELETE FROM grants WHERE revoked_at < ?1 OR expires_at < ?1",
                [cutoff],
            )
            .map_err(unavailable)?;
            conn.execute("DELETE FROM sessions WHERE last_activity < ?1", [cutoff])
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

    async fn swap_value(
        &self,
        key: &str,
        expected: Option<&str>,
        value: Option<String>,
    ) -> Result<bool, StoreError> {
        kv::swap_value(self, key, expected, value).await
    }

    async fn values_under(
        &self,
        prefix: &str,
        limit: usize,
    ) -> Result<Vec<(String, String)>, StoreError> {
        kv::values_under(self, prefix, limit).await
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
        self.set_value("health.write_probe", Some(ms(Timestamp::now()).to_string()))
            .await
    }

    /// A read, then a small write through the writer (committed with whatever else is
    /// queued): a disk that filled or turned read-only a moment ago fails it, whatever was
    /// committed before. At most one probe a second.
    async fn health(&self) -> StoreHealth {
        self.probe
            .health(|| async {
                if let Err(e) = self.get_value("health.write_probe").await {
                    return StoreHealth::Unavailable(e);
                }
                match self.check_writable().await {
                    Ok(()) => StoreHealth::Ok,
                    Err(e) => StoreHealth::ReadOnly(e),
                }
            })
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
