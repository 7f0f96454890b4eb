//! MCP sessions: how many are open and whose, whether each has something under way, what it
//! negotiated, and closing them.
//!
//! - **Caps.** At most `mcp.max_sessions` sessions in all and `mcp.max_sessions_per_token`
//!   per agent token ([`Principal`]). The HTTP gate ([`super::gate`]) reserves a place
//!   before rmcp sees an `initialize`, and refuses it when none is left; the reservation
//!   travels with the request and is bound to the session rmcp creates for it.
//! - **Idle sessions** are closed after `mcp.session_idle_secs` without a request, a stream
//!   open or a tool call waiting: a call that waits hours for a person keeps its session.
//!   rmcp's own idle timer is off, since it cannot tell a silent wait from idleness.
//! - **Dropped connections**: each tool call is tied to the streams that carry its answer
//!   ([`super::dropped`]); one that no stream carries for `mcp.reconnect_grace_secs` ends, and
//!   its interaction is withdrawn.
//! - **Closing** a session (`DELETE /mcp`, idleness, or the end of rmcp's session worker)
//!   first ends the tool calls waiting in it, which withdraws their interactions on every
//!   channel ([`super::server`]), and answers once that is done.
//! - **Priming events** (an event id with empty data, so a client can resume a stream) exist
//!   from protocol 2025-11-25 on; clients of earlier revisions parse every event's data as a
//!   JSON-RPC message and fail on them. A session gets them only if it negotiated
//!   2025-11-25 or later, as the official TypeScript, Python and Go SDK servers do.
//!
//! [`Sessions`] is rmcp's [`SessionManager`], wrapping its [`LocalSessionManager`]; [`Table`]
//! is the bookkeeping it shares with the gate and the tool calls.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use futures_util::{Stream, StreamExt};
use prometheus_client::metrics::gauge::Gauge;
use rmcp::model::{
    ClientJsonRpcMessage, ClientRequest, GetExtensions, ProtocolVersion, ServerJsonRpcMessage,
    ServerResult,
};
use rmcp::transport::streamable_http_server::session::local::{
    LocalSessionManager, LocalSessionManagerError,
};
use rmcp::transport::streamable_http_server::session::{
    ServerSseMessage, SessionId, SessionManager,
};
use tokio::sync::Notify;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::dropped::{Link, Links};
use crate::metrics::Metrics;
use crate::sync::LockExt;
use crate::wire::Principal;

/// How long closing a session waits for its tool calls to withdraw their interactions.
const DRAIN_WAIT: Duration = Duration::from_secs(5);

/// The first protocol revision whose clients read an event without data (SEP-1699).
const PRIMING_SINCE: ProtocolVersion = ProtocolVersion::V_2025_11_25;

/// The bounds sessions are kept within.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Limits {
    /// Sessions in all.
    pub max_sessions: usize,
    /// Sessions per principal.
    pub max_per_token: usize,
    /// How long a session with nothing under way lives.
    pub idle: Duration,
}

/// Why a new session was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Full {
    /// As many sessions are open as `mcp.max_sessions` allows.
    All(usize),
    /// The principal has as many as `mcp.max_sessions_per_token` allows.
    Token(usize),
}

/// Every open session, and the places reserved for sessions being opened.
pub(crate) struct Table {
    state: Mutex<State>,
    limits: Limits,
    open: Gauge,
}

#[derive(Default)]
struct State {
    sessions: HashMap<SessionId, Entry>,
    /// Open sessions and reservations, per principal.
    held: HashMap<Principal, usize>,
    /// Open sessions and reservations in all.
    total: usize,
}

struct Entry {
    owner: Principal,
    /// Whether its streams may carry priming events.
    priming: bool,
    last_active: Instant,
    /// Response streams open (a call's, the GET stream).
    streams: usize,
    /// Tool calls under way.
    calls: usize,
    /// Fires when the session closes: its calls end.
    closed: CancellationToken,
    /// Told when `calls` drops to zero.
    drained: Arc<Notify>,
}

impl State {
    fn release(&mut self, owner: Principal) {
        self.total = self.total.saturating_sub(1);
        if let Some(n) = self.held.get_mut(&owner) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                self.held.remove(&owner);
            }
        }
    }
}

