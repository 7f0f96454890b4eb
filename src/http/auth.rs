//! Bearer-token authentication with two scopes.
//!
//! - *agent* tokens may create, wait on and cancel interactions, and call hook endpoints;
//! - *operator* tokens may list and answer interactions, follow the event stream and use the
//!   web inbox;
//! - a route open to either scope admits a request that either scope's check alone would.
//!
//! Tokens are kept only as SHA-256 digests and compared in constant time against every
//! configured digest (no early exit, no length leak). A scope with no tokens configured
//! accepts only requests from this machine: the peer must be a loopback address and the
//! `Host` header a loopback name (which also defeats DNS rebinding from a browser).

use std::net::SocketAddr;
use std::sync::Arc;

use axum::extract::{ConnectInfo, Request, State};
use axum::http::{HeaderMap, header};
use axum::middleware::Next;
use axum::response::Response;
use sha2::{Digest, Sha256};
use subtle::{ConditionallySelectable, ConstantTimeEq};

use super::error::ApiError;
use super::{AppState, quota};
use crate::config::AuthSettings;
use crate::wire::Principal;

pub use super::quota::Scope;

/// The configured tokens, as digests, and the operator tokens' labels (in the same order).
pub struct Auth {
    agent: Vec<[u8; 32]>,
    operator: Vec<[u8; 32]>,
    labels: Vec<Option<Arc<str>>>,
    refusals: super::refused::RefusalLog,
}

fn digest(token: &str) -> [u8; 32] {
    Sha256::digest(token.as_bytes()).into()
}

/// Whether `candidate` equals any of `digests`, in time independent of which (if any).
fn matches_any(digests: &[[u8; 32]], candidate: &[u8; 32]) -> bool {
    let mut found = subtle::Choice::from(0u8);
    for d in digests {
        found |= d.ct_eq(candidate);
    }
    found.into()
}

/// The token of an `Authorization: Bearer <token>` value: the scheme is case-insensitive
/// and followed by one or more spaces (RFC 9110, section 11.4); the token is the rest,
/// exactly as sent.
fn bearer_token(value: &str) -> Option<&str> {
    let (scheme, rest) = value.split_once(' ')?;
    let token = rest.trim_start_matches(' ');
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty()).then_some(token)
}

