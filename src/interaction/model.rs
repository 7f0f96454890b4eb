//! The interaction model: what an agent asks, and how it was answered.
//!
//! An [`Interaction`] is created from exactly what an agent's `canUseTool` callback receives
//! (`tool_name` and `input`) plus a little context. It is immutable except for one step: it
//! gains a [`Resolution`] exactly once. The [`PermissionResult`] inside a resolution is the
//! Claude Agent SDK's own type, so an agent can hand it back to the SDK unchanged.

use std::fmt;
use std::sync::Arc;

use jiff::Timestamp;
use serde::ser::SerializeStruct;
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use serde_json::{Map, Value};

use super::ValidationError;
use super::form::{ElicitAction, ElicitResult};

/// The tool name the Claude Agent SDK uses for structured questions.
pub const ASK_USER_QUESTION: &str = "AskUserQuestion";

/// The tool name of a patch to files in the `*** Begin Patch` format (Codex's `apply_patch`),
/// with the patch text as `patch`: an agent adapter maps its agent's patch tool onto it.
/// Claude Code has no tool of this name; it reads as one on every surface ("Approval for
/// Patch"). Another agent's `Patch` whose input is not such a patch is shown field by field.
pub const PATCH_TOOL: &str = "Patch";

/// Longest accepted interaction id, in bytes.
pub const MAX_ID_LEN: usize = 128;

/// Identifies one interaction: the agent's idempotency key (normally the SDK's `toolUseID`)
/// or a UUID v7 assigned by imrelay.
///
/// Ids appear in URLs, so they are restricted to `[A-Za-z0-9._:-]`, 1 to 128 bytes, and may
/// not be `.` or `..` (URL normalization removes those path segments: no browser could
/// answer such an interaction).
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(transparent)]
pub struct InteractionId(Arc<str>);

impl InteractionId {
    /// Validates an id supplied from outside.
    pub fn parse(raw: &str) -> Result<Self, ValidationError> {
        if raw == "." || raw == ".." {
            return Err(ValidationError::new(
                "id",
                "may not be `.` or `..`: URLs cannot carry those as a path segment",
            ));
        }
        Self::stored(raw)
    }

    /// Validates an id read back from the store: as [`InteractionId::parse`], but a dot
    /// segment that an earlier version accepted is still read.
    pub fn stored(raw: &str) -> Result<Self, ValidationError> {
        if raw.is_empty() || raw.len() > MAX_ID_LEN {
            return Err(ValidationError::new(
                "id",
                format!("must be 1 to {MAX_ID_LEN} characters long"),
            ));
        }
        if let Some(bad) = raw
            .chars()
            .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | ':' | '-')))
        {
            return Err(ValidationError::new(
                "id",
                format!("may only contain letters, digits and . _ : - (found {bad:?})"),
            ));
        }
        Ok(Self(raw.into()))
    }

    /// A fresh, time-ordered id (UUID v7).
    pub fn generate() -> Self {
        Self(uuid::Uuid::now_v7().to_string().into())
    }

    /// The id as a string slice.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl<'de> Deserialize<'de> for InteractionId {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let raw = String::deserialize(d)?;
        Self::stored(&raw).map_err(serde::de::Error::custom)
    }
}

impl fmt::Display for InteractionId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Debug for InteractionId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&*self.0, f)
    }
}

impl AsRef<str> for InteractionId {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

/// What kind of answer an interaction needs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    /// May the agent run this tool call? Answered allow or deny.
    Approval,
    /// An `AskUserQuestion`: answered by choosing options or typing "Other" text.
    Question,
    /// A form (an MCP elicitation, a free-text prompt): answered by filling in fields, or
    /// declined.
    Form,
}

impl Kind {
    /// The kind implied by a tool name.
    pub fn of_tool(tool_name: &str) -> Self {
        match tool_name {
            ASK_USER_QUESTION => Kind::Question,
            super::form::FORM_TOOL => Kind::Form,
            _ => Kind::Approval,
        }
    }

    /// The lowercase label used in JSON, logs and metrics.
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Approval => "approval",
            Kind::Question => "question",
            Kind::Form => "form",
        }
    }
}

/// How an interaction ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// An approval was allowed.
    Allowed,
    /// A person denied it (an approval, or a question they declined to answer).
    Denied,
    /// A question was answered, or a form filled in.
    Answered,
    /// Nobody answered before the deadline; the agent was denied.
    Expired,
    /// The agent withdrew it, or imrelay had to give it up; the agent was denied.
    Cancelled,
}

