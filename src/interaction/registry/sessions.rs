//! Agent sessions at the registry: reported by the adapters at each hook event, listed with
//! their pending interactions, and sent messages by the people who may answer their route.

use std::sync::Arc;

use serde::Serialize;

use super::records::clip;
use super::{Grantor, Registry, RegistryError};
use crate::interaction::model::{ASK_USER_QUESTION, Interaction, InteractionId, Text, now};
use crate::interaction::ports::audit::{Action, AuditRecord};
use crate::interaction::routes::DEFAULT_ROUTE;
use crate::interaction::sessions::{
    Delivery, MAX_MESSAGE_CHARS, OnFinish, Session, SessionEvent, SessionMessage, SessionState,
    SessionUpdate,
};
use crate::interaction::{Responder, ValidationError};

/// The most sessions kept: past it, the least recently active go.
pub const MAX_SESSIONS: usize = 10_000;

/// How many messages one person may send to agent sessions at once, and then one per
/// [`MESSAGE_REFILL`].
pub(super) const MESSAGE_BURST: u32 = 10;

/// How often a person may send another message once the burst is spent.
pub(super) const MESSAGE_REFILL: std::time::Duration = std::time::Duration::from_secs(6);

/// The per-person bound on messages to sessions.
pub(super) fn message_limiter() -> crate::interaction::RefusalLimiter {
    crate::interaction::RefusalLimiter::new(MESSAGE_BURST, MESSAGE_REFILL)
}

/// The longest agent name or session id kept, in characters; a longer one is not a session.
const MAX_KEY_CHARS: usize = 256;

/// What an adapter saw of a session at one hook event.
#[derive(Clone, Debug)]
pub struct SessionReport {
    /// The agent (`claude-code`, `codex`).
    pub agent: String,
    /// The agent's session id.
    pub id: String,
    /// The working directory, if the event named one.
    pub cwd: Option<String>,
    /// The agent token the event came with (its digest).
    pub owner: Option<String>,
    /// When its agent can be handed a message.
    pub delivery: Delivery,
    /// What happened.
    pub event: SessionEvent,
}

/// A pending interaction of a session, as a listing shows it.
#[derive(Clone, Debug, Serialize)]
pub struct PendingRef {
    /// Its id.
    pub id: InteractionId,
    /// `approval`, `question` or `form`.
    pub kind: &'static str,
    /// The tool it asks about.
    pub tool_name: Text,
}

/// A session as a person reads it.
#[derive(Clone, Debug, Serialize)]
pub struct SessionView {
    /// The agent.
    pub agent: String,
    /// The agent's session id.
    pub id: String,
    /// The working directory last named.
    pub cwd: Option<String>,
    /// The route its interactions take.
    pub route: String,
    /// What it is doing now.
    pub state: SessionState,
    /// When its agent can be handed a message: `next_step` or `turn_end`.
    pub delivery: Delivery,
    /// When a message sent now reaches the agent, in words a channel tells its sender.
    pub delivery_note: &'static str,
    /// When it was first seen.
    pub first_seen: jiff::Timestamp,
    /// When it last did something.
    pub last_activity: jiff::Timestamp,
    /// The last hook event seen.
    pub last_event: String,
    /// What the agent said last when its turn ended.
    pub last_message: Option<String>,
    /// Its interactions waiting for a person.
    pub pending: Vec<PendingRef>,
    /// Messages from people: queued (no `delivered_at`) and recently delivered.
    pub messages: Vec<SessionMessage>,
}

impl SessionView {
    fn of(s: Session, pending: &[Arc<Interaction>], at: jiff::Timestamp) -> Self {
        let mine: Vec<PendingRef> = pending
            .iter()
            .filter(|i| i.session.as_deref() == Some(&s.id) && is_agents(i, &s.agent))
            .map(|i| PendingRef {
                id: i.id.clone(),
                kind: i.kind.as_str(),
                tool_name: i.tool_name.clone(),
            })
            .collect();
        SessionView {
            state: s.shown_state(mine.len(), at),
            delivery: s.delivery,
            delivery_note: s.delivery.note(),
            agent: s.agent,
            id: s.id,
            cwd: s.cwd,
            route: s.route,
            first_seen: s.first_seen,
            last_activity: s.last_activity,
            last_event: s.last_event,
            last_message: s.last_message,
            pending: mine,
            messages: s.messages,
        }
    }
}

/// Whether `i` was asked by `agent` (or one of its subagents: `claude-code/Explore`).
fn is_agents(i: &Interaction, agent: &str) -> bool {
    i.agent
        .as_deref()
        .is_some_and(|a| a == agent || a.strip_prefix(agent).is_some_and(|r| r.starts_with('/')))
}

