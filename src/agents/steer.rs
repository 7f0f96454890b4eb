//! Sessions and steering, shared by the hook adapters (Claude Code, Codex): each hook event
//! reported as what the session did, and the answers that reach the agent beyond an
//! approval: a person's queued message as additional context after a tool or a prompt, and a
//! person's reply to a finished turn as the reason the turn goes on.
//!
//! Both agents take the same shapes (see docs/sessions.md): a `Stop` hook answering
//! `{"decision": "block", "reason": R}` continues the turn with `R`; a `PostToolUse` or
//! `UserPromptSubmit` hook answering `{"hookSpecificOutput": {"hookEventName": E,
//! "additionalContext": M}}` shows the model `M`. imrelay blocks a `Stop` only with words a
//! person gave (a reply to the "finished" question, or a queued message), never by itself:
//! neither agent's `stop_hook_active` flag tells one block from the next.

use std::borrow::Cow;
use std::time::Duration;

use serde_json::{Value, json};

use super::Hooks;
use crate::interaction::sessions::{
    Delivery, MAX_MESSAGE_CHARS, SessionEvent, SessionMessage, trim_message,
};
use crate::interaction::{
    ASK_USER_QUESTION, AgentResult, Grantor, Interaction, Kind, NewInteraction, PermissionResult,
    Responder, SessionReport,
};

pub use crate::interaction::sessions::{CONTINUE, FINISHED_HEADER, LET_IT_STOP};

pub use crate::interaction::sessions::OnFinish;

/// How an adapter's agent is named and what its settings say of finished turns.
#[derive(Clone, Debug)]
pub struct Agent {
    /// The adapter (`claude-code`, `codex`, `acp`, `opencode`): who withdraws a question its
    /// agent stopped waiting for.
    pub adapter: &'static str,
    /// The agent's name in interactions and sessions (`claude-code`, `codex`, `gemini-cli`).
    pub name: Cow<'static, str>,
    /// As people read it (`Claude Code`).
    pub shown: Cow<'static, str>,
    /// When a queued message can reach it.
    pub delivery: Delivery,
    /// What a finished turn does.
    pub on_finish: OnFinish,
    /// How long an `ask` holds the agent for a reply, seconds.
    pub finish_wait_secs: u64,
}

/// A lifecycle hook event, as read from the hook's input.
#[derive(Debug)]
pub struct Lifecycle<'a> {
    /// `hook_event_name`.
    pub event: &'a str,
    /// `session_id`.
    pub session: Option<String>,
    /// `cwd`.
    pub cwd: Option<String>,
    /// `last_assistant_message` (at `Stop`).
    pub last_message: Option<String>,
}

/// The session event a hook event is, if sessions care about it.
pub fn session_event(name: &str, last_message: Option<String>) -> Option<SessionEvent> {
    Some(match name {
        "SessionStart" => SessionEvent::Started,
        "UserPromptSubmit" => SessionEvent::Prompted,
        "PostToolUse" => SessionEvent::ToolUsed,
        "Stop" => SessionEvent::Stopped(last_message),
        "SessionEnd" => SessionEvent::Ended,
        _ => return None,
    })
}

/// Records `event` of `agent`'s session (if the input named one); the queued messages it
/// hands to the agent. A store that fails is logged: the agent's hook is answered anyway.
pub async fn report(
    state: &Hooks,
    agent: &Agent,
    session: Option<&str>,
    cwd: Option<&str>,
    owner: &str,
    event: SessionEvent,
) -> Vec<SessionMessage> {
    let Some(id) = session.filter(|s| !s.is_empty()) else {
        return Vec::new();
    };
    let report = SessionReport {
        agent: agent.name.to_string(),
        id: id.to_string(),
        cwd: cwd.map(str::to_string),
        owner: Some(owner.to_string()),
        delivery: agent.delivery,
        event,
    };
    match state.registry.report_session(report).await {
        Ok(Some(s)) => s.delivered_now,
        Ok(None) => Vec::new(),
        Err(e) => {
            tracing::warn!(agent = %agent.name, error = %e, "a session's hook event was not recorded");
            Vec::new()
        }
    }
}

/// Messages from people as the model reads them.
pub fn as_context(messages: &[SessionMessage]) -> Option<String> {
    if messages.is_empty() {
        return None;
    }
    let lines: Vec<String> = messages
        .iter()
        .map(|m| {
            format!(
                "A message from {} (via {}, through imrelay), sent while you worked:\n{}",
                m.by, m.via, m.text
            )
        })
        .collect();
    Some(lines.join("\n\n"))
}

/// The answer to a lifecycle hook event, or `None` for an event that is not one.
pub async fn lifecycle(
    state: &Hooks,
    agent: Agent,
    owner: &str,
    hook: Lifecycle<'_>,
) -> Option<Value> {
    let last = hook.last_message.clone();
    let event = session_event(hook.event, last.clone())?;
    let delivered = report(
        state,
        &agent,
        hook.session.as_deref(),
        hook.cwd.as_deref(),
        owner,
        event,
    )
    .await;
    let context = as_context(&delivered);
    Some(match (hook.event, context) {
        ("PostToolUse" | "UserPromptSubmit", Some(text)) => json!({"hookSpecificOutput": {
            "hookEventName": hook.event,
            "additionalContext": text,
        }}),
        ("Stop", Some(text)) => block(text),
        ("Stop", None) => match finished(state, agent, owner, &hook).await {
            Some(text) => block(text),
            None => json!({}),
        },
        _ => json!({}),
    })
}

/// A `Stop` answer that continues the turn with `reason`.
fn block(reason: String) -> Value {
    json!({"decision": "block", "reason": reason})
}

