//! What the long-connection transports of the newer chat platforms share (Slack's Socket
//! Mode, DingTalk's stream, WeCom's bot connection, and where they do the same, Feishu's long
//! connection): the reconnect backoff with its attempt count, opening the WebSocket, and
//! reading a JSON text frame.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use rand::Rng;
use serde::de::DeserializeOwned;
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;
use tokio_tungstenite::tungstenite::{self, Message};
use tokio_util::sync::CancellationToken;

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

/// A WebSocket opened by [`dial`].
pub type Socket =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

/// Why [`dial`] opened no connection.
#[derive(Debug)]
pub enum DialError {
    /// TCP, TLS or the WebSocket handshake took longer than allowed.
    Stalled,
    /// Connecting or the handshake failed.
    Failed(tungstenite::Error),
}

impl fmt::Display for DialError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Stalled => f.write_str("the connection stalled"),
            Self::Failed(tungstenite::Error::Http(resp)) => {
                write!(f, "handshake refused (HTTP {})", resp.status())
            }
            Self::Failed(other) => write!(f, "{other}"),
        }
    }
}

/// Opens a WebSocket to `url` over TLS (`tls`), taking messages and frames of up to
/// `max_bytes`, within `timeout`; `Ok(None)` when `shutdown` comes first.
pub async fn dial(
    url: &str,
    max_bytes: usize,
    tls: Arc<rustls::ClientConfig>,
    timeout: Duration,
    shutdown: &CancellationToken,
) -> Result<Option<Socket>, DialError> {
    let limits = WebSocketConfig::default()
        .max_message_size(Some(max_bytes))
        .max_frame_size(Some(max_bytes));
    let connect = tokio_tungstenite::connect_async_tls_with_config(
        url,
        Some(limits),
        true,
        Some(tokio_tungstenite::Connector::Rustls(tls)),
    );
    tokio::select! {
        _ = shutdown.cancelled() => Ok(None),
        r = tokio::time::timeout(timeout, connect) => match r {
            Err(_) => Err(DialError::Stalled),
            Ok(Err(e)) => Err(DialError::Failed(e)),
            Ok(Ok((ws, _))) => Ok(Some(ws)),
        },
    }
}

/// What one read from a JSON-text connection gave: `Ok(Some)` a frame, `Ok(None)` nothing
/// to act on (a frame of the WebSocket layer, or text that is not JSON, logged with the
/// `channel`'s name), `Err` why the connection is over (it ended, failed, or was closed by
/// the `platform`).
pub fn json_frame<T: DeserializeOwned>(
    read: Option<Result<Message, tungstenite::Error>>,
    channel: &str,
    platform: &str,
) -> Result<Option<T>, String> {
    let text = match read {
        None => return Err("the connection ended".into()),
        Some(Err(e)) => return Err(format!("connection error: {e}")),
        Some(Ok(Message::Close(_))) => return Err(format!("closed by {platform}")),
        Some(Ok(Message::Text(t))) => t,
        Some(Ok(_)) => return Ok(None),
    };
    match serde_json::from_str(text.as_str()) {
        Ok(frame) => Ok(Some(frame)),
        Err(e) => {
            tracing::warn!(error = %e, "{channel}: a frame that is not JSON ignored");
            Ok(None)
        }
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
