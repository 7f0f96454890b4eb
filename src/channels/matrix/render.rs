//! What a Matrix message says: a prompt as a formatted message (HTML `formatted_body` with a
//! plain `body` beside it), with how to answer it written on the message itself (Matrix has
//! no buttons: a reaction ✅ / ❌, or a reply), and the same message as it reads once
//! answered, with the outcome and the votes. Every outside value is escaped for HTML.

use crate::channels::digest::Sheet;
use crate::channels::digest_texts::Texts;
use crate::channels::words::Words;
use crate::interaction::{Interaction, Kind, Outcome, clip, parse_questions};
use crate::present::render::{
    Locale, context_line, escalated_line, form_answers, format_time, given_answers,
    outcome_phrase_in, single_text_form, single_text_note, votes_line,
};

/// The reaction that allows an approval.
pub(crate) const ALLOW: &str = "✅";
/// The reaction that denies (or declines) a prompt.
pub(crate) const DENY: &str = "❌";
/// The reaction that allows an approval and grants its session the rule imrelay proposes
/// ("Allow similar").
pub(crate) const SIMILAR: &str = "🔁";
/// The reaction on a digest that posts its next member on its own (Review).
pub(crate) const REVIEW: &str = "👀";

/// The most characters of a tool call shown; the rest is in the inbox. (An event may be up
/// to 65,535 bytes, and the message carries the text twice: plain and HTML.)
const MAX_BLOCK_CHARS: usize = 6000;

/// A message's two forms.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Text {
    /// The plain text (`body`).
    pub plain: String,
    /// The HTML (`formatted_body`).
    pub html: String,
}

impl Text {
    fn line(&mut self, plain: impl AsRef<str>, html: impl AsRef<str>) {
        for (out, add) in [
            (&mut self.plain, plain.as_ref()),
            (&mut self.html, html.as_ref()),
        ] {
            if !out.is_empty() {
                out.push('\n');
            }
            out.push_str(add);
        }
    }

    /// Appends a line of outside text: plain as it is, escaped in HTML.
    fn text(&mut self, s: &str) {
        self.line(s, esc(s).replace('\n', "<br/>"));
    }
}

/// `s` escaped for HTML text and attribute values.
pub(crate) fn esc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// Renders messages for one configuration.
#[derive(Clone, Debug)]
pub(crate) struct Render {
    /// The language of the instructions.
    pub locale: Locale,
    /// Where the inbox shows an interaction (`<inbox>/#<id>`), when known.
    pub inbox: Option<String>,
}

impl Render {
    fn zh(&self) -> bool {
        self.locale == Locale::ZhCn
    }

    /// The first line: what it is and what it asks.
    fn headline(&self, i: &Interaction) -> (String, String) {
        let what = match i.kind {
            Kind::Approval => {
                let shown = crate::present::present(
                    &i.tool_name,
                    &i.input.map(),
                    i.cwd.as_deref(),
                    crate::present::Budget::ALL,
                );
                format!("🔐 {}: {}", i.tool_name, clip(&shown.summary, 200))
            }
            Kind::Question => "❓ Question".into(),
            Kind::Form if single_text_form(i).is_some() => "❓ Question".into(),
            Kind::Form => "📝 Form".into(),
        };
        (what.clone(), format!("<b>{}</b>", esc(&what)))
    }

    /// The message of `i` as it now is: a pending prompt with how to answer it (and the
    /// votes so far), or the outcome once resolved.
    pub(super) fn message(&self, i: &Interaction) -> Text {
        let mut t = Text {
            plain: String::new(),
            html: String::new(),
        };
        let (plain, html) = self.headline(i);
        t.line(plain, html);
        self.body(i, &mut t);
        let context = context_line(i);
        if !context.is_empty() {
            t.line(&context, format!("<i>{}</i>", esc(&context)));
        }
        if let Some(e) = escalated_line(i, self.locale) {
            t.text(&format!("⏫ {e}"));
        }
        if let Some(v) = votes_line(i, self.locale) {
            t.text(&format!("🗳 {v}"));
        }
        match &i.resolution {
            None => {
                t.text(&format!("⏳ {}", self.until(i)));
                self.how_to_answer(i, &mut t);
            }
            Some(r) => {
                let phrase = outcome_phrase_in(r, self.locale);
                t.line(
                    format!("{} {phrase} · {}", icon(r.outcome), format_time(r.at)),
                    format!(
                        "{} <b>{}</b> · {}",
                        icon(r.outcome),
                        esc(&phrase),
                        format_time(r.at)
                    ),
                );
                if let Some(m) = r.message().filter(|m| *m != phrase) {
                    t.text(&format!("💬 {}", clip(m, 1000)));
                }
                for (q, a) in given_answers(i).into_iter().chain(form_answers(i)) {
                    t.text(&format!("• {}: {}", clip(&q, 200), clip(&a, 500)));
                }
            }
        }
        if let Some(inbox) = &self.inbox {
            let link = format!("{inbox}#{}", i.id);
            t.line(
                &link,
                format!("<a href=\"{}\">{}</a>", esc(&link), esc(&link)),
            );
        }
        t
    }