impl Outcome {
    /// The lowercase label used in JSON, logs and metrics.
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Allowed => "allowed",
            Outcome::Denied => "denied",
            Outcome::Answered => "answered",
            Outcome::Expired => "expired",
            Outcome::Cancelled => "cancelled",
        }
    }

    /// Whether the agent may go ahead.
    pub fn is_allow(self) -> bool {
        matches!(self, Outcome::Allowed | Outcome::Answered)
    }
}

/// The channel through which an answer arrived: `desktop`, `terminal`, `api`, a channel's own
/// name (`telegram`, `feishu`), `webhook:<name>`, or `system` for expiry and cancellation. An
/// open name: the core knows only its own entry points, and each channel names itself.
#[derive(Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Via(Arc<str>);

impl Via {
    /// The built-in web inbox.
    pub fn desktop() -> Self {
        Self("desktop".into())
    }
    /// The terminal client (`imrelay watch`, `imrelay answer`).
    pub fn terminal() -> Self {
        Self("terminal".into())
    }
    /// The HTTP API, called by a script or integration.
    pub fn api() -> Self {
        Self("api".into())
    }
    /// imrelay itself (expiry, cancellation).
    pub fn system() -> Self {
        Self("system".into())
    }
    /// A channel by its name (each channel owns its name, e.g. `channels::telegram::CHANNEL`).
    pub fn new(name: &str) -> Self {
        Self(name.into())
    }
    /// A signed answer from the named webhook integration.
    pub fn webhook(name: &str) -> Self {
        Self(format!("webhook:{name}").into())
    }
    /// The channel label.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for Via {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Debug for Via {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&*self.0, f)
    }
}

/// The Claude Agent SDK `PermissionResult`, exactly as `canUseTool` must return it.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "behavior", rename_all = "lowercase")]
pub enum PermissionResult {
    /// Run the tool with `updatedInput` (always present: the SDK rejects an allow without it).
    Allow {
        /// The input to run the tool with: the original, edited, or with question answers.
        #[serde(rename = "updatedInput")]
        updated_input: Input,
        /// Permission rules to add, e.g. "always allow this for the session".
        #[serde(
            rename = "updatedPermissions",
            default,
            skip_serializing_if = "Option::is_none"
        )]
        updated_permissions: Option<Value>,
    },
    /// Do not run the tool; `message` is shown to the model.
    Deny {
        /// Why, in words the model can act on.
        message: String,
        /// `true` stops the agent's whole turn, not just this tool call.
        #[serde(default)]
        interrupt: bool,
    },
}

/// Read as a plain struct rather than serde's internally tagged form: that form buffers the
/// fields first, and an [`Input`] (raw JSON text) cannot be read back from the buffer.
impl<'de> Deserialize<'de> for PermissionResult {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(rename_all = "lowercase")]
        enum Behavior {
            Allow,
            Deny,
        }
        #[derive(Deserialize)]
        struct Wire {
            behavior: Behavior,
            #[serde(rename = "updatedInput", default)]
            updated_input: Option<Input>,
            #[serde(rename = "updatedPermissions", default)]
            updated_permissions: Option<Value>,
            #[serde(default)]
            message: Option<String>,
            #[serde(default)]
            interrupt: bool,
        }
        let w = Wire::deserialize(d)?;
        match w.behavior {
            Behavior::Allow => Ok(PermissionResult::Allow {
                updated_input: w
                    .updated_input
                    .ok_or_else(|| serde::de::Error::missing_field("updatedInput"))?,
                updated_permissions: w.updated_permissions,
            }),
            Behavior::Deny => Ok(PermissionResult::Deny {
                message: w
                    .message
                    .ok_or_else(|| serde::de::Error::missing_field("message"))?,
                interrupt: w.interrupt,
            }),
        }
    }
}

impl PermissionResult {
    /// Whether this result lets the tool run.
    pub fn is_allow(&self) -> bool {
        matches!(self, PermissionResult::Allow { .. })
    }
}

/// What the agent receives when an interaction is resolved: a [`PermissionResult`] for an
/// approval or a question (what `canUseTool` returns), an [`ElicitResult`] for a form (what an
/// MCP client returns from `elicitation/create`). Written as the inner value, untagged.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(untagged)]
pub enum AgentResult {
    /// For approvals and questions.
    Permission(PermissionResult),
    /// For forms.
    Elicit(ElicitResult),
}

impl AgentResult {
    /// The permission result, for approvals and questions.
    pub fn permission(&self) -> Option<&PermissionResult> {
        match self {
            AgentResult::Permission(p) => Some(p),
            AgentResult::Elicit(_) => None,
        }
    }

    /// The form answer, for forms.
    pub fn elicit(&self) -> Option<&ElicitResult> {
        match self {
            AgentResult::Elicit(e) => Some(e),
            AgentResult::Permission(_) => None,
        }
    }

