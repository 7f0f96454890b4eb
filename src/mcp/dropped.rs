//! Tool calls whose connection dropped: each call's answer travels on the response stream of
//! its `POST` (or on a stream that resumes it, `GET` with `Last-Event-ID`). When no stream
//! carries it any more, the client has `mcp.reconnect_grace_secs` to come back (resume the
//! stream, or call again with the same id, which re-attaches); after that the call ends and
//! its interaction is withdrawn on every channel ([`super::server`]), instead of waiting
//! until its session is closed or idles out.
//!
//! A [`Link`] is made for each `tools/call` as its stream is created, travels in the
//! request's extensions to the call, and counts the streams carrying it; [`Links`] finds it
//! again from the event id a resuming client sends (`<index>/<request>`, rmcp's format).

use std::collections::HashMap;
use std::pin::Pin;
use std::sync::{Arc, Mutex, Weak};
use std::task::{Context, Poll};
use std::time::Duration;

use futures_util::Stream;
use rmcp::transport::streamable_http_server::session::{ServerSseMessage, SessionId};
use tokio_util::sync::CancellationToken;

use crate::sync::LockExt;

/// A stream of one call's events.
type Events = Pin<Box<dyn Stream<Item = ServerSseMessage> + Send + Sync + 'static>>;

/// Every call whose stream a client could resume, by session and rmcp's request number.
pub(crate) struct Links {
    grace: Duration,
    by_request: Mutex<HashMap<(SessionId, u64), Weak<Link>>>,
}

/// One tool call's tie to its client: the streams carrying its answer, and what fires when
/// none has for the grace period.
pub(crate) struct Link {
    links: Arc<Links>,
    state: Mutex<LinkState>,
    gone: CancellationToken,
}

#[derive(Default)]
struct LinkState {
    /// Streams carrying the call's answer now.
    streams: usize,
    /// Counts the times the last stream went, so a stale timer does nothing.
    detached: u64,
    /// Where [`Links`] files it, once the stream's first event id named its request.
    key: Option<(SessionId, u64)>,
}

impl Links {
    /// Calls get `grace` to be taken up again once their last stream goes.
    pub(crate) fn new(grace: Duration) -> Arc<Self> {
        Arc::new(Self {
            grace,
            by_request: Mutex::new(HashMap::new()),
        })
    }

    /// A link for a call whose first stream is about to be made.
    pub(crate) fn link(self: &Arc<Self>) -> Arc<Link> {
        Arc::new(Link {
            links: self.clone(),
            state: Mutex::new(LinkState::default()),
            gone: CancellationToken::new(),
        })
    }

    /// `events`, carrying the call of `link` in `session`: the link counts it while it is open.
    pub(crate) fn carry(&self, session: &SessionId, link: Arc<Link>, events: Events) -> Carried {
        link.state.locked().streams += 1;
        Carried {
            events,
            link,
            session: session.clone(),
            ended: false,
        }
    }

    /// The call a stream resumed from `last_event_id` in `session` carries, if it still waits.
    pub(crate) fn resumed(&self, session: &SessionId, last_event_id: &str) -> Option<Arc<Link>> {
        let request = request_of(last_event_id)?;
        self.by_request
            .locked()
            .get(&(session.clone(), request))
            .and_then(Weak::upgrade)
    }

    fn file(&self, key: (SessionId, u64), link: &Arc<Link>) {
        self.by_request.locked().insert(key, Arc::downgrade(link));
    }
}

/// rmcp's request number in an event id (`<index>/<request>`).
fn request_of(event_id: &str) -> Option<u64> {
    event_id.split_once('/')?.1.parse().ok()
}

impl Link {
    /// Fires when no stream has carried the call for the grace period.
    pub(crate) fn gone(&self) -> CancellationToken {
        self.gone.clone()
    }

    /// A stream carrying the call went before its end.
    fn detach(self: &Arc<Self>) {
        let generation = {
            let mut state = self.state.locked();
            state.streams = state.streams.saturating_sub(1);
            if state.streams > 0 {
                return;
            }
            state.detached += 1;
            state.detached
        };
        let grace = self.links.grace;
        if grace.is_zero() {
            self.gone.cancel();
            return;
        }
        // The timer holds the link weakly: a call that ends meanwhile is not kept for it.
        let link = Arc::downgrade(self);
        tokio::spawn(async move {
            tokio::time::sleep(grace).await;
            if let Some(link) = link.upgrade() {
                let state = link.state.locked();
                if state.streams == 0 && state.detached == generation {
                    link.gone.cancel();
                }
            }
        });
    }
}

