//! Block Kit for every state of an interaction: the message in a channel (pending with its
//! buttons, or resolved saying who answered, where and how) and the modals that take a
//! reason, an edited command, a typed answer or a form.
//!
//! Untrusted text (tool input, questions, paths, reasons, names) is only placed in
//! `plain_text` objects and in `rich_text` elements, which Slack shows as written: it cannot
//! mention anyone, link anywhere or format anything. The only `mrkdwn` carries the link to the
//! inbox, built from the operator's `server.public_url` and an id of URL-safe characters.
//!
//! Every button carries a value bound to one interaction (its id and creation time) and one
//! action by a MAC under the channel's stored secret ([`Buttons`]); a modal carries the same
//! in its `private_metadata`.
//!
//! Slack's limits are kept: 50 blocks a message, 3,000 characters a text, 150 a header, 75 a
//! button or option label, 24 a modal title, 10 options in checkboxes or radio buttons.

use serde_json::{Map, Value, json};

use crate::channels::token::Signer;
use crate::interaction::form::{Choice, Field, FieldType, Format};
use crate::interaction::{
    Form, Interaction, InteractionId, Kind, Outcome, PermissionResult, Question, parse_questions,
};
use crate::present;
use crate::present::render::{self, cut_note, format_time};

/// Most characters in one text object (section text, rich text, input label).
pub const MAX_TEXT: usize = 3000;
/// Most characters in a header.
pub const MAX_HEADER: usize = 150;
/// Most characters in a button, option or placeholder label.
pub const MAX_LABEL: usize = 75;
/// Most characters in a modal's title or its submit and close labels.
pub const MAX_TITLE: usize = 24;
/// Most blocks in a message.
pub const MAX_BLOCKS: usize = 50;
/// Most options in checkboxes and radio buttons.
pub const MAX_CHECKS: usize = 10;
/// Most options in a static select.
pub const MAX_OPTIONS: usize = 100;
/// Characters of tool input shown in a message (one rich text block).
pub const INPUT_CHARS: usize = 2800;
/// The `callback_id` of imrelay's modals.
pub const CALLBACK_ID: &str = "imrelay";
/// The `action_id` of a multi-select question's checkboxes (ticking sends an action that
/// changes nothing).
pub const CHECKS_ACTION: &str = "imrelay.checks";
/// The `action_id` prefix of imrelay's buttons.
pub const ACTION_PREFIX: &str = "imrelay.";
/// The block and action ids of inputs in modals.
pub const REASON_BLOCK: &str = "reason";
/// The edited command's input block.
pub const COMMAND_BLOCK: &str = "command";
/// A typed answer's input block.
pub const ANSWER_BLOCK: &str = "answer";
/// The action id of every input element in imrelay's modals.
pub const INPUT_ACTION: &str = "v";

/// What a button or modal asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    /// Approve the tool call.
    Allow,
    /// Approve it and allow similar calls for the session (the rule imrelay proposes).
    AllowSimilar,
    /// Deny it (or decline the question or form).
    Deny,
    /// Open the modal that denies with a reason.
    Reason,
    /// Open the modal that edits the command and approves it.
    Edit,
    /// Answer a one-question prompt with option `n`.
    Pick(usize),
    /// Submit a multi-select question's ticked options.
    Submit,
    /// Open the modal that takes a typed answer to a one-question prompt.
    Other,
    /// Open the modal with every question.
    Answer,
    /// Open the modal with the form.
    Fill,
}

impl Action {
    /// The name carried in values.
    pub fn name(self) -> String {
        match self {
            Action::Allow => "allow".into(),
            Action::AllowSimilar => "allow_similar".into(),
            Action::Deny => "deny".into(),
            Action::Reason => "reason".into(),
            Action::Edit => "edit".into(),
            Action::Pick(n) => format!("pick.{n}"),
            Action::Submit => "submit".into(),
            Action::Other => "other".into(),
            Action::Answer => "answer".into(),
            Action::Fill => "fill".into(),
        }
    }

