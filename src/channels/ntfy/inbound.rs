//! The action buttons' endpoint, `POST /v1/ntfy/{allow|deny|similar}/{token}`: a single-use
//! token (see [`crate::channels::actions`]) answers its one interaction with its one action,
//! as the person the channel is configured for, through the answer pipeline (route approvers,
//! quorum votes); and `POST /v1/ntfy/digest/{link}`: a digest notification's action, a
//! single-use link (`channels::digest_links`) the kit's digest flow answers. Everything else
//! is refused with a JSON error that says why, recorded in the audit trail and logged, never
//! with the token.

use std::sync::Arc;

use axum::Router;
use axum::extract::State;
use axum::response::Response;
use axum::routing::post;

use super::CHANNEL;
use super::deliver::Ntfy;
use crate::channels::actions::{Endpoint, Person};
use crate::channels::messages::Messages;
use crate::wire::error::ApiError;
use crate::wire::extract::ApiPath;

/// State of the endpoint.
#[derive(Clone)]
pub(super) struct Inbound {
    /// The kit's endpoint logic.
    pub endpoint: Endpoint,
    /// Who answers.
    pub person: Person,
    /// The delivery skeleton: a digest shown again after a press.
    pub messages: Arc<Messages<Ntfy>>,
}

/// The endpoint's route.
pub(super) fn router(inbound: Inbound) -> Router {
    Router::new()
        .route("/v1/ntfy/{action}/{token}", post(act))
        .with_state(inbound)
}

/// `POST /v1/ntfy/{action}/{token}` (`digest`: a digest notification's link).
async fn act(
    State(s): State<Inbound>,
    ApiPath((action, token)): ApiPath<(String, String)>,
) -> Result<Response, ApiError> {
    if action == "digest" {
        let links = &s.messages.platform.links;
        return s
            .endpoint
            .digest(&s.messages, links, &token, &s.person)
            .await;
    }
    let actor = format!("{} ({CHANNEL}:{})", s.person.name, s.person.identity);
    let (redeemed, _) = s.endpoint.find(&actor, &action, &token, 0).await?;
    s.endpoint.answer(&redeemed, &s.person).await
}
