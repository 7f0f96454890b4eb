//! What `imrelay acp` and `imrelay bridge opencode` share in reporting sessions' turns to
//! imrelay (docs/steering.md): each session's reports go in order, each waiting for the one
//! before; the report of a turn's end, which waits for a person's reply, is abandoned (and
//! the "finished" question withdrawn on every channel) as soon as anything newer happens in
//! its session.

use std::collections::HashMap;
use std::future::Future;

use tokio::task::JoinHandle;

/// Sessions whose last report is followed (past it, finished ones are forgotten).
const MAX_CHAINS: usize = 256;

/// Each session's last report.
#[derive(Default)]
pub struct Reports {
    /// The task posting it, and whether it is a turn's end waiting for a reply.
    chains: HashMap<String, (JoinHandle<()>, bool)>,
}

impl Reports {
    /// Runs `post` after the session's report before it (a turn's end still waiting is
    /// abandoned instead); `end`: `post` reports a turn's end.
    pub fn send<F>(&mut self, session: &str, end: bool, post: F)
    where
        F: Future<Output = ()> + Send + 'static,
    {
        let before = match self.chains.remove(session) {
            // Something newer happened: the wait for a reply is over.
            Some((task, true)) => {
                task.abort();
                None
            }
            Some((task, false)) => Some(task),
            None => None,
        };
        let task = tokio::spawn(async move {
            if let Some(before) = before {
                let _ = before.await;
            }
            post.await;
        });
        if self.chains.len() >= MAX_CHAINS {
            self.chains.retain(|_, (t, _)| !t.is_finished());
        }
        self.chains.insert(session.to_string(), (task, end));
    }

    /// Stops every report under way (the agent or its editor is gone): each wait for a reply
    /// ends, and its question is withdrawn.
    pub fn abandon_all(&mut self) {
        for (_, (task, _)) in self.chains.drain() {
            task.abort();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Mutex};

    #[tokio::test]
    async fn reports_go_in_order_and_a_waiting_end_is_abandoned_for_a_newer_one() {
        let log = Arc::new(Mutex::new(Vec::new()));
        let mut r = Reports::default();
        let (gate, opened) = tokio::sync::oneshot::channel::<()>();
        let l = log.clone();
        r.send("s", false, async move {
            let _ = opened.await;
            l.lock().unwrap().push("started");
        });
        let l = log.clone();
        r.send("s", true, async move {
            l.lock().unwrap().push("stopped");
            std::future::pending::<()>().await;
        });
        gate.send(()).unwrap();
        let l = log.clone();
        let (done, finished) = tokio::sync::oneshot::channel();
        r.send("s", false, async move {
            l.lock().unwrap().push("prompted");
            let _ = done.send(());
        });
        finished.await.unwrap();
        // The end was abandoned before it ran (or while it waited): never after "prompted".
        let seen = log.lock().unwrap().clone();
        assert_eq!(seen.first(), Some(&"started"));
        assert_eq!(seen.last(), Some(&"prompted"));
        r.abandon_all();
        assert!(r.chains.is_empty());
    }
}
