//! Leases in PostgreSQL (`<schema>.leases`), taken and renewed on a dedicated connection
//! (outside the pool: a busy pool must not cost the leader its lease, and nothing here
//! depends on a session, so a pooling proxy would do too). Times are the server's clock.
//!
//! The holder renews every third of the lease; it stops acting as leader a fifth of the
//! lease before the lease's end as counted from when its last successful renewal was sent,
//! so it has stopped before another process can take the lease, whatever the network delay.

use std::sync::Arc;
use std::time::Duration;

use futures_util::StreamExt;
use tokio::sync::watch;
use tokio::time::Instant;
use tokio_postgres::Client;
use tokio_util::sync::CancellationToken;

use super::connect::Target;
use super::{Schema, describe};
use crate::store::Leader;
use crate::store::lease::renew_every;

/// How lease connections are named in `pg_stat_activity`.
pub(crate) const APPLICATION_NAME: &str = "imrelay-lease";

/// Starts competing for lease `name` in the background.
pub(super) fn start(target: Arc<Target>, schema: Schema, name: String, lease: Duration) -> Leader {
    let (tx, rx) = watch::channel(false);
    let stop = CancellationToken::new();
    let abandon = CancellationToken::new();
    let holder = format!("{}-{}", std::process::id(), uuid::Uuid::new_v4().simple());
    tokio::spawn(
        Session {
            target,
            schema,
            name,
            holder,
            lease,
            tx,
        }
        .run(stop.clone(), abandon.clone()),
    );
    Leader::new(rx, stop, abandon)
}

struct Session {
    target: Arc<Target>,
    schema: Schema,
    name: String,
    holder: String,
    lease: Duration,
    tx: watch::Sender<bool>,
}

impl Session {
    async fn run(self, stop: CancellationToken, abandon: CancellationToken) {
        let (every, margin) = renew_every(self.lease);
        let mut client: Option<Client> = None;
        let mut held_until: Option<Instant> = None;
        loop {
            let sent = Instant::now();
            match self.renew(&mut client, every).await {
                Ok(true) => {
                    held_until = Some(sent + self.lease.saturating_sub(margin));
                    self.set(true);
                }
                Ok(false) => {
                    held_until = None;
                    self.set(false);
                }
                Err(e) => {
                    client = None;
                    tracing::warn!(lease = %self.name.escape_debug(), error = %self.target.scrub(e),
                        "could not renew a lease in PostgreSQL; retrying");
                }
            }
            let next = match held_until {
                Some(until) => (sent + every).min(until),
                None => sent + every,
            };
            tokio::select! {
                _ = stop.cancelled() => {
                    self.set(false);
                    if held_until.is_some() {
                        self.release(client.as_ref()).await;
                    }
                    return;
                }
                _ = abandon.cancelled() => {
                    self.set(false);
                    return;
                }
                _ = tokio::time::sleep_until(next) => {}
            }
            if held_until.is_some_and(|until| Instant::now() >= until) {
                held_until = None;
                self.set(false);
            }
        }
    }

    fn set(&self, holding: bool) {
        self.tx.send_if_modified(|h| {
            let changed = *h != holding;
            *h = holding;
            changed
        });
        if holding {
            tracing::debug!(lease = %self.name.escape_debug(), "holding the lease");
        }
    }

    /// Takes or renews the lease; `Ok(false)` if another process holds it.
    async fn renew(&self, client: &mut Option<Client>, limit: Duration) -> Result<bool, String> {
        if client.as_ref().is_none_or(|c| c.is_closed()) {
            let (c, mut messages) =
                tokio::time::timeout(limit, self.target.connect(APPLICATION_NAME))
                    .await
                    .map_err(|_| "connecting timed out".to_string())?
                    .map_err(|e| e.to_string())?;
            // The connection makes progress while its messages are read.
            tokio::spawn(async move { while messages.next().await.is_some() {} });
            tokio::time::timeout(limit, c.batch_execute(Target::session_limits()))
                .await
                .map_err(|_| "connecting timed out".to_string())?
                .map_err(|e| describe(&e))?;
            *client = Some(c);
        }
        let Some(c) = client.as_ref() else {
            return Err("no connection".into());
        };
        let sql = self.schema.sql(
            "INSERT INTO {s}.leases AS l (name, holder, until)
             VALUES ($1, $2, (extract(epoch FROM clock_timestamp()) * 1000)::bigint + $3)
             ON CONFLICT (name) DO UPDATE SET holder = excluded.holder, until = excluded.until
             WHERE l.holder = excluded.holder
                OR l.until < (extract(epoch FROM clock_timestamp()) * 1000)::bigint
             RETURNING holder",
        );
        let ms = i64::try_from(self.lease.as_millis()).unwrap_or(i64::MAX / 2);
        let taken =
            tokio::time::timeout(limit, c.query_opt(&sql, &[&self.name, &self.holder, &ms]))
                .await
                .map_err(|_| "renewing timed out".to_string())?
                .map_err(|e| describe(&e))?;
        Ok(taken.is_some())
    }

    /// Gives the lease up, so another process takes over at once.
    async fn release(&self, client: Option<&Client>) {
        let Some(c) = client else { return };
        let sql = self
            .schema
            .sql("DELETE FROM {s}.leases WHERE name = $1 AND holder = $2");
        let done = tokio::time::timeout(
            Duration::from_secs(2),
            c.execute(&sql, &[&self.name, &self.holder]),
        )
        .await;
        if !matches!(done, Ok(Ok(_))) {
            tracing::warn!(lease = %self.name.escape_debug(), "could not give a lease up; another process takes it when it runs out");
        }
    }
}
