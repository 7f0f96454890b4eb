//! The map of `docs/architecture.md`, kept true: which part of `src/` may import which.
//!
//! Every `crate::` path in `src/` (in `use` items, in code, in macros and in attribute strings
//! such as `deserialize_with = "crate::settings::list"`), every `super::` path that climbs out of
//! its folder, every path through a child module, and every `imrelay::` path in `src/main.rs`
//! is read and checked against [`RULES`]: the one table of who may import whom. A path that
//! breaks a rule fails the test with the file, the line, the rule and what to do.
//!
//! The checker reads the source text (comments and string contents skipped), so this binary
//! needs nothing of the crate and builds in a moment. It is a reading of paths, not of name
//! resolution: a name brought in by a glob or a re-export counts where it is written.
//!
//! `docs/architecture.md` shows the same table ([`doc_table`]); a test keeps the two equal.
//!
//! To see every import the check reads, part to part:
//! `ARCHITECTURE_EDGES=1 cargo test --test architecture every_import -- --nocapture`.

use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// One part of the crate and the parts it may import.
///
/// A part is named by its module path (`interaction::ports`); `*` stands for any folder at that
/// place (`channels::*` is each channel's folder, while files such as `channels/pipeline.rs`
/// stay in `channels`). A module belongs to the most specific part that names it or an
/// ancestor; the crate root files are `lib` and `main`. A part may always import itself.
struct Rule {
    part: &'static str,
    /// The parts its code may import.
    may_import: &'static [&'static str],
    /// What its `#[cfg(test)]` code may import besides.
    tests_also: &'static [&'static str],
    /// Why, in a few words (shown in a failure and in the doc).
    role: &'static str,
}

/// Who may import whom. The order is the map's, bottom up. `docs/architecture.md` shows this
/// table; change both together (the `docs_show_the_rules` test prints the doc's rows).
const RULES: &[Rule] = &[
    Rule {
        part: "settings",
        may_import: &[],
        tests_also: &[],
        role: "leaf: settings primitives",
    },
    Rule {
        part: "sync",
        may_import: &[],
        tests_also: &[],
        role: "leaf: locks that survive a panic",
    },
    Rule {
        part: "tls",
        may_import: &[],
        tests_also: &[],
        role: "leaf: the TLS client settings of outgoing connections",
    },
    Rule {
        part: "interaction::ports",
        may_import: &["interaction", "settings", "sync"],
        tests_also: &[],
        role: "the core's ports: what it calls and others implement",
    },
    Rule {
        part: "interaction",
        may_import: &["interaction::ports", "settings", "sync"],
        tests_also: &["store"],
        role: "the core: no HTTP, channel, agent, configuration or particular store",
    },
    Rule {
        part: "audit",
        may_import: &["interaction::ports"],
        tests_also: &[],
        role: "the hash chain over the core's audit records",
    },
    Rule {
        part: "health",
        may_import: &["interaction", "settings", "sync"],
        tests_also: &[],
        role: "the states long-running parts report",
    },
    Rule {
        part: "metrics",
        may_import: &["interaction", "settings", "sync"],
        tests_also: &[],
        role: "Prometheus metrics of the core's lifecycle",
    },
    Rule {
        part: "store",
        may_import: &[
            "interaction",
            "interaction::ports",
            "audit",
            "settings",
            "sync",
        ],
        tests_also: &[],
        role: "the backends: implement the core's ports",
    },
    Rule {
        part: "outbox",
        may_import: &[
            "interaction",
            "store",
            "audit",
            "metrics",
            "settings",
            "sync",
        ],
        tests_also: &[],
        role: "the delivery worker and typed jobs",
    },
    Rule {
        part: "wire",
        may_import: &["interaction", "store", "settings", "sync"],
        tests_also: &[],
        role: "what every inbound endpoint shares",
    },
    Rule {
        part: "present",
        may_import: &["interaction"],
        tests_also: &[],
        role: "presentation: a tool call as a person reads it, visible text, locales, outcome phrases, times",
    },
    Rule {
        part: "channels",
        may_import: &[
            "interaction",
            "store",
            "outbox",
            "wire",
            "health",
            "metrics",
            "present",
            "tls",
            "channels::*",
            "settings",
            "sync",
        ],
        tests_also: &[],
        role: "the channel registry (`registry.rs`) and what channels share: pipeline, token, long connections",
    },
    Rule {
        part: "channels::*",
        may_import: &[
            "interaction",
            "store",
            "outbox",
            "wire",
            "health",
            "metrics",
            "channels",
            "present",
            "tls",
            "settings",
            "sync",
        ],
        tests_also: &[],
        role: "one channel's folder: never another channel, never the settings tree",
    },
    Rule {
        part: "agents",
        may_import: &[
            "interaction",
            "store",
            "wire",
            "health",
            "metrics",
            "present",
            "agents::*",
            "settings",
            "sync",
        ],
        tests_also: &[],
        role: "the list of agent adapters (`mod.rs`) and what they share",
    },
    Rule {
        part: "agents::*",
        may_import: &[
            "interaction",
            "store",
            "wire",
            "health",
            "metrics",
            "agents",
            "present",
            "settings",
            "sync",
        ],
        tests_also: &[],
        role: "one agent adapter's folder: never another adapter, a channel or the settings tree",
    },
    Rule {
        part: "mcp",
        may_import: &["interaction", "wire", "metrics", "settings", "sync"],
        tests_also: &[],
        role: "the MCP server over the core",
    },
    Rule {
        part: "config",
        may_import: &[
            "interaction",
            "store",
            "outbox",
            "channels",
            "channels::*",
            "present",
            "agents",
            "agents::*",
            "mcp",
            "settings",
            "sync",
        ],
        tests_also: &[],
        role: "the settings tree: assembles each part's own settings type",
    },
    Rule {
        part: "http",
        may_import: &[
            "interaction",
            "store",
            "wire",
            "health",
            "metrics",
            "present",
            "config",
            "settings",
            "sync",
        ],
        tests_also: &[],
        role: "the agent API, auth, events, the inbox, the server loop",
    },
    Rule {
        part: "telemetry",
        may_import: &["interaction", "config", "settings", "sync"],
        tests_also: &["store", "channels::*"],
        role: "logging set-up and escaping for logs and terminals",
    },
    Rule {
        part: "cli",
        may_import: &[
            "interaction",
            "store",
            "audit",
            "wire",
            "metrics",
            "channels",
            "present",
            "tls",
            "mcp",
            "agents",
            "agents::*",
            "config",
            "telemetry",
            "app",
            "settings",
            "sync",
        ],
        tests_also: &[],
        role: "the command-line clients and tools",
    },
    Rule {
        part: "app",
        may_import: &[
            "interaction",
            "store",
            "audit",
            "outbox",
            "wire",
            "health",
            "metrics",
            "channels",
            "channels::*",
            "agents",
            "agents::*",
            "http",
            "mcp",
            "config",
            "telemetry",
            "settings",
            "sync",
        ],
        tests_also: &[],
        role: "wiring: the one place that names every part",
    },
    Rule {
        part: "main",
        may_import: &["lib", "app", "cli", "config", "http", "telemetry"],
        tests_also: &[],
        role: "the binary: thin",
    },
    Rule {
        part: "lib",
        may_import: &[],
        tests_also: &[],
        role: "the crate root: declares the parts",
    },
];

