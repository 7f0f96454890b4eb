//! The tests of [`present`](super::present): each tool's view, the budget, visible text.

use super::budget::SUMMARY_CHARS;
use super::text::is_hidden;
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
            super::render::thousands(cut.chars)
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
    let Some(Block::Diff { lines, .. }) = p.blocks.iter().find(|b| matches!(b, Block::Diff { .. }))
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
