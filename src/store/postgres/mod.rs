//! The PostgreSQL [`Store`]: the engine for several imrelay replicas sharing one database.
//!
//! - Queries run on a bounded pool of connections ([`PostgresOptions::pool_size`]); taking
//!   one waits at most [`PostgresOptions::pool_wait`], then fails as unavailable (a 503),
//!   never hangs.
//! - Every table lives in one schema ([`PostgresOptions::schema`]); statements name it
//!   explicitly, so nothing depends on a connection's `search_path` (which a
//!   transaction-pooling proxy would not keep).
//! - The schema is migrated at start-up under an advisory lock (`migrate.rs`), and a
//!   process older than the schema refuses to start.
//! - The same contract as SQLite, kept by the database rather than by one process: creates and
//!   resolutions are conditional statements. A store's creates and resolutions are applied
//!   many to a transaction by one writer task (group commit, `writer.rs`), since every
//!   replica's changes wait for the cluster's locks until their commit; outbox claims take
//!   rows with `FOR UPDATE SKIP LOCKED`, so replicas never claim the same job; audit appends
//!   take a transaction-level advisory lock, so there is one chain across replicas.
//! - Every create and resolution also sends a notification (`pg_notify`, in the same
//!   transaction, so it is delivered at commit) carrying the interaction's id on the channel
//!   `<schema>.changes`, and every resolution one carrying the id and the resolution (when
//!   they fit a notification) on `<schema>.settled`: the [`listener`] turns them into a
//!   stream for other processes.
//!
//! Times are unix milliseconds (`bigint`), as in SQLite; the comparisons that lease and
//! schedule outbox jobs use the caller's clock, as the other backends do, so replicas need
//! synchronized clocks (NTP).
//!
//! Here: the store and its interaction, channel and small-value roles. Beside it: `schema`
//! (the schema's name and the names derived from it), `connect` (the pool, the server's URL
//! without its password), `migrate`, `writer` (group commit), `rows` (an interaction's row
//! read back), `health` (`/healthz`'s probe), `audit` and `outbox` (with their roles),
//! `events`, `listener`, `lease`, `grants`, `sessions`, `votes` and `escalate`.

mod audit;
mod connect;
mod escalate;
mod events;
mod grants;
mod health;
mod lease;
pub mod listener;
mod migrate;
mod outbox;
mod rows;
mod schema;
mod sessions;
mod votes;
mod writer;

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use deadpool_postgres::{GenericClient, Object, Pool};
use jiff::Timestamp;
use secrecy::SecretString;
use serde_json::Value;
use tokio_postgres::Row;
use tokio_postgres::types::{Json, ToSql};

use super::{
    BOUND_VALUE_PREFIX, ChannelMessage, CreateOutcome, Effects, EscalateOutcome, ListQuery, Page,
    ResolveOutcome, StatusFilter, StoreError, random_secret,
};
use crate::interaction::quorum::{Ballot, VoteOutcome};
use crate::interaction::{Interaction, InteractionId};
use crate::store::StoreHealth;
use crate::store::prelude::*;
use crate::store::probe::Probe;

pub use listener::{Listener, Notification};
pub use migrate::SCHEMA_VERSION;
use rows::decode;
pub(crate) use schema::{Schema, check_schema_name};

/// How to reach and use a PostgreSQL database.
#[derive(Clone, Debug)]
pub struct PostgresOptions {
    /// The connection URL (`postgres://user:password@host:5432/database`); a secret.
    pub url: SecretString,
    /// The schema imrelay's tables live in (created if missing).
    pub schema: String,
    /// Connections kept for queries.
    pub pool_size: usize,
    /// How long a query waits for a free connection before it fails as unavailable.
    pub pool_wait: Duration,
}

impl PostgresOptions {
    /// The defaults for `url`: schema `imrelay`, 10 connections, 5 s wait.
    pub fn new(url: SecretString) -> Self {
        Self {
            url,
            schema: "imrelay".into(),
            pool_size: 10,
            pool_wait: Duration::from_secs(5),
        }
    }
}

