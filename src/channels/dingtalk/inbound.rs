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
//! Messages to the robot (`/v1.0/im/bot/messages/get`) are read for one command only:
//! `whoami` is answered with the chat's openConversationId and the sender's userId, what
//! the settings need.

use std::sync::Arc;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use serde_json::{Map, Value, json};

use super::CHANNEL;
use super::api::{OpenApi, Space};
use super::button::Tokens;
use super::render::{Action, Cards};
use super::settings::DingTalkSettings;
use super::stream::{BOT_MESSAGE_TOPIC, CARD_CALLBACK_TOPIC, CallbackHandler, CardClick};
use crate::channels::pipeline::{Feedback, Pipeline, Tap};
use crate::interaction::{Answer, Form, Interaction, Kind, Responder, clip, parse_questions};

/// Labels of the click counter.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ResultLabels {
    /// `resolved`, `already_resolved`, `refused`, `invalid`, `ignored`, ...
    pub result: String,
}

/// Longest text accepted from a card's input box.
const MAX_TEXT_CHARS: usize = 4000;

/// Handles card clicks. Cheap to share.
pub struct Clicks {
    pipeline: Pipeline,
    api: Arc<OpenApi>,
    settings: Arc<DingTalkSettings>,
    cards: Cards,
    results: Family<ResultLabels, Counter>,
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
            results: Family::default(),
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
            .tap::<super::plan::Job>(&self.pipeline, texts, &press, &who)
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
    pub fn results_metric(&self) -> Family<ResultLabels, Counter> {
        self.results.clone()
    }

