//! Clicks and modal submissions: the one handler that turns Slack's interactivity payloads
//! (`block_actions`, `view_submission`) into answers, shared by Socket Mode and the HTTP
//! endpoint.
//!
//! A payload reaches it authenticated (a Socket Mode envelope came over the connection the
//! app token opened; an HTTP request carried a valid signature). The button value, or the
//! modal's `private_metadata`, is verified here: its MAC binds it to one interaction's id,
//! creation time and action. From there the shared answer pipeline checks the approver, the
//! incarnation, that it is still pending and that the action fits.
//!
//! What the person is told: a click that resolved the interaction shows on the message
//! itself (every copy is updated through the outbox); anything else — not an approver, already
//! answered, a bad button — comes back as an ephemeral message only they see. A modal's
//! answer that does not fit (a form field out of range, no option chosen) is shown in the
//! modal next to the field with `response_action: errors`.

use std::sync::Arc;

use serde_json::{Map, Value, json};

use super::api::WebApi;
use super::render::{
    self, ANSWER_BLOCK, Action, Blocks, CHECKS_ACTION, COMMAND_BLOCK, REASON_BLOCK, Signed,
};
use super::settings::SlackSettings;
use super::socket::{Envelope, EnvelopeHandler};
use crate::channels::pipeline::{Decision, Feedback, Pipeline, ResultLabels, Tap};
use crate::interaction::form::{FieldType, Format};
use crate::interaction::{Answer, Form, Interaction, Responder, parse_questions};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;

/// Who acted, as the payload names them.
struct Person {
    id: String,
    name: String,
}

impl Person {
    fn of(payload: &Value) -> Self {
        let user = &payload["user"];
        let id = user["id"].as_str().unwrap_or_default().to_string();
        let name = ["name", "username"]
            .iter()
            .filter_map(|k| user[*k].as_str())
            .map(str::trim)
            .find(|n| !n.is_empty())
            .map(|n| crate::interaction::clip(n, 100))
            .unwrap_or_else(|| format!("user {id}"));
        Person { id, name }
    }

    fn responder(&self) -> Responder {
        Responder::new(
            self.name.clone(),
            crate::interaction::Via::new(super::CHANNEL),
        )
        .with_actor_id(format!("slack:{}", self.id))
        .with_identity(super::CHANNEL, self.id.clone())
    }

    fn actor(&self) -> String {
        self.responder().audit_actor().unwrap_or_default()
    }
}

/// Handles interactivity payloads. Cheap to share.
pub struct Interactions {
    pipeline: Pipeline,
    store: Arc<dyn crate::store::Store>,
    api: Arc<WebApi>,
    settings: Arc<SlackSettings>,
    blocks: Blocks,
    digests: Option<DigestClicks>,
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

impl Interactions {
    /// A handler answering through `pipeline`, talking back through `api`.
    pub(crate) fn new(
        pipeline: Pipeline,
        store: Arc<dyn crate::store::Store>,
        api: Arc<WebApi>,
        settings: Arc<SlackSettings>,
        blocks: Blocks,
    ) -> Self {
        Self {
            pipeline,
            store,
            api,
            settings,
            blocks,
            digests: None,
        }
    }

    /// Answers clicks on digests too.
    pub(crate) fn with_digests(mut self, digests: DigestClicks) -> Self {
        self.digests = Some(digests);
        self
    }

    /// A click on a digest button: answered through the kit, the digest redrawn in place.
    async fn digest_click(&self, payload: &Value, person: &Person, value: &str) {
        let Some(d) = &self.digests else {
            return;
        };
        let conversation = payload["container"]["channel_id"]
            .as_str()
            .or_else(|| payload["channel"]["id"].as_str())
            .unwrap_or_default();
        let ts = payload["container"]["message_ts"]
            .as_str()
            .unwrap_or_default();
        let message = format!("{conversation}:{ts}");
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
            &message,
            &who,
        )
        .await;
        match clicked {
            Ok(t) => {
                self.count("digest");
                if let Some(sheet) = &t.redraw {
                    let (text, blocks) = super::digest::message(&d.buttons, sheet);
                    if let Err(e) = self.api.update(conversation, ts, &text, &blocks).await {
                        tracing::warn!(error = %e, "slack: could not update a digest");
                    }
                }
                self.tell(payload, person, t.toast);
            }
            Err(f) => {
                self.count(f.result());
                self.tell(payload, person, f.text(d.texts.0));
            }
        }
    }

