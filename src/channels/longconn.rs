//! What the long-connection transports of the newer chat platforms share (Slack's Socket
//! Mode, DingTalk's stream, WeCom's bot connection): the reconnect backoff with its attempt count.

use std::time::Duration;

use rand::Rng;

/// A connection that stayed up this long was a good one: the backoff starts over after it.
pub const STABLE_AFTER: Duration = Duration::from_secs(60);

/// The TLS client settings for `wss://` ([`crate::tls::client_config`]; kept under this name
/// for the transports' tests).
pub use crate::tls::client_config as tls_config;

/// The wait before reconnect attempt `attempt` (0 first): doubling from `min`, capped at
/// `max`, jittered down to half of that, never below `min`.
pub fn backoff(attempt: u32, min: Duration, max: Duration) -> Duration {
    let exp = min.saturating_mul(1u32 << attempt.min(16)).min(max);
    let lo = exp / 2;
    let jitter = rand::rng().random_range(0..=(exp - lo).as_millis() as u64);
    (lo + Duration::from_millis(jitter)).max(min)
}

/// Counts reconnect attempts; the count starts over only after a connection stayed up for
/// [`STABLE_AFTER`], so a server that accepts and then drops at once is not hammered.
#[derive(Clone, Copy, Debug, Default)]
pub struct Attempts(u32);

impl Attempts {
    /// Records how a connection ended (`up_for`: how long it was open, if it opened) and
    /// returns the attempt number for the next wait.
    pub fn after(&mut self, up_for: Option<Duration>) -> u32 {
        if up_for.is_some_and(|d| d >= STABLE_AFTER) {
            self.0 = 0;
        }
        let n = self.0;
        self.0 = self.0.saturating_add(1);
        n
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_within_bounds_and_starts_over_after_a_good_connection() {
        let (min, max) = (Duration::from_secs(1), Duration::from_secs(120));
        for _ in 0..50 {
            assert_eq!(backoff(0, min, max), min);
            let b = backoff(3, min, max);
            assert!(
                b >= Duration::from_secs(4) && b <= Duration::from_secs(8),
                "{b:?}"
            );
            let b = backoff(40, min, max);
            assert!(b <= max && b >= max / 2, "{b:?}");
        }
        let mut a = Attempts::default();
        assert_eq!(a.after(None), 0);
        assert_eq!(a.after(Some(Duration::from_secs(1))), 1);
        assert_eq!(a.after(Some(STABLE_AFTER)), 0);
    }
}
