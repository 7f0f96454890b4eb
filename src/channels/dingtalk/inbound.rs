//! Card clicks: the handler the Stream connection hands every callback on the card topic
//! (`/v1.0/card/instances/callback`) to, and its answer, which DingTalk applies to the card
//! at once.
//!
//! A click reaches it authenticated (it came over the connection the app's credentials
//! opened). Its `token` parameter is verified here: its tag binds it to one interaction's id
//! and creation time. The action is the button's actionId (`allow`, `deny`, `pick`,
//! `submit`); the shared answer pipeline checks the clicker (a userId on the approver list,
//! or a configured person), the incarnation, that it is still pending and that the action
//! fits. The answer carries the card's data as it now is (`cardData`, for everyone) and the
//! pipeline's feedback in the clicker's own `notice` (`userPrivateData`), so what became of
//! a click is said to that person alone. Every copy is then updated through the outbox.
//!
//! Messages to the robot (`/v1.0/im/bot/messages/get`) are read for commands: `whoami` is
//! answered with the chat's openConversationId and the sender's userId, what the settings
//! need, and `sessions` with the chat's sessions. One that quotes an imrelay card is said to
//! the card's agent session (`quotes.rs`).

use std::sync::Arc;

use serde_json::{Map, Value, json};

use super::CHANNEL;
use super::api::{OpenApi, Space};
use super::button::Tokens;
use super::render::{Action, Cards};
use super::settings::DingTalkSettings;
use super::stream::{BOT_MESSAGE_TOPIC, CARD_CALLBACK_TOPIC, CallbackHandler, CardClick};
use crate::channels::pipeline::{Decision, Feedback, Pipeline, Tap};
use crate::channels::typed::{form_content, question_answers};
use crate::interaction::{Answer, Interaction, Kind, Responder, clip, parse_questions};

/// Longest text accepted from a card's input box.
const MAX_TEXT_CHARS: usize = 4000;

/// Handles card clicks. Cheap to share.
pub struct Clicks {
    pipeline: Pipeline,
    api: Arc<OpenApi>,
    settings: Arc<DingTalkSettings>,
    cards: Cards,
    digests: Option<(
        crate::channels::digest::Digests,
        super::digest::DigestTokens,
    )>,
}

impl Clicks {
    /// A handler answering through `pipeline`, drawing cards with `cards`.
    pub(crate) fn new(
        pipeline: Pipeline,
        api: Arc<OpenApi>,
        settings: Arc<DingTalkSettings>,
        cards: Cards,
    ) -> Self {
        Self {
            pipeline,
            api,
            settings,
            cards,
            digests: None,
        }
    }

    /// Answers clicks on digests too.
    pub(crate) fn with_digests(
        mut self,
        digests: crate::channels::digest::Digests,
        tokens: super::digest::DigestTokens,
    ) -> Self {
        self.digests = Some((digests, tokens));
        self
    }

    /// A click on a digest card, answered through the kit: the card as it now is for
    /// everyone, and what became of the click for the clicker alone. `None`: not a digest's.
    async fn digest_click(&self, click: &CardClick) -> Option<Value> {
        let (digests, tokens) = self.digests.as_ref()?;
        let (ids, params) = click.action()?;
        let token = params.get("token").and_then(Value::as_str)?;
        if !super::digest::is_digest_token(token) {
            return None;
        }
        let user = click.user_id.as_str();
        let actor = format!("dingtalk:{user}");
        let index = params.get("index").and_then(|v| match v {
            Value::String(s) => s.parse().ok(),
            other => other.as_u64(),
        });
        let action = ids.first().map(String::as_str).unwrap_or_default();
        let texts = crate::channels::digest_texts::Texts(self.cards.locale());
        let feedback = |f: Feedback| {
            json!({
                "cardUpdateOptions": {"updatePrivateDataByKey": true},
                "userPrivateData": {"cardParamMap": {"notice": f.text(self.cards.locale())}},
            })
        };
        let Some((what, place, session, set)) = tokens.read(token, action, index) else {
            self.count("refused");
            let recorded = self
                .pipeline
                .registry()
                .refused(
                    None,
                    &actor,
                    self.pipeline.via(),
                    "digest card data failed its integrity check",
                )
                .await;
            return Some(feedback(match recorded {
                Ok(()) => Feedback::BadButton,
                Err(_) => Feedback::StoreDown,
            }));
        };
        let who = crate::channels::digest::Tapper {
            actor: &actor,
            identity: user,
            approver: self.settings.is_approver(user),
            responder: Responder::new(user, self.pipeline.via().clone())
                .with_actor_id(actor.clone())
                .with_identity(CHANNEL, user),
        };
        let press = crate::channels::digest_flow::Press {
            address: &place,
            session: &session,
            action: what,
            set: &set,
            message: &click.out_track_id,
        };
        let tapped = digests
            .tap::<super::Job>(&self.pipeline, texts, &press, &who)
            .await;
        Some(match tapped {
            Ok(t) => {
                self.count("digest");
                let mut reply = json!({
                    "cardUpdateOptions": {"updateCardDataByKey": true, "updatePrivateDataByKey": true},
                    "userPrivateData": {"cardParamMap": {"notice": t.toast}},
                });
                if let Some(sheet) = &t.redraw {
                    reply["cardData"] =
                        json!({"cardParamMap": super::digest::params(tokens, sheet)});
                }
                reply
            }
            Err(f) => {
                self.count(f.result());
                feedback(f)
            }
        })
    }

