//! Interactive cards (JSON 2.0) for approvals and questions, pending and resolved, in Simplified
//! Chinese or English.
//!
//! Untrusted text (tool input, questions, paths, reasons) is only ever placed in `plain_text`
//! elements or inside a code block, so it cannot inject markup such as mentions. Every
//! button and form carries a value bound to one interaction (id and creation time) and one
//! action by a MAC (see `super::button::button_tag`).

use serde_json::{Map, Value, json};

use super::button::button_tag;
use super::settings::Locale;
use crate::interaction::clip;
use crate::interaction::form::{Choice, Field, FieldType};
use crate::interaction::{
    Form, Interaction, Kind, Outcome, PermissionResult, Question, Resolution, parse_questions,
};
use crate::present;
use crate::present::render::{self, cut_note, format_time};

/// The platform refuses a card message whose request body exceeds 30 KB. The card travels as a
/// JSON string inside that body (escaped a second time), so this is what is measured; read
/// as 30,000 bytes so either meaning of "KB" is respected.
pub(crate) const MAX_REQUEST_BYTES: usize = 30_000;
/// Room kept in the request body for everything but the card: `receive_id` (an email can be
/// long), `msg_type`, `uuid` and the JSON around them.
pub(crate) const ENVELOPE_BYTES: usize = 1024;
/// Characters of tool input shown before cutting (reduced further if the card is too big).
pub(crate) const INPUT_CHARS: usize = 6000;
/// Longest text input accepted in a card form (the platform's maximum).
pub(crate) const MAX_INPUT_LEN: u64 = 1000;

/// What a button or form asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    /// Approve the tool call.
    Allow,
    /// Approve it, and grant the rule imrelay proposes for similar calls of its session.
    AllowSimilar,
    /// Deny it (with the reason typed in the form, if any).
    Deny,
    /// Submit the question form.
    Answer,
}

impl Action {
    /// The name carried in button values.
    pub fn as_str(self) -> &'static str {
        match self {
            Action::Allow => "allow",
            Action::AllowSimilar => "allow_similar",
            Action::Deny => "deny",
            Action::Answer => "answer",
        }
    }

    /// Whether a card of an interaction of `kind` carries this button: Allow on approvals,
    /// Answer on questions and forms, Deny (or Decline) on all.
    pub fn fits(self, kind: Kind) -> bool {
        match self {
            Action::Allow | Action::AllowSimilar => kind == Kind::Approval,
            Action::Answer => matches!(kind, Kind::Question | Kind::Form),
            Action::Deny => match kind {
                Kind::Approval | Kind::Question | Kind::Form => true,
            },
        }
    }

    /// Parses a name carried in button values.
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "allow" => Some(Action::Allow),
            "allow_similar" => Some(Action::AllowSimilar),
            "deny" => Some(Action::Deny),
            "answer" => Some(Action::Answer),
            _ => None,
        }
    }
}

/// The form field name of form field `n` (field names are the agent's: an index keeps the
/// card's names within what Feishu accepts).
pub(crate) fn field_name(n: usize) -> String {
    format!("f{n}")
}

/// The agent's message of a form interaction.
fn form_message(i: &Interaction) -> String {
    i.input
        .map()
        .get("message")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string()
}

/// Form field names.
pub(crate) const REASON_FIELD: &str = "reason";

/// The form field of question `i`'s selection.
pub(crate) fn select_field(i: usize) -> String {
    format!("q{i}")
}

/// The form field of question `i`'s "Other" text.
pub(crate) fn other_field(i: usize) -> String {
    format!("q{i}_other")
}

/// Builds cards in one locale, with button values signed by one secret.
#[derive(Clone)]
pub struct Cards {
    locale: Locale,
    secret: Vec<u8>,
    inbox: Option<String>,
}

/// Plain text, hidden characters (controls, direction overrides) shown as escapes: text from
/// outside never reorders or hides what a person reads.
fn plain(content: impl Into<String>) -> Value {
    json!({"tag": "plain_text", "content": present::visible_text(&content.into())})
}

fn div(content: impl Into<String>) -> Value {
    json!({"tag": "div", "text": plain(content)})
}

fn grey_div(content: impl Into<String>) -> Value {
    json!({"tag": "div", "text": {"tag": "plain_text", "content": present::visible_text(&content.into()), "text_color": "grey", "text_size": "notation"}})
}

/// A fenced code block whose content cannot close the fence early.
fn code_block(text: &str, lang: &str) -> Value {
    let safe = present::break_fences(text);
    json!({"tag": "markdown", "content": format!("```{lang}\n{safe}\n```")})
}