    /// The per-result counter, for registration with the server's metrics.
    pub fn results_metric(&self) -> Family<ResultLabels, Counter> {
        self.pipeline.results_metric()
    }

    fn count(&self, result: &str) {
        self.pipeline.count(result);
    }

    /// Handles one interactivity payload; returns the response payload (a view submission's
    /// `response_action`), if any.
    pub async fn payload(&self, payload: &Value) -> Option<Value> {
        match payload["type"].as_str() {
            Some("block_actions") => {
                self.block_actions(payload).await;
                None
            }
            Some("view_submission") if payload["view"]["callback_id"] == render::CALLBACK_ID => {
                self.view_submission(payload).await
            }
            other => {
                tracing::debug!(kind = ?other, "slack: ignoring an interaction imrelay did not ask for");
                self.count("ignored");
                None
            }
        }
    }

    /// An Events API callback (`event_callback`): a reply in the thread of one of an agent
    /// session's messages (`message` with a `thread_ts`) is said to the session
    /// (`channels::steer`); `whoami` in a message that mentions the
    /// bot (`app_mention`) or in its direct messages (`message`, channel type `im`) is
    /// answered, to the sender alone, with the conversation's and the sender's ids: what
    /// `slack.chats` and `slack.approvers` need. Anything else is ignored.
    pub async fn event(&self, callback: &Value) {
        let event = &callback["event"];
        let kind = event["type"].as_str().unwrap_or_default();
        if kind == "message" && self.thread_reply(event).await {
            return;
        }
        let asked = match kind {
            "app_mention" => true,
            "message" => event["channel_type"] == "im",
            _ => false,
        };
        let from_bot = event.get("bot_id").is_some() || event.get("subtype").is_some();
        let text = event["text"].as_str().unwrap_or_default();
        let words: Vec<&str> = text
            .split_whitespace()
            .filter(|w| !(w.starts_with("<@") && w.ends_with('>')))
            .collect();
        let whoami = matches!(words.as_slice(), [w] if w.trim_start_matches('/').eq_ignore_ascii_case("whoami"));
        let (channel, user) = (
            event["channel"].as_str().unwrap_or_default(),
            event["user"].as_str().unwrap_or_default(),
        );
        if !asked || from_bot || !whoami || channel.is_empty() || user.is_empty() {
            self.count("ignored");
            return;
        }
        self.count("whoami");
        let text = format!(
            "This conversation's id (for slack.chats): {channel}; your user id (for slack.approvers): {user}"
        );
        let person = Person {
            id: user.to_string(),
            name: user.to_string(),
        };
        let payload = json!({"channel": {"id": channel}});
        self.tell(&payload, &person, text);
    }

    /// A person's message in a thread (`thread_ts`, not the thread's first message): said to
    /// the session whose message the thread hangs from; `false` when it is no session's.
    async fn thread_reply(&self, event: &Value) -> bool {
        let s = |k: &str| event[k].as_str().unwrap_or_default();
        let (channel, user, ts, thread) = (s("channel"), s("user"), s("ts"), s("thread_ts"));
        // A reply also sent to the channel (`thread_broadcast`) is a reply; an edit, a
        // deletion or a bot's message is not.
        let from_bot = event.get("bot_id").is_some()
            || event
                .get("subtype")
                .is_some_and(|s| s != "thread_broadcast");
        if from_bot || channel.is_empty() || user.is_empty() || thread.is_empty() || thread == ts {
            return false;
        }
        // Mentions of the bot (`<@U…>`) are how a person gets its attention, not the message.
        let text: Vec<&str> = s("text")
            .split(' ')
            .filter(|w| !(w.starts_with("<@") && w.ends_with('>')))
            .collect();
        let text = text.join(" ");
        let person = Person {
            id: user.to_string(),
            name: self
                .pipeline
                .registry()
                .teams()
                .people
                .name_of(super::CHANNEL, user)
                .map_or_else(|| user.to_string(), str::to_string),
        };
        let id = format!("{channel}:{ts}");
        let reply = crate::channels::steer::Reply {
            id: &id,
            chat: Some(channel),
            to: &[thread],
            text: &text,
            responder: person.responder(),
            identity: user,
            approver: self.settings.is_approver(user),
        };
        let heard = crate::channels::steer::reply(
            &self.pipeline,
            self.store.as_ref(),
            reply,
            self.blocks.locale(),
            false,
        )
        .await;
        match heard {
            crate::channels::steer::Heard::Told(Some(text)) => {
                self.tell(&json!({"channel": {"id": channel}}), &person, text);
                true
            }
            crate::channels::steer::Heard::NotASession => false,
            _ => true,
        }
    }

