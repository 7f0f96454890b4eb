//! Telegram rendering: prompts (approvals and questions) with their inline keyboards, the
//! final state of a resolved interaction, and the ForceReply requests.
//!
//! Messages use HTML parse mode. Everything that comes from an agent or a person (tool
//! names, input, titles, questions, labels, reasons, names) is escaped. A message never
//! exceeds Telegram's 4096 characters: long tool input is cut with a note of how much was
//! left out, and question texts shrink step by step until the whole message fits. Lengths
//! are measured on the HTML source in UTF-16 code units, which is never less than what
//! Telegram counts; every field's budget is in those units *after* escaping (a field full of
//! `&` grows fivefold when escaped). Text is always cut before it is escaped, so a cut never
//! splits an escape or a tag, and the deadline (on a prompt) or the outcome (on a final
//! edit) is always kept.
//!
//! `mod.rs` has the entry points (a pending prompt, a resolved message) and the head every
//! message starts with; each kind's text and keyboard are in `approval.rs`, `question.rs` and
//! `form.rs`, the outcome in `outcome.rs`, the ForceReply requests in `reply.rs`, and HTML
//! escaping with the length budgets in `budget.rs`.

mod approval;
mod budget;
mod form;
mod outcome;
mod question;
mod reply;

use serde_json::Value;
use teloxide::types::{InlineKeyboardButton, InlineKeyboardMarkup};

use super::button::{Action, Codec};
use super::state::{PromptState, ReplyKind};
use crate::channels::words::Words;
use crate::interaction::clip;
use crate::interaction::{Form, Interaction, Kind, parse_questions};
use crate::present::render::{context_line, format_time, single_text_form};

use approval::{approval_prompt, approval_text};
use budget::{LEVELS, Limits, esc, last_resort};
pub(crate) use budget::{escape, toast};
use form::{form_keyboard, form_text, single_text, single_text_keyboard};
use outcome::outcome_block;
pub(crate) use outcome::outcome_plain;
use question::{question_keyboard, question_text};
pub(crate) use reply::reply_request;
pub(crate) use reply::{reply_closed, reply_taken};

/// Longest text shown on a button, in characters.
const BUTTON_CHARS: usize = 40;

/// A prompt ready to send: text and keyboard.
#[derive(Clone, Debug)]
pub(crate) struct Prompt {
    /// The HTML text.
    pub text: String,
    /// The inline keyboard.
    pub keyboard: InlineKeyboardMarkup,
}

/// Makes callback data for the buttons of one interaction.
pub(crate) struct Buttons<'a> {
    /// The codec (keyed).
    pub codec: &'a Codec,
    /// The interaction's handle.
    pub handle: &'a str,
    /// The inbox's base URL (`server.public_url`), for a link to all of a cut tool call.
    pub inbox: Option<&'a str>,
    /// The words, in the channel's `locale`.
    pub words: Words,
}

impl Buttons<'_> {
    fn button(&self, text: &str, action: Action) -> InlineKeyboardButton {
        InlineKeyboardButton::callback(
            clip(text, BUTTON_CHARS),
            self.codec.encode(self.handle, action),
        )
    }
}

/// The first line: what this is, and whether it still waits for an answer.
fn headline(i: &Interaction, w: Words) -> String {
    let tool = || format!("<b>{}</b>", esc(&i.tool_name, 100));
    match (i.kind, i.is_pending()) {
        (Kind::Approval, true) => format!("🔐 {}", w.needs_approval(&tool())),
        (Kind::Approval, false) => format!("🔐 {}", w.approval_for(&tool())),
        (Kind::Form, _) if single_text_form(i).is_some() => {
            format!("❓ <b>{}</b>", w.kind_label(Kind::Question))
        }
        (Kind::Question, _) => format!("❓ <b>{}</b>", w.kind_label(Kind::Question)),
        (Kind::Form, _) => format!("📝 <b>{}</b>", w.kind_label(Kind::Form)),
    }
}

