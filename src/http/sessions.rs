//! `/v1/sessions`: the agent sessions imrelay has seen, listed, read one at a time, and sent
//! messages by the people who may answer their route (see docs/sessions.md).

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::Response;
use serde::Deserialize;
use serde_json::json;

use super::AppState;
use super::api::json_response;
use super::error::ApiError;
use super::extract::{ApiJson, ApiPath, ApiQuery};
use crate::interaction::{ValidationError, Via};
use crate::wire::Principal;

/// The most sessions one listing returns.
const MAX_LIMIT: usize = 1000;

/// `GET /v1/sessions?route=NAME&limit=N`
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ListParams {
    route: Option<String>,
    limit: Option<usize>,
}

/// `GET /v1/sessions`: the most recently active sessions first.
pub async fn list(
    State(state): State<AppState>,
    ApiQuery(params): ApiQuery<ListParams>,
) -> Result<Response, ApiError> {
    let limit = params.limit.unwrap_or(100);
    if !(1..=MAX_LIMIT).contains(&limit) {
        return Err(ValidationError::new("limit", format!("must be 1 to {MAX_LIMIT}")).into());
    }
    let route = params.route.filter(|r| !r.is_empty());
    let sessions = state.registry.sessions(route.as_deref(), limit).await?;
    Ok(json_response(
        StatusCode::OK,
        &json!({ "sessions": sessions }),
    ))
}

/// `GET /v1/sessions/{agent}/{id}`
pub async fn get(
    State(state): State<AppState>,
    ApiPath((agent, id)): ApiPath<(String, String)>,
) -> Result<Response, ApiError> {
    let session = state.registry.session(&agent, &id).await?;
    Ok(json_response(StatusCode::OK, &session))
}

/// The body of `POST /v1/sessions/{agent}/{id}/messages`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NewMessage {
    text: String,
    by: Option<String>,
    via: Option<crate::wire::answer::ClientVia>,
}

/// `POST /v1/sessions/{agent}/{id}/messages`: a message queued for the session, handed to
/// its agent at its next hook event that can carry one.
pub async fn message(
    State(state): State<AppState>,
    principal: Principal,
    ApiPath((agent, id)): ApiPath<(String, String)>,
    ApiJson(body): ApiJson<NewMessage>,
) -> Result<Response, ApiError> {
    let via = match body.via {
        Some(crate::wire::answer::ClientVia::Desktop) => Via::desktop(),
        Some(crate::wire::answer::ClientVia::Terminal) => Via::terminal(),
        _ => Via::api(),
    };
    let by = body
        .by
        .filter(|b| !b.trim().is_empty())
        .map(|b| crate::interaction::clip(&b, 200));
    let sender = super::grants::grantor(&state, &principal, via, by);
    let session = state
        .registry
        .message_session(&agent, &id, &body.text, &sender)
        .await?;
    Ok(json_response(StatusCode::ACCEPTED, &session))
}