/// A database error as a [`StoreError`]: the error and its causes (tokio-postgres keeps the
/// server's message in the cause).
fn describe(e: &tokio_postgres::Error) -> String {
    let mut text = e.to_string();
    let mut source = std::error::Error::source(e);
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

fn db(e: tokio_postgres::Error) -> StoreError {
    StoreError::Unavailable(describe(&e))
}

fn corrupt(e: impl std::fmt::Display) -> StoreError {
    StoreError::Corrupt(e.to_string())
}

/// A column of `row`, or [`StoreError::Corrupt`] if it does not decode.
fn col<'a, T: tokio_postgres::types::FromSql<'a>>(
    row: &'a Row,
    idx: usize,
) -> Result<T, StoreError> {
    row.try_get(idx).map_err(|e| corrupt(describe(&e)))
}

/// `sql` prepared once per connection (the statement cache). Statements sent together in one
/// round trip (pipelined: futures on one connection polled together) are prepared first, so
/// that they go out in the order they are polled.
async fn prepared(
    c: &impl GenericClient,
    sql: &str,
) -> Result<tokio_postgres::Statement, StoreError> {
    c.prepare_cached(sql).await.map_err(db)
}

/// Runs `sql` as a statement prepared once per connection; returns its rows.
async fn rows(
    c: &impl GenericClient,
    sql: &str,
    params: &[&(dyn ToSql + Sync)],
) -> Result<Vec<Row>, StoreError> {
    let stmt = c.prepare_cached(sql).await.map_err(db)?;
    c.query(&stmt, params).await.map_err(db)
}

/// Runs `sql` as a statement prepared once per connection; returns its row, if any.
async fn row(
    c: &impl GenericClient,
    sql: &str,
    params: &[&(dyn ToSql + Sync)],
) -> Result<Option<Row>, StoreError> {
    let stmt = c.prepare_cached(sql).await.map_err(db)?;
    c.query_opt(&stmt, params).await.map_err(db)
}

/// Runs `sql` as a statement prepared once per connection; returns how many rows it changed.
async fn exec(
    c: &impl GenericClient,
    sql: &str,
    params: &[&(dyn ToSql + Sync)],
) -> Result<u64, StoreError> {
    let stmt = c.prepare_cached(sql).await.map_err(db)?;
    c.execute(&stmt, params).await.map_err(db)
}

fn ms(t: Timestamp) -> i64 {
    t.as_millisecond()
}

fn from_ms(v: i64) -> Timestamp {
    Timestamp::from_millisecond(v).unwrap_or(Timestamp::UNIX_EPOCH)
}

/// The PostgreSQL store.
pub struct PostgresStore {
    pool: Pool,
    target: Arc<connect::Target>,
    schema: Schema,
    /// Applies creates and resolutions, many to a transaction.
    writer: writer::Writer,
    /// `/healthz`'s probe, bounded in how often it runs.
    probe: Probe,
}

impl std::fmt::Debug for PostgresStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PostgresStore")
            .field("url", &self.target.shown())
            .field("schema", &self.schema.name())
            .finish()
    }
}

impl PostgresStore {
    /// Connects, and migrates the schema (creating it if needed). Fails if the server cannot
    /// be reached, or if the schema was migrated by a newer imrelay.
    pub async fn connect(options: &PostgresOptions) -> Result<Self, StoreError> {
        let target = Arc::new(connect::Target::parse(&options.url)?);
        let schema = Schema::new(&options.schema)?;
        if options.pool_size == 0 {
            return Err(StoreError::Unavailable(
                "store.pool_size must be at least 1".into(),
            ));
        }
        let pool = target.pool(options.pool_size, options.pool_wait)?;
        let mut client = pool.get().await.map_err(|e| target.pool_error(e))?;
        let before = migrate::migrate(&mut client, &schema)
            .await
            .map_err(|e| match e {
                StoreError::Unavailable(m) => StoreError::Unavailable(target.scrub(m)),
                other => other,
            })?;
        tracing::info!(
            url = target.shown(),
            schema = schema.name(),
            version = SCHEMA_VERSION,
            migrated_from = before,
            "connected to PostgreSQL"
        );
        drop(client);
        let writer = writer::Writer::start(pool.clone(), target.clone(), schema.clone());
        Ok(Self {
            pool,
            target,
            schema,
            writer,
            probe: Probe::default(),
        })
    }

