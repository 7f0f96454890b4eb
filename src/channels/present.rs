//! How a tool call reads to a person: what they check before saying yes.
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

use std::path::{Component, Path, PathBuf};
use std::time::Duration;

use serde_json::{Map, Value};
use similar::{ChangeTag, TextDiff};

use crate::interaction::ASK_USER_QUESTION;

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

/// Longest a summary gets, in characters.
const SUMMARY_CHARS: usize = 120;
/// How long a diff may take before it settles for a longer, still correct, diff.
const DIFF_TIME: Duration = Duration::from_millis(100);
/// Unchanged lines shown around a change.
const DIFF_CONTEXT: usize = 3;

/// Presents `tool_name` called with `input` by an agent working in `cwd`, within `budget`.
pub fn present(
    tool_name: &str,
    input: &Map<String, Value>,
    cwd: Option<&str>,
    budget: Budget,
) -> Presentation {
    let mut out = Builder::new(budget, cwd);
    let shaped = match tool_name {
        "Bash" => bash(&mut out, input),
        "Edit" => edit(&mut out, input),
        "MultiEdit" => multi_edit(&mut out, input),
        "Write" => write(&mut out, input),
        "Read" => read(&mut out, input),
        "Glob" => glob(&mut out, input),
        "Grep" => grep(&mut out, input),
        "WebFetch" => web_fetch(&mut out, input),
        "WebSearch" => web_search(&mut out, input),
        "NotebookEdit" => notebook_edit(&mut out, input),
        "Task" => task(&mut out, input),
        "ExitPlanMode" => plan(&mut out, input),
        ASK_USER_QUESTION => questions(&mut out, input),
        crate::interaction::FORM_TOOL => form(&mut out, input),
        crate::interaction::PATCH_TOOL => patch(&mut out, input),
        _ => match mcp_name(tool_name) {
            Some((server, tool)) => {
                out.summary = format!("{} · {}", visible_line(server), visible_line(tool));
                out.field("Server", server);
                out.field("Tool", tool);
                Ok(Vec::new())
            }
            None => {
                out.summary = visible_line(tool_name);
                Ok(Vec::new())
            }
        },
    };
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

/// `mcp__server__tool` split into its server and tool.
fn mcp_name(tool_name: &str) -> Option<(&str, &str)> {
    let rest = tool_name.strip_prefix("mcp__")?;
    let (server, tool) = rest.split_once("__")?;
    (!server.is_empty() && !tool.is_empty()).then_some((server, tool))
}

/// Why an input is not in its tool's usual shape.
type Shape = Result<Vec<&'static str>, String>;

fn bash(out: &mut Builder, input: &Map<String, Value>) -> Shape {
    let command = required_str(input, "command")?;
    let description = optional_str(input, "description")?;
    let mut used = vec!["command", "description"];
    out.summary = format!("Run: {}", first_line(command));
    if let Some(d) = description {
        out.field("Why", d);
    }
    out.text("Command", command);
    if let Some(Value::Number(ms)) = input.get("timeout")
        && let Some(ms) = ms.as_u64()
    {
        out.field("Timeout", &super::render::duration_words(ms / 1000));
        used.push("timeout");
    }
    if let Some(Value::Bool(b)) = input.get("run_in_background") {
        if *b {
            out.note("Runs in the background.");
        }
        used.push("run_in_background");
    }
    if let Some(Value::Bool(b)) = input.get("dangerouslyDisableSandbox") {
        if *b {
            out.note("Runs outside the sandbox.");
        }
        used.push("dangerouslyDisableSandbox");
    }
    Ok(used)
}

fn edit(out: &mut Builder, input: &Map<String, Value>) -> Shape {
    let path = required_str(input, "file_path")?;
    let old = required_str(input, "old_string")?;
    let new = required_str(input, "new_string")?;
    let all = optional_bool(input, "replace_all")?.unwrap_or(false);
    out.summary = format!("Edit {}", out.path_text(path));
    out.path("File", path);
    out.diff("Change", old, new);
    if all {
        out.note("Replaces every occurrence.");
    }
    Ok(vec!["file_path", "old_string", "new_string", "replace_all"])
}

fn multi_edit(out: &mut Builder, input: &Map<String, Value>) -> Shape {
    let path = required_str(input, "file_path")?;
    let edits = match input.get("edits") {
        Some(Value::Array(e)) => e,
        Some(other) => return Err(format!("`edits` is {}, not a list", json_type(other))),
        None => return Err("`edits` is missing".into()),
    };
    // Check every edit before showing any.
    let mut changes = Vec::with_capacity(edits.len());
    for (n, e) in edits.iter().enumerate() {
        let Value::Object(e) = e else {
            return Err(format!("`edits[{n}]` is {}, not an object", json_type(e)));
        };
        let within = |m: String| format!("in `edits[{n}]`, {m}");
        let old = required_str(e, "old_string").map_err(within)?;
        let new = required_str(e, "new_string").map_err(within)?;
        let all = optional_bool(e, "replace_all").map_err(within)?;
        if let Some(k) = e
            .keys()
            .find(|k| !matches!(k.as_str(), "old_string" | "new_string" | "replace_all"))
        {
            return Err(format!(
                "`edits[{n}]` has an unexpected field `{}`",
                visible_line(k)
            ));
        }
        changes.push((old, new, all.unwrap_or(false)));
    }
    let count = changes.len();
    out.summary = format!(
        "Edit {} ({count} {})",
        out.path_text(path),
        if count == 1 { "change" } else { "changes" }
    );
    out.path("File", path);
    for (n, (old, new, all)) in changes.into_iter().enumerate() {
        let label = if count == 1 {
            "Change".to_string()
        } else {
            format!("Change {} of {count}", n + 1)
        };
        out.diff(&label, old, new);
        if all {
            out.note("Replaces every occurrence.");
        }
    }
    Ok(vec!["file_path", "edits"])
}

fn write(out: &mut Builder, input: &Map<String, Value>) -> Shape {
    let path = required_str(input, "file_path")?;
    let content = required_str(input, "content")?;
    let lines = content.lines().count();
    out.summary = format!("Write {}", out.path_text(path));
    out.path("File", path);
    out.field(
        "Size",
        &format!(
            "{} {}, {} {}",
            super::render::thousands(content.len()),
            if content.len() == 1 { "byte" } else { "bytes" },
            super::render::thousands(lines),
            if lines == 1 { "line" } else { "lines" },
        ),
    );
    if content.is_empty() {
        out.note("The file will be empty.");
    } else {
        out.text("Content", content);
    }
    Ok(vec!["file_path", "content"])
}

fn read(out: &mut Builder, input: &Map<String, Value>) -> Shape {
    let path = required_str(input, "file_path")?;
    out.summary = format!("Read {}", out.path_text(path));
    out.path("File", path);
    let offset = input.get("offset").and_then(Value::as_u64);
    let limit = input.get("limit").and_then(Value::as_u64);
    let mut used = vec!["file_path"];
    let lines = match (offset, limit) {
        (Some(o), Some(l)) => Some(format!("{l} from line {o}")),
        (Some(o), None) => Some(format!("from line {o}")),
        (None, Some(l)) => Some(format!("the first {l}")),
        (None, None) => None,
    };
    if let Some(lines) = lines {
        out.field("Lines", &lines);
        used.extend(offset.map(|_| "offset"));
        used.extend(limit.map(|_| "limit"));
    }
    Ok(used)
}

fn glob(out: &mut Builder, input: &Map<String, Value>) -> Shape {
    let pattern = required_str(input, "pattern")?;
    let path = optional_str(input, "path")?;
    out.summary = format!("Find files: {}", visible_line(pattern));
    out.field("Pattern", pattern);
    if let Some(p) = path {
        out.path("In", p);
    }
    Ok(vec!["pattern", "path"])
}

fn grep(out: &mut Builder, input: &Map<String, Value>) -> Shape {
    let pattern = required_str(input, "pattern")?;
    let path = optional_str(input, "path")?;
    out.summary = format!("Search files for: {}", visible_line(pattern));
    out.field("Pattern", pattern);
    if let Some(p) = path {
        out.path("In", p);
    }
    Ok(vec!["pattern", "path"])
}

fn web_fetch(out: &mut Builder, input: &Map<String, Value>) -> Shape {
    let url = required_str(input, "url")?;
    let prompt = optional_str(input, "prompt")?;
    out.summary = format!("Fetch {}", visible_line(url));
    out.field("URL", url);
    if let Some(p) = prompt {
        out.text("Asks of the page", p);
    }
    Ok(vec!["url", "prompt"])
}

fn web_search(out: &mut Builder, input: &Map<String, Value>) -> Shape {
    let query = required_str(input, "query")?;
    out.summary = format!("Search the web: {}", visible_line(query));
    out.field("Query", query);
    let mut used = vec!["query"];
    for (key, label) in [
        ("allowed_domains", "Only from"),
        ("blocked_domains", "Never from"),
    ] {
        if let Some(list) = string_list(input, key) {
            if !list.is_empty() {
                out.field(label, &list.join(", "));
            }
            used.push(key);
        }
    }
    Ok(used)
}

fn notebook_edit(out: &mut Builder, input: &Map<String, Value>) -> Shape {
    let path = required_str(input, "notebook_path")?;
    let source = optional_str(input, "new_source")?;
    let cell = optional_str(input, "cell_id")?;
    let mode = optional_str(input, "edit_mode")?.unwrap_or("replace");
    let cell_type = optional_str(input, "cell_type")?;
    out.summary = format!("Edit notebook {}", out.path_text(path));
    out.path("Notebook", path);
    let what = match (mode, cell) {
        ("insert", Some(c)) => format!("insert a new cell after {}", visible_line(c)),
        ("insert", None) => "insert a new cell at the start".to_string(),
        ("delete", Some(c)) => format!("delete cell {}", visible_line(c)),
        (m, Some(c)) => format!("{} cell {}", visible_line(m), visible_line(c)),
        (m, None) => format!("{} the first cell", visible_line(m)),
    };
    let what = match cell_type {
        Some(t) => format!("{what} ({})", visible_line(t)),
        None => what,
    };
    out.field("Cell", &what);
    if let Some(s) = source
        && mode != "delete"
    {
        out.text("New source", s);
    }
    Ok(vec![
        "notebook_path",
        "new_source",
        "cell_id",
        "edit_mode",
        "cell_type",
    ])
}

fn task(out: &mut Builder, input: &Map<String, Value>) -> Shape {
    let description = required_str(input, "description")?;
    let prompt = required_str(input, "prompt")?;
    let agent = optional_str(input, "subagent_type")?;
    out.summary = format!("Start a subagent: {}", visible_line(description));
    if let Some(a) = agent {
        out.field("Agent", a);
    }
    out.field("Task", description);
    out.text("Prompt", prompt);
    Ok(vec!["description", "prompt", "subagent_type"])
}

fn plan(out: &mut Builder, input: &Map<String, Value>) -> Shape {
    let plan = required_str(input, "plan")?;
    out.summary = "Leave plan mode and carry out this plan".to_string();
    out.text("Plan", plan);
    Ok(vec!["plan"])
}

fn questions(out: &mut Builder, input: &Map<String, Value>) -> Shape {
    let parsed = crate::interaction::parse_questions(input).map_err(|e| e.to_string())?;
    let first = parsed.first().map(|q| q.question.as_str()).unwrap_or("");
    out.summary = match parsed.len() {
        1 => format!("Ask: {}", visible_line(first)),
        n => format!("Ask: {} (and {} more)", visible_line(first), n - 1),
    };
    for q in &parsed {
        let mut text = q.question.clone();
        for (n, o) in q.options.iter().enumerate() {
            text.push_str(&format!("\n  {}. {}", n + 1, o.label));
            if let Some(d) = o.description.as_deref().filter(|d| !d.is_empty()) {
                text.push_str(" — ");
                text.push_str(d);
            }
        }
        out.text(&q.header, &text);
    }
    Ok(vec!["questions"])
}

fn patch(out: &mut Builder, input: &Map<String, Value>) -> Shape {
    use crate::interaction::patch::{FileChange, parse_patch};
    let text = required_str(input, "patch")?;
    let changes = parse_patch(text).map_err(|e| format!("the patch cannot be read: {e}"))?;
    out.summary = match changes.as_slice() {
        [only] => format!("Patch {}", out.path_text(only.path())),
        more => format!("Patch {} files", more.len()),
    };
    for change in &changes {
        match change {
            FileChange::Add { path, content } => {
                out.path("New file", path);
                out.text("Content", content);
            }
            FileChange::Delete { path } => {
                out.path("Delete", path);
            }
            FileChange::Update {
                path,
                move_to,
                old,
                new,
            } => {
                out.path("File", path);
                if let Some(to) = move_to {
                    out.path("Renamed to", to);
                }
                out.diff("Change", old, new);
            }
        }
    }
    Ok(vec!["patch"])
}

fn form(out: &mut Builder, input: &Map<String, Value>) -> Shape {
    let form = crate::interaction::Form::from_input(input).map_err(|e| e.to_string())?;
    out.summary = match form.fields.len() {
        1 => format!("Ask: {}", visible_line(&form.message)),
        n => format!("Form: {} ({n} fields)", visible_line(&form.message)),
    };
    out.text("Message", &form.message);
    for f in &form.fields {
        let required = if f.required { " (required)" } else { "" };
        out.field(f.label(), &format!("{}{required}", f.hint()));
    }
    Ok(vec!["message", "requestedSchema"])
}

fn required_str<'a>(input: &'a Map<String, Value>, key: &str) -> Result<&'a str, String> {
    match input.get(key) {
        Some(Value::String(s)) => Ok(s),
        Some(other) => Err(format!("`{key}` is {}, not text", json_type(other))),
        None => Err(format!("`{key}` is missing")),
    }
}

