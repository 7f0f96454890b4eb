//! The real agent programs, installed from npm and driven offline against a fake model API on
//! loopback ([`fake_model`]), talking to the real imrelay: how an agent adapter is proven.
//!
//! `install.sh` beside this file installs each program at the version pinned in
//! `npm/<name>/package-lock.json` into `target/agents/<name>/node_modules` (reused when it is
//! already there). When npm or the registry cannot be reached, the tests that need the program
//! are reported as ignored with the installer's reason; with `IMRELAY_TEST_AGENTS=require`
//! (`.ci/run` sets it) they fail instead.
//!
//! Every run gets a temporary directory of its own holding its home, XDG directories and
//! configuration, and a project directory to work in; the environment is cleared but for
//! `PATH`, so nothing is read from, or written to, the user's own settings.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

use crate::Need;

pub(crate) mod acp;
pub(crate) mod acp_steer;
pub(crate) mod claude_code;
pub(crate) mod codex;
pub(crate) mod fake_model;
pub(crate) mod gemini;
pub(crate) mod opencode;
pub(crate) mod opencode_steer;
pub(crate) mod tap;

/// The agents the installer knows (directories under `npm/`), with their command.
const AGENTS: [(&str, &str); 4] = [
    ("claude-code", "claude"),
    ("codex", "codex"),
    ("gemini-cli", "gemini"),
    ("opencode", "opencode"),
];

/// The build directory (`target/`), found from cargo's per-test temporary directory.
fn target_dir() -> PathBuf {
    let tmp = PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
    tmp.parent().map(Path::to_path_buf).unwrap_or(tmp)
}

/// Installs `name` once per test run: the path of its command, or why it cannot be had.
pub(crate) fn installed(name: &str) -> Result<PathBuf, String> {
    static DONE: OnceLock<Mutex<HashMap<String, Result<PathBuf, String>>>> = OnceLock::new();
    let done = DONE.get_or_init(|| Mutex::new(HashMap::new()));
    let mut done = done.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(r) = done.get(name) {
        return r.clone();
    }
    let result = install(name);
    done.insert(name.to_string(), result.clone());
    result
}

fn install(name: &str) -> Result<PathBuf, String> {
    let Some((_, bin)) = AGENTS.iter().find(|(n, _)| *n == name) else {
        return Err(format!("no agent named {name}"));
    };
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/external/agents/install.sh");
    let target = target_dir();
    let out = std::process::Command::new("bash")
        .arg(&script)
        .arg("--target")
        .arg(&target)
        .arg(name)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("cannot run {}: {e}", script.display()))?;
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        let reason = err
            .lines()
            .rfind(|l| !l.trim().is_empty())
            .unwrap_or("the installer failed");
        return Err(format!("{name} could not be installed from npm: {reason}"));
    }
    Ok(target
        .join("agents")
        .join(name)
        .join("node_modules/.bin")
        .join(bin))
}

/// Whether `name` is here: installed (now if need be), or missing with the installer's reason,
/// or required (`IMRELAY_TEST_AGENTS=require`) and so a failure.
fn need(name: &str) -> Need {
    match installed(name) {
        Ok(_) => Need::Here,
        Err(reason) if std::env::var("IMRELAY_TEST_AGENTS").as_deref() == Ok("require") => {
            Need::Required(format!("{reason} (IMRELAY_TEST_AGENTS=require)"))
        }
        Err(reason) => Need::Missing(reason),
    }
}

pub(crate) fn claude_code() -> Need {
    need("claude-code")
}

pub(crate) fn gemini_cli() -> Need {
    need("gemini-cli")
}

pub(crate) fn opencode() -> Need {
    need("opencode")
}

pub(crate) fn codex() -> Need {
    need("codex")
}

/// Codex, and tmux to run its terminal interface in.
pub(crate) fn codex_tui() -> Need {
    let tmux = std::process::Command::new("tmux")
        .arg("-V")
        .output()
        .is_ok_and(|o| o.status.success());
    match (need("codex"), tmux) {
        (Need::Here, true) => Need::Here,
        (Need::Here, false) => {
            let reason = "tmux is not installed (Debian's tmux; .ci/run installs it)".to_string();
            if std::env::var("IMRELAY_TEST_AGENTS").as_deref() == Ok("require") {
                Need::Required(reason)
            } else {
                Need::Missing(reason)
            }
        }
        (other, _) => other,
    }
}

/// With `IMRELAY_CAPTURE_FIXTURES=1`, writes `value` to `tests/fixtures/<path>` (how the
/// fixtures captured from the real programs are refreshed); otherwise does nothing.
pub(crate) fn capture(path: &str, value: &serde_json::Value) {
    if std::env::var("IMRELAY_CAPTURE_FIXTURES").as_deref() != Ok("1") {
        return;
    }
    let file = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(path);
    if let Some(dir) = file.parent() {
        std::fs::create_dir_all(dir).expect("the fixtures directory");
    }
    let text = serde_json::to_string_pretty(value).expect("JSON");
    std::fs::write(&file, text + "\n").expect("write the fixture");
}

/// The trials of every agent.
pub(crate) fn trials() -> Vec<libtest_mimic::Trial> {
    [
        acp::trials(),
        acp_steer::trials(),
        claude_code::trials(),
        codex::trials(),
        gemini::trials(),
        opencode::trials(),
        opencode_steer::trials(),
    ]
    .into_iter()
    .flatten()
    .collect()
}

