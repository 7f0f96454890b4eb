//! What a deny or ask rule's `Bash(...)` pattern catches beyond a prefix: a word anywhere in
//! the command (`[--force|-f|+*]`), and the command behind its program's global options.
//!
//! - A **group** `[a|b|c]`, written as one word of the pattern, is met when some word of the
//!   command after its program is one of the alternatives. An alternative `-f` (a dash and
//!   one letter) also matches that letter among combined short flags (`-uf`, `-fu`); one that
//!   starts with `--` also matches it with a value (`--force-with-lease=main`); any other is
//!   a glob (`*` any characters, `\*` a star) compared without regard to case (`+*` is a
//!   refspec forcing its push, `*drop database*` an SQL statement). Flags (`-R`, `--force`)
//!   are compared exactly. A pattern with groups is a prefix: `Bash(git push [--force|-f])`
//!   is `git push`, followed by anything, with one of the flags somewhere after the program.
//! - **Global options** between the program and what follows are skipped: `git -C dir push`,
//!   `git --git-dir=x push`, `kubectl -n prod delete` and `terraform -chdir=infra destroy`
//!   are read as `git push`, `kubectl delete` and `terraform destroy` too, and a program
//!   named by its path (`/usr/bin/git`) as its name. Skipped words are words that start with
//!   `-` and the one word after such an option (its value, if it takes one).
//!
//! Both only ever catch more, so they are for deny and ask rules alone: in an allow rule a
//! word anywhere, or options skipped, would allow more than the pattern says (`git -c
//! core.pager=… log` runs a command of its own).

use std::borrow::Cow;

use regex::Regex;

/// A pattern that cannot be read: where (in characters from its start) and why.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("at character {position}: {message}")]
pub struct PatternError {
    /// Characters from the start of the pattern to the fault (1-based).
    pub position: usize,
    /// What is wrong.
    pub message: String,
}

impl PatternError {
    pub(super) fn new(position: usize, message: impl Into<String>) -> Self {
        Self {
            position,
            message: message.into(),
        }
    }
}

/// What a pattern will be used for: an allow pattern is held to what it says more strictly.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Use {
    /// In an allow rule or a grant.
    Allow,
    /// In a deny or ask rule.
    Restrict,
}

/// One alternative of a group.
#[derive(Clone, Debug)]
enum Alt {
    /// `-f`: the flag, alone or among combined short flags.
    Short(char),
    /// `--force`: the flag, alone or with `=value`.
    Long(String),
    /// Anything else: a glob over the word, without regard to case.
    Glob(Regex),
}

/// A group `[a|b|c]`: met when some word is one of its alternatives.
#[derive(Clone, Debug)]
pub(super) struct Group {
    alts: Vec<Alt>,
}

impl Group {
    /// Whether some word of `words` is one of the alternatives.
    pub(super) fn met_by(&self, words: &[String]) -> bool {
        words.iter().any(|w| self.alts.iter().any(|a| a.matches(w)))
    }
}

impl Alt {
    fn matches(&self, word: &str) -> bool {
        match self {
            Alt::Short(c) => {
                word.len() >= 2
                    && word.starts_with('-')
                    && !word.starts_with("--")
                    && word[1..].chars().all(|l| l.is_ascii_alphabetic())
                    && word[1..].contains(*c)
            }
            Alt::Long(flag) => {
                word == flag
                    || word
                        .strip_prefix(flag.as_str())
                        .is_some_and(|rest| rest.starts_with('='))
            }
            Alt::Glob(re) => re.is_match(word),
        }
    }

    fn parse(text: &str, at: usize) -> Result<Alt, PatternError> {
        if text.is_empty() {
            return Err(PatternError::new(
                at,
                "a group has an empty alternative: write `[a|b]` with a word on each side of `|`",
            ));
        }
        let mut letters = text.chars();
        if let (Some('-'), Some(c), None) = (letters.next(), letters.next(), letters.next())
            && c.is_ascii_alphabetic()
        {
            return Ok(Alt::Short(c));
        }
        if text.starts_with("--") && !text.contains('*') {
            return Ok(Alt::Long(text.to_string()));
        }
        let mut re = String::from("(?is)^");
        let mut chars = text.chars().peekable();
        while let Some(c) = chars.next() {
            match c {
                '\\' if chars.peek() == Some(&'*') => {
                    chars.next();
                    re.push_str(r"\*");
                }
                '*' => re.push_str(".*"),
                c => re.push_str(&regex::escape(&c.to_string())),
            }
        }
        re.push('$');
        Regex::new(&re)
            .map(Alt::Glob)
            .map_err(|e| PatternError::new(at, format!("cannot be compiled: {e}")))
    }
}

