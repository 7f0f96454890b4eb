//! Tokens that cannot be mixed up: the real server logs every request it refuses for its
//! token with a fingerprint (never the token), and `imrelay doctor --agent-token` says
//! whether the server takes a token as an agent's.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

const AGENT: &str = "agent-token-0123456789abcdef";
const OPERATOR: &str = "operator-token-0123456789abcdef";
const WRONG: &str = "wrong-token-0123456789abcdef";

/// A file configuring both kinds of token, listening on `port`, with a store in memory.
fn config(dir: &Path, port: u16) -> std::path::PathBuf {
    let path = dir.join("imrelay.toml");
    std::fs::write(
        &path,
        format!(
            "[server]\nlisten = \"127.0.0.1:{port}\"\n[store]\nbackend = \"memory\"\n\
             [log]\nformat = \"json\"\n\
             [auth]\nagent_tokens = [\"{AGENT}\"]\noperator_tokens = [\"{OPERATOR}\"]\n"
        ),
    )
    .unwrap();
    path
}

/// A running server, stopped when dropped.
struct Serving(Child);

impl Drop for Serving {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `imrelay serve` with `config`, and its log lines as they come; returns once it is ready.
fn serve(config: &Path) -> (Serving, mpsc::Receiver<String>) {
    let mut child = Serving(
        Command::new(env!("CARGO_BIN_EXE_imrelay"))
            .env_clear()
            .env("RUST_LOG", "info")
            .arg("--config")
            .arg(config)
            .arg("serve")
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("imrelay starts"),
    );
    let stderr = child.0.stderr.take().expect("stderr");
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    loop {
        let line = rx
            .recv_timeout(Duration::from_secs(30))
            .expect("the server reports it is ready");
        if line.contains("imrelay is ready") {
            return (child, rx);
        }
    }
}

/// The next log line containing `what`.
fn line_with(rx: &mpsc::Receiver<String>, what: &str) -> String {
    loop {
        let line = rx
            .recv_timeout(Duration::from_secs(10))
            .unwrap_or_else(|_| panic!("a log line with {what:?}"));
        if line.contains(what) {
            return line;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refused_tokens_are_logged_by_fingerprint_and_doctor_checks_an_agent_token() {
    let dir = tempfile::tempdir().unwrap();
    let port = crate::support::free_port();
    let config = config(dir.path(), port);
    let (server, log) = serve(&config);
    let http = reqwest::Client::new();
    let base = format!("http://127.0.0.1:{port}");
    // A wrong token on an agent's endpoint: 401, and a line naming it by fingerprint.
    let resp = http
        .post(format!("{base}/v1/interactions"))
        .bearer_auth(WRONG)
        .json(&serde_json::json!({"kind": "approval", "tool": {"name": "Bash", "input": {"command": "ls"}}}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 401);
    let line = line_with(&log, "refused a request for its token");
    assert!(
        line.contains(&imrelay::settings::fingerprint(WRONG)),
        "{line}"
    );
    assert!(
        line.contains("/v1/interactions") && line.contains("agent"),
        "{line}"
    );
    assert!(
        !line.contains(WRONG),
        "the token itself is never logged: {line}"
    );
    // An operator token where an agent's is needed: 403, logged the same way.
    let resp = http
        .post(format!("{base}/v1/interactions"))
        .bearer_auth(OPERATOR)
        .json(&serde_json::json!({}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 403);
    let line = line_with(&log, "refused a request for its token");
    assert!(
        line.contains(&imrelay::settings::fingerprint(OPERATOR)) && !line.contains(OPERATOR),
        "{line}"
    );

    // doctor --agent-token, for each kind of token.
    let doctor = |token: &str| {
        let out = Command::new(env!("CARGO_BIN_EXE_imrelay"))
            .env_clear()
            .arg("--config")
            .arg(&config)
            .args(["doctor", "--agent-token", token])
            .output()
            .expect("doctor runs");
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr)
    };
    let out = doctor(AGENT);
    let fp = imrelay::settings::fingerprint(AGENT);
    assert!(
        out.contains(&format!(
            "agent token {fp} is accepted by the server at {base}"
        )),
        "{out}"
    );
    let out = doctor(WRONG);
    assert!(out.contains("does not know it (401)"), "{out}");
    assert!(!out.contains(WRONG), "{out}");
    let out = doctor(OPERATOR);
    assert!(out.contains("not as an agent token (403)"), "{out}");
    // Without a value: IMRELAY_AGENT_TOKEN's.
    let out = Command::new(env!("CARGO_BIN_EXE_imrelay"))
        .env_clear()
        .env("IMRELAY_AGENT_TOKEN", AGENT)
        .arg("--config")
        .arg(&config)
        .args(["doctor", "--agent-token"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        text.contains(&format!("agent token {fp} is accepted")),
        "{text}"
    );
    drop(server);
}
