//! The template cards people see in WeCom, in Chinese or English: an approval as a
//! `button_interaction` card (批准 / 拒绝), a one-question question as one button per option,
//! other questions and small forms as a `multiple_interaction` card of select lists; an
//! approval that needs a passkey (`step_up`) as a `text_notice` card whose only action opens
//! its card in the inbox; the same card showing its outcome once answered; the clicker's own copy with what became of
//! their click; and the markdown note that tells a chat the outcome when its card cannot be
//! changed (WeCom lets a bot update a card only in answer to a click on it).

use serde_json::{Map, Value, json};

use super::button::{Action, Keys};
use super::settings::Locale;
use crate::interaction::form::FieldType;
use crate::interaction::{Form, Interaction, Kind, parse_questions};
use crate::present::render::{self as shared, outcome_label_in, outcome_phrase_in};
use crate::present::visible_line;

/// Characters of a card's title and its description (what WeCom's card reference suggests:
/// longer ones are cut on the phone).
const TITLE_CHARS: usize = 26;
const DESC_CHARS: usize = 30;
/// Characters of the card's body text and of its quote.
const BODY_CHARS: usize = 112;
/// Characters of a key-value line's value.
const VALUE_CHARS: usize = 26;
/// Characters of a button, a select list's option and a link.
const OPTION_CHARS: usize = 10;
/// Characters of a select list's title.
const SELECT_TITLE_CHARS: usize = 13;
/// Characters of a markdown note's excerpt of the call.
const NOTE_CHARS: usize = 600;
/// Select lists a `multiple_interaction` card holds.
const MAX_SELECTS: usize = 3;

/// Renders cards for one locale, signing their buttons.
#[derive(Clone, Debug)]
pub(crate) struct Cards {
    locale: Locale,
    keys: Keys,
    inbox: Option<String>,
}

/// `text` cut to `max` characters, with `…` where it was cut.
fn cut(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_string();
    }
    let mut s: String = text.chars().take(max.saturating_sub(1)).collect();
    s.push('…');
    s
}

impl Cards {
    /// Cards in `locale` whose buttons carry keys made by `keys`; `inbox`, the web inbox's
    /// address, is linked from cards that cannot take the whole answer.
    pub(crate) fn new(locale: Locale, keys: Keys, inbox: Option<String>) -> Self {
        Self {
            locale,
            keys,
            inbox,
        }
    }

    /// The locale.
    pub(crate) fn locale(&self) -> Locale {
        self.locale
    }

    /// The button keys.
    pub(crate) fn keys(&self) -> &Keys {
        &self.keys
    }

