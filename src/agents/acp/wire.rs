//! The Agent Client Protocol's messages as imrelay reads them (protocol version 1, from its
//! published schema, `schema/v1/schema.json` of agentclientprotocol/agent-client-protocol):
//! the `session/request_permission` request and its response, the tool call it carries, and
//! the few other messages the proxy watches (`session/new` for the working directory,
//! `session/cancel`, `$/cancel_request`, `session/update` for a tool call's details).
//!
//! Everything is read leniently: a field imrelay does not know is kept where it passes
//! through and ignored here, and a value of an unknown kind (a newer option kind, a content
//! block type) is carried as [`OptionKind::Other`] or raw JSON rather than refused.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The agent asks the client to approve a tool call.
pub const REQUEST_PERMISSION: &str = "session/request_permission";
/// The client cancels a session's prompt turn (a notification).
pub const SESSION_CANCEL: &str = "session/cancel";
/// Either side withdraws one of its outstanding requests (a notification).
pub const CANCEL_REQUEST: &str = "$/cancel_request";
/// The agent reports progress, tool calls among it (a notification).
pub const SESSION_UPDATE: &str = "session/update";
/// The client (or the proxy) starts a prompt turn; the answer, with its `stopReason`, ends it.
pub const SESSION_PROMPT: &str = "session/prompt";
/// The `stopReason` of a turn the client cancelled.
pub const CANCELLED: &str = "cancelled";
/// The client starts the connection; the agent's answer names it.
pub const INITIALIZE: &str = "initialize";
/// The requests that open a session in a working directory: their `params.cwd`, and the
/// `sessionId` in their params or their result.
pub const SESSION_OPENERS: &[&str] = &[
    "session/new",
    "session/load",
    "session/resume",
    "session/fork",
];

/// `session/request_permission`'s params.
#[derive(Clone, Debug, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PermissionRequest {
    /// The session asking.
    pub session_id: String,
    /// The tool call to approve: at least its id; the agent may have sent the rest in
    /// `session/update` notifications before.
    pub tool_call: ToolCall,
    /// What the person may choose.
    pub options: Vec<PermissionOption>,
}

/// One choice the agent offers.
#[derive(Clone, Debug, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PermissionOption {
    /// What the response names when this option is chosen.
    pub option_id: String,
    /// Its label in the agent's words ("Allow for this session").
    pub name: String,
    /// What it does.
    pub kind: OptionKind,
}

/// What an option does.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum OptionKind {
    /// Allow this call only.
    AllowOnce,
    /// Allow it and remember the choice (for the session, or for good: the agent decides and
    /// says so in the option's name).
    AllowAlways,
    /// Reject this call only.
    RejectOnce,
    /// Reject it and remember the choice.
    RejectAlways,
    /// A kind this version of imrelay does not know: never chosen.
    #[serde(other)]
    Other,
}

/// A tool call (ACP's `ToolCallUpdate`: every field but the id may be absent).
#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolCall {
    /// Its id within the session.
    pub tool_call_id: String,
    /// What it does, for people.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// Its category: `read`, `edit`, `delete`, `move`, `search`, `execute`, `think`,
    /// `fetch`, `switch_mode`, `other`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// `pending`, `in_progress`, `completed`, `failed`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<String>,
    /// What it shows: content blocks, diffs, terminals ([`Content`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content: Option<Vec<Value>>,
    /// The files it touches ([`Location`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub locations: Option<Vec<Value>>,
    /// The tool's own input, as the agent chose to send it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub raw_input: Option<Value>,
}

impl ToolCall {
    /// Takes every field `update` carries (an update sends only what changed).
    pub fn merge(&mut self, update: &ToolCall) {
        let ToolCall {
            tool_call_id: _,
            title,
            kind,
            status,
            content,
            locations,
            raw_input,
        } = update;
        fn take<T: Clone>(mine: &mut Option<T>, theirs: &Option<T>) {
            if theirs.is_some() {
                mine.clone_from(theirs);
            }
        }
        take(&mut self.title, title);
        take(&mut self.kind, kind);
        take(&mut self.status, status);
        take(&mut self.content, content);
        take(&mut self.locations, locations);
        take(&mut self.raw_input, raw_input);
    }

    /// Whether it has ended (`completed` or `failed`): no permission is asked for it any more.
    pub fn is_over(&self) -> bool {
        matches!(self.status.as_deref(), Some("completed" | "failed"))
    }
}

/// One entry of a tool call's `content`, read from its JSON.
#[derive(Clone, Debug, PartialEq)]
pub enum Content {
    /// A content block (`{"type": "content", "content": {...}}`) holding text.
    Text(String),
    /// A content block of another type (an image, a resource link, ...): its type.
    Block(String),
    /// A change to a file: `oldText` is absent or `null` for a new file.
    Diff {
        /// The file, an absolute path.
        path: String,
        /// What it held.
        old_text: Option<String>,
        /// What it will hold.
        new_text: String,
    },
    /// A terminal the client shows (`terminalId`).
    Terminal(String),
    /// Something this version of imrelay does not know, or not in its documented shape.
    Unknown,
}

