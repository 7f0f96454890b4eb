//! Agent sessions: what imrelay knows of each session an agent adapter has seen.
//!
//! An adapter reports what its agent's hooks tell ([`SessionEvent`]: a session started, a
//! prompt was submitted, a tool ran, the agent asked for something, its turn ended, the
//! session ended); [`Session::apply`] folds each report into the session's record, which the
//! store keeps ([`SessionStore`](super::ports::SessionStore)) with a retention and a bound on
//! how many are kept. A person's message to a working session ([`SessionMessage`]) is queued
//! in the same record and handed to the agent at its next hook event that can carry one
//! ([`SessionEvent::carries_messages`]). The state a person reads ([`SessionState`]) is the
//! stored one, `waiting` while an interaction of the session is pending, and `idle` after a
//! long silence ([`Session::shown_state`]).

use jiff::Timestamp;
use serde::{Deserialize, Serialize};

/// A session with no hook event for this long reads as `idle` (unless it finished or ended).
pub const IDLE_AFTER: std::time::Duration = std::time::Duration::from_secs(30 * 60);

/// The most characters of the agent's last message kept.
pub const MAX_LAST_MESSAGE_CHARS: usize = 2000;

/// The most characters of a person's message to a session.
pub const MAX_MESSAGE_CHARS: usize = 4000;

/// The most messages queued for a session and not yet delivered.
pub const MAX_QUEUED: usize = 8;

/// The most delivered messages a session's record remembers.
const KEEP_DELIVERED: usize = 8;

/// The answer to a "finished" question that lets the turn stop.
pub const LET_IT_STOP: &str = "Let it stop";

/// The answer to a "finished" question that tells the agent to go on, without more words.
pub const CONTINUE: &str = "Continue";

/// The header of a "finished" question (the one question an agent adapter asks when a
/// session's turn ends).
pub const FINISHED_HEADER: &str = "Finished";

/// Whether `i` is a session's "finished" question: a question of a session with one
/// question headed [`FINISHED_HEADER`] whose answers are [`LET_IT_STOP`] and [`CONTINUE`].
/// Any text is its answer (what the agent goes on with).
pub fn is_finished_question(i: &super::Interaction) -> bool {
    if i.kind != super::Kind::Question || i.session.is_none() || i.agent.is_none() {
        return false;
    }
    let Ok(questions) = super::parse_questions(&i.input.map()) else {
        return false;
    };
    matches!(questions.as_slice(), [q] if q.header == FINISHED_HEADER
        && q.has_label(LET_IT_STOP)
        && q.has_label(CONTINUE))
}

/// What happens when an agent's turn ends (`on_finish` in an adapter's settings, or a
/// route's, which takes precedence for the sessions that take it).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum OnFinish {
    /// Nothing: the session's state is kept, no one is asked.
    Off,
    /// A "finished" question reaches the session's route; the agent is not held. A reply is
    /// queued for the session and reaches the agent with its next prompt or tool.
    Tell,
    /// As `tell`, and the `Stop` hook holds the agent for a reply (`finish_wait_secs`): a
    /// reply continues the turn at once.
    Ask,
}

/// When a person's queued message can reach a session's agent: what its adapter can carry.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Delivery {
    /// At the agent's next hook event that can carry one (after a tool, with a prompt, at
    /// the end of a turn): Claude Code's and Codex's hooks.
    #[default]
    NextStep,
    /// Only when the agent's turn ends, as the prompt that starts the next one: the agents
    /// reached through `imrelay acp` and `imrelay bridge opencode`, which have no way to add
    /// to a running turn.
    TurnEnd,
}

impl Delivery {
    /// Whether a message can be handed over at `event`.
    pub fn carries(self, event: &SessionEvent) -> bool {
        match self {
            Delivery::NextStep => event.carries_messages(),
            Delivery::TurnEnd => matches!(event, SessionEvent::Stopped(_)),
        }
    }

    /// When a message queued now reaches the agent, as a channel tells its sender.
    pub fn note(self) -> &'static str {
        match self {
            Delivery::NextStep => "it reaches the agent at its next step",
            Delivery::TurnEnd => "it will be sent when the agent's turn ends",
        }
    }
}

/// What a session is doing, as a person reads it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SessionState {
    /// Its agent is working on a turn.
    Working,
    /// One of its interactions waits for a person.
    Waiting,
    /// Its agent ended a turn and waits for the next prompt.
    Finished,
    /// Nothing was heard of it for a while.
    Idle,
    /// The session ended.
    Gone,
}

