//! Card clicks: the one handler that turns a `card.action.trigger` into an answer (shared by
//! the webhook endpoint and the long connection), and the webhook endpoint itself
//! (`url_verification`, decryption, the `X-Lark-Signature` and Verification Token checks).
//!
//! The handler makes no network calls: a store write for the deduplication key, a read to
//! check the card shows the interaction that now has its id, and a write for the answer. It runs on a task of its own, so a click is always handled to the end even when
//! the platform stops waiting or drops the connection. Its reply carries a toast and, when the
//! interaction is resolved, the resolved card that replaces the clicked one at once. A click
//! delivered again gets the same reply as the first delivery.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use serde_json::{Map, Value, json};
use tokio::sync::watch;

use super::CHANNEL;
use super::render::{self, Action, Cards, other_field, select_field};
use super::settings::FeishuSettings;
use super::{button, crypto};
use crate::channels::pipeline::{Decision, Feedback, Pipeline, ResultLabels, Tap, replayed};
use crate::interaction::{
    Answer, Form, Interaction, InteractionId, Kind, Outcome, Question, Registry, Responder, Teams,
    Via, parse_questions,
};
use crate::store::Store;
use crate::sync::LockExt;
use crate::wire::error::ApiError;
use crate::wire::extract::ApiBytes;

/// The event type of a card click.
pub(crate) const CARD_ACTION: &str = "card.action.trigger";
/// The event type of a message to the bot (`whoami`).
pub(crate) const MESSAGE_RECEIVED: &str = "im.message.receive_v1";
/// How far a signed request's timestamp may be from now, seconds.
pub(crate) const MAX_SKEW_SECS: u64 = 300;
/// How long a caller waits for a click's reply: well inside the platform's 3-second window.
pub(crate) const REPLY_BUDGET: Duration = Duration::from_millis(2500);
/// How long event ids are remembered for deduplication.
const DEDUPE_HOURS: i64 = 24;
/// The deduplication scope in the store.
const DEDUPE_SCOPE: &str = "feishu-event";

/// Where a callback came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Source {
    /// The webhook endpoint (already decrypted and authenticated).
    Webhook,
    /// The long connection (authenticated by the app credentials it was opened with).
    LongConnection,
}

/// Who clicked a card, as [`Callbacks::click`] sees them.
pub(super) struct Operator<'a> {
    /// The id refusals are recorded under (`unknown` when the event names none).
    pub actor: &'a str,
    /// The id they answer by, when they may answer.
    pub by: Option<&'a str>,
    /// Whether they are on `feishu.approvers`.
    pub approver: bool,
}

/// Handles card clicks. Cheap to share.
pub(crate) struct Callbacks {
    pub(super) registry: Registry,
    pub(super) pipeline: Pipeline,
    pub(super) store: Arc<dyn Store>,
    pub(super) settings: Arc<FeishuSettings>,
    pub(super) cards: Cards,
    secret: Vec<u8>,
    /// The digests of sessions with many interactions pending (`feishu.digest_after`).
    pub(super) digests: crate::channels::digest::Digests,
    // Clicks being handled, by event id, with where their reply will appear. A std mutex:
    // never held across an await.
    running: Mutex<HashMap<String, watch::Receiver<Option<Value>>>>,
    /// Answers `whoami` and `/sessions`, when set.
    pub(super) api: Option<Arc<super::api::OpenApi>>,
}

impl Callbacks {
    /// A handler answering for `registry` with the button secret `secret`.
    pub(crate) fn new(
        registry: Registry,
        store: Arc<dyn Store>,
        settings: Arc<FeishuSettings>,
        cards: Cards,
        secret: Vec<u8>,
        digests: crate::channels::digest::Digests,
    ) -> Self {
        Self {
            digests,
            pipeline: Pipeline::new(registry.clone(), Via::new(super::CHANNEL)),
            registry,
            store,
            settings,
            cards,
            secret,
            running: Mutex::new(HashMap::new()),
            api: None,
        }
    }

    /// Answers `whoami` and `/sessions` through `api`.
    pub(crate) fn with_api(mut self, api: Arc<super::api::OpenApi>) -> Self {
        self.api = Some(api);
        self
    }

    /// The per-result counter, for registration with the server's metrics.
    pub(crate) fn results_metric(&self) -> Family<ResultLabels, Counter> {
        self.pipeline.results_metric()
    }

