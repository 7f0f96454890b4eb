//! What people send back: card clicks (`template_card_event`) and typed answers (`deny
//! <handle> <reason>`, `answer <handle> <text>` in a message to the bot), from either
//! transport, through the answer pipeline.
//!
//! A click is answered with the card it came from, updated (WeCom accepts an update only on
//! the click's own `req_id`, within about five seconds): for everyone once the interaction
//! is resolved, for the clicker alone with what became of the click when nothing changed.
//! Every callback that names a chat imrelay sends to (a configured chat, or a configured
//! person's one-to-one chat) is remembered in the store: WeCom delivers a bot's messages
//! only to chats where someone has messaged it, and `imrelay doctor` says which were seen.

use std::sync::Arc;

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use serde_json::{Map, Value, json};

use super::CHANNEL;
use super::bot::{BotHandler, CardClick, Frame, Replies};
use super::button::{Action, Pressed};
use super::render::Cards;
use super::settings::WeComSettings;
use crate::channels::pipeline::{Decision, Feedback, Pipeline, ResultLabels, Tap, replayed};
use crate::interaction::form::FieldType;
use crate::interaction::{
    Answer, Form, Interaction, InteractionId, Kind, Responder, parse_questions,
};
use crate::store::Store;

/// The store key prefix under which chats seen messaging the bot are kept.
pub const SEEN_PREFIX: &str = "wecom:seen:";
/// The deduplication scope of callbacks in the store.
const DEDUPE_SCOPE: &str = "wecom-callback";
/// How long callback ids are remembered, hours.
const DEDUPE_HOURS: i64 = 24;

/// What a callback asks imrelay to send back.
#[derive(Debug, PartialEq)]
pub(crate) enum Reply {
    /// Nothing.
    None,
    /// Update the clicked card (`template_card`), for `userids` (empty: everyone).
    Update {
        /// The card.
        card: Value,
        /// Who sees it.
        userids: Vec<String>,
    },
    /// Answer a message (`aibot_respond_msg`'s body).
    Respond(Value),
}

/// Handles callbacks. Cheap to share.
pub struct Inbound {
    pipeline: Pipeline,
    store: Arc<dyn Store>,
    settings: Arc<WeComSettings>,
    cards: Cards,
    digests: Option<(crate::channels::digest::Digests, super::digest::DigestKeys)>,
}

impl Inbound {
    /// A handler answering through `pipeline`.
    pub(crate) fn new(
        pipeline: Pipeline,
        store: Arc<dyn Store>,
        settings: Arc<WeComSettings>,
        cards: Cards,
    ) -> Self {
        Self {
            pipeline,
            store,
            settings,
            cards,
            digests: None,
        }
    }

    /// Answers clicks on digest cards too.
    pub(crate) fn with_digests(
        mut self,
        digests: crate::channels::digest::Digests,
        keys: super::digest::DigestKeys,
    ) -> Self {
        self.digests = Some((digests, keys));
        self
    }

    /// A click on a digest card, answered through the kit with the digest as it now is (for
    /// everyone) and what became of the click quoted under it. `None`: not a digest's.
    async fn digest_click(&self, click: &CardClick, again: bool) -> Option<Reply> {
        let (digests, keys) = self.digests.as_ref()?;
        if !super::digest::is_digest_key(&click.event_key) {
            return None;
        }
        let userid = click.userid.as_str();
        let actor = if userid.is_empty() { "unknown" } else { userid };
        let locale = self.cards.locale();
        let Some((action, place, session, set)) = keys.read(&click.event_key, &click.task_id)
        else {
            let recorded = if again {
                Ok(())
            } else {
                self.pipeline
                    .registry()
                    .refused(
                        None,
                        actor,
                        self.pipeline.via(),
                        "digest card button failed its integrity check",
                    )
                    .await
            };
            self.count("invalid");
            let f = match recorded {
                Ok(()) => Feedback::BadButton,
                Err(_) => Feedback::StoreDown,
            };
            return Some(self.only_for(userid, self.cards.notice(&click.task_id, &f.text(locale))));
        };
        let (listed, _) = self.who(userid);
        let who = crate::channels::digest::Tapper {
            actor,
            identity: actor,
            approver: listed,
            responder: Responder::new(actor, self.pipeline.via().clone())
                .with_identity(CHANNEL, actor),
        };
        let press = crate::channels::digest_flow::Press {
            address: &place,
            session: &session,
            action,
            set: &set,
            message: &click.task_id,
        };
        let texts = crate::channels::digest_texts::Texts(locale);
        let tapped = digests
            .tap::<super::Job>(&self.pipeline, texts, &press, &who)
            .await;
        Some(match tapped {
            Ok(t) => {
                self.count("digest");
                match &t.redraw {
                    Some(sheet) => Reply::Update {
                        card: keys.card(sheet, &click.task_id, Some(&t.toast)),
                        userids: Vec::new(),
                    },
                    None => Reply::None,
                }
            }
            Err(f) => {
                self.count(f.result());
                self.only_for(userid, self.cards.notice(&click.task_id, &f.text(locale)))
            }
        })
    }

