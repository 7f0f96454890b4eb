//! A TCP proxy on loopback in front of the PostgreSQL server, that a test cuts (every
//! connection through it is closed, and new ones are closed at once) and restores: an outage
//! as the replicas see it, without touching the machine's server. It can also hold every
//! answer from the server for a while: a distant server, whose round trips a test can count.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio_util::sync::CancellationToken;

/// A running proxy.
pub(crate) struct Proxy {
    pub addr: SocketAddr,
    state: Arc<Mutex<State>>,
    stop: CancellationToken,
}

struct State {
    /// Cancelled to close every connection of the current period; `None` while cut.
    open: Option<CancellationToken>,
}

impl Proxy {
    /// Starts a proxy to `upstream`.
    pub(crate) async fn start(upstream: SocketAddr) -> Proxy {
        Self::start_with_delay(upstream, Duration::ZERO).await
    }

    /// Starts a proxy to `upstream` that passes on what the server sends `delay` after it
    /// arrived (in order; what the client sends goes through at once).
    pub(crate) async fn start_with_delay(upstream: SocketAddr, delay: Duration) -> Proxy {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        let state = Arc::new(Mutex::new(State {
            open: Some(CancellationToken::new()),
        }));
        let stop = CancellationToken::new();
        let (st, stopped) = (state.clone(), stop.clone());
        tokio::spawn(async move {
            loop {
                let (inbound, _) = tokio::select! {
                    _ = stopped.cancelled() => return,
                    a = listener.accept() => match a { Ok(a) => a, Err(_) => continue },
                };
                let open = st.lock().unwrap().open.clone();
                let Some(open) = open else {
                    drop(inbound); // cut: closed at once
                    continue;
                };
                tokio::spawn(async move {
                    let Ok(mut outbound) = TcpStream::connect(upstream).await else {
                        return;
                    };
                    let mut inbound = inbound;
                    if delay.is_zero() {
                        tokio::select! {
                            _ = open.cancelled() => {}
                            _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound) => {}
                        }
                    } else {
                        tokio::select! {
                            _ = open.cancelled() => {}
                            _ = relay_delayed(inbound, outbound, delay) => {}
                        }
                    }
                });
            }
        });
        Proxy { addr, state, stop }
    }

    /// Closes every connection and refuses new ones until [`Proxy::restore`].
    pub(crate) fn cut(&self) {
        if let Some(open) = self.state.lock().unwrap().open.take() {
            open.cancel();
        }
    }

    /// Lets connections through again.
    pub(crate) fn restore(&self) {
        let mut s = self.state.lock().unwrap();
        if s.open.is_none() {
            s.open = Some(CancellationToken::new());
        }
    }
}

/// Relays between `client` and `server`, passing on each read from the server `delay` after
/// it arrived.
async fn relay_delayed(client: TcpStream, server: TcpStream, delay: Duration) {
    // Both ends send at once, as the client and the server do themselves: with Nagle's
    // algorithm a small write behind another would wait for the peer's delayed ACK (40 ms).
    let _ = client.set_nodelay(true);
    let _ = server.set_nodelay(true);
    let (mut from_client, mut to_client) = client.into_split();
    let (mut from_server, mut to_server) = server.into_split();
    let up = async {
        let _ = tokio::io::copy(&mut from_client, &mut to_server).await;
        let _ = to_server.shutdown().await;
    };
    let (held, mut due) = tokio::sync::mpsc::unbounded_channel();
    let read = async move {
        let mut buf = vec![0u8; 64 * 1024];
        while let Ok(n @ 1..) = from_server.read(&mut buf).await {
            let at = tokio::time::Instant::now() + delay;
            if held.send((at, buf[..n].to_vec())).is_err() {
                return;
            }
        }
    };
    let down = async move {
        while let Some((at, bytes)) = due.recv().await {
            tokio::time::sleep_until(at).await;
            if to_client.write_all(&bytes).await.is_err() {
                return;
            }
        }
        let _ = to_client.shutdown().await;
    };
    tokio::join!(up, read, down);
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.stop.cancel();
        self.cut();
    }
}
