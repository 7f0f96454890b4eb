//! `imrelay acp -- <agent command>`: a proxy that an editor (or a script) launches instead of
//! an Agent Client Protocol agent, so that the agent's permission requests reach people on
//! every imrelay channel (see docs/acp.md).
//!
//! It starts the agent and passes every message between the editor (its own standard input
//! and output) and the agent (the agent's) through unchanged, byte for byte, with one
//! exception: the agent's `session/request_permission` requests. Each is posted to a running
//! imrelay's [`crate::agents::acp::PATH`] (with an agent token, `IMRELAY_AGENT_TOKEN`), and
//! the answer goes back to the agent as the request's result. Everything ACP-specific about
//! the approval is on the server ([`crate::agents::acp`]); this command reads the messages
//! only to know the session's working directory and the agent's name
//! ([`mod@crate::agents::acp::session`]), and decides what to do when there is no answer:
//!
//! - imrelay cannot be reached, refuses the request, or gives no decision (its deadline with
//!   `on_timeout = "ask"`, shutting down): the request goes to the editor unchanged, so the
//!   editor's own prompt asks, as if there were no proxy;
//! - the editor cancels the prompt turn (`session/cancel`): each of that session's requests
//!   still waiting is answered `cancelled` (as ACP requires) and withdrawn on every channel;
//!   the agent withdrawing one (`$/cancel_request`) does the same for that one;
//! - a message that is not JSON-RPC, from either side, is passed on unchanged and reported on
//!   standard error; so is a permission request whose params cannot be read (the editor
//!   gets it).
//!
//! The agent runs in its own process group, and never outlives the proxy: when the agent
//! exits, the proxy exits with its status (and ends whatever the agent left running in its
//! group); when the editor closes the proxy's standard input, the agent's is closed too and
//! it has a few seconds to exit before it is killed; a `SIGTERM`, `SIGINT` or `SIGHUP` is
//! passed to the agent's group; and on Linux the agent is killed by the kernel if the proxy
//! itself is killed outright (`PR_SET_PDEATHSIG`).
//!
//! Steering (`steer.rs`): the proxy follows each session's prompt turns, tells imrelay when
//! one ends, and sends the agent the prompt imrelay answers with (a person's message, a
//! deny's instruction, a reply to the "finished" question) as a `session/prompt` of its own,
//! whose answer it keeps from the editor.
//!
//! Standard output carries only the protocol; messages for people go to standard error, where
//! the agent's own standard error goes too.

mod steer;

use std::collections::HashMap;
use std::process::Stdio;
use std::time::Duration;

use anyhow::Context;
use secrecy::{ExposeSecret, SecretString};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::sync::mpsc;
use tokio::task::AbortHandle;

use super::client::{AgentRemoteArgs, exit};
use crate::agents::acp::prompts::Whose;
use crate::agents::acp::session::{Tracker, id_key};
use crate::agents::acp::wire::{
    CANCEL_REQUEST, REQUEST_PERMISSION, SESSION_CANCEL, SESSION_UPDATE,
};
use crate::agents::acp::{HookReply, PATH, SESSION_PATH};
use crate::agents::turns::{TurnBody, TurnEvent, TurnReply};
use crate::telemetry::escape;
use crate::wire::MAX_BODY_BYTES;

/// The longest line read as one message; a longer one is passed on in pieces, unread.
const MAX_LINE_BYTES: usize = MAX_BODY_BYTES;

/// Permission requests waiting on imrelay at once; more go to the editor.
const MAX_WAITING: usize = 256;

/// Messages queued for each side (the reader waits while the writer is behind).
const QUEUE: usize = 64;

/// How long the agent has to exit once its input is closed or it was asked to stop, before
/// it is killed.
const GRACE: Duration = Duration::from_secs(3);

/// How long the agent's last output is read after it exited (a process it left behind may
/// hold its output open).
const DRAIN: Duration = Duration::from_secs(2);