    /// The per-result counter, for registration with the server's metrics.
    pub fn results_metric(&self) -> Family<ResultLabels, Counter> {
        self.pipeline.results_metric()
    }

    fn count(&self, result: &str) {
        self.pipeline.count(result);
    }

    /// Handles one callback body (`aibot_msg_callback` or `aibot_event_callback`) whose
    /// request id is `req_id`; says what to send back.
    pub(crate) async fn handle(&self, req_id: &str, body: &Value) -> Reply {
        self.remember_chat(body).await;
        let again = self.seen_before(body).await;
        let frame = Frame {
            headers: super::bot::Headers {
                req_id: req_id.to_string(),
            },
            body: Some(body.clone()),
            ..Frame::default()
        };
        if let Some(click) = CardClick::from_frame(&frame) {
            return self.click(&click, body, again).await;
        }
        if body["msgtype"] == "text" && !again {
            let text = body["text"]["content"].as_str().unwrap_or_default();
            let userid = body["from"]["userid"].as_str().unwrap_or_default();
            if strip_mentions(text).trim().eq_ignore_ascii_case("whoami") {
                self.count("whoami");
                let chat = body["chatid"].as_str().unwrap_or(userid);
                return Reply::Respond(self.cards.reply_text(&self.whoami(chat, userid)));
            }
            if crate::channels::sessions::is_command(&strip_mentions(text)) {
                self.count("sessions");
                let chat = body["chatid"].as_str().unwrap_or(userid);
                let configured = self.settings.chats.iter().any(|c| c == chat);
                let listing = crate::channels::sessions::answer(
                    self.pipeline.registry(),
                    CHANNEL,
                    chat,
                    configured,
                    (userid, self.settings.is_approver(userid)),
                    self.cards.locale(),
                )
                .await;
                return Reply::Respond(self.cards.reply_lines(&listing));
            }
            return self.typed(userid, text).await;
        }
        self.count(if again { "duplicate" } else { "ignored" });
        Reply::None
    }

    /// Whether this callback (by `msgid`) was handled before, here or by another replica.
    async fn seen_before(&self, body: &Value) -> bool {
        let msgid = body["msgid"].as_str().unwrap_or_default();
        replayed(&*self.store, DEDUPE_SCOPE, msgid, DEDUPE_HOURS).await
    }

    /// Records that the chat of a message callback has messaged the bot, when it is a chat
    /// imrelay sends to.
    async fn remember_chat(&self, body: &Value) {
        if body["msgtype"] == "event" {
            return;
        }
        let chat = body["chatid"]
            .as_str()
            .or_else(|| body["from"]["userid"].as_str())
            .unwrap_or_default();
        let ours = self.settings.chats.iter().any(|c| c == chat)
            || self
                .pipeline
                .registry()
                .teams()
                .people
                .identify(CHANNEL, chat)
                .is_some();
        if chat.is_empty() || !ours {
            // How a person setting the channel up learns a group's chatid.
            tracing::info!(chat = %chat.escape_debug(), "wecom: a message from a chat not in wecom.chats");
            return;
        }
        let at = jiff::Timestamp::now().to_string();
        if let Err(e) = self
            .store
            .set_value(&format!("{SEEN_PREFIX}{chat}"), Some(at))
            .await
        {
            tracing::warn!(error = %e, "wecom: cannot record a chat as seen");
        }
    }

    /// Who `userid` answers as: whether they are on the approver list, and whether they
    /// may answer at all (listed, or a configured person a route may name).
    fn who(&self, userid: &str) -> (bool, bool) {
        let listed = self.settings.is_approver(userid);
        let person = !userid.is_empty()
            && self
                .pipeline
                .registry()
                .teams()
                .people
                .identify(CHANNEL, userid)
                .is_some();
        (listed, listed || person)
    }

