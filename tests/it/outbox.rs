//! The outbox worker against a fake receiver on loopback: retries until success, gives up at
//! the horizon, and resumes after a restart.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use axum::Router;
use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::post;
use imrelay::metrics::Metrics;
use imrelay::outbox::{Backoff, Delivery, Outbox, OutboxHandler};
use imrelay::store::{
    ClaimQuota, ClaimedJob, MemoryStore, OutboxJob, SqliteStore, Store, Synchronous,
};
use jiff::{SignedDuration, Timestamp};
use serde_json::json;
use tokio_util::sync::CancellationToken;

use crate::support::{outbox_holds, reopen_sqlite, wait_until};

/// A receiver that fails the first `fail_first` requests with 500.
#[derive(Clone)]
struct Receiver {
    hits: Arc<AtomicUsize>,
    fail_first: usize,
}

async fn receive(State(r): State<Receiver>) -> StatusCode {
    let n = r.hits.fetch_add(1, Ordering::SeqCst);
    if n < r.fail_first {
        StatusCode::INTERNAL_SERVER_ERROR
    } else {
        StatusCode::NO_CONTENT
    }
}

async fn fake_receiver(fail_first: usize) -> (String, Arc<AtomicUsize>) {
    let hits = Arc::new(AtomicUsize::new(0));
    let app = Router::new()
        .route("/hook", post(receive))
        .with_state(Receiver {
            hits: hits.clone(),
            fail_first,
        });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/hook", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });
    (url, hits)
}

/// Posts the job's payload to its URL.
struct HttpPost(reqwest::Client);

#[async_trait]
impl OutboxHandler for HttpPost {
    async fn deliver(&self, job: &ClaimedJob) -> Delivery {
        let url = job.job.payload["url"].as_str().unwrap_or_default();
        match self.0.post(url).json(&job.job.payload).send().await {
            Ok(r) if r.status().is_success() => Delivery::Done,
            Ok(r) => Delivery::Retry {
                after: None,
                error: format!("HTTP {}", r.status()),
            },
            Err(e) => Delivery::Retry {
                after: None,
                error: e.to_string(),
            },
        }
    }
}

fn job(url: &str, horizon: SignedDuration) -> OutboxJob {
    OutboxJob {
        key: format!("post:{url}"),
        channel: "http".into(),
        kind: "post".into(),
        interaction_id: None,
        payload: json!({"url": url}),
        not_before: Timestamp::now(),
        horizon: Timestamp::now() + horizon,
    }
}

fn worker(store: Arc<dyn Store>) -> Arc<Outbox> {
    Arc::new(http_worker(store))
}

/// The outbox posting over HTTP, with short retries.
fn http_worker(store: Arc<dyn Store>) -> Outbox {
    let mut outbox = Outbox::new(store, Arc::new(Metrics::new())).with_backoff(Backoff {
        base: Duration::from_millis(20),
        max: Duration::from_millis(100),
    });
    outbox.register("http", Arc::new(HttpPost(reqwest::Client::new())));
    outbox
}

/// A wall clock that advances with tokio's paused clock (for the outbox's `with_clock`), and
/// the wall time it starts at.
fn paused_wall_clock() -> (imrelay::outbox::Clock, Timestamp) {
    let start_wall = imrelay::interaction::now();
    let start = tokio::time::Instant::now();
    let clock: imrelay::outbox::Clock = Arc::new(move || {
        start_wall + SignedDuration::try_from(tokio::time::Instant::now() - start).unwrap()
    });
    (clock, start_wall)
}

/// The HTTP outbox over a memory store holding one job for `url`, due now and given up after
/// `horizon`, on tokio's paused clock: a wait is over at once, once everything that could
/// happen before its end has happened.
async fn one_post_on_a_paused_clock(
    url: &str,
    horizon: SignedDuration,
) -> (Arc<dyn Store>, Arc<Outbox>) {
    let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
    let (clock, start_wall) = paused_wall_clock();
    let mut j = job(url, horizon);
    j.not_before = start_wall;
    j.horizon = start_wall + horizon;
    store.enqueue(vec![j]).await.unwrap();
    let outbox = Arc::new(http_worker(store.clone()).with_clock(clock));
    (store, outbox)
}

#[tokio::test(start_paused = true)]
async fn a_failing_delivery_is_retried_until_it_succeeds() {
    let (url, hits) = fake_receiver(3).await;
    let (store, outbox) = one_post_on_a_paused_clock(&url, SignedDuration::from_hours(1)).await;
    let stop = CancellationToken::new();
    tokio::spawn(outbox.clone().run(stop.clone()));
    wait_until("hits >= 4", || hits.load(Ordering::SeqCst) >= 4).await;
    // Delivered on the 4th attempt, then finished: no more requests (on the paused clock,
    // any retry due within the wait is made before it ends).
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(hits.load(Ordering::SeqCst), 4);
    assert!(
        store
            .next_job_at(&ClaimQuota::any(1))
            .await
            .unwrap()
            .is_none()
    );
    stop.cancel();
}

