//! The agent and operator API under `/v1/interactions`: create, list, get, wait, respond and
//! cancel.

use std::sync::Arc;
use std::time::Duration;

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{Value, json};

use super::AppState;
use super::auth::Role;
use super::error::ApiError;
use super::extract::{ApiJson, ApiPath, ApiQuery};
use super::summary::Summary;
use crate::interaction::quorum;
use crate::interaction::{
    FORM_TOOL, Form, Interaction, InteractionId, NewInteraction, RegistryError, Responder,
    ValidationError, Via,
};
use crate::store::{AuditQuery, Cursor, ListQuery, StatusFilter};
use crate::wire::Principal;
use crate::wire::answer::none_of;
pub use crate::wire::answer::{
    ClientVia, Decision, FormAction, OutcomeBody, RespondBody, outcome_body, path_id,
};
pub(crate) use crate::wire::json_response;

/// Longest long-poll, in seconds.
pub(crate) const MAX_WAIT_SECS: u64 = 60;
/// Default long-poll, in seconds.
pub(crate) const DEFAULT_WAIT_SECS: u64 = 25;
const DEFAULT_PAGE: usize = 50;
const MAX_PAGE: usize = 500;
/// Most bytes of summaries in one listing: past it the page ends early, with a
/// `next_cursor` for the rest (a page holds at least one interaction).
pub(crate) const MAX_LIST_BYTES: usize = 4 * 1024 * 1024;
/// About how many bytes of whole interactions a listing may read from the store to
/// summarize: past it the page ends early too. So a page of 500 interactions with 900 KB
/// inputs reads about 8 MB, not 450.
const MAX_LOAD_BYTES: usize = 8 * 1024 * 1024;

/// What `POST /v1/interactions` asks for: a tool call (`approval`, the default, or
/// `question` for `AskUserQuestion`; both follow from `tool_name`), a `form`, or a free-text
/// `prompt`.
#[derive(Debug, Deserialize, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub(crate) enum CreateKind {
    /// A tool call to allow or deny.
    Approval,
    /// An `AskUserQuestion` call.
    Question,
    /// A form: `message` and `schema` (an MCP elicitation's `requestedSchema`).
    Form,
    /// A free-text question: `message`, optionally `multiline`.
    Prompt,
}

/// The body of `POST /v1/interactions`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CreateBody {
    id: Option<String>,
    kind: Option<CreateKind>,
    tool_name: Option<String>,
    input: Option<Box<RawValue>>,
    message: Option<String>,
    schema: Option<Value>,
    multiline: Option<bool>,
    session: Option<String>,
    agent: Option<String>,
    title: Option<String>,
    description: Option<String>,
    cwd: Option<String>,
    timeout_secs: Option<u64>,
    suggestions: Option<Value>,
    #[serde(default)]
    labels: Vec<String>,
    /// The agent cannot run an edited input: an edit-then-approve is refused.
    input_fixed: Option<bool>,
}

impl CreateBody {
    /// The tool call or form the body describes, before its context is added.
    fn request(&self) -> Result<NewInteraction, ApiError> {
        let kind = self.kind.unwrap_or(CreateKind::Approval);
        match kind {
            CreateKind::Approval | CreateKind::Question => self.tool_call(),
            CreateKind::Form | CreateKind::Prompt => self.form(kind),
        }
    }

    /// An approval or question: `tool_name` and `input`, and none of a form's fields.
    fn tool_call(&self) -> Result<NewInteraction, ApiError> {
        none_of(
            [
                ("message", self.message.is_some()),
                ("schema", self.schema.is_some()),
                ("multiline", self.multiline.is_some()),
            ],
            "only applies to `kind` \"form\" or \"prompt\"",
        )?;
        let tool_name = self
            .tool_name
            .clone()
            .ok_or_else(|| ValidationError::new("tool_name", "is required"))?;
        let input = self
            .input
            .as_ref()
            .ok_or_else(|| ValidationError::new("input", "is required"))?;
        let is_question = tool_name == crate::interaction::ASK_USER_QUESTION;
        if tool_name == FORM_TOOL {
            return Err(ValidationError::new(
                "tool_name",
                "is reserved for forms: send `kind` \"form\" with `message` and `schema`",
            )
            .into());
        }
        if self.kind == Some(CreateKind::Question) && !is_question {
            return Err(ValidationError::new(
                "tool_name",
                "a question is an AskUserQuestion call: `tool_name` must be \"AskUserQuestion\"",
            )
            .into());
        }
        // Kept as the agent wrote it, to give back exactly that.
        Ok(NewInteraction::from_json(tool_name, input)?)
    }

