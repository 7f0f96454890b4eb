//! Text shared by every channel's rendering: outcome phrases, toasts for late taps, the
//! context line, times, and tool input pretty-printed within a size budget.

use jiff::Timestamp;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::interaction::{Interaction, Outcome, Resolution};

/// The language of what a channel shows people.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, Serialize)]
pub enum Locale {
    /// Simplified Chinese.
    #[serde(rename = "zh_cn")]
    ZhCn,
    /// English.
    #[serde(rename = "en_us")]
    EnUs,
}

/// A short capitalised label for an outcome: "Allowed", "Expired — denied automatically".
pub(crate) fn outcome_label(outcome: Outcome) -> &'static str {
    outcome_label_in(outcome, Locale::EnUs)
}

/// [`outcome_label`] in `locale`.
pub(crate) fn outcome_label_in(outcome: Outcome, locale: Locale) -> &'static str {
    let zh = locale == Locale::ZhCn;
    match outcome {
        Outcome::Allowed if zh => "已批准",
        Outcome::Allowed => "Allowed",
        Outcome::Denied if zh => "已拒绝",
        Outcome::Denied => "Denied",
        Outcome::Answered if zh => "已回答",
        Outcome::Answered => "Answered",
        Outcome::Expired if zh => "已过期，已自动拒绝",
        Outcome::Expired => "Expired — denied automatically",
        Outcome::Cancelled if zh => "已取消",
        Outcome::Cancelled => "Cancelled",
    }
}

/// "Allowed by alice via desktop", "Expired — denied automatically", "Cancelled by the agent".
pub(crate) fn outcome_phrase(r: &Resolution) -> String {
    outcome_phrase_in(r, Locale::EnUs)
}

/// [`outcome_phrase`] in `locale`: "由 alice 通过 telegram 批准".
pub(crate) fn outcome_phrase_in(r: &Resolution, locale: Locale) -> String {
    let zh = locale == Locale::ZhCn;
    match r.outcome {
        Outcome::Expired => outcome_label_in(r.outcome, locale).to_string(),
        Outcome::Cancelled if zh => r
            .message()
            .map(|m| format!("已取消：{m}"))
            .unwrap_or_else(|| "已取消".into()),
        Outcome::Cancelled => r.message().unwrap_or("Cancelled").to_string(),
        o if zh => {
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
        _ => {
            let mut s = outcome_label(r.outcome).to_string();
            if let Some(by) = &r.by {
                s.push_str(" by ");
                s.push_str(by);
            }
            s.push_str(" via ");
            s.push_str(r.via.as_str());
            s
        }
    }
}

/// The toast for a tap on something already resolved, in `locale`: "Already allowed by Alice
/// via desktop", "已处理：由 Alice 通过 desktop 批准", "Expired — denied automatically".
pub(crate) fn already_toast_in(i: &Interaction, locale: Locale) -> String {
    let zh = locale == Locale::ZhCn;
    match &i.resolution {
        None if zh => "仍在等待回答".into(),
        None => "Still pending".to_string(),
        Some(r) => match r.outcome {
            Outcome::Expired | Outcome::Cancelled => outcome_phrase_in(r, locale),
            _ if zh => format!("已处理：{}", outcome_phrase_in(r, locale)),
            _ => {
                let p = outcome_phrase(r);
                let mut c = p.chars();
                match c.next() {
                    Some(first) => format!("Already {}{}", first.to_lowercase(), c.as_str()),
                    None => p,
                }
            }
        },
    }
}

/// "claude-code · session 5f8a… · /home/dev/shop · route shop", omitting what is unknown:
/// every copy says which route it came through.
pub(crate) fn context_line(i: &Interaction) -> String {
    let mut parts = Vec::new();
    if let Some(a) = &i.agent {
        parts.push(a.to_string());
    }
    if let Some(s) = &i.session {
        parts.push(format!("session {}", crate::interaction::clip(s, 12)));
    }
    if let Some(c) = &i.cwd {
        parts.push(c.to_string());
    }
    if let Some(r) = &i.route {
        parts.push(format!("route {}", r.name));
    }
    parts.join(" · ")
}

/// "escalated: nobody on shop answered in 5 min" in `locale`: what the copies a route's
/// escalation posts say (and every copy of it from then on, while it is pending). `None`
/// unless it escalated.
pub(crate) fn escalated_line(i: &Interaction, locale: Locale) -> Option<String> {
    i.escalated_at()?;
    let r = i.route.as_deref()?;
    let wait = duration_words_in(r.escalation.as_ref()?.after_secs, locale);
    Some(match locale {
        Locale::ZhCn => format!("已升级：路由 {} 上 {wait} 内无人回答", r.name),
        Locale::EnUs => format!("escalated: nobody on {} answered in {wait}", r.name),
    })
}

/// A time as "2026-11-22 08:41:26 UTC".
pub(crate) fn format_time(t: Timestamp) -> String {
    t.strftime("%Y-%m-%d %H:%M:%S UTC").to_string()
}

/// Text cut to fit a budget.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Excerpt {
    /// The (possibly cut) text.
    pub text: String,
    /// How many characters were cut (0 if none).
    pub cut: usize,
}