    pub(super) fn count(&self, result: &str) {
        self.pipeline.count(result);
    }

    /// Handles one decrypted, authenticated event envelope and returns the reply body, within
    /// `REPLY_BUDGET`.
    ///
    /// The work runs on a task of its own, so it is finished even if the caller goes away (a
    /// timed-out acknowledgement, a dropped HTTP connection). A delivery of an event that is
    /// still being handled waits for the same reply; a delivery after it finished is handled
    /// again, which the registry makes harmless: see `Callbacks::click`.
    pub(crate) async fn handle(self: &Arc<Self>, envelope: Value, source: Source) -> Value {
        let header = &envelope["header"];
        let event_type = header["event_type"].as_str().unwrap_or_default();
        if envelope["schema"].as_str() == Some("2.0") && event_type == MESSAGE_RECEIVED {
            return self.message(&envelope);
        }
        if envelope["schema"].as_str() != Some("2.0") || event_type != CARD_ACTION {
            tracing::debug!(
                event_type,
                ?source,
                "feishu: ignoring an event that is not a card click"
            );
            self.count("ignored");
            return json!({});
        }
        let Some(event_id) = header["event_id"]
            .as_str()
            .filter(|e| !e.is_empty())
            .map(str::to_string)
        else {
            tracing::warn!(?source, "feishu: a card click without an event_id; ignored");
            self.count("ignored");
            return json!({});
        };
        let mut reply = self.start(event_id.clone(), envelope, source);
        match tokio::time::timeout(REPLY_BUDGET, reply.wait_for(Option::is_some)).await {
            Ok(Ok(done)) => done.clone().unwrap_or_default(),
            Ok(Err(_)) => {
                // The task ended without a reply: it panicked (and was logged).
                self.count("error");
                self.reply(Feedback::StoreDown).0
            }
            Err(_) => {
                tracing::warn!(
                    event_id,
                    ?source,
                    "feishu: a card click is taking longer than the platform waits; it is still being handled"
                );
                self.count("slow");
                self.reply(Feedback::StillWorking).0
            }
        }
    }

    /// The reply to event `event_id` once it is known: joins the task already handling it, or
    /// starts one.
    fn start(
        self: &Arc<Self>,
        event_id: String,
        envelope: Value,
        source: Source,
    ) -> watch::Receiver<Option<Value>> {
        let mut running = self.running();
        if let Some(reply) = running.get(&event_id) {
            tracing::info!(
                event_id,
                ?source,
                "feishu: a card click delivered again while the first delivery is being handled; both get its reply"
            );
            self.count("duplicate");
            return reply.clone();
        }
        let (tx, rx) = watch::channel(None);
        running.insert(event_id.clone(), rx.clone());
        drop(running);
        let this = self.clone();
        tokio::spawn(async move {
            // Forgets the event when the task ends, however it ends.
            let _running = Running {
                callbacks: this.clone(),
                event_id: event_id.clone(),
            };
            let reply = this.process(&envelope, &event_id, source).await;
            tx.send_replace(Some(reply));
        });
        rx
    }

