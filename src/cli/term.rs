//! The terminal under `imrelay watch`: messages printed above a prompt line that is redrawn
//! in place (with its countdown), and what a person types, read without blocking the rest.
//!
//! With a terminal on both standard input and output the terminal is put in raw mode: keys
//! arrive one by one (Ctrl-C among them), the typed line is edited here and the prompt is
//! redrawn every second. Otherwise (input or output piped, `TERM=dumb`) it is plain lines in,
//! plain lines out: no redrawing, no colour, Ctrl-C as a signal. The terminal is restored on
//! every way out, a panic included.

use std::io::{IsTerminal, Write};
use std::sync::mpsc as std_mpsc;
use std::time::Duration;

use crossterm::event::{self, Event, KeyCode, KeyEvent, KeyEventKind, KeyModifiers};
use crossterm::{cursor, execute, queue, terminal};
use tokio::sync::{mpsc, oneshot};
use unicode_width::UnicodeWidthStr;

use super::view::{Paint, Painter};

/// Something a person did.
#[derive(Debug)]
pub enum Input {
    /// A key (raw mode).
    Key(KeyEvent),
    /// Pasted text (raw mode).
    Paste(String),
    /// A whole line (plain mode).
    Line(String),
    /// The input ended (Ctrl-D on an empty line, or end of file).
    Eof,
    /// The window changed size.
    Resized,
}

/// What a key did to the line being typed.
#[derive(Debug, PartialEq, Eq)]
pub enum Typed {
    /// Enter: the line.
    Submit(String),
    /// Ctrl-C.
    Interrupt,
    /// Ctrl-D on an empty line, or the end of input.
    Eof,
    /// Esc: the line was cleared.
    Escape,
    /// The line changed, or nothing happened.
    Edited,
}

enum Control {
    Pause(oneshot::Sender<()>),
    Resume,
}

/// The terminal: output above a prompt, input from a reader thread.
pub(crate) struct Term {
    tty: bool,
    painter: Painter,
    out: std::io::Stdout,
    /// The prompt's status part ("[4:59 · 2 more]") and text.
    status: String,
    prompt: String,
    /// Plain mode: the prompt last printed, not printed again until it changes.
    printed_prompt: String,
    /// What is being typed (raw mode).
    line: String,
    /// While another program owns the terminal, output is held here.
    held: Option<Vec<String>>,
    control: Option<std_mpsc::Sender<Control>>,
    raw: bool,
}

impl Term {
    /// Sets the terminal up and starts reading input.
    pub(crate) fn start() -> std::io::Result<(Term, mpsc::UnboundedReceiver<Input>)> {
        let dumb = std::env::var("TERM").is_ok_and(|t| t == "dumb");
        let tty = std::io::stdin().is_terminal() && std::io::stdout().is_terminal() && !dumb;
        let (tx, rx) = mpsc::unbounded_channel();
        let mut term = Term {
            tty,
            painter: if tty {
                Painter::for_stdout()
            } else {
                Painter::plain()
            },
            out: std::io::stdout(),
            status: String::new(),
            prompt: String::new(),
            printed_prompt: String::new(),
            line: String::new(),
            held: None,
            control: None,
            raw: false,
        };
        if tty {
            term.enter_raw()?;
            let (ctl_tx, ctl_rx) = std_mpsc::channel();
            term.control = Some(ctl_tx);
            std::thread::Builder::new()
                .name("imrelay-keys".into())
                .spawn(move || read_keys(tx, ctl_rx))?;
        } else {
            std::thread::Builder::new()
                .name("imrelay-lines".into())
                .spawn(move || read_lines(tx))?;
        }
        Ok((term, rx))
    }

    /// Whether keys are read one by one and the prompt redrawn (a terminal on both ends).
    pub(crate) fn is_tty(&self) -> bool {
        self.tty
    }

    /// The painter for this terminal's output.
    pub(crate) fn painter(&self) -> Painter {
        self.painter
    }

    /// Columns available.
    pub(crate) fn width(&self) -> usize {
        if self.tty {
            // A terminal that does not know its size says 0.
            terminal::size()
                .ok()
                .map(|(w, _)| usize::from(w))
                .filter(|w| *w > 0)
                .unwrap_or(80)
                .max(40)
        } else {
            80
        }
    }

    fn enter_raw(&mut self) -> std::io::Result<()> {
        terminal::enable_raw_mode()?;
        execute!(self.out, crossterm::event::EnableBracketedPaste)?;
        self.raw = true;
        Ok(())
    }

    fn leave_raw(&mut self) {
        if self.raw {
            let _ = execute!(self.out, crossterm::event::DisableBracketedPaste);
            let _ = terminal::disable_raw_mode();
            self.raw = false;
        }
    }

    /// Prints `lines` above the prompt.
    pub(crate) fn say(&mut self, lines: &[String]) {
        if let Some(held) = &mut self.held {
            held.extend(lines.iter().cloned());
            return;
        }
        if self.tty {
            let _ = queue!(
                self.out,
                cursor::MoveToColumn(0),
                terminal::Clear(terminal::ClearType::CurrentLine)
            );
            for l in lines {
                let _ = write!(self.out, "{l}\r\n");
            }
            self.draw();
        } else {
            for l in lines {
                let _ = writeln!(self.out, "{l}");
            }
            self.draw();
        }
    }

