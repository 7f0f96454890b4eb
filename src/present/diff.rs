//! A change to a file as a unified diff of the lines that change, cut to the budget.

use std::time::Duration;

use similar::{ChangeTag, TextDiff};

use super::budget::Builder;
use super::text::visible_line;
use super::{Block, Cut, DiffLine};

/// How long a diff may take before it settles for a longer, still correct, diff.
const DIFF_TIME: Duration = Duration::from_millis(100);
/// Unchanged lines shown around a change.
const DIFF_CONTEXT: usize = 3;

impl Builder<'_> {
    /// The change from `old` to `new` as a diff block labelled `label`.
    pub(super) fn diff(&mut self, label: &str, old: &str, new: &str) {
        let with_break = |s: &str| {
            if s.is_empty() || s.ends_with('\n') {
                s.to_string()
            } else {
                format!("{s}\n")
            }
        };
        let (old_n, new_n) = (with_break(old), with_break(new));
        if old_n == new_n {
            self.note(if old == new {
                "This change changes nothing."
            } else {
                "Changes only the line break at the end."
            });
            return;
        }
        let diff = TextDiff::configure()
            .timeout(DIFF_TIME)
            .diff_lines(old_n.as_str(), new_n.as_str());
        let mut lines = Vec::new();
        let mut cut = Cut::default();
        for (g, group) in diff.grouped_ops(DIFF_CONTEXT).iter().enumerate() {
            let mut all: Vec<DiffLine> = Vec::new();
            if g > 0 {
                all.push(DiffLine::Gap);
            }
            for op in group {
                for change in diff.iter_changes(op) {
                    let text = visible_line(change.value().trim_end_matches('\n'));
                    all.push(match change.tag() {
                        ChangeTag::Equal => DiffLine::Context(text),
                        ChangeTag::Delete => DiffLine::Removed(text),
                        ChangeTag::Insert => DiffLine::Added(text),
                    });
                }
            }
            for line in all {
                let text = match &line {
                    DiffLine::Context(t) | DiffLine::Removed(t) | DiffLine::Added(t) => t,
                    DiffLine::Gap => {
                        if lines.len() < self.budget.lines && self.left > 0 {
                            lines.push(DiffLine::Gap);
                        }
                        continue;
                    }
                };
                if lines.len() >= self.budget.lines || self.left == 0 {
                    cut.lines += 1;
                    cut.chars += text.chars().count();
                    continue;
                }
                let (t, c) = self.clip_line(text);
                cut.chars += c;
                lines.push(match line {
                    DiffLine::Context(_) => DiffLine::Context(t),
                    DiffLine::Removed(_) => DiffLine::Removed(t),
                    DiffLine::Added(_) => DiffLine::Added(t),
                    DiffLine::Gap => DiffLine::Gap,
                });
            }
        }
        self.blocks.push(Block::Diff {
            label: visible_line(label),
            lines,
            cut,
        });
    }
}
