//! Answers from people, and how each becomes a [`Resolution`].
//!
//! Every channel (desktop, API, Telegram, Feishu, webhooks) reduces what a person did to an
//! [`Answer`] plus a [`Responder`]; [`resolution_for`] checks that the answer fits the
//! interaction and builds the resolution the agent receives. Expiry and cancellation have
//! their own constructors so their messages are the same everywhere.

use jiff::Timestamp;
use serde_json::{Map, Value};

use super::ValidationError;
use super::form::{ElicitAction, ElicitResult, Form};
use super::model::{Input, Interaction, Kind, Outcome, PermissionResult, Resolution, Via};
use super::people::{Identity, People};
use super::question::{MAX_ANSWER_CHARS, normalise_answers, parse_questions};

/// The agent's permission suggestions, each applied for the rest of the session only
/// (`"destination": "session"`). An agent may suggest writing a rule into its settings files;
/// a tap on a phone grants "always" for this session, never a lasting rule.
fn for_this_session(suggestions: &Value) -> Value {
    let mut s = suggestions.clone();
    let scope = |v: &mut Value| {
        if let Value::Object(update) = v {
            update.insert("destination".into(), Value::String("session".into()));
        }
    };
    match &mut s {
        Value::Array(updates) => updates.iter_mut().for_each(scope),
        single => scope(single),
    }
    s
}

/// Longest accepted `by` label, in characters.
pub const MAX_BY_CHARS: usize = 200;

/// What a person decided.
#[derive(Clone, Debug, PartialEq)]
pub enum Answer {
    /// Let the tool run.
    Allow {
        /// An edited input to run instead of the original ("edit & approve").
        updated_input: Option<Map<String, Value>>,
        /// Also apply the agent's permission suggestions ("always allow").
        always: bool,
    },
    /// Do not run the tool (or decline to answer a question).
    Deny {
        /// The reason shown to the model; a default names who denied.
        message: Option<String>,
        /// Stop the agent's whole turn, not just this tool call.
        interrupt: bool,
    },
    /// Answers to a question: question text (or index) → label(s) or free text.
    Answers(Map<String, Value>),
    /// A filled-in form: field name → value (checked against the form's schema; a missing
    /// optional field takes its default). A form is declined with [`Answer::Deny`].
    Accept(Map<String, Value>),
}

impl Answer {
    /// A plain allow.
    pub fn allow() -> Self {
        Answer::Allow {
            updated_input: None,
            always: false,
        }
    }

    /// A deny with an optional reason.
    pub fn deny(message: Option<String>) -> Self {
        Answer::Deny {
            message,
            interrupt: false,
        }
    }
}

/// Who answered and through which channel.
#[derive(Clone, Debug, PartialEq)]
pub struct Responder {
    /// A display name or platform user id: what people are shown ("Allowed by Alice").
    pub by: Option<String>,
    /// The channel.
    pub via: Via,
    /// A stable platform identity (e.g. `tg:12345`) for the audit trail, where `by` is a
    /// display name anyone can choose and change. Not shown to people or the agent.
    pub actor_id: Option<String>,
    /// Who they are on the channel (its name and their id there), when the channel knows: a
    /// configured person with this identity is recorded by their name.
    pub identity: Option<Identity>,
    /// The person a vote counts as when the credential it came with is the person, not the
    /// name it gives: every administrator's token is [`quorum::ADMINISTRATOR`], a webhook
    /// without a person is `webhook <name>`. Such an answer's `by` is only a claim, never
    /// counted or recorded as a voter.
    ///
    /// [`quorum::ADMINISTRATOR`]: crate::interaction::quorum::ADMINISTRATOR
    pub credential: Option<String>,
}

impl Responder {
    /// A responder with a name.
    pub fn new(by: impl Into<String>, via: Via) -> Self {
        Self {
            by: Some(by.into()),
            via,
            actor_id: None,
            identity: None,
            credential: None,
        }
    }

    /// A responder whose name is unknown.
    pub fn anonymous(via: Via) -> Self {
        Self {
            by: None,
            via,
            actor_id: None,
            identity: None,
            credential: None,
        }
    }

    /// The same responder, with a stable platform identity for the audit trail.
    pub fn with_actor_id(mut self, id: impl Into<String>) -> Self {
        self.actor_id = Some(id.into());
        self
    }

    /// The same responder, counted in votes as `credential` whatever name it gives (see
    /// [`Responder::credential`]).
    pub fn with_credential(mut self, credential: impl Into<String>) -> Self {
        self.credential = Some(credential.into());
        self
    }

