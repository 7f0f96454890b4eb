//! A store whose answer writes can be held at a gate, to cut a click's handler off half-way
//! (the platform giving up, a dropped connection) and let it go on afterwards.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use async_trait::async_trait;
use imrelay::store::MemoryStore;
use imrelay::store::StoreError;
use imrelay::store::intercept::{Intercepted, Interceptor, Op};
use tokio::sync::watch;

/// Holds `resolve` while closed.
pub(crate) struct Gate {
    closed: watch::Sender<bool>,
    waiting: AtomicUsize,
}

/// The in-memory store behind a [`Gate`].
pub(crate) type GatedStore = Intercepted<Gate>;

/// A fresh in-memory store with an open gate.
pub(crate) fn gated_store() -> Arc<GatedStore> {
    Arc::new(Intercepted::new(
        Arc::new(MemoryStore::new()),
        Gate {
            closed: watch::Sender::new(false),
            waiting: AtomicUsize::new(0),
        },
    ))
}

impl Gate {
    pub(crate) fn close(&self) {
        self.closed.send_replace(true);
    }

    pub(crate) fn open(&self) {
        self.closed.send_replace(false);
    }

    /// Writes that reached the closed gate so far.
    pub(crate) fn waiting(&self) -> usize {
        self.waiting.load(Ordering::SeqCst)
    }
}

#[async_trait]
impl Interceptor for Gate {
    async fn before(&self, op: Op) -> Result<(), StoreError> {
        if op == Op::Resolve && *self.closed.borrow() {
            self.waiting.fetch_add(1, Ordering::SeqCst);
            let mut gate = self.closed.subscribe();
            let _ = gate.wait_for(|closed| !closed).await;
        }
        Ok(())
    }
}
