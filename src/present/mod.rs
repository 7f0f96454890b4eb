//! How an interaction reads to a person, for every surface: a tool call as they check it
//! before saying yes, and the phrases every channel shares.
//!
//! [`present`] turns a tool name, its input and the agent's working directory into a
//! [`Presentation`]: a one-line summary and a few [`Block`]s (labelled values, monospace text,
//! diffs, remarks) that every surface renders its own way (the terminal with colours, the
//! inbox as HTML, Telegram and Feishu within their length budgets). It does no I/O and knows
//! no channel.
//!
//! - Bash: the command (and its `description`); Edit/MultiEdit: a diff per change with the
//!   file; Write: the file, its size and its first lines; Read/Glob/Grep: the path or pattern;
//!   WebFetch/WebSearch: the URL or query; `mcp__server__tool`: the server and tool, then the
//!   arguments; NotebookEdit: the cell and its new source; a patch
//!   ([`crate::interaction::PATCH_TOOL`]): each file it adds, deletes or changes, with a diff;
//!   anything else: its input as
//!   labelled values, nested values as JSON.
//! - Nothing is hidden: input fields a tool's view does not use are listed after it, and an
//!   input without the usual shape for its tool (a field missing or of another type) is shown
//!   field by field with a remark saying so.
//! - Text from the agent is made visible, never obeyed: control characters (terminal escape
//!   sequences, carriage returns), bidirectional overrides and invisible characters are shown
//!   as escapes (`\u{1b}`); one-line values show line breaks as `\n`.
//! - A [`Budget`] bounds the result: lines per block, characters per line and characters in
//!   all. What is cut is counted ([`Cut`]), so a surface can say how much it left out.
//! - A file path inside the working directory is shown relative to it; one outside it is
//!   shown in full with a remark.
//!
//! The room is split by concern: `budget.rs` (what a surface has room for, and the builder
//! that keeps within it), `diff.rs` (a change as a unified diff), `text.rs` (agent text made
//! visible: `visible_line` is a security primitive), `tools.rs` (each tool's view of its
//! input) and [`render`] (what every channel's rendering shares: locales, outcome phrases,
//! times). It imports only the core (`interaction`); `http/`, `cli/`, `channels/` and
//! `agents/` use it.

mod budget;
mod diff;
pub mod render;
mod text;
mod tools;

use serde_json::{Map, Value};

use budget::Builder;
pub use budget::{Budget, Cut};
pub(crate) use text::{break_fences, visible_line, visible_text};

/// One line of a diff.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DiffLine {
    /// Unchanged, shown for context.
    Context(String),
    /// Taken out.
    Removed(String),
    /// Put in.
    Added(String),
    /// Unchanged lines left out between two changed places.
    Gap,
}

/// One part of a presentation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Block {
    /// A labelled one-line value: the file, the URL, the pattern.
    Field {
        /// What it is ("File", "URL").
        label: String,
        /// The value, on one line.
        value: String,
        /// What was cut from the value.
        cut: Cut,
    },
    /// Monospace text with its line breaks: a command, the start of a file, JSON.
    Text {
        /// What it is ("Command", "Content").
        label: String,
        /// The lines shown.
        lines: Vec<String>,
        /// What was cut.
        cut: Cut,
    },
    /// The change to one file, as a unified diff of the lines that change.
    Diff {
        /// What it is ("Change", "Change 2 of 3").
        label: String,
        /// The lines shown.
        lines: Vec<DiffLine>,
        /// What was cut.
        cut: Cut,
    },
    /// A remark a person should not miss ("Runs outside the sandbox").
    Note(String),
}

/// A tool call as a person reads it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Presentation {
    /// What the call does, on one line: "Run: cargo test", "Edit src/main.rs".
    pub summary: String,
    /// What to check, in order.
    pub blocks: Vec<Block>,
}