    fn colon(&self) -> &'static str {
        if self.locale == Locale::ZhCn {
            "："
        } else {
            ": "
        }
    }

    fn t(&self, zh: &str, en: &str) -> String {
        if self.locale == Locale::ZhCn { zh } else { en }.to_string()
    }

    /// The card of `i` in `chat`: its buttons while pending, its outcome once resolved.
    pub(crate) fn card(&self, i: &Interaction, chat: &str) -> Value {
        let task_id = Keys::task_id(i, chat);
        match &i.resolution {
            None => self.pending(i, &task_id, None),
            Some(_) => self.resolved(i, &task_id),
        }
    }

    /// The pending card of `i` as the person who clicked `task_id` sees it after a click
    /// that changed nothing: `feedback` says why.
    pub(crate) fn with_feedback(&self, i: &Interaction, task_id: &str, feedback: &str) -> Value {
        match &i.resolution {
            None => self.pending(i, task_id, Some(feedback)),
            Some(_) => self.resolved(i, task_id),
        }
    }

    /// A card for a click on a card whose interaction is gone or whose button failed its
    /// check: `feedback` and nothing to press.
    pub(crate) fn notice(&self, task_id: &str, feedback: &str) -> Value {
        json!({
            "card_type": "button_interaction",
            "task_id": task_id,
            "source": {"desc": "imrelay"},
            "main_title": {"title": self.t("imrelay：无法处理", "imrelay: not taken")},
            "sub_title_text": cut(feedback, BODY_CHARS),
            "button_list": [{"text": self.t("无效", "Not valid"), "style": 2, "key": "noop"}],
        })
    }

    fn heading(&self, i: &Interaction) -> String {
        let what = match i.kind {
            Kind::Approval => self.t("需要批准", "Approval needed"),
            Kind::Question => self.t("需要回答", "Question"),
            Kind::Form => self.t("需要填写", "Form"),
        };
        let tool = i.title().unwrap_or(&i.tool_name);
        cut(
            &format!("{what}{}{}", self.colon(), visible_line(tool)),
            TITLE_CHARS,
        )
    }

    /// What the call does, as plain text (the command, the diff, the question).
    fn body(&self, i: &Interaction) -> String {
        match i.kind {
            Kind::Approval => {
                let (text, _) =
                    crate::present::chat_block(&i.tool_name, &i.input.map(), i.cwd.as_deref());
                text
            }
            Kind::Question => parse_questions(&i.input.map())
                .map(|qs| {
                    qs.iter()
                        .map(|q| visible_line(&q.question))
                        .collect::<Vec<_>>()
                        .join("\n")
                })
                .unwrap_or_default(),
            Kind::Form => Form::from_input(&i.input.map())
                .map(|f| visible_line(&f.message))
                .unwrap_or_default(),
        }
    }

    fn base(
        &self,
        i: &Interaction,
        task_id: &str,
        title: String,
        desc: String,
    ) -> Map<String, Value> {
        let mut card = Map::new();
        card.insert("task_id".into(), json!(task_id));
        card.insert("source".into(), json!({"desc": "imrelay"}));
        card.insert(
            "main_title".into(),
            json!({"title": title, "desc": cut(&desc, DESC_CHARS)}),
        );
        card.insert(
            "sub_title_text".into(),
            json!(cut(&self.body(i), BODY_CHARS)),
        );
        let until = shared::format_time(i.deadline);
        card.insert(
            "horizontal_content_list".into(),
            json!([
                {"keyname": self.t("工具", "Tool"), "value": cut(&visible_line(&i.tool_name), VALUE_CHARS)},
                {"keyname": self.t("截止", "Until"), "value": until},
            ]),
        );
        if let Some(inbox) = &self.inbox {
            card.insert(
                "jump_list".into(),
                json!([{"type": 1, "title": self.t("在收件箱查看", "Open inbox"), "url": inbox}]),
            );
        }
        card
    }

    fn pending(&self, i: &Interaction, task_id: &str, feedback: Option<&str>) -> Value {
        let mut card = self.base(i, task_id, self.heading(i), shared::context_line(i));
        // Why it came here late (nobody on its route answered in time), and what became of
        // the click: above what the card asks.
        let escalated = shared::escalated_line(i, self.locale).map(|l| format!("⏫ {l}"));
        let feedback = feedback.map(|f| format!("⚠ {f}"));
        // The votes so far, when several people decide it.
        let votes = shared::votes_line(i, self.locale).map(|v| format!("👥 {}", visible_line(&v)));
        let above: Vec<String> = feedback.into_iter().chain(escalated).chain(votes).collect();
        if !above.is_empty() {
            let body = format!("{}\n{}", above.join("\n"), self.body(i));
            card.insert("sub_title_text".into(), json!(cut(&body, BODY_CHARS)));
        }
        if let Some(l) = shared::step_up_link(i, self.inbox.as_deref(), self.locale) {
            return step_up(card, l);
        }
        let typed = self.typed_hint(i);
        if let Some(hint) = typed {
            card.insert("quote_area".into(), json!({"type": 0, "quote_text": hint}));
        }
        let key = |a: Action| self.keys.key(i, task_id, a);
        let deny = json!({"text": self.t("拒绝", "Deny"), "style": 2, "key": key(Action::Deny)});
        match i.kind {
            Kind::Approval => {
                let mut buttons = vec![
                    json!({"text": self.t("批准", "Allow"), "style": 1, "key": key(Action::Allow)}),
                ];
                // "Allow similar": the rule it adds is in the card's text.
                if let Some(rule) = shared::similar_rule(i) {
                    buttons.push(json!({"text": self.t("批准同类", "Allow similar"), "style": 1, "key": key(Action::AllowSimilar)}));
                    let line = if self.locale == Locale::ZhCn {
                        format!("「批准同类」同时允许本会话中的：{rule}")
                    } else {
                        format!("Allow similar also allows, for this session: {rule}")
                    };
                    let body = card
                        .get("sub_title_text")
                        .and_then(Value::as_str)
                        .unwrap_or_default();
                    let body = format!("{}\n{}", visible_line(&line), body);
                    card.insert("sub_title_text".into(), json!(cut(&body, BODY_CHARS)));
                }
                buttons.push(deny);
                card.insert("card_type".into(), json!("button_interaction"));
                card.insert("button_list".into(), json!(buttons));
            }
            Kind::Question | Kind::Form => {
                let selects = self.selects(i);
                match selects {
                    Some(Selects::Buttons(labels)) => {
                        let mut buttons: Vec<Value> = labels
                            .iter()
                            .enumerate()
                            .map(|(n, l)| json!({"text": cut(l, OPTION_CHARS), "style": 1, "key": key(Action::Choose(n))}))
                            .collect();
                        buttons.push(deny);
                        card.insert("card_type".into(), json!("button_interaction"));
                        card.insert("button_list".into(), json!(buttons));
                    }
                    Some(Selects::Lists(lists)) => {
                        card.insert("card_type".into(), json!("multiple_interaction"));
                        card.insert("select_list".into(), json!(lists));
                        card.insert(
                            "submit_button".into(),
                            json!({"text": self.t("提交", "Submit"), "key": key(Action::Submit)}),
                        );
                    }
                    None => {
                        // Free text WeCom cards cannot take: typed, or in the inbox.
                        card.insert("card_type".into(), json!("button_interaction"));
                        card.insert("button_list".into(), json!([deny]));
                    }
                }
            }
        }
        Value::Object(card)
    }

    /// How a person answers in words: `拒绝 <handle> 理由` for a reason, `回答 <handle> …`
    /// for a question's own answer.
    fn typed_hint(&self, i: &Interaction) -> Option<String> {
        let h = self.keys.handle(i);
        Some(match i.kind {
            Kind::Approval if shared::editable_command(i).is_some() => self.t(
                &format!(
                    "附理由拒绝：@机器人 发送「拒绝 {h} 理由」；改写命令后批准：发送「编辑 {h} 新命令」"
                ),
                &format!(
                    "To deny with a reason, message the bot: deny {h} <reason>; to approve an edited command: edit {h} <command>"
                ),
            ),
            Kind::Approval => self.t(
                &format!("附理由拒绝：@机器人 发送「拒绝 {h} 理由」"),
                &format!("To deny with a reason, message the bot: deny {h} <reason>"),
            ),
            Kind::Question => self.t(
                &format!("自己作答：@机器人 发送「回答 {h} 内容」"),
                &format!("To answer in your own words, message the bot: answer {h} <text>"),
            ),
            Kind::Form if self.selects(i).is_none() => match &self.inbox {
                Some(_) => self.t("此表单请在收件箱中填写", "Fill this form in the inbox"),
                None => self.t(
                    "此表单无法在企业微信中填写",
                    "This form cannot be filled in WeCom",
                ),
            },
            Kind::Form => return None,
        })
    }

    /// The choices a question or form offers on a card, if they fit one.
    fn selects(&self, i: &Interaction) -> Option<Selects> {
        match i.kind {
            Kind::Approval => None,
            Kind::Question => {
                let qs = parse_questions(&i.input.map()).ok()?;
                if let [q] = qs.as_slice()
                    && !q.multi_select
                {
                    return Some(Selects::Buttons(
                        q.options.iter().map(|o| visible_line(&o.label)).collect(),
                    ));
                }
                if qs.len() > MAX_SELECTS || qs.iter().any(|q| q.multi_select) {
                    return None;
                }
                let lists = qs
                    .iter()
                    .enumerate()
                    .map(|(n, q)| select(n, &q.header, q.options.iter().map(|o| o.label.as_str())))
                    .collect();
                Some(Selects::Lists(lists))
            }
            Kind::Form => {
                let form = Form::from_input(&i.input.map()).ok()?;
                if form.fields.is_empty() || form.fields.len() > MAX_SELECTS {
                    return None;
                }
                let yes_no = [self.t("是", "Yes"), self.t("否", "No")];
                let mut lists = Vec::new();
                for (n, f) in form.fields.iter().enumerate() {
                    let list = match &f.ty {
                        FieldType::Choice { options } => {
                            select(n, f.label(), options.iter().map(|c| c.label.as_str()))
                        }
                        FieldType::Boolean => {
                            select(n, f.label(), yes_no.iter().map(String::as_str))
                        }
                        _ => return None,
                    };
                    lists.push(list);
                }
                Some(Selects::Lists(lists))
            }
        }
    }

    fn resolved(&self, i: &Interaction, task_id: &str) -> Value {
        let Some(r) = &i.resolution else {
            return self.pending(i, task_id, None);
        };
        let label = outcome_label_in(r.outcome, self.locale);
        let mut card = self.base(
            i,
            task_id,
            cut(
                &format!(
                    "{label}{}{}",
                    self.colon(),
                    visible_line(i.title().unwrap_or(&i.tool_name))
                ),
                TITLE_CHARS,
            ),
            outcome_phrase_in(r, self.locale),
        );
        let mut answers = shared::given_answers(i);
        answers.extend(shared::form_answers(i));
        if let Some(reason) = r.message() {
            answers.push((self.t("理由", "Reason"), reason.to_string()));
        }
        if !answers.is_empty() {
            let lines: Vec<String> = answers
                .iter()
                .map(|(k, v)| format!("{}: {}", visible_line(k), visible_line(v)))
                .collect();
            card.insert(
                "quote_area".into(),
                json!({"type": 0, "quote_text": cut(&lines.join("\n"), BODY_CHARS)}),
            );
        }
        card.insert(
            "horizontal_content_list".into(),
            json!([
                {"keyname": self.t("工具", "Tool"), "value": cut(&visible_line(&i.tool_name), VALUE_CHARS)},
                {"keyname": self.t("处理于", "At"), "value": shared::format_time(r.at)},
            ]),
        );
        card.insert("card_type".into(), json!("button_interaction"));
        card.insert(
            "button_list".into(),
            json!([{"text": cut(label, OPTION_CHARS), "style": 2, "key": "done"}]),
        );
        Value::Object(card)
    }

    /// The markdown note that tells a chat the outcome of `i`, whose card there cannot be
    /// changed any more.
    pub(crate) fn note(&self, i: &Interaction) -> Value {
        let outcome = i
            .resolution
            .as_ref()
            .map(|r| outcome_phrase_in(r, self.locale))
            .unwrap_or_default();
        let icon = match i.resolution.as_ref().map(|r| r.outcome) {
            Some(crate::interaction::Outcome::Allowed | crate::interaction::Outcome::Answered) => {
                "✅"
            }
            _ => "⛔",
        };
        let tool = visible_line(i.title().unwrap_or(&i.tool_name));
        let body = cut(&self.body(i), NOTE_CHARS).replace("```", "'''");
        let mut content = format!(
            "{icon} **{}**{}{tool}\n> {}",
            markdown(&outcome),
            self.colon(),
            markdown(&shared::context_line(i))
        );
        if let Some(reason) = i.resolution.as_ref().and_then(|r| r.message()) {
            content.push_str(&format!(
                "\n> {}{}{}",
                self.t("理由", "Reason"),
                self.colon(),
                markdown(reason)
            ));
        }
        content.push_str(&format!("\n```\n{body}\n```"));
        json!({"msgtype": "markdown", "markdown": {"content": content}})
    }

    /// The reply to a typed answer (`aibot_respond_msg`): a finished stream message.
    pub(crate) fn reply_text(&self, text: &str) -> Value {
        json!({"msgtype": "stream", "stream": {"id": super::bot::req_id("imrelay"), "finish": true, "content": markdown(text)}})
    }

    /// As [`Cards::reply_text`], keeping `text`'s lines (each made visible and escaped).
    pub(crate) fn reply_lines(&self, text: &str) -> Value {
        let content: Vec<String> = text.lines().map(markdown).collect();
        json!({"msgtype": "stream", "stream": {"id": super::bot::req_id("imrelay"), "finish": true, "content": content.join("\n")}})
    }
}

