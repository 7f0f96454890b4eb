//! Each tool's view of its input: which fields it shows and how, and why an input is not in
//! its tool's usual shape (then it is shown field by field).

use serde_json::{Map, Value};

use super::budget::Builder;
use super::text::{first_line, visible_line};
use crate::interaction::ASK_USER_QUESTION;

/// Why an input is not in its tool's usual shape; or the input fields the view used.
pub(super) type Shape = Result<Vec<&'static str>, String>;

/// Shows `input` the way `tool_name`'s view does, into `out`.
pub(super) fn view(out: &mut Builder, tool_name: &str, input: &Map<String, Value>) -> Shape {
    match tool_name {
        "Bash" => bash(out, input),
        "Edit" => edit(out, input),
        "MultiEdit" => multi_edit(out, input),
        "Write" => write(out, input),
        "Read" => read(out, input),
        "Glob" => glob(out, input),
        "Grep" => grep(out, input),
        "WebFetch" => web_fetch(out, input),
        "WebSearch" => web_search(out, input),
        "NotebookEdit" => notebook_edit(out, input),
        "Task" => task(out, input),
        "ExitPlanMode" => plan(out, input),
        ASK_USER_QUESTION => questions(out, input),
        crate::interaction::FORM_TOOL => form(out, input),
        crate::interaction::PATCH_TOOL => patch(out, input),
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
    }
}

/// `mcp__server__tool` split into its server and tool.
fn mcp_name(tool_name: &str) -> Option<(&str, &str)> {
    let rest = tool_name.strip_prefix("mcp__")?;
    let (server, tool) = rest.split_once("__")?;
    (!server.is_empty() && !tool.is_empty()).then_some((server, tool))
}

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