/// `agent`'s settings for finished turns with what the session's route says over them.
pub fn finish_for(state: &Hooks, agent: Agent, session: &str, cwd: Option<&str>) -> Agent {
    let route = state.registry.finish_settings(&agent.name, session, cwd);
    Agent {
        on_finish: route.on_finish.unwrap_or(agent.on_finish),
        finish_wait_secs: route.finish_wait_secs.unwrap_or(agent.finish_wait_secs),
        ..agent
    }
}

/// A finished turn: asks the session's route (per `on_finish`, the route's or else the
/// agent's); the words to continue with, if a person gave some while the agent was held.
async fn finished(
    state: &Hooks,
    agent: Agent,
    owner: &str,
    hook: &Lifecycle<'_>,
) -> Option<String> {
    let session = hook.session.clone().filter(|s| !s.is_empty())?;
    let agent = finish_for(state, agent, &session, hook.cwd.as_deref());
    if agent.on_finish == OnFinish::Off {
        return None;
    }
    let default = state.registry.timeout_for(Kind::Question, None).ok()?;
    let timeout = match agent.on_finish {
        OnFinish::Ask => agent.finish_wait_secs.clamp(1, default.max(1)),
        _ => default,
    };
    let new = NewInteraction {
        session: Some(session.clone()),
        agent: Some(agent.name.to_string()),
        title: Some(format!("{} finished its turn", agent.shown)),
        cwd: hook.cwd.clone(),
        timeout_secs: Some(timeout),
        ..NewInteraction::new(ASK_USER_QUESTION, question(&agent, hook))
    };
    let created = match state.registry.create_for(new, Some(owner)).await {
        Ok(c) => c.interaction,
        Err(e) => {
            tracing::warn!(agent = %agent.name, error = %e, "a finished turn could not be posted");
            return None;
        }
    };
    let id = created.id.clone();
    if agent.on_finish == OnFinish::Tell {
        tokio::spawn(queue_reply(state.clone(), agent, session, created));
        return None;
    }
    // Withdrawn everywhere if the agent stops waiting first (its hook's own timeout, an
    // interrupted session).
    let abandoned = super::shared::Abandoned {
        by: agent.adapter,
        reason: "The agent stopped waiting for a reply (its Stop hook timed out, or the session was interrupted)",
    };
    let attached = state.calls.attach(&state.registry, &id, abandoned);
    let continued = match state.answer(&id, Duration::from_secs(timeout)).await {
        Ok(Ok(i)) => continue_with(&i),
        _ => None,
    };
    if let Some(a) = attached {
        a.finish();
    }
    continued
}

/// Tell only: waits for a reply to the finished question and queues it for the session.
async fn queue_reply(state: Hooks, agent: Agent, session: String, i: std::sync::Arc<Interaction>) {
    let wait = Duration::from_secs(i.timeout_secs().saturating_add(5));
    let Ok(Some(answered)) = state.registry.wait(&i.id, wait).await else {
        return;
    };
    let Some(text) = continue_with(&answered) else {
        return;
    };
    queue_answer(&state, &agent, &session, &text, &answered).await;
}

/// Queues `text`, the words of whoever answered `i` (an interaction of the session), as
/// their message to `agent`'s `session`. A refusal (a full queue, a session gone) is logged.
pub async fn queue_answer(
    state: &Hooks,
    agent: &Agent,
    session: &str,
    text: &str,
    i: &Interaction,
) {
    let Some(r) = &i.resolution else {
        return;
    };
    // Whoever answered was admitted by the interaction's route, the session's.
    let sender = Grantor::Administrator(Responder {
        by: r.by.clone(),
        ..Responder::anonymous(r.via.clone())
    });
    let text: String = text.chars().take(MAX_MESSAGE_CHARS).collect();
    if let Err(e) = state
        .registry
        .message_session(&agent.name, session, &text, &sender)
        .await
    {
        tracing::warn!(agent = %agent.name, error = %e, "a person's words to a session were not queued");
    }
}

/// The "finished" question: what the agent said last, and the two answers.
fn question(agent: &Agent, hook: &Lifecycle<'_>) -> serde_json::Map<String, Value> {
    let said = hook
        .last_message
        .as_deref()
        .map(trim_message)
        .filter(|m| !m.is_empty())
        .unwrap_or_else(|| "(it said nothing)".into());
    let text = format!(
        "{} finished its turn. It said:\n\n{said}\n\nReply with what it should do next, or let it stop.",
        agent.shown
    );
    let input = json!({"questions": [{
        "question": text,
        "header": FINISHED_HEADER,
        "multiSelect": false,
        "options": [
            {"label": LET_IT_STOP, "description": "End the turn here"},
            {"label": CONTINUE, "description": "Tell it to go on"},
        ],
    }]});
    match input {
        Value::Object(m) => m,
        _ => serde_json::Map::new(),
    }
}

/// The words a finished turn continues with, from the answer to its question: `None` to let
/// it stop (so answered, denied, expired or withdrawn).
pub fn continue_with(i: &Interaction) -> Option<String> {
    let r = i.resolution.as_ref()?;
    let AgentResult::Permission(PermissionResult::Allow { updated_input, .. }) = &r.result else {
        return None;
    };
    let answers = updated_input.map().get("answers")?.as_object()?.clone();
    let answer = answers.values().next()?.as_str()?.trim().to_string();
    let by = r.by.as_deref().unwrap_or("A person");
    match answer.as_str() {
        "" | LET_IT_STOP => None,
        CONTINUE => Some(format!(
            "{by} read your last message through imrelay and says: continue with the next step."
        )),
        text => Some(format!(
            "{by} read your last message through imrelay and replies:\n{text}"
        )),
    }
}
