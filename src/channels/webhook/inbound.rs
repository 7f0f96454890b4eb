//! The webhook channel's answer endpoint, `POST /v1/webhooks/{name}/respond`: an answer
//! signed with that target's secret (timestamps within 5 minutes, `webhook-id`s never
//! replayed), recorded with `via = "webhook:<name>"`.

use std::sync::Arc;

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use serde_json::Value;

use super::signature::{Signed, TOLERANCE_SECS};
use super::{CHANNEL_IDENTITY, Target, Webhooks};
use crate::interaction::{
    Answer, InteractionId, Registry, RegistryError, Responder, ValidationError, Via,
};
use crate::wire::answer::{RespondBody, outcome_body, path_id};
use crate::wire::error::ApiError;
use crate::wire::extract::{ApiPath, body_of, declared_size, from_json, from_value};

/// State of the inbound answer endpoint.
#[derive(Clone)]
struct Inbound {
    hooks: Arc<Webhooks>,
    registry: Registry,
}

/// The answer endpoint's route.
pub(super) fn router(hooks: Arc<Webhooks>, registry: Registry) -> Router {
    Router::new()
        .route("/v1/webhooks/{name}/respond", post(respond))
        .with_state(Inbound { hooks, registry })
}

fn header<'a>(h: &'a HeaderMap, name: &str) -> Option<&'a str> {
    h.get(name).and_then(|v| v.to_str().ok())
}

/// `POST /v1/webhooks/{name}/respond`: the signature headers are checked (present, well
/// formed, recent) before the body is read, and the signature over the body after.
async fn respond(
    State(Inbound { hooks, registry }): State<Inbound>,
    ApiPath(name): ApiPath<String>,
    req: Request,
) -> Result<Response, ApiError> {
    let Some(target) = hooks.targets.get(&name) else {
        return Err(ApiError::not_found(format!("no webhook named {name:?}")));
    };
    declared_size(&req)?;
    let via = Via::webhook(&name);
    let (msg_id, body) = signed_body(&registry, target, &via, req).await?;
    let msg_id = msg_id.as_str();
    // Check the whole request before using up its webhook-id: a sender whose request was
    // refused for its body can fix it and retry under the same id.
    let (id, by, answer) = parse_answer(&body, &via)?;
    let scope = format!("webhook-in:{name}");
    first_use(&hooks, &registry, &via, &scope, msg_id).await?;
    // A sender name is who the signed answer says it is: a person with that webhook name is
    // recorded by their name.
    let identity = by
        .clone()
        .map(|b| crate::interaction::people::Identity::new(CHANNEL_IDENTITY, b));
    // The secret is the credential: in a vote the webhook is one person, whatever sender
    // the body names.
    let responder = Responder {
        by,
        via,
        actor_id: None,
        identity,
        credential: Some(format!("webhook {name}")),
    };
    match registry.respond(&id, answer, responder).await {
        Ok(resolved) => Ok((StatusCode::OK, axum::Json(outcome_body(&resolved))).into_response()),
        Err(e) => {
            // Not applied, and the sender may retry: an interaction not (yet) known here, or a
            // store that could not record it. Anything else is final for this request.
            if matches!(e, RegistryError::NotFound(_) | RegistryError::Store(_)) {
                release(&hooks, &scope, msg_id).await;
            }
            Err(e.into())
        }
    }
}

/// The request's `webhook-id` and body once its signature checks out; a refusal is
/// recorded, and answered `401` on a closing connection (the body may never have been read).
async fn signed_body(
    registry: &Registry,
    target: &Target,
    via: &Via,
    req: Request,
) -> Result<(String, Bytes), ApiError> {
    let headers = req.headers().clone();
    let msg_id = header(&headers, "webhook-id");
    let verified = match Signed::check(
        msg_id,
        header(&headers, "webhook-timestamp"),
        header(&headers, "webhook-signature"),
        jiff::Timestamp::now().as_second(),
    ) {
        Ok(signed) => {
            let body = body_of(req).await?;
            target.key.verify_body(&signed, &body).map(|()| body)
        }
        Err(e) => Err(e),
    };
    match verified {
        Ok(body) => Ok((msg_id.unwrap_or_default().to_string(), body)),
        Err(e) => {
            registry
                .refused(
                    None,
                    &bounded(msg_id.unwrap_or("")),
                    via,
                    &format!("bad signature: {e}"),
                )
                .await?;
            // Refused on its headers, the body was never read: close the connection.
            Err(
                ApiError::new(StatusCode::UNAUTHORIZED, "invalid_signature", e.to_string())
                    .closing(),
            )
        }
    }
}

/// Uses up a `webhook-id` for `scope`: a replayed one is recorded and refused with `409`.
async fn first_use(
    hooks: &Webhooks,
    registry: &Registry,
    via: &Via,
    scope: &str,
    msg_id: &str,
) -> Result<(), ApiError> {
    let expires = jiff::Timestamp::now() + jiff::SignedDuration::from_secs(2 * TOLERANCE_SECS);
    if hooks.store.first_sighting(scope, msg_id, expires).await? {
        return Ok(());
    }
    registry
        .refused(None, &bounded(msg_id), via, "replayed webhook-id")
        .await?;
    Err(ApiError::new(
        StatusCode::CONFLICT,
        "replayed",
        format!(
            "webhook-id {:?} was already used; sign each answer with a fresh id",
            bounded(msg_id)
        ),
    ))
}

/// The interaction id, `by` and answer of an inbound request body.
fn parse_answer(
    body: &[u8],
    via: &Via,
) -> Result<(InteractionId, Option<String>, Answer), ApiError> {
    let mut value: Value = from_json(body)?;
    let Some(obj) = value.as_object_mut() else {
        return Err(ApiError::bad_request("expected a JSON object"));
    };
    let id = match obj.remove("id") {
        Some(Value::String(s)) => s,
        _ => {
            return Err(
                ValidationError::new("id", "the interaction id (a string) is required").into(),
            );
        }
    };
    if obj.contains_key("via") {
        return Err(ValidationError::new(
            "via",
            format!("answers through this endpoint are recorded as via {via}"),
        )
        .into());
    }
    let mut answer: RespondBody = from_value(value)?;
    if answer.take_grant().is_some() {
        return Err(ValidationError::new(
            "grant",
            "grants are made from the inbox, the terminal, Telegram, Feishu or the API, not by a webhook answer",
        )
        .into());
    }
    let id = path_id(&id)?;
    let by = answer.by();
    Ok((id, by, answer.answer()?))
}

/// Frees a webhook-id whose request was not applied, so the sender's retry is not taken for
/// a replay.
async fn release(hooks: &Webhooks, scope: &str, msg_id: &str) {
    if let Err(e) = hooks.store.forget_sighting(scope, msg_id).await {
        tracing::warn!(error = %e, "could not release a webhook-id; a retry under it will be refused as replayed");
    }
}

/// A header value as recorded in refusals and messages: at most 64 characters.
fn bounded(v: &str) -> String {
    crate::interaction::clip(v, 64)
}
