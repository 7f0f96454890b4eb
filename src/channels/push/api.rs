//! The channel's endpoints.
//!
//! For the inbox and `imrelay devices`, behind the operator-token check:
//! - `GET /v1/push`: the server's VAPID public key (what a browser subscribes with) and the
//!   caller's devices (every person's for the administrator's token);
//! - `POST /v1/push/devices`: subscribes a device (`endpoint`, `keys.p256dh`, `keys.auth`,
//!   `name`) for the person of the labelled operator token that calls;
//! - `DELETE /v1/push/devices/{id}`: removes one of the caller's devices (any, for the
//!   administrator's token).
//!
//! For the service worker, open (the token is the credential):
//! - `POST /v1/push/{allow|deny}/{token}`: a notification's action, a single-use token bound
//!   to one interaction, one device (so its person) and one action, good until the time it
//!   carries ([`crate::channels::actions`]);
//! - `POST /v1/push/digest/{link}`: a digest notification's action, a single-use link bound
//!   to one device, one digest notification, one action and the members it listed
//!   (`channels::digest_links`).

use crate::channels::words::Words;
use std::sync::Arc;

use axum::Router;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{delete, get, post};
use serde::Deserialize;
use serde_json::{Value, json};

use super::CHANNEL;
use super::deliver::Push;
use super::devices::{self, Device};
use super::settings::PushSettings;
use super::vapid::Vapid;
use crate::channels::actions::{Endpoint, Person};
use crate::channels::messages::Messages;
use crate::interaction::quorum::OPERATOR;
use crate::interaction::{Registry, Responder, Via};
use crate::store::Store;
use crate::wire::Principal;
use crate::wire::error::ApiError;
use crate::wire::extract::{ApiBytes, ApiPath, from_json};

/// What the endpoints share.
#[derive(Clone)]
pub(super) struct Api {
    /// The section.
    pub settings: Arc<PushSettings>,
    /// Devices.
    pub store: Arc<dyn Store>,
    /// People (who a labelled token is).
    pub registry: Registry,
    /// The server's key.
    pub vapid: Vapid,
    /// The actions' endpoint logic.
    pub endpoint: Endpoint,
    /// The delivery skeleton: a digest shown again after a press.
    pub messages: Arc<Messages<Push>>,
}

/// The routes for operators.
pub(super) fn operator_router(api: Api) -> Router {
    Router::new()
        .route("/v1/push", get(overview))
        .route("/v1/push/devices", post(subscribe))
        .route("/v1/push/devices/{id}", delete(unsubscribe))
        .with_state(api)
}

/// The action route.
pub(super) fn action_router(api: Api) -> Router {
    Router::new()
        .route("/v1/push/{action}/{token}", post(act))
        .with_state(api)
}

/// A device as the API shows it (never its keys).
fn shown(d: &Device) -> Value {
    json!({
        "id": d.id,
        "person": d.person,
        "label": d.label,
        "name": d.name,
        "endpoint_host": url::Url::parse(&d.endpoint).ok().and_then(|u| u.host_str().map(str::to_string)),
        "created_at": d.created_at.to_string(),
    })
}

/// The person a labelled token answers as (their `[[people]]` name, else the label).
fn person_of(registry: &Registry, label: &str) -> String {
    let r = Responder::new(label, Via::new(CHANNEL)).with_identity(OPERATOR, label);
    registry
        .attribute(r)
        .by
        .unwrap_or_else(|| label.to_string())
}

/// `GET /v1/push`
async fn overview(State(api): State<Api>, principal: Principal) -> Result<Response, ApiError> {
    let person = principal.label().map(|l| person_of(&api.registry, l));
    let list = devices::list(api.store.as_ref(), person.as_deref()).await?;
    Ok(axum::Json(json!({
        "public_key": api.vapid.public_key(),
        "person": person,
        "admin": principal.label().is_none(),
        "devices": list.iter().map(shown).collect::<Vec<_>>(),
    }))
    .into_response())
}

/// The body of `POST /v1/push/devices`: the browser's `PushSubscription` as JSON, and a name.
#[derive(Deserialize)]
struct Subscribe {
    endpoint: String,
    keys: Keys,
    #[serde(default)]
    name: String,
}

#[derive(Deserialize)]
struct Keys {
    p256dh: String,
    auth: String,
}