/// The length of `s` written as a JSON string literal, as serde_json writes it (quotes,
/// `\"`, `\\`, short escapes for common control characters, `\u00XX` for the others).
fn json_string_len(s: &str) -> usize {
    2 + s
        .bytes()
        .map(|b| match b {
            b'"' | b'\\' | b'\n' | b'\r' | b'\t' | 0x08 | 0x0c => 2,
            0..=0x1f => 6,
            _ => 1,
        })
        .sum::<usize>()
}

/// The bytes `card` takes in a send or update request body: the card's JSON, escaped again as
/// the `content` string, plus [`ENVELOPE_BYTES`].
pub(crate) fn request_bytes(card: &Value) -> usize {
    json_string_len(&card.to_string()) + ENVELOPE_BYTES
}

/// How many characters of each kind of untrusted text a card shows. A card that does not fit
/// the request limit is rebuilt with a smaller budget, step by step.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Budget {
    /// Tool input (approvals).
    input: usize,
    /// Each option's description (questions); 0 leaves descriptions out.
    option: usize,
    /// Each question's text, and each answer on a resolved question card.
    question: usize,
    /// The interaction's title, description and deny reason (the context line gets less).
    text: usize,
}

impl Budget {
    const FULL: Budget = Budget {
        input: INPUT_CHARS,
        option: 300,
        question: 500,
        text: 1000,
    };

    /// The next smaller budget for a card of `kind`, or `None` at the floor. Tool input goes
    /// first, then option descriptions (down to none), then question texts, then the rest.
    fn shrink(self, kind: Kind) -> Option<Budget> {
        let mut b = self;
        // Every kind is named, so a new one must choose what it gives up first.
        match kind {
            Kind::Approval if b.input > 200 => b.input /= 2,
            Kind::Question if b.option > 0 => {
                b.option = if b.option > 40 { b.option / 2 } else { 0 };
            }
            Kind::Question if b.question > 60 => b.question = (b.question / 2).max(60),
            Kind::Form if b.question > 60 => b.question = (b.question / 2).max(60),
            Kind::Approval | Kind::Question | Kind::Form if b.text > 100 => {
                b.text = (b.text / 2).max(100)
            }
            Kind::Approval | Kind::Question | Kind::Form => return None,
        }
        Some(b)
    }
}

fn is_open_id(s: &str) -> bool {
    s.starts_with("ou_") && s.len() > 3 && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
}

impl Cards {
    /// Cards in `locale`, button values signed with `secret`.
    pub fn new(locale: Locale, secret: Vec<u8>) -> Self {
        Self {
            locale,
            secret,
            inbox: None,
        }
    }

    /// The same cards, linking cut tool calls to their item in the inbox at `base`
    /// (`server.public_url`).
    pub fn with_inbox(mut self, base: Option<String>) -> Self {
        self.inbox = base;
        self
    }

    /// The secret button values are signed with.
    pub(crate) fn secret(&self) -> &[u8] {
        &self.secret
    }

    /// The locale.
    pub fn locale(&self) -> Locale {
        self.locale
    }

    fn zh(&self) -> bool {
        self.locale == Locale::ZhCn
    }

    fn t<'a>(&self, zh: &'a str, en: &'a str) -> &'a str {
        if self.zh() { zh } else { en }
    }

    /// The callback value of a button for `action` on `i`.
    pub fn value(&self, i: &Interaction, action: Action) -> Value {
        let created = i.created_at.as_millisecond();
        json!({
            "imrelay": 2,
            "id": i.id.as_str(),
            "created": created,
            "action": action.as_str(),
            "mac": button_tag(&self.secret, i.id.as_str(), created, action.as_str()),
        })
    }

    fn button(
        &self,
        i: &Interaction,
        action: Action,
        label: &str,
        kind: &str,
        name: &str,
    ) -> Value {
        json!({
            "tag": "button",
            "name": name,
            "text": plain(label),
            "type": kind,
            "behaviors": [{"type": "callback", "value": self.value(i, action)}],
        })
    }

    fn submit(
        &self,
        i: &Interaction,
        action: Action,
        label: &str,
        kind: &str,
        name: &str,
    ) -> Value {
        let mut b = self.button(i, action, label, kind, name);
        b["form_action_type"] = json!("submit");
        b
    }

    /// The card for `i` as it stands: pending with buttons, or resolved without. Untrusted text
    /// is cut until the request carrying the card fits `MAX_REQUEST_BYTES`.
    pub fn render(&self, i: &Interaction) -> Value {
        let mut budget = Budget::FULL;
        loop {
            let card = self.build(i, budget);
            if request_bytes(&card) <= MAX_REQUEST_BYTES {
                return card;
            }
            match budget.shrink(i.kind) {
                Some(smaller) => budget = smaller,
                None => {
                    tracing::warn!(id = %i.id, bytes = request_bytes(&card), "feishu: a card is over the size limit even with every text cut");
                    return card;
                }
            }
        }
    }

