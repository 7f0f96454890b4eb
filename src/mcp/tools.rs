//! The tools' arguments and results: what a model sends, the interaction it becomes, and the
//! answer as text a model reads well plus the structured content the output schemas describe.
//!
//! Pure: no waiting, no registry. [`super::server`] creates and waits; this module says what
//! to create and how to tell the outcome.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::interaction::form::PROMPT_FIELD;
use crate::interaction::{
    ASK_USER_QUESTION, AgentResult, ElicitAction, FORM_TOOL, Form, Interaction, Kind,
    NewInteraction, Outcome, PermissionResult, Resolution, ValidationError,
};

/// The tool an approval is filed under when the request names none.
pub const APPROVAL_TOOL: &str = "request_approval";

/// Fewest and most choices a question shows (the limits of an `AskUserQuestion` question,
/// which every channel renders as buttons).
pub const MIN_CHOICES: usize = 2;
/// See [`MIN_CHOICES`].
pub const MAX_CHOICES: usize = 4;

/// The one field of the form that asks to choose among more than [`MAX_CHOICES`].
const CHOICE_FIELD: &str = "choice";

/// The heading a question gets when the request names none.
const DEFAULT_HEADER: &str = "Question";

/// `request_approval`'s arguments.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct ApprovalArgs {
    /// What you want to do, in one sentence a person can judge on a phone screen, e.g.
    /// "Deploy build 1234 to production".
    pub action: String,
    /// The details a person needs to decide, as an object: e.g. {"command": "..."} or
    /// {"file": "...", "diff": "..."}. Shown field by field.
    #[serde(default)]
    pub details: Option<Map<String, Value>>,
    /// Why you want to do it, briefly.
    #[serde(default)]
    pub reason: Option<String>,
    /// The tool or operation's name, if it has one (e.g. "Bash"): well-known tools' details
    /// are shown in their usual form.
    #[serde(default)]
    pub tool: Option<String>,
    /// Your key for this request (letters, digits and . _ : -, up to 128). Calling again with
    /// the same id and arguments waits for the same request instead of asking again, so a
    /// retried call gets the answer given meanwhile.
    #[serde(default)]
    pub id: Option<String>,
    /// How long to wait for an answer, in seconds (capped by the server's maximum). Default:
    /// the server's approval timeout.
    #[serde(default)]
    pub timeout_secs: Option<u64>,
}

/// `permission_prompt`'s arguments: what Claude Code's `--permission-prompt-tool` sends.
#[derive(Debug, Deserialize, JsonSchema)]
pub(crate) struct PermissionPromptArgs {
    /// The name of the tool requesting permission.
    pub tool_name: String,
    /// The input for the tool.
    pub input: Map<String, Value>,
    /// The unique tool use request ID.
    #[serde(default)]
    pub tool_use_id: Option<String>,
}

/// One choice of `ask_human`: a label, or a label with a description.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(untagged)]
pub(super) enum Choice {
    /// Just the label.
    Label(String),
    /// A label and what it means.
    Described {
        /// The text on the button, and the answer you get back.
        label: String,
        /// A line explaining the choice.
        #[serde(default)]
        description: Option<String>,
    },
}

impl Choice {
    fn into_option(self) -> Value {
        match self {
            Choice::Label(label) => serde_json::json!({"label": label}),
            Choice::Described {
                label,
                description: Some(d),
            } => serde_json::json!({"label": label, "description": d}),
            Choice::Described {
                label,
                description: None,
            } => serde_json::json!({"label": label}),
        }
    }
}