    /// Whether the agent may go ahead: an allow, or an accepted form.
    pub fn is_allow(&self) -> bool {
        match self {
            AgentResult::Permission(p) => p.is_allow(),
            AgentResult::Elicit(e) => e.action == ElicitAction::Accept,
        }
    }
}

impl From<PermissionResult> for AgentResult {
    fn from(p: PermissionResult) -> Self {
        AgentResult::Permission(p)
    }
}

impl From<ElicitResult> for AgentResult {
    fn from(e: ElicitResult) -> Self {
        AgentResult::Elicit(e)
    }
}

/// Told apart by their members: an elicitation result has `action`, a permission result
/// `behavior`.
impl<'de> Deserialize<'de> for AgentResult {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let raw = Box::<RawValue>::deserialize(d)?;
        #[derive(Deserialize)]
        struct Probe {
            #[serde(default)]
            action: Option<Value>,
        }
        let probe: Probe = serde_json::from_str(raw.get()).map_err(serde::de::Error::custom)?;
        if probe.action.is_some() {
            serde_json::from_str(raw.get())
                .map(AgentResult::Elicit)
                .map_err(serde::de::Error::custom)
        } else {
            serde_json::from_str(raw.get())
                .map(AgentResult::Permission)
                .map_err(serde::de::Error::custom)
        }
    }
}

/// How an interaction was resolved: outcome, who, through which channel, when, and the
/// result handed to the agent.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Resolution {
    /// How it ended.
    pub outcome: Outcome,
    /// Who answered (a display name or platform user id), if a person did.
    #[serde(default)]
    pub by: Option<String>,
    /// The channel the answer came through.
    pub via: Via,
    /// When it was resolved.
    #[serde(serialize_with = "millis")]
    pub at: Timestamp,
    /// What the agent receives.
    pub result: AgentResult,
}

impl Resolution {
    /// The deny message, if the result is a deny (or a declined or cancelled form).
    pub fn message(&self) -> Option<&str> {
        match &self.result {
            AgentResult::Permission(PermissionResult::Deny { message, .. }) => Some(message),
            AgentResult::Permission(PermissionResult::Allow { .. }) => None,
            AgentResult::Elicit(e) => e.message.as_deref(),
        }
    }

    /// The permission result, for approvals and questions.
    pub fn permission(&self) -> Option<&PermissionResult> {
        self.result.permission()
    }

    /// A short human sentence: "allowed by alice via telegram".
    pub fn summary(&self) -> String {
        let mut s = String::from(self.outcome.as_str());
        if let Some(by) = &self.by {
            s.push_str(" by ");
            s.push_str(by);
        }
        if self.via.as_str() != "system" {
            s.push_str(" via ");
            s.push_str(self.via.as_str());
        }
        s
    }
}

/// A tool input: a JSON object, kept as its compact JSON text.
///
/// Pending interactions stay in memory until they are answered; as text an input takes a
/// fraction of the room of its parsed tree, is written out by copying, and a resolved copy
/// of an interaction clones it cheaply. Readers parse it with [`Input::map`].
///
/// An input that arrived as text ([`Input::from_json`]) keeps it as written, so the agent
/// gets back exactly what it sent: a parsed tree would turn `1e2` into `100.0`, `-0` into
/// `-0.0` and an integer beyond 64 bits into a rounded float. Everything that writes an
/// input out copies its text ([`Input`]'s `Serialize` writes it as raw JSON) rather than
/// going through [`Value`].
#[derive(Clone)]
pub struct Input(Box<str>);

impl Input {
    /// The input holding `map`.
    pub fn from_map(map: &Map<String, Value>) -> Self {
        // A map of JSON values always serializes; the empty object is never needed.
        Input(
            serde_json::to_string(map)
                .unwrap_or_else(|_| "{}".into())
                .into_boxed_str(),
        )
    }

    /// The input an agent sent as JSON text, exactly as written less the whitespace between
    /// its tokens. Anything but an object is refused (`field`: `input`).
    pub fn from_json(raw: &RawValue) -> Result<Self, ValidationError> {
        let text = raw.get();
        if !text.starts_with('{') {
            let found = serde_json::from_str::<Value>(text)
                .map(|v| super::json_type(&v))
                .unwrap_or("something else");
            return Err(ValidationError::new(
                "input",
                format!("expected a JSON object, got {found}"),
            ));
        }
        Ok(Input(compact(text).into_boxed_str()))
    }