    /// A one-line description for chat lists and notifications.
    pub fn summary(&self, i: &Interaction) -> String {
        match (i.kind, &i.resolution) {
            (Kind::Approval, None) => format!(
                "{}{}",
                self.t("审批请求：", "Approval needed: "),
                clip(&i.tool_name, 60)
            ),
            (Kind::Question, None) => self
                .t("智能体有问题需要回答", "The agent has a question")
                .to_string(),
            (Kind::Form, None) if render::single_text_form(i).is_some() => format!(
                "{}{}",
                self.t("智能体提问：", "The agent asks: "),
                clip(&form_message(i), 60)
            ),
            (Kind::Form, None) => format!(
                "{}{}",
                self.t("请填写：", "Please fill in: "),
                clip(&form_message(i), 60)
            ),
            (Kind::Form, Some(r)) if render::single_text_form(i).is_some() => format!(
                "{} · {}",
                self.t("提问", "Question"),
                self.outcome_word(r.outcome)
            ),
            (Kind::Form, Some(r)) => format!(
                "{} · {}",
                self.t("表单", "Form"),
                self.outcome_word(r.outcome)
            ),
            (_, Some(r)) => format!(
                "{} · {}",
                clip(&i.tool_name, 60),
                self.outcome_word(r.outcome)
            ),
        }
    }

    fn title(&self, i: &Interaction) -> String {
        let base = match i.kind {
            Kind::Approval => format!(
                "{}{}",
                self.t("审批请求：", "Approve "),
                clip(&i.tool_name, 80)
            ),
            Kind::Question => self.t("智能体提问", "Question from the agent").to_string(),
            Kind::Form => match i.title.as_deref().filter(|t| !t.trim().is_empty()) {
                Some(t) => clip(t, 80),
                None if render::single_text_form(i).is_some() => {
                    self.t("智能体提问", "Question from the agent").to_string()
                }
                None => self.t("请填写表单", "Please fill in").to_string(),
            },
        };
        match (&i.resolution, i.kind) {
            (None, Kind::Approval) if !self.zh() => format!("{base}?"),
            (None, _) => base,
            (Some(r), _) => format!("{base} · {}", self.outcome_word(r.outcome)),
        }
    }

