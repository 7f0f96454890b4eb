//! How many refusals reach the audit trail: refusals that anyone can cause without credentials
//! are admitted from a token bucket per channel, and those beyond it are counted instead.

use crate::sync::LockExt;
use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Bounds the audit entries and warnings of refusals that anyone can cause without
/// credentials (a bad signature, a wrong secret): a token bucket per channel. A refusal
/// beyond the bucket is counted instead of written, and the count is reported with the next
/// refusal that is written.
#[derive(Debug)]
pub struct RefusalLimiter {
    burst: u32,
    refill: Duration,
    // A std mutex: a map update, never held across an await.
    buckets: Mutex<HashMap<String, Bucket>>,
}

#[derive(Debug)]
struct Bucket {
    tokens: f64,
    at: Instant,
    suppressed: u64,
}

/// Most channels tracked separately; refusals of further channels share one bucket.
const MAX_BUCKETS: usize = 256;

impl Default for RefusalLimiter {
    /// 10 at once, then one every 6 seconds, per channel.
    fn default() -> Self {
        Self::new(10, Duration::from_secs(6))
    }
}

impl RefusalLimiter {
    /// `burst` refusals at once per channel, then one per `refill`.
    pub fn new(burst: u32, refill: Duration) -> Self {
        Self {
            burst: burst.max(1),
            refill: refill.max(Duration::from_millis(1)),
            buckets: Mutex::new(HashMap::new()),
        }
    }

    /// Whether a refusal on `channel` at `now` is written: `Some(n)` with the number of
    /// refusals suppressed on that channel since the last one written, or `None` (suppressed
    /// and counted).
    pub fn admit(&self, channel: &str, now: Instant) -> Option<u64> {
        let mut buckets = self.buckets.locked();
        let key = if buckets.len() < MAX_BUCKETS || buckets.contains_key(channel) {
            channel
        } else {
            "(other channels)"
        };
        let burst = f64::from(self.burst);
        let b = buckets.entry(key.to_string()).or_insert(Bucket {
            tokens: burst,
            at: now,
            suppressed: 0,
        });
        let gained = now.saturating_duration_since(b.at).as_secs_f64() / self.refill.as_secs_f64();
        b.tokens = (b.tokens + gained).min(burst);
        b.at = now.max(b.at);
        if b.tokens >= 1.0 {
            b.tokens -= 1.0;
            Some(std::mem::take(&mut b.suppressed))
        } else {
            b.suppressed += 1;
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refusals_beyond_the_burst_are_counted_and_reported_with_the_next_one() {
        let limiter = RefusalLimiter::new(3, Duration::from_secs(10));
        let t0 = Instant::now();
        for _ in 0..3 {
            assert_eq!(limiter.admit("webhook:a", t0), Some(0));
        }
        for _ in 0..5 {
            assert_eq!(limiter.admit("webhook:a", t0), None);
        }
        // Another channel has its own bucket.
        assert_eq!(limiter.admit("telegram", t0), Some(0));
        // Half a refill: still suppressed; a full one: written, with the count.
        assert_eq!(
            limiter.admit("webhook:a", t0 + Duration::from_secs(5)),
            None
        );
        assert_eq!(
            limiter.admit("webhook:a", t0 + Duration::from_secs(11)),
            Some(6)
        );
        assert_eq!(
            limiter.admit("webhook:a", t0 + Duration::from_secs(11)),
            None
        );
        // A long quiet spell refills up to the burst, not beyond.
        let later = t0 + Duration::from_secs(3600);
        for _ in 0..3 {
            assert!(limiter.admit("webhook:a", later).is_some());
        }
        assert_eq!(limiter.admit("webhook:a", later), None);
    }
}
