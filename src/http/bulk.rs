//! `POST /v1/respond`: one allow or deny given to many interactions at once ("Approve
//! selected" in the inbox, `imrelay answer --all`).
//!
//! Each interaction is answered on its own, exactly as `POST /v1/interactions/{id}/respond`
//! would answer it, and gets its own result code: one already answered (`409`), unknown
//! (`404`) or not fitting the answer (`400`, e.g. an allow for a question) changes nothing
//! but itself. The batch is not a transaction: the others are answered all the same.
//! The request as a whole is refused (`400`, nothing answered) only when its body is wrong.

use std::collections::HashSet;
use std::sync::Arc;

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::Response;
use serde::{Deserialize, Serialize};

use super::AppState;
use super::error::ApiError;
use super::extract::ApiJson;
use crate::interaction::{
    Answer, Interaction, InteractionId, MAX_BY_CHARS, Responder, ValidationError, Via,
};
use crate::wire::Principal;
pub use crate::wire::answer::MAX_BULK;
use crate::wire::answer::{ClientVia, Decision};
use crate::wire::json_response;

/// The body of `POST /v1/respond`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BulkBody {
    ids: Vec<String>,
    decision: Decision,
    message: Option<String>,
    interrupt: Option<bool>,
    by: Option<String>,
    via: Option<ClientVia>,
}

/// One listed id: parsed, or as given when it cannot be an id (that item is a `404`).
type ListedId = Result<InteractionId, String>;

impl BulkBody {
    /// The ids (checked: at least one, at most [`MAX_BULK`], none twice) and the answer.
    fn parse(self) -> Result<(Vec<ListedId>, Answer, Responder), ApiError> {
        if self.ids.is_empty() {
            return Err(ValidationError::new("ids", "give at least one interaction id").into());
        }
        if self.ids.len() > MAX_BULK {
            return Err(ValidationError::new(
                "ids",
                format!(
                    "at most {MAX_BULK} ids in one request, got {}",
                    self.ids.len()
                ),
            )
            .into());
        }
        let mut seen = HashSet::with_capacity(self.ids.len());
        for (n, id) in self.ids.iter().enumerate() {
            if !seen.insert(id.as_str()) {
                return Err(ValidationError::new(
                    format!("ids[{n}]"),
                    format!("{id:?} is listed twice"),
                )
                .into());
            }
        }
        let answer = match self.decision {
            Decision::Allow => {
                if self.message.is_some() || self.interrupt.is_some() {
                    let field = if self.message.is_some() {
                        "message"
                    } else {
                        "interrupt"
                    };
                    return Err(ValidationError::new(
                        field,
                        "`message` and `interrupt` only apply to a deny",
                    )
                    .into());
                }
                Answer::allow()
            }
            Decision::Deny => Answer::Deny {
                message: self.message.filter(|m| !m.trim().is_empty()),
                interrupt: self.interrupt.unwrap_or(false),
            },
        };
        let by = self.by.filter(|b| !b.trim().is_empty());
        if by
            .as_ref()
            .is_some_and(|b| b.chars().count() > MAX_BY_CHARS)
        {
            return Err(ValidationError::new(
                "by",
                format!("is longer than {MAX_BY_CHARS} characters"),
            )
            .into());
        }
        let via = match self.via {
            Some(ClientVia::Desktop) => Via::desktop(),
            Some(ClientVia::Terminal) => Via::terminal(),
            Some(ClientVia::Api) | None => Via::api(),
        };
        let mut responder = Responder::anonymous(via);
        responder.by = by;
        // A malformed id cannot exist: that item is a 404, like in a URL.
        let ids = self
            .ids
            .into_iter()
            .map(|raw| InteractionId::parse(&raw).map_err(|_| raw))
            .collect();
        Ok((ids, answer, responder))
    }
}

/// One interaction's result: its id, the status `/respond` would have answered with, and
/// the outcome (on `200`) or the error object.
#[derive(Debug, Serialize)]
struct ItemResult {
    id: String,
    status: u16,
    #[serde(skip_serializing_if = "Option::is_none")]
    outcome: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<ItemError>,
}

/// The error of one item: the `error` object `/respond` would have answered with, without
/// the whole interaction (read it from its endpoint), so a response stays small.
#[derive(Debug, Serialize)]
struct ItemError {
    code: &'static str,
    message: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    field: Option<String>,
}

impl From<ApiError> for ItemError {
    fn from(e: ApiError) -> Self {
        ItemError {
            code: e.code(),
            field: e.field().map(str::to_string),
            message: e.message().to_string(),
        }
    }
}

/// Answers one listed interaction, if `principal` may.
async fn answer_one(
    state: &AppState,
    principal: &Principal,
    id: &InteractionId,
    answer: &Answer,
    responder: &Responder,
) -> Result<Arc<Interaction>, ApiError> {
    super::operator::admit(state, principal, responder, id).await?;
    Ok(state
        .registry
        .respond(id, answer.clone(), responder.clone())
        .await?)
}

/// `POST /v1/respond`: answers every listed interaction in turn, each on its own.
pub async fn respond_many(
    State(state): State<AppState>,
    principal: Principal,
    ApiJson(body): ApiJson<BulkBody>,
) -> Result<Response, ApiError> {
    let (ids, answer, responder) = body.parse()?;
    let responder = super::api::operator_responder(&principal, responder.by, responder.via);
    let mut results = Vec::with_capacity(ids.len());
    // Answered, voted (recorded, more votes needed), refused.
    let mut counts = [0usize; 3];
    for id in ids {
        let item = match id {
            Err(raw) => ItemResult {
                error: Some(ApiError::not_found(format!("no interaction with id {raw:?}")).into()),
                id: raw,
                status: StatusCode::NOT_FOUND.as_u16(),
                outcome: None,
            },
            Ok(id) => match answer_one(&state, &principal, &id, &answer, &responder).await {
                Ok(resolved) => ItemResult {
                    id: id.to_string(),
                    status: StatusCode::OK.as_u16(),
                    outcome: resolved.resolution.as_ref().map(|r| r.outcome.as_str()),
                    error: None,
                },
                Err(e) => ItemResult {
                    id: id.to_string(),
                    status: e.status().as_u16(),
                    outcome: None,
                    error: Some(e.into()),
                },
            },
        };
        counts[match item.status {
            200 => 0,
            202 => 1,
            _ => 2,
        }] += 1;
        results.push(item);
    }
    Ok(json_response(
        StatusCode::OK,
        &serde_json::json!({
            "results": results,
            "answered": counts[0],
            "voted": counts[1],
            "refused": counts[2],
        }),
    ))
}