    fn template(i: &Interaction) -> &'static str {
        match &i.resolution {
            None => "orange",
            Some(r) => match r.outcome {
                Outcome::Allowed | Outcome::Answered => "green",
                Outcome::Denied => "red",
                Outcome::Expired | Outcome::Cancelled => "grey",
            },
        }
    }

    /// "Allowed", "已批准", ...
    pub fn outcome_word(&self, o: Outcome) -> &'static str {
        if !self.zh() {
            return match o {
                Outcome::Expired => "Expired",
                other => render::outcome_label(other),
            };
        }
        match o {
            Outcome::Allowed => "已批准",
            Outcome::Denied => "已拒绝",
            Outcome::Answered => "已回答",
            Outcome::Expired => "已过期",
            Outcome::Cancelled => "已取消",
        }
    }

    /// "Allowed by alice via telegram", "由 alice 通过 telegram 批准", ...
    pub fn outcome_phrase(&self, r: &Resolution) -> String {
        render::outcome_phrase_in(r, self.locale)
    }

    fn context(&self, i: &Interaction, b: Budget, out: &mut Vec<Value>) {
        let ctx = render::context_line(i);
        if !ctx.is_empty() {
            out.push(grey_div(clip(&ctx, b.text * 2 / 5)));
        }
        if i.is_pending()
            && let Some(line) = render::escalated_line(i, self.locale)
        {
            out.push(div(format!("⏫ {}", clip(&line, b.text / 2))));
        }
        if let Some(t) = i.title.as_deref().filter(|t| !t.trim().is_empty()) {
            out.push(div(clip(t, b.text / 2)));
        }
        if let Some(d) = i.description.as_deref().filter(|d| !d.trim().is_empty()) {
            out.push(div(clip(d, b.text)));
        }
    }

    fn deadline_line(&self, i: &Interaction) -> Value {
        grey_div(format!(
            "{}{}",
            self.t(
                "截止时间（超时自动拒绝）：",
                "Deadline (denied automatically after): "
            ),
            format_time(i.deadline)
        ))
    }

    fn resolution_lines(&self, i: &Interaction, r: &Resolution, b: Budget, out: &mut Vec<Value>) {
        let at = format_time(r.at);
        match r.by.as_deref() {
            Some(by) if is_open_id(by) && !matches!(r.outcome, Outcome::Expired | Outcome::Cancelled) => {
                // A platform user: a mention shows their name. Everything else here is ours.
                let phrase = self.outcome_phrase(r).replace(by, &format!("<at id={by}></at>"));
                out.push(json!({"tag": "markdown", "content": format!("**{phrase}** · {at}")}));
            }
            _ => out.push(json!({"tag": "div", "text": {"tag": "plain_text", "content": present::visible_text(&format!("{} · {at}", self.outcome_phrase(r))), "text_size": "normal_v2"}})),
        }
        if render::single_text_form(i).is_some() {
            // The answer to a single question, without the field's label.
            for (_, value) in render::form_answers(i) {
                out.push(div(format!("→ {}", clip(&value, b.question))));
            }
        } else if i.kind == Kind::Form {
            for (label, value) in render::form_answers(i) {
                out.push(div(format!(
                    "{} → {}",
                    clip(&label, 60),
                    clip(&value, b.question)
                )));
            }
        }
        match (r.result.permission(), r.outcome) {
            (_, Outcome::Denied | Outcome::Expired) if i.kind == Kind::Form => {
                if let Some(message) = r.message() {
                    out.push(div(format!(
                        "{}{}",
                        self.t("原因：", "Reason: "),
                        clip(message, b.text)
                    )));
                }
            }
            (Some(PermissionResult::Deny { message, .. }), Outcome::Denied | Outcome::Expired) => {
                out.push(div(format!(
                    "{}{}",
                    self.t("原因：", "Reason: "),
                    clip(message, b.text)
                )));
            }
            (Some(PermissionResult::Allow { updated_input, .. }), Outcome::Answered) => {
                if let (Some(Value::Object(answers)), Ok(qs)) = (
                    updated_input.map().get("answers"),
                    parse_questions(&i.input.map()),
                ) {
                    for q in &qs {
                        if let Some(a) = answers.get(&q.question).and_then(Value::as_str) {
                            out.push(div(format!(
                                "{} → {}",
                                clip(&q.header, 40),
                                clip(a, b.question)
                            )));
                        }
                    }
                }
            }
            _ => {}
        }
    }

    fn build(&self, i: &Interaction, budget: Budget) -> Value {
        let mut elements = Vec::new();
        self.context(i, budget, &mut elements);
        match i.kind {
            Kind::Approval => self.approval_body(i, budget, &mut elements),
            Kind::Question => self.question_body(i, budget, &mut elements),
            Kind::Form => self.form_body(i, budget, &mut elements),
        }
        json!({
            "schema": "2.0",
            "config": {
                "update_multi": true,
                "summary": {"content": present::visible_text(&self.summary(i))},
            },
            "header": {
                "title": plain(self.title(i)),
                "template": Self::template(i),
            },
            "body": {"elements": elements},
        })
    }

    fn approval_body(&self, i: &Interaction, budget: Budget, out: &mut Vec<Value>) {
        // The tool call as a person reads it: a command, a diff, a file's first lines.
        let (text, lang) = present::chat_block(&i.tool_name, &i.input.map(), i.cwd.as_deref());
        let excerpt = render::excerpt(&text, budget.input);
        out.push(code_block(&excerpt.text, lang));
        if excerpt.cut > 0
            && let Some(base) = &self.inbox
        {
            // The id is of URL-safe characters only; the base is the operator's setting.
            let url = format!("{base}/#{}", i.id);
            out.push(json!({"tag": "markdown", "content": if self.zh() {
                format!("输入过长，已省略 {} 个字符：[在 imrelay 收件箱查看全部]({url})", excerpt.cut)
            } else {
                format!("Input truncated: {}. [See all of it in the imrelay inbox]({url})", cut_note(excerpt.cut))
            }}));
        } else if excerpt.cut > 0 {
            out.push(grey_div(if self.zh() {
                format!(
                    "输入过长，已省略 {} 个字符（完整内容见 imrelay 收件箱）",
                    excerpt.cut
                )
            } else {
                format!(
                    "Input truncated: {} (see the imrelay inbox for all of it)",
                    cut_note(excerpt.cut)
                )
            }));
        }
        if let Some(votes) = crate::present::render::votes_line(i, self.locale) {
            out.push(grey_div(votes));
        }
        match &i.resolution {
            Some(r) => self.resolution_lines(i, r, budget, out),
            None => {
                // Several people decide it: each allows it as it is, once.
                let similar = crate::present::render::similar_rule(i)
                    .filter(|_| !crate::interaction::quorum::is_voted(i));
                if let Some(rule) = &similar {
                    // What "Allow similar" adds, in full, before anyone taps it.
                    let native = if i
                        .suggestions
                        .as_deref()
                        .is_some_and(crate::interaction::applied_with_a_grant)
                    {
                        self.t(
                            "（智能体自身也会在本会话中记住它的建议）",
                            " (the agent also remembers its own suggestion for this session)",
                        )
                    } else {
                        ""
                    };
                    out.push(grey_div(format!(
                        "{}{}{native}",
                        self.t(
                            "“批准并允许同类”会在本会话中自动允许：",
                            "Allow similar also allows, for this session: "
                        ),
                        crate::interaction::clip(rule, 200)
                    )));
                }
                out.push(self.deadline_line(i));
                let mut columns = vec![json!({"tag": "column", "width": "auto", "elements": [
                        self.button(i, Action::Allow, self.t("批准", "Approve"), "primary_filled", "approve")]})];
                if similar.is_some() {
                    columns.push(json!({"tag": "column", "width": "auto", "elements": [
                        self.button(i, Action::AllowSimilar, self.t("批准并允许同类", "Allow similar"), "primary", "allow_similar")]}));
                }
                columns.push(json!({"tag": "column", "width": "auto", "elements": [
                    self.button(i, Action::Deny, self.t("拒绝", "Deny"), "danger", "deny")]}));
                out.push(json!({
                    "tag": "column_set",
                    "flex_mode": "none",
                    "horizontal_spacing": "8px",
                    "columns": columns,
                }));
                out.push(json!({
                    "tag": "form",
                    "name": "deny_form",
                    "elements": [
                        {
                            "tag": "input",
                            "name": REASON_FIELD,
                            "required": false,
                            "max_length": MAX_INPUT_LEN,
                            "placeholder": plain(self.t("拒绝原因（会告知智能体）", "Reason for denying (shown to the agent)")),
                        },
                        self.submit(i, Action::Deny, self.t("拒绝并说明原因", "Deny with reason"), "danger", "deny_with_reason"),
                    ],
                }));
            }
        }
    }

    fn question_body(&self, i: &Interaction, budget: Budget, out: &mut Vec<Value>) {
        let questions = parse_questions(&i.input.map()).unwrap_or_default();
        match &i.resolution {
            Some(r) => {
                for q in &questions {
                    out.push(div(format!(
                        "[{}] {}",
                        clip(&q.header, 40),
                        clip(&q.question, budget.question)
                    )));
                }
                self.resolution_lines(i, r, budget, out);
            }
            None => {
                let mut form = Vec::new();
                for (n, q) in questions.iter().enumerate() {
                    self.question_fields(n, q, budget, &mut form);
                }
                let decline = self.t("拒绝回答", "Decline to answer");
                self.answer_form(i, form, decline, out);
            }
        }
    }

    fn form_body(&self, i: &Interaction, budget: Budget, out: &mut Vec<Value>) {
        let form = match Form::from_input(&i.input.map()) {
            Ok(f) => f,
            Err(e) => {
                out.push(div(format!("{e}")));
                if let Some(r) = &i.resolution {
                    self.resolution_lines(i, r, budget, out);
                }
                return;
            }
        };
        if form.is_single_text() {
            return self.single_text_body(i, &form, budget, out);
        }
        out.push(div(clip(&form.message, budget.text)));
        if let Some(r) = &i.resolution {
            self.resolution_lines(i, r, budget, out);
            return;
        }
        let mut elements = Vec::new();
        for (n, f) in form.fields.iter().enumerate() {
            self.form_field(n, f, budget, &mut elements);
        }
        let decline = self.t("拒绝填写", "Decline");
        self.answer_form(i, elements, decline, out);
    }

    /// A single free-text question: the question as a heading, what its field adds, and one
    /// box for the answer with "Send answer" — no field label, no form to fill in.
    fn single_text_body(&self, i: &Interaction, form: &Form, budget: Budget, out: &mut Vec<Value>) {
        out.push(json!({"tag": "div", "text": {
            "tag": "plain_text",
            "content": present::visible_text(&clip(&form.message, budget.text)),
            "text_size": "heading",
        }}));
        let Some(field) = form.fields.first() else {
            return;
        };
        let note = render::single_text_note(field);
        if !note.is_empty() {
            out.push(grey_div(clip(&note, budget.question)));
        }
        if let Some(r) = &i.resolution {
            self.resolution_lines(i, r, budget, out);
            return;
        }
        // The field's own input (a text box, a date picker), without its label: the
        // question above is its label.
        let mut parts = Vec::new();
        self.form_field(0, field, budget, &mut parts);
        let Some(mut input) = parts.pop() else {
            return;
        };
        if input["tag"] == "input" && field.hint() == "text" {
            input["placeholder"] = plain(self.t("你的回答", "Your answer"));
        }
        out.push(self.deadline_line(i));
        out.push(json!({"tag": "form", "name": "answer_form", "elements": [
            input,
            self.submit(i, Action::Answer, self.t("回答", "Send answer"), "primary_filled", "submit"),
        ]}));
        out.push(self.button(
            i,
            Action::Deny,
            self.t("拒绝回答", "Decline to answer"),
            "danger",
            "decline",
        ));
    }

    /// The form of a pending question or form card: its `elements` and Submit, the deadline,
    /// and the button that declines (labelled `decline`).
    fn answer_form(
        &self,
        i: &Interaction,
        mut elements: Vec<Value>,
        decline: &str,
        out: &mut Vec<Value>,
    ) {
        elements.push(self.submit(
            i,
            Action::Answer,
            self.t("提交", "Submit"),
            "primary_filled",
            "submit",
        ));
        out.push(self.deadline_line(i));
        out.push(json!({"tag": "form", "name": "answer_form", "elements": elements}));
        out.push(self.button(i, Action::Deny, decline, "danger", "decline"));
    }

    /// One form field: its label (with a mark when required), its description, and the input
    /// that fits its type (a tick box, labelled itself, for yes/no). Feishu checks `required`
    /// before it sends anything; imrelay checks everything again.
    fn form_field(&self, n: usize, f: &Field, b: Budget, out: &mut Vec<Value>) {
        let mark = if f.required { " *" } else { "" };
        if !matches!(f.ty, FieldType::Boolean) {
            out.push(json!({"tag": "div", "text": {"tag": "plain_text", "content": present::visible_text(&format!("{}{mark}", clip(f.label(), 100))), "text_size": "normal_v2"}}));
        }
        if let Some(d) = f.description.as_deref() {
            out.push(grey_div(clip(d, b.question)));
        }
        let name = field_name(n);
        let options = |choices: &[Choice]| -> Vec<Value> {
            choices
                .iter()
                .enumerate()
                .map(|(j, c)| json!({"text": plain(clip(&c.label, 100)), "value": j.to_string()}))
                .collect()
        };
        let hint = f.hint();
        let mut element = match &f.ty {
            FieldType::Choice { options: choices } => json!({
                "tag": "select_static",
                "width": "fill",
                "placeholder": plain(self.t("请选择", "Choose one")),
                "options": options(choices),
            }),
            FieldType::Multi {
                options: choices, ..
            } => json!({
                "tag": "multi_select_static",
                "width": "fill",
                "placeholder": plain(clip(&hint, 100)),
                "options": options(choices),
            }),
            // A tick box: unticked is `false`, so it needs no `required` (which it lacks).
            FieldType::Boolean => json!({
                "tag": "checker",
                "checked": f.default == Some(Value::Bool(true)),
                "text": plain(clip(f.label(), 100)),
            }),
            FieldType::Text {
                format: Some(crate::interaction::form::Format::Date),
                ..
            } => json!({
                "tag": "date_picker",
                "width": "fill",
                "placeholder": plain(self.t("请选择日期", "Choose a date")),
            }),
            FieldType::Text {
                multiline, max_len, ..
            } => {
                let mut e = json!({
                    "tag": "input",
                    "width": "fill",
                    "max_length": max_len.map_or(MAX_INPUT_LEN, |m| (m as u64).min(MAX_INPUT_LEN)),
                    "placeholder": plain(clip(&hint, 100)),
                });
                if *multiline {
                    e["input_type"] = json!("multiline_text");
                    e["rows"] = json!(3);
                }
                e
            }
            FieldType::Number { .. } => json!({
                "tag": "input",
                "width": "fill",
                "max_length": 40,
                "placeholder": plain(clip(&hint, 100)),
            }),
        };
        element["name"] = json!(name);
        if !matches!(f.ty, FieldType::Boolean) {
            element["required"] = json!(f.required && f.default.is_none());
        }
        if let Some(d) = &f.default {
            match (&f.ty, d) {
                (FieldType::Choice { options: c }, Value::String(v)) => {
                    if let Some(j) = c.iter().position(|o| &o.value == v) {
                        element["initial_option"] = json!(j.to_string());
                    }
                }
                (
                    FieldType::Text {
                        format: Some(crate::interaction::form::Format::Date),
                        ..
                    },
                    Value::String(v),
                ) => {
                    element["initial_date"] = json!(v);
                }
                (FieldType::Text { .. }, Value::String(v)) => element["default_value"] = json!(v),
                (FieldType::Number { .. }, Value::Number(v)) => {
                    element["default_value"] = json!(v.to_string());
                }
                _ => {}
            }
        }
        out.push(element);
    }

    fn question_fields(&self, n: usize, q: &Question, b: Budget, form: &mut Vec<Value>) {
        form.push(json!({"tag": "div", "text": {"tag": "plain_text", "content": present::visible_text(&format!("[{}] {}", clip(&q.header, 40), clip(&q.question, b.question))), "text_size": "normal_v2"}}));
        let described: Vec<String> = q
            .options
            .iter()
            .filter(|_| b.option > 0)
            .filter_map(|o| {
                o.description
                    .as_deref()
                    .filter(|d| !d.trim().is_empty())
                    .map(|d| format!("• {} — {}", clip(&o.label, 100), clip(d, b.option)))
            })
            .collect();
        if !described.is_empty() {
            form.push(grey_div(described.join("\n")));
        }
        let options: Vec<Value> = q
            .options
            .iter()
            .enumerate()
            .map(|(j, o)| json!({"text": plain(clip(&o.label, 100)), "value": j.to_string()}))
            .collect();
        let (tag, placeholder) = if q.multi_select {
            (
                "multi_select_static",
                self.t("可多选", "Choose one or more"),
            )
        } else {
            ("select_static", self.t("请选择", "Choose one"))
        };
        form.push(json!({
            "tag": tag,
            "name": select_field(n),
            "required": false,
            "width": "fill",
            "placeholder": plain(placeholder),
            "options": options,
        }));
        form.push(json!({
            "tag": "input",
            "name": other_field(n),
            "required": false,
            "max_length": MAX_INPUT_LEN,
            "placeholder": plain(if q.multi_select {
                self.t("其他（可选，自行填写，会与所选项一起提交）", "Other (optional, sent along with the chosen options)")
            } else {
                self.t("其他（自行填写答案，代替上面的选项）", "Other (type your own answer instead)")
            }),
        }));
    }
}

