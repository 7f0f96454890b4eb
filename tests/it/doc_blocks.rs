//! Every configuration block of the docs (each ```toml block of README.md and docs/*.md) is
//! run through the real binary's `check-config`, so that a block a person pastes is one the
//! binary accepts. A block that adds to another says so on its first line and is checked
//! together with it:
//!
//! - `# (with the block above ...)`: the page's previous block (as checked);
//! - `# (with the worked example of docs/teams.md ...)`: the block after "## A worked example"
//!   there.
//!
//! Entries of a list of tables (`[[routes]]`, `[[people]]`...) replace the other block's entry
//! of the same name, or are added; tables are merged key by key. A block of another program's
//! configuration (Codex's `~/.codex/config.toml`) says "not imrelay's" on its first line and
//! is left out.

use std::path::Path;
use std::process::Command;

/// The fenced blocks of `lang` in `doc`, with the line each starts on.
fn blocks<'a>(doc: &'a str, lang: &str) -> Vec<(usize, &'a str)> {
    let open = format!("```{lang}\n");
    let mut out = Vec::new();
    let mut from = 0;
    while let Some(at) = doc[from..].find(&open) {
        let start = from + at + open.len();
        let end = doc[start..].find("```").map_or(doc.len(), |e| start + e);
        out.push((doc[..start].lines().count(), &doc[start..end]));
        from = end + 3;
    }
    out
}

/// Merges `add` into `base`: tables key by key, named entries of lists of tables by name.
fn merge(base: &mut toml::Table, add: toml::Table) {
    for (k, v) in add {
        match (base.get_mut(&k), v) {
            (Some(toml::Value::Table(b)), toml::Value::Table(a)) => merge(b, a),
            (Some(toml::Value::Array(b)), toml::Value::Array(a))
                if a.iter().all(toml::Value::is_table) =>
            {
                for entry in a {
                    let name = entry.get("name").cloned();
                    match b
                        .iter()
                        .position(|e| name.is_some() && e.get("name") == name.as_ref())
                    {
                        Some(i) => b[i] = entry,
                        None => b.push(entry),
                    }
                }
            }
            (_, v) => {
                base.insert(k, v);
            }
        }
    }
}

/// Values the docs show as what a person must put in (a bot token from BotFather, a key the
/// platform shows), made into values of the right form.
fn filled(block: &str) -> String {
    block
        .replace("\"123456789:AAE...\"", "\"123456789:AAE_example-token\"")
        .replace("\"…43 characters…\"", &format!("\"{}\"", "a".repeat(43)))
}

/// `check-config` on `table`: `None` when it passes, else what it said.
fn check_config(dir: &Path, table: &toml::Table) -> Option<String> {
    std::fs::write(dir.join("c.toml"), toml::to_string(table).unwrap()).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_imrelay"))
        .current_dir(dir)
        .env_clear()
        .args(["--config", "c.toml", "check-config"])
        .output()
        .expect("imrelay runs");
    (!out.status.success()).then(|| String::from_utf8_lossy(&out.stderr).into_owned())
}

#[test]
fn every_configuration_block_in_the_docs_passes_check_config() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let teams = std::fs::read_to_string(root.join("docs/teams.md")).unwrap();
    let example = blocks(&teams[teams.find("## A worked example").unwrap()..], "toml")[0].1;
    let example: toml::Table = toml::from_str(example).unwrap();
    let mut pages: Vec<_> = std::fs::read_dir(root.join("docs"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect();
    pages.sort();
    pages.insert(0, root.join("README.md"));
    let dir = tempfile::tempdir().unwrap();
    let (mut checked, mut wrong) = (0, Vec::new());
    for page in &pages {
        let doc = std::fs::read_to_string(page).unwrap();
        let name = page.strip_prefix(root).unwrap().display().to_string();
        let mut above = toml::Table::new();
        for (line, block) in blocks(&doc, "toml") {
            let first = block.lines().next().unwrap_or_default();
            if first.contains("not imrelay's") {
                continue;
            }
            let own: toml::Table = match toml::from_str(&filled(block)) {
                Ok(t) => t,
                Err(e) => {
                    wrong.push(format!("{name}:{line}: not TOML: {e}"));
                    continue;
                }
            };
            let mut table = if first.contains("(with the block above") {
                above.clone()
            } else if first.contains("(with the worked example of docs/teams.md") {
                example.clone()
            } else {
                toml::Table::new()
            };
            merge(&mut table, own);
            checked += 1;
            if let Some(err) = check_config(dir.path(), &table) {
                wrong.push(format!("{name}:{line}: {err}"));
            }
            above = table;
        }
    }
    assert!(checked >= 20, "only {checked} blocks found");
    assert!(wrong.is_empty(), "\n{}", wrong.join("\n"));
}
