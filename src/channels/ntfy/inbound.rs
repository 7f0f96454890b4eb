//! The action buttons' endpoint, `POST /v1/ntfy/{allow|deny}/{token}`: a single-use token
//! (see [`crate::channels::actions`]) answers its one interaction with its one action, as the
//! person the channel is configured for, through the answer pipeline (route approvers, quorum
//! votes). Everything else is refused with a JSON error that says why, recorded in the audit
//! trail and logged, never with the token.

use axum::Router;
use axum::extract::State;
use axum::response::Response;
use axum::routing::post;

use super::CHANNEL;
use crate::channels::actions::{Endpoint, Person, Tokens};
use crate::wire::error::ApiError;
use crate::wire::extract::ApiPath;

/// The channel's tokens.
pub(super) const TOKENS: Tokens = Tokens { channel: CHANNEL };

/// State of the endpoint.
#[derive(Clone)]
pub(super) struct Inbound {
    /// The kit's endpoint logic.
    pub endpoint: Endpoint,
    /// Who answers.
    pub person: Person,
}

/// The endpoint's route.
pub(super) fn router(inbound: Inbound) -> Router {
    Router::new()
        .route("/v1/ntfy/{action}/{token}", post(act))
        .with_state(inbound)
}

/// `POST /v1/ntfy/{action}/{token}`.
async fn act(
    State(s): State<Inbound>,
    ApiPath((action, token)): ApiPath<(String, String)>,
) -> Result<Response, ApiError> {
    let actor = format!("{} ({CHANNEL}:{})", s.person.name, s.person.identity);
    let (redeemed, _) = s.endpoint.find(&actor, &action, &token, 0).await?;
    s.endpoint.answer(&redeemed, &s.person).await
}
