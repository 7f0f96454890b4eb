//! Single-use action tokens: what a notification's Allow, Deny and "Allow similar" buttons
//! carry where the platform cannot sign a request (ntfy's action URLs, a Web Push
//! notification's actions), and the one endpoint logic that answers with them.
//!
//! Each button carries a fresh random token made for one interaction (its creation time is
//! the token's first part, so a token never acts on a later interaction that reuses the id)
//! and one action; a channel may put more plain fields in it (Web Push: until when it is good
//! and the device it was sent to, which binds it to that device's person). Only the token's
//! SHA-256, with the channel and the action, is kept: as a value bound to the interaction
//! ([`crate::store::BOUND_VALUE_PREFIX`]), so it is pruned with it. A token is found by that
//! hash, which no timing can turn into a token, and its fields cannot be changed without
//! changing the hash; the interaction it names is compared in constant time. Using a token
//! records its hash as seen: a second press is refused, as is one after an answer from
//! anywhere or after the interaction's deadline.

use std::sync::Arc;

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use rand::RngCore;
use serde_json::json;
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use crate::channels::pipeline::{Decision, Feedback, Pipeline, Tap};
use crate::channels::words::Words;
use crate::interaction::{Answer, Interaction, InteractionId, Kind, Responder};
use crate::present::render::Locale;
use crate::store::{BOUND_VALUE_PREFIX, Store, StoreError};
use crate::wire::error::ApiError;

/// What a button does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Action {
    /// Allow the tool call.
    Allow,
    /// Deny it.
    Deny,
    /// Allow it and grant its session the rule imrelay proposes ("Allow similar": ntfy's
    /// third button).
    Similar,
}

impl Action {
    /// As the URL names it.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Action::Allow => "allow",
            Action::Deny => "deny",
            Action::Similar => "similar",
        }
    }

    /// The action a URL names.
    pub(crate) fn parse(s: &str) -> Option<Self> {
        match s {
            "allow" => Some(Action::Allow),
            "deny" => Some(Action::Deny),
            "similar" => Some(Action::Similar),
            _ => None,
        }
    }
}

/// One channel's tokens.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Tokens {
    /// The channel's name: part of every digest and store key.
    pub channel: &'static str,
}

/// A token read back: its creation time and the channel's fields.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Parsed<'a> {
    /// The interaction's creation time (ms) it was made for.
    pub created: i64,
    /// The channel's fields, in order.
    pub fields: Vec<&'a str>,
}

impl Tokens {
    /// A fresh token for interaction `i`: `<created ms>-<fields>-<32 random bytes>` (each
    /// field of `0-9 a-z A-Z`).
    pub(crate) fn make(&self, i: &Interaction, fields: &[&str]) -> String {
        let mut bytes = [0u8; 32];
        rand::rng().fill_bytes(&mut bytes);
        let mut t = i.created_at.as_millisecond().to_string();
        for f in fields {
            t.push('-');
            t.push_str(f);
        }
        t.push('-');
        t.push_str(&URL_SAFE_NO_PAD.encode(bytes));
        t
    }

    /// Reads a well-formed token (at most 200 characters of `0-9`, `-`, and base64url) with
    /// `n` fields.
    pub(crate) fn parse<'a>(&self, token: &'a str, n: usize) -> Option<Parsed<'a>> {
        if token.len() > 200
            || !token
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
        {
            return None;
        }
        let mut parts = token.splitn(n + 2, '-');
        let created = parts.next()?.parse().ok()?;
        let fields: Vec<&str> = parts.by_ref().take(n).collect();
        (fields.len() == n && parts.next().is_some_and(|r| !r.is_empty()))
            .then_some(Parsed { created, fields })
    }

    /// The hex SHA-256 of `token` bound to this channel and `action`: what is kept, and
    /// what a used token is recorded as.
    pub(crate) fn digest(&self, action: Action, token: &str) -> String {
        let mut h = Sha256::new();
        h.update(format!("imrelay {} action\n", self.channel).as_bytes());
        h.update(action.as_str().as_bytes());
        h.update(b"\n");
        h.update(token.as_bytes());
        hex::encode(h.finalize())
    }

    /// The store key of a token's binding; its value is the interaction's id.
    pub(crate) fn key(&self, digest: &str) -> String {
        format!("{BOUND_VALUE_PREFIX}{}.action.{digest}", self.channel)
    }

    /// The scope under which used tokens are recorded.
    pub(crate) fn used_scope(&self) -> String {
        format!("{}-action", self.channel)
    }

    /// Makes a token for `action` on `i` with `fields` and keeps its hash: the token.
    pub(crate) async fn issue(
        &self,
        store: &dyn Store,
        i: &Interaction,
        action: Action,
        fields: &[&str],
    ) -> Result<String, StoreError> {
        let token = self.make(i, fields);
        let key = self.key(&self.digest(action, &token));
        store.set_value(&key, Some(i.id.to_string())).await?;
        Ok(token)
    }
}

