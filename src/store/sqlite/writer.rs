//! The writer thread and its group commit: writes queue up to the one write connection and
//! are committed together, each in its own savepoint; and the checkpointer thread that copies
//! the write-ahead log back into the database outside any commit.

use std::path::Path;
use std::sync::mpsc;
use std::time::Duration;

use rusqlite::{Connection, TransactionBehavior};
use tokio::sync::oneshot;

use super::run_cached;
use crate::store::StoreError;

/// Most writes committed in one transaction.
pub(super) const MAX_BATCH: usize = 512;

/// One queued write: runs inside the group transaction, answers after the commit.
pub(super) trait WriteOp: Send {
    /// Runs the write; `false` if it failed (its savepoint is then rolled back).
    fn apply(&mut self, conn: &Connection) -> bool;
    /// Fails the write without running it (its savepoint could not be opened).
    fn skip(&mut self, error: String);
    /// Answers the caller once the group's commit is known.
    fn complete(self: Box<Self>, commit: Result<(), String>);
}

pub(super) struct Op<R, F> {
    pub(super) f: Option<F>,
    pub(super) out: Option<Result<R, StoreError>>,
    pub(super) reply: oneshot::Sender<Result<R, StoreError>>,
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

/// How long the checkpointer lets log frames gather before copying them back: a page the
/// writer changes many times in that window is copied once.
pub(super) const CHECKPOINT_EVERY: Duration = Duration::from_millis(200);

/// Log size (frames, 4 KiB pages) past which the checkpointer also restarts the log (writing
/// it again from its start), briefly waiting for the writer, so the file does not keep
/// growing under sustained load.
pub(super) const CHECKPOINT_RESTART_FRAMES: i64 = 4096;

/// Starts the checkpointer: a thread with its own connection that runs passive checkpoints
/// after the writer commits, and a truncating one when the log has grown long. Returns the
/// nudge the writer sends after each commit; `None` (the writer then checkpoints itself, as
/// SQLite does by default) if the thread cannot start.
pub(super) fn start_checkpointer(path: &Path) -> Option<mpsc::SyncSender<()>> {
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

pub(super) fn run_checkpointer(conn: Connection, nudges: mpsc::Receiver<()>) {
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
pub(super) fn checkpoint(conn: &Connection, mode: &str) -> rusqlite::Result<(i64, i64)> {
    conn.query_row(&format!("PRAGMA wal_checkpoint({mode})"), [], |r| {
        Ok((r.get::<_, i64>(1)?, r.get::<_, i64>(2)?))
    })
}

pub(super) fn run_writer(
    mut conn: Connection,
    rx: mpsc::Receiver<Box<dyn WriteOp>>,
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
        if commit.is_ok()
            && conn.total_changes() > changes
            && let Some(nudge) = &checkpoints
        {
            // Full means a nudge is already waiting: nothing to add.
            let _ = nudge.try_send(());
        }
        for op in batch.drain(..) {
            op.complete(commit.clone());
        }
    }
}

pub(super) fn write_batch(
    conn: &mut Connection,
    batch: &mut [Box<dyn WriteOp>],
) -> Result<(), String> {
    // IMMEDIATE: the write lock is taken at BEGIN, where SQLite's busy handler waits for it.
    // A deferred transaction whose first write came after a read (an audit append reads the
    // chain's head first, a vote its interaction) had to upgrade its read lock instead, and an
    // upgrade that finds the lock held (the checkpointer holds it while it restarts the log)
    // fails at once with "database is locked", busy handler or not.
    let tx = conn
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .map_err(|e| e.to_string())?;
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
