//! The HTTP server: accepts TCP connections and serves the router over HTTP/1.1 (hyper),
//! within bounds that no client can stretch.
//!
//! - **Header timeout.** A connection has [`Limits::header_read_timeout`] to deliver a
//!   complete request head, counted from when it opens, or, on a kept-alive connection, from
//!   the end of the previous response. hyper runs this one timer over both phases, so it is
//!   also the idle timeout of keep-alive connections. A request being answered is never timed:
//!   a long-poll or an event stream stays open as long as its handler runs.
//! - **Connection cap.** At most [`Limits::max_connections`] connections are served at once.
//!   Up to [`Limits::overflow_connections`] more are accepted for a single request each,
//!   without keep-alive and with a short header timeout: `/livez` and `/healthz` are answered
//!   as usual (a supervisor's probe must not fail because clients hold every slot), anything
//!   else gets `503 too_many_connections` with `Retry-After` and `Connection: close`. A
//!   connection beyond those gets the same `503` as soon as it is accepted, without its
//!   request being read, and is closed.
//! - **Open files.** `open_file_limit` raises the soft `RLIMIT_NOFILE` to the hard limit, and
//!   `connection_budget` keeps the cap below it with room for the refusals and for
//!   everything else the process opens (the store, logs, channel connections), warning when
//!   the configured cap had to be lowered.
//! - **Body bounds.** Each request carries a [`BodyClock`] started when its head was read:
//!   its body must arrive within [`Limits::body`] (a whole-body timeout and a minimum rate),
//!   which every body reader keeps ([`crate::wire::body`]).
//! - **Shutdown.** When the token fires, the server stops accepting, lets in-flight requests
//!   finish and closes idle connections; the future returns once every connection is done.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::ConnectInfo;
use axum::http::{HeaderValue, Request, StatusCode, header};
use axum::response::{IntoResponse, Response};
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::{Service, service_fn};
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::gauge::Gauge;
use tokio::net::{TcpListener, TcpSocket, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio_util::sync::CancellationToken;

use super::error::ApiError;
use crate::metrics::Metrics;
use crate::wire::body::{BodyClock, BodyLimits};

/// Connections accepted beyond the cap to answer one request each (health probes, or a
/// `503 too_many_connections`): the default of [`Limits::overflow_connections`].
pub(crate) const OVERFLOW_CONNECTIONS: usize = 64;

/// File descriptors kept free for everything but client connections: the store and its
/// journal, logs, the listener, the runtime, and outbound connections to channels.
pub(crate) const RESERVED_FILES: u64 = 64;

/// The header timeout of an overflow connection (at most; the configured one if shorter), so
/// that a client cannot hold an overflow slot for long.
const OVERFLOW_HEADER_TIMEOUT: Duration = Duration::from_secs(2);

/// Largest accepted request head (request line and headers); larger ones get `431`.
pub(crate) const MAX_HEADER_BYTES: usize = 64 * 1024;

/// What `Retry-After` tells a client refused for lack of connections, in seconds.
const RETRY_AFTER_SECS: u64 = 1;

/// Connections the kernel completes before they are accepted (capped by
/// `net.core.somaxconn`). tokio's default of 128 drops connections of a burst, health probes
/// among them, which then wait a second or more for the client to retry.
pub(crate) const LISTEN_BACKLOG: u32 = 1024;

/// Pause after an accept error other than a failed handshake (e.g. out of file descriptors),
/// so that the loop does not spin while the process has none to give.
const ACCEPT_ERROR_PAUSE: Duration = Duration::from_millis(200);

/// The bounds the server keeps.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    /// Connections served at once.
    pub max_connections: usize,
    /// Connections accepted beyond the cap to answer one request each.
    pub overflow_connections: usize,
    /// Time allowed for a complete request head, from when a connection opens or finishes its
    /// previous response.
    pub header_read_timeout: Duration,
    /// Time and rate bounds of a request body, from the end of its head.
    pub body: BodyLimits,
}

/// The connection cap that fits an open-file limit, and a warning if it had to be lowered.
#[derive(Debug, PartialEq, Eq)]
pub struct Budget {
    /// Connections to serve at once.
    pub max_connections: usize,
    /// Why the configured cap was lowered, and how to avoid it.
    pub warning: Option<String>,
}

