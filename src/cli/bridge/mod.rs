//! `imrelay bridge opencode`: a long-running bridge between OpenCode servers (`opencode
//! serve`) and a running imrelay (see docs/opencode.md).
//!
//! For each server it follows the event stream (`GET /event`, with HTTP Basic
//! authentication when `OPENCODE_SERVER_PASSWORD` is set), and lists what waits (`GET
//! /permission`, `GET /question`) each time the stream opens, every minute, and soon after an
//! event it could not read: requests asked while the bridge, the server or imrelay was away,
//! or whose event was lost, are found again. Each request becomes one interaction, created
//! over imrelay's agent API with an agent token and an id derived from the server and the
//! request ([`crate::agents::opencode`]): a bridge started again re-attaches to the same
//! interaction, and an answer given meanwhile is carried over. At most [`MAX_WAITING`]
//! requests are asked and waited on at once (long polls, retried while imrelay is
//! unreachable); the others wait their turn, in OpenCode's own interface meanwhile.
//!
//! The answer goes back to OpenCode as its reply (`handle.rs`), retried with backoff while
//! OpenCode is unreachable or fails (5xx); a request counts as replied to only once OpenCode
//! accepted the reply, and one whose reply did not get through is taken up again at the next
//! listing that still shows it. When OpenCode settles a request itself (`permission.replied`,
//! `question.replied`, `question.rejected`), or no longer lists it, the interaction is
//! withdrawn on every channel.
//!
//! Everything read from OpenCode is bounded (`sse.rs`, `opencode.rs`): an event over
//! [`MAX_EVENT_BYTES`], or whose data is not UTF-8, is skipped alone and the stream goes on.
//! Bad input (an unreadable event, an id too long to reply to, a request for a session it
//! does not know) is reported on standard error, with outside text escaped, and changes
//! nothing. Lost connections are retried with backoff, 250 ms doubling up to 5 s.

mod handle;
mod opencode;
mod sse;
mod steer;

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::StreamExt;
use secrecy::SecretString;
use tokio::sync::Semaphore;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::client::{AgentRemoteArgs, Backoff, ClientError, Remote, exit};
use crate::agents::opencode::{
    ANSWERED_IN_OPENCODE, Event, GONE_FROM_OPENCODE, OnTimeout, Request, parse_event,
};
use crate::sync::LockExt;
use crate::telemetry::escape;

/// `imrelay bridge`'s arguments.
#[derive(Clone, clap::Args)]
pub struct BridgeArgs {
    #[command(subcommand)]
    agent: Agent,
}

/// The agents a bridge serves.
#[derive(Clone, clap::Subcommand)]
enum Agent {
    /// Relay the approvals and questions of one or more OpenCode servers (`opencode serve`).
    Opencode(OpenCodeArgs),
}

/// `imrelay bridge opencode`'s arguments. (No `Debug`: it holds secrets.)
#[derive(Clone, clap::Args)]
pub struct OpenCodeArgs {
    /// An OpenCode server's URL (`opencode serve --port 4096`: http://127.0.0.1:4096);
    /// repeat, or separate with commas, for several.
    #[arg(
        long = "opencode",
        env = "OPENCODE_URL",
        value_name = "URL",
        value_delimiter = ',',
        required = true
    )]
    pub servers: Vec<String>,
    /// The servers' `OPENCODE_SERVER_PASSWORD`, if they have one.
    #[arg(
        long,
        env = "OPENCODE_SERVER_PASSWORD",
        hide_env_values = true,
        value_name = "PASSWORD"
    )]
    pub password: Option<String>,
    /// The user name that goes with the password.
    #[arg(
        long,
        env = "OPENCODE_SERVER_USERNAME",
        value_name = "NAME",
        default_value = "opencode"
    )]
    pub username: String,
    /// Where the server is and the agent token to present.
    #[command(flatten)]
    pub remote: AgentRemoteArgs,
    /// imrelay's deadline for each request, seconds [default: the server's default].
    #[arg(long, value_name = "SECS", value_parser = clap::value_parser!(u64).range(1..=31_536_000))]
    pub timeout: Option<u64>,
    /// What OpenCode is told when nobody answered in time: `reject` the request, or `leave`
    /// it waiting in OpenCode's own interface.
    #[arg(long, value_enum, default_value = "reject")]
    pub on_timeout: OnTimeout,
}

