//! What the proxy remembers of one connection between an editor and an ACP agent, read from
//! the messages passing through (never changing them): the agent's name (its `initialize`
//! result), each session's working directory (`session/new`, `load`, `resume`, `fork`), and
//! each tool call the agent reported in `session/update`, so that a permission request that
//! names only its tool call's id is shown with everything the agent said about it before.
//!
//! Everything is bounded, in number and in bytes: the requests awaiting their result, the
//! sessions and the tool calls are each kept up to a fixed number and a fixed size (about what
//! their JSON would take), the oldest forgotten first; a tool call is forgotten once it has ended,
//! and one larger than the proxy could post to imrelay is not kept at all.

use std::collections::{HashMap, VecDeque};
use std::hash::Hash;

use serde_json::Value;

use super::HookBody;
use super::wire::{
    AgentInfo, INITIALIZE, PermissionRequest, SESSION_OPENERS, SESSION_UPDATE, ToolCall,
};
use crate::wire::MAX_BODY_BYTES;

/// Requests from the editor awaiting their result that the tracker reads.
const MAX_OPENING: usize = 64;
/// Bytes of the requests awaiting their result (their session ids and directories).
const MAX_OPENING_BYTES: usize = 1024 * 1024;
/// Sessions whose working directory is remembered.
const MAX_SESSIONS: usize = 1024;
/// Bytes of the sessions remembered (their ids and directories).
const MAX_SESSION_BYTES: usize = 4 * 1024 * 1024;
/// Tool calls remembered, of all sessions.
const MAX_TOOL_CALLS: usize = 512;
/// Bytes of the tool calls remembered, of all sessions (about their JSON).
const MAX_TOOL_CALL_BYTES: usize = 16 * 1024 * 1024;
/// The largest tool call kept: a permission request carrying more could not be posted to
/// imrelay anyway (its body limit).
const MAX_ONE_TOOL_CALL_BYTES: usize = MAX_BODY_BYTES;

/// A map that keeps at most `cap` entries and `max_bytes` of them (as each entry's size
/// says), forgetting the oldest, and no entry larger than `max_entry`.
struct Bounded<K, V> {
    map: HashMap<K, (V, usize)>,
    order: VecDeque<K>,
    cap: usize,
    max_bytes: usize,
    max_entry: usize,
    /// The sum of the kept entries' sizes.
    bytes: usize,
}

impl<K: Clone + Eq + Hash, V> Bounded<K, V> {
    fn new(cap: usize, max_bytes: usize, max_entry: usize) -> Self {
        Self {
            map: HashMap::new(),
            order: VecDeque::new(),
            cap,
            max_bytes,
            max_entry: max_entry.min(max_bytes),
            bytes: 0,
        }
    }

    /// Keeps `v` under `k`, taking `size` bytes; one larger than `max_entry` is not kept (and
    /// what `k` held before is forgotten).
    fn insert(&mut self, k: K, v: V, size: usize) {
        if size > self.max_entry {
            self.remove(&k);
            return;
        }
        match self.map.insert(k.clone(), (v, size)) {
            Some((_, old)) => self.bytes -= old,
            None => self.order.push_back(k),
        }
        self.bytes += size;
        self.evict();
    }

    /// Changes the entry `k` with `change`, which returns its new size; `false` when there
    /// is no such entry.
    fn update(&mut self, k: &K, change: impl FnOnce(&mut V) -> usize) -> bool {
        let Some((v, size)) = self.map.get_mut(k) else {
            return false;
        };
        let new = change(v);
        self.bytes = self.bytes - *size + new;
        *size = new;
        if new > self.max_entry {
            self.remove(k);
        }
        self.evict();
        true
    }

