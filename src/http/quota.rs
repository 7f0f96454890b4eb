//! Each token's share of the server's connections: at most
//! `server.max_connections_per_token` requests of one token in flight at once, so that one
//! client (a bridge with thousands of long-polls, a runaway script) cannot take every
//! connection and lock operators out. A request is counted from its token check until its
//! answer is sent, an event stream until it ends; over the share, a request gets
//! `429 connection_quota` with `Retry-After` and `Connection: close` (so it frees its
//! connection at once), and the refusal is logged (at most once a second per token, with the
//! number left unlogged; the log escapes the path) and counted at `/metrics`.
//!
//! A token is its digest (whatever its scope); without tokens, this machine's requests are
//! counted per scope, so that local agents and local operators each have their share.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::body::{Body, HttpBody};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use futures_util::StreamExt;
use prometheus_client::metrics::counter::Counter;

use super::error::ApiError;
use crate::metrics::Metrics;
use crate::sync::LockExt;
use crate::wire::Principal;

/// What a route requires.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Scope {
    /// An agent token.
    Agent,
    /// An operator token.
    Operator,
    /// Either kind of token.
    Any,
}

impl Scope {
    /// The scope in words: `agent`, `operator`, `agent or operator`.
    pub fn name(self) -> &'static str {
        match self {
            Scope::Agent => "agent",
            Scope::Operator => "operator",
            Scope::Any => "agent or operator",
        }
    }
}

/// What `Retry-After` tells a client over its share, in seconds.
const RETRY_AFTER_SECS: u64 = 1;

/// How often refusals of one token are logged at most.
const LOG_EVERY: Duration = Duration::from_secs(1);

/// Whose share a request counts against.
#[derive(Clone, Debug, Hash, PartialEq, Eq)]
enum Holder {
    /// A configured token, by its digest.
    Token([u8; 32]),
    /// This machine, without tokens, per scope.
    Local(Scope),
}

impl Holder {
    fn of(scope: Scope, principal: &Principal) -> Self {
        match principal {
            Principal::Token(d) | Principal::Labelled(d, _) => Holder::Token(*d),
            Principal::Local => Holder::Local(scope),
        }
    }

    /// How logs name it: never the token, only the start of its digest.
    fn name(&self) -> String {
        match self {
            Holder::Token(d) => Principal::Token(*d).owner(),
            Holder::Local(scope) => format!("local {} requests", scope.name()),
        }
    }
}

/// One holder's requests in flight, and how its refusals were logged.
#[derive(Default)]
struct Share {
    held: usize,
    logged_at: Option<Instant>,
    unlogged: u64,
}

/// The requests each token has in flight.
pub struct Quota {
    max: AtomicUsize,
    shares: Mutex<HashMap<Holder, Share>>,
    refused: Counter,
}

impl Quota {
    /// At most `max` requests per token; registers the refusal counter with `metrics`.
    pub fn new(max: usize, metrics: &Metrics) -> Arc<Self> {
        let refused = Counter::default();
        metrics.register(
            "imrelay_http_token_connections_refused",
            "Requests refused because their token had server.max_connections_per_token in flight (429 connection_quota)",
            refused.clone(),
        );
        Arc::new(Self {
            max: AtomicUsize::new(max.max(1)),
            shares: Mutex::new(HashMap::new()),
            refused,
        })
    }

    /// The share of each token from now on (when the connection cap is fitted at start-up).
    pub fn set_max(&self, max: usize) {
        self.max.store(max.max(1), Ordering::Relaxed);
    }

    /// The share of each token.
    pub fn max(&self) -> usize {
        self.max.load(Ordering::Relaxed)
    }

