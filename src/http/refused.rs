//! Requests refused for their token, logged: a wrong token in an agent's hook is otherwise
//! silent (Claude Code treats a 401 as "ask in its own dialog"). Each line names the scope,
//! the path, the peer and a fingerprint of the token sent (never the token), at most
//! [`PER_MINUTE`] lines a minute; the lines held back are counted in the next one.

use std::net::SocketAddr;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The most refusal lines logged in a minute.
pub(super) const PER_MINUTE: u32 = 20;

/// How long one budget of lines lasts.
const WINDOW: Duration = Duration::from_secs(60);

/// The log of refused tokens, rate-limited.
#[derive(Debug)]
pub(super) struct RefusalLog {
    /// When the current window began, lines logged in it, and lines held back since the
    /// last one logged.
    state: Mutex<(Instant, u32, u64)>,
}

impl Default for RefusalLog {
    fn default() -> Self {
        Self {
            state: Mutex::new((Instant::now(), 0, 0)),
        }
    }
}

impl RefusalLog {
    /// Logs a refused request: `scope` it needed, `path`, `peer`, the token it came with
    /// (`None`: none), the status and why.
    pub(super) fn note(
        &self,
        scope: &str,
        path: &str,
        peer: SocketAddr,
        token: Option<&str>,
        status: u16,
        why: &str,
    ) {
        let held_back = {
            let Ok(mut s) = self.state.lock() else {
                return;
            };
            let now = Instant::now();
            if now.duration_since(s.0) >= WINDOW {
                *s = (now, 0, s.2);
            }
            if s.1 >= PER_MINUTE {
                s.2 = s.2.saturating_add(1);
                return;
            }
            s.1 += 1;
            std::mem::take(&mut s.2)
        };
        let fingerprint = token.map_or_else(|| "none".to_string(), crate::settings::fingerprint);
        tracing::warn!(
            scope,
            path = %path,
            %peer,
            token = %fingerprint,
            status,
            held_back,
            reason = %why,
            "refused a request for its token (the token's fingerprint is the first 8 hex digits of its SHA-256; `imrelay doctor --agent-token` checks an agent token)"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn at_most_the_budget_is_logged_in_a_window_and_the_rest_counted() {
        let log = RefusalLog::default();
        let peer: SocketAddr = "127.0.0.1:1".parse().unwrap();
        for _ in 0..PER_MINUTE + 5 {
            log.note("agent", "/v1/interactions", peer, Some("t"), 401, "no");
        }
        let (_, logged, held_back) = *log.state.lock().unwrap();
        assert_eq!((logged, held_back), (PER_MINUTE, 5));
        // A new window logs again, and its first line carries the count held back.
        log.state.lock().unwrap().0 = Instant::now() - WINDOW;
        log.note("agent", "/v1/interactions", peer, None, 401, "no");
        let (_, logged, held_back) = *log.state.lock().unwrap();
        assert_eq!((logged, held_back), (1, 0));
    }
}