    /// The server's URL, without its password.
    pub fn url(&self) -> &str {
        self.target.shown()
    }

    /// The schema the tables live in.
    pub fn schema(&self) -> &str {
        self.schema.name()
    }

    /// The notification channel creates and resolutions are announced on.
    pub fn channel(&self) -> String {
        self.schema.channel()
    }

    /// The notification channel resolutions are also announced on, with the resolution
    /// when it fits (see [`Listener`]).
    pub fn settled_channel(&self) -> String {
        self.schema.settled_channel()
    }

    /// Starts listening for the changes every process writes to this schema (see
    /// [`Listener`]).
    pub fn listen(&self) -> Listener {
        Listener::start(
            self.target.clone(),
            self.schema.channel(),
            self.schema.settled_channel(),
        )
    }

    /// A pooled connection.
    async fn client(&self) -> Result<Object, StoreError> {
        self.pool.get().await.map_err(|e| self.target.pool_error(e))
    }

    fn sql(&self, sql: &str) -> String {
        self.schema.sql(sql)
    }

    /// The small named value `key` as `c` sees it.
    async fn get_value_in(
        &self,
        c: &impl GenericClient,
        key: &str,
    ) -> Result<Option<String>, StoreError> {
        match row(
            c,
            &self.sql("SELECT value FROM {s}.kv WHERE key = $1"),
            &[&key],
        )
        .await?
        {
            Some(r) => col(&r, 0).map(Some),
            None => Ok(None),
        }
    }
}

#[async_trait]
impl InteractionStore for PostgresStore {
    async fn create(
        &self,
        interaction: Arc<Interaction>,
        effects: Effects,
    ) -> Result<CreateOutcome, StoreError> {
        self.writer.create(interaction, effects).await
    }

    async fn resolve(
        &self,
        resolved: Arc<Interaction>,
        effects: Effects,
    ) -> Result<ResolveOutcome, StoreError> {
        self.writer.resolve(resolved, effects).await
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
        let client = self.client().await?;
        rows::get_in(&client, &self.schema, id.as_str()).await
    }