/// Fits the configured cap `configured` to the soft open-file limit `open_files` (`None`:
/// unknown or unlimited): every served connection, every overflow connection and
/// [`RESERVED_FILES`] must fit under it. If they do not, the cap is lowered to what fits (at
/// least 1) and the warning says so.
pub(crate) fn connection_budget(configured: usize, open_files: Option<u64>) -> Budget {
    let Some(limit) = open_files else {
        return Budget {
            max_connections: configured,
            warning: None,
        };
    };
    let overhead = OVERFLOW_CONNECTIONS as u64 + RESERVED_FILES;
    let needed = (configured as u64).saturating_add(overhead);
    if limit >= needed {
        return Budget {
            max_connections: configured,
            warning: None,
        };
    }
    let fits = usize::try_from(limit.saturating_sub(overhead))
        .unwrap_or(usize::MAX)
        .max(1);
    Budget {
        max_connections: fits,
        warning: Some(format!(
            "the open-file limit (RLIMIT_NOFILE) is {limit}, but server.max_connections = \
             {configured} needs {needed} (with {OVERFLOW_CONNECTIONS} for refusing connections \
             over the cap and {RESERVED_FILES} for the store, logs and channels): serving at \
             most {fits} connections at once. Raise the limit (systemd: LimitNOFILE=; Docker: \
             --ulimit nofile=N:N; a shell: ulimit -n N) or lower server.max_connections"
        )),
    }
}

/// Each token's share of connections when the cap `fitted` may be lower than the configured
/// `configured_max`: the configured `per_token`, lowered in the same proportion as the cap
/// (at least 1).
pub(crate) fn per_token_share(per_token: usize, configured_max: usize, fitted: usize) -> usize {
    if fitted >= configured_max {
        return per_token;
    }
    let share = (per_token as u128 * fitted as u128 / configured_max.max(1) as u128) as usize;
    share.clamp(1, per_token)
}

/// Raises the soft open-file limit to the hard limit, as far as the system allows, and
/// returns the soft limit in force (`None` where there is no such limit, or it is unlimited).
pub(crate) fn open_file_limit() -> Option<u64> {
    #[cfg(unix)]
    {
        let before = rlimit::getrlimit(rlimit::Resource::NOFILE)
            .ok()
            .map(|(s, _)| s);
        let now = match rlimit::increase_nofile_limit(u64::MAX) {
            Ok(now) => Some(now),
            Err(e) => {
                tracing::warn!(error = %e, "cannot raise the open-file limit");
                before
            }
        };
        if let (Some(before), Some(now)) = (before, now)
            && now > before
        {
            tracing::debug!(from = before, to = now, "raised the open-file limit");
        }
        now.filter(|&n| n != rlimit::INFINITY)
    }
    #[cfg(not(unix))]
    {
        None
    }
}

/// Listens on `addr` with a `LISTEN_BACKLOG` of pending connections.
pub fn bind(addr: SocketAddr) -> std::io::Result<TcpListener> {
    let socket = if addr.is_ipv4() {
        TcpSocket::new_v4()?
    } else {
        TcpSocket::new_v6()?
    };
    // As tokio's own `bind`: a restarted server can listen again at once.
    #[cfg(not(windows))]
    socket.set_reuseaddr(true)?;
    socket.bind(addr)?;
    socket.listen(LISTEN_BACKLOG)
}

/// Connection counts published at `/metrics`.
#[derive(Clone, Default)]
struct ConnectionMetrics {
    open: Gauge,
    refused: Counter,
    timed_out: Counter,
}

impl ConnectionMetrics {
    fn register(metrics: &Metrics) -> Self {
        let m = Self::default();
        metrics.register(
            "imrelay_http_connections",
            "Client connections being served (counted against server.max_connections)",
            m.open.clone(),
        );
        metrics.register(
            "imrelay_http_connections_refused",
            "Connections over server.max_connections: answered with 503 too_many_connections, or a health check",
            m.refused.clone(),
        );
        metrics.register(
            "imrelay_http_header_timeouts",
            "Connections closed because no complete request head arrived within server.header_read_timeout_secs (slow or idle clients)",
            m.timed_out.clone(),
        );
        m
    }
}

/// Serves `router` on `listener` within `limits` until `shutdown` fires, then waits for
/// in-flight requests (the caller bounds how long).
pub async fn serve(
    listener: TcpListener,
    router: Router,
    limits: Limits,
    metrics: &Metrics,
    shutdown: CancellationToken,
) {
    let counts = ConnectionMetrics::register(metrics);
    let slots = Arc::new(Semaphore::new(limits.max_connections));
    let overflow = Arc::new(Semaphore::new(limits.overflow_connections));
    let refusal = refusal_bytes(limits.max_connections).await;
    let graceful = GracefulShutdown::new();
    let mut served = http1::Builder::new();
    served
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_read_timeout)
        .max_header_size(MAX_HEADER_BYTES)
        .keep_alive(true);
    let mut refusing = served.clone();
    refusing
        .header_read_timeout(limits.header_read_timeout.min(OVERFLOW_HEADER_TIMEOUT))
        .keep_alive(false);
    let app = TowerToHyperService::new(router);

    loop {
        let (stream, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(e) => {
                    accept_failed(&e).await;
                    continue;
                }
            },
            _ = shutdown.cancelled() => break,
        };
        if let Ok(slot) = slots.clone().try_acquire_owned() {
            let conn = served.serve_connection(
                TokioIo::new(stream),
                with_peer(app.clone(), peer, limits.body),
            );
            run(graceful.watch(conn), slot, &counts, true);
        } else if let Ok(slot) = overflow.clone().try_acquire_owned() {
            counts.refused.inc();
            let conn = refusing.serve_connection(
                TokioIo::new(stream),
                refuse_except_health(app.clone(), peer, limits),
            );
            run(graceful.watch(conn), slot, &counts, false);
        } else {
            counts.refused.inc();
            refuse_at_once(stream, &refusal);
        }
    }
    drop(listener);
    graceful.shutdown().await;
}

