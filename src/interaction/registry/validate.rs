//! What a new interaction must be: the request type, its bounds, and the timeouts it gets.

use serde_json::{Map, Value};

use super::Registry;
use crate::interaction::ValidationError;
use crate::interaction::form::Form;
use crate::interaction::model::{Input, Interaction, InteractionId, Kind, now};
use crate::interaction::question::parse_questions;
use crate::sync::RwLockExt;

/// Longest accepted `tool_name`, in characters.
const MAX_TOOL_NAME: usize = 200;

/// Longest accepted short label (`session`, `agent`), in characters.
const MAX_LABEL: usize = 200;

/// Longest accepted text field (`title`, `description`, `cwd`), in characters.
const MAX_TEXT: usize = 16 * 1024;

/// A request to create an interaction, as an agent sends it.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct NewInteraction {
    /// The agent's idempotency key (e.g. the SDK's `toolUseID`); a UUID v7 if absent.
    pub id: Option<String>,
    /// The tool name, exactly as `canUseTool` received it.
    pub tool_name: String,
    /// The tool input, exactly as `canUseTool` received it.
    pub input: Map<String, Value>,
    /// The input's JSON text as the agent sent it, if it sent text: the interaction keeps it
    /// as its input, so the agent gets back exactly what it sent (a parsed [`Value`] rewrites
    /// some numbers). `input` must be its parsed form, as [`NewInteraction::from_json`] makes
    /// both. `None`: the input is written out from `input`.
    pub input_text: Option<Input>,
    /// The agent's session label.
    pub session: Option<String>,
    /// Which agent is asking.
    pub agent: Option<String>,
    /// Human-readable title from the SDK's context.
    pub title: Option<String>,
    /// Human-readable description from the SDK's context.
    pub description: Option<String>,
    /// The agent's working directory.
    pub cwd: Option<String>,
    /// Requested timeout in seconds (clamped to the configured maximum).
    pub timeout_secs: Option<u64>,
    /// Permission suggestions ("always allow" rules) the agent offers: an array of the SDK's
    /// permission updates (see [`crate::interaction::validate_suggestions`]); `[]` is none.
    pub suggestions: Option<Value>,
    /// The agent cannot take an edited input: an allow with one is refused
    /// ([`crate::interaction::Interaction::input_fixed`]).
    pub input_fixed: bool,
    /// Labels routes match on (`prod`, `project:shop`): at most [`MAX_LABELS`], each a
    /// short name.
    pub labels: Vec<String>,
}

/// The most labels one interaction may carry.
pub const MAX_LABELS: usize = 16;
/// The longest label, in characters.
pub const MAX_LABEL_CHARS: usize = 64;

impl NewInteraction {
    /// A request with just a tool name and input.
    pub fn new(tool_name: impl Into<String>, input: Map<String, Value>) -> Self {
        Self {
            tool_name: tool_name.into(),
            input,
            ..Self::default()
        }
    }

    /// A request with just a tool name and an input the agent sent as JSON text, which the
    /// interaction keeps as written (see [`NewInteraction::input_text`]).
    pub fn from_json(
        tool_name: impl Into<String>,
        input: &serde_json::value::RawValue,
    ) -> Result<Self, ValidationError> {
        let text = Input::from_json(input)?;
        let map = serde_json::from_str(text.as_json())
            .map_err(|e| ValidationError::new("input", e.to_string()))?;
        Ok(Self {
            input_text: Some(text),
            ..Self::new(tool_name, map)
        })
    }
}

fn check_len(v: &Option<String>, field: &str, max: usize) -> Result<(), ValidationError> {
    if let Some(s) = v
        && s.chars().count() > max
    {
        return Err(ValidationError::new(
            field,
            format!("is longer than {max} characters"),
        ));
    }
    Ok(())
}

/// Checks the tool name and the text fields against their bounds.
fn check_text(new: &NewInteraction) -> Result<(), ValidationError> {
    if new.tool_name.trim().is_empty() {
        return Err(ValidationError::new("tool_name", "must not be empty"));
    }
    if new.tool_name.chars().count() > MAX_TOOL_NAME {
        return Err(ValidationError::new(
            "tool_name",
            format!("is longer than {MAX_TOOL_NAME} characters"),
        ));
    }
    check_len(&new.session, "session", MAX_LABEL)?;
    check_len(&new.agent, "agent", MAX_LABEL)?;
    check_len(&new.title, "title", MAX_TEXT)?;
    check_len(&new.description, "description", MAX_TEXT)?;
    check_len(&new.cwd, "cwd", MAX_TEXT)
}

/// Checks the labels: how many, and each one's length and characters.
fn check_labels(labels: &[String]) -> Result<(), ValidationError> {
    if labels.len() > MAX_LABELS {
        return Err(ValidationError::new(
            "labels",
            format!("has more than {MAX_LABELS} labels"),
        ));
    }
    for (k, l) in labels.iter().enumerate() {
        if l.trim().is_empty()
            || l.chars().count() > MAX_LABEL_CHARS
            || l.chars().any(char::is_control)
        {
            return Err(ValidationError::new(
                format!("labels[{k}]"),
                format!("must be 1 to {MAX_LABEL_CHARS} characters, without control characters"),
            ));
        }
    }
    Ok(())
}

