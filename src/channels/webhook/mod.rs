//! Webhook integrations: signed lifecycle events out, signed answers in.
//!
//! Outbound: each `[[webhooks]]` target receives `interaction.created` and
//! `interaction.resolved` events (filtered by event, session and agent), signed with the
//! Standard Webhooks scheme and delivered through the outbox: at least once, retried with
//! jittered exponential backoff until the target's horizon, surviving restarts. Each target is
//! its own outbox channel (`webhook:<name>`), so a slow or dead target never delays another.
//! A `410 Gone` disables the target until its URL changes.
//!
//! Inbound: `POST /v1/webhooks/{name}/respond` takes an answer signed with that target's
//! secret (timestamps within 5 minutes, `webhook-id`s never replayed) and records it with
//! `via = "webhook:<name>"`, so a system that cannot hold an operator token can answer.

mod doctor;
pub(crate) mod settings;
// Public on purpose: the integration tests sign and verify deliveries with it.
pub mod signature;

pub use settings::{WebhookEvent, WebhookSettings, validate_all};

use std::borrow::Cow;
use std::collections::{HashMap, HashSet};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use async_trait::async_trait;
use axum::Router;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use super::Wiring;
use crate::interaction::{
    Interaction, InteractionId, Kind, Lifecycle, Millis, Registry, RegistryError, Responder,
    ValidationError, Via,
};
use crate::outbox::{ChannelJob, Delivery, OutboxHandler};
use crate::store::{ClaimedJob, OutboxJob, Store};
use crate::sync::RwLockExt;
use crate::wire::answer::{RespondBody, outcome_body, path_id};

/// The channel name people's webhook identities are given under (`webhook = ["ci-bot"]`).
pub const CHANNEL_IDENTITY: &str = "webhook";
use crate::wire::error::ApiError;
use crate::wire::extract::{ApiPath, body_of, declared_size, from_json, from_value};
use signature::{Signed, SigningKey, TOLERANCE_SECS};

struct Target {
    settings: WebhookSettings,
    key: SigningKey,
}

/// The outbox channel name of a target.
fn channel_name(name: &str) -> String {
    format!("webhook:{name}")
}

fn disabled_key(name: &str) -> String {
    format!("webhook.disabled.{name}")
}

fn url_digest(url: &str) -> String {
    hex::encode(Sha256::digest(url.as_bytes()))
}

/// The webhook channel's targets and state: plans and delivers events. (It holds no
/// registry, so registering it as a registry hook makes no reference cycle.)
pub struct Webhooks {
    targets: HashMap<String, Target>,
    /// Targets disabled by a 410 (kept in the store; read synchronously while planning).
    disabled: RwLock<HashSet<String>>,
    store: Arc<dyn Store>,
    client: reqwest::Client,
    public_url: String,
}

/// State of the inbound answer endpoint.
#[derive(Clone)]
struct Inbound {
    hooks: Arc<Webhooks>,
    registry: Registry,
}

impl Webhooks {
    fn is_disabled(&self, name: &str) -> bool {
        self.disabled.reading().contains(name)
    }