    /// The same input with member `key` set to `value`: replaced where it stands, or added
    /// at the end. Every other member keeps its text as it is.
    pub fn with_member(&self, key: &str, value: &Value) -> Input {
        let Some(members) = members(&self.0) else {
            let mut map = self.map();
            map.insert(key.to_string(), value.clone());
            return Input::from_map(&map);
        };
        let value = value.to_string();
        let mut out = String::with_capacity(self.0.len() + key.len() + value.len() + 4);
        let mut placed = false;
        let push = |out: &mut String, k: &str, v: &str| {
            out.push(if out.is_empty() { '{' } else { ',' });
            // Writing a string into a String cannot fail.
            out.push_str(&serde_json::to_string(k).unwrap_or_default());
            out.push(':');
            out.push_str(v);
        };
        for (k, v) in &members {
            if k != key {
                push(&mut out, k, v.get());
            } else if !placed {
                placed = true;
                push(&mut out, k, &value);
            }
        }
        if !placed {
            push(&mut out, key, &value);
        }
        if out.is_empty() {
            out.push('{');
        }
        out.push('}');
        Input(out.into_boxed_str())
    }

    /// The object, parsed.
    pub fn map(&self) -> Map<String, Value> {
        // The text was written from a map (or checked to be an object when read back).
        serde_json::from_str(&self.0).unwrap_or_default()
    }

    /// The compact JSON text.
    pub fn as_json(&self) -> &str {
        &self.0
    }
}

/// `json` (valid JSON) without the whitespace between its tokens.
fn compact(json: &str) -> String {
    let mut out = Vec::with_capacity(json.len());
    let (mut in_string, mut escaped) = (false, false);
    for &b in json.as_bytes() {
        if in_string {
            out.push(b);
            if escaped {
                escaped = false;
            } else if b == b'\\' {
                escaped = true;
            } else if b == b'"' {
                in_string = false;
            }
        } else if !matches!(b, b' ' | b'\t' | b'\n' | b'\r') {
            in_string = b == b'"';
            out.push(b);
        }
    }
    // Only ASCII whitespace was left out, so the rest is still UTF-8.
    String::from_utf8(out).unwrap_or_else(|_| json.to_string())
}

/// The members of a JSON object, each value as its text; `None` if `json` is not an object.
fn members(json: &str) -> Option<Vec<(String, &RawValue)>> {
    struct Members;
    impl<'de> serde::de::Visitor<'de> for Members {
        type Value = Vec<(String, &'de RawValue)>;
        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("a JSON object")
        }
        fn visit_map<A: serde::de::MapAccess<'de>>(
            self,
            mut m: A,
        ) -> Result<Self::Value, A::Error> {
            let mut out = Vec::with_capacity(m.size_hint().unwrap_or(4));
            while let Some(member) = m.next_entry()? {
                out.push(member);
            }
            Ok(out)
        }
    }
    let mut de = serde_json::Deserializer::from_str(json);
    serde::Deserializer::deserialize_map(&mut de, Members).ok()
}

impl Default for Input {
    fn default() -> Self {
        Input("{}".into())
    }
}

impl From<Map<String, Value>> for Input {
    fn from(map: Map<String, Value>) -> Self {
        Input::from_map(&map)
    }
}

/// Equal when they hold the same object, whatever the order of its keys.
impl PartialEq for Input {
    fn eq(&self, other: &Self) -> bool {
        self.0 == other.0 || self.map() == other.map()
    }
}

impl fmt::Debug for Input {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl Serialize for Input {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match serde_json::from_str::<&serde_json::value::RawValue>(&self.0) {
            Ok(raw) => raw.serialize(s),
            Err(_) => Map::new().serialize(s),
        }
    }
}

impl<'de> Deserialize<'de> for Input {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let raw = Box::<serde_json::value::RawValue>::deserialize(d)?;
        if !raw.get().trim_start().starts_with('{') {
            return Err(serde::de::Error::custom("input: expected a JSON object"));
        }
        Ok(Input(raw.into()))
    }
}