/// The servers' URLs without a trailing slash; `None` (said on standard error) when one is
/// not an `http://` or `https://` URL.
fn server_urls(raw: &[String]) -> Option<Vec<String>> {
    let mut servers = Vec::new();
    for raw in raw {
        let url = raw.trim().trim_end_matches('/').to_string();
        if !(url.starts_with("http://") || url.starts_with("https://")) {
            say_err(&format!(
                "error: --opencode {:?}: expected an http:// or https:// URL",
                escape(raw)
            ));
            return None;
        }
        servers.push(url);
    }
    Some(servers)
}

/// Runs the bridge until interrupted; returns the exit status.
pub fn run(args: BridgeArgs, config: Option<&std::path::Path>) -> i32 {
    let Agent::Opencode(args) = args.agent;
    let remote = match Remote::new(&args.remote.remote(), config) {
        Ok(r) => r,
        Err(e) => {
            say_err(&format!("error: {e:#}"));
            return exit::USAGE;
        }
    };
    let Some(servers) = server_urls(&args.servers) else {
        return exit::USAGE;
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            say_err(&format!("error: cannot start the async runtime: {e}"));
            return exit::ERROR;
        }
    };
    let options = Options {
        password: args
            .password
            .filter(|p| !p.is_empty())
            .map(SecretString::from),
        username: args.username,
        timeout: args.timeout,
        on_timeout: args.on_timeout,
        waits: Arc::new(Semaphore::new(MAX_WAITING)),
        told_full: AtomicBool::new(false),
        withdrawals: Arc::new(Semaphore::new(MAX_WITHDRAWING)),
    };
    runtime.block_on(async move {
        let http = match reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(5))
            .user_agent(concat!("imrelay-bridge/", env!("CARGO_PKG_VERSION")))
            .build()
        {
            Ok(h) => h,
            Err(e) => {
                say_err(&format!("error: cannot build an HTTP client: {e}"));
                return exit::ERROR;
            }
        };
        let options = Arc::new(options);
        for url in servers {
            let bridge = Arc::new(Bridge {
                url,
                http: http.clone(),
                imrelay: remote.clone(),
                options: options.clone(),
                tracked: Mutex::new(HashMap::new()),
                done: Mutex::new(VecDeque::new()),
                steering: Mutex::new(steer::Steering::default()),
            });
            tokio::spawn(bridge.follow());
        }
        match tokio::signal::ctrl_c().await {
            Ok(()) => exit::INTERRUPTED,
            Err(e) => {
                say_err(&format!("error: cannot wait for Ctrl-C: {e}"));
                exit::ERROR
            }
        }
    })
}

/// A line on standard error (dropped if it is closed).
fn say_err(line: &str) {
    use std::io::Write;
    let mut err = std::io::stderr().lock();
    let _ = writeln!(err, "{line}");
}

/// What every server's bridge shares.
struct Options {
    password: Option<SecretString>,
    username: String,
    timeout: Option<u64>,
    on_timeout: OnTimeout,
    /// Turns to ask imrelay and wait for its answer: [`MAX_WAITING`], for every server.
    waits: Arc<Semaphore>,
    /// Whether the requests over [`MAX_WAITING`] were reported since there was room.
    told_full: AtomicBool,
    /// Withdrawals under way at once, for every server.
    withdrawals: Arc<Semaphore>,
}

/// Requests asked and waited on at once, for every server (as `imrelay acp`): each holds one
/// long poll, so one bridge cannot take more than this of imrelay's connections.
pub const MAX_WAITING: usize = 256;

/// Withdrawals sent to imrelay at once (when many requests go at once, after a restart of
/// OpenCode).
const MAX_WITHDRAWING: usize = 16;

/// The most request ids remembered as replied to, per server (more than OpenCode keeps
/// waiting at once; the ids OpenCode no longer lists are forgotten at each listing).
const MAX_DONE: usize = 4096;

/// How long imrelay is asked to hold each long poll, seconds.
const POLL_SECS: u64 = 10;

/// How long the event stream may stay silent (OpenCode sends a heartbeat every few seconds)
/// before it is taken for lost.
const SILENCE: Duration = Duration::from_secs(60);

/// How often what OpenCode lists as waiting is compared with what the bridge handles.
const RELIST: Duration = Duration::from_secs(60);

