//! What the proxy remembers of one connection between an editor and an ACP agent, read from
//! the messages passing through (never changing them): the agent's name (its `initialize`
//! result), each session's working directory (`session/new`, `load`, `resume`, `fork`), and
//! each tool call the agent reported in `session/update`, so that a permission request that
//! names only its tool call's id is shown with everything the agent said about it before.
//!
//! Everything is bounded: the requests awaiting their result, the sessions and the tool calls
//! are each kept up to a fixed number, the oldest forgotten first; a tool call is forgotten
//! once it has ended.

use std::collections::{HashMap, VecDeque};
use std::hash::Hash;

use serde_json::Value;

use super::HookBody;
use super::wire::{
    AgentInfo, INITIALIZE, PermissionRequest, SESSION_OPENERS, SESSION_UPDATE, ToolCall,
};

/// Requests from the editor awaiting their result that the tracker reads.
const MAX_OPENING: usize = 64;
/// Sessions whose working directory is remembered.
const MAX_SESSIONS: usize = 1024;
/// Tool calls remembered, of all sessions.
const MAX_TOOL_CALLS: usize = 512;

/// A map that keeps at most `cap` entries, forgetting the oldest.
struct Bounded<K, V> {
    map: HashMap<K, V>,
    order: VecDeque<K>,
    cap: usize,
}

impl<K: Clone + Eq + Hash, V> Bounded<K, V> {
    fn new(cap: usize) -> Self {
        Self {
            map: HashMap::new(),
            order: VecDeque::new(),
            cap,
        }
    }

    fn insert(&mut self, k: K, v: V) {
        if self.map.insert(k.clone(), v).is_none() {
            self.order.push_back(k);
        }
        while self.map.len() > self.cap {
            match self.order.pop_front() {
                Some(old) => {
                    self.map.remove(&old);
                }
                None => break,
            }
        }
        // Keys removed by hand linger in `order`; drop them before it grows past twice the cap.
        if self.order.len() > self.cap.saturating_mul(2) {
            let map = &self.map;
            self.order.retain(|k| map.contains_key(k));
        }
    }

    fn get(&self, k: &K) -> Option<&V> {
        self.map.get(k)
    }

    fn get_mut(&mut self, k: &K) -> Option<&mut V> {
        self.map.get_mut(k)
    }

    fn remove(&mut self, k: &K) -> Option<V> {
        self.map.remove(k)
    }

    fn len(&self) -> usize {
        self.map.len()
    }
}

/// A request from the editor whose result the tracker reads.
enum Opening {
    /// `initialize`: the result names the agent.
    Initialize,
    /// A request opening a session in `cwd`; its `sessionId` is in its params (`load`,
    /// `resume`) or its result (`new`, `fork`).
    Session {
        cwd: Option<String>,
        session: Option<String>,
    },
}

/// A JSON-RPC id as a map key: its JSON text, so `1` and `"1"` differ.
pub fn id_key(id: &Value) -> String {
    id.to_string()
}

/// What the proxy knows of one connection.
pub struct Tracker {
    agent: Option<AgentInfo>,
    opening: Bounded<String, Opening>,
    sessions: Bounded<String, Option<String>>,
    tool_calls: Bounded<(String, String), ToolCall>,
}

impl Default for Tracker {
    fn default() -> Self {
        Self::new()
    }
}

impl Tracker {
    /// Nothing known yet.
    pub fn new() -> Self {
        Self {
            agent: None,
            opening: Bounded::new(MAX_OPENING),
            sessions: Bounded::new(MAX_SESSIONS),
            tool_calls: Bounded::new(MAX_TOOL_CALLS),
        }
    }

    /// The agent's name and version, once its `initialize` result passed.
    pub fn agent(&self) -> Option<&AgentInfo> {
        self.agent.as_ref()
    }

    /// Reads a message from the editor to the agent.
    pub fn client_sent(&mut self, m: &Value) {
        let (Some(id), Some(method)) = (m.get("id"), m.get("method").and_then(Value::as_str))
        else {
            return;
        };
        let params = m.get("params").unwrap_or(&Value::Null);
        let text = |k: &str| params.get(k).and_then(Value::as_str).map(str::to_string);
        if method == INITIALIZE {
            self.opening.insert(id_key(id), Opening::Initialize);
        } else if SESSION_OPENERS.contains(&method) {
            self.opening.insert(
                id_key(id),
                Opening::Session {
                    cwd: text("cwd"),
                    session: text("sessionId"),
                },
            );
        }
    }

    /// Reads a message from the agent to the editor.
    pub fn agent_sent(&mut self, m: &Value) {
        match (m.get("id"), m.get("method").and_then(Value::as_str)) {
            // A response: to a request the tracker reads?
            (Some(id), None) => {
                let Some(opening) = self.opening.remove(&id_key(id)) else {
                    return;
                };
                let Some(result) = m.get("result") else {
                    return;
                };
                match opening {
                    Opening::Initialize => {
                        if let Some(info) = result
                            .get("agentInfo")
                            .and_then(|a| serde_json::from_value::<AgentInfo>(a.clone()).ok())
                        {
                            self.agent = Some(info);
                        }
                    }
                    Opening::Session { cwd, session } => {
                        let session = result
                            .get("sessionId")
                            .and_then(Value::as_str)
                            .map(str::to_string)
                            .or(session);
                        if let Some(s) = session {
                            self.sessions.insert(s, cwd);
                        }
                    }
                }
            }
            (None, Some(SESSION_UPDATE)) => self.tool_call_update(m.get("params")),
            _ => {}
        }
    }

