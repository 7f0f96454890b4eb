//! A client of a running imrelay's operator API, for the terminal commands: list, read and
//! answer interactions, and follow `/v1/events` across reconnects.
//!
//! Every failure is a `ClientError` whose kind a script can rely on through
//! `ClientError::exit_code`.

use std::time::Duration;

use reqwest::StatusCode;
use secrecy::{ExposeSecret, SecretString};
use serde_json::{Value, json};

use crate::config::Settings;

mod events;

use crate::interaction::quorum::Vote;
use crate::interaction::{Answer, Interaction, Outcome, Resolution};
pub(crate) use events::Feed;

/// Where the server is and how to be let in (`--url`, `--token`).
/// (No `Debug`: it holds the token.)
#[derive(Clone, Default, clap::Args)]
pub struct RemoteArgs {
    /// The imrelay server [default: the listen address of the configuration].
    #[arg(long, env = "IMRELAY_URL", value_name = "URL")]
    pub url: Option<String>,
    /// An operator token (one of `auth.operator_tokens`). Not needed on the server's own
    /// machine when the server has none. (`IMRELAY_TOKEN`, its old name, is still read, with
    /// a warning.)
    #[arg(
        long,
        env = "IMRELAY_OPERATOR_TOKEN",
        hide_env_values = true,
        value_name = "TOKEN"
    )]
    pub token: Option<String>,
}

/// Where the server is and the agent token an agent-side command presents (`imrelay acp`,
/// `imrelay mcp`, `imrelay hook`, `imrelay bridge`). (No `Debug`: it holds the token.)
#[derive(Clone, Default, clap::Args)]
pub struct AgentRemoteArgs {
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
}

impl AgentRemoteArgs {
    /// The server's address: `--url`, or the configuration's listen address.
    pub fn base_url(&self, config: Option<&std::path::Path>) -> anyhow::Result<String> {
        base_url(&self.remote(), config)
    }

    /// The token given, if any (an empty one is none).
    pub fn token(&self) -> Option<secrecy::SecretString> {
        self.token
            .as_deref()
            .filter(|t| !t.is_empty())
            .map(|t| secrecy::SecretString::from(t.to_string()))
    }

    /// The same, as the operator commands' arguments are (for `Remote::new`).
    pub fn remote(&self) -> RemoteArgs {
        RemoteArgs {
            url: self.url.clone(),
            token: self.token.clone(),
        }
    }
}

/// Exit codes of the terminal commands (documented in docs/terminal.md and `--help`).
pub mod exit {
    /// Answered (or listed, or shown).
    pub const OK: i32 = 0;
    /// Anything else went wrong: a bad configuration, an answer imrelay could not read.
    pub const ERROR: i32 = 1;
    /// The command line is wrong (clap's own code).
    pub const USAGE: i32 = 2;
    /// Already resolved: answered elsewhere first, expired or cancelled.
    pub const ALREADY_RESOLVED: i32 = 3;
    /// No such interaction (unknown, or pruned after its retention period).
    pub const NOT_FOUND: i32 = 4;
    /// Refused: the answer does not fit the interaction, this person's vote was given
    /// already, or the token is not accepted.
    pub const REFUSED: i32 = 5;
    /// imrelay cannot be reached, or cannot take the answer now (try again).
    pub const UNREACHABLE: i32 = 6;
    /// Interrupted with Ctrl-C.
    pub const INTERRUPTED: i32 = 130;
}

/// Why a request to imrelay failed.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ClientError {
    /// No connection, or no answer in time.
    #[error("cannot reach imrelay at {url}: {reason}")]
    Unreachable {
        /// The server's base URL.
        url: String,
        /// What went wrong, in words.
        reason: String,
    },
    /// The server answered with a 5xx (e.g. its store cannot take writes), or the token has
    /// as many requests in flight as the server allows it (`429 connection_quota`).
    #[error("imrelay at {url} cannot take this now ({status}): {message}")]
    Unavailable {
        /// The server's base URL.
        url: String,
        /// The HTTP status.
        status: u16,
        /// The server's message.
        message: String,
    },
    /// Someone answered first, or it expired or was cancelled: the interaction says how.
    #[error("{}", already_resolved(.0))]
    AlreadyResolved(Box<Interaction>),
    /// This person's vote on an approval that several people decide is counted already:
    /// nothing changed, and it waits for the others (the vote, and the interaction as it is).
    #[error("{}", already_voted(.0, .1))]
    AlreadyVoted(Box<Vote>, Box<Interaction>),
    /// No interaction with this id.
    #[error("no interaction {0}: unknown, or resolved long enough ago to be pruned")]
    NotFound(String),
    /// No agent session with this agent and id (404 `session_not_found`): the server's
    /// words.
    #[error("{0}")]
    SessionNotFound(String),
    /// The answer does not fit (a 400), or the route does not name this token's person
    /// among its approvers (a 403 `not_an_approver`): nothing changed.
    #[error("refused: {message}")]
    Invalid {
        /// The server's message, naming the field.
        message: String,
    },
    /// The token is missing, unknown or of the wrong scope (401, 403).
    #[error("{message}")]
    Unauthorized {
        /// What the server said, and what to do.
        message: String,
    },
    /// Something imrelay would not send: a body that cannot be read, an unexpected status.
    #[error("unexpected answer from imrelay: {0}")]
    Protocol(String),
}