/// Runs a connection on its own task, holding `slot` until it ends; `served` ones are
/// counted as open meanwhile.
fn run(
    conn: impl Future<Output = hyper::Result<()>> + Send + 'static,
    slot: OwnedSemaphorePermit,
    counts: &ConnectionMetrics,
    served: bool,
) {
    let counts = counts.clone();
    if served {
        counts.open.inc();
    }
    tokio::spawn(async move {
        if let Err(e) = conn.await {
            finished_with(&e, &counts);
        }
        if served {
            counts.open.dec();
        }
        drop(slot);
    });
}

/// What serves a connection's requests: never fails, and its futures can move between
/// threads.
trait Handler:
    Service<Request<Incoming>, Response = Response, Error = Infallible, Future: Send>
{
}

impl<S> Handler for S where
    S: Service<Request<Incoming>, Response = Response, Error = Infallible, Future: Send>
{
}

/// The application, with the peer's address available to handlers as
/// `ConnectInfo<SocketAddr>`, and each request's body clock started as its head is read.
fn with_peer(
    app: TowerToHyperService<Router>,
    peer: SocketAddr,
    body: BodyLimits,
) -> impl Handler + Clone {
    service_fn(move |mut req: Request<Incoming>| {
        req.extensions_mut().insert(ConnectInfo(peer));
        req.extensions_mut().insert(BodyClock::start(body));
        app.call(req)
    })
}

/// An overflow connection's one request: health checks are served, anything else is refused
/// with `503 too_many_connections`; the connection closes after the answer either way.
fn refuse_except_health(
    app: TowerToHyperService<Router>,
    peer: SocketAddr,
    limits: Limits,
) -> impl Handler {
    let cap = limits.max_connections;
    let app = with_peer(app, peer, limits.body);
    service_fn(move |req: Request<Incoming>| {
        let health = matches!(req.uri().path(), "/livez" | "/healthz");
        let served = health.then(|| app.call(req));
        async move {
            let mut resp = match served {
                Some(served) => served.await?,
                None => too_many_connections(cap),
            };
            resp.headers_mut()
                .insert(header::CONNECTION, HeaderValue::from_static("close"));
            Ok(resp)
        }
    })
}

/// `503 too_many_connections`, with `Retry-After` and `Connection: close`.
fn too_many_connections(cap: usize) -> Response {
    let mut resp = ApiError::new(
        StatusCode::SERVICE_UNAVAILABLE,
        "too_many_connections",
        format!("imrelay is serving as many connections as it allows ({cap}); try again shortly"),
    )
    .into_response();
    let headers = resp.headers_mut();
    headers.insert(header::RETRY_AFTER, HeaderValue::from(RETRY_AFTER_SECS));
    headers.insert(header::CONNECTION, HeaderValue::from_static("close"));
    resp
}

/// `503 too_many_connections` as bytes on the wire, for [`refuse_at_once`].
async fn refusal_bytes(cap: usize) -> Vec<u8> {
    let (head, body) = too_many_connections(cap).into_parts();
    let body = axum::body::to_bytes(body, usize::MAX)
        .await
        .unwrap_or_default();
    let mut out = format!("HTTP/1.1 {}\r\n", head.status).into_bytes();
    for (name, value) in &head.headers {
        out.extend_from_slice(name.as_str().as_bytes());
        out.extend_from_slice(b": ");
        out.extend_from_slice(value.as_bytes());
        out.extend_from_slice(b"\r\n");
    }
    out.extend_from_slice(format!("content-length: {}\r\n\r\n", body.len()).as_bytes());
    out.extend_from_slice(&body);
    out
}

/// Answers a connection for which no slot is left, even to read its request: writes the
/// refusal without waiting and closes. What the client already sent is read first, so that
/// the close is an orderly one (a reset could make the client drop the answer unread).
fn refuse_at_once(stream: TcpStream, refusal: &[u8]) {
    let mut scratch = [0u8; 4096];
    let _ = stream.try_read(&mut scratch);
    let _ = stream.try_write(refusal);
}

