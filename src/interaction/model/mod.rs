//! The interaction model: what an agent asks, and how it was answered.
//!
//! An [`Interaction`] is created from exactly what an agent's `canUseTool` callback receives
//! (`tool_name` and `input`) plus a little context. It is immutable except for one step: it
//! gains a [`Resolution`] exactly once. The [`PermissionResult`] inside a resolution is the
//! Claude Agent SDK's own type, so an agent can hand it back to the SDK unchanged.
//!
//! The model is split by concern: `id.rs` (the interaction's id), `result.rs` (the Agent
//! SDK's `PermissionResult` and MCP's elicitation result as they travel), `input.rs` (a tool
//! input kept as its JSON text, and the scanner that reads its members), `canonical.rs`
//! (canonical JSON, for the audit hashes and input digests) and `time.rs` (times as imrelay
//! writes them); this file holds the interaction itself, its kind, outcome and resolution.

mod canonical;
mod id;
mod input;
mod rare;
mod result;
mod stamps;
mod time;

use std::fmt;
use std::sync::Arc;

use jiff::Timestamp;
use serde::ser::SerializeStruct;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

pub use canonical::canonical_json;
use canonical::write_canonical_object;
pub use id::{InteractionId, MAX_ID_LEN};
pub use input::Input;
pub(super) use rare::{Rare, RareBox};
pub use result::{AgentResult, PermissionResult};
pub use stamps::{DEFAULT_ROUTE, Escalation, Quorum, RouteStamp, Target, Vote, route_name};
pub use time::{Millis, after, millis, now};

/// A shared text, one pointer wide (an interaction's tool name, session, agent, directory
/// and owner): cloning one counts a reference, and a literal is held with no allocation.
pub type Text = arcstr::ArcStr;

/// The tool name the Claude Agent SDK uses for structured questions.
pub const ASK_USER_QUESTION: &str = "AskUserQuestion";

/// The tool name of a patch to files in the `*** Begin Patch` format (Codex's `apply_patch`),
/// with the patch text as `patch`: an agent adapter maps its agent's patch tool onto it.
/// Claude Code has no tool of this name; it reads as one on every surface ("Approval for
/// Patch"). Another agent's `Patch` whose input is not such a patch is shown field by field.
pub const PATCH_TOOL: &str = "Patch";

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

/// One request from an agent for a human decision.
///
/// Interactions are shared as `Arc<Interaction>`; resolving one produces a new value with
/// [`Interaction::resolution`] set.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(from = "Wire")]
pub struct Interaction {
    /// The interaction's id.
    pub id: InteractionId,
    /// Approval or question (derived from `tool_name`).
    pub kind: Kind,
    /// The tool the agent wants to use, as the SDK names it. (The texts of an interaction
    /// are [`Text`]s, one pointer each, and the registry gives interactions one shared copy
    /// of each distinct name: pending interactions are held in memory.)
    pub tool_name: Text,
    /// The tool input, as the SDK passed it.
    pub input: Input,
    /// The agent's session label. (Shared like the tool's name: the interactions of one
    /// session point to one copy.)
    pub session: Option<Text>,
    /// Which agent is asking (e.g. `claude-code`).
    pub agent: Option<Text>,
    /// The agent's working directory.
    pub cwd: Option<Text>,
    /// Permission suggestions offered by the agent: the SDK's permission updates, applied by
    /// "always allow" (checked when the interaction was created).
    /// Boxed, like the resolution: pending interactions are held in memory.
    pub suggestions: Option<Box<Value>>,
    /// The agent cannot take an edited input (Codex's hooks): an allow runs the input as it
    /// is, and an allow with an edited input is refused with a message saying so.
    pub input_fixed: bool,
    /// The route it took (`None` when no route is configured). Shared: every interaction
    /// that took a route points to its one stamp, rather than holding a copy of its names
    /// and targets (pending interactions are held in memory).
    pub route: Option<Arc<RouteStamp>>,
    /// Who created it: the agent token (`token:` and the start of its SHA-256, never the
    /// token) or `local`, as the creating entry point names it; `None` when created without
    /// one (a Rust host). A session grant made on it is bound to this owner.
    /// (Shared: the pending interactions of one owner point to one copy of its name.)
    pub owner: Option<Text>,
    /// When imrelay accepted it.
    pub created_at: Timestamp,
    /// When it expires unless answered ([`Interaction::timeout_secs`] after `created_at`).
    pub deadline: Timestamp,
    /// Set once, when it is resolved. (Boxed: a pending interaction, the kind held in
    /// memory, then carries one pointer instead of the whole resolution's space.)
    pub resolution: Option<Box<Resolution>>,
    /// The fields few interactions set (title, description, labels, quorum, votes, the
    /// escalation time, the desk-first hold's end), behind one pointer: read them through [`Interaction::title`] and
    /// its neighbours, set them through [`Interaction::set_title`] and its neighbours.
    pub rare: RareBox,
    /// [`Interaction::input_digest`], computed once (not serialized).
    pub digest: DigestCache,
}