fn already_resolved(i: &Interaction) -> String {
    match &i.resolution {
        Some(r) => format!("{} is already resolved: {}", i.id, resolution_words(r)),
        None => format!("{} is already resolved", i.id),
    }
}

/// "alice already voted on toolu_1 (allowed via api at …): each person counts once. Votes
/// so far: 1 of 2: alice via api".
fn already_voted(v: &Vote, i: &Interaction) -> String {
    let mut s = format!(
        "{} already voted on {} ({} via {} at {}): each person counts once",
        crate::present::visible_line(&v.by),
        i.id,
        if v.allow { "allowed" } else { "denied" },
        v.via.as_str(),
        crate::present::render::format_time(v.at)
    );
    if let Some(votes) = crate::interaction::quorum::tally(i) {
        s.push_str(&format!(". Votes so far: {votes}"));
    }
    s
}

/// "allowed by alice via telegram at 2026-11-22 08:36:02 UTC", "expired at …".
pub(crate) fn resolution_words(r: &Resolution) -> String {
    let mut s = match r.outcome {
        Outcome::Cancelled => r
            .message()
            .unwrap_or("cancelled")
            .trim_end_matches('.')
            .to_string(),
        _ => r.summary(),
    };
    s.push_str(" at ");
    s.push_str(&crate::present::render::format_time(r.at));
    if let (Outcome::Denied, Some(m)) = (r.outcome, r.message())
        && !m.starts_with("Denied by ")
    {
        s.push_str(&format!(" (“{}”)", crate::present::visible_line(m)));
    }
    s
}

impl ClientError {
    /// The process exit code for this failure.
    pub(crate) fn exit_code(&self) -> i32 {
        match self {
            ClientError::AlreadyResolved(_) => exit::ALREADY_RESOLVED,
            ClientError::AlreadyVoted(..) => exit::REFUSED,
            ClientError::NotFound(_) | ClientError::SessionNotFound(_) => exit::NOT_FOUND,
            ClientError::Invalid { .. } | ClientError::Unauthorized { .. } => exit::REFUSED,
            ClientError::Unreachable { .. } | ClientError::Unavailable { .. } => exit::UNREACHABLE,
            ClientError::Protocol(_) => exit::ERROR,
        }
    }

    /// Whether trying again later may succeed (the network or the server's store).
    pub(crate) fn is_transient(&self) -> bool {
        matches!(
            self,
            ClientError::Unreachable { .. } | ClientError::Unavailable { .. }
        )
    }
}

/// The `/respond` body for `answer`, from `by` through the terminal.
pub(crate) fn respond_body(answer: &Answer, by: Option<&str>) -> Value {
    let mut body = match answer {
        Answer::Allow {
            updated_input,
            always,
        } => {
            let mut b = json!({"decision": "allow"});
            if let Some(input) = updated_input {
                b["updated_input"] = Value::Object(input.clone());
            }
            if *always {
                b["always"] = Value::Bool(true);
            }
            b
        }
        Answer::Deny { message, interrupt } => {
            let mut b = json!({"decision": "deny"});
            if let Some(m) = message {
                b["message"] = Value::String(m.clone());
            }
            if *interrupt {
                b["interrupt"] = Value::Bool(true);
            }
            b
        }
        Answer::Answers(answers) => json!({"answers": answers}),
        Answer::Accept(content) => json!({"action": "accept", "content": content}),
    };
    body["via"] = Value::String("terminal".into());
    if let Some(by) = by {
        body["by"] = Value::String(by.to_string());
    }
    body
}