    async fn list(&self, query: &ListQuery) -> Result<Page, StoreError> {
        let status = match query.status {
            StatusFilter::Pending => Some("pending"),
            StatusFilter::Resolved => Some("resolved"),
            StatusFilter::All => None,
        };
        let after_id = query.after.as_ref().map(|c| c.id.as_str());
        let limit = i64::try_from(query.limit).unwrap_or(i64::MAX - 1) + 1;
        // The conditions are written out (not switched off by NULL parameters) so that the
        // plan of each variant can use the index that fits it.
        let mut sql =
            String::from("SELECT doc, resolution, created_at, id FROM {s}.interactions WHERE true");
        let mut params: Vec<&(dyn ToSql + Sync)> = vec![&limit];
        if let Some(status) = &status {
            params.push(status);
            sql.push_str(&format!(" AND status = ${}", params.len()));
        }
        if let Some(c) = &query.after {
            params.push(&c.created_ms);
            params.push(&after_id);
            sql.push_str(&format!(
                " AND (created_at, id) < (${}, ${})",
                params.len() - 1,
                params.len()
            ));
        }
        sql.push_str(" ORDER BY created_at DESC, id DESC LIMIT $1");
        let max = query
            .max_bytes
            .map(|m| i64::try_from(m).unwrap_or(i64::MAX));
        if let Some(max) = &max {
            // Only the rows whose predecessors on the page hold at most `max` bytes leave the
            // server (the first always does): the page's newest rows are sized there, and
            // the rest are never sent.
            params.push(max);
            sql = format!(
                "SELECT doc, resolution, upto > ${n} FROM (
                     SELECT doc, resolution, created_at, id, own,
                            sum(own) OVER (ORDER BY created_at DESC, id DESC) AS upto
                     FROM (SELECT doc, resolution, created_at, id,
                                  octet_length(doc::text)
                                      + coalesce(octet_length(resolution::text), 0) AS own
                           FROM ({sql}) newest) sized_rows
                 ) sized
                 WHERE upto - own <= ${n}
                 ORDER BY created_at DESC, id DESC",
                n = params.len()
            );
        }
        let client = self.client().await?;
        let found = rows(&client, &self.sql(&sql), &params).await?;
        let items = found
            .iter()
            .map(|r| decode(r, 0))
            .collect::<Result<Vec<_>, _>>()?;
        let beyond = max.is_some()
            && found
                .last()
                .map(|r| col::<bool>(r, 2))
                .transpose()?
                .unwrap_or(false);
        if beyond && items.len() <= query.limit {
            return Ok(Page::cut_short(items));
        }
        Ok(Page::from_overfetch(items, query.limit))
    }

    async fn pending(&self) -> Result<Vec<Arc<Interaction>>, StoreError> {
        let sql = self.sql(
            "SELECT doc, resolution FROM {s}.interactions WHERE status = 'pending'
             ORDER BY created_at, id",
        );
        let client = self.client().await?;
        rows(&client, &sql, &[])
            .await?
            .iter()
            .map(|r| decode(r, 0))
            .collect()
    }

    async fn pending_ids(&self) -> Result<Vec<InteractionId>, StoreError> {
        let sql = self.sql(
            "SELECT id FROM {s}.interactions WHERE status = 'pending' ORDER BY created_at, id",
        );
        let client = self.client().await?;
        rows(&client, &sql, &[])
            .await?
            .iter()
            .map(|r| {
                let id: String = col(r, 0)?;
                InteractionId::stored(&id).map_err(|e| corrupt(e.to_string()))
            })
            .collect()
    }

    async fn prune(&self, before: Timestamp) -> Result<u64, StoreError> {
        let cutoff = ms(before);
        let client = self.client().await?;
        // Bounded chunks keep each statement short; rows another replica is pruning at the
        // same time are skipped, not waited for.
        let chunk = self.sql(
            "WITH gone AS (
                 DELETE FROM {s}.interactions WHERE id IN (
                     SELECT id FROM {s}.interactions
                     WHERE status = 'resolved' AND resolved_at < $1
                     LIMIT 1000 FOR UPDATE SKIP LOCKED)
                 RETURNING id),
             messages AS (
                 DELETE FROM {s}.channel_messages
                 WHERE interaction_id IN (SELECT id FROM gone))
             SELECT count(*) FROM gone",
        );
        let mut total = 0u64;
        loop {
            let n: i64 = match row(&client, &chunk, &[&cutoff]).await? {
                Some(r) => col(&r, 0)?,
                None => 0,
            };
            total += n.max(0) as u64;
            if n < 1000 {
                break;
            }
        }
        exec(
            &client,
            &self.sql("DELETE FROM {s}.outbox WHERE state <> 'pending' AND updated_at < $1"),
            &[&cutoff],
        )
        .await?;
        events::prune(&client, &self.schema, cutoff).await?;
        // Grants revoked or expired before the retention horizon (their audit entries stay).
        exec(
            &client,
            &self.sql("DELETE FROM {s}.grants WHERE revoked_at < $1 OR expires_at < $1"),
            &[&cutoff],
        )
        .await?;
        exec(
            &client,
            &self.sql("DELETE FROM {s}.sessions WHERE last_activity < $1"),
            &[&cutoff],
        )
        .await?;
        exec(
            &client,
            &self.sql("DELETE FROM {s}.seen WHERE expires_at <= $1"),
            &[&ms(Timestamp::now())],
        )
        .await?;
        // A range scan of the key index (keys sort bytewise; the prefix has no LIKE
        // metacharacters).
        exec(
            &client,
            &self.sql(
                "DELETE FROM {s}.kv WHERE key LIKE $1
                 AND NOT EXISTS (SELECT 1 FROM {s}.interactions WHERE id = kv.value)",
            ),
            &[&format!("{BOUND_VALUE_PREFIX}%")],
        )
        .await?;
        Ok(total)
    }
}

