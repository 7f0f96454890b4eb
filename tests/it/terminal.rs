//! The terminal client: `imrelay watch` driven through a pseudo-terminal against the real
//! server binary, and the scriptable commands' output and exit codes.
//!
//! Every watch session's screen, as a terminal shows it, is written to
//! `target/tmp/terminal/<test>.txt` for a person to read.

use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use reqwest::StatusCode;
use rexpect::session::PtySession;
use serde_json::{Value, json};

use super::support::{Server, free_port};

/// How long one expectation waits for the screen.
const WAIT_MS: u64 = 15_000;
const COLS: u16 = 100;

/// `imrelay watch` in a pseudo-terminal, with everything it printed kept.
struct Watch {
    session: PtySession,
    /// Every byte read from the terminal so far.
    seen: Vec<u8>,
    name: &'static str,
}

/// rexpect reads the terminal byte by byte into chars (one char per byte): text to find is
/// spelled the same way.
fn as_bytes_text(s: &str) -> String {
    s.bytes().map(char::from).collect()
}

fn from_bytes_text(s: &str) -> Vec<u8> {
    s.chars().map(|c| c as u32 as u8).collect()
}

nix::ioctl_write_ptr_bad!(set_window_size, nix::libc::TIOCSWINSZ, nix::pty::Winsize);

impl Watch {
    /// Starts `imrelay watch --url base --by alice` in a 100-column terminal, with `env`.
    fn start(name: &'static str, base: &str, env: &[(&str, &str)]) -> Watch {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_imrelay"));
        cmd.args(["watch", "--url", base, "--by", "alice"])
            .env("TERM", "xterm-256color")
            .env("NO_COLOR", "1")
            .env_remove("IMRELAY_TOKEN")
            .env_remove("IMRELAY_OPERATOR_TOKEN")
            .env_remove("IMRELAY_URL");
        for (k, v) in env {
            if v.is_empty() {
                cmd.env_remove(k);
            } else {
                cmd.env(k, v);
            }
        }
        let session = rexpect::session::spawn_with_options(
            cmd,
            rexpect::reader::Options::new().timeout_ms(Some(WAIT_MS)),
        )
        .expect("imrelay watch starts in a pseudo-terminal");
        let size = nix::pty::Winsize {
            ws_row: 40,
            ws_col: COLS,
            ws_xpixel: 0,
            ws_ypixel: 0,
        };
        let pty = session.process().get_file_handle().expect("the pty");
        // SAFETY: TIOCSWINSZ reads one Winsize from the pointer, which outlives the call.
        #[allow(unsafe_code)] // a test's pseudo-terminal size; see Cargo.toml's [lints]
        unsafe { set_window_size(pty.as_raw_fd(), &size) }.expect("the window size is set");
        Watch {
            session,
            seen: Vec::new(),
            name,
        }
    }

    /// Waits until `text` appears, and returns what came before it.
    fn expect(&mut self, text: &str) -> String {
        match self.session.exp_string(&as_bytes_text(text)) {
            Ok(before) => {
                let before = from_bytes_text(&before);
                self.seen.extend_from_slice(&before);
                self.seen.extend_from_slice(text.as_bytes());
                String::from_utf8_lossy(&before).into_owned()
            }
            Err(e) => {
                let got = match &e {
                    rexpect::error::Error::Timeout { got, .. } => from_bytes_text(got),
                    _ => Vec::new(),
                };
                self.seen.extend_from_slice(&got);
                self.save();
                panic!(
                    "{}: {text:?} did not appear ({e}); the screen:\n{}",
                    self.name,
                    self.screen()
                );
            }
        }
    }

    /// Waits until every one of `texts` has appeared, in any order.
    fn expect_each(&mut self, texts: &[&str]) {
        let mark = self.seen.len();
        for text in texts {
            let since = String::from_utf8_lossy(&self.seen[mark..]).into_owned();
            if !since.contains(text) {
                self.expect(text);
            }
        }
    }

    /// Types `text` and Enter.
    fn line(&mut self, text: &str) {
        self.session
            .send(&format!("{text}\r"))
            .expect("typing reaches the terminal");
        self.session.flush().expect("flush");
    }

    /// Types `text` without Enter.
    fn type_only(&mut self, text: &str) {
        self.session.send(text).expect("typing");
        self.session.flush().expect("flush");
    }

    /// Waits for the process to end; its exit code.
    fn exit_code(&mut self) -> i32 {
        if let Ok(rest) = self.session.exp_eof() {
            self.seen.extend_from_slice(&from_bytes_text(&rest));
        }
        match self.session.process().wait() {
            Ok(nix::sys::wait::WaitStatus::Exited(_, code)) => code,
            other => panic!("imrelay watch did not exit normally: {other:?}"),
        }
    }

    /// The screen as a terminal shows it (tall enough that nothing scrolled away).
    fn screen(&self) -> String {
        let (Some(rows), Some(cols)) = (
            std::num::NonZeroU16::new(2000),
            std::num::NonZeroU16::new(COLS),
        ) else {
            unreachable!("non-zero sizes")
        };
        let mut parser = vt100::Parser::new(rows, cols, 0);
        // Raw mode: a line feed does not return the carriage; the terminal was told that.
        parser.process(&self.seen);
        let contents = parser.screen().contents();
        contents.trim_end().to_string()
    }

    /// Writes the screen to `target/tmp/terminal/<name>.txt`.
    fn save(&self) -> PathBuf {
        let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("terminal");
        let _ = std::fs::create_dir_all(&dir);
        let path = dir.join(format!("{}.txt", self.name));
        let _ = std::fs::write(&path, self.screen());
        path
    }
}

impl Drop for Watch {
    fn drop(&mut self) {
        self.save();
        let _ = self.session.process_mut().exit();
    }
}

/// The real server on a free port, its store in a temporary directory.
struct Relay {
    server: Option<Server>,
    listen: String,
    db: PathBuf,
    _dir: tempfile::TempDir,
    http: reqwest::Client,
}

impl Relay {
    fn start() -> Relay {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let db = dir.path().join("imrelay.db");
        let listen = format!("127.0.0.1:{}", free_port());
        let server = Server::start_on(&listen, &db, None);
        Relay {
            server: Some(server),
            listen,
            db,
            _dir: dir,
            http: reqwest::Client::new(),
        }
    }

    fn base(&self) -> String {
        format!("http://{}", self.listen)
    }

    fn kill(&mut self) {
        if let Some(s) = self.server.take() {
            s.kill();
        }
    }

    fn restart(&mut self) {
        self.kill();
        self.server = Some(Server::start_on(&self.listen, &self.db, None));
    }

    async fn create(&self, body: Value) -> Value {
        let resp = self
            .http
            .post(format!("{}/v1/interactions", self.base()))
            .json(&body)
            .send()
            .await
            .expect("create");
        assert_eq!(resp.status(), StatusCode::CREATED);
        resp.json().await.expect("json")
    }

    async fn get(&self, id: &str) -> Value {
        self.http
            .get(format!("{}/v1/interactions/{id}", self.base()))
            .send()
            .await
            .expect("get")
            .json()
            .await
            .expect("json")
    }

    async fn respond(&self, id: &str, body: Value) -> StatusCode {
        self.http
            .post(format!("{}/v1/interactions/{id}/respond", self.base()))
            .json(&body)
            .send()
            .await
            .expect("respond")
            .status()
    }
}

fn bash(id: &str, command: &str) -> Value {
    json!({"id": id, "tool_name": "Bash", "agent": "claude-code", "session": "5f8a2c1e-3b7d",
           "cwd": "/home/dev/shop", "input": {"command": command, "description": "Clean the build"}})
}