/// One request from an agent for a human decision.
///
/// Interactions are shared as `Arc<Interaction>`; resolving one produces a new value with
/// [`Interaction::resolution`] set.
#[derive(Clone, Debug, PartialEq, Deserialize)]
pub struct Interaction {
    /// The interaction's id.
    pub id: InteractionId,
    /// Approval or question (derived from `tool_name`).
    pub kind: Kind,
    /// The tool the agent wants to use, as the SDK names it.
    pub tool_name: String,
    /// The tool input, as the SDK passed it.
    pub input: Input,
    /// The agent's session label. (The optional texts are boxed strings, a third smaller
    /// than `String`: pending interactions are held in memory.)
    #[serde(default)]
    pub session: Option<Box<str>>,
    /// Which agent is asking (e.g. `claude-code`).
    #[serde(default)]
    pub agent: Option<Box<str>>,
    /// Human-readable title from the SDK's context.
    #[serde(default)]
    pub title: Option<Box<str>>,
    /// Human-readable description from the SDK's context.
    #[serde(default)]
    pub description: Option<Box<str>>,
    /// The agent's working directory.
    #[serde(default)]
    pub cwd: Option<Box<str>>,
    /// Permission suggestions offered by the agent: the SDK's permission updates, applied by
    /// "always allow" (checked when the interaction was created).
    /// Boxed, like the resolution: most interactions have none, and pending interactions
    /// are held in memory.
    #[serde(default)]
    pub suggestions: Option<Box<Value>>,
    /// The agent cannot take an edited input (Codex's hooks): an allow runs the input as it
    /// is, and an allow with an edited input is refused with a message saying so.
    #[serde(default)]
    pub input_fixed: bool,
    /// Labels the agent sent (`prod`, `project:shop`): routes match on them.
    #[serde(default)]
    pub labels: Box<[Box<str>]>,
    /// The route it took (`None` when no route is configured). Boxed: most pending
    /// interactions carry one pointer.
    #[serde(default)]
    pub route: Option<Box<crate::interaction::routes::RouteStamp>>,
    /// When imrelay accepted it.
    pub created_at: Timestamp,
    /// When it expires unless answered.
    pub deadline: Timestamp,
    /// The timeout the deadline was computed from, in seconds.
    pub timeout_secs: u64,
    /// Set once, when it is resolved. (Boxed: a pending interaction, the kind held in
    /// memory, then carries one pointer instead of the whole resolution's space.)
    #[serde(default)]
    pub resolution: Option<Box<Resolution>>,
    /// [`Interaction::input_digest`], computed once (not serialized).
    #[serde(skip)]
    pub digest: DigestCache,
}

/// SHA-256 of a tool name and its input in canonical JSON.
fn digest_of(tool_name: &str, input: &Map<String, Value>) -> [u8; 32] {
    use sha2::{Digest, Sha256};
    let mut h = Sha256::new();
    h.update(tool_name.as_bytes());
    h.update([0]);
    // Writing into a hasher cannot fail.
    let _ = write_canonical_object(input, &mut h);
    h.finalize().into()
}

/// A lazily computed input digest (the raw SHA-256, hex-encoded when asked for). Equal
/// whatever it holds, so it never makes two interactions differ.
#[derive(Clone, Default)]
pub struct DigestCache(std::sync::OnceLock<[u8; 32]>);

impl PartialEq for DigestCache {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

impl fmt::Debug for DigestCache {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("DigestCache")
    }
}

impl Interaction {
    /// A pending interaction with no optional texts, created at `created_at` with a
    /// `timeout_secs` deadline; its kind follows from `tool_name`. (The registry builds every
    /// interaction from this; tests and embedders can too.)
    pub fn pending(
        id: InteractionId,
        tool_name: impl Into<String>,
        input: impl Into<Input>,
        created_at: Timestamp,
        timeout_secs: u64,
    ) -> Self {
        let tool_name = tool_name.into();
        Interaction {
            id,
            kind: Kind::of_tool(&tool_name),
            tool_name,
            input: input.into(),
            session: None,
            agent: None,
            title: None,
            description: None,
            cwd: None,
            suggestions: None,
            input_fixed: false,
            labels: Box::default(),
            route: None,
            created_at,
            deadline: created_at
                .checked_add(jiff::SignedDuration::from_secs(
                    i64::try_from(timeout_secs).unwrap_or(i64::MAX),
                ))
                .unwrap_or(Timestamp::MAX),
            timeout_secs,
            resolution: None,
            digest: DigestCache::default(),
        }
    }

    /// Its id and creation time in milliseconds (`toolu_1:1763800000000`): what names this
    /// interaction in keys kept outside it (outbox jobs, message ids, dedupe keys). An id can
    /// be used again once the first interaction with it was pruned; with the id alone, the
    /// new one's work would be taken for the old one's.
    pub fn incarnation(&self) -> String {
        format!("{}:{}", self.id, self.created_at.as_millisecond())
    }

    /// Whether it still awaits an answer.
    pub fn is_pending(&self) -> bool {
        self.resolution.is_none()
    }