fn head(i: &Interaction, lim: &Limits, w: Words) -> String {
    let mut s = headline(i, w);
    if let Some(t) = i.title().filter(|t| !t.trim().is_empty() && lim.title > 0) {
        s.push_str(&format!("\n<b>{}</b>", esc(t, lim.title)));
    }
    // A Bash call's own `description` says what the command is for.
    let input = i.input.map();
    let description = match i.kind {
        Kind::Approval => i
            .description()
            .or_else(|| input.get("description").and_then(Value::as_str)),
        Kind::Question | Kind::Form => i.description(),
    }
    .filter(|d| !d.trim().is_empty() && lim.description > 0);
    if let Some(d) = description {
        s.push_str(&format!("\n{}", esc(d, lim.description)));
    }
    let ctx = context_line(i);
    if !ctx.is_empty() {
        s.push_str(&format!("\n<i>{}</i>", esc(&ctx, 300)));
    }
    s
}

fn deadline_line(i: &Interaction, w: Words) -> String {
    format!(
        "⏳ {}",
        w.answer_within(i.timeout_secs(), &format_time(i.deadline))
    )
}

/// The prompt for a pending interaction, with its keyboard; `state` holds the answers given
/// on this message so far.
pub(crate) fn prompt(i: &Interaction, state: &PromptState, b: &Buttons) -> Prompt {
    let w = b.words;
    let mut tail = deadline_line(i, w);
    if let Some(line) = crate::present::render::escalated_line(i, w.0) {
        tail = format!("⏫ <b>{}</b>\n{tail}", escape(&line));
    }
    // It needs a passkey: a link to its card in the inbox, in place of the buttons.
    let link = crate::present::render::step_up_link(i, b.inbox, w.0)
        .and_then(|l| Some((l.url.parse().ok()?, l)));
    if let Some((url, l)) = link {
        tail = format!("🔑 <b>{}</b>\n{tail}", escape(&l.why));
        let mut p = match i.kind {
            Kind::Approval => Prompt {
                text: approval_text(i, &tail, b.inbox, w),
                keyboard: InlineKeyboardMarkup::default(),
            },
            _ => prompt_of(i, state, b, tail),
        };
        p.keyboard = InlineKeyboardMarkup::new(vec![vec![InlineKeyboardButton::url(l.label, url)]]);
        return p;
    }
    prompt_of(i, state, b, tail)
}

/// [`prompt`] under `tail`, with the buttons that answer it.
fn prompt_of(i: &Interaction, state: &PromptState, b: &Buttons, tail: String) -> Prompt {
    let w = b.words;
    match i.kind {
        Kind::Approval => approval_prompt(i, tail, b),
        Kind::Question => {
            let questions = parse_questions(&i.input.map()).unwrap_or_default();
            Prompt {
                text: question_text(i, &questions, Some(state), &tail, w),
                keyboard: InlineKeyboardMarkup::new(question_keyboard(&questions, state, b)),
            }
        }
        Kind::Form => match Form::from_input(&i.input.map()) {
            Ok(form) if form.is_single_text() => Prompt {
                text: single_text(i, &form, true, &tail, w),
                keyboard: InlineKeyboardMarkup::new(single_text_keyboard(&form, b)),
            },
            Ok(form) => Prompt {
                text: form_text(i, &form, Some(state), &tail, w),
                keyboard: InlineKeyboardMarkup::new(form_keyboard(&form, state, b)),
            },
            Err(e) => Prompt {
                text: last_resort(i, &w.form_unshowable(&e.to_string()), &tail, w),
                keyboard: InlineKeyboardMarkup::new(vec![vec![
                    b.button(&format!("❌ {}", w.decline()), Action::Deny),
                ]]),
            },
        },
    }
}