    /// The event payload's text: type, timestamp, id, and data with the interaction and links.
    /// Written straight from the interaction (its input as kept, not through a [`Value`]).
    fn payload(&self, target: &str, event: WebhookEvent, i: &Interaction, msg_id: &str) -> String {
        #[derive(Serialize)]
        struct Payload<'a> {
            r#type: &'static str,
            id: &'a str,
            timestamp: Millis,
            data: Data<'a>,
        }
        #[derive(Serialize)]
        struct Data<'a> {
            interaction: &'a Interaction,
            resolution: &'a Option<Box<crate::interaction::Resolution>>,
            respond_url: String,
            interaction_url: String,
            /// An approval's tool call as a person reads it (a command, a diff).
            #[serde(skip_serializing_if = "Option::is_none")]
            display: Option<Display>,
        }
        #[derive(Serialize)]
        struct Display {
            summary: String,
            text: String,
        }
        let at = match (event, &i.resolution) {
            (WebhookEvent::Resolved, Some(r)) => r.at,
            _ => i.created_at,
        };
        let payload = Payload {
            r#type: event.name(),
            id: msg_id,
            timestamp: Millis(at),
            data: Data {
                interaction: i,
                resolution: &i.resolution,
                respond_url: format!("{}/v1/webhooks/{target}/respond", self.public_url),
                interaction_url: format!("{}/v1/interactions/{}", self.public_url, i.id),
                display: (i.kind == Kind::Approval).then(|| {
                    let shown = crate::present::present(
                        &i.tool_name,
                        &i.input.map(),
                        i.cwd.as_deref(),
                        crate::present::Budget::ALL,
                    );
                    Display {
                        text: shown.plain_text(),
                        summary: shown.summary,
                    }
                }),
            },
        };
        // Plain data always serializes.
        serde_json::to_string(&payload).unwrap_or_default()
    }

    fn plan(&self, event: WebhookEvent, i: &Interaction, jobs: &mut Vec<OutboxJob>) {
        for (name, t) in &self.targets {
            if !t.settings.wants(event, i) || self.is_disabled(name) {
                continue;
            }
            // A routed interaction goes to its route's webhooks only, and, once escalated,
            // its resolution to those it escalated to as well.
            if let Some(stamp) = i.route.as_deref()
                && let Some(mut to) = stamp.addresses(CHANNEL_IDENTITY)
                && !to.any(|n| n == name.as_str())
                && !(event == WebhookEvent::Resolved
                    && i.escalated_at.is_some()
                    && stamp
                        .escalation_addresses(CHANNEL_IDENTITY)
                        .contains(&name.as_str()))
            {
                continue;
            }
            self.plan_one(name, t, event, i, jobs);
        }
    }

    /// An escalated interaction, as `interaction.created` (it is new to them, and carries
    /// `escalated_at`), to the webhooks its route escalates to.
    fn plan_escalated(&self, i: &Interaction, jobs: &mut Vec<OutboxJob>) {
        let Some(stamp) = i.route.as_deref() else {
            return;
        };
        for name in stamp.escalation_addresses(CHANNEL_IDENTITY) {
            if let Some((name, t)) = self.targets.get_key_value(name)
                && t.settings.wants(WebhookEvent::Created, i)
                && !self.is_disabled(name)
            {
                self.plan_one(name, t, WebhookEvent::Created, i, jobs);
            }
        }
    }

    /// The delivery of `event` about `i` to target `name`.
    fn plan_one(
        &self,
        name: &str,
        t: &Target,
        event: WebhookEvent,
        i: &Interaction,
        jobs: &mut Vec<OutboxJob>,
    ) {
        // The creation time tells apart two interactions that had the same id (an id
        // can be used again once the first one was pruned).
        let incarnation = format!("{}:{}", event.name(), i.incarnation());
        let msg_id = format!(
            "msg_{}",
            &hex::encode(Sha256::digest(incarnation.as_bytes()))[..32]
        );
        let body = self.payload(name, event, i, &msg_id);
        let now = crate::interaction::now();
        let horizon = Duration::from_secs(t.settings.horizon_hours.saturating_mul(3600));
        let job = Job {
            kind: event,
            target: name.to_string(),
            msg_id,
            body,
        };
        // Keyed `webhook:<target>:<event>:<incarnation>`.
        jobs.push(job.plan(i, &[], now, crate::interaction::after(now, horizon)));
    }

    async fn disable(&self, name: &str, url: &str, reason: &str) {
        tracing::error!(
            webhook = name,
            reason,
            "webhook target disabled; change its url to enable it again"
        );
        self.disabled.writing().insert(name.to_string());
        let value = json!({"url_sha256": url_digest(url), "reason": reason, "at": Millis(crate::interaction::now())});
        if let Err(e) = self
            .store
            .set_value(&disabled_key(name), Some(value.to_string()))
            .await
        {
            tracing::error!(webhook = name, error = %e, "could not record that the target is disabled");
        }
    }
}

/// One delivery to one target: the signed event, in the target's own outbox queue.
#[derive(Debug, PartialEq, Serialize, Deserialize)]
struct Job {
    /// The event delivered: the job's kind.
    kind: WebhookEvent,
    /// The target's name.
    target: String,
    /// The event's `webhook-id`, the same on every attempt so the target can deduplicate.
    msg_id: String,
    /// The event's JSON text, fixed when it was planned: what is signed and sent.
    body: String,
}

impl ChannelJob for Job {
    fn channel(&self) -> Cow<'static, str> {
        channel_name(&self.target).into()
    }
}

/// Plans each target's deliveries inside the registry's transactions.
struct Planner(Arc<Webhooks>);