    /// Parses a name carried in values.
    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "allow" => Action::Allow,
            "allow_similar" => Action::AllowSimilar,
            "deny" => Action::Deny,
            "reason" => Action::Reason,
            "edit" => Action::Edit,
            "submit" => Action::Submit,
            "other" => Action::Other,
            "answer" => Action::Answer,
            "fill" => Action::Fill,
            _ => Action::Pick(s.strip_prefix("pick.")?.parse().ok()?),
        })
    }

    /// Whether a message of `i` carries this action.
    pub fn fits(self, i: &Interaction) -> bool {
        let questions = || parse_questions(&i.input.map()).unwrap_or_default();
        match self {
            Action::Allow | Action::Reason => i.kind == Kind::Approval,
            Action::AllowSimilar => render::similar_rule(i).is_some(),
            Action::Edit => i.kind == Kind::Approval && editable_command(i).is_some(),
            Action::Deny => true,
            Action::Pick(n) => {
                let qs = questions();
                i.kind == Kind::Question
                    && qs.len() == 1
                    && !qs[0].multi_select
                    && n < qs[0].options.len()
            }
            Action::Submit => {
                let qs = questions();
                i.kind == Kind::Question && qs.len() == 1 && qs[0].multi_select
            }
            Action::Other => i.kind == Kind::Question && questions().len() == 1,
            Action::Answer => i.kind == Kind::Question,
            Action::Fill => i.kind == Kind::Form,
        }
    }

    /// Whether the action opens a modal rather than answering.
    pub fn opens_modal(self) -> bool {
        matches!(
            self,
            Action::Reason | Action::Edit | Action::Other | Action::Answer | Action::Fill
        )
    }
}

/// The command of a `Bash` call, which "Edit & approve" lets a person change.
pub fn editable_command(i: &Interaction) -> Option<String> {
    if i.tool_name != "Bash" {
        return None;
    }
    i.input
        .map()
        .get("command")
        .and_then(Value::as_str)
        .filter(|c| c.chars().count() <= MAX_TEXT)
        .map(str::to_string)
}

/// A signed value: what it is for, once verified.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Signed {
    /// The interaction.
    pub id: InteractionId,
    /// Its creation time, ms.
    pub created: i64,
    /// What the button or modal does.
    pub action: Action,
}

/// Signs and reads the values on buttons and modals.
#[derive(Clone, Debug)]
pub struct Buttons {
    signer: Signer,
}

/// The MAC's domain.
const DOMAIN: &[u8] = b"imrelay/slack/button/v1";
/// The MAC's length in bytes (Slack's 2,000-character value has room for all of it).
const TAG_BYTES: usize = 16;

impl Buttons {
    /// Values signed with `key` (the channel's secret from the store).
    pub fn new(key: Vec<u8>) -> Self {
        Self {
            signer: Signer::new(key),
        }
    }

    /// The value of a button (or a modal's metadata) for `action` on `i`:
    /// `<action> <id> <created ms> <tag>`.
    pub fn value(&self, i: &Interaction, action: Action) -> String {
        let created = i.created_at.as_millisecond().to_string();
        let name = action.name();
        let tag = self.signer.tag(
            DOMAIN,
            &[
                name.as_bytes(),
                i.id.as_str().as_bytes(),
                created.as_bytes(),
            ],
            TAG_BYTES,
        );
        format!("{name} {} {created} {tag}", i.id)
    }

    /// What `value` is for, if its MAC checks out.
    pub fn verify(&self, value: &str) -> Option<Signed> {
        let mut parts = value.split(' ');
        let (name, id, created, tag) = (parts.next()?, parts.next()?, parts.next()?, parts.next()?);
        if parts.next().is_some() {
            return None;
        }
        if !self.signer.verify(
            DOMAIN,
            &[name.as_bytes(), id.as_bytes(), created.as_bytes()],
            TAG_BYTES,
            tag,
        ) {
            return None;
        }
        Some(Signed {
            id: InteractionId::parse(id).ok()?,
            created: created.parse().ok()?,
            action: Action::parse(name)?,
        })
    }
}