    /// Tells `person` alone, in the channel of the click, what became of it.
    fn tell(&self, payload: &Value, person: &Person, text: String) {
        let channel = payload["channel"]["id"]
            .as_str()
            .or_else(|| payload["container"]["channel_id"].as_str())
            .unwrap_or_default()
            .to_string();
        if channel.is_empty() || person.id.is_empty() {
            return;
        }
        let api = self.api.clone();
        let user = person.id.clone();
        // Names in the text are other people's: shown, never read as mentions.
        let text = render::escape(&text);
        // Off the acknowledgement's path: a slow Slack never delays it.
        tokio::spawn(async move {
            if let Err(e) = api.post_ephemeral(&channel, &user, &text).await {
                tracing::warn!(error = %e, "slack: cannot show an ephemeral notice");
            }
        });
    }

    /// Verifies `value`; a forged or damaged one is refused and recorded (the feedback is
    /// then a bad button, or a store failure when the refusal could not be recorded).
    async fn verify(&self, value: &str, person: &Person) -> Result<Signed, Feedback> {
        let claimed = value.split(' ').nth(1).unwrap_or("");
        self.pipeline
            .verified(
                self.blocks.buttons.verify(value),
                &person.actor(),
                "button data",
                claimed,
                true,
            )
            .await
    }

    /// The interaction `signed` is for, when `person` may act on it now.
    async fn admit(
        &self,
        signed: &Signed,
        person: &Person,
    ) -> Result<Arc<Interaction>, (Feedback, Option<&'static str>)> {
        let actor = person.actor();
        let tap = Tap {
            id: &signed.id,
            created: Some(signed.created),
            actor: &actor,
            identity: &person.id,
            approver: self.settings.is_approver(&person.id),
            audit: true,
        };
        self.pipeline
            .admit(&tap, |i| signed.action.fits(i))
            .await
            .map_err(|stop| (stop.feedback, stop.refused))
    }

    /// What a person is told, in the channel's language.
    fn say(&self, feedback: Feedback) -> String {
        feedback.text(self.blocks.locale())
    }

