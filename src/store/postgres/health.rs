//! `/healthz`'s probe of the PostgreSQL store: a read, the cluster's write locks within a
//! bound, and a small write; and what a failed write says of the store.

use std::time::Duration;

use jiff::Timestamp;

use super::{PostgresStore, connect, describe, ms};
use crate::store::{StoreError, StoreHealth};

/// How long `/healthz`'s probe waits for the cluster's write locks before it reports that
/// writes cannot get through. Under load a write waits for them a few milliseconds; a second
/// means a session holds them and is not finishing (see [`connect::IDLE_IN_TRANSACTION`]).
const PROBE_LOCK_WAIT: Duration = Duration::from_secs(1);

impl PostgresStore {
    /// `/healthz`'s probe: a read, then what a create or an answer needs: the cluster's
    /// write locks (the audit chain's, then the events', in the writer's order), waited for at
    /// most [`PROBE_LOCK_WAIT`], and a small write, committed. A write failing for the
    /// server's storage (read-only, disk full, no privilege) is [`StoreHealth::ReadOnly`];
    /// anything else, a restart or a lost connection included, [`StoreHealth::Unavailable`].
    pub(super) async fn probe_health(&self) -> StoreHealth {
        let mut client = match self.client().await {
            Ok(c) => c,
            Err(e) => return StoreHealth::Unavailable(e),
        };
        if let Err(e) = self.get_value_in(&client, "health.write_probe").await {
            return StoreHealth::Unavailable(e);
        }
        // Numbers only, and the checked schema name: nothing to escape.
        let sql = self.sql(&format!(
            "SET LOCAL lock_timeout = '{wait}ms';
             SELECT pg_advisory_xact_lock({audit});
             SELECT pg_advisory_xact_lock({events});
             INSERT INTO {{s}}.kv (key, value) VALUES ('health.write_probe', '{now}')
             ON CONFLICT (key) DO UPDATE SET value = excluded.value",
            wait = PROBE_LOCK_WAIT.as_millis(),
            audit = self.schema.lock_key("audit"),
            events = self.schema.lock_key("events"),
            now = ms(Timestamp::now()),
        ));
        let written = async {
            let tx = client.transaction().await?;
            tx.batch_execute(&sql).await?;
            tx.commit().await
        }
        .await;
        match written {
            Ok(()) => StoreHealth::Ok,
            Err(e) => write_health(&e),
        }
    }
}

/// What a failed probe write says of the store: refused by the server's storage or
/// configuration ([`StoreHealth::ReadOnly`]), or not possible now
/// ([`StoreHealth::Unavailable`]: a restart, a lost connection, a lock not had in time).
fn write_health(e: &tokio_postgres::Error) -> StoreHealth {
    use tokio_postgres::error::SqlState;
    let code = e.code();
    if code == Some(&SqlState::LOCK_NOT_AVAILABLE) {
        return StoreHealth::Unavailable(StoreError::Unavailable(format!(
            "writes cannot get the cluster's write locks within {} ms: another session holds \
             them (a replica stopped inside a transaction holds them until the server ends its \
             session, within {} s)",
            PROBE_LOCK_WAIT.as_millis(),
            connect::IDLE_IN_TRANSACTION.as_secs()
        )));
    }
    let refused = [
        SqlState::READ_ONLY_SQL_TRANSACTION,
        SqlState::DISK_FULL,
        SqlState::INSUFFICIENT_PRIVILEGE,
    ];
    if code.is_some_and(|c| refused.contains(c)) {
        StoreHealth::ReadOnly(db_ref(e))
    } else {
        StoreHealth::Unavailable(db_ref(e))
    }
}

fn db_ref(e: &tokio_postgres::Error) -> StoreError {
    StoreError::Unavailable(describe(e))
}
