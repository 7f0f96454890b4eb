//! Asking people from Rust: an agent host that embeds the [`Registry`] asks a free-text
//! question, a yes/no, a choice or a form, and gets back the text, the bool, the label or the
//! content, while every channel shows the question and takes the answer.
//!
//! Each helper creates a form interaction, waits for its answer (or its deadline) and turns
//! the [`ElicitResult`] into a plain value; a decline, an expiry or a cancellation is an
//! [`AskError`] saying which. Dropping the future before it finishes withdraws the question:
//! it is cancelled on every channel ("The agent stopped waiting"), so nobody answers a
//! question nobody waits for.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Map, Value, json};

use super::form::{ElicitAction, FORM_TOOL, Form, PROMPT_FIELD};
use super::model::{Interaction, InteractionId, Outcome};
use super::registry::{NewInteraction, Registry, RegistryError};

/// Who asks and how long to wait: the context every channel shows with the question.
#[derive(Clone, Debug, Default)]
pub struct Ask {
    /// Your key for the question (see [`NewInteraction::id`]); a UUID v7 if absent.
    pub id: Option<String>,
    /// The agent's session label.
    pub session: Option<String>,
    /// Which agent is asking.
    pub agent: Option<String>,
    /// A heading shown above the question.
    pub title: Option<String>,
    /// Seconds to wait for an answer (capped by the registry's maximum); the registry's
    /// question timeout if absent.
    pub timeout_secs: Option<u64>,
}

impl Ask {
    /// Asked on behalf of `agent` in `session`.
    pub fn by(agent: impl Into<String>, session: impl Into<String>) -> Self {
        Self {
            agent: Some(agent.into()),
            session: Some(session.into()),
            ..Self::default()
        }
    }

    /// The same, waiting at most `secs` seconds for an answer.
    pub fn within(mut self, secs: u64) -> Self {
        self.timeout_secs = Some(secs);
        self
    }
}

/// Why a question got no answer.
#[derive(Debug, thiserror::Error)]
pub enum AskError {
    /// A person declined to answer.
    #[error("{message}")]
    Declined {
        /// Who declined, if known.
        by: Option<String>,
        /// The reason given, or who declined and where.
        message: String,
    },
    /// Nobody answered before the deadline.
    #[error("{0}")]
    Expired(String),
    /// The question was withdrawn (by [`Registry::cancel`], or a shutdown).
    #[error("{0}")]
    Cancelled(String),
    /// The question could not be asked (a bad schema), or the store failed.
    #[error(transparent)]
    Registry(#[from] RegistryError),
}

/// Withdraws the question if the future asking it is dropped before the answer came.
struct Withdraw {
    registry: Registry,
    id: Option<InteractionId>,
}

impl Drop for Withdraw {
    fn drop(&mut self) {
        let Some(id) = self.id.take() else { return };
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let registry = self.registry.clone();
        runtime.spawn(async move {
            let reason = Some("The agent stopped waiting".to_string());
            if let Err(e) = registry.cancel(&id, reason, None).await
                && !matches!(
                    e,
                    RegistryError::AlreadyResolved(_) | RegistryError::NotFound(_)
                )
            {
                tracing::warn!(id = %id, error = %e, "could not withdraw a question nobody waits for");
            }
        });
    }
}

impl Registry {
    /// Asks `question` as free text (a text area when `multiline`) and returns what the
    /// person typed.
    ///
    /// ```
    /// # use std::sync::Arc;
    /// # use imrelay::interaction::{Answer, Ask, Registry, RegistryConfig, Responder, Via};
    /// # use imrelay::store::MemoryStore;
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let registry = Registry::new(Arc::new(MemoryStore::new()), RegistryConfig::default());
    /// # answer_when_asked(&registry, serde_json::json!({"answer": "Teal"}));
    /// let colour = registry
    ///     .ask_text("What is your favorite color?", false, Ask::by("my-agent", "s1"))
    ///     .await?;
    /// assert_eq!(colour, "Teal");
    /// # Ok(())
    /// # }
    /// # fn answer_when_asked(r: &Registry, content: serde_json::Value) {
    /// #     let r = r.clone();
    /// #     let (_, mut events) = r.events().subscribe();
    /// #     tokio::spawn(async move {
    /// #         while let Some(imrelay::interaction::Next::Event(e)) = events.next().await {
    /// #             let by = Responder::new("alice", Via::desktop());
    /// #             let content = content.as_object().cloned().unwrap_or_default();
    /// #             let _ = r.respond(&e.id, Answer::Accept(content), by).await;
    /// #             break;
    /// #         }
    /// #     });
    /// # }
    /// ```
    pub async fn ask_text(
        &self,
        question: &str,
        multiline: bool,
        ask: Ask,
    ) -> Result<String, AskError> {
        let content = self
            .ask_form(question, Form::prompt_schema(multiline), ask)
            .await?;
        Ok(content
            .get(PROMPT_FIELD)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string())
    }