#[tokio::test(start_paused = true)]
async fn delivery_stops_at_the_horizon() {
    let (url, hits) = fake_receiver(usize::MAX).await;
    let (store, outbox) = one_post_on_a_paused_clock(&url, SignedDuration::from_millis(400)).await;
    let stop = CancellationToken::new();
    tokio::spawn(outbox.clone().run(stop.clone()));
    wait_until("hits >= 2", || hits.load(Ordering::SeqCst) >= 2).await;
    // Given up once a retry would fall past the horizon: the job is no longer unfinished.
    outbox_holds(&store, 0).await;
    let attempts = hits.load(Ordering::SeqCst);
    assert!(
        store
            .next_job_at(&ClaimQuota::any(1))
            .await
            .unwrap()
            .is_none(),
        "the job was given up"
    );
    // On the paused clock, any attempt due within the wait is made before it ends.
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(
        hits.load(Ordering::SeqCst),
        attempts,
        "no attempts after giving up"
    );
    stop.cancel();
}

#[tokio::test]
async fn a_restart_mid_retry_resumes_delivery() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("outbox.db");
    let (url, hits) = fake_receiver(2).await;
    {
        let store: Arc<dyn Store> =
            Arc::new(SqliteStore::open(&path, Synchronous::Normal).unwrap());
        store
            .enqueue(vec![job(&url, SignedDuration::from_hours(1))])
            .await
            .unwrap();
        let outbox = worker(store.clone());
        let stop = CancellationToken::new();
        let run = tokio::spawn(outbox.clone().run(stop.clone()));
        wait_until("hits >= 1", || hits.load(Ordering::SeqCst) >= 1).await;
        stop.cancel();
        let _ = run.await;
    }
    assert!(
        hits.load(Ordering::SeqCst) < 3,
        "not yet delivered before the restart"
    );
    let store: Arc<dyn Store> = Arc::new(reopen_sqlite(&path).await);
    let outbox = worker(store.clone());
    let stop = CancellationToken::new();
    tokio::spawn(outbox.clone().run(stop.clone()));
    wait_until("hits >= 3", || hits.load(Ordering::SeqCst) >= 3).await;
    for _ in 0..100 {
        if store
            .next_job_at(&ClaimQuota::any(1))
            .await
            .unwrap()
            .is_none()
        {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(
        store
            .next_job_at(&ClaimQuota::any(1))
            .await
            .unwrap()
            .is_none(),
        "delivered after the restart"
    );
    stop.cancel();
}

/// Records when each attempt happened (in tokio's clock) and fails the first `fail` ones.
struct Recorder {
    at: Arc<std::sync::Mutex<Vec<tokio::time::Instant>>>,
    fail: usize,
}

#[async_trait]
impl OutboxHandler for Recorder {
    async fn deliver(&self, _job: &ClaimedJob) -> Delivery {
        let mut at = self.at.lock().unwrap();
        at.push(tokio::time::Instant::now());
        if at.len() <= self.fail {
            Delivery::Retry {
                after: None,
                error: "not yet".into(),
            }
        } else {
            Delivery::Done
        }
    }
}

/// A memory store holding one job for `channel`, due now, and a wall clock that advances with
/// tokio's paused clock (for the outbox's `with_clock`).
async fn one_job_on_a_paused_clock(channel: &str) -> (Arc<dyn Store>, imrelay::outbox::Clock) {
    let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
    let (clock, start_wall) = paused_wall_clock();
    let mut j = job("http://unused", SignedDuration::from_hours(1));
    j.channel = channel.into();
    j.not_before = start_wall;
    store.enqueue(vec![j]).await.unwrap();
    (store, clock)
}

#[tokio::test(start_paused = true)]
async fn retries_follow_the_jittered_exponential_backoff() {
    let (store, clock) = one_job_on_a_paused_clock("rec").await;
    let at = Arc::new(std::sync::Mutex::new(Vec::new()));
    let mut outbox = Outbox::new(store.clone(), Arc::new(Metrics::new()))
        .with_backoff(Backoff {
            base: Duration::from_secs(1),
            max: Duration::from_secs(60),
        })
        .with_clock(clock);
    outbox.register(
        "rec",
        Arc::new(Recorder {
            at: at.clone(),
            fail: 6,
        }),
    );
    let outbox = Arc::new(outbox);
    let stop = CancellationToken::new();
    tokio::spawn(outbox.clone().run(stop.clone()));
    for _ in 0..10_000 {
        if at.lock().unwrap().len() >= 7 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let at = at.lock().unwrap().clone();
    assert_eq!(at.len(), 7, "six failures, then success");
    for k in 0..6 {
        let gap = at[k + 1] - at[k];
        let full = Duration::from_secs(1 << k);
        // Each delay is uniformly random in [full/2, full]; the worker may notice a due job up
        // to a few milliseconds late.
        assert!(
            gap >= full / 2 && gap <= full + Duration::from_millis(50),
            "gap {k}: {gap:?} not within [{:?}, {full:?}]",
            full / 2
        );
    }
    stop.cancel();
}

/// Never finishes a delivery, counting how many it was handed.
struct Hang {
    started: Arc<AtomicUsize>,
}

#[async_trait]
impl OutboxHandler for Hang {
    async fn deliver(&self, _job: &ClaimedJob) -> Delivery {
        self.started.fetch_add(1, Ordering::SeqCst);
        std::future::pending().await
    }

    fn concurrency(&self) -> usize {
        2
    }
}

/// Counts deliveries, all successful.
struct Count(Arc<AtomicUsize>);

#[async_trait]
impl OutboxHandler for Count {
    async fn deliver(&self, _job: &ClaimedJob) -> Delivery {
        self.0.fetch_add(1, Ordering::SeqCst);
        Delivery::Done
    }
}

#[tokio::test]
async fn a_hanging_channel_with_a_long_backlog_does_not_hold_up_another() {
    let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
    // A backlog far beyond what this process ever holds in flight, all due before the other
    // channel's jobs.
    let early = Timestamp::now() - SignedDuration::from_mins(1);
    let backlog: Vec<OutboxJob> = (0..1500)
        .map(|n| OutboxJob {
            key: format!("hang-{n}"),
            channel: "hang".into(),
            not_before: early,
            ..job("http://unused", SignedDuration::from_hours(1))
        })
        .collect();
    store.enqueue(backlog).await.unwrap();
    let started = Arc::new(AtomicUsize::new(0));
    let delivered = Arc::new(AtomicUsize::new(0));
    let mut outbox = Outbox::new(store.clone(), Arc::new(Metrics::new()));
    outbox.register(
        "hang",
        Arc::new(Hang {
            started: started.clone(),
        }),
    );
    outbox.register("count", Arc::new(Count(delivered.clone())));
    let outbox = Arc::new(outbox);
    let stop = CancellationToken::new();
    tokio::spawn(outbox.clone().run(stop.clone()));
    wait_until("started == 2", || started.load(Ordering::SeqCst) == 2).await;

    let later: Vec<OutboxJob> = (0..5)
        .map(|n| OutboxJob {
            key: format!("count-{n}"),
            channel: "count".into(),
            ..job("http://unused", SignedDuration::from_hours(1))
        })
        .collect();
    store.enqueue(later).await.unwrap();
    outbox.wake();
    wait_until("delivered == 5", || delivered.load(Ordering::SeqCst) == 5).await;
    // The hanging channel was handed only what it can work on; the rest waits in the store.
    assert_eq!(started.load(Ordering::SeqCst), 2);
    let backlog = store.job_backlog().await.unwrap();
    assert_eq!(backlog, vec![("hang".to_string(), 1500)]);
    stop.cancel();
}

/// Hangs on its first attempt, succeeds on the next.
struct HangOnce {
    started: Arc<AtomicUsize>,
}

#[async_trait]
impl OutboxHandler for HangOnce {
    async fn deliver(&self, _job: &ClaimedJob) -> Delivery {
        if self.started.fetch_add(1, Ordering::SeqCst) == 0 {
            std::future::pending::<()>().await;
        }
        Delivery::Done
    }
}

#[tokio::test(start_paused = true)]
async fn an_attempt_that_hangs_is_given_up_before_its_lease_and_retried() {
    let (store, clock) = one_job_on_a_paused_clock("hang").await;
    let start = tokio::time::Instant::now();
    let started = Arc::new(AtomicUsize::new(0));
    let mut outbox = Outbox::new(store.clone(), Arc::new(Metrics::new()))
        .with_backoff(Backoff {
            base: Duration::from_secs(1),
            max: Duration::from_secs(1),
        })
        .with_clock(clock);
    outbox.register(
        "hang",
        Arc::new(HangOnce {
            started: started.clone(),
        }),
    );
    let outbox = Arc::new(outbox);
    let stop = CancellationToken::new();
    tokio::spawn(outbox.clone().run(stop.clone()));
    // Well before the 10-minute lease runs out, the hung attempt is abandoned and the job
    // delivered by a second attempt, whose result is recorded.
    let mut done = false;
    for _ in 0..600 {
        tokio::time::sleep(Duration::from_secs(1)).await;
        let backlog = store.job_backlog().await.unwrap();
        if started.load(Ordering::SeqCst) >= 2 && backlog.is_empty() {
            done = true;
            break;
        }
    }
    assert!(done, "attempts: {}", started.load(Ordering::SeqCst));
    assert_eq!(started.load(Ordering::SeqCst), 2);
    assert!(
        tokio::time::Instant::now() - start < imrelay::outbox::LEASE,
        "finished within the first lease"
    );
    stop.cancel();
}