impl SessionState {
    /// The snake_case label.
    pub fn as_str(self) -> &'static str {
        match self {
            SessionState::Working => "working",
            SessionState::Waiting => "waiting",
            SessionState::Finished => "finished",
            SessionState::Idle => "idle",
            SessionState::Gone => "gone",
        }
    }
}

/// A hook event an adapter saw, as far as sessions care.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SessionEvent {
    /// The session started (or resumed).
    Started,
    /// A person at the desk submitted a prompt: a turn begins.
    Prompted,
    /// A tool ran.
    ToolUsed,
    /// The agent asked for an approval, an answer or a form.
    Asked,
    /// The turn ended; the agent's last message, if it gave one.
    Stopped(Option<String>),
    /// The session ended.
    Ended,
}

impl SessionEvent {
    /// The event's name in the record.
    pub fn name(&self) -> &'static str {
        match self {
            SessionEvent::Started => "started",
            SessionEvent::Prompted => "prompted",
            SessionEvent::ToolUsed => "tool_used",
            SessionEvent::Asked => "asked",
            SessionEvent::Stopped(_) => "stopped",
            SessionEvent::Ended => "ended",
        }
    }

    /// Whether the agent's answer to this event can hand it queued messages (as additional
    /// context after a tool or a prompt, or as the reason to go on at the end of a turn).
    pub fn carries_messages(&self) -> bool {
        matches!(
            self,
            SessionEvent::ToolUsed | SessionEvent::Prompted | SessionEvent::Stopped(_)
        )
    }
}

/// What an adapter reports: which session, where, and what happened.
#[derive(Clone, Debug)]
pub struct SessionUpdate {
    /// The agent (`claude-code`, `codex`).
    pub agent: String,
    /// The agent's session id.
    pub id: String,
    /// The working directory, if the event named one.
    pub cwd: Option<String>,
    /// The route the session's interactions take.
    pub route: String,
    /// The agent token the session's events came with (its digest), if any.
    pub owner: Option<String>,
    /// When its agent can be handed a message.
    pub delivery: Delivery,
    /// What happened.
    pub event: SessionEvent,
    /// When.
    pub at: Timestamp,
}

/// A person's message to a session, queued until its agent can be handed it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SessionMessage {
    /// Its id.
    pub id: String,
    /// The text.
    pub text: String,
    /// Who sent it.
    pub by: String,
    /// Where from (`api`, `inbox`, a channel).
    pub via: String,
    /// When it was sent.
    pub at: Timestamp,
    /// When it was handed to the agent, and at which event.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delivered_at: Option<Timestamp>,
    /// The hook event that carried it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delivered_with: Option<String>,
}

/// A session as kept.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Session {
    /// The agent (`claude-code`, `codex`).
    pub agent: String,
    /// The agent's session id.
    pub id: String,
    /// The working directory last named.
    #[serde(default)]
    pub cwd: Option<String>,
    /// The route the session's interactions take.
    pub route: String,
    /// The agent token its events came with (its digest).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner: Option<String>,
    /// The state its last event left it in.
    pub state: SessionState,
    /// When its agent can be handed a message (as its adapter last said).
    #[serde(default)]
    pub delivery: Delivery,
    /// When it was first seen.
    pub first_seen: Timestamp,
    /// When it last did something.
    pub last_activity: Timestamp,
    /// The last hook event seen.
    pub last_event: String,
    /// What the agent said last when its turn ended (trimmed).
    #[serde(default)]
    pub last_message: Option<String>,
    /// Messages from people: queued ones first, then the last few delivered.
    #[serde(default)]
    pub messages: Vec<SessionMessage>,
    /// The messages this event handed to the agent (not kept).
    #[serde(skip)]
    pub delivered_now: Vec<SessionMessage>,
}

impl Session {
    /// The key it is kept under: agent and session id.
    pub fn key(&self) -> (&str, &str) {
        (&self.agent, &self.id)
    }