/// Records how a connection ended in error (a header timeout is the common, expected case).
fn finished_with(e: &hyper::Error, counts: &ConnectionMetrics) {
    if e.is_timeout() {
        counts.timed_out.inc();
        tracing::debug!("closed a connection that sent no complete request head in time");
    } else {
        tracing::debug!(error = %e, "connection ended with an error");
    }
}

/// What to do after `accept` failed: nothing for a connection that went away during the
/// handshake; otherwise (typically out of file descriptors) log and pause, leaving waiting
/// connections in the listen backlog until descriptors free up.
async fn accept_failed(e: &std::io::Error) {
    use std::io::ErrorKind::{ConnectionAborted, ConnectionRefused, ConnectionReset};
    if matches!(
        e.kind(),
        ConnectionAborted | ConnectionRefused | ConnectionReset
    ) {
        return;
    }
    tracing::warn!(error = %e, "cannot accept a connection; pausing");
    tokio::time::sleep(ACCEPT_ERROR_PAUSE).await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_limit_with_room_keeps_the_configured_cap() {
        assert_eq!(
            connection_budget(1024, Some(1_048_576)),
            Budget {
                max_connections: 1024,
                warning: None
            }
        );
        assert_eq!(connection_budget(1024, None).max_connections, 1024);
        let exact = 1024 + OVERFLOW_CONNECTIONS as u64 + RESERVED_FILES;
        assert_eq!(connection_budget(1024, Some(exact)).warning, None);
    }

    #[test]
    fn a_low_limit_lowers_the_cap_and_warns() {
        let b = connection_budget(1024, Some(512));
        assert_eq!(
            b.max_connections,
            512 - OVERFLOW_CONNECTIONS - RESERVED_FILES as usize
        );
        let warning = b.warning.expect("a warning");
        assert!(warning.contains("is 512"), "{warning}");
        assert!(
            warning.contains("server.max_connections = 1024"),
            "{warning}"
        );
        assert!(warning.contains("LimitNOFILE"), "{warning}");
        let just_short = 1024 + OVERFLOW_CONNECTIONS as u64 + RESERVED_FILES - 1;
        assert_eq!(
            connection_budget(1024, Some(just_short)).max_connections,
            1023
        );
    }

    #[tokio::test]
    async fn beyond_the_overflow_a_connection_is_refused_before_it_sends_anything() {
        use tokio::io::AsyncReadExt;
        let listener = bind(([127, 0, 0, 1], 0).into()).expect("bind");
        let addr = listener.local_addr().expect("addr");
        let shutdown = CancellationToken::new();
        let router = Router::new().route("/livez", axum::routing::get(|| async { "ok" }));
        let limits = Limits {
            max_connections: 1,
            overflow_connections: 1,
            header_read_timeout: Duration::from_secs(30),
            body: BodyLimits::default(),
        };
        let server = tokio::spawn({
            let shutdown = shutdown.clone();
            async move { serve(listener, router, limits, &Metrics::new(), shutdown).await }
        });
        // The slot and the overflow slot (connections are accepted in order).
        let held = [
            TcpStream::connect(addr).await.expect("connect"),
            TcpStream::connect(addr).await.expect("connect"),
        ];
        let mut third = TcpStream::connect(addr).await.expect("connect");
        let mut got = String::new();
        tokio::time::timeout(Duration::from_secs(10), third.read_to_string(&mut got))
            .await
            .expect("answered and closed at once")
            .expect("read");
        let (head, body) = got.split_once("\r\n\r\n").expect("a response");
        assert!(
            head.starts_with("HTTP/1.1 503 Service Unavailable\r\n"),
            "{got}"
        );
        for line in [
            "retry-after: 1",
            "connection: close",
            "content-type: application/json",
        ] {
            assert!(head.contains(&format!("\r\n{line}")), "{line}: {got}");
        }
        assert!(
            head.contains(&format!("\r\ncontent-length: {}", body.len())),
            "{got}"
        );
        let body: serde_json::Value = serde_json::from_str(body).expect("JSON");
        assert_eq!(body["error"]["code"], "too_many_connections");
        shutdown.cancel();
        drop(held);
        server.await.expect("the server stops");
    }

    #[test]
    fn a_lowered_cap_lowers_each_tokens_share_alike() {
        assert_eq!(per_token_share(512, 1024, 1024), 512);
        assert_eq!(per_token_share(512, 1024, 200), 100);
        assert_eq!(per_token_share(512, 1024, 1), 1);
        assert_eq!(per_token_share(1024, 1024, 10), 10);
    }

    #[test]
    fn a_tiny_limit_still_serves_one_connection() {
        let b = connection_budget(1024, Some(20));
        assert_eq!(b.max_connections, 1);
        assert!(b.warning.is_some());
    }
}
