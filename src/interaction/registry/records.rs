//! The audit records and the log line of the registry's changes.

use crate::interaction::model::{Interaction, Outcome, Resolution};
use crate::interaction::ports::audit::{Action, AuditRecord};

/// Audit details are kept short.
/// Longest audit detail or actor kept, in characters.
const MAX_DETAIL: usize = 500;

pub(super) fn clip(s: &str) -> String {
    crate::interaction::clip(s, MAX_DETAIL)
}

pub(super) fn created_record(i: &Interaction) -> AuditRecord {
    AuditRecord {
        at: i.created_at,
        action: Action::Created,
        interaction_id: Some(i.id.as_str().to_string()),
        actor: i
            .agent
            .as_deref()
            .or(i.session.as_deref())
            .map(str::to_string),
        channel: "agent".into(),
        outcome: "pending".into(),
        input_hash: Some(i.input_digest()),
        detail: Some(clip(&i.tool_name)),
    }
}

/// The record of an escalation: by imrelay, on the route it names.
pub(super) fn escalated_record(i: &Interaction) -> AuditRecord {
    let route = i.route.as_deref();
    AuditRecord {
        at: i.escalated_at().unwrap_or(i.created_at),
        action: Action::Escalated,
        interaction_id: Some(i.id.as_str().to_string()),
        actor: Some("system".into()),
        channel: "system".into(),
        outcome: "pending".into(),
        input_hash: Some(i.input_digest()),
        detail: route.map(|r| {
            let wait = r
                .escalation
                .as_ref()
                .map(|e| e.wait_text())
                .unwrap_or_default();
            clip(&format!("nobody on route {:?} answered in {wait}", r.name))
        }),
    }
}

/// `actor` names who answered for the audit (a stable identity); default: `r.by`. An answer
/// that named nobody is anonymous (no actor); `system` is imrelay itself: an expiry, or a
/// cancellation that names nobody else.
pub(super) fn resolved_record(i: &Interaction, r: &Resolution, actor: Option<&str>) -> AuditRecord {
    AuditRecord {
        at: r.at,
        action: match r.outcome {
            Outcome::Allowed | Outcome::Denied | Outcome::Answered => Action::Answered,
            Outcome::Expired => Action::Expired,
            Outcome::Cancelled => Action::Cancelled,
        },
        interaction_id: Some(i.id.as_str().to_string()),
        actor: actor
            .map(str::to_string)
            .or_else(|| r.by.clone())
            .or_else(|| {
                matches!(r.outcome, Outcome::Expired | Outcome::Cancelled).then(|| "system".into())
            }),
        channel: r.via.as_str().to_string(),
        outcome: r.outcome.as_str().into(),
        input_hash: Some(i.input_digest()),
        detail: r.message().map(clip),
    }
}

/// Logs a resolution this process recorded: the one line per resolution, with its kind,
/// outcome, who, via which channel and the time to answer.
pub(super) fn log_resolution(resolved: &Interaction, what: &'static str) {
    if let Some(r) = &resolved.resolution {
        tracing::info!(
            id = %resolved.id,
            kind = resolved.kind.as_str(),
            outcome = r.outcome.as_str(),
            by = r.by.as_deref().unwrap_or(""),
            via = %r.via,
            time_to_answer_ms = resolved
                .time_to_answer()
                .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
                .unwrap_or(0),
            "{what}"
        );
    }
}

/// Logs a new interaction, once it is recorded.
pub(super) fn log_created(i: &Interaction) {
    tracing::info!(
        id = %i.id,
        kind = i.kind.as_str(),
        tool = %i.tool_name,
        session = i.session.as_deref().unwrap_or(""),
        agent = i.agent.as_deref().unwrap_or(""),
        timeout_secs = i.timeout_secs(),
        "interaction created"
    );
}
