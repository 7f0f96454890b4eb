//! An ACP tool call as the rest of imrelay reads it ([`as_claude_code`]): Claude Code's
//! vocabulary where the call says exactly what it runs or changes, imrelay's `acp:<kind>`
//! otherwise.

use serde_json::{Map, Value};
use similar::{ChangeTag, TextDiff};

use super::wire::{Content, Location, ToolCall};
use crate::interaction::PATCH_TOOL;

/// The tool name of an ACP tool call that maps onto no tool of the vocabulary: `acp:` and its
/// kind (`acp:execute`, `acp:read`, ...; `acp:other` without one).
pub const GENERIC_PREFIX: &str = "acp:";

/// Unchanged lines kept around each change in a patch made from a diff.
const CONTEXT: usize = 3;

/// The tool name and input an ACP tool call is shown and matched as.
///
/// - Diffs (`{"type": "diff", "path", "oldText", "newText"}`) are [`PATCH_TOOL`] with a
///   `patch` in the `*** Begin Patch` format: a new file (no `oldText`) is added, any other
///   changed, so every surface shows a diff per file; the call's text blocks, if any, follow
///   as `content`.
/// - An `execute` call whose `rawInput` holds its `command` (a string, or an argument list
///   joined as a shell would read it) is Claude Code's `Bash` with that `command` (and the
///   `rawInput`'s `description`, if a string): the command itself, not the agent's title for
///   it.
/// - Anything else is `acp:<kind>` with what the call carries: `content` (its text blocks),
///   `files` (its `locations`, `path:line`), `terminal`, other blocks by type, and `rawInput`
///   as the agent sent it. The title is the interaction's own title, shown on every surface.
///
/// A path that holds a line break or another control character cannot be written into a
/// patch without changing what it says: such diffs are shown field by field instead.
pub fn as_claude_code(call: &ToolCall) -> (String, Map<String, Value>) {
    let content: Vec<Content> = call.content.iter().flatten().map(Content::read).collect();
    let texts: Vec<&str> = content
        .iter()
        .filter_map(|c| match c {
            Content::Text(t) => Some(t.as_str()),
            _ => None,
        })
        .collect();
    if let Some(patch) = as_patch(&content, &texts) {
        return patch;
    }
    if let Some(bash) = as_bash(call) {
        return bash;
    }
    as_generic(call, &content, &texts)
}

/// A call whose content holds diffs, every one on a path a patch can name: [`PATCH_TOOL`]
/// with its `patch` and its text as `content`.
fn as_patch(content: &[Content], texts: &[&str]) -> Option<(String, Map<String, Value>)> {
    let diffs: Vec<&Content> = content
        .iter()
        .filter(|c| matches!(c, Content::Diff { .. }))
        .collect();
    let clean = |p: &str| !p.is_empty() && !p.chars().any(char::is_control);
    if diffs.is_empty()
        || !diffs
            .iter()
            .all(|d| matches!(d, Content::Diff { path, .. } if clean(path)))
    {
        return None;
    }
    let mut input = Map::new();
    input.insert("patch".into(), Value::String(patch_of(&diffs)));
    if !texts.is_empty() {
        input.insert("content".into(), Value::String(texts.join("\n\n")));
    }
    Some((PATCH_TOOL.to_string(), input))
}

/// An `execute` call whose `rawInput` holds its command: `Bash` with that `command` and
/// the `rawInput`'s `description`.
fn as_bash(call: &ToolCall) -> Option<(String, Map<String, Value>)> {
    if call.kind.as_deref() != Some("execute") {
        return None;
    }
    let command = call.raw_input.as_ref().and_then(command_of)?;
    let mut input = Map::new();
    input.insert("command".into(), Value::String(command));
    if let Some(d) = call
        .raw_input
        .as_ref()
        .and_then(|r| r.get("description"))
        .and_then(Value::as_str)
    {
        input.insert("description".into(), Value::String(d.to_string()));
    }
    Some(("Bash".to_string(), input))
}

