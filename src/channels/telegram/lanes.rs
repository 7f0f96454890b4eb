//! Keeps the updates of one chat in the order Telegram delivered them, while different chats
//! are handled at the same time.
//!
//! One `getUpdates` answer can carry a "toggle" and a "Submit" tapped on the same message a
//! moment apart; handled all at once, either could run first. Each chat gets a *lane*: a
//! queue worked by one task, created on the first update and gone once the queue is empty.
//! A lane waits for each update at most its *patience*: an update that takes longer (a send
//! stuck behind Telegram's rate limit, say) goes on in the background and the lane moves on,
//! so one slow update cannot hold its chat up for long, nor ever another chat.

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use crate::sync::LockExt;
use tokio::sync::{mpsc, oneshot};
use tokio_util::task::TaskTracker;

type Work = Pin<Box<dyn Future<Output = ()> + Send>>;

/// One queued piece of work and who waits for it.
struct Job {
    work: Work,
    done: oneshot::Sender<()>,
}

struct Lane {
    tx: mpsc::UnboundedSender<Job>,
    /// Jobs sent to this lane and not yet finished (or given up waiting for).
    queued: usize,
}

struct Shared {
    // A std mutex: only map updates, never held across an await.
    lanes: Mutex<HashMap<i64, Lane>>,
    tracker: TaskTracker,
    patience: Duration,
}

impl Shared {
    fn lanes(&self) -> MutexGuard<'_, HashMap<i64, Lane>> {
        self.lanes.locked()
    }
}

/// Ordered, per-key queues of work (the key is a chat id).
pub(super) struct Lanes {
    shared: Arc<Shared>,
}

impl Lanes {
    /// Lanes that wait at most `patience` for each piece of work before starting the next.
    pub(super) fn new(patience: Duration) -> Self {
        Self {
            shared: Arc::new(Shared {
                lanes: Mutex::new(HashMap::new()),
                tracker: TaskTracker::new(),
                patience,
            }),
        }
    }

    /// Queues `work` behind everything queued under `key`; the receiver fires when it is
    /// done (it is dropped unfired if the work panicked).
    pub(super) fn submit(
        &self,
        key: i64,
        work: impl Future<Output = ()> + Send + 'static,
    ) -> oneshot::Receiver<()> {
        let (done, finished) = oneshot::channel();
        let job = Job {
            work: Box::pin(work),
            done,
        };
        let mut lanes = self.shared.lanes();
        let lane = lanes.entry(key).or_insert_with(|| {
            let (tx, rx) = mpsc::unbounded_channel();
            self.shared
                .tracker
                .spawn(run_lane(self.shared.clone(), key, rx));
            Lane { tx, queued: 0 }
        });
        lane.queued += 1;
        // The lane's task holds the receiver until its queue is empty and the lane is
        // removed (under this lock), so this send cannot fail.
        let _ = lane.tx.send(job);
        finished
    }

    /// Waits up to `grace` for queued and running work to finish.
    pub(super) async fn drain(&self, grace: Duration) {
        self.shared.tracker.close();
        let _ = tokio::time::timeout(grace, self.shared.tracker.wait()).await;
    }
}

async fn run_lane(shared: Arc<Shared>, key: i64, mut rx: mpsc::UnboundedReceiver<Job>) {
    while let Some(Job { work, done }) = rx.recv().await {
        let mut task = shared.tracker.spawn(async move {
            work.await;
            let _ = done.send(());
        });
        if tokio::time::timeout(shared.patience, &mut task)
            .await
            .is_err()
        {
            tracing::warn!(
                chat = key,
                patience_ms = shared.patience.as_millis() as u64,
                "telegram: an update takes long; going on with the next ones of its chat"
            );
        }
        let mut lanes = shared.lanes();
        if let Some(lane) = lanes.get_mut(&key) {
            lane.queued = lane.queued.saturating_sub(1);
            if lane.queued == 0 {
                // Dropping the sender ends this loop: nothing else was queued.
                lanes.remove(&key);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex as StdMutex;

    fn log() -> Arc<StdMutex<Vec<&'static str>>> {
        Arc::new(StdMutex::new(Vec::new()))
    }

    fn push(log: &Arc<StdMutex<Vec<&'static str>>>, s: &'static str) {
        log.lock().unwrap().push(s);
    }

    #[tokio::test(start_paused = true)]
    async fn one_chat_in_order_other_chats_meanwhile() {
        let lanes = Lanes::new(Duration::from_secs(30));
        let seen = log();
        let (a, b, c) = (seen.clone(), seen.clone(), seen.clone());
        // A slow first update of chat 1, then a quick one: the quick one waits its turn.
        let first = lanes.submit(1, async move {
            tokio::time::sleep(Duration::from_secs(2)).await;
            push(&a, "1:toggle");
        });
        let second = lanes.submit(1, async move { push(&b, "1:submit") });
        // Another chat is not held up by chat 1's slow update.
        let other = lanes.submit(2, async move { push(&c, "2:tap") });
        other.await.unwrap();
        assert_eq!(*seen.lock().unwrap(), ["2:tap"]);
        first.await.unwrap();
        second.await.unwrap();
        assert_eq!(*seen.lock().unwrap(), ["2:tap", "1:toggle", "1:submit"]);
        // Empty lanes are gone.
        tokio::task::yield_now().await;
        assert!(lanes.shared.lanes().is_empty());
    }

    #[tokio::test(start_paused = true)]
    async fn a_stuck_update_holds_its_chat_only_as_long_as_the_patience() {
        let lanes = Lanes::new(Duration::from_secs(5));
        let seen = log();
        let s = seen.clone();
        let stuck = lanes.submit(1, std::future::pending());
        let next = lanes.submit(1, async move { push(&s, "next") });
        let started = tokio::time::Instant::now();
        next.await.unwrap();
        assert_eq!(*seen.lock().unwrap(), ["next"]);
        assert!(started.elapsed() >= Duration::from_secs(5));
        drop(stuck);
        lanes.drain(Duration::from_millis(10)).await;
    }

    #[tokio::test(start_paused = true)]
    async fn a_lane_comes_back_after_it_emptied() {
        let lanes = Lanes::new(Duration::from_secs(5));
        let seen = log();
        let s = seen.clone();
        lanes.submit(1, async {}).await.unwrap();
        tokio::task::yield_now().await;
        lanes
            .submit(1, async move { push(&s, "again") })
            .await
            .unwrap();
        assert_eq!(*seen.lock().unwrap(), ["again"]);
    }
}