    /// The record after `update` (`None`: the first event of the session). Queued messages
    /// are handed over (`delivered_now`) when the event can carry them.
    pub fn apply(existing: Option<Session>, update: &SessionUpdate) -> Session {
        let mut s = existing.unwrap_or_else(|| Session {
            agent: update.agent.clone(),
            id: update.id.clone(),
            cwd: None,
            route: update.route.clone(),
            owner: update.owner.clone(),
            state: SessionState::Working,
            delivery: update.delivery,
            first_seen: update.at,
            last_activity: update.at,
            last_event: String::new(),
            last_message: None,
            messages: Vec::new(),
            delivered_now: Vec::new(),
        });
        if update.cwd.is_some() {
            s.cwd.clone_from(&update.cwd);
        }
        s.route.clone_from(&update.route);
        s.delivery = update.delivery;
        if s.owner.is_none() {
            s.owner.clone_from(&update.owner);
        }
        s.last_activity = s.last_activity.max(update.at);
        s.last_event = update.event.name().to_string();
        s.state = match &update.event {
            SessionEvent::Started => SessionState::Finished,
            SessionEvent::Prompted | SessionEvent::ToolUsed | SessionEvent::Asked => {
                SessionState::Working
            }
            SessionEvent::Stopped(_) => SessionState::Finished,
            SessionEvent::Ended => SessionState::Gone,
        };
        if let SessionEvent::Stopped(Some(m)) = &update.event {
            s.last_message = Some(trim_message(m));
        }
        s.delivered_now.clear();
        if s.delivery.carries(&update.event) {
            s.deliver(update);
        }
        s
    }

    /// Marks every queued message delivered by `update`'s event.
    fn deliver(&mut self, update: &SessionUpdate) {
        for m in self
            .messages
            .iter_mut()
            .filter(|m| m.delivered_at.is_none())
        {
            m.delivered_at = Some(update.at);
            m.delivered_with = Some(update.event.name().to_string());
            self.delivered_now.push(m.clone());
        }
        self.keep_few_delivered();
    }

    /// Queues `message`; refused (with why) past [`MAX_QUEUED`] or on a session that ended.
    pub fn queue(&mut self, message: SessionMessage) -> Result<(), String> {
        if self.state == SessionState::Gone {
            return Err("this session has ended: nothing can reach it".into());
        }
        if self.queued().count() >= MAX_QUEUED {
            return Err(format!(
                "{MAX_QUEUED} messages already wait for this session: wait until it takes them"
            ));
        }
        self.messages.push(message);
        Ok(())
    }

    /// The messages not yet delivered, oldest first.
    pub fn queued(&self) -> impl Iterator<Item = &SessionMessage> {
        self.messages.iter().filter(|m| m.delivered_at.is_none())
    }

    fn keep_few_delivered(&mut self) {
        let delivered = self
            .messages
            .iter()
            .filter(|m| m.delivered_at.is_some())
            .count();
        let mut drop = delivered.saturating_sub(KEEP_DELIVERED);
        self.messages.retain(|m| {
            if drop > 0 && m.delivered_at.is_some() {
                drop -= 1;
                false
            } else {
                true
            }
        });
    }

    /// The state a person reads at `now`, with `pending` of its interactions waiting.
    pub fn shown_state(&self, pending: usize, now: Timestamp) -> SessionState {
        if self.state == SessionState::Gone {
            return SessionState::Gone;
        }
        if pending > 0 {
            return SessionState::Waiting;
        }
        let silent = now
            .duration_since(self.last_activity)
            .try_into()
            .unwrap_or(std::time::Duration::ZERO);
        if self.state == SessionState::Working && silent >= IDLE_AFTER {
            return SessionState::Idle;
        }
        self.state
    }
}