/// Whether a `Host` header value names this machine.
fn loopback_host(host: &str) -> bool {
    let name = if let Some(rest) = host.strip_prefix('[') {
        // [::1]:8787
        rest.split(']').next().unwrap_or("")
    } else {
        host.rsplit_once(':').map_or(host, |(h, _)| h)
    };
    name.eq_ignore_ascii_case("localhost")
        || name
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

impl Auth {
    /// Digests the configured tokens.
    pub fn new(settings: &AuthSettings) -> Self {
        Self {
            agent: settings
                .agent_tokens
                .iter()
                .map(|t| digest(t.expose()))
                .collect(),
            operator: settings
                .operator_tokens
                .iter()
                .map(|t| digest(t.expose()))
                .collect(),
            labels: settings
                .operator_tokens
                .iter()
                .map(|t| t.label.as_deref().map(Arc::from))
                .collect(),
            refusals: super::refused::RefusalLog::default(),
        }
    }

    /// The label of the operator token whose digest is `d`, if it is one and has one. Every
    /// digest is compared (no early exit); only the label read at the end depends on which
    /// matched, and the caller holds that token already.
    fn label_of(&self, d: &[u8; 32]) -> Option<Arc<str>> {
        let mut found = u32::MAX;
        for (k, o) in self.operator.iter().enumerate() {
            let k = u32::try_from(k).unwrap_or(u32::MAX);
            found.conditional_assign(&k, o.ct_eq(d));
        }
        let k = usize::try_from(found).ok()?;
        self.labels.get(k).cloned().flatten()
    }

    /// Checks a request against `scope`, and says who it comes from. For [`Scope::Any`] the
    /// request passes if it would pass either scope's check alone.
    pub fn check(
        &self,
        scope: Scope,
        headers: &HeaderMap,
        peer: SocketAddr,
    ) -> Result<Principal, ApiError> {
        let allowed: &[&[[u8; 32]]] = match scope {
            Scope::Agent => &[&self.agent],
            Scope::Operator => &[&self.operator],
            Scope::Any => &[&self.agent, &self.operator],
        };
        // A scope with no tokens admits requests from this machine.
        if allowed.iter().any(|d| d.is_empty()) {
            let host = headers
                .get(header::HOST)
                .and_then(|h| h.to_str().ok())
                .unwrap_or("");
            if peer.ip().is_loopback() && loopback_host(host) {
                return Ok(Principal::Local);
            }
            if allowed.iter().all(|d| d.is_empty()) {
                return Err(ApiError::forbidden(format!(
                    "no {} tokens are configured, so only requests from this machine (to a loopback host name) are accepted",
                    scope.name()
                )));
            }
        }
        let presented = headers
            .get(header::AUTHORIZATION)
            .and_then(|h| h.to_str().ok())
            .and_then(bearer_token);
        let Some(token) = presented else {
            return Err(ApiError::unauthorized(format!(
                "this endpoint needs a bearer token with the {} scope (Authorization: Bearer <token>)",
                scope.name()
            )));
        };
        let d = digest(token);
        // Every set is compared (no short-circuit), so timing does not tell which matched.
        let in_scope = allowed
            .iter()
            .fold(false, |found, set| matches_any(set, &d) | found);
        if in_scope {
            // An agent scope never reads a label: its requests are the agent's own.
            let label = (scope != Scope::Agent).then(|| self.label_of(&d)).flatten();
            return Ok(match label {
                Some(label) => Principal::Labelled(d, label),
                None => Principal::Token(d),
            });
        }
        let known = matches_any(&self.agent, &d) | matches_any(&self.operator, &d);
        if known {
            Err(ApiError::forbidden(format!(
                "this token does not have the {} scope",
                scope.name()
            )))
        } else {
            Err(ApiError::unauthorized("the bearer token is not valid"))
        }
    }
}

/// Which scope's token a request came with: an agent's token reaches only the interactions
/// it created; an operator's reaches every one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// An agent token (or this machine, where only the agent scope is without tokens).
    Agent,
    /// An operator token (or this machine, where the operator scope is without tokens).
    Operator,
}

impl Auth {
    /// The role of `principal`, admitted to `scope`.
    fn role(&self, scope: Scope, principal: &Principal) -> Role {
        match (scope, principal) {
            (Scope::Agent, _) => Role::Agent,
            (Scope::Operator, _) => Role::Operator,
            (Scope::Any, Principal::Token(d) | Principal::Labelled(d, _)) => {
                if matches_any(&self.operator, d) {
                    Role::Operator
                } else {
                    Role::Agent
                }
            }
            (Scope::Any, Principal::Local) if self.operator.is_empty() => Role::Operator,
            (Scope::Any, Principal::Local) => Role::Agent,
        }
    }
}

/// The role the token check left in the request; [`Role::Agent`], the narrower, where there
/// was none.
impl<S: Send + Sync> axum::extract::FromRequestParts<S> for Role {
    type Rejection = std::convert::Infallible;

    async fn from_request_parts(
        parts: &mut axum::http::request::Parts,
        _: &S,
    ) -> Result<Self, Self::Rejection> {
        Ok(crate::wire::extension_or(parts, Role::Agent))
    }
}

async fn require(
    scope: Scope,
    state: &AppState,
    peer: SocketAddr,
    mut req: Request,
    next: Next,
) -> Result<Response, ApiError> {
    let principal = match state.auth.check(scope, req.headers(), peer) {
        Ok(principal) => principal,
        Err(e) => {
            let token = req
                .headers()
                .get(header::AUTHORIZATION)
                .and_then(|h| h.to_str().ok())
                .and_then(bearer_token);
            let why = e.message().to_string();
            let status = e.status().as_u16();
            let path = req.uri().path();
            state
                .auth
                .refusals
                .note(scope.name(), path, peer, token, status, &why);
            return Err(e);
        }
    };
    let role = state.auth.role(scope, &principal);
    // The token's share of the connections, held until the answer is sent.
    let place = match state.quota.take(scope, &principal, req.uri().path()) {
        Ok(place) => place,
        Err(refused) => return Ok(axum::response::IntoResponse::into_response(refused)),
    };
    req.extensions_mut().insert(principal);
    req.extensions_mut().insert(role);
    Ok(quota::held_while_sent(next.run(req).await, place))
}

