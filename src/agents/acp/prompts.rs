//! Each session's prompt turns, as the proxy reads them from the messages passing through
//! (see docs/steering.md): a `session/prompt` from the editor starts a turn, its answer with
//! a `stopReason` ends it; what the agent said meanwhile (its `agent_message_chunk` updates
//! since its last tool call) is the turn's last message. The proxy also starts turns of its
//! own ([`Turns::own_prompt`]): their ids are the proxy's (`imrelay-<pid>-<n>`, strings an
//! editor's ids are not), and their answers are the proxy's, never the editor's.
//!
//! Bounded: at most [`MAX_PROMPTS`] turns under way and [`MAX_SAID_SESSIONS`] sessions' last
//! words (each at most [`MAX_SAID_BYTES`]), the oldest forgotten first.

use std::collections::{HashMap, VecDeque};

use serde_json::{Value, json};

use super::session::id_key;
use super::wire::{CANCELLED, SESSION_PROMPT, SESSION_UPDATE};

/// Turns under way at once that are followed (more are passed on, unfollowed).
pub const MAX_PROMPTS: usize = 256;

/// Sessions whose words in the current turn are kept.
pub const MAX_SAID_SESSIONS: usize = 256;

/// The most bytes of one turn's words kept (the last message is cut to fewer characters).
pub const MAX_SAID_BYTES: usize = 16 * 1024;

/// Who started a turn.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Whose {
    /// The editor: the person at the desk.
    Editor,
    /// The proxy, with a person's words from imrelay.
    Proxy,
}

/// A turn that ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Ended {
    /// Its session.
    pub session: String,
    /// Who started it: the answer to a turn of the proxy's own is kept from the editor.
    pub whose: Whose,
    /// Its `stopReason`; `None` when the answer was an error.
    pub stop_reason: Option<String>,
    /// What the agent said last in it.
    pub said: Option<String>,
}

impl Ended {
    /// Whether the turn ended by itself (not cancelled, not failed): the end a person is told
    /// of, and that the next prompt may follow.
    pub fn finished(&self) -> bool {
        self.stop_reason.as_deref().is_some_and(|r| r != CANCELLED)
    }
}

/// What the proxy knows of each session's turns.
pub struct Turns {
    /// Turns under way: their request's id (as [`id_key`]), session and starter.
    prompts: HashMap<String, (String, Whose)>,
    prompt_order: VecDeque<String>,
    /// Each session's words in its current turn.
    said: HashMap<String, String>,
    said_order: VecDeque<String>,
    /// The proxy's own request ids: `imrelay-<pid>-`.
    prefix: String,
    next: u64,
}

impl Default for Turns {
    fn default() -> Self {
        Self::new()
    }
}

impl Turns {
    /// Nothing under way.
    pub fn new() -> Self {
        Self {
            prompts: HashMap::new(),
            prompt_order: VecDeque::new(),
            said: HashMap::new(),
            said_order: VecDeque::new(),
            prefix: format!("imrelay-{}-", std::process::id()),
            next: 0,
        }
    }

    /// Reads a message from the editor: the session whose turn it starts, if it is a
    /// `session/prompt`.
    pub fn editor_sent(&mut self, m: &Value) -> Option<String> {
        if m.get("method").and_then(Value::as_str) != Some(SESSION_PROMPT) {
            return None;
        }
        let id = m.get("id")?;
        let session = m["params"]["sessionId"].as_str()?.to_string();
        self.start(id_key(id), &session, Whose::Editor);
        Some(session)
    }

    /// Whether a turn of `session` is under way.
    pub fn running(&self, session: &str) -> bool {
        self.prompts.values().any(|(s, _)| s == session)
    }

    /// The `session/prompt` request that starts a turn of the proxy's own in `session` with
    /// `text`.
    pub fn own_prompt(&mut self, session: &str, text: &str) -> Value {
        self.next += 1;
        let id = format!("{}{}", self.prefix, self.next);
        self.start(id_key(&json!(id)), session, Whose::Proxy);
        json!({"jsonrpc": "2.0", "id": id, "method": SESSION_PROMPT,
            "params": {"sessionId": session, "prompt": [{"type": "text", "text": text}]}})
    }

    fn start(&mut self, key: String, session: &str, whose: Whose) {
        if self.prompts.len() >= MAX_PROMPTS
            && let Some(old) = self.prompt_order.pop_front()
        {
            self.prompts.remove(&old);
        }
        self.prompt_order.retain(|k| k != &key);
        self.prompt_order.push_back(key.clone());
        self.prompts.insert(key, (session.to_string(), whose));
        self.forget_said(session);
    }

    /// Forgets `session`'s words, and its place in the order they are forgotten in (so the
    /// order never holds more sessions than the words do).
    fn forget_said(&mut self, session: &str) -> Option<String> {
        let said = self.said.remove(session)?;
        self.said_order.retain(|s| s != session);
        Some(said)
    }

    /// Reads a message from the agent: the turn its answer ends, if it answers one; the
    /// words of a `session/update` are kept as the turn's.
    pub fn agent_sent(&mut self, m: &Value) -> Option<Ended> {
        match (m.get("id"), m.get("method").and_then(Value::as_str)) {
            (Some(id), None) => {
                let key = id_key(id);
                let (session, whose) = self.prompts.remove(&key)?;
                self.prompt_order.retain(|k| k != &key);
                let stop_reason = m["result"]["stopReason"].as_str().map(str::to_string);
                let said = self.forget_said(&session).filter(|s| !s.trim().is_empty());
                Some(Ended {
                    session,
                    whose,
                    stop_reason,
                    said,
                })
            }
            (None, Some(SESSION_UPDATE)) => {
                self.update(&m["params"]);
                None
            }
            _ => None,
        }
    }

