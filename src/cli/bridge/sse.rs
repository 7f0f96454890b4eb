//! OpenCode's event stream read as server-sent events (the HTML standard's "event stream
//! interpretation"), chunk by chunk, as the bridge needs it:
//!
//! - **linear time**: each byte is looked at a fixed number of times, however the stream is
//!   cut into chunks and however long a line is (a 16 MB line costs what 16 MB of short
//!   lines cost);
//! - **bounded memory**: an event's data may take at most `max` bytes; a longer event is
//!   skipped as it arrives (its bytes are not kept) and reported as [`Item::TooLong`];
//! - **one event at a time**: an event whose data is not UTF-8 is skipped and reported as
//!   [`Item::NotUtf8`]; the events before and after it are read as usual.
//!
//! Only `data` fields matter to the bridge: `event`, `id` and `retry` are read past, and so
//! are comments. Lines end with CRLF, LF or CR, as the standard allows.

/// The most capacity the line buffer keeps between events.
const KEEP_CAPACITY: usize = 64 * 1024;

/// What a chunk completes.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Item {
    /// An event's data (its `data` lines joined by newlines).
    Event(String),
    /// An event whose data was longer than the bound: skipped.
    TooLong {
        /// How many bytes of it were seen before it ended.
        bytes: usize,
    },
    /// An event whose data was not UTF-8: skipped.
    NotUtf8,
}

/// An event over the bound, being read past.
#[derive(Clone, Copy)]
struct Over {
    /// Its bytes seen so far (line ends not counted).
    seen: usize,
    /// The bytes of its current line.
    line: usize,
}

/// The reader's state between chunks.
pub(super) struct Events {
    max: usize,
    /// The line being read (without its end).
    line: Vec<u8>,
    /// The data of the event being read.
    data: Vec<u8>,
    /// Whether the event being read has a `data` field.
    has_data: bool,
    /// The event being read is over the bound: what was seen of it, none kept.
    over: Option<Over>,
    /// The last chunk ended with CR: an LF opening the next one ends nothing.
    after_cr: bool,
}

impl Events {
    /// A reader keeping at most `max` bytes of an event's data.
    pub(super) fn new(max: usize) -> Self {
        Self {
            max,
            line: Vec::new(),
            data: Vec::new(),
            has_data: false,
            over: None,
            after_cr: false,
        }
    }

    /// Reads `chunk`, adding what it completes to `out`.
    pub(super) fn push(&mut self, mut chunk: &[u8], out: &mut Vec<Item>) {
        if self.after_cr {
            self.after_cr = false;
            if let Some(rest) = chunk.strip_prefix(b"\n") {
                chunk = rest;
            }
        }
        while !chunk.is_empty() {
            match chunk.iter().position(|&b| b == b'\n' || b == b'\r') {
                None => {
                    self.take(chunk);
                    return;
                }
                Some(end) => {
                    self.take(&chunk[..end]);
                    let cr = chunk[end] == b'\r';
                    chunk = &chunk[end + 1..];
                    if cr {
                        match chunk.first() {
                            Some(b'\n') => chunk = &chunk[1..],
                            Some(_) => {}
                            None => self.after_cr = true,
                        }
                    }
                    self.line_ended(out);
                }
            }
        }
    }

    /// Adds `bytes` to the line being read, unless the event is over the bound (then they
    /// are counted, not kept).
    fn take(&mut self, bytes: &[u8]) {
        if let Some(over) = &mut self.over {
            over.seen += bytes.len();
            over.line += bytes.len();
            return;
        }
        let line = self.line.len() + bytes.len();
        if self.data.len() + line > self.max {
            self.over = Some(Over {
                seen: self.data.len() + line,
                line,
            });
            self.data = Vec::new();
            self.line = Vec::new();
            return;
        }
        self.line.extend_from_slice(bytes);
    }

    /// A line has ended: a field of the event, or (empty) the event's end.
    fn line_ended(&mut self, out: &mut Vec<Item>) {
        if let Some(over) = &mut self.over {
            // Its lines were not kept: only an empty one (the event's end) matters.
            if over.line == 0 {
                self.dispatch(out);
            } else {
                over.line = 0;
            }
            return;
        }
        let line = std::mem::take(&mut self.line);
        if line.is_empty() {
            return self.dispatch(out);
        }
        let (name, value) = match line.iter().position(|&b| b == b':') {
            Some(0) => return, // a comment
            Some(colon) => {
                let value = &line[colon + 1..];
                (&line[..colon], value.strip_prefix(b" ").unwrap_or(value))
            }
            None => (&line[..], &[][..]),
        };
        if name == b"data" {
            self.data.extend_from_slice(value);
            self.data.push(b'\n');
            self.has_data = true;
        }
        // `event`, `id`, `retry` and unknown fields: nothing the bridge reads.
        self.line = line;
        self.line.clear();
    }