/// Imports that break a rule today, each on purpose and with the reason; the file is given
/// from `src/`. Remove a line when its import goes; a line that matches nothing fails.
const EXCEPTIONS: &[(&str, &str, &str)] = &[(
    "channels/telegram/settings.rs",
    "config",
    "a test checks the compiled-in defaults through the settings tree",
)];

#[test]
fn every_import_in_src_keeps_the_rules() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let report = check(&root, RULES, EXCEPTIONS);
    assert!(
        report.files > 50,
        "read only {} files under {}",
        report.files,
        root.display()
    );
    assert!(report.is_clean(), "{report}");
}

/// The doc's import table, as `docs/architecture.md` must show it.
fn doc_table() -> String {
    let mut out = String::from("| Part | May import | Its tests may also import | Role |\n");
    out.push_str("| --- | --- | --- | --- |\n");
    let names = |list: &[&str]| {
        if list.is_empty() {
            "—".to_string()
        } else {
            list.iter()
                .map(|p| format!("`{p}`"))
                .collect::<Vec<_>>()
                .join(", ")
        }
    };
    for r in RULES {
        let _ = writeln!(
            out,
            "| `{}` | {} | {} | {} |",
            r.part,
            names(r.may_import),
            names(r.tests_also),
            r.role
        );
    }
    out
}

#[test]
fn docs_show_the_rules() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/architecture.md");
    let doc = std::fs::read_to_string(&path).expect("docs/architecture.md");
    let table = doc_table();
    assert!(
        doc.contains(&table),
        "docs/architecture.md does not show the import rules of tests/architecture.rs \
         (RULES). Put this table under \"Import rules\":\n\n{table}"
    );
    for (file, part, _) in EXCEPTIONS {
        assert!(
            doc.contains(&format!("`{file}`")),
            "docs/architecture.md does not name the exception for `{file}` (importing \
             `{part}`): list it under \"Import rules\""
        );
    }
}

/// Every text file of the project, outside the build's own folders.
fn project_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let path = e.path();
        let name = e.file_name().to_string_lossy().into_owned();
        if name.starts_with('.') && name != ".ci" || name == "target" || name == "node_modules" {
            continue;
        }
        if path.is_dir() {
            project_files(&path, out);
        } else {
            out.push(path);
        }
    }
}

#[test]
fn no_file_keeps_a_merges_conflict_markers() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    project_files(root, &mut files);
    let mut found = Vec::new();
    for f in &files {
        let Ok(text) = std::fs::read_to_string(f) else {
            continue; // not text
        };
        for (n, line) in text.lines().enumerate() {
            if line.starts_with("<<<<<<< ") || line.starts_with(">>>>>>> ") {
                found.push(format!(
                    "{}:{}",
                    f.strip_prefix(root).unwrap_or(f).display(),
                    n + 1
                ));
            }
        }
    }
    assert!(
        files.len() > 100,
        "the project's files were found: {}",
        files.len()
    );
    assert!(
        found.is_empty(),
        "a merge's conflict markers left in: {found:?}"
    );
}

/// Every top-level module of `src/` is on the map.
#[test]
fn docs_name_every_top_level_module() {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    let doc = std::fs::read_to_string(manifest.join("docs/architecture.md")).expect("doc");
    let mut missing = Vec::new();
    for entry in std::fs::read_dir(manifest.join("src")).expect("src") {
        let entry = entry.expect("entry");
        let name = entry.file_name().to_string_lossy().into_owned();
        let shown = if entry.path().is_dir() {
            format!("src/{name}/")
        } else if name.ends_with(".rs") {
            format!("src/{name}")
        } else {
            continue;
        };
        if !doc.contains(&format!("`{shown}`")) && !doc.contains(&format!("{shown}`")) {
            missing.push(shown);
        }
    }
    missing.sort();
    assert!(
        missing.is_empty(),
        "docs/architecture.md does not name {missing:?}: add each to \"What each folder owns\" \
         and to the map"
    );
    for r in RULES {
        let top = r.part.split("::").next().unwrap_or(r.part);
        let known = manifest.join(format!("src/{top}.rs")).exists()
            || manifest.join(format!("src/{top}")).is_dir()
            || matches!(top, "lib" | "main")
            || top == "agents";
        assert!(
            known,
            "RULES in tests/architecture.rs names `{}`, which is no module of src/: remove \
             or rename its row",
            r.part
        );
    }
}

// ---------------------------------------------------------------------------------------------
// The checker.

/// A path one file uses, as read.
#[derive(Debug, Clone)]
struct Use {
    line: usize,
    /// The path from the crate root (after `crate::`, `imrelay::` or a resolved `super::`).
    path: Vec<String>,
    /// Inside `#[cfg(test)]` code (or a file only declared under it).
    test: bool,
}

#[derive(Debug)]
struct Breach {
    file: String,
    line: usize,
    path: String,
    from: String,
    to: String,
    test: bool,
    /// The rule broken: what `from` may import, and its role.
    allowed: String,
    role: &'static str,
}

#[derive(Debug, Default)]
struct Report {
    files: usize,
    breaches: Vec<Breach>,
    /// Modules no rule covers.
    uncovered: BTreeSet<String>,
    /// Exceptions no import needs any more.
    stale: Vec<String>,
}

impl Report {
    fn is_clean(&self) -> bool {
        self.breaches.is_empty() && self.uncovered.is_empty() && self.stale.is_empty()
    }
}