/// `s` cut to `max` characters, hidden characters shown as escapes.
fn cut(s: &str, max: usize) -> String {
    crate::interaction::clip(&present::visible_text(s), max)
}

/// `s` as Slack's mrkdwn shows it literally: `&`, `<` and `>` escaped, so nothing in it
/// becomes a mention, a link or a command.
pub fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// A plain-text object.
fn plain(s: &str, max: usize) -> Value {
    json!({"type": "plain_text", "text": cut(s, max), "emoji": false})
}

fn section(s: &str) -> Value {
    json!({"type": "section", "text": plain(s, MAX_TEXT)})
}

fn context(s: &str) -> Value {
    json!({"type": "context", "elements": [plain(s, MAX_TEXT)]})
}

/// Text shown as written, in a code box.
fn preformatted(s: &str) -> Value {
    json!({"type": "rich_text", "elements": [{
        "type": "rich_text_preformatted",
        "elements": [{"type": "text", "text": cut(s, MAX_TEXT)}],
    }]})
}

/// Renders messages and modals.
#[derive(Clone, Debug)]
pub struct Blocks {
    /// Signs the values.
    pub buttons: Buttons,
    inbox: Option<String>,
}

impl Blocks {
    /// Messages whose values are signed by `buttons`, linking to the inbox at `inbox`.
    pub fn new(buttons: Buttons, inbox: Option<String>) -> Self {
        Self { buttons, inbox }
    }

    fn button(&self, i: &Interaction, action: Action, label: &str, style: Option<&str>) -> Value {
        let mut b = json!({
            "type": "button",
            "action_id": format!("{ACTION_PREFIX}{}", action.name()),
            "text": plain(label, MAX_LABEL),
            "value": self.buttons.value(i, action),
        });
        if let Some(s) = style {
            b["style"] = json!(s);
        }
        b
    }

    /// The notification and fallback text: "Approval needed: Bash", escaped (Slack reads
    /// `text` as mrkdwn, where `<!channel>` would notify everyone).
    pub fn summary(&self, i: &Interaction) -> String {
        let s = match (i.kind, &i.resolution) {
            (Kind::Approval, None) => format!("Approval needed: {}", i.tool_name),
            (Kind::Question, None) => "The agent has a question".into(),
            (Kind::Form, None) => format!("Please fill in: {}", form_message(i)),
            (_, Some(r)) => format!("{} · {}", resolved_title(i), render::outcome_phrase(r)),
        };
        escape(&cut(&s, 300))
    }

    /// The thread reply that says how `i` ended: `(text, blocks)`.
    pub fn outcome_reply(&self, i: &Interaction) -> Option<(String, Value)> {
        let r = i.resolution.as_ref()?;
        let line = format!(
            "{} {} · {}",
            outcome_icon(r.outcome),
            render::outcome_phrase(r),
            format_time(r.at)
        );
        Some((escape(&cut(&line, 300)), json!([section(&line)])))
    }