/// Whether the binding found (`stored`) names interaction `id`, compared in constant time.
fn names(stored: &str, id: &str) -> bool {
    stored.as_bytes().ct_eq(id.as_bytes()).into()
}

/// Who answers with a token.
#[derive(Clone, Debug)]
pub(crate) struct Person {
    /// Their `[[people]]` name (or how they are known).
    pub name: String,
    /// Their id as the pipeline knows identities (ntfy: their `ntfy` id; push: the operator
    /// token's label).
    pub identity: String,
}

/// A token found and bound to its interaction.
#[derive(Clone, Debug)]
pub(crate) struct Redeemed {
    /// The action.
    pub action: Action,
    /// The interaction's creation time (ms).
    pub created: i64,
    /// The token's digest.
    pub digest: String,
    /// The interaction.
    pub id: InteractionId,
}

/// The endpoint logic a channel's action route calls.
#[derive(Clone)]
pub(crate) struct Endpoint {
    /// The answer pipeline.
    pub pipeline: Pipeline,
    /// Where tokens are kept.
    pub store: Arc<dyn Store>,
    /// The channel's tokens.
    pub tokens: Tokens,
    /// The language of what a press is answered with (the outcome, or why nothing changed).
    pub locale: Locale,
}

impl Endpoint {
    /// A refusal: logged and recorded (never the token) with `why` in English, answered with
    /// `status` and `why` in the channel's locale.
    pub(crate) async fn refuse(
        &self,
        actor: &str,
        id: Option<&InteractionId>,
        (status, code): (StatusCode, &'static str),
        why: fn(Words) -> &'static str,
    ) -> ApiError {
        let message = why(Words(Locale::EnUs));
        let channel = self.tokens.channel;
        tracing::warn!(via = channel, interaction = ?id.map(|i| i.to_string()), code, "{channel} action refused: {message}");
        if self
            .pipeline
            .registry()
            .refused(id, actor, self.pipeline.via(), message)
            .await
            .is_err()
        {
            return ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "store_unavailable",
                "imrelay cannot record this right now; try again shortly",
            );
        }
        ApiError::new(status, code, why(Words(self.locale)))
    }

    /// The token `action`/`token` with `fields` fields, found: its binding and fields; any
    /// other is refused (recorded as from `actor`).
    pub(crate) async fn find<'a>(
        &self,
        actor: &str,
        action: &str,
        token: &'a str,
        fields: usize,
    ) -> Result<(Redeemed, Vec<&'a str>), ApiError> {
        let t = self.tokens;
        let parsed = Action::parse(action).zip(t.parse(token, fields));
        let found = match parsed {
            Some((action, p)) => {
                let digest = t.digest(action, token);
                let bound = self.store.get_value(&t.key(&digest)).await?;
                bound
                    .as_deref()
                    .and_then(|v| {
                        InteractionId::parse(v)
                            .ok()
                            .filter(|id| names(v, id.as_ref()))
                    })
                    .map(|id| {
                        let r = Redeemed {
                            action,
                            created: p.created,
                            digest,
                            id,
                        };
                        (r, p.fields)
                    })
            }
            None => None,
        };
        match found {
            Some(f) => Ok(f),
            None => {
                let status = (StatusCode::FORBIDDEN, "invalid_token");
                Err(self
                    .refuse(actor, None, status, Words::button_not_valid)
                    .await)
            }
        }
    }

    /// Answers with redeemed token `r` as `person`, once: the JSON reply, or the error that
    /// says why nothing changed.
    pub(crate) async fn answer(&self, r: &Redeemed, person: &Person) -> Result<Response, ApiError> {
        let channel = self.tokens.channel;
        let actor = format!("{} ({channel}:{})", person.name, person.identity);
        let tap = Tap {
            id: &r.id,
            created: Some(r.created),
            actor: &person.name,
            identity: &person.identity,
            approver: true,
            audit: true,
        };
        let i = match self
            .pipeline
            .admit(&tap, |i| i.kind == Kind::Approval)
            .await
        {
            Ok(i) => i,
            Err(stop) => return Err(stopped(channel, &r.id, stop.feedback, self.locale)),
        };
        if jiff::Timestamp::now() >= i.deadline {
            let status = (StatusCode::GONE, "expired");
            return Err(self
                .refuse(&actor, Some(&r.id), status, Words::request_expired)
                .await);
        }
        let until = i.deadline + jiff::SignedDuration::from_secs(3600);
        let scope = self.tokens.used_scope();
        if !self.store.first_sighting(&scope, &r.digest, until).await? {
            let status = (StatusCode::CONFLICT, "token_used");
            return Err(self
                .refuse(&actor, Some(&r.id), status, Words::button_used)
                .await);
        }
        let responder = Responder::new(person.name.clone(), self.pipeline.via().clone())
            .with_actor_id(format!(
                "{}:{}",
                self.pipeline.identities(),
                person.identity
            ))
            .with_identity(self.pipeline.identities(), person.identity.clone());
        let decision = match r.action {
            Action::Allow => Decision::Answer(Answer::allow()),
            Action::Deny => Decision::Answer(Answer::deny(None)),
            // Allows and grants the session the proposed rule, audited as a chat's press is.
            Action::Similar => Decision::AllowSimilar,
        };
        let feedback = self.pipeline.decide(&i, decision, responder).await;
        if matches!(feedback, Feedback::StoreDown) {
            // Not recorded: the same button may be pressed again.
            let _ = self.store.forget_sighting(&scope, &r.digest).await;
        }
        match feedback {
            Feedback::Resolved(_) | Feedback::Voted(_) => Ok((
                StatusCode::OK,
                axum::Json(json!({
                    "id": r.id.to_string(),
                    "result": feedback.result(),
                    "message": feedback.text(self.locale),
                })),
            )
                .into_response()),
            other => Err(stopped(channel, &r.id, other, self.locale)),
        }
    }
}

