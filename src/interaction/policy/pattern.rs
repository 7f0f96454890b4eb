//! Permission patterns in Claude Code's rule syntax: `Tool` or `Tool(specifier)`.
//!
//! - `Bash`, `Bash(*)`: every command. `Bash(npm run test:*)`: `npm run test` alone or followed
//!   by a space and anything (a word boundary: not `npm run tests`). `Bash(git * main)`: `*`
//!   matches any characters, spaces included; a single trailing ` *` is optional (`Bash(ls *)`
//!   matches `ls`); `\*` is a literal star. Matched against each simple command of the call
//!   (see [`super::shell`]) written back as words, each quoted only where the shell needs it
//!   (`git commit -m 'fix it'`).
//! - `Read(path)`, `Edit(path)` (and `Write`, `MultiEdit`, `NotebookEdit`, `Glob`, `Grep`,
//!   `LS`, `NotebookRead` by their own names): a glob (`*` within a directory, `**` across
//!   directories) over the file the call names, after `.` and `..` are resolved. `//abs/path`
//!   is absolute; `/path`, `./path` and `path` are relative to the call's working directory;
//!   `~/path` is under any home directory (`/root`, `/home/*`, `/Users/*`) and only in deny
//!   and ask rules. `Edit` rules also cover `Write`, `MultiEdit` and `NotebookEdit`; `Read`
//!   rules also cover `Glob`, `Grep`, `LS` and `NotebookRead`.
//! - `WebFetch(domain:docs.rs)`: a fetch of `http(s)://docs.rs/...`; `domain:*.docs.rs` also
//!   matches its subdomains.
//! - `mcp__github` or `mcp__github__*`: every tool of that MCP server; `mcp__github__get_issue`
//!   one tool. A `*` in a tool name matches any characters.

use globset::{Glob, GlobBuilder, GlobMatcher};
use regex::Regex;
use serde_json::{Map, Value};

use super::flags;
pub use super::flags::{PatternError, Use};
use super::shell::{self, Part};

/// Tools an `Edit` rule covers.
const EDITS: &[&str] = &["Edit", "Write", "MultiEdit", "NotebookEdit"];
/// Tools a `Read` rule covers.
const READS: &[&str] = &["Read", "Glob", "Grep", "LS", "NotebookRead"];
/// Tools that take a path specifier.
const PATH_TOOLS: &[&str] = &[
    "Read",
    "Edit",
    "Write",
    "MultiEdit",
    "NotebookEdit",
    "Glob",
    "Grep",
    "LS",
    "NotebookRead",
];

/// The tool names patterns are written with (Claude Code's, onto which every agent's tools
/// are mapped), for a name written in another case.
const TOOL_NAMES: &[&str] = &[
    "Bash",
    "BashOutput",
    "Edit",
    "Glob",
    "Grep",
    "KillShell",
    "LS",
    "MultiEdit",
    "NotebookEdit",
    "NotebookRead",
    "Read",
    "Task",
    "TodoWrite",
    "WebFetch",
    "WebSearch",
    "Write",
];

/// The known tool name `tool` is in another case (`bash` → `Bash`); `None` when it is one
/// as written, or none at all.
pub fn miscased_tool(tool: &str) -> Option<&'static str> {
    TOOL_NAMES
        .iter()
        .find(|k| k.eq_ignore_ascii_case(tool) && **k != tool)
        .copied()
}

/// A compiled permission pattern.
#[derive(Clone, Debug)]
pub struct Pattern {
    text: String,
    tool: ToolMatch,
    spec: Spec,
}

#[derive(Clone, Debug)]
enum ToolMatch {
    Exact(String),
    /// An MCP server: `mcp__server` covers `mcp__server__*`.
    Server(String),
    Glob(GlobMatcher),
}

#[derive(Clone, Debug)]
enum Spec {
    Any,
    Command(Command),
    Path(PathGlob),
    Domain(Domain),
}