impl Table {
    /// An empty table keeping `limits`; registers the `imrelay_mcp_sessions` gauge.
    pub(crate) fn new(limits: Limits, metrics: &Metrics) -> Arc<Self> {
        let open = Gauge::default();
        metrics.register(
            "imrelay_mcp_sessions",
            "MCP sessions open (counted against mcp.max_sessions)",
            open.clone(),
        );
        Arc::new(Self {
            state: Mutex::new(State::default()),
            limits,
            open,
        })
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.locked()
    }

    /// The bounds kept.
    pub(crate) fn limits(&self) -> Limits {
        self.limits
    }

    /// A place for one more session of `owner`, or why there is none.
    pub(crate) fn reserve(self: &Arc<Self>, owner: Principal) -> Result<Reservation, Full> {
        let mut state = self.lock();
        if state.total >= self.limits.max_sessions {
            return Err(Full::All(self.limits.max_sessions));
        }
        let held = state.held.entry(owner.clone()).or_insert(0);
        if *held >= self.limits.max_per_token {
            return Err(Full::Token(self.limits.max_per_token));
        }
        *held += 1;
        state.total += 1;
        Ok(Reservation(Arc::new(Reserved {
            table: self.clone(),
            owner,
            bound: Mutex::new(false),
        })))
    }

    /// Records session `id`, opened under `reservation`; without one (a session opened by
    /// something other than the gate), it is counted for this machine, beyond the caps.
    fn open(&self, id: &SessionId, reservation: Option<&Reservation>) {
        let owner = match reservation {
            Some(r) => {
                *r.0.bound.locked() = true;
                r.0.owner.clone()
            }
            None => {
                let mut state = self.lock();
                *state.held.entry(Principal::Local).or_insert(0) += 1;
                state.total += 1;
                Principal::Local
            }
        };
        let mut state = self.lock();
        state.sessions.insert(
            id.clone(),
            Entry {
                owner,
                priming: false,
                last_active: Instant::now(),
                streams: 0,
                calls: 0,
                closed: CancellationToken::new(),
                drained: Arc::new(Notify::new()),
            },
        );
        self.open.set(state.sessions.len() as i64);
    }

    /// Forgets session `id` and frees its place.
    fn remove(&self, id: &str) {
        let mut state = self.lock();
        if let Some(entry) = state.sessions.remove(id) {
            entry.closed.cancel();
            state.release(entry.owner);
        }
        self.open.set(state.sessions.len() as i64);
    }

    /// Whether session `id` is open; if it is, a request just came for it.
    pub(crate) fn touch(&self, id: &str) -> bool {
        match self.lock().sessions.get_mut(id) {
            Some(entry) => {
                entry.last_active = Instant::now();
                true
            }
            None => false,
        }
    }

    /// Marks a response stream of session `id` open until the guard drops.
    pub(crate) fn stream(self: &Arc<Self>, id: &str) -> Option<Busy> {
        self.busy(id, |e| &mut e.streams)
            .map(|(id, _)| Busy::new(self, id, Work::Stream))
    }

    /// Marks a tool call of session `id` under way until the guard drops; the token fires if
    /// the session closes meanwhile.
    pub(crate) fn call(self: &Arc<Self>, id: &str) -> Option<(Busy, CancellationToken)> {
        self.busy(id, |e| &mut e.calls)
            .map(|(id, closed)| (Busy::new(self, id, Work::Call), closed))
    }

    fn busy(
        &self,
        id: &str,
        count: impl FnOnce(&mut Entry) -> &mut usize,
    ) -> Option<(SessionId, CancellationToken)> {
        let mut state = self.lock();
        let key = state.sessions.get_key_value(id)?.0.clone();
        let entry = state.sessions.get_mut(id)?;
        *count(entry) += 1;
        entry.last_active = Instant::now();
        Some((key, entry.closed.clone()))
    }

    fn set_priming(&self, id: &str, priming: bool) {
        if let Some(entry) = self.lock().sessions.get_mut(id) {
            entry.priming = priming;
        }
    }

    fn priming(&self, id: &str) -> bool {
        self.lock().sessions.get(id).is_some_and(|e| e.priming)
    }