/// `ask_human`'s arguments.
///
/// One shape for every kind of question: `question` alone asks for free text, with `choices`
/// it asks to choose, with `schema` it asks to fill in a form (the `requestedSchema` of MCP
/// elicitation).
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct AskArgs {
    /// The question, complete enough to answer without other context.
    pub question: String,
    /// The answers to choose from: 2 to 4, each a label or {"label", "description"}. A person
    /// may also type their own answer instead.
    #[serde(default)]
    pub choices: Option<Vec<Choice>>,
    /// Whether several choices may be picked (default: one).
    #[serde(default)]
    pub multiple: bool,
    /// A short heading for the question (a word or two), e.g. "Database".
    #[serde(default)]
    pub header: Option<String>,
    /// A form to fill in instead of choices: a flat JSON Schema object of fields, as in MCP
    /// elicitation's requestedSchema, e.g. {"type": "object", "properties": {"name": {"type":
    /// "string"}, "age": {"type": "integer", "minimum": 0}}, "required": ["name"]}. Fields may
    /// be string (minLength, maxLength, pattern, format email/uri/date/date-time), number or
    /// integer (minimum, maximum), boolean, a choice (enum, or oneOf of {const, title}) or
    /// several choices (type array, items.enum). The answer comes back as `content`.
    #[serde(default)]
    pub schema: Option<Map<String, Value>>,
    /// Your key for this question (letters, digits and . _ : -, up to 128). Calling again with
    /// the same id and arguments waits for the same question instead of asking again.
    #[serde(default)]
    pub id: Option<String>,
    /// How long to wait for an answer, in seconds (capped by the server's maximum). Default:
    /// the server's question timeout.
    #[serde(default)]
    pub timeout_secs: Option<u64>,
}

/// Why a call cannot become an interaction, in words for the model (a tool error).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub(crate) struct Refusal(pub String);

impl Refusal {
    /// A refusal naming `field` of the tool's arguments.
    pub(super) fn field(field: &str, message: impl std::fmt::Display) -> Self {
        Self(format!("{field}: {message}"))
    }
}

/// Who is asking: the MCP client and its session.
#[derive(Clone, Debug, Default)]
pub(crate) struct Caller {
    /// `<name>/<version>` from the client's `initialize`.
    pub agent: Option<String>,
    /// The `Mcp-Session-Id` of the call.
    pub session: Option<String>,
}

impl Caller {
    fn fill(&self, new: NewInteraction) -> NewInteraction {
        NewInteraction {
            agent: self.agent.clone(),
            session: self.session.clone(),
            ..new
        }
    }
}

/// The interaction `request_approval` asks for.
pub(super) fn approval(args: ApprovalArgs, caller: &Caller) -> Result<NewInteraction, Refusal> {
    if args.action.trim().is_empty() {
        return Err(Refusal::field(
            "action",
            "must say what you want to do, in words",
        ));
    }
    let tool = args
        .tool
        .filter(|t| !t.trim().is_empty())
        .unwrap_or_else(|| APPROVAL_TOOL.to_string());
    if Kind::of_tool(&tool) != Kind::Approval {
        return Err(Refusal::field(
            "tool",
            format!("{tool} is a question, not an action: ask it with ask_human"),
        ));
    }
    Ok(caller.fill(NewInteraction {
        id: args.id,
        title: Some(args.action),
        description: args.reason.filter(|r| !r.trim().is_empty()),
        timeout_secs: args.timeout_secs,
        ..NewInteraction::new(tool, args.details.unwrap_or_default())
    }))
}

/// The interaction `permission_prompt` asks for: the tool call exactly as Claude Code sent
/// it, under its tool-use id.
pub(super) fn permission(
    args: PermissionPromptArgs,
    caller: &Caller,
) -> Result<NewInteraction, Refusal> {
    if args.tool_name.trim().is_empty() {
        return Err(Refusal::field("tool_name", "must not be empty"));
    }
    Ok(caller.fill(NewInteraction {
        id: args.tool_use_id.filter(|t| !t.is_empty()),
        ..NewInteraction::new(args.tool_name, args.input)
    }))
}