#[derive(Clone, Debug)]
struct Command {
    regex: Regex,
    /// The pattern's words outside wildcards: a `find -exec` is covered only if its action is
    /// written here.
    literal: Vec<String>,
    /// Words that must appear anywhere (see [`flags`]).
    groups: Vec<flags::Group>,
    /// For a deny or ask rule: the command is also read behind its program's global options
    /// and path (see [`flags::readings`]).
    restrict: bool,
}

#[derive(Clone, Debug)]
enum PathGlob {
    /// Matched against the absolute path.
    Absolute(GlobMatcher),
    /// Matched against the path relative to the call's working directory.
    Relative(GlobMatcher),
    /// Matched against the path under any home directory.
    Home(GlobMatcher),
}

#[derive(Clone, Debug)]
struct Domain {
    host: String,
    subdomains: bool,
}

/// The call a pattern is matched against.
#[derive(Clone, Copy, Debug)]
pub struct Call<'a> {
    /// The tool name.
    pub tool: &'a str,
    /// Its input.
    pub input: &'a Map<String, Value>,
    /// The agent's working directory.
    pub cwd: Option<&'a str>,
}

/// What of a call a pattern is matched against.
#[derive(Clone, Copy, Debug)]
pub enum Subject<'a> {
    /// The call as a whole.
    Whole,
    /// One simple command of a shell call.
    Part(&'a Part),
}

fn glob(text: &str, position: usize) -> Result<GlobMatcher, PatternError> {
    GlobBuilder::new(text)
        .literal_separator(true)
        .backslash_escape(true)
        .build()
        .map(|g: Glob| g.compile_matcher())
        .map_err(|e| PatternError::new(position, format!("not a valid glob: {}", e.kind())))
}

/// A pattern with text after the `)` that closes its specifier (`Bash(git status)*`):
/// refused, saying to put it inside.
fn text_after_specifier(trimmed: &str, open: usize, lead: usize) -> Result<(), PatternError> {
    let Some(close) = trimmed
        .rfind(')')
        .filter(|c| *c > open && !trimmed.ends_with(')'))
    else {
        return Ok(());
    };
    let (inside, after) = (&trimmed[open + 1..close], &trimmed[close + 1..]);
    Err(PatternError::new(
        lead + trimmed[..close].chars().count() + 2,
        format!(
            "{after:?} follows the `)` that closes the specifier: everything a pattern matches \
             goes inside, e.g. `{}({inside}{after})`",
            &trimmed[..open]
        ),
    ))
}