    async fn block_actions(&self, payload: &Value) {
        let person = Person::of(payload);
        let Some(action) = payload["actions"].as_array().and_then(|a| a.first()) else {
            return;
        };
        let action_id = action["action_id"].as_str().unwrap_or_default();
        if action_id.starts_with(super::digest::ACTION_PREFIX) {
            let value = action["value"].as_str().unwrap_or_default();
            return self.digest_click(payload, &person, value).await;
        }
        if action_id == CHECKS_ACTION || !action_id.starts_with(render::ACTION_PREFIX) {
            // Ticking a box changes nothing until Submit; the inbox link of an approval
            // that needs a passkey only opens the inbox.
            self.count("ignored");
            return;
        }
        let value = action["value"].as_str().unwrap_or_default();
        let signed = match self.verify(value, &person).await {
            Ok(signed) => signed,
            Err(feedback) => {
                self.count("refused");
                self.tell(payload, &person, self.say(feedback));
                return;
            }
        };
        let i = match self.admit(&signed, &person).await {
            Ok(i) => i,
            Err((feedback, refused)) => {
                self.count(refused.map_or(feedback.result(), |_| "refused"));
                self.tell(payload, &person, self.say(feedback));
                return;
            }
        };
        if signed.action.opens_modal() {
            let trigger = payload["trigger_id"].as_str().unwrap_or_default();
            let Some(view) = self.blocks.modal(&i, signed.action) else {
                self.tell(payload, &person, self.say(Feedback::BadButton));
                return;
            };
            match self.api.views_open(trigger, &view).await {
                Ok(_) => self.count("modal"),
                Err(e) => {
                    tracing::warn!(id = %i.id, error = %e, "slack: cannot open a modal");
                    self.count("error");
                    self.tell(
                        payload,
                        &person,
                        "Slack could not open the form in time; try the button again.".into(),
                    );
                }
            }
            return;
        }
        let decision = match signed.action {
            Action::Allow => Decision::Answer(Answer::allow()),
            Action::AllowSimilar => Decision::AllowSimilar,
            Action::Deny => Decision::Answer(Answer::deny(None)),
            Action::Pick(n) => match pick(&i, n) {
                Some(a) => Decision::Answer(a),
                None => {
                    return self.tell(payload, &person, self.say(Feedback::BadButton));
                }
            },
            Action::Submit => match ticked(&i, &payload["state"]["values"]) {
                Ok(a) => Decision::Answer(a),
                Err(why) => {
                    self.count("invalid");
                    return self.tell(payload, &person, self.say(Feedback::Invalid(why)));
                }
            },
            _ => return,
        };
        let feedback = self.pipeline.decide(&i, decision, person.responder()).await;
        self.count(feedback.result());
        if !matches!(feedback, Feedback::Resolved(_)) {
            self.tell(payload, &person, self.say(feedback));
        }
    }

    async fn view_submission(&self, payload: &Value) -> Option<Value> {
        let person = Person::of(payload);
        let view = &payload["view"];
        let first = first_input(view);
        let errors = |block: &str, text: String| {
            Some(json!({"response_action": "errors", "errors": {block: text}}))
        };
        let metadata = view["private_metadata"].as_str().unwrap_or_default();
        let signed = match self.verify(metadata, &person).await {
            Ok(signed) => signed,
            Err(feedback) => {
                self.count("refused");
                return errors(&first, self.say(feedback));
            }
        };
        let i = match self.admit(&signed, &person).await {
            Ok(i) => i,
            Err((feedback, refused)) => {
                self.count(refused.map_or(feedback.result(), |_| "refused"));
                return errors(&first, self.say(feedback));
            }
        };
        let decision = match self.modal_answer(signed.action, &i, view, &first) {
            Ok(a) => a,
            Err((block, why)) => return errors(&block, why),
        };
        let feedback = self.pipeline.decide(&i, decision, person.responder()).await;
        self.count(feedback.result());
        match feedback {
            // An empty acknowledgement closes the modal; the message shows the outcome.
            Feedback::Resolved(_) => None,
            other => errors(&first, self.say(other)),
        }
    }

    /// The answer a submitted modal gives `i`, or the block to flag and why (`first`, the
    /// modal's first input, for a modal no answer comes from).
    fn modal_answer(
        &self,
        action: Action,
        i: &Interaction,
        view: &Value,
        first: &str,
    ) -> Result<Decision, (String, String)> {
        let values = render::state_values(view);
        let text = |block: &str| {
            values
                .get(block)
                .and_then(|v| v["value"].as_str())
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(str::to_string)
        };
        let invalid = |e: (String, String)| {
            self.count("invalid");
            e
        };
        Ok(Decision::Answer(match action {
            Action::Reason => Answer::deny(text(REASON_BLOCK)),
            Action::Edit => {
                let Some(command) = text(COMMAND_BLOCK) else {
                    return Err((COMMAND_BLOCK.into(), "Type the command to run.".into()));
                };
                return Ok(Decision::Edit(command));
            }
            Action::Other => {
                let Some(typed) = text(ANSWER_BLOCK) else {
                    return Err((ANSWER_BLOCK.into(), "Type an answer.".into()));
                };
                let multi = parse_questions(&i.input.map())
                    .ok()
                    .and_then(|q| q.first().map(|q| q.multi_select))
                    .unwrap_or(false);
                let mut answers = Map::new();
                answers.insert(
                    "0".into(),
                    if multi { json!([typed]) } else { json!(typed) },
                );
                Answer::Answers(answers)
            }
            Action::Answer => Answer::Answers(answers_from_modal(i, &values).map_err(invalid)?),
            Action::Fill => Answer::Accept(content_from_modal(i, &values).map_err(invalid)?),
            _ => {
                let why = self.say(Feedback::BadButton);
                return Err((first.to_string(), why));
            }
        }))
    }
}