    fn running(
        &self,
    ) -> std::sync::MutexGuard<'_, HashMap<String, watch::Receiver<Option<Value>>>> {
        self.running.locked()
    }

    /// Records the event id, then handles the click.
    async fn process(&self, envelope: &Value, event_id: &str, source: Source) -> Value {
        let again = replayed(&*self.store, DEDUPE_SCOPE, event_id, DEDUPE_HOURS).await;
        if again {
            tracing::info!(
                event_id,
                ?source,
                "feishu: a card click delivered again; answering with its outcome"
            );
        }
        let (reply, result) = self.click(envelope, again).await;
        self.count(if again { "duplicate" } else { result });
        reply
    }

    /// Handles one click; returns the reply and the result to count.
    ///
    /// `again` says the event id was seen before. Handling it again is safe: the registry lets
    /// only the first answer win, and the button's MAC binds it to one interaction and action,
    /// so a repeat can only do what the first delivery was meant to do (and did not, if it was
    /// cut short by a crash). A repeat is not audited again, and the person whose click
    /// resolved the interaction is told so again rather than "already answered".
    async fn click(&self, envelope: &Value, again: bool) -> (Value, &'static str) {
        let event = &envelope["event"];
        let action = &event["action"];
        let teams = self.registry.teams();
        let Operator {
            actor,
            by,
            approver,
        } = self.operator(event, &teams);
        if super::digest::is_digest_value(&action["value"]) {
            let who = super::digest::Clicker {
                by: by.unwrap_or(actor),
                approver,
                again,
            };
            let clicks = super::digest::DigestClicks {
                pipeline: &self.pipeline,
                cards: &self.cards,
                digests: &self.digests,
            };
            return clicks.digest_click(event, who).await;
        }

        let Some((id, created, what)) = self.verify_value(&action["value"]) else {
            return self.forged(action, actor, again).await;
        };
        let tap = Tap {
            id: &id,
            created,
            actor: by.unwrap_or(actor),
            identity: by.unwrap_or(actor),
            approver,
            audit: !again,
        };
        if by.is_some()
            && created.is_none()
            && let Err(gone) = self.card_on_record(&id, event).await
        {
            return self.reply(gone);
        }
        let by = tap.actor;
        // Recorded under a configured person's name, otherwise under the id.
        let shown = teams.people.name_of(CHANNEL, by).unwrap_or(by);
        // The click delivered again that resolved it is told so again, not "already".
        let again_mine = |f: Feedback| match f {
            Feedback::Already(i) if again && answered_by(&i, shown, what) => Feedback::Resolved(i),
            f => f,
        };
        let current = match self.pipeline.admit(&tap, |i| what.fits(i.kind)).await {
            Ok(i) => i,
            Err(stop) => return self.reply(again_mine(stop.feedback)),
        };
        let decision = match self.decision_of(what, action, &current) {
            Ok(d) => d,
            Err(why) => return self.reply(Feedback::Invalid(why)),
        };
        let by = Responder::new(by, self.pipeline.via().clone()).with_identity(CHANNEL, by);
        let feedback = self.pipeline.decide(&current, decision, by).await;
        self.reply(again_mine(feedback))
    }

    /// Who clicked: the id refusals name, and the id they may answer by, if any: an approver's,
    /// or a configured person's (a route naming them lets them answer without being listed).
    pub(super) fn operator<'a>(&self, event: &'a Value, teams: &Teams) -> Operator<'a> {
        let open_id = event["operator"]["open_id"].as_str().unwrap_or_default();
        let user_id = event["operator"]["user_id"].as_str().unwrap_or_default();
        let actor = if !open_id.is_empty() {
            open_id
        } else if !user_id.is_empty() {
            user_id
        } else {
            "unknown"
        };
        let listed = [open_id, user_id]
            .into_iter()
            .find(|who| self.settings.is_approver(who));
        // A configured person may answer a route naming them without being on the list.
        let by = listed.or_else(|| {
            [open_id, user_id]
                .into_iter()
                .find(|who| !who.is_empty() && teams.people.identify(CHANNEL, who).is_some())
        });
        Operator {
            actor,
            by,
            approver: listed.is_some(),
        }
    }

    /// A click whose card data failed its integrity check: refused (once, not again on a
    /// repeat delivery) and told so.
    async fn forged(&self, action: &Value, actor: &str, again: bool) -> (Value, &'static str) {
        let claimed = action["value"]["id"].as_str().unwrap_or("");
        match self
            .pipeline
            .verified(None::<()>, actor, "card data", claimed, !again)
            .await
        {
            Ok(()) | Err(Feedback::BadButton) => self.reply(Feedback::BadButton),
            Err(other) => self.reply(other),
        }
    }

    /// What a verified click means for `current`: its action, with the reason, the edited
    /// command or the answers typed on the card; why not, when those do not fit.
    fn decision_of(
        &self,
        what: Action,
        action: &Value,
        current: &Interaction,
    ) -> Result<Decision, String> {
        Ok(Decision::Answer(match what {
            Action::Allow => Answer::allow(),
            Action::AllowSimilar => return Ok(Decision::AllowSimilar),
            Action::Edit => {
                let command = action["form_value"][render::COMMAND_FIELD]
                    .as_str()
                    .unwrap_or_default();
                return Ok(Decision::Edit(command.to_string()));
            }
            Action::Deny => {
                let reason = action["form_value"][render::REASON_FIELD]
                    .as_str()
                    .map(str::trim)
                    .filter(|r| !r.is_empty())
                    .map(str::to_string);
                Answer::deny(reason)
            }
            Action::Answer => {
                let form = action["form_value"]
                    .as_object()
                    .cloned()
                    .unwrap_or_default();
                if current.kind == Kind::Form {
                    self.content_from_form(current, &form).map(Answer::Accept)?
                } else {
                    self.answers_from_form(current, &form)
                        .map(Answer::Answers)?
                }
            }
        }))
    }

    /// The reply to a click, and the result it is counted under: the feedback's toast, and
    /// the card as the interaction now is when the feedback shows it.
    pub(super) fn reply(&self, feedback: Feedback) -> (Value, &'static str) {
        render::feedback_reply(&self.cards, feedback)
    }

    /// The interaction (id and, on cards that carry it, creation time) and action a button
    /// value names, if its MAC checks out.
    fn verify_value(&self, value: &Value) -> Option<(InteractionId, Option<i64>, Action)> {
        let id = value["id"].as_str()?;
        let created = match value.get("created") {
            Some(c) => Some(c.as_i64()?),
            None => None,
        };
        let action = value["action"].as_str()?;
        let mac = value["mac"].as_str()?;
        if !button::verify_button_tag(&self.secret, id, created, action, mac) {
            return None;
        }
        Some((
            InteractionId::parse(id).ok()?,
            created,
            Action::parse(action)?,
        ))
    }

    /// Whether a card from before buttons carried the creation time shows the interaction that
    /// has `id` now, and not an earlier one that was pruned and whose id was used again: the
    /// clicked card must be on record for it (records are deleted with it). Otherwise the
    /// click is told the request is gone. Newer buttons are checked by their creation time.
    async fn card_on_record(&self, id: &InteractionId, event: &Value) -> Result<(), Feedback> {
        let clicked = event["context"]["open_message_id"]
            .as_str()
            .unwrap_or_default();
        match self.store.messages(super::CHANNEL, id).await {
            Ok(cards) if !clicked.is_empty() && cards.iter().any(|c| c.message_ref == clicked) => {
                Ok(())
            }
            Ok(_) => Err(Feedback::NotFound),
            Err(e) => {
                tracing::error!(error = %e, "feishu: cannot read the cards of an interaction");
                Err(Feedback::StoreDown)
            }
        }
    }

    /// A form's content from a card's `form_value`: each field read as its type (a choice by
    /// its option index, a date from the picker's `2026-11-25 +0800`, a number from its text),
    /// empty inputs left out so they take their defaults. The registry checks the rest.
    fn content_from_form(
        &self,
        i: &Interaction,
        values: &Map<String, Value>,
    ) -> Result<Map<String, Value>, String> {
        use crate::interaction::form::FieldType;
        let form = Form::from_input(&i.input.map()).map_err(|e| e.to_string())?;
        let mut content = Map::new();
        for (n, f) in form.fields.iter().enumerate() {
            let Some(raw) = values.get(&render::field_name(n)) else {
                continue;
            };
            let bad = |e: String| format!("{}: {e}", f.label());
            let pick = |v: &Value| -> Result<Value, String> {
                v.as_str()
                    .and_then(|s| s.parse::<usize>().ok())
                    .and_then(|j| f.options().get(j))
                    .map(|c| Value::String(c.value.clone()))
                    .ok_or_else(|| bad(format!("there is no option {v}")))
            };
            let value = match (&f.ty, raw) {
                (_, Value::Null) => continue,
                (FieldType::Choice { .. }, v) => pick(v)?,
                (FieldType::Multi { .. }, Value::Array(items)) => {
                    Value::Array(items.iter().map(pick).collect::<Result<_, _>>()?)
                }
                (FieldType::Boolean, Value::String(s)) => f.parse_text(s).map_err(bad)?,
                (FieldType::Boolean, Value::Bool(b)) => Value::Bool(*b),
                (
                    FieldType::Text {
                        format: Some(crate::interaction::form::Format::Date),
                        ..
                    },
                    Value::String(s),
                ) => Value::String(s.split_whitespace().next().unwrap_or("").to_string()),
                (FieldType::Text { .. } | FieldType::Number { .. }, Value::String(s)) => {
                    if s.trim().is_empty() {
                        continue;
                    }
                    f.parse_text(s).map_err(bad)?
                }
                (_, other) => other.clone(),
            };
            content.insert(f.name.clone(), value);
        }
        form.accept(&content).map_err(|e| {
            let name = e.field.trim_start_matches("content.");
            let label = form.field(name).map_or(name, |f| f.label());
            format!("{label}: {}", e.message)
        })?;
        Ok(content)
    }

    /// Reads a question form into answers keyed by question index.
    fn answers_from_form(
        &self,
        i: &Interaction,
        form: &Map<String, Value>,
    ) -> Result<Map<String, Value>, String> {
        let questions = parse_questions(&i.input.map()).map_err(|e| e.to_string())?;
        let zh = self.cards.locale() == super::settings::Locale::ZhCn;
        let mut out = Map::new();
        for (n, q) in questions.iter().enumerate() {
            let chosen = chosen_labels(q, form.get(&select_field(n))).map_err(|bad| {
                if zh {
                    format!("「{}」没有选项 {bad}", q.header)
                } else {
                    format!("{}: there is no option {bad}", q.header)
                }
            })?;
            let other = form
                .get(&other_field(n))
                .and_then(Value::as_str)
                .map(str::trim)
                .filter(|o| !o.is_empty())
                .map(str::to_string);
            let value = if q.multi_select {
                let mut all: Vec<Value> = chosen.into_iter().map(Value::String).collect();
                all.extend(other.map(Value::String));
                if all.is_empty() {
                    return Err(if zh {
                        format!("请回答「{}」：选择至少一项或填写其他", q.header)
                    } else {
                        format!("{}: choose at least one option or type an answer", q.header)
                    });
                }
                Value::Array(all)
            } else {
                match (chosen.into_iter().next(), other) {
                    (Some(label), None) => Value::String(label),
                    (None, Some(text)) => Value::String(text),
                    (Some(_), Some(_)) => {
                        return Err(if zh {
                            format!("「{}」只能选择一项或填写其他，不能同时提交", q.header)
                        } else {
                            format!("{}: choose an option or type an answer, not both", q.header)
                        });
                    }
                    (None, None) => {
                        return Err(if zh {
                            format!("请回答「{}」：选择一项或填写其他", q.header)
                        } else {
                            format!("{}: choose an option or type an answer", q.header)
                        });
                    }
                }
            };
            out.insert(n.to_string(), value);
        }
        Ok(out)
    }
}

