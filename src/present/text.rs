//! Text from an agent made visible, never obeyed: control characters (terminal escape
//! sequences, carriage returns), bidirectional overrides and invisible characters are shown as
//! escapes (`\u{1b}`); one-line values show line breaks as `\n`. [`visible_line`] is what
//! every surface uses before it prints a value an agent or a client chose.

/// The first line of `s` that is not blank, made visible, with ` …` when more follow.
pub(super) fn first_line(s: &str) -> String {
    let mut lines = s.lines().filter(|l| !l.trim().is_empty());
    let first = lines.next().unwrap_or("").trim();
    let more = lines.next().is_some();
    let mut out = visible_line(first);
    if more {
        out.push_str(" …");
    }
    out
}

/// Whether `c` is shown as an escape: control characters, and the characters that reorder
/// or hide text (bidirectional controls, zero-width characters, tags).
pub(super) fn is_hidden(c: char) -> bool {
    c.is_control()
        || matches!(c,
            '\u{061c}' | '\u{200b}'..='\u{200f}' | '\u{2028}'..='\u{202e}'
            | '\u{2060}'..='\u{2064}' | '\u{2066}'..='\u{206f}' | '\u{feff}'
            | '\u{fff9}'..='\u{fffb}' | '\u{e0000}'..='\u{e007f}')
}

fn push_visible(out: &mut String, c: char, keep_breaks: bool) {
    match c {
        '\n' if keep_breaks => out.push('\n'),
        '\t' if keep_breaks => out.push('\t'),
        '\n' => out.push_str("\\n"),
        '\t' => out.push_str("\\t"),
        '\r' => out.push_str("\\r"),
        c if is_hidden(c) => out.push_str(&format!("\\u{{{:x}}}", c as u32)),
        c => out.push(c),
    }
}

/// `s` with line breaks and every hidden character shown as an escape: safe on one line.
pub(crate) fn visible_line(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        push_visible(&mut out, c, false);
    }
    out
}

/// `text` with a zero-width space after every second backtick in a row, so that no run of
/// three (a code fence) survives, however long the run was: outside text inside a fenced
/// block cannot close it early.
pub(crate) fn break_fences(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut run = 0;
    for c in text.chars() {
        if c == '`' {
            if run == 2 {
                out.push('\u{200b}');
                run = 0;
            }
            run += 1;
        } else {
            run = 0;
        }
        out.push(c);
    }
    out
}

/// `s` with every hidden character shown as an escape, line breaks and tabs kept.
pub(crate) fn visible_text(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        push_visible(&mut out, c, true);
    }
    out
}