impl Drop for Link {
    fn drop(&mut self) {
        if let Some(key) = self.state.locked().key.take() {
            let mut by_request = self.links.by_request.locked();
            // Another link filed since under the same key (not expected) keeps its entry.
            if by_request.get(&key).is_some_and(|w| w.strong_count() == 0) {
                by_request.remove(&key);
            }
        }
    }
}

/// A stream carrying a call's answer: it files the call under the request its first event
/// id names, and tells the link if it goes before its end.
pub(crate) struct Carried {
    events: Events,
    link: Arc<Link>,
    session: SessionId,
    ended: bool,
}

impl Stream for Carried {
    type Item = ServerSseMessage;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let polled = self.events.as_mut().poll_next(cx);
        match &polled {
            Poll::Ready(Some(message)) => {
                let request = message.event_id.as_deref().and_then(request_of);
                if let Some(request) = request {
                    let key = (self.session.clone(), request);
                    let mut state = self.link.state.locked();
                    if state.key.is_none() {
                        state.key = Some(key.clone());
                        drop(state);
                        self.link.links.file(key, &self.link);
                    }
                }
            }
            Poll::Ready(None) => self.ended = true,
            Poll::Pending => {}
        }
        polled
    }
}

impl Drop for Carried {
    fn drop(&mut self) {
        if !self.ended {
            self.link.detach();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn events(ids: &[&str]) -> Events {
        use futures_util::StreamExt;
        let items: Vec<ServerSseMessage> = ids
            .iter()
            .map(|id| ServerSseMessage::priming(*id, Duration::from_secs(3)))
            .collect();
        Box::pin(futures_util::stream::iter(items).chain(futures_util::stream::pending()))
    }

    #[tokio::test(start_paused = true)]
    async fn a_call_is_gone_only_when_no_stream_carried_it_for_the_grace() {
        use futures_util::StreamExt;
        let links = Links::new(Duration::from_secs(10));
        let session: SessionId = Arc::from("s");
        let link = links.link();
        let gone = link.gone();
        let mut first = links.carry(&session, link.clone(), events(&["0/7"]));
        assert!(first.next().await.is_some());
        // Filed under its request: a resuming stream finds it.
        assert!(links.resumed(&session, "0/7").is_some());
        assert!(links.resumed(&session, "0/8").is_none());
        assert!(links.resumed(&Arc::from("other"), "0/7").is_none());
        assert!(links.resumed(&session, "nonsense").is_none());
        drop(first);
        tokio::time::sleep(Duration::from_secs(5)).await;
        assert!(!gone.is_cancelled());
        // Resumed within the grace: the first timer does nothing.
        let resumed = links.resumed(&session, "0/7").expect("still waiting");
        let second = links.carry(&session, resumed, events(&[]));
        tokio::time::sleep(Duration::from_secs(20)).await;
        assert!(!gone.is_cancelled());
        drop(second);
        tokio::time::sleep(Duration::from_secs(11)).await;
        assert!(gone.is_cancelled());
        // Once the call ends, nothing is left filed.
        drop(link);
        assert!(links.by_request.locked().is_empty());
    }

    #[tokio::test(start_paused = true)]
    async fn a_stream_that_ends_is_not_a_drop() {
        let links = Links::new(Duration::ZERO);
        let link = links.link();
        let items = futures_util::stream::iter(vec![ServerSseMessage::priming(
            "0/1",
            Duration::from_secs(3),
        )]);
        let mut carried = links.carry(&Arc::from("s"), link.clone(), Box::pin(items));
        use futures_util::StreamExt;
        while carried.next().await.is_some() {}
        drop(carried);
        assert!(!link.gone().is_cancelled());
        // A grace of zero: gone as soon as its stream drops.
        let other = links.link();
        drop(links.carry(&Arc::from("s"), other.clone(), events(&[])));
        assert!(other.gone().is_cancelled());
    }
}