    /// `"pending"` or `"resolved"`.
    pub fn status(&self) -> &'static str {
        if self.is_pending() {
            "pending"
        } else {
            "resolved"
        }
    }

    /// The same interaction, resolved.
    pub fn resolved(&self, resolution: Resolution) -> Interaction {
        Interaction {
            resolution: Some(Box::new(resolution)),
            ..self.clone()
        }
    }

    /// Whether `tool_name` and `input` match: the test for an agent re-attaching with the
    /// same id.
    pub fn same_request(&self, tool_name: &str, input: &Input) -> bool {
        self.tool_name == tool_name && &self.input == input
    }

    /// SHA-256 (hex) of the tool name and input exactly as shown to people: what an audit
    /// entry refers to.
    pub fn input_digest(&self) -> String {
        hex::encode(
            self.digest
                .0
                .get_or_init(|| digest_of(&self.tool_name, &self.input.map())),
        )
    }

    /// Computes [`Interaction::input_digest`] now from `input`, the parsed form of
    /// [`Interaction::input`] the caller already holds, sparing a parse later.
    pub(crate) fn prime_digest(&self, input: &Map<String, Value>) {
        self.digest
            .0
            .get_or_init(|| digest_of(&self.tool_name, input));
    }

    /// Time from creation to resolution, if resolved.
    pub fn time_to_answer(&self) -> Option<std::time::Duration> {
        let r = self.resolution.as_ref()?;
        let ms =
            r.at.as_millisecond()
                .saturating_sub(self.created_at.as_millisecond());
        Some(std::time::Duration::from_millis(ms.max(0) as u64))
    }
}

impl Serialize for Interaction {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut st = s.serialize_struct("Interaction", 18)?;
        st.serialize_field("id", &self.id)?;
        st.serialize_field("kind", &self.kind)?;
        st.serialize_field("status", self.status())?;
        st.serialize_field("tool_name", &self.tool_name)?;
        st.serialize_field("input", &self.input)?;
        st.serialize_field("session", &self.session)?;
        st.serialize_field("agent", &self.agent)?;
        st.serialize_field("title", &self.title)?;
        st.serialize_field("description", &self.description)?;
        st.serialize_field("cwd", &self.cwd)?;
        if self.suggestions.is_some() {
            st.serialize_field("suggestions", &self.suggestions)?;
        }
        if self.input_fixed {
            st.serialize_field("input_fixed", &true)?;
        }
        if !self.labels.is_empty() {
            st.serialize_field("labels", &self.labels)?;
        }
        if self.route.is_some() {
            st.serialize_field("route", &self.route)?;
        }
        st.serialize_field("created_at", &Millis(self.created_at))?;
        st.serialize_field("deadline", &Millis(self.deadline))?;
        st.serialize_field("timeout_secs", &self.timeout_secs)?;
        st.serialize_field("resolution", &self.resolution)?;
        st.end()
    }
}

/// JSON with object keys sorted at every level, so equal values encode equally whatever
/// order their keys arrived in.
pub fn canonical_json(v: &Value) -> String {
    let mut out = Vec::new();
    // Writing into a Vec cannot fail, and JSON is UTF-8.
    let _ = write_canonical_json(v, &mut out);
    String::from_utf8(out).unwrap_or_default()
}

/// Writes [`canonical_json`] of `v` into `w` (e.g. straight into a hasher).
pub(crate) fn write_canonical_json<W: std::io::Write>(v: &Value, w: &mut W) -> std::io::Result<()> {
    match v {
        Value::Object(m) => write_canonical_object(m, w),
        Value::Array(a) => {
            w.write_all(b"[")?;
            for (n, item) in a.iter().enumerate() {
                if n > 0 {
                    w.write_all(b",")?;
                }
                write_canonical_json(item, w)?;
            }
            w.write_all(b"]")
        }
        other => serde_json::to_writer(&mut *w, other).map_err(std::io::Error::other),
    }
}

fn write_canonical_object<W: std::io::Write>(
    m: &Map<String, Value>,
    w: &mut W,
) -> std::io::Result<()> {
    let mut entries: Vec<(&String, &Value)> = m.iter().collect();
    entries.sort_unstable_by(|a, b| a.0.cmp(b.0));
    w.write_all(b"{")?;
    for (n, (k, v)) in entries.into_iter().enumerate() {
        if n > 0 {
            w.write_all(b",")?;
        }
        serde_json::to_writer(&mut *w, k).map_err(std::io::Error::other)?;
        w.write_all(b":")?;
        write_canonical_json(v, w)?;
    }
    w.write_all(b"}")
}

/// A time as imrelay writes every time it emits (API, events, audit trail, webhooks): RFC 3339
/// in UTC with three fractional digits, `2026-11-22T08:36:19.090Z`. (A bare [`Timestamp`]
/// drops trailing zeros: `…:19.09Z`.) Every time imrelay makes is a whole millisecond
/// ([`now`]); a finer one (given by code embedding the registry) keeps its further digits
/// rather than being cut.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Millis(pub Timestamp);

impl fmt::Display for Millis {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0.subsec_nanosecond() % 1_000_000 == 0 {
            write!(f, "{:.3}", self.0)
        } else {
            write!(f, "{}", self.0)
        }
    }
}