/// The interaction `ask_human` asks for: an `AskUserQuestion` question with `choices`, a
/// form with `schema`, or else a free-text prompt.
pub(super) fn question(mut args: AskArgs, caller: &Caller) -> Result<NewInteraction, Refusal> {
    if args.question.trim().is_empty() {
        return Err(Refusal::field("question", "must not be empty"));
    }
    let choices = match (args.choices.take(), args.schema.take()) {
        (Some(_), Some(_)) => {
            return Err(Refusal(
                "schema: give either `choices` or `schema`, not both (a form field can be a \
                 choice: {\"type\": \"string\", \"enum\": [...]})"
                    .into(),
            ));
        }
        (None, Some(schema)) => {
            if args.multiple {
                return Err(Refusal::field(
                    "multiple",
                    "applies to `choices`; in a form, a field of type array takes several",
                ));
            }
            return ask_form(&args, caller, Value::Object(schema));
        }
        (None, None) => {
            if args.multiple {
                return Err(Refusal::field("multiple", "applies to `choices`"));
            }
            return ask_form(&args, caller, Form::prompt_schema(false));
        }
        (Some(choices), None) => choices,
    };
    if choices.len() < MIN_CHOICES {
        return Err(Refusal::field(
            "choices",
            format!(
                "give at least {MIN_CHOICES} (got {}); to ask whether to do something, use \
                 request_approval",
                choices.len()
            ),
        ));
    }
    if choices.len() > MAX_CHOICES {
        // More than every channel's question buttons hold: one list field of a form.
        let schema = choices_schema(&args, choices)?;
        return ask_form(&args, caller, schema);
    }
    Ok(choices_question(args, choices, caller))
}

/// `ask_human` as a form of `schema`, headed by the question.
fn ask_form(args: &AskArgs, caller: &Caller, schema: Value) -> Result<NewInteraction, Refusal> {
    let input = Form::input(&args.question, schema);
    Form::from_input(&input).map_err(|e| {
        Refusal::field(&e.field.replacen("requestedSchema", "schema", 1), e.message)
    })?;
    Ok(caller.fill(NewInteraction {
        id: args.id.clone(),
        title: args.header.clone().filter(|h| !h.trim().is_empty()),
        timeout_secs: args.timeout_secs,
        ..NewInteraction::new(FORM_TOOL, input)
    }))
}

/// More choices than question buttons hold, as a form's one list field (one choice, or
/// several with `multiple`); more than a list field holds is refused.
fn choices_schema(args: &AskArgs, choices: Vec<Choice>) -> Result<Value, Refusal> {
    if choices.len() > crate::interaction::form::MAX_OPTIONS {
        return Err(Refusal::field(
            "choices",
            format!(
                "at most {} (got {}). Narrow them down, or split the question into \
                 several (e.g. first the category, then the item)",
                crate::interaction::form::MAX_OPTIONS,
                choices.len()
            ),
        ));
    }
    let options: Vec<Value> = choices
        .into_iter()
        .map(|c| {
            let label = match c {
                Choice::Label(l) | Choice::Described { label: l, .. } => l,
            };
            serde_json::json!({"const": label, "title": label})
        })
        .collect();
    let title = args.header.clone().unwrap_or_else(|| "Choose".to_string());
    let field = if args.multiple {
        serde_json::json!({"type": "array", "title": title, "items": {"anyOf": options}, "minItems": 1})
    } else {
        serde_json::json!({"type": "string", "title": title, "oneOf": options})
    };
    let mut properties = Map::new();
    properties.insert(CHOICE_FIELD.into(), field);
    Ok(serde_json::json!({
        "type": "object",
        "properties": properties,
        "required": [CHOICE_FIELD],
    }))
}

/// `ask_human` with a few `choices`: an `AskUserQuestion` question.
fn choices_question(args: AskArgs, choices: Vec<Choice>, caller: &Caller) -> NewInteraction {
    let header = args
        .header
        .filter(|h| !h.trim().is_empty())
        .unwrap_or_else(|| DEFAULT_HEADER.to_string());
    let mut input = Map::new();
    input.insert(
        "questions".into(),
        serde_json::json!([{
            "question": args.question,
            "header": header,
            "options": choices.into_iter().map(Choice::into_option).collect::<Vec<_>>(),
            "multiSelect": args.multiple,
        }]),
    );
    caller.fill(NewInteraction {
        id: args.id,
        timeout_secs: args.timeout_secs,
        ..NewInteraction::new(ASK_USER_QUESTION, input)
    })
}