    /// A `session/update`: message text is added to the turn's words; a tool call starts
    /// them over (the last message is what the agent said after its last call).
    fn update(&mut self, params: &Value) {
        let Some(session) = params["sessionId"].as_str() else {
            return;
        };
        let update = &params["update"];
        match update["sessionUpdate"].as_str() {
            Some("agent_message_chunk") => {
                if let Some(text) = update["content"]["text"].as_str() {
                    self.say(session, text);
                }
            }
            Some("tool_call") => {
                self.forget_said(session);
            }
            _ => {}
        }
    }

    fn say(&mut self, session: &str, text: &str) {
        if !self.said.contains_key(session) {
            if self.said.len() >= MAX_SAID_SESSIONS
                && let Some(old) = self.said_order.pop_front()
            {
                self.said.remove(&old);
            }
            self.said_order.push_back(session.to_string());
        }
        let said = self.said.entry(session.to_string()).or_default();
        let room = MAX_SAID_BYTES.saturating_sub(said.len());
        let mut cut = text.len().min(room);
        while !text.is_char_boundary(cut) {
            cut -= 1;
        }
        said.push_str(&text[..cut]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chunk(session: &str, text: &str) -> Value {
        json!({"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": session,
            "update": {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": text}}}})
    }

    #[test]
    fn an_editors_turn_ends_with_its_answer_and_what_was_said_after_the_last_call() {
        let mut t = Turns::new();
        let prompt = json!({"jsonrpc": "2.0", "id": 3, "method": "session/prompt",
            "params": {"sessionId": "s", "prompt": []}});
        assert_eq!(t.editor_sent(&prompt).as_deref(), Some("s"));
        assert!(t.running("s"));
        t.agent_sent(&chunk("s", "Let me look."));
        t.agent_sent(
            &json!({"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": "s",
            "update": {"sessionUpdate": "tool_call", "toolCallId": "c"}}}),
        );
        t.agent_sent(&chunk("s", "Done"));
        t.agent_sent(&chunk("s", "."));
        // An answer to another request is no turn's.
        assert_eq!(
            t.agent_sent(&json!({"jsonrpc": "2.0", "id": 4, "result": {}})),
            None
        );
        let ended = t
            .agent_sent(&json!({"jsonrpc": "2.0", "id": 3, "result": {"stopReason": "end_turn"}}))
            .unwrap();
        assert_eq!(ended.session, "s");
        assert_eq!(ended.whose, Whose::Editor);
        assert_eq!(ended.said.as_deref(), Some("Done."));
        assert!(ended.finished());
        assert!(!t.running("s"));
    }

    #[test]
    fn the_proxys_own_turns_have_ids_of_their_own_and_a_cancelled_turn_is_not_finished() {
        let mut t = Turns::new();
        let own = t.own_prompt("s", "go on");
        let id = own["id"].as_str().unwrap().to_string();
        assert!(id.starts_with("imrelay-"), "{id}");
        assert_eq!(own["params"]["prompt"][0]["text"], "go on");
        assert_ne!(t.own_prompt("s", "again")["id"], own["id"]);
        // The editor's numeric id 1 and the proxy's string ids are different keys.
        t.editor_sent(
            &json!({"jsonrpc": "2.0", "id": 1, "method": "session/prompt",
            "params": {"sessionId": "s"}}),
        );
        let ended = t
            .agent_sent(&json!({"jsonrpc": "2.0", "id": id, "result": {"stopReason": "cancelled"}}))
            .unwrap();
        assert_eq!(ended.whose, Whose::Proxy);
        assert!(!ended.finished());
        let failed = t
            .agent_sent(
                &json!({"jsonrpc": "2.0", "id": 1, "error": {"code": -32603, "message": "x"}}),
            )
            .unwrap();
        assert_eq!(failed.whose, Whose::Editor);
        assert!(!failed.finished());
    }

    #[test]
    fn memory_stays_bounded() {
        let mut t = Turns::new();
        for n in 0..(MAX_PROMPTS * 3) {
            let session = format!("s{n}");
            t.editor_sent(
                &json!({"jsonrpc": "2.0", "id": n, "method": "session/prompt",
                "params": {"sessionId": session}}),
            );
            t.agent_sent(&chunk(&session, &"é".repeat(MAX_SAID_BYTES)));
        }
        assert_eq!(t.prompts.len(), MAX_PROMPTS);
        assert!(t.prompt_order.len() <= MAX_PROMPTS);
        assert!(t.said.len() <= MAX_SAID_SESSIONS);
        assert!(t.said.values().all(|s| s.len() <= MAX_SAID_BYTES));
        // Malformed messages change nothing.
        for m in [
            json!(null),
            json!({"method": "session/prompt", "id": 1}),
            json!({"id": []}),
        ] {
            assert_eq!(t.editor_sent(&m), None);
            assert_eq!(t.agent_sent(&m), None);
        }
    }

    #[test]
    fn sessions_whose_turns_ended_leave_nothing_behind() {
        let mut t = Turns::new();
        for n in 0..(MAX_SAID_SESSIONS * 3) {
            let session = format!("s{n}");
            t.editor_sent(
                &json!({"jsonrpc": "2.0", "id": n, "method": "session/prompt",
                "params": {"sessionId": session}}),
            );
            t.agent_sent(&chunk(&session, "done"));
            let ended = t
                .agent_sent(
                    &json!({"jsonrpc": "2.0", "id": n, "result": {"stopReason": "end_turn"}}),
                )
                .unwrap();
            assert_eq!(ended.said.as_deref(), Some("done"));
        }
        assert!(t.prompts.is_empty() && t.prompt_order.is_empty());
        assert!(t.said.is_empty() && t.said_order.is_empty());
    }
}