/// `POST /v1/push/devices`
async fn subscribe(
    State(api): State<Api>,
    principal: Principal,
    ApiBytes(body): ApiBytes,
) -> Result<Response, ApiError> {
    let Some(label) = principal.label() else {
        return Err(ApiError::new(
            StatusCode::BAD_REQUEST,
            "needs_a_person",
            "a device notifies one person: subscribe with an operator token that has a label \
             (auth.operator_tokens = [{ token = \"...\", label = \"alice-phone\" }], and \
             [[people]] operator = [\"alice-phone\"]), not the administrator's",
        ));
    };
    let s: Subscribe = from_json(&body)?;
    let name = s.name.trim();
    if let Err(e) = devices::check(&s.endpoint, &s.keys.p256dh, &s.keys.auth, name) {
        return Err(
            ApiError::new(StatusCode::BAD_REQUEST, "invalid", e.to_string())
                .with("field", e.field()),
        );
    }
    let device = Device {
        id: devices::id_of(&s.endpoint),
        person: person_of(&api.registry, label),
        label: Some(label.to_string()),
        name: if name.is_empty() {
            "a device".into()
        } else {
            name.to_string()
        },
        endpoint: s.endpoint,
        p256dh: s.keys.p256dh,
        auth: s.keys.auth,
        created_at: jiff::Timestamp::now(),
    };
    let removed = devices::add(
        api.store.as_ref(),
        &device,
        api.settings.max_devices_per_person,
    )
    .await?;
    tracing::info!(device = %device.id, person = %device.person.escape_debug(), removed = removed.len(), "push: a device subscribed");
    Ok((
        StatusCode::CREATED,
        axum::Json(json!({
            "device": shown(&device),
            "removed": removed.iter().map(shown).collect::<Vec<_>>(),
        })),
    )
        .into_response())
}

/// `DELETE /v1/push/devices/{id}`
async fn unsubscribe(
    State(api): State<Api>,
    principal: Principal,
    ApiPath(id): ApiPath<String>,
) -> Result<Response, ApiError> {
    let found = devices::get(api.store.as_ref(), &id).await?;
    let mine = |d: &Device| match principal.label() {
        None => true,
        Some(l) => d.person == person_of(&api.registry, l),
    };
    match found {
        Some(d) if mine(&d) => {
            devices::remove(api.store.as_ref(), &d.id).await?;
            tracing::info!(device = %d.id, person = %d.person.escape_debug(), "push: a device was removed");
            Ok(StatusCode::NO_CONTENT.into_response())
        }
        Some(_) => Err(ApiError::new(
            StatusCode::FORBIDDEN,
            "not_yours",
            "this device is another person's: only they or the administrator's token remove it",
        )),
        None => Err(ApiError::not_found(format!("no device {id:?}"))),
    }
}

/// `POST /v1/push/{action}/{token}`
async fn act(
    State(api): State<Api>,
    ApiPath((action, token)): ApiPath<(String, String)>,
) -> Result<Response, ApiError> {
    let e = &api.endpoint;
    if action == "digest" {
        return digest(&api, &token).await;
    }
    let (redeemed, fields) = e.find("a push action", &action, &token, 2).await?;
    let (until, device) = (fields[0], fields[1]);
    let Some(d) = devices::get(api.store.as_ref(), device).await? else {
        let status = (StatusCode::FORBIDDEN, "device_removed");
        let id = Some(&redeemed.id);
        return Err(e
            .refuse("a push action", id, status, Words::device_removed)
            .await);
    };
    let Some(label) = d.label.clone() else {
        let status = (StatusCode::FORBIDDEN, "refused");
        let id = Some(&redeemed.id);
        return Err(e
            .refuse("a push action", id, status, Words::device_without_person)
            .await);
    };
    let person = Person {
        name: d.person.clone(),
        identity: label,
    };
    if until
        .parse::<i64>()
        .is_ok_and(|u| jiff::Timestamp::now().as_second() > u)
    {
        let actor = format!("{} ({OPERATOR}:{})", person.name, person.identity);
        let status = (StatusCode::GONE, "expired");
        return Err(e
            .refuse(&actor, Some(&redeemed.id), status, Words::buttons_expired)
            .await);
    }
    e.answer(&redeemed, &person).await
}

/// `POST /v1/push/digest/{link}`: a digest notification's action, answered as the person of
/// the device the link was pushed to (a link names its device, and cannot be changed).
async fn digest(api: &Api, link: &str) -> Result<Response, ApiError> {
    let e = &api.endpoint;
    let links = &api.messages.platform.links;
    let read = links.read(link);
    let device = match &read {
        Some(l) => devices::get(api.store.as_ref(), &l.address).await?,
        // Refused as not valid by the kit, recorded as from an unknown device.
        None => None,
    };
    let person = match device {
        Some(Device {
            person,
            label: Some(label),
            ..
        }) => Person {
            name: person,
            identity: label,
        },
        Some(_) => {
            let status = (StatusCode::FORBIDDEN, "refused");
            return Err(e
                .refuse("a push action", None, status, Words::device_without_person)
                .await);
        }
        None if read.is_some() => {
            let status = (StatusCode::FORBIDDEN, "device_removed");
            return Err(e
                .refuse("a push action", None, status, Words::device_removed)
                .await);
        }
        None => Person {
            name: "a push action".into(),
            identity: String::new(),
        },
    };
    e.digest(&api.messages, links, link, &person).await
}