    async fn click(&self, click: &CardClick, body: &Value, again: bool) -> Reply {
        if let Some(reply) = self.digest_click(click, again).await {
            return reply;
        }
        let userid = click.userid.as_str();
        let actor = if userid.is_empty() { "unknown" } else { userid };
        let verified = self.cards.keys().verify(&click.event_key, &click.task_id);
        if verified.is_none() && matches!(click.event_key.as_str(), "done" | "noop") {
            self.count("ignored");
            return Reply::None;
        }
        let pressed = match self
            .pipeline
            .verified(verified, actor, "card button", "", !again)
            .await
        {
            Ok(p) => p,
            Err(feedback) => {
                self.count(feedback.result());
                let text = feedback.text(self.cards.locale());
                return self.only_for(userid, self.cards.notice(&click.task_id, &text));
            }
        };
        let Ok(id) = InteractionId::parse(&pressed.id) else {
            self.count("refused");
            return Reply::None;
        };
        let (listed, _) = self.who(userid);
        let tap = Tap {
            id: &id,
            created: Some(pressed.created_ms),
            actor,
            identity: actor,
            approver: listed,
            audit: !again,
        };
        let current = match self.pipeline.admit(&tap, |i| fits(pressed.action, i)).await {
            Ok(i) => i,
            Err(stop) => {
                self.count(stop.result());
                return self.after_click(click, &pressed, stop.feedback).await;
            }
        };
        let decision = match decision_of(&pressed, &current, body) {
            Ok(d) => d,
            Err(why) => {
                self.count("invalid");
                return self
                    .after_click(click, &pressed, Feedback::Invalid(why))
                    .await;
            }
        };
        // The copy clicked shows the outcome itself: the resolution's job leaves it alone,
        // unless the answer does not land.
        let chat = click.chatid.as_deref().unwrap_or(userid);
        self.mark_final(chat, &click.task_id, true).await;
        let by = Responder::new(actor, self.pipeline.via().clone()).with_identity(CHANNEL, actor);
        let feedback = self.pipeline.decide(&current, decision, by).await;
        self.count(feedback.result());
        if !matches!(feedback, Feedback::Resolved(_) | Feedback::Already(_)) {
            self.mark_final(chat, &click.task_id, false).await;
        }
        self.after_click(click, &pressed, feedback).await
    }

    /// The card update that answers a click with `feedback`.
    async fn after_click(&self, click: &CardClick, pressed: &Pressed, feedback: Feedback) -> Reply {
        let text = feedback.text(self.cards.locale());
        if let Some(i) = feedback.interaction().filter(|i| !i.is_pending()) {
            return Reply::Update {
                card: self.cards.with_feedback(i, &click.task_id, &text),
                userids: Vec::new(),
            };
        }
        // The interaction the card was made for, not a later one that took its id.
        let current = match InteractionId::parse(&pressed.id) {
            Ok(id) => self.pipeline.registry().get(&id).await.ok().flatten(),
            Err(_) => None,
        }
        .filter(|i| i.created_at.as_millisecond() == pressed.created_ms);
        let card = match current {
            Some(i) if !i.is_pending() => {
                return Reply::Update {
                    card: self.cards.with_feedback(&i, &click.task_id, &text),
                    userids: Vec::new(),
                };
            }
            Some(i) => self.cards.with_feedback(&i, &click.task_id, &text),
            None => self.cards.notice(&click.task_id, &text),
        };
        self.only_for(&click.userid, card)
    }

    fn only_for(&self, userid: &str, card: Value) -> Reply {
        if userid.is_empty() {
            return Reply::None;
        }
        Reply::Update {
            card,
            userids: vec![userid.to_string()],
        }
    }

    /// Marks the copy `task_id` in `chat` final (its card now shows the outcome, so the
    /// resolution's job leaves it alone), or not final again when the answer did not land.
    async fn mark_final(&self, chat: &str, task_id: &str, done: bool) {
        let state = done.then(|| json!({"final": true}));
        if let Err(e) = self
            .store
            .set_message_state(CHANNEL, chat, task_id, state)
            .await
        {
            tracing::warn!(error = %e, "wecom: cannot record a clicked card as final");
        }
    }

    /// A typed answer: `deny <handle> <reason>` / `拒绝 <handle> <理由>`, `answer <handle>
    /// <text>` / `回答 <handle> <内容>`; anything else is told how.
    /// `whoami`'s answer: the chat's id and the sender's userid, and where each goes. Sent
    /// from a chat not yet configured too: it is how a group's chatid is learnt.
    fn whoami(&self, chat: &str, userid: &str) -> String {
        if self.cards.locale() == crate::present::render::Locale::ZhCn {
            format!(
                "本会话 chatid（填入 wecom.chats）：{chat}；你的 userid（填入 wecom.approvers）：{userid}"
            )
        } else {
            format!(
                "This chat's id (for wecom.chats): {chat}; your userid (for wecom.approvers): {userid}"
            )
        }
    }

