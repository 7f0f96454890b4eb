//! What a DingTalk card shows: the variables (`cardParamMap`, every value a string) of the
//! imrelay card template, for an interaction pending or resolved, in Simplified Chinese or
//! English.
//!
//! The template (docs/dingtalk.md) lays them out: `title` in the header, `markdown` as the
//! body, the buttons while `status` is `pending` (Approve and Deny for an approval, one
//! button per option of a single-choice question from `options`, Submit and Decline for the
//! rest), an input box whose text the Deny and Submit buttons send as `text`, and `notice`,
//! which only the person who clicked sees. Every button sends `token`. An interaction that
//! needs a passkey (`step_up`) is answered only in the inbox: its `status` is `step_up`
//! while it waits, which shows none of those buttons, and its one button is the link
//! `step_up_label` → `step_up_url`, to its card in the inbox.
//!
//! Untrusted text (tool input, questions, paths, reasons) is made visible and either placed
//! in a code block whose fences it cannot close or has every markdown character escaped, so
//! it cannot add links, mentions or formatting.

use serde_json::{Map, Value, json};

use super::button::Tokens;
use super::settings::Locale;
use crate::interaction::form::Field;
use crate::interaction::{
    Form, Interaction, Kind, Outcome, PermissionResult, Resolution, clip, parse_questions,
};
use crate::present;
use crate::present::render::{self, cut_note, format_time};

/// Characters of tool input shown before cutting.
pub(crate) const INPUT_CHARS: usize = 3000;
/// Characters of one question, description or answer shown.
const TEXT_CHARS: usize = 600;

/// The actions (button actionIds) of the template.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Action {
    /// Approve the tool call.
    Allow,
    /// Deny it, or decline a question or form; the input box's text is the reason.
    Deny,
    /// Choose option `index` of a single-choice question.
    Pick,
    /// Send the input box's text as the answer (a question) or the fields (a form).
    Submit,
    /// Approve, and grant the session the rule imrelay proposes for similar calls.
    AllowSimilar,
    /// Approve with the input box's text as the command to run instead.
    Edit,
}

impl Action {
    /// The action a button's actionId names.
    pub(super) fn parse(id: &str) -> Option<Self> {
        Some(match id {
            "allow" => Action::Allow,
            "deny" => Action::Deny,
            "pick" => Action::Pick,
            "submit" => Action::Submit,
            "similar" => Action::AllowSimilar,
            "edit" => Action::Edit,
            _ => return None,
        })
    }

    /// Whether a card of an interaction of `kind` carries this button.
    pub(super) fn fits(self, kind: Kind) -> bool {
        match self {
            Action::Allow | Action::AllowSimilar | Action::Edit => kind == Kind::Approval,
            Action::Deny => true,
            Action::Pick => kind == Kind::Question,
            Action::Submit => kind != Kind::Approval,
        }
    }

    /// Whether the card of `i` carries this button: it fits `i`'s kind, and "Allow similar"
    /// and "Edit & approve" only where there is a rule to grant, a command to edit.
    pub(super) fn offered(self, i: &Interaction) -> bool {
        self.fits(i.kind)
            && match self {
                Action::AllowSimilar => render::similar_rule(i).is_some(),
                Action::Edit => render::editable_command(i).is_some(),
                _ => true,
            }
    }
}

/// Outside text as literal markdown: made visible, and a zero-width space put before every
/// character that could start markup (a link, emphasis, code, a heading, a mention, HTML),
/// so it shows as typed and forms nothing. (A backslash escape is not used: card markdown
/// may show the backslash.)
pub(crate) fn escape(text: &str) -> String {
    let visible = present::visible_text(text);
    let mut out = String::with_capacity(visible.len());
    for c in visible.chars() {
        if "`*_[]<>~#|!@".contains(c) {
            out.push('\u{200b}');
        }
        out.push(c);
    }
    out
}

/// Renders cards. Cheap to clone.
#[derive(Clone, Debug)]
pub(crate) struct Cards {
    locale: Locale,
    tokens: Tokens,
    inbox: Option<String>,
}

impl Cards {
    /// Cards in `locale`, their buttons signed by `tokens`, linking to the inbox at `inbox`.
    pub(crate) fn new(locale: Locale, tokens: Tokens, inbox: Option<String>) -> Self {
        Self {
            locale,
            tokens,
            inbox,
        }
    }