/// What a route says of a session's finished turns: its `on_finish` and `finish_wait_secs`,
/// each `None` where the route leaves it to the agent's settings.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FinishSettings {
    /// What a finished turn does.
    pub on_finish: Option<OnFinish>,
    /// How long `ask` holds the agent, seconds.
    pub finish_wait_secs: Option<u64>,
}

/// The interaction a session's "finished" question would be, for matching routes.
fn probe(agent: &str, id: &str, cwd: Option<&str>) -> Option<Interaction> {
    let probe_id = InteractionId::parse("session-route").ok()?;
    let mut probe = Interaction::pending(
        probe_id,
        ASK_USER_QUESTION,
        serde_json::Map::new(),
        now(),
        0,
    );
    probe.agent = Some(agent.into());
    probe.session = Some(id.into());
    probe.cwd = cwd.map(Into::into);
    Some(probe)
}

impl Registry {
    /// The route a session's interactions take: the one its "finished" question would.
    pub fn session_route(&self, agent: &str, id: &str, cwd: Option<&str>) -> String {
        let Some(probe) = probe(agent, id, cwd) else {
            return DEFAULT_ROUTE.to_string();
        };
        self.routes()
            .stamp_for(&probe)
            .map_or_else(|| DEFAULT_ROUTE.to_string(), |s| s.name.clone())
    }

    /// What the route of a session (the one its "finished" question takes) says of finished
    /// turns; it overrides the agent's settings where it says anything.
    pub fn finish_settings(&self, agent: &str, id: &str, cwd: Option<&str>) -> FinishSettings {
        let Some(probe) = probe(agent, id, cwd) else {
            return FinishSettings::default();
        };
        let routes = self.routes();
        routes
            .route_for(&probe)
            .map_or_else(FinishSettings::default, |r| FinishSettings {
                on_finish: r.spec().on_finish,
                finish_wait_secs: r.spec().finish_wait_secs,
            })
    }

    /// Records what an adapter saw of a session; returns the session as kept, with the
    /// messages this event hands to the agent (`delivered_now`). `None` for an event that
    /// names no usable session.
    pub async fn report_session(
        &self,
        report: SessionReport,
    ) -> Result<Option<Session>, RegistryError> {
        let bad = |s: &str| s.is_empty() || s.chars().count() > MAX_KEY_CHARS;
        if bad(&report.agent) || bad(&report.id) {
            return Ok(None);
        }
        let update = SessionUpdate {
            route: self.session_route(&report.agent, &report.id, report.cwd.as_deref()),
            agent: report.agent,
            id: report.id,
            cwd: report.cwd,
            owner: report.owner,
            delivery: report.delivery,
            event: report.event,
            at: now(),
        };
        let (agent, id) = (update.agent.clone(), update.id.clone());
        let change = Box::new(move |s: Option<Session>| Some(Session::apply(s, &update)));
        let kept = self
            .inner
            .store
            .change_session(&agent, &id, change, Vec::new(), MAX_SESSIONS)
            .await?;
        if let Some(s) = &kept {
            self.delivered(s).await;
            for h in self.hooks().iter() {
                h.session_reported(s);
            }
        }
        Ok(kept)
    }

    /// Audits the messages `s`'s last event handed to its agent.
    async fn delivered(&self, s: &Session) {
        if s.delivered_now.is_empty() || !self.inner.config.audit {
            return;
        }
        let records = s
            .delivered_now
            .iter()
            .map(|m| steered(s, m, "delivered", None))
            .collect();
        if let Err(e) = self.inner.store.append_audit(records).await {
            tracing::warn!(error = %e, "a delivered message's audit entry was not recorded");
        }
        for m in &s.delivered_now {
            for h in self.hooks().iter() {
                h.steered(&m.via, "delivered");
            }
            tracing::info!(agent = %s.agent.escape_debug(), session = %s.id.escape_debug(),
                message = %m.id, event = %s.last_event, "a message was handed to an agent");
        }
    }

    /// The `limit` most recently active sessions (of route `route` only, if given).
    pub async fn sessions(
        &self,
        route: Option<&str>,
        limit: usize,
    ) -> Result<Vec<SessionView>, RegistryError> {
        let store = &self.inner.store;
        let all = store.sessions(MAX_SESSIONS.min(limit.max(1) * 4)).await?;
        let pending = store.pending().await?;
        let at = now();
        Ok(all
            .into_iter()
            .filter(|s| route.is_none_or(|r| s.route == r))
            .take(limit)
            .map(|s| SessionView::of(s, &pending, at))
            .collect())
    }

    /// `agent`'s session `id`.
    pub async fn session(&self, agent: &str, id: &str) -> Result<SessionView, RegistryError> {
        let store = &self.inner.store;
        let s = store
            .session(agent, id)
            .await?
            .ok_or_else(|| no_session(agent, id))?;
        Ok(SessionView::of(s, &store.pending().await?, now()))
    }