    /// A form or prompt: `message`, and `schema` for a form or `multiline` for a prompt;
    /// none of a tool call's fields.
    fn form(&self, kind: CreateKind) -> Result<NewInteraction, ApiError> {
        none_of(
            [
                ("tool_name", self.tool_name.is_some()),
                ("input", self.input.is_some()),
                ("suggestions", self.suggestions.is_some()),
            ],
            "does not apply to a form or prompt (send `message` and `schema`)",
        )?;
        let message = self
            .message
            .as_deref()
            .ok_or_else(|| ValidationError::new("message", "is required"))?;
        let schema = self.form_schema(kind)?;
        let input = Form::input(message, schema);
        // Checked here too, so errors name the body's fields (`schema.properties.x`).
        Form::from_input(&input).map_err(|e| {
            ValidationError::new(e.field.replacen("requestedSchema", "schema", 1), e.message)
        })?;
        Ok(NewInteraction::new(FORM_TOOL, input))
    }

    /// The schema of a form (`schema`, required) or of a prompt (one text field,
    /// `multiline` or not).
    fn form_schema(&self, kind: CreateKind) -> Result<Value, ApiError> {
        Ok(match kind {
            CreateKind::Prompt => {
                if self.schema.is_some() {
                    return Err(ValidationError::new(
                        "schema",
                        "a prompt has one text field: send `kind` \"form\" for a schema",
                    )
                    .into());
                }
                Form::prompt_schema(self.multiline.unwrap_or(false))
            }
            _ => {
                if self.multiline.is_some() {
                    return Err(ValidationError::new(
                        "multiline",
                        "applies to a prompt; in a form, set `multiline` on a string field",
                    )
                    .into());
                }
                self.schema
                    .clone()
                    .ok_or_else(|| ValidationError::new("schema", "is required"))?
            }
        })
    }
}

/// The query of `POST /v1/interactions`: how long to wait for the answer.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CreateQuery {
    wait_secs: Option<u64>,
}

fn outcome_response(i: &Arc<Interaction>) -> Response {
    let status = if i.is_pending() {
        StatusCode::ACCEPTED
    } else {
        StatusCode::OK
    };
    json_response(status, &outcome_body(i))
}

/// `POST /v1/interactions`: counted against the pending budget of the agent token it came
/// with ([`Principal::owner`]).
pub async fn create(
    State(state): State<AppState>,
    ApiQuery(query): ApiQuery<CreateQuery>,
    principal: Principal,
    ApiJson(body): ApiJson<CreateBody>,
) -> Result<Response, ApiError> {
    let base = body.request()?;
    let new = NewInteraction {
        id: body.id,
        session: body.session,
        agent: body.agent,
        title: body.title,
        description: body.description,
        cwd: body.cwd,
        timeout_secs: body.timeout_secs,
        suggestions: body.suggestions,
        labels: body.labels,
        input_fixed: body.input_fixed.unwrap_or(false),
        ..base
    };
    let created = state
        .registry
        .create_for(new, Some(&principal.owner()))
        .await?;
    match query.wait_secs {
        None => {
            let status = if created.created {
                StatusCode::CREATED
            } else {
                StatusCode::OK
            };
            Ok(json_response(status, &created.interaction))
        }
        Some(secs) => {
            // Waited on by id: the request's input stays with the store while it waits.
            let id = created.interaction.id.clone();
            drop((created, body.input, body.schema));
            let i = wait_for(&state, &id, secs).await?;
            Ok(outcome_response(&i))
        }
    }
}

/// The query of `GET /v1/interactions`: which, how many, from where.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ListParams {
    status: Option<StatusFilter>,
    limit: Option<usize>,
    cursor: Option<String>,
}

fn encode_cursor(c: &Cursor) -> String {
    URL_SAFE_NO_PAD.encode(format!("{}:{}", c.created_ms, c.id))
}

fn decode_cursor(raw: &str) -> Result<Cursor, ApiError> {
    let bad = || {
        ApiError::from(ValidationError::new(
            "cursor",
            "not a cursor returned by this server",
        ))
    };
    let bytes = URL_SAFE_NO_PAD.decode(raw).map_err(|_| bad())?;
    let text = String::from_utf8(bytes).map_err(|_| bad())?;
    let (ms, id) = text.split_once(':').ok_or_else(bad)?;
    Ok(Cursor {
        created_ms: ms.parse().map_err(|_| bad())?,
        id: InteractionId::parse(id).map_err(|_| bad())?,
    })
}