    /// Ends the tool calls of session `id` and waits (within [`DRAIN_WAIT`]) until they
    /// have withdrawn their interactions.
    async fn end_calls(&self, id: &str) {
        let deadline = Instant::now() + DRAIN_WAIT;
        loop {
            let drained = {
                let state = self.lock();
                let Some(entry) = state.sessions.get(id) else {
                    return;
                };
                entry.closed.cancel();
                if entry.calls == 0 {
                    return;
                }
                entry.drained.clone()
            };
            let told = drained.notified();
            tokio::pin!(told);
            told.as_mut().enable();
            if self.lock().sessions.get(id).is_none_or(|e| e.calls == 0) {
                return;
            }
            if tokio::time::timeout_at(deadline, told).await.is_err() {
                tracing::warn!(
                    session = %crate::interaction::clip(id, 64),
                    "MCP session closed before its tool calls withdrew their interactions"
                );
                return;
            }
        }
    }

    /// Sessions with nothing under way and no request for the idle time, as of `now`.
    fn idle(&self, now: Instant) -> Vec<SessionId> {
        self.lock()
            .sessions
            .iter()
            .filter(|(_, e)| {
                e.streams == 0
                    && e.calls == 0
                    && now.saturating_duration_since(e.last_active) >= self.limits.idle
            })
            .map(|(id, _)| id.clone())
            .collect()
    }

    /// How often idle sessions are looked for: a quarter of the idle time, between 250 ms
    /// and 30 s.
    fn sweep_every(&self) -> Duration {
        (self.limits.idle / 4).clamp(Duration::from_millis(250), Duration::from_secs(30))
    }
}

/// A place for a session being opened, held until the session exists or the request ends.
/// It travels in the request's extensions (so it is `Clone`).
#[derive(Clone)]
pub(crate) struct Reservation(Arc<Reserved>);

struct Reserved {
    table: Arc<Table>,
    owner: Principal,
    bound: Mutex<bool>,
}

impl Drop for Reserved {
    fn drop(&mut self) {
        if !*self.bound.locked() {
            self.table.lock().release(self.owner.clone());
        }
    }
}

/// What keeps a session from being idle.
#[derive(Clone, Copy)]
enum Work {
    Stream,
    Call,
}

/// A response stream open, or a tool call under way, in a session; dropping it ends that.
pub(crate) struct Busy {
    table: Arc<Table>,
    id: SessionId,
    work: Work,
}

impl Busy {
    fn new(table: &Arc<Table>, id: SessionId, work: Work) -> Self {
        Self {
            table: table.clone(),
            id,
            work,
        }
    }
}

impl Drop for Busy {
    fn drop(&mut self) {
        let mut state = self.table.lock();
        if let Some(entry) = state.sessions.get_mut(&self.id) {
            entry.last_active = Instant::now();
            match self.work {
                Work::Stream => entry.streams = entry.streams.saturating_sub(1),
                Work::Call => {
                    entry.calls = entry.calls.saturating_sub(1);
                    if entry.calls == 0 {
                        entry.drained.notify_waiters();
                    }
                }
            }
        }
    }
}

/// rmcp's session manager for `/mcp`: its [`LocalSessionManager`], with the sessions kept
/// in a table shared with the gate, priming events only for the revisions that read them, and
/// each tool call tied to the streams that carry its answer (`dropped.rs`).
pub struct Sessions {
    local: LocalSessionManager,
    table: Arc<Table>,
    /// The reconnection delay priming events announce.
    retry: Duration,
    links: Arc<Links>,
}

impl Sessions {
    /// Sessions kept in `table`; priming events announce `retry`; tool calls are tied to
    /// their streams through `links`.
    pub(crate) fn new(table: Arc<Table>, retry: Duration, links: Arc<Links>) -> Self {
        let mut local = LocalSessionManager::default();
        // Idle sessions are closed by [`reap`], which knows about calls that wait in silence.
        local.session_config.keep_alive = None;
        local.session_config.sse_retry = Some(retry);
        Self {
            local,
            table,
            retry,
            links,
        }
    }

