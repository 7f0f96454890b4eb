//! What the agent receives, on the wire: the Claude Agent SDK's `PermissionResult`, exactly as
//! `canUseTool` returns it, and [`AgentResult`], which is that or MCP's elicitation result.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use serde_json::value::RawValue;

use super::Input;
use crate::interaction::form::{ElicitAction, ElicitResult};

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
