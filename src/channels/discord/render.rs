//! Discord messages and modals for every state of an interaction: the prompt with its
//! components (buttons for an approval, a select menu for a question, a button opening a
//! modal for a form), the outcome once it is resolved, and the modals with text inputs that
//! take a reason, an edited command, a typed answer or a form.
//!
//! Untrusted text (tool input, questions, names, reasons) is shown either inside a code block
//! whose fences it cannot close (`present::break_fences`), or with Discord's markdown
//! characters escaped; every message says `allowed_mentions: {"parse": []}`, so nothing in it
//! notifies anyone. Discord's limits are kept: 2,000 characters of content (the tool call is
//! cut, with a link to the inbox for the rest), 5 buttons a row, 25 options of 100
//! characters in a select, 80-character labels, 45-character modal titles and input labels,
//! 5 text inputs a modal, 4,000 characters an input.

use serde_json::{Value, json};

pub use super::button::editable_command;
use super::button::{Action, Buttons};
use crate::channels::words::Words;
use crate::interaction::form::FieldType;
use crate::interaction::{Form, Interaction, Kind, Outcome, PermissionResult, parse_questions};
use crate::present;
use crate::present::render::{self, Locale, format_time};

/// Most characters of a message's content.
pub const MAX_CONTENT: usize = 2000;
/// Most characters of a button's label.
pub const MAX_LABEL: usize = 80;
/// Most characters of a select option's label, value and description.
pub const MAX_OPTION: usize = 100;
/// Most options in a select menu.
pub const MAX_OPTIONS: usize = 25;
/// Most characters of a modal's title and of a text input's label.
pub const MAX_MODAL_LABEL: usize = 45;
/// Most text inputs (each in its row) in a modal.
pub const MAX_INPUTS: usize = 5;
/// Most characters in a text input.
pub const MAX_INPUT: usize = 4000;

/// The `custom_id` of the text input that holds a reason.
pub const REASON_INPUT: &str = "reason";
/// The `custom_id` of the text input that holds the edited command.
pub const COMMAND_INPUT: &str = "command";
/// The `custom_id` of the text input that holds a typed answer (`q<n>` for question `n`).
pub const ANSWER_INPUT: &str = "q";
/// The `custom_id` prefix of a form field's text input (`f<n>` for field `n`).
pub const FIELD_INPUT: &str = "f";

/// `s` with hidden characters shown and cut to `max` characters.
fn cut(s: &str, max: usize) -> String {
    crate::interaction::clip(&present::visible_text(s), max)
}