/// A core validation error in the words of `ask_human`'s arguments (the core names the
/// `AskUserQuestion` input it was turned into).
pub(crate) fn ask_field(e: &ValidationError) -> String {
    let field = e
        .field
        .replace("questions[0].options", "choices")
        .replace("questions[0].question", "question")
        .replace("questions[0].header", "header")
        .replace("].label", "]");
    format!("{field}: {}", e.message)
}

/// How an interaction ended, as the tools report it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    /// An approval was given.
    Approved,
    /// An approval was refused.
    Denied,
    /// A question was answered.
    Answered,
    /// A person declined to answer the question.
    Declined,
    /// Nobody answered before the deadline.
    Expired,
    /// The request was withdrawn (by the client, or imrelay gave it up).
    Cancelled,
}

impl Status {
    fn of(outcome: Outcome) -> Self {
        match outcome {
            Outcome::Allowed => Status::Approved,
            Outcome::Denied => Status::Denied,
            Outcome::Answered => Status::Answered,
            Outcome::Expired => Status::Expired,
            Outcome::Cancelled => Status::Cancelled,
        }
    }
}

/// `request_approval`'s structured result.
#[derive(Debug, Serialize, Deserialize, JsonSchema)]
pub struct ApprovalResult {
    /// What happened and what to do, in a sentence (the same as the text content), e.g.
    /// "Denied by alice via telegram: not on a Friday. Do not go ahead."
    pub summary: String,
    /// `approved`, `denied`, `expired` (nobody answered in time) or `cancelled`.
    pub status: Status,
    /// Whether you may go ahead: true only when a person approved.
    pub approved: bool,
    /// The person's reason for a denial, or why the request ended unanswered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// Who answered, when a person did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub by: Option<String>,
    /// Where the answer came from (telegram, feishu, desktop, ...).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub via: Option<String>,
    /// The details as the person edited them before approving: use these instead of yours.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub details: Option<Map<String, Value>>,
    /// The request's id in imrelay.
    pub id: String,
}

/// `ask_human`'s structured result.
#[derive(Debug, Serialize, Deserialize, JsonSchema)]
pub struct AskResult {
    /// What happened, in a sentence (the same as the text content), e.g. "Alice via telegram
    /// chose: SQLite".
    pub summary: String,
    /// `answered`, `declined`, `expired` (nobody answered in time) or `cancelled`.
    pub status: Status,
    /// The answer as text: the chosen label(s), joined with ", ", or what the person typed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub answer: Option<String>,
    /// The chosen labels, in the order given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selected: Option<Vec<String>>,
    /// Text the person typed instead of (or besides) choosing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub other: Option<String>,
    /// A form's fields, when the question was a form.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content: Option<Map<String, Value>>,
    /// Why the question ended unanswered, or the person's reason for declining.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// Who answered, when a person did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub by: Option<String>,
    /// Where the answer came from (telegram, feishu, desktop, ...).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub via: Option<String>,
    /// The question's id in imrelay.
    pub id: String,
}

/// A result for the model: what it reads, and the same as structured content.
///
/// Some clients show the model only one of the two (Codex only the structured content), so
/// each says everything: the structured content carries the text as its `summary`.
#[derive(Debug)]
pub(crate) struct Told {
    /// The text content.
    pub text: String,
    /// The structured content, as the tool's output schema describes it; none for a tool
    /// without one (`permission_prompt`).
    pub structured: Option<Value>,
}

fn structured(v: &impl Serialize) -> Option<Value> {
    // The result types serialize to objects: nothing in them can fail.
    serde_json::to_value(v).ok()
}

/// "alice via telegram", "via telegram", or "" for imrelay itself.
fn who(r: &Resolution) -> String {
    let via = (r.via.as_str() != "system").then(|| r.via.as_str());
    match (&r.by, via) {
        (Some(by), Some(via)) => format!("{by} via {via}"),
        (Some(by), None) => by.clone(),
        (None, Some(via)) => format!("via {via}"),
        (None, None) => String::new(),
    }
}

