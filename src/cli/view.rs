//! How the terminal commands show interactions: a heading, who is asking, the deadline, the
//! tool call through [`crate::present`], questions with numbered options, and how
//! it ended. Colour only when asked for ([`Painter`]).

use std::io::IsTerminal;

use jiff::Timestamp;
use jiff::tz::TimeZone;

use crate::interaction::{Interaction, Kind, Outcome, Question};
use crate::present::render;
use crate::present::{self, Block, Budget, DiffLine, Presentation, visible_line};

/// Paints text with ANSI colours, or leaves it plain.
#[derive(Clone, Copy, Debug)]
pub struct Painter {
    colour: bool,
}

/// A text style.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Paint {
    /// Headings and the key letters.
    Bold,
    /// Secondary text: context, notes, what was cut.
    Dim,
    /// Removed lines, denials, failures.
    Red,
    /// Added lines, success.
    Green,
    /// Warnings and a deadline close by.
    Yellow,
    /// Labels.
    Cyan,
}

impl Painter {
    /// Colour when standard output is a terminal and `NO_COLOR` is not set.
    pub fn for_stdout() -> Painter {
        let no_color = std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty());
        Painter {
            colour: std::io::stdout().is_terminal() && !no_color,
        }
    }

    /// Plain text.
    pub fn plain() -> Painter {
        Painter { colour: false }
    }

    /// `s` in `style`.
    pub fn paint(&self, style: Paint, s: &str) -> String {
        if !self.colour || s.is_empty() {
            return s.to_string();
        }
        let code = match style {
            Paint::Bold => "1",
            Paint::Dim => "2",
            Paint::Red => "31",
            Paint::Green => "32",
            Paint::Yellow => "33",
            Paint::Cyan => "36",
        };
        format!("\x1b[{code}m{s}\x1b[0m")
    }
}

/// A time as a person here reads it: "08:40:49" today, "2026-11-21 08:40" otherwise, in the
/// local time zone.
pub(crate) fn local_time(t: Timestamp, now: Timestamp) -> String {
    let tz = TimeZone::system();
    let z = t.to_zoned(tz.clone());
    if z.date() == now.to_zoned(tz).date() {
        z.strftime("%H:%M:%S").to_string()
    } else {
        z.strftime("%Y-%m-%d %H:%M").to_string()
    }
}

/// Time left as "4:59", "1:02:03"; "0:00" once past.
pub fn clock(secs: i64) -> String {
    let s = secs.max(0);
    if s >= 3600 {
        format!("{}:{:02}:{:02}", s / 3600, s % 3600 / 60, s % 60)
    } else {
        format!("{}:{:02}", s / 60, s % 60)
    }
}

/// Seconds from `now` to `i`'s deadline (negative once past).
pub(crate) fn seconds_left(i: &Interaction, now: Timestamp) -> i64 {
    i.deadline.as_second() - now.as_second()
}

/// "Approval · Bash", "Question".
pub(crate) fn kind_title(i: &Interaction) -> String {
    match i.kind {
        Kind::Approval => format!("Approval · {}", visible_line(&i.tool_name)),
        Kind::Question => "Question".to_string(),
        Kind::Form => {
            let what = if render::single_text_form(i).is_some() {
                "Question"
            } else {
                "Form"
            };
            match i.title().filter(|t| !t.trim().is_empty()) {
                Some(t) => format!("{what} · {}", visible_line(t)),
                None => what.to_string(),
            }
        }
    }
}

/// The heading rule: "━━ Approval · Bash ━━━━━━━━━".
pub(crate) fn heading(p: &Painter, i: &Interaction, width: usize) -> String {
    let title = format!(" {} ", kind_title(i));
    let used = 2 + unicode_width::UnicodeWidthStr::width(title.as_str());
    let fill = width.saturating_sub(used + 1).clamp(2, 60);
    format!(
        "{}{}{}",
        p.paint(Paint::Dim, "━━"),
        p.paint(Paint::Bold, &title),
        p.paint(Paint::Dim, &"━".repeat(fill)),
    )
}

/// Who is asking and where, the title and description, and the deadline.
pub fn context(p: &Painter, i: &Interaction, now: Timestamp) -> Vec<String> {
    let mut out = Vec::new();
    let ctx = render::context_line(i);
    if !ctx.is_empty() {
        out.push(p.paint(Paint::Dim, &visible_line(&ctx)));
    }
    for text in [i.title(), i.description()]
        .into_iter()
        .flatten()
        .filter(|t| !t.trim().is_empty())
    {
        out.push(visible_line(text));
    }
    out.extend(votes_line(i));
    match &i.resolution {
        None => {
            let left = seconds_left(i, now);
            out.push(if left > 0 {
                format!(
                    "Expires in {} (at {})",
                    clock(left),
                    local_time(i.deadline, now)
                )
            } else {
                format!("Expired at {}", local_time(i.deadline, now))
            });
        }
        Some(_) => out.push(format!("Asked at {}", local_time(i.created_at, now))),
    }
    out
}