    /// The same responder, who is `id` on `channel`.
    pub fn with_identity(mut self, channel: &str, id: impl Into<String>) -> Self {
        self.identity = Some(Identity::new(channel, id));
        self
    }

    /// The same responder, named as `people` know them (unchanged when their identity is
    /// nobody's).
    pub fn attributed(mut self, people: &People) -> Self {
        if let Some(name) = self
            .identity
            .as_ref()
            .and_then(|i| people.name_of(&i.channel, &i.id))
        {
            if self.actor_id.is_none() {
                self.actor_id = self.identity.as_ref().map(ToString::to_string);
            }
            self.by = Some(name.to_string());
        }
        self
    }

    /// The person behind this answer, as a vote counts it: its credential's where that is
    /// the person (see [`Responder::credential`]), else its identity's as `people` know it
    /// (a configured person's name, or `channel:id`); `None` for an answer with neither.
    pub fn person(&self, people: &People) -> Option<String> {
        if let Some(c) = &self.credential {
            return Some(c.clone());
        }
        let id = self.identity.as_ref()?;
        Some(super::quorum::person_of(people, &id.channel, &id.id))
    }

    /// How the audit trail names this responder: "Alice (tg:12345)" with a stable identity,
    /// otherwise just the name; `None` when neither is known.
    pub fn audit_actor(&self) -> Option<String> {
        match (&self.by, &self.actor_id) {
            (Some(by), Some(id)) => Some(format!("{by} ({id})")),
            (None, Some(id)) => Some(id.clone()),
            (by, None) => by.clone(),
        }
    }
}

/// Checks `answer` against `interaction` and builds the resolution it leads to.
pub fn resolution_for(
    interaction: &Interaction,
    answer: Answer,
    responder: Responder,
    at: Timestamp,
) -> Result<Resolution, ValidationError> {
    if let Some(by) = &responder.by
        && by.chars().count() > MAX_BY_CHARS
    {
        return Err(ValidationError::new(
            "by",
            format!("is longer than {MAX_BY_CHARS} characters"),
        ));
    }
    if interaction.kind == Kind::Form {
        return form_resolution(interaction, answer, responder, at);
    }
    let (outcome, result) = match (interaction.kind, answer) {
        (
            Kind::Approval,
            Answer::Allow {
                updated_input,
                always,
            },
        ) => (
            Outcome::Allowed,
            approval_allowed(interaction, updated_input, always)?,
        ),
        (_, Answer::Allow { .. }) => {
            return Err(ValidationError::new(
                "decision",
                "this interaction is a question: answer it with `answers`, or deny it",
            ));
        }
        (_, Answer::Deny { message, interrupt }) => (
            Outcome::Denied,
            PermissionResult::Deny {
                message: deny_message(interaction.kind, message, &responder)?,
                interrupt,
            },
        ),
        (Kind::Question, Answer::Answers(given)) => {
            (Outcome::Answered, question_answered(interaction, &given)?)
        }
        (_, Answer::Answers(_)) => {
            return Err(ValidationError::new(
                "answers",
                "this interaction is an approval: answer it with `decision`",
            ));
        }
        (_, Answer::Accept(_)) => {
            return Err(ValidationError::new(
                "action",
                format!(
                    "this interaction is {}: answer it with `{}`",
                    match interaction.kind {
                        Kind::Question => "a question",
                        _ => "an approval",
                    },
                    match interaction.kind {
                        Kind::Question => "answers",
                        _ => "decision",
                    }
                ),
            ));
        }
    };
    Ok(by_person(outcome, responder, at, result))
}

/// The result of an approval allowed, as it is or with `updated_input`, and with the
/// agent's suggestions for this session when `always`.
fn approval_allowed(
    interaction: &Interaction,
    updated_input: Option<Map<String, Value>>,
    always: bool,
) -> Result<PermissionResult, ValidationError> {
    if interaction.input_fixed && updated_input.is_some() {
        return Err(ValidationError::new(
            "updated_input",
            format!(
                "{} cannot run an edited input: approve it as it is, or deny it",
                interaction.agent.as_deref().unwrap_or("this agent")
            ),
        ));
    }
    let updated_permissions = if always {
        match &interaction.suggestions {
            Some(s) => Some(for_this_session(s)),
            None => {
                return Err(ValidationError::new(
                    "always",
                    "this interaction carries no permission suggestions to apply",
                ));
            }
        }
    } else {
        None
    };
    Ok(PermissionResult::Allow {
        updated_input: updated_input
            .map(Input::from)
            .unwrap_or_else(|| interaction.input.clone()),
        updated_permissions,
    })
}