    /// Prints one line above the prompt.
    pub(crate) fn say1(&mut self, line: impl Into<String>) {
        self.say(&[line.into()]);
    }

    /// Sets the prompt: `status` is redrawn every second in a terminal and left out of
    /// plain output.
    pub(crate) fn set_prompt(&mut self, status: String, prompt: String) {
        self.status = status;
        self.prompt = prompt;
        self.draw();
    }

    /// Plain mode: the next prompt is printed even if it reads as the last one did (a new
    /// interaction or question asks again).
    pub(crate) fn fresh_prompt(&mut self) {
        self.printed_prompt.clear();
    }

    /// Redraws the prompt (its countdown).
    pub(crate) fn refresh_status(&mut self, status: String) {
        if self.tty && status != self.status {
            self.status = status;
            self.draw();
        }
    }

    /// Rings the bell (in a terminal).
    pub(crate) fn bell(&mut self) {
        if self.tty && self.held.is_none() {
            let _ = write!(self.out, "\x07");
            let _ = self.out.flush();
        }
    }

    fn draw(&mut self) {
        if self.held.is_some() {
            return;
        }
        if !self.tty {
            // The countdown is not redrawn here: the prompt is printed (with the time left
            // then) when it changes.
            if !self.prompt.is_empty() && self.prompt != self.printed_prompt {
                let status = if self.status.is_empty() {
                    String::new()
                } else {
                    format!("{} ", self.status)
                };
                let _ = writeln!(self.out, "{status}{}", self.prompt.trim_end());
                self.printed_prompt = self.prompt.clone();
            }
            let _ = self.out.flush();
            return;
        }
        let status = if self.status.is_empty() {
            String::new()
        } else {
            format!("{} ", self.status)
        };
        let fixed = status.width() + self.prompt.width();
        let room = self.width().saturating_sub(fixed + 2);
        let mut shown = String::new();
        let mut used = 0;
        for c in self.line.chars().rev() {
            let w = unicode_width::UnicodeWidthChar::width(c).unwrap_or(1);
            if used + w > room {
                shown.insert(0, '…');
                break;
            }
            used += w;
            shown.insert(0, c);
        }
        let status = self.painter.paint(Paint::Yellow, &status);
        let _ = queue!(
            self.out,
            cursor::MoveToColumn(0),
            terminal::Clear(terminal::ClearType::CurrentLine)
        );
        let _ = write!(
            self.out,
            "{status}{}{}",
            self.painter.paint(Paint::Bold, &self.prompt),
            super::super::present::visible_line(&shown)
        );
        let _ = self.out.flush();
    }

    /// Applies a key to the line being typed.
    pub(crate) fn key(&mut self, key: KeyEvent) -> Typed {
        let ctrl = key.modifiers.contains(KeyModifiers::CONTROL);
        // Ctrl-J is a line feed: Enter too.
        if key.code == KeyCode::Enter || (ctrl && key.code == KeyCode::Char('j')) {
            let line = std::mem::take(&mut self.line);
            self.echo(&line);
            return Typed::Submit(line);
        }
        let typed = match key.code {
            KeyCode::Char('c') if ctrl => return Typed::Interrupt,
            KeyCode::Char('d') if ctrl => {
                if self.line.is_empty() {
                    return Typed::Eof;
                }
                Typed::Edited
            }
            KeyCode::Char('u') if ctrl => {
                self.line.clear();
                Typed::Edited
            }
            KeyCode::Char('w') if ctrl => {
                let trimmed = self.line.trim_end().len();
                self.line.truncate(trimmed);
                let cut = self.line.rfind(' ').map(|p| p + 1).unwrap_or(0);
                self.line.truncate(cut);
                Typed::Edited
            }
            KeyCode::Char(_) if ctrl => Typed::Edited,
            KeyCode::Char(c) => {
                if self.line.chars().count() < MAX_LINE {
                    self.line.push(c);
                }
                Typed::Edited
            }
            KeyCode::Backspace => {
                self.line.pop();
                Typed::Edited
            }
            KeyCode::Esc => {
                self.line.clear();
                Typed::Escape
            }
            _ => Typed::Edited,
        };
        self.draw();
        typed
    }

    /// Adds pasted text to the line (line breaks become spaces).
    pub(crate) fn paste(&mut self, text: &str) {
        for c in text.chars() {
            if self.line.chars().count() >= MAX_LINE {
                break;
            }
            self.line.push(if c == '\n' || c == '\r' { ' ' } else { c });
        }
        self.draw();
    }