/// The votes so far on an approval that needs several people, as the inbox shows them:
/// `Needs 2 people · votes: 1 of 2: alice via telegram`. `None` for any other interaction.
pub(crate) fn votes_line(i: &Interaction) -> Option<String> {
    let q = i
        .quorum()
        .filter(|_| crate::interaction::quorum::is_voted(i))?;
    let tally = crate::interaction::quorum::tally(i)?;
    Some(format!(
        "Needs {} people · votes: {}",
        q.allow,
        visible_line(&tally)
    ))
}

/// The tool call of an approval, within `budget`; the note under what was cut says how to
/// see all.
pub(crate) fn tool_call(p: &Painter, i: &Interaction, budget: Budget) -> Vec<String> {
    let presentation = present::present(&i.tool_name, &i.input.map(), i.cwd.as_deref(), budget);
    presentation_lines(p, &presentation, &format!("imrelay show {}", i.id))
}

/// A presentation's blocks as indented lines (its summary is for lists: the heading names
/// the tool).
pub(crate) fn presentation_lines(p: &Painter, pr: &Presentation, see_all: &str) -> Vec<String> {
    let mut out = Vec::new();
    let cut_line = |cut: &present::Cut| {
        cut.note()
            .map(|n| p.paint(Paint::Dim, &format!("    … {n}: `{see_all}` shows all")))
    };
    for block in &pr.blocks {
        match block {
            Block::Field { label, value, cut } => {
                out.push(format!(
                    "  {} {value}",
                    p.paint(Paint::Cyan, &format!("{label}:"))
                ));
                out.extend(cut_line(cut));
            }
            Block::Text { label, lines, cut } => {
                out.push(format!("  {}", p.paint(Paint::Cyan, &format!("{label}:"))));
                for l in lines {
                    out.push(format!("    {l}"));
                }
                out.extend(cut_line(cut));
            }
            Block::Diff { label, lines, cut } => {
                out.push(format!("  {}", p.paint(Paint::Cyan, &format!("{label}:"))));
                for l in lines {
                    out.push(match l {
                        DiffLine::Context(t) => format!("     {}", p.paint(Paint::Dim, t)),
                        DiffLine::Removed(t) => {
                            format!("    {}", p.paint(Paint::Red, &format!("-{t}")))
                        }
                        DiffLine::Added(t) => {
                            format!("    {}", p.paint(Paint::Green, &format!("+{t}")))
                        }
                        DiffLine::Gap => format!("    {}", p.paint(Paint::Dim, "⋯")),
                    });
                }
                out.extend(cut_line(cut));
            }
            Block::Note(n) => out.push(format!("  {}", p.paint(Paint::Yellow, &format!("! {n}")))),
        }
    }
    out
}

/// Question `n` of `of`, with its options numbered from 1, and how to answer when `asking`.
pub fn question(p: &Painter, q: &Question, n: usize, of: usize, asking: bool) -> Vec<String> {
    let mut out = Vec::new();
    let count = if of > 1 {
        format!("{n}/{of}  ")
    } else {
        String::new()
    };
    out.push(format!(
        "  {count}{} {}",
        p.paint(Paint::Cyan, &format!("[{}]", visible_line(&q.header))),
        p.paint(Paint::Bold, &visible_line(&q.question))
    ));
    for (k, o) in q.options.iter().enumerate() {
        let mut line = format!(
            "    {}  {}",
            p.paint(Paint::Bold, &(k + 1).to_string()),
            visible_line(&o.label)
        );
        if let Some(d) = o.description.as_deref().filter(|d| !d.trim().is_empty()) {
            line.push_str(&p.paint(Paint::Dim, &format!(" — {}", visible_line(d))));
        }
        out.push(line);
    }
    if !asking {
        // Which answers it takes, for someone answering later with `imrelay answer`.
        out.push(p.paint(
            Paint::Dim,
            if q.multi_select {
                "    (multi-select: any number of these, or your own answer)"
            } else {
                "    (one of these, or your own answer)"
            },
        ));
        return out;
    }
    out.push(p.paint(
        Paint::Dim,
        if q.multi_select {
            "    (choose any: numbers separated by commas, or type your own answer)"
        } else {
            "    (choose one number, or type your own answer)"
        },
    ));
    out
}

