//! What a surface has room for ([`Budget`]), what was left out ([`Cut`]), and the builder
//! that assembles a [`Presentation`] within a budget: values on one line, texts cut by lines
//! and characters, file paths relative to the working directory.

use std::path::{Component, Path, PathBuf};

use serde_json::{Map, Value};

use super::text::{visible_line, visible_text};
use super::{Block, Presentation};

/// How much of a tool call a surface has room for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Budget {
    /// Characters of text in the whole presentation (values, blocks, diffs).
    pub chars: usize,
    /// Lines of one block: a command, the start of a file, a diff.
    pub lines: usize,
    /// Characters of one line of a block, and of a one-line value.
    pub line_chars: usize,
}

impl Budget {
    /// A terminal screen or two.
    pub const TERMINAL: Budget = Budget {
        chars: 12_000,
        lines: 40,
        line_chars: 400,
    };

    /// Everything (for a surface that shows it all on request). Inputs are bounded by the
    /// request size limit, so this is bounded too.
    pub const ALL: Budget = Budget {
        chars: usize::MAX,
        lines: usize::MAX,
        line_chars: usize::MAX,
    };
}

/// What was left out of a block or value.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Cut {
    /// Whole lines not shown.
    pub lines: usize,
    /// Characters not shown, those of the whole lines included.
    pub chars: usize,
}

impl Cut {
    /// Whether nothing was cut.
    pub fn is_empty(&self) -> bool {
        self.lines == 0 && self.chars == 0
    }

    /// "12 more lines not shown (3,456 characters)", "80 more characters not shown", or
    /// `None` when nothing was cut.
    pub fn note(&self) -> Option<String> {
        match (self.lines, self.chars) {
            (0, 0) => None,
            (0, c) => Some(super::render::cut_note(c)),
            (l, c) => Some(format!(
                "{} more {} not shown ({} {})",
                super::render::thousands(l),
                if l == 1 { "line" } else { "lines" },
                super::render::thousands(c),
                if c == 1 { "character" } else { "characters" },
            )),
        }
    }
}
/// Longest a summary gets, in characters.
pub(super) const SUMMARY_CHARS: usize = 120;

/// `path` without `.` and with each `..` taking out the component before it, on text alone
/// (no file system).
fn normalise(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir => {
                if !out.pop() {
                    out.push("..");
                }
            }
            other => out.push(other),
        }
    }
    out
}
/// Builds a presentation within a budget.
pub(super) struct Builder<'c> {
    pub(super) budget: Budget,
    /// Characters left in all.
    pub(super) left: usize,
    cwd: Option<&'c str>,
    pub(super) summary: String,
    pub(super) blocks: Vec<Block>,
}

impl<'c> Builder<'c> {
    pub(super) fn new(budget: Budget, cwd: Option<&'c str>) -> Self {
        Self {
            budget,
            left: budget.chars,
            cwd: cwd.filter(|c| Path::new(c).is_absolute()),
            summary: String::new(),
            blocks: Vec::new(),
        }
    }

    pub(super) fn finish(self) -> Presentation {
        let mut summary = self.summary;
        if summary.chars().count() > SUMMARY_CHARS {
            summary = crate::interaction::clip(&summary, SUMMARY_CHARS);
        }
        Presentation {
            summary,
            blocks: self.blocks,
        }
    }

    /// One line of at most `line_chars` characters (and what is left in all).
    pub(super) fn clip_line(&mut self, line: &str) -> (String, usize) {
        let max = self.budget.line_chars.min(self.left);
        let total = line.chars().count();
        if max == 0 {
            return (String::new(), total);
        }
        if total <= max {
            self.left -= total;
            return (line.to_string(), 0);
        }
        let keep = max.saturating_sub(1);
        let mut s: String = line.chars().take(keep).collect();
        s.push('…');
        self.left -= max;
        (s, total - keep)
    }

    pub(super) fn field(&mut self, label: &str, value: &str) {
        let (value, cut) = self.clip_line(&visible_line(value));
        self.blocks.push(Block::Field {
            label: visible_line(label),
            value,
            cut: Cut {
                lines: 0,
                chars: cut,
            },
        });
    }

    pub(super) fn note(&mut self, text: impl Into<String>) {
        self.blocks.push(Block::Note(text.into()));
    }

    pub(super) fn text(&mut self, label: &str, text: &str) {
        let shown = visible_text(text);
        let mut lines = Vec::new();
        let mut cut = Cut::default();
        for line in shown.lines() {
            if lines.len() >= self.budget.lines || self.left == 0 {
                cut.lines += 1;
                cut.chars += line.chars().count();
                continue;
            }
            let (line, c) = self.clip_line(line);
            cut.chars += c;
            lines.push(line);
        }
        self.blocks.push(Block::Text {
            label: visible_line(label),
            lines,
            cut,
        });
    }
    /// `path` as a person reads it: relative to the working directory when inside it.
    pub(super) fn path_text(&self, path: &str) -> String {
        let p = Path::new(path);
        let Some(cwd) = self.cwd else {
            return visible_line(path);
        };
        let full = normalise(&Path::new(cwd).join(p));
        match full.strip_prefix(normalise(Path::new(cwd))) {
            Ok(rel) if !rel.as_os_str().is_empty() => visible_line(&rel.to_string_lossy()),
            _ => visible_line(&full.to_string_lossy()),
        }
    }

    /// A file path, with a remark when it lies outside the working directory.
    pub(super) fn path(&mut self, label: &str, path: &str) {
        let shown = self.path_text(path);
        self.field(label, &shown);
        if let Some(cwd) = self.cwd {
            let full = normalise(&Path::new(cwd).join(path));
            if !full.starts_with(normalise(Path::new(cwd))) {
                self.note(format!(
                    "Outside the working directory ({}).",
                    visible_line(cwd)
                ));
            }
        }
    }

    /// Every field of `input` not in `used`, as labelled values; nested values as JSON.
    pub(super) fn rest(&mut self, input: &Map<String, Value>, used: &[&str]) {
        for (key, value) in input.iter().filter(|(k, _)| !used.contains(&k.as_str())) {
            match value {
                Value::String(s) if s.contains('\n') => self.text(key, s),
                Value::String(s) => self.field(key, s),
                Value::Null | Value::Bool(_) | Value::Number(_) => {
                    self.field(key, &value.to_string())
                }
                Value::Array(_) | Value::Object(_) => {
                    let compact = value.to_string();
                    if compact.chars().count() <= 80 {
                        self.field(key, &compact);
                    } else {
                        let pretty = serde_json::to_string_pretty(value).unwrap_or(compact);
                        self.text(key, &pretty);
                    }
                }
            }
        }
    }
}