fn optional_str<'a>(input: &'a Map<String, Value>, key: &str) -> Result<Option<&'a str>, String> {
    match input.get(key) {
        Some(Value::String(s)) => Ok(Some(s)),
        None | Some(Value::Null) => Ok(None),
        Some(other) => Err(format!("`{key}` is {}, not text", json_type(other))),
    }
}

fn optional_bool(input: &Map<String, Value>, key: &str) -> Result<Option<bool>, String> {
    match input.get(key) {
        Some(Value::Bool(b)) => Ok(Some(*b)),
        None | Some(Value::Null) => Ok(None),
        Some(other) => Err(format!(
            "`{key}` is {}, not true or false",
            json_type(other)
        )),
    }
}

/// A list of strings, or `None` when the field is absent or anything else (then it is shown
/// with the other fields).
fn string_list<'a>(input: &'a Map<String, Value>, key: &str) -> Option<Vec<&'a str>> {
    match input.get(key)? {
        Value::Array(items) => items.iter().map(Value::as_str).collect(),
        _ => None,
    }
}

fn json_type(v: &Value) -> &'static str {
    crate::interaction::json_type(v)
}

fn first_line(s: &str) -> String {
    let mut lines = s.lines().filter(|l| !l.trim().is_empty());
    let first = lines.next().unwrap_or("").trim();
    let more = lines.next().is_some();
    let mut out = visible_line(first);
    if more {
        out.push_str(" …");
    }
    out
}