    async fn typed(&self, userid: &str, text: &str) -> Reply {
        let words = strip_mentions(text);
        let mut parts = words.splitn(3, char::is_whitespace);
        let verb = parts.next().unwrap_or_default();
        let handle = parts.next().unwrap_or_default().trim();
        let rest = parts.next().unwrap_or_default().trim().to_string();
        let Some(verb) = Typed::parse(verb).filter(|_| !handle.is_empty()) else {
            self.count("ignored");
            return Reply::Respond(self.cards.reply_text(&self.help()));
        };
        let feedback = self.typed_answer(userid, handle, verb, rest).await;
        Reply::Respond(self.cards.reply_text(&feedback.text(self.cards.locale())))
    }

    /// A typed answer to the pending interaction whose handle is `handle` (counted).
    async fn typed_answer(
        &self,
        userid: &str,
        handle: &str,
        verb: Typed,
        rest: String,
    ) -> Feedback {
        let pending = match self.store.pending().await {
            Ok(p) => p,
            Err(_) => {
                self.count("error");
                return Feedback::StoreDown;
            }
        };
        let Some(i) = pending
            .into_iter()
            .find(|i| self.cards.keys().handle(i) == handle)
        else {
            self.count("not_found");
            return Feedback::NotFound;
        };
        let actor = if userid.is_empty() { "unknown" } else { userid };
        let (listed, _) = self.who(userid);
        let tap = Tap {
            id: &i.id,
            created: Some(i.created_at.as_millisecond()),
            actor,
            identity: actor,
            approver: listed,
            audit: true,
        };
        let fits = |i: &Interaction| match verb {
            Typed::Deny => true,
            Typed::Answer => i.kind == Kind::Question,
            Typed::Edit => crate::present::render::editable_command(i).is_some(),
        };
        let read = |current: &Interaction| match verb {
            Typed::Deny => Ok(Decision::Answer(Answer::deny(
                Some(rest.clone()).filter(|r| !r.is_empty()),
            ))),
            Typed::Answer => own_answer(current, rest.clone()).map(Decision::Answer),
            Typed::Edit => Ok(Decision::Edit(rest.clone())),
        };
        let by = Responder::new(actor, self.pipeline.via().clone()).with_identity(CHANNEL, actor);
        self.pipeline.answer(&tap, fits, read, by).await
    }

    fn help(&self) -> String {
        if self.cards.locale() == crate::present::render::Locale::ZhCn {
            "请点击卡片上的按钮作答；附理由拒绝请发送「拒绝 编号 理由」，自己作答请发送「回答 编号 内容」，改写命令后批准请发送「编辑 编号 新命令」（编号见卡片）".into()
        } else {
            "Answer with the card's buttons; to deny with a reason send `deny <code> <reason>`, to answer in your own words `answer <code> <text>`, to approve an edited command `edit <code> <command>` (the code is on the card)".into()
        }
    }
}

#[async_trait::async_trait]
impl BotHandler for Inbound {
    async fn callback(&self, frame: Frame, replies: Replies) {
        let Some(body) = frame.body.as_ref() else {
            return;
        };
        let req_id = frame.headers.req_id.clone();
        let sent = match self.handle(&req_id, body).await {
            Reply::None => return,
            Reply::Update { card, userids } => replies.update_card(&req_id, card, &userids).await,
            Reply::Respond(reply) => replies
                .command(super::bot::cmd::RESPOND, &req_id, reply)
                .await
                .map(|_| ()),
        };
        if let Err(e) = sent {
            tracing::warn!(error = %e, "wecom: the reply to a callback was not taken");
        }
    }
}

/// Message text without the leading `@bot` mentions a group message carries.
fn strip_mentions(text: &str) -> String {
    text.split_whitespace()
        .skip_while(|w| w.starts_with('@'))
        .collect::<Vec<_>>()
        .join(" ")
}

/// What a typed answer asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Typed {
    /// `deny <handle> [reason]` / `拒绝`.
    Deny,
    /// `answer <handle> <text>` / `回答`.
    Answer,
    /// `edit <handle> <command>` / `编辑`: approve with the command changed.
    Edit,
}

impl Typed {
    fn parse(verb: &str) -> Option<Self> {
        Some(match verb {
            "deny" | "拒绝" => Typed::Deny,
            "answer" | "回答" => Typed::Answer,
            "edit" | "编辑" => Typed::Edit,
            _ => return None,
        })
    }
}

