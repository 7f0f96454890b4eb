//! The tool calls waiting on each interaction in this process.
//!
//! A retried call (same `id`, or Claude Code's tool-use id) waits on the interaction the first
//! call created. When a call is abandoned (the client cancelled it, or closed its session),
//! the interaction is withdrawn only if no other call still waits for it.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

use prometheus_client::metrics::gauge::Gauge;

use crate::interaction::InteractionId;
use crate::metrics::Metrics;
use crate::sync::LockExt;

/// How many calls wait on each interaction. Entries exist only while a call waits.
pub(super) struct Calls {
    waiting: Mutex<HashMap<InteractionId, usize>>,
    gauge: Gauge,
}

impl Calls {
    /// No calls yet; registers the `imrelay_mcp_calls_waiting` gauge with `metrics`.
    pub(super) fn new(metrics: &Metrics) -> Arc<Self> {
        let gauge = Gauge::default();
        metrics.register(
            "imrelay_mcp_calls_waiting",
            "MCP tool calls waiting for a person's answer",
            gauge.clone(),
        );
        Arc::new(Self {
            waiting: Mutex::new(HashMap::new()),
            gauge,
        })
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<InteractionId, usize>> {
        self.waiting.locked()
    }

    /// Registers a call waiting on `id`.
    pub(super) fn join(self: &Arc<Self>, id: &InteractionId) -> Call {
        *self.lock().entry(id.clone()).or_insert(0) += 1;
        self.gauge.inc();
        Call {
            calls: self.clone(),
            id: id.clone(),
            left: false,
        }
    }
}

/// One call's hold on its interaction; dropping it (however the call ends) lets go.
pub(super) struct Call {
    calls: Arc<Calls>,
    id: InteractionId,
    left: bool,
}

impl Call {
    /// Lets go of the interaction; returns whether this was the last call waiting on it (so
    /// abandoning it may withdraw the interaction).
    pub(super) fn leave(mut self) -> bool {
        self.left = true;
        release(&self.calls, &self.id)
    }
}

/// Decrements `id`'s count; returns whether it reached zero.
fn release(calls: &Calls, id: &InteractionId) -> bool {
    calls.gauge.dec();
    let mut waiting = calls.lock();
    match waiting.get_mut(id) {
        Some(n) if *n > 1 => {
            *n -= 1;
            false
        }
        Some(_) => {
            waiting.remove(id);
            true
        }
        None => true,
    }
}

impl Drop for Call {
    fn drop(&mut self) {
        if !self.left {
            release(&self.calls, &self.id);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_last_call_to_leave_is_the_last() {
        let calls = Calls::new(&Metrics::new());
        let id = InteractionId::parse("x").unwrap();
        let a = calls.join(&id);
        let b = calls.join(&id);
        assert_eq!(calls.lock()[&id], 2);
        assert_eq!(calls.gauge.get(), 2);
        assert!(!a.leave());
        assert!(b.leave());
        assert_eq!(calls.gauge.get(), 0);
        // Dropping without leaving lets go too, and leaves no entry behind.
        drop(calls.join(&id));
        assert!(calls.lock().is_empty());
    }
}