impl Pattern {
    /// Reads `text` (see the module's documentation).
    pub fn parse(text: &str, used: Use) -> Result<Self, PatternError> {
        let trimmed = text.trim();
        if trimmed.is_empty() {
            return Err(PatternError::new(
                1,
                "is empty: write a tool name, e.g. Bash(git status:*)",
            ));
        }
        let lead = text.chars().take_while(|c| c.is_whitespace()).count();
        let (tool, spec) = match trimmed.find('(') {
            None => (trimmed, None),
            Some(open) => {
                text_after_specifier(trimmed, open, lead)?;
                if !trimmed.ends_with(')') {
                    return Err(PatternError::new(
                        lead + trimmed.chars().count(),
                        "the specifier is not closed: end the pattern with `)`",
                    ));
                }
                (
                    &trimmed[..open],
                    Some((
                        &trimmed[open + 1..trimmed.len() - 1],
                        lead + trimmed[..open].chars().count() + 2,
                    )),
                )
            }
        };
        if tool.is_empty() {
            return Err(PatternError::new(
                lead + 1,
                "there is no tool name before `(`",
            ));
        }
        if let Some((bad_at, bad)) = tool
            .chars()
            .enumerate()
            .find(|(_, c)| !(c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '*' | '.' | ':')))
        {
            return Err(PatternError::new(
                lead + bad_at + 1,
                format!("{bad:?} cannot be part of a tool name"),
            ));
        }
        if let Some(known) = miscased_tool(tool) {
            return Err(PatternError::new(
                lead + 1,
                format!(
                    "`{tool}` is not a tool name: tool names are case-sensitive, so it would match \
                     nothing; write `{known}`"
                ),
            ));
        }
        let tool_match = if tool.contains('*') {
            ToolMatch::Glob(glob(tool, lead + 1)?)
        } else if tool.starts_with("mcp__") && tool.matches("__").count() == 1 {
            ToolMatch::Server(tool.to_string())
        } else {
            ToolMatch::Exact(tool.to_string())
        };
        let spec = match spec {
            None => Spec::Any,
            Some((s, at)) => Self::spec(tool, s, at, used)?,
        };
        Ok(Self {
            text: trimmed.to_string(),
            tool: tool_match,
            spec,
        })
    }

    fn spec(tool: &str, s: &str, at: usize, used: Use) -> Result<Spec, PatternError> {
        if s.trim().is_empty() {
            return Err(PatternError::new(
                at,
                format!(
                    "the specifier is empty: write `{tool}` for every call, or `{tool}(...)` with what to match"
                ),
            ));
        }
        if tool == "Bash" {
            return Self::command(s, at, used);
        }
        if PATH_TOOLS.contains(&tool) {
            return Self::path(s, at, used);
        }
        if tool == "WebFetch" {
            let Some(domain) = s.strip_prefix("domain:") else {
                return Err(PatternError::new(
                    at,
                    "WebFetch takes `domain:HOST`, e.g. WebFetch(domain:docs.rs)",
                ));
            };
            let host = domain.trim().trim_end_matches('.').to_ascii_lowercase();
            let (host, subdomains) = match host.strip_prefix("*.") {
                Some(rest) => (rest.to_string(), true),
                None => (host, false),
            };
            if host.is_empty()
                || host.contains('*')
                || !host
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '.' | ':' | '[' | ']'))
            {
                return Err(PatternError::new(
                    at + 7,
                    format!(
                        "{domain:?} is not a host name (write docs.rs, or *.docs.rs for its subdomains)"
                    ),
                ));
            }
            return Ok(Spec::Domain(Domain { host, subdomains }));
        }
        Err(PatternError::new(
            at - 1,
            format!(
                "{tool} takes no specifier here: only Bash, WebFetch and the file tools ({}) do; write `{tool}` alone",
                PATH_TOOLS.join(", ")
            ),
        ))
    }

    fn command(s: &str, at: usize, used: Use) -> Result<Spec, PatternError> {
        let (s, groups) = flags::take_groups(s, at, used)?;
        let s = s.trim();
        if s == "*" {
            return Ok(Spec::Any);
        }
        // `prefix:*` is `prefix` with an optional ` *`.
        let (body, optional_tail) = match s.strip_suffix(":*") {
            Some(prefix) => (prefix.trim_end().to_string() + " *", true),
            None => (s.to_string(), false),
        };
        if body.trim() == "*" {
            return Err(PatternError::new(
                at,
                "`:*` needs a command before it, e.g. Bash(npm run test:*)",
            ));
        }
        // Whitespace runs read as one space, as the command's words are joined.
        let body: String = body.split_whitespace().collect::<Vec<_>>().join(" ");
        // Split on unescaped stars.
        let mut pieces: Vec<String> = vec![String::new()];
        let mut chars = body.chars().peekable();
        while let Some(c) = chars.next() {
            match c {
                '\\' if chars.peek() == Some(&'*') => {
                    chars.next();
                    if let Some(p) = pieces.last_mut() {
                        p.push('*');
                    }
                }
                '*' => pieces.push(String::new()),
                c => {
                    if let Some(p) = pieces.last_mut() {
                        p.push(c)
                    }
                }
            }
        }
        let stars = pieces.len() - 1;
        // `prefix *` (one star, or the `:*` form): the prefix alone, or followed by a space
        // and anything.
        let optional_tail = stars >= 1
            && pieces[stars].is_empty()
            && pieces[stars - 1].ends_with(' ')
            && (optional_tail || stars == 1);
        let mut re = String::from("(?s)^");
        for (k, piece) in pieces.iter().enumerate() {
            if k > 0 {
                re.push_str(if k == stars && optional_tail {
                    "(?: .*)?"
                } else {
                    ".*"
                });
            }
            let piece = match piece.strip_suffix(' ') {
                Some(p) if optional_tail && k + 1 == stars => p,
                _ => piece,
            };
            re.push_str(&regex::escape(piece));
        }
        re.push('$');
        let regex = Regex::new(&re)
            .map_err(|e| PatternError::new(at, format!("cannot be compiled: {e}")))?;
        let literal = pieces
            .iter()
            .flat_map(|p| p.split_whitespace())
            .map(str::to_string)
            .collect();
        Ok(Spec::Command(Command {
            regex,
            literal,
            groups,
            restrict: used == Use::Restrict,
        }))
    }

    fn path(s: &str, at: usize, used: Use) -> Result<Spec, PatternError> {
        let s = s.trim();
        if s == "*" || s == "**" {
            return Ok(Spec::Any);
        }
        if let Some(abs) = s.strip_prefix("//") {
            return Ok(Spec::Path(PathGlob::Absolute(glob(
                &format!("/{abs}"),
                at,
            )?)));
        }
        if let Some(home) = s.strip_prefix("~/") {
            if used == Use::Allow {
                return Err(PatternError::new(
                    at,
                    "imrelay cannot know the agent's home directory: an allow rule names it as an absolute path (//home/me/...)",
                ));
            }
            return Ok(Spec::Path(PathGlob::Home(glob(home, at + 2)?)));
        }
        if s.starts_with('~') {
            return Err(PatternError::new(
                at,
                "`~user` paths are not supported: write the absolute path as //home/user/...",
            ));
        }
        let rel = s.trim_start_matches("./").trim_start_matches('/');
        if rel.split('/').any(|seg| seg == "..") {
            return Err(PatternError::new(
                at,
                "`..` is not allowed in a relative path pattern: write the absolute path as //...",
            ));
        }
        Ok(Spec::Path(PathGlob::Relative(glob(rel, at)?)))
    }

    /// The pattern as written (trimmed).
    pub fn text(&self) -> &str {
        &self.text
    }

    /// Whether the pattern names `tool`.
    pub fn names_tool(&self, tool: &str) -> bool {
        match &self.tool {
            ToolMatch::Exact(t) => {
                t == tool
                    || (t == "Edit" && EDITS.contains(&tool))
                    || (t == "Read" && READS.contains(&tool))
            }
            ToolMatch::Server(s) => tool
                .strip_prefix(s.as_str())
                .is_some_and(|rest| rest.starts_with("__") && rest.len() > 2),
            ToolMatch::Glob(g) => g.is_match(tool),
        }
    }

    /// Whether this pattern matches `subject` of `call`.
    pub fn matches(&self, call: &Call<'_>, subject: Subject<'_>) -> bool {
        if !self.names_tool(call.tool) {
            return false;
        }
        match (&self.spec, subject) {
            (Spec::Any, _) => true,
            (Spec::Command(c), Subject::Part(part)) => c.matches(part),
            (Spec::Command(_), Subject::Whole) => false,
            (Spec::Path(p), _) => p.matches(call),
            (Spec::Domain(d), _) => d.matches(call.input),
        }
    }

    /// Whether this pattern, in an allow rule, covers `part` without reaching past what it
    /// says: a wildcard does not cover a `find -exec` (or `-delete`) the pattern does not
    /// write out.
    pub fn allows_part(&self, call: &Call<'_>, part: &Part) -> bool {
        if !self.matches(call, Subject::Part(part)) {
            return false;
        }
        let exec = shell::exec_words(part);
        match &self.spec {
            Spec::Command(c) => exec.iter().all(|w| c.literal.iter().any(|l| l == w)),
            _ => exec.is_empty(),
        }
    }
}