/// Middleware: an agent token.
pub async fn agent(
    State(state): State<AppState>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    req: Request,
    next: Next,
) -> Result<Response, ApiError> {
    require(Scope::Agent, &state, peer, req, next).await
}

/// Middleware: an operator token.
pub async fn operator(
    State(state): State<AppState>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    req: Request,
    next: Next,
) -> Result<Response, ApiError> {
    require(Scope::Operator, &state, peer, req, next).await
}

/// Middleware: an agent or operator token.
pub async fn any(
    State(state): State<AppState>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    req: Request,
    next: Next,
) -> Result<Response, ApiError> {
    require(Scope::Any, &state, peer, req, next).await
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::OperatorToken;
    use crate::settings::Secret;

    fn auth(agent: &[&str], operator: &[&str]) -> Auth {
        Auth::new(&AuthSettings {
            agent_tokens: agent.iter().map(|t| Secret::new(*t)).collect(),
            operator_tokens: operator
                .iter()
                .map(|t| match t.split_once(' ') {
                    Some((label, token)) => OperatorToken::labelled(token, label),
                    None => OperatorToken::new(*t),
                })
                .collect(),
        })
    }

    fn headers(token: Option<&str>, host: &str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(header::HOST, host.parse().unwrap());
        if let Some(t) = token {
            h.insert(
                header::AUTHORIZATION,
                format!("Bearer {t}").parse().unwrap(),
            );
        }
        h
    }

    const LOCAL: &str = "127.0.0.1:5000";
    const REMOTE: &str = "10.0.0.9:5000";

    fn with_authorization(value: &str) -> HeaderMap {
        let mut h = headers(None, "x");
        h.insert(header::AUTHORIZATION, value.parse().unwrap());
        h
    }

    #[test]
    fn the_scheme_is_case_insensitive_and_the_token_exact() {
        let token = "AgentToken-0123456789";
        let a = auth(&[token], &[]);
        let peer = REMOTE.parse().unwrap();
        for ok in [
            format!("Bearer {token}"),
            format!("bearer {token}"),
            format!("BEARER {token}"),
            format!("bEaReR {token}"),
            format!("Bearer   {token}"),
        ] {
            assert!(
                a.check(Scope::Agent, &with_authorization(&ok), peer)
                    .is_ok(),
                "{ok}"
            );
        }
        for refused in [
            format!("Bearer {}", token.to_lowercase()),
            format!("Bearer {}", token.to_uppercase()),
            format!("Bearer {token} "),
            format!("Bearer {token}x"),
            format!("Bearer{token}"),
            format!("Basic {token}"),
            format!("Bearer\t{token}"),
            token.to_string(),
            "Bearer ".to_string(),
        ] {
            assert_eq!(
                a.check(Scope::Agent, &with_authorization(&refused), peer)
                    .unwrap_err()
                    .code(),
                "unauthorized",
                "{refused:?}"
            );
        }
    }

    #[test]
    fn scopes_are_enforced() {
        let a = auth(&["ag"], &["op"]);
        let peer = LOCAL.parse().unwrap();
        assert!(
            a.check(Scope::Agent, &headers(Some("ag"), "x"), peer)
                .is_ok()
        );
        assert_eq!(
            a.check(Scope::Agent, &headers(Some("op"), "x"), peer)
                .unwrap_err()
                .code(),
            "forbidden"
        );
        assert_eq!(
            a.check(Scope::Operator, &headers(Some("nope"), "x"), peer)
                .unwrap_err()
                .code(),
            "unauthorized"
        );
        assert_eq!(
            a.check(Scope::Operator, &headers(None, "x"), peer)
                .unwrap_err()
                .code(),
            "unauthorized"
        );
        assert!(a.check(Scope::Any, &headers(Some("op"), "x"), peer).is_ok());
    }

    #[test]
    fn a_request_is_known_by_its_token_or_as_this_machine() {
        let a = auth(&["ag1", "ag2"], &[]);
        let remote = REMOTE.parse().unwrap();
        let check = |token, host| a.check(Scope::Agent, &headers(Some(token), host), remote);
        let p1 = check("ag1", "x").unwrap();
        assert!(matches!(p1, Principal::Token(_)));
        assert_ne!(p1, check("ag2", "x").unwrap());
        assert_eq!(p1, check("ag1", "y").unwrap());
        // The digest stays out of logs.
        assert_eq!(format!("{p1:?}"), "Principal::Token(..)");
        // No operator tokens: this machine, whatever it presents.
        let local = LOCAL.parse().unwrap();
        assert_eq!(
            a.check(Scope::Operator, &headers(Some("zz"), "localhost"), local)
                .unwrap(),
            Principal::Local
        );
    }

    #[test]
    fn an_operator_tokens_label_comes_with_it() {
        let a = auth(
            &["ag-0123456789"],
            &["admin-0123", "alice-laptop alice-0123"],
        );
        let remote = REMOTE.parse().unwrap();
        let check = |scope, token| a.check(scope, &headers(Some(token), "x"), remote).unwrap();
        let alice = check(Scope::Operator, "alice-0123");
        assert_eq!(alice.label(), Some("alice-laptop"));
        assert_eq!(
            format!("{alice:?}"),
            "Principal::Labelled(.., \"alice-laptop\")"
        );
        assert_eq!(check(Scope::Any, "alice-0123"), alice);
        // The administrator's token, and an agent's, have none.
        assert_eq!(check(Scope::Operator, "admin-0123").label(), None);
        assert_eq!(check(Scope::Any, "ag-0123456789").label(), None);
        // Counted under the token, whatever its label.
        assert!(alice.owner().starts_with("token:"));
    }

    #[test]
    fn either_scope_passes_when_either_check_would() {
        // Agent scope open to this machine, operator scope behind tokens.
        let a = auth(&[], &["op"]);
        let local = LOCAL.parse().unwrap();
        let remote = REMOTE.parse().unwrap();
        assert!(
            a.check(Scope::Agent, &headers(None, "127.0.0.1"), local)
                .is_ok()
        );
        assert!(
            a.check(Scope::Any, &headers(None, "127.0.0.1"), local)
                .is_ok()
        );
        assert!(
            a.check(Scope::Any, &headers(Some("op"), "x"), remote)
                .is_ok()
        );
        assert_eq!(
            a.check(Scope::Any, &headers(None, "x"), remote)
                .unwrap_err()
                .code(),
            "unauthorized"
        );
        assert_eq!(
            a.check(Scope::Any, &headers(Some("nope"), "x"), remote)
                .unwrap_err()
                .code(),
            "unauthorized"
        );
        // The other way round.
        let b = auth(&["ag"], &[]);
        assert!(
            b.check(Scope::Any, &headers(None, "localhost"), local)
                .is_ok()
        );
        assert!(
            b.check(Scope::Any, &headers(Some("ag"), "x"), remote)
                .is_ok()
        );
        assert!(b.check(Scope::Any, &headers(None, "x"), remote).is_err());
        // Neither has tokens: this machine only.
        let c = auth(&[], &[]);
        assert!(
            c.check(Scope::Any, &headers(None, "localhost"), local)
                .is_ok()
        );
        assert_eq!(
            c.check(Scope::Any, &headers(None, "localhost"), remote)
                .unwrap_err()
                .code(),
            "forbidden"
        );
    }

    #[test]
    fn without_tokens_only_loopback_is_accepted() {
        let a = auth(&[], &[]);
        assert!(
            a.check(
                Scope::Operator,
                &headers(None, "127.0.0.1:8787"),
                LOCAL.parse().unwrap()
            )
            .is_ok()
        );
        assert!(
            a.check(
                Scope::Operator,
                &headers(None, "localhost"),
                LOCAL.parse().unwrap()
            )
            .is_ok()
        );
        assert!(
            a.check(
                Scope::Operator,
                &headers(None, "[::1]:8787"),
                "[::1]:5000".parse().unwrap()
            )
            .is_ok()
        );
        assert!(
            a.check(
                Scope::Operator,
                &headers(None, "127.0.0.1"),
                REMOTE.parse().unwrap()
            )
            .is_err()
        );
        // A browser tricked by DNS rebinding sends the attacker's host name.
        assert!(
            a.check(
                Scope::Operator,
                &headers(None, "evil.example:8787"),
                LOCAL.parse().unwrap()
            )
            .is_err()
        );
    }
}