    fn until(&self, i: &Interaction) -> String {
        if self.zh() {
            format!("等待回答，截止 {}", format_time(i.deadline))
        } else {
            format!("Waiting for an answer until {}", format_time(i.deadline))
        }
    }

    /// What is asked: the tool call as code, the questions with numbered options, the form's
    /// fields.
    fn body(&self, i: &Interaction, t: &mut Text) {
        match i.kind {
            Kind::Approval => {
                let (text, lang) =
                    crate::present::chat_block(&i.tool_name, &i.input.map(), i.cwd.as_deref());
                let cut = text.chars().count() > MAX_BLOCK_CHARS;
                let shown = clip(&text, MAX_BLOCK_CHARS);
                t.line(
                    &shown,
                    format!(
                        "<pre><code class=\"language-{lang}\">{}</code></pre>",
                        esc(&shown)
                    ),
                );
                if cut {
                    t.text(if self.zh() {
                        "（内容过长已截断，完整内容见收件箱）"
                    } else {
                        "(cut: the whole call is in the inbox)"
                    });
                }
            }
            Kind::Question => self.questions(i, t),
            Kind::Form => self.form(i, t),
        }
    }

    /// A question's text, each with its options numbered.
    fn questions(&self, i: &Interaction, t: &mut Text) {
        for (n, q) in parse_questions(&i.input.map())
            .unwrap_or_default()
            .iter()
            .enumerate()
        {
            let head = if q.header.is_empty() {
                format!("{}. {}", n + 1, q.question)
            } else {
                format!("{}. [{}] {}", n + 1, q.header, q.question)
            };
            t.line(&head, format!("<b>{}</b>", esc(&head)));
            for (k, o) in q.options.iter().enumerate() {
                let d = o
                    .description
                    .as_deref()
                    .map(|d| format!(" — {d}"))
                    .unwrap_or_default();
                t.text(&format!("  {}) {}{d}", k + 1, o.label));
            }
            if q.multi_select {
                t.text(if self.zh() {
                    "  （可多选）"
                } else {
                    "  (several may be chosen)"
                });
            }
        }
    }

    /// A form's message and fields (a single text field: its note).
    fn form(&self, i: &Interaction, t: &mut Text) {
        let Ok(form) = crate::interaction::Form::from_input(&i.input.map()) else {
            return;
        };
        t.text(&clip(&form.message, 2000));
        if let Some(f) = form.fields.first().filter(|_| form.is_single_text()) {
            let note = single_text_note(f);
            if !note.is_empty() {
                t.text(&note);
            }
            return;
        }
        for f in &form.fields {
            let mut line = format!("• {} ({})", f.label(), f.hint());
            if f.name != f.label() {
                line = format!("• {} [{}] ({})", f.label(), f.name, f.hint());
            }
            if let Some(d) = &f.description {
                line.push_str(&format!(" — {d}"));
            }
            if f.required {
                line.push_str(if self.zh() {
                    " · 必填"
                } else {
                    " · required"
                });
            }
            t.text(&line);
        }
    }

    /// How to answer, on the message itself.
    fn how_to_answer(&self, i: &Interaction, t: &mut Text) {
        // A `step_up` approval is answered in the inbox with a passkey: the message says so
        // and links to the card, in place of the reactions (which would be refused).
        if let Some(l) = crate::present::render::step_up_link(i, self.inbox.as_deref(), self.locale)
        {
            t.line(
                format!("{} {}: {}", l.label, l.why, l.url),
                format!(
                    "<b>{} {}</b>: <a href=\"{}\">{}</a>",
                    esc(l.label),
                    esc(&l.why),
                    esc(&l.url),
                    esc(&l.url)
                ),
            );
            return;
        }
        let zh = self.zh();
        let how = match i.kind {
            Kind::Approval if zh => {
                format!("回应 {ALLOW} 批准，{DENY} 拒绝；或回复此消息写明拒绝理由。")
            }
            Kind::Approval => format!(
                "React {ALLOW} to allow or {DENY} to deny, or reply to this message with a reason to deny."
            ),
            Kind::Question => {
                let many = parse_questions(&i.input.map()).map_or(0, |q| q.len()) > 1;
                match (zh, many) {
                    (true, false) => {
                        format!("回复此消息：选项编号或你自己的回答；回应 {DENY} 拒绝回答。")
                    }
                    (true, true) => format!(
                        "回复此消息：每个问题一行，写选项编号或你自己的回答；回应 {DENY} 拒绝回答。"
                    ),
                    (false, false) => format!(
                        "Reply to this message with an option's number (several: 1, 3) or your own answer; react {DENY} to decline."
                    ),
                    (false, true) => format!(
                        "Reply to this message with one line per question, each an option's number or your own answer; react {DENY} to decline."
                    ),
                }
            }
            Kind::Form if single_text_form(i).is_some() => {
                if zh {
                    format!("回复此消息写下你的回答；回应 {DENY} 拒绝。")
                } else {
                    format!("Reply to this message with your answer; react {DENY} to decline.")
                }
            }
            Kind::Form if zh => {
                format!("回复此消息，每个字段一行：name: value；回应 {DENY} 拒绝。")
            }
            Kind::Form => format!(
                "Reply to this message with one name: value line per field; react {DENY} to decline."
            ),
        };
        t.line(format!("👉 {how}"), format!("<b>👉 {}</b>", esc(&how)));
        if i.kind == Kind::Approval && !crate::interaction::quorum::is_voted(i) {
            self.approval_extras(i, t);
        }
    }