impl std::fmt::Display for Report {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(
            f,
            "the import rules of docs/architecture.md (RULES in tests/architecture.rs) are broken:"
        )?;
        // One paragraph per broken rule: its lines, the rule, what to do.
        let mut groups: Vec<(&str, &str, bool, Vec<&Breach>)> = Vec::new();
        for b in &self.breaches {
            match groups
                .iter_mut()
                .find(|g| g.0 == b.from && g.1 == b.to && g.2 == b.test)
            {
                Some(g) => g.3.push(b),
                None => groups.push((&b.from, &b.to, b.test, vec![b])),
            }
        }
        for (from, to, test, list) in groups {
            writeln!(f)?;
            for b in &list {
                writeln!(
                    f,
                    "  src/{}:{}: `{}` is in `{to}`, which `{from}` may not import{}",
                    b.file,
                    b.line,
                    b.path,
                    if test { " (not even in its tests)" } else { "" }
                )?;
            }
            let first = list[0];
            writeln!(
                f,
                "    rule: `{from}` ({}) may import only {}",
                first.role,
                if first.allowed.is_empty() {
                    "itself"
                } else {
                    &first.allowed
                }
            )?;
            writeln!(
                f,
                "    to do: move the code to the part it belongs to, or have `{from}` be handed \
                 what it needs (a port of the core, its own settings section, a parameter). \
                 If the map itself is wrong, change RULES and docs/architecture.md together; \
                 a deliberate exception goes in EXCEPTIONS with its reason."
            )?;
        }
        for m in &self.uncovered {
            writeln!(
                f,
                "\n  module `{m}` is covered by no row of RULES: add one (what it may import) \
                 and put it on the map in docs/architecture.md"
            )?;
        }
        for s in &self.stale {
            writeln!(
                f,
                "\n  exception {s} matches no import any more: remove it from EXCEPTIONS and \
                 from docs/architecture.md"
            )?;
        }
        Ok(())
    }
}

/// Reads every `.rs` file under `root` (a crate's `src/`) and checks its paths against `rules`.
fn check(root: &Path, rules: &[Rule], exceptions: &[(&str, &str, &str)]) -> Report {
    let mut files = Vec::new();
    collect(root, &mut files);
    files.sort();
    let mut report = Report {
        files: files.len(),
        ..Report::default()
    };
    let mut used = vec![false; exceptions.len()];
    let mut read = Vec::new();
    let mut test_modules = BTreeSet::new();
    for file in &files {
        let rel = file
            .strip_prefix(root)
            .expect("under root")
            .to_string_lossy()
            .replace('\\', "/");
        let text = std::fs::read_to_string(file).unwrap_or_else(|e| panic!("{rel}: {e}"));
        let module = module_of(&rel);
        let scan = scan(root, &module, &text, rel == "main.rs");
        for child in &scan.test_children {
            let mut m = module.clone();
            m.push(child.clone());
            test_modules.insert(m);
        }
        read.push((rel, module, scan.uses));
    }
    for (rel, module, uses) in read {
        let (from, own) = match part_of(root, rules, &module) {
            Some((p, len)) => (p, module[..len].to_vec()),
            None => {
                report.uncovered.insert(module.join("::"));
                continue;
            }
        };
        let file_is_test = test_modules.iter().any(|t| module.starts_with(t));
        let rule = rules
            .iter()
            .find(|r| r.part == from)
            .expect("part has a rule");
        for u in uses {
            let target = resolve(root, &u.path);
            let Some((to, len)) = part_of(root, rules, &target) else {
                report.uncovered.insert(target.join("::"));
                continue;
            };
            let test = u.test || file_is_test;
            if std::env::var_os("ARCHITECTURE_EDGES").is_some() {
                eprintln!(
                    "{from} -> {to}  src/{rel}:{}  {}",
                    u.line,
                    u.path.join("::")
                );
            }
            if (to == from && target[..len] == own[..])
                || rule.may_import.contains(&to.as_str())
                || (test && rule.tests_also.contains(&to.as_str()))
            {
                continue;
            }
            if let Some(i) = exceptions
                .iter()
                .position(|(file, part, _)| *file == rel && *part == to)
            {
                used[i] = true;
                continue;
            }
            report.breaches.push(Breach {
                file: rel.clone(),
                line: u.line,
                path: format!("crate::{}", u.path.join("::")),
                from: from.clone(),
                to,
                test,
                allowed: rule.may_import.join(", "),
                role: rule.role,
            });
        }
    }
    for (i, (file, part, _)) in exceptions.iter().enumerate() {
        if !used[i] {
            report.stale.push(format!("(src/{file} → `{part}`)"));
        }
    }
    report
}

