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
//!
//! `mod.rs` builds a message (header, context, body, deadline or outcome); each kind's body is
//! in `approval.rs`, `question.rs` and `form.rs` (with the modal inputs of questions and forms),
//! the resolved state in `outcome.rs`, the modals in `modal.rs`, and what buttons and modals
//! carry, signed, in `action.rs`.

mod action;
mod approval;
mod form;
mod modal;
mod outcome;
mod question;

use serde_json::{Value, json};

use crate::channels::words::Words;
use crate::interaction::{Interaction, Kind};
use crate::present;
use crate::present::render::{self, Locale, format_time};

pub use action::{ACTION_PREFIX, Action, Buttons, CHECKS_ACTION, Signed, editable_command};
pub use form::field_block;
use form::form_message;
pub use modal::{
    ANSWER_BLOCK, CALLBACK_ID, COMMAND_BLOCK, INPUT_ACTION, REASON_BLOCK, state_values,
};
use outcome::outcome_icon;
pub use question::{other_block, question_block};

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

/// A section of plain text.
fn section(s: &str) -> Value {
    json!({"type": "section", "text": plain(s, MAX_TEXT)})
}

/// A context block of plain text (small and grey).
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

/// An option of checkboxes, radio buttons or a select, valued by its index.
fn option(label: &str, value: usize) -> Value {
    json!({"text": plain(label, MAX_LABEL), "value": value.to_string()})
}

/// Renders messages and modals.
#[derive(Clone, Debug)]
pub struct Blocks {
    /// Signs the values.
    pub buttons: Buttons,
    inbox: Option<String>,
    /// The words, in the channel's `locale`.
    words: Words,
}

impl Blocks {
    /// Messages in `locale` whose values are signed by `buttons`, linking to the inbox at
    /// `inbox`.
    pub fn new(buttons: Buttons, inbox: Option<String>, locale: Locale) -> Self {
        Self {
            buttons,
            inbox,
            words: Words(locale),
        }
    }

    /// The language of the messages.
    pub fn locale(&self) -> Locale {
        self.words.0
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
        let w = self.words;
        let s = match (i.kind, &i.resolution) {
            (Kind::Approval, None) => format!(
                "{}{}",
                w.pick("需要批准：", "Approval needed: "),
                i.tool_name
            ),
            (Kind::Question, None) => w
                .pick("智能体有一个问题", "The agent has a question")
                .into(),
            (Kind::Form, None) => format!(
                "{}{}",
                w.pick("请填写：", "Please fill in: "),
                form_message(i)
            ),
            (_, Some(r)) => format!(
                "{} · {}",
                self.resolved_title(i),
                render::outcome_phrase_in(r, w.0)
            ),
        };
        escape(&cut(&s, 300))
    }

    /// The message for `i` as it stands: `(text, blocks)`.
    pub fn message(&self, i: &Interaction) -> (String, Value) {
        let mut out = Vec::new();
        let locale = self.words.0;
        let header = match &i.resolution {
            None if i.kind == Kind::Approval => {
                format!("{}{}", self.title_base(i), self.words.pick("？", "?"))
            }
            None => self.title_base(i),
            Some(r) => format!(
                "{} {} · {}",
                outcome_icon(r.outcome),
                self.resolved_title(i),
                render::outcome_label_in(r.outcome, locale)
            ),
        };
        out.push(json!({"type": "header", "text": plain(&header, MAX_HEADER)}));
        let ctx = render::context_line(i);
        if !ctx.is_empty() {
            out.push(context(&ctx));
        }
        if i.is_pending()
            && let Some(line) = render::escalated_line(i, locale)
        {
            out.push(section(&format!("⏫ {line}")));
        }
        if let Some(t) = i.title().filter(|t| !t.trim().is_empty())
            && i.kind != Kind::Form
        {
            out.push(section(t));
        }
        if let Some(d) = i.description().filter(|d| !d.trim().is_empty()) {
            out.push(section(d));
        }
        match i.kind {
            Kind::Approval => self.approval(i, &mut out),
            Kind::Question => self.question(i, &mut out),
            Kind::Form => self.form(i, &mut out),
        }
        // It needs a passkey: a link to its card in the inbox, in place of the buttons.
        if let Some(l) = render::step_up_link(i, self.inbox.as_deref(), self.locale()) {
            out.retain(|b| b["type"] != "actions");
            out.push(section(&format!("🔑 {}", l.why)));
            out.push(
                json!({"type": "actions", "block_id": "step_up", "elements": [{
                "type": "button", "action_id": "imrelay-link.step_up",
                "text": plain(l.label, MAX_LABEL), "url": l.url, "style": "primary"}]}),
            );
        }
        match &i.resolution {
            None => out.push(context(&self.words.deadline(&format_time(i.deadline)))),
            Some(r) => {
                out.push(section(&format!(
                    "{} · {}",
                    render::outcome_phrase_in(r, locale),
                    format_time(r.at)
                )));
                self.resolution_details(i, &mut out);
            }
        }
        out.truncate(MAX_BLOCKS);
        (self.summary(i), Value::Array(out))
    }
}

impl Blocks {
    /// What a message is about: "Approve Bash", a question, a form's title.
    fn title_base(&self, i: &Interaction) -> String {
        let w = self.words;
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
    fn resolved_title(&self, i: &Interaction) -> String {
        match i.kind {
            Kind::Approval => i.tool_name.to_string(),
            _ => self.title_base(i),
        }
    }
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
        let b = Blocks::new(
            buttons(),
            Some("https://relay.example".into()),
            Locale::EnUs,
        );
        let mut i = bash(&format!("echo <!channel> *bold* {}", "x".repeat(10_000)));
        i.set_title(Some("t".repeat(500).into()));
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