/// `card` as the card of an interaction that needs a passkey: only the inbox answers it, so
/// the card links its card there (the whole card and its jump link), says why, and offers
/// nothing to press. WeCom's smart-bot buttons are callbacks only (`text`, `style`, `key`),
/// so the link cannot be a button.
fn step_up(mut card: Map<String, Value>, l: shared::StepUpLink) -> Value {
    card.insert("card_type".into(), json!("text_notice"));
    card.insert(
        "quote_area".into(),
        json!({"type": 0, "quote_text": cut(&format!("🔑 {}", l.why), BODY_CHARS)}),
    );
    card.insert("card_action".into(), json!({"type": 1, "url": l.url}));
    card.insert(
        "jump_list".into(),
        json!([{"type": 1, "title": l.label, "url": l.url}]),
    );
    Value::Object(card)
}

/// What a card offers to choose.
enum Selects {
    /// One button per option.
    Buttons(Vec<String>),
    /// Select lists (`question_key` `q<n>`, option ids `<n>`).
    Lists(Vec<Value>),
}

/// A select list for question or field `n`.
fn select<'a>(n: usize, title: &str, options: impl Iterator<Item = &'a str>) -> Value {
    let options: Vec<Value> = options
        .enumerate()
        .map(|(j, l)| json!({"id": j.to_string(), "text": cut(&visible_line(l), OPTION_CHARS)}))
        .collect();
    json!({"question_key": format!("q{n}"), "title": cut(&visible_line(title), SELECT_TITLE_CHARS), "option_list": options})
}

