//! Group commit: the creates and resolutions of one store are applied many to a transaction.
//!
//! Every change of every replica waits for the cluster's two locks (the audit chain's and the
//! events'), held until its commit, so the cluster commits one transaction at a time. Callers
//! therefore queue their changes to one writer task per store, which takes whatever is queued
//! when it is free (it never waits to gather more) and applies it in one transaction: the
//! conditional inserts and updates as one statement each, the outbox jobs of every change
//! that took effect, their audit entries under one acquisition of the audit lock, their
//! events under one acquisition of the events lock, and one commit. Each caller is answered
//! only after that commit, with the outcome its change would have had alone.
//!
//! - A batch never holds two changes of one interaction: a later one waits for the next
//!   batch (so it sees the earlier one's effect), and changes of one interaction keep their
//!   order.
//! - If the database refuses a batch before its commit (a lock timeout, a deadlock, a bad
//!   row) and the connection still works, each of its changes is applied again alone, so only
//!   the changes concerned fail. If the connection failed, no connection could be had, or
//!   the commit's outcome is unknown, every change of the batch fails as unavailable.
//! - A change once queued is applied and committed even if its caller stops waiting.
//! - The queue is bounded ([`QUEUE`]; a caller beyond it waits for a place), and so is a batch
//!   ([`MAX_BATCH`]).
//! - While a batch waits (for a row lock held elsewhere, at most the session's lock timeout),
//!   the store's other changes wait behind it.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::Arc;

use deadpool_postgres::{Object, Pool, Transaction};
use futures_util::future::try_join;
use tokio::sync::{mpsc, oneshot};
use tokio_postgres::types::Json;

use super::connect::Target;
use super::{Schema, audit, col, db, decode, events, listener, ms, outbox, prepared};
use crate::interaction::{EventKind, Interaction, Resolution};
use crate::store::{CreateOutcome, Effects, OutboxJob, ResolveOutcome, StoreError};

/// Most changes applied in one transaction.
const MAX_BATCH: usize = 256;
/// Most changes waiting for the writer; beyond it, callers wait for a place.
const QUEUE: usize = 1024;

/// The answer a caller waits for.
type Answer<T> = oneshot::Sender<Result<T, StoreError>>;

/// How a change is answered, which also says what it is.
enum Reply {
    /// Insert the interaction unless its id exists.
    Create(Answer<CreateOutcome>),
    /// Record the interaction's resolution if it is still pending.
    Resolve(Answer<ResolveOutcome>),
}

/// One queued change.
struct Write {
    interaction: Arc<Interaction>,
    effects: Effects,
    reply: Reply,
}

/// What a change did: a [`CreateOutcome`] or a [`ResolveOutcome`], in one type so that a
/// batch's outcomes line up with its changes.
enum Outcome {
    Created,
    Exists(Arc<Interaction>),
    Resolved,
    AlreadyResolved(Arc<Interaction>),
    NotFound,
}

impl Write {
    /// When the change happened (unix ms): the creation's time or the resolution's.
    fn at(&self) -> i64 {
        match (&self.reply, self.interaction.resolution.as_deref()) {
            (Reply::Resolve(_), Some(r)) => ms(r.at),
            _ => ms(self.interaction.created_at),
        }
    }

    /// Answers the caller (who may have stopped waiting).
    fn answer(self, result: Result<Outcome, StoreError>) {
        let mismatch = || StoreError::Unavailable("the writer answered the wrong change".into());
        match self.reply {
            Reply::Create(tx) => {
                let _ = tx.send(result.and_then(|o| match o {
                    Outcome::Created => Ok(CreateOutcome::Created),
                    Outcome::Exists(i) => Ok(CreateOutcome::Exists(i)),
                    _ => Err(mismatch()),
                }));
            }
            Reply::Resolve(tx) => {
                let _ = tx.send(result.and_then(|o| match o {
                    Outcome::Resolved => Ok(ResolveOutcome::Resolved),
                    Outcome::AlreadyResolved(i) => Ok(ResolveOutcome::AlreadyResolved(i)),
                    Outcome::NotFound => Ok(ResolveOutcome::NotFound),
                    _ => Err(mismatch()),
                }));
            }
        }
    }
}

/// The queue to a store's writer task; the task ends when the queue is dropped and empty.
#[derive(Debug)]
pub(super) struct Writer {
    queue: mpsc::Sender<Write>,
}

impl Writer {
    /// Starts the writer task (on the current tokio runtime).
    pub(super) fn start(pool: Pool, target: Arc<Target>, schema: Schema) -> Self {
        let (queue, rx) = mpsc::channel(QUEUE);
        let task = Task::new(pool, target, schema);
        tokio::spawn(task.run(rx));
        Self { queue }
    }