/// `GET /v1/interactions`
pub async fn list(
    State(state): State<AppState>,
    ApiQuery(params): ApiQuery<ListParams>,
) -> Result<Response, ApiError> {
    let limit = params.limit.unwrap_or(DEFAULT_PAGE);
    if limit == 0 || limit > MAX_PAGE {
        return Err(
            ValidationError::new("limit", format!("must be between 1 and {MAX_PAGE}")).into(),
        );
    }
    let after = params.cursor.as_deref().map(decode_cursor).transpose()?;
    let page = state
        .registry
        .list(&ListQuery {
            status: params.status.unwrap_or(StatusFilter::All),
            limit,
            after,
            max_bytes: Some(MAX_LOAD_BYTES),
        })
        .await?;
    Ok(list_response(page.interactions, page.next))
}

/// The body of a listing: each interaction's [`Summary`], as many as fit in
/// [`MAX_LIST_BYTES`] (at least one), and the cursor after the last one listed when more
/// remain.
fn list_response(items: Vec<Arc<Interaction>>, next: Option<Cursor>) -> Response {
    let mut body = Vec::with_capacity(4096);
    body.extend_from_slice(b"{\"interactions\":[");
    let mut listed = 0;
    let mut next = next;
    for (n, i) in items.iter().enumerate() {
        let start = body.len();
        if n > 0 {
            body.push(b',');
        }
        // An interaction always serializes (its input is JSON text already checked).
        if serde_json::to_writer(&mut body, &Summary(i)).is_err() {
            body.truncate(start);
            continue;
        }
        if n > 0 && body.len() > MAX_LIST_BYTES {
            // The rest is on the next page, from after the last one listed.
            body.truncate(start);
            next = items.get(listed.max(1) - 1).map(|last| Cursor {
                created_ms: last.created_at.as_millisecond(),
                id: last.id.clone(),
            });
            break;
        }
        listed = n + 1;
    }
    body.extend_from_slice(b"],\"next_cursor\":");
    let cursor = next.as_ref().map(encode_cursor);
    // A string or null always serializes.
    let _ = serde_json::to_writer(&mut body, &cursor);
    body.push(b'}');
    (
        StatusCode::OK,
        [(
            axum::http::header::CONTENT_TYPE,
            axum::http::HeaderValue::from_static("application/json"),
        )],
        body,
    )
        .into_response()
}

/// `GET /v1/interactions/{id}`
pub async fn get(
    State(state): State<AppState>,
    role: Role,
    principal: Principal,
    ApiPath(id): ApiPath<String>,
) -> Result<Response, ApiError> {
    let id = path_id(&id)?;
    Ok(Json(owned(&state, role, &principal, &id).await?).into_response())
}

/// Interaction `id`, if the request may see it: an operator every one; an agent's token only
/// those it created (another token's is answered as not found, so its existence is not told,
/// and the attempt is logged).
async fn owned(
    state: &AppState,
    role: Role,
    principal: &Principal,
    id: &InteractionId,
) -> Result<Arc<Interaction>, ApiError> {
    let Some(i) = state.registry.get(id).await? else {
        return Err(RegistryError::NotFound(id.clone()).into());
    };
    let owner = principal.owner();
    if role == Role::Agent && i.owner.as_deref().is_some_and(|o| o != owner) {
        tracing::warn!(%id, client = %owner, "an agent token asked for another token's interaction; refused as not found");
        return Err(RegistryError::NotFound(id.clone()).into());
    }
    Ok(i)
}

/// `GET /v1/interactions/{id}/display` parameters.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DisplayParams {
    /// Everything, uncut (`true`), or what a screen or two shows (the default).
    #[serde(default)]
    all: bool,
}