/// `full`, cut to at most `max_chars` characters.
pub(crate) fn excerpt(full: &str, max_chars: usize) -> Excerpt {
    let full = full.to_string();
    let total = full.chars().count();
    if total <= max_chars {
        return Excerpt { text: full, cut: 0 };
    }
    let text: String = full.chars().take(max_chars).collect();
    Excerpt {
        cut: total - max_chars,
        text,
    }
}

/// "1,234 more characters not shown": the note under a cut excerpt.
pub(crate) fn cut_note(cut: usize) -> String {
    let noun = if cut == 1 { "character" } else { "characters" };
    format!("{} more {noun} not shown", thousands(cut))
}

/// `n` with thousands separated by commas: "1,234,567".
pub(crate) fn thousands(n: usize) -> String {
    let digits = n.to_string();
    let mut grouped = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            grouped.push(',');
        }
        grouped.push(c);
    }
    grouped
}

/// A timeout in words: "45 s", "5 min", "1 h 30 min". From 90 s on it is rounded to whole
/// minutes first, so 3599 s reads "1 h", never "60 min" or "0 h 60 min".
pub(crate) fn duration_words(secs: u64) -> String {
    if secs < 90 {
        return format!("{secs} s");
    }
    let minutes = secs.saturating_add(30) / 60;
    let (h, m) = (minutes / 60, minutes % 60);
    match (h, m) {
        (0, m) => format!("{m} min"),
        (h, 0) => format!("{h} h"),
        (h, m) => format!("{h} h {m} min"),
    }
}

/// [`duration_words`] in `locale`: "5 分钟", "1 小时 30 分钟".
pub(crate) fn duration_words_in(secs: u64, locale: Locale) -> String {
    let words = duration_words(secs);
    match locale {
        Locale::ZhCn => words
            .replace(" min", " 分钟")
            .replace(" h", " 小时")
            .replace(" s", " 秒"),
        Locale::EnUs => words,
    }
}

/// The form of a single free-text question (a `prompt`, or an elicitation of one text
/// field): every channel shows it as a question answered by the text itself, not as a form
/// to fill in and submit. `None` for anything else.
pub(crate) fn single_text_form(i: &Interaction) -> Option<crate::interaction::Form> {
    if i.kind != crate::interaction::Kind::Form {
        return None;
    }
    crate::interaction::Form::from_input(&i.input.map())
        .ok()
        .filter(|f| f.is_single_text())
}

/// What a single free-text question's field adds to its message, as one line: the field's
/// own label when the agent named it, its description, what it accepts beyond plain text and
/// its default. Empty for a plain prompt.
pub(crate) fn single_text_note(f: &crate::interaction::form::Field) -> String {
    let mut parts: Vec<String> = Vec::new();
    if f.label() != crate::interaction::form::PROMPT_TITLE {
        parts.push(f.label().to_string());
    }
    if let Some(d) = f.description.as_deref().filter(|d| !d.trim().is_empty()) {
        parts.push(d.to_string());
    }
    let hint = f.hint();
    if hint != "text" {
        parts.push(hint);
    }
    if let Some(d) = &f.default {
        parts.push(format!("default: {}", f.show(d)));
    }
    parts.join(" · ")
}

/// The values an accepted form received, as (field label, value as people read it) pairs in
/// field order; empty unless it was filled in.
pub(crate) fn form_answers(i: &Interaction) -> Vec<(String, String)> {
    let Some(content) = i
        .resolution
        .as_ref()
        .and_then(|r| r.result.elicit())
        .and_then(|e| e.content.as_ref())
    else {
        return Vec::new();
    };
    match crate::interaction::Form::from_input(&i.input.map()) {
        Ok(form) => form.summary(content),
        Err(_) => content
            .iter()
            .map(|(k, v)| (k.clone(), v.to_string()))
            .collect(),
    }
}