fn collect(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
        let path = entry.expect("directory entry").path();
        if path.is_dir() {
            collect(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The module path of a file given from `src/`: `channels/telegram/mod.rs` is
/// `channels::telegram`; the crate roots are `lib` and `main`.
fn module_of(rel: &str) -> Vec<String> {
    match rel {
        "lib.rs" => return vec!["lib".into()],
        "main.rs" => return vec!["main".into()],
        _ => {}
    }
    let mut parts: Vec<String> = rel.split('/').map(str::to_string).collect();
    let last = parts.pop().expect("a file name");
    if last != "mod.rs" {
        parts.push(last.trim_end_matches(".rs").to_string());
    }
    parts
}

/// The directory holding a module's children.
fn dir_of(root: &Path, module: &[String]) -> PathBuf {
    let mut d = root.to_path_buf();
    for m in module {
        d.push(m);
    }
    d
}

fn is_module(root: &Path, parent: &[String], name: &str) -> bool {
    let d = dir_of(root, parent);
    d.join(format!("{name}.rs")).is_file() || d.join(name).join("mod.rs").is_file()
}

fn is_folder(root: &Path, module: &[String]) -> bool {
    dir_of(root, module).is_dir()
}

/// The module a path names: its longest prefix that is a module file.
fn resolve(root: &Path, path: &[String]) -> Vec<String> {
    let mut module = Vec::new();
    for seg in path {
        if is_module(root, &module, seg) {
            module.push(seg.clone());
        } else {
            break;
        }
    }
    if module.is_empty() {
        // An item of the crate root (`crate::VERSION`).
        module.push("lib".into());
    }
    module
}

/// The most specific rule's part for a module, and how many of the module's segments it
/// names (`channels::telegram::state` is in `channels::*`, as `channels::telegram`): a literal
/// segment beats `*`, which matches only a folder.
fn part_of(root: &Path, rules: &[Rule], module: &[String]) -> Option<(String, usize)> {
    let mut best: Option<(usize, usize, String)> = None;
    for r in rules {
        let pattern: Vec<&str> = r.part.split("::").collect();
        if pattern.len() > module.len() {
            continue;
        }
        let mut literal = 0;
        let mut fits = true;
        for (i, p) in pattern.iter().enumerate() {
            if *p == "*" {
                if !is_folder(root, &module[..=i]) {
                    fits = false;
                    break;
                }
            } else if *p == module[i] {
                literal += 1;
            } else {
                fits = false;
                break;
            }
        }
        if !fits {
            continue;
        }
        let key = (pattern.len(), literal);
        if best.as_ref().is_none_or(|b| (b.0, b.1) < key) {
            best = Some((key.0, key.1, r.part.to_string()));
        }
    }
    best.map(|b| (b.2, b.0))
}

// ---------------------------------------------------------------------------------------------
// Reading Rust source: a small lexer (comments and string contents skipped) and a path reader.

#[derive(Debug, Clone, PartialEq)]
enum Tok {
    Ident(String),
    /// `::`
    Colons,
    Punct(char),
    /// A string literal whose whole content is a `crate::` path.
    PathString(String),
    /// Any other literal.
    Literal,
}

fn lex(text: &str) -> Vec<(Tok, usize)> {
    let c: Vec<char> = text.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    let mut line = 1;
    let n = c.len();
    // Advances over `count` characters, counting lines.
    let step = |i: &mut usize, line: &mut usize, count: usize| {
        for _ in 0..count {
            if *i < n && c[*i] == '\n' {
                *line += 1;
            }
            *i += 1;
        }
    };
    while i < n {
        let ch = c[i];
        if ch.is_whitespace() {
            step(&mut i, &mut line, 1);
        } else if ch == '/' && c.get(i + 1) == Some(&'/') {
            while i < n && c[i] != '\n' {
                i += 1;
            }
        } else if ch == '/' && c.get(i + 1) == Some(&'*') {
            let mut depth = 0;
            while i < n {
                if c[i] == '/' && c.get(i + 1) == Some(&'*') {
                    depth += 1;
                    step(&mut i, &mut line, 2);
                } else if c[i] == '*' && c.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    step(&mut i, &mut line, 2);
                    if depth == 0 {
                        break;
                    }
                } else {
                    step(&mut i, &mut line, 1);
                }
            }
        } else if let Some(skip) = raw_string_start(&c, i) {
            // r"..", r#".."#, br#".."#, cr".."
            let start_line = line;
            let hashes = c[i..i + skip].iter().filter(|&&x| x == '#').count();
            step(&mut i, &mut line, skip);
            let begin = i;
            loop {
                if i >= n {
                    break;
                }
                if c[i] == '"' && (1..=hashes).all(|k| c.get(i + k) == Some(&'#')) {
                    let content: String = c[begin..i].iter().collect();
                    step(&mut i, &mut line, 1 + hashes);
                    out.push((string_token(&content), start_line));
                    break;
                }
                step(&mut i, &mut line, 1);
            }
        } else if ch == '"' || ((ch == 'b' || ch == 'c') && c.get(i + 1) == Some(&'"')) {
            let start_line = line;
            step(&mut i, &mut line, if ch == '"' { 1 } else { 2 });
            let begin = i;
            while i < n && c[i] != '"' {
                let len = if c[i] == '\\' { 2 } else { 1 };
                step(&mut i, &mut line, len);
            }
            let content: String = c[begin..i.min(n)].iter().collect();
            step(&mut i, &mut line, 1);
            out.push((string_token(&content), start_line));
        } else if ch == '\'' || (ch == 'b' && c.get(i + 1) == Some(&'\'')) {
            let q = if ch == 'b' { i + 1 } else { i };
            if c.get(q + 1) == Some(&'\\') {
                // An escaped character literal: up to the closing quote.
                let mut j = q + 2;
                while j < n && c[j] != '\'' {
                    j += 1;
                }
                let len = j + 1 - i;
                step(&mut i, &mut line, len);
                out.push((Tok::Literal, line));
            } else if c.get(q + 2) == Some(&'\'') {
                let len = q + 3 - i;
                step(&mut i, &mut line, len);
                out.push((Tok::Literal, line));
            } else {
                // A lifetime or a label: the quote alone.
                step(&mut i, &mut line, 1);
            }
        } else if ch.is_alphanumeric() || ch == '_' {
            let begin = i;
            while i < n && (c[i].is_alphanumeric() || c[i] == '_') {
                i += 1;
            }
            let word: String = c[begin..i].iter().collect();
            let word = word.strip_prefix("r#").unwrap_or(&word).to_string();
            out.push((Tok::Ident(word), line));
        } else if ch == ':' && c.get(i + 1) == Some(&':') {
            out.push((Tok::Colons, line));
            i += 2;
        } else {
            out.push((Tok::Punct(ch), line));
            i += 1;
        }
    }
    out
}

/// How many characters open a raw string at `i` (`r"`, `r#"`, `br##"`, `cr"`), if one does.
fn raw_string_start(c: &[char], i: usize) -> Option<usize> {
    let mut j = i;
    if matches!(c.get(j), Some('b') | Some('c')) {
        j += 1;
    }
    if c.get(j) != Some(&'r') {
        return None;
    }
    if i > 0 && (c[i - 1].is_alphanumeric() || c[i - 1] == '_') {
        return None;
    }
    j += 1;
    while c.get(j) == Some(&'#') {
        j += 1;
    }
    (c.get(j) == Some(&'"')).then_some(j + 1 - i)
}

fn string_token(content: &str) -> Tok {
    let path = content.trim().trim_start_matches('$');
    let is_path = path.starts_with("crate::")
        && path
            .split("::")
            .all(|s| !s.is_empty() && s.chars().all(|c| c.is_alphanumeric() || c == '_'));
    if is_path {
        Tok::PathString(path.to_string())
    } else {
        Tok::Literal
    }
}

/// What one file uses.
struct Scan {
    uses: Vec<Use>,
    /// Child modules declared under `#[cfg(test)]` (`#[cfg(test)] mod tests;`).
    test_children: Vec<String>,
}

/// Reads the paths of one file whose module is `module`. In `main.rs` (`is_main`), `imrelay::`
/// is the library's root.
fn scan(root: &Path, module: &[String], text: &str, is_main: bool) -> Scan {
    let toks = lex(text);
    let test = test_regions(&toks);
    let mut uses = Vec::new();
    let mut test_children = Vec::new();
    // Inline modules (`mod tests { .. }`) around the current token: (name, depth inside).
    let mut inline: Vec<(String, usize)> = Vec::new();
    let mut depth = 0usize;
    let ident = |k: usize| match toks.get(k) {
        Some((Tok::Ident(s), _)) => Some(s.as_str()),
        _ => None,
    };
    let file_test = toks.len() >= 7
        && toks[0].0 == Tok::Punct('#')
        && toks[1].0 == Tok::Punct('!')
        && is_cfg_test(&toks, 2);
    let mut i = 0;
    while i < toks.len() {
        let (tok, line) = &toks[i];
        let in_test = file_test || test[i];
        match tok {
            Tok::Punct('{') => depth += 1,
            Tok::Punct('}') => {
                depth = depth.saturating_sub(1);
                if inline.last().is_some_and(|(_, d)| *d > depth) {
                    inline.pop();
                }
            }
            Tok::Ident(w) if w == "mod" => {
                if let (Some(name), Some((next, _))) = (ident(i + 1), toks.get(i + 2)) {
                    match next {
                        Tok::Punct('{') => {
                            inline.push((name.to_string(), depth + 1));
                        }
                        Tok::Punct(';') if in_test && inline.is_empty() => {
                            test_children.push(name.to_string());
                        }
                        _ => {}
                    }
                }
            }
            Tok::PathString(p) => {
                let path: Vec<String> = p.split("::").skip(1).map(str::to_string).collect();
                uses.push(Use {
                    line: *line,
                    path,
                    test: in_test,
                });
            }
            _ => {}
        }
        let starts_path = !matches!(i.checked_sub(1).map(|k| &toks[k].0), Some(Tok::Colons))
            && toks.get(i + 1).is_some_and(|t| t.0 == Tok::Colons);
        if starts_path && let Tok::Ident(w) = tok {
            // The module the path starts from, and where its tree begins.
            let here: Vec<String> = module
                .iter()
                .cloned()
                .chain(inline.iter().map(|(n, _)| n.clone()))
                .collect();
            let base: Option<(Vec<String>, usize)> = match w.as_str() {
                "crate" if !is_main => Some((Vec::new(), i + 2)),
                "imrelay" if is_main => Some((Vec::new(), i + 2)),
                "self" => Some((here.clone(), i + 2)),
                "super" if !is_main => {
                    let mut up = here.clone();
                    let mut k = i;
                    while ident(k) == Some("super")
                        && toks.get(k + 1).is_some_and(|t| t.0 == Tok::Colons)
                    {
                        up.pop();
                        k += 2;
                    }
                    Some((up, k))
                }
                // A child module of this file's module, named without `self::`.
                name if !is_main && inline.is_empty() && is_module(root, module, name) => {
                    Some((module.to_vec(), i))
                }
                _ => None,
            };
            if let Some((base, start)) = base {
                let mut paths = Vec::new();
                let end = read_tree(&toks, start, &mut Vec::new(), &mut paths);
                for p in paths {
                    let full: Vec<String> = base.iter().cloned().chain(p).collect();
                    // A path within the file's own module tree says nothing about layers.
                    if full.is_empty() {
                        continue;
                    }
                    uses.push(Use {
                        line: *line,
                        path: full,
                        test: in_test,
                    });
                }
                // Skip what was read, keeping the brace count of a use group out of `depth`.
                i = end.max(i + 1);
                continue;
            }
        }
        i += 1;
    }
    Scan {
        uses,
        test_children,
    }
}

/// Reads a path or use tree from token `k` (after `crate::`): `a::b`, `a::{b, c::d}`,
/// `a::{self, b}`, `a::*`, `a as b`. Stops before generics or anything else. Returns where it
/// stopped.
fn read_tree(
    toks: &[(Tok, usize)],
    mut k: usize,
    prefix: &mut Vec<String>,
    out: &mut Vec<Vec<String>>,
) -> usize {
    let depth = prefix.len();
    loop {
        match toks.get(k).map(|t| &t.0) {
            Some(Tok::Ident(s)) if s == "self" => {
                k += 1;
                break;
            }
            Some(Tok::Ident(s)) => {
                prefix.push(s.clone());
                k += 1;
                if toks.get(k).is_some_and(|t| t.0 == Tok::Colons) {
                    k += 1;
                    continue;
                }
                break;
            }
            Some(Tok::Punct('{')) => {
                k += 1;
                loop {
                    match toks.get(k).map(|t| &t.0) {
                        Some(Tok::Punct('}')) | None => {
                            k += 1;
                            break;
                        }
                        Some(Tok::Punct(',')) => k += 1,
                        _ => {
                            let before = k;
                            k = read_tree(toks, k, prefix, out);
                            // Skip `as name` and anything else up to the next item.
                            while let Some(t) = toks.get(k).map(|t| &t.0) {
                                if matches!(t, Tok::Punct(',') | Tok::Punct('}')) {
                                    break;
                                }
                                k += 1;
                            }
                            if k == before {
                                k += 1;
                            }
                        }
                    }
                }
                prefix.truncate(depth);
                return k;
            }
            // `*` or the end of the path.
            _ => break,
        }
    }
    out.push(prefix.clone());
    prefix.truncate(depth);
    k
}

/// Whether tokens from `k` are `[cfg(test)]`.
fn is_cfg_test(toks: &[(Tok, usize)], k: usize) -> bool {
    let want = [
        Tok::Punct('['),
        Tok::Ident("cfg".into()),
        Tok::Punct('('),
        Tok::Ident("test".into()),
        Tok::Punct(')'),
        Tok::Punct(']'),
    ];
    toks.len() >= k + want.len() && toks[k..k + want.len()].iter().map(|t| &t.0).eq(want.iter())
}

/// Which tokens lie in an item under `#[cfg(test)]`: from the attribute to the item's `;` or
/// its closing brace.
fn test_regions(toks: &[(Tok, usize)]) -> Vec<bool> {
    let mut test = vec![false; toks.len()];
    let mut i = 0;
    while i < toks.len() {
        if toks[i].0 == Tok::Punct('#') && is_cfg_test(toks, i + 1) {
            let mut depth = 0i64;
            let mut k = i + 7;
            while k < toks.len() {
                match toks[k].0 {
                    Tok::Punct('{') | Tok::Punct('(') | Tok::Punct('[') => depth += 1,
                    Tok::Punct('}') | Tok::Punct(')') | Tok::Punct(']') => {
                        depth -= 1;
                        if depth == 0 && toks[k].0 == Tok::Punct('}') {
                            break;
                        }
                    }
                    Tok::Punct(';') if depth == 0 => break,
                    _ => {}
                }
                k += 1;
            }
            let end = k.min(toks.len() - 1);
            for t in &mut test[i..=end] {
                *t = true;
            }
            // Nested `#[cfg(test)]` inside is covered already.
            i = end + 1;
        } else {
            i += 1;
        }
    }
    test
}

// ---------------------------------------------------------------------------------------------
// The checker's own tests, on small trees written to a temporary directory.

fn tree(files: &[(&str, &str)]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("temp dir");
    for (path, text) in files {
        let p = dir.path().join(path);
        std::fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
        std::fs::write(p, text).expect("write");
    }
    dir
}

const FAKE_RULES: &[Rule] = &[
    Rule {
        part: "lib",
        may_import: &[],
        tests_also: &[],
        role: "root",
    },
    Rule {
        part: "core",
        may_import: &["leaf"],
        tests_also: &["store"],
        role: "the core",
    },
    Rule {
        part: "leaf",
        may_import: &[],
        tests_also: &[],
        role: "leaf",
    },
    Rule {
        part: "store",
        may_import: &["core"],
        tests_also: &[],
        role: "store",
    },
    Rule {
        part: "channels",
        may_import: &["core"],
        tests_also: &[],
        role: "shared",
    },
    Rule {
        part: "channels::*",
        may_import: &["core", "channels"],
        tests_also: &[],
        role: "one channel",
    },
    Rule {
        part: "http",
        may_import: &["core", "store", "channels"],
        tests_also: &[],
        role: "top",
    },
];

fn fake_check(files: &[(&str, &str)]) -> Report {
    let dir = tree(files);
    check(dir.path(), FAKE_RULES, &[])
}

fn breached(r: &Report) -> Vec<(String, usize, String)> {
    r.breaches
        .iter()
        .map(|b| (b.file.clone(), b.line, b.to.clone()))
        .collect()
}

const BASE: &[(&str, &str)] = &[
    (
        "lib.rs",
        "pub mod core; pub mod leaf; pub mod store; pub mod channels; pub mod http;\n",
    ),
    ("core/mod.rs", "mod model;\nuse crate::leaf::Lock;\n"),
    ("core/model.rs", "pub struct Interaction;\n"),
    ("leaf.rs", "pub struct Lock;\n"),
    ("store/mod.rs", "use crate::core::Interaction;\n"),
    (
        "channels/mod.rs",
        "pub mod pipeline; pub mod tg; pub mod fs;\n",
    ),
    ("channels/pipeline.rs", "use super::super::core::model;\n"),
    ("channels/tg/mod.rs", "use crate::channels::pipeline;\n"),
    ("channels/fs/mod.rs", "mod api;\n"),
    ("channels/fs/api.rs", "pub fn tls() {}\n"),
    (
        "http/mod.rs",
        "use crate::{core, store::Store, channels::{self, pipeline}};\n",
    ),
];

fn with(extra: &[(&'static str, &'static str)]) -> Vec<(&'static str, &'static str)> {
    let mut files: Vec<_> = BASE
        .iter()
        .filter(|(p, _)| !extra.iter().any(|(q, _)| q == p))
        .copied()
        .collect();
    files.extend_from_slice(extra);
    files
}

#[test]
fn a_clean_tree_passes() {
    let r = fake_check(BASE);
    assert_eq!(r.files, BASE.len());
    assert!(r.is_clean(), "{r}");
}

#[test]
fn the_core_importing_a_channel_fails_with_file_line_rule_and_fix() {
    let r = fake_check(&with(&[(
        "core/model.rs",
        "pub struct Interaction;\n\nfn show() {\n    crate::channels::tg::send();\n}\n",
    )]));
    assert_eq!(
        breached(&r),
        [("core/model.rs".to_string(), 4, "channels::*".to_string())]
    );
    let text = r.to_string();
    assert!(
        text.contains("src/core/model.rs:4: `crate::channels::tg::send` is in `channels::*`, which `core` may not import"),
        "{text}"
    );
    assert!(
        text.contains("rule: `core` (the core) may import only leaf"),
        "{text}"
    );
    assert!(text.contains("to do:"), "{text}");
}

#[test]
fn use_groups_multi_line_are_each_checked() {
    let r = fake_check(&with(&[(
        "core/mod.rs",
        "mod model;\nuse crate::{\n    leaf::Lock,\n    http::{Router as R, serve},\n};\n",
    )]));
    assert_eq!(
        breached(&r),
        [
            ("core/mod.rs".to_string(), 2, "http".to_string()),
            ("core/mod.rs".to_string(), 2, "http".to_string())
        ]
    );
}

#[test]
fn a_channel_importing_another_fails_and_shared_files_do_not() {
    let r = fake_check(&with(&[(
        "channels/tg/mod.rs",
        "use crate::channels::pipeline;\nuse super::fs::api::tls;\n",
    )]));
    assert_eq!(
        breached(&r),
        [(
            "channels/tg/mod.rs".to_string(),
            2,
            "channels::*".to_string()
        )]
    );
}

#[test]
fn test_code_gets_only_its_extra_rights() {
    let ok = fake_check(&with(&[
        (
            "core/mod.rs",
            "mod model;\n#[cfg(test)]\nmod tests;\n#[cfg(test)]\nmod inline {\n    use crate::store::Memory;\n    #[test]\n    fn t() { super::super::store::open(); }\n}\n",
        ),
        ("core/tests.rs", "use crate::store::Memory;\n"),
    ]));
    assert!(ok.is_clean(), "{ok}");
    let bad = fake_check(&with(&[(
        "core/mod.rs",
        "mod model;\n#[cfg(test)]\nmod inline {\n    use crate::http::Server;\n}\nfn f() { crate::store::open() }\n",
    )]));
    let found = breached(&bad);
    assert_eq!(
        found,
        [
            ("core/mod.rs".to_string(), 4, "http".to_string()),
            ("core/mod.rs".to_string(), 6, "store".to_string())
        ]
    );
    assert!(bad.breaches[0].test && !bad.breaches[1].test);
}

#[test]
fn comments_strings_and_attribute_paths() {
    let r = fake_check(&with(&[(
        "core/mod.rs",
        "mod model;\n// crate::http::x\n/* crate::http /* nested */ crate::http */\nconst S: &str = \"crate::http::y and more\";\nconst R: &str = r#\"crate::http is \"here\"\"#;\nconst C: char = '\"';\nfn f<'a>(x: &'a str) {}\n#[serde(with = \"crate::store::list\")]\nstruct T;\n",
    )]));
    assert_eq!(
        breached(&r),
        [("core/mod.rs".to_string(), 8, "store".to_string())]
    );
}

#[test]
fn self_and_macro_crate_paths() {
    let r = fake_check(&with(&[(
        "channels/mod.rs",
        "pub mod pipeline; pub mod tg; pub mod fs;\nmacro_rules! m { () => { $crate::http::x() } }\nfn f() { self::pipeline::run(); }\n",
    )]));
    assert_eq!(
        breached(&r),
        [("channels/mod.rs".to_string(), 2, "http".to_string())]
    );
}

#[test]
fn child_module_paths_and_uncovered_modules_and_stale_exceptions() {
    // `pipeline::x` from channels/mod.rs is the child module: allowed; `tg::x` too (a channel
    // is not in `channels`' list, so it is reported).
    let r = fake_check(&with(&[
        (
            "channels/mod.rs",
            "pub mod pipeline; pub mod tg; pub mod fs;\nfn f() { pipeline::run(); tg::install(); }\n",
        ),
        ("extra.rs", "pub fn x() {}\n"),
    ]));
    assert_eq!(
        breached(&r),
        [("channels/mod.rs".to_string(), 2, "channels::*".to_string())]
    );
    assert_eq!(r.uncovered.iter().collect::<Vec<_>>(), ["extra"]);
    let dir = tree(BASE);
    let r = check(dir.path(), FAKE_RULES, &[("http/mod.rs", "leaf", "reason")]);
    assert_eq!(r.stale, ["(src/http/mod.rs → `leaf`)"]);
    assert!(!r.is_clean());
}

#[test]
fn the_rules_name_only_parts_each_once() {
    let parts: Vec<&str> = RULES.iter().map(|r| r.part).collect();
    for (i, p) in parts.iter().enumerate() {
        assert!(!parts[..i].contains(p), "RULES has two rows for `{p}`");
    }
    for r in RULES {
        for name in r.may_import.iter().chain(r.tests_also) {
            assert!(
                parts.contains(name),
                "RULES: `{}` names `{name}`, which has no row",
                r.part
            );
            assert_ne!(*name, r.part, "RULES: `{name}` lists itself");
        }
    }
    for (file, part, why) in EXCEPTIONS {
        assert!(parts.contains(part), "EXCEPTIONS: `{part}` has no row");
        assert!(!file.is_empty() && !why.is_empty());
    }
}

#[test]
fn the_doc_table_lists_every_rule() {
    let t = doc_table();
    for r in RULES {
        assert!(t.contains(&format!("| `{}` |", r.part)), "{t}");
    }
}

// ---------------------------------------------------------------------------------------------
// Size: no source file over 800 lines and no function over 80, tests aside.

/// The longest a source file may be, in lines, not counting `#[cfg(test)]` items.
const MAX_FILE_LINES: usize = 800;
/// The longest a function may be, in lines from `fn` to its closing brace.
const MAX_FN_LINES: usize = 80;

/// Every file over [`MAX_FILE_LINES`] and every function over [`MAX_FN_LINES`] under `root`,
/// as `(path[::fn], lines)`.
fn too_long(root: &Path) -> Vec<(String, usize)> {
    let mut files = Vec::new();
    collect(root, &mut files);
    files.sort();
    let mut out = Vec::new();
    for file in &files {
        let rel = file
            .strip_prefix(root)
            .unwrap_or(file)
            .to_string_lossy()
            .replace('\\', "/");
        let text = std::fs::read_to_string(file).unwrap_or_default();
        out.extend(sizes(&rel, &text));
    }
    out
}

/// The over-long file and functions of one file's text.
fn sizes(rel: &str, text: &str) -> Vec<(String, usize)> {
    let toks = lex(text);
    let test = test_regions(&toks);
    let total = text.lines().count();
    // Lines taken by test items: from the first to the last line of each region.
    let mut test_lines = BTreeSet::new();
    let mut k = 0;
    while k < toks.len() {
        if test[k] {
            let start = toks[k].1;
            while k + 1 < toks.len() && test[k + 1] {
                k += 1;
            }
            test_lines.extend(start..=toks[k].1);
        }
        k += 1;
    }
    let mut out = Vec::new();
    let lines = total.saturating_sub(test_lines.len());
    if lines > MAX_FILE_LINES {
        out.push((rel.to_string(), lines));
    }
    for (i, t) in toks.iter().enumerate() {
        if test[i] || t.0 != Tok::Ident("fn".into()) {
            continue;
        }
        let Some((Tok::Ident(name), _)) = toks.get(i + 1) else {
            continue;
        };
        // The body: the first `{` outside parentheses and brackets, unless a `;` ends the
        // declaration first.
        let mut depth = 0i64;
        let mut k = i + 2;
        let mut body = None;
        while k < toks.len() {
            match toks[k].0 {
                Tok::Punct('(') | Tok::Punct('[') => depth += 1,
                Tok::Punct(')') | Tok::Punct(']') => depth -= 1,
                Tok::Punct(';') if depth == 0 => break,
                Tok::Punct('{') if depth == 0 => {
                    body = Some(k);
                    break;
                }
                _ => {}
            }
            k += 1;
        }
        let Some(open) = body else { continue };
        let mut depth = 0i64;
        let mut end = open;
        for (j, t) in toks.iter().enumerate().skip(open) {
            match t.0 {
                Tok::Punct('{') => depth += 1,
                Tok::Punct('}') => {
                    depth -= 1;
                    if depth == 0 {
                        end = j;
                        break;
                    }
                }
                _ => {}
            }
        }
        let len = toks[end].1 - t.1 + 1;
        if len > MAX_FN_LINES {
            out.push((format!("{rel}::{name}"), len));
        }
    }
    out
}

#[test]
fn no_file_or_function_is_too_long() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let problems: Vec<String> = too_long(&root)
        .iter()
        .map(|(what, lines)| {
            let limit = if what.contains("::") {
                MAX_FN_LINES
            } else {
                MAX_FILE_LINES
            };
            format!("  {what}: {lines} lines, over {limit}; split it along its concerns")
        })
        .collect();
    assert!(problems.is_empty(), "\n{}", problems.join("\n"));
}

#[test]
fn sizes_count_functions_and_leave_tests_aside() {
    let long_body = "    let x = 1;\n".repeat(MAX_FN_LINES);
    let text = format!(
        "fn short() {{ }}\nfn long() {{\n{long_body}}}\ntrait T {{ fn decl(&self); }}\n\
         #[cfg(test)]\nmod tests {{\n    fn also_long() {{\n{long_body}    }}\n}}\n"
    );
    let found = sizes("a.rs", &text);
    assert_eq!(found, vec![("a.rs::long".to_string(), MAX_FN_LINES + 2)]);
    let file = format!(
        "fn f() {{}}\n{}",
        "const A: u8 = 1;\n".repeat(MAX_FILE_LINES)
    );
    assert_eq!(
        sizes("b.rs", &file),
        vec![("b.rs".to_string(), MAX_FILE_LINES + 1)]
    );
}

// ---------------------------------------------------------------------------------------------
// Circles: inside every folder, the files and sub-folders import each other in layers.

/// One import between two siblings of a folder, with where it is written.
#[derive(Debug, Clone)]
struct Edge {
    from: String,
    to: String,
    at: String,
}

/// Every import circle among the children of a folder under `root`, one line each: the folder,
/// the children in the circle, and for each step the file and line that makes it. A folder's
/// own `mod.rs` is its face (it declares and re-exports the children), not one of them; test
/// code is left aside.
fn circles(root: &Path) -> Vec<String> {
    let mut files = Vec::new();
    collect(root, &mut files);
    files.sort();
    // Folder -> edges between its children.
    let mut edges: std::collections::BTreeMap<Vec<String>, Vec<Edge>> = Default::default();
    let mut test_modules = BTreeSet::new();
    let mut read = Vec::new();
    for file in &files {
        let rel = file
            .strip_prefix(root)
            .expect("under root")
            .to_string_lossy()
            .replace('\\', "/");
        let text = std::fs::read_to_string(file).unwrap_or_else(|e| panic!("{rel}: {e}"));
        let module = module_of(&rel);
        let scan = scan(root, &module, &text, rel == "main.rs");
        for child in &scan.test_children {
            let mut m = module.clone();
            m.push(child.clone());
            test_modules.insert(m);
        }
        read.push((rel, module, scan.uses));
    }
    for (rel, module, uses) in read {
        if test_modules.iter().any(|t| module.starts_with(t)) {
            continue;
        }
        for u in uses.iter().filter(|u| !u.test) {
            let target = resolve(root, &u.path);
            // The deepest folder both sit in, and the child of it each belongs to.
            let common = module
                .iter()
                .zip(&target)
                .take_while(|(a, b)| a == b)
                .count();
            if common >= module.len() || common >= target.len() {
                continue; // one is inside the other: a folder's face and its children
            }
            let folder = module[..common].to_vec();
            if !is_folder(root, &folder) && !folder.is_empty() {
                continue;
            }
            edges.entry(folder).or_default().push(Edge {
                from: module[common].clone(),
                to: target[common].clone(),
                at: format!("src/{rel}:{}", u.line),
            });
        }
    }
    let mut out = Vec::new();
    for (folder, list) in edges {
        for circle in strongly_connected(&list) {
            let mut steps: Vec<&Edge> = Vec::new();
            for e in list
                .iter()
                .filter(|e| circle.contains(&e.from) && circle.contains(&e.to))
            {
                if !steps.iter().any(|s| s.from == e.from && s.to == e.to) {
                    steps.push(e);
                }
            }
            let steps: Vec<String> = steps
                .iter()
                .map(|e| format!("{} → {} ({})", e.from, e.to, e.at))
                .collect();
            out.push(format!(
                "in `src/{}`: {} import each other: {}",
                if folder.is_empty() {
                    String::new()
                } else {
                    format!("{}/", folder.join("/"))
                },
                circle.iter().cloned().collect::<Vec<_>>().join(", "),
                steps.join("; ")
            ));
        }
    }
    out
}

/// Tarjan's walk state: the groups of nodes that reach each other.
struct Walk {
    index: Vec<Option<usize>>,
    low: Vec<usize>,
    on: Vec<bool>,
    stack: Vec<usize>,
    counter: usize,
    groups: Vec<Vec<usize>>,
}

impl Walk {
    fn visit(&mut self, v: usize, next: &[Vec<usize>]) {
        self.index[v] = Some(self.counter);
        self.low[v] = self.counter;
        self.counter += 1;
        self.stack.push(v);
        self.on[v] = true;
        for &w in &next[v] {
            match self.index[w] {
                None => {
                    self.visit(w, next);
                    self.low[v] = self.low[v].min(self.low[w]);
                }
                Some(i) if self.on[w] => self.low[v] = self.low[v].min(i),
                Some(_) => {}
            }
        }
        if Some(self.low[v]) == self.index[v] {
            let mut group = Vec::new();
            while let Some(w) = self.stack.pop() {
                self.on[w] = false;
                group.push(w);
                if w == v {
                    break;
                }
            }
            self.groups.push(group);
        }
    }
}

/// The groups of more than one node that reach each other (Tarjan's algorithm).
fn strongly_connected(edges: &[Edge]) -> Vec<BTreeSet<String>> {
    let nodes: BTreeSet<&str> = edges
        .iter()
        .flat_map(|e| [e.from.as_str(), e.to.as_str()])
        .collect();
    let nodes: Vec<&str> = nodes.into_iter().collect();
    let at = |n: &str| nodes.iter().position(|m| *m == n).expect("a node");
    let mut next: Vec<Vec<usize>> = vec![Vec::new(); nodes.len()];
    for e in edges {
        next[at(&e.from)].push(at(&e.to));
    }
    let n = nodes.len();
    let mut walk = Walk {
        index: vec![None; n],
        low: vec![0; n],
        on: vec![false; n],
        stack: Vec::new(),
        counter: 0,
        groups: Vec::new(),
    };
    for v in 0..n {
        if walk.index[v].is_none() {
            walk.visit(v, &next);
        }
    }
    walk.groups
        .into_iter()
        .filter(|g| g.len() > 1)
        .map(|g| g.into_iter().map(|i| nodes[i].to_string()).collect())
        .collect()
}

/// No folder's files import each other in a circle: each folder is layers too, so a file can
/// be read (and moved) with what it imports and without what imports it.
#[test]
fn no_folder_has_an_import_circle() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let found = circles(&root);
    assert!(
        found.is_empty(),
        "import circles (docs/architecture.md: no import cycles, even inside a folder); move \
         what both sides need into a file they both import, or hand it over as a parameter:\n  {}",
        found.join("\n  ")
    );
}

