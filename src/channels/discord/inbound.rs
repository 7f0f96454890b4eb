//! Clicks, select menus and modal submissions: the one handler that turns Discord's
//! interactions (`MESSAGE_COMPONENT`, `MODAL_SUBMIT`) into answers, shared by the Gateway and
//! the HTTP interactions endpoint, and what Discord is answered (the interaction response).
//!
//! An interaction reaches it authenticated (over the Gateway the bot token opened, or an HTTP
//! request whose Ed25519 signature checked). Its `custom_id` is verified here: its MAC binds
//! it to one interaction's id, creation time and action. From there the kit's answer pipeline
//! checks the approver, the incarnation, that it is still pending and that the action fits.
//!
//! What the person sees: a click that resolves the interaction (or adds a vote) updates the
//! message it was made on at once (response type 7; every other copy is edited through the
//! outbox); a button that asks for more opens a modal (type 9); anything else — not an
//! approver, already answered, a forged or damaged `custom_id`, an answer that does not fit —
//! is an ephemeral notice only they see (type 4 with flags 64), and nothing changes.

use std::sync::Arc;
use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use serde_json::{Map, Value, json};

use super::button::{Action, Signed};
use super::render::{ANSWER_INPUT, COMMAND_INPUT, FIELD_INPUT, REASON_INPUT, Render};
use super::settings::DiscordSettings;
use crate::channels::pipeline::{Feedback, Pipeline, Tap};
use crate::interaction::form::FieldType;
use crate::interaction::{
    Answer, Form, Interaction, InteractionId, Responder, Via, parse_questions,
};
use crate::store::Store;

/// Discord's window for answering an interaction.
pub const RESPONSE_WINDOW: Duration = Duration::from_secs(3);
/// How long the handler may take before Discord is answered with a bare acknowledgement,
/// leaving room for the answer to travel inside [`RESPONSE_WINDOW`].
pub const RESPONSE_BUDGET: Duration = Duration::from_millis(2300);

/// Labels of the interaction counter.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ResultLabels {
    /// `resolved`, `already_resolved`, `refused`, `invalid`, `modal`, `ignored`, `slow`, ...
    pub result: String,
}

/// Who acted, as the interaction names them.
struct Person {
    id: String,
    name: String,
}

impl Person {
    fn of(payload: &Value) -> Self {
        let user = if payload["member"]["user"].is_object() {
            &payload["member"]["user"]
        } else {
            &payload["user"]
        };
        let id = user["id"].as_str().unwrap_or_default().to_string();
        let name = ["global_name", "username"]
            .iter()
            .filter_map(|k| user[*k].as_str())
            .map(str::trim)
            .find(|n| !n.is_empty())
            .map(|n| crate::interaction::clip(n, 100))
            .unwrap_or_else(|| format!("user {id}"));
        Person { id, name }
    }

    fn responder(&self) -> Responder {
        Responder::new(self.name.clone(), Via::new(super::CHANNEL))
            .with_actor_id(format!("discord:{}", self.id))
            .with_identity(super::CHANNEL, self.id.clone())
    }

    fn actor(&self) -> String {
        self.responder().audit_actor().unwrap_or_default()
    }
}

/// What a click on a digest needs (`super::digest`).
pub(crate) struct DigestClicks {
    /// The channel's digests.
    pub digests: crate::channels::digest::Digests,
    /// Reads digest button values.
    pub buttons: super::digest::DigestButtons,
    /// The language of digests.
    pub texts: crate::channels::digest_texts::Texts,
}

/// Handles interactions. Cheap to share.
pub struct Interactions {
    pipeline: Pipeline,
    render: Render,
    settings: Arc<DiscordSettings>,
    store: Arc<dyn Store>,
    results: Family<ResultLabels, Counter>,
    digests: Option<DigestClicks>,
}

impl Interactions {
    /// A handler answering through `pipeline`, finding copies in `store`.
    pub(crate) fn new(
        pipeline: Pipeline,
        render: Render,
        settings: Arc<DiscordSettings>,
        store: Arc<dyn Store>,
    ) -> Self {
        Self {
            pipeline,
            render,
            settings,
            store,
            results: Family::default(),
            digests: None,
        }
    }

    /// Answers clicks on digests too.
    pub(crate) fn with_digests(mut self, digests: DigestClicks) -> Self {
        self.digests = Some(digests);
        self
    }