/// The final text of a resolved interaction's prompt: what was asked, the outcome, who,
/// via which channel and when, in `w`'s words. It has no keyboard.
pub(crate) fn resolved(i: &Interaction, w: Words) -> String {
    let mut tail = outcome_block(i, &LEVELS[1], w);
    if let Some(votes) = crate::present::render::votes_line(i, w.0) {
        tail = format!("👥 {}\n{tail}", escape(&votes));
    }
    match i.kind {
        Kind::Approval => approval_text(i, &tail, None, w),
        Kind::Question => {
            let questions = parse_questions(&i.input.map()).unwrap_or_default();
            question_text(i, &questions, None, &tail, w)
        }
        Kind::Form => match Form::from_input(&i.input.map()) {
            Ok(form) if form.is_single_text() => single_text(i, &form, false, &tail, w),
            Ok(form) => form_text(i, &form, None, &tail, w),
            Err(_) => last_resort(i, "", &tail, w),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::budget::{MAX_TEXT, MAX_TOAST, fit_escaped, units};
    use super::*;
    use crate::interaction::Outcome;
    use crate::interaction::{InteractionId, now};
    use crate::present;
    use serde_json::json;

    const EN: Words = Words(crate::present::render::Locale::EnUs);

    fn interaction(tool: &str, input: Value) -> Interaction {
        Interaction {
            session: Some("s1".into()),
            agent: Some("claude-code".into()),
            cwd: Some("/home/dev/<shop>".into()),
            ..Interaction::pending(
                InteractionId::parse("t1").unwrap(),
                tool,
                input.as_object().unwrap().clone(),
                now(),
                300,
            )
        }
    }

    fn buttons(codec: &Codec) -> Buttons<'_> {
        Buttons {
            codec,
            handle: "AAAAAAAAAAA",
            inbox: None,
            words: EN,
        }
    }

    #[test]
    fn hostile_input_is_escaped() {
        let codec = Codec::new(vec![1; 32]);
        let i = interaction(
            "Bash",
            json!({"command": "echo '<script>alert(1)</script>' && rm -rf /"}),
        );
        let p = prompt(&i, &PromptState::default(), &buttons(&codec));
        assert!(
            p.text.contains("&lt;script&gt;alert(1)&lt;/script&gt;"),
            "{}",
            p.text
        );
        assert!(p.text.contains("&amp;&amp; rm -rf /"));
        assert!(!p.text.contains("<script>"));
        assert!(p.text.contains("/home/dev/&lt;shop&gt;"));
    }

    #[test]
    fn long_input_is_cut_to_fit_with_a_note() {
        let codec = Codec::new(vec![1; 32]);
        let i = interaction("Write", json!({"content": "<&>".repeat(5000)}));
        let p = prompt(&i, &PromptState::default(), &buttons(&codec));
        assert!(units(&p.text) <= MAX_TEXT, "{}", units(&p.text));
        assert!(p.text.contains("more characters not shown"));
        let r = resolved(&i, EN);
        assert!(units(&r) <= MAX_TEXT);
    }

    #[test]
    fn fit_never_splits_an_escape() {
        let (s, cut) = fit_escaped("a&b", 3);
        assert_eq!((s.as_str(), cut), ("a", 2));
        let (s, cut) = fit_escaped("a&b", 6);
        assert_eq!((s.as_str(), cut), ("a&amp;", 1));
    }

    /// The text of HTML as Telegram shows it (tags dropped, entities decoded).
    fn shown(html: &str) -> String {
        let mut out = String::new();
        let mut rest = html;
        while let Some(c) = rest.chars().next() {
            if c == '<' {
                rest = &rest[rest.find('>').unwrap() + 1..];
            } else if c == '&' {
                let end = rest.find(';').unwrap();
                out.push(match &rest[..=end] {
                    "&lt;" => '<',
                    "&gt;" => '>',
                    "&amp;" => '&',
                    "&quot;" => '"',
                    other => panic!("unexpected entity {other}"),
                });
                rest = &rest[end + 1..];
            } else {
                out.push(c);
                rest = &rest[c.len_utf8()..];
            }
        }
        out
    }

    /// The number in "1,234 more characters not shown".
    fn cut_count(text: &str) -> usize {
        let end = text.find(" more characters not shown").expect("a cut note");
        let start = text[..end].rfind('>').unwrap() + 1;
        text[start..end].replace(',', "").parse().unwrap()
    }

    /// Text that grows about fivefold when escaped.
    fn hostile(n: usize) -> String {
        "\"\"😀\"&".repeat(n)
    }

    /// Text that grows more than fivefold when escaped: quotes and an emoji.
    fn quotes(n: usize) -> String {
        "\"\"\"\"\"😀".repeat(n)
    }

    fn resolve(mut i: Interaction, by: &str, message: &str) -> Interaction {
        i.resolution = Some(Box::new(crate::interaction::Resolution {
            outcome: Outcome::Denied,
            by: Some(by.into()),
            via: crate::interaction::Via::new(crate::channels::telegram::CHANNEL),
            at: now(),
            result: crate::interaction::PermissionResult::Deny {
                message: message.into(),
                interrupt: false,
            }
            .into(),
        }));
        i
    }

    #[test]
    fn fields_are_budgeted_after_escaping() {
        // Every character escapes to 6 units (or is an emoji of 2): the budget is still kept.
        let e = esc(&"\"".repeat(1000), 300);
        assert!(units(&e) <= 300, "{}", units(&e));
        assert!(e.ends_with('…') && !e.contains("&quot…") && !e.contains("&qu…"));
        let e = esc(&"😀".repeat(1000), 301);
        assert!(units(&e) <= 301);
        assert_eq!(esc("a&b", 100), "a&amp;b");
        assert!(units(&toast(&"😀".repeat(300))) <= MAX_TOAST);
        assert_eq!(toast("Allowed"), "Allowed");
    }

    #[test]
    fn tool_calls_show_as_people_read_them() {
        let codec = Codec::new(vec![1; 32]);
        // An edit is a diff with its file, escaped for Telegram's HTML.
        let edit = interaction(
            "Edit",
            json!({"file_path": "/home/dev/<shop>/src/a.rs", "old_string": "let x = 1;\nkeep();", "new_string": "let x = \"<b>2</b>\";\nkeep();"}),
        );
        let p = prompt(&edit, &PromptState::default(), &buttons(&codec));
        assert!(
            p.text.contains("<code class=\"language-diff\">"),
            "{}",
            p.text
        );
        assert!(p.text.contains("File: src/a.rs"), "{}", p.text);
        assert!(p.text.contains("\n-let x = 1;"), "{}", p.text);
        assert!(
            p.text
                .contains("\n+let x = &quot;&lt;b&gt;2&lt;/b&gt;&quot;;"),
            "{}",
            p.text
        );
        assert!(!p.text.contains("old_string"), "{}", p.text);
        // A write is its file and first lines; a command is itself, with no JSON around it.
        let write = interaction(
            "Write",
            json!({"file_path": "/etc/hosts", "content": "127.0.0.1 localhost\n"}),
        );
        let p = prompt(&write, &PromptState::default(), &buttons(&codec));
        assert!(p.text.contains("/etc/hosts"), "{}", p.text);
        assert!(p.text.contains("127.0.0.1 localhost"), "{}", p.text);
        assert!(!p.text.contains("\\n"), "no JSON escapes: {}", p.text);
        let bash = interaction("Bash", json!({"command": "ls -la\ncat x"}));
        let p = prompt(&bash, &PromptState::default(), &buttons(&codec));
        assert!(
            p.text
                .contains("<code class=\"language-bash\">ls -la\ncat x</code>"),
            "{}",
            p.text
        );
    }

    #[test]
    fn hostile_approvals_keep_the_deadline_an_exact_cut_count_and_the_outcome() {
        let codec = Codec::new(vec![1; 32]);
        let command = hostile(3000);
        let mut i = interaction("Bash", json!({ "command": command }));
        i.set_title(Some(hostile(500).into()));
        i.set_description(Some(hostile(1000).into()));
        i.cwd = Some(hostile(500).into());
        i.agent = Some(hostile(100).into());
        i.tool_name = hostile(100).into();
        let p = prompt(&i, &PromptState::default(), &buttons(&codec));
        assert!(units(&p.text) <= MAX_TEXT, "{}", units(&p.text));
        assert!(p.text.contains("⏳ Answer within 5 min"), "{}", p.text);
        assert!(!p.text.contains("&lt;b&gt;") && !p.text.contains("&amp;lt;"));
        // The count is exact: what is shown plus what was cut is the whole tool call as a
        // person reads it (a tool of unknown name: its input field by field).
        let full =
            present::present(&i.tool_name, &i.input.map(), None, present::Budget::ALL).plain_text();
        assert!(full.starts_with("command: "), "{full}");
        let start = p.text.find("<code class=\"language-text\">").unwrap();
        let block = &p.text[start..p.text.find("</code>").unwrap()];
        let shown_input = shown(&format!("{block}</code>"));
        assert!(full.starts_with(&shown_input));
        assert_eq!(
            shown_input.chars().count() + cut_count(&p.text),
            full.chars().count()
        );

        let r = resolved(&resolve(i, &hostile(50), &hostile(2000)), EN);
        assert!(units(&r) <= MAX_TEXT, "{}", units(&r));
        assert!(r.starts_with("🔐 Approval for"), "{r}");
        assert!(r.contains("❌ <b>Denied by"), "{r}");
        assert!(r.contains("🕑"), "{r}");
        assert!(!r.contains("&lt;b&gt;"));
    }

    #[test]
    fn hostile_questions_keep_the_deadline_and_the_outcome() {
        let codec = Codec::new(vec![1; 32]);
        let q = |n: usize, multi: bool| {
            json!({"question": format!("{n}{}", quotes(3000)), "header": quotes(50), "multiSelect": multi,
                "options": (0..4).map(|o| json!({"label": format!("{o}{}", quotes(300)), "description": quotes(500)})).collect::<Vec<_>>()})
        };
        let mut i = interaction(
            "AskUserQuestion",
            json!({"questions": [q(0, false), q(1, true), q(2, false), q(3, true)]}),
        );
        assert_eq!(parse_questions(&i.input.map()).unwrap().len(), 4);
        i.set_title(Some(hostile(500).into()));
        i.set_description(Some(hostile(1000).into()));
        i.cwd = Some(hostile(500).into());
        let mut partly = PromptState::default();
        partly.answers.insert(0, vec![hostile(4000)]);
        partly.other.insert(1, hostile(4000));
        for state in [PromptState::default(), partly] {
            let p = prompt(&i, &state, &buttons(&codec));
            assert!(units(&p.text) <= MAX_TEXT, "{}", units(&p.text));
            assert!(p.text.contains("⏳ Answer within"), "{}", p.text);
            assert!(!p.text.contains("&lt;b&gt;") && !p.text.contains("&amp;lt;"));
        }
        let r = resolved(&resolve(i, "Alice", &hostile(2000)), EN);
        assert!(units(&r) <= MAX_TEXT, "{}", units(&r));
        assert!(r.contains("Denied by Alice via telegram"), "{r}");
        assert!(!r.contains("&lt;b&gt;"));
    }

    #[test]
    fn the_last_resort_cuts_plain_text_and_keeps_the_tail() {
        let i = interaction("Bash", json!({}));
        let tail = "⏳ Answer within 5 min — by then";
        let m = last_resort(&i, &format!("<b>{}</b>", hostile(5000)), tail, EN);
        assert!(units(&m) <= MAX_TEXT, "{}", units(&m));
        assert!(m.ends_with(tail), "{m}");
        assert!(m.starts_with("🔐 <b>Bash</b> needs approval"));
        // The plain text was escaped once, after cutting: its tag shows as text, and no
        // escape is split or doubled.
        assert!(m.contains("&lt;b&gt;&quot;&quot;😀&quot;&amp;"), "{m}");
        assert!(!m.contains("&amp;lt;"));
        let resolved_one = resolve(i, "Alice", "no");
        assert!(last_resort(&resolved_one, "x", "t", EN).starts_with("🔐 Approval for"));
    }

    /// English words of the channel's own that a Chinese message must not show (the agent's
    /// and the person's words, the tool, the command, the context line stay as they are).
    const ENGLISH: &[&str] = &[
        "Allow",
        "Deny",
        "Answer",
        "approval",
        "Question",
        "Form",
        "within",
        "Submit",
        "Decline",
        "Other",
        "Choose",
        "Reply",
        "reply",
        "Skip",
        "Back",
        "Default",
        "Done",
        "Yes",
        "Tap",
        "similar",
        "Approval",
        "Denied",
        "Allowed",
        "via",
        "more characters",
    ];

    fn english_in(text: &str) -> Vec<&'static str> {
        ENGLISH
            .iter()
            .copied()
            .filter(|w| text.contains(w))
            .collect()
    }

    /// A prompt as a person reads it: its text and its buttons.
    fn read(p: &Prompt) -> String {
        let labels: Vec<&str> = p
            .keyboard
            .inline_keyboard
            .iter()
            .flatten()
            .map(|b| b.text.as_str())
            .collect();
        format!("{}\n{}", p.text, labels.join("\n"))
    }

    #[test]
    fn in_chinese_every_text_of_the_channels_own_is_chinese() {
        let codec = Codec::new(vec![1; 32]);
        let zh = Buttons {
            words: Words(crate::present::render::Locale::ZhCn),
            ..buttons(&codec)
        };
        // An approval with every line: "Allow similar", Edit & approve, a cut input.
        let mut bash = interaction("Bash", json!({"command": "npm run test -- --watch"}));
        bash.suggestions = Some(
            json!([{"type": "addRules", "rules": [{"toolName": "Bash"}],
            "behavior": "allow", "destination": "session"}])
            .into(),
        );
        let p = prompt(&bash, &PromptState::default(), &zh);
        assert!(
            p.text.contains("需要审批") && p.text.contains("内回答"),
            "{}",
            p.text
        );
        assert!(p.text.contains("「批准同类」"), "{}", p.text);
        assert_eq!(english_in(&read(&p)), Vec::<&str>::new(), "{}", read(&p));
        let long = interaction("Write", json!({"content": "x".repeat(9000)}));
        let p = prompt(&long, &PromptState::default(), &zh);
        assert!(p.text.contains("个字符未显示"), "{}", p.text);
        // A question, single and multi-select, one answered with "Other".
        let q = interaction(
            "AskUserQuestion",
            json!({"questions": [
                {"question": "哪个？", "header": "选", "multiSelect": false,
                 "options": [{"label": "甲"}, {"label": "乙"}]},
                {"question": "哪些？", "header": "多", "multiSelect": true,
                 "options": [{"label": "丙"}, {"label": "丁"}]}]}),
        );
        let mut state = PromptState::default();
        state.other.insert(1, "戊".into());
        let p = prompt(&q, &state, &zh);
        assert_eq!(english_in(&read(&p)), Vec::<&str>::new(), "{}", read(&p));
        // A form, asked field by field, and a single free-text question.
        let form = interaction(
            crate::interaction::form::FORM_TOOL,
            json!({"message": "部署", "requestedSchema": {"type": "object",
                "properties": {"ok": {"type": "boolean", "title": "确定"},
                               "n": {"type": "integer", "title": "数量", "default": 2}},
                "required": ["ok"]}}),
        );
        let p = prompt(&form, &PromptState::default(), &zh);
        assert!(p.text.contains("表单"), "{}", p.text);
        assert_eq!(english_in(&read(&p)), Vec::<&str>::new(), "{}", read(&p));
        let one = interaction(
            crate::interaction::form::FORM_TOOL,
            json!({"message": "名字？", "requestedSchema": {"type": "object",
                "properties": {"name": {"type": "string", "title": "名字"}}}}),
        );
        let p = prompt(&one, &PromptState::default(), &zh);
        assert_eq!(english_in(&read(&p)), Vec::<&str>::new(), "{}", read(&p));
        // The outcome, its plain fallback and a closed reply request.
        let done = resolve(bash, "Alice", "不行");
        let r = resolved(&done, zh.words);
        assert!(r.contains("由 Alice 通过 telegram 拒绝"), "{r}");
        assert_eq!(english_in(&r), Vec::<&str>::new(), "{r}");
        let plain = outcome_plain(&done, zh.words);
        assert_eq!(english_in(&plain), Vec::<&str>::new(), "{plain}");
        let closed = reply_closed(&done, zh.words);
        assert_eq!(english_in(&closed), Vec::<&str>::new(), "{closed}");
    }

    #[test]
    fn huge_questions_still_fit() {
        let codec = Codec::new(vec![1; 32]);
        let q = |n: usize| {
            json!({"question": format!("{n}{}", "Q&".repeat(3000)), "header": "H", "multiSelect": n.is_multiple_of(2),
                "options": (0..4).map(|o| json!({"label": format!("{o}{}", "L".repeat(300)), "description": "<d>".repeat(500)})).collect::<Vec<_>>()})
        };
        let i = interaction(
            "AskUserQuestion",
            json!({"questions": [q(0), q(1), q(2), q(3)]}),
        );
        let p = prompt(&i, &PromptState::default(), &buttons(&codec));
        assert!(units(&p.text) <= MAX_TEXT, "{}", units(&p.text));
        let buttons: usize = p.keyboard.inline_keyboard.iter().map(Vec::len).sum();
        assert!(buttons <= 100);
    }
}
