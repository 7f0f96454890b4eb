//! `$EDITOR` on an approval's input, and the signals that end `imrelay watch`.

use serde_json::Value;

use super::Watch;
use super::send::Done;
use super::steps::Step;
use crate::cli::view::{self, Paint};
use crate::interaction::InteractionId;
use crate::present::{Budget, visible_line};

impl Watch {
    // ----- editing -----

    pub(super) async fn edit(&mut self, text: String) {
        if !self.term.is_tty() {
            return self.say_error("Editing needs a terminal on standard input and output.");
        }
        let Some(c) = &self.current else { return };
        let id = c.i.id.clone();
        self.set_step(Step::Editing);
        self.term.suspend().await;
        let tx = self.done_tx.clone();
        tokio::spawn(async move {
            let result = run_editor(&text).await;
            let _ = tx.send(Done::Edited { id, result });
        });
    }

    pub(super) async fn edited(&mut self, id: InteractionId, result: Result<String, String>) {
        self.term.resume();
        let Some(c) = &mut self.current else { return };
        if c.i.id != id {
            return;
        }
        let i = c.i.clone();
        if let Some(resolved) = c.meanwhile.take() {
            // Answered elsewhere while the editor had the terminal: said now, and what was
            // edited is shown so it is not lost.
            c.step = Step::Choose;
            if let Ok(text) = &result {
                let line = self.term.painter().paint(
                    Paint::Yellow,
                    &format!(
                        "(Your edited input was not sent: {})",
                        visible_line(text.trim())
                    ),
                );
                self.term.say1(line);
            }
            return self.tell_resolved(resolved, false);
        }
        let text = match result {
            Ok(t) => t,
            Err(e) => {
                self.say_error(&format!("The editor did not run: {}", visible_line(&e)));
                return self.show(i);
            }
        };
        match serde_json::from_str::<Value>(&text) {
            Ok(Value::Object(input)) => {
                let p = self.term.painter();
                let mut lines = vec![String::new(), p.paint(Paint::Bold, "Edited input:")];
                let pr = crate::present::present(
                    &i.tool_name,
                    &input,
                    i.cwd.as_deref(),
                    Budget::TERMINAL,
                );
                lines.extend(view::presentation_lines(&p, &pr, "e"));
                if input == i.input.map() {
                    lines.push(p.paint(Paint::Dim, "  (unchanged)"));
                }
                self.term.say(&lines);
                self.set_step(Step::Edited(input));
            }
            Ok(other) => {
                self.say_error(&format!(
                    "The input must be a JSON object, not {}.",
                    crate::interaction::json_type(&other)
                ));
                self.set_step(Step::EditFailed(text));
            }
            Err(e) => {
                self.say_error(&format!("That is not valid JSON: {e}."));
                self.set_step(Step::EditFailed(text));
            }
        }
    }
}

/// Writes `text` to a temporary file, opens it in `$VISUAL` or `$EDITOR` (else `vi`) and
/// returns what the file holds after.
async fn run_editor(text: &str) -> Result<String, String> {
    let file = tempfile::Builder::new()
        .prefix("imrelay-input-")
        .suffix(".json")
        .tempfile()
        .map_err(|e| e.to_string())?;
    std::fs::write(file.path(), text).map_err(|e| e.to_string())?;
    let editor = ["VISUAL", "EDITOR"]
        .iter()
        .filter_map(|k| std::env::var(k).ok())
        .find(|v| !v.trim().is_empty())
        .unwrap_or_else(|| "vi".to_string());
    // Through the shell, as git does, so that `EDITOR="code --wait"` works.
    let status = tokio::process::Command::new("sh")
        .arg("-c")
        .arg(format!("{editor} \"$1\""))
        .arg("sh")
        .arg(file.path())
        .status()
        .await
        .map_err(|e| format!("{editor}: {e}"))?;
    if !status.success() {
        return Err(format!("{editor} exited with {status}"));
    }
    std::fs::read_to_string(file.path()).map_err(|e| e.to_string())
}

#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Signal {
    Interrupt,
    Terminate,
}

/// SIGINT (Ctrl-C outside raw mode), SIGTERM and SIGHUP.
pub(super) struct Signals {
    #[cfg(unix)]
    int: Option<tokio::signal::unix::Signal>,
    #[cfg(unix)]
    term: Option<tokio::signal::unix::Signal>,
    #[cfg(unix)]
    hup: Option<tokio::signal::unix::Signal>,
}

impl Signals {
    pub(super) fn new() -> Signals {
        #[cfg(unix)]
        {
            use tokio::signal::unix::{SignalKind, signal};
            Signals {
                int: signal(SignalKind::interrupt()).ok(),
                term: signal(SignalKind::terminate()).ok(),
                hup: signal(SignalKind::hangup()).ok(),
            }
        }
        #[cfg(not(unix))]
        Signals {}
    }

    pub(super) async fn next(&mut self) -> Signal {
        #[cfg(unix)]
        {
            async fn recv(s: &mut Option<tokio::signal::unix::Signal>) {
                match s {
                    Some(s) => {
                        if s.recv().await.is_none() {
                            std::future::pending::<()>().await;
                        }
                    }
                    None => std::future::pending::<()>().await,
                }
            }
            tokio::select! {
                _ = recv(&mut self.int) => Signal::Interrupt,
                _ = recv(&mut self.term) => Signal::Terminate,
                _ = recv(&mut self.hup) => Signal::Terminate,
            }
        }
        #[cfg(not(unix))]
        {
            let _ = tokio::signal::ctrl_c().await;
            Signal::Interrupt
        }
    }
}
