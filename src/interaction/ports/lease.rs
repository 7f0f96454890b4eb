//! Leadership among the processes that share a store: a named lease that one process at a
//! time holds (see [`super::ClusterStore::lead`]), for work that must run once in a cluster, such as
//! polling Telegram's `getUpdates`.

use std::time::Duration;

use tokio::sync::watch;
use tokio_util::sync::{CancellationToken, DropGuard};

/// This process's view of a lease: whether it holds it now, kept up to date by the store
/// in the background. Dropping it gives the lease up.
#[derive(Debug)]
pub struct Leader {
    holding: watch::Receiver<bool>,
    abandon: CancellationToken,
    _stop: DropGuard,
}

impl Leader {
    /// A view kept up to date through `holding`; the store's task stops when `stop` fires
    /// (giving the lease up), or when `abandon` fires (keeping it until it runs out).
    pub fn new(
        holding: watch::Receiver<bool>,
        stop: CancellationToken,
        abandon: CancellationToken,
    ) -> Self {
        Self {
            holding,
            abandon,
            _stop: stop.drop_guard(),
        }
    }

    /// A lease that is always held: for a store only this process uses.
    pub fn sole() -> Self {
        // With the sender gone the value stays `true` for good.
        let (tx, rx) = watch::channel(true);
        drop(tx);
        Self::new(rx, CancellationToken::new(), CancellationToken::new())
    }

    /// Whether this process holds the lease now.
    pub fn is_leading(&self) -> bool {
        *self.holding.borrow()
    }

    /// Completes once this process holds the lease.
    pub async fn leading(&mut self) {
        let _ = self.holding.wait_for(|h| *h).await;
    }

    /// Completes once this process no longer holds the lease (never, while it does and the
    /// store keeps renewing it).
    pub async fn lost(&mut self) {
        if self.holding.wait_for(|h| !*h).await.is_err() {
            // The store's task ended: nothing renews the lease any more.
            if !*self.holding.borrow() {
                return;
            }
            std::future::pending::<()>().await;
        }
    }

    /// Stops renewing without giving the lease up, as a process that died would: another
    /// process takes over once the lease runs out. For drills and tests.
    pub fn abandon(&self) {
        self.abandon.cancel();
    }
}

/// How often a lease of `lease` is renewed, and how long before its end (by this process's
/// clock, counted from when the renewal was sent) its holder stops acting as leader.
pub(crate) fn renew_every(lease: Duration) -> (Duration, Duration) {
    (lease / 3, lease / 5)
}