    /// Creates `interaction` unless its id exists; answers once committed.
    pub(super) async fn create(
        &self,
        interaction: Arc<Interaction>,
        effects: Effects,
    ) -> Result<CreateOutcome, StoreError> {
        let (tx, rx) = oneshot::channel();
        self.send(interaction, effects, Reply::Create(tx)).await?;
        rx.await.map_err(|_| stopped())?
    }

    /// Records the resolution `resolved` carries if the interaction is pending; answers once
    /// committed.
    pub(super) async fn resolve(
        &self,
        resolved: Arc<Interaction>,
        effects: Effects,
    ) -> Result<ResolveOutcome, StoreError> {
        if resolved.resolution.is_none() {
            return Err(StoreError::Corrupt(
                "resolve called without a resolution".into(),
            ));
        }
        let (tx, rx) = oneshot::channel();
        self.send(resolved, effects, Reply::Resolve(tx)).await?;
        rx.await.map_err(|_| stopped())?
    }

    async fn send(
        &self,
        interaction: Arc<Interaction>,
        effects: Effects,
        reply: Reply,
    ) -> Result<(), StoreError> {
        self.queue
            .send(Write {
                interaction,
                effects,
                reply,
            })
            .await
            .map_err(|_| stopped())
    }
}

fn stopped() -> StoreError {
    StoreError::Unavailable("the PostgreSQL writer has stopped".into())
}

/// Why a batch's transaction failed.
struct Failure {
    error: StoreError,
    /// The commit was sent: whether it took effect is unknown, so nothing may be retried.
    committing: bool,
}

impl From<StoreError> for Failure {
    fn from(error: StoreError) -> Self {
        Self {
            error,
            committing: false,
        }
    }
}

/// The statements a batch runs, with the schema filled in.
struct Sql {
    create: String,
    resolve: String,
    existing: String,
}

/// The writer task's state.
struct Task {
    pool: Pool,
    target: Arc<Target>,
    schema: Schema,
    sql: Sql,
}