    /// `stream`, counted as carrying the call of `link` (if any) while it is open.
    fn carried(
        &self,
        id: &SessionId,
        link: Option<Arc<Link>>,
        stream: impl Stream<Item = ServerSseMessage> + Send + Sync + 'static,
    ) -> std::pin::Pin<Box<dyn Stream<Item = ServerSseMessage> + Send + Sync + 'static>> {
        match link {
            Some(link) => Box::pin(self.links.carry(id, link, Box::pin(stream))),
            None => Box::pin(stream),
        }
    }

    /// Without the events a client of the session's revision cannot read.
    fn readable(
        &self,
        id: &SessionId,
        stream: impl Stream<Item = ServerSseMessage> + Send + Sync + 'static,
    ) -> impl Stream<Item = ServerSseMessage> + Send + Sync + 'static {
        let priming = self.table.priming(id);
        stream.filter(move |m| std::future::ready(priming || m.message.is_some()))
    }
}

/// Whether a client of `version` reads priming events.
fn reads_priming(version: &ProtocolVersion) -> bool {
    ProtocolVersion::KNOWN_VERSIONS.contains(version) && *version >= PRIMING_SINCE
}

impl SessionManager for Sessions {
    type Error = LocalSessionManagerError;
    type Transport = <LocalSessionManager as SessionManager>::Transport;

    async fn create_session(&self) -> Result<(SessionId, Self::Transport), Self::Error> {
        self.local.create_session().await
    }