/// The result of a question answered with `given`, checked against its questions.
fn question_answered(
    interaction: &Interaction,
    given: &Map<String, Value>,
) -> Result<PermissionResult, ValidationError> {
    let questions = parse_questions(&interaction.input.map())?;
    let answers = normalise_answers(&questions, given)?;
    Ok(PermissionResult::Allow {
        // The rest of the input as the agent wrote it.
        updated_input: interaction
            .input
            .with_member("answers", &Value::Object(answers)),
        updated_permissions: None,
    })
}

/// The resolution of a form: accepted with its checked content, or declined.
fn form_resolution(
    interaction: &Interaction,
    answer: Answer,
    responder: Responder,
    at: Timestamp,
) -> Result<Resolution, ValidationError> {
    let (outcome, result) = match answer {
        Answer::Accept(content) => {
            let form = Form::from_input(&interaction.input.map())?;
            (
                Outcome::Answered,
                ElicitResult {
                    action: ElicitAction::Accept,
                    content: Some(form.accept(&content)?),
                    message: None,
                },
            )
        }
        Answer::Deny { message, .. } => (
            Outcome::Denied,
            ElicitResult {
                action: ElicitAction::Decline,
                content: None,
                message: Some(deny_message(Kind::Form, message, &responder)?),
            },
        ),
        Answer::Allow { .. } | Answer::Answers(_) => {
            return Err(ValidationError::new(
                "action",
                "this interaction is a form: answer it with `action` \"accept\" and `content`, or \"decline\"",
            ));
        }
    };
    Ok(by_person(outcome, responder, at, result))
}

/// The resolution `responder` gave at `at`.
fn by_person(
    outcome: Outcome,
    responder: Responder,
    at: Timestamp,
    result: impl Into<super::AgentResult>,
) -> Resolution {
    Resolution {
        outcome,
        by: responder.by,
        via: responder.via,
        at,
        result: result.into(),
    }
}

/// The reason given, trimmed and bounded, or a default naming who said no.
fn deny_message(
    kind: Kind,
    message: Option<String>,
    responder: &Responder,
) -> Result<String, ValidationError> {
    match message.map(|m| m.trim().to_string()) {
        Some(m) if !m.is_empty() => {
            if m.chars().count() > MAX_ANSWER_CHARS {
                return Err(ValidationError::new(
                    "message",
                    format!("is longer than {MAX_ANSWER_CHARS} characters"),
                ));
            }
            Ok(m)
        }
        _ => Ok(default_deny_message(kind, responder)),
    }
}

/// The words a person wrote with a deny of `i` (an instruction to the agent), or `None`: not
/// a person's deny (expired, withdrawn, allowed), or one without words of their own (the
/// default message naming who said no).
pub fn deny_instruction(i: &Interaction) -> Option<&str> {
    let r = i.resolution.as_ref()?;
    if r.outcome != Outcome::Denied || r.via == Via::system() {
        return None;
    }
    let message = r.message()?.trim();
    let responder = Responder {
        by: r.by.clone(),
        ..Responder::anonymous(r.via.clone())
    };
    (!message.is_empty() && message != default_deny_message(i.kind, &responder)).then_some(message)
}

fn default_deny_message(kind: Kind, responder: &Responder) -> String {
    let what = match kind {
        Kind::Approval => "Denied",
        Kind::Question => "The question was declined",
        Kind::Form => "The form was declined",
    };
    match &responder.by {
        Some(by) => format!("{what} by {by} via {}", responder.via),
        None => format!("{what} via {}", responder.via),
    }
}

/// A refusal that no person gave (expiry, cancellation): a deny, or for a form a `cancel`.
fn given_up(interaction: &Interaction, message: String) -> super::AgentResult {
    match interaction.kind {
        Kind::Form => ElicitResult {
            action: ElicitAction::Cancel,
            content: None,
            message: Some(message),
        }
        .into(),
        Kind::Approval | Kind::Question => PermissionResult::Deny {
            message,
            interrupt: false,
        }
        .into(),
    }
}

/// The resolution for an interaction whose deadline passed unanswered.
pub fn expired(interaction: &Interaction, at: Timestamp) -> Resolution {
    Resolution {
        outcome: Outcome::Expired,
        by: None,
        via: Via::system(),
        at,
        result: given_up(
            interaction,
            super::quorum::expiry_message(interaction).unwrap_or_else(|| {
                format!("No response within {} seconds", interaction.timeout_secs())
            }),
        ),
    }
}