/// The answers a resolved question received, as (question text, answer) pairs in the order
/// the agent receives them; empty unless it was answered.
pub(crate) fn given_answers(i: &Interaction) -> Vec<(String, String)> {
    let Some(crate::interaction::PermissionResult::Allow { updated_input, .. }) =
        i.resolution.as_ref().and_then(|r| r.permission())
    else {
        return Vec::new();
    };
    match updated_input.map().get("answers") {
        Some(Value::Object(answers)) => answers
            .iter()
            .map(|(q, a)| {
                let a = match a {
                    Value::String(s) => s.clone(),
                    other => other.to_string(),
                };
                (q.clone(), a)
            })
            .collect(),
        _ => Vec::new(),
    }
}

/// The rule a chat's "Allow similar" button grants for `i`'s session, if it can: the one
/// imrelay proposes, for an approval of a known session. (A chat button grants for the
/// session only; standing grants are made in the inbox, the terminal or the API.)
pub fn similar_rule(i: &Interaction) -> Option<String> {
    if i.kind != crate::interaction::Kind::Approval {
        return None;
    }
    i.session.as_ref()?;
    crate::interaction::policy::propose(i)
}

/// The longest command "Edit & approve" offers to change (characters).
pub const EDITABLE_CHARS: usize = 3000;

/// The command of a `Bash` approval, which a chat's "Edit & approve" lets a person change
/// (the agent runs the edited command in its place); `None` for anything else, or a command
/// longer than [`EDITABLE_CHARS`].
pub fn editable_command(i: &Interaction) -> Option<String> {
    if i.kind != crate::interaction::Kind::Approval || i.tool_name != "Bash" {
        return None;
    }
    i.input
        .map()
        .get("command")
        .and_then(Value::as_str)
        .filter(|c| c.chars().count() <= EDITABLE_CHARS)
        .map(str::to_string)
}

/// The votes so far on an approval that needs several people, as every copy shows them
/// ("Needs 2 people · votes: 1 of 2: alice via telegram"); `None` for anything else. The
/// names are outside values: the caller escapes the line for its surface.
pub fn votes_line(i: &Interaction, locale: Locale) -> Option<String> {
    if !crate::interaction::quorum::is_voted(i) {
        return None;
    }
    let need = i.quorum().map_or(1, |q| q.allow);
    let tally = crate::interaction::quorum::tally(i)?;
    Some(match locale {
        Locale::ZhCn => format!("需 {need} 人批准 · 投票：{tally}"),
        Locale::EnUs => format!("Needs {need} people · votes: {tally}"),
    })
}

/// Why a chat cannot answer `i`: it needs a passkey (`step_up`), so it is answered in the
/// inbox, in `locale`. The toast a tap on it gets, and the line its copies show.
pub(crate) fn step_up_text(i: &Interaction, locale: Locale) -> String {
    let route = crate::interaction::routes::route_name(i);
    match locale {
        Locale::ZhCn => {
            format!("此请求（路由「{route}」）需要通行密钥：请在 imrelay 收件箱中打开并回答")
        }
        Locale::EnUs => format!(
            "This needs a passkey (route \"{route}\"): open it in the imrelay inbox and answer there"
        ),
    }
}

/// What a chat copy of a pending interaction that needs a passkey (`step_up`) shows in place
/// of its answer buttons: one link button to its card in the inbox, where a platform has
/// link buttons (see [`step_up_link`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct StepUpLink {
    /// The button's label: "🔑 Answer in the inbox".
    pub label: &'static str,
    /// The card in the inbox: `<inbox>/#<id>`.
    pub url: String,
    /// Why, shown above the button ([`step_up_text`]).
    pub why: String,
}