/// Whether `c` is shown as an escape: control characters, and the characters that reorder
/// or hide text (bidirectional controls, zero-width characters, tags).
fn is_hidden(c: char) -> bool {
    c.is_control()
        || matches!(c,
            '\u{061c}' | '\u{200b}'..='\u{200f}' | '\u{2028}'..='\u{202e}'
            | '\u{2060}'..='\u{2064}' | '\u{2066}'..='\u{206f}' | '\u{feff}'
            | '\u{fff9}'..='\u{fffb}' | '\u{e0000}'..='\u{e007f}')
}

fn push_visible(out: &mut String, c: char, keep_breaks: bool) {
    match c {
        '\n' if keep_breaks => out.push('\n'),
        '\t' if keep_breaks => out.push('\t'),
        '\n' => out.push_str("\\n"),
        '\t' => out.push_str("\\t"),
        '\r' => out.push_str("\\r"),
        c if is_hidden(c) => out.push_str(&format!("\\u{{{:x}}}", c as u32)),
        c => out.push(c),
    }
}

/// `s` with line breaks and every hidden character shown as an escape: safe on one line.
pub(crate) fn visible_line(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        push_visible(&mut out, c, false);
    }
    out
}

/// `s` with every hidden character shown as an escape, line breaks and tabs kept.
pub(crate) fn visible_text(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        push_visible(&mut out, c, true);
    }
    out
}

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
struct Builder<'c> {
    budget: Budget,
    /// Characters left in all.
    left: usize,
    cwd: Option<&'c str>,
    summary: String,
    blocks: Vec<Block>,
}