    /// The message for `i` as it stands: `(text, blocks)`.
    pub fn message(&self, i: &Interaction) -> (String, Value) {
        let mut out = Vec::new();
        let header = match &i.resolution {
            None if i.kind == Kind::Approval => format!("{}?", title_base(i)),
            None => title_base(i),
            Some(r) => format!(
                "{} {} · {}",
                outcome_icon(r.outcome),
                resolved_title(i),
                render::outcome_label(r.outcome)
            ),
        };
        out.push(json!({"type": "header", "text": plain(&header, MAX_HEADER)}));
        let ctx = render::context_line(i);
        if !ctx.is_empty() {
            out.push(context(&ctx));
        }
        if i.is_pending()
            && let Some(line) = render::escalated_line(i, render::Locale::EnUs)
        {
            out.push(section(&format!("⏫ {line}")));
        }
        if let Some(t) = i.title.as_deref().filter(|t| !t.trim().is_empty())
            && i.kind != Kind::Form
        {
            out.push(section(t));
        }
        if let Some(d) = i.description.as_deref().filter(|d| !d.trim().is_empty()) {
            out.push(section(d));
        }
        match i.kind {
            Kind::Approval => self.approval(i, &mut out),
            Kind::Question => self.question(i, &mut out),
            Kind::Form => self.form(i, &mut out),
        }
        match &i.resolution {
            None => out.push(context(&format!(
                "Deadline (denied automatically after): {}",
                format_time(i.deadline)
            ))),
            Some(r) => {
                out.push(section(&format!(
                    "{} · {}",
                    render::outcome_phrase(r),
                    format_time(r.at)
                )));
                self.resolution_details(i, &mut out);
            }
        }
        out.truncate(MAX_BLOCKS);
        (self.summary(i), Value::Array(out))
    }

    fn approval(&self, i: &Interaction, out: &mut Vec<Value>) {
        // The tool call as a person reads it: a command, a diff, a file's first lines.
        let (text, _lang) = present::chat_block(&i.tool_name, &i.input.map(), i.cwd.as_deref());
        let excerpt = render::excerpt(&text, INPUT_CHARS);
        out.push(preformatted(&excerpt.text));
        if excerpt.cut > 0 {
            out.push(self.cut_notice(i, excerpt.cut));
        }
        if let Some(votes) = render::votes_line(i, render::Locale::EnUs) {
            out.push(context(&votes));
        }
        if i.resolution.is_some() {
            return;
        }
        let mut buttons = vec![
            self.button(i, Action::Allow, "Approve", Some("primary")),
            self.button(i, Action::Deny, "Deny", Some("danger")),
            self.button(i, Action::Reason, "Deny with reason…", None),
        ];
        // Several people decide it: each allows it as it is.
        if editable_command(i).is_some() && !crate::interaction::quorum::is_voted(i) {
            buttons.push(self.button(i, Action::Edit, "Edit & approve…", None));
        }
        // "Allow similar": the rule it adds is in the message, in full.
        if let Some(rule) = render::similar_rule(i) {
            buttons.insert(
                1,
                self.button(
                    i,
                    Action::AllowSimilar,
                    "Allow similar (this session)",
                    None,
                ),
            );
            let native = if i
                .suggestions
                .as_deref()
                .is_some_and(crate::interaction::applied_with_a_grant)
            {
                " (the agent also remembers its own suggestion for this session)"
            } else {
                ""
            };
            out.push(context(&format!(
                "Allow similar also allows, for this session: {}{native}",
                crate::interaction::clip(&rule, 200)
            )));
        }
        out.push(json!({"type": "actions", "block_id": "decide", "elements": buttons}));
    }

    /// "1,234 more characters not shown", linked to the inbox when there is one.
    fn cut_notice(&self, i: &Interaction, cut: usize) -> Value {
        match &self.inbox {
            // The id is of URL-safe characters only; the base is the operator's setting.
            Some(base) => json!({"type": "context", "elements": [{"type": "mrkdwn",
                "text": format!("Input truncated: {}. <{base}/#{}|See all of it in the imrelay inbox>", cut_note(cut), i.id),
                "verbatim": true}]}),
            None => context(&format!(
                "Input truncated: {} (see the imrelay inbox for all of it)",
                cut_note(cut)
            )),
        }
    }

