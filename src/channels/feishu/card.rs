//! Interactive cards (JSON 2.0) for approvals and questions, pending and resolved, in Simplified
//! Chinese or English.
//!
//! Untrusted text (tool input, questions, paths, reasons) is only ever placed in `plain_text`
//! elements or inside a code block, so it cannot inject markup such as mentions. Every
//! button and form carries a value bound to one interaction and one action by a MAC (see
//! [`super::crypto::button_tag`]).

use serde_json::{Map, Value, json};

use super::crypto::button_tag;
use super::settings::Locale;
use crate::channels::render::{self, cut_note, format_time, pretty_input, short};
use crate::interaction::{
    Interaction, Kind, Outcome, PermissionResult, Question, Resolution, parse_questions,
};

/// Largest card JSON the platform accepts is 30 KB; stay below it with room for the envelope.
pub const MAX_CARD_BYTES: usize = 28 * 1024;
/// Characters of tool input shown before cutting (reduced further if the card is too big).
pub const INPUT_CHARS: usize = 6000;
/// Longest text input accepted in a card form (the platform's maximum).
pub const MAX_INPUT_LEN: u64 = 1000;

/// What a button or form asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    /// Approve the tool call.
    Allow,
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
            Action::Deny => "deny",
            Action::Answer => "answer",
        }
    }

    /// Parses a name carried in button values.
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "allow" => Some(Action::Allow),
            "deny" => Some(Action::Deny),
            "answer" => Some(Action::Answer),
            _ => None,
        }
    }
}

/// Form field names.
pub const REASON_FIELD: &str = "reason";

/// The form field of question `i`'s selection.
pub fn select_field(i: usize) -> String {
    format!("q{i}")
}

/// The form field of question `i`'s "Other" text.
pub fn other_field(i: usize) -> String {
    format!("q{i}_other")
}

/// Builds cards in one locale, with button values signed by one secret.
#[derive(Clone)]
pub struct Cards {
    locale: Locale,
    secret: Vec<u8>,
}

fn plain(content: impl Into<String>) -> Value {
    json!({"tag": "plain_text", "content": content.into()})
}

fn div(content: impl Into<String>) -> Value {
    json!({"tag": "div", "text": plain(content)})
}

fn grey_div(content: impl Into<String>) -> Value {
    json!({"tag": "div", "text": {"tag": "plain_text", "content": content.into(), "text_color": "grey", "text_size": "notation"}})
}

/// A fenced code block whose content cannot close the fence early.
fn code_block(text: &str) -> Value {
    let safe = text.replace("```", "`\u{200b}``");
    json!({"tag": "markdown", "content": format!("```json\n{safe}\n```")})
}

fn is_open_id(s: &str) -> bool {
    s.starts_with("ou_") && s.len() > 3 && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
}