impl Lifecycle for Planner {
    fn plan_created(&self, i: &Interaction, jobs: &mut Vec<OutboxJob>) {
        self.0.plan(WebhookEvent::Created, i, jobs);
    }

    fn plan_resolved(&self, i: &Interaction, jobs: &mut Vec<OutboxJob>) {
        self.0.plan(WebhookEvent::Resolved, i, jobs);
    }

    fn plan_escalated(&self, i: &Interaction, jobs: &mut Vec<OutboxJob>) {
        self.0.plan_escalated(i, jobs);
    }
}

/// Delivers the jobs of one target.
struct Deliverer {
    hooks: Arc<Webhooks>,
    name: String,
}

fn retry_after(headers: &reqwest::header::HeaderMap) -> Option<Duration> {
    headers
        .get(reqwest::header::RETRY_AFTER)?
        .to_str()
        .ok()?
        .trim()
        .parse::<u64>()
        .ok()
        .map(|s| Duration::from_secs(s.min(3600)))
}

#[async_trait]
impl OutboxHandler for Deliverer {
    async fn deliver(&self, job: &ClaimedJob) -> Delivery {
        let Some(target) = self.hooks.targets.get(&self.name) else {
            return Delivery::Failed(format!("webhook {} is no longer configured", self.name));
        };
        if self.hooks.is_disabled(&self.name) {
            return Delivery::Failed(format!(
                "webhook {} is disabled (it answered 410 Gone)",
                self.name
            ));
        }
        let Job { msg_id, body, .. } = match Job::read(&job.job) {
            Ok(j) => j,
            Err(unreadable) => return unreadable,
        };
        let ts = jiff::Timestamp::now().as_second();
        let signature = target.key.sign(&msg_id, ts, body.as_bytes());
        let sent = self
            .hooks
            .client
            .post(&target.settings.url)
            .timeout(Duration::from_secs(target.settings.timeout_secs))
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .header("webhook-id", &msg_id)
            .header("webhook-timestamp", ts.to_string())
            .header("webhook-signature", signature)
            .body(body)
            .send()
            .await;
        match sent {
            Ok(r) if r.status().is_success() => Delivery::Done,
            Ok(r) if r.status() == reqwest::StatusCode::GONE => {
                self.hooks
                    .disable(
                        &self.name,
                        &target.settings.url,
                        "the target answered 410 Gone",
                    )
                    .await;
                Delivery::Failed("410 Gone: target disabled".into())
            }
            Ok(r) => Delivery::Retry {
                after: retry_after(r.headers()),
                error: format!("HTTP {}", r.status()),
            },
            Err(e) => Delivery::Retry {
                after: None,
                error: if e.is_timeout() {
                    format!("timed out after {} s", target.settings.timeout_secs)
                } else {
                    format!("request failed: {e}")
                },
            },
        }
    }
}