fn person(r: &Resolution) -> (Option<String>, Option<String>) {
    (
        r.by.clone(),
        (r.via.as_str() != "system").then(|| r.via.to_string()),
    )
}

/// The message of a resolution that is not an allow: why it ended (expired, cancelled), or
/// the person's own words for a no (not the default message, which only repeats who said it).
fn end_message(r: &Resolution, status: Status) -> Option<String> {
    let m = r.message()?;
    if matches!(status, Status::Expired | Status::Cancelled) {
        return Some(m.to_string());
    }
    let by = who(r);
    let generic = [format!("Denied {by}"), format!("Denied by {by}")];
    let repeated = generic.iter().any(|g| g == m)
        || m.starts_with("The question was declined")
        || m.starts_with("The form was declined");
    (!repeated).then(|| m.to_string())
}

/// What `request_approval` tells the model about the resolved `i`.
pub(crate) fn approval_told(i: &Interaction, r: &Resolution) -> Told {
    let (by, via) = person(r);
    let status = Status::of(r.outcome);
    let mut result = ApprovalResult {
        summary: String::new(),
        status,
        approved: r.outcome == Outcome::Allowed,
        message: None,
        by,
        via,
        details: None,
        id: i.id.to_string(),
    };
    let text = match &r.result {
        AgentResult::Permission(PermissionResult::Allow { updated_input, .. }) => {
            let mut text = format!("Approved by {}.", who(r));
            if updated_input != &i.input {
                let edited = updated_input.map();
                text.push_str(&format!(
                    " The details were edited before approval; use these instead of yours: {}",
                    Value::Object(edited.clone())
                ));
                result.details = Some(edited);
            }
            text.push_str(" Go ahead.");
            text
        }
        AgentResult::Permission(PermissionResult::Deny { .. }) | AgentResult::Elicit(_) => {
            result.message = end_message(r, status);
            match (status, result.message.as_deref()) {
                (Status::Expired, Some(m)) => {
                    format!("{m}: not approved. Do not go ahead without asking again.")
                }
                (Status::Cancelled, Some(m)) => {
                    format!("The request was cancelled ({m}): not approved.")
                }
                (_, Some(m)) => format!("Denied by {}: {m}. Do not go ahead.", who(r)),
                (_, None) => format!("Denied by {}. Do not go ahead.", who(r)),
            }
        }
    };
    result.summary = text.clone();
    Told {
        structured: structured(&result),
        text,
    }
}

/// What `permission_prompt` tells Claude Code about its resolved request: the permission
/// result as JSON text, which Claude Code parses (`{"behavior":"allow","updatedInput":{...}}`
/// or `{"behavior":"deny","message":"...","interrupt":false}`), and nothing else.
pub(crate) fn permission_told(r: &Resolution) -> Told {
    let result = match r.permission() {
        Some(p) => p.clone(),
        None => PermissionResult::Deny {
            message: "The request was answered with something other than a decision".into(),
            interrupt: false,
        },
    };
    Told {
        text: serde_json::to_string(&result).unwrap_or_default(),
        structured: None,
    }
}

/// What `ask_human` tells the model about the resolved `i`.
pub(crate) fn ask_told(i: &Interaction, r: &Resolution) -> Told {
    let (by, via) = person(r);
    let status = match r.outcome {
        Outcome::Denied => Status::Declined,
        other => Status::of(other),
    };
    let mut result = AskResult {
        summary: String::new(),
        status,
        answer: None,
        selected: None,
        other: None,
        content: None,
        message: None,
        by,
        via,
        id: i.id.to_string(),
    };
    let text = match &r.result {
        AgentResult::Elicit(e) if e.action == ElicitAction::Accept => {
            form_told(i, r, e.content.clone().unwrap_or_default(), &mut result)
        }
        AgentResult::Elicit(_) | AgentResult::Permission(PermissionResult::Deny { .. }) => {
            result.message = end_message(r, status);
            match (status, result.message.as_deref()) {
                (Status::Expired, Some(m)) => format!("{m}: the question was not answered."),
                (Status::Cancelled, Some(m)) => format!("The question was cancelled ({m})."),
                (_, Some(m)) => format!("{} declined to answer: {m}", who(r)),
                (_, None) => format!("{} declined to answer.", who(r)),
            }
        }
        AgentResult::Permission(PermissionResult::Allow { updated_input, .. }) => {
            question_told(i, r, &updated_input.map(), &mut result)
        }
    };
    result.summary = text.clone();
    Told {
        structured: structured(&result),
        text,
    }
}

