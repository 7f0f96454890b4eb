//! `/v1/grants`: the grants in force ("allow this and similar calls"), listed, added and
//! revoked by operators: an administrator's token any grant; a labelled token's person only
//! on the routes they approve, and revoking their own grants or those on such a route.

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::Response;
use serde::Deserialize;
use serde_json::{Value, json};

use super::AppState;
use super::api::json_response;
use super::error::ApiError;
use super::extract::{ApiJson, ApiPath, ApiQuery};
use crate::interaction::policy::{Grant, GrantScope, check_rule};
use crate::interaction::{Grantor, Responder, ValidationError, Via, now};
use crate::wire::Principal;

/// `GET /v1/grants`
pub async fn list(State(state): State<AppState>) -> Result<Json<Value>, ApiError> {
    let grants = state.registry.live_grants().await?;
    Ok(Json(json!({ "grants": grants })))
}

/// The body of `POST /v1/grants`: a standing grant made without a call to answer. A person
/// (a labelled token) names the route it covers, one they approve; an administrator (a
/// token without a label) may leave `route` out, and the grant covers every route.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NewGrant {
    rule: String,
    agent: Option<String>,
    cwd: Option<String>,
    route: Option<String>,
    by: Option<String>,
}

/// Who asks, as the request's operator token says: a labelled token is a person, whose
/// identity decides; a token without a label (or this machine without tokens) is an
/// administrator's, named as the request gives.
pub(super) fn grantor(
    state: &AppState,
    principal: &Principal,
    via: Via,
    by: Option<String>,
) -> Grantor {
    let asked = super::operator::responder(
        principal,
        Responder {
            by,
            ..Responder::anonymous(via)
        },
    );
    if principal.label().is_some() {
        Grantor::Person {
            responder: state.registry.attribute(asked),
            listed: true,
        }
    } else {
        Grantor::Administrator(asked)
    }
}

/// `POST /v1/grants`
pub async fn add(
    State(state): State<AppState>,
    principal: Principal,
    ApiJson(body): ApiJson<NewGrant>,
) -> Result<Response, ApiError> {
    check_rule(&body.rule).map_err(|e| ValidationError::new("rule", e.message))?;
    for (field, v) in [
        ("agent", &body.agent),
        ("cwd", &body.cwd),
        ("route", &body.route),
        ("by", &body.by),
    ] {
        if v.as_ref()
            .is_some_and(|v| v.trim().is_empty() || v.chars().count() > 1000)
        {
            return Err(ValidationError::new(field, "must be 1 to 1000 characters").into());
        }
    }
    if body.cwd.as_ref().is_some_and(|c| !c.starts_with('/')) {
        return Err(ValidationError::new("cwd", "must be an absolute path").into());
    }
    let grantor = grantor(&state, &principal, Via::api(), body.by);
    let grant = Grant {
        id: uuid::Uuid::now_v7().to_string(),
        rule: body.rule.trim().to_string(),
        scope: GrantScope::Standing,
        session: None,
        agent: body.agent,
        cwd: body.cwd,
        // A labelled token says who it is: its person's name, not the body's.
        by: grantor.responder().by.clone(),
        via: Via::api().as_str().to_string(),
        interaction_id: None,
        owner: None,
        route: body.route,
        grantor: None,
        created_at: now(),
        expires_at: None,
    };
    let grant = state.registry.add_grant(grant, &grantor).await?;
    Ok(json_response(StatusCode::CREATED, &grant))
}

/// `DELETE /v1/grants/{id}?by=NAME&via=desktop|terminal|api`
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RevokeParams {
    by: Option<String>,
    via: Option<crate::wire::answer::ClientVia>,
}

/// `DELETE /v1/grants/{id}`
pub async fn revoke(
    State(state): State<AppState>,
    principal: Principal,
    ApiPath(id): ApiPath<String>,
    ApiQuery(params): ApiQuery<RevokeParams>,
) -> Result<Response, ApiError> {
    if id.is_empty() || id.len() > 64 {
        return Err(ValidationError::new("id", "is not a grant id").into());
    }
    let via = match params.via {
        Some(crate::wire::answer::ClientVia::Desktop) => Via::desktop(),
        Some(crate::wire::answer::ClientVia::Terminal) => Via::terminal(),
        _ => Via::api(),
    };
    let by = params
        .by
        .filter(|b| !b.trim().is_empty())
        .map(|b: String| crate::interaction::clip(&b, 200));
    let revoker = grantor(&state, &principal, via, by);
    let grant = state.registry.revoke_grant(&id, &revoker).await?;
    Ok(json_response(StatusCode::OK, &grant))
}