    /// The per-result counter, for registration with the server's metrics.
    pub fn results_metric(
        &self,
    ) -> prometheus_client::metrics::family::Family<
        crate::channels::pipeline::ResultLabels,
        prometheus_client::metrics::counter::Counter,
    > {
        self.pipeline.results_metric()
    }

    fn count(&self, result: &str) {
        self.pipeline.count(result);
    }

    /// The answer to a click: the card as the interaction now is, when the feedback shows
    /// it, and the feedback for the clicker alone.
    fn reply(&self, feedback: &Feedback) -> Value {
        let notice = feedback.text(self.cards.locale());
        let mut reply = json!({
            "cardUpdateOptions": {"updateCardDataByKey": true, "updatePrivateDataByKey": true},
            "userPrivateData": {"cardParamMap": {"notice": notice}},
        });
        if let Some(i) = feedback.interaction() {
            reply["cardData"] = json!({"cardParamMap": self.cards.params(i)});
        }
        reply
    }

    /// Handles one click; returns what the clicker is told (counted).
    async fn click(&self, click: &CardClick) -> Feedback {
        let Some((ids, params)) = click.action() else {
            self.count("refused");
            return Feedback::BadButton;
        };
        let user = click.user_id.as_str();
        let actor = format!("dingtalk:{}", clip(user, 80));
        let token = params.get("token").and_then(Value::as_str).unwrap_or("");
        let verified = self.cards.tokens().verify(token);
        let claimed = clip(Tokens::claimed(token), 80);
        let (id, created) = match self
            .pipeline
            .verified(verified, &actor, "card data", &claimed, true)
            .await
        {
            Ok(v) => v,
            Err(feedback) => {
                self.count(feedback.result());
                return feedback;
            }
        };
        let Some(action) = ids.first().and_then(|a| Action::parse(a)) else {
            self.count("refused");
            return Feedback::BadButton;
        };
        let tap = Tap {
            id: &id,
            created: Some(created),
            actor: &actor,
            identity: user,
            approver: self.settings.is_approver(user),
            audit: true,
        };
        let by = Responder::new(user, self.pipeline.via().clone())
            .with_actor_id(actor.clone())
            .with_identity(CHANNEL, user);
        self.pipeline
            .answer(
                &tap,
                |i| action.offered(i),
                |i| decision(i, action, &params),
                by,
            )
            .await
    }
}

#[async_trait::async_trait]
impl CallbackHandler for Clicks {
    async fn callback(&self, topic: &str, data: Value) -> Value {
        if topic == BOT_MESSAGE_TOPIC {
            self.message(&data);
            return json!({});
        }
        if topic != CARD_CALLBACK_TOPIC {
            self.count("ignored");
            return json!({});
        }
        let click: CardClick = match serde_json::from_value(data) {
            Ok(c) => c,
            Err(e) => {
                tracing::warn!(error = %e, "dingtalk: a card callback that is not a click; ignored");
                self.count("ignored");
                return json!({});
            }
        };
        if let Some(reply) = self.digest_click(&click).await {
            return reply;
        }
        let feedback = self.click(&click).await;
        self.reply(&feedback)
    }
}