fn two_questions(id: &str) -> Value {
    json!({"id": id, "tool_name": "AskUserQuestion", "agent": "claude-code", "input": {"questions": [
        {"question": "Which database?", "header": "DB", "options": [
            {"label": "Postgres", "description": "the usual"}, {"label": "SQLite"}]},
        {"question": "Which extras?", "header": "Extras", "multiSelect": true, "options": [
            {"label": "Auth"}, {"label": "Metrics"}, {"label": "Docs"}]}]}})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_allows_one_approval_and_denies_another_with_a_reason() {
    let relay = Relay::start();
    relay.create(bash("toolu_a1", "rm -rf build")).await;
    relay
        .create(
            json!({"id": "toolu_e1", "tool_name": "Edit", "cwd": "/home/dev/shop", "input": {
            "file_path": "/home/dev/shop/src/main.rs",
            "old_string": "fn main() {\n    println!(\"hi\");\n}",
            "new_string": "fn main() {\n    println!(\"héllo, 世界\");\n}"}}),
        )
        .await;
    let mut w = Watch::start("allow_and_deny", &relay.base(), &[]);
    w.expect("━━ Approval · Bash");
    w.expect("claude-code · session 5f8a2c1e-3b… · /home/dev/shop");
    w.expect("Why: Clean the build");
    w.expect("Command:\r\n    rm -rf build");
    w.expect("a allow · d deny · e edit, then allow · g allow similar calls · s skip · q quit");
    w.expect("1 more] a/d/e/g/s/q › ");
    w.line("a");
    w.expect("✓ Allowed by alice via terminal");
    let a1 = relay.get("toolu_a1").await;
    assert_eq!(a1["resolution"]["outcome"], "allowed");
    assert_eq!(a1["resolution"]["via"], "terminal");
    assert_eq!(a1["resolution"]["by"], "alice");

    w.expect("━━ Approval · Edit");
    w.expect("File: src/main.rs");
    w.expect("-    println!(\"hi\");");
    w.expect("+    println!(\"héllo, 世界\");");
    w.expect("a/d/e/g/s/q › ");
    w.line("x");
    w.expect("Type a (allow), d (deny), e (edit), g (allow similar calls), s (skip) or q (quit), then Enter.");
    w.line("d");
    w.expect("deny and tell the agent what to do instead (Enter for nothing, Esc goes back) › ");
    w.line("Use the clean script, s'il vous plaît");
    w.expect("✗ Denied by alice via terminal");
    w.expect("“Use the clean script, s'il vous plaît”");
    w.expect("waiting for approvals and questions (q quits) › ");
    let e1 = relay.get("toolu_e1").await;
    assert_eq!(e1["resolution"]["outcome"], "denied");
    assert_eq!(
        e1["resolution"]["result"]["message"],
        "Use the clean script, s'il vous plaît"
    );
    w.line("q");
    w.expect("Bye.");
    assert_eq!(w.exit_code(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_answers_every_question_with_numbers_and_own_text() {
    let relay = Relay::start();
    relay.create(two_questions("toolu_q1")).await;
    let mut w = Watch::start("questions", &relay.base(), &[]);
    w.expect("━━ Question");
    w.expect("1/2  [DB] Which database?");
    w.expect("1  Postgres — the usual");
    w.expect("2  SQLite");
    w.expect("1–2, or your own answer › ");
    w.line("3");
    w.expect("There is no option 3: choose from 1 to 2");
    // Free text: the "Other" answer, commas and all.
    w.line("MySQL, with replicas");
    w.expect("→ “MySQL, with replicas” (your own answer)");
    w.expect("2/2  [Extras] Which extras?");
    w.expect("numbers like 1,3, or your own answer › ");
    w.line("3, 1");
    w.expect("→ Auth, Docs");
    w.expect("✓ Answered by alice via terminal");
    w.expect("Which database? → MySQL, with replicas");
    w.expect("Which extras? → Auth, Docs");
    let q = relay.get("toolu_q1").await;
    assert_eq!(
        q["resolution"]["result"]["updatedInput"]["answers"],
        json!({"Which database?": "MySQL, with replicas", "Which extras?": "Auth, Docs"})
    );
    w.line("q");
    assert_eq!(w.exit_code(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_skips_and_the_skipped_one_comes_back() {
    let relay = Relay::start();
    relay.create(bash("toolu_s1", "make first")).await;
    relay.create(bash("toolu_s2", "make second")).await;
    let mut w = Watch::start("skip", &relay.base(), &[]);
    w.expect("Command:\r\n    make first");
    w.expect("1 more] a/d/e/g/s/q › ");
    w.line("s");
    w.expect("Skipped: it stays pending and comes back after the others.");
    w.expect("Command:\r\n    make second");
    w.expect("1 more] a/d/e/g/s/q › ");
    w.line("a");
    w.expect("✓ Allowed by alice via terminal");
    w.expect("Back to what you skipped.");
    w.expect("Command:\r\n    make first");
    // Skipping the only one left: it waits for Enter.
    w.line("s");
    w.expect("Skipped: it stays pending. Nothing else is waiting.");
    w.expect("1 skipped: Enter shows it again · q quits › ");
    assert_eq!(relay.get("toolu_s1").await["status"], "pending");
    w.line("");
    w.expect("Command:\r\n    make first");
    w.expect("a/d/e/g/s/q › ");
    w.line("a");
    w.expect("✓ Allowed by alice via terminal");
    assert_eq!(
        relay.get("toolu_s1").await["resolution"]["outcome"],
        "allowed"
    );
    w.line("q");
    assert_eq!(w.exit_code(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_says_what_was_answered_elsewhere_and_what_expired() {
    let relay = Relay::start();
    relay.create(bash("toolu_x1", "cargo publish")).await;
    let mut w = Watch::start("elsewhere", &relay.base(), &[]);
    w.expect("Command:\r\n    cargo publish");
    w.expect("a/d/e/g/s/q › ");
    w.type_only("d");
    w.expect("a/d/e/g/s/q › d");
    assert_eq!(
        relay
            .respond(
                "toolu_x1",
                json!({"decision": "deny", "message": "not on a Friday", "by": "bob"})
            )
            .await,
        StatusCode::OK
    );
    w.expect("⚑ Answered elsewhere: ✗ Denied by bob via api");
    w.expect("“not on a Friday”");
    w.expect("(Not sent, what you had typed: “d”)");
    w.expect("waiting for approvals and questions (q quits) › ");

    // One that nobody answers: the countdown, then the expiry said plainly.
    relay
        .create(
            json!({"id": "toolu_x2", "tool_name": "Bash", "timeout_secs": 2,
                       "input": {"command": "sleep 1"}}),
        )
        .await;
    w.expect("Expires in 0:0");
    w.expect("Command:\r\n    sleep 1");
    w.expect("⌛ Expired at ");
    w.expect("nobody answered in time, so the agent was denied");
    w.expect("waiting for approvals and questions (q quits) › ");
    w.line("q");
    assert_eq!(w.exit_code(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_keeps_an_answer_while_the_server_restarts() {
    let mut relay = Relay::start();
    relay.create(bash("toolu_r1", "cargo build")).await;
    let mut w = Watch::start("restart", &relay.base(), &[]);
    w.expect("Command:\r\n    cargo build");
    w.expect("a/d/e/g/s/q › ");
    relay.kill();
    w.expect("! Lost the connection to imrelay");
    w.expect("offline");
    // Answered while the server is down: kept and sent again.
    w.line("a");
    w.expect("! Could not send the answer (");
    w.expect("It is kept and sent again");
    relay.restart();
    // Sent and reconnected, in either order.
    w.expect_each(&[
        "✓ Reconnected to imrelay.",
        "✓ Allowed by alice via terminal",
    ]);
    let r1 = relay.get("toolu_r1").await;
    assert_eq!(r1["resolution"]["via"], "terminal");
    // The stream goes on after the restart.
    relay.create(bash("toolu_r2", "cargo test")).await;
    w.expect("Command:\r\n    cargo test");
    w.line("a");
    w.expect("✓ Allowed by alice via terminal");
    w.line("q");
    assert_eq!(w.exit_code(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ctrl_c_leaves_cleanly_and_prints_an_answer_not_yet_sent() {
    let mut relay = Relay::start();
    relay.create(bash("toolu_c1", "ls")).await;
    relay.create(two_questions("toolu_c2")).await;
    let mut w = Watch::start("ctrl_c", &relay.base(), &[]);
    w.expect("Command:\r\n    ls");
    w.expect("a/d/e/g/s/q › ");
    w.line("s");
    w.expect("1/2  [DB] Which database?");
    w.line("2");
    w.expect("→ SQLite");
    w.line("s");
    w.expect("2 skipped: Enter shows them again · q quits › ");
    w.line("");
    w.expect("Back to what you skipped.");
    w.expect("Command:\r\n    ls");
    relay.kill();
    w.expect("! Lost the connection to imrelay");
    w.line("d");
    w.line("too broad");
    w.expect("! Could not send the answer");
    w.session.send_control('c').expect("Ctrl-C");
    w.expect("Your answer was not confirmed by imrelay. To send it later:");
    w.expect("imrelay answer toolu_c1 deny --reason 'too broad'");
    w.expect("Interrupted.");
    assert_eq!(w.exit_code(), 130);

    // At a question's prompt, with an answer given to the first of two.
    relay.restart();
    let mut w = Watch::start("ctrl_c_question", &relay.base(), &[]);
    w.expect("Command:\r\n    ls");
    w.line("s");
    w.expect("1–2, or your own answer › ");
    w.line("1");
    w.expect("numbers like 1,3, or your own answer › ");
    w.type_only("2,");
    w.session.send_control('c').expect("Ctrl-C");
    w.expect("Your answers so far were not sent:");
    w.expect("Which database? → Postgres");
    w.expect("Not sent, what you had typed: “2,”");
    w.expect("Interrupted.");
    assert_eq!(w.exit_code(), 130);
    assert_eq!(relay.get("toolu_c2").await["status"], "pending");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_edits_the_input_in_the_editor_then_allows() {
    let relay = Relay::start();
    relay.create(bash("toolu_ed1", "rm -rf /")).await;
    let dir = tempfile::tempdir().unwrap();
    // An editor that first writes something that is not JSON, then an edited input.
    let editor = dir.path().join("editor.sh");
    let count = dir.path().join("count");
    std::fs::write(
        &editor,
        format!(
            "#!/bin/sh\nif [ -e '{c}' ]; then\n  printf '{{\"command\": \"rm -rf ./build\"}}' > \"$1\"\nelse\n  touch '{c}'\n  printf 'not json' > \"$1\"\nfi\n",
            c = count.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&editor, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let editor = editor.display().to_string();
    let mut w = Watch::start(
        "edit",
        &relay.base(),
        &[("EDITOR", editor.as_str()), ("VISUAL", "")],
    );
    w.expect("Command:\r\n    rm -rf /");
    w.expect("a/d/e/g/s/q › ");
    w.line("e");
    w.expect("That is not valid JSON: expected ident");
    w.expect("e edit again · c cancel › ");
    w.line("e");
    w.expect("Edited input:");
    w.expect("Command:\r\n    rm -rf ./build");
    w.expect("a allow with this input · e edit again · c cancel › ");
    w.line("a");
    w.expect("✓ Allowed by alice via terminal");
    let r = relay.get("toolu_ed1").await;
    assert_eq!(
        r["resolution"]["result"]["updatedInput"],
        json!({"command": "rm -rf ./build"})
    );
    w.line("q");
    assert_eq!(w.exit_code(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_colours_and_rings_only_on_a_terminal_without_no_color() {
    let relay = Relay::start();
    let mut w = Watch::start("colour", &relay.base(), &[("NO_COLOR", "")]);
    w.expect("waiting for approvals and questions");
    relay.create(bash("toolu_col", "ls")).await;
    w.expect("\x07");
    w.expect("\x1b[1m Approval · Bash \x1b[0m");
    w.line("a");
    w.expect("\x1b[32m✓ Allowed by alice via terminal");
    w.line("q");
    assert_eq!(w.exit_code(), 0);

    // Output not to a terminal: no colour, no bell, no redrawing, however the terminal
    // variables are set; lines typed ahead are taken by the prompts in turn.
    relay.create(bash("toolu_plain", "echo \x1b[31mred")).await;
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_imrelay"))
        .args(["watch", "--url", &relay.base(), "--by", "bob"])
        .env("TERM", "xterm-256color")
        .env_remove("NO_COLOR")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    {
        use tokio::io::AsyncWriteExt;
        let mut stdin = child.stdin.take().unwrap();
        stdin.write_all(b"d\nnot today\nq\n").await.unwrap();
    }
    let out = tokio::time::timeout(Duration::from_secs(20), child.wait_with_output())
        .await
        .expect("watch ends at the end of its input")
        .unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(out.status.success(), "{text}");
    assert!(!text.contains('\x1b') && !text.contains('\x07'), "{text:?}");
    assert!(text.contains("Command:\n    echo \\u{1b}[31mred"), "{text}");
    assert!(text.contains("› d\n"), "{text}");
    assert!(text.ends_with("› q\nBye.\n"), "{text}");
    assert!(
        text.contains("✗ Denied by bob via terminal at") && text.contains("“not today”"),
        "{text}"
    );
    let plain = relay.get("toolu_plain").await;
    assert_eq!(plain["resolution"]["result"]["message"], "not today");
    std::fs::write(
        Path::new(env!("CARGO_TARGET_TMPDIR"))
            .join("terminal")
            .join("plain.txt"),
        &text,
    )
    .unwrap();
}

/// Runs `imrelay` with `args` against `base`: (exit code, stdout, stderr).
async fn run(base: &str, args: &[&str], env: &[(&str, &str)]) -> (i32, String, String) {
    let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_imrelay"));
    cmd.args(args)
        .env("IMRELAY_URL", base)
        .env("USER", "carol")
        .env_remove("IMRELAY_TOKEN")
        .env_remove("IMRELAY_OPERATOR_TOKEN")
        .env_remove("NO_COLOR");
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = tokio::time::timeout(Duration::from_secs(30), cmd.output())
        .await
        .expect("the command ends")
        .expect("runs");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scriptable_commands_list_show_and_answer_with_reliable_exit_codes() {
    let relay = Relay::start();
    let base = relay.base();
    let (code, out, _) = run(&base, &["pending"], &[]).await;
    assert_eq!(
        (code, out.as_str()),
        (0, "Nothing is waiting for an answer.\n")
    );

    relay.create(bash("toolu_p1", "rm -rf build")).await;
    relay.create(two_questions("toolu_p2")).await;
    let (code, out, _) = run(&base, &["pending"], &[]).await;
    assert_eq!(code, 0);
    let lines: Vec<&str> = out.lines().collect();
    assert!(
        lines[0].starts_with("ID") && lines[0].ends_with("WHAT"),
        "{out}"
    );
    assert!(
        lines[1].starts_with("toolu_p1  approval") && lines[1].ends_with("Run: rm -rf build"),
        "{out}"
    );
    assert!(
        lines[2].starts_with("toolu_p2  question")
            && lines[2].ends_with("Ask: Which database? (and 1 more)"),
        "{out}"
    );
    let (code, out, _) = run(&base, &["pending", "--json"], &[]).await;
    assert_eq!(code, 0);
    let list: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(list[0]["id"], "toolu_p1");
    assert_eq!(list[1]["id"], "toolu_p2");

    let (code, out, _) = run(&base, &["show", "toolu_p1"], &[]).await;
    assert_eq!(code, 0);
    assert!(out.contains("━━ Approval · Bash"), "{out}");
    assert!(out.contains("Command:\n    rm -rf build"), "{out}");
    assert!(!out.contains('\x1b'), "{out:?}");
    let (code, out, _) = run(&base, &["show", "toolu_p1", "--json"], &[]).await;
    assert_eq!(code, 0);
    assert_eq!(
        serde_json::from_str::<Value>(&out).unwrap()["tool_name"],
        "Bash"
    );
    // A question says which answers it takes: one option, or any number of them.
    let (code, out, _) = run(&base, &["show", "toolu_p2"], &[]).await;
    assert_eq!(code, 0);
    assert!(
        out.contains(
            "  1/2  [DB] Which database?\n    1  Postgres — the usual\n    2  SQLite\n    (one of these, or your own answer)\n"
        ),
        "{out}"
    );
    assert!(
        out.contains("    3  Docs\n    (multi-select: any number of these, or your own answer)"),
        "{out}"
    );
    // As JSON too, where the agent left it out (the first question) as well.
    for args in [
        vec!["show", "toolu_p2", "--json"],
        vec!["pending", "--json"],
    ] {
        let (code, out, _) = run(&base, &args, &[]).await;
        assert_eq!(code, 0);
        let v: Value = serde_json::from_str(&out).unwrap();
        let i = if v.is_array() { &v[1] } else { &v };
        assert_eq!(
            i["input"]["questions"]
                .as_array()
                .unwrap()
                .iter()
                .map(|q| q["multiSelect"].clone())
                .collect::<Vec<_>>(),
            [json!(false), json!(true)],
            "{args:?}: {out}"
        );
    }

    // Refused before anything is sent (5: does not fit the interaction; 2: the flags do not
    // go together), nothing changes.
    for (args, expected, says) in [
        (vec!["answer", "toolu_p2", "allow"], 5, "is a question"),
        (
            vec!["answer", "toolu_p1", "--answer", "DB=Postgres"],
            5,
            "is an approval",
        ),
        (
            vec!["answer", "toolu_p1", "allow", "--input", "[1]"],
            5,
            "a JSON object",
        ),
        (
            vec!["answer", "toolu_p2", "--answer", "DB=Postgres"],
            5,
            "no answer for \"Extras\"",
        ),
        (
            vec!["answer", "toolu_p1", "allow", "--reason", "x"],
            2,
            "--reason goes with deny",
        ),
        (vec!["answer", "toolu_p1"], 2, "say allow or deny"),
        (
            vec!["answer", "toolu_p1", "sure"],
            2,
            "invalid value 'sure'",
        ),
    ] {
        let (code, out, err) = run(&base, &args, &[]).await;
        assert_eq!(code, expected, "{args:?}: {out}{err}");
        assert!(err.contains(says), "{args:?}: {err}");
    }
    assert_eq!(relay.get("toolu_p1").await["status"], "pending");

    let (code, out, err) = run(
        &base,
        &[
            "answer",
            "toolu_p1",
            "allow",
            "--input",
            r#"{"command": "rm -rf ./build"}"#,
        ],
        &[],
    )
    .await;
    assert_eq!(code, 0, "{err}");
    assert!(
        out.starts_with("✓ Allowed by carol via terminal at"),
        "{out}"
    );
    let p1 = relay.get("toolu_p1").await;
    assert_eq!(
        p1["resolution"]["result"]["updatedInput"]["command"],
        "rm -rf ./build"
    );
    // Again: already resolved, and how.
    let (code, _, err) = run(&base, &["answer", "toolu_p1", "deny"], &[]).await;
    assert_eq!(code, 3);
    assert!(
        err.contains("toolu_p1 is already resolved: allowed by carol via terminal at"),
        "{err}"
    );

    let (code, out, err) = run(
        &base,
        &[
            "answer",
            "toolu_p2",
            "--by",
            "dave",
            "--answer",
            "DB=SQLite",
            "--answer",
            "Which extras?=Auth",
            "--answer",
            "Extras=Metrics",
        ],
        &[],
    )
    .await;
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("✓ Answered by dave via terminal"), "{out}");
    assert!(out.contains("Which extras? → Auth, Metrics"), "{out}");

    let (code, _, err) = run(&base, &["show", "toolu_nope"], &[]).await;
    assert_eq!(code, 4);
    assert!(err.contains("no interaction toolu_nope"), "{err}");
    let (code, _, _) = run(&base, &["answer", "toolu_nope", "allow"], &[]).await;
    assert_eq!(code, 4);

    // Nobody listening there: exit 6 after a few tries.
    let closed = format!("http://127.0.0.1:{}", free_port());
    let (code, _, err) = run(&closed, &["answer", "toolu_p1", "allow"], &[]).await;
    assert_eq!(code, 6, "{err}");
    assert!(err.contains("cannot reach imrelay at"), "{err}");
    let (code, _, _) = run(&closed, &["pending"], &[]).await;
    assert_eq!(code, 6);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scriptable_commands_need_an_operator_token_where_the_server_has_them() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("imrelay.toml");
    std::fs::write(
        &config,
        "[auth]\nagent_tokens = [\"agent-token-0123456789abcdef\"]\noperator_tokens = [\"operator-token-0123456789abcdef\"]\n",
    )
    .unwrap();
    let server = Server::start_with(&dir.path().join("imrelay.db"), Some(&config));
    let (code, _, err) = run(&server.base, &["pending"], &[]).await;
    assert_eq!(code, 5);
    assert!(
        err.contains("imrelay wants an operator token") && err.contains("IMRELAY_OPERATOR_TOKEN"),
        "{err}"
    );
    let (code, _, err) = run(
        &server.base,
        &["pending"],
        &[("IMRELAY_OPERATOR_TOKEN", "agent-token-0123456789abcdef")],
    )
    .await;
    assert_eq!(code, 5);
    assert!(err.contains("needs an operator token"), "{err}");
    // The operator token under its own name, and under the old one with a warning.
    let (code, _, err) = run(
        &server.base,
        &["pending"],
        &[("IMRELAY_OPERATOR_TOKEN", "operator-token-0123456789abcdef")],
    )
    .await;
    assert_eq!(code, 0, "{err}");
    assert!(!err.contains("warning"), "{err}");
    let (code, _, err) = run(
        &server.base,
        &["pending"],
        &[("IMRELAY_TOKEN", "operator-token-0123456789abcdef")],
    )
    .await;
    assert_eq!(code, 0, "{err}");
    assert!(
        err.contains(
            "IMRELAY_TOKEN is read as the operator token, but that is now IMRELAY_OPERATOR_TOKEN"
        ),
        "{err}"
    );
    // watch stops at once too, saying why.
    let (code, out, _) = run(&server.base, &["watch"], &[]).await;
    assert_eq!(code, 5, "{out}");
    assert!(out.contains("imrelay wants an operator token"), "{out}");
    let (code, out, err) = run(
        &server.base,
        &["pending", "--token", "operator-token-0123456789abcdef"],
        &[],
    )
    .await;
    assert_eq!(
        (code, out.as_str()),
        (0, "Nothing is waiting for an answer.\n"),
        "{err}"
    );
    server.kill();
}

/// A stand-in for imrelay that watch cannot tell from the real one, for what the real one
/// will not do on cue: drop the event stream after an event with an id (to see the
/// `Last-Event-ID` of the reconnect) and answer a send with a `409` someone else won.
async fn fake_relay() -> (
    String,
    std::sync::Arc<std::sync::Mutex<Vec<Option<String>>>>,
) {
    use axum::routing::{get, post};
    use imrelay::interaction::{
        Interaction, InteractionId, Outcome, PermissionResult, Resolution, Via,
    };
    let Value::Object(input) = json!({"command": "deploy --prod"}) else {
        unreachable!()
    };
    let now = imrelay::interaction::now();
    let pending = Interaction::pending(
        InteractionId::parse("toolu_f1").unwrap(),
        "Bash",
        input.clone(),
        now,
        300,
    );
    let won = pending.resolved(Resolution {
        outcome: Outcome::Allowed,
        by: Some("bob".into()),
        via: Via::new(imrelay::channels::telegram::CHANNEL),
        at: now,
        result: PermissionResult::Allow {
            updated_input: input.into(),
            updated_permissions: None,
        }
        .into(),
    });
    let pending = serde_json::to_string(&pending).unwrap();
    let still_pending: Value = serde_json::from_str(&pending).unwrap();
    let conflict = json!({"error": {"code": "already_resolved",
        "message": "interaction toolu_f1 is already resolved: allowed by bob via telegram",
        "resolution": won.resolution, "interaction": won}});
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let ids = seen.clone();
    let events = move |headers: axum::http::HeaderMap| {
        let ids = ids.clone();
        let pending = pending.clone();
        async move {
            let last = headers
                .get("last-event-id")
                .and_then(|v| v.to_str().ok())
                .map(str::to_string);
            let first = {
                let mut ids = ids.lock().unwrap();
                ids.push(last);
                ids.len() == 1
            };
            let text = if first {
                format!("id: 5\nevent: interaction.created\ndata: {pending}\n\n")
            } else {
                format!(
                    "event: reset\ndata: {{}}\n\nid: 9\nevent: interaction.created\ndata: {pending}\n\n"
                )
            };
            let head = futures_util::stream::iter([Ok::<_, std::io::Error>(text)]);
            // The first stream ends at once; the second stays open.
            let body = if first {
                axum::body::Body::from_stream(head)
            } else {
                use futures_util::StreamExt;
                axum::body::Body::from_stream(head.chain(futures_util::stream::pending()))
            };
            ([("content-type", "text/event-stream")], body)
        }
    };
    let app = axum::Router::new()
        .route("/v1/events", get(events))
        .route(
            "/v1/interactions/{id}",
            get(move || {
                let body = still_pending.clone();
                async move { axum::Json(body) }
            }),
        )
        .route(
            "/v1/interactions/{id}/respond",
            post(move || {
                let body = conflict.clone();
                async move { (axum::http::StatusCode::CONFLICT, axum::Json(body)) }
            }),
        );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    (format!("http://{addr}"), seen)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_resumes_with_the_last_event_id_and_says_who_won_a_conflict() {
    let (base, last_ids) = fake_relay().await;
    let mut w = Watch::start("conflict", &base, &[]);
    w.expect("Command:\r\n    deploy --prod");
    w.expect("! Lost the connection to imrelay (the server closed the event stream)");
    w.expect("✓ Reconnected to imrelay.");
    w.expect("imrelay restarted, or events were missed: checking what is still pending.");
    assert_eq!(*last_ids.lock().unwrap(), [None, Some("5".to_string())]);
    w.line("a");
    w.expect("⚑ Not sent: someone else answered first.");
    w.expect("✓ Allowed by bob via telegram at");
    w.expect("waiting for approvals and questions (q quits) › ");
    w.line("q");
    assert_eq!(w.exit_code(), 0);
}

fn offsite_form(id: &str) -> Value {
    json!({"id": id, "kind": "form", "agent": "planner", "message": "Book the offsite",
        "schema": {"type": "object", "required": ["people", "city"], "properties": {
            "people": {"type": "integer", "title": "How many people", "minimum": 2, "maximum": 40},
            "city": {"type": "string", "title": "City", "oneOf": [
                {"const": "ber", "title": "Berlin"}, {"const": "lis", "title": "Lisbon"}]},
            "dinner": {"type": "boolean", "title": "Dinner", "default": true},
            "notes": {"type": "string", "title": "Notes"}}}})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_fills_in_a_form_field_by_field() {
    let relay = Relay::start();
    relay.create(offsite_form("f1")).await;
    let mut w = Watch::start("form", &relay.base(), &[]);
    w.expect("━━ Form");
    w.expect("Book the offsite");
    w.expect("› 1  How many people * — a whole number from 2 to 40");
    w.expect("2  City * — one of the options");
    w.expect("How many people › ");
    w.line("ninety");
    w.expect("How many people: expected a whole number, got \"ninety\"");
    w.line("41");
    w.expect("How many people: must be at most 40");
    w.line("12");
    w.expect("→ 12");
    w.expect("1  Berlin");
    w.expect("2  Lisbon");
    w.expect("City: 1–2 › ");
    w.line("lisbon");
    w.expect("→ Lisbon");
    w.expect("(Enter for the default: Yes)");
    w.line("");
    w.expect("→ Yes (default)");
    w.expect("(optional: Enter leaves it empty)");
    w.line("");
    w.expect("✓ Answered by alice via terminal");
    w.expect("How many people: 12");
    w.expect("City: Lisbon");
    let f = relay.get("f1").await;
    assert_eq!(
        f["resolution"]["result"],
        json!({"action": "accept", "content": {"people": 12, "city": "lis", "dinner": true}})
    );
    w.line("q");
    assert_eq!(w.exit_code(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn answer_fills_in_a_form_from_arguments() {
    let relay = Relay::start();
    let base = relay.base();
    relay.create(offsite_form("f2")).await;
    let (code, out, _) = run(&base, &["pending"], &[]).await;
    assert_eq!(code, 0);
    assert!(
        out.contains("f2  form") && out.contains("Form: Book the offsite (4 fields)"),
        "{out}"
    );
    // A missing required field is named before anything is sent.
    let (code, _, err) = run(&base, &["answer", "f2", "--answer", "people=12"], &[]).await;
    assert_ne!(code, 0);
    assert!(
        err.contains("City: is required (add --answer 'city=…')"),
        "{err}"
    );
    let (code, _, err) = run(
        &base,
        &[
            "answer",
            "f2",
            "--answer",
            "How many people=1",
            "--answer",
            "City=Berlin",
        ],
        &[],
    )
    .await;
    assert_ne!(code, 0);
    assert!(err.contains("How many people: must be at least 2"), "{err}");
    assert_eq!(relay.get("f2").await["status"], "pending");
    let (code, out, err) = run(
        &base,
        &[
            "answer",
            "f2",
            "--answer",
            "people=12",
            "--answer",
            "City=Berlin",
            "--answer",
            "notes=vegan options",
        ],
        &[],
    )
    .await;
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("✓ Answered by carol via terminal"), "{out}");
    let f = relay.get("f2").await;
    assert_eq!(
        f["resolution"]["result"]["content"],
        json!({"people": 12, "city": "ber", "dinner": true, "notes": "vegan options"})
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_takes_multi_line_text_until_an_empty_line_and_content_as_json() {
    let relay = Relay::start();
    relay
        .create(
            json!({"id": "p1", "kind": "prompt", "message": "Release notes?", "multiline": true}),
        )
        .await;
    let mut w = Watch::start("multiline", &relay.base(), &[]);
    w.expect("Release notes?");
    w.expect("(several lines: an empty line ends the text)");
    w.line("Faster start-up.");
    w.expect("line 2 (an empty line ends it) › ");
    w.line("  - forms everywhere");
    w.expect("line 3 (an empty line ends it) › ");
    w.line("");
    w.expect("✓ Answered by alice via terminal");
    let p = relay.get("p1").await;
    assert_eq!(
        p["resolution"]["result"]["content"]["answer"],
        "Faster start-up.\n  - forms everywhere"
    );
    w.line("q");
    assert_eq!(w.exit_code(), 0);

    // The scriptable way: the content as JSON, checked before it is sent.
    let base = relay.base();
    relay.create(offsite_form("f3")).await;
    let (code, _, err) = run(
        &base,
        &[
            "answer",
            "f3",
            "--content",
            r#"{"people": 99, "city": "ber"}"#,
        ],
        &[],
    )
    .await;
    assert_eq!(code, 5, "{err}");
    assert!(err.contains("content.people: must be at most 40"), "{err}");
    let (code, _, err) = run(&base, &["answer", "p1", "--content", "{}"], &[]).await;
    assert_eq!(code, 3, "already answered: {err}");
    let (code, out, err) = run(
        &base,
        &[
            "answer",
            "f3",
            "--content",
            r#"{"people": 9, "city": "ber"}"#,
        ],
        &[],
    )
    .await;
    assert_eq!(code, 0, "{out}{err}");
    assert_eq!(
        relay.get("f3").await["resolution"]["result"]["content"],
        json!({"people": 9, "city": "ber", "dinner": true})
    );
}

/// What an agent can put in its input that JSON leaves as it is but a terminal acts on:
/// C1 controls (CSI, NEL), a right-to-left override and a line separator.
const INVISIBLE: &str = "rm -rf /\u{9b}2J\u{85}next\u{202e}txt.exe\u{2028}line";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn json_output_escapes_what_a_terminal_would_act_on() {
    let relay = Relay::start();
    let base = relay.base();
    relay.create(bash("toolu_c1", INVISIBLE)).await;
    for args in [&["show", "toolu_c1", "--json"][..], &["pending", "--json"]] {
        let (code, out, err) = run(&base, args, &[]).await;
        assert_eq!(code, 0, "{args:?}: {err}");
        for c in ['\u{9b}', '\u{85}', '\u{202e}', '\u{2028}'] {
            assert!(
                !out.contains(c),
                "{args:?}: raw U+{:04X} in {out:?}",
                c as u32
            );
        }
        for escaped in [r"\u009b", r"\u0085", r"\u202e", r"\u2028"] {
            assert!(
                out.contains(escaped),
                "{args:?}: {escaped} missing in {out}"
            );
        }
        // Still JSON, and it reads back as what the agent sent.
        let value: Value = serde_json::from_str(&out).expect("valid JSON");
        let input = if args[0] == "show" {
            &value["input"]
        } else {
            &value[0]["input"]
        };
        assert_eq!(input["command"], INVISIBLE, "{args:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_allows_similar_calls_and_grants_lists_and_revokes_them() {
    let relay = Relay::start();
    let base = relay.base();
    relay
        .create(bash("toolu_g1", "npm run test -- --watch"))
        .await;
    let mut w = Watch::start("allow_similar", &base, &[]);
    w.expect("g allow similar calls");
    w.expect("a/d/e/g/s/q › ");
    w.line("g");
    w.expect("allow similar calls by Bash(npm run test:*) (Enter keeps it, or type another rule; c cancels) › ");
    w.line("Bash(npm run");
    w.expect("the specifier is not closed");
    w.line("");
    w.expect("s for this session · a always (until revoked) · c cancel › ");
    w.line("s");
    w.expect("✓ Allowed by alice via terminal");
    w.expect("Granted: session   Bash(npm run test:*)  (route default, claude-code, in /home/dev/shop, session 5f8a2c1e-3b7d), by alice via terminal, until ");
    // The next matching call never reaches a person: watch says the rule decided it.
    let next = relay.create(bash("toolu_g2", "npm run test")).await;
    assert_eq!(next["status"], "resolved");
    w.expect("⚙ Allowed by policy rule grant Bash(npm run test:*): Run: npm run test");
    w.line("q");
    w.expect("Bye.");
    assert_eq!(w.exit_code(), 0);

    let (code, out, err) = run(&base, &["grants"], &[]).await;
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("session   Bash(npm run test:*)"), "{out}");
    let id = out
        .lines()
        .nth(1)
        .and_then(|l| l.split_whitespace().next())
        .unwrap()
        .to_string();
    let (code, out, err) = run(&base, &["grants", "revoke", &id], &[]).await;
    assert_eq!(code, 0, "{err}");
    assert!(out.starts_with("Revoked: session"), "{out}");
    let (code, _, err) = run(&base, &["grants", "revoke", &id], &[]).await;
    assert_eq!(code, 4, "{err}");
    let (code, out, _) = run(&base, &["grants"], &[]).await;
    assert_eq!(code, 0);
    // Said with how to make one.
    assert_eq!(
        out.trim_end(),
        "No grants in force. Allowing an approval with a rule makes one: `imrelay answer ID allow --similar`, or g in `imrelay watch`."
    );
    // From a script: a standing grant with the answer.
    relay
        .create(bash("toolu_g3", "cargo build --release"))
        .await;
    let (code, out, err) = run(
        &base,
        &[
            "answer",
            "toolu_g3",
            "allow",
            "--similar",
            "--scope",
            "standing",
        ],
        &[],
    )
    .await;
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("Granted: standing  Bash(cargo build:*)"),
        "{out}"
    );
    let (code, _, err) = run(&base, &["answer", "toolu_g3", "deny", "--similar"], &[]).await;
    assert_eq!(code, 2, "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_offers_no_edit_for_an_agent_that_cannot_take_one() {
    use std::process::Stdio;
    use tokio::io::AsyncWriteExt;

    let relay = Relay::start();
    // Codex's PermissionRequest, through the command Codex runs.
    let mut hook = tokio::process::Command::new(env!("CARGO_BIN_EXE_imrelay"))
        .args(["hook", "codex", "--url", &relay.base(), "--timeout", "120"])
        .env_remove("IMRELAY_AGENT_TOKEN")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("imrelay hook codex runs");
    let input =
        serde_json::to_vec(&crate::support::fixture("codex/permission_request.json")).unwrap();
    let mut stdin = hook.stdin.take().unwrap();
    stdin.write_all(&input).await.unwrap();
    drop(stdin);
    let mut w = Watch::start("codex", &relay.base(), &[]);
    w.expect("Command:\r\n    echo ok > proof.txt");
    w.expect("a/d/g/s/q › ");
    w.line("e");
    w.expect("codex cannot run an edited input: type a (allow) or d (deny).");
    w.line("a");
    w.expect("✓ Allowed by alice via terminal");
    let out = hook.wait_with_output().await.expect("the hook's output");
    let printed: Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_eq!(
        printed["hookSpecificOutput"]["decision"],
        json!({"behavior": "allow"})
    );
    w.line("q");
    assert_eq!(w.exit_code(), 0);
}

/// A free-text prompt is a question in `watch` and `show`: headed "Question", the question
/// in place of a field ("1  Answer * — text"), answered by the line typed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_free_text_prompt_is_a_question_in_watch_and_show() {
    let relay = Relay::start();
    relay
        .create(json!({"id": "p1", "kind": "prompt", "message": "What is your favorite color?"}))
        .await;
    let mut w = Watch::start("prompt", &relay.base(), &[]);
    let before = w.expect("━━ Question ━━");
    assert!(!before.contains("Form"), "{before}");
    let asked = w.expect("your answer › ");
    assert!(asked.contains("  What is your favorite color?"), "{asked}");
    for form_word in ["Answer *", "— text", "Answer ›", "Form"] {
        assert!(!asked.contains(form_word), "{form_word:?} in {asked}");
    }
    w.line("Teal");
    w.expect("✓ Answered by alice via terminal");
    assert_eq!(
        relay.get("p1").await["resolution"]["result"]["content"],
        json!({"answer": "Teal"})
    );
    w.line("q");
    assert_eq!(w.exit_code(), 0);

    let (code, out, err) = run(&relay.base(), &["show", "p1"], &[]).await;
    assert_eq!(code, 0, "{err}");
    assert!(out.starts_with("━━ Question ━━"), "{out}");
    assert!(
        out.contains("  What is your favorite color?\n\n✓ Answered by alice via terminal at "),
        "{out}"
    );
    assert!(out.trim_end().ends_with("\n    → Teal"), "{out}");
    assert!(
        !out.contains("Answer:") && !out.contains("Answer *"),
        "{out}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn answer_all_answers_one_sessions_requests_and_nothing_else() {
    let relay = Relay::start();
    let base = relay.base();
    let mut other = bash("toolu_o1", "make deploy");
    other["session"] = json!("s-other");
    relay.create(other).await;
    for (id, command) in [("toolu_a1", "npm test"), ("toolu_a2", "npm run lint")] {
        let mut b = bash(id, command);
        b["session"] = json!("s-1");
        relay.create(b).await;
    }
    let mut q = two_questions("toolu_aq");
    q["session"] = json!("s-1");
    relay.create(q).await;

    // Without a filter, nothing is answered.
    let (code, _, err) = run(&base, &["answer", "--all", "allow"], &[]).await;
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("--all needs --session or --agent"), "{err}");

    let (code, out, err) = run(
        &base,
        &["answer", "--all", "--session", "s-1", "allow"],
        &[],
    )
    .await;
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        out.contains("skipped toolu_aq: a question is answered on its own"),
        "{out}"
    );
    assert!(out.contains("allowed toolu_a1  Run: npm test"), "{out}");
    assert!(out.contains("allowed toolu_a2  Run: npm run lint"), "{out}");
    for id in ["toolu_a1", "toolu_a2"] {
        let i = relay.get(id).await;
        assert_eq!(i["resolution"]["outcome"], "allowed", "{i}");
        assert_eq!(i["resolution"]["by"], "carol");
        assert_eq!(i["resolution"]["via"], "terminal");
    }
    assert_eq!(relay.get("toolu_o1").await["status"], "pending");
    assert_eq!(relay.get("toolu_aq").await["status"], "pending");

    // Deny declines the question too, with the one reason.
    let (code, out, err) = run(
        &base,
        &[
            "answer",
            "--all",
            "--session",
            "s-1",
            "deny",
            "--reason",
            "later",
        ],
        &[],
    )
    .await;
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("denied toolu_aq"), "{out}");
    let q = relay.get("toolu_aq").await;
    assert_eq!(q["resolution"]["result"]["message"], "later", "{q}");
    assert_eq!(relay.get("toolu_o1").await["status"], "pending");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_shows_the_votes_so_far_on_an_approval_that_needs_several_people() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("imrelay.toml");
    let token = |who: &str| format!("{who}-token-0123456789abcdef");
    std::fs::write(
        &config,
        format!(
            "[auth]\noperator_tokens = [\n  {{ token = \"{}\", label = \"alice-term\" }},\n  \
             {{ token = \"{}\", label = \"bob-laptop\" }},\n  \
             {{ token = \"{}\", label = \"carol-phone\" }},\n]\n\
             [[people]]\nname = \"alice\"\noperator = [\"alice-term\"]\n\
             [[people]]\nname = \"bob\"\noperator = [\"bob-laptop\"]\n\
             [[people]]\nname = \"carol\"\noperator = [\"carol-phone\"]\n\
             [[routes]]\nname = \"deploy\"\ncwd = [\"/srv/deploy/**\"]\nquorum = 3\n",
            token("alice"),
            token("bob"),
            token("carol")
        ),
    )
    .unwrap();
    let server = Server::start_with(&dir.path().join("imrelay.db"), Some(&config));
    let http = reqwest::Client::new();
    let resp = http
        .post(format!("{}/v1/interactions", server.base))
        .json(
            &json!({"id": "vote-1", "tool_name": "Bash", "cwd": "/srv/deploy",
                      "input": {"command": "make deploy"}}),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::CREATED);
    let vote = |who: &str| {
        http.post(format!("{}/v1/interactions/vote-1/respond", server.base))
            .bearer_auth(token(who))
            .json(&json!({"decision": "allow"}))
            .send()
    };
    let alice = token("alice");
    let mut w = Watch::start("votes", &server.base, &[("IMRELAY_OPERATOR_TOKEN", &alice)]);
    w.expect("━━ Approval · Bash");
    w.expect("Needs 3 people · votes: 0 of 3");
    // A vote, no more: no edit, no "allow similar".
    w.expect("a/d/s/q › ");
    // Bob votes elsewhere: the running tally is said on the request shown.
    assert_eq!(vote("bob").await.unwrap().status(), StatusCode::ACCEPTED);
    w.expect("Needs 3 people · votes: 1 of 3: bob via api");
    // Alice's own answer is a vote too: said, and the next one waited for.
    w.line("a");
    w.expect("✓ Vote recorded: 2 of 3: bob via api, alice via terminal");
    w.expect("waiting for approvals and questions (q quits) › ");
    assert_eq!(vote("carol").await.unwrap().status(), StatusCode::OK);
    w.line("q");
    w.expect("Bye.");
    assert_eq!(w.exit_code(), 0);
    // Her own vote is said once, by the answer's response.
    assert!(
        !w.screen().contains("Needs 3 people · votes: 2 of 3"),
        "{}",
        w.screen()
    );
    server.kill();
}

/// A configuration of two people, each with a labelled operator token (`tokens`), and a
/// route whose approvals need two people; the token of `who`.
fn two_person_rule(dir: &Path, tokens: bool) -> (PathBuf, impl Fn(&str) -> String) {
    let token = |who: &str| format!("{who}-token-0123456789abcdef");
    let config = dir.join("imrelay.toml");
    let people = if tokens {
        format!(
            "[auth]\noperator_tokens = [\n  {{ token = \"{}\", label = \"alice-term\" }},\n  \
             {{ token = \"{}\", label = \"bob-laptop\" }},\n]\n\
             [[people]]\nname = \"alice\"\noperator = [\"alice-term\"]\n\
             [[people]]\nname = \"bob\"\noperator = [\"bob-laptop\"]\n",
            token("alice"),
            token("bob"),
        )
    } else {
        String::new()
    };
    // Without labelled tokens the terminal is one voter (the administrator): a signed
    // webhook is the second that makes the quorum reachable (check-config refuses one that
    // is not).
    let second = if tokens {
        ""
    } else {
        "[[webhooks]]\nname = \"ops\"\nurl = \"http://127.0.0.1:9/hook\"\n\
         secret = \"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw\"\n"
    };
    std::fs::write(
        &config,
        format!("{people}{second}[[routes]]\nname = \"deploy\"\ncwd = [\"/srv/deploy/**\"]\nquorum = 2\n"),
    )
    .unwrap();
    (config, token)
}

/// Creates a deploy (which needs two people) with `id` on `server`.
async fn deploy(http: &reqwest::Client, server: &Server, id: &str) {
    let resp = http
        .post(format!("{}/v1/interactions", server.base))
        .json(&json!({"id": id, "tool_name": "Bash", "cwd": "/srv/deploy",
                      "input": {"command": "make deploy"}}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::CREATED);
}

/// On an approval several people decide, watch offers a vote and no more (no edit, no "allow
/// similar"); what this person voted on already (before watch started, or meanwhile from
/// elsewhere) is said and not offered again; and with a labelled token it greets the token's
/// person, not `--by`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_offers_only_a_vote_on_a_two_person_approval_and_never_a_second_one() {
    let dir = tempfile::tempdir().unwrap();
    let (config, token) = two_person_rule(dir.path(), true);
    let server = Server::start_with(&dir.path().join("imrelay.db"), Some(&config));
    let http = reqwest::Client::new();
    let bob = token("bob");
    let vote = |id: &str| {
        http.post(format!("{}/v1/interactions/{id}/respond", server.base))
            .bearer_auth(&bob)
            .json(&json!({"decision": "allow"}))
            .send()
    };
    // Bob votes on one from a script first.
    deploy(&http, &server, "vote-2").await;
    assert_eq!(vote("vote-2").await.unwrap().status(), StatusCode::ACCEPTED);

    // Bob's token, and `--by alice` (as every watch here is started): imrelay records Bob.
    let mut w = Watch::start(
        "second_vote",
        &server.base,
        &[("IMRELAY_OPERATOR_TOKEN", &bob)],
    );
    w.expect(
        "Answering as bob (token bob-laptop), not alice: imrelay records the token's person. Connecting…",
    );
    w.expect("⚑ You already allowed vote-2 (Bash) via api: it waits for the others.");
    w.expect("Needs 2 people · votes: 1 of 2: bob via api");
    w.expect("waiting for approvals and questions (q quits) › ");

    // One he has not voted on: a vote, and nothing else.
    deploy(&http, &server, "vote-3").await;
    w.expect("━━ Approval · Bash");
    let keys = w.expect("a/d/s/q › ");
    assert!(
        keys.contains("a allow · d deny · s skip · q quit"),
        "{keys}"
    );
    let refused = "Several people decide this one: each allows it as it is, and no rule allows it \
                   for them. Type a (allow: your vote) or d (deny).";
    for key in ["g", "e"] {
        w.line(key);
        w.expect(refused);
    }
    // He votes from elsewhere while it is shown: said, and the watch moves on.
    assert_eq!(vote("vote-3").await.unwrap().status(), StatusCode::ACCEPTED);
    w.expect("⚑ You already allowed vote-3 (Bash) via api: it waits for the others.");
    w.expect("waiting for approvals and questions (q quits) › ");
    w.line("q");
    w.expect("Bye.");
    assert_eq!(w.exit_code(), 0);
    let screen = w.screen();
    for wrong in ["unexpected answer", "allow similar"] {
        assert!(
            !screen.contains(wrong),
            "{wrong:?} on the screen:\n{screen}"
        );
    }
    // Shown once only: the one voted on before watch started never was.
    assert_eq!(screen.matches("━━ Approval · Bash").count(), 1, "{screen}");
    server.kill();
}

/// Without tokens every terminal answer is one person's: a second vote from a terminal is
/// refused by imrelay, and watch says so as a person would, not as an HTTP status.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_says_a_second_vote_plainly() {
    let dir = tempfile::tempdir().unwrap();
    // Two people, each with a labelled token (without them every answer is the
    // administrator's, and check-config refuses a quorum of two nobody else can give).
    let (config, token) = two_person_rule(dir.path(), true);
    let server = Server::start_with(&dir.path().join("imrelay.db"), Some(&config));
    let http = reqwest::Client::new();
    deploy(&http, &server, "vote-4").await;
    let alice = token("alice");
    let env = [("IMRELAY_OPERATOR_TOKEN", alice.as_str())];
    let mut w = Watch::start("second_vote_refused", &server.base, &env);
    w.expect("Needs 2 people · votes: 0 of 2");
    w.expect("a/d/s/q › ");
    // Alice votes from a script while her watch shows the card: the watch says so at once,
    // and offers it no more.
    let (code, out, err) = run(&server.base, &["answer", "vote-4", "allow"], &env).await;
    assert_eq!(code, 0, "{out}{err}");
    w.expect("⚑ You already allowed vote-4 (Bash) via terminal: it waits for the others.");
    w.expect("Needs 2 people · votes: 1 of 2: alice via terminal");
    w.expect("waiting for approvals and questions (q quits) › ");
    w.line("a");
    w.expect("Nothing to answer right now.");
    w.line("q");
    w.expect("Bye.");
    assert_eq!(w.exit_code(), 0);
    assert!(!w.screen().contains("unexpected answer"), "{}", w.screen());
    // A script is told the same, with the exit status of a refusal.
    let (code, _, err) = run(&server.base, &["answer", "vote-4", "allow"], &env).await;
    assert_eq!(code, 5, "{err}");
    assert!(
        err.contains("alice already voted on vote-4 (allowed via terminal at "),
        "{err}"
    );
    assert!(err.contains("each person counts once"), "{err}");
    server.kill();
}

/// "Allow similar calls" for a call imrelay proposes no rule for (a pipeline): the prompt asks
/// for one, and promises nothing for Enter.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_asks_for_a_rule_when_it_has_none_to_propose() {
    let relay = Relay::start();
    relay.create(bash("toolu_n1", "ls | wc -l")).await;
    let mut w = Watch::start("no_rule", &relay.base(), &[]);
    // No labelled token: the name given.
    w.expect("Answering as alice. Connecting…");
    w.expect("a/d/e/g/s/q › ");
    w.line("g");
    let asked = "allow similar calls by the rule (e.g. Bash(npm run test:*); c cancels) › ";
    w.expect(asked);
    w.line("");
    w.expect("Type the rule to allow, e.g. Bash(npm run test:*)");
    w.line("c");
    w.expect("a/d/e/g/s/q › ");
    w.line("q");
    w.expect("Bye.");
    assert_eq!(w.exit_code(), 0);
    assert!(!w.screen().contains("Enter keeps it"), "{}", w.screen());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_lists_the_agent_sessions_with_their_states() {
    let relay = Relay::start();
    let hook = |body: Value| {
        let (http, url) = (
            relay.http.clone(),
            format!("{}/v1/hooks/claude-code", relay.base()),
        );
        async move {
            let resp = http.post(url).json(&body).send().await.expect("a hook");
            assert_eq!(resp.status(), StatusCode::OK);
        }
    };
    // One session working, one whose turn ended with what it said.
    hook(
        json!({"hook_event_name": "UserPromptSubmit", "session_id": "s-working",
        "cwd": "/home/dev/shop", "prompt": "run the tests"}),
    )
    .await;
    hook(
        json!({"hook_event_name": "Stop", "session_id": "s-done", "cwd": "/home/dev/blog",
        "stop_hook_active": false, "last_assistant_message": "Published the post."}),
    )
    .await;
    let mut w = Watch::start("sessions", &relay.base(), &[]);
    w.expect("sessions lists the agent sessions");
    w.expect("waiting for approvals and questions (q quits) › ");
    w.line("sessions");
    w.expect("Agent sessions (2):");
    w.expect_each(&[
        "finished · claude-code s-done · /home/dev/blog · route default · said “Published the post.”",
        "working · claude-code s-working · /home/dev/shop · route default",
    ]);
    w.expect("waiting for approvals and questions (q quits) › ");
    // At an approval's prompt too, where the session asking shows as waiting.
    let asked = {
        let (http, url) = (
            relay.http.clone(),
            format!("{}/v1/hooks/claude-code", relay.base()),
        );
        tokio::spawn(async move {
            let body = json!({"hook_event_name": "PreToolUse", "session_id": "s-working",
                "cwd": "/home/dev/shop", "tool_name": "Bash", "tool_use_id": "toolu_s1",
                "tool_input": {"command": "make test", "description": "Run the tests"}});
            http.post(url)
                .json(&body)
                .send()
                .await
                .expect("a hook")
                .status()
        })
    };
    w.expect("a/d/e/g/s/q › ");
    w.line("sessions");
    w.expect("Agent sessions (2):");
    w.expect("waiting · claude-code s-working · /home/dev/shop · route default · 1 waiting");
    w.expect("a/d/e/g/s/q › ");
    w.line("a");
    w.expect("✓ Allowed by alice via terminal");
    assert_eq!(asked.await.unwrap(), StatusCode::OK);
    w.line("q");
    w.expect("Bye.");
    assert_eq!(w.exit_code(), 0);
}
