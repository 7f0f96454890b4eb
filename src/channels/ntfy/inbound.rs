//! The action buttons' endpoint, `POST /v1/ntfy/{allow|deny}/{token}`: a single-use token
//! (see [`super::tokens`]) answers its one interaction with its one action, as the person
//! the channel is configured for, through the answer pipeline (route approvers, quorum
//! votes). Everything else is refused with a JSON error that says why, recorded in the audit
//! trail and logged, never with the token.

use std::sync::Arc;

use axum::Router;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use serde_json::json;

use super::CHANNEL;
use super::tokens::{self, Action};
use crate::channels::pipeline::{Feedback, Pipeline, Tap};
use crate::interaction::{Answer, InteractionId, Kind, Responder};
use crate::present::render::Locale;
use crate::store::Store;
use crate::wire::error::ApiError;
use crate::wire::extract::ApiPath;

/// Who answers through the buttons.
#[derive(Clone, Debug)]
pub(super) struct Person {
    /// Their `[[people]]` name.
    pub name: String,
    /// Their id on this channel (their `ntfy` id, else their name).
    pub identity: String,
}

/// State of the endpoint.
#[derive(Clone)]
pub(super) struct Inbound {
    /// The answer pipeline.
    pub pipeline: Pipeline,
    /// Where tokens are kept.
    pub store: Arc<dyn Store>,
    /// Who answers.
    pub person: Person,
}

/// The endpoint's route.
pub(super) fn router(inbound: Inbound) -> Router {
    Router::new()
        .route("/v1/ntfy/{action}/{token}", post(act))
        .with_state(inbound)
}

/// A refusal: logged and recorded (never the token), answered with `status` and `message`.
async fn refuse(
    s: &Inbound,
    id: Option<&InteractionId>,
    status: StatusCode,
    code: &'static str,
    message: String,
) -> ApiError {
    tracing::warn!(via = CHANNEL, interaction = ?id.map(|i| i.to_string()), code, "ntfy action refused: {message}");
    let actor = format!("{} ({CHANNEL}:{})", s.person.name, s.person.identity);
    if s.pipeline
        .registry()
        .refused(id, &actor, s.pipeline.via(), &message)
        .await
        .is_err()
    {
        return ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "store_unavailable",
            "imrelay cannot record this right now; try again shortly",
        );
    }
    ApiError::new(status, code, message)
}

/// The action, the creation time, the digest and the interaction of a token imrelay made;
/// anything else is refused.
async fn binding(
    s: &Inbound,
    action: &str,
    token: &str,
) -> Result<(Action, i64, String, InteractionId), ApiError> {
    let invalid = || async {
        let m = "this button is not valid: it was not made by imrelay, or not for this action";
        refuse(s, None, StatusCode::FORBIDDEN, "invalid_token", m.into()).await
    };
    let (Some(action), Some(created)) = (Action::parse(action), tokens::created(token)) else {
        return Err(invalid().await);
    };
    let digest = tokens::digest(action, token);
    let bound = s.store.get_value(&tokens::key(&digest)).await?;
    let id = bound.as_deref().and_then(|v| {
        InteractionId::parse(v)
            .ok()
            .filter(|id| tokens::names(v, id.as_ref()))
    });
    match id {
        Some(id) => Ok((action, created, digest, id)),
        None => Err(invalid().await),
    }
}

/// `POST /v1/ntfy/{action}/{token}`.
async fn act(
    State(s): State<Inbound>,
    ApiPath((action, token)): ApiPath<(String, String)>,
) -> Result<Response, ApiError> {
    let (action, created, digest, id) = binding(&s, &action, &token).await?;
    let tap = Tap {
        id: &id,
        created: Some(created),
        actor: &s.person.name,
        identity: &s.person.identity,
        approver: true,
        audit: true,
    };
    let i = match s.pipeline.admit(&tap, |i| i.kind == Kind::Approval).await {
        Ok(i) => i,
        Err(stop) => return Err(stopped(&id, stop.feedback).await),
    };
    if jiff::Timestamp::now() >= i.deadline {
        let m = "this request has expired: nothing changed".to_string();
        return Err(refuse(&s, Some(&id), StatusCode::GONE, "expired", m).await);
    }
    let until = i.deadline + jiff::SignedDuration::from_secs(3600);
    if !s
        .store
        .first_sighting(tokens::USED_SCOPE, &digest, until)
        .await?
    {
        let m = "this button was already used: each one answers once".to_string();
        return Err(refuse(&s, Some(&id), StatusCode::CONFLICT, "token_used", m).await);
    }
    let answer = match action {
        Action::Allow => Answer::allow(),
        Action::Deny => Answer::deny(None),
    };
    let responder = Responder::new(s.person.name.clone(), s.pipeline.via().clone())
        .with_actor_id(format!("{CHANNEL}:{}", s.person.identity))
        .with_identity(CHANNEL, s.person.identity.clone());
    let feedback = s.pipeline.respond(&id, answer, responder).await;
    if matches!(feedback, Feedback::StoreDown) {
        // Not recorded: the same button may be pressed again.
        let _ = s.store.forget_sighting(tokens::USED_SCOPE, &digest).await;
    }
    match feedback {
        Feedback::Resolved(_) | Feedback::Voted(_) => Ok((
            StatusCode::OK,
            axum::Json(json!({
                "id": id.to_string(),
                "result": feedback.result(),
                "message": feedback.text(Locale::EnUs),
            })),
        )
            .into_response()),
        other => Err(stopped(&id, other).await),
    }
}

/// The error for a press the pipeline stopped (it recorded refusals already).
async fn stopped(id: &InteractionId, f: Feedback) -> ApiError {
    let message = f.text(Locale::EnUs);
    let (status, code) = match &f {
        Feedback::Already(_) => (StatusCode::CONFLICT, "already_resolved"),
        Feedback::AlreadyVoted(..) => (StatusCode::CONFLICT, "already_voted"),
        Feedback::NotFound => (StatusCode::GONE, "not_found"),
        Feedback::StoreDown | Feedback::StillWorking => {
            (StatusCode::SERVICE_UNAVAILABLE, "store_unavailable")
        }
        Feedback::Invalid(_) => (StatusCode::UNPROCESSABLE_ENTITY, "invalid"),
        Feedback::StepUp(_) => (StatusCode::FORBIDDEN, crate::wire::error::STEP_UP_REQUIRED),
        _ => (StatusCode::FORBIDDEN, "refused"),
    };
    tracing::warn!(via = CHANNEL, interaction = %id, code, "ntfy action refused: {}", message.escape_debug());
    ApiError::new(status, code, message)
}