/// How soon after an event it could not read the bridge lists again (a request may have
/// been in it), at the most often.
const RELIST_SOON: Duration = Duration::from_secs(2);

/// The most bytes of one event read (a larger one is skipped). OpenCode's largest events
/// carry a file's contents or a diff.
pub const MAX_EVENT_BYTES: usize = 16 * 1024 * 1024;

/// The bridge to one OpenCode server.
struct Bridge {
    url: String,
    http: reqwest::Client,
    imrelay: Remote,
    options: Arc<Options>,
    /// The requests being handled: their interaction id, and what stops the handler.
    tracked: Mutex<HashMap<String, (String, CancellationToken)>>,
    /// The requests OpenCode accepted a reply to, or left to its own interface (oldest
    /// first): never taken up again.
    done: Mutex<VecDeque<String>>,
    /// Its sessions' turns ([`steer`]).
    steering: Mutex<steer::Steering>,
}

impl Bridge {
    fn log(&self, what: &str) {
        say_err(&format!("opencode {}: {what}", escape(&self.url)));
    }

    /// Follows the server's event stream for ever, reconnecting with backoff.
    async fn follow(self: Arc<Self>) {
        let mut backoff = Backoff::default();
        let mut was_up = true;
        loop {
            let resp = self
                .request(reqwest::Method::GET, "/event")
                .header("accept", "text/event-stream")
                .send()
                .await;
            match resp {
                Ok(r) if r.status().is_success() => {
                    self.log("connected");
                    was_up = true;
                    backoff = Backoff::default();
                    self.reconcile().await;
                    self.read(r).await;
                    self.log("the event stream ended; reconnecting");
                }
                Ok(r) => {
                    if was_up {
                        let hint = if r.status() == reqwest::StatusCode::UNAUTHORIZED {
                            " (is OPENCODE_SERVER_PASSWORD right?)"
                        } else {
                            ""
                        };
                        self.log(&format!(
                            "GET /event answered {}{hint}; retrying",
                            r.status()
                        ));
                    }
                    was_up = false;
                }
                Err(e) => {
                    if was_up {
                        self.log(&format!("cannot reach it ({e}); retrying"));
                    }
                    was_up = false;
                }
            }
            tokio::time::sleep(backoff.delay()).await;
        }
    }

    /// Reads events until the stream ends or falls silent, listing what waits every
    /// [`RELIST`] meanwhile.
    async fn read(self: &Arc<Self>, resp: reqwest::Response) {
        let mut chunks = resp.bytes_stream();
        let mut events = sse::Events::new(MAX_EVENT_BYTES);
        let mut items = Vec::new();
        let mut heard = Instant::now();
        let mut relist = Instant::now() + RELIST;
        loop {
            let chunk = tokio::select! {
                chunk = chunks.next() => chunk,
                () = tokio::time::sleep_until(relist) => {
                    self.reconcile().await;
                    relist = Instant::now() + RELIST;
                    continue;
                }
                () = tokio::time::sleep_until(heard + SILENCE) => {
                    self.log("the event stream fell silent");
                    return;
                }
            };
            let bytes = match chunk {
                Some(Ok(bytes)) => bytes,
                Some(Err(e)) => {
                    self.log(&format!("the event stream broke: {e}"));
                    return;
                }
                None => return,
            };
            heard = Instant::now();
            events.push(&bytes, &mut items);
            for item in items.drain(..) {
                if !self.on_event(item) {
                    relist = relist.min(Instant::now() + RELIST_SOON);
                }
            }
        }
    }

    /// Acts on one event; `false` when it could not be read (a request may have been lost).
    fn on_event(self: &Arc<Self>, item: sse::Item) -> bool {
        let data = match item {
            sse::Item::Event(data) => data,
            sse::Item::TooLong { bytes } => {
                self.log(&format!(
                    "skipped an event of {bytes} bytes, over the {MAX_EVENT_BYTES} the bridge reads"
                ));
                return false;
            }
            sse::Item::NotUtf8 => {
                self.log("skipped an event that is not UTF-8");
                return false;
            }
        };
        match parse_event(&data) {
            Ok(Event::Asked(r)) => self.start(r),
            Ok(Event::Settled { request_id }) => {
                self.settle(&request_id, ANSWERED_IN_OPENCODE);
            }
            Ok(Event::Busy { session_id }) => self.busy(session_id),
            Ok(Event::Idle { session_id }) => self.idle(session_id),
            Ok(Event::Other) => {}
            Err(e) => {
                self.log(&format!(
                    "ignored an event it could not read ({})",
                    escape(&e.to_string())
                ));
                return false;
            }
        }
        true
    }