    fn question(&self, i: &Interaction, out: &mut Vec<Value>) {
        let questions = parse_questions(&i.input.map()).unwrap_or_default();
        for (n, q) in questions.iter().enumerate() {
            out.push(section(&format!("[{}] {}", q.header, q.question)));
            if i.resolution.is_none() {
                // With one question the buttons name the options; with several, the
                // options are listed here and chosen in the modal.
                let several = questions.len() != 1;
                let described: Vec<String> = q
                    .options
                    .iter()
                    .filter_map(|o| match o.description.as_deref() {
                        Some(d) => Some(format!("{}: {d}", o.label)),
                        None if several => Some(o.label.clone()),
                        None => None,
                    })
                    .collect();
                if !described.is_empty() {
                    out.push(context(&described.join("\n")));
                }
                if questions.len() == 1 {
                    self.one_question(i, n, q, out);
                }
            }
        }
        if i.resolution.is_none() && questions.len() != 1 {
            out.push(
                json!({"type": "actions", "block_id": "decide", "elements": [
                    self.button(i, Action::Answer, "Answer…", Some("primary")),
                    self.button(i, Action::Deny, "Decline", Some("danger")),
                ]}),
            );
        }
    }

    /// The inputs of the only question of a prompt: a button per option, or checkboxes and
    /// Submit; "Other…" for a typed answer; Decline.
    fn one_question(&self, i: &Interaction, _n: usize, q: &Question, out: &mut Vec<Value>) {
        let mut elements = Vec::new();
        if q.multi_select {
            let options: Vec<Value> = q
                .options
                .iter()
                .take(MAX_CHECKS)
                .enumerate()
                .map(|(j, o)| option(&o.label, j))
                .collect();
            out.push(
                json!({"type": "actions", "block_id": "checks", "elements": [
                    {"type": "checkboxes", "action_id": CHECKS_ACTION, "options": options},
                ]}),
            );
            elements.push(self.button(i, Action::Submit, "Submit", Some("primary")));
        } else {
            for (j, o) in q.options.iter().enumerate() {
                elements.push(self.button(i, Action::Pick(j), &o.label, None));
            }
        }
        elements.push(self.button(i, Action::Other, "Other…", None));
        elements.push(self.button(i, Action::Deny, "Decline", Some("danger")));
        out.push(json!({"type": "actions", "block_id": "decide", "elements": elements}));
    }

    fn form(&self, i: &Interaction, out: &mut Vec<Value>) {
        let form = match Form::from_input(&i.input.map()) {
            Ok(f) => f,
            Err(e) => {
                out.push(section(&e.to_string()));
                return;
            }
        };
        out.push(section(&form.message));
        if i.resolution.is_some() {
            return;
        }
        let fields: Vec<String> = form
            .fields
            .iter()
            .map(|f| format!("• {}{}", f.label(), if f.required { " *" } else { "" }))
            .collect();
        out.push(context(&fields.join("\n")));
        out.push(
            json!({"type": "actions", "block_id": "decide", "elements": [
                self.button(i, Action::Fill, "Fill in…", Some("primary")),
                self.button(i, Action::Deny, "Decline", Some("danger")),
            ]}),
        );
    }

    fn resolution_details(&self, i: &Interaction, out: &mut Vec<Value>) {
        let Some(r) = &i.resolution else { return };
        for (label, value) in render::form_answers(i) {
            out.push(section(&format!("{} → {value}", cut(&label, 60))));
        }
        for (q, a) in render::given_answers(i) {
            out.push(section(&format!("{} → {a}", cut(&q, 200))));
        }
        match (r.result.permission(), r.outcome) {
            (_, Outcome::Denied | Outcome::Expired) if i.kind == Kind::Form => {
                if let Some(m) = r.message() {
                    out.push(section(&format!("Reason: {m}")));
                }
            }
            (Some(PermissionResult::Deny { message, .. }), Outcome::Denied | Outcome::Expired) => {
                out.push(section(&format!("Reason: {message}")));
            }
            (Some(PermissionResult::Allow { updated_input, .. }), Outcome::Allowed) => {
                if let (Some(Value::String(new)), Some(old)) = (
                    updated_input.map().get("command"),
                    editable_command(i).filter(|_| i.tool_name == "Bash"),
                ) && new != &old
                {
                    out.push(context("Approved as edited:"));
                    out.push(preformatted(new));
                }
            }
            _ => {}
        }
    }

