//! The store's health probe for `/healthz`, bounded in cost: one probe at a time (callers that
//! arrive while it runs wait for its answer), and an answer serves every caller for
//! [`FRESH`], so the probe runs at most about once a second however often `/healthz` is asked.

use std::future::Future;
use std::time::Duration;

use tokio::sync::Mutex;
use tokio::time::Instant;

use crate::store::StoreHealth;

/// How long one probe's answer is served before the next probe.
pub(crate) const FRESH: Duration = Duration::from_secs(1);

/// The last probe's answer, and the lock that lets one probe run at a time.
#[derive(Debug, Default)]
pub(crate) struct Probe {
    last: Mutex<Option<(Instant, StoreHealth)>>,
}

impl Probe {
    /// The health `probe` finds, or what the last probe found if it is under [`FRESH`] old.
    pub(crate) async fn health<F>(&self, probe: impl FnOnce() -> F) -> StoreHealth
    where
        F: Future<Output = StoreHealth>,
    {
        // Held across the probe: a caller arriving meanwhile waits for this answer.
        let mut last = self.last.lock().await;
        if let Some((at, health)) = last.as_ref()
            && at.elapsed() < FRESH
        {
            return health.clone();
        }
        let health = probe().await;
        *last = Some((Instant::now(), health.clone()));
        health
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;
    use crate::store::StoreError;

    #[tokio::test(start_paused = true)]
    async fn one_probe_serves_every_caller_for_a_second() {
        let probe = Arc::new(Probe::default());
        let runs = Arc::new(AtomicUsize::new(0));
        let ask = |probe: Arc<Probe>, runs: Arc<AtomicUsize>| async move {
            probe
                .health(|| async move {
                    runs.fetch_add(1, Ordering::SeqCst);
                    tokio::time::sleep(Duration::from_millis(300)).await;
                    StoreHealth::ReadOnly(StoreError::Unavailable("full".into()))
                })
                .await
        };
        // Fifty callers at once: one probe.
        let callers: Vec<_> = (0..50)
            .map(|_| tokio::spawn(ask(probe.clone(), runs.clone())))
            .collect();
        for c in callers {
            assert_eq!(c.await.unwrap().as_str(), "read_only");
        }
        assert_eq!(runs.load(Ordering::SeqCst), 1);
        // Within the second its answer is served; after it, the store is asked again.
        tokio::time::sleep(Duration::from_millis(500)).await;
        ask(probe.clone(), runs.clone()).await;
        assert_eq!(runs.load(Ordering::SeqCst), 1);
        tokio::time::sleep(FRESH).await;
        ask(probe.clone(), runs.clone()).await;
        assert_eq!(runs.load(Ordering::SeqCst), 2);
    }
}
