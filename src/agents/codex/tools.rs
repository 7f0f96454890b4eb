//! Codex's tool names and inputs onto the ones the rest of imrelay reads ([`as_claude_code`]).

use serde_json::{Map, Value};

use crate::interaction::PATCH_TOOL;

/// Codex's `tool_name` and `tool_input` in a hook's input, as the rest of imrelay reads them:
/// Claude Code's tool names and inputs (what `present`, `Kind::of_tool` and rules match),
/// and imrelay's own [`PATCH_TOOL`] for a patch.
///
/// - `Bash` (Codex's shell, `{"command", "description"?}`) is Claude Code's `Bash`, input and
///   all: the `description` is the model's justification, shown as "Why".
/// - `apply_patch` (`{"command": "*** Begin Patch ..."}`) is a patch: [`PATCH_TOOL`] with the
///   text as `patch`, shown file by file with a diff
///   ([`crate::interaction::patch::parse_patch`] gives the files it touches).
/// - `mcp__<server>__<tool>` is already Claude Code's name for an MCP tool; it and anything
///   else (`NetworkAccess`, ...) is kept as Codex wrote it.
pub fn as_claude_code(tool_name: &str, input: Map<String, Value>) -> (String, Map<String, Value>) {
    match tool_name {
        "apply_patch" => match input.get("command") {
            Some(Value::String(patch)) if input.len() == 1 => {
                let mut mapped = Map::new();
                mapped.insert("patch".into(), Value::String(patch.clone()));
                (PATCH_TOOL.to_string(), mapped)
            }
            // Not the shape Codex sends: shown as it is, field by field.
            _ => (tool_name.to_string(), input),
        },
        _ => (tool_name.to_string(), input),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn map(v: Value) -> Map<String, Value> {
        v.as_object().cloned().unwrap()
    }

    #[test]
    fn codex_tools_become_the_names_imrelay_reads() {
        let bash = map(json!({"command": "echo ok > proof.txt", "description": "May I?"}));
        assert_eq!(
            as_claude_code("Bash", bash.clone()),
            ("Bash".to_string(), bash)
        );
        let patch = "*** Begin Patch\n*** Add File: a\n+x\n*** End Patch\n";
        assert_eq!(
            as_claude_code("apply_patch", map(json!({"command": patch}))),
            (PATCH_TOOL.to_string(), map(json!({"patch": patch})))
        );
        let odd = map(json!({"command": 5}));
        assert_eq!(
            as_claude_code("apply_patch", odd.clone()),
            ("apply_patch".to_string(), odd)
        );
        let mcp = map(json!({"q": 1}));
        assert_eq!(
            as_claude_code("mcp__docs__search", mcp.clone()),
            ("mcp__docs__search".to_string(), mcp)
        );
    }
}