/// A callback answer carrying a toast and, optionally, the card that replaces the clicked one.
pub fn reply(toast_type: &str, toast: &str, card: Option<Value>) -> Value {
    let mut out = Map::new();
    out.insert(
        "toast".into(),
        json!({"type": toast_type, "content": clip(toast, 200)}),
    );
    if let Some(card) = card {
        out.insert("card".into(), json!({"type": "raw", "data": card}));
    }
    Value::Object(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::interaction::{InteractionId, now};

    fn approval(input: Value) -> Interaction {
        Interaction {
            session: Some("s1".into()),
            agent: Some("claude-code".into()),
            cwd: Some("/srv".into()),
            ..Interaction::pending(
                InteractionId::parse("toolu_1").unwrap(),
                "Bash",
                input.as_object().unwrap().clone(),
                now(),
                60,
            )
        }
    }

    fn question(questions: Value) -> Interaction {
        let mut i = approval(json!({ "questions": questions }));
        i.kind = Kind::Question;
        i.tool_name = "AskUserQuestion".into();
        i
    }

    /// The request body the platform receives for `card`, built the way the API client builds
    /// it, with a long receiver id.
    fn send_body(card: &Value) -> String {
        json!({
            "receive_id": format!("{}@example.com", "r".repeat(200)),
            "msg_type": "interactive",
            "content": card.to_string(),
            "uuid": "0".repeat(32),
        })
        .to_string()
    }

    #[test]
    fn the_measure_is_what_serde_json_writes() {
        for s in [
            "",
            "plain",
            "quote \" and backslash \\",
            "控制\n\t\r\u{8}\u{c}\u{1}\u{1f}",
            "emoji 🦀 and CJK 中文",
        ] {
            assert_eq!(
                json_string_len(s),
                serde_json::to_string(s).unwrap().len(),
                "{s:?}"
            );
        }
    }

    #[test]
    fn an_edit_shows_as_a_diff_whose_text_cannot_close_the_fence() {
        let cards = Cards::new(Locale::EnUs, vec![1; 32]);
        let mut i = approval(
            json!({"file_path": "/srv/notes.md", "old_string": "old line", "new_string": "new ```line"}),
        );
        i.tool_name = "Edit".into();
        let text = cards.render(&i).to_string();
        assert!(text.contains("```diff\\nFile: notes.md"), "{text}");
        assert!(text.contains("\\n-old line"), "{text}");
        assert!(text.contains("\\n+new ``\u{200b}`line"), "{text}");
        assert!(!text.contains("old_string"), "{text}");
    }

    #[test]
    fn huge_inputs_are_cut_to_fit_the_request_limit() {
        let cards = Cards::new(Locale::EnUs, vec![1; 32]);
        // Quotes are escaped twice on the way (4 bytes each), emoji take 4 bytes.
        for unit in ["é\"", "\"\"\"\"", "🦀\"", "中文"] {
            let i = approval(json!({"command": unit.repeat(40_000)}));
            let card = cards.render(&i);
            let body = send_body(&card);
            assert!(
                body.len() <= MAX_REQUEST_BYTES,
                "{unit}: {} bytes",
                body.len()
            );
            assert!(
                request_bytes(&card) >= body.len(),
                "the measure covers the body"
            );
            assert!(card.to_string().contains("Input truncated"));
        }
    }

    fn long_questions() -> Value {
        let desc = "这是一个很长的选项说明，包含“引号”和\"转义\"以及表情🦀。".repeat(20);
        let text = "请仔细阅读以下内容后回答：\"这个问题\"非常长🦀。".repeat(40);
        Value::Array(
            (0..4)
                .map(|q| {
                    json!({
                        "question": format!("{q}: {text}"),
                        "header": format!("问题{q}"),
                        "multiSelect": q % 2 == 1,
                        "options": (0..4).map(|o| json!({
                            "label": format!("选项{o}：{}", "长标签“🦀”".repeat(20)),
                            "description": format!("{o}: {desc}"),
                        })).collect::<Vec<_>>(),
                    })
                })
                .collect(),
        )
    }

    #[test]
    fn question_cards_shrink_descriptions_then_question_text_to_fit() {
        let cards = Cards::new(Locale::ZhCn, vec![1; 32]);
        let i = question(long_questions());
        let unshrunk = cards.build(&i, Budget::FULL);
        assert!(
            request_bytes(&unshrunk) > MAX_REQUEST_BYTES + 4096,
            "the example must be too big to start with: {}",
            request_bytes(&unshrunk)
        );
        let card = cards.render(&i);
        assert!(send_body(&card).len() <= MAX_REQUEST_BYTES);
        // Still a complete form: every question with its select and "Other" input, one submit.
        let text = card.to_string();
        for n in 0..4 {
            assert!(text.contains(&format!("\"name\":\"q{n}\"")), "q{n}");
            assert!(
                text.contains(&format!("\"name\":\"q{n}_other\"")),
                "q{n}_other"
            );
            assert!(text.contains(&format!("问题{n}")));
        }
        // Descriptions are the first to go, so the question text is kept whole if that is enough.
        let mut b = Budget::FULL;
        let mut steps = Vec::new();
        while let Some(next) = b.shrink(Kind::Question) {
            steps.push(next);
            b = next;
        }
        assert_eq!(b.option, 0);
        let first_question_cut = steps
            .iter()
            .position(|s| s.question < Budget::FULL.question);
        let last_option_cut = steps.iter().rposition(|s| s.option > 0);
        assert!(first_question_cut > last_option_cut, "{steps:?}");
        assert!(
            steps.iter().all(|s| s.input == INPUT_CHARS),
            "questions show no input"
        );
        // The resolved card fits too.
        let mut answered = i.clone();
        answered.resolution = Some(Box::new(Resolution {
            outcome: Outcome::Answered,
            by: Some("ou_1".into()),
            via: crate::interaction::Via::new(crate::channels::feishu::CHANNEL),
            at: now(),
            result: PermissionResult::Deny {
                message: "\"".repeat(5000),
                interrupt: false,
            }
            .into(),
        }));
        assert!(send_body(&cards.render(&answered)).len() <= MAX_REQUEST_BYTES);
    }

    #[test]
    fn code_fences_in_input_cannot_escape_the_block() {
        let cards = Cards::new(Locale::ZhCn, vec![1; 32]);
        let card = cards.render(&approval(json!({"command": "```\n<at id=all></at>"})));
        let md = card["body"]["elements"]
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["tag"] == "markdown")
            .unwrap()["content"]
            .as_str()
            .unwrap()
            .to_string();
        assert_eq!(md.matches("```").count(), 2, "{md}");
    }

    #[test]
    fn no_run_of_backticks_survives() {
        for n in 0..=10 {
            for (before, after) in [("", ""), ("a", "b"), ("`", ""), ("\n", "`\n")] {
                let text = format!("{before}{}{after}", "`".repeat(n));
                let safe = present::break_fences(&text);
                assert!(!safe.contains("```"), "{n}: {text:?} → {safe:?}");
                assert_eq!(safe.replace('\u{200b}', ""), text, "only spaces are added");
                let block = code_block(&text, "json")["content"]
                    .as_str()
                    .unwrap()
                    .to_string();
                assert_eq!(block.matches("```").count(), 2, "{n}: {block:?}");
            }
        }
    }
}