impl Clicks {
    /// Answers `whoami` sent to the robot with the chat's and the sender's ids; ignores
    /// anything else. The reply is sent off the acknowledgement's path.
    fn message(&self, data: &Value) {
        let digests = self.digests.as_ref();
        let digest_tokens = digests.map(|(_, t)| t);
        if let Some(q) = super::quotes::Quote::read(data, self.cards.tokens(), digest_tokens) {
            // A reply quoting one of imrelay's cards: said to the card's session.
            let approver = self.settings.is_approver(q.user());
            let kit = (self.pipeline.clone(), digests.map(|(d, _)| d.clone()));
            let (api, locale) = (self.api.clone(), self.cards.locale());
            tokio::spawn(super::quotes::steer(kit, api, q, approver, locale));
            return;
        }
        let text = data["text"]["content"].as_str().unwrap_or_default().trim();
        if crate::channels::sessions::is_command(text) {
            return self.sessions(data);
        }
        let text = text.trim_start_matches('/').to_ascii_lowercase();
        if text != "whoami" {
            self.count("ignored");
            return;
        }
        let user = data["senderStaffId"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        let conversation = data["conversationId"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        let group = data["conversationType"].as_str() == Some("2");
        if user.is_empty() || (group && conversation.is_empty()) {
            self.count("ignored");
            return;
        }
        let zh = self.cards.locale() == super::settings::Locale::ZhCn;
        let mut reply = if zh {
            format!("你的 userId：{user}")
        } else {
            format!("Your userId: {user}")
        };
        if group {
            reply.push_str(&if zh {
                format!("\n本群的 openConversationId：{conversation}")
            } else {
                format!("\nThis group's openConversationId: {conversation}")
            });
        }
        self.count("whoami");
        let api = self.api.clone();
        tokio::spawn(async move {
            let space = if group {
                Space::Group(&conversation)
            } else {
                Space::User(&user)
            };
            if let Err(e) = api.send_text(space, &reply).await {
                tracing::warn!(error = %e, "dingtalk: cannot answer whoami");
            }
        });
    }
}

impl Clicks {
    /// `/sessions` sent to the robot: the shared listing of this chat's sessions, sent off
    /// the acknowledgement's path.
    fn sessions(&self, data: &Value) {
        let user = data["senderStaffId"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        let conversation = data["conversationId"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        let group = data["conversationType"].as_str() == Some("2");
        if user.is_empty() || (group && conversation.is_empty()) {
            self.count("ignored");
            return;
        }
        self.count("sessions");
        let (api, registry) = (self.api.clone(), self.pipeline.registry().clone());
        let listed = self.settings.is_approver(&user);
        let configured = group && self.settings.conversations.contains(&conversation);
        let locale = self.cards.locale();
        tokio::spawn(async move {
            let address = if group {
                conversation.clone()
            } else {
                format!("user:{user}")
            };
            let text = crate::channels::sessions::answer(
                &registry,
                super::CHANNEL,
                &address,
                configured,
                (&user, listed),
                locale,
            )
            .await;
            let space = if group {
                Space::Group(&conversation)
            } else {
                Space::User(&user)
            };
            if let Err(e) = api.send_text(space, &text).await {
                tracing::warn!(error = %e, "dingtalk: cannot answer /sessions");
            }
        });
    }
}

/// The text a click's input box sent, trimmed; `None` when empty.
fn text_of(params: &Map<String, Value>) -> Option<String> {
    params
        .get("text")
        .and_then(Value::as_str)
        .map(str::trim)
        .filter(|t| !t.is_empty())
        .map(|t| t.chars().take(MAX_TEXT_CHARS).collect())
}

/// What a click means for `i`; `Err` says why it does not fit.
fn decision(
    i: &Interaction,
    action: Action,
    params: &Map<String, Value>,
) -> Result<Decision, String> {
    Ok(Decision::Answer(match action {
        Action::Allow => Answer::allow(),
        Action::AllowSimilar => return Ok(Decision::AllowSimilar),
        Action::Edit => {
            let command = text_of(params).ok_or("type the command to run in the box first")?;
            return Ok(Decision::Edit(command));
        }
        Action::Deny => Answer::deny(text_of(params)),
        Action::Pick => {
            let index = params
                .get("index")
                .and_then(|v| match v {
                    Value::String(s) => s.parse::<usize>().ok(),
                    Value::Number(n) => n.as_u64().map(|n| n as usize),
                    _ => None,
                })
                .ok_or("no option chosen")?;
            let questions = parse_questions(&i.input.map()).map_err(|e| e.to_string())?;
            let label = match questions.as_slice() {
                [q] if !q.multi_select => q.options.get(index).map(|o| o.label.clone()),
                _ => None,
            }
            .ok_or_else(|| format!("there is no option {}", index + 1))?;
            let mut answers = Map::new();
            answers.insert("0".into(), Value::String(label));
            Answer::Answers(answers)
        }
        Action::Submit => {
            let text = text_of(params).ok_or("type an answer in the box first")?;
            match i.kind {
                Kind::Form => Answer::Accept(form_content(i, &text)?),
                _ => Answer::Answers(question_answers(i, &text)?),
            }
        }
    }))
}