    /// A modal for `action` on `i` (`None` when the action opens none).
    pub fn modal(&self, i: &Interaction, action: Action) -> Option<Value> {
        let (title, submit, blocks) = match action {
            Action::Reason => (
                "Deny with reason",
                "Deny",
                vec![
                    section(&format!("Deny {}?", i.tool_name)),
                    text_input(
                        REASON_BLOCK,
                        "Reason (shown to the agent)",
                        true,
                        false,
                        None,
                        Some(1000),
                    ),
                ],
            ),
            Action::Edit => (
                "Edit & approve",
                "Approve",
                vec![
                    section("The command runs as you leave it here."),
                    text_input(
                        COMMAND_BLOCK,
                        "Command",
                        true,
                        false,
                        editable_command(i).as_deref(),
                        Some(MAX_TEXT),
                    ),
                ],
            ),
            Action::Other => {
                let q = parse_questions(&i.input.map()).ok()?.into_iter().next()?;
                (
                    "Answer",
                    "Answer",
                    vec![
                        section(&format!("[{}] {}", q.header, q.question)),
                        text_input(ANSWER_BLOCK, "Your answer", true, false, None, Some(4096)),
                    ],
                )
            }
            Action::Answer => {
                let qs = parse_questions(&i.input.map()).ok()?;
                let mut blocks = Vec::new();
                for (n, q) in qs.iter().enumerate() {
                    blocks.push(question_input(n, q));
                    blocks.push(text_input(
                        &other_block(n),
                        "Or type an answer",
                        false,
                        true,
                        None,
                        Some(4096),
                    ));
                }
                ("Answer", "Submit", blocks)
            }
            Action::Fill => {
                let form = Form::from_input(&i.input.map()).ok()?;
                let mut blocks = vec![section(&form.message)];
                for (n, f) in form.fields.iter().enumerate() {
                    blocks.push(field_input(n, f));
                }
                let title = i
                    .title
                    .as_deref()
                    .filter(|t| !t.trim().is_empty())
                    .unwrap_or("Please fill in");
                return Some(self.view(i, action, title, "Submit", blocks));
            }
            _ => return None,
        };
        Some(self.view(i, action, title, submit, blocks))
    }

    fn view(
        &self,
        i: &Interaction,
        action: Action,
        title: &str,
        submit: &str,
        blocks: Vec<Value>,
    ) -> Value {
        json!({
            "type": "modal",
            "callback_id": CALLBACK_ID,
            "private_metadata": self.buttons.value(i, action),
            "title": plain(title, MAX_TITLE),
            "submit": plain(submit, MAX_TITLE),
            "close": plain("Cancel", MAX_TITLE),
            "blocks": blocks,
        })
    }
}

/// The input block of question `n`'s typed answer in the modal.
pub fn other_block(n: usize) -> String {
    format!("q{n}_other")
}

/// The input block of question `n`'s options in the modal.
pub fn question_block(n: usize) -> String {
    format!("q{n}")
}

/// The input block of form field `n` (field names are the agent's: an index keeps block ids
/// within what Slack accepts).
pub fn field_block(n: usize) -> String {
    format!("f{n}")
}

fn option(label: &str, value: usize) -> Value {
    json!({"text": plain(label, MAX_LABEL), "value": value.to_string()})
}

fn choice_options(choices: &[Choice], max: usize) -> Vec<Value> {
    choices
        .iter()
        .take(max)
        .enumerate()
        .map(|(j, c)| option(&c.label, j))
        .collect()
}

fn text_input(
    block: &str,
    label: &str,
    multiline: bool,
    optional: bool,
    initial: Option<&str>,
    max_len: Option<usize>,
) -> Value {
    let mut element =
        json!({"type": "plain_text_input", "action_id": INPUT_ACTION, "multiline": multiline});
    if let Some(v) = initial {
        element["initial_value"] = json!(v);
    }
    if let Some(m) = max_len {
        element["max_length"] = json!(m.min(MAX_TEXT));
    }
    json!({"type": "input", "block_id": block, "optional": optional,
        "label": plain(label, 2000), "element": element})
}