/// A directory for one run of an agent: `home/` (also the XDG directories) and `project/`
/// (the working directory). Removed when dropped.
pub(crate) struct Sandbox {
    pub dir: tempfile::TempDir,
}

impl Sandbox {
    pub(crate) fn new() -> Sandbox {
        let dir = tempfile::Builder::new()
            .prefix("imrelay-agent-")
            // Outside any git repository (the agents look for one above their directory).
            .tempdir()
            .expect("a temporary directory");
        std::fs::create_dir_all(dir.path().join("home")).expect("home");
        std::fs::create_dir_all(dir.path().join("project")).expect("project");
        Sandbox { dir }
    }

    pub(crate) fn home(&self) -> PathBuf {
        self.dir.path().join("home")
    }

    pub(crate) fn project(&self) -> PathBuf {
        self.dir.path().join("project")
    }

    /// A command for `program` with a cleared environment but for `PATH`, its home and XDG
    /// directories here, working in `project/`, with no standard input.
    pub(crate) fn command(&self, program: &Path) -> tokio::process::Command {
        let home = self.home();
        let mut c = tokio::process::Command::new(program);
        c.env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", &home)
            .env("XDG_CONFIG_HOME", home.join(".config"))
            .env("XDG_DATA_HOME", home.join(".local/share"))
            .env("XDG_STATE_HOME", home.join(".local/state"))
            .env("XDG_CACHE_HOME", home.join(".cache"))
            .env("TMPDIR", self.dir.path())
            .env("LANG", "C.UTF-8")
            .env("NO_COLOR", "1")
            .current_dir(self.project())
            .stdin(Stdio::null())
            .kill_on_drop(true);
        c
    }
}

/// What a run printed, and how it ended.
pub(crate) struct Output {
    /// `None` when it was killed at its time limit.
    pub status: Option<std::process::ExitStatus>,
    pub stdout: String,
    pub stderr: String,
}

impl Output {
    /// Everything, for failure messages.
    pub(crate) fn describe(&self) -> String {
        format!(
            "exit: {}\n--- stdout\n{}\n--- stderr\n{}",
            match self.status {
                Some(s) => s.to_string(),
                None => "none: killed at the time limit".into(),
            },
            self.stdout,
            self.stderr
        )
    }

    pub(crate) fn succeeded(&self) -> bool {
        self.status.is_some_and(|s| s.success())
    }
}

/// A running agent whose output goes to files in its sandbox (so that what it printed can be
/// read even when it has to be killed).
pub(crate) struct Running {
    child: tokio::process::Child,
    stdout: PathBuf,
    stderr: PathBuf,
}

impl Sandbox {
    /// Starts `command`, its output going to files beside `home/`.
    pub(crate) fn spawn(&self, mut command: tokio::process::Command) -> Running {
        let stdout = self.dir.path().join("stdout.log");
        let stderr = self.dir.path().join("stderr.log");
        command
            .stdout(std::fs::File::create(&stdout).expect("stdout file"))
            .stderr(std::fs::File::create(&stderr).expect("stderr file"));
        let child = command.spawn().expect("start the agent");
        Running {
            child,
            stdout,
            stderr,
        }
    }
}

impl Running {
    /// What it has printed so far.
    pub(crate) fn output(&mut self) -> Output {
        Output {
            status: self.child.try_wait().ok().flatten(),
            stdout: std::fs::read_to_string(&self.stdout).unwrap_or_default(),
            stderr: std::fs::read_to_string(&self.stderr).unwrap_or_default(),
        }
    }

    /// Whether it has ended.
    pub(crate) fn exited(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(Some(_)))
    }

    /// Waits for it to end, for at most `limit`, then kills it; what it printed.
    pub(crate) async fn finish(mut self, limit: Duration) -> Output {
        if tokio::time::timeout(limit, self.child.wait())
            .await
            .is_err()
        {
            let _ = self.child.kill().await;
            let mut out = self.output();
            out.status = None;
            return out;
        }
        self.output()
    }

    /// Waits until `probe` gives a value, for at most `limit`; panics with the agent's output
    /// if the agent ends first or the time runs out.
    pub(crate) async fn until<T, F>(
        &mut self,
        what: &str,
        limit: Duration,
        probe: impl FnMut() -> F,
    ) -> T
    where
        F: std::future::Future<Output = Option<T>>,
    {
        self.until_or(what, limit, probe, String::new).await
    }

    /// [`Running::until`], adding `context()` to the panic message.
    pub(crate) async fn until_or<T, F>(
        &mut self,
        what: &str,
        limit: Duration,
        mut probe: impl FnMut() -> F,
        context: impl Fn() -> String,
    ) -> T
    where
        F: std::future::Future<Output = Option<T>>,
    {
        let deadline = tokio::time::Instant::now() + limit;
        loop {
            if let Some(v) = probe().await {
                return v;
            }
            if self.exited() {
                panic!(
                    "the agent ended before {what}\n{}\n{}",
                    self.output().describe(),
                    context()
                );
            }
            if tokio::time::Instant::now() >= deadline {
                panic!(
                    "not within {limit:?}: {what}\n{}\n{}",
                    self.output().describe(),
                    context()
                );
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}