/// `GET /v1/interactions/{id}/display`: the tool call as a person reads it (see
/// [`present`](crate::present)), for the inbox and other clients that show it.
pub async fn display(
    State(state): State<AppState>,
    ApiPath(id): ApiPath<String>,
    ApiQuery(params): ApiQuery<DisplayParams>,
) -> Result<Response, ApiError> {
    use crate::present::{self, Block, Budget, Cut, DiffLine};
    let id = path_id(&id)?;
    let Some(i) = state.registry.get(&id).await? else {
        return Err(RegistryError::NotFound(id).into());
    };
    let budget = if params.all {
        Budget::ALL
    } else {
        Budget::TERMINAL
    };
    let shown = present::present(&i.tool_name, &i.input.map(), i.cwd.as_deref(), budget);
    let cut = |c: &Cut| c.note().map_or(Value::Null, Value::String);
    let blocks: Vec<Value> = shown
        .blocks
        .iter()
        .map(|b| match b {
            Block::Field {
                label,
                value,
                cut: c,
            } => {
                json!({"type": "field", "label": label, "value": value, "cut": cut(c)})
            }
            Block::Text {
                label,
                lines,
                cut: c,
            } => {
                json!({"type": "text", "label": label, "lines": lines, "cut": cut(c)})
            }
            Block::Diff {
                label,
                lines,
                cut: c,
            } => {
                let lines: Vec<Value> = lines
                    .iter()
                    .map(|l| match l {
                        DiffLine::Context(t) => json!({"op": "context", "text": t}),
                        DiffLine::Removed(t) => json!({"op": "removed", "text": t}),
                        DiffLine::Added(t) => json!({"op": "added", "text": t}),
                        DiffLine::Gap => json!({"op": "gap"}),
                    })
                    .collect();
                json!({"type": "diff", "label": label, "lines": lines, "cut": cut(c)})
            }
            Block::Note(n) => json!({"type": "note", "text": n}),
        })
        .collect();
    Ok(Json(json!({
        "summary": shown.summary,
        "blocks": blocks,
        "cut": shown.is_cut(),
        // "Allow this and similar calls": the rule imrelay proposes (editable).
        "proposed_rule": (i.kind == crate::interaction::Kind::Approval)
            .then(|| crate::interaction::policy::propose(&i))
            .flatten(),
    }))
    .into_response())
}

/// The query of `GET /v1/interactions/{id}/wait`: how long to wait.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WaitParams {
    timeout_secs: Option<u64>,
}

/// Waits for `id` up to `secs` (capped), returning early (still pending) on shutdown.
async fn wait_for(
    state: &AppState,
    id: &InteractionId,
    secs: u64,
) -> Result<Arc<Interaction>, ApiError> {
    let timeout = Duration::from_secs(secs.min(MAX_WAIT_SECS));
    let waited = tokio::select! {
        r = state.registry.wait(id, timeout) => r?,
        _ = state.shutdown.cancelled() => None,
    };
    match waited {
        Some(i) => Ok(i),
        None => state
            .registry
            .get(id)
            .await?
            .ok_or_else(|| RegistryError::NotFound(id.clone()).into()),
    }
}

/// `GET /v1/interactions/{id}/wait`
pub async fn wait(
    State(state): State<AppState>,
    role: Role,
    principal: Principal,
    ApiPath(id): ApiPath<String>,
    ApiQuery(params): ApiQuery<WaitParams>,
) -> Result<Response, ApiError> {
    let id = path_id(&id)?;
    owned(&state, role, &principal, &id).await?;
    let i = wait_for(
        &state,
        &id,
        params.timeout_secs.unwrap_or(DEFAULT_WAIT_SECS),
    )
    .await?;
    Ok(outcome_response(&i))
}

/// Who answers through the inbox or the API, as a person: a labelled operator token's
/// label ([`super::operator::responder`]); a token without a label is the administrator's:
/// its identity names the token ([`Principal::owner`]) for the audit trail, and in a vote
/// every such token counts as the one person [`quorum::ADMINISTRATOR`], whatever `by` the
/// body gives (`by` is only the name shown on a single answer). The one place an API
/// answer's person is decided.
pub(super) fn operator_responder(principal: &Principal, by: Option<String>, via: Via) -> Responder {
    let mut responder = Responder::anonymous(via);
    responder.by = by;
    let responder = super::operator::responder(principal, responder);
    match responder.identity {
        Some(_) => responder,
        None => responder
            .with_identity(quorum::OPERATOR, principal.owner())
            .with_credential(quorum::ADMINISTRATOR),
    }
}

/// `202 Accepted` for an answer recorded as a vote that does not decide yet: the outcome
/// body (`status: "pending"`), with `vote: "recorded"` and `votes`, the tally so far.
fn voted_response(i: &Arc<Interaction>) -> Response {
    let mut body = serde_json::to_value(outcome_body(i)).unwrap_or_default();
    body["vote"] = json!("recorded");
    body["votes"] = json!(quorum::tally(i));
    json_response(StatusCode::ACCEPTED, &body)
}