/// Takes the groups out of a `Bash(...)` specifier: the specifier without them (a prefix
/// when there were any, `…:*`) and the groups. `at` is where the specifier starts.
pub(super) fn take_groups(
    spec: &str,
    at: usize,
    used: Use,
) -> Result<(String, Vec<Group>), PatternError> {
    let chars: Vec<char> = spec.chars().collect();
    let mut rest = String::new();
    let mut groups = Vec::new();
    let mut k = 0;
    while k < chars.len() {
        let word_start = k == 0 || chars[k - 1] == ' ';
        // `[ -f x ]` (a `[` alone) is the `test` command, not a group.
        let opens = word_start && chars[k] == '[' && chars.get(k + 1).is_some_and(|c| *c != ' ');
        let close = opens
            .then(|| {
                (k + 1..chars.len())
                    .find(|&e| chars[e] == ']' && chars.get(e + 1).is_none_or(|c| *c == ' '))
            })
            .flatten();
        let Some(end) = close else {
            rest.push(chars[k]);
            k += 1;
            continue;
        };
        if used == Use::Allow {
            return Err(PatternError::new(
                at + k,
                "a group `[...]` matches a word anywhere in the command, so it would allow more than the pattern says: use it in deny and ask rules",
            ));
        }
        let inner: String = chars[k + 1..end].iter().collect();
        let mut alts = Vec::new();
        let mut pos = at + k + 1;
        for alt in inner.split('|') {
            alts.push(Alt::parse(alt, pos)?);
            pos += alt.chars().count() + 1;
        }
        groups.push(Group { alts });
        k = end + 1;
    }
    if groups.is_empty() {
        return Ok((rest, groups));
    }
    let mut rest = rest.split_whitespace().collect::<Vec<_>>().join(" ");
    if rest.is_empty() || rest == "*" {
        return Err(PatternError::new(
            at,
            "a group needs the program before it, e.g. Bash(git push [--force|-f])",
        ));
    }
    if !rest.ends_with('*') {
        rest.push_str(":*");
    }
    Ok((rest, groups))
}

/// The ways a deny or ask rule reads `part`: as it is, with its program by name rather than
/// path, and with each run of global options after the program left out (see the module's
/// documentation).
pub(super) fn readings(part: &[String]) -> Vec<Cow<'_, [String]>> {
    let mut out: Vec<Cow<'_, [String]>> = vec![Cow::Borrowed(part)];
    let Some(program) = part.first() else {
        return out;
    };
    let name = program.rsplit('/').next().unwrap_or(program);
    let renamed = (name != program && !name.is_empty()).then(|| {
        let mut p = part.to_vec();
        p[0] = name.to_string();
        p
    });
    if let Some(p) = &renamed {
        out.push(Cow::Owned(p.clone()));
    }
    let base: &[String] = renamed.as_deref().unwrap_or(part);
    // Words 1..end may be left out when each is an option or follows one.
    let mut end = 1;
    while end < base.len() {
        let w = &base[end];
        let after_option = base[end - 1].starts_with('-') && end > 1;
        if !(w.starts_with('-') || after_option) {
            break;
        }
        end += 1;
        // Options are read past to what follows them: never to nothing.
        if end == base.len() {
            break;
        }
        let mut p = Vec::with_capacity(base.len() - (end - 1));
        p.push(base[0].clone());
        p.extend_from_slice(&base[end..]);
        out.push(Cow::Owned(p));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(s: &str) -> Vec<String> {
        s.split(' ').map(str::to_string).collect()
    }

    #[test]
    fn alternatives_match_flags_combined_or_with_values_and_globs_without_case() {
        let (rest, groups) =
            take_groups("git push [--force|-f|+*|*drop database*]", 1, Use::Restrict).unwrap();
        assert_eq!(rest, "git push:*");
        let g = &groups[0];
        for yes in [
            "--force",
            "--force=x",
            "-f",
            "-uf",
            "-fu",
            "+main",
            "DROP DATABASE shop",
        ] {
            assert!(g.met_by(&[yes.to_string()]), "{yes}");
        }
        for no in [
            "--forced",
            "--force-with-lease",
            "--f",
            "-C/f",
            "main",
            "f",
            "-F",
        ] {
            assert!(!g.met_by(&[no.to_string()]), "{no}");
        }
    }

    #[test]
    fn groups_are_for_deny_and_ask_rules_and_need_a_program() {
        assert!(take_groups("git push [-f]", 1, Use::Allow).is_err());
        assert!(take_groups("[-f]", 1, Use::Restrict).is_err());
        assert!(take_groups("git push [a||b]", 1, Use::Restrict).is_err());
        // `[ -f x ]` is the test command, not a group.
        let (rest, groups) = take_groups("[ -f x ]", 1, Use::Allow).unwrap();
        assert_eq!((rest.as_str(), groups.len()), ("[ -f x ]", 0));
    }

    #[test]
    fn global_options_and_paths_are_read_past() {
        let all =
            |s: &str| -> Vec<String> { readings(&words(s)).iter().map(|p| p.join(" ")).collect() };
        assert!(all("git -C dir push --force").contains(&"git push --force".to_string()));
        assert!(all("git --git-dir=x -c a=b push").contains(&"git push".to_string()));
        assert!(all("/usr/bin/git -C d push").contains(&"git push".to_string()));
        assert!(all("kubectl -n prod delete pod x").contains(&"kubectl delete pod x".to_string()));
        // A subcommand is not an option: `git log --grep push` is never `git push`.
        assert!(
            !all("git log --grep push -f")
                .iter()
                .any(|r| r.starts_with("git push"))
        );
    }
}