/// Installs the webhook channel when targets are configured.
pub async fn install(w: &mut Wiring, configured: &[WebhookSettings]) -> anyhow::Result<()> {
    if configured.is_empty() {
        return Ok(());
    }
    let mut targets = HashMap::new();
    let mut disabled = HashSet::new();
    for s in configured {
        let key = SigningKey::parse(s.secret.expose())
            .map_err(|e| anyhow::anyhow!("webhooks.{}: {e}", s.name))?;
        if let Some(v) = w.store.get_value(&disabled_key(&s.name)).await? {
            let same_url = serde_json::from_str::<Value>(&v)
                .ok()
                .and_then(|v| v["url_sha256"].as_str().map(str::to_string))
                .is_some_and(|d| d == url_digest(&s.url));
            if same_url {
                tracing::warn!(webhook = %s.name, "webhook target is disabled (it answered 410 Gone); change its url to enable it again");
                disabled.insert(s.name.clone());
            } else {
                w.store.set_value(&disabled_key(&s.name), None).await?;
            }
        }
        targets.insert(
            s.name.clone(),
            Target {
                settings: s.clone(),
                key,
            },
        );
    }
    let client = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .user_agent(format!("imrelay/{}", env!("CARGO_PKG_VERSION")))
        .build()?;
    let hooks = Arc::new(Webhooks {
        targets,
        disabled: RwLock::new(disabled),
        store: w.store.clone(),
        client,
        public_url: w.server.public_url.clone(),
    });
    for name in hooks.targets.keys() {
        w.outbox.register(
            &channel_name(name),
            Arc::new(Deliverer {
                hooks: hooks.clone(),
                name: name.clone(),
            }),
        );
    }
    w.registry.add_hook(Arc::new(Planner(hooks.clone())));
    w.route(
        Router::new()
            .route("/v1/webhooks/{name}/respond", post(respond))
            .with_state(Inbound {
                hooks: hooks.clone(),
                registry: w.registry.clone(),
            }),
    );
    tracing::info!(targets = hooks.targets.len(), "webhooks enabled");
    Ok(())
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
    let body = match verified {
        Ok(body) => body,
        Err(e) => {
            registry
                .refused(
                    None,
                    &bounded(msg_id.unwrap_or("")),
                    &via,
                    &format!("bad signature: {e}"),
                )
                .await;
            // Refused on its headers, the body was never read: close the connection.
            return Err(ApiError::new(
                StatusCode::UNAUTHORIZED,
                "invalid_signature",
                e.to_string(),
            )
            .closing());
        }
    };
    let msg_id = msg_id.unwrap_or_default();
    // Check the whole request before using up its webhook-id: a sender whose request was
    // refused for its body can fix it and retry under the same id.
    let (id, by, answer) = parse_answer(&body, &via)?;
    let scope = format!("webhook-in:{name}");
    let expires = jiff::Timestamp::now() + jiff::SignedDuration::from_secs(2 * TOLERANCE_SECS);
    if !hooks.store.first_sighting(&scope, msg_id, expires).await? {
        registry
            .refused(None, &bounded(msg_id), &via, "replayed webhook-id")
            .await;
        return Err(ApiError::new(
            StatusCode::CONFLICT,
            "replayed",
            format!(
                "webhook-id {:?} was already used; sign each answer with a fresh id",
                bounded(msg_id)
            ),
        ));
    }
    // A sender name is who the signed answer says it is: a person with that webhook name is
    // recorded by their name.
    let identity = by
        .clone()
        .map(|b| crate::interaction::people::Identity::new(CHANNEL_IDENTITY, b));
    let responder = Responder {
        by,
        via,
        actor_id: None,
        identity,
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

/// The interaction id, `by` and answer of an inbound request body.
fn parse_answer(
    body: &[u8],
    via: &Via,
) -> Result<(InteractionId, Option<String>, crate::interaction::Answer), ApiError> {
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

/// The `[[webhooks]]` targets in the channel registry: enabled when any is configured.
impl crate::channels::Channel for Vec<WebhookSettings> {
    fn enabled(&self) -> bool {
        !self.is_empty()
    }

    fn validate(&self) -> Result<(), String> {
        validate_all(self)
    }

    fn install<'a>(
        &'a self,
        wiring: &'a mut Wiring,
    ) -> crate::channels::registry::BoxFuture<'a, anyhow::Result<()>> {
        Box::pin(install(wiring, self))
    }

    fn doctor<'a>(
        &'a self,
        run: &'a crate::channels::Doctor,
    ) -> crate::channels::registry::BoxFuture<'a, Vec<crate::channels::Check>> {
        Box::pin(doctor::checks(self, run))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_delivery_is_queued_on_its_target_and_reads_back_as_stored() {
        let i = Interaction::pending(
            InteractionId::parse("t1").unwrap(),
            "Bash",
            crate::interaction::Input::default(),
            jiff::Timestamp::from_millisecond(1_700_000_000_000).unwrap(),
            60,
        );
        let job = Job {
            kind: WebhookEvent::Resolved,
            target: "ci".into(),
            msg_id: "msg_1".into(),
            body: "{}".into(),
        };
        let (at, until) = (i.created_at, i.deadline);
        let stored = job.plan(&i, &[], at, until);
        assert_eq!(
            stored.key,
            "webhook:ci:interaction.resolved:t1:1700000000000"
        );
        assert_eq!(
            (stored.channel.as_str(), stored.kind.as_str()),
            ("webhook:ci", "interaction.resolved")
        );
        // The payload is what earlier versions stored, so their queued jobs still deliver.
        assert_eq!(
            stored.payload,
            json!({"target": "ci", "msg_id": "msg_1", "body": "{}"})
        );
        assert_eq!(Job::read(&stored).ok(), Some(job));

        let mut unknown = stored.clone();
        unknown.kind = "interaction.renamed".into();
        assert!(
            matches!(Job::read(&unknown), Err(Delivery::Failed(why)) if why.contains("webhook:ci"))
        );
    }
}