/// Whether a button fits the interaction's kind.
fn fits(action: Action, i: &Interaction) -> bool {
    match action {
        Action::Allow => i.kind == Kind::Approval,
        Action::AllowSimilar => crate::present::render::similar_rule(i).is_some(),
        Action::Deny => true,
        Action::Choose(_) => i.kind == Kind::Question,
        Action::Submit => i.kind != Kind::Approval,
    }
}

/// What a verified click means for `i`.
fn decision_of(pressed: &Pressed, i: &Interaction, body: &Value) -> Result<Decision, String> {
    if pressed.action == Action::AllowSimilar {
        return Ok(Decision::AllowSimilar);
    }
    answer_of(pressed, i, body).map(Decision::Answer)
}

/// The answer a verified click gives `i`.
fn answer_of(pressed: &Pressed, i: &Interaction, body: &Value) -> Result<Answer, String> {
    match pressed.action {
        Action::AllowSimilar => Err("not an answer".into()),
        Action::Allow => Ok(Answer::allow()),
        Action::Deny => Ok(Answer::deny(None)),
        Action::Choose(n) => {
            let qs = parse_questions(&i.input.map()).map_err(|e| e.to_string())?;
            let label = qs
                .first()
                .and_then(|q| q.options.get(n))
                .map(|o| o.label.clone())
                .ok_or_else(|| format!("there is no option {n}"))?;
            Ok(Answer::Answers(Map::from_iter([(
                "0".to_string(),
                Value::String(label),
            )])))
        }
        Action::Submit => {
            let chosen = selections(body);
            if i.kind == Kind::Form {
                form_content(i, &chosen).map(Answer::Accept)
            } else {
                question_answers(i, &chosen).map(Answer::Answers)
            }
        }
    }
}

/// The option chosen in each select list of a submitted card: `q<n>` → option index.
fn selections(body: &Value) -> Vec<(usize, usize)> {
    let event = &body["event"];
    let items = event
        .pointer("/template_card_event/selected_items/selected_item")
        .or_else(|| event.pointer("/selected_items/selected_item"))
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    items
        .iter()
        .filter_map(|item| {
            let q = item["question_key"]
                .as_str()?
                .strip_prefix('q')?
                .parse()
                .ok()?;
            let o = item
                .pointer("/option_ids/option_id/0")
                .and_then(Value::as_str)?
                .parse()
                .ok()?;
            Some((q, o))
        })
        .collect()
}

fn question_answers(
    i: &Interaction,
    chosen: &[(usize, usize)],
) -> Result<Map<String, Value>, String> {
    let qs = parse_questions(&i.input.map()).map_err(|e| e.to_string())?;
    let mut out = Map::new();
    for (n, q) in qs.iter().enumerate() {
        let label = chosen
            .iter()
            .find(|(k, _)| *k == n)
            .and_then(|(_, o)| q.options.get(*o))
            .map(|o| o.label.clone())
            .ok_or_else(|| format!("{}: choose an option", q.header))?;
        out.insert(n.to_string(), Value::String(label));
    }
    Ok(out)
}

fn form_content(i: &Interaction, chosen: &[(usize, usize)]) -> Result<Map<String, Value>, String> {
    let form = Form::from_input(&i.input.map()).map_err(|e| e.to_string())?;
    let mut content = Map::new();
    for (n, f) in form.fields.iter().enumerate() {
        let Some((_, o)) = chosen.iter().find(|(k, _)| *k == n) else {
            continue;
        };
        let value = match &f.ty {
            FieldType::Choice { options } => options
                .get(*o)
                .map(|c| Value::String(c.value.clone()))
                .ok_or_else(|| format!("{}: there is no option {o}", f.label()))?,
            FieldType::Boolean => Value::Bool(*o == 0),
            _ => continue,
        };
        content.insert(f.name.clone(), value);
    }
    form.accept(&content).map_err(|e| {
        let name = e.field.trim_start_matches("content.");
        let label = form.field(name).map_or(name, |f| f.label());
        format!("{label}: {}", e.message)
    })?;
    Ok(content)
}

/// A question answered in the person's own words: its one question gets `text`.
fn own_answer(i: &Interaction, text: String) -> Result<Answer, String> {
    let qs = parse_questions(&i.input.map()).map_err(|e| e.to_string())?;
    if qs.len() != 1 || text.trim().is_empty() {
        return Err("answer one question at a time, with the text after the code".into());
    }
    Ok(Answer::Answers(Map::from_iter([(
        "0".to_string(),
        Value::String(text),
    )])))
}
