//! Reading a request body within bounds no client can stretch.
//!
//! - **Size.** At most [`super::MAX_BODY_BYTES`]; a declared `Content-Length` above it is
//!   refused before anything is read.
//! - **Time.** The whole body must arrive within [`BodyLimits::timeout`] of the request head,
//!   and at no point may it fall behind [`BodyLimits::min_rate`] bytes per second, counted
//!   after a grace of [`RATE_GRACE`]: a body that stalls is refused as soon as it falls
//!   behind, one that trickles on for ever when the whole-body timeout passes. Either way the
//!   client gets `408` and the connection is closed, freeing its slot.
//! - **Memory.** The body is copied into one growing buffer as it arrives, and each chunk the
//!   connection read is released at once. A chunk is a view into the connection's read
//!   buffer: keeping the chunks (as a chain of `Bytes` does) would keep one read buffer alive
//!   per TCP packet, so a body sent one byte per packet would hold kilobytes per byte. Here a
//!   body holds at most twice the bytes received.
//!
//! The HTTP server stamps each request with its [`BodyClock`] when the head has been read; a
//! request without one (a router driven directly, in tests) starts its clock when the body is
//! first read, under the default limits.

use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::http::{Extensions, HeaderMap, StatusCode, header};
use futures_util::StreamExt;
use tokio::time::Instant;

use super::error::ApiError;

/// How long a body may take before [`BodyLimits::min_rate`] is enforced: the first bytes of
/// a body may lag behind its head on a slow link.
pub const RATE_GRACE: Duration = Duration::from_secs(5);

/// How long and how slowly a client may send a request body.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BodyLimits {
    /// Time allowed for the whole body, from the end of the request head.
    pub timeout: Duration,
    /// Bytes per second the body must keep up with after [`RATE_GRACE`] (0: no minimum).
    pub min_rate: u64,
}

impl Default for BodyLimits {
    /// The defaults of `server.body_timeout_secs` and `server.body_min_bytes_per_sec`.
    fn default() -> Self {
        Self {
            timeout: Duration::from_secs(30),
            min_rate: 1024,
        }
    }
}

/// When a request's head was read and the limits its body must keep: put in the request's
/// extensions by the server.
#[derive(Clone, Copy, Debug)]
pub struct BodyClock {
    started: Instant,
    limits: BodyLimits,
}

impl BodyClock {
    /// A clock started now.
    pub fn start(limits: BodyLimits) -> Self {
        Self {
            started: Instant::now(),
            limits,
        }
    }

    /// The clock of a request: the one the server stamped, or one started now.
    fn of(extensions: &Extensions) -> Self {
        extensions
            .get::<Self>()
            .copied()
            .unwrap_or_else(|| Self::start(BodyLimits::default()))
    }

    /// The whole-body deadline.
    fn deadline(&self) -> Instant {
        self.started + self.limits.timeout
    }

    /// When a body that has delivered `received` bytes falls behind the minimum rate (never
    /// later than the whole-body deadline), and whether that is the whole-body deadline.
    fn due(&self, received: usize) -> (Instant, bool) {
        let deadline = self.deadline();
        if self.limits.min_rate == 0 {
            return (deadline, true);
        }
        // `received` bytes buy received / min_rate seconds past the grace.
        let earned = Duration::from_secs_f64(received as f64 / self.limits.min_rate as f64);
        let behind = self.started + RATE_GRACE.saturating_add(earned);
        if behind < deadline {
            (behind, false)
        } else {
            (deadline, true)
        }
    }
}

/// Why a body was not read.
#[derive(Debug, thiserror::Error)]
pub enum BodyError {
    /// Larger than allowed (declared or sent).
    #[error("the body is larger than {max} bytes")]
    TooLarge {
        /// The limit.
        max: usize,
    },
    /// The whole body did not arrive in time.
    #[error(
        "the request body did not arrive within {} seconds of its head",
        limit.as_secs()
    )]
    TimedOut {
        /// The whole-body timeout.
        limit: Duration,
    },
    /// The body arrived more slowly than the minimum rate.
    #[error(
        "the request body arrived more slowly than {rate} bytes per second ({received} bytes so far)"
    )]
    TooSlow {
        /// The minimum rate.
        rate: u64,
        /// Bytes received before it fell behind.
        received: usize,
    },
    /// The connection failed while the body was read.
    #[error("the body could not be read: {0}")]
    Failed(String),
}

impl BodyError {
    /// The HTTP status it is answered with.
    pub fn status(&self) -> StatusCode {
        match self {
            BodyError::TooLarge { .. } => StatusCode::PAYLOAD_TOO_LARGE,
            BodyError::TimedOut { .. } | BodyError::TooSlow { .. } => StatusCode::REQUEST_TIMEOUT,
            BodyError::Failed(_) => StatusCode::BAD_REQUEST,
        }
    }

    /// The stable error code it is answered with.
    pub fn code(&self) -> &'static str {
        match self {
            BodyError::TooLarge { .. } => "payload_too_large",
            BodyError::TimedOut { .. } => "body_timeout",
            BodyError::TooSlow { .. } => "body_too_slow",
            BodyError::Failed(_) => "invalid_request",
        }
    }
}

/// The API's answer: its status and code, with `Connection: close` since the rest of the
/// body was not read.
impl From<BodyError> for ApiError {
    fn from(e: BodyError) -> Self {
        ApiError::new(e.status(), e.code(), e.to_string()).closing()
    }
}

