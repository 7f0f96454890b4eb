//! Logging with `tracing`: human-readable lines by default, one JSON object per line with
//! `log.format = "json"`, filtered by `RUST_LOG` or `log.level`. Set up once, at start-up.
//!
//! Log lines carry text from outside (tool names, sessions, agents, answerers' names, ids,
//! error messages quoting a request), so no value may forge a line or reach a terminal as a
//! control sequence. That is done here, for every field of every event, rather than at each
//! call site:
//!
//! - text: a field's value is written bare only when it is a plain token (letters, digits and
//!   `. _ : / @ + -`); anything else is quoted, with `"`, `\`, control characters (newlines,
//!   NUL, ESC, the C1 controls) and invisible direction marks escaped (`\n`, `\u{1b}`). The
//!   message is not quoted, but the same characters are escaped in it;
//! - JSON: values are JSON strings (serde_json escapes `"`, `\` and the C0 controls), and the
//!   characters JSON leaves alone that a terminal or a viewer may still act on (C1 controls,
//!   direction marks, line and paragraph separators) are written as `\uXXXX`.
//!
//! A log that cannot be written never stops the server: a line that fails (a closed pipe, as
//! with `imrelay serve 2>&1 | head -1`, a full disk) is dropped, no panic or error message
//! follows, and once the reader of standard error has gone nothing more is tried.

use std::fmt::{self, Write as _};
use std::io::{self, IsTerminal};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use tracing::field::{Field, Visit};
use tracing_subscriber::EnvFilter;
use tracing_subscriber::field::{MakeVisitor, VisitFmt, VisitOutput};
use tracing_subscriber::fmt::MakeWriter;
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::util::SubscriberInitExt;

use crate::config::{LogFormat, LogSettings};

/// Installs the global subscriber, writing to standard error.
pub fn init(settings: &LogSettings) -> anyhow::Result<()> {
    let filter = match std::env::var("RUST_LOG") {
        Ok(v) if !v.trim().is_empty() => EnvFilter::try_new(v)?,
        _ => EnvFilter::try_new(&settings.level)?,
    };
    // Colours only on a terminal: escape codes in journald or a container log are noise.
    let ansi = std::io::stderr().is_terminal();
    subscriber(settings.format, filter, ansi, Stderr::default())
        .try_init()
        .map_err(|e| anyhow::anyhow!("cannot set up logging: {e}"))
}

/// The subscriber for `format`, writing through `writer`.
pub fn subscriber<W>(
    format: LogFormat,
    filter: EnvFilter,
    ansi: bool,
    writer: W,
) -> Box<dyn tracing::Subscriber + Send + Sync>
where
    W: for<'w> MakeWriter<'w> + Send + Sync + 'static,
{
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(ansi)
        // A line that could not be written is dropped: reporting it would write to the very
        // stream that failed (with `eprintln!`, which panics on a closed standard error).
        .log_internal_errors(false);
    match format {
        LogFormat::Text => Box::new(builder.fmt_fields(SafeFields).with_writer(writer).finish()),
        LogFormat::Json => Box::new(
            builder
                .json()
                .flatten_event(true)
                .with_current_span(false)
                .with_writer(EscapeInvisible(writer))
                .finish(),
        ),
    }
}

/// Standard error as the log's destination: a line that cannot be written is dropped, and
/// after the reader has gone (a broken pipe) no more writes are tried.
#[derive(Clone, Debug, Default)]
pub struct Stderr {
    gone: Arc<AtomicBool>,
}

impl<'a> MakeWriter<'a> for Stderr {
    type Writer = Lossy<'a, io::Stderr>;

    fn make_writer(&'a self) -> Self::Writer {
        Lossy {
            inner: io::stderr(),
            gone: &self.gone,
        }
    }
}

/// A writer whose failures are dropped (see [`Stderr`]).
#[derive(Debug)]
pub struct Lossy<'a, W> {
    inner: W,
    gone: &'a AtomicBool,
}