/// A form filled in (`content`): a choice, a single answer or the fields, as the model
/// reads them; `result` takes the same.
fn form_told(
    i: &Interaction,
    r: &Resolution,
    content: Map<String, Value>,
    result: &mut AskResult,
) -> String {
    let text = match Form::from_input(&i.input.map()) {
        Ok(form)
            if form.fields.len() == 1
                && form.fields[0].name == CHOICE_FIELD
                && !form.fields[0].options().is_empty() =>
        {
            let selected: Vec<String> = match content.get(CHOICE_FIELD) {
                Some(Value::String(s)) => vec![s.clone()],
                Some(Value::Array(items)) => items
                    .iter()
                    .filter_map(|v| v.as_str().map(str::to_string))
                    .collect(),
                _ => Vec::new(),
            };
            let answer = selected.join(", ");
            let text = format!("{} chose: {answer}", who(r));
            result.answer = Some(answer);
            result.selected = Some(selected);
            text
        }
        Ok(form) if form.is_single_text() => {
            let answer = content
                .get(PROMPT_FIELD)
                .or_else(|| content.values().next())
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string();
            let text = format!("{} answered: {answer}", who(r));
            result.answer = Some(answer);
            text
        }
        Ok(form) => {
            let lines: Vec<String> = form
                .summary(&content)
                .into_iter()
                .map(|(k, v)| format!("{k}: {v}"))
                .collect();
            format!(
                "{} filled in the form: {}. The values: {}",
                who(r),
                lines.join("; "),
                Value::Object(content.clone())
            )
        }
        Err(_) => format!("{} answered: {}", who(r), Value::Object(content.clone())),
    };
    result.content = Some(content);
    text
}

/// A question answered (`answered`, the allowed input): the options chosen and the
/// person's own words; `result` takes the same.
fn question_told(
    i: &Interaction,
    r: &Resolution,
    answered: &Map<String, Value>,
    result: &mut AskResult,
) -> String {
    let (question, labels, multiple) = first_question(&i.input.map());
    let answer = answered
        .get("answers")
        .and_then(|a| a.get(&question))
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    let (selected, other) = split_answer(&answer, &labels, multiple);
    let text = match (&selected[..], &other) {
        ([], Some(o)) => format!("{} answered in their own words: {o}", who(r)),
        (chosen, None) => format!("{} chose: {}", who(r), chosen.join(", ")),
        (chosen, Some(o)) => format!(
            "{} chose: {}, and added in their own words: {o}",
            who(r),
            chosen.join(", ")
        ),
    };
    result.answer = Some(answer);
    result.selected = Some(selected);
    result.other = other;
    text
}