#[async_trait::async_trait]
impl EnvelopeHandler for Interactions {
    async fn handle(&self, envelope: Envelope) -> Option<Value> {
        match envelope.kind.as_str() {
            "interactive" => self.payload(&envelope.payload).await,
            "slash_commands" => Some(self.slash(&envelope.payload).await),
            "events_api" => {
                self.event(&envelope.payload).await;
                None
            }
            other => {
                tracing::debug!(
                    kind = other,
                    "slack: ignoring an envelope imrelay did not ask for"
                );
                None
            }
        }
    }
}

impl Interactions {
    /// A slash command (`/sessions`, or any command of the app given `sessions` as its
    /// text): the shared listing of the channel's sessions, shown to the person who typed
    /// it only (an ephemeral response).
    pub(crate) async fn slash(&self, payload: &Value) -> Value {
        let command = payload["command"].as_str().unwrap_or_default();
        let text = payload["text"].as_str().unwrap_or_default();
        let said = if crate::channels::sessions::is_command(command)
            || crate::channels::sessions::is_command(text)
        {
            self.count("sessions");
            let user = payload["user_id"].as_str().unwrap_or_default();
            let channel = payload["channel_id"].as_str().unwrap_or_default();
            crate::channels::sessions::answer(
                self.pipeline.registry(),
                super::CHANNEL,
                channel,
                self.settings.channels.iter().any(|c| c == channel),
                (user, self.settings.is_approver(user)),
                self.blocks.locale(),
            )
            .await
        } else {
            self.count("ignored");
            "imrelay knows one command here: sessions (the agent sessions of this channel's routes).".into()
        };
        json!({"response_type": "ephemeral", "text": super::render::escape(&said)})
    }
}

/// The block id of a view's first input (where errors that belong to no field are shown).
fn first_input(view: &Value) -> String {
    view["blocks"]
        .as_array()
        .and_then(|b| b.iter().find(|b| b["type"] == "input"))
        .and_then(|b| b["block_id"].as_str())
        .unwrap_or(REASON_BLOCK)
        .to_string()
}

/// The answer of option `n` of a one-question prompt.
fn pick(i: &Interaction, n: usize) -> Option<Answer> {
    let q = parse_questions(&i.input.map()).ok()?.into_iter().next()?;
    let label = q.options.get(n)?.label.clone();
    let mut answers = Map::new();
    answers.insert("0".into(), Value::String(label));
    Some(Answer::Answers(answers))
}

/// Option indexes chosen in a select, radio buttons or checkboxes element.
fn chosen(element: Option<&Value>) -> Vec<usize> {
    let Some(e) = element else { return Vec::new() };
    let one = e["selected_option"]["value"].as_str().into_iter();
    let many = e["selected_options"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|o| o["value"].as_str());
    one.chain(many).filter_map(|v| v.parse().ok()).collect()
}

/// The options ticked on a multi-select question's message, as its answer.
fn ticked(i: &Interaction, state: &Value) -> Result<Answer, String> {
    let q = parse_questions(&i.input.map())
        .map_err(|e| e.to_string())?
        .into_iter()
        .next()
        .ok_or("no question")?;
    let picked = state
        .as_object()
        .into_iter()
        .flat_map(|blocks| blocks.values())
        .find_map(|actions| actions.get(CHECKS_ACTION));
    let labels: Vec<Value> = chosen(picked)
        .into_iter()
        .filter_map(|j| q.options.get(j).map(|o| Value::String(o.label.clone())))
        .collect();
    if labels.is_empty() {
        return Err(format!(
            "{}: tick at least one option, or use Other…",
            q.header
        ));
    }
    let mut answers = Map::new();
    answers.insert("0".into(), Value::Array(labels));
    Ok(Answer::Answers(answers))
}