/// Any other call: `acp:<kind>` with its text, files, other content blocks and `rawInput`.
fn as_generic(
    call: &ToolCall,
    content: &[Content],
    texts: &[&str],
) -> (String, Map<String, Value>) {
    let kind = call
        .kind
        .as_deref()
        .filter(|k| {
            !k.is_empty() && k.len() <= 40 && k.bytes().all(|b| b.is_ascii_lowercase() || b == b'_')
        })
        .unwrap_or("other");
    let mut input = Map::new();
    if !texts.is_empty() {
        input.insert("content".into(), Value::String(texts.join("\n\n")));
    }
    let files: Vec<String> = call
        .locations
        .iter()
        .flatten()
        .filter_map(Location::read)
        .map(|l| l.shown())
        .collect();
    if !files.is_empty() {
        input.insert("files".into(), Value::String(files.join("\n")));
    }
    for (key, value) in content.iter().filter_map(other_block) {
        match input.get_mut(key) {
            Some(Value::Array(list)) => list.push(value),
            Some(_) => {}
            None => {
                input.insert(key.into(), Value::Array(vec![value]));
            }
        }
    }
    if let Some(raw) = &call.raw_input {
        input.insert("rawInput".into(), raw.clone());
    }
    (format!("{GENERIC_PREFIX}{kind}"), input)
}

/// A content block other than text, as the key of the list it joins in a generic call's
/// input and its entry there.
fn other_block(c: &Content) -> Option<(&'static str, Value)> {
    Some(match c {
        Content::Text(_) => return None,
        Content::Diff {
            path,
            old_text,
            new_text,
        } => {
            let mut d = Map::new();
            d.insert("path".into(), Value::String(path.clone()));
            d.insert(
                "oldText".into(),
                old_text.clone().map_or(Value::Null, Value::String),
            );
            d.insert("newText".into(), Value::String(new_text.clone()));
            ("diff", Value::Object(d))
        }
        Content::Terminal(id) => ("terminal", Value::String(id.clone())),
        Content::Block(kind) => ("block", Value::String(kind.clone())),
        Content::Unknown => ("unreadable content", Value::Bool(true)),
    })
}

/// A `rawInput`'s `command`: a string as it is, a list of strings joined and quoted as a
/// shell reads them.
fn command_of(raw: &Value) -> Option<String> {
    match raw.get("command")? {
        Value::String(s) if !s.trim().is_empty() => Some(s.clone()),
        Value::Array(parts) if !parts.is_empty() => {
            let words: Option<Vec<&str>> = parts.iter().map(Value::as_str).collect();
            shlex::try_join(words?).ok()
        }
        _ => None,
    }
}

