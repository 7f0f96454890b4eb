//! The HTTP Events/Interactivity endpoint (`slack.transport = "http"`): Slack POSTs clicks and
//! modal submissions (`payload=` form bodies) and Events API callbacks (JSON) to
//! `server.public_url + slack.inbound_path`.
//!
//! Every request is authenticated before anything else is read from it ([`super::verify`]:
//! the v0 signature, five minutes of tolerance, no replays); a refused one is a 401 recorded in
//! the audit trail. The handler's answer goes back within Slack's 3 s; a handler still running
//! then finishes on its own task.

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use serde_json::{Value, json};

use super::inbound::Interactions;
use super::settings::SlackSettings;
use super::verify::Verifier;
use crate::interaction::{Registry, Via};
use crate::wire::error::ApiError;
use crate::wire::extract::ApiBytes;

/// How long a request waits for the handler before it is answered without its payload.
pub const REPLY_BUDGET: Duration = Duration::from_millis(2500);

/// The endpoint's state.
pub struct Endpoint {
    interactions: Arc<Interactions>,
    verifier: Verifier,
    registry: Registry,
    path: String,
}

impl Endpoint {
    /// The endpoint for `settings`, handing payloads to `interactions`.
    pub fn new(
        interactions: Arc<Interactions>,
        settings: &SlackSettings,
        registry: Registry,
    ) -> Self {
        Self {
            interactions,
            verifier: Verifier::new(settings.signing_secret.clone()),
            registry,
            path: settings.events_path.clone(),
        }
    }

    async fn serve(&self, headers: HeaderMap, body: Bytes) -> Result<Response, ApiError> {
        if let Err(e) = self.verifier.verify_request(&headers, &body) {
            self.registry
                .refused(None, "unknown", &Via::new(super::CHANNEL), &e.to_string())
                .await?;
            return Err(ApiError::unauthorized(format!(
                "slack request refused: {e}"
            )));
        }
        let form = headers
            .get(axum::http::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|t| t.starts_with("application/x-www-form-urlencoded"));
        if form && let Some(command) = form_urlencoded::parse(&body).find(|(k, _)| k == "command") {
            // A slash command: its fields are the form's.
            let mut payload = serde_json::Map::new();
            payload.insert("command".into(), Value::String(command.1.into_owned()));
            for (k, v) in form_urlencoded::parse(&body) {
                if matches!(&*k, "text" | "user_id" | "channel_id") {
                    payload.insert(k.into_owned(), Value::String(v.into_owned()));
                }
            }
            let reply = self.interactions.slash(&Value::Object(payload)).await;
            return Ok(axum::Json(reply).into_response());
        }
        if form {
            let payload = form_urlencoded::parse(&body)
                .find(|(k, _)| k == "payload")
                .map(|(_, v)| v.into_owned())
                .ok_or_else(|| ApiError::bad_request("the form has no payload field"))?;
            let payload: Value = serde_json::from_str(&payload)
                .map_err(|e| ApiError::bad_request(format!("the payload is not JSON: {e}")))?;
            let interactions = self.interactions.clone();
            // On a task of its own: a click is handled to the end even when Slack stops
            // waiting.
            let task = tokio::spawn(async move { interactions.payload(&payload).await });
            let reply = match tokio::time::timeout(REPLY_BUDGET, task).await {
                Ok(Ok(Some(reply))) => axum::Json(reply).into_response(),
                Ok(_) => StatusCode::OK.into_response(),
                Err(_) => {
                    tracing::warn!(
                        "slack: an interaction is taking longer than Slack waits; it is still being handled"
                    );
                    StatusCode::OK.into_response()
                }
            };
            return Ok(reply);
        }
        let event: Value = serde_json::from_slice(&body)
            .map_err(|e| ApiError::bad_request(format!("malformed JSON: {e}")))?;
        if event["type"] == "url_verification" {
            tracing::info!("slack: answered the request URL verification");
            return Ok(axum::Json(json!({"challenge": event["challenge"]})).into_response());
        }
        if event["type"] == "event_callback" {
            // Off the acknowledgement's path: Slack waits 3 s at most.
            let interactions = self.interactions.clone();
            tokio::spawn(async move { interactions.event(&event).await });
        }
        // Events imrelay did not subscribe to are acknowledged and dropped.
        Ok(StatusCode::OK.into_response())
    }
}

/// The router serving `slack.inbound_path`.
pub fn router(endpoint: Arc<Endpoint>) -> Router {
    let path = endpoint.path.clone();
    Router::new().route(&path, post(serve)).with_state(endpoint)
}

async fn serve(
    State(e): State<Arc<Endpoint>>,
    headers: HeaderMap,
    ApiBytes(body): ApiBytes,
) -> Response {
    match e.serve(headers, body).await {
        Ok(r) => r,
        Err(e) => e.into_response(),
    }
}