    /// What else an approval that one person decides offers: "Allow similar" (a reaction
    /// 🔁, the rule it grants shown in full) and "Edit & approve" (a reply `edit: <command>`).
    fn approval_extras(&self, i: &Interaction, t: &mut Text) {
        let w = Words(self.locale);
        if let Some(rule) = crate::present::render::similar_rule(i) {
            let native = w.also_remembers_for(i);
            let lead = w.react_similar(SIMILAR);
            let rule = clip(&rule, 200);
            t.line(
                format!("{SIMILAR} {lead}{rule}{native}"),
                format!(
                    "{SIMILAR} {}<code>{}</code>{}",
                    esc(&lead),
                    esc(&rule),
                    esc(native)
                ),
            );
        }
        if crate::present::render::editable_command(i).is_some() {
            let how = w.edit_by_reply("“edit:”");
            t.line(format!("✏️ {how}"), format!("✏️ {}", esc(&how)));
        }
    }

    /// A digest message: its title, one line per listed member (linked to its card in the
    /// inbox, when known), and how to answer it by reactions; once closed, its title alone.
    pub(super) fn digest(&self, sheet: &Sheet) -> Text {
        let texts = Texts(self.locale);
        let mut t = Text {
            plain: String::new(),
            html: String::new(),
        };
        t.line(
            format!("📋 {}", sheet.title),
            format!("<b>📋 {}</b>", esc(&sheet.title)),
        );
        for (n, line) in sheet.lines.iter().enumerate() {
            let link = self
                .inbox
                .as_ref()
                .zip(sheet.listed.get(n))
                .map(|(inbox, id)| format!("{inbox}#{id}"));
            match link {
                Some(l) => t.line(
                    format!("• {line} — {l}"),
                    format!("• <a href=\"{}\">{}</a>", esc(&l), esc(line)),
                ),
                None => t.text(&format!("• {line}")),
            }
        }
        if let Some(more) = &sheet.more {
            t.text(more);
        }
        if !sheet.is_closed() {
            let how = texts.react_list([ALLOW, DENY, REVIEW]);
            t.line(format!("👉 {how}"), format!("<b>👉 {}</b>", esc(&how)));
        }
        t
    }

    /// The confirmation of a digest's Approve all or Deny all (`sheet` in its confirming
    /// view), answered by a reaction on it.
    pub(super) fn confirmation(&self, sheet: &Sheet) -> Text {
        let mut t = Text {
            plain: String::new(),
            html: String::new(),
        };
        let question = sheet.question.clone().unwrap_or_default();
        t.line(&question, format!("<b>{}</b>", esc(&question)));
        for line in &sheet.lines {
            t.text(&format!("• {line}"));
        }
        if let Some(more) = &sheet.more {
            t.text(more);
        }
        let how = Texts(self.locale).react_confirm([ALLOW, DENY]);
        t.line(format!("👉 {how}"), format!("<b>👉 {}</b>", esc(&how)));
        t
    }

    /// A message of one line of `text` (a confirmation once answered).
    pub(super) fn plain(&self, text: &str) -> Text {
        Text {
            plain: text.to_string(),
            html: esc(text),
        }
    }

    /// A notice to `sender` about their answer (a refusal, a late answer, a bad reply).
    pub(super) fn notice(&self, sender: &str, text: &str) -> Text {
        Text {
            plain: format!("{sender}: {text}"),
            html: format!(
                "<a href=\"https://matrix.to/#/{}\">{}</a>: {}",
                esc(sender),
                esc(sender),
                esc(text)
            ),
        }
    }
}