    /// A line read in plain mode, echoed so the output reads as a conversation.
    pub(crate) fn echo(&mut self, line: &str) {
        let shown = format!(
            "{}{}{}",
            if self.tty && !self.status.is_empty() {
                self.painter.paint(Paint::Yellow, &self.status) + " "
            } else {
                String::new()
            },
            self.painter.paint(Paint::Bold, &self.prompt),
            super::super::present::visible_line(line)
        );
        if self.tty {
            let _ = queue!(
                self.out,
                cursor::MoveToColumn(0),
                terminal::Clear(terminal::ClearType::CurrentLine)
            );
            let _ = write!(self.out, "{shown}\r\n");
            let _ = self.out.flush();
        } else {
            let _ = writeln!(self.out, "› {}", present_line(line));
            let _ = self.out.flush();
        }
    }

    /// Takes what was typed and not sent.
    pub(crate) fn take_line(&mut self) -> String {
        let l = std::mem::take(&mut self.line);
        self.draw();
        l
    }

    /// Hands the terminal to another program: stops reading keys, leaves raw mode, and
    /// holds output until [`Term::resume`].
    pub(crate) async fn suspend(&mut self) {
        if let Some(ctl) = &self.control {
            let (ack_tx, ack_rx) = oneshot::channel();
            if ctl.send(Control::Pause(ack_tx)).is_ok() {
                let _ = ack_rx.await;
            }
        }
        let _ = queue!(
            self.out,
            cursor::MoveToColumn(0),
            terminal::Clear(terminal::ClearType::CurrentLine)
        );
        let _ = self.out.flush();
        self.leave_raw();
        self.held = Some(Vec::new());
    }

    /// Takes the terminal back after [`Term::suspend`] and prints what was held.
    pub(crate) fn resume(&mut self) {
        if self.tty {
            let _ = self.enter_raw();
        }
        if let Some(ctl) = &self.control {
            let _ = ctl.send(Control::Resume);
        }
        let held = self.held.take().unwrap_or_default();
        if held.is_empty() {
            self.draw();
        } else {
            self.say(&held);
        }
    }

    /// Clears the prompt and restores the terminal.
    pub(crate) fn finish(&mut self) {
        self.held = None;
        if self.tty {
            let _ = queue!(
                self.out,
                cursor::MoveToColumn(0),
                terminal::Clear(terminal::ClearType::CurrentLine)
            );
        }
        self.prompt.clear();
        self.status.clear();
        let _ = self.out.flush();
        self.leave_raw();
        self.control = None;
    }
}

impl Drop for Term {
    fn drop(&mut self) {
        self.leave_raw();
    }
}

/// Longest line kept while typing, in characters.
const MAX_LINE: usize = 8192;

fn present_line(s: &str) -> String {
    super::super::present::visible_line(s)
}

/// Reads keys until the receiver is gone, pausing while another program has the terminal.
fn read_keys(tx: mpsc::UnboundedSender<Input>, control: std_mpsc::Receiver<Control>) {
    loop {
        match control.try_recv() {
            Ok(Control::Pause(ack)) => {
                let _ = ack.send(());
                match control.recv() {
                    Ok(Control::Resume) => {}
                    Ok(Control::Pause(ack)) => {
                        let _ = ack.send(());
                    }
                    Err(_) => return,
                }
                continue;
            }
            Ok(Control::Resume) => {}
            Err(std_mpsc::TryRecvError::Disconnected) => return,
            Err(std_mpsc::TryRecvError::Empty) => {}
        }
        if tx.is_closed() {
            return;
        }
        let input = match event::poll(Duration::from_millis(50)) {
            Ok(false) => continue,
            Ok(true) => match event::read() {
                Ok(Event::Key(k)) if k.kind != KeyEventKind::Release => Input::Key(k),
                Ok(Event::Paste(s)) => Input::Paste(s),
                Ok(Event::Resize(..)) => Input::Resized,
                Ok(_) => continue,
                Err(_) => Input::Eof,
            },
            Err(_) => Input::Eof,
        };
        let eof = matches!(input, Input::Eof);
        if tx.send(input).is_err() || eof {
            return;
        }
    }
}

/// Reads lines from standard input until it ends.
fn read_lines(tx: mpsc::UnboundedSender<Input>) {
    use std::io::{BufRead, Read};
    let stdin = std::io::stdin();
    let mut lines = stdin.lock();
    let limit = MAX_LINE as u64 * 4;
    let mut buf = Vec::new();
    loop {
        buf.clear();
        // One line at a time, bounded: the rest of a longer line is dropped, never read as
        // a line of its own.
        match (&mut lines).take(limit).read_until(b'\n', &mut buf) {
            Ok(0) | Err(_) => {
                let _ = tx.send(Input::Eof);
                return;
            }
            Ok(_) => {
                if !buf.ends_with(b"\n") {
                    let mut rest = Vec::new();
                    loop {
                        rest.clear();
                        match (&mut lines).take(limit).read_until(b'\n', &mut rest) {
                            Ok(0) | Err(_) => break,
                            Ok(_) if rest.ends_with(b"\n") => break,
                            Ok(_) => {}
                        }
                    }
                }
                let line = String::from_utf8_lossy(&buf)
                    .trim_end_matches(['\n', '\r'])
                    .to_string();
                if tx.send(Input::Line(line)).is_err() {
                    return;
                }
            }
        }
    }
}
