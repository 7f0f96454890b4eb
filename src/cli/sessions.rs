//! `imrelay sessions`: the agent sessions a running server has seen, one line each (most
//! recently active first), and `imrelay sessions send`, a message to one of them.

use serde_json::{Value, json};

use super::client::{ClientError, Remote, RemoteArgs, exit};
use crate::present::visible_line;

/// `imrelay sessions`
#[derive(clap::Args)]
#[command(after_help = super::EXIT_CODES)]
pub struct SessionsArgs {
    #[command(flatten)]
    remote: RemoteArgs,
    #[command(subcommand)]
    action: Option<SessionsAction>,
    /// Only the sessions of this route.
    #[arg(long, value_name = "ROUTE")]
    route: Option<String>,
    /// Print the sessions as JSON, as the API returns them.
    #[arg(long)]
    json: bool,
}

#[derive(clap::Subcommand)]
enum SessionsAction {
    /// List the sessions (the default).
    List,
    /// Send a message to a session: its agent reads it at its next tool or prompt, or when
    /// its turn ends.
    Send {
        /// The agent (`claude-code`, `codex`), as `imrelay sessions` shows it.
        agent: String,
        /// The session's id.
        id: String,
        /// What to tell the agent.
        text: String,
        /// Who sends it, for the audit trail [default: your login name].
        #[arg(long, value_name = "NAME")]
        by: Option<String>,
    },
}

impl Remote {
    /// The sessions, most recently active first (of `route` only, if given).
    pub(crate) async fn sessions(&self, route: Option<&str>) -> Result<Vec<Value>, ClientError> {
        let mut req = self.request(reqwest::Method::GET, "/v1/sessions");
        if let Some(r) = route {
            req = req.query(&[("route", r)]);
        }
        let mut body = self.call(req, None).await?;
        match body["sessions"].take() {
            Value::Array(items) => Ok(items),
            _ => Err(ClientError::Protocol("a list without `sessions`".into())),
        }
    }

    /// Queues `text` for `agent`'s session `id`.
    pub(crate) async fn message_session(
        &self,
        agent: &str,
        id: &str,
        text: &str,
        by: Option<&str>,
    ) -> Result<Value, ClientError> {
        let path = format!(
            "/v1/sessions/{}/{}/messages",
            urlencoding(agent),
            urlencoding(id)
        );
        let req = self
            .request(reqwest::Method::POST, &path)
            .json(&json!({"text": text, "by": by, "via": "terminal"}));
        self.call(req, None).await
    }
}

/// `s` as one path segment.
fn urlencoding(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// One session as a line: agent, id, state, route, last activity, pending, directory.
pub fn line(s: &Value) -> String {
    let text = |k: &str| visible_line(s[k].as_str().unwrap_or("-"));
    let pending = s["pending"].as_array().map_or(0, Vec::len);
    let queued = s["messages"].as_array().map_or(0, |m| {
        m.iter().filter(|m| m.get("delivered_at").is_none()).count()
    });
    let mut out = format!(
        "{:<12} {:<36} {:<9} {:<12} {:<20} {}",
        text("agent"),
        text("id"),
        text("state"),
        text("route"),
        text("last_activity").chars().take(19).collect::<String>(),
        text("cwd")
    );
    if pending > 0 {
        out.push_str(&format!("  ({pending} waiting)"));
    }
    if queued > 0 {
        out.push_str(&format!("  ({queued} message(s) queued)"));
    }
    if let Some(m) = s["last_message"]
        .as_str()
        .filter(|_| s["state"] == "finished")
    {
        let first: String = m.chars().take(100).collect();
        out.push_str(&format!("\n{:<12} said: {}", "", visible_line(&first)));
    }
    out
}

/// One session in a line for a terminal that shows other things too (`imrelay watch`):
/// state, agent, session id, directory, waiting interactions, and what a finished one said
/// last (its start).
pub fn brief(s: &Value) -> String {
    let text = |k: &str| visible_line(s[k].as_str().unwrap_or("-"));
    let mut out = format!(
        "{} · {} {} · {} · route {}",
        text("state"),
        text("agent"),
        text("id"),
        text("cwd"),
        text("route")
    );
    let pending = s["pending"].as_array().map_or(0, Vec::len);
    if pending > 0 {
        out.push_str(&format!(" · {pending} waiting"));
    }
    if let Some(m) = s["last_message"]
        .as_str()
        .filter(|_| s["state"] == "finished")
    {
        let first: String = m.chars().take(80).collect();
        out.push_str(&format!(" · said “{}”", visible_line(&first)));
    }
    out
}

/// `imrelay sessions [list|send AGENT ID TEXT]`
pub fn run(args: SessionsArgs, config: Option<&std::path::Path>) -> i32 {
    let (remote, rt) = match Remote::with_runtime(&args.remote, config) {
        Ok(both) => both,
        Err(code) => return code,
    };
    let fail = |e: ClientError| {
        eprintln!("imrelay: {}", visible_line(&e.to_string()));
        e.exit_code()
    };
    match args.action.unwrap_or(SessionsAction::List) {
        SessionsAction::List => match rt.block_on(remote.sessions(args.route.as_deref())) {
            Ok(list) if args.json => {
                let text = serde_json::to_string_pretty(&list).unwrap_or_default();
                say!("{}", crate::telemetry::escape_json_invisible(&text));
                exit::OK
            }
            Ok(list) if list.is_empty() => {
                say!(
                    "No sessions seen yet. Point the agents' session hooks at imrelay: see docs/sessions.md."
                );
                exit::OK
            }
            Ok(list) => {
                say!(
                    "{:<12} {:<36} {:<9} {:<12} {:<20} DIRECTORY",
                    "AGENT",
                    "SESSION",
                    "STATE",
                    "ROUTE",
                    "LAST ACTIVITY"
                );
                for s in &list {
                    say!("{}", line(s));
                }
                exit::OK
            }
            Err(e) => fail(e),
        },
        SessionsAction::Send {
            agent,
            id,
            text,
            by,
        } => {
            let by = by
                .filter(|b| !b.trim().is_empty())
                .or_else(super::login_name);
            match rt.block_on(remote.message_session(&agent, &id, &text, by.as_deref())) {
                Ok(view) => {
                    let when = view["delivery_note"]
                        .as_str()
                        .unwrap_or("it reaches the agent at its next step");
                    say!("Queued: {}.", visible_line(when));
                    exit::OK
                }
                Err(e) => fail(e),
            }
        }
    }
}