    /// The language of the cards.
    pub(crate) fn locale(&self) -> Locale {
        self.locale
    }

    /// The token signer.
    pub(crate) fn tokens(&self) -> &Tokens {
        &self.tokens
    }

    fn t<'a>(&self, zh: &'a str, en: &'a str) -> &'a str {
        if self.locale == Locale::ZhCn { zh } else { en }
    }

    /// The card variables of `i` as it now is.
    pub(crate) fn params(&self, i: &Interaction) -> Map<String, Value> {
        let step_up = self.step_up(i);
        let status = match &i.resolution {
            None if step_up.is_some() => "step_up",
            None => "pending",
            Some(r) => match r.outcome {
                Outcome::Allowed => "allowed",
                Outcome::Denied => "denied",
                Outcome::Answered => "answered",
                Outcome::Expired => "expired",
                Outcome::Cancelled => "cancelled",
            },
        };
        let mut lines = Vec::new();
        self.context(i, &mut lines);
        // The votes so far, when several people decide it.
        if let Some(votes) = render::votes_line(i, self.locale) {
            lines.push(format!("👥 {}", escape(&votes)));
        }
        match i.kind {
            Kind::Approval => self.approval(i, &mut lines),
            Kind::Question => self.question(i, &mut lines),
            Kind::Form => self.form(i, &mut lines),
        }
        if let Some(l) = &step_up {
            lines.push(format!("🔑 {}", escape(&l.why)));
        }
        match &i.resolution {
            None => lines.push(escape(&format!(
                "{}{}",
                self.t(
                    "截止时间（超时自动拒绝）：",
                    "Deadline (denied automatically after): "
                ),
                format_time(i.deadline)
            ))),
            Some(r) => self.resolution(i, r, &mut lines),
        }
        // Answer buttons only while pending and answered here (not only in the inbox).
        let buttons = status == "pending";
        let options = if buttons { self.options(i) } else { json!([]) };
        let s = |v: &str| Value::String(v.to_string());
        let mut p = Map::new();
        p.insert("title".into(), Value::String(self.title(i)));
        p.insert("status".into(), s(status));
        p.insert("kind".into(), s(i.kind.as_str()));
        p.insert("markdown".into(), Value::String(lines.join("\n\n")));
        p.insert(
            "outcome".into(),
            Value::String(
                i.resolution
                    .as_ref()
                    .map_or_else(String::new, |r| render::outcome_phrase_in(r, self.locale)),
            ),
        );
        p.insert("token".into(), Value::String(self.tokens.token(i)));
        p.insert("options".into(), Value::String(options.to_string()));
        p.insert("input_hint".into(), s(self.input_hint(i)));
        self.labels(i, buttons, &mut p);
        p.insert("notice".into(), s(""));
        // The link to its card in the inbox, where only a passkey answers it (empty
        // otherwise: the template shows the link button only when `step_up_url` is set).
        let (label, url) = step_up.map_or((String::new(), String::new()), |l| {
            (l.label.to_string(), l.url)
        });
        p.insert("step_up_label".into(), Value::String(label));
        p.insert("step_up_url".into(), Value::String(url));
        p
    }

    /// The buttons' labels, in `p`; "Allow similar" and "Edit & approve" only when the card
    /// has answer `buttons` and such a button (empty otherwise: the template hides a button
    /// whose label is empty).
    fn labels(&self, i: &Interaction, buttons: bool, p: &mut Map<String, Value>) {
        let s = |v: &str| Value::String(v.to_string());
        p.insert("allow_label".into(), s(self.t("批准", "Approve")));
        p.insert("deny_label".into(), s(self.deny_label(i.kind)));
        p.insert("submit_label".into(), s(self.t("提交", "Submit")));
        let similar = buttons && render::similar_rule(i).is_some();
        p.insert(
            "similar_label".into(),
            s(if similar {
                self.t("批准同类（本会话）", "Allow similar (this session)")
            } else {
                ""
            }),
        );
        let editable = buttons && render::editable_command(i).is_some();
        p.insert(
            "edit_label".into(),
            s(if editable {
                self.t("按输入框的命令批准", "Edit & approve")
            } else {
                ""
            }),
        );
    }