#[test]
fn a_circle_inside_a_folder_is_found_with_its_lines() {
    let dir = tree(&with(&[
        (
            "core/mod.rs",
            "mod model;\nmod votes;\nuse crate::leaf::Lock;\n",
        ),
        (
            "core/model.rs",
            "use super::votes::Vote;\npub struct Interaction;\n",
        ),
        (
            "core/votes.rs",
            "pub struct Vote;\n\nfn f() {\n    crate::core::model::Interaction;\n}\n",
        ),
    ]));
    let found = circles(dir.path());
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(
        found[0].contains("in `src/core/`: model, votes"),
        "{}",
        found[0]
    );
    assert!(found[0].contains("src/core/model.rs:1"), "{}", found[0]);
    assert!(found[0].contains("src/core/votes.rs:4"), "{}", found[0]);
    // A folder's face importing its children, and test code, make no circle.
    let dir = tree(&with(&[
        (
            "core/mod.rs",
            "mod model;\nmod votes;\npub use votes::Vote;\n",
        ),
        (
            "core/model.rs",
            "use super::votes::Vote;\nuse crate::core::Vote as V;\n",
        ),
        (
            "core/votes.rs",
            "pub struct Vote;\n#[cfg(test)]\nmod tests {\n    use crate::core::model;\n}\n",
        ),
    ]));
    assert!(circles(dir.path()).is_empty(), "{:?}", circles(dir.path()));
}