/// Whether `i` was resolved through Feishu by `by` with the outcome `what` asks for: the
/// click being delivered again is the one that resolved it.
fn answered_by(i: &Interaction, by: &str, what: Action) -> bool {
    i.resolution.as_ref().is_some_and(|r| {
        r.via == Via::new(super::CHANNEL)
            && r.by.as_deref() == Some(by)
            && matches!(
                (what, r.outcome),
                (
                    Action::Allow | Action::AllowSimilar | Action::Edit,
                    Outcome::Allowed
                ) | (Action::Deny, Outcome::Denied)
                    | (Action::Answer, Outcome::Answered)
            )
    })
}

/// Removes an event from the running set when its task ends.
struct Running {
    callbacks: Arc<Callbacks>,
    event_id: String,
}

impl Drop for Running {
    fn drop(&mut self) {
        self.callbacks.running().remove(&self.event_id);
    }
}

/// The labels a select field chose (its values are option indexes); `Err` names a value that
/// is no option.
fn chosen_labels(q: &Question, v: Option<&Value>) -> Result<Vec<String>, String> {
    let raw: Vec<&str> = match v {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::String(s)) if s.is_empty() => Vec::new(),
        Some(Value::String(s)) => vec![s.as_str()],
        Some(Value::Array(items)) => items.iter().filter_map(Value::as_str).collect(),
        Some(other) => return Err(other.to_string()),
    };
    raw.into_iter()
        .map(|s| {
            s.parse::<usize>()
                .ok()
                .and_then(|j| q.options.get(j))
                .map(|o| o.label.clone())
                .ok_or_else(|| format!("{s:?}"))
        })
        .collect()
}