/// `imrelay acp`'s arguments. (No `Debug`: it holds the token.)
#[derive(Clone, clap::Args)]
pub struct AcpArgs {
    /// Where the server is and the agent token to present.
    #[command(flatten)]
    pub remote: AgentRemoteArgs,
    /// The agent's command and its arguments, after `--` (`-- gemini --acp`).
    #[arg(
        required = true,
        trailing_var_arg = true,
        allow_hyphen_values = true,
        value_name = "AGENT COMMAND"
    )]
    pub command: Vec<String>,
}

/// Runs the proxy until the agent exits; returns the agent's exit status (or 1 when the
/// agent could not be started).
pub fn run(args: AcpArgs, config: Option<&std::path::Path>) -> i32 {
    let result = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")
        .and_then(|rt| {
            let result = rt.block_on(proxy(args, config));
            // The read of standard input blocks a thread until the editor writes or closes
            // it: the proxy ends without waiting for that.
            rt.shutdown_background();
            result
        });
    match result {
        Ok(code) => code,
        Err(e) => {
            say(&format!("{e:#}"));
            exit::ERROR
        }
    }
}

/// One line on standard error, from the proxy.
fn say(text: &str) {
    eprintln!("imrelay acp: {}", escape(text));
}

/// Where permission requests and turns are posted.
#[derive(Clone)]
struct Hook {
    url: String,
    session_url: String,
    token: Option<SecretString>,
    http: reqwest::Client,
}

impl Hook {
    /// Posts a permission request's `body` and reads the reply, or says why there is none.
    async fn ask(&self, body: Vec<u8>) -> Result<HookReply, String> {
        self.post(&self.url, body).await
    }

    /// Reports a session's turn; the prompt to send next, or why there is no answer.
    async fn turn(&self, body: &TurnBody) -> Result<TurnReply, String> {
        let bytes = serde_json::to_vec(body).map_err(|e| e.to_string())?;
        self.post(&self.session_url, bytes).await
    }

    /// Posts `body` to `url` and reads the answer as a `T`.
    async fn post<T: serde::de::DeserializeOwned>(
        &self,
        url: &str,
        body: Vec<u8>,
    ) -> Result<T, String> {
        let mut request = self
            .http
            .post(url)
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .body(body);
        if let Some(t) = &self.token {
            request = request.bearer_auth(t.expose_secret());
        }
        let response = request
            .send()
            .await
            .map_err(|e| format!("cannot reach imrelay at {url}: {e}"))?;
        let status = response.status();
        let body = response
            .bytes()
            .await
            .map_err(|e| format!("imrelay's answer was cut off: {e}"))?;
        if !status.is_success() {
            let message = serde_json::from_slice::<Value>(&body)
                .ok()
                .and_then(|v| v["error"]["message"].as_str().map(str::to_string))
                .unwrap_or_default();
            return Err(format!("imrelay answered {status}: {message}"));
        }
        serde_json::from_slice::<T>(&body)
            .map_err(|e| format!("imrelay's answer cannot be read: {e}"))
    }
}

/// One read from a side: a whole line (with its line break, unless the side ended without
/// one), or a piece of a line too long to read as one message.
enum Read {
    Line(Vec<u8>),
    Piece(Vec<u8>),
}

