//! Patches to files in the `*** Begin Patch` format (Codex's `apply_patch`): parsed into what
//! each does to each file, so that people see a diff per file and rules can match the paths.
//!
//! ```text
//! *** Begin Patch
//! *** Add File: hello.txt
//! +Hello
//! *** Update File: src/app.py
//! *** Move to: src/main.py
//! @@ def greet():
//! -print("Hi")
//! +print("Hello")
//! *** Delete File: old.txt
//! *** End Patch
//! ```

/// What a patch does to one file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FileChange<'a> {
    /// Creates `path` with `content`.
    Add {
        /// The file.
        path: &'a str,
        /// Its content.
        content: String,
    },
    /// Deletes `path`.
    Delete {
        /// The file.
        path: &'a str,
    },
    /// Changes `path` (and renames it to `move_to`): its hunks' old lines become the new
    /// ones, each joined with the hunks before it.
    Update {
        /// The file.
        path: &'a str,
        /// Its new name, if it is renamed.
        move_to: Option<&'a str>,
        /// The lines the hunks replace (context and removed lines), in order.
        old: String,
        /// What they become (context and added lines), in order.
        new: String,
    },
}

impl FileChange<'_> {
    /// The file changed (its old name when renamed).
    pub fn path(&self) -> &str {
        match self {
            FileChange::Add { path, .. }
            | FileChange::Delete { path }
            | FileChange::Update { path, .. } => path,
        }
    }
}

/// Parses `text`, or says why it is not a patch in this format.
pub fn parse_patch(text: &str) -> Result<Vec<FileChange<'_>>, String> {
    let mut lines = text.lines().map(|l| l.strip_suffix('\r').unwrap_or(l));
    match lines.by_ref().find(|l| !l.trim().is_empty()) {
        Some(l) if l.trim() == "*** Begin Patch" => {}
        _ => return Err("it does not start with `*** Begin Patch`".into()),
    }
    let mut changes: Vec<FileChange<'_>> = Vec::new();
    let mut ended = false;
    for line in lines {
        if ended {
            if line.trim().is_empty() {
                continue;
            }
            return Err("there is text after `*** End Patch`".into());
        }
        if line.trim() == "*** End Patch" {
            ended = true;
        } else if let Some(path) = line.strip_prefix("*** Add File: ") {
            changes.push(FileChange::Add {
                path: path.trim(),
                content: String::new(),
            });
        } else if let Some(path) = line.strip_prefix("*** Delete File: ") {
            changes.push(FileChange::Delete { path: path.trim() });
        } else if let Some(path) = line.strip_prefix("*** Update File: ") {
            changes.push(FileChange::Update {
                path: path.trim(),
                move_to: None,
                old: String::new(),
                new: String::new(),
            });
        } else if let Some(to) = line.strip_prefix("*** Move to: ") {
            match changes.last_mut() {
                Some(FileChange::Update { move_to, .. }) if move_to.is_none() => {
                    *move_to = Some(to.trim());
                }
                _ => return Err("`*** Move to:` does not follow `*** Update File:`".into()),
            }
        } else if line.trim() == "*** End of File" || line.starts_with("@@") {
            // A hunk's header or end: the lines say what changes.
        } else {
            body_line(changes.last_mut(), line)?;
        }
    }
    if !ended {
        return Err("it does not end with `*** End Patch`".into());
    }
    if changes.is_empty() {
        return Err("it changes no file".into());
    }
    Ok(changes)
}

/// Adds a line of a file's body to `change`, the file it follows: a line of an added file,
/// or a line of an updated file's hunk.
fn body_line(change: Option<&mut FileChange<'_>>, line: &str) -> Result<(), String> {
    match change {
        Some(FileChange::Add { content, .. }) => match line.strip_prefix('+') {
            Some(l) => {
                content.push_str(l);
                content.push('\n');
            }
            None => {
                return Err(format!(
                    "a line of an added file does not start with `+`: {line:?}"
                ));
            }
        },
        Some(FileChange::Update { old, new, .. }) => hunk_line(old, new, line)?,
        Some(FileChange::Delete { .. }) | None => {
            if !line.trim().is_empty() {
                return Err(format!("a line belongs to no file: {line:?}"));
            }
        }
    }
    Ok(())
}

/// Adds a hunk's line to the old lines (removed), the new ones (added), or both (context).
fn hunk_line(old: &mut String, new: &mut String, line: &str) -> Result<(), String> {
    let (to_old, to_new, l) = match line.split_at_checked(1) {
        Some(("+", l)) => (false, true, l),
        Some(("-", l)) => (true, false, l),
        Some((" ", l)) => (true, true, l),
        None => (true, true, ""),
        Some(_) => {
            return Err(format!(
                "a changed line does not start with `+`, `-` or a space: {line:?}"
            ));
        }
    };
    for (wanted, text) in [(to_old, old), (to_new, new)] {
        if wanted {
            text.push_str(l);
            text.push('\n');
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_of_change_is_read() {
        let text = "*** Begin Patch\n*** Add File: hello.txt\n+Hello\n+World\n*** Update File: src/app.py\n*** Move to: src/main.py\n@@ def greet():\n def greet():\n-    print(\"Hi\")\n+    print(\"Hello\")\n*** End of File\n*** Delete File: old.txt\n*** End Patch\n";
        let changes = parse_patch(text).unwrap();
        assert_eq!(
            changes,
            vec![
                FileChange::Add {
                    path: "hello.txt",
                    content: "Hello\nWorld\n".into()
                },
                FileChange::Update {
                    path: "src/app.py",
                    move_to: Some("src/main.py"),
                    old: "def greet():\n    print(\"Hi\")\n".into(),
                    new: "def greet():\n    print(\"Hello\")\n".into(),
                },
                FileChange::Delete { path: "old.txt" },
            ]
        );
        let paths: Vec<&str> = changes.iter().map(FileChange::path).collect();
        assert_eq!(paths, ["hello.txt", "src/app.py", "old.txt"]);
    }

    #[test]
    fn what_is_not_a_patch_says_why() {
        for (text, why) in [
            ("rm -rf /", "does not start"),
            ("*** Begin Patch\n*** Add File: a\n+x\n", "does not end"),
            ("*** Begin Patch\n*** End Patch\n", "changes no file"),
            (
                "*** Begin Patch\n*** Add File: a\nx\n*** End Patch",
                "does not start with `+`",
            ),
            (
                "*** Begin Patch\n*** Update File: a\n*x\n*** End Patch",
                "does not start with `+`, `-`",
            ),
            (
                "*** Begin Patch\nstray\n*** End Patch",
                "belongs to no file",
            ),
            ("*** Begin Patch\n*** Move to: b\n*** End Patch", "Move to"),
            (
                "*** Begin Patch\n*** Delete File: a\n*** End Patch\nmore",
                "after",
            ),
        ] {
            let e = parse_patch(text).unwrap_err();
            assert!(e.contains(why), "{text:?}: {e}");
        }
    }
}