/// The webhook endpoint's state.
pub(crate) struct Webhook {
    /// The shared click handler.
    pub callbacks: Arc<Callbacks>,
    /// The channel's settings (tokens and keys).
    pub settings: Arc<FeishuSettings>,
    /// For the audit trail of refused requests.
    pub registry: Registry,
}

/// The router serving `settings.callback_path`.
pub(crate) fn router(webhook: Arc<Webhook>) -> Router {
    let path = webhook.settings.callback_path.clone();
    Router::new()
        .route(&path, post(endpoint))
        .with_state(webhook)
}

fn header<'a>(h: &'a HeaderMap, name: &str) -> Option<&'a str> {
    h.get(name).and_then(|v| v.to_str().ok())
}

impl Webhook {
    async fn refuse(&self, reason: &str) -> ApiError {
        match self
            .registry
            .refused(None, "unknown", &Via::new(super::CHANNEL), reason)
            .await
        {
            Ok(()) => ApiError::unauthorized(format!("feishu callback refused: {reason}")),
            Err(e) => e.into(),
        }
    }

    /// Checks the signature headers of a request against its raw body.
    async fn check_signature(&self, headers: &HeaderMap, body: &[u8]) -> Result<(), ApiError> {
        let key = self.settings.encrypt_key.expose();
        let (Some(ts), Some(nonce), Some(sig)) = (
            header(headers, "x-lark-request-timestamp"),
            header(headers, "x-lark-request-nonce"),
            header(headers, "x-lark-signature"),
        ) else {
            return Err(self
                .refuse("the X-Lark-Signature headers are missing")
                .await);
        };
        if !crypto::verify_signature(ts, nonce, key, body, sig) {
            return Err(self.refuse("the X-Lark-Signature does not match").await);
        }
        let Ok(sent) = ts.trim().parse::<i64>() else {
            return Err(self
                .refuse("the X-Lark-Request-Timestamp is not a number")
                .await);
        };
        if jiff::Timestamp::now().as_second().abs_diff(sent) > MAX_SKEW_SECS {
            return Err(self
                .refuse("the request timestamp is stale (more than 5 minutes from now): a replay or a wrong clock")
                .await);
        }
        Ok(())
    }