/// The outcome `answer` leads to when it wins.
pub(crate) fn outcome_of(answer: &Answer) -> Outcome {
    match answer {
        Answer::Allow { .. } => Outcome::Allowed,
        Answer::Deny { .. } => Outcome::Denied,
        Answer::Answers(_) | Answer::Accept(_) => Outcome::Answered,
    }
}

/// The `imrelay answer` command that sends `answer` to `id`, for a person to run later.
pub(crate) fn answer_command(answer: &Answer, id: &str) -> String {
    let mut words = vec!["imrelay".to_string(), "answer".into(), quote(id)];
    match answer {
        Answer::Allow {
            updated_input,
            always,
        } => {
            words.push("allow".into());
            if let Some(input) = updated_input {
                words.push("--input".into());
                words.push(quote(&Value::Object(input.clone()).to_string()));
            }
            if *always {
                words.push("--always".into());
            }
        }
        Answer::Deny { message, interrupt } => {
            words.push("deny".into());
            if let Some(m) = message {
                words.push("--reason".into());
                words.push(quote(m));
            }
            if *interrupt {
                words.push("--interrupt".into());
            }
        }
        Answer::Answers(answers) => {
            for (q, a) in answers {
                let values: Vec<String> = match a {
                    Value::Array(items) => items
                        .iter()
                        .map(|v| v.as_str().map(str::to_string).unwrap_or(v.to_string()))
                        .collect(),
                    Value::String(s) => vec![s.clone()],
                    other => vec![other.to_string()],
                };
                for v in values {
                    words.push("--answer".into());
                    words.push(quote(&format!("{q}={v}")));
                }
            }
        }
        Answer::Accept(content) => {
            for (field, v) in content {
                let text = match v {
                    Value::Array(items) => items
                        .iter()
                        .map(|v| v.as_str().map(str::to_string).unwrap_or(v.to_string()))
                        .collect::<Vec<_>>()
                        .join(","),
                    Value::String(s) => s.clone(),
                    other => other.to_string(),
                };
                words.push("--answer".into());
                words.push(quote(&format!("{field}={text}")));
            }
        }
    }
    words.join(" ")
}

/// `s` as one word for a POSIX shell.
pub(crate) fn quote(s: &str) -> String {
    if !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_.:/=@%+,".contains(c))
    {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', r"'\''"))
    }
}

/// The base URL of the server a configuration describes (a wildcard listen address is
/// reached on loopback).
pub(crate) fn local_url(settings: &Settings) -> String {
    let mut addr = settings.server.listen;
    if addr.ip().is_unspecified() {
        addr.set_ip(match addr {
            std::net::SocketAddr::V4(_) => std::net::Ipv4Addr::LOCALHOST.into(),
            std::net::SocketAddr::V6(_) => std::net::Ipv6Addr::LOCALHOST.into(),
        });
    }
    format!("http://{addr}")
}

/// The server's base URL, without a trailing slash: `--url`, or the configuration's listen
/// address.
pub fn base_url(args: &RemoteArgs, config: Option<&std::path::Path>) -> anyhow::Result<String> {
    let base = match &args.url {
        Some(u) => u.trim_end_matches('/').to_string(),
        None => {
            let settings = Settings::load(config).map_err(|e| {
                anyhow::anyhow!(
                    "cannot find the server's address in the configuration ({e}); pass --url or set IMRELAY_URL"
                )
            })?;
            local_url(&settings.settings)
        }
    };
    if !(base.starts_with("http://") || base.starts_with("https://")) {
        anyhow::bail!("--url {base:?}: expected an http:// or https:// URL");
    }
    Ok(base)
}

/// The variable the operator token was read from before it had a name of its own.
pub const OLD_TOKEN_VARIABLE: &str = "IMRELAY_TOKEN";

/// The operator token from [`OLD_TOKEN_VARIABLE`], with a warning that names the new
/// variable: one name per role, so an agent's token and an operator's are not mixed up.
fn old_token_variable() -> Option<String> {
    use std::io::Write as _;
    let token = std::env::var(OLD_TOKEN_VARIABLE).ok()?;
    let mut err = std::io::stderr().lock();
    let _ = writeln!(
        err,
        "warning: {OLD_TOKEN_VARIABLE} is read as the operator token, but that is now \
         IMRELAY_OPERATOR_TOKEN (and IMRELAY_AGENT_TOKEN is the agent's): rename it"
    );
    Some(token)
}