#[async_trait]
impl ChannelStore for PostgresStore {
    async fn record_message(&self, m: ChannelMessage) -> Result<(), StoreError> {
        let sql = self.sql(
            "INSERT INTO {s}.channel_messages
                 (channel, address, message_ref, interaction_id, state, created_at)
             VALUES ($1, $2, $3, $4, $5, $6)
             ON CONFLICT (channel, address, message_ref) DO UPDATE
             SET interaction_id = excluded.interaction_id, state = excluded.state",
        );
        let client = self.client().await?;
        exec(
            &client,
            &sql,
            &[
                &m.channel,
                &m.address,
                &m.message_ref,
                &m.interaction_id.as_str(),
                &m.state.as_ref().map(Json),
                &ms(m.created_at),
            ],
        )
        .await?;
        Ok(())
    }

    async fn messages(
        &self,
        channel: &str,
        id: &InteractionId,
    ) -> Result<Vec<ChannelMessage>, StoreError> {
        let sql = self.sql(
            "SELECT address, message_ref, state, created_at FROM {s}.channel_messages
             WHERE interaction_id = $1 AND channel = $2 ORDER BY created_at, address",
        );
        let client = self.client().await?;
        rows(&client, &sql, &[&id.as_str(), &channel])
            .await?
            .iter()
            .map(|r| {
                let state: Option<Json<Value>> = col(r, 2)?;
                Ok(ChannelMessage {
                    channel: channel.to_string(),
                    address: col(r, 0)?,
                    message_ref: col(r, 1)?,
                    interaction_id: id.clone(),
                    state: state.map(|Json(v)| v),
                    created_at: from_ms(col(r, 3)?),
                })
            })
            .collect()
    }

    async fn message(
        &self,
        channel: &str,
        address: &str,
        message_ref: &str,
    ) -> Result<Option<ChannelMessage>, StoreError> {
        let sql = self.sql(
            "SELECT interaction_id, state, created_at FROM {s}.channel_messages
             WHERE channel = $1 AND address = $2 AND message_ref = $3",
        );
        let client = self.client().await?;
        let Some(r) = row(&client, &sql, &[&channel, &address, &message_ref]).await? else {
            return Ok(None);
        };
        let id: String = col(&r, 0)?;
        let state: Option<Json<Value>> = col(&r, 1)?;
        Ok(Some(ChannelMessage {
            channel: channel.to_string(),
            address: address.to_string(),
            message_ref: message_ref.to_string(),
            interaction_id: InteractionId::parse(&id).map_err(corrupt)?,
            state: state.map(|Json(v)| v),
            created_at: from_ms(col(&r, 2)?),
        }))
    }

    async fn set_message_state(
        &self,
        channel: &str,
        address: &str,
        message_ref: &str,
        state: Option<Value>,
    ) -> Result<bool, StoreError> {
        let sql = self.sql(
            "UPDATE {s}.channel_messages SET state = $4
             WHERE channel = $1 AND address = $2 AND message_ref = $3",
        );
        let client = self.client().await?;
        let n = exec(
            &client,
            &sql,
            &[&channel, &address, &message_ref, &state.as_ref().map(Json)],
        )
        .await?;
        Ok(n == 1)
    }
}

#[async_trait]
impl KvStore for PostgresStore {
    async fn get_value(&self, key: &str) -> Result<Option<String>, StoreError> {
        let client = self.client().await?;
        self.get_value_in(&client, key).await
    }

    async fn set_value(&self, key: &str, value: Option<String>) -> Result<(), StoreError> {
        let client = self.client().await?;
        match value {
            Some(v) => {
                let sql = self.sql(
                    "INSERT INTO {s}.kv (key, value) VALUES ($1, $2)
                     ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                );
                exec(&client, &sql, &[&key, &v]).await?
            }
            None => {
                let sql = self.sql("DELETE FROM {s}.kv WHERE key = $1");
                exec(&client, &sql, &[&key]).await?
            }
        };
        Ok(())
    }

    async fn swap_value(
        &self,
        key: &str,
        expected: Option<&str>,
        value: Option<String>,
    ) -> Result<bool, StoreError> {
        let client = self.client().await?;
        let changed = match (expected, value) {
            (None, Some(v)) => {
                let sql = self.sql(
                    "INSERT INTO {s}.kv (key, value) VALUES ($1, $2) ON CONFLICT (key) DO NOTHING",
                );
                exec(&client, &sql, &[&key, &v]).await?
            }
            (Some(e), Some(v)) => {
                let sql = self.sql("UPDATE {s}.kv SET value = $2 WHERE key = $1 AND value = $3");
                exec(&client, &sql, &[&key, &v, &e]).await?
            }
            (Some(e), None) => {
                let sql = self.sql("DELETE FROM {s}.kv WHERE key = $1 AND value = $2");
                exec(&client, &sql, &[&key, &e]).await?
            }
            (None, None) => {
                return Ok(self.get_value_in(&client, key).await?.is_none());
            }
        };
        Ok(changed == 1)
    }