    /// What the server lists as waiting; `None` (reported) when it cannot be read.
    async fn listed(&self) -> Option<Vec<Request>> {
        let mut listed: Vec<Request> = Vec::new();
        for (path, question) in [("/permission", false), ("/question", true)] {
            let listing = match self.list(path).await {
                Ok(listing) => listing,
                Err(e) => {
                    self.log(&format!(
                        "{}; it is listed again later",
                        escape(&e.to_string())
                    ));
                    return None;
                }
            };
            for item in listing.items() {
                match Request::from_listing(item, question) {
                    Ok(r) => listed.push(r),
                    Err(e) => self.log(&format!(
                        "ignored a request of GET {path} it could not read ({})",
                        escape(&e)
                    )),
                }
            }
        }
        Some(listed)
    }

    /// Takes up every request the server lists as waiting, and withdraws the ones it no
    /// longer lists.
    async fn reconcile(self: &Arc<Self>) {
        let Some(listed) = self.listed().await else {
            return;
        };
        let ids: HashSet<&str> = listed.iter().map(Request::id).collect();
        let gone: Vec<String> = self
            .tracked
            .locked()
            .keys()
            .filter(|id| !ids.contains(id.as_str()))
            .cloned()
            .collect();
        for id in gone {
            self.settle(&id, GONE_FROM_OPENCODE);
        }
        self.done.locked().retain(|id| ids.contains(id.as_str()));
        for r in listed {
            self.start(r);
        }
    }

    /// Handles `r` unless it is handled already or was replied to.
    fn start(self: &Arc<Self>, r: Request) {
        let id = r.id().to_string();
        if self.done.locked().contains(&id) {
            return;
        }
        let token = CancellationToken::new();
        {
            let mut tracked = self.tracked.locked();
            if tracked.contains_key(&id) {
                return;
            }
            tracked.insert(id, (r.interaction_id(&self.url), token.clone()));
        }
        let me = self.clone();
        tokio::spawn(async move {
            let request_id = r.id().to_string();
            me.handle(r, token.clone()).await;
            // Unless something else ended it (and may have started it again since).
            if !token.is_cancelled() {
                me.tracked.locked().remove(&request_id);
            }
        });
    }

    /// The request `request_id` needs no answer from imrelay any more (`reason`): its
    /// handler stops, and the interaction is withdrawn on every channel.
    fn settle(self: &Arc<Self>, request_id: &str, reason: &'static str) {
        let Some((interaction, token)) = self.tracked.locked().remove(request_id) else {
            return;
        };
        token.cancel();
        self.remember(request_id);
        let me = self.clone();
        tokio::spawn(async move {
            let Ok(_turn) = me.options.withdrawals.clone().acquire_owned().await else {
                return;
            };
            let mut backoff = Backoff::default();
            for _ in 0..10 {
                let req = me
                    .imrelay
                    .request(
                        reqwest::Method::DELETE,
                        &format!("/v1/interactions/{interaction}"),
                    )
                    .query(&[("reason", reason)]);
                match me.imrelay.call(req, Some(&interaction)).await {
                    Ok(_) => {
                        me.log(&format!("{interaction} withdrawn: {reason}"));
                        return;
                    }
                    Err(ClientError::AlreadyResolved(_) | ClientError::NotFound(_)) => return,
                    Err(e) if e.is_transient() => tokio::time::sleep(backoff.delay()).await,
                    Err(e) => {
                        me.log(&format!("cannot withdraw {interaction}: {e}"));
                        return;
                    }
                }
            }
        });
    }

    fn remember(&self, request_id: &str) {
        let mut done = self.done.locked();
        if !done.iter().any(|d| d == request_id) {
            if done.len() >= MAX_DONE {
                done.pop_front();
            }
            done.push_back(request_id.to_string());
        }
    }

    /// `request_id` is settled for good: never taken up again, and no longer handled.
    fn finished(&self, request_id: &str) {
        self.remember(request_id);
        self.tracked.locked().remove(request_id);
    }
}