/// How an interaction ended, on one line: "✓ Allowed by alice via telegram at …".
pub(crate) fn outcome_line(p: &Painter, i: &Interaction, now: Timestamp) -> Option<String> {
    let r = i.resolution.as_ref()?;
    let at = local_time(r.at, now);
    let who = match (&r.by, r.via.as_str()) {
        (_, "system") => String::new(),
        (Some(by), via) => format!(" by {} via {via}", visible_line(by)),
        (None, via) => format!(" via {via}"),
    };
    Some(match r.outcome {
        Outcome::Allowed => p.paint(Paint::Green, &format!("✓ Allowed{who} at {at}")),
        Outcome::Answered => p.paint(Paint::Green, &format!("✓ Answered{who} at {at}")),
        Outcome::Denied => {
            let mut s = format!("✗ Denied{who} at {at}");
            if let Some(m) = r.message().filter(|m| !m.starts_with("Denied by ")) {
                s.push_str(&format!(": “{}”", visible_line(m)));
            }
            p.paint(Paint::Red, &s)
        }
        Outcome::Expired => p.paint(
            Paint::Yellow,
            &format!("⌛ Expired at {at}: nobody answered in time, so the agent was denied"),
        ),
        Outcome::Cancelled => p.paint(
            Paint::Yellow,
            &format!(
                "✗ {} at {at}",
                visible_line(r.message().unwrap_or("Cancelled"))
            ),
        ),
    })
}

/// The answers a question received, or the values a form received, as indented lines.
pub(crate) fn given_answers(i: &Interaction) -> Vec<String> {
    let questions = render::given_answers(i)
        .into_iter()
        .map(|(q, a)| format!("    {} → {}", visible_line(&q), visible_line(&a)));
    // A single question's answer needs no label: the question is just above.
    let single = render::single_text_form(i).is_some();
    let fields = render::form_answers(i).into_iter().map(move |(f, v)| {
        if single {
            format!("    → {}", visible_line(&v))
        } else {
            format!("    {}: {}", visible_line(&f), visible_line(&v))
        }
    });
    questions.chain(fields).collect()
}

/// Everything about one interaction (`imrelay show`): nothing cut.
pub fn full(p: &Painter, i: &Interaction, now: Timestamp, width: usize) -> Vec<String> {
    let mut out = vec![heading(p, i, width)];
    out.push(p.paint(Paint::Dim, &format!("id {}", i.id)));
    out.extend(context(p, i, now));
    out.push(String::new());
    match i.kind {
        Kind::Approval => out.extend(tool_call(p, i, Budget::ALL)),
        Kind::Question => match crate::interaction::parse_questions(&i.input.map()) {
            Ok(qs) => {
                for (n, q) in qs.iter().enumerate() {
                    out.extend(question(p, q, n + 1, qs.len(), false));
                }
            }
            Err(e) => out.push(format!("  (the questions cannot be read: {e})")),
        },
        Kind::Form => match crate::interaction::Form::from_input(&i.input.map()) {
            Ok(form) => out.extend(form_view(p, &form, None)),
            Err(e) => out.push(format!("  (the form cannot be read: {e})")),
        },
    }
    if let Some(line) = outcome_line(p, i, now) {
        out.push(String::new());
        out.push(line);
        out.extend(given_answers(i));
    }
    out
}

/// A form: its message, then each field with what it takes; the field `asking` (an index)
/// is marked and shows its description and options numbered (`None`: every field shows them,
/// as `imrelay show` does).
pub(crate) fn form_view(
    p: &Painter,
    form: &crate::interaction::Form,
    asking: Option<usize>,
) -> Vec<String> {
    let mut out = vec![format!(
        "  {}",
        p.paint(Paint::Bold, &visible_line(&form.message))
    )];
    if form.is_single_text() {
        // A question of one free text: the question is the field, with what it adds.
        if let Some(f) = form.fields.first() {
            let note = render::single_text_note(f);
            if !note.is_empty() {
                out.push(format!("  {}", p.paint(Paint::Dim, &visible_line(&note))));
            }
            if matches!(
                f.ty,
                crate::interaction::form::FieldType::Text {
                    multiline: true,
                    ..
                }
            ) {
                out.push(p.paint(
                    Paint::Dim,
                    if asking.is_some() {
                        "  (several lines: an empty line ends the text)"
                    } else {
                        "  (several lines)"
                    },
                ));
            }
        }
        return out;
    }
    for (n, f) in form.fields.iter().enumerate() {
        let detail = match asking {
            None => Detail::Shown,
            Some(a) if a == n => Detail::Asked,
            Some(_) => Detail::Listed,
        };
        out.extend(field_lines(p, f, n, detail));
    }
    out
}