    /// A place for one more request of `principal` on a route of `scope`, held until the
    /// guard drops; or the refusal, logged.
    pub fn take(
        self: &Arc<Self>,
        scope: Scope,
        principal: &Principal,
        path: &str,
    ) -> Result<InFlight, Refused> {
        let holder = Holder::of(scope, principal);
        let max = self.max();
        let mut shares = self.shares.locked();
        let share = shares.entry(holder.clone()).or_default();
        if share.held < max {
            share.held += 1;
            return Ok(InFlight {
                quota: self.clone(),
                holder,
            });
        }
        self.refused.inc();
        let now = Instant::now();
        if share
            .logged_at
            .is_none_or(|at| now.duration_since(at) >= LOG_EVERY)
        {
            let unlogged = std::mem::take(&mut share.unlogged);
            share.logged_at = Some(now);
            drop(shares);
            tracing::warn!(
                token = %holder.name(),
                path = %path,
                max,
                unlogged,
                "refused a request: this token already has as many requests in flight as server.max_connections_per_token allows"
            );
        } else {
            share.unlogged += 1;
        }
        Err(Refused { max })
    }
}

/// A request over its token's share.
#[derive(Debug)]
pub struct Refused {
    max: usize,
}

/// `429 connection_quota`, with `Retry-After` and `Connection: close`.
impl IntoResponse for Refused {
    fn into_response(self) -> Response {
        let max = self.max;
        let mut resp = ApiError::new(
            StatusCode::TOO_MANY_REQUESTS,
            "connection_quota",
            format!(
                "this token already has {max} requests in flight (long-polls, event streams, hooks \
             waiting for an answer), the most server.max_connections_per_token allows: wait \
             for some to end before starting more"
            ),
        )
        .closing()
        .into_response();
        resp.headers_mut()
            .insert(header::RETRY_AFTER, HeaderValue::from(RETRY_AFTER_SECS));
        resp
    }
}

/// One request's place in its token's share; dropping it frees the place.
pub struct InFlight {
    quota: Arc<Quota>,
    holder: Holder,
}

impl Drop for InFlight {
    fn drop(&mut self) {
        let mut shares = self.quota.shares.locked();
        if let Some(share) = shares.get_mut(&self.holder) {
            share.held = share.held.saturating_sub(1);
            if share.held == 0 {
                shares.remove(&self.holder);
            }
        }
    }
}

/// `resp`, holding `place` until its body is sent: at once for a body of known length, to
/// its end (or the client's going) for a stream.
pub fn held_while_sent(resp: Response, place: InFlight) -> Response {
    if resp.body().size_hint().exact().is_some() {
        return resp;
    }
    let (parts, body) = resp.into_parts();
    let body = body.into_data_stream().map(move |chunk| {
        let _ = &place;
        chunk
    });
    Response::from_parts(parts, Body::from_stream(body))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_gets_its_share_and_no_more_and_others_are_not_affected() {
        let quota = Quota::new(2, &Metrics::new());
        let a = Principal::Token([1; 32]);
        let a_labelled = Principal::Labelled([1; 32], Arc::from("alice"));
        let first = quota.take(Scope::Agent, &a, "/x").unwrap();
        // The same token through another scope, or with its label: the same share.
        let _second = quota.take(Scope::Any, &a_labelled, "/x").unwrap();
        let Err(refused) = quota.take(Scope::Agent, &a, "/x") else {
            panic!("a third request of the token is refused");
        };
        let refused = refused.into_response();
        assert_eq!(refused.status(), StatusCode::TOO_MANY_REQUESTS);
        assert_eq!(refused.headers()[header::RETRY_AFTER], "1");
        assert_eq!(refused.headers()[header::CONNECTION], "close");
        // Another token, and this machine's agents and operators, each have theirs.
        let _b = quota
            .take(Scope::Agent, &Principal::Token([2; 32]), "/x")
            .unwrap();
        let _l1 = quota.take(Scope::Agent, &Principal::Local, "/x").unwrap();
        let _l2 = quota.take(Scope::Agent, &Principal::Local, "/x").unwrap();
        assert!(quota.take(Scope::Agent, &Principal::Local, "/x").is_err());
        let _op = quota
            .take(Scope::Operator, &Principal::Local, "/x")
            .unwrap();
        // A place freed is a place again; an emptied share leaves nothing behind.
        drop(first);
        let again = quota.take(Scope::Agent, &a, "/x").unwrap();
        assert_eq!(quota.refused.get(), 2);
        drop((again, _second));
        assert!(!quota.shares.locked().contains_key(&Holder::Token([1; 32])));
    }
}
