//! The answer every inbound answer endpoint takes (`POST /v1/interactions/{id}/respond`, a
//! signed webhook answer), and the outcome body they and the agent API answer with: shared by
//! `http/` and `channels/`, so a channel turns a platform's answer into an [`Answer`] without
//! importing the HTTP layer.

use serde::Deserialize;
use serde_json::{Map, Value};

use super::error::ApiError;
use crate::interaction::{
    AgentResult, Answer, Interaction, InteractionId, Resolution, ValidationError, Via, json_type,
};

/// Most interactions one `POST /v1/respond` may answer.
pub const MAX_BULK: usize = 500;

/// Parses an id from a path; a malformed id cannot exist, so it is a 404.
pub fn path_id(raw: &str) -> Result<InteractionId, ApiError> {
    InteractionId::parse(raw)
        .map_err(|_| ApiError::not_found(format!("no interaction with id {raw:?}")))
}

pub(crate) fn object(v: Value, field: &str) -> Result<Map<String, Value>, ApiError> {
    match v {
        Value::Object(m) => Ok(m),
        other => Err(ValidationError::new(
            field,
            format!("expected a JSON object, got {}", json_type(&other)),
        )
        .into()),
    }
}

/// The first of `fields` that is present: the one an error names.
pub(crate) fn present<const N: usize>(fields: [(&'static str, bool); N]) -> Option<&'static str> {
    fields.into_iter().find(|(_, given)| *given).map(|(f, _)| f)
}

/// `Ok` when none of `fields` is present; else an error naming the first that is, with
/// `message`.
pub(crate) fn none_of<const N: usize>(
    fields: [(&'static str, bool); N],
    message: &str,
) -> Result<(), ValidationError> {
    match present(fields) {
        Some(field) => Err(ValidationError::new(field, message)),
        None => Ok(()),
    }
}

/// The answer shape shared by `/wait`, `/respond`, `DELETE` and `POST ?wait_secs`:
/// `{"status", "result"?, "resolution"?, "interaction"}`. Serialized straight from the
/// interaction, without an intermediate JSON tree.
#[derive(Debug, serde::Serialize)]
pub struct OutcomeBody<'a> {
    status: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    result: Option<&'a AgentResult>,
    #[serde(skip_serializing_if = "Option::is_none")]
    resolution: Option<&'a Resolution>,
    interaction: &'a Interaction,
}

/// The outcome body for `i`.
pub fn outcome_body(i: &Interaction) -> OutcomeBody<'_> {
    OutcomeBody {
        status: i.status(),
        result: i.resolution.as_ref().map(|r| &r.result),
        resolution: i.resolution.as_deref(),
        interaction: i,
    }
}

/// Whether an answer came from the web inbox, the terminal client or another API client.
#[derive(Debug, Deserialize, Clone, Copy)]
#[serde(rename_all = "snake_case")]
pub enum ClientVia {
    /// The built-in web inbox.
    Desktop,
    /// `imrelay watch` and `imrelay answer`.
    Terminal,
    /// Any other API client.
    Api,
}

/// An approval's answer: allow or deny.
#[derive(Debug, Deserialize, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum Decision {
    /// Let the agent go ahead.
    Allow,
    /// Stop it.
    Deny,
}

/// How a form is answered: filled in, or declined.
#[derive(Debug, Deserialize, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum FormAction {
    /// Filled in: the values go to the agent.
    Accept,
    /// Declined: the agent gets no values.
    Decline,
}

/// The body of `POST /v1/interactions/{id}/respond` (and of signed webhook answers).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RespondBody {
    decision: Option<Decision>,
    message: Option<String>,
    updated_input: Option<Value>,
    answers: Option<Value>,
    action: Option<FormAction>,
    content: Option<Value>,
    interrupt: Option<bool>,
    always: Option<bool>,
    by: Option<String>,
    via: Option<ClientVia>,
    grant: Option<GrantBody>,
    passkey: Option<PasskeyBody>,
}

/// A passkey assertion made in the inbox, for an answer that needs one (`step_up`):
/// `{"challenge": "<id from POST /v1/interactions/{id}/passkey>", "credential": {...}}`, the
/// credential as `navigator.credentials.get()` gave it, in its JSON form.
#[derive(Debug, Deserialize, Clone)]
#[serde(deny_unknown_fields)]
pub struct PasskeyBody {
    /// The challenge's id, as the start of the assertion gave it.
    pub challenge: String,
    /// The `PublicKeyCredential`, JSON-encoded (base64url fields).
    pub credential: Value,
}