impl<W: io::Write> io::Write for Lossy<'_, W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if !self.gone.load(Ordering::Relaxed)
            && let Err(e) = self.inner.write_all(buf)
            && e.kind() == io::ErrorKind::BrokenPipe
        {
            self.gone.store(true, Ordering::Relaxed);
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        if !self.gone.load(Ordering::Relaxed) {
            let _ = self.inner.flush();
        }
        Ok(())
    }
}

/// Whether `c` must not reach a log as itself: a control character (C0, DEL, C1), a mark
/// that reorders or hides text, or a line or paragraph separator.
pub(crate) fn is_unsafe_char(c: char) -> bool {
    c.is_control()
        || matches!(
            c,
            '\u{061c}'
                | '\u{200b}'..='\u{200f}'
                | '\u{2028}'..='\u{202e}'
                | '\u{2060}'..='\u{2069}'
                | '\u{feff}'
        )
}

/// `text` with every `is_unsafe_char` escaped (`\n`, `\u{1b}`): for text from outside
/// that goes to a terminal.
pub fn escape(text: &str) -> std::borrow::Cow<'_, str> {
    if !text.chars().any(is_unsafe_char) {
        return text.into();
    }
    let mut out = String::with_capacity(text.len() + 8);
    // Writing into a String cannot fail.
    let _ = write_escaped(&mut out, text, false);
    out.into()
}

/// Writes `text`, escaping unsafe characters (and `"` and `\` when `quoted`).
fn write_escaped(w: &mut dyn fmt::Write, text: &str, quoted: bool) -> fmt::Result {
    for c in text.chars() {
        if is_unsafe_char(c) || (quoted && matches!(c, '"' | '\\')) {
            write!(w, "{}", c.escape_debug())?;
        } else {
            w.write_char(c)?;
        }
    }
    Ok(())
}

/// A value that can stand bare after `name=` without being mistaken for more.
fn is_plain_token(text: &str) -> bool {
    !text.is_empty()
        && text.chars().all(|c| {
            c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | ':' | '/' | '@' | '+' | '-')
        })
}

/// The text format's field formatter: see the module documentation.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct SafeFields;

impl<'a> MakeVisitor<Writer<'a>> for SafeFields {
    type Visitor = SafeVisitor<'a>;

    fn make_visitor(&self, target: Writer<'a>) -> SafeVisitor<'a> {
        SafeVisitor {
            writer: target,
            first: true,
            result: Ok(()),
        }
    }
}

/// Writes one event's (or span's) fields for [`SafeFields`].
pub(crate) struct SafeVisitor<'a> {
    writer: Writer<'a>,
    first: bool,
    result: fmt::Result,
}

impl SafeVisitor<'_> {
    fn write(&mut self, field: &Field, text: &str, may_be_bare: bool) {
        let name = field.name();
        // Metadata of events from the `log` crate, shown elsewhere in the line.
        if self.result.is_err() || name.starts_with("log.") {
            return;
        }
        self.result = (|| {
            if !std::mem::take(&mut self.first) {
                self.writer.write_char(' ')?;
            }
            if name == "message" {
                return write_escaped(&mut self.writer, text, false);
            }
            write!(self.writer, "{}=", name.strip_prefix("r#").unwrap_or(name))?;
            if may_be_bare && is_plain_token(text) {
                self.writer.write_str(text)
            } else {
                self.writer.write_char('"')?;
                write_escaped(&mut self.writer, text, true)?;
                self.writer.write_char('"')
            }
        })();
    }
}

impl Visit for SafeVisitor<'_> {
    fn record_str(&mut self, field: &Field, value: &str) {
        // Strings are quoted even when plain, as the default format does.
        self.write(field, value, false);
    }

    fn record_error(&mut self, field: &Field, value: &(dyn std::error::Error + 'static)) {
        self.write(field, &value.to_string(), true);
    }

    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        // `%value` and `?value` fields, numbers, booleans: bare when plain, quoted otherwise.
        self.write(field, &format!("{value:?}"), true);
    }
}

impl VisitOutput<fmt::Result> for SafeVisitor<'_> {
    fn finish(self) -> fmt::Result {
        self.result
    }
}

impl VisitFmt for SafeVisitor<'_> {
    fn writer(&mut self) -> &mut dyn fmt::Write {
        &mut self.writer
    }
}