/// The first question's text, its option labels and whether it is multi-select.
fn first_question(input: &Map<String, Value>) -> (String, Vec<String>, bool) {
    let q = input
        .get("questions")
        .and_then(|q| q.get(0))
        .cloned()
        .unwrap_or_default();
    let text = q["question"].as_str().unwrap_or_default().to_string();
    let labels = q["options"]
        .as_array()
        .map(|o| {
            o.iter()
                .filter_map(|o| o["label"].as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default();
    (text, labels, q["multiSelect"].as_bool().unwrap_or(false))
}

/// Splits a question's answer (as the core keeps it: a label, labels joined with ", ", or
/// typed text, for a multi-select question labels and at most one typed text joined) into the
/// chosen labels and the typed text. Labels may themselves contain ", ": the split reads the
/// answer as labels wherever it can, and as typed text only where it must.
pub fn split_answer(
    answer: &str,
    labels: &[String],
    multiple: bool,
) -> (Vec<String>, Option<String>) {
    if answer.is_empty() {
        return (Vec::new(), None);
    }
    if labels.iter().any(|l| l == answer) {
        return (vec![answer.to_string()], None);
    }
    if !multiple {
        return (Vec::new(), Some(answer.to_string()));
    }
    let parts: Vec<&str> = answer.split(", ").collect();
    // Segments of parts[from..], with or without a typed text left to place; `None` when no
    // reading exists. Answers are short (a few labels), so plain recursion does.
    fn read(
        parts: &[&str],
        labels: &[String],
        typed_left: bool,
    ) -> Option<(Vec<String>, Option<String>)> {
        if parts.is_empty() {
            return Some((Vec::new(), None));
        }
        for end in 1..=parts.len() {
            let segment = parts[..end].join(", ");
            if labels.contains(&segment)
                && let Some((mut rest, typed)) = read(&parts[end..], labels, typed_left)
            {
                rest.insert(0, segment);
                return Some((rest, typed));
            }
        }
        if typed_left {
            // The typed text: as short as lets the rest read as labels.
            for end in 1..=parts.len() {
                if let Some((rest, None)) = read(&parts[end..], labels, false) {
                    return Some((rest, Some(parts[..end].join(", "))));
                }
            }
        }
        None
    }
    read(&parts, labels, true).unwrap_or_else(|| (Vec::new(), Some(answer.to_string())))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(l: &[&str]) -> Vec<String> {
        l.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn answers_split_into_labels_and_typed_text() {
        let l = labels(&["Red", "Blue", "Salt, pepper"]);
        let s = |a: &str| split_answer(a, &l, true);
        assert_eq!(s("Red"), (labels(&["Red"]), None));
        assert_eq!(s("Red, Blue"), (labels(&["Red", "Blue"]), None));
        assert_eq!(
            s("Salt, pepper, Red"),
            (labels(&["Salt, pepper", "Red"]), None)
        );
        assert_eq!(
            s("Red, green, please"),
            (labels(&["Red"]), Some("green, please".into()))
        );
        assert_eq!(s("Teal, Blue"), (labels(&["Blue"]), Some("Teal".into())));
        assert_eq!(s("Purple"), (vec![], Some("Purple".into())));
        assert_eq!(s(""), (vec![], None));
        // Single-select: a label or typed text, never split.
        assert_eq!(
            split_answer("Red, Blue", &l, false),
            (vec![], Some("Red, Blue".into()))
        );
        assert_eq!(
            split_answer("Salt, pepper", &l, false),
            (labels(&["Salt, pepper"]), None)
        );
    }

    #[test]
    fn core_errors_are_named_in_ask_human_terms() {
        let e = ValidationError::new("questions[0].options[1].label", "duplicates another");
        assert_eq!(ask_field(&e), "choices[1]: duplicates another");
        let e = ValidationError::new("questions[0].question", "must not be empty");
        assert_eq!(ask_field(&e), "question: must not be empty");
    }

    #[test]
    fn choice_counts_decide_buttons_a_list_field_or_a_refusal() {
        let ask = |n: usize| {
            question(
                AskArgs {
                    question: "Which?".into(),
                    choices: Some((0..n).map(|i| Choice::Label(format!("c{i}"))).collect()),
                    multiple: false,
                    header: None,
                    schema: None,
                    id: None,
                    timeout_secs: None,
                },
                &Caller::default(),
            )
        };
        assert!(ask(1).unwrap_err().0.contains("request_approval"));
        assert!(ask(51).unwrap_err().0.contains("at most 50"));
        let list = ask(5).unwrap();
        assert_eq!(list.tool_name, FORM_TOOL);
        assert_eq!(
            list.input["requestedSchema"]["properties"]["choice"]["oneOf"][4]["const"],
            "c4"
        );
        let new = ask(4).unwrap();
        assert_eq!(new.tool_name, ASK_USER_QUESTION);
        assert_eq!(new.input["questions"][0]["header"], "Question");
        assert_eq!(new.input["questions"][0]["options"][3]["label"], "c3");
    }
}
