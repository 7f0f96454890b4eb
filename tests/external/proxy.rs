//! A TCP proxy on loopback in front of the PostgreSQL server, that a test cuts (every
//! connection through it is closed, and new ones are closed at once) and restores: an outage
//! as the replicas see it, without touching the machine's server.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use tokio::net::{TcpListener, TcpStream};
use tokio_util::sync::CancellationToken;

/// A running proxy.
pub struct Proxy {
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
    pub async fn start(upstream: SocketAddr) -> Proxy {
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
                    tokio::select! {
                        _ = open.cancelled() => {}
                        _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound) => {}
                    }
                });
            }
        });
        Proxy { addr, state, stop }
    }

    /// Closes every connection and refuses new ones until [`Proxy::restore`].
    pub fn cut(&self) {
        if let Some(open) = self.state.lock().unwrap().open.take() {
            open.cancel();
        }
    }

    /// Lets connections through again.
    pub fn restore(&self) {
        let mut s = self.state.lock().unwrap();
        if s.open.is_none() {
            s.open = Some(CancellationToken::new());
        }
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.stop.cancel();
        self.cut();
    }
}