impl Content {
    /// Reads one entry.
    pub fn read(v: &Value) -> Content {
        let str_of = |v: &Value, k: &str| v.get(k).and_then(Value::as_str).map(str::to_string);
        match v.get("type").and_then(Value::as_str) {
            Some("content") => {
                let block = v.get("content").unwrap_or(&Value::Null);
                match block.get("type").and_then(Value::as_str) {
                    Some("text") => match str_of(block, "text") {
                        Some(t) => Content::Text(t),
                        None => Content::Unknown,
                    },
                    Some(other) => Content::Block(other.to_string()),
                    None => Content::Unknown,
                }
            }
            Some("diff") => match (str_of(v, "path"), str_of(v, "newText")) {
                (Some(path), Some(new_text)) => Content::Diff {
                    path,
                    old_text: str_of(v, "oldText"),
                    new_text,
                },
                _ => Content::Unknown,
            },
            Some("terminal") => match str_of(v, "terminalId") {
                Some(id) => Content::Terminal(id),
                None => Content::Unknown,
            },
            _ => Content::Unknown,
        }
    }
}

/// A file a tool call touches, read from its JSON: `path`, and `line` if given.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Location {
    /// The file, an absolute path.
    pub path: String,
    /// The line, from 1.
    pub line: Option<u64>,
}

impl Location {
    /// Reads one entry; `None` if it has no path.
    pub fn read(v: &Value) -> Option<Location> {
        Some(Location {
            path: v.get("path")?.as_str()?.to_string(),
            line: v.get("line").and_then(Value::as_u64),
        })
    }

    /// `path` or `path:line`.
    pub fn shown(&self) -> String {
        match self.line {
            Some(line) => format!("{}:{line}", self.path),
            None => self.path.clone(),
        }
    }
}

/// `session/request_permission`'s result.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize, Serialize)]
pub struct PermissionResponse {
    /// What the person decided.
    pub outcome: PermissionOutcome,
}

/// A `session/request_permission` outcome.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize, Serialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum PermissionOutcome {
    /// The prompt turn was cancelled (the only answer once it is).
    Cancelled,
    /// The person chose this option.
    Selected {
        /// The option's `optionId`.
        #[serde(rename = "optionId")]
        option_id: String,
    },
}

/// The agent's name and version, from its `initialize` result (`agentInfo`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize, Serialize)]
pub struct AgentInfo {
    /// Its programmatic name (`gemini-cli`).
    pub name: String,
    /// Its name for people (`Gemini CLI`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// Its version.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn gemini_clis_request_is_read_and_an_unknown_kind_is_kept_apart() {
        let params = json!({"sessionId": "s1",
            "options": [{"optionId": "proceed_always", "name": "Allow for this session", "kind": "allow_always"},
                        {"optionId": "proceed_once", "name": "Allow", "kind": "allow_once"},
                        {"optionId": "cancel", "name": "Reject", "kind": "reject_once"},
                        {"optionId": "later", "name": "Ask me later", "kind": "defer"}],
            "toolCall": {"toolCallId": "run_shell_command__1", "status": "pending", "title": "echo ok",
                "content": [{"type": "content", "content": {"type": "text", "text": "why"}}],
                "locations": [], "kind": "execute"}});
        let r: PermissionRequest = serde_json::from_value(params).unwrap();
        assert_eq!(r.options[0].kind, OptionKind::AllowAlways);
        assert_eq!(r.options[3].kind, OptionKind::Other);
        assert_eq!(r.tool_call.title.as_deref(), Some("echo ok"));
        let content = r.tool_call.content.as_deref().unwrap();
        assert_eq!(Content::read(&content[0]), Content::Text("why".into()));
    }

    #[test]
    fn content_and_locations_are_read_in_their_documented_shapes_only() {
        let diff = json!({"type": "diff", "path": "/p/a.txt", "oldText": null, "newText": "x"});
        assert_eq!(
            Content::read(&diff),
            Content::Diff {
                path: "/p/a.txt".into(),
                old_text: None,
                new_text: "x".into()
            }
        );
        assert_eq!(Content::read(&json!({"type": "diff"})), Content::Unknown);
        assert_eq!(
            Content::read(&json!({"type": "terminal", "terminalId": "t1"})),
            Content::Terminal("t1".into())
        );
        assert_eq!(
            Content::read(&json!({"type": "content", "content": {"type": "image", "data": ""}})),
            Content::Block("image".into())
        );
        assert_eq!(Content::read(&json!(5)), Content::Unknown);
        assert_eq!(
            Location::read(&json!({"path": "/p/a", "line": 3}))
                .unwrap()
                .shown(),
            "/p/a:3"
        );
        assert_eq!(Location::read(&json!({"line": 3})), None);
    }

    #[test]
    fn outcomes_are_written_as_acp_expects() {
        let selected = PermissionResponse {
            outcome: PermissionOutcome::Selected {
                option_id: "proceed_once".into(),
            },
        };
        assert_eq!(
            serde_json::to_value(&selected).unwrap(),
            json!({"outcome": {"outcome": "selected", "optionId": "proceed_once"}})
        );
        let cancelled = PermissionResponse {
            outcome: PermissionOutcome::Cancelled,
        };
        assert_eq!(
            serde_json::to_value(&cancelled).unwrap(),
            json!({"outcome": {"outcome": "cancelled"}})
        );
    }

    #[test]
    fn an_update_changes_only_what_it_carries() {
        let mut call = ToolCall {
            tool_call_id: "c".into(),
            title: Some("Read a".into()),
            kind: Some("read".into()),
            ..ToolCall::default()
        };
        call.merge(&ToolCall {
            tool_call_id: "c".into(),
            status: Some("completed".into()),
            ..ToolCall::default()
        });
        assert_eq!(call.title.as_deref(), Some("Read a"));
        assert!(call.is_over());
    }
}