    async fn initialize_session(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<ServerJsonRpcMessage, Self::Error> {
        let reservation = match &message {
            ClientJsonRpcMessage::Request(r) => r
                .request
                .extensions()
                .get::<axum::http::request::Parts>()
                .and_then(|p| p.extensions.get::<Reservation>().cloned()),
            _ => None,
        };
        self.table.open(id, reservation.as_ref());
        let response = self.local.initialize_session(id, message).await?;
        if let ServerJsonRpcMessage::Response(r) = &response
            && let ServerResult::InitializeResult(init) = &r.result
        {
            self.table
                .set_priming(id, reads_priming(&init.protocol_version));
        }
        Ok(response)
    }

    async fn has_session(&self, id: &SessionId) -> Result<bool, Self::Error> {
        self.local.has_session(id).await
    }

    async fn close_session(&self, id: &SessionId) -> Result<(), Self::Error> {
        self.table.end_calls(id).await;
        let closed = self.local.close_session(id).await;
        self.table.remove(id);
        closed
    }

    async fn create_stream(
        &self,
        id: &SessionId,
        mut message: ClientJsonRpcMessage,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        // A tool call learns from its link when its client has gone.
        let link = match &mut message {
            ClientJsonRpcMessage::Request(r)
                if matches!(r.request, ClientRequest::CallToolRequest(_)) =>
            {
                let link = self.links.link();
                r.request.extensions_mut().insert(link.clone());
                Some(link)
            }
            _ => None,
        };
        let stream = self.local.create_stream(id, message).await?;
        Ok(self.readable(id, self.carried(id, link, stream)))
    }

    async fn accept_message(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<(), Self::Error> {
        self.local.accept_message(id, message).await
    }

    async fn create_standalone_stream(
        &self,
        id: &SessionId,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        let stream = self.local.create_standalone_stream(id).await?;
        // What rmcp's transport prepends when it primes GET streams itself.
        let priming = self
            .table
            .priming(id)
            .then(|| ServerSseMessage::priming("0", self.retry));
        Ok(futures_util::stream::iter(priming).chain(stream))
    }

    async fn resume(
        &self,
        id: &SessionId,
        last_event_id: String,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        let link = self.links.resumed(id, &last_event_id);
        let stream = self.local.resume(id, last_event_id).await?;
        Ok(self.readable(id, self.carried(id, link, stream)))
    }
}

/// Closes idle sessions until `shutdown` fires.
pub(crate) async fn reap(sessions: Arc<Sessions>, shutdown: CancellationToken) {
    let mut every = tokio::time::interval(sessions.table.sweep_every());
    every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = every.tick() => {}
            () = shutdown.cancelled() => return,
        }
        for id in sessions.table.idle(Instant::now()) {
            tracing::debug!(session = %id, "closing an idle MCP session");
            if let Err(e) = sessions.close_session(&id).await {
                tracing::warn!(error = %e, "cannot close an idle MCP session");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table(max_sessions: usize, max_per_token: usize) -> Arc<Table> {
        Table::new(
            Limits {
                max_sessions,
                max_per_token,
                idle: Duration::from_secs(60),
            },
            &Metrics::new(),
        )
    }

    fn id(s: &str) -> SessionId {
        SessionId::from(s)
    }

    #[test]
    fn places_are_capped_per_token_and_in_all_and_freed_when_unused() {
        let t = table(3, 2);
        let (a, b) = (Principal::Token([1; 32]), Principal::Token([2; 32]));
        let a1 = t.reserve(a.clone()).unwrap();
        let a2 = t.reserve(a.clone()).unwrap();
        assert_eq!(t.reserve(a.clone()).err(), Some(Full::Token(2)));
        let b1 = t.reserve(b.clone()).unwrap();
        assert_eq!(t.reserve(b.clone()).err(), Some(Full::All(3)));
        // A reservation that never became a session frees its place.
        drop(a2);
        let a3 = t.reserve(a.clone()).unwrap();
        // One that did keeps it until the session is removed.
        t.open(&id("s1"), Some(&a1));
        t.open(&id("s3"), Some(&a3));
        drop((a1, a3));
        assert_eq!(t.reserve(a.clone()).err(), Some(Full::All(3)));
        t.remove("s1");
        t.remove("s1");
        let again = t.reserve(a.clone()).unwrap();
        drop((again, b1));
        assert_eq!(t.lock().total, 1);
        assert_eq!(t.lock().held.len(), 1);
        assert_eq!(t.open.get(), 1);
    }

    #[tokio::test(start_paused = true)]
    async fn a_session_is_idle_only_with_nothing_under_way() {
        let t = table(10, 10);
        for s in ["quiet", "calling", "streaming", "asked"] {
            let r = t.reserve(Principal::Local).unwrap();
            t.open(&id(s), Some(&r));
        }
        let (call, closed) = t.call("calling").unwrap();
        let stream = t.stream("streaming").unwrap();
        tokio::time::advance(Duration::from_secs(59)).await;
        assert!(t.touch("asked"));
        assert!(!t.touch("unknown"));
        assert!(t.idle(Instant::now()).is_empty());
        tokio::time::advance(Duration::from_secs(1)).await;
        assert_eq!(t.idle(Instant::now()), vec![id("quiet")]);
        // Hours later, the waiting call and the open stream still keep theirs.
        tokio::time::advance(Duration::from_secs(5 * 3600)).await;
        let mut idle = t.idle(Instant::now());
        idle.sort();
        assert_eq!(idle, vec![id("asked"), id("quiet")]);
        // The idle time counts from when the call ended.
        drop((call, stream));
        tokio::time::advance(Duration::from_secs(59)).await;
        assert_eq!(t.idle(Instant::now()).len(), 2);
        tokio::time::advance(Duration::from_secs(1)).await;
        assert_eq!(t.idle(Instant::now()).len(), 4);
        assert!(!closed.is_cancelled());
        t.remove("calling");
        assert!(closed.is_cancelled());
    }

    #[tokio::test(start_paused = true)]
    async fn closing_waits_for_the_calls_to_end() {
        let t = table(10, 10);
        let r = t.reserve(Principal::Local).unwrap();
        t.open(&id("s"), Some(&r));
        let (call, closed) = t.call("s").unwrap();
        tokio::spawn(async move {
            closed.cancelled().await;
            // The call withdraws its interaction (a store write), then ends.
            tokio::task::yield_now().await;
            drop(call);
        });
        t.end_calls("s").await;
        assert_eq!(t.lock().sessions["s"].calls, 0);
        // A call that never ends does not hold the close forever.
        let (_stuck, _) = t.call("s").unwrap();
        let start = Instant::now();
        t.end_calls("s").await;
        assert_eq!(start.elapsed(), DRAIN_WAIT);
    }

    #[test]
    fn only_2025_11_25_and_later_read_priming_events() {
        for (v, reads) in [
            ("2024-11-05", false),
            ("2025-03-26", false),
            ("2025-06-18", false),
            ("2025-11-25", true),
            ("2099-01-01", false),
        ] {
            let version: ProtocolVersion = serde_json::from_value(v.into()).unwrap();
            assert_eq!(reads_priming(&version), reads, "{v}");
        }
    }
}
