//! `imrelay bridge opencode`: a long-running bridge between OpenCode servers (`opencode
//! serve`) and a running imrelay (see docs/opencode.md).
//!
//! For each server it follows the event stream (`GET /event`, with HTTP Basic
//! authentication when `OPENCODE_SERVER_PASSWORD` is set), and each time the stream opens it
//! lists what already waits (`GET /permission`, `GET /question`), so requests asked while the
//! bridge, the server or imrelay was away are found again. Each request becomes one
//! interaction, created over imrelay's agent API with an agent token and an id derived from
//! the server and the request ([`crate::agents::opencode`]): a bridge started again re-attaches
//! to the same interaction, and an answer given meanwhile is carried over. The bridge waits for
//! the answer (long polls, retried while imrelay is unreachable) and sends OpenCode its reply
//! once: a request it has replied to is never replied to again. When OpenCode settles a request
//! itself (`permission.replied`, `question.replied`, `question.rejected`), or no longer lists it
//! after a reconnect, the interaction is withdrawn on every channel.
//!
//! Bad input from OpenCode (an unreadable event, a request for a session it does not know)
//! is reported on standard error, with outside text escaped, and changes nothing. Lost
//! connections are retried with backoff, 250 ms doubling up to 5 s.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::StreamExt;
use secrecy::{ExposeSecret, SecretString};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::client::{Backoff, ClientError, Remote, RemoteArgs, exit, parse_interaction};
use crate::agents::opencode::{
    ANSWERED_IN_OPENCODE, Event, GONE_FROM_OPENCODE, OnTimeout, Request, parse_event, segment,
};
use crate::interaction::Interaction;
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
    /// The imrelay server [default: the listen address of the configuration].
    #[arg(long, env = "IMRELAY_URL", value_name = "URL")]
    pub url: Option<String>,
    /// An agent token (one of `auth.agent_tokens`). Not needed on the server's own machine
    /// when the server has none.
    #[arg(
        long,
        env = "IMRELAY_AGENT_TOKEN",
        hide_env_values = true,
        value_name = "TOKEN"
    )]
    pub token: Option<String>,
    /// imrelay's deadline for each request, seconds [default: the server's default].
    #[arg(long, value_name = "SECS", value_parser = clap::value_parser!(u64).range(1..=31_536_000))]
    pub timeout: Option<u64>,
    /// What OpenCode is told when nobody answered in time: `reject` the request, or `leave`
    /// it waiting in OpenCode's own interface.
    #[arg(long, value_enum, default_value = "reject")]
    pub on_timeout: OnTimeout,
}

/// Runs the bridge until interrupted; returns the exit status.
pub fn run(args: BridgeArgs, config: Option<&std::path::Path>) -> i32 {
    let Agent::Opencode(args) = args.agent;
    let remote = match Remote::new(
        &RemoteArgs {
            url: args.url.clone(),
            token: args.token.clone(),
        },
        config,
    ) {
        Ok(r) => r,
        Err(e) => {
            say_err(&format!("error: {e:#}"));
            return exit::USAGE;
        }
    };
    let mut servers = Vec::new();
    for raw in &args.servers {
        let url = raw.trim().trim_end_matches('/').to_string();
        if !(url.starts_with("http://") || url.starts_with("https://")) {
            say_err(&format!(
                "error: --opencode {:?}: expected an http:// or https:// URL",
                escape(raw)
            ));
            return exit::USAGE;
        }
        servers.push(url);
    }
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
}

/// The most request ids remembered as replied to, per server (more than OpenCode keeps
/// waiting at once; the ids OpenCode no longer lists are forgotten at each reconnect).
const MAX_DONE: usize = 4096;

/// How long imrelay is asked to hold each long poll, seconds.
const POLL_SECS: u64 = 10;

/// How long the event stream may stay silent (OpenCode sends a heartbeat every few seconds)
/// before it is taken for lost.
const SILENCE: Duration = Duration::from_secs(60);

/// The bridge to one OpenCode server.
struct Bridge {
    url: String,
    http: reqwest::Client,
    imrelay: Remote,
    options: Arc<Options>,
    /// The requests being handled: their interaction id, and what stops the handler.
    tracked: Mutex<HashMap<String, (String, CancellationToken)>>,
    /// The requests replied to (oldest first): never replied to twice.
    done: Mutex<VecDeque<String>>,
}