/// How long a request may take (the event stream excepted).
const REQUEST_TIMEOUT: Duration = Duration::from_secs(15);
/// How long connecting may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// The most pages `pending` reads (500 each).
const MAX_PAGES: usize = 40;

/// A connection to one imrelay server.
#[derive(Clone)]
pub(crate) struct Remote {
    base: String,
    token: Option<SecretString>,
    http: reqwest::Client,
}

/// One interaction of a listing.
#[derive(Debug)]
pub struct Listed {
    /// The interaction; its input is a preview when [`Listed::truncated`].
    pub interaction: Interaction,
    /// Whether the listing cut something of it (a big input): the whole is at
    /// `GET /v1/interactions/{id}`.
    pub truncated: bool,
}

impl Remote {
    /// A client for `args`, falling back on the configuration for the URL.
    /// A client and the runtime to drive it, for a command that makes a few requests; on
    /// failure, said on standard error, the exit code.
    pub(crate) fn with_runtime(
        args: &RemoteArgs,
        config: Option<&std::path::Path>,
    ) -> Result<(Remote, tokio::runtime::Runtime), i32> {
        let remote = Remote::new(args, config).map_err(|e| {
            eprintln!("imrelay: {e:#}");
            exit::ERROR
        })?;
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| {
                eprintln!("imrelay: {e}");
                exit::ERROR
            })?;
        Ok((remote, rt))
    }

    pub(crate) fn new(
        args: &RemoteArgs,
        config: Option<&std::path::Path>,
    ) -> anyhow::Result<Remote> {
        let base = base_url(args, config)?;
        let http = reqwest::Client::builder()
            .connect_timeout(CONNECT_TIMEOUT)
            .user_agent(concat!("imrelay-cli/", env!("CARGO_PKG_VERSION")))
            .build()?;
        let token = args.token.clone().or_else(old_token_variable);
        Ok(Remote {
            base,
            token: token.filter(|t| !t.is_empty()).map(SecretString::from),
            http,
        })
    }

    /// The server's base URL.
    pub(crate) fn url(&self) -> &str {
        &self.base
    }

    pub(crate) fn request(&self, method: reqwest::Method, path: &str) -> reqwest::RequestBuilder {
        let req = self.http.request(method, format!("{}{path}", self.base));
        match &self.token {
            Some(t) => req.bearer_auth(t.expose_secret()),
            None => req,
        }
    }

    fn unreachable(&self, e: &reqwest::Error) -> ClientError {
        // reqwest's own message names the URL, the innermost cause says what happened
        // ("Connection refused (os error 111)").
        let mut cause: &dyn std::error::Error = e;
        while let Some(inner) = cause.source() {
            cause = inner;
        }
        let mut reason = cause.to_string();
        if e.is_timeout() {
            reason = format!("no answer in time ({reason})");
        }
        ClientError::Unreachable {
            url: self.base.clone(),
            reason,
        }
    }

    /// Sends `req` and reads a JSON body, turning error statuses into [`ClientError`]s.
    pub(crate) async fn call(
        &self,
        req: reqwest::RequestBuilder,
        id: Option<&str>,
    ) -> Result<Value, ClientError> {
        self.call_within(req, id, REQUEST_TIMEOUT).await
    }

    /// [`Remote::call`] for a request the server may hold for up to `timeout` (a long wait
    /// for a person's reply).
    pub(crate) async fn call_within(
        &self,
        req: reqwest::RequestBuilder,
        id: Option<&str>,
        timeout: Duration,
    ) -> Result<Value, ClientError> {
        let resp = req
            .timeout(timeout)
            .send()
            .await
            .map_err(|e| self.unreachable(&e))?;
        let status = resp.status();
        let text = resp.text().await.map_err(|e| self.unreachable(&e))?;
        let body: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
        if status.is_success() {
            return Ok(body);
        }
        let error = &body["error"];
        let message = error["message"]
            .as_str()
            .map(str::to_string)
            .unwrap_or_else(|| crate::interaction::clip(text.trim(), 200));
        Err(match (status, error["code"].as_str()) {
            (StatusCode::CONFLICT, Some("already_resolved")) => {
                match serde_json::from_value::<Interaction>(error["interaction"].clone()) {
                    Ok(i) => ClientError::AlreadyResolved(Box::new(i)),
                    Err(e) => ClientError::Protocol(format!("a 409 without its interaction: {e}")),
                }
            }
            (StatusCode::CONFLICT, Some("already_voted")) => match (
                serde_json::from_value::<Vote>(error["vote"].clone()),
                serde_json::from_value::<Interaction>(error["interaction"].clone()),
            ) {
                (Ok(v), Ok(i)) => ClientError::AlreadyVoted(Box::new(v), Box::new(i)),
                _ => ClientError::Protocol(format!("{status}: {message}")),
            },
            (StatusCode::NOT_FOUND, Some("session_not_found")) => {
                ClientError::SessionNotFound(message)
            }
            (StatusCode::NOT_FOUND, _) => {
                ClientError::NotFound(id.unwrap_or("(no id)").to_string())
            }
            (StatusCode::BAD_REQUEST, _) | (StatusCode::FORBIDDEN, Some("not_an_approver")) => {
                ClientError::Invalid { message }
            }
            (StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN, _) => {
                self.status_error(status, message)
            }
            (StatusCode::TOO_MANY_REQUESTS, Some("connection_quota")) => ClientError::Unavailable {
                url: self.base.clone(),
                status: status.as_u16(),
                message,
            },
            (s, _) if s.is_server_error() => ClientError::Unavailable {
                url: self.base.clone(),
                status: s.as_u16(),
                message,
            },
            (s, _) => ClientError::Protocol(format!("{s}: {message}")),
        })
    }

    /// Who the token answers as (`GET /v1/me`): the person and label of a labelled operator
    /// token; `None` for any other token (and none), whose answers go under the name they give.
    pub(crate) async fn me(&self) -> Result<Option<Operator>, ClientError> {
        let body = self
            .call(self.request(reqwest::Method::GET, "/v1/me"), None)
            .await?;
        Ok(match (body["name"].as_str(), body["label"].as_str()) {
            (Some(name), Some(label)) => Some(Operator {
                name: name.to_string(),
                label: label.to_string(),
            }),
            _ => None,
        })
    }

    /// One interaction.
    pub(crate) async fn get(&self, id: &str) -> Result<Interaction, ClientError> {
        check_id(id)?;
        let body = self
            .call(
                self.request(reqwest::Method::GET, &format!("/v1/interactions/{id}")),
                Some(id),
            )
            .await?;
        parse_interaction(body)
    }

    /// Every pending interaction as a listing summarizes it, oldest first: an interaction
    /// with a big input comes with a preview of it (see [`Listed::truncated`]); [`Remote::get`]
    /// reads it whole.
    pub(crate) async fn pending(&self) -> Result<Vec<Listed>, ClientError> {
        let mut all = Vec::new();
        let mut cursor: Option<String> = None;
        for _ in 0..MAX_PAGES {
            let mut req = self
                .request(reqwest::Method::GET, "/v1/interactions")
                .query(&[("status", "pending"), ("limit", "500")]);
            if let Some(c) = &cursor {
                req = req.query(&[("cursor", c)]);
            }
            let mut body = self.call(req, None).await?;
            let page = match body["interactions"].take() {
                Value::Array(items) => items,
                _ => {
                    return Err(ClientError::Protocol(
                        "a list without `interactions`".into(),
                    ));
                }
            };
            for item in page {
                let truncated = item["truncated"].as_bool().unwrap_or(false);
                all.push(Listed {
                    interaction: parse_interaction(item)?,
                    truncated,
                });
            }
            match body["next_cursor"].as_str() {
                Some(c) => cursor = Some(c.to_string()),
                None => break,
            }
        }
        all.sort_by(|a, b| {
            let (a, b) = (&a.interaction, &b.interaction);
            (a.created_at, &a.id).cmp(&(b.created_at, &b.id))
        });
        Ok(all)
    }

    /// Sends `answer` to interaction `id` as `by`; the resolved interaction when it won.
    pub(crate) async fn respond(
        &self,
        id: &str,
        answer: &Answer,
        by: Option<&str>,
    ) -> Result<Interaction, ClientError> {
        check_id(id)?;
        let req = self
            .request(
                reqwest::Method::POST,
                &format!("/v1/interactions/{id}/respond"),
            )
            .json(&respond_body(answer, by));
        let mut body = self.call(req, Some(id)).await?;
        parse_interaction(body["interaction"].take())
    }

    /// Sends one allow or deny to every interaction in `ids` (`POST /v1/respond`); the
    /// server's body, with each interaction's own result.
    pub(crate) async fn respond_many(
        &self,
        ids: &[String],
        answer: &Answer,
        by: Option<&str>,
    ) -> Result<Value, ClientError> {
        let mut body = respond_body(answer, by);
        body["ids"] = json!(ids);
        let req = self
            .request(reqwest::Method::POST, "/v1/respond")
            .json(&body);
        self.call(req, None).await
    }

    fn status_error(&self, status: StatusCode, message: String) -> ClientError {
        match status {
            StatusCode::UNAUTHORIZED if self.token.is_some() => ClientError::Unauthorized {
                message: format!(
                    "imrelay refused the token ({message}): check --token or IMRELAY_OPERATOR_TOKEN"
                ),
            },
            StatusCode::UNAUTHORIZED => ClientError::Unauthorized {
                message: format!(
                    "imrelay wants an operator token ({message}): pass --token or set IMRELAY_OPERATOR_TOKEN"
                ),
            },
            _ => ClientError::Unauthorized {
                message: format!(
                    "imrelay refused ({message}): this needs an operator token (auth.operator_tokens)"
                ),
            },
        }
    }
}