/// The icon of an outcome.
fn icon(o: Outcome) -> &'static str {
    match o {
        Outcome::Allowed | Outcome::Answered => "✅",
        Outcome::Denied => "❌",
        Outcome::Expired => "⌛",
        Outcome::Cancelled => "🚫",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::interaction::InteractionId;
    use jiff::Timestamp;
    use serde_json::json;

    fn pending(tool: &str, input: serde_json::Value) -> Interaction {
        Interaction::pending(
            InteractionId::parse("t1").unwrap(),
            tool,
            input.as_object().unwrap().clone(),
            Timestamp::from_millisecond(1_700_000_000_000).unwrap(),
            300,
        )
    }

    #[test]
    fn a_prompt_says_how_to_answer_and_escapes_outside_text() {
        let r = Render {
            locale: Locale::EnUs,
            inbox: Some("https://relay.example/inbox".into()),
        };
        let i = pending("Bash", json!({"command": "echo '<b>hi</b>' && rm -rf x"}));
        let t = r.message(&i);
        assert!(t.html.contains("&lt;b&gt;hi&lt;/b&gt;"), "{}", t.html);
        assert!(!t.html.contains("<b>hi</b>"), "{}", t.html);
        assert!(t.plain.contains("echo '<b>hi</b>'"), "{}", t.plain);
        assert!(t.plain.contains("React ✅ to allow"), "{}", t.plain);
        assert!(t.plain.contains("https://relay.example/inbox#t1"));
        let q = pending(
            "AskUserQuestion",
            json!({"questions": [{"question": "Which db?", "header": "DB", "multiSelect": false,
                "options": [{"label": "sqlite"}, {"label": "postgres", "description": "server"}]}]}),
        );
        let t = r.message(&q);
        assert!(t.plain.contains("2) postgres — server"), "{}", t.plain);
        assert!(t.plain.contains("option's number"), "{}", t.plain);
        let zh = Render {
            locale: Locale::ZhCn,
            inbox: None,
        };
        let t = zh.message(&i);
        assert!(t.plain.contains("回应 ✅ 批准"), "{}", t.plain);
    }

    #[test]
    fn a_session_approval_offers_allow_similar_with_its_rule_and_edit_by_reply() {
        let mut i = pending("Bash", json!({"command": "npm run test -- --watch"}));
        i.session = Some("s-1".into());
        for (locale, similar, edit) in [
            (
                Locale::EnUs,
                "🔁 React 🔁 to allow it and, for this session, calls like it: Bash(npm run test:*)",
                "✏️ To run it changed, reply to this message: “edit:” and the command.",
            ),
            (
                Locale::ZhCn,
                "🔁 回应 🔁 批准，并在本会话中允许同类调用：Bash(npm run test:*)",
                "✏️ 如需改写后运行，请回复此消息：“edit:” 加上改写后的命令。",
            ),
        ] {
            let r = Render {
                locale,
                inbox: None,
            };
            let t = r.message(&i);
            assert!(t.plain.contains(similar), "{}", t.plain);
            assert!(t.plain.contains(edit), "{}", t.plain);
            assert!(
                t.html.contains("<code>Bash(npm run test:*)</code>"),
                "{}",
                t.html
            );
        }
        // No session: no rule to grant; not Bash: nothing to edit.
        let r = Render {
            locale: Locale::EnUs,
            inbox: None,
        };
        let t = r.message(&pending("Read", json!({"file_path": "/etc/hosts"})));
        assert!(
            !t.plain.contains("🔁") && !t.plain.contains("edit:"),
            "{}",
            t.plain
        );
    }

    #[test]
    fn a_step_up_approval_links_to_its_inbox_card_in_place_of_the_reactions() {
        let r = Render {
            locale: Locale::EnUs,
            inbox: Some("https://relay.example/inbox/".into()),
        };
        let mut i = pending("Bash", json!({"command": "terraform apply"}));
        i.route = Some(std::sync::Arc::new(
            crate::interaction::routes::RouteStamp {
                name: "prod".into(),
                step_up: true,
                ..crate::interaction::routes::RouteStamp::default_route()
            },
        ));
        let t = r.message(&i);
        assert!(t.plain.contains("needs a passkey"), "{}", t.plain);
        assert!(
            t.plain.contains("https://relay.example/inbox/#t1"),
            "{}",
            t.plain
        );
        assert!(!t.plain.contains("React ✅"), "{}", t.plain);
        assert!(
            t.html
                .contains("<a href=\"https://relay.example/inbox/#t1\">"),
            "{}",
            t.html
        );
        // Without an inbox address there is nothing to link to: the reactions stay, and a
        // reaction is refused with the same reason.
        let bare = Render {
            locale: Locale::EnUs,
            inbox: None,
        };
        assert!(bare.message(&i).plain.contains("React ✅"));
    }
}