fn question_input(n: usize, q: &Question) -> Value {
    let options: Vec<Value> = q
        .options
        .iter()
        .take(MAX_CHECKS)
        .enumerate()
        .map(|(j, o)| {
            let mut opt = option(&o.label, j);
            if let Some(d) = &o.description {
                opt["description"] = plain(d, MAX_LABEL);
            }
            opt
        })
        .collect();
    let kind = if q.multi_select {
        "checkboxes"
    } else {
        "radio_buttons"
    };
    json!({"type": "input", "block_id": question_block(n), "optional": true,
        "label": plain(&format!("[{}] {}", q.header, q.question), 2000),
        "element": {"type": kind, "action_id": INPUT_ACTION, "options": options}})
}

/// The input of form field `n`, of the kind its type needs.
fn field_input(n: usize, f: &Field) -> Value {
    let element = match &f.ty {
        FieldType::Choice { options } => {
            let mut e = json!({"type": "static_select", "action_id": INPUT_ACTION,
                "placeholder": plain("Choose one", MAX_LABEL), "options": choice_options(options, MAX_OPTIONS)});
            if let Some(j) = default_index(f, options) {
                e["initial_option"] = option(&options[j].label, j);
            }
            e
        }
        FieldType::Multi { options, .. } => json!({"type": "multi_static_select",
            "action_id": INPUT_ACTION, "placeholder": plain(&f.hint(), MAX_LABEL),
            "options": choice_options(options, MAX_OPTIONS)}),
        FieldType::Boolean => {
            let mut e = json!({"type": "checkboxes", "action_id": INPUT_ACTION,
                "options": [option("Yes", 1)]});
            if f.default == Some(Value::Bool(true)) {
                e["initial_options"] = json!([option("Yes", 1)]);
            }
            e
        }
        FieldType::Text {
            format: Some(Format::Date),
            ..
        } => json!({"type": "datepicker", "action_id": INPUT_ACTION}),
        FieldType::Text {
            multiline, max_len, ..
        } => {
            let mut e = json!({"type": "plain_text_input", "action_id": INPUT_ACTION,
                "multiline": multiline, "max_length": max_len.unwrap_or(MAX_TEXT).min(MAX_TEXT),
                "placeholder": plain(&f.hint(), 150)});
            if let Some(Value::String(d)) = &f.default {
                e["initial_value"] = json!(d);
            }
            e
        }
        FieldType::Number { integer, .. } => {
            let mut e = json!({"type": "number_input", "action_id": INPUT_ACTION,
                "is_decimal_allowed": !integer, "placeholder": plain(&f.hint(), 150)});
            if let Some(Value::Number(d)) = &f.default {
                e["initial_value"] = json!(d.to_string());
            }
            e
        }
    };
    let mut block = json!({"type": "input", "block_id": field_block(n),
        // Booleans are never required: unticked is `false`.
        "optional": !f.required || matches!(f.ty, FieldType::Boolean),
        "label": plain(f.label(), 2000), "element": element});
    if let Some(d) = &f.description {
        block["hint"] = plain(d, 2000);
    }
    block
}

fn default_index(f: &Field, options: &[Choice]) -> Option<usize> {
    let d = f.default.as_ref()?.as_str()?;
    options.iter().position(|c| c.value == d)
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

fn title_base(i: &Interaction) -> String {
    match i.kind {
        Kind::Approval => format!("Approve {}", i.tool_name),
        Kind::Question => "Question from the agent".into(),
        Kind::Form => i
            .title
            .as_deref()
            .filter(|t| !t.trim().is_empty())
            .unwrap_or("Please fill in")
            .to_string(),
    }
}

/// What a resolved message is about: the tool for an approval ("Bash · Allowed").
fn resolved_title(i: &Interaction) -> String {
    match i.kind {
        Kind::Approval => i.tool_name.to_string(),
        _ => title_base(i),
    }
}

fn outcome_icon(o: Outcome) -> &'static str {
    match o {
        Outcome::Allowed | Outcome::Answered => "✅",
        Outcome::Denied => "⛔",
        Outcome::Expired => "⌛",
        Outcome::Cancelled => "✖️",
    }
}