    /// Asks a yes/no `question` and returns the answer.
    ///
    /// ```
    /// # use std::sync::Arc;
    /// # use imrelay::interaction::{Answer, Ask, Registry, RegistryConfig, Responder, Via};
    /// # use imrelay::store::MemoryStore;
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let registry = Registry::new(Arc::new(MemoryStore::new()), RegistryConfig::default());
    /// # answer_when_asked(&registry, serde_json::json!({"confirm": true}));
    /// if registry.confirm("Ship release 1.4 now?", Ask::default()).await? {
    ///     // ...ship it
    /// }
    /// # Ok(())
    /// # }
    /// # fn answer_when_asked(r: &Registry, content: serde_json::Value) {
    /// #     let r = r.clone();
    /// #     let (_, mut events) = r.events().subscribe();
    /// #     tokio::spawn(async move {
    /// #         while let Some(imrelay::interaction::Next::Event(e)) = events.next().await {
    /// #             let by = Responder::new("alice", Via::desktop());
    /// #             let content = content.as_object().cloned().unwrap_or_default();
    /// #             let _ = r.respond(&e.id, Answer::Accept(content), by).await;
    /// #             break;
    /// #         }
    /// #     });
    /// # }
    /// ```
    pub async fn confirm(&self, question: &str, ask: Ask) -> Result<bool, AskError> {
        let schema = json!({
            "type": "object",
            "properties": {"confirm": {"type": "boolean", "title": "Yes or no"}},
            "required": ["confirm"],
        });
        let content = self.ask_form(question, schema, ask).await?;
        Ok(content
            .get("confirm")
            .and_then(Value::as_bool)
            .unwrap_or(false))
    }

    /// Asks `question` with `options` to choose from and returns the chosen one.
    ///
    /// ```
    /// # use std::sync::Arc;
    /// # use imrelay::interaction::{Answer, Ask, Registry, RegistryConfig, Responder, Via};
    /// # use imrelay::store::MemoryStore;
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let registry = Registry::new(Arc::new(MemoryStore::new()), RegistryConfig::default());
    /// # answer_when_asked(&registry, serde_json::json!({"choice": "staging"}));
    /// let env = registry
    ///     .select("Deploy where?", &["staging", "production"], Ask::default())
    ///     .await?;
    /// assert_eq!(env, "staging");
    /// # Ok(())
    /// # }
    /// # fn answer_when_asked(r: &Registry, content: serde_json::Value) {
    /// #     let r = r.clone();
    /// #     let (_, mut events) = r.events().subscribe();
    /// #     tokio::spawn(async move {
    /// #         while let Some(imrelay::interaction::Next::Event(e)) = events.next().await {
    /// #             let by = Responder::new("alice", Via::desktop());
    /// #             let content = content.as_object().cloned().unwrap_or_default();
    /// #             let _ = r.respond(&e.id, Answer::Accept(content), by).await;
    /// #             break;
    /// #         }
    /// #     });
    /// # }
    /// ```
    pub async fn select(
        &self,
        question: &str,
        options: &[&str],
        ask: Ask,
    ) -> Result<String, AskError> {
        let schema = json!({
            "type": "object",
            "properties": {"choice": {"type": "string", "title": "Choose one", "enum": options}},
            "required": ["choice"],
        });
        let content = self.ask_form(question, schema, ask).await?;
        Ok(content
            .get("choice")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string())
    }

    /// Asks people to fill in a form, `message` above the fields `schema` describes (an MCP
    /// elicitation's `requestedSchema`, see [`Form`]), and returns the content: every field
    /// checked, defaults filled in.
    ///
    /// ```
    /// # use std::sync::Arc;
    /// # use imrelay::interaction::{Answer, Ask, Registry, RegistryConfig, Responder, Via};
    /// # use imrelay::store::MemoryStore;
    /// use serde_json::json;
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let registry = Registry::new(Arc::new(MemoryStore::new()), RegistryConfig::default());
    /// # answer_when_asked(&registry, json!({"name": "Ann"}));
    /// let schema = json!({
    ///     "type": "object",
    ///     "properties": {
    ///         "name": {"type": "string", "minLength": 1},
    ///         "seats": {"type": "integer", "minimum": 1, "default": 1}
    ///     },
    ///     "required": ["name"]
    /// });
    /// let content = registry.ask_form("Who is coming?", schema, Ask::default()).await?;
    /// assert_eq!(content["name"], "Ann");
    /// assert_eq!(content["seats"], 1);
    /// # Ok(())
    /// # }
    /// # fn answer_when_asked(r: &Registry, content: serde_json::Value) {
    /// #     let r = r.clone();
    /// #     let (_, mut events) = r.events().subscribe();
    /// #     tokio::spawn(async move {
    /// #         while let Some(imrelay::interaction::Next::Event(e)) = events.next().await {
    /// #             let by = Responder::new("alice", Via::desktop());
    /// #             let content = content.as_object().cloned().unwrap_or_default();
    /// #             let _ = r.respond(&e.id, Answer::Accept(content), by).await;
    /// #             break;
    /// #         }
    /// #     });
    /// # }
    /// ```
    pub async fn ask_form(
        &self,
        message: &str,
        schema: Value,
        ask: Ask,
    ) -> Result<Map<String, Value>, AskError> {
        let created = self
            .create(NewInteraction {
                id: ask.id,
                session: ask.session,
                agent: ask.agent,
                title: ask.title,
                timeout_secs: ask.timeout_secs,
                ..NewInteraction::new(FORM_TOOL, Form::input(message, schema))
            })
            .await?;
        let id = created.interaction.id.clone();
        let mut guard = Withdraw {
            registry: self.clone(),
            id: Some(id.clone()),
        };
        let resolved = self.until_resolved(&created.interaction).await;
        guard.id = None;
        content_of(&*resolved?)
    }