/// The resolution for an interaction withdrawn by the agent or given up by imrelay.
pub fn cancelled(
    interaction: &Interaction,
    reason: Option<String>,
    by: Option<String>,
    at: Timestamp,
) -> Resolution {
    Resolution {
        outcome: Outcome::Cancelled,
        by,
        via: Via::system(),
        at,
        result: given_up(
            interaction,
            reason.unwrap_or_else(|| "Cancelled by the agent".to_string()),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::interaction::model::{InteractionId, now};
    use serde_json::json;

    fn interaction(tool: &str, input: Value) -> Interaction {
        Interaction::pending(
            InteractionId::generate(),
            tool,
            input.as_object().unwrap().clone(),
            now(),
            300,
        )
    }

    #[test]
    fn allow_echoes_the_original_input() {
        let i = interaction("Bash", json!({"command":"ls"}));
        let r = resolution_for(
            &i,
            Answer::allow(),
            Responder::new("alice", Via::desktop()),
            now(),
        )
        .unwrap();
        assert_eq!(r.outcome, Outcome::Allowed);
        assert_eq!(
            serde_json::to_value(&r.result).unwrap(),
            json!({"behavior":"allow","updatedInput":{"command":"ls"}})
        );
    }

    #[test]
    fn deny_defaults_to_a_message_naming_who() {
        let i = interaction("Bash", json!({"command":"ls"}));
        let r = resolution_for(
            &i,
            Answer::deny(None),
            Responder::new("bob", Via::new("telegram")),
            now(),
        )
        .unwrap();
        assert_eq!(r.message(), Some("Denied by bob via telegram"));
        let mut denied = i.clone();
        denied.resolution = Some(Box::new(r));
        assert_eq!(deny_instruction(&denied), None);
        let r = resolution_for(
            &i,
            Answer::deny(Some("  truncate it instead ".into())),
            Responder::new("bob", Via::new("telegram")),
            now(),
        )
        .unwrap();
        denied.resolution = Some(Box::new(r));
        assert_eq!(deny_instruction(&denied), Some("truncate it instead"));
        denied.resolution = Some(Box::new(expired(&i, now())));
        assert_eq!(deny_instruction(&denied), None);
    }

    #[test]
    fn question_answers_are_merged_into_the_input() {
        let i = interaction(
            "AskUserQuestion",
            json!({"questions":[{"question":"Which?","header":"H","multiSelect":false,
                "options":[{"label":"A"},{"label":"B"}]}]}),
        );
        let mut given = Map::new();
        given.insert("0".into(), json!("B"));
        let r = resolution_for(
            &i,
            Answer::Answers(given),
            Responder::anonymous(Via::api()),
            now(),
        )
        .unwrap();
        assert_eq!(r.outcome, Outcome::Answered);
        let Some(PermissionResult::Allow { updated_input, .. }) = r.permission().cloned() else {
            panic!("expected allow")
        };
        let updated_input = updated_input.map();
        assert_eq!(updated_input["answers"], json!({"Which?":"B"}));
        assert!(updated_input.contains_key("questions"));
    }

    #[test]
    fn mismatched_answers_are_refused() {
        let q = interaction(
            "AskUserQuestion",
            json!({"questions":[{"question":"Which?","header":"H",
                "options":[{"label":"A"},{"label":"B"}]}]}),
        );
        let a = interaction("Bash", json!({}));
        let who = || Responder::anonymous(Via::api());
        assert!(resolution_for(&q, Answer::allow(), who(), now()).is_err());
        assert!(resolution_for(&a, Answer::Answers(Map::new()), who(), now()).is_err());
        let always = Answer::Allow {
            updated_input: None,
            always: true,
        };
        assert_eq!(
            resolution_for(&a, always, who(), now()).unwrap_err().field,
            "always"
        );
    }

    #[test]
    fn the_audit_names_a_stable_identity_while_people_see_the_name() {
        let r = Responder::new("Alice", Via::new("telegram")).with_actor_id("tg:12345");
        assert_eq!(r.audit_actor().as_deref(), Some("Alice (tg:12345)"));
        let i = interaction("Bash", json!({"command":"ls"}));
        let res = resolution_for(&i, Answer::allow(), r, now()).unwrap();
        assert_eq!(res.by.as_deref(), Some("Alice"));
        let named = Responder::new("bob", Via::desktop());
        assert_eq!(named.audit_actor().as_deref(), Some("bob"));
        assert_eq!(Responder::anonymous(Via::api()).audit_actor(), None);
        let id_only = Responder::anonymous(Via::api()).with_actor_id("tg:7");
        assert_eq!(id_only.audit_actor().as_deref(), Some("tg:7"));
    }

    #[test]
    fn expiry_message_names_the_timeout() {
        let i = interaction("Bash", json!({}));
        assert_eq!(
            expired(&i, now()).message(),
            Some("No response within 300 seconds")
        );
    }
}