    /// A click on a digest button: answered through the kit, the digest redrawn in place
    /// (response type 7), or what the person is told, ephemerally.
    async fn digest_click(&self, payload: &Value, person: &Person, value: &str) -> Value {
        let Some(d) = &self.digests else {
            return self.tell(&Feedback::BadButton);
        };
        let message = payload["message"]["id"].as_str().unwrap_or_default();
        let actor = person.actor();
        let who = crate::channels::digest::Tapper {
            actor: &actor,
            identity: &person.id,
            approver: self.settings.is_approver(&person.id),
            responder: person.responder(),
        };
        let clicked = crate::channels::digest_buttons::click::<super::Job>(
            &d.digests,
            &self.pipeline,
            &d.buttons,
            d.texts,
            value,
            message,
            &who,
        )
        .await;
        match clicked {
            Ok(t) => {
                self.count("digest");
                match &t.redraw {
                    Some(sheet) => {
                        json!({"type": 7, "data": super::digest::message(&d.buttons, sheet)})
                    }
                    None => self.render.notice(&t.toast),
                }
            }
            Err(f) => {
                self.count(f.result());
                self.tell(&f)
            }
        }
    }

    /// The per-result counter, for registration with the server's metrics.
    pub fn results_metric(&self) -> Family<ResultLabels, Counter> {
        self.results.clone()
    }

    /// The registry the answers go to.
    pub(super) fn registry(&self) -> &crate::interaction::Registry {
        self.pipeline.registry()
    }

    /// The language of the notices.
    pub(super) fn locale(&self) -> crate::present::render::Locale {
        self.render.locale()
    }

    /// An ephemeral notice of `text`, as an interaction response.
    pub(super) fn notice_of(&self, text: &str) -> Value {
        self.render.notice(text)
    }

    /// The answer pipeline.
    pub(super) fn pipeline(&self) -> &Pipeline {
        &self.pipeline
    }

    /// Interactions and copies.
    pub(super) fn store(&self) -> &dyn Store {
        self.store.as_ref()
    }

    /// A plain message of `text`, mentioning no one.
    pub(super) fn plain_of(&self, text: &str) -> Value {
        self.render.plain(text)
    }

    /// Whether `channel` is on `discord.chats`.
    pub(super) fn is_chat(&self, channel: &str) -> bool {
        self.settings.chats.iter().any(|c| c == channel)
    }

    /// Whether `user` is on `discord.approvers`.
    pub(super) fn is_approver(&self, user: &str) -> bool {
        self.settings.is_approver(user)
    }

    pub(super) fn count(&self, result: &str) {
        self.results
            .get_or_create(&ResultLabels {
                result: result.into(),
            })
            .inc();
    }

    /// The interaction response to `payload`, within Discord's window: the handler's own
    /// when it is done in [`RESPONSE_BUDGET`], else a bare acknowledgement (type 6) while it
    /// runs on (the message then shows the outcome through the outbox).
    pub async fn respond_in_time(self: &Arc<Self>, payload: Value) -> Value {
        let me = self.clone();
        let work = tokio::spawn(async move { me.handle(&payload).await });
        match tokio::time::timeout(RESPONSE_BUDGET, work).await {
            Ok(Ok(response)) => response,
            Ok(Err(e)) => {
                tracing::error!(error = %e, "discord: the interaction handler failed");
                self.render
                    .notice(&Feedback::StoreDown.text(self.render.locale()))
            }
            Err(_) => {
                self.count("slow");
                json!({"type": 6})
            }
        }
    }

    /// The interaction response to one interaction.
    pub async fn handle(&self, payload: &Value) -> Value {
        match payload["type"].as_u64() {
            Some(1) => json!({"type": 1}),
            Some(2) => self.command(payload).await,
            Some(3 | 5) => self.act(payload).await,
            other => {
                tracing::debug!(kind = ?other, "discord: an interaction imrelay did not ask for");
                self.count("ignored");
                self.render.notice(
                    "imrelay knows /whoami and /sessions; answer prompts with their buttons.",
                )
            }
        }
    }

    fn tell(&self, feedback: &Feedback) -> Value {
        self.render.notice(&feedback.text(self.render.locale()))
    }

    /// The interaction a verified `custom_id` is for: its own id, or the copy it was clicked
    /// on; a forged or damaged one is refused and recorded.
    async fn verify(
        &self,
        payload: &Value,
        person: &Person,
    ) -> Result<(Signed, InteractionId), Feedback> {
        let custom_id = payload["data"]["custom_id"].as_str().unwrap_or_default();
        let buttons = &self.render.buttons;
        let signed = buttons.read(custom_id);
        let id = match &signed {
            Some(Signed { id: Some(id), .. }) => Some(id.clone()),
            Some(_) => self.by_message(payload, person).await,
            None => None,
        };
        if let (Some(signed), Some(id)) = (signed, id)
            && buttons.verify(&signed, &id)
        {
            return Ok((signed, id));
        }
        let recorded = self
            .pipeline
            .registry()
            .refused(
                None,
                &person.actor(),
                self.pipeline.via(),
                &format!(
                    "component data failed its integrity check ({:?})",
                    crate::interaction::clip(custom_id, 100)
                ),
            )
            .await;
        Err(match recorded {
            Ok(()) => Feedback::BadButton,
            Err(_) => Feedback::StoreDown,
        })
    }