impl Cards {
    /// Cards in `locale`, button values signed with `secret`.
    pub fn new(locale: Locale, secret: Vec<u8>) -> Self {
        Self { locale, secret }
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
        json!({
            "imrelay": 1,
            "id": i.id.as_str(),
            "action": action.as_str(),
            "mac": button_tag(&self.secret, i.id.as_str(), action.as_str()),
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

    /// The card for `i` as it stands: pending with buttons, or resolved without.
    pub fn render(&self, i: &Interaction) -> Value {
        let mut budget = INPUT_CHARS;
        loop {
            let card = self.build(i, budget);
            if card.to_string().len() <= MAX_CARD_BYTES || budget <= 200 {
                return card;
            }
            budget /= 2;
        }
    }

    /// A one-line description for chat lists and notifications.
    pub fn summary(&self, i: &Interaction) -> String {
        match (i.kind, &i.resolution) {
            (Kind::Approval, None) => format!(
                "{}{}",
                self.t("审批请求：", "Approval needed: "),
                short(&i.tool_name, 60)
            ),
            (Kind::Question, None) => self
                .t("智能体有问题需要回答", "The agent has a question")
                .to_string(),
            (_, Some(r)) => format!(
                "{} · {}",
                short(&i.tool_name, 60),
                self.outcome_word(r.outcome)
            ),
        }
    }

    fn title(&self, i: &Interaction) -> String {
        let base = match i.kind {
            Kind::Approval => format!(
                "{}{}",
                self.t("审批请求：", "Approve "),
                short(&i.tool_name, 80)
            ),
            Kind::Question => self.t("智能体提问", "Question from the agent").to_string(),
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
        if !self.zh() {
            return render::outcome_phrase(r);
        }
        match r.outcome {
            Outcome::Expired => "已过期，已自动拒绝".to_string(),
            Outcome::Cancelled => r
                .message()
                .map(|m| format!("已取消：{m}"))
                .unwrap_or_else(|| "已取消".into()),
            o => {
                let verb = match o {
                    Outcome::Allowed => "批准",
                    Outcome::Denied => "拒绝",
                    _ => "回答",
                };
                match &r.by {
                    Some(by) => format!("由 {by} 通过 {} {verb}", r.via),
                    None => format!("通过 {} {verb}", r.via),
                }
            }
        }
    }

    /// The toast for a click on something already resolved.
    pub fn already_toast(&self, i: &Interaction) -> String {
        if !self.zh() {
            return render::already_toast(i);
        }
        match &i.resolution {
            None => "仍在等待回答".into(),
            Some(r) => match r.outcome {
                Outcome::Expired | Outcome::Cancelled => self.outcome_phrase(r),
                _ => format!("已处理：{}", self.outcome_phrase(r)),
            },
        }
    }

    /// A toast text in this locale.
    pub fn text(&self, key: Text) -> &'static str {
        match key {
            Text::Allowed => self.t("已批准", "Approved"),
            Text::Denied => self.t("已拒绝", "Denied"),
            Text::Answered => self.t("已提交回答", "Answer sent"),
            Text::Declined => self.t("已拒绝回答", "Question declined"),
            Text::NotApprover => self.t(
                "你不在审批人名单中，无法处理此请求",
                "You are not on the approver list: nothing was changed",
            ),
            Text::BadButton => self.t(
                "此按钮无效或已被篡改，未做任何更改",
                "This button is not valid: nothing was changed",
            ),
            Text::NotFound => self.t("该请求已不存在", "This request no longer exists"),
            Text::StoreDown => self.t(
                "imrelay 暂时无法记录你的回答，请稍后重试",
                "imrelay cannot record your answer right now; please try again",
            ),
            Text::Invalid => self.t("回答无效：", "Invalid answer: "),
        }
    }

    fn context(&self, i: &Interaction, out: &mut Vec<Value>) {
        let ctx = render::context_line(i);
        if !ctx.is_empty() {
            out.push(grey_div(short(&ctx, 400)));
        }
        if let Some(t) = i.title.as_deref().filter(|t| !t.trim().is_empty()) {
            out.push(div(short(t, 500)));
        }
        if let Some(d) = i.description.as_deref().filter(|d| !d.trim().is_empty()) {
            out.push(div(short(d, 1000)));
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

    fn resolution_lines(&self, i: &Interaction, r: &Resolution, out: &mut Vec<Value>) {
        let at = format_time(r.at);
        match r.by.as_deref() {
            Some(by) if is_open_id(by) && !matches!(r.outcome, Outcome::Expired | Outcome::Cancelled) => {
                // A platform user: a mention shows their name. Everything else here is ours.
                let phrase = self.outcome_phrase(r).replace(by, &format!("<at id={by}></at>"));
                out.push(json!({"tag": "markdown", "content": format!("**{phrase}** · {at}")}));
            }
            _ => out.push(json!({"tag": "div", "text": {"tag": "plain_text", "content": format!("{} · {at}", self.outcome_phrase(r)), "text_size": "normal_v2"}})),
        }
        match (&r.result, r.outcome) {
            (PermissionResult::Deny { message, .. }, Outcome::Denied | Outcome::Expired) => {
                out.push(div(format!(
                    "{}{}",
                    self.t("原因：", "Reason: "),
                    short(message, 1000)
                )));
            }
            (PermissionResult::Allow { updated_input, .. }, Outcome::Answered) => {
                if let (Some(Value::Object(answers)), Ok(qs)) =
                    (updated_input.get("answers"), parse_questions(&i.input))
                {
                    for q in &qs {
                        if let Some(a) = answers.get(&q.question).and_then(Value::as_str) {
                            out.push(div(format!("{} → {}", short(&q.header, 40), short(a, 500))));
                        }
                    }
                }
            }
            _ => {}
        }
    }

    fn build(&self, i: &Interaction, input_budget: usize) -> Value {
        let mut elements = Vec::new();
        self.context(i, &mut elements);
        match i.kind {
            Kind::Approval => self.approval_body(i, input_budget, &mut elements),
            Kind::Question => self.question_body(i, &mut elements),
        }
        json!({
            "schema": "2.0",
            "config": {
                "update_multi": true,
                "summary": {"content": self.summary(i)},
            },
            "header": {
                "title": plain(self.title(i)),
                "template": Self::template(i),
            },
            "body": {"elements": elements},
        })
    }

    fn approval_body(&self, i: &Interaction, budget: usize, out: &mut Vec<Value>) {
        let excerpt = pretty_input(&i.input, budget);
        out.push(code_block(&excerpt.text));
        if excerpt.cut > 0 {
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
        match &i.resolution {
            Some(r) => self.resolution_lines(i, r, out),
            None => {
                out.push(self.deadline_line(i));
                out.push(json!({
                    "tag": "column_set",
                    "flex_mode": "none",
                    "horizontal_spacing": "8px",
                    "columns": [
                        {"tag": "column", "width": "auto", "elements": [
                            self.button(i, Action::Allow, self.t("批准", "Approve"), "primary_filled", "approve")]},
                        {"tag": "column", "width": "auto", "elements": [
                            self.button(i, Action::Deny, self.t("拒绝", "Deny"), "danger", "deny")]},
                    ],
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

    fn question_body(&self, i: &Interaction, out: &mut Vec<Value>) {
        let questions = parse_questions(&i.input).unwrap_or_default();
        match &i.resolution {
            Some(r) => {
                for q in &questions {
                    out.push(div(format!(
                        "[{}] {}",
                        short(&q.header, 40),
                        short(&q.question, 500)
                    )));
                }
                self.resolution_lines(i, r, out);
            }
            None => {
                let mut form = Vec::new();
                for (n, q) in questions.iter().enumerate() {
                    self.question_fields(n, q, &mut form);
                }
                form.push(self.submit(
                    i,
                    Action::Answer,
                    self.t("提交", "Submit"),
                    "primary_filled",
                    "submit",
                ));
                out.push(self.deadline_line(i));
                out.push(json!({"tag": "form", "name": "answer_form", "elements": form}));
                out.push(self.button(
                    i,
                    Action::Deny,
                    self.t("拒绝回答", "Decline to answer"),
                    "danger",
                    "decline",
                ));
            }
        }
    }

    fn question_fields(&self, n: usize, q: &Question, form: &mut Vec<Value>) {
        form.push(json!({"tag": "div", "text": {"tag": "plain_text", "content": format!("[{}] {}", short(&q.header, 40), short(&q.question, 500)), "text_size": "normal_v2"}}));
        let described: Vec<String> = q
            .options
            .iter()
            .filter_map(|o| {
                o.description
                    .as_deref()
                    .filter(|d| !d.trim().is_empty())
                    .map(|d| format!("• {} — {}", short(&o.label, 100), short(d, 300)))
            })
            .collect();
        if !described.is_empty() {
            form.push(grey_div(described.join("\n")));
        }
        let options: Vec<Value> = q
            .options
            .iter()
            .enumerate()
            .map(|(j, o)| json!({"text": plain(short(&o.label, 100)), "value": j.to_string()}))
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

/// Fixed texts (toasts).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Text {
    /// Approval allowed.
    Allowed,
    /// Approval denied.
    Denied,
    /// Question answered.
    Answered,
    /// Question declined.
    Declined,
    /// The clicker is not an approver.
    NotApprover,
    /// The button data failed its check.
    BadButton,
    /// The interaction is gone.
    NotFound,
    /// The store refused the write.
    StoreDown,
    /// Prefix of a validation error.
    Invalid,
}

/// A callback answer carrying a toast and, optionally, the card that replaces the clicked one.
pub fn reply(toast_type: &str, toast: &str, card: Option<Value>) -> Value {
    let mut out = Map::new();
    out.insert(
        "toast".into(),
        json!({"type": toast_type, "content": short(toast, 200)}),
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
            id: InteractionId::parse("toolu_1").unwrap(),
            kind: Kind::Approval,
            tool_name: "Bash".into(),
            input: input.as_object().unwrap().clone(),
            session: Some("s1".into()),
            agent: Some("claude-code".into()),
            title: None,
            description: None,
            cwd: Some("/srv".into()),
            suggestions: None,
            created_at: now(),
            deadline: now(),
            timeout_secs: 60,
            resolution: None,
            digest: Default::default(),
        }
    }

    #[test]
    fn huge_inputs_are_cut_to_fit_the_card_limit() {
        let cards = Cards::new(Locale::EnUs, vec![1; 32]);
        let i = approval(json!({"command": "é\"".repeat(40_000)}));
        let card = cards.render(&i);
        assert!(card.to_string().len() <= MAX_CARD_BYTES);
        assert!(card.to_string().contains("Input truncated"));
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
}