impl Command {
    fn matches(&self, part: &Part) -> bool {
        if !self.restrict {
            return self.matches_words(part);
        }
        flags::readings(part).iter().any(|p| self.matches_words(p))
    }

    fn matches_words(&self, part: &[String]) -> bool {
        if !self
            .groups
            .iter()
            .all(|g| g.met_by(part.get(1..).unwrap_or_default()))
        {
            return false;
        }
        let mut words = Vec::with_capacity(part.len());
        for w in part {
            match shlex::try_quote(w) {
                Ok(q) => words.push(q),
                Err(_) => return false,
            }
        }
        self.regex.is_match(&words.join(" "))
    }
}

/// The path a file tool's call names: `file_path`, `notebook_path` or `path` (for `Glob`,
/// `Grep` and `LS`, the working directory when absent).
fn path_of<'a>(call: &Call<'a>) -> Option<&'a str> {
    let named = ["file_path", "notebook_path", "path"]
        .iter()
        .find_map(|k| call.input.get(*k).and_then(Value::as_str));
    match named {
        Some(p) => Some(p),
        None if matches!(call.tool, "Glob" | "Grep" | "LS") => call.cwd,
        None => None,
    }
}

/// `path` made absolute against `cwd` and with `.` and `..` resolved lexically; `None` when
/// that cannot be done (a relative path without an absolute working directory).
pub fn normalise(path: &str, cwd: Option<&str>) -> Option<String> {
    let joined = if path.starts_with('/') {
        path.to_string()
    } else {
        let cwd = cwd.filter(|c| c.starts_with('/'))?;
        format!("{cwd}/{path}")
    };
    let mut out: Vec<&str> = Vec::new();
    for seg in joined.split('/') {
        match seg {
            "" | "." => {}
            ".." => {
                out.pop();
            }
            s => out.push(s),
        }
    }
    Some(format!("/{}", out.join("/")))
}

