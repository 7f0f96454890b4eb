//! The turns of the agents imrelay reaches from outside their own hooks: the sessions behind
//! `imrelay acp` (`POST /v1/hooks/acp/session`) and `imrelay bridge opencode` (`POST
//! /v1/hooks/opencode/session`). The proxy or the bridge watches the agent's protocol and
//! reports what each session does (a session opened, a person at the desk prompted, a turn
//! ended, the session closed); the answer to a turn's end is the prompt it sends the agent
//! next, if any: a person's queued messages, or a reply to the "finished" question.
//!
//! Everything here is [`super::steer`]'s, with the sessions' messages delivered only when a
//! turn ends ([`crate::interaction::sessions::Delivery::TurnEnd`]): neither ACP nor OpenCode's API can add to a running
//! turn, so what a person sends meanwhile waits for its end and starts the next one (see
//! docs/steering.md).

use axum::http::StatusCode;
use axum::response::Response;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::Hooks;
use super::steer::{self, Agent, OnFinish};
use crate::wire::error::ApiError;
use crate::wire::json_response;

/// The longest session id or working directory kept, in characters (a longer session id is
/// no session: [`crate::interaction::Registry::report_session`] ignores it).
const MAX_TEXT_CHARS: usize = 16 * 1024;

/// What happened in a session.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum TurnEvent {
    /// The session was opened (ACP `session/new`, `load`, `resume`, `fork`).
    Started,
    /// A person at the desk started a turn (ACP `session/prompt` from the editor; OpenCode's
    /// session going busy).
    Prompted,
    /// The turn ended (the answer to `session/prompt`, OpenCode's `session.idle`).
    Stopped,
    /// The session was closed or deleted.
    Ended,
}

impl TurnEvent {
    /// The hook event [`steer::lifecycle`] reads for it.
    fn hook_event(self) -> &'static str {
        match self {
            TurnEvent::Started => "SessionStart",
            TurnEvent::Prompted => "UserPromptSubmit",
            TurnEvent::Stopped => "Stop",
            TurnEvent::Ended => "SessionEnd",
        }
    }
}

/// What the proxy or the bridge posts.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct TurnBody {
    /// What happened.
    pub event: TurnEvent,
    /// The agent's session id.
    pub session: String,
    /// The session's working directory, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cwd: Option<String>,
    /// The agent, from its ACP `initialize` result (the proxy only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<TurnAgent>,
    /// What the agent said in the turn that ended (`stopped`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_message: Option<String>,
}

/// The agent as it named itself (ACP's `agentInfo`: its version is not read).
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize, Serialize)]
pub struct TurnAgent {
    /// Its programmatic name (`gemini-cli`).
    pub name: String,
    /// Its name for people (`Gemini CLI`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
}

/// What the endpoint answers: the prompt to send the agent now, if any.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize, Serialize)]
pub struct TurnReply {
    /// The text of the next prompt (a person's words, said as theirs), or `null`.
    pub prompt: Option<String>,
}

/// `[hooks.acp]`'s and `[hooks.opencode]`'s settings for finished turns.
#[derive(Clone, Copy, Debug)]
pub struct Finish {
    /// What a finished turn does.
    pub on_finish: OnFinish,
    /// How long `ask` waits for a reply, seconds.
    pub finish_wait_secs: u64,
}

/// `text` cut to at most `max` characters.
fn clip(text: &str, max: usize) -> String {
    text.chars().take(max).collect()
}

/// Reports `body` for `agent`'s session and answers with the prompt to send, if any.
pub async fn turn(
    state: &Hooks,
    agent: Agent,
    owner: &str,
    body: TurnBody,
) -> Result<Response, ApiError> {
    let session = clip(&body.session, MAX_TEXT_CHARS);
    let cwd = body
        .cwd
        .as_deref()
        .map(|c| clip(c, MAX_TEXT_CHARS))
        .filter(|c| !c.is_empty());
    let hook = steer::Lifecycle {
        event: body.event.hook_event(),
        session: Some(session),
        cwd,
        last_message: body.last_message,
    };
    let answer = steer::lifecycle(state, agent, owner, hook).await;
    Ok(json_response(StatusCode::OK, &reply_of(answer.as_ref())))
}

/// The prompt in [`steer::lifecycle`]'s answer: the reason a `Stop` is blocked with.
fn reply_of(answer: Option<&Value>) -> TurnReply {
    let prompt = answer
        .filter(|a| a["decision"] == "block")
        .and_then(|a| a["reason"].as_str())
        .map(str::to_string);
    TurnReply { prompt }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn only_a_blocked_stop_is_a_prompt() {
        let block = json!({"decision": "block", "reason": "alice replies: go on"});
        assert_eq!(
            reply_of(Some(&block)).prompt.as_deref(),
            Some("alice replies: go on")
        );
        assert_eq!(reply_of(Some(&json!({}))), TurnReply::default());
        let context = json!({"hookSpecificOutput": {"additionalContext": "x"}});
        assert_eq!(reply_of(Some(&context)), TurnReply::default());
        assert_eq!(reply_of(None), TurnReply::default());
    }

    #[test]
    fn the_body_is_read_strictly() {
        let body: TurnBody = serde_json::from_value(
            json!({"event": "stopped", "session": "s", "last_message": "Done."}),
        )
        .unwrap();
        assert_eq!(body.event, TurnEvent::Stopped);
        assert!(serde_json::from_value::<TurnBody>(json!({"event": "x", "session": "s"})).is_err());
        assert!(
            serde_json::from_value::<TurnBody>(
                json!({"event": "ended", "session": "s", "more": 1})
            )
            .is_err()
        );
    }
}
