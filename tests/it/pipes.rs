//! Closed output: a server whose log pipe was closed (`imrelay serve 2>&1 | head -1`, or
//! only standard error closed) neither panics nor ignores SIGTERM and SIGINT, in either log
//! format; a command whose output is closed (`imrelay audit | head`) ends quietly.

use std::io::{BufRead, BufReader, Read};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

use crate::support::free_port;

/// Longest a stopped server may take to exit; reaching it fails the test.
const BOUND: Duration = Duration::from_secs(30);

/// The server binary on `listen` with the memory store and `format` logs at info.
fn server(listen: &str, format: &str) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_imrelay"));
    cmd.arg("serve")
        .env("IMRELAY__SERVER__LISTEN", listen)
        .env("IMRELAY__STORE__BACKEND", "memory")
        .env("IMRELAY__LOG__FORMAT", format)
        .env("RUST_LOG", "info")
        .stdin(Stdio::null());
    cmd
}

/// Waits for `child` to exit within [`BOUND`]; kills it (and fails) otherwise.
fn exits(child: &mut Child, what: &str) -> ExitStatus {
    let deadline = Instant::now() + BOUND;
    while Instant::now() < deadline {
        if let Some(status) = child.try_wait().expect("wait") {
            return status;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = child.kill();
    let _ = child.wait();
    panic!("{what}: still running {BOUND:?} after the signal");
}

/// Waits until the server on `port` answers `/livez`.
fn ready(port: u16, child: &mut Child) {
    let deadline = Instant::now() + BOUND;
    while Instant::now() < deadline {
        if let Some(status) = child.try_wait().expect("wait") {
            panic!("the server exited before it was ready: {status}");
        }
        if let Ok(mut s) = std::net::TcpStream::connect(("127.0.0.1", port)) {
            use std::io::Write;
            let _ =
                s.write_all(b"GET /livez HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n");
            let mut got = String::new();
            let _ = s.read_to_string(&mut got);
            if got.starts_with("HTTP/1.1 200") {
                return;
            }
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    panic!("the server was not ready within {BOUND:?}");
}

#[test]
fn a_server_logging_into_a_closed_pipe_stops_on_sigterm_and_sigint() {
    for format in ["text", "json"] {
        for signal in [Signal::SIGTERM, Signal::SIGINT] {
            let what = format!("{format} logs, {signal}");
            let port = free_port();
            // `imrelay serve 2>&1 | head -1`: one pipe for both, closed after the first line.
            let (reader, writer) = std::io::pipe().expect("pipe");
            let mut child = server(&format!("127.0.0.1:{port}"), format)
                .stdout(writer.try_clone().expect("clone"))
                .stderr(writer)
                .spawn()
                .expect("the binary starts");
            let mut first = String::new();
            BufReader::new(reader)
                .read_line(&mut first)
                .expect("a first line");
            assert!(!first.is_empty(), "{what}: the server logged nothing");
            // The reader is gone: every log line from here on meets a closed pipe.
            ready(port, &mut child);
            kill(Pid::from_raw(child.id() as i32), signal).expect("signal");
            let status = exits(&mut child, &what);
            assert!(status.success(), "{what}: {status}");
        }
    }
}

#[test]
fn a_server_with_standard_error_closed_serves_and_stops() {
    for format in ["text", "json"] {
        let port = free_port();
        let mut child = server(&format!("127.0.0.1:{port}"), format)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("the binary starts");
        // Closed before the server writes its first line.
        drop(child.stderr.take());
        ready(port, &mut child);
        kill(Pid::from_raw(child.id() as i32), Signal::SIGTERM).expect("signal");
        let status = exits(&mut child, format);
        assert!(status.success(), "{format} logs: {status}");
    }
}

#[tokio::test]
async fn a_command_whose_output_is_closed_ends_quietly() {
    use imrelay::store::{SqliteStore, Synchronous};
    let dir = tempfile::tempdir().expect("tempdir");
    let db = dir.path().join("imrelay.db");
    {
        // A database with an audit trail.
        let store = std::sync::Arc::new(SqliteStore::open(&db, Synchronous::Normal).expect("db"));
        let app = crate::support::spawn_on(crate::support::settings(), store).await;
        app.create_bash("piped-1", "ls").await;
        app.stop().await;
    }
    crate::support::sqlite_closed(&db).await;
    let (ok, out, err) = crate::support::cli(&db, &["audit", "verify"]);
    assert!(ok, "{out}{err}");
    for args in [
        &["audit"][..],
        &["audit", "--json"],
        &["audit", "head"],
        &["audit", "verify"],
        &["check-config"],
    ] {
        // `imrelay ... | head -0`: the reader is gone before anything is written.
        let (reader, writer) = std::io::pipe().expect("pipe");
        drop(reader);
        let (mut err_reader, err_writer) = std::io::pipe().expect("pipe");
        let mut child = Command::new(env!("CARGO_BIN_EXE_imrelay"))
            .args(args)
            .env("IMRELAY__STORE__PATH", &db)
            .stdin(Stdio::null())
            .stdout(writer)
            .stderr(err_writer)
            .spawn()
            .expect("the binary starts");
        let mut err = String::new();
        err_reader.read_to_string(&mut err).expect("stderr");
        let status = child.wait().expect("wait");
        assert!(status.success(), "{args:?}: {status}; {err}");
        assert!(!err.contains("Broken pipe"), "{args:?}: {err}");
        assert!(!err.contains("panicked"), "{args:?}: {err}");
    }
}
