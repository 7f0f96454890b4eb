//! Who an operator's answer is from, and whether they may give it.
//!
//! An operator token with a label (`alice-laptop`) is an identity on the `operator` channel:
//! the person who lists that label (`[[people]] operator = ["alice-laptop"]`) answers with
//! it, so an answer from the inbox, the terminal or the API is recorded under their name
//! ("alice via desktop"), as a tap on a chat is; a label nobody lists is recorded as the
//! label itself. The name the request body gives (`by`) is then ignored: the token says who
//! it is. Such an operator answers only interactions whose route leaves answering to the
//! channels' lists or names them among its approvers; any other gets `403 not_an_approver`.
//!
//! A token without a label (and this machine, when no operator token is configured) is the
//! administrator's: it answers everything, under the name the body gives.

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use serde_json::{Value, json};

use super::AppState;
use super::error::ApiError;
use crate::config::teams::OPERATOR;
use crate::interaction::routes::{Admission, admission};
use crate::interaction::{Interaction, InteractionId, Responder, Via};
use crate::wire::Principal;

/// The error code of an answer from an operator who is not an approver of the route.
pub const NOT_AN_APPROVER: &str = "not_an_approver";

/// `responder` (as the request body describes it) given by `principal`: with a labelled
/// token, the label's identity, named by its person or by the label.
pub fn responder(principal: &Principal, mut responder: Responder) -> Responder {
    if let Some(label) = principal.label() {
        responder.by = Some(label.to_string());
        responder = responder
            .with_identity(OPERATOR, label)
            .with_actor_id(format!("{OPERATOR}:{label}"));
    }
    responder
}

/// The name a labelled operator token's holder answers as (their person's, or the label);
/// `None` for the administrator's token and this machine without tokens.
pub fn name(state: &AppState, principal: &Principal) -> Option<String> {
    principal.label().map(|label| label_name(state, label))
}

/// The person an operator token answers as: a labelled token's person (or its label), the
/// administrator for a token without one.
pub fn person(state: &AppState, principal: &Principal) -> String {
    name(state, principal).unwrap_or_else(|| crate::interaction::quorum::ADMINISTRATOR.to_string())
}

/// The name the holder of a token labelled `label` answers as: the person who lists the
/// label, or the label itself.
pub fn label_name(state: &AppState, label: &str) -> String {
    let mut r = Responder::anonymous(Via::api()).with_identity(OPERATOR, label);
    r.by = Some(label.to_string());
    state
        .registry
        .attribute(r)
        .by
        .unwrap_or_else(|| label.to_string())
}

/// `GET /v1/me`: who the request's operator token answers as. `label` and `name` are
/// `null` for a token without a label (and this machine without tokens): such an answer goes
/// under the name its body gives.
pub async fn me(State(state): State<AppState>, principal: Principal) -> Json<Value> {
    Json(json!({
        "label": principal.label(),
        "name": name(&state, &principal),
    }))
}

/// Whether `responder` (built by [`responder`] for `principal`) may answer interaction
/// `id`: `Ok` also when there is no such interaction (answering it says so). A refusal is
/// recorded in the audit trail, like a refused tap.
pub async fn admit(
    state: &AppState,
    principal: &Principal,
    responder: &Responder,
    id: &InteractionId,
) -> Result<(), ApiError> {
    let Some(label) = principal.label() else {
        return Ok(());
    };
    let Some(i) = state.registry.get(id).await? else {
        return Ok(());
    };
    let Some(route) = refused_route(state, &i, label) else {
        return Ok(());
    };
    let who = state.registry.attribute(responder.clone());
    state
        .registry
        .refused(
            Some(id),
            &who.audit_actor().unwrap_or_default(),
            &responder.via,
            &format!("not an approver of route {route:?}"),
        )
        .await?;
    Err(ApiError::new(
        StatusCode::FORBIDDEN,
        NOT_AN_APPROVER,
        format!(
            "{} may not answer this interaction: route {route:?} names its approvers, and \
             the operator token labelled {label:?} is none of theirs",
            who.by.as_deref().unwrap_or(label)
        ),
    ))
}

/// The name of `i`'s route when the operator labelled `label` is not one of its approvers.
fn refused_route(state: &AppState, i: &Interaction, label: &str) -> Option<String> {
    let teams = state.registry.teams();
    // Listed: an operator token answers whatever a route leaves to the channels' lists.
    match admission(i, &teams.people, OPERATOR, label, true) {
        Admission::Admitted => None,
        Admission::OtherRoute | Admission::NotApprover => {
            Some(i.route.as_ref().map(|r| r.name.clone()).unwrap_or_default())
        }
    }
}