/// `text` trimmed to [`MAX_LAST_MESSAGE_CHARS`] (an ellipsis where it was cut), its outer
/// whitespace gone.
pub fn trim_message(text: &str) -> String {
    let text = text.trim();
    if text.chars().count() <= MAX_LAST_MESSAGE_CHARS {
        return text.to_string();
    }
    let mut s: String = text.chars().take(MAX_LAST_MESSAGE_CHARS - 1).collect();
    s.push('…');
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn update(event: SessionEvent, ms: i64) -> SessionUpdate {
        SessionUpdate {
            agent: "claude-code".into(),
            id: "s1".into(),
            cwd: Some("/w".into()),
            route: "default".into(),
            owner: None,
            delivery: Delivery::NextStep,
            event,
            at: Timestamp::from_millisecond(ms).unwrap(),
        }
    }

    fn message(id: &str) -> SessionMessage {
        SessionMessage {
            id: id.into(),
            text: format!("text {id}"),
            by: "alice".into(),
            via: "api".into(),
            at: Timestamp::from_millisecond(1).unwrap(),
            delivered_at: None,
            delivered_with: None,
        }
    }

    #[test]
    fn events_move_the_state_and_keep_the_last_message() {
        let s = Session::apply(None, &update(SessionEvent::Prompted, 10));
        assert_eq!(s.state, SessionState::Working);
        let s = Session::apply(
            Some(s),
            &update(SessionEvent::Stopped(Some("  done \n".into())), 20),
        );
        assert_eq!(s.state, SessionState::Finished);
        assert_eq!(s.last_message.as_deref(), Some("done"));
        assert_eq!(s.first_seen.as_millisecond(), 10);
        assert_eq!(s.last_activity.as_millisecond(), 20);
        let s = Session::apply(Some(s), &update(SessionEvent::Ended, 30));
        assert_eq!(s.shown_state(3, s.last_activity), SessionState::Gone);
    }

    #[test]
    fn waiting_and_idle_are_read_not_kept() {
        let s = Session::apply(None, &update(SessionEvent::ToolUsed, 0));
        assert_eq!(s.shown_state(1, s.last_activity), SessionState::Waiting);
        assert_eq!(s.shown_state(0, s.last_activity), SessionState::Working);
        let later = Timestamp::from_second(IDLE_AFTER.as_secs() as i64).unwrap();
        assert_eq!(s.shown_state(0, later), SessionState::Idle);
    }

    #[test]
    fn queued_messages_go_with_the_next_event_that_carries_them() {
        let mut s = Session::apply(None, &update(SessionEvent::Started, 0));
        s.queue(message("m1")).unwrap();
        let s = Session::apply(Some(s), &update(SessionEvent::Asked, 5));
        assert!(s.delivered_now.is_empty());
        let s = Session::apply(Some(s), &update(SessionEvent::ToolUsed, 6));
        assert_eq!(s.delivered_now.len(), 1);
        assert_eq!(s.messages[0].delivered_with.as_deref(), Some("tool_used"));
        let s = Session::apply(Some(s), &update(SessionEvent::ToolUsed, 7));
        assert!(s.delivered_now.is_empty());
    }

    #[test]
    fn a_session_reached_at_turn_end_takes_messages_only_when_its_turn_ends() {
        let at_end = |event, ms| SessionUpdate {
            delivery: Delivery::TurnEnd,
            ..update(event, ms)
        };
        let mut s = Session::apply(None, &at_end(SessionEvent::Prompted, 0));
        assert_eq!(s.delivery, Delivery::TurnEnd);
        s.queue(message("m1")).unwrap();
        for (n, event) in [
            SessionEvent::Prompted,
            SessionEvent::ToolUsed,
            SessionEvent::Asked,
        ]
        .into_iter()
        .enumerate()
        {
            s = Session::apply(Some(s), &at_end(event, n as i64 + 1));
            assert!(s.delivered_now.is_empty());
        }
        let s = Session::apply(Some(s), &at_end(SessionEvent::Stopped(None), 9));
        assert_eq!(s.delivered_now.len(), 1);
        assert_eq!(s.messages[0].delivered_with.as_deref(), Some("stopped"));
        assert!(
            Delivery::TurnEnd
                .note()
                .contains("when the agent's turn ends")
        );
    }

    #[test]
    fn the_queue_is_bounded_and_closed_when_gone() {
        let mut s = Session::apply(None, &update(SessionEvent::Started, 0));
        for n in 0..MAX_QUEUED {
            s.queue(message(&n.to_string())).unwrap();
        }
        assert!(s.queue(message("one more")).is_err());
        let mut s = Session::apply(Some(s), &update(SessionEvent::Ended, 1));
        assert!(s.queue(message("late")).is_err());
        // Delivered ones are remembered, a few.
        for n in 0..20 {
            s.messages.push(SessionMessage {
                delivered_at: Some(Timestamp::UNIX_EPOCH),
                ..message(&n.to_string())
            });
        }
        s.keep_few_delivered();
        assert_eq!(s.queued().count(), MAX_QUEUED);
        assert_eq!(s.messages.len(), MAX_QUEUED + KEEP_DELIVERED);
    }

    #[test]
    fn long_messages_are_trimmed() {
        let long = "x".repeat(MAX_LAST_MESSAGE_CHARS + 10);
        let t = trim_message(&long);
        assert_eq!(t.chars().count(), MAX_LAST_MESSAGE_CHARS);
        assert!(t.ends_with('…'));
    }
}