    /// Waits for `i` to be resolved: answered, or expired at its deadline.
    async fn until_resolved(&self, i: &Interaction) -> Result<Arc<Interaction>, AskError> {
        loop {
            // Until the deadline (none left once it passed), and a second for its expiry.
            let left = Duration::try_from(i.deadline.duration_since(jiff::Timestamp::now()))
                .unwrap_or(Duration::ZERO)
                .saturating_add(Duration::from_secs(1));
            if let Some(done) = self.wait(&i.id, left).await? {
                return Ok(done);
            }
            // The deadline passed without the timer's expiry reaching us: expire it now.
            if i.deadline <= jiff::Timestamp::now() {
                return Ok(self.expire(&i.id).await?);
            }
        }
    }
}

/// The content of an accepted form, or why there is none.
fn content_of(i: &Interaction) -> Result<Map<String, Value>, AskError> {
    let Some(r) = i.resolution.as_deref() else {
        return Err(AskError::Cancelled("No answer".into()));
    };
    let message = r.message().unwrap_or_default().to_string();
    match (r.result.elicit(), r.outcome) {
        (Some(e), _) if e.action == ElicitAction::Accept => {
            Ok(e.content.clone().unwrap_or_default())
        }
        (_, Outcome::Expired) => Err(AskError::Expired(message)),
        (_, Outcome::Cancelled) => Err(AskError::Cancelled(message)),
        _ => Err(AskError::Declined {
            by: r.by.clone(),
            message,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::interaction::{Answer, Next, RegistryConfig, Responder, Via};
    use crate::store::MemoryStore;

    fn registry() -> Registry {
        Registry::new(Arc::new(MemoryStore::new()), RegistryConfig::default())
    }

    /// Answers the next interaction created with `answer`, once.
    fn answer_next(r: &Registry, answer: Answer) -> tokio::task::JoinHandle<()> {
        let r = r.clone();
        let (_, mut events) = r.events().subscribe();
        tokio::spawn(async move {
            if let Some(Next::Event(e)) = events.next().await {
                let by = Responder::new("bob", Via::desktop());
                r.respond(&e.id, answer, by).await.unwrap();
            }
        })
    }

    #[tokio::test]
    async fn a_decline_an_expiry_and_a_bad_schema_are_errors_saying_which() {
        let r = registry();
        answer_next(&r, Answer::deny(Some("not now".into())));
        let e = r.ask_text("Why?", false, Ask::default()).await.unwrap_err();
        assert!(
            matches!(&e, AskError::Declined { by: Some(b), message } if b == "bob" && message == "not now"),
            "{e:?}"
        );
        let e = r
            .confirm("Quick?", Ask::default().within(1))
            .await
            .unwrap_err();
        assert!(
            matches!(&e, AskError::Expired(m) if m == "No response within 1 seconds"),
            "{e:?}"
        );
        let e = r
            .ask_form(
                "Bad",
                json!({"type": "object", "properties": {}}),
                Ask::default(),
            )
            .await
            .unwrap_err();
        assert!(
            matches!(e, AskError::Registry(RegistryError::Invalid(_))),
            "{e:?}"
        );
    }

    #[tokio::test]
    async fn dropping_the_future_withdraws_the_question_everywhere() {
        let r = registry();
        let (_, mut events) = r.events().subscribe();
        let asking = tokio::spawn({
            let r = r.clone();
            async move { r.ask_text("Still there?", false, Ask::default()).await }
        });
        let Some(Next::Event(created)) = events.next().await else {
            panic!("no event")
        };
        asking.abort();
        let _ = asking.await;
        let Some(Next::Event(resolved)) = events.next().await else {
            panic!("no event")
        };
        assert_eq!(resolved.id, created.id);
        assert_eq!(resolved.kind, crate::interaction::EventKind::Resolved);
        let after = r.get(&resolved.id).await.unwrap().unwrap();
        let res = after.resolution.clone().unwrap();
        assert_eq!(res.outcome, Outcome::Cancelled);
        assert_eq!(res.message(), Some("The agent stopped waiting"));
    }
}