/// The values of a submitted modal's inputs: `block id → value element` (Slack's
/// `view.state.values`, one action per block).
pub fn state_values(view: &Value) -> Map<String, Value> {
    let mut out = Map::new();
    if let Some(blocks) = view["state"]["values"].as_object() {
        for (block, actions) in blocks {
            if let Some(v) = actions.get(INPUT_ACTION) {
                out.insert(block.clone(), v.clone());
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use jiff::Timestamp;

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

    fn buttons() -> Buttons {
        Buttons::new(vec![7; 32])
    }

    #[test]
    fn values_verify_only_for_their_own_interaction_and_action() {
        let b = buttons();
        let i = bash("ls");
        let v = b.value(&i, Action::Allow);
        let s = b.verify(&v).unwrap();
        assert_eq!(s.id.as_str(), "toolu_1");
        assert_eq!(s.created, 1_700_000_000_000);
        assert_eq!(s.action, Action::Allow);
        // The action swapped, the time moved, another key: refused.
        assert!(b.verify(&v.replacen("allow", "deny", 1)).is_none());
        assert!(
            b.verify(&v.replace("1700000000000", "1700000000001"))
                .is_none()
        );
        assert!(Buttons::new(vec![8; 32]).verify(&v).is_none());
        assert!(b.verify("").is_none());
        assert!(b.verify(&format!("{v} extra")).is_none());
        let pick = b.value(&i, Action::Pick(3));
        assert_eq!(b.verify(&pick).unwrap().action, Action::Pick(3));
    }

    #[test]
    fn untrusted_text_is_plain_and_within_limits() {
        let b = Blocks::new(buttons(), Some("https://relay.example".into()));
        let mut i = bash(&format!("echo <!channel> *bold* {}", "x".repeat(10_000)));
        i.title = Some("t".repeat(500).into());
        let (text, blocks) = b.message(&i);
        assert!(text.starts_with("Approval needed: Bash"));
        let mut sneaky = bash("ls");
        sneaky.tool_name = "<!channel> & <https://evil.example|x>".into();
        assert_eq!(
            b.message(&sneaky).0,
            "Approval needed: &lt;!channel&gt; &amp; &lt;https://evil.example|x&gt;"
        );
        let blocks = blocks.as_array().unwrap();
        assert!(blocks.len() <= MAX_BLOCKS);
        let all = serde_json::to_string(blocks).unwrap();
        assert!(all.contains("<!channel>"), "kept as written in plain text");
        for block in blocks {
            if block["type"] == "header" {
                assert!(block["text"]["text"].as_str().unwrap().chars().count() <= MAX_HEADER);
            }
            if block["type"] == "section" {
                assert_eq!(block["text"]["type"], "plain_text");
                assert!(block["text"]["text"].as_str().unwrap().chars().count() <= MAX_TEXT);
            }
            if block["type"] == "context" {
                for e in block["elements"].as_array().unwrap() {
                    if e["type"] == "mrkdwn" {
                        assert!(
                            e["text"]
                                .as_str()
                                .unwrap()
                                .contains("<https://relay.example/#toolu_1|")
                        );
                    }
                }
            }
        }
        assert!(all.contains("more characters not shown"));
        let (_, blocks) = b.message(&bash("rm -rf build"));
        let blocks = blocks.as_array().unwrap();
        let actions = blocks.iter().find(|b| b["type"] == "actions").unwrap();
        let labels: Vec<&str> = actions["elements"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["text"]["text"].as_str().unwrap())
            .collect();
        assert_eq!(
            labels,
            ["Approve", "Deny", "Deny with reason…", "Edit & approve…"]
        );
    }
}