impl<'c> Builder<'c> {
    fn new(budget: Budget, cwd: Option<&'c str>) -> Self {
        Self {
            budget,
            left: budget.chars,
            cwd: cwd.filter(|c| Path::new(c).is_absolute()),
            summary: String::new(),
            blocks: Vec::new(),
        }
    }

    fn finish(self) -> Presentation {
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
    fn clip_line(&mut self, line: &str) -> (String, usize) {
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

    fn field(&mut self, label: &str, value: &str) {
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

    fn note(&mut self, text: impl Into<String>) {
        self.blocks.push(Block::Note(text.into()));
    }

    fn text(&mut self, label: &str, text: &str) {
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

    fn diff(&mut self, label: &str, old: &str, new: &str) {
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

    /// `path` as a person reads it: relative to the working directory when inside it.
    fn path_text(&self, path: &str) -> String {
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
    fn path(&mut self, label: &str, path: &str) {
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
    fn rest(&mut self, input: &Map<String, Value>, used: &[&str]) {
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

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn map(v: Value) -> Map<String, Value> {
        match v {
            Value::Object(m) => m,
            _ => panic!("not an object"),
        }
    }

    fn show(tool: &str, input: Value) -> Presentation {
        present(tool, &map(input), Some("/home/dev/shop"), Budget::TERMINAL)
    }

    fn field<'a>(p: &'a Presentation, label: &str) -> &'a str {
        p.blocks
            .iter()
            .find_map(|b| match b {
                Block::Field {
                    label: l, value, ..
                } if l == label => Some(value.as_str()),
                _ => None,
            })
            .unwrap_or_else(|| panic!("no field {label} in {p:#?}"))
    }

    fn text<'a>(p: &'a Presentation, label: &str) -> (&'a [String], Cut) {
        p.blocks
            .iter()
            .find_map(|b| match b {
                Block::Text {
                    label: l,
                    lines,
                    cut,
                } if l == label => Some((lines.as_slice(), *cut)),
                _ => None,
            })
            .unwrap_or_else(|| panic!("no text {label} in {p:#?}"))
    }

    fn notes(p: &Presentation) -> Vec<&str> {
        p.blocks
            .iter()
            .filter_map(|b| match b {
                Block::Note(n) => Some(n.as_str()),
                _ => None,
            })
            .collect()
    }

    /// Everything a surface would print, as one string.
    fn all_text(p: &Presentation) -> String {
        let mut s = p.summary.clone();
        for b in &p.blocks {
            match b {
                Block::Field { label, value, .. } => s.push_str(&format!("\n{label}: {value}")),
                Block::Text { label, lines, .. } => {
                    s.push_str(&format!("\n{label}:\n{}", lines.join("\n")))
                }
                Block::Diff { label, lines, .. } => {
                    s.push_str(&format!("\n{label}:"));
                    for l in lines {
                        s.push_str(&format!("\n{l:?}"));
                    }
                }
                Block::Note(n) => s.push_str(&format!("\n{n}")),
            }
        }
        s
    }

    #[test]
    fn a_patch_shows_each_file_and_its_diff() {
        let patch = "*** Begin Patch\n*** Update File: src/app.py\n@@\n def greet():\n-    print(\"Hi\")\n+    print(\"Hello\")\n*** Add File: /etc/motd\n+Welcome\n*** Delete File: old.txt\n*** End Patch\n";
        let p = show(crate::interaction::PATCH_TOOL, json!({"patch": patch}));
        assert_eq!(p.summary, "Patch 3 files");
        assert_eq!(field(&p, "File"), "src/app.py");
        assert_eq!(field(&p, "New file"), "/etc/motd");
        assert_eq!(field(&p, "Delete"), "old.txt");
        assert_eq!(text(&p, "Content").0, ["Welcome"]);
        assert!(p.has_diff(), "{p:#?}");
        let all = all_text(&p);
        assert!(all.contains("print(\\\"Hello\\\")"), "{all}");
        assert!(
            notes(&p)
                .iter()
                .any(|n| n.starts_with("Outside the working directory"))
        );
        // One file: its name in the summary. Not a patch: shown as it is, with a remark.
        let one = show(
            crate::interaction::PATCH_TOOL,
            json!({"patch": "*** Begin Patch\n*** Add File: a.txt\n+x\n*** End Patch"}),
        );
        assert_eq!(one.summary, "Patch a.txt");
        let bad = show(crate::interaction::PATCH_TOOL, json!({"patch": "rm -rf /"}));
        assert!(
            notes(&bad)[0].contains("the patch cannot be read"),
            "{bad:#?}"
        );
    }

    fn assert_no_controls(p: &Presentation) {
        let s = all_text(p);
        assert!(
            !s.chars().any(|c| c != '\n' && c != '\t' && is_hidden(c)),
            "a hidden character got through: {s:?}"
        );
    }

    #[test]
    fn bash_shows_the_command_and_why() {
        let p = show(
            "Bash",
            json!({"command": "cargo test --workspace", "description": "Run the tests", "timeout": 120000}),
        );
        assert_eq!(p.summary, "Run: cargo test --workspace");
        assert_eq!(field(&p, "Why"), "Run the tests");
        assert_eq!(text(&p, "Command").0, ["cargo test --workspace"]);
        assert_eq!(field(&p, "Timeout"), "2 min");
        assert!(!p.is_cut());
    }

    #[test]
    fn bash_with_escapes_and_newlines_is_shown_not_obeyed() {
        let p = show(
            "Bash",
            json!({"command": "echo ok\r\x1b[2Krm -rf ~\nls\u{202e}txt.exe", "description": "tidy\nup\x07",
                   "dangerouslyDisableSandbox": true, "run_in_background": true, "extra": "\x1b]0;title\x07"}),
        );
        assert_no_controls(&p);
        let (lines, _) = text(&p, "Command");
        assert_eq!(
            lines,
            ["echo ok\\r\\u{1b}[2Krm -rf ~", "ls\\u{202e}txt.exe"]
        );
        assert_eq!(field(&p, "Why"), "tidy\\nup\\u{7}");
        assert_eq!(p.summary, "Run: echo ok\\r\\u{1b}[2Krm -rf ~ …");
        assert_eq!(
            notes(&p),
            ["Runs in the background.", "Runs outside the sandbox."]
        );
        // A field the view does not know is still shown.
        assert_eq!(field(&p, "extra"), "\\u{1b}]0;title\\u{7}");
    }

    #[test]
    fn a_huge_command_is_cut_and_the_cut_counted() {
        let command: String = (0..1000).map(|n| format!("echo {n}\n")).collect();
        let p = show("Bash", json!({ "command": command }));
        let (lines, cut) = text(&p, "Command");
        assert_eq!(lines.len(), Budget::TERMINAL.lines);
        assert_eq!(cut.lines, 1000 - Budget::TERMINAL.lines);
        let shown: usize = lines.iter().map(|l| l.chars().count()).sum();
        let total: usize = command.lines().map(|l| l.chars().count()).sum();
        assert_eq!(shown + cut.chars, total);
        assert_eq!(
            cut.note().unwrap(),
            format!(
                "960 more lines not shown ({} characters)",
                super::super::render::thousands(cut.chars)
            )
        );
        assert!(p.is_cut());

        // One endless line is cut within the line.
        let p = show("Bash", json!({ "command": "x".repeat(100_000) }));
        let (lines, cut) = text(&p, "Command");
        assert_eq!(lines[0].chars().count(), Budget::TERMINAL.line_chars);
        assert!(lines[0].ends_with('…'));
        assert_eq!(cut.lines, 0);
        assert_eq!(cut.chars, 100_000 - (Budget::TERMINAL.line_chars - 1));
        assert!(p.summary.chars().count() <= SUMMARY_CHARS);
    }

    #[test]
    fn the_whole_budget_bounds_every_block_together() {
        let tiny = Budget {
            chars: 50,
            lines: 100,
            line_chars: 30,
        };
        let input = map(json!({"a": "x".repeat(40), "b": "y\n".repeat(40), "c": "z".repeat(10)}));
        let p = present("Custom", &input, None, tiny);
        let shown: usize = all_shown_chars(&p);
        assert!(shown <= 50, "{shown}: {p:#?}");
        // Every field is still there, if empty, with what was cut counted.
        assert_eq!(p.blocks.len(), 3);
    }

    fn all_shown_chars(p: &Presentation) -> usize {
        p.blocks
            .iter()
            .map(|b| match b {
                Block::Field { value, .. } => value.chars().count(),
                Block::Text { lines, .. } => lines.iter().map(|l| l.chars().count()).sum(),
                Block::Diff { lines, .. } => lines
                    .iter()
                    .map(|l| match l {
                        DiffLine::Context(t) | DiffLine::Added(t) | DiffLine::Removed(t) => {
                            t.chars().count()
                        }
                        DiffLine::Gap => 0,
                    })
                    .sum(),
                Block::Note(_) => 0,
            })
            .sum()
    }

    #[test]
    fn edit_is_a_diff_of_the_lines_that_change() {
        let p = show(
            "Edit",
            json!({"file_path": "/home/dev/shop/src/main.rs",
                   "old_string": "fn main() {\n    println!(\"hi\");\n}",
                   "new_string": "fn main() {\n    println!(\"héllo, 世界\");\n}"}),
        );
        assert_eq!(p.summary, "Edit src/main.rs");
        assert_eq!(field(&p, "File"), "src/main.rs");
        let Some(Block::Diff { label, lines, cut }) =
            p.blocks.iter().find(|b| matches!(b, Block::Diff { .. }))
        else {
            panic!("no diff: {p:#?}")
        };
        assert_eq!(label, "Change");
        assert_eq!(
            lines,
            &[
                DiffLine::Context("fn main() {".into()),
                DiffLine::Removed("    println!(\"hi\");".into()),
                DiffLine::Added("    println!(\"héllo, 世界\");".into()),
                DiffLine::Context("}".into()),
            ]
        );
        assert!(cut.is_empty());
        assert!(notes(&p).is_empty());
    }

    #[test]
    fn edit_far_apart_changes_are_separated_by_a_gap_and_replace_all_is_said() {
        let old: String = (0..30).map(|n| format!("line {n}\n")).collect();
        let new = old
            .replace("line 2\n", "line two\n")
            .replace("line 25\n", "line twenty-five\n");
        let p = show(
            "Edit",
            json!({"file_path": "src/lib.rs", "old_string": old, "new_string": new, "replace_all": true}),
        );
        let Some(Block::Diff { lines, .. }) =
            p.blocks.iter().find(|b| matches!(b, Block::Diff { .. }))
        else {
            panic!()
        };
        assert_eq!(lines.iter().filter(|l| **l == DiffLine::Gap).count(), 1);
        assert!(lines.contains(&DiffLine::Added("line two".into())));
        assert!(lines.contains(&DiffLine::Removed("line 25".into())));
        assert!(!lines.contains(&DiffLine::Context("line 14".into())));
        assert_eq!(notes(&p), ["Replaces every occurrence."]);
        // A relative path is taken from the working directory.
        assert_eq!(field(&p, "File"), "src/lib.rs");
    }

    #[test]
    fn edit_outside_the_working_directory_is_pointed_out() {
        for path in [
            "/home/dev/.ssh/authorized_keys",
            "/home/dev/shop/../.ssh/authorized_keys",
        ] {
            let p = show(
                "Edit",
                json!({"file_path": path, "old_string": "", "new_string": "ssh-ed25519 AAAA"}),
            );
            assert_eq!(field(&p, "File"), "/home/dev/.ssh/authorized_keys");
            assert_eq!(
                notes(&p),
                ["Outside the working directory (/home/dev/shop)."]
            );
        }
        // No working directory: the path as given, nothing to compare with.
        let p = present(
            "Edit",
            &map(json!({"file_path": "/etc/hosts", "old_string": "a", "new_string": "b"})),
            None,
            Budget::TERMINAL,
        );
        assert_eq!(field(&p, "File"), "/etc/hosts");
        assert!(notes(&p).is_empty());
    }

    #[test]
    fn edit_that_changes_nothing_or_only_the_last_line_break_says_so() {
        let p = show(
            "Edit",
            json!({"file_path": "a", "old_string": "x", "new_string": "x"}),
        );
        assert_eq!(notes(&p), ["This change changes nothing."]);
        let p = show(
            "Edit",
            json!({"file_path": "a", "old_string": "x", "new_string": "x\n"}),
        );
        assert_eq!(notes(&p), ["Changes only the line break at the end."]);
    }

    #[test]
    fn a_huge_diff_is_cut_and_counted() {
        let old: String = (0..5000).map(|n| format!("old {n}\n")).collect();
        let new: String = (0..5000).map(|n| format!("new {n}\n")).collect();
        let p = show(
            "Edit",
            json!({"file_path": "big.txt", "old_string": old, "new_string": new}),
        );
        let Some(Block::Diff { lines, cut, .. }) =
            p.blocks.iter().find(|b| matches!(b, Block::Diff { .. }))
        else {
            panic!()
        };
        assert_eq!(lines.len(), Budget::TERMINAL.lines);
        assert_eq!(cut.lines, 10_000 - Budget::TERMINAL.lines);
    }

    #[test]
    fn multi_edit_shows_each_change() {
        let p = show(
            "MultiEdit",
            json!({"file_path": "/home/dev/shop/a.py", "edits": [
                {"old_string": "a = 1", "new_string": "a = 2"},
                {"old_string": "b = 1", "new_string": "b = 2", "replace_all": true}]}),
        );
        assert_eq!(p.summary, "Edit a.py (2 changes)");
        let labels: Vec<&str> = p
            .blocks
            .iter()
            .filter_map(|b| match b {
                Block::Diff { label, .. } => Some(label.as_str()),
                _ => None,
            })
            .collect();
        assert_eq!(labels, ["Change 1 of 2", "Change 2 of 2"]);
        assert_eq!(notes(&p), ["Replaces every occurrence."]);
    }

    #[test]
    fn ill_shaped_input_is_shown_field_by_field_with_a_remark() {
        let cases = [
            (
                "Bash",
                json!({"command": 42}),
                "`command` is a number, not text",
            ),
            ("Bash", json!({"cmd": "ls"}), "`command` is missing"),
            (
                "Edit",
                json!({"file_path": "a", "old_string": "x", "new_string": null}),
                "`new_string` is null, not text",
            ),
            (
                "MultiEdit",
                json!({"file_path": "a", "edits": "all of them"}),
                "`edits` is a string, not a list",
            ),
            (
                "MultiEdit",
                json!({"file_path": "a", "edits": [{"old_string": "x", "new_string": "y", "sneaky": 1}]}),
                "`edits[0]` has an unexpected field `sneaky`",
            ),
            (
                "MultiEdit",
                json!({"file_path": "a", "edits": [{"old_string": "x"}]}),
                "in `edits[0]`, `new_string` is missing",
            ),
            (
                "Write",
                json!({"file_path": ["a"], "content": "x"}),
                "`file_path` is an array, not text",
            ),
            (
                "Edit",
                json!({"file_path": "a", "old_string": "x", "new_string": "y", "replace_all": "yes"}),
                "`replace_all` is a string, not true or false",
            ),
        ];
        for (tool, input, problem) in cases {
            let p = show(tool, input.clone());
            assert_eq!(p.summary, tool);
            assert_eq!(
                notes(&p),
                [format!(
                    "This input is not in the usual shape for {tool}: {problem}. It is shown as it is."
                )
                .as_str()],
                "{input}"
            );
            // Every field of the input appears.
            let fields = p.blocks.len() - 1;
            assert_eq!(fields, input.as_object().unwrap().len(), "{p:#?}");
        }
    }

    #[test]
    fn write_shows_the_file_its_size_and_first_lines() {
        let content: String = (1..=100).map(|n| format!("línea {n}\n")).collect();
        let p = show(
            "Write",
            json!({"file_path": "/home/dev/shop/notes.md", "content": content}),
        );
        assert_eq!(p.summary, "Write notes.md");
        assert_eq!(field(&p, "File"), "notes.md");
        assert_eq!(
            field(&p, "Size"),
            format!("{} bytes, 100 lines", content.len())
        );
        let (lines, cut) = text(&p, "Content");
        assert_eq!(lines[0], "línea 1");
        assert_eq!(cut.lines, 100 - Budget::TERMINAL.lines);
        let p = show(
            "Write",
            json!({"file_path": "/home/dev/shop/empty", "content": ""}),
        );
        assert_eq!(field(&p, "Size"), "0 bytes, 0 lines");
        assert_eq!(notes(&p), ["The file will be empty."]);
    }

    #[test]
    fn read_glob_grep_show_the_path_or_pattern() {
        let p = show(
            "Read",
            json!({"file_path": "/etc/passwd", "offset": 10, "limit": 5}),
        );
        assert_eq!(p.summary, "Read /etc/passwd");
        assert_eq!(field(&p, "Lines"), "5 from line 10");
        assert_eq!(
            notes(&p),
            ["Outside the working directory (/home/dev/shop)."]
        );
        let p = show(
            "Glob",
            json!({"pattern": "**/*.rs", "path": "/home/dev/shop/src"}),
        );
        assert_eq!(p.summary, "Find files: **/*.rs");
        assert_eq!(field(&p, "In"), "src");
        let p = show(
            "Grep",
            json!({"pattern": "TODO\\(.*\\)", "output_mode": "content", "-i": true}),
        );
        assert_eq!(p.summary, "Search files for: TODO\\(.*\\)");
        assert_eq!(field(&p, "output_mode"), "content");
        assert_eq!(field(&p, "-i"), "true");
    }

    #[test]
    fn web_calls_show_the_url_or_query() {
        let p = show(
            "WebFetch",
            json!({"url": "https://example.com/a?b=c", "prompt": "Summarise\nthe page"}),
        );
        assert_eq!(p.summary, "Fetch https://example.com/a?b=c");
        assert_eq!(field(&p, "URL"), "https://example.com/a?b=c");
        assert_eq!(text(&p, "Asks of the page").0, ["Summarise", "the page"]);
        let p = show(
            "WebSearch",
            json!({"query": "rust 1.95 release notes", "allowed_domains": ["rust-lang.org", "github.com"]}),
        );
        assert_eq!(p.summary, "Search the web: rust 1.95 release notes");
        assert_eq!(field(&p, "Only from"), "rust-lang.org, github.com");
        // An ill-typed optional list is shown with the other fields, not dropped.
        let p = show(
            "WebSearch",
            json!({"query": "q", "blocked_domains": "x.com"}),
        );
        assert_eq!(field(&p, "blocked_domains"), "x.com");
    }

    #[test]
    fn mcp_tools_show_server_tool_and_arguments() {
        let p = show(
            "mcp__github__create_issue",
            json!({"repo": "acme/shop", "title": "Bug: 東京", "body": "Steps:\n1. run\n2. crash",
                   "labels": ["bug", "p1"], "assignee": null}),
        );
        assert_eq!(p.summary, "github · create_issue");
        assert_eq!(field(&p, "Server"), "github");
        assert_eq!(field(&p, "Tool"), "create_issue");
        assert_eq!(field(&p, "title"), "Bug: 東京");
        assert_eq!(text(&p, "body").0, ["Steps:", "1. run", "2. crash"]);
        assert_eq!(field(&p, "labels"), r#"["bug","p1"]"#);
        assert_eq!(field(&p, "assignee"), "null");
        // Not an MCP name: the tool name as the summary.
        assert_eq!(show("mcp__broken", json!({})).summary, "mcp__broken");
    }

    #[test]
    fn notebook_edit_shows_the_cell_and_new_source() {
        let p = show(
            "NotebookEdit",
            json!({"notebook_path": "/home/dev/shop/a.ipynb", "cell_id": "c3",
                   "new_source": "import os\nos.listdir()", "cell_type": "code", "edit_mode": "insert"}),
        );
        assert_eq!(p.summary, "Edit notebook a.ipynb");
        assert_eq!(field(&p, "Cell"), "insert a new cell after c3 (code)");
        assert_eq!(text(&p, "New source").0, ["import os", "os.listdir()"]);
        let p = show(
            "NotebookEdit",
            json!({"notebook_path": "a.ipynb", "cell_id": "c3", "new_source": "", "edit_mode": "delete"}),
        );
        assert_eq!(field(&p, "Cell"), "delete cell c3");
    }

    #[test]
    fn anything_else_is_labelled_values_with_json_for_nested_ones() {
        let nested = json!({"deep": {"deeper": [1, 2, 3], "text": "x".repeat(100)}});
        let p = show(
            "SomeTool",
            json!({"count": 3, "flag": false, "name": "ok", "config": nested}),
        );
        assert_eq!(p.summary, "SomeTool");
        assert_eq!(field(&p, "count"), "3");
        assert_eq!(field(&p, "flag"), "false");
        let (lines, _) = text(&p, "config");
        assert_eq!(lines[0], "{");
        assert!(lines.len() > 3);
    }

    #[test]
    fn hostile_keys_and_tool_names_are_made_visible() {
        let p = show("Evil\x1b[31m", json!({"\x1b[2Jkey\n": "v"}));
        assert_no_controls(&p);
        assert_eq!(p.summary, "Evil\\u{1b}[31m");
        assert_eq!(field(&p, "\\u{1b}[2Jkey\\n"), "v");
        let zero_width = show(
            "Bash",
            json!({"command": "rm\u{200b} -rf\u{feff} /\u{e0041}"}),
        );
        assert_eq!(
            text(&zero_width, "Command").0,
            ["rm\\u{200b} -rf\\u{feff} /\\u{e0041}"]
        );
    }

    #[test]
    fn questions_have_a_summary_and_their_options() {
        let p = show(
            "AskUserQuestion",
            json!({"questions": [
                {"question": "Which database?", "header": "DB", "options": [{"label": "Postgres", "description": "the usual"}, {"label": "SQLite"}]},
                {"question": "Which extras?", "header": "Extras", "multiSelect": true, "options": [{"label": "Auth"}, {"label": "Docs"}]}]}),
        );
        assert_eq!(p.summary, "Ask: Which database? (and 1 more)");
        assert_eq!(
            text(&p, "DB").0,
            [
                "Which database?",
                "  1. Postgres — the usual",
                "  2. SQLite"
            ]
        );
    }

    #[test]
    fn task_and_plan_show_what_will_be_done() {
        let p = show(
            "Task",
            json!({"description": "Audit deps", "prompt": "Check\nCargo.lock", "subagent_type": "general-purpose"}),
        );
        assert_eq!(p.summary, "Start a subagent: Audit deps");
        assert_eq!(field(&p, "Agent"), "general-purpose");
        let p = show("ExitPlanMode", json!({"plan": "1. a\n2. b"}));
        assert_eq!(text(&p, "Plan").0, ["1. a", "2. b"]);
    }

    #[test]
    fn cut_notes_read_well() {
        assert_eq!(Cut::default().note(), None);
        assert_eq!(
            Cut {
                lines: 0,
                chars: 80
            }
            .note()
            .unwrap(),
            "80 more characters not shown"
        );
        assert_eq!(
            Cut {
                lines: 1,
                chars: 1234
            }
            .note()
            .unwrap(),
            "1 more line not shown (1,234 characters)"
        );
    }
}
