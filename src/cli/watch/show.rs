//! What `imrelay watch` shows: the interaction (each kind's view and keys), the status and
//! the prompt.

use std::time::Duration;

use jiff::Timestamp;

use super::steps::{self, Step};
use super::{Current, Link, Watch};
use crate::cli::view::{self, Paint};
use crate::interaction::{Interaction, Kind};
use crate::present::{Budget, visible_line};

impl Watch {
    pub(super) fn others(&self) -> usize {
        let shown = self.current.as_ref().map(|c| &c.i.id);
        self.items.iter().filter(|i| Some(&i.id) != shown).count()
    }

    pub(super) fn status(&self) -> String {
        let now = Timestamp::now();
        let mut parts = Vec::new();
        if self.link == Link::Down {
            parts.push("offline".to_string());
        }
        if let Some(c) = &self.current {
            parts.push(view::clock(view::seconds_left(&c.i, now)));
            match self.others() {
                0 => {}
                n => parts.push(format!("{n} more")),
            }
        }
        if parts.is_empty() {
            String::new()
        } else {
            format!("[{}]", parts.join(" · "))
        }
    }

    pub(super) fn prompt(&mut self) {
        let text = match &self.current {
            None if !self.connected_once => "connecting… (q quits) › ".to_string(),
            None if !self.skipped.is_empty() => format!(
                "{} skipped: Enter shows {} again · q quits › ",
                self.skipped.len(),
                if self.skipped.len() == 1 {
                    "it"
                } else {
                    "them"
                }
            ),
            None => "waiting for approvals and questions (q quits) › ".to_string(),
            Some(c) => c.step.prompt(&c.i, self.term.is_tty()),
        };
        let status = self.status();
        self.term.set_prompt(status, text);
    }

    pub(super) fn ring(&mut self) {
        let now = std::time::Instant::now();
        if self
            .last_bell
            .is_none_or(|t| now.duration_since(t) > Duration::from_secs(1))
        {
            self.term.bell();
            self.last_bell = Some(now);
        }
    }

    /// Shows the oldest interaction not skipped; when only skipped ones wait, they come
    /// back, unless the person skipped just now.
    pub(super) fn show_next(&mut self, just_skipped: bool) {
        let had_typed = self.term.take_line();
        self.current = None;
        let mut next = self
            .items
            .iter()
            .find(|i| !self.skipped.contains(&i.id))
            .cloned();
        if next.is_none() && !self.skipped.is_empty() && !just_skipped {
            self.skipped.clear();
            self.term.say1(
                self.term
                    .painter()
                    .paint(Paint::Dim, "Back to what you skipped."),
            );
            next = self.items.first().cloned();
        }
        if !had_typed.trim().is_empty() {
            self.term.say1(self.term.painter().paint(
                Paint::Yellow,
                &format!(
                    "(Not sent, what you had typed: “{}”)",
                    visible_line(&had_typed)
                ),
            ));
        }
        match next {
            Some(i) => self.show(i),
            None => self.prompt(),
        }
    }

    /// Shows `i` from its start: its heading, context, each kind's view and keys.
    pub(super) fn show(&mut self, i: Interaction) {
        let p = self.term.painter();
        let now = Timestamp::now();
        let mut lines = vec![String::new(), view::heading(&p, &i, self.term.width())];
        lines.extend(view::context(&p, &i, now));
        lines.push(String::new());
        let step = match (i.kind, steps::first(&i)) {
            (Kind::Approval, Ok(step)) => {
                lines.extend(view::tool_call(&p, &i, Budget::TERMINAL));
                lines.push(String::new());
                lines.push(keys(&p, &steps::approval_keys(&i)));
                step
            }
            (Kind::Form, Ok(step)) => {
                if let Step::Filling { form, .. } = &step {
                    lines.extend(view::form_view(&p, form, Some(0)));
                }
                lines.push(String::new());
                lines.push(keys(&p, &[("s", "skip"), ("d", "decline"), ("q", "quit")]));
                step
            }
            (Kind::Question, Ok(step)) => {
                if let Step::Asking { questions, .. } = &step {
                    lines.extend(view::question(&p, &questions[0], 1, questions.len(), true));
                }
                lines.push(String::new());
                lines.push(keys(
                    &p,
                    &[("s", "skip"), ("d", "decline to answer"), ("q", "quit")],
                ));
                step
            }
            (kind, Err(e)) => {
                let what = match kind {
                    Kind::Form => "This form",
                    _ => "These questions",
                };
                lines.push(format!("  {what} cannot be read ({}).", visible_line(&e)));
                lines.push(keys(&p, &[("d", "decline"), ("s", "skip"), ("q", "quit")]));
                Step::Unreadable
            }
        };
        self.current = Some(Current {
            i,
            step,
            meanwhile: None,
        });
        self.term.say(&lines);
        self.term.fresh_prompt();
        self.prompt();
        self.ring();
    }

    pub(super) fn set_step(&mut self, step: Step) {
        if let Some(c) = &mut self.current {
            c.step = step;
        }
        self.term.fresh_prompt();
        self.prompt();
    }

    pub(super) fn say_error(&mut self, text: &str) {
        let line = self.term.painter().paint(Paint::Yellow, text);
        self.term.say1(line);
    }
}

fn keys(p: &view::Painter, keys: &[(&str, &str)]) -> String {
    keys.iter()
        .map(|(k, what)| format!("{} {what}", p.paint(Paint::Bold, k)))
        .collect::<Vec<_>>()
        .join(" · ")
}
