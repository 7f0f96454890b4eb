//! The core: the interaction model, validation, and the [`Registry`] that holds pending
//! interactions, lets the first answer win, enforces deadlines and publishes lifecycle events.
//!
//! Nothing here knows about HTTP or about any channel. Channels present interactions and hand
//! answers back through [`Registry::respond`]; persistence sits behind
//! [`ports::Store`], implemented by
//! the backends in `crate::store`.
//!
//! # Using the registry from Rust
//!
//! An agent host written in Rust can embed the registry directly:
//!
//! ```
//! use std::sync::Arc;
//! use std::time::Duration;
//! use imrelay::interaction::{Answer, NewInteraction, Registry, RegistryConfig, Responder, Via};
//! use imrelay::store::MemoryStore;
//! use serde_json::json;
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let registry = Registry::new(Arc::new(MemoryStore::new()), RegistryConfig::default());
//!
//! // The agent asks...
//! let input = json!({"command": "rm -rf build"}).as_object().cloned().unwrap_or_default();
//! let created = registry.create(NewInteraction::new("Bash", input)).await?;
//! let id = created.interaction.id.clone();
//!
//! // ...a person answers somewhere else...
//! let answering = registry.clone();
//! let answer_id = id.clone();
//! tokio::spawn(async move {
//!     answering
//!         .respond(&answer_id, Answer::allow(), Responder::new("alice", Via::desktop()))
//!         .await
//! });
//!
//! // ...and the agent gets a PermissionResult it can return from `canUseTool` unchanged.
//! let resolved = registry.wait(&id, Duration::from_secs(60)).await?.expect("answered");
//! let result = &resolved.resolution.as_ref().expect("resolved").result;
//! assert_eq!(
//!     serde_json::to_value(result)?,
//!     json!({"behavior": "allow", "updatedInput": {"command": "rm -rf build"}})
//! );
//! # Ok(())
//! # }
//! ```

mod answer;
mod ask;
pub mod draft;
mod events;
pub mod form;
mod model;
pub mod patch;
pub mod people;
pub mod policy;
pub mod ports;
pub mod presence;
mod question;
pub mod quiet;
pub mod quorum;
mod refusals;
mod registry;
pub mod routes;
pub mod sessions;
mod suggestions;

pub use answer::{
    Answer, MAX_BY_CHARS, Responder, cancelled, deny_instruction, expired, resolution_for,
};
pub use ask::{Ask, AskError};
pub use draft::{DraftError, FormDraft};
pub use events::{Event, EventKind, EventLog, Next, Subscription};
pub use form::{ElicitAction, ElicitResult, FORM_TOOL, Form};
pub use model::{
    ASK_USER_QUESTION, AgentResult, DigestCache, Input, Interaction, InteractionId, Kind,
    MAX_ID_LEN, Millis, Outcome, PATCH_TOOL, PermissionResult, Resolution, Text, Via, after,
    canonical_json, millis, now,
};
pub use question::{
    MAX_ANSWER_CHARS, Question, QuestionOption, json_type, normalise_answers, parse_questions,
};
pub use refusals::RefusalLimiter;
pub use registry::{
    Created, FinishSettings, Full, GrantRequest, Grantor, Lifecycle, LongPoll, MAX_LABEL_CHARS,
    MAX_LABELS, MAX_SESSIONS, NewInteraction, POLICY_VIA, Registry, RegistryConfig, RegistryError,
    SessionReport, SessionView, Teams, Unrecorded, audit_outcome, describe,
};
pub use suggestions::{
    DESTINATIONS, PROCESS_LIFETIME, applied_with_a_grant, outlives_the_session, valid_suggestions,
    validate_suggestions,
};

/// At most `max` characters of `s`, the last of them an ellipsis when it was cut: for text
/// from outside that goes into logs, the audit trail or a message.
pub fn clip(s: &str, max: usize) -> String {
    if s.chars().nth(max).is_none() {
        s.to_string()
    } else {
        let mut out: String = s.chars().take(max.saturating_sub(1)).collect();
        out.push('…');
        out
    }
}

/// An input that does not fit: names the offending field and says why.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {message}")]
pub struct ValidationError {
    /// The field, as a path into the request (`questions[1].options`).
    pub field: String,
    /// What is wrong with it.
    pub message: String,
}

impl ValidationError {
    /// A validation error for `field`.
    pub fn new(field: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            field: field.into(),
            message: message.into(),
        }
    }
}