/// An interaction as it is written (see `impl Serialize for Interaction`), read back.
#[derive(Deserialize)]
struct Wire {
    id: InteractionId,
    kind: Kind,
    tool_name: Text,
    input: Input,
    #[serde(default)]
    session: Option<Text>,
    #[serde(default)]
    agent: Option<Text>,
    #[serde(default)]
    title: Option<Box<str>>,
    #[serde(default)]
    description: Option<Box<str>>,
    #[serde(default)]
    cwd: Option<Text>,
    #[serde(default)]
    suggestions: Option<Box<Value>>,
    #[serde(default)]
    input_fixed: bool,
    #[serde(default)]
    labels: Vec<Box<str>>,
    #[serde(default)]
    route: Option<Arc<RouteStamp>>,
    #[serde(default)]
    owner: Option<Text>,
    #[serde(default)]
    quorum: Option<Quorum>,
    #[serde(default)]
    votes: Vec<Vote>,
    created_at: Timestamp,
    deadline: Timestamp,
    #[serde(default)]
    escalated_at: Option<Timestamp>,
    #[serde(default)]
    phones_at: Option<Timestamp>,
    #[serde(default)]
    resolution: Option<Box<Resolution>>,
}

impl From<Wire> for Interaction {
    fn from(w: Wire) -> Self {
        Interaction {
            id: w.id,
            kind: w.kind,
            tool_name: w.tool_name,
            input: w.input,
            session: w.session,
            agent: w.agent,
            cwd: w.cwd,
            suggestions: w.suggestions,
            input_fixed: w.input_fixed,
            route: w.route,
            owner: w.owner,
            created_at: w.created_at,
            deadline: w.deadline,
            resolution: w.resolution,
            rare: Rare {
                title: w.title,
                description: w.description,
                labels: w.labels,
                quorum: w.quorum,
                votes: w.votes,
                escalated_at: w.escalated_at,
                phones_at: w.phones_at,
            }
            .into(),
            digest: DigestCache::default(),
        }
    }
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
        tool_name: impl Into<Text>,
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
            cwd: None,
            suggestions: None,
            input_fixed: false,
            route: None,
            owner: None,
            created_at,
            deadline: created_at
                .checked_add(jiff::SignedDuration::from_secs(
                    i64::try_from(timeout_secs).unwrap_or(i64::MAX),
                ))
                .unwrap_or(Timestamp::MAX),
            resolution: None,
            rare: RareBox::default(),
            digest: DigestCache::default(),
        }
    }

    /// Human-readable title from the SDK's context.
    pub fn title(&self) -> Option<&str> {
        self.rare.get().title.as_deref()
    }

    /// Human-readable description from the SDK's context.
    pub fn description(&self) -> Option<&str> {
        self.rare.get().description.as_deref()
    }

    /// Labels the agent sent (`prod`, `project:shop`): routes match on them.
    pub fn labels(&self) -> &[Box<str>] {
        &self.rare.get().labels
    }

    /// How many different people decide it (an approval on a route or under a policy rule
    /// with a quorum), stamped at creation.
    pub fn quorum(&self) -> Option<Quorum> {
        self.rare.get().quorum
    }

    /// The votes recorded so far (an approval with a quorum), in their order.
    pub fn votes(&self) -> &[Vote] {
        &self.rare.get().votes
    }

    /// When its route's escalation posted it to more places (see [`Escalation`]); set once,
    /// while it is pending.
    pub fn escalated_at(&self) -> Option<Timestamp> {
        self.rare.get().escalated_at
    }

    /// Sets [`Interaction::title`].
    pub fn set_title(&mut self, title: Option<Box<str>>) {
        self.rare.set(title.is_none(), |r| r.title = title);
    }

    /// Sets [`Interaction::description`].
    pub fn set_description(&mut self, description: Option<Box<str>>) {
        self.rare
            .set(description.is_none(), |r| r.description = description);
    }

    /// Sets [`Interaction::labels`].
    pub fn set_labels(&mut self, labels: Vec<Box<str>>) {
        self.rare.set(labels.is_empty(), |r| r.labels = labels);
    }

    /// Sets [`Interaction::quorum`].
    pub fn set_quorum(&mut self, quorum: Option<Quorum>) {
        self.rare.set(quorum.is_none(), |r| r.quorum = quorum);
    }

    /// Sets [`Interaction::votes`].
    pub fn set_votes(&mut self, votes: Vec<Vote>) {
        self.rare.set(votes.is_empty(), |r| r.votes = votes);
    }

    /// "Desk first": when its route held the phone copies because one of its approvers was
    /// at the desk at its creation, the time the phones are told (never past the deadline).
    pub fn phones_at(&self) -> Option<Timestamp> {
        self.rare.get().phones_at
    }

    /// Sets [`Interaction::phones_at`].
    pub fn set_phones_at(&mut self, at: Option<Timestamp>) {
        self.rare.set(at.is_none(), |r| r.phones_at = at);
    }

    /// Sets [`Interaction::escalated_at`].
    pub fn set_escalated_at(&mut self, at: Option<Timestamp>) {
        self.rare.set(at.is_none(), |r| r.escalated_at = at);
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

    /// The timeout its deadline was computed from, in whole seconds (the deadline less the
    /// creation time: not kept apart, pending interactions are held in memory).
    pub fn timeout_secs(&self) -> u64 {
        let ms = self
            .deadline
            .as_millisecond()
            .saturating_sub(self.created_at.as_millisecond());
        u64::try_from(ms / 1000).unwrap_or(0)
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
        let mut st = s.serialize_struct("Interaction", 21)?;
        st.serialize_field("id", &self.id)?;
        st.serialize_field("kind", &self.kind)?;
        st.serialize_field("status", self.status())?;
        st.serialize_field("tool_name", &self.tool_name)?;
        st.serialize_field("input", &self.input)?;
        st.serialize_field("session", &self.session)?;
        st.serialize_field("agent", &self.agent)?;
        st.serialize_field("title", &self.title())?;
        st.serialize_field("description", &self.description())?;
        st.serialize_field("cwd", &self.cwd)?;
        if self.suggestions.is_some() {
            st.serialize_field("suggestions", &self.suggestions)?;
        }
        if self.input_fixed {
            st.serialize_field("input_fixed", &true)?;
        }
        if !self.labels().is_empty() {
            st.serialize_field("labels", self.labels())?;
        }
        if self.route.is_some() {
            st.serialize_field("route", &self.route)?;
        }
        if self.owner.is_some() {
            st.serialize_field("owner", &self.owner)?;
        }
        if let Some(quorum) = self.quorum() {
            st.serialize_field("quorum", &Some(quorum))?;
            st.serialize_field("votes", self.votes())?;
        }
        st.serialize_field("created_at", &Millis(self.created_at))?;
        st.serialize_field("deadline", &Millis(self.deadline))?;
        st.serialize_field("timeout_secs", &self.timeout_secs())?;
        if let Some(at) = self.escalated_at() {
            st.serialize_field("escalated_at", &Millis(at))?;
        }
        if let Some(at) = self.phones_at() {
            st.serialize_field("phones_at", &Millis(at))?;
        }
        st.serialize_field("resolution", &self.resolution)?;
        st.end()
    }
}

#[cfg(test)]
mod tests;