/// Why a request to OpenCode failed.
#[derive(Debug, thiserror::Error)]
enum OpenCodeError {
    #[error("cannot reach OpenCode at {url}: {reason}")]
    Unreachable { url: String, reason: String },
    #[error("OpenCode at {url} answered {path} with {status}")]
    Status {
        url: String,
        path: String,
        status: u16,
    },
    #[error("OpenCode at {url} answered {path} with something unreadable: {reason}")]
    Unreadable {
        url: String,
        path: String,
        reason: String,
    },
}

impl Bridge {
    fn log(&self, what: &str) {
        say_err(&format!("opencode {}: {what}", escape(&self.url)));
    }

    fn request(&self, method: reqwest::Method, path: &str) -> reqwest::RequestBuilder {
        let req = self.http.request(method, format!("{}{path}", self.url));
        match &self.options.password {
            Some(p) => req.basic_auth(&self.options.username, Some(p.expose_secret())),
            None => req,
        }
    }

    async fn opencode(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<&Value>,
    ) -> Result<Value, OpenCodeError> {
        let mut req = self.request(method, path).timeout(Duration::from_secs(15));
        if let Some(b) = body {
            req = req.json(b);
        }
        let unreachable = |e: reqwest::Error| OpenCodeError::Unreachable {
            url: self.url.clone(),
            reason: e.to_string(),
        };
        let resp = req.send().await.map_err(unreachable)?;
        let status = resp.status();
        if !status.is_success() {
            return Err(OpenCodeError::Status {
                url: self.url.clone(),
                path: path.to_string(),
                status: status.as_u16(),
            });
        }
        let text = resp.text().await.map_err(unreachable)?;
        serde_json::from_str(&text).map_err(|e| OpenCodeError::Unreadable {
            url: self.url.clone(),
            path: path.to_string(),
            reason: e.to_string(),
        })
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

    /// Reads events until the stream ends or falls silent.
    async fn read(self: &Arc<Self>, resp: reqwest::Response) {
        let mut stream = eventsource_stream::Eventsource::eventsource(resp.bytes_stream());
        loop {
            let event = match tokio::time::timeout(SILENCE, stream.next()).await {
                Ok(Some(Ok(event))) => event,
                Ok(Some(Err(e))) => {
                    self.log(&format!("the event stream broke: {e}"));
                    return;
                }
                Ok(None) => return,
                Err(_) => {
                    self.log("the event stream fell silent");
                    return;
                }
            };
            match parse_event(&event.data) {
                Ok(Event::Asked(r)) => self.start(r),
                Ok(Event::Settled { request_id }) => {
                    self.settle(&request_id, ANSWERED_IN_OPENCODE);
                }
                Ok(Event::Other) => {}
                Err(e) => self.log(&format!(
                    "ignored an event it could not read ({})",
                    escape(&e.to_string())
                )),
            }
        }
    }

    /// Takes up every request the server lists as waiting, and withdraws the ones it no
    /// longer lists.
    async fn reconcile(self: &Arc<Self>) {
        let mut listed: Vec<Request> = Vec::new();
        for (path, question) in [("/permission", false), ("/question", true)] {
            let items = match self.opencode(reqwest::Method::GET, path, None).await {
                Ok(Value::Array(items)) => items,
                Ok(_) => {
                    self.log(&format!("GET {path} is not a list; ignored"));
                    return;
                }
                Err(e) => {
                    self.log(&escape(&e.to_string()));
                    return;
                }
            };
            for item in items {
                let parsed = if question {
                    serde_json::from_value(item).map(Request::Question)
                } else {
                    serde_json::from_value(item).map(Request::Permission)
                };
                match parsed {
                    Ok(r) => listed.push(r),
                    Err(e) => self.log(&format!(
                        "ignored a request of GET {path} it could not read ({})",
                        escape(&e.to_string())
                    )),
                }
            }
        }
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
            me.handle(r, token).await;
            me.tracked.locked().remove(&request_id);
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

    /// Asks imrelay about `r`, waits for the answer and replies to OpenCode, unless `stop`
    /// fires first.
    async fn handle(self: &Arc<Self>, r: Request, stop: CancellationToken) {
        let Some(cwd) = self.directory_of(&r).await else {
            return;
        };
        let body = r.create_body(&self.url, cwd.as_deref(), self.options.timeout);
        let id = r.interaction_id(&self.url);
        let mut backoff = Backoff::default();
        let Some(interaction) = self.create(&r, &body, &id, &stop, &mut backoff).await else {
            return;
        };
        if interaction.is_pending() {
            self.log(&format!("{} asked as {id}", escape(r.id())));
        }
        let Some(interaction) = self.wait_for(&id, interaction, &stop, &mut backoff).await else {
            return;
        };
        self.reply(&r, &interaction, &stop).await;
    }

    /// The working directory of `r`'s session, if OpenCode tells it; `None` when OpenCode
    /// does not know the session, so `r` is ignored.
    async fn directory_of(&self, r: &Request) -> Option<Option<String>> {
        let session = r.session_id();
        match self
            .opencode(
                reqwest::Method::GET,
                &format!("/session/{}", segment(session)),
                None,
            )
            .await
        {
            Ok(s) => Some(s["directory"].as_str().map(str::to_string)),
            Err(OpenCodeError::Status { status: 404, .. }) => {
                self.log(&format!(
                    "ignored {} of session {}: OpenCode does not know that session",
                    escape(r.id()),
                    escape(session)
                ));
                None
            }
            Err(e) => {
                self.log(&format!(
                    "cannot read session {} ({}); asking without its directory",
                    escape(session),
                    escape(&e.to_string())
                ));
                Some(None)
            }
        }
    }

    /// Creates the interaction `id` for `r` from `body`, retrying while imrelay is out of
    /// reach; `None` when `stop` fires or imrelay refuses it (OpenCode's own interface asks).
    async fn create(
        &self,
        r: &Request,
        body: &Value,
        id: &str,
        stop: &CancellationToken,
        backoff: &mut Backoff,
    ) -> Option<Interaction> {
        loop {
            let req = self
                .imrelay
                .request(reqwest::Method::POST, "/v1/interactions")
                .json(body);
            let result = tokio::select! {
                _ = stop.cancelled() => return None,
                r = self.imrelay.call(req, Some(id)) => r,
            };
            match result.and_then(parse_interaction) {
                Ok(i) => return Some(i),
                Err(e) if e.is_transient() => {
                    self.log(&format!("imrelay: {e}; retrying"));
                    tokio::time::sleep(backoff.delay()).await;
                }
                Err(e) => {
                    self.log(&format!(
                        "imrelay refused {} ({e}); left to OpenCode's own interface",
                        escape(r.id())
                    ));
                    return None;
                }
            }
        }
    }

    /// Waits until `interaction` (`id`) is resolved, and returns it so; `None` when `stop`
    /// fires or imrelay no longer has it.
    async fn wait_for(
        &self,
        id: &str,
        mut interaction: Interaction,
        stop: &CancellationToken,
        backoff: &mut Backoff,
    ) -> Option<Interaction> {
        while interaction.is_pending() {
            let req = self.imrelay.request(
                reqwest::Method::GET,
                &format!("/v1/interactions/{id}/wait?timeout_secs={POLL_SECS}"),
            );
            let result = tokio::select! {
                _ = stop.cancelled() => return None,
                r = self.imrelay.call(req, Some(id)) => r,
            };
            match result.and_then(|mut v| parse_interaction(v["interaction"].take())) {
                Ok(i) => interaction = i,
                Err(ClientError::NotFound(_)) => {
                    self.log(&format!("{id} is gone from imrelay; left to OpenCode"));
                    return None;
                }
                Err(e) => {
                    self.log(&format!("imrelay: {e}; retrying"));
                    tokio::time::sleep(backoff.delay()).await;
                }
            }
        }
        Some(interaction)
    }

    /// Sends OpenCode the reply for the resolved `i`, once.
    async fn reply(self: &Arc<Self>, r: &Request, i: &Interaction, stop: &CancellationToken) {
        // From here on the request is answered: a settling event, a listing or a reconnect
        // does not take it up again.
        if stop.is_cancelled() || self.tracked.locked().remove(r.id()).is_none() {
            return;
        }
        self.remember(r.id());
        let Some(reply) = r.reply(i, self.options.on_timeout) else {
            self.log(&format!(
                "{} ended without an answer for OpenCode; left to its own interface",
                i.id
            ));
            return;
        };
        let mut backoff = Backoff::default();
        for _ in 0..20 {
            match self
                .opencode(reqwest::Method::POST, &reply.path, reply.body.as_ref())
                .await
            {
                Ok(_) => {
                    self.log(&format!("replied to {}", escape(r.id())));
                    return;
                }
                Err(OpenCodeError::Unreachable { .. }) => {
                    tokio::time::sleep(backoff.delay()).await;
                }
                Err(e) => {
                    self.log(&format!("{}", escape(&e.to_string())));
                    return;
                }
            }
        }
        self.log(&format!(
            "gave up replying to {}: OpenCode stayed unreachable",
            escape(r.id())
        ));
    }
}