    /// The event being read has ended.
    fn dispatch(&mut self, out: &mut Vec<Item>) {
        if let Some(over) = self.over.take() {
            out.push(Item::TooLong { bytes: over.seen });
        } else if self.has_data {
            let mut data = std::mem::take(&mut self.data);
            data.pop(); // the newline after the last data line
            match String::from_utf8(data) {
                Ok(text) => out.push(Item::Event(text)),
                Err(_) => out.push(Item::NotUtf8),
            }
        }
        self.data.clear();
        self.has_data = false;
        // A long line's buffer is not kept for the short ones that follow.
        if self.line.capacity() > KEEP_CAPACITY {
            self.line = Vec::new();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(max: usize, chunks: &[&[u8]]) -> Vec<Item> {
        let mut events = Events::new(max);
        let mut out = Vec::new();
        for c in chunks {
            events.push(c, &mut out);
        }
        out
    }

    fn event(s: &str) -> Item {
        Item::Event(s.to_string())
    }

    #[test]
    fn data_lines_make_events_whatever_the_line_ends_and_the_cuts() {
        let stream = b"data: {\"a\":1}\n\n: a comment\nevent: x\nid: 7\ndata:two\ndata: lines\n\ndata\n\nretry: 5\n\n";
        let want = vec![event("{\"a\":1}"), event("two\nlines"), event("")];
        assert_eq!(read(1024, &[stream]), want);
        // Cut at every byte.
        let bytes: Vec<&[u8]> = stream.chunks(1).collect();
        assert_eq!(read(1024, &bytes), want);
        // CRLF and CR line ends, cut between CR and LF.
        assert_eq!(
            read(
                1024,
                &[b"data: a\r", b"\n\r", b"\ndata: b\r\rdata: c\r\n\r\n"]
            ),
            vec![event("a"), event("b"), event("c")]
        );
        // An event without data, and an unfinished one at the end, make nothing.
        assert_eq!(read(1024, &[b"event: x\n\ndata: cut"]), vec![]);
    }

    #[test]
    fn an_event_over_the_bound_is_skipped_and_the_next_ones_read() {
        let long = "x".repeat(100);
        let stream = format!("data: {long}\ndata: more\n\ndata: after\n\n");
        let out = read(64, &[stream.as_bytes()]);
        assert_eq!(out.len(), 2, "{out:?}");
        assert!(
            matches!(out[0], Item::TooLong { bytes } if bytes > 64),
            "{out:?}"
        );
        assert_eq!(out[1], event("after"));
        // The same cut in small pieces, the long line's end in the middle of a chunk.
        let pieces: Vec<&[u8]> = stream.as_bytes().chunks(7).collect();
        let out = read(64, &pieces);
        assert!(matches!(out[0], Item::TooLong { .. }), "{out:?}");
        assert_eq!(out[1], event("after"));
        // Several data lines that reach the bound together.
        let stream = format!(
            "data: {}\ndata: {}\n\ndata: ok\n\n",
            "a".repeat(40),
            "b".repeat(40)
        );
        let out = read(64, &[stream.as_bytes()]);
        assert!(matches!(out[0], Item::TooLong { .. }), "{out:?}");
        assert_eq!(out[1], event("ok"));
    }

    #[test]
    fn an_event_that_is_not_utf8_is_skipped_alone() {
        let out = read(
            1024,
            &[
                b"data: before\n\ndata: bad \xff\xfe\n\ndata: after \xc3",
                b"\xa9\n\n",
            ],
        );
        assert_eq!(
            out,
            vec![event("before"), Item::NotUtf8, event("after \u{e9}")]
        );
    }

    #[test]
    fn memory_stays_within_the_bound_however_long_the_line() {
        let mut events = Events::new(1024);
        let mut out = Vec::new();
        events.push(b"data: ", &mut out);
        let chunk = vec![b'x'; 64 * 1024];
        for _ in 0..256 {
            events.push(&chunk, &mut out);
            assert!(events.line.capacity() + events.data.capacity() <= 2 * 1024);
        }
        events.push(b"\n\ndata: next\n\n", &mut out);
        assert_eq!(
            out[0],
            Item::TooLong {
                bytes: 6 + 256 * 64 * 1024
            }
        );
        assert_eq!(out[1], event("next"));
    }
}