impl Serialize for Millis {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

/// Writes `t` as [`Millis`]: for `#[serde(serialize_with = "millis")]`.
pub fn millis<S: serde::Serializer>(t: &Timestamp, s: S) -> Result<S::Ok, S::Error> {
    Millis(*t).serialize(s)
}

/// The current time, truncated to milliseconds (the precision imrelay stores).
pub fn now() -> Timestamp {
    let ms = Timestamp::now().as_millisecond();
    Timestamp::from_millisecond(ms).unwrap_or(Timestamp::UNIX_EPOCH)
}

/// `t + d`, or `t` itself when that is beyond the representable times: for horizons and
/// expiries, where "never" and "now" are both safe readings of a duration too long to add.
pub fn after(t: Timestamp, d: std::time::Duration) -> Timestamp {
    jiff::SignedDuration::try_from(d)
        .ok()
        .and_then(|d| t.checked_add(d).ok())
        .unwrap_or(t)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_input_is_kept_as_compact_text_and_read_back_as_the_same_object() {
        let m = json!({"z": 1, "a": {"y": [1, {"b": "x y"}]}, "m": "<&>"});
        let Value::Object(m) = m else { unreachable!() };
        let input = Input::from_map(&m);
        assert_eq!(
            input.as_json(),
            r#"{"z":1,"a":{"y":[1,{"b":"x y"}]},"m":"<&>"}"#
        );
        assert_eq!(input.map(), m);
        // Written as it is, and read back only as an object.
        assert_eq!(serde_json::to_string(&input).unwrap(), input.as_json());
        let back: Input = serde_json::from_str(input.as_json()).unwrap();
        assert_eq!(back.as_json(), input.as_json());
        for not_an_object in ["[1]", "\"text\"", "3", "null"] {
            assert!(serde_json::from_str::<Input>(not_an_object).is_err());
        }
        // Equal when the object is, whatever the key order.
        let reordered: Input =
            serde_json::from_str(r#"{"m":"<&>","z":1,"a":{"y":[1,{"b":"x y"}]}}"#).unwrap();
        assert_eq!(reordered, input);
        assert_ne!(Input::default(), input);
    }

    use serde_json::json;

    fn raw(text: &str) -> Box<RawValue> {
        serde_json::from_str(text).unwrap()
    }

    #[test]
    fn an_input_sent_as_text_keeps_its_numbers_and_loses_only_whitespace() {
        let sent = "{ \"n\" : 1e2 ,\n\t\"z\": -0, \"big\": 18446744073709551617,\r\n \"s\": \" a\\\" {b} \\\\\" }";
        let input = Input::from_json(&raw(sent)).unwrap();
        assert_eq!(
            input.as_json(),
            r#"{"n":1e2,"z":-0,"big":18446744073709551617,"s":" a\" {b} \\"}"#
        );
        assert_eq!(serde_json::to_string(&input).unwrap(), input.as_json());
        assert_eq!(input.map()["s"], json!(" a\" {b} \\"));
        for not_an_object in ["[1]", "\"{}\"", "3", "null"] {
            let err = Input::from_json(&raw(not_an_object)).unwrap_err();
            assert_eq!(err.field, "input", "{not_an_object}");
        }
    }

    #[test]
    fn a_member_is_set_and_the_rest_keeps_its_text() {
        let input =
            Input::from_json(&raw(r#"{"a": 1e2, "answers": 0, "b": [-0], "answers": 1}"#)).unwrap();
        let answered = input.with_member("answers", &json!({"Q?": "x"}));
        assert_eq!(
            answered.as_json(),
            r#"{"a":1e2,"answers":{"Q?":"x"},"b":[-0]}"#
        );
        let added = Input::from_json(&raw(r#"{"k\u00e9": 5e-1}"#))
            .unwrap()
            .with_member("answers", &json!({}));
        assert_eq!(added.as_json(), r#"{"ké":5e-1,"answers":{}}"#);
        assert_eq!(
            Input::default().with_member("a", &json!(1)).as_json(),
            r#"{"a":1}"#
        );
    }

    #[test]
    fn a_primed_digest_is_the_digest_computed_from_the_text() {
        let Value::Object(m) = json!({"command": "ls", "n": [1, {"b": true, "a": null}]}) else {
            unreachable!()
        };
        let id = InteractionId::parse("x").unwrap();
        let lazy = Interaction::pending(id.clone(), "Bash", Input::from_map(&m), now(), 60);
        let primed = Interaction::pending(id, "Bash", Input::from_map(&m), now(), 60);
        primed.prime_digest(&m);
        assert_eq!(primed.input_digest(), lazy.input_digest());
        assert_eq!(lazy.input_digest().len(), 64);
        let other = Interaction::pending(lazy.id.clone(), "Write", Input::from_map(&m), now(), 60);
        assert_ne!(other.input_digest(), lazy.input_digest());
    }

    #[test]
    fn ids_are_validated() {
        assert!(InteractionId::parse("toolu_01D7FLrfh4GYq7yT1ULFeyMV").is_ok());
        assert!(InteractionId::parse("a.b:c-d_e").is_ok());
        let err = InteractionId::parse("").unwrap_err();
        assert_eq!(err.field, "id");
        assert!(InteractionId::parse("with space").is_err());
        assert!(InteractionId::parse("a/b").is_err());
        // Dot segments: a URL with them is normalized before it is sent.
        assert_eq!(InteractionId::parse(".").unwrap_err().field, "id");
        assert!(InteractionId::parse("..").is_err());
        assert!(InteractionId::parse("...").is_ok());
        assert!(InteractionId::parse(".a").is_ok());
        // ...but one stored by an earlier version is still read back.
        let stored: InteractionId = serde_json::from_str("\"..\"").unwrap();
        assert_eq!(stored.as_str(), "..");
        assert!(InteractionId::parse(&"x".repeat(129)).is_err());
        assert!(InteractionId::parse(&"x".repeat(128)).is_ok());
    }

    #[test]
    fn generated_ids_are_valid_and_distinct() {
        let a = InteractionId::generate();
        let b = InteractionId::generate();
        assert_ne!(a, b);
        assert!(InteractionId::parse(a.as_str()).is_ok());
    }

    #[test]
    fn permission_result_has_the_sdk_shape() {
        let mut input = Map::new();
        input.insert("command".into(), json!("ls"));
        let allow = PermissionResult::Allow {
            updated_input: input.into(),
            updated_permissions: None,
        };
        assert_eq!(
            serde_json::to_value(&allow).unwrap(),
            json!({"behavior":"allow","updatedInput":{"command":"ls"}})
        );
        let text = serde_json::to_string(&allow).unwrap();
        assert_eq!(
            serde_json::from_str::<PermissionResult>(&text).unwrap(),
            allow
        );
        assert!(serde_json::from_str::<PermissionResult>(r#"{"behavior":"allow"}"#).is_err());
        assert!(serde_json::from_str::<PermissionResult>(r#"{"behavior":"deny"}"#).is_err());
        let deny = PermissionResult::Deny {
            message: "no".into(),
            interrupt: false,
        };
        assert_eq!(
            serde_json::to_value(&deny).unwrap(),
            json!({"behavior":"deny","message":"no","interrupt":false})
        );
    }

    #[test]
    fn canonical_json_sorts_keys_at_every_level() {
        let a = json!({"b": [1, {"y": "é\"", "x": null}], "a": true});
        assert_eq!(
            canonical_json(&a),
            r#"{"a":true,"b":[1,{"x":null,"y":"é\""}]}"#
        );
        let reordered = json!({"a": true, "b": [1, {"x": null, "y": "é\""}]});
        assert_eq!(canonical_json(&a), canonical_json(&reordered));
    }

    #[test]
    fn every_time_is_written_with_three_fractional_digits() {
        // Times whose milliseconds end in zeros, which a bare timestamp would drop.
        let created = Timestamp::from_millisecond(1_763_800_579_090).unwrap();
        let id = InteractionId::parse("t").unwrap();
        let i = Interaction::pending(id, "Bash", Input::default(), created, 60);
        let at = Timestamp::from_millisecond(1_763_800_580_000).unwrap();
        let r = i.resolved(crate::interaction::expired(&i, at));
        let v = serde_json::to_value(&r).unwrap();
        assert_eq!(v["created_at"], "2025-11-22T08:36:19.090Z");
        assert_eq!(v["deadline"], "2025-11-22T08:37:19.090Z");
        assert_eq!(v["resolution"]["at"], "2025-11-22T08:36:20.000Z");
        assert_eq!(Millis(at).to_string(), "2025-11-22T08:36:20.000Z");
        // A finer time is not cut.
        let fine = Timestamp::from_nanosecond(1_763_800_580_000_100_000).unwrap();
        assert_eq!(Millis(fine).to_string(), "2025-11-22T08:36:20.0001Z");
        // Read back as the same times.
        let back: Interaction = serde_json::from_value(v).unwrap();
        assert_eq!(back, r);
    }

    #[test]
    fn kind_follows_tool_name() {
        assert_eq!(Kind::of_tool("AskUserQuestion"), Kind::Question);
        assert_eq!(Kind::of_tool("Bash"), Kind::Approval);
        assert_eq!(Kind::of_tool("askuserquestion"), Kind::Approval);
    }
}