/// How much of a form field to show.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Detail {
    /// A line: number, label, what it takes.
    Listed,
    /// All of it, for reading (`imrelay show`).
    Shown,
    /// All of it, marked, with how to answer: the field being asked.
    Asked,
}

/// One form field: number, label, required mark and what it takes; with its description,
/// numbered options and default unless only `Listed`.
pub(crate) fn field_lines(
    p: &Painter,
    f: &crate::interaction::form::Field,
    n: usize,
    detail: Detail,
) -> Vec<String> {
    let asking = detail != Detail::Listed;
    let prompting = detail == Detail::Asked;
    let marker = if prompting { "›" } else { " " };
    let required = if f.required { " *" } else { "" };
    let mut out = vec![format!(
        "  {marker} {}  {}{required} {}",
        p.paint(Paint::Bold, &(n + 1).to_string()),
        p.paint(Paint::Cyan, &visible_line(f.label())),
        p.paint(Paint::Dim, &format!("— {}", visible_line(&f.hint())))
    )];
    if asking {
        if let Some(d) = f.description.as_deref() {
            out.push(format!("      {}", p.paint(Paint::Dim, &visible_line(d))));
        }
        for (k, o) in f.options().iter().enumerate() {
            out.push(format!(
                "      {}  {}",
                p.paint(Paint::Bold, &(k + 1).to_string()),
                visible_line(&o.label)
            ));
        }
        if matches!(
            f.ty,
            crate::interaction::form::FieldType::Text {
                multiline: true,
                ..
            }
        ) {
            out.push(p.paint(
                Paint::Dim,
                if prompting {
                    "      (several lines: an empty line ends the text)"
                } else {
                    "      (several lines)"
                },
            ));
        }
        if let Some(d) = &f.default {
            out.push(p.paint(
                Paint::Dim,
                &format!(
                    "      ({}: {})",
                    if prompting {
                        "Enter for the default"
                    } else {
                        "default"
                    },
                    visible_line(&f.show(d))
                ),
            ));
        } else if !f.required {
            out.push(p.paint(
                Paint::Dim,
                if prompting {
                    "      (optional: Enter leaves it empty)"
                } else {
                    "      (optional)"
                },
            ));
        }
    }
    out
}

/// A call a policy rule decided on its own, on one line: "⚙ Allowed by policy rule
/// git-read: Run: git status". `None` for anything a person decided.
pub(crate) fn policy_line(p: &Painter, i: &Interaction) -> Option<String> {
    let r = i.resolution.as_ref()?;
    if r.via.as_str() != crate::interaction::POLICY_VIA {
        return None;
    }
    let summary = present::present(&i.tool_name, &i.input.map(), i.cwd.as_deref(), SUMMARY).summary;
    let rule = visible_line(r.by.as_deref().unwrap_or("?"));
    Some(match r.outcome {
        Outcome::Allowed => p.paint(
            Paint::Dim,
            &format!("⚙ Allowed by policy rule {rule}: {summary}"),
        ),
        _ => p.paint(
            Paint::Yellow,
            &format!(
                "⚙ Denied by policy rule {rule}: {summary}{}",
                r.message()
                    .map(|m| format!(" (“{}”)", visible_line(m)))
                    .unwrap_or_default()
            ),
        ),
    })
}

/// What an interaction asks, in one line (as `imrelay pending` lists it).
pub fn headline(i: &Interaction) -> String {
    present::present(&i.tool_name, &i.input.map(), i.cwd.as_deref(), SUMMARY).summary
}

/// One line of the `imrelay pending` list: id, kind, time left, agent, summary.
pub fn row(i: &Interaction, id_width: usize, now: Timestamp) -> String {
    let summary = present::present(&i.tool_name, &i.input.map(), i.cwd.as_deref(), SUMMARY).summary;
    format!(
        "{:<id_width$}  {:<8}  {:>8}  {:<14}  {}",
        i.id.as_str(),
        i.kind.as_str(),
        clock(seconds_left(i, now)),
        crate::interaction::clip(&visible_line(i.agent.as_deref().unwrap_or("-")), 14),
        summary
    )
}

/// Enough for a summary.
const SUMMARY: Budget = Budget {
    chars: 400,
    lines: 1,
    line_chars: 200,
};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clocks_count_down_and_stop_at_zero() {
        assert_eq!(clock(299), "4:59");
        assert_eq!(clock(59), "0:59");
        assert_eq!(clock(3723), "1:02:03");
        assert_eq!(clock(-5), "0:00");
    }

    #[test]
    fn plain_painting_adds_nothing() {
        assert_eq!(Painter::plain().paint(Paint::Red, "x"), "x");
        let c = Painter { colour: true };
        assert_eq!(c.paint(Paint::Red, "x"), "\x1b[31mx\x1b[0m");
    }
}