/// Outside text made safe in WeCom markdown: visible, and no markup of its own.
fn markdown(text: &str) -> String {
    visible_line(text)
        .chars()
        .flat_map(|c| match c {
            '*' | '_' | '`' | '[' | ']' | '<' | '>' | '#' => vec!['\\', c],
            c => vec![c],
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::interaction::{InteractionId, Outcome, PermissionResult, Resolution, Via};

    fn bash(command: &str) -> Interaction {
        let mut input = Map::new();
        input.insert("command".into(), json!(command));
        let mut i = Interaction::pending(
            InteractionId::parse("toolu_1").unwrap(),
            "Bash",
            input,
            jiff::Timestamp::from_millisecond(1_700_000_000_000).unwrap(),
            300,
        );
        i.cwd = Some("/srv/shop".into());
        i
    }

    #[test]
    fn an_approval_reads_as_a_person_expects_in_chinese() {
        let cards = Cards::new(Locale::ZhCn, Keys::new(vec![7; 32]), None);
        let i = bash("cargo test --workspace");
        let card = cards.card(&i, "wrkA");
        assert_eq!(card["card_type"], "button_interaction");
        assert_eq!(card["main_title"]["title"], "需要批准：Bash");
        assert_eq!(card["sub_title_text"], "cargo test --workspace");
        assert_eq!(card["button_list"][0]["text"], "批准");
        assert_eq!(card["button_list"][1]["text"], "拒绝");
        let hint = card["quote_area"]["quote_text"].as_str().unwrap();
        assert!(
            hint.starts_with("附理由拒绝：@机器人 发送「拒绝 "),
            "{hint}"
        );
        let r = i.resolved(Resolution {
            outcome: Outcome::Allowed,
            by: Some("lisi".into()),
            via: Via::new("telegram"),
            at: jiff::Timestamp::from_millisecond(1_700_000_060_000).unwrap(),
            result: PermissionResult::Allow {
                updated_input: i.input.clone(),
                updated_permissions: None,
            }
            .into(),
        });
        let done = cards.card(&r, "wrkA");
        assert_eq!(done["main_title"]["title"], "已批准：Bash");
        assert_eq!(done["main_title"]["desc"], "由 lisi 通过 telegram 批准");
        assert_eq!(done["task_id"], card["task_id"]);
        let note = cards.note(&r)["markdown"]["content"]
            .as_str()
            .unwrap()
            .to_string();
        assert!(
            note.starts_with("✅ **由 lisi 通过 telegram 批准**：Bash"),
            "{note}"
        );
    }

    #[test]
    fn a_card_several_people_decide_shows_the_votes_so_far() {
        let cards = Cards::new(Locale::EnUs, Keys::new(vec![7; 32]), None);
        let mut i = bash("make deploy");
        i.set_quorum(Some(crate::interaction::quorum::Quorum {
            allow: 2,
            deny: 1,
        }));
        i.set_votes(vec![crate::interaction::quorum::Vote {
            person: "alice".into(),
            by: "alice".into(),
            via: Via::new("telegram"),
            allow: true,
            at: jiff::Timestamp::from_millisecond(1_700_000_001_000).unwrap(),
        }]);
        let card = cards.card(&i, "wrkA");
        let body = card["sub_title_text"].as_str().unwrap();
        assert!(
            body.contains("Needs 2 people · votes: 1 of 2: alice via telegram"),
            "{body}"
        );
        assert!(body.contains("make deploy"), "{body}");
    }

    #[test]
    fn an_escalated_card_says_why_above_the_call() {
        use crate::interaction::routes::{Escalation, RouteStamp};
        let cards = Cards::new(Locale::ZhCn, Keys::new(vec![7; 32]), None);
        let mut i = bash("make shop");
        i.route = Some(std::sync::Arc::new(RouteStamp {
            name: "shop".into(),
            targets: None,
            approvers: Vec::new(),
            escalation: Some(Escalation {
                after_secs: 300,
                targets: Vec::new(),
                approvers: Vec::new(),
                through_quiet: false,
            }),
            ..RouteStamp::default_route()
        }));
        assert_eq!(cards.card(&i, "wrkA")["sub_title_text"], "make shop");
        i.set_escalated_at(Some(
            jiff::Timestamp::from_millisecond(1_700_000_300_000).unwrap(),
        ));
        assert_eq!(
            cards.card(&i, "wrkA")["sub_title_text"],
            "⏫ 已升级：路由 shop 上 5 分钟 内无人回答\nmake shop"
        );
    }

    #[test]
    fn a_step_up_approval_links_its_inbox_card_and_offers_nothing_to_press() {
        use crate::interaction::routes::RouteStamp;
        let inbox = Some("https://relay.example.com".to_string());
        let cards = Cards::new(Locale::ZhCn, Keys::new(vec![7; 32]), inbox);
        let mut i = bash("make deploy-prod");
        i.route = Some(std::sync::Arc::new(RouteStamp {
            name: "prod".into(),
            step_up: true,
            ..RouteStamp::default_route()
        }));
        let card = cards.card(&i, "wrkA");
        assert_eq!(card["card_type"], "text_notice");
        assert!(card.get("button_list").is_none(), "{card}");
        assert_eq!(
            card["card_action"],
            json!({"type": 1, "url": "https://relay.example.com/#toolu_1"})
        );
        assert_eq!(
            card["jump_list"],
            json!([{"type": 1, "title": "🔑 在收件箱中回答", "url": "https://relay.example.com/#toolu_1"}])
        );
        let why = card["quote_area"]["quote_text"].as_str().unwrap();
        assert!(
            why.starts_with("🔑 此请求（路由「prod」）需要通行密钥"),
            "{why}"
        );
        assert_eq!(card["sub_title_text"], "make deploy-prod");
        // Without the inbox's address there is nothing to link: the buttons stay, and a
        // click on one is refused with the same words.
        let cards = Cards::new(Locale::ZhCn, Keys::new(vec![7; 32]), None);
        assert_eq!(cards.card(&i, "wrkA")["card_type"], "button_interaction");
    }

    #[test]
    fn outside_text_cannot_add_markup_to_a_note() {
        assert_eq!(
            markdown("**bold** [x](y) `c`"),
            "\\*\\*bold\\*\\* \\[x\\](y) \\`c\\`"
        );
        assert_eq!(cut("abcdef", 4), "abc…");
    }
}