impl PathGlob {
    fn matches(&self, call: &Call<'_>) -> bool {
        let Some(path) = path_of(call).and_then(|p| normalise(p, call.cwd)) else {
            return false;
        };
        match self {
            PathGlob::Absolute(g) => g.is_match(&path),
            PathGlob::Relative(g) => {
                let Some(cwd) = call.cwd.and_then(|c| normalise(c, None)) else {
                    return false;
                };
                let base = if cwd == "/" { String::new() } else { cwd };
                match path.strip_prefix(&base).and_then(|r| r.strip_prefix('/')) {
                    Some(rel) => g.is_match(rel),
                    None => false,
                }
            }
            PathGlob::Home(g) => {
                let segs: Vec<&str> = path.trim_start_matches('/').splitn(3, '/').collect();
                let under = match segs.as_slice() {
                    ["root", rest @ ..] => rest.join("/"),
                    ["home" | "Users", _, rest] => rest.to_string(),
                    _ => return false,
                };
                g.is_match(&under)
            }
        }
    }
}

impl Domain {
    fn matches(&self, input: &Map<String, Value>) -> bool {
        let Some(url) = input.get("url").and_then(Value::as_str) else {
            return false;
        };
        let Ok(url) = url::Url::parse(url) else {
            return false;
        };
        if !matches!(url.scheme(), "http" | "https") {
            return false;
        }
        let Some(host) = url.host_str() else {
            return false;
        };
        let host = host.trim_end_matches('.').to_ascii_lowercase();
        host == self.host
            || (self.subdomains
                && host
                    .strip_suffix(self.host.as_str())
                    .is_some_and(|h| h.ends_with('.')))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn input(v: Value) -> Map<String, Value> {
        v.as_object().cloned().unwrap_or_default()
    }

    fn part(cmd: &str) -> Part {
        let s = shell::split(cmd);
        assert_eq!(s.parts.len(), 1, "{cmd:?}");
        s.parts[0].clone()
    }

    #[track_caller]
    fn command_matches(pattern: &str, cmd: &str) -> bool {
        let p = Pattern::parse(pattern, Use::Allow).unwrap();
        let i = input(json!({"command": cmd}));
        let call = Call {
            tool: "Bash",
            input: &i,
            cwd: None,
        };
        p.allows_part(&call, &part(cmd))
    }

    #[test]
    fn bash_prefix_and_wildcards() {
        assert!(command_matches("Bash(git status:*)", "git status"));
        assert!(command_matches("Bash(git status:*)", "git status -s"));
        assert!(!command_matches("Bash(git status:*)", "git statusx"));
        assert!(!command_matches("Bash(git status:*)", "git stat"));
        assert!(command_matches(
            "Bash(npm run test:*)",
            "npm run test -- --watch"
        ));
        assert!(!command_matches("Bash(npm run test:*)", "npm run tests"));
        assert!(command_matches("Bash(ls *)", "ls"));
        assert!(command_matches("Bash(ls *)", "ls -la"));
        assert!(!command_matches("Bash(ls *)", "lsof"));
        assert!(command_matches("Bash(ls*)", "lsof"));
        assert!(command_matches("Bash(git * main)", "git push origin main"));
        assert!(!command_matches(
            "Bash(git * main)",
            "git push origin main2"
        ));
        assert!(command_matches("Bash(npm install)", "npm install"));
        assert!(!command_matches("Bash(npm install)", "npm install x"));
        assert!(command_matches("Bash(npm  install)", "npm   install"));
        assert!(command_matches("Bash(*)", "anything at all"));
        assert!(command_matches("Bash", "anything at all"));
        // Quoted words are written back quoted: a program named "git status" is not git.
        assert!(!command_matches("Bash(git status:*)", "'git status'"));
        assert!(command_matches(
            "Bash(git commit -m *)",
            "git commit -m 'fix: it'"
        ));
        // An assignment before the command is part of what the rule must say.
        assert!(!command_matches(
            "Bash(git status:*)",
            "GIT_PAGER=x git status"
        ));
    }

    #[test]
    fn a_wildcard_does_not_reach_over_find_exec() {
        assert!(command_matches("Bash(find:*)", "find . -name x"));
        assert!(!command_matches("Bash(find:*)", "find . -exec rm {} ;"));
        assert!(!command_matches("Bash(find:*)", "find . -delete"));
        assert!(command_matches(
            "Bash(find . -exec grep:*)",
            "find . -exec grep x {} +"
        ));
    }

    fn path_call<'a>(tool: &'a str, i: &'a Map<String, Value>, cwd: Option<&'a str>) -> Call<'a> {
        Call {
            tool,
            input: i,
            cwd,
        }
    }

    #[test]
    fn paths_are_resolved_against_the_working_directory() {
        let p = Pattern::parse("Edit(docs/**)", Use::Allow).unwrap();
        let cwd = Some("/work/app");
        let yes = input(json!({"file_path": "/work/app/docs/a/b.md"}));
        assert!(p.matches(&path_call("Edit", &yes, cwd), Subject::Whole));
        assert!(p.matches(&path_call("Write", &yes, cwd), Subject::Whole));
        assert!(!p.matches(&path_call("Read", &yes, cwd), Subject::Whole));
        let rel = input(json!({"file_path": "docs/x.md"}));
        assert!(p.matches(&path_call("Edit", &rel, cwd), Subject::Whole));
        assert!(!p.matches(&path_call("Edit", &rel, None), Subject::Whole));
        for escape in [
            "/work/app/docs/../src/main.rs",
            "docs/../../etc/passwd",
            "/work/app2/docs/x",
            "/etc/docs/x",
        ] {
            let no = input(json!({"file_path": escape}));
            assert!(
                !p.matches(&path_call("Edit", &no, cwd), Subject::Whole),
                "{escape}"
            );
        }
        let p = Pattern::parse("Read(./src/*.rs)", Use::Allow).unwrap();
        let deep = input(json!({"file_path": "/work/app/src/a/b.rs"}));
        assert!(!p.matches(&path_call("Read", &deep, cwd), Subject::Whole));
        let grep = input(json!({"pattern": "x"}));
        assert!(!p.matches(&path_call("Grep", &grep, cwd), Subject::Whole));
        let abs = Pattern::parse("Read(//etc/**)", Use::Restrict).unwrap();
        let etc = input(json!({"file_path": "/etc/ssh/sshd_config"}));
        assert!(abs.matches(&path_call("Read", &etc, None), Subject::Whole));
        let home = Pattern::parse("Read(~/.ssh/**)", Use::Restrict).unwrap();
        let key = input(json!({"file_path": "/home/al/.ssh/id_ed25519"}));
        assert!(home.matches(&path_call("Read", &key, None), Subject::Whole));
        assert!(Pattern::parse("Read(~/.ssh/**)", Use::Allow).is_err());
    }

    #[test]
    fn domains_and_mcp_tools() {
        let p = Pattern::parse("WebFetch(domain:docs.rs)", Use::Allow).unwrap();
        let ok = input(json!({"url": "https://docs.rs/globset"}));
        fn call(i: &Map<String, Value>) -> Call<'_> {
            Call {
                tool: "WebFetch",
                input: i,
                cwd: None,
            }
        }
        assert!(p.matches(&call(&ok), Subject::Whole));
        for no in [
            "https://docs.rs.evil.com/",
            "https://evil.com/docs.rs",
            "https://evil.com/?u=https://docs.rs",
            "ftp://docs.rs/",
            "https://sub.docs.rs/",
        ] {
            let i = input(json!({"url": no}));
            assert!(!p.matches(&call(&i), Subject::Whole), "{no}");
        }
        let sub = Pattern::parse("WebFetch(domain:*.docs.rs)", Use::Allow).unwrap();
        let i = input(json!({"url": "https://a.docs.rs/x"}));
        assert!(sub.matches(&call(&i), Subject::Whole));
        let i = input(json!({"url": "https://xdocs.rs/x"}));
        assert!(!sub.matches(&call(&i), Subject::Whole));

        let server = Pattern::parse("mcp__github", Use::Allow).unwrap();
        assert!(server.names_tool("mcp__github__get_issue"));
        assert!(!server.names_tool("mcp__githubx__get_issue"));
        assert!(!server.names_tool("mcp__github"));
        let star = Pattern::parse("mcp__github__*", Use::Allow).unwrap();
        assert!(star.names_tool("mcp__github__get_issue"));
        assert!(!star.names_tool("mcp__gitlab__get_issue"));
        let one = Pattern::parse("mcp__github__get_issue", Use::Allow).unwrap();
        assert!(one.names_tool("mcp__github__get_issue"));
        assert!(!one.names_tool("mcp__github__get_issues"));
    }

    #[test]
    fn bad_patterns_say_where() {
        for (text, position) in [
            ("", 1),
            ("Bash(git status", 15),
            ("(ls)", 1),
            ("Ba sh", 3),
            ("Bash()", 6),
            ("WebFetch(docs.rs)", 10),
            ("Task(x)", 5),
            ("Read(../x)", 6),
            ("Bash(:*)", 6),
        ] {
            let e = Pattern::parse(text, Use::Allow).unwrap_err();
            assert_eq!(e.position, position, "{text:?}: {e}");
        }
    }
}