/// `diffs` (all [`Content::Diff`]) as one patch in the `*** Begin Patch` format.
fn patch_of(diffs: &[&Content]) -> String {
    let mut out = String::from("*** Begin Patch\n");
    for d in diffs {
        let Content::Diff {
            path,
            old_text,
            new_text,
        } = d
        else {
            continue;
        };
        match old_text {
            None => {
                out.push_str(&format!("*** Add File: {path}\n"));
                for line in new_text.lines() {
                    out.push('+');
                    out.push_str(line);
                    out.push('\n');
                }
            }
            Some(old) => {
                out.push_str(&format!("*** Update File: {path}\n"));
                let diff = TextDiff::from_lines(old.as_str(), new_text.as_str());
                for group in diff.grouped_ops(CONTEXT) {
                    out.push_str("@@\n");
                    for op in group {
                        for change in diff.iter_changes(&op) {
                            out.push(match change.tag() {
                                ChangeTag::Equal => ' ',
                                ChangeTag::Delete => '-',
                                ChangeTag::Insert => '+',
                            });
                            let text = change.value();
                            out.push_str(text.strip_suffix('\n').unwrap_or(text));
                            out.push('\n');
                        }
                    }
                }
            }
        }
    }
    out.push_str("*** End Patch\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::interaction::patch::{FileChange, parse_patch};
    use serde_json::json;

    fn call(v: Value) -> ToolCall {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn gemini_clis_shell_call_is_shown_by_its_kind_with_its_explanation() {
        let c = call(
            json!({"toolCallId": "run_shell_command__1", "status": "pending",
            "title": "echo ok > acp-proof.txt",
            "content": [{"type": "content", "content": {"type": "text", "text": "[current working directory /p] (Write the proof)"}}],
            "locations": [], "kind": "execute"}),
        );
        let (tool, input) = as_claude_code(&c);
        assert_eq!(tool, "acp:execute");
        assert_eq!(
            Value::Object(input),
            json!({"content": "[current working directory /p] (Write the proof)"})
        );
    }

    #[test]
    fn a_command_in_raw_input_is_bash() {
        let c = call(
            json!({"toolCallId": "1", "kind": "execute", "title": "Run it",
            "rawInput": {"command": "cargo test", "description": "Run the tests"}}),
        );
        assert_eq!(
            as_claude_code(&c),
            (
                "Bash".into(),
                json!({"command": "cargo test", "description": "Run the tests"})
                    .as_object()
                    .cloned()
                    .unwrap()
            )
        );
        let argv = call(
            json!({"toolCallId": "1", "kind": "execute", "rawInput": {"command": ["bash", "-lc", "ls -la"]}}),
        );
        assert_eq!(as_claude_code(&argv).1["command"], "bash -lc 'ls -la'");
        // Not an execute call, or no command: the generic view, raw input and all.
        let read = call(
            json!({"toolCallId": "1", "kind": "read", "rawInput": {"command": "x"},
            "locations": [{"path": "/p/a.rs", "line": 4}, {"path": "/p/b.rs"}]}),
        );
        let (tool, input) = as_claude_code(&read);
        assert_eq!(tool, "acp:read");
        assert_eq!(input["files"], "/p/a.rs:4\n/p/b.rs");
        assert_eq!(input["rawInput"], json!({"command": "x"}));
    }

    #[test]
    fn diffs_are_a_patch_with_a_change_per_file() {
        let old = (1..=20).map(|n| format!("line {n}\n")).collect::<String>();
        let new = old.replace("line 10\n", "line ten\n");
        let c = call(
            json!({"toolCallId": "1", "kind": "edit", "title": "Edit two files",
            "content": [
                {"type": "diff", "path": "/p/new.txt", "oldText": null, "newText": "hello\nworld\n"},
                {"type": "diff", "path": "/p/a.txt", "oldText": old, "newText": new},
                {"type": "content", "content": {"type": "text", "text": "Because."}}]}),
        );
        let (tool, input) = as_claude_code(&c);
        assert_eq!(tool, PATCH_TOOL);
        assert_eq!(input["content"], "Because.");
        let text = input["patch"].as_str().unwrap();
        // Only the lines around the change are carried.
        assert!(!text.contains("line 1\n"), "{text}");
        let changes = parse_patch(text).unwrap();
        assert_eq!(
            changes[0],
            FileChange::Add {
                path: "/p/new.txt",
                content: "hello\nworld\n".into()
            }
        );
        match &changes[1] {
            FileChange::Update { path, old, new, .. } => {
                assert_eq!(*path, "/p/a.txt");
                assert!(old.contains("line 10\n") && new.contains("line ten\n"));
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_path_that_would_rewrite_the_patch_is_shown_field_by_field() {
        let c = call(json!({"toolCallId": "1", "kind": "edit", "content": [
            {"type": "diff", "path": "/p/a\n*** Delete File: /etc/passwd", "oldText": "a", "newText": "b"},
            {"type": "terminal", "terminalId": "t1"}]}));
        let (tool, input) = as_claude_code(&c);
        assert_eq!(tool, "acp:edit");
        assert_eq!(
            input["diff"][0]["path"],
            "/p/a\n*** Delete File: /etc/passwd"
        );
        assert_eq!(input["terminal"], json!(["t1"]));
        // A kind that is not one of ACP's words is not put in a tool name.
        let odd = call(json!({"toolCallId": "1", "kind": "Exec ute!"}));
        assert_eq!(as_claude_code(&odd).0, "acp:other");
    }
}