/// "Allow this and similar calls": `{"rule": "Bash(npm run test:*)", "scope": "session"}`
/// beside `"decision": "allow"`; without `rule`, the rule imrelay proposes.
#[derive(Debug, Deserialize, Clone)]
#[serde(deny_unknown_fields)]
pub struct GrantBody {
    /// The pattern to allow.
    pub rule: Option<String>,
    /// `session` or `standing`.
    pub scope: crate::interaction::policy::GrantScope,
}

impl From<GrantBody> for crate::interaction::GrantRequest {
    fn from(g: GrantBody) -> Self {
        Self {
            rule: g.rule,
            scope: g.scope,
        }
    }
}

impl RespondBody {
    /// Who answered, as the body says.
    pub fn by(&self) -> Option<String> {
        self.by.clone().filter(|b| !b.trim().is_empty())
    }

    /// The channel the body claims (`desktop`, `terminal` or `api`, default `api`).
    pub fn via(&self) -> Via {
        match self.via {
            Some(ClientVia::Desktop) => Via::desktop(),
            Some(ClientVia::Terminal) => Via::terminal(),
            Some(ClientVia::Api) | None => Via::api(),
        }
    }

    /// The passkey assertion the body carries, taken out of it.
    pub fn take_passkey(&mut self) -> Option<PasskeyBody> {
        self.passkey.take()
    }

    /// The grant the body asks for with its allow, taken out of it.
    pub fn take_grant(&mut self) -> Option<GrantBody> {
        self.grant.take()
    }

    /// The answer the body describes.
    pub fn answer(self) -> Result<Answer, ApiError> {
        if let Some(action) = self.action {
            return self.form_answer(action);
        }
        if self.content.is_some() {
            return Err(ValidationError::new(
                "content",
                "goes with `action` \"accept\" (forms only)",
            )
            .into());
        }
        match (self.decision, self.answers) {
            (Some(_), Some(_)) => Err(ValidationError::new(
                "answers",
                "give either `decision` (approvals, or deny for questions) or `answers` (questions), not both",
            )
            .into()),
            (None, None) => Err(ValidationError::new(
                "decision",
                "missing `decision` (\"allow\" or \"deny\") or `answers`",
            )
            .into()),
            (None, Some(answers)) => {
                if let Some(field) = present([
                    ("message", self.message.is_some()),
                    ("updated_input", self.updated_input.is_some()),
                    ("always", self.always.is_some()),
                ]) {
                    return Err(ValidationError::new(
                        field,
                        "`answers` cannot be combined with `message`, `updated_input` or `always`",
                    )
                    .into());
                }
                Ok(Answer::Answers(object(answers, "answers")?))
            }
            (Some(Decision::Allow), None) => {
                if let Some(field) = present([
                    ("message", self.message.is_some()),
                    ("interrupt", self.interrupt.is_some()),
                ]) {
                    return Err(ValidationError::new(
                        field,
                        "`message` and `interrupt` only apply to a deny",
                    )
                    .into());
                }
                Ok(Answer::Allow {
                    updated_input: self
                        .updated_input
                        .map(|v| object(v, "updated_input"))
                        .transpose()?,
                    always: self.always.unwrap_or(false),
                })
            }
            (Some(Decision::Deny), None) => {
                if let Some(field) = present([
                    ("updated_input", self.updated_input.is_some()),
                    ("always", self.always.is_some()),
                ]) {
                    return Err(ValidationError::new(
                        field,
                        "`updated_input` and `always` only apply to an allow",
                    )
                    .into());
                }
                Ok(Answer::Deny {
                    message: self.message,
                    interrupt: self.interrupt.unwrap_or(false),
                })
            }
        }
    }
}

impl RespondBody {
    /// A form's answer: `action` with `content` for accept, and nothing else but `message`
    /// for decline.
    fn form_answer(self, action: FormAction) -> Result<Answer, ApiError> {
        if let Some(field) = present([
            ("decision", self.decision.is_some()),
            ("answers", self.answers.is_some()),
            ("updated_input", self.updated_input.is_some()),
            ("always", self.always.is_some()),
            ("interrupt", self.interrupt.is_some()),
        ]) {
            return Err(ValidationError::new(
                field,
                "`action` answers a form, and cannot be combined with the fields of approvals and questions",
            )
            .into());
        }
        match action {
            FormAction::Accept => {
                if self.message.is_some() {
                    return Err(ValidationError::new("message", "only applies to a decline").into());
                }
                let content = match self.content {
                    Some(c) => object(c, "content")?,
                    None => Map::new(),
                };
                Ok(Answer::Accept(content))
            }
            FormAction::Decline => {
                if self.content.is_some() {
                    return Err(ValidationError::new(
                        "content",
                        "only applies to `action` \"accept\"",
                    )
                    .into());
                }
                Ok(Answer::Deny {
                    message: self.message,
                    interrupt: false,
                })
            }
        }
    }
}