/// Checks that a question's or a form's input is one (an approval's input may be anything).
fn check_input(kind: Kind, input: &Map<String, Value>) -> Result<(), ValidationError> {
    match kind {
        Kind::Question => {
            parse_questions(input)?;
        }
        Kind::Form => {
            Form::from_input(input)?;
        }
        Kind::Approval => {}
    }
    Ok(())
}

impl Registry {
    /// The timeout an interaction of `kind` gets when `requested` seconds were asked for.
    pub fn timeout_for(&self, kind: Kind, requested: Option<u64>) -> Result<u64, ValidationError> {
        let cfg = &self.inner.config;
        let default = match kind {
            Kind::Approval => cfg.approval_timeout,
            Kind::Question | Kind::Form => cfg.question_timeout,
        };
        let max = cfg.max_timeout.as_secs().max(1);
        match requested {
            Some(0) => Err(ValidationError::new("timeout_secs", "must be at least 1")),
            Some(s) => Ok(s.min(max)),
            None => Ok(default.as_secs().clamp(1, max)),
        }
    }

    pub(super) fn build(&self, new: NewInteraction) -> Result<Interaction, ValidationError> {
        let id = match &new.id {
            Some(raw) => InteractionId::parse(raw)?,
            None => InteractionId::generate(),
        };
        check_text(&new)?;
        let suggestions = new
            .suggestions
            .map(crate::interaction::validate_suggestions)
            .transpose()?
            .flatten();
        check_labels(&new.labels)?;
        let kind = Kind::of_tool(&new.tool_name);
        check_input(kind, &new.input)?;
        let requested = new.timeout_secs;
        let timeout_secs = self.timeout_for(kind, requested)?;
        let [tool_name, session, agent, cwd] = self.inner.texts.share_each([
            Some(new.tool_name.as_str()),
            new.session.as_deref(),
            new.agent.as_deref(),
            new.cwd.as_deref(),
        ]);
        let mut interaction = Interaction {
            session,
            agent,
            cwd,
            suggestions: suggestions.map(Box::new),
            input_fixed: new.input_fixed,
            ..Interaction::pending(
                id,
                tool_name.unwrap_or_default(),
                new.input_text
                    .unwrap_or_else(|| Input::from_map(&new.input)),
                now(),
                timeout_secs,
            )
        };
        interaction.set_title(new.title.map(String::into_boxed_str));
        interaction.set_description(new.description.map(String::into_boxed_str));
        interaction.set_labels(new.labels.into_iter().map(String::into_boxed_str).collect());
        self.stamp_route(&mut interaction, requested);
        if self.inner.config.audit {
            // The creation's audit entry refers to the digest; the map is at hand now.
            interaction.prime_digest(&new.input);
        }
        Ok(interaction)
    }

    /// "Desk first": when its route holds the phones and one of its approvers (anyone, for a
    /// route that names none) is at the desk, the time the phones are told.
    fn stamp_desk_first(&self, interaction: &mut Interaction) {
        let Some(hold) = interaction.route.as_ref().and_then(|r| r.desk_first_secs) else {
            return;
        };
        let presence = self.presence();
        let present = match interaction.route.as_deref().map(|r| &r.approvers) {
            Some(approvers) if !approvers.is_empty() => {
                let teams = self.teams();
                teams
                    .people
                    .expand(approvers)
                    .is_ok_and(|a| a.names().any(|n| presence.is_present(n)))
            }
            _ => presence.anyone(),
        };
        if present {
            let at = crate::interaction::after(
                interaction.created_at,
                std::time::Duration::from_secs(hold),
            );
            interaction.set_phones_at(Some(at.min(interaction.deadline)));
        }
    }

    /// Stamps a new interaction with its route: the route's timeout (when it has one, the
    /// default and the longest its interactions wait; `requested` is what was asked for),
    /// the route itself, and for an approval the quorum it needs.
    fn stamp_route(&self, interaction: &mut Interaction, requested: Option<u64>) {
        let routes = self.routes();
        if let Some(route) = routes.route_for(interaction)
            && let Some(limit) = route.spec().timeout_secs
        {
            // The route's timeout is the default and the longest its interactions wait.
            let max = self.inner.config.max_timeout.as_secs().max(1);
            let secs = requested.unwrap_or(limit).min(limit).min(max);
            interaction.deadline = interaction
                .created_at
                .checked_add(jiff::SignedDuration::from_secs(
                    i64::try_from(secs).unwrap_or(i64::MAX),
                ))
                .unwrap_or(jiff::Timestamp::MAX);
        }
        interaction.route = routes.stamp_for(interaction);
        self.stamp_desk_first(interaction);
        if interaction.kind == Kind::Approval {
            // The route's and the matching ask rules' quorum, the stricter: stamped now so
            // every process counts the same votes.
            let policy = self.inner.policy.reading().clone();
            let quorum = crate::interaction::quorum::Quorum::stricter(
                routes.route_for(interaction).and_then(|r| r.quorum()),
                policy.quorum_for(interaction),
            );
            interaction.set_quorum(quorum);
            // An ask rule asking for a passkey: this interaction's own copy of the stamp
            // says so (the route's is shared by every interaction taking it).
            if policy.step_up_for(interaction)
                && !interaction.route.as_ref().is_some_and(|r| r.step_up)
            {
                let mut stamp = interaction
                    .route
                    .as_deref()
                    .cloned()
                    .unwrap_or_else(crate::interaction::routes::RouteStamp::default_route);
                stamp.step_up = true;
                interaction.route = Some(std::sync::Arc::new(stamp));
            }
        }
    }
}