    async fn check_token(&self, given: Option<&str>) -> Result<(), ApiError> {
        let expected = self.settings.verification_token.expose();
        match given {
            Some(t) if crypto::ct_eq_str(expected, t) => Ok(()),
            _ => Err(self.refuse("the verification token does not match").await),
        }
    }

    async fn serve(&self, headers: HeaderMap, body: Bytes) -> Result<Response, ApiError> {
        let outer: Value = serde_json::from_slice(&body)
            .map_err(|e| ApiError::bad_request(format!("malformed JSON: {e}")))?;
        let key = self.settings.encrypt_key.expose();
        let signed = header(&headers, "x-lark-signature").is_some();
        let payload: Value = if key.is_empty() {
            if outer.get("encrypt").is_some() {
                return Err(ApiError::bad_request(
                    "the body is encrypted but feishu.encrypt_key is not set",
                ));
            }
            outer
        } else {
            if signed {
                // Authenticate before doing any work on the body.
                self.check_signature(&headers, &body).await?;
            }
            let Some(encrypted) = outer.get("encrypt").and_then(Value::as_str) else {
                return Err(ApiError::bad_request(
                    "expected an encrypted body ({\"encrypt\": ...}) because feishu.encrypt_key is set",
                ));
            };
            let plain = match crypto::decrypt(key, encrypted) {
                Ok(p) => p,
                // Well padded but not text. Without a signature (url_verification is not
                // signed) that proves nothing about the sender: random bytes pass the padding
                // check one time in 256. Refused all the same, as malformed.
                Err(e @ crypto::DecryptError::Utf8) => {
                    return Err(ApiError::bad_request(e.to_string()));
                }
                Err(e) => return Err(self.refuse(&e.to_string()).await),
            };
            serde_json::from_str(&plain).map_err(|e| {
                ApiError::bad_request(format!("the decrypted body is not JSON: {e}"))
            })?
        };
        if payload["type"].as_str() == Some("url_verification") {
            self.check_token(payload["token"].as_str()).await?;
            let challenge = payload["challenge"].as_str().unwrap_or_default();
            tracing::info!("feishu: answered the callback URL verification");
            return Ok(axum::Json(json!({ "challenge": challenge })).into_response());
        }
        if !key.is_empty() && !signed {
            return Err(self
                .refuse("the X-Lark-Signature headers are missing")
                .await);
        }
        self.check_token(payload["header"]["token"].as_str())
            .await?;
        let reply = self.callbacks.handle(payload, Source::Webhook).await;
        Ok((StatusCode::OK, axum::Json(reply)).into_response())
    }
}

async fn endpoint(
    State(w): State<Arc<Webhook>>,
    headers: HeaderMap,
    ApiBytes(body): ApiBytes,
) -> Response {
    match w.serve(headers, body).await {
        Ok(r) => r,
        Err(e) => e.into_response(),
    }
}