    /// The interaction whose copy is the message clicked on (in its channel, in the channel
    /// a thread is in, or in the clicker's direct messages).
    async fn by_message(&self, payload: &Value, person: &Person) -> Option<InteractionId> {
        let message = payload["message"]["id"].as_str()?;
        let channel = payload["channel_id"].as_str().unwrap_or_default();
        // A prompt in a session's thread is recorded under the channel the thread is in.
        let parent = payload["channel"]["parent_id"].as_str().unwrap_or_default();
        for address in [
            channel.to_string(),
            parent.to_string(),
            format!("@{}", person.id),
        ] {
            if let Ok(Some(m)) = self.store.message(super::CHANNEL, &address, message).await {
                return Some(m.interaction_id);
            }
        }
        None
    }

    async fn act(&self, payload: &Value) -> Value {
        let person = Person::of(payload);
        if let Some(value) = payload["data"]["custom_id"]
            .as_str()
            .and_then(|c| c.strip_prefix(super::digest::PREFIX))
        {
            return self.digest_click(payload, &person, value).await;
        }
        let (signed, id) = match self.verify(payload, &person).await {
            Ok(v) => v,
            Err(feedback) => {
                self.count("refused");
                return self.tell(&feedback);
            }
        };
        let actor = person.actor();
        let tap = Tap {
            id: &id,
            created: Some(signed.created),
            actor: &actor,
            identity: &person.id,
            approver: self.settings.is_approver(&person.id),
            audit: true,
        };
        let i = match self.pipeline.admit(&tap, |i| signed.action.fits(i)).await {
            Ok(i) => i,
            Err(stop) => {
                self.count(stop.refused.map_or(stop.feedback.result(), |_| "refused"));
                return self.tell(&stop.feedback);
            }
        };
        let submitted = payload["type"] == 5;
        if signed.action.opens_modal() && !submitted {
            return match self.render.modal(&i, signed.action) {
                Some(modal) => {
                    self.count("modal");
                    json!({"type": 9, "data": modal})
                }
                None => self.tell(&Feedback::BadButton),
            };
        }
        let answer = match self.answer(signed.action, &i, &payload["data"], submitted) {
            Ok(Some(a)) => a,
            Ok(None) => return self.allow_similar(&i, &person).await,
            Err(why) => {
                self.count("invalid");
                return self.tell(&Feedback::Invalid(why));
            }
        };
        let feedback = self.pipeline.respond(&id, answer, person.responder()).await;
        self.after(feedback)
    }

    /// Discord's answer once the pipeline gave `feedback`: the message updated in place
    /// when it changed, else a notice.
    fn after(&self, feedback: Feedback) -> Value {
        self.count(feedback.result());
        match &feedback {
            Feedback::Resolved(i) | Feedback::Voted(i) => {
                json!({"type": 7, "data": self.render.message(i)})
            }
            _ => self.tell(&feedback),
        }
    }

    /// Approves `i` and grants the rule imrelay proposes for its session ("Allow similar").
    async fn allow_similar(&self, i: &Interaction, person: &Person) -> Value {
        let Some(rule) = crate::present::render::similar_rule(i) else {
            return self.tell(&Feedback::BadButton);
        };
        let request = crate::interaction::GrantRequest {
            rule: Some(rule),
            scope: crate::interaction::policy::GrantScope::Session,
        };
        let feedback = self
            .pipeline
            .respond_granting(&i.id, Answer::allow(), person.responder(), &request)
            .await;
        self.after(feedback)
    }

    /// The answer `action` gives `i` (`Ok(None)`: "Allow similar", answered on its own),
    /// from a click's or a submitted modal's `data`.
    fn answer(
        &self,
        action: Action,
        i: &Interaction,
        data: &Value,
        submitted: bool,
    ) -> Result<Option<Answer>, String> {
        let inputs = modal_inputs(data);
        let text = |id: &str| {
            inputs
                .get(id)
                .map(|s| s.trim().to_string())
                .filter(|s| !s.is_empty())
        };
        Ok(Some(match (action, submitted) {
            (Action::Allow, false) => Answer::allow(),
            (Action::AllowSimilar, false) => return Ok(None),
            (Action::Deny, false) => Answer::deny(None),
            (Action::Pick, false) => picked(i, data)?,
            (Action::Reason, true) => Answer::deny(text(REASON_INPUT)),
            (Action::Edit, true) => {
                let command = text(COMMAND_INPUT).ok_or("type the command to run")?;
                let mut input = i.input.map();
                input.insert("command".into(), Value::String(command));
                Answer::Allow {
                    updated_input: Some(input),
                    always: false,
                }
            }
            (Action::Other | Action::Answer, true) => typed_answers(i, &inputs)?,
            (Action::Fill, true) => Answer::Accept(form_content(i, &inputs)?),
            _ => return Err("this does not answer the request".into()),
        }))
    }
}