/// `s` as Discord's markdown shows it literally: every character that formats, quotes,
/// links or mentions escaped with a backslash.
pub fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in present::visible_text(s).chars() {
        if matches!(
            c,
            '\\' | '*'
                | '_'
                | '~'
                | '`'
                | '|'
                | '>'
                | '<'
                | '#'
                | '-'
                | '['
                | ']'
                | '('
                | ')'
                | '@'
                | ':'
                | '!'
        ) {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// Renders messages and modals.
#[derive(Clone, Debug)]
pub struct Render {
    /// Signs the `custom_id`s.
    pub buttons: Buttons,
    inbox: Option<String>,
    locale: Locale,
}

fn row(components: Vec<Value>) -> Value {
    json!({"type": 1, "components": components})
}

/// The icon of an outcome.
fn outcome_icon(o: Outcome) -> &'static str {
    match o {
        Outcome::Allowed | Outcome::Answered => "✅",
        Outcome::Denied => "⛔",
        Outcome::Expired => "⌛",
        Outcome::Cancelled => "✖️",
    }
}

impl Render {
    /// Messages whose components are signed by `buttons`, linking to the inbox at `inbox`.
    pub fn new(buttons: Buttons, inbox: Option<String>, locale: Locale) -> Self {
        Self {
            buttons,
            inbox,
            locale,
        }
    }

    /// The locale of messages and notices.
    pub fn locale(&self) -> Locale {
        self.locale
    }

    /// The prompt's words in that locale.
    fn words(&self) -> Words {
        Words(self.locale)
    }

    fn button(&self, i: &Interaction, action: Action, label: &str, style: u8) -> Value {
        json!({"type": 2, "style": style, "label": cut(label, MAX_LABEL),
            "custom_id": self.buttons.custom_id(i, action)})
    }

    /// A link to `i` in the inbox, when there is one.
    fn link(&self, i: &Interaction) -> Option<String> {
        self.inbox.as_ref().map(|base| format!("{base}/#{}", i.id))
    }

    /// The message for `i` as it stands: a JSON body for create and edit.
    pub fn message(&self, i: &Interaction) -> Value {
        let w = self.words();
        let mut head = Vec::new();
        match &i.resolution {
            None if i.kind == Kind::Approval => head.push(format!(
                "**{}{}**",
                escape(&title_base(i, w)),
                w.pick("？", "?")
            )),
            None => head.push(format!("**{}**", escape(&title_base(i, w)))),
            Some(r) => head.push(format!(
                "{} **{} · {}**",
                outcome_icon(r.outcome),
                escape(&resolved_title(i, w)),
                render::outcome_label_in(r.outcome, self.locale)
            )),
        }
        let ctx = render::context_line(i);
        if !ctx.is_empty() {
            head.push(format!("-# {}", escape(&cut(&ctx, 300))));
        }
        if i.is_pending()
            && let Some(line) = render::escalated_line(i, self.locale)
        {
            head.push(format!("⏫ {}", escape(&line)));
        }
        if let Some(t) = i.title().filter(|t| !t.trim().is_empty())
            && i.kind != Kind::Form
        {
            head.push(escape(&cut(t, 300)));
        }
        if let Some(d) = i.description().filter(|d| !d.trim().is_empty()) {
            head.push(escape(&cut(d, 300)));
        }
        let mut tail = Vec::new();
        match &i.resolution {
            None => tail.push(format!("-# {}", w.deadline(&format_time(i.deadline)))),
            Some(r) => {
                tail.push(escape(&format!(
                    "{} · {}",
                    render::outcome_phrase_in(r, self.locale),
                    format_time(r.at)
                )));
                tail.extend(resolution_details(i, w));
            }
        }
        if let Some(votes) = render::votes_line(i, self.locale) {
            tail.push(format!("-# {}", escape(&votes)));
        }
        tail.extend(self.pending_notes(i, w));
        let body = self.body(i, head.join("\n").len() + tail.join("\n").len() + 8);
        let content = [head.join("\n"), body, tail.join("\n")]
            .into_iter()
            .filter(|s| !s.is_empty())
            .collect::<Vec<_>>()
            .join("\n");
        let components = if i.is_pending() {
            self.components(i)
        } else {
            Vec::new()
        };
        json!({
            "content": crate::interaction::clip(&content, MAX_CONTENT),
            "components": components,
            "allowed_mentions": {"parse": []},
        })
    }

    /// What a pending interaction's buttons do besides answering: the rule "Allow similar"
    /// adds, in full (as code, which shows it as written; a rule with a backtick is escaped
    /// instead), or, when it needs a passkey, why its one button opens the inbox.
    fn pending_notes(&self, i: &Interaction, w: Words) -> Vec<String> {
        let mut out = Vec::new();
        let step_up = render::step_up_link(i, self.inbox.as_deref(), self.locale);
        if let Some(rule) = render::similar_rule(i).filter(|_| i.is_pending() && step_up.is_none())
        {
            let rule = crate::interaction::clip(&present::visible_text(&rule), 200);
            let shown = if rule.contains('`') {
                escape(&rule)
            } else {
                format!("`{rule}`")
            };
            out.push(format!("-# {}{shown}", escape(w.similar_note())));
        }
        if let Some(l) = step_up {
            out.push(format!("🔑 {}", escape(&l.why)));
        }
        out
    }

    /// The middle of the message: the tool call, the questions or the form, within what
    /// `used` characters leave of the content.
    fn body(&self, i: &Interaction, used: usize) -> String {
        let budget = MAX_CONTENT.saturating_sub(used + 250).max(200);
        match i.kind {
            Kind::Approval => {
                let (text, lang) =
                    present::chat_block(&i.tool_name, &i.input.map(), i.cwd.as_deref());
                let excerpt = render::excerpt(&text, budget);
                let mut out = format!(
                    "```{lang}\n{}\n```",
                    present::break_fences(&present::visible_text(&excerpt.text))
                );
                if excerpt.cut > 0 {
                    out.push_str(&self.cut_notice(i, excerpt.cut));
                }
                out
            }
            Kind::Question => {
                let mut out = Vec::new();
                for q in parse_questions(&i.input.map()).unwrap_or_default() {
                    out.push(format!("**{}**", escape(&cut(&q.question, 300))));
                    for (n, o) in q.options.iter().enumerate() {
                        let desc = o
                            .description
                            .as_deref()
                            .map(|d| format!(" — {}", escape(&cut(d, 150))))
                            .unwrap_or_default();
                        out.push(format!("{}. {}{desc}", n + 1, escape(&cut(&o.label, 100))));
                    }
                }
                crate::interaction::clip(&out.join("\n"), budget)
            }
            Kind::Form => match Form::from_input(&i.input.map()) {
                Ok(form) => {
                    let mut out = vec![escape(&cut(&form.message, 500))];
                    for f in &form.fields {
                        let req = if f.required {
                            self.words().pick("（必填）", " (required)")
                        } else {
                            ""
                        };
                        out.push(format!("• {}{req}", escape(&cut(f.label(), 100))));
                    }
                    if form.fields.len() > MAX_INPUTS && i.is_pending() {
                        out.push(match self.link(i) {
                            Some(url) => format!("-# More than {MAX_INPUTS} fields: fill it in the imrelay inbox: {url}"),
                            None => format!("-# More than {MAX_INPUTS} fields: fill it in the imrelay inbox"),
                        });
                    }
                    crate::interaction::clip(&out.join("\n"), budget)
                }
                Err(e) => escape(&e.to_string()),
            },
        }
    }

    /// "Input truncated: 1,234 more characters not shown", with the inbox's link.
    fn cut_notice(&self, i: &Interaction, cut: usize) -> String {
        let w = self.words();
        let note = w.input_truncated(&render::cut_note(cut));
        match self.link(i) {
            Some(url) => format!("\n-# {note}. {}: {url}", w.see_all()),
            None => format!(
                "\n-# {note}{}",
                w.pick(
                    "（完整内容见 imrelay 收件箱）",
                    " (see the imrelay inbox for all of it)"
                )
            ),
        }
    }

    /// The action rows of a pending interaction.
    fn components(&self, i: &Interaction) -> Vec<Value> {
        let w = self.words();
        // It needs a passkey: a link to its card in the inbox, in place of the buttons.
        if let Some(l) = render::step_up_link(i, self.inbox.as_deref(), self.locale) {
            let link =
                json!({"type": 2, "style": 5, "label": cut(l.label, MAX_LABEL), "url": l.url});
            return vec![row(vec![link])];
        }
        match i.kind {
            Kind::Approval => {
                let mut b = vec![self.button(i, Action::Allow, w.approve(), 3)];
                if render::similar_rule(i).is_some() {
                    b.push(self.button(i, Action::AllowSimilar, w.allow_similar(), 1));
                }
                b.push(self.button(i, Action::Deny, w.deny(), 4));
                b.push(self.button(i, Action::Reason, w.deny_with_reason(), 2));
                if Action::Edit.fits(i) {
                    b.push(self.button(i, Action::Edit, w.edit_approve(), 2));
                }
                vec![row(b)]
            }
            Kind::Question => {
                let qs = parse_questions(&i.input.map()).unwrap_or_default();
                let mut rows = Vec::new();
                if let [q] = qs.as_slice() {
                    let options: Vec<Value> = q
                        .options
                        .iter()
                        .take(MAX_OPTIONS)
                        .enumerate()
                        .map(|(n, o)| {
                            let mut opt =
                                json!({"label": cut(&o.label, MAX_OPTION), "value": n.to_string()});
                            if let Some(d) = o.description.as_deref().filter(|d| !d.is_empty()) {
                                opt["description"] = json!(cut(d, MAX_OPTION));
                            }
                            opt
                        })
                        .collect();
                    if !options.is_empty() {
                        let max = if q.multi_select { options.len() } else { 1 };
                        rows.push(row(vec![json!({
                            "type": 3, "custom_id": self.buttons.custom_id(i, Action::Pick),
                            "placeholder": cut(&q.header, 150), "min_values": 1, "max_values": max,
                            "options": options,
                        })]));
                    }
                    rows.push(row(vec![
                        self.button(i, Action::Other, w.other(), 2),
                        self.button(i, Action::Deny, w.decline(), 4),
                    ]));
                } else {
                    let mut b = Vec::new();
                    if qs.len() <= MAX_INPUTS {
                        b.push(self.button(i, Action::Answer, w.answer(), 1));
                    }
                    b.push(self.button(i, Action::Deny, w.decline(), 4));
                    rows.push(row(b));
                }
                rows
            }
            Kind::Form => {
                let fits =
                    Form::from_input(&i.input.map()).is_ok_and(|f| f.fields.len() <= MAX_INPUTS);
                let mut b = Vec::new();
                if fits {
                    b.push(self.button(i, Action::Fill, w.fill_in(), 1));
                } else if let Some(url) = self.link(i) {
                    b.push(
                        json!({"type": 2, "style": 5, "label": "Open in the inbox", "url": url}),
                    );
                }
                b.push(self.button(i, Action::Deny, w.decline(), 4));
                vec![row(b)]
            }
        }
    }

    /// The modal `action` opens on `i` (an interaction callback's `data`).
    pub fn modal(&self, i: &Interaction, action: Action) -> Option<Value> {
        let w = self.words();
        let (title, rows) = match action {
            Action::Reason => {
                let reason = Input::new(
                    REASON_INPUT.into(),
                    w.pick("理由（会告知智能体）", "Reason (the agent reads it)"),
                );
                (
                    format!("{}{}", w.pick("拒绝 ", "Deny "), i.tool_name),
                    vec![reason.long().optional().row()],
                )
            }
            Action::Edit => {
                let mut command = Input::new(
                    COMMAND_INPUT.into(),
                    w.pick("要运行的命令", "Command to run"),
                );
                command.value = editable_command(i);
                (
                    w.pick("改写后批准", "Edit & approve").to_string(),
                    vec![command.long().row()],
                )
            }
            Action::Other => {
                let q = parse_questions(&i.input.map()).ok()?.into_iter().next()?;
                let answer = Input::new(format!("{ANSWER_INPUT}0"), &q.question);
                (q.header.clone(), vec![answer.long().row()])
            }
            Action::Answer => (
                w.pick("回答智能体", "Answer the agent").to_string(),
                question_inputs(i)?,
            ),
            Action::Fill => (title_base(i, self.words()), field_inputs(i)?),
            _ => return None,
        };
        Some(json!({
            "custom_id": self.buttons.custom_id(i, action),
            "title": cut(&title, MAX_MODAL_LABEL),
            "components": rows,
        }))
    }

    /// A plain message of `text` (escaped), mentioning nobody.
    pub fn plain(&self, text: &str) -> Value {
        json!({"content": crate::interaction::clip(&escape(text), MAX_CONTENT),
            "allowed_mentions": {"parse": []}})
    }

    /// An ephemeral notice (only the person who clicked sees it): an interaction response.
    pub fn notice(&self, text: &str) -> Value {
        json!({"type": 4, "data": {"content": crate::interaction::clip(&escape(text), MAX_CONTENT),
            "flags": 64, "allowed_mentions": {"parse": []}}})
    }
}

/// A modal's text input.
struct Input {
    id: String,
    label: String,
    style: u8,
    required: bool,
    value: Option<String>,
    hint: Option<String>,
}

impl Input {
    /// A required one-line input.
    fn new(id: String, label: &str) -> Self {
        Self {
            id,
            label: label.to_string(),
            style: 1,
            required: true,
            value: None,
            hint: None,
        }
    }

    /// Several lines.
    fn long(mut self) -> Self {
        self.style = 2;
        self
    }

    /// May be left empty.
    fn optional(mut self) -> Self {
        self.required = false;
        self
    }

    /// Its action row.
    fn row(self) -> Value {
        let mut v = json!({"type": 4, "custom_id": self.id, "label": cut(&self.label, MAX_MODAL_LABEL),
            "style": self.style, "required": self.required, "max_length": MAX_INPUT});
        if let Some(value) = self.value.filter(|v| !v.is_empty()) {
            v["value"] = json!(crate::interaction::clip(&value, MAX_INPUT));
        }
        if let Some(hint) = self.hint.filter(|h| !h.is_empty()) {
            v["placeholder"] = json!(cut(&hint, MAX_OPTION));
        }
        row(vec![v])
    }
}

/// One input per question (up to [`MAX_INPUTS`]), its options listed as the placeholder.
fn question_inputs(i: &Interaction) -> Option<Vec<Value>> {
    let qs = parse_questions(&i.input.map()).ok()?;
    let rows = qs.iter().take(MAX_INPUTS).enumerate().map(|(n, q)| {
        let labels: Vec<String> = q
            .options
            .iter()
            .enumerate()
            .map(|(k, o)| format!("{} {}", k + 1, o.label))
            .collect();
        let how = if q.multi_select {
            "numbers or text, comma-separated: "
        } else {
            "a number or text: "
        };
        let mut input = Input::new(format!("{ANSWER_INPUT}{n}"), &q.question);
        input.hint = Some(format!("{how}{}", labels.join(", ")));
        input.row()
    });
    Some(rows.collect())
}

/// One input per form field (up to [`MAX_INPUTS`]), with its default and what it takes.
fn field_inputs(i: &Interaction) -> Option<Vec<Value>> {
    let form = Form::from_input(&i.input.map()).ok()?;
    let rows = form
        .fields
        .iter()
        .take(MAX_INPUTS)
        .enumerate()
        .map(|(n, f)| {
            let mut input = Input::new(format!("{FIELD_INPUT}{n}"), f.label());
            input.required = f.required;
            input.hint = match &f.ty {
                FieldType::Choice { options } | FieldType::Multi { options, .. } => Some(
                    options
                        .iter()
                        .map(|c| c.label.clone())
                        .collect::<Vec<_>>()
                        .join(", "),
                ),
                FieldType::Boolean => Some("yes or no".into()),
                _ => f.description.clone(),
            };
            input.value = f.default.as_ref().map(|d| match d {
                Value::String(s) => s.clone(),
                other => other.to_string(),
            });
            input.row()
        });
    Some(rows.collect())
}

/// What a message is about: "Approve Bash", a question, a form's title.
fn title_base(i: &Interaction, w: Words) -> String {
    match i.kind {
        Kind::Approval => format!("{}{}", w.pick("批准 ", "Approve "), i.tool_name),
        Kind::Question => w.pick("智能体的问题", "Question from the agent").into(),
        Kind::Form => i
            .title()
            .filter(|t| !t.trim().is_empty())
            .unwrap_or(w.pick("请填写", "Please fill in"))
            .to_string(),
    }
}

/// What a resolved message is about: the tool for an approval ("Bash · Allowed").
fn resolved_title(i: &Interaction, w: Words) -> String {
    match i.kind {
        Kind::Approval => i.tool_name.to_string(),
        _ => title_base(i, w),
    }
}

/// The answers given, the reason for a denial, and the command as edited.
fn resolution_details(i: &Interaction, w: Words) -> Vec<String> {
    let Some(r) = &i.resolution else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for (label, value) in render::form_answers(i) {
        out.push(format!(
            "{} → {}",
            escape(&cut(&label, 60)),
            escape(&cut(&value, 200))
        ));
    }
    for (q, a) in render::given_answers(i) {
        out.push(format!(
            "{} → {}",
            escape(&cut(&q, 200)),
            escape(&cut(&a, 300))
        ));
    }
    match (r.result.permission(), r.outcome) {
        (_, Outcome::Denied | Outcome::Expired) if i.kind == Kind::Form => {
            if let Some(m) = r.message() {
                out.push(format!(
                    "{}{}",
                    w.pick("理由：", "Reason: "),
                    escape(&cut(m, 500))
                ));
            }
        }
        (Some(PermissionResult::Deny { message, .. }), Outcome::Denied | Outcome::Expired) => {
            out.push(format!(
                "{}{}",
                w.pick("理由：", "Reason: "),
                escape(&cut(message, 500))
            ));
        }
        (Some(PermissionResult::Allow { updated_input, .. }), Outcome::Allowed) => {
            if let (Some(Value::String(new)), Some(old)) =
                (updated_input.map().get("command"), editable_command(i))
                && new != &old
            {
                out.push(format!(
                    "{}\n```bash\n{}\n```",
                    w.pick("按改写后的命令批准：", "Approved as edited:"),
                    present::break_fences(&cut(new, 500))
                ));
            }
        }
        _ => {}
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::interaction::InteractionId;
    use jiff::Timestamp;
    use serde_json::Map;

    fn bash(command: &str) -> Interaction {
        let mut input = Map::new();
        input.insert("command".into(), json!(command));
        Interaction::pending(
            InteractionId::parse("toolu_1").unwrap(),
            "Bash",
            input,
            Timestamp::from_millisecond(1_700_000_000_000).unwrap(),
            300,
        )
    }

    #[test]
    fn a_long_command_is_cut_within_the_limit_with_a_link_and_mentions_are_inert() {
        let r = Render::new(
            Buttons::new(vec![7; 32]),
            Some("https://relay.example".into()),
            Locale::EnUs,
        );
        let m = r.message(&bash(&format!("echo @everyone ``` {}", "x".repeat(10_000))));
        let content = m["content"].as_str().unwrap();
        assert!(content.chars().count() <= MAX_CONTENT);
        assert!(
            content.contains("https://relay.example/#toolu_1"),
            "{content}"
        );
        assert!(!content.contains("```  "), "fences broken");
        assert_eq!(m["allowed_mentions"], json!({"parse": []}));
        let labels: Vec<&str> = m["components"][0]["components"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["label"].as_str().unwrap())
            .collect();
        // A command longer than a modal's text input holds (4,000 characters) cannot be
        // edited there: no Edit & approve.
        assert_eq!(labels, ["Approve", "Deny", "Deny with reason…"]);
        assert_eq!(escape("**a** @b"), "\\*\\*a\\*\\* \\@b");
    }
}
