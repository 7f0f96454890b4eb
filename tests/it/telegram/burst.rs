//! A burst of requests to one Telegram group, which takes about one message every 3 s: how
//! many are shown before their deadline, posted on their own or listed in a digest. This
//! measures (BENCHMARKS.md, "A burst never waits"); it asserts nothing about time. The
//! deadlines are wall-clock, so it runs in real time: `cargo test --locked --test it --
//! --ignored --nocapture burst_` (about five minutes, every case at once on loopback).

use std::time::Instant as StdInstant;

use futures_util::StreamExt;
use jiff::Timestamp;

use super::*;

/// What became of one burst.
#[derive(Debug, Default)]
struct Shown {
    /// Posted on their own before their deadline.
    posted: usize,
    /// Not posted on their own in time, but listed in a digest shown before their deadline.
    digested: usize,
    /// Neither: expired without being shown to anyone.
    unseen: usize,
    /// Seconds from a request to its own post, the latest one.
    latest_post_secs: f64,
}

/// Sends `n` requests of `deadline_secs` at once from one session to the group (Telegram at
/// its real pace, digests at their default: off) and counts what was shown in time.
async fn burst(n: usize, deadline_secs: u64) -> Shown {
    let (app, tg) = start_with(Mode::Webhook, |s| {
        s.telegram.chats = vec![GROUP];
    })
    .await;
    let (t0, ts0) = (StdInstant::now(), Timestamp::now());
    let created: Vec<(usize, String, StdInstant)> = futures_util::stream::iter(0..n)
        .map(|k| {
            let app = &app;
            async move {
                let body = json!({"tool_name": "Bash", "input": {"command": format!("burst-{k}-end")},
                    "session": "s-burst", "cwd": "/home/dev/shop", "timeout_secs": deadline_secs});
                let (s, v) = app.post("/v1/interactions", &body).await;
                assert_eq!(s, StatusCode::CREATED, "{v}");
                (k, v["id"].as_str().unwrap().to_string(), StdInstant::now())
            }
        })
        .buffer_unordered(32)
        .collect()
        .await;
    let last = created.iter().map(|c| c.2).max().unwrap();
    let deadline = Duration::from_secs(deadline_secs);
    // Until every deadline has passed, or every request was shown.
    let out = loop {
        let now = StdInstant::now();
        let out = count(&app, &tg, &created, deadline, t0, ts0).await;
        if out.posted + out.digested == n || now > last + deadline + Duration::from_secs(2) {
            break out;
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    };
    tg.take_refusals();
    app.stop().await;
    out
}

/// What of `created` (index, id, created at) was shown within `deadline`.
async fn count(
    app: &TestApp,
    tg: &FakeTelegram,
    created: &[(usize, String, StdInstant)],
    deadline: Duration,
    t0: StdInstant,
    ts0: Timestamp,
) -> Shown {
    let sent = tg.calls("sendMessage");
    let edited = tg.calls("editMessageText");
    let text = |c: &Call| c.params["text"].as_str().unwrap_or("").to_string();
    let digests: Vec<StdInstant> = sent
        .iter()
        .chain(edited.iter())
        .filter(|c| text(c).contains("from session"))
        .map(|c| c.at.into_std())
        .collect();
    let mut out = Shown::default();
    for (k, id, at) in created {
        let by = *at + deadline;
        let marker = format!("burst-{k}-end");
        let own = sent
            .iter()
            .filter(|c| !text(c).contains("from session") && text(c).contains(&marker))
            .map(|c| c.at.into_std())
            .min();
        if let Some(p) = own.filter(|p| *p < by) {
            out.posted += 1;
            out.latest_post_secs = out.latest_post_secs.max((p - *at).as_secs_f64());
            continue;
        }
        let id = imrelay::interaction::InteractionId::parse(id).unwrap();
        let held = app
            .store
            .messages("telegram:digest", &id)
            .await
            .unwrap()
            .into_iter()
            .map(|m| m.created_at)
            .min();
        let shown_in_digest = held.is_some_and(|h| {
            let since = h.duration_since(ts0).unsigned_abs();
            let held_at = t0 + since;
            digests.iter().any(|d| *d >= held_at && *d < by)
        });
        if shown_in_digest {
            out.digested += 1;
        } else {
            out.unseen += 1;
        }
    }
    out
}

#[tokio::test]
#[ignore = "measures for BENCHMARKS.md in real time (about five minutes): --ignored --nocapture burst_"]
async fn burst_to_one_group_shown_before_the_deadline() {
    let cases = [
        (10, 60),
        (60, 60),
        (300, 60),
        (10, 300),
        (60, 300),
        (300, 300),
    ];
    let results = futures_util::future::join_all(
        cases
            .iter()
            .map(|&(n, d)| async move { (n, d, burst(n, d).await) }),
    )
    .await;
    println!(
        "| burst | deadline | posted in time | digested in time | expired unseen | latest own post |"
    );
    println!("|---|---|---|---|---|---|");
    for (n, d, s) in results {
        println!(
            "| {n} | {d} s | {} | {} | {} | {:.0} s |",
            s.posted, s.digested, s.unseen, s.latest_post_secs
        );
    }
}