/// `POST /v1/interactions/{id}/respond`
pub async fn respond(
    State(state): State<AppState>,
    principal: Principal,
    ApiPath(id): ApiPath<String>,
    ApiJson(mut body): ApiJson<RespondBody>,
) -> Result<Response, ApiError> {
    let id = path_id(&id)?;
    let responder = operator_responder(&principal, body.by(), body.via());
    let grant = body.take_grant();
    let passkey = body.take_passkey();
    let answer = body.answer()?;
    super::operator::admit(&state, &principal, &responder, &id).await?;
    if let Some(passkey) = passkey {
        // The assertion is checked (and used up) first: the answer counts with it.
        super::passkeys::verify(&state, &principal, &id, passkey).await?;
        if grant.is_some() {
            return Err(ValidationError::new(
                "grant",
                "an answer with a passkey cannot grant similar calls: they would need none",
            )
            .into());
        }
        return match state
            .registry
            .respond_with_passkey(&id, answer, responder)
            .await
        {
            Ok(resolved) => Ok(outcome_response(&resolved)),
            Err(RegistryError::Voted(pending)) => Ok(voted_response(&pending)),
            Err(e) => Err(e.into()),
        };
    }
    let Some(grant) = grant else {
        return match state.registry.respond(&id, answer, responder).await {
            Ok(resolved) => Ok(outcome_response(&resolved)),
            Err(RegistryError::Voted(pending)) => Ok(voted_response(&pending)),
            Err(e) => Err(e.into()),
        };
    };
    let (resolved, grant) = state
        .registry
        .respond_granting(&id, answer, responder, &grant.into())
        .await?;
    let mut out = serde_json::to_value(outcome_body(&resolved)).unwrap_or_default();
    out["grant"] = serde_json::to_value(&grant).unwrap_or_default();
    Ok(json_response(StatusCode::OK, &out))
}

/// The body of a cancel: why, if said.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CancelParams {
    reason: Option<String>,
}

/// `DELETE /v1/interactions/{id}`
pub async fn cancel(
    State(state): State<AppState>,
    role: Role,
    principal: Principal,
    ApiPath(id): ApiPath<String>,
    ApiQuery(params): ApiQuery<CancelParams>,
) -> Result<Response, ApiError> {
    let id = path_id(&id)?;
    owned(&state, role, &principal, &id).await?;
    let reason = params
        .reason
        .filter(|r| !r.trim().is_empty())
        .map(|r| format!("Cancelled by the agent: {}", r.trim()));
    if reason.as_ref().is_some_and(|r| r.chars().count() > 4096) {
        return Err(ValidationError::new("reason", "is longer than 4096 characters").into());
    }
    let resolved = state
        .registry
        .cancel(&id, reason, Some("agent".into()))
        .await?;
    Ok(outcome_response(&resolved))
}

/// The query of `GET /v1/audit`: where to start and how many.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AuditParams {
    after: Option<i64>,
    since: Option<String>,
    limit: Option<usize>,
}

/// `GET /v1/audit`
pub async fn audit(
    State(state): State<AppState>,
    ApiQuery(params): ApiQuery<AuditParams>,
) -> Result<Json<Value>, ApiError> {
    let limit = params.limit.unwrap_or(100);
    if limit == 0 || limit > 1000 {
        return Err(ValidationError::new("limit", "must be between 1 and 1000").into());
    }
    let since = params
        .since
        .as_deref()
        .map(|s| {
            s.parse::<jiff::Timestamp>().map_err(|_| {
                ApiError::from(ValidationError::new(
                    "since",
                    "expected an RFC 3339 time such as 2026-11-22T08:00:00Z",
                ))
            })
        })
        .transpose()?;
    let entries = state
        .registry
        .store()
        .audit(&AuditQuery {
            after_seq: params.after.unwrap_or(0),
            since,
            limit,
        })
        .await?;
    let next = (entries.len() == limit)
        .then(|| entries.last().map(|e| e.seq))
        .flatten();
    Ok(Json(json!({"entries": entries, "next_after": next})))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cursors_round_trip_and_garbage_is_refused() {
        let c = Cursor {
            created_ms: 1_700_000_000_123,
            id: InteractionId::parse("toolu_1:x").unwrap(),
        };
        assert_eq!(decode_cursor(&encode_cursor(&c)).unwrap(), c);
        assert!(decode_cursor("!!!").is_err());
        assert!(decode_cursor(&URL_SAFE_NO_PAD.encode("abc")).is_err());
    }
}
