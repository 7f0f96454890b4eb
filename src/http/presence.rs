//! `POST /v1/presence`: the inbox (while shown and focused) and `imrelay watch` say that
//! their person is at the desk, every few seconds, and that they left; `GET /v1/presence`
//! lists who is. A route's `desk_first_secs` holds the phones while one of its approvers is
//! (see [`crate::interaction::presence`]). The person is the operator token's.

use axum::extract::State;
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::json;

use super::AppState;
use super::error::ApiError;
use super::extract::ApiJson;
use crate::wire::Principal;
use crate::wire::answer::ClientVia;

/// The body of `POST /v1/presence`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PresenceBody {
    /// At the desk now (true), or left it (false).
    present: bool,
    /// Which client says so (`desktop`, `terminal`); for the log only.
    #[serde(default)]
    via: Option<ClientVia>,
}

/// `POST /v1/presence`
pub async fn report(
    State(state): State<AppState>,
    principal: Principal,
    ApiJson(body): ApiJson<PresenceBody>,
) -> Result<Response, ApiError> {
    let person = super::operator::person(&state, &principal);
    let presence = state.registry.presence();
    let was = presence.is_present(&person);
    presence.report(&person, body.present);
    if was != body.present {
        tracing::debug!(person = %person.escape_debug(), present = body.present,
            via = ?body.via, "presence");
    }
    Ok(axum::Json(json!({ "person": person, "present": body.present })).into_response())
}

/// `GET /v1/presence`
pub async fn list(State(state): State<AppState>) -> Response {
    axum::Json(json!({ "present": state.registry.presence().present() })).into_response()
}
