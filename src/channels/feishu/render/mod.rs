//! Interactive cards (JSON 2.0) for approvals and questions, pending and resolved, in Simplified
//! Chinese or English.
//!
//! Untrusted text (tool input, questions, paths, reasons) is only ever placed in `plain_text`
//! elements or inside a code block, so it cannot inject markup such as mentions. Every
//! button and form carries a value bound to one interaction (id and creation time) and one
//! action by a MAC (see `super::button::button_tag`).
//!
//! `mod.rs` builds a card (header, context, body) and fits it to the request limit; the body of
//! each kind is in `approval.rs`, `question.rs` and `form.rs`, the resolved state in
//! `outcome.rs`, what buttons and forms carry in `action.rs`, and how much text a card shows
//! in `budget.rs`.

mod action;
mod approval;
mod budget;
mod form;
mod outcome;
mod question;

use serde_json::{Map, Value, json};

use super::button::button_tag;
use super::settings::Locale;
use crate::interaction::clip;
use crate::interaction::{Interaction, Kind};
use crate::present;
use crate::present::render::{self, format_time};

pub(crate) use action::Action;
pub(crate) use action::{COMMAND_FIELD, REASON_FIELD, field_name, other_field, select_field};
use budget::{Budget, MAX_REQUEST_BYTES, request_bytes};

/// Longest text input accepted in a card form (the platform's maximum).
pub(crate) const MAX_INPUT_LEN: u64 = 1000;

/// Builds cards in one locale, with button values signed by one secret.
#[derive(Clone)]
pub(crate) struct Cards {
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

/// The agent's message of a form interaction.
fn form_message(i: &Interaction) -> String {
    i.input
        .map()
        .get("message")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string()
}

impl Cards {
    /// Cards in `locale`, button values signed with `secret`.
    pub(crate) fn new(locale: Locale, secret: Vec<u8>) -> Self {
        Self {
            locale,
            secret,
            inbox: None,
        }
    }

    /// The same cards, linking cut tool calls to their item in the inbox at `base`
    /// (`server.public_url`).
    pub(crate) fn with_inbox(mut self, base: Option<String>) -> Self {
        self.inbox = base;
        self
    }

    /// The secret button values are signed with.
    pub(crate) fn secret(&self) -> &[u8] {
        &self.secret
    }

    /// The locale.
    pub(crate) fn locale(&self) -> Locale {
        self.locale
    }

    fn zh(&self) -> bool {
        self.locale == Locale::ZhCn
    }

    fn t<'a>(&self, zh: &'a str, en: &'a str) -> &'a str {
        if self.zh() { zh } else { en }
    }

    /// The callback value of a button for `action` on `i`.
    pub(crate) fn value(&self, i: &Interaction, action: Action) -> Value {
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
    pub(crate) fn render(&self, i: &Interaction) -> Value {
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

    /// The card for `i` with texts cut to `budget`.
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

    /// A one-line description for chat lists and notifications.
    pub(crate) fn summary(&self, i: &Interaction) -> String {
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
            Kind::Form => match i.title().filter(|t| !t.trim().is_empty()) {
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
        if let Some(t) = i.title().filter(|t| !t.trim().is_empty()) {
            out.push(div(clip(t, b.text / 2)));
        }
        if let Some(d) = i.description().filter(|d| !d.trim().is_empty()) {
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
}

/// A callback answer carrying a toast and, optionally, the card that replaces the clicked one.
pub(crate) fn reply(toast_type: &str, toast: &str, card: Option<Value>) -> Value {
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

/// The reply to a click the pipeline answered with `feedback`: a toast (success, info or
/// error) with its text, and the card as it now is; with the result it is counted under.
pub(crate) fn feedback_reply(
    cards: &Cards,
    feedback: crate::channels::pipeline::Feedback,
) -> (Value, &'static str) {
    use crate::channels::pipeline::Feedback;
    let kind = match &feedback {
        Feedback::Resolved(_) => "success",
        Feedback::Already(_) | Feedback::StillWorking => "info",
        _ => "error",
    };
    let card = feedback.interaction().map(|i| cards.render(i));
    (
        reply(kind, &feedback.text(cards.locale()), card),
        feedback.result(),
    )
}

#[cfg(test)]
mod tests {
    use super::budget::{INPUT_CHARS, json_string_len};
    use super::*;
    use crate::interaction::{InteractionId, Outcome, PermissionResult, Resolution, now};

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

    /// `i`'s card on a route that needs a passkey: with the inbox's address, and without.
    fn on_a_step_up_route(mut i: Interaction) -> (String, String) {
        i.route = Some(std::sync::Arc::new(
            crate::interaction::routes::RouteStamp {
                name: "prod".into(),
                step_up: true,
                ..crate::interaction::routes::RouteStamp::default_route()
            },
        ));
        let cards = Cards::new(Locale::EnUs, vec![1; 32]);
        let linked = cards
            .clone()
            .with_inbox(Some("https://r.example".into()))
            .render(&i)
            .to_string();
        (linked, cards.render(&i).to_string())
    }

    #[test]
    fn a_step_up_approval_card_links_to_its_inbox_card_and_answers_nothing() {
        let (linked, plain) = on_a_step_up_route(approval(json!({"command": "make deploy-prod"})));
        assert!(
            linked.contains("\"default_url\":\"https://r.example/#toolu_1\""),
            "{linked}"
        );
        assert!(linked.contains("This needs a passkey"), "{linked}");
        assert!(
            !linked.contains("\"callback\""),
            "no button that answers: {linked}"
        );
        // Without the inbox's address the buttons stay; a tap is refused with the text.
        assert!(plain.contains("\"callback\""), "{plain}");
    }

    #[test]
    fn a_step_up_question_card_shows_the_question_and_links_to_its_inbox_card() {
        let (linked, plain) = on_a_step_up_route(question(json!([{"question": "Which region?",
            "header": "Region", "multiSelect": false,
            "options": [{"label": "eu", "description": ""}, {"label": "us", "description": ""}]}])));
        assert!(linked.contains("Which region?"), "{linked}");
        assert!(
            linked.contains("\"default_url\":\"https://r.example/#"),
            "{linked}"
        );
        assert!(linked.contains("This needs a passkey"), "{linked}");
        assert!(
            !linked.contains("\"callback\"") && !linked.contains("\"form\""),
            "nothing on the card answers: {linked}"
        );
        // Without the inbox's address the form stays; its submission is refused.
        assert!(plain.contains("\"form\""), "{plain}");
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