    /// Forgets the oldest entries until the bounds hold.
    fn evict(&mut self) {
        while self.map.len() > self.cap || self.bytes > self.max_bytes {
            match self.order.pop_front() {
                Some(old) => {
                    self.remove(&old);
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
        self.map.get(k).map(|(v, _)| v)
    }

    fn remove(&mut self, k: &K) -> Option<V> {
        let (v, size) = self.map.remove(k)?;
        self.bytes -= size;
        Some(v)
    }

    fn len(&self) -> usize {
        self.map.len()
    }
}

/// About the bytes a tool call takes as JSON (what the proxy would post of it): its texts'
/// lengths and a few bytes per value, counted without writing it out.
fn json_size(call: &ToolCall) -> usize {
    let ToolCall {
        tool_call_id,
        title,
        kind,
        status,
        content,
        locations,
        raw_input,
    } = call;
    let texts = [
        Some(tool_call_id),
        title.as_ref(),
        kind.as_ref(),
        status.as_ref(),
    ];
    let lists = [content.as_ref(), locations.as_ref()];
    texts.iter().flatten().map(|t| t.len() + 16).sum::<usize>()
        + lists
            .iter()
            .flatten()
            .map(|l| l.iter().map(value_size).sum::<usize>() + 16)
            .sum::<usize>()
        + raw_input.as_ref().map_or(0, value_size)
}

/// About the bytes `v` takes as JSON: its strings' lengths and a few bytes per value.
fn value_size(v: &Value) -> usize {
    match v {
        Value::Null | Value::Bool(_) | Value::Number(_) => 8,
        Value::String(s) => s.len() + 2,
        Value::Array(items) => items.iter().map(value_size).sum::<usize>() + 2,
        Value::Object(map) => {
            map.iter()
                .map(|(k, v)| k.len() + 4 + value_size(v))
                .sum::<usize>()
                + 2
        }
    }
}

/// The bytes a string of the tracker's takes.
fn text_size(s: Option<&str>) -> usize {
    s.map_or(0, str::len)
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
            opening: Bounded::new(MAX_OPENING, MAX_OPENING_BYTES, MAX_OPENING_BYTES),
            sessions: Bounded::new(MAX_SESSIONS, MAX_SESSION_BYTES, MAX_SESSION_BYTES),
            tool_calls: Bounded::new(MAX_TOOL_CALLS, MAX_TOOL_CALL_BYTES, MAX_ONE_TOOL_CALL_BYTES),
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
        let key = id_key(id);
        if method == INITIALIZE {
            let size = key.len();
            self.opening.insert(key, Opening::Initialize, size);
        } else if SESSION_OPENERS.contains(&method) {
            let (cwd, session) = (text("cwd"), text("sessionId"));
            let size = key.len() + text_size(cwd.as_deref()) + text_size(session.as_deref());
            self.opening
                .insert(key, Opening::Session { cwd, session }, size);
        }
    }

    /// Reads a message from the agent to the editor: the session it opened, if it is the
    /// answer to a `session/new` (or `load`, `resume`, `fork`).
    pub fn agent_sent(&mut self, m: &Value) -> Option<String> {
        match (m.get("id"), m.get("method").and_then(Value::as_str)) {
            // A response: to a request the tracker reads?
            (Some(id), None) => {
                let opening = self.opening.remove(&id_key(id))?;
                let result = m.get("result")?;
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
                        if let Some(s) = &session {
                            let size = s.len() + text_size(cwd.as_deref());
                            self.sessions.insert(s.clone(), cwd, size);
                        }
                        return session;
                    }
                }
                None
            }
            (None, Some(SESSION_UPDATE)) => {
                self.tool_call_update(m.get("params"));
                None
            }
            _ => None,
        }
    }