/// The person a labelled operator token answers as: the server records their answers under
/// `name`, whatever name the request gives.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Operator {
    /// Their person's name (or the label, when no person lists it).
    pub name: String,
    /// The token's label.
    pub label: String,
}

/// Reconnection delays: 250 ms doubling up to 5 s.
#[derive(Debug)]
pub struct Backoff(Duration);

impl Default for Backoff {
    fn default() -> Self {
        Backoff(Duration::from_millis(250))
    }
}

impl Backoff {
    /// The next delay, and the one after it doubled.
    pub fn delay(&mut self) -> Duration {
        let d = self.0;
        self.0 = (self.0 * 2).min(Duration::from_secs(5));
        d
    }
}

pub(crate) fn check_id(id: &str) -> Result<(), ClientError> {
    crate::interaction::InteractionId::parse(id)
        .map(|_| ())
        .map_err(|e| ClientError::Invalid {
            message: e.to_string(),
        })
}

pub(crate) fn parse_interaction(v: Value) -> Result<Interaction, ClientError> {
    serde_json::from_value(v).map_err(|e| ClientError::Protocol(format!("an interaction: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_become_respond_bodies_and_commands() {
        let allow = Answer::Allow {
            updated_input: None,
            always: false,
        };
        assert_eq!(
            respond_body(&allow, Some("alice")),
            json!({"decision": "allow", "via": "terminal", "by": "alice"})
        );
        assert_eq!(
            answer_command(&allow, "toolu_1"),
            "imrelay answer toolu_1 allow"
        );
        let deny = Answer::Deny {
            message: Some("it's not safe".into()),
            interrupt: false,
        };
        assert_eq!(
            respond_body(&deny, None),
            json!({"decision": "deny", "message": "it's not safe", "via": "terminal"})
        );
        assert_eq!(
            answer_command(&deny, "toolu_1"),
            r"imrelay answer toolu_1 deny --reason 'it'\''s not safe'"
        );
        let mut answers = serde_json::Map::new();
        answers.insert("Which DB?".into(), json!("Postgres"));
        answers.insert("Extras".into(), json!(["Auth", "Docs"]));
        assert_eq!(
            answer_command(&Answer::Answers(answers), "q1"),
            "imrelay answer q1 --answer 'Which DB?=Postgres' --answer Extras=Auth --answer Extras=Docs"
        );
        let edited = Answer::Allow {
            updated_input: Some(json!({"command": "ls"}).as_object().unwrap().clone()),
            always: true,
        };
        assert_eq!(
            answer_command(&edited, "x"),
            r#"imrelay answer x allow --input '{"command":"ls"}' --always"#
        );
    }

    #[test]
    fn backoff_doubles_to_a_ceiling() {
        let mut b = Backoff::default();
        let seq: Vec<u64> = (0..7).map(|_| b.delay().as_millis() as u64).collect();
        assert_eq!(seq, [250, 500, 1000, 2000, 4000, 5000, 5000]);
    }

    #[test]
    fn exit_codes_are_distinct() {
        let codes = [
            exit::OK,
            exit::ERROR,
            exit::USAGE,
            exit::ALREADY_RESOLVED,
            exit::NOT_FOUND,
            exit::REFUSED,
            exit::UNREACHABLE,
            exit::INTERRUPTED,
        ];
        let unique: std::collections::HashSet<_> = codes.iter().collect();
        assert_eq!(unique.len(), codes.len());
    }
}