/// Answers to every question from the modal; an error names the block it belongs to.
fn answers_from_modal(
    i: &Interaction,
    values: &Map<String, Value>,
) -> Result<Map<String, Value>, (String, String)> {
    let questions =
        parse_questions(&i.input.map()).map_err(|e| (render::question_block(0), e.to_string()))?;
    let mut out = Map::new();
    for (n, q) in questions.iter().enumerate() {
        let block = render::question_block(n);
        let labels: Vec<String> = chosen(values.get(&block))
            .into_iter()
            .filter_map(|j| q.options.get(j).map(|o| o.label.clone()))
            .collect();
        let other = values
            .get(&render::other_block(n))
            .and_then(|v| v["value"].as_str())
            .map(str::trim)
            .filter(|o| !o.is_empty())
            .map(str::to_string);
        let value = if q.multi_select {
            let mut all: Vec<Value> = labels.into_iter().map(Value::String).collect();
            all.extend(other.map(Value::String));
            if all.is_empty() {
                return Err((
                    block,
                    "Choose at least one option or type an answer.".into(),
                ));
            }
            Value::Array(all)
        } else {
            match (labels.into_iter().next(), other) {
                (Some(l), None) => Value::String(l),
                (None, Some(t)) => Value::String(t),
                (Some(_), Some(_)) => {
                    return Err((
                        render::other_block(n),
                        "Choose an option or type an answer, not both.".into(),
                    ));
                }
                (None, None) => {
                    return Err((block, "Choose an option or type an answer.".into()));
                }
            }
        };
        out.insert(n.to_string(), value);
    }
    Ok(out)
}

/// A form's content from the modal, each field read as its type; empty inputs are left out
/// so they take their defaults. The form's own checks run here, so an error is shown next to
/// its field.
fn content_from_modal(
    i: &Interaction,
    values: &Map<String, Value>,
) -> Result<Map<String, Value>, (String, String)> {
    let form =
        Form::from_input(&i.input.map()).map_err(|e| (render::field_block(0), e.to_string()))?;
    let mut content = Map::new();
    for (n, f) in form.fields.iter().enumerate() {
        let block = render::field_block(n);
        let Some(raw) = values.get(&block) else {
            continue;
        };
        let bad = |e: String| (block.clone(), e);
        let pick = |j: usize| {
            f.options()
                .get(j)
                .map(|c| Value::String(c.value.clone()))
                .ok_or_else(|| bad(format!("there is no option {j}")))
        };
        let text = raw["value"].as_str().map(str::trim).unwrap_or_default();
        let value = match &f.ty {
            FieldType::Choice { .. } => match chosen(Some(raw)).first() {
                Some(j) => pick(*j)?,
                None => continue,
            },
            FieldType::Multi { .. } => {
                let picked: Vec<usize> = chosen(Some(raw));
                Value::Array(picked.into_iter().map(pick).collect::<Result<_, _>>()?)
            }
            FieldType::Boolean => Value::Bool(!chosen(Some(raw)).is_empty()),
            FieldType::Text {
                format: Some(Format::Date),
                ..
            } => match raw["selected_date"].as_str() {
                Some(d) if !d.is_empty() => Value::String(d.to_string()),
                _ => continue,
            },
            FieldType::Text { .. } | FieldType::Number { .. } => {
                if text.is_empty() {
                    continue;
                }
                f.parse_text(text).map_err(bad)?
            }
        };
        content.insert(f.name.clone(), value);
    }
    form.accept(&content).map_err(|e| {
        let name = e.field.trim_start_matches("content.");
        let block = form
            .fields
            .iter()
            .position(|f| f.name == name)
            .map_or_else(|| render::field_block(0), render::field_block);
        (block, e.message)
    })?;
    Ok(content)
}