impl Presentation {
    /// Whether anything in it was cut to fit the budget.
    pub fn is_cut(&self) -> bool {
        self.blocks.iter().any(|b| match b {
            Block::Field { cut, .. } | Block::Text { cut, .. } | Block::Diff { cut, .. } => {
                !cut.is_empty()
            }
            Block::Note(_) => false,
        })
    }
}

impl Presentation {
    /// The blocks as plain text, for a surface that shows them in one monospace block
    /// (Telegram, Feishu, a webhook's `display`): `Label: value` lines, texts indented by
    /// two spaces, diffs as unified diff lines (`-`, `+`, ` `, `⋯` between distant
    /// changes), remarks after `! `, and a `… N more lines not shown` line under what was
    /// cut. Values were already made visible (escapes for control characters); the surface
    /// still escapes for its own markup.
    ///
    /// A presentation that is one text and nothing else (a Bash command) is that text as it
    /// is, without a label: what a person reads is the command itself.
    pub fn plain_text(&self) -> String {
        if let [Block::Text { lines, cut, .. }] = self.blocks.as_slice()
            && cut.is_empty()
        {
            return lines.join("\n");
        }
        let mut out: Vec<String> = Vec::new();
        let cut_line = |out: &mut Vec<String>, cut: &Cut| {
            if let Some(n) = cut.note() {
                out.push(format!("  … {n}"));
            }
        };
        for block in &self.blocks {
            match block {
                Block::Field { label, value, cut } => {
                    out.push(format!("{label}: {value}"));
                    cut_line(&mut out, cut);
                }
                Block::Text { label, lines, cut } => {
                    out.push(format!("{label}:"));
                    out.extend(lines.iter().map(|l| format!("  {l}")));
                    cut_line(&mut out, cut);
                }
                Block::Diff { label, lines, cut } => {
                    out.push(format!("{label}:"));
                    out.extend(lines.iter().map(|l| match l {
                        DiffLine::Context(t) => format!(" {t}"),
                        DiffLine::Removed(t) => format!("-{t}"),
                        DiffLine::Added(t) => format!("+{t}"),
                        DiffLine::Gap => "⋯".to_string(),
                    }));
                    cut_line(&mut out, cut);
                }
                Block::Note(n) => out.push(format!("! {n}")),
            }
        }
        out.join("\n")
    }

    /// Whether it shows a diff (a surface may then highlight it as one).
    pub fn has_diff(&self) -> bool {
        self.blocks.iter().any(|b| matches!(b, Block::Diff { .. }))
    }
}
/// A tool call as a chat message shows it in one code block, uncut (the channel cuts it to
/// its own budget and says how much): the text, and the language the block is highlighted
/// as (`diff`, `bash` or `text`).
pub(crate) fn chat_block(
    tool_name: &str,
    input: &Map<String, Value>,
    cwd: Option<&str>,
) -> (String, &'static str) {
    let shown = present(tool_name, input, cwd, Budget::ALL);
    let lang = if shown.has_diff() {
        "diff"
    } else if tool_name == "Bash" {
        "bash"
    } else {
        "text"
    };
    (shown.plain_text(), lang)
}

/// Presents `tool_name` called with `input` by an agent working in `cwd`, within `budget`.
pub fn present(
    tool_name: &str,
    input: &Map<String, Value>,
    cwd: Option<&str>,
    budget: Budget,
) -> Presentation {
    let mut out = Builder::new(budget, cwd);
    let shaped = tools::view(&mut out, tool_name, input);
    match shaped {
        Ok(used) => out.rest(input, &used),
        Err(problem) => {
            // Start again: the input is shown field by field, none of it in the tool's view.
            let mut plain = Builder::new(budget, cwd);
            plain.summary = visible_line(tool_name);
            plain.note(format!(
                "This input is not in the usual shape for {}: {problem}. It is shown as it is.",
                visible_line(tool_name)
            ));
            plain.rest(input, &[]);
            out = plain;
        }
    }
    out.finish()
}

#[cfg(test)]
mod tests;