    async fn values_under(
        &self,
        prefix: &str,
        limit: usize,
    ) -> Result<Vec<(String, String)>, StoreError> {
        let client = self.client().await?;
        // `key` sorts in byte order (COLLATE "C"): a range over the primary key.
        let sql = self.sql(
            "SELECT key, value FROM {s}.kv WHERE key >= $1 AND key < $1 || chr(1114111)
             ORDER BY key LIMIT $2",
        );
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let found = rows(&client, &sql, &[&prefix, &limit]).await?;
        let mut out = Vec::with_capacity(found.len());
        for r in &found {
            let (k, v): (String, String) = (col(r, 0)?, col(r, 1)?);
            if k.starts_with(prefix) {
                out.push((k, v));
            }
        }
        Ok(out)
    }

    async fn secret(&self, name: &str) -> Result<Vec<u8>, StoreError> {
        let client = self.client().await?;
        // Created once: whichever replica inserts first, every one reads that value (the
        // read is a statement of its own, so it sees a row committed by another meanwhile).
        exec(
            &client,
            &self.sql(
                "INSERT INTO {s}.secrets (name, value) VALUES ($1, $2)
                 ON CONFLICT (name) DO NOTHING",
            ),
            &[&name, &random_secret()],
        )
        .await?;
        match row(
            &client,
            &self.sql("SELECT value FROM {s}.secrets WHERE name = $1"),
            &[&name],
        )
        .await?
        {
            Some(r) => col(&r, 0),
            None => Err(StoreError::Unavailable(format!(
                "the secret {name:?} vanished after it was created"
            ))),
        }
    }

    async fn first_sighting(
        &self,
        scope: &str,
        key: &str,
        expires_at: Timestamp,
    ) -> Result<bool, StoreError> {
        // Inserted, or an expired sighting renewed: a row comes back. A live sighting stays
        // as it is, and nothing comes back.
        let sql = self.sql(
            "INSERT INTO {s}.seen AS s (scope, key, expires_at) VALUES ($1, $2, $3)
             ON CONFLICT (scope, key) DO UPDATE SET expires_at = excluded.expires_at
             WHERE s.expires_at <= $4
             RETURNING 1",
        );
        let client = self.client().await?;
        let n = rows(
            &client,
            &sql,
            &[&scope, &key, &ms(expires_at), &ms(Timestamp::now())],
        )
        .await?
        .len();
        Ok(n == 1)
    }

    async fn forget_sighting(&self, scope: &str, key: &str) -> Result<(), StoreError> {
        let client = self.client().await?;
        exec(
            &client,
            &self.sql("DELETE FROM {s}.seen WHERE scope = $1 AND key = $2"),
            &[&scope, &key],
        )
        .await?;
        Ok(())
    }

    async fn health(&self) -> StoreHealth {
        self.probe.health(|| self.probe_health()).await
    }
}

#[async_trait]
impl ClusterStore for PostgresStore {
    fn changes(&self) -> Option<super::ChangeFeed> {
        Some(Box::pin(self.listen()))
    }

    fn keeps_events(&self) -> bool {
        true
    }

    async fn events_after(
        &self,
        after: u64,
        limit: usize,
    ) -> Result<Vec<super::StoredEvent>, StoreError> {
        let client = self.client().await?;
        events::after(&client, &self.schema, after, limit).await
    }

    async fn event_head(&self) -> Result<u64, StoreError> {
        let client = self.client().await?;
        events::head(&client, &self.schema).await
    }

    fn lead(&self, name: &str, lease: Duration) -> super::Leader {
        lease::start(
            self.target.clone(),
            self.schema.clone(),
            name.to_string(),
            lease,
        )
    }
}