    /// The working directory of `session`, when the tracker knows it.
    pub fn cwd(&self, session: &str) -> Option<String> {
        self.sessions.get(&session.to_string()).cloned().flatten()
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
        // One too large to post is not kept: a request for it carries only its own fields.
        let merged = !fresh
            && self.tool_calls.update(&key, |known| {
                known.merge(&call);
                session.len() + json_size(known)
            });
        if !merged {
            let size = session.len() + json_size(&call);
            self.tool_calls.insert(key, call, size);
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

    /// How many bytes of tool calls are remembered, about their JSON (for tests of the bound).
    pub fn tool_call_bytes(&self) -> usize {
        self.tool_calls.bytes
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

    /// A `tool_call` of `bytes` bytes of content, for session `s`.
    fn big_call(id: &str, bytes: usize) -> Value {
        json!({"method": "session/update", "params": {"sessionId": "s",
            "update": {"sessionUpdate": "tool_call", "toolCallId": id, "title": "Write",
                "content": [{"type": "content", "content": {"type": "text", "text": "x".repeat(bytes)}}]}}})
    }

    #[test]
    fn tool_calls_are_bounded_in_bytes_too() {
        let mut t = Tracker::new();
        // 40 tool calls of about 1 MB each (just under what one post may carry): more than
        // the budget holds.
        for n in 0..40 {
            t.agent_sent(&big_call(&format!("c{n}"), 1_000_000));
            assert!(
                t.tool_call_bytes() <= MAX_TOOL_CALL_BYTES,
                "{}",
                t.tool_call_bytes()
            );
        }
        // What is kept is what its sizes say, and the newest are the ones kept.
        let counted: usize = t.tool_calls.map.values().map(|(_, size)| size).sum();
        assert_eq!(counted, t.tool_call_bytes());
        assert!(t.tool_call_bytes() > MAX_TOOL_CALL_BYTES - 1_100_000);
        // As many as fit: each counts its 1 MB and some bytes more.
        let each = t.tool_call_bytes() / t.tool_calls_known();
        assert!((1_000_000..1_000_200).contains(&each), "{each}");
        let fit = MAX_TOOL_CALL_BYTES / each;
        assert_eq!(t.tool_calls_known(), fit);
        let newest = t
            .permission_body(
                &json!({"sessionId": "s", "toolCall": {"toolCallId": "c39"}, "options": []}),
            )
            .unwrap();
        assert_eq!(newest.request.tool_call.title.as_deref(), Some("Write"));
        let oldest = t
            .permission_body(
                &json!({"sessionId": "s", "toolCall": {"toolCallId": "c0"}, "options": []}),
            )
            .unwrap();
        assert_eq!(oldest.request.tool_call.title, None);
        // An update that grows a call past what one post may carry forgets it; so does an
        // ended call; the count follows.
        t.agent_sent(
            &json!({"method": "session/update", "params": {"sessionId": "s",
            "update": {"sessionUpdate": "tool_call_update", "toolCallId": "c39",
                "rawInput": {"text": "y".repeat(MAX_ONE_TOOL_CALL_BYTES)}}}}),
        );
        t.agent_sent(&json!({"method": "session/update", "params": {"sessionId": "s",
            "update": {"sessionUpdate": "tool_call_update", "toolCallId": "c38", "status": "failed"}}}));
        let counted: usize = t.tool_calls.map.values().map(|(_, size)| size).sum();
        assert_eq!(counted, t.tool_call_bytes());
        assert_eq!(t.tool_calls_known(), fit - 2);
        // One larger than a post is never kept, and takes nothing from the others.
        t.agent_sent(&big_call("huge", MAX_ONE_TOOL_CALL_BYTES + 1));
        assert_eq!(t.tool_calls_known(), fit - 2);
    }

    #[test]
    fn sessions_are_bounded_in_bytes_too() {
        let mut t = Tracker::new();
        let cwd = "/p".repeat(32 * 1024);
        for n in 0..MAX_SESSIONS {
            t.client_sent(&json!({"id": n, "method": "session/new", "params": {"cwd": cwd}}));
            t.agent_sent(&json!({"id": n, "result": {"sessionId": format!("s{n}")}}));
        }
        assert!(
            t.sessions.bytes <= MAX_SESSION_BYTES,
            "{}",
            t.sessions.bytes
        );
        assert!(t.sessions.len() < MAX_SESSIONS / 4, "{}", t.sessions.len());
        assert!(t.opening.bytes <= MAX_OPENING_BYTES);
    }
}