/// The error for a press the pipeline stopped (it recorded refusals already), saying why in
/// `locale`.
fn stopped(channel: &str, id: &InteractionId, f: Feedback, locale: Locale) -> ApiError {
    let (status, code, message) = refusal(&f, locale);
    tracing::warn!(via = channel, interaction = %id, code, "{channel} action refused: {}", message.escape_debug());
    ApiError::new(status, code, message)
}

/// The error for a press on a digest's action that the kit stopped (it recorded refusals
/// already), saying why in `locale`.
pub(crate) fn stopped_digest(channel: &str, f: Feedback, locale: Locale) -> ApiError {
    let (status, code, message) = refusal(&f, locale);
    tracing::warn!(
        via = channel,
        code,
        "{channel} digest action refused: {}",
        message.escape_debug()
    );
    ApiError::new(status, code, message)
}

/// A stopped press's status, code and text in `locale`.
fn refusal(f: &Feedback, locale: Locale) -> (StatusCode, &'static str, String) {
    let message = f.text(locale);
    let (status, code) = match f {
        Feedback::Already(_) => (StatusCode::CONFLICT, "already_resolved"),
        Feedback::AlreadyVoted(..) => (StatusCode::CONFLICT, "already_voted"),
        Feedback::NotFound => (StatusCode::GONE, "not_found"),
        Feedback::StoreDown | Feedback::StillWorking => {
            (StatusCode::SERVICE_UNAVAILABLE, "store_unavailable")
        }
        Feedback::Invalid(_) => (StatusCode::UNPROCESSABLE_ENTITY, "invalid"),
        _ => (StatusCode::FORBIDDEN, "refused"),
    };
    (status, code, message)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_fresh_bound_to_their_channel_and_action_and_carry_their_fields() {
        let i = Interaction::pending(
            InteractionId::parse("t1").unwrap(),
            "Bash",
            crate::interaction::Input::default(),
            jiff::Timestamp::from_millisecond(1_700_000_000_000).unwrap(),
            60,
        );
        let ntfy = Tokens { channel: "ntfy" };
        let push = Tokens { channel: "push" };
        let (a, b) = (ntfy.make(&i, &[]), ntfy.make(&i, &[]));
        assert_ne!(a, b);
        assert_eq!(ntfy.parse(&a, 0).unwrap().created, 1_700_000_000_000);
        assert_ne!(
            ntfy.digest(Action::Allow, &a),
            ntfy.digest(Action::Deny, &a)
        );
        assert_ne!(
            ntfy.digest(Action::Allow, &a),
            push.digest(Action::Allow, &a)
        );
        assert!(
            ntfy.key(&ntfy.digest(Action::Allow, &a))
                .starts_with("bound:ntfy.action.")
        );
        let p = push.make(&i, &["1700000900", "ab12"]);
        assert_eq!(
            push.parse(&p, 2),
            Some(Parsed {
                created: 1_700_000_000_000,
                fields: vec!["1700000900", "ab12"]
            })
        );
        assert_eq!(push.parse("1-2", 2), None);
        assert_eq!(ntfy.parse("x/y", 0), None);
        assert_eq!(ntfy.parse(&"1".repeat(300), 0), None);
        assert!(names("t1", "t1") && !names("t1", "t2"));
        assert_eq!(Action::parse("allow"), Some(Action::Allow));
        assert_eq!(Action::parse("ALLOW"), None);
        assert_eq!(Action::parse("similar"), Some(Action::Similar));
        assert_ne!(
            ntfy.digest(Action::Similar, &a),
            ntfy.digest(Action::Allow, &a)
        );
    }
}