    /// The link `i`'s card shows in place of its answer buttons: `i` is pending, needs a
    /// passkey, and the inbox has an address.
    fn step_up(&self, i: &Interaction) -> Option<render::StepUpLink> {
        render::step_up_link(i, self.inbox.as_deref(), self.locale)
    }

    fn deny_label(&self, kind: Kind) -> &'static str {
        match kind {
            Kind::Approval => self.t("拒绝", "Deny"),
            Kind::Question => self.t("拒绝回答", "Decline to answer"),
            Kind::Form => self.t("拒绝填写", "Decline"),
        }
    }

    fn input_hint(&self, i: &Interaction) -> &'static str {
        match i.kind {
            Kind::Approval if render::editable_command(i).is_some() => self.t(
                "拒绝原因（可选，会告知智能体），或改写后要运行的命令（按输入框的命令批准）",
                "Reason for denying (optional, shown to the agent), or the command to run instead (Edit & approve)",
            ),
            Kind::Approval => self.t(
                "拒绝原因（可选，会告知智能体）",
                "Reason for denying (optional, shown to the agent)",
            ),
            Kind::Question => self.t(
                "你的回答：选项编号或文字，每个问题一行",
                "Your answer: an option's number or your own words, one line per question",
            ),
            Kind::Form if render::single_text_form(i).is_some() => {
                self.t("你的回答", "Your answer")
            }
            Kind::Form => self.t(
                "每个字段一行：字段名: 值",
                "One line per field: name: value",
            ),
        }
    }

    /// The header: "Approve Bash?", "审批请求：Bash · 已批准".
    pub(crate) fn title(&self, i: &Interaction) -> String {
        let base = match i.kind {
            Kind::Approval => format!(
                "{}{}",
                self.t("审批请求：", "Approve "),
                clip(&i.tool_name, 80)
            ),
            Kind::Question => self.t("智能体提问", "Question from the agent").to_string(),
            Kind::Form => match i.title().filter(|t| !t.trim().is_empty()) {
                Some(t) => clip(t, 80),
                None => self.t("请填写表单", "Please fill in").to_string(),
            },
        };
        let base = present::visible_line(&base);
        match &i.resolution {
            None if i.kind == Kind::Approval && self.locale == Locale::EnUs => format!("{base}?"),
            None => base,
            Some(r) => format!(
                "{base} · {}",
                render::outcome_label_in(r.outcome, self.locale)
            ),
        }
    }

    fn context(&self, i: &Interaction, out: &mut Vec<String>) {
        let ctx = render::context_line(i);
        if !ctx.is_empty() {
            out.push(escape(&clip(&ctx, 300)));
        }
        if i.is_pending()
            && let Some(line) = render::escalated_line(i, self.locale)
        {
            out.push(format!("⏫ {}", escape(&line)));
        }
        if i.kind != Kind::Form
            && let Some(t) = i.title().filter(|t| !t.trim().is_empty())
        {
            out.push(format!("**{}**", escape(&clip(t, 200))));
        }
        if let Some(d) = i.description().filter(|d| !d.trim().is_empty()) {
            out.push(escape(&clip(d, TEXT_CHARS)));
        }
    }

    fn approval(&self, i: &Interaction, out: &mut Vec<String>) {
        // The tool call as on every other surface: a command, a diff, a file's first lines.
        let (text, lang) = present::chat_block(&i.tool_name, &i.input.map(), i.cwd.as_deref());
        let excerpt = render::excerpt(&text, INPUT_CHARS);
        out.push(format!(
            "```{lang}\n{}\n```",
            present::break_fences(&excerpt.text)
        ));
        if excerpt.cut > 0 {
            let where_ = match &self.inbox {
                Some(base) => format!("{base}/#{}", i.id),
                None => "imrelay inbox".to_string(),
            };
            out.push(escape(&if self.locale == Locale::ZhCn {
                format!(
                    "输入过长，已省略 {} 个字符（完整内容：{where_}）",
                    excerpt.cut
                )
            } else {
                format!(
                    "Input truncated: {} (all of it: {where_})",
                    cut_note(excerpt.cut)
                )
            }));
        }
        if i.is_pending()
            && self.step_up(i).is_none()
            && let Some(rule) = render::similar_rule(i)
        {
            out.push(escape(&if self.locale == Locale::ZhCn {
                format!("「批准同类」同时允许本会话中的：{rule}")
            } else {
                format!("Allow similar also allows, for this session: {rule}")
            }));
        }
    }

    fn question(&self, i: &Interaction, out: &mut Vec<String>) {
        let questions = parse_questions(&i.input.map()).unwrap_or_default();
        for (n, q) in questions.iter().enumerate() {
            let mut block = vec![format!(
                "**{}. {}** {}",
                n + 1,
                escape(&clip(&q.header, 40)),
                escape(&clip(&q.question, TEXT_CHARS))
            )];
            if i.resolution.is_none() {
                for (j, o) in q.options.iter().enumerate() {
                    let mut line = format!("{}) {}", j + 1, escape(&clip(&o.label, 100)));
                    if let Some(d) = o.description.as_deref().filter(|d| !d.trim().is_empty()) {
                        line.push_str(&format!(" — {}", escape(&clip(d, 200))));
                    }
                    block.push(line);
                }
                if q.multi_select {
                    block.push(escape(self.t(
                        "（可多选：在输入框写编号，用逗号分隔）",
                        "(several may be chosen: type their numbers, separated by commas)",
                    )));
                }
            }
            out.push(block.join("\n\n"));
        }
    }

    fn form(&self, i: &Interaction, out: &mut Vec<String>) {
        let form = match Form::from_input(&i.input.map()) {
            Ok(f) => f,
            Err(e) => return out.push(escape(&e.to_string())),
        };
        out.push(format!("**{}**", escape(&clip(&form.message, TEXT_CHARS))));
        if i.resolution.is_some() {
            return;
        }
        if let Some(field) = form.fields.first().filter(|_| form.is_single_text()) {
            let note = render::single_text_note(field);
            if !note.is_empty() {
                out.push(escape(&clip(&note, 300)));
            }
            return;
        }
        out.push(self.fields(&form.fields));
    }

    fn fields(&self, fields: &[Field]) -> String {
        fields
            .iter()
            .map(|f| {
                let mark = if f.required { " *" } else { "" };
                let mut line = format!("- {}{mark}: {}", f.name, f.hint());
                if f.label() != f.name {
                    line = format!("- {} ({}){mark}: {}", f.name, f.label(), f.hint());
                }
                if !f.options().is_empty() {
                    let choices: Vec<String> = f
                        .options()
                        .iter()
                        .enumerate()
                        .map(|(j, c)| format!("{}) {}", j + 1, c.label))
                        .collect();
                    line.push_str(&format!(" — {}", choices.join(", ")));
                }
                escape(&clip(&line, 400))
            })
            .collect::<Vec<_>>()
            .join("\n\n")
    }

    /// The buttons of a single-choice question: `[{"label", "index"}]`.
    fn options(&self, i: &Interaction) -> Value {
        if i.kind != Kind::Question {
            return json!([]);
        }
        match parse_questions(&i.input.map()).as_deref() {
            Ok([q]) if !q.multi_select => Value::Array(
                q.options
                    .iter()
                    .enumerate()
                    .map(|(j, o)| {
                        json!({"label": present::visible_line(&clip(&o.label, 60)), "index": j.to_string()})
                    })
                    .collect(),
            ),
            _ => json!([]),
        }
    }

    fn resolution(&self, i: &Interaction, r: &Resolution, out: &mut Vec<String>) {
        out.push(format!(
            "**{}** · {}",
            escape(&render::outcome_phrase_in(r, self.locale)),
            escape(&format_time(r.at))
        ));
        for (label, value) in render::form_answers(i) {
            out.push(escape(&format!(
                "{} → {}",
                clip(&label, 60),
                clip(&value, TEXT_CHARS)
            )));
        }
        for (question, answer) in render::given_answers(i) {
            out.push(escape(&format!(
                "{} → {}",
                clip(&question, 100),
                clip(&answer, TEXT_CHARS)
            )));
        }
        let reason = match r.result.permission() {
            Some(PermissionResult::Deny { message, .. }) => Some(message.as_str()),
            _ if i.kind == Kind::Form && r.outcome == Outcome::Denied => r.message(),
            _ => None,
        };
        if let Some(m) = reason.filter(|m| !m.trim().is_empty()) {
            out.push(escape(&format!(
                "{}{}",
                self.t("原因：", "Reason: "),
                clip(m, TEXT_CHARS)
            )));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::interaction::InteractionId;
    use jiff::Timestamp;

    fn cards(locale: Locale) -> Cards {
        Cards::new(locale, Tokens::new(vec![1; 32]), None)
    }

    /// A pending Bash approval `id` of `command`.
    fn bash(id: &str, command: &str) -> Interaction {
        Interaction::pending(
            InteractionId::parse(id).unwrap(),
            "Bash",
            json!({"command": command}).as_object().unwrap().clone(),
            Timestamp::from_millisecond(1_700_000_000_000).unwrap(),
            300,
        )
    }

    #[test]
    fn untrusted_text_cannot_format_or_close_the_code_block() {
        assert_eq!(
            escape("[x](http://e) @all **b**"),
            "\u{200b}[x\u{200b}](http://e) \u{200b}@all \u{200b}*\u{200b}*b\u{200b}*\u{200b}*"
        );
        let i = Interaction::pending(
            InteractionId::parse("t1").unwrap(),
            "Bash",
            json!({"command": "echo ```\n# hi"})
                .as_object()
                .unwrap()
                .clone(),
            Timestamp::from_millisecond(1_700_000_000_000).unwrap(),
            300,
        );
        let p = cards(Locale::EnUs).params(&i);
        let md = p["markdown"].as_str().unwrap();
        assert_eq!(md.matches("```").count(), 2, "{md}");
        assert_eq!(p["title"], "Approve Bash?");
        assert_eq!(p["status"], "pending");
        assert!(p.values().all(Value::is_string), "{p:?}");
        let zh = cards(Locale::ZhCn).params(&i);
        assert_eq!(zh["title"], "审批请求：Bash");
        assert_eq!(zh["deny_label"], "拒绝");
    }

    #[test]
    fn a_card_several_people_decide_shows_the_votes_so_far() {
        let mut i = bash("t2", "make deploy");
        i.set_quorum(Some(crate::interaction::quorum::Quorum {
            allow: 2,
            deny: 1,
        }));
        i.set_votes(vec![crate::interaction::quorum::Vote {
            person: "alice".into(),
            by: "alice".into(),
            via: crate::interaction::Via::new("telegram"),
            allow: true,
            at: Timestamp::from_millisecond(1_700_000_001_000).unwrap(),
        }]);
        let md = cards(Locale::EnUs).params(&i)["markdown"]
            .as_str()
            .unwrap()
            .replace('\u{200b}', "");
        assert!(
            md.contains("Needs 2 people · votes: 1 of 2: alice via telegram"),
            "{md}"
        );
    }

    #[test]
    fn a_step_up_approval_shows_only_the_link_to_its_inbox_card() {
        use crate::interaction::routes::RouteStamp;
        let mut i = bash("t3", "make deploy-prod");
        i.route = Some(std::sync::Arc::new(RouteStamp {
            name: "prod".into(),
            step_up: true,
            ..RouteStamp::default_route()
        }));
        let inbox = Some("https://relay.example.com/".to_string());
        let p = Cards::new(Locale::EnUs, Tokens::new(vec![1; 32]), inbox).params(&i);
        assert_eq!(p["status"], "step_up");
        assert_eq!(p["step_up_label"], "🔑 Answer in the inbox");
        assert_eq!(p["step_up_url"], "https://relay.example.com/#t3");
        assert_eq!(p["similar_label"], "");
        assert_eq!(p["edit_label"], "");
        let md = p["markdown"].as_str().unwrap().replace('\u{200b}', "");
        assert!(
            md.contains("🔑 This needs a passkey (route \"prod\"): open it in the imrelay inbox"),
            "{md}"
        );
        // Without the inbox's address: the buttons stay (a click is refused with the same
        // words), and no link.
        let p = cards(Locale::EnUs).params(&i);
        assert_eq!(p["status"], "pending");
        assert_eq!(p["step_up_url"], "");
    }

    #[test]
    fn actions_fit_their_kinds() {
        assert!(Action::Allow.fits(Kind::Approval));
        assert!(!Action::Allow.fits(Kind::Question));
        assert!(!Action::Submit.fits(Kind::Approval));
        assert!(Action::Pick.fits(Kind::Question) && !Action::Pick.fits(Kind::Form));
        assert_eq!(Action::parse("pick"), Some(Action::Pick));
        assert_eq!(Action::parse("other"), None);
    }
}