/// The text inputs of a submitted modal, by `custom_id`.
fn modal_inputs(data: &Value) -> std::collections::HashMap<String, String> {
    data["components"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|row| row["components"].as_array().into_iter().flatten())
        .filter_map(|c| {
            Some((
                c["custom_id"].as_str()?.to_string(),
                c["value"].as_str()?.to_string(),
            ))
        })
        .collect()
}

/// The answer of a one-question prompt's select menu: the chosen options' labels.
fn picked(i: &Interaction, data: &Value) -> Result<Answer, String> {
    let q = parse_questions(&i.input.map())
        .map_err(|e| e.to_string())?
        .into_iter()
        .next()
        .ok_or("no question")?;
    let labels: Vec<Value> = data["values"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|v| v.as_str()?.parse::<usize>().ok())
        .filter_map(|n| q.options.get(n).map(|o| Value::String(o.label.clone())))
        .collect();
    let value = match (q.multi_select, labels.as_slice()) {
        (_, []) => return Err(format!("{}: choose an option", q.header)),
        (false, [one]) => one.clone(),
        (false, _) => return Err(format!("{}: choose one option", q.header)),
        (true, _) => Value::Array(labels),
    };
    let mut answers = Map::new();
    answers.insert("0".into(), value);
    Ok(Answer::Answers(answers))
}

/// Answers typed in the modal, one input per question: an option's number or label, or
/// text of one's own (several, comma-separated, for a multi-select question).
fn typed_answers(
    i: &Interaction,
    inputs: &std::collections::HashMap<String, String>,
) -> Result<Answer, String> {
    let questions = parse_questions(&i.input.map()).map_err(|e| e.to_string())?;
    let mut answers = Map::new();
    for (n, q) in questions.iter().enumerate() {
        let typed = inputs
            .get(&format!("{ANSWER_INPUT}{n}"))
            .map(|s| s.trim())
            .filter(|s| !s.is_empty())
            .ok_or_else(|| format!("{}: type an answer", q.header))?;
        let one = |t: &str| -> String {
            let t = t.trim();
            if let Ok(k) = t.parse::<usize>()
                && let Some(o) = k.checked_sub(1).and_then(|k| q.options.get(k))
            {
                return o.label.clone();
            }
            q.options
                .iter()
                .find(|o| o.label.eq_ignore_ascii_case(t))
                .map_or_else(|| t.to_string(), |o| o.label.clone())
        };
        let value = if q.multi_select {
            Value::Array(
                typed
                    .split(',')
                    .filter(|t| !t.trim().is_empty())
                    .map(|t| Value::String(one(t)))
                    .collect(),
            )
        } else {
            Value::String(one(typed))
        };
        answers.insert(n.to_string(), value);
    }
    Ok(Answer::Answers(answers))
}

/// A form's content from the modal, each field read as its type; empty inputs are left out
/// so they take their defaults; the form's own checks run here.
fn form_content(
    i: &Interaction,
    inputs: &std::collections::HashMap<String, String>,
) -> Result<Map<String, Value>, String> {
    let form = Form::from_input(&i.input.map()).map_err(|e| e.to_string())?;
    let mut content = Map::new();
    for (n, f) in form.fields.iter().enumerate() {
        let Some(text) = inputs
            .get(&format!("{FIELD_INPUT}{n}"))
            .map(|s| s.trim())
            .filter(|s| !s.is_empty())
        else {
            continue;
        };
        let bad = |e: String| format!("{}: {e}", f.label());
        let choose = |t: &str| -> Result<Value, String> {
            let t = t.trim();
            f.options()
                .iter()
                .find(|c| c.value.eq_ignore_ascii_case(t) || c.label.eq_ignore_ascii_case(t))
                .map(|c| Value::String(c.value.clone()))
                .ok_or_else(|| bad(format!("{t:?} is not one of the options")))
        };
        let value = match &f.ty {
            FieldType::Choice { .. } => choose(text)?,
            FieldType::Multi { .. } => Value::Array(
                text.split(',')
                    .filter(|t| !t.trim().is_empty())
                    .map(choose)
                    .collect::<Result<_, _>>()?,
            ),
            FieldType::Boolean => match text.to_ascii_lowercase().as_str() {
                "yes" | "y" | "true" | "1" => Value::Bool(true),
                "no" | "n" | "false" | "0" => Value::Bool(false),
                _ => return Err(bad("answer yes or no".into())),
            },
            FieldType::Text { .. } | FieldType::Number { .. } => f.parse_text(text).map_err(bad)?,
        };
        content.insert(f.name.clone(), value);
    }
    form.accept(&content).map_err(|e| e.message)?;
    Ok(content)
}
