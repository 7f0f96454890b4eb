//! The settings of the webhook channel: the `[[webhooks]]` targets, what each receives, and
//! how their names, URLs and secrets are checked.

use std::collections::HashSet;

use serde::{Deserialize, Serialize};

use super::signature::SigningKey;
use crate::interaction::Interaction;
use crate::settings::Secret;

/// A lifecycle event a target can subscribe to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Deserialize, Serialize)]
pub enum WebhookEvent {
    /// A new interaction awaits an answer.
    #[serde(rename = "interaction.created")]
    Created,
    /// An interaction was answered, expired or cancelled.
    #[serde(rename = "interaction.resolved")]
    Resolved,
    /// A vote was recorded on an approval that needs several people, and did not decide it:
    /// the event carries the votes so far.
    #[serde(rename = "interaction.voted")]
    Voted,
}

impl WebhookEvent {
    pub(super) fn name(self) -> &'static str {
        match self {
            WebhookEvent::Created => "interaction.created",
            WebhookEvent::Resolved => "interaction.resolved",
            WebhookEvent::Voted => "interaction.voted",
        }
    }
}

fn default_events() -> Vec<WebhookEvent> {
    vec![
        WebhookEvent::Created,
        WebhookEvent::Resolved,
        WebhookEvent::Voted,
    ]
}

fn default_timeout() -> u64 {
    10
}

fn default_horizon() -> u64 {
    24
}

/// One `[[webhooks]]` target.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct WebhookSettings {
    /// Unique name: `[a-z0-9_-]`, used in `via` and in the inbound URL.
    pub name: String,
    /// Where events are POSTed.
    pub url: String,
    /// `whsec_<base64>` signing secret (outbound and inbound).
    pub secret: Secret,
    /// Events to send (default all three).
    #[serde(default = "default_events")]
    pub events: Vec<WebhookEvent>,
    /// Only interactions from these sessions (empty: all).
    #[serde(default, deserialize_with = "crate::settings::list")]
    pub sessions: Vec<String>,
    /// Only interactions from these agents (empty: all).
    #[serde(default, deserialize_with = "crate::settings::list")]
    pub agents: Vec<String>,
    /// Per-request timeout, seconds.
    #[serde(default = "default_timeout")]
    pub timeout_secs: u64,
    /// How long to keep retrying a delivery, hours.
    #[serde(default = "default_horizon")]
    pub horizon_hours: u64,
}

impl WebhookSettings {
    /// Checks one target's values.
    pub fn validate(&self) -> Result<(), String> {
        let n = &self.name;
        if n.is_empty()
            || n.len() > 64
            || !n
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '_')
        {
            return Err(format!(
                "webhooks: name {n:?} must be 1 to 64 characters of a-z, 0-9, - and _"
            ));
        }
        if !(self.url.starts_with("https://") || self.url.starts_with("http://")) {
            return Err(format!(
                "webhooks.{n}.url must start with http:// or https://: it is where events are \
                 posted, like \"https://ops.example.com/hooks/imrelay\""
            ));
        }
        SigningKey::parse(self.secret.expose()).map_err(|e| format!("webhooks.{n}.secret: {e}"))?;
        if self.events.is_empty() {
            return Err(format!("webhooks.{n}.events must name at least one event"));
        }
        if self.timeout_secs == 0 || self.horizon_hours == 0 {
            return Err(format!(
                "webhooks.{n}: timeout_secs and horizon_hours must be at least 1"
            ));
        }
        Ok(())
    }

    pub(super) fn wants(&self, event: WebhookEvent, i: &Interaction) -> bool {
        self.events.contains(&event)
            && (self.sessions.is_empty()
                || i.session
                    .as_deref()
                    .is_some_and(|s| self.sessions.iter().any(|x| x == s)))
            && (self.agents.is_empty()
                || i.agent
                    .as_deref()
                    .is_some_and(|a| self.agents.iter().any(|x| x == a)))
    }
}

/// Checks every target and that names are unique.
pub fn validate_all(targets: &[WebhookSettings]) -> Result<(), String> {
    let mut names = HashSet::new();
    for t in targets {
        t.validate()?;
        if !names.insert(t.name.as_str()) {
            return Err(format!("webhooks: the name {:?} is used twice", t.name));
        }
    }
    Ok(())
}