/// The link a chat copy of `i` shows in place of its answer buttons, in `locale`: `Some`
/// when `i` is pending, needs a passkey, and the inbox has an address (`inbox`, from
/// `server.public_url`). Otherwise the copy keeps its buttons, and a tap on one is refused
/// with [`step_up_text`] (as on a platform without link buttons).
pub(crate) fn step_up_link(
    i: &Interaction,
    inbox: Option<&str>,
    locale: Locale,
) -> Option<StepUpLink> {
    if !i.is_pending() || !crate::interaction::routes::needs_step_up(i) {
        return None;
    }
    let base = inbox?.trim_end_matches('/');
    Some(StepUpLink {
        label: match locale {
            Locale::ZhCn => "🔑 在收件箱中回答",
            Locale::EnUs => "🔑 Answer in the inbox",
        },
        url: format!("{base}/#{}", i.id),
        why: step_up_text(i, locale),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::interaction::{PermissionResult, Via};

    fn resolution(
        outcome: Outcome,
        by: Option<&str>,
        via: Via,
        message: Option<&str>,
    ) -> Resolution {
        Resolution {
            outcome,
            by: by.map(str::to_string),
            via,
            at: Timestamp::UNIX_EPOCH,
            result: match message {
                Some(m) => PermissionResult::Deny {
                    message: m.into(),
                    interrupt: false,
                },
                None => PermissionResult::Allow {
                    updated_input: crate::interaction::Input::default(),
                    updated_permissions: None,
                },
            }
            .into(),
        }
    }

    #[test]
    fn phrases() {
        let r = resolution(Outcome::Allowed, Some("Alice"), Via::desktop(), None);
        assert_eq!(outcome_phrase(&r), "Allowed by Alice via desktop");
        let e = resolution(
            Outcome::Expired,
            None,
            Via::system(),
            Some("No response within 5 seconds"),
        );
        assert_eq!(outcome_phrase(&e), "Expired — denied automatically");
        let c = resolution(
            Outcome::Cancelled,
            Some("agent"),
            Via::system(),
            Some("Cancelled by the agent"),
        );
        assert_eq!(outcome_phrase(&c), "Cancelled by the agent");
    }

    #[test]
    fn truncation_reports_what_was_cut() {
        let e = excerpt(&"é".repeat(100), 50);
        assert_eq!(e.text.chars().count(), 50);
        assert_eq!(e.cut, 50);
        let whole = excerpt(&"x".repeat(100), 10_000);
        assert_eq!(whole.cut, 0);
    }

    #[test]
    fn short_cuts_with_an_ellipsis() {
        assert_eq!(crate::interaction::clip("abcdef", 4), "abc…");
        assert_eq!(crate::interaction::clip("abc", 4), "abc");
    }

    #[test]
    fn notes_and_durations_read_well() {
        assert_eq!(cut_note(1), "1 more character not shown");
        assert_eq!(cut_note(1234567), "1,234,567 more characters not shown");
        assert_eq!(cut_note(999), "999 more characters not shown");
        assert_eq!(duration_words(45), "45 s");
        assert_eq!(duration_words(300), "5 min");
        assert_eq!(duration_words(3600), "1 h");
        assert_eq!(duration_words(5400), "1 h 30 min");
    }

    #[test]
    fn a_step_up_interaction_links_to_its_card_while_pending_and_with_an_inbox() {
        let mut i = Interaction::pending(
            crate::interaction::InteractionId::parse("s1").unwrap(),
            "Bash",
            serde_json::Map::new(),
            Timestamp::UNIX_EPOCH,
            60,
        );
        assert_eq!(
            step_up_link(&i, Some("https://r.example"), Locale::EnUs),
            None
        );
        let stamp = crate::interaction::routes::RouteStamp {
            name: "prod".into(),
            step_up: true,
            ..crate::interaction::routes::RouteStamp::default_route()
        };
        i.route = Some(std::sync::Arc::new(stamp));
        let link = step_up_link(&i, Some("https://r.example/"), Locale::EnUs).unwrap();
        assert_eq!(link.url, "https://r.example/#s1");
        assert_eq!(
            link.why,
            "This needs a passkey (route \"prod\"): open it in the imrelay inbox and answer there"
        );
        assert_eq!(step_up_link(&i, None, Locale::EnUs), None);
        assert!(step_up_text(&i, Locale::ZhCn).contains("通行密钥"));
    }

    #[test]
    fn durations_round_to_whole_minutes_before_splitting_hours() {
        assert_eq!(duration_words(89), "89 s");
        assert_eq!(duration_words(90), "2 min");
        assert_eq!(duration_words(3569), "59 min");
        // Just under an hour rounds up to the hour, not to "60 min".
        assert_eq!(duration_words(3570), "1 h");
        assert_eq!(duration_words(3599), "1 h");
        assert_eq!(duration_words(3629), "1 h");
        assert_eq!(duration_words(3630), "1 h 1 min");
        assert_eq!(duration_words(7169), "1 h 59 min");
        // 1 h 59 min 30 s used to read "1 h 60 min".
        assert_eq!(duration_words(7170), "2 h");
        assert_eq!(duration_words(86_400), "24 h");
        assert!(!duration_words(u64::MAX).is_empty());
    }
}