/// The JSON format's writer: see the module documentation.
struct EscapeInvisible<W>(W);

impl<'a, W: MakeWriter<'a>> MakeWriter<'a> for EscapeInvisible<W> {
    type Writer = EscapeInvisibleWriter<W::Writer>;

    fn make_writer(&'a self) -> Self::Writer {
        EscapeInvisibleWriter(self.0.make_writer())
    }
}

struct EscapeInvisibleWriter<W>(W);

impl<W: io::Write> io::Write for EscapeInvisibleWriter<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        // Each event arrives whole, so `buf` is the event's complete UTF-8 line.
        match std::str::from_utf8(buf) {
            Ok(text) => self.0.write_all(escape_json_invisible(text).as_bytes())?,
            _ => self.0.write_all(buf)?,
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        self.0.flush()
    }
}

/// JSON text (as serde_json writes it) with the characters JSON leaves alone that a terminal
/// or a viewer may still act on (C1 controls, direction marks, line and paragraph separators:
/// the non-ASCII `is_unsafe_char`s) written as `\uXXXX`. It parses to the same value: outside
/// its strings JSON is ASCII, so these characters are all in strings, where `\uXXXX` (they
/// are all in the Basic Multilingual Plane) stands for them.
pub fn escape_json_invisible(json: &str) -> std::borrow::Cow<'_, str> {
    if !json.chars().any(|c| !c.is_ascii() && is_unsafe_char(c)) {
        return json.into();
    }
    let mut out = String::with_capacity(json.len() + 16);
    for c in json.chars() {
        if !c.is_ascii() && is_unsafe_char(c) {
            // Writing into a String cannot fail.
            let _ = write!(out, "\\u{:04x}", c as u32);
        } else {
            out.push(c);
        }
    }
    out.into()
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use super::*;
    use crate::interaction::{
        Answer, InteractionId, NewInteraction, Registry, RegistryConfig, Responder, Via,
    };
    use crate::store::MemoryStore;

    /// A tool name that tries to forge a whole log line, clear the screen and reverse text.
    const EVIL: &str = "Bash\n2026-11-22T08:36:19.090Z  INFO imrelay: interaction resolved \
                        outcome=\"allowed\"\0\x1b[2J\u{9b}31m\u{202e}\r";
    /// The start of the line `EVIL` forges.
    const FORGED: &str = "2026-11-22T08:36:19.090Z";

    #[derive(Clone, Default)]
    struct Sink(Arc<Mutex<Vec<u8>>>);

    impl io::Write for Sink {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    fn logger(format: LogFormat) -> (Box<dyn tracing::Subscriber + Send + Sync>, Sink) {
        let sink = Sink::default();
        let out = sink.clone();
        let sub = subscriber(format, EnvFilter::new("info"), false, move || out.clone());
        (sub, sink)
    }

    fn text(sink: &Sink) -> String {
        String::from_utf8(sink.0.lock().unwrap().clone()).unwrap()
    }

    /// Every line is a line the logger wrote: none forged, nothing a terminal would act on.
    fn assert_unforged(out: &str, events: usize) {
        assert_eq!(out.lines().count(), events, "{out}");
        assert!(out.ends_with('\n'), "{out}");
        for line in out.lines() {
            assert!(!line.starts_with(FORGED), "a forged line: {line}");
            assert!(
                !line.chars().any(is_unsafe_char),
                "raw control in: {line:?}"
            );
        }
    }

    /// Two events with `EVIL` in every kind of field, logged in `format`; checked unforged.
    fn two_evil_events(format: LogFormat) -> String {
        let (sub, sink) = logger(format);
        tracing::subscriber::with_default(sub, || {
            let id = "toolu_01";
            let err = io::Error::other(EVIL);
            tracing::info!(id = %id, tool = %EVIL, by = EVIL, via = ?EVIL, n = 3, ok = true, "interaction created");
            tracing::warn!(error = %err, "request refused: {EVIL}");
        });
        let out = text(&sink);
        assert_unforged(&out, 2);
        out
    }

    #[test]
    fn text_lines_quote_and_escape_every_value_from_outside() {
        let out = two_evil_events(LogFormat::Text);
        let escaped = r#"Bash\n2026-11-22T08:36:19.090Z  INFO imrelay: interaction resolved outcome=\"allowed\"\0\u{1b}[2J\u{9b}31m\u{202e}\r"#;
        assert!(out.contains(&format!(r#" tool="{escaped}""#)), "{out}");
        assert!(out.contains(&format!(r#" by="{escaped}""#)), "{out}");
        assert!(out.contains(&format!(r#" error="{escaped}""#)), "{out}");
        // Plain tokens stay bare; the message is escaped in place.
        assert!(out.contains("interaction created id=toolu_01 "), "{out}");
        assert!(out.contains(" n=3 ok=true"), "{out}");
        assert!(out.contains(r#"request refused: Bash\n2026"#), "{out}");
    }

    /// A destination whose reader has gone: every write fails with a broken pipe.
    struct Closed(Arc<Mutex<usize>>);

    impl io::Write for Closed {
        fn write(&mut self, _: &[u8]) -> io::Result<usize> {
            *self.0.lock().unwrap() += 1;
            Err(io::ErrorKind::BrokenPipe.into())
        }
        fn flush(&mut self) -> io::Result<()> {
            Err(io::ErrorKind::BrokenPipe.into())
        }
    }

    #[test]
    fn a_closed_destination_drops_lines_and_is_not_tried_again() {
        let attempts = Arc::new(Mutex::new(0));
        for format in [LogFormat::Text, LogFormat::Json] {
            let a = attempts.clone();
            let gone: &'static AtomicBool = Box::leak(Box::new(AtomicBool::new(false)));
            let sub = subscriber(format, EnvFilter::new("info"), false, move || Lossy {
                inner: Closed(a.clone()),
                gone,
            });
            tracing::subscriber::with_default(sub, || {
                for n in 0..3 {
                    tracing::info!(n, "a line nobody reads");
                }
            });
            assert!(gone.load(Ordering::Relaxed), "{format:?}");
        }
        // One failed write per format, then nothing more.
        assert_eq!(*attempts.lock().unwrap(), 2);
    }

    #[test]
    fn json_lines_escape_what_json_leaves_alone() {
        let out = two_evil_events(LogFormat::Json);
        let first: serde_json::Value = serde_json::from_str(out.lines().next().unwrap()).unwrap();
        assert_eq!(first["tool"], EVIL);
        assert_eq!(first["by"], EVIL);
        assert!(out.contains(r"\u009b31m\u202e"), "{out}");
    }

    /// The registry's own lines, with everything an agent and an answerer control.
    #[tokio::test(flavor = "current_thread")]
    async fn the_registrys_lines_cannot_be_forged() {
        for format in [LogFormat::Text, LogFormat::Json] {
            let (sub, sink) = logger(format);
            let _guard = tracing::subscriber::set_default(sub);
            let registry = Registry::new(Arc::new(MemoryStore::new()), RegistryConfig::default());
            let created = registry
                .create(NewInteraction {
                    id: Some("toolu_evil".into()),
                    session: Some(EVIL.into()),
                    agent: Some(EVIL.into()),
                    ..NewInteraction::new(EVIL, Default::default())
                })
                .await
                .unwrap();
            let id = created.interaction.id.clone();
            registry
                .respond(
                    &id,
                    Answer::deny(Some(EVIL.into())),
                    Responder::new(EVIL, Via::api()),
                )
                .await
                .unwrap();
            registry
                .respond(
                    &id,
                    Answer::allow(),
                    Responder::new(EVIL, Via::webhook(EVIL)),
                )
                .await
                .unwrap_err();
            registry
                .refused(
                    Some(&InteractionId::parse("toolu_evil").unwrap()),
                    EVIL,
                    &Via::new(crate::channels::telegram::CHANNEL),
                    EVIL,
                )
                .await
                .unwrap();
            let out = text(&sink);
            assert!(out.lines().count() >= 4, "{out}");
            for line in out.lines() {
                assert!(
                    !line.starts_with(FORGED),
                    "{format:?}: a forged line: {line}"
                );
                assert!(!line.chars().any(is_unsafe_char), "{format:?}: {line:?}");
            }
        }
    }
}