impl Task {
    fn new(pool: Pool, target: Arc<Target>, schema: Schema) -> Self {
        let sql = Sql {
            // Inserted, or nothing: the ids that come back were inserted (and announced).
            create: schema.sql(
                "WITH ins AS (
                     INSERT INTO {s}.interactions
                         (id, created_at, deadline, status, resolved_at, doc, resolution)
                     SELECT * FROM unnest($1::text[], $2::bigint[], $3::bigint[], $4::text[],
                                          $5::bigint[], $6::json[], $7::json[])
                     ON CONFLICT (id) DO NOTHING
                     RETURNING id)
                 SELECT id, pg_notify($8, id) FROM ins",
            ),
            // Resolved if pending: the ids that come back were resolved (and announced: with
            // the resolution on the settled channel first, where it fits, then the id).
            // pg_notify takes a null payload as an empty one, hence the CASE; the length
            // check, in the server's encoding, keeps an oversized payload from failing the
            // batch.
            resolve: schema.sql(
                "WITH upd AS (
                     UPDATE {s}.interactions i
                     SET status = 'resolved', resolved_at = r.at, resolution = r.res
                     FROM unnest($1::text[], $2::bigint[], $3::json[], $5::text[])
                          AS r(id, at, res, note)
                     WHERE i.id = r.id AND i.status = 'pending'
                     RETURNING i.id, r.note)
                 SELECT id,
                        CASE WHEN octet_length(note) < 8000 THEN pg_notify($6, note) END,
                        pg_notify($4, id)
                 FROM upd",
            ),
            // A statement of its own, so it sees rows committed while the ones above waited.
            existing: schema
                .sql("SELECT id, doc, resolution FROM {s}.interactions WHERE id = ANY($1::text[])"),
        };
        Self {
            pool,
            target,
            schema,
            sql,
        }
    }

    /// Applies batches until the queue is closed and empty.
    async fn run(self, mut rx: mpsc::Receiver<Write>) {
        let mut carried = VecDeque::new();
        loop {
            if carried.is_empty() {
                match rx.recv().await {
                    Some(w) => carried.push_back(w),
                    None => return,
                }
            }
            let batch = take_batch(&mut carried, &mut rx);
            let outcomes = self.apply(&batch).await;
            for (w, outcome) in batch.into_iter().zip(outcomes) {
                w.answer(outcome);
            }
        }
    }

    /// Applies `batch`: one outcome per change, in its order.
    async fn apply(&self, batch: &[Write]) -> Vec<Result<Outcome, StoreError>> {
        let fail_all = |e: &StoreError| -> Vec<Result<Outcome, StoreError>> {
            batch.iter().map(|_| Err(e.clone())).collect()
        };
        let mut client = match self.pool.get().await {
            Ok(c) => c,
            Err(e) => return fail_all(&self.target.pool_error(e)),
        };
        let failure = match self.transact(&mut client, batch).await {
            Ok(outcomes) => return outcomes,
            Err(f) => f,
        };
        if batch.len() == 1 || failure.committing || client.is_closed() {
            if failure.committing {
                tracing::error!(error = %failure.error, changes = batch.len(),
                    "store commit failed; the changes were not acknowledged");
            }
            return fail_all(&failure.error);
        }
        tracing::warn!(error = %failure.error, changes = batch.len(),
            "a group of changes failed; applying each alone");
        let mut outcomes = Vec::with_capacity(batch.len());
        for w in batch {
            outcomes.push(
                match self.transact(&mut client, std::slice::from_ref(w)).await {
                    Ok(mut one) => one
                        .pop()
                        .unwrap_or_else(|| Err(StoreError::Unavailable("no outcome".into()))),
                    Err(f) => Err(f.error),
                },
            );
        }
        outcomes
    }

    /// Runs `batch` in one transaction on `client` and commits it.
    async fn transact(
        &self,
        client: &mut Object,
        batch: &[Write],
    ) -> Result<Vec<Result<Outcome, StoreError>>, Failure> {
        let tx = client.transaction().await.map_err(db)?;
        // The row without its resolution, as the `doc` columns hold it.
        let docs: Vec<Interaction> = batch
            .iter()
            .map(|w| Interaction {
                resolution: None,
                ..(*w.interaction).clone()
            })
            .collect();
        let changed = self.write_rows(&tx, batch, &docs).await?;
        let outcomes = self.outcomes(&tx, batch, &changed).await?;
        let took_effect: Vec<usize> = (0..batch.len())
            .filter(|&k| changed.contains(id(&batch[k])))
            .collect();
        if !took_effect.is_empty() {
            self.bring_along(&tx, batch, &docs, &took_effect).await?;
        }
        tx.commit().await.map_err(|e| Failure {
            error: db(e),
            committing: true,
        })?;
        Ok(outcomes)
    }

    /// The conditional inserts and updates, one statement each, in one round trip; the ids
    /// of the interactions they changed.
    async fn write_rows(
        &self,
        tx: &Transaction<'_>,
        batch: &[Write],
        docs: &[Interaction],
    ) -> Result<HashSet<String>, Failure> {
        let channel = self.schema.channel();
        let (creates, resolves): (Vec<usize>, Vec<usize>) =
            (0..batch.len()).partition(|&k| matches!(batch[k].reply, Reply::Create(_)));
        let create = prepared(tx, &self.sql.create).await?;
        let resolve = prepared(tx, &self.sql.resolve).await?;
        let c_ids: Vec<&str> = creates.iter().map(|&k| id(&batch[k])).collect();
        let c_created: Vec<i64> = creates.iter().map(|&k| batch[k].at()).collect();
        let c_deadlines: Vec<i64> = creates
            .iter()
            .map(|&k| ms(batch[k].interaction.deadline))
            .collect();
        let c_status: Vec<&str> = creates
            .iter()
            .map(|&k| match batch[k].interaction.resolution {
                Some(_) => "resolved",
                None => "pending",
            })
            .collect();
        let c_resolved_at: Vec<Option<i64>> = creates
            .iter()
            .map(|&k| batch[k].interaction.resolution.as_ref().map(|r| ms(r.at)))
            .collect();
        let c_docs: Vec<Json<&Interaction>> = creates.iter().map(|&k| Json(&docs[k])).collect();
        let c_resolutions: Vec<Option<Json<&Resolution>>> =
            creates.iter().map(|&k| resolution(&batch[k])).collect();
        let r_ids: Vec<&str> = resolves.iter().map(|&k| id(&batch[k])).collect();
        let r_ats: Vec<i64> = resolves.iter().map(|&k| batch[k].at()).collect();
        let r_resolutions: Vec<Option<Json<&Resolution>>> =
            resolves.iter().map(|&k| resolution(&batch[k])).collect();
        let r_notes: Vec<Option<String>> = resolves
            .iter()
            .map(|&k| {
                let w = &batch[k];
                let r = w.interaction.resolution.as_deref()?;
                listener::settled_payload(id(w), r)
            })
            .collect();
        let settled = self.schema.settled_channel();
        let inserting = async {
            if creates.is_empty() {
                return Ok(Vec::new());
            }
            tx.query(
                &create,
                &[
                    &c_ids,
                    &c_created,
                    &c_deadlines,
                    &c_status,
                    &c_resolved_at,
                    &c_docs,
                    &c_resolutions,
                    &channel,
                ],
            )
            .await
        };
        let updating = async {
            if resolves.is_empty() {
                return Ok(Vec::new());
            }
            tx.query(
                &resolve,
                &[&r_ids, &r_ats, &r_resolutions, &channel, &r_notes, &settled],
            )
            .await
        };
        let (inserted, updated) = try_join(inserting, updating).await.map_err(db)?;
        Ok(inserted
            .iter()
            .chain(&updated)
            .map(|r| col::<String>(r, 0))
            .collect::<Result<_, _>>()?)
    }

    /// Each change's outcome: what it did, or what the changes that did nothing found
    /// instead.
    async fn outcomes(
        &self,
        tx: &Transaction<'_>,
        batch: &[Write],
        changed: &HashSet<String>,
    ) -> Result<Vec<Result<Outcome, StoreError>>, Failure> {
        let unchanged: Vec<&str> = batch
            .iter()
            .map(id)
            .filter(|i| !changed.contains(*i))
            .collect();
        let mut existing: HashMap<String, Result<Arc<Interaction>, StoreError>> = HashMap::new();
        if !unchanged.is_empty() {
            let stmt = prepared(tx, &self.sql.existing).await?;
            for r in tx.query(&stmt, &[&unchanged]).await.map_err(db)? {
                existing.insert(col(&r, 0)?, decode(&r, 1));
            }
        }
        Ok(batch
            .iter()
            .map(|w| match (&w.reply, changed.contains(id(w))) {
                (Reply::Create(_), true) => Ok(Outcome::Created),
                (Reply::Resolve(_), true) => Ok(Outcome::Resolved),
                (Reply::Create(_), false) => match existing.remove(id(w)) {
                    Some(Ok(i)) => Ok(Outcome::Exists(i)),
                    Some(Err(e)) => Err(e),
                    None => Err(StoreError::Unavailable(
                        "insert conflict without a row".into(),
                    )),
                },
                (Reply::Resolve(_), false) => match existing.remove(id(w)) {
                    Some(Ok(i)) => Ok(Outcome::AlreadyResolved(i)),
                    Some(Err(e)) => Err(e),
                    None => Ok(Outcome::NotFound),
                },
            })
            .collect())
    }

    /// What the changes that took effect bring along: their outbox jobs, then their audit
    /// entries and events under the cluster's locks, held until the commit.
    async fn bring_along(
        &self,
        tx: &Transaction<'_>,
        batch: &[Write],
        docs: &[Interaction],
        took_effect: &[usize],
    ) -> Result<(), Failure> {
        let jobs: Vec<(&OutboxJob, i64)> = took_effect
            .iter()
            .flat_map(|&k| {
                batch[k]
                    .effects
                    .jobs
                    .iter()
                    .map(move |j| (j, batch[k].at()))
            })
            .collect();
        outbox::insert_at(tx, &self.schema, &jobs).await?;
        let records = took_effect
            .iter()
            .flat_map(|&k| batch[k].effects.audit.iter().cloned())
            .collect();
        let list: Vec<events::New<'_>> = took_effect
            .iter()
            .map(|&k| events::New {
                // One created resolved at once (decided by a policy rule) is announced
                // as resolved: it was never pending.
                kind: match batch[k].reply {
                    Reply::Create(_) if batch[k].interaction.resolution.is_none() => {
                        EventKind::Created
                    }
                    Reply::Create(_) | Reply::Resolve(_) => EventKind::Resolved,
                },
                id: id(&batch[k]),
                doc: &docs[k],
                resolution: batch[k].interaction.resolution.as_deref(),
                at: batch[k].at(),
            })
            .collect();
        let appender = events::Appender::prepare(tx, &self.schema).await?;
        let appending = appender.append(tx, &list);
        audit::append_then(tx, &self.schema, records, appending).await?;
        Ok(())
    }
}

/// The resolution `w` records (or the one its interaction is created with), as a column.
fn resolution(w: &Write) -> Option<Json<&Resolution>> {
    w.interaction.resolution.as_deref().map(Json)
}

/// The id of the interaction `w` changes.
fn id(w: &Write) -> &str {
    w.interaction.id.as_str()
}

/// The next batch: changes from `carried` (those an earlier batch left), then from the queue,
/// as many as are there (up to [`MAX_BATCH`] looked at), without two of one interaction; the
/// ones left out stay in `carried`, in order, for the next batch.
fn take_batch(carried: &mut VecDeque<Write>, rx: &mut mpsc::Receiver<Write>) -> Vec<Write> {
    let mut batch = Vec::new();
    let mut ids = HashSet::new();
    let mut deferred = VecDeque::new();
    for _ in 0..MAX_BATCH {
        let next = match carried.pop_front() {
            Some(w) => w,
            None => match rx.try_recv() {
                Ok(w) => w,
                Err(_) => break,
            },
        };
        if ids.insert(id(&next).to_string()) {
            batch.push(next);
        } else {
            deferred.push_back(next);
        }
    }
    deferred.append(carried);
    *carried = deferred;
    batch
}