/// Reads `from` line by line into `to` until it ends or fails.
async fn read_lines(from: impl AsyncRead + Unpin, to: mpsc::Sender<Read>) {
    let mut reader = BufReader::new(from);
    let mut in_long_line = false;
    loop {
        let mut buf = Vec::new();
        match (&mut reader)
            .take(MAX_LINE_BYTES as u64)
            .read_until(b'\n', &mut buf)
            .await
        {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
        let complete = buf.ends_with(b"\n");
        let read = if complete && !in_long_line {
            Read::Line(buf)
        } else if !complete && buf.len() < MAX_LINE_BYTES && !in_long_line {
            // The side ended without a last line break.
            Read::Line(buf)
        } else {
            Read::Piece(buf)
        };
        in_long_line = !complete && matches!(read, Read::Piece(_));
        if to.send(read).await.is_err() {
            return;
        }
    }
}

/// Writes everything from `from` to `to`, in order, until `from` closes or a write fails.
async fn write_lines(mut to: impl AsyncWrite + Unpin, mut from: mpsc::Receiver<Vec<u8>>) {
    while let Some(bytes) = from.recv().await {
        if to.write_all(&bytes).await.is_err() || to.flush().await.is_err() {
            return;
        }
    }
}

/// A JSON-RPC message as one line.
fn line(message: &Value) -> Vec<u8> {
    let mut out = message.to_string().into_bytes();
    out.push(b'\n');
    out
}

/// The result of a request `id`.
fn result_line(id: &Value, result: &Value) -> Vec<u8> {
    line(&json!({"jsonrpc": "2.0", "id": id, "result": result}))
}

/// A permission request waiting on imrelay.
struct Waiting {
    /// The request as the agent wrote it (handed to the editor if imrelay gives no answer).
    line: Vec<u8>,
    /// Its id.
    id: Value,
    /// Its session.
    session: String,
    /// The call to imrelay: aborted, it withdraws the interaction.
    call: AbortHandle,
}

/// What the proxy does with a message, decided by reading it.
impl Proxy {
    /// The agent has exited: what waits is withdrawn, what it wrote before still reaches
    /// the editor (for at most [`DRAIN`]), and nothing of its process group outlives it.
    async fn after_exit(
        mut self,
        agent_lines: &mut mpsc::Receiver<Read>,
        mut agent_open: bool,
        pgid: Option<u32>,
    ) {
        self.abandon_all();
        self.steering.abandon_all();
        self.agent_gone = true;
        let drained = tokio::time::timeout(DRAIN, async {
            while agent_open {
                match agent_lines.recv().await {
                    Some(read) => self.on_agent_line(read).await,
                    None => agent_open = false,
                }
            }
        })
        .await;
        if drained.is_err() {
            say("the agent's output stayed open after it exited: stopped reading it");
        }
        #[cfg(unix)]
        signal_group(pgid, libc::SIGKILL);
        self.abandon_all();
        self.steering.abandon_all();
    }
}

struct Proxy {
    tracker: Tracker,
    steering: steer::Steering,
    hook: Hook,
    waiting: HashMap<String, Waiting>,
    done: mpsc::Sender<(String, Result<HookReply, String>)>,
    to_agent: Option<mpsc::Sender<Vec<u8>>>,
    to_editor: mpsc::Sender<Vec<u8>>,
    /// Whether an over-long message was reported already (once is enough).
    told_long: bool,
    /// The agent has exited: its last permission requests go to the editor, unanswered.
    agent_gone: bool,
}

impl Proxy {
    async fn send_agent(&self, bytes: Vec<u8>) {
        if let Some(to) = &self.to_agent {
            // A closed input is the agent gone: its exit ends the proxy.
            let _ = to.send(bytes).await;
        }
    }

    async fn send_editor(&self, bytes: Vec<u8>) {
        // A closed output is the editor gone: its closed input ends the proxy.
        let _ = self.to_editor.send(bytes).await;
    }

    fn long(&mut self, from: &str) {
        if !self.told_long {
            self.told_long = true;
            say(&format!(
                "a message from the {from} is longer than {MAX_LINE_BYTES} bytes: passed on unchanged, unread"
            ));
        }
    }

    /// A line from the editor: read, then passed to the agent; a `session/cancel` also
    /// answers and withdraws that session's waiting requests.
    async fn on_editor_line(&mut self, read: Read) {
        let bytes = match read {
            Read::Piece(b) => {
                self.long("editor");
                return self.send_agent(b).await;
            }
            Read::Line(b) => b,
        };
        let Some(message) = parse(&bytes, "editor") else {
            return self.send_agent(bytes).await;
        };
        self.tracker.client_sent(&message);
        if let Some(session) = self.steering.turns.editor_sent(&message) {
            self.steering
                .report(&self.tracker, TurnEvent::Prompted, &session, None);
        }
        let cancelled = (message.get("method").and_then(Value::as_str) == Some(SESSION_CANCEL))
            .then(|| message["params"]["sessionId"].as_str().map(str::to_string))
            .flatten();
        self.send_agent(bytes).await;
        if let Some(session) = cancelled {
            let keys: Vec<String> = self
                .waiting
                .iter()
                .filter(|(_, w)| w.session == session)
                .map(|(k, _)| k.clone())
                .collect();
            for key in keys {
                self.cancel(&key).await;
            }
        }
    }

    /// Answers the waiting request `key` `cancelled` and withdraws it.
    async fn cancel(&mut self, key: &str) {
        if let Some(w) = self.waiting.remove(key) {
            w.call.abort();
            let result = json!({"outcome": {"outcome": "cancelled"}});
            self.send_agent(result_line(&w.id, &result)).await;
        }
    }

    /// A line from the agent: a permission request goes to imrelay, the withdrawal of one
    /// waiting there is answered here, anything else goes to the editor.
    async fn on_agent_line(&mut self, read: Read) {
        let bytes = match read {
            Read::Piece(b) => {
                self.long("agent");
                return self.send_editor(b).await;
            }
            Read::Line(b) => b,
        };
        let Some(message) = parse(&bytes, "agent") else {
            return self.send_editor(bytes).await;
        };
        if let Some(session) = self.tracker.agent_sent(&message) {
            self.steering
                .report(&self.tracker, TurnEvent::Started, &session, None);
        }
        if let Some(ended) = self.steering.turns.agent_sent(&message) {
            let own = ended.whose == Whose::Proxy;
            self.steering.ended(&self.tracker, ended);
            if own {
                // The answer to the proxy's own prompt: not the editor's.
                return;
            }
        }
        let method = message.get("method").and_then(Value::as_str);
        match (method, message.get("id")) {
            (Some(REQUEST_PERMISSION), Some(id)) => self.intercept(bytes, &message, id).await,
            (Some(CANCEL_REQUEST), None) => {
                let key = message["params"]
                    .get("requestId")
                    .map(id_key)
                    .filter(|k| self.waiting.contains_key(k));
                match key {
                    Some(key) => self.cancel(&key).await,
                    None => self.send_editor(bytes).await,
                }
            }
            _ => self.send_editor(bytes).await,
        }
    }

    /// Posts a permission request to imrelay, or hands it to the editor when it cannot.
    async fn intercept(&mut self, bytes: Vec<u8>, message: &Value, id: &Value) {
        let key = id_key(id);
        let body = if self.agent_gone {
            Err("the agent has exited".to_string())
        } else if self.waiting.contains_key(&key) {
            Err("its id is that of another request still waiting".to_string())
        } else if self.waiting.len() >= MAX_WAITING {
            Err(format!(
                "{MAX_WAITING} requests are waiting on imrelay already"
            ))
        } else {
            self.tracker
                .permission_body(message.get("params").unwrap_or(&Value::Null))
                .and_then(|b| serde_json::to_vec(&b).map_err(|e| e.to_string()))
        };
        let body = match body {
            Ok(b) => b,
            Err(why) => {
                say(&format!(
                    "a session/request_permission (id {key}) goes to the editor: {why}"
                ));
                return self.send_editor(bytes).await;
            }
        };
        let session = message["params"]["sessionId"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        let (hook, done, k) = (self.hook.clone(), self.done.clone(), key.clone());
        let call = tokio::spawn(async move {
            let reply = hook.ask(body).await;
            let _ = done.send((k, reply)).await;
        })
        .abort_handle();
        self.waiting.insert(
            key,
            Waiting {
                line: bytes,
                id: id.clone(),
                session,
                call,
            },
        );
    }

    /// imrelay's reply to the request `key`: the agent gets its result, or the editor gets
    /// the request.
    async fn answered(&mut self, key: String, reply: Result<HookReply, String>) {
        let Some(w) = self.waiting.remove(&key) else {
            // Cancelled meanwhile, and answered so.
            return;
        };
        match reply {
            Ok(HookReply {
                result: Some(result),
                ..
            }) => {
                let result = serde_json::to_value(result).unwrap_or(Value::Null);
                self.send_agent(result_line(&w.id, &result)).await;
            }
            Ok(HookReply { reason, .. }) => {
                say(&format!(
                    "a session/request_permission (id {key}) goes to the editor: {}",
                    reason.as_deref().unwrap_or("imrelay gave no decision")
                ));
                self.send_editor(w.line).await;
            }
            Err(why) => {
                say(&format!(
                    "a session/request_permission (id {key}) goes to the editor: {why}"
                ));
                self.send_editor(w.line).await;
            }
        }
    }

    /// imrelay's answer to the end of a turn of `session`: its prompt goes to the agent, as
    /// a turn of the proxy's own, unless a turn started meanwhile.
    async fn answered_turn(&mut self, session: String, answer: Result<TurnReply, String>) {
        let Ok(TurnReply { prompt: Some(text) }) = answer else {
            return;
        };
        if self.agent_gone || self.to_agent.is_none() {
            return;
        }
        if self.steering.turns.running(&session) {
            say("a person's words through imrelay were not sent: a turn started at the desk first");
            return;
        }
        // The editor shows the person's words as a user message (Zed adds a
        // `user_message_chunk` to its thread whenever one comes), then the agent's work.
        let shown = json!({"jsonrpc": "2.0", "method": SESSION_UPDATE, "params": {"sessionId": session,
            "update": {"sessionUpdate": "user_message_chunk", "content": {"type": "text", "text": text}}}});
        self.send_editor(line(&shown)).await;
        let request = self.steering.turns.own_prompt(&session, &text);
        self.send_agent(line(&request)).await;
    }

    /// Withdraws every request still waiting (the agent or the editor is gone).
    fn abandon_all(&mut self) {
        for (_, w) in self.waiting.drain() {
            w.call.abort();
        }
    }
}

/// `bytes` as a JSON-RPC message, or `None` (reported on standard error) when it is not one.
/// A blank line is no message, and not reported.
fn parse(bytes: &[u8], from: &str) -> Option<Value> {
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return None;
    }
    match serde_json::from_slice::<Value>(bytes) {
        Ok(v @ Value::Object(_)) if v.get("jsonrpc").and_then(Value::as_str) == Some("2.0") => {
            Some(v)
        }
        Ok(_) => {
            say(&format!(
                "a message from the {from} is not a JSON-RPC 2.0 object ({} bytes): passed on unchanged",
                bytes.len()
            ));
            None
        }
        Err(e) => {
            say(&format!(
                "a line from the {from} is not JSON ({e}; {} bytes): passed on unchanged",
                bytes.len()
            ));
            None
        }
    }
}

/// The agent's command, started in its own process group with piped input and output.
fn start(command: &[String]) -> anyhow::Result<tokio::process::Child> {
    let (program, args) = command
        .split_first()
        .context("name the agent's command after `--`")?;
    let mut c = tokio::process::Command::new(program);
    c.args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .kill_on_drop(true);
    #[cfg(unix)]
    c.process_group(0);
    #[cfg(target_os = "linux")]
    {
        let parent = std::process::id();
        // The one place imrelay needs `unsafe` (with `signal_group` below): the lint is denied
        // for the crate in Cargo.toml's [lints].
        #[allow(unsafe_code)]
        // SAFETY: the closure runs in the forked child before exec and calls only
        // async-signal-safe functions (prctl, getppid), allocating nothing.
        unsafe {
            c.pre_exec(move || {
                if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                // The proxy died before the line above: do not start an orphan.
                if libc::getppid() as u32 != parent {
                    return Err(std::io::Error::from_raw_os_error(libc::ESRCH));
                }
                Ok(())
            });
        }
    }
    c.spawn()
        .with_context(|| format!("cannot start the agent {:?}", escape(program)))
}

/// Sends `signal` to the agent's process group.
#[cfg(unix)]
fn signal_group(pgid: Option<u32>, signal: i32) {
    if let Some(pgid) = pgid.and_then(|p| i32::try_from(p).ok()).filter(|p| *p > 1) {
        #[allow(unsafe_code)]
        // SAFETY: kill(2) with a negative pid signals a process group; no memory is involved.
        unsafe {
            libc::kill(-pgid, signal);
        }
    }
}

/// A stop request to the proxy: `SIGTERM`, `SIGINT` or `SIGHUP`.
#[cfg(unix)]
async fn stop_requested() -> i32 {
    use tokio::signal::unix::{SignalKind, signal};
    let mut streams: Vec<(i32, tokio::signal::unix::Signal)> = [
        (libc::SIGTERM, SignalKind::terminate()),
        (libc::SIGINT, SignalKind::interrupt()),
        (libc::SIGHUP, SignalKind::hangup()),
    ]
    .into_iter()
    .filter_map(|(n, k)| signal(k).ok().map(|s| (n, s)))
    .collect();
    if streams.is_empty() {
        return std::future::pending().await;
    }
    let waits = streams.iter_mut().map(|(n, s)| {
        let n = *n;
        Box::pin(async move {
            s.recv().await;
            n
        })
    });
    futures_util::future::select_all(waits).await.0
}

/// The exit status to report for the agent's.
fn code_of(status: std::process::ExitStatus) -> i32 {
    #[cfg(unix)]
    {
        use std::os::unix::process::ExitStatusExt;
        if let Some(sig) = status.signal() {
            return 128 + sig;
        }
    }
    status.code().unwrap_or(exit::ERROR)
}

/// The client of imrelay's ACP endpoint: `--url` (or the configuration's) and `--token`.
fn hook_of(args: &AcpArgs, config: Option<&std::path::Path>) -> anyhow::Result<Hook> {
    let base = args.remote.base_url(config)?;
    let http = reqwest::Client::builder()
        .connect_timeout(Duration::from_secs(5))
        .user_agent(concat!("imrelay-acp/", env!("CARGO_PKG_VERSION")))
        .build()
        .context("cannot build the HTTP client")?;
    Ok(Hook {
        url: format!("{base}{PATH}"),
        session_url: format!("{base}{SESSION_PATH}"),
        token: args.remote.token(),
        http,
    })
}

/// The tasks that carry lines between the editor and the agent, and what they read.
struct Pipes {
    /// Writes the agent's input.
    agent_writer: tokio::task::JoinHandle<()>,
    /// Writes the editor's input (imrelay's standard output).
    editor_writer: tokio::task::JoinHandle<()>,
    /// Lines from the editor.
    editor_lines: mpsc::Receiver<Read>,
    /// Lines from the agent.
    agent_lines: mpsc::Receiver<Read>,
    /// The endpoint's replies to the permission requests posted.
    replies: mpsc::Receiver<(String, Result<HookReply, String>)>,
    /// imrelay's answers to the ends of turns.
    turns: mpsc::Receiver<steer::Answered>,
}

/// Starts reading and writing both sides (the editor on standard input and output, the
/// agent on its own), and the proxy between them.
fn connect(hook: Hook, child: &mut tokio::process::Child) -> anyhow::Result<(Proxy, Pipes)> {
    let agent_in = child.stdin.take().context("the agent's standard input")?;
    let agent_out = child.stdout.take().context("the agent's standard output")?;
    let (to_agent, agent_queue) = mpsc::channel(QUEUE);
    let agent_writer = tokio::spawn(write_lines(agent_in, agent_queue));
    let (to_editor, editor_queue) = mpsc::channel(QUEUE);
    let editor_writer = tokio::spawn(write_lines(tokio::io::stdout(), editor_queue));
    let (editor_tx, editor_lines) = mpsc::channel(QUEUE);
    tokio::spawn(read_lines(tokio::io::stdin(), editor_tx));
    let (agent_tx, agent_lines) = mpsc::channel(QUEUE);
    tokio::spawn(read_lines(agent_out, agent_tx));
    let (done, replies) = mpsc::channel(QUEUE);
    let (answers, turns) = mpsc::channel(QUEUE);
    let proxy = Proxy {
        tracker: Tracker::new(),
        steering: steer::Steering::new(hook.clone(), answers),
        hook,
        waiting: HashMap::new(),
        done,
        to_agent: Some(to_agent),
        to_editor,
        told_long: false,
        agent_gone: false,
    };
    let pipes = Pipes {
        agent_writer,
        editor_writer,
        editor_lines,
        agent_lines,
        replies,
        turns,
    };
    Ok((proxy, pipes))
}

async fn proxy(args: AcpArgs, config: Option<&std::path::Path>) -> anyhow::Result<i32> {
    let hook = hook_of(&args, config)?;
    let mut child = start(&args.command)?;
    let pgid = child.id();
    let (mut p, mut pipes) = connect(hook, &mut child)?;
    let mut editor_open = true;
    let mut agent_open = true;
    // When the agent is killed unless it has exited.
    let mut kill_at: Option<tokio::time::Instant> = None;
    #[cfg(unix)]
    let stop = stop_requested();
    #[cfg(not(unix))]
    let stop = std::future::pending::<i32>();
    tokio::pin!(stop);
    let mut stopping = false;
    let status = loop {
        let kill_in = async {
            match kill_at {
                Some(at) => tokio::time::sleep_until(at).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            status = child.wait() => break status,
            read = pipes.editor_lines.recv(), if editor_open => match read {
                Some(read) => p.on_editor_line(read).await,
                None => {
                    // The editor is gone: close the agent's input, withdraw what waits, and
                    // give the agent a moment to exit.
                    editor_open = false;
                    p.to_agent = None;
                    p.abandon_all();
                    p.steering.abandon_all();
                    kill_at.get_or_insert(tokio::time::Instant::now() + GRACE);
                }
            },
            read = pipes.agent_lines.recv(), if agent_open => match read {
                Some(read) => p.on_agent_line(read).await,
                None => agent_open = false,
            },
            Some((key, reply)) = pipes.replies.recv() => p.answered(key, reply).await,
            Some((session, answer)) = pipes.turns.recv() => p.answered_turn(session, answer).await,
            sig = &mut stop, if !stopping => {
                stopping = true;
                say(&format!("signal {sig}: stopping the agent"));
                #[cfg(unix)]
                signal_group(pgid, libc::SIGTERM);
                kill_at.get_or_insert(tokio::time::Instant::now() + GRACE);
            }
            () = kill_in => {
                say(&format!("the agent did not exit within {GRACE:?}: killing it"));
                #[cfg(unix)]
                signal_group(pgid, libc::SIGKILL);
                let _ = child.start_kill();
                kill_at = None;
            }
        }
    };
    p.after_exit(&mut pipes.agent_lines, agent_open, pgid).await;
    pipes.agent_writer.abort();
    let _ = tokio::time::timeout(DRAIN, pipes.editor_writer).await;
    let status = status.context("cannot wait for the agent")?;
    Ok(code_of(status))
}