    /// Queues a person's message for `agent`'s session `id`, handed to the agent at its next
    /// hook event that can carry it. Only who may answer the session's route may (an
    /// administrator always); a refusal is recorded.
    pub async fn message_session(
        &self,
        agent: &str,
        id: &str,
        text: &str,
        sender: &Grantor,
    ) -> Result<SessionView, RegistryError> {
        // An unknown session is said first, whatever the message: 404 wherever one is named.
        let store = &self.inner.store;
        let s = store
            .session(agent, id)
            .await?
            .ok_or_else(|| no_session(agent, id))?;
        let text = text.trim();
        if text.is_empty() || text.chars().count() > MAX_MESSAGE_CHARS {
            return Err(ValidationError::new(
                "text",
                format!("must be 1 to {MAX_MESSAGE_CHARS} characters"),
            )
            .into());
        }
        let responder = self.attribute(sender.responder().clone());
        self.may_steer(&s, &responder, sender).await?;
        let person = responder.audit_actor().unwrap_or_else(|| "someone".into());
        let clock = tokio::time::Instant::now().into_std();
        if self.inner.messages.admit(&person, clock).is_none() {
            return Err(ValidationError::new(
                "text",
                format!(
                    "{} sent {MESSAGE_BURST} messages in a short while: wait a few seconds and send it again",
                    responder.by.as_deref().unwrap_or("this person")
                ),
            )
            .into());
        }
        let message = SessionMessage {
            id: uuid::Uuid::now_v7().to_string(),
            text: text.to_string(),
            by: responder.by.clone().unwrap_or_else(|| "someone".into()),
            via: responder.via.as_str().to_string(),
            at: now(),
            delivered_at: None,
            delivered_with: None,
        };
        let audit = if self.inner.config.audit {
            vec![steered(&s, &message, "queued", responder.audit_actor())]
        } else {
            Vec::new()
        };
        let refused = Arc::new(std::sync::Mutex::new(None));
        let why = refused.clone();
        let change = Box::new(move |s: Option<Session>| {
            // Gone meanwhile (pruned): `why` stays empty.
            let mut s = s?;
            match s.queue(message) {
                Ok(()) => Some(s),
                Err(e) => {
                    *crate::sync::LockExt::locked(&*why) = Some(e);
                    None
                }
            }
        });
        let kept = store
            .change_session(agent, id, change, audit, MAX_SESSIONS)
            .await?;
        let Some(kept) = kept else {
            let why = crate::sync::LockExt::locked(&*refused).take();
            return Err(match why {
                Some(why) => ValidationError::new("session", why).into(),
                None => no_session(agent, id),
            });
        };
        for h in self.hooks().iter() {
            h.steered(responder.via.as_str(), "queued");
        }
        tracing::info!(agent = %agent.escape_debug(), session = %id.escape_debug(),
            by = %responder.by.as_deref().unwrap_or("").escape_debug(), via = %responder.via,
            "a message to an agent session was queued");
        Ok(SessionView::of(kept, &store.pending().await?, now()))
    }

    /// Refuses (and records the refusal of) a person who may not answer the session's route;
    /// an administrator always may.
    async fn may_steer(
        &self,
        s: &Session,
        responder: &Responder,
        sender: &Grantor,
    ) -> Result<(), RegistryError> {
        let Grantor::Person { listed, .. } = sender else {
            return Ok(());
        };
        if self.approves(&s.route, responder, *listed) {
            return Ok(());
        }
        let why = format!(
            "not an approver of route {:?}: may not message its sessions",
            s.route
        );
        let actor = responder.audit_actor().unwrap_or_default();
        self.refused(None, &actor, &responder.via, &why).await?;
        Err(RegistryError::Forbidden(format!(
            "{} may not message this session: only the approvers of route {:?} (and administrators) may",
            responder.by.as_deref().unwrap_or("this person"),
            s.route
        )))
    }
}

fn no_session(agent: &str, id: &str) -> RegistryError {
    RegistryError::SessionNotFound(format!(
        "no {} session {} is known (never seen, or pruned): `imrelay sessions` lists them",
        clip(agent),
        clip(id)
    ))
}

/// The audit record of a message to a session: `queued` when sent, `delivered` when handed
/// to the agent.
fn steered(s: &Session, m: &SessionMessage, outcome: &str, actor: Option<String>) -> AuditRecord {
    let first: String = m.text.chars().take(200).collect();
    AuditRecord {
        at: now(),
        action: Action::Steered,
        interaction_id: None,
        actor: Some(clip(&actor.unwrap_or_else(|| m.by.clone()))),
        channel: clip(&m.via),
        outcome: outcome.into(),
        input_hash: None,
        detail: Some(clip(&format!(
            "{} session {} message {}: {first}",
            s.agent, s.id, m.id
        ))),
    }
}