    /// A `session/update` carrying a `tool_call` or a `tool_call_update`.
    fn tool_call_update(&mut self, params: Option<&Value>) {
        let Some(params) = params else { return };
        let Some(session) = params.get("sessionId").and_then(Value::as_str) else {
            return;
        };
        let Some(update) = params.get("update") else {
            return;
        };
        let fresh = match update.get("sessionUpdate").and_then(Value::as_str) {
            Some("tool_call") => true,
            Some("tool_call_update") => false,
            _ => return,
        };
        let Ok(call) = serde_json::from_value::<ToolCall>(update.clone()) else {
            return;
        };
        let key = (session.to_string(), call.tool_call_id.clone());
        if call.is_over() {
            self.tool_calls.remove(&key);
            return;
        }
        match self.tool_calls.get_mut(&key) {
            Some(known) if !fresh => known.merge(&call),
            _ => self.tool_calls.insert(key, call),
        }
    }

    /// What the proxy posts for a `session/request_permission` with `params`: the request,
    /// its tool call completed from what the agent reported of it before (the request's own
    /// fields win), the session's working directory and the agent; or why the params are
    /// not a permission request.
    pub fn permission_body(&self, params: &Value) -> Result<HookBody, String> {
        let mut request: PermissionRequest = serde_json::from_value(params.clone())
            .map_err(|e| format!("its params are not a permission request: {e}"))?;
        let key = (
            request.session_id.clone(),
            request.tool_call.tool_call_id.clone(),
        );
        if let Some(known) = self.tool_calls.get(&key) {
            let mut call = known.clone();
            call.merge(&request.tool_call);
            request.tool_call = call;
        }
        let cwd = self.sessions.get(&request.session_id).cloned().flatten();
        Ok(HookBody {
            request,
            cwd,
            agent: self.agent.clone(),
        })
    }

    /// How many tool calls are remembered (for tests of the bound).
    pub fn tool_calls_known(&self) -> usize {
        self.tool_calls.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn fixture(name: &str) -> Vec<(String, Value)> {
        let path = format!(
            "{}/tests/fixtures/gemini-cli/{name}.jsonl",
            env!("CARGO_MANIFEST_DIR")
        );
        std::fs::read_to_string(path)
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str::<Value>(l).unwrap())
            .map(|l| (l["dir"].as_str().unwrap().to_string(), l["msg"].clone()))
            .collect()
    }

    #[test]
    fn the_captured_conversation_gives_the_session_cwd_and_agent() {
        let mut t = Tracker::new();
        let mut asked = None;
        for (dir, m) in fixture("acp_allow") {
            if dir == "->" {
                t.client_sent(&m);
            } else {
                t.agent_sent(&m);
                if m["method"] == "session/request_permission" {
                    asked = Some(m);
                }
            }
        }
        let asked = asked.unwrap();
        let body = t.permission_body(&asked["params"]).unwrap();
        assert_eq!(
            body.cwd.as_deref(),
            Some("/tmp/imrelay-acp-esarz863/project")
        );
        assert_eq!(body.agent.unwrap().name, "gemini-cli");
        assert_eq!(
            body.request.tool_call.title.as_deref(),
            Some("echo ok > acp-proof.txt")
        );
    }

    #[test]
    fn a_request_naming_only_its_tool_call_gets_what_the_agent_said_before() {
        let mut t = Tracker::new();
        t.agent_sent(&json!({"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": "s",
            "update": {"sessionUpdate": "tool_call", "toolCallId": "c1", "title": "Read a.txt", "kind": "read",
                "status": "pending", "locations": [{"path": "/p/a.txt"}]}}}));
        t.agent_sent(&json!({"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": "s",
            "update": {"sessionUpdate": "tool_call_update", "toolCallId": "c1", "title": "Read /p/a.txt"}}}));
        let body = t
            .permission_body(&json!({"sessionId": "s", "toolCall": {"toolCallId": "c1"},
                "options": [{"optionId": "y", "name": "Yes", "kind": "allow_once"}]}))
            .unwrap();
        let call = body.request.tool_call;
        assert_eq!(call.title.as_deref(), Some("Read /p/a.txt"));
        assert_eq!(call.kind.as_deref(), Some("read"));
        assert_eq!(call.locations.unwrap().len(), 1);
        // Unknown session: no working directory, nothing else lost.
        assert_eq!(body.cwd, None);
        // An ended tool call is forgotten.
        t.agent_sent(&json!({"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": "s",
            "update": {"sessionUpdate": "tool_call_update", "toolCallId": "c1", "status": "completed"}}}));
        assert_eq!(t.tool_calls_known(), 0);
    }

    #[test]
    fn malformed_messages_change_nothing_and_memory_stays_bounded() {
        let mut t = Tracker::new();
        for m in [
            json!(null),
            json!([1, 2]),
            json!({"id": 1, "result": {"agentInfo": 5}}),
            json!({"method": "session/update", "params": {"sessionId": 5}}),
            json!({"method": "session/update", "params": {"sessionId": "s", "update": {"sessionUpdate": "tool_call"}}}),
        ] {
            t.agent_sent(&m);
            t.client_sent(&m);
        }
        assert!(t.agent().is_none());
        assert_eq!(t.tool_calls_known(), 0);
        assert!(t.permission_body(&json!({"sessionId": "s"})).is_err());
        for n in 0..10_000 {
            t.agent_sent(&json!({"method": "session/update", "params": {"sessionId": "s",
                "update": {"sessionUpdate": "tool_call", "toolCallId": format!("c{n}"), "title": "x"}}}));
            t.client_sent(&json!({"id": n, "method": "session/new", "params": {"cwd": "/p"}}));
        }
        assert_eq!(t.tool_calls_known(), MAX_TOOL_CALLS);
        assert_eq!(t.opening.len(), MAX_OPENING);
        assert!(t.tool_calls.order.len() <= 2 * MAX_TOOL_CALLS);
    }
}