/// The declared `Content-Length`, if it is readable.
fn declared_length(headers: &HeaderMap) -> Option<u64> {
    headers
        .get(header::CONTENT_LENGTH)?
        .to_str()
        .ok()?
        .trim()
        .parse()
        .ok()
}

/// Refuses a request whose `Content-Length` declares more than `max` bytes: checked from the
/// head alone, before anything else about the request.
pub fn check_declared(headers: &HeaderMap, max: usize) -> Result<(), BodyError> {
    if declared_length(headers).is_some_and(|n| n > max as u64) {
        return Err(BodyError::TooLarge { max });
    }
    Ok(())
}

/// Reads the body of a request whose head was `headers` and `extensions`, at most `max`
/// bytes, within the request's [`BodyClock`].
pub async fn read(
    headers: &HeaderMap,
    extensions: &Extensions,
    body: Body,
    max: usize,
) -> Result<Bytes, BodyError> {
    check_declared(headers, max)?;
    read_within(BodyClock::of(extensions), body, max).await
}

/// Reads `body` into one buffer, at most `max` bytes, keeping `clock`'s deadlines.
async fn read_within(clock: BodyClock, body: Body, max: usize) -> Result<Bytes, BodyError> {
    let mut chunks = body.into_data_stream();
    let mut buf: Vec<u8> = Vec::new();
    loop {
        let (due, whole) = clock.due(buf.len());
        let next = match tokio::time::timeout_at(due, chunks.next()).await {
            Ok(next) => next,
            Err(_) if whole => {
                return Err(BodyError::TimedOut {
                    limit: clock.limits.timeout,
                });
            }
            Err(_) => {
                return Err(BodyError::TooSlow {
                    rate: clock.limits.min_rate,
                    received: buf.len(),
                });
            }
        };
        match next {
            None => break,
            Some(Err(e)) => return Err(BodyError::Failed(e.to_string())),
            Some(Ok(chunk)) => {
                if buf.len().saturating_add(chunk.len()) > max {
                    return Err(BodyError::TooLarge { max });
                }
                // Copied, and the chunk (a view into the connection's read buffer) dropped.
                buf.extend_from_slice(&chunk);
            }
        }
    }
    Ok(Bytes::from(buf))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_body_that_stalls_is_refused_once_it_falls_behind_the_rate() {
        let limits = BodyLimits {
            timeout: Duration::from_secs(30),
            min_rate: 100,
        };
        // 200 bytes, then nothing: due at the grace plus 2 s.
        let stream =
            futures_util::stream::iter([Ok::<_, std::io::Error>(Bytes::from(vec![b' '; 200]))])
                .chain(futures_util::stream::pending());
        let started = Instant::now();
        let err = read_within(BodyClock::start(limits), Body::from_stream(stream), 1 << 20)
            .await
            .expect_err("refused");
        assert!(
            matches!(
                err,
                BodyError::TooSlow {
                    rate: 100,
                    received: 200
                }
            ),
            "{err:?}"
        );
        assert_eq!(started.elapsed(), RATE_GRACE + Duration::from_secs(2));
    }

    #[tokio::test(start_paused = true)]
    async fn a_body_that_keeps_up_but_never_ends_is_refused_at_the_timeout() {
        let limits = BodyLimits {
            timeout: Duration::from_secs(30),
            min_rate: 100,
        };
        // 1,000 bytes a second, for ever.
        let stream = futures_util::stream::unfold((), |()| async {
            tokio::time::sleep(Duration::from_secs(1)).await;
            Some((Ok::<_, std::io::Error>(Bytes::from(vec![b' '; 1000])), ()))
        });
        let err = read_within(BodyClock::start(limits), Body::from_stream(stream), 1 << 20)
            .await
            .expect_err("refused");
        assert!(matches!(err, BodyError::TimedOut { .. }), "{err:?}");
        let api: ApiError = err.into();
        assert_eq!(api.status(), StatusCode::REQUEST_TIMEOUT);
        assert_eq!(api.code(), "body_timeout");
    }

    #[tokio::test]
    async fn too_large_declared_or_sent_is_refused() {
        let max = 10;
        let mut headers = HeaderMap::new();
        headers.insert(header::CONTENT_LENGTH, "11".parse().expect("value"));
        let err = read(&headers, &Extensions::new(), Body::empty(), max)
            .await
            .expect_err("declared too large");
        assert!(matches!(err, BodyError::TooLarge { max: 10 }), "{err:?}");
        let err = read(
            &HeaderMap::new(),
            &Extensions::new(),
            Body::from(vec![0u8; 11]),
            max,
        )
        .await
        .expect_err("sent too large");
        assert!(matches!(err, BodyError::TooLarge { max: 10 }), "{err:?}");
        let ok = read(
            &HeaderMap::new(),
            &Extensions::new(),
            Body::from(vec![7u8; 10]),
            max,
        )
        .await
        .expect("at the limit");
        assert_eq!(&ok[..], &[7u8; 10]);
    }

    #[test]
    fn without_a_minimum_rate_only_the_timeout_applies() {
        let clock = BodyClock::start(BodyLimits {
            timeout: Duration::from_secs(30),
            min_rate: 0,
        });
        assert_eq!(clock.due(0), (clock.deadline(), true));
        let clock = BodyClock::start(BodyLimits {
            timeout: Duration::from_secs(30),
            min_rate: 1,
        });
        assert_eq!(clock.due(0), (clock.started + RATE_GRACE, false));
        assert_eq!(clock.due(1_000_000), (clock.deadline(), true));
    }
}