    fn count(&self, result: &str) {
        self.results
            .get_or_create(&ResultLabels {
                result: result.into(),
            })
            .inc();
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

    /// Handles one click; returns what the clicker is told.
    async fn click(&self, click: &CardClick) -> Feedback {
        let Some((ids, params)) = click.action() else {
            return Feedback::BadButton;
        };
        let user = click.user_id.as_str();
        let token = params.get("token").and_then(Value::as_str).unwrap_or("");
        let Some((id, created)) = self.cards.tokens().verify(token) else {
            // The id in forged data proves nothing: the refusal is bound to no interaction.
            let recorded = self
                .pipeline
                .registry()
                .refused(
                    None,
                    &format!("dingtalk:{}", clip(user, 80)),
                    self.pipeline.via(),
                    &format!(
                        "card data failed its integrity check (claimed id {:?})",
                        clip(Tokens::claimed(token), 80)
                    ),
                )
                .await;
            return match recorded {
                Ok(()) => Feedback::BadButton,
                // Not recorded: try again.
                Err(_) => Feedback::StoreDown,
            };
        };
        let Some(action) = ids.first().and_then(|a| Action::parse(a)) else {
            return Feedback::BadButton;
        };
        let actor = format!("dingtalk:{user}");
        let tap = Tap {
            id: &id,
            created: Some(created),
            actor: &actor,
            identity: user,
            approver: self.settings.is_approver(user),
            audit: true,
        };
        let current = match self.pipeline.admit(&tap, |i| action.fits(i.kind)).await {
            Ok(i) => i,
            Err(stop) => return stop.feedback,
        };
        let answer = match answer(&current, action, &params) {
            Ok(a) => a,
            Err(why) => return Feedback::Invalid(why),
        };
        let by = Responder::new(user, self.pipeline.via().clone())
            .with_actor_id(actor.clone())
            .with_identity(CHANNEL, user);
        self.pipeline.respond(&id, answer, by).await
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
        self.count(feedback.result());
        self.reply(&feedback)
    }
}

impl Clicks {
    /// Answers `whoami` sent to the robot with the chat's and the sender's ids; ignores
    /// anything else. The reply is sent off the acknowledgement's path.
    fn message(&self, data: &Value) {
        let text = data["text"]["content"].as_str().unwrap_or_default().trim();
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

/// The text a click's input box sent, trimmed; `None` when empty.
fn text_of(params: &Map<String, Value>) -> Option<String> {
    params
        .get("text")
        .and_then(Value::as_str)
        .map(str::trim)
        .filter(|t| !t.is_empty())
        .map(|t| t.chars().take(MAX_TEXT_CHARS).collect())
}

/// The answer a click means for `i`; `Err` says why it does not fit.
fn answer(i: &Interaction, action: Action, params: &Map<String, Value>) -> Result<Answer, String> {
    Ok(match action {
        Action::Allow => Answer::allow(),
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
    })
}

/// Answers to every question from typed text: one line per question, each an option's
/// number (several, comma-separated, where several may be chosen) or the person's own words.
fn question_answers(i: &Interaction, text: &str) -> Result<Map<String, Value>, String> {
    let questions = parse_questions(&i.input.map()).map_err(|e| e.to_string())?;
    let lines: Vec<&str> = if questions.len() == 1 {
        vec![text]
    } else {
        text.lines()
            .map(str::trim)
            .filter(|l| !l.is_empty())
            .collect()
    };
    if lines.len() != questions.len() {
        return Err(format!(
            "answer each of the {} questions on its own line",
            questions.len()
        ));
    }
    let mut out = Map::new();
    for (n, (q, line)) in questions.iter().zip(lines).enumerate() {
        let numbers: Option<Vec<usize>> = line
            .split([',', '，'])
            .map(|p| p.trim().parse::<usize>().ok())
            .collect();
        let picked: Option<Vec<String>> = numbers.and_then(|ns| {
            ns.iter()
                .map(|k| k.checked_sub(1).and_then(|j| q.options.get(j)))
                .map(|o| o.map(|o| o.label.clone()))
                .collect()
        });
        let value = match picked {
            Some(labels) if q.multi_select => json!(labels),
            Some(labels) if labels.len() == 1 => json!(labels[0]),
            Some(_) => return Err(format!("{}: choose one option", q.header)),
            None if q.multi_select => json!([line]),
            None => json!(line),
        };
        out.insert(n.to_string(), value);
    }
    Ok(out)
}

/// A form's content from typed text: the whole text for a form of one text field,
/// otherwise one `name: value` line per field (a field's label works as its name). Each
/// value is read as its field's type; the form's own checks run on the result.
fn form_content(i: &Interaction, text: &str) -> Result<Map<String, Value>, String> {
    let form = Form::from_input(&i.input.map()).map_err(|e| e.to_string())?;
    let mut content = Map::new();
    if let Some(f) = form.fields.first().filter(|_| form.is_single_text()) {
        content.insert(f.name.clone(), f.parse_text(text)?);
    } else {
        for line in text.lines().map(str::trim).filter(|l| !l.is_empty()) {
            let (name, value) = line
                .split_once([':', '：', '='])
                .ok_or_else(|| format!("{line:?}: write name: value"))?;
            let name = name.trim();
            let f = form
                .fields
                .iter()
                .find(|f| f.name == name || f.label() == name)
                .ok_or_else(|| format!("there is no field {:?}", clip(name, 60)))?;
            let v = f
                .parse_text(value.trim())
                .map_err(|e| format!("{}: {e}", f.label()))?;
            content.insert(f.name.clone(), v);
        }
    }
    form.accept(&content).map_err(|e| {
        let name = e.field.trim_start_matches("content.");
        let label = form.field(name).map_or(name, |f| f.label());
        format!("{label}: {}", e.message)
    })?;
    Ok(content)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::interaction::InteractionId;
    use jiff::Timestamp;

    fn pending(tool: &str, input: Value) -> Interaction {
        Interaction::pending(
            InteractionId::parse("t1").unwrap(),
            tool,
            input.as_object().unwrap().clone(),
            Timestamp::from_millisecond(1_700_000_000_000).unwrap(),
            300,
        )
    }

    #[test]
    fn typed_answers_read_numbers_as_options_and_words_as_themselves() {
        let q = pending(
            "AskUserQuestion",
            json!({"questions": [
                {"question": "Which db?", "header": "DB", "multiSelect": false,
                 "options": [{"label": "sqlite"}, {"label": "postgres"}]},
                {"question": "Which parts?", "header": "Parts", "multiSelect": true,
                 "options": [{"label": "api"}, {"label": "ui"}]}]}),
        );
        let a = question_answers(&q, "2\n1, 2").unwrap();
        assert_eq!(a["0"], "postgres");
        assert_eq!(a["1"], json!(["api", "ui"]));
        let a = question_answers(&q, "mysql\n ui only ").unwrap();
        assert_eq!(a["0"], "mysql");
        assert_eq!(a["1"], json!(["ui only"]));
        assert!(
            question_answers(&q, "1")
                .unwrap_err()
                .contains("2 questions")
        );
    }
}
