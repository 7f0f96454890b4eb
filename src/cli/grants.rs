//! `imrelay grants`: the grants in force ("allow this and similar calls"), listed and revoked
//! from the terminal; and the calls `imrelay answer --similar` and `imrelay watch` make to
//! grant one with an answer.

use serde_json::{Value, json};

use super::client::{ClientError, Remote, RemoteArgs, check_id, exit, parse_interaction};
use crate::interaction::{Answer, Interaction};
use crate::present::visible_line;

/// `imrelay grants`
#[derive(clap::Args)]
#[command(after_help = super::EXIT_CODES)]
pub struct GrantsArgs {
    #[command(flatten)]
    remote: RemoteArgs,
    #[command(subcommand)]
    action: Option<GrantsAction>,
    /// Print the grants as JSON, as the API returns them.
    #[arg(long)]
    json: bool,
}

#[derive(clap::Subcommand)]
enum GrantsAction {
    /// List the grants in force (the default).
    List,
    /// Revoke a grant: matching calls go to people again.
    Revoke {
        /// The grant's id (from `imrelay grants`).
        id: String,
        /// Who revokes it, for the audit trail [default: your login name].
        #[arg(long, value_name = "NAME")]
        by: Option<String>,
    },
}

impl Remote {
    /// The grants in force.
    pub(crate) async fn grants(&self) -> Result<Vec<Value>, ClientError> {
        let mut body = self
            .call(self.request(reqwest::Method::GET, "/v1/grants"), None)
            .await?;
        match body["grants"].take() {
            Value::Array(items) => Ok(items),
            _ => Err(ClientError::Protocol("a list without `grants`".into())),
        }
    }

    /// Revokes grant `id`.
    pub(crate) async fn revoke_grant(
        &self,
        id: &str,
        by: Option<&str>,
    ) -> Result<Value, ClientError> {
        check_id(id)?;
        let mut req = self
            .request(reqwest::Method::DELETE, &format!("/v1/grants/{id}"))
            .query(&[("via", "terminal")]);
        if let Some(by) = by {
            req = req.query(&[("by", by)]);
        }
        self.call(req, Some(id)).await
    }

    /// Answers `id` with `answer` (an allow) and grants `rule` (`None`: the one proposed) for
    /// `scope` (`session` or `standing`): the resolved interaction and the grant.
    pub(crate) async fn respond_granting(
        &self,
        id: &str,
        answer: &Answer,
        by: Option<&str>,
        rule: Option<&str>,
        scope: &str,
    ) -> Result<(Interaction, Value), ClientError> {
        check_id(id)?;
        let mut body = super::client::respond_body(answer, by);
        body["grant"] = json!({"scope": scope});
        if let Some(rule) = rule.filter(|r| !r.trim().is_empty()) {
            body["grant"]["rule"] = Value::String(rule.to_string());
        }
        let req = self
            .request(
                reqwest::Method::POST,
                &format!("/v1/interactions/{id}/respond"),
            )
            .json(&body);
        let mut out = self.call(req, Some(id)).await?;
        let grant = out["grant"].take();
        Ok((parse_interaction(out["interaction"].take())?, grant))
    }
}

/// One line about a grant: "session  Bash(npm run test:*)  claude-code in /srv/shop, session
/// s-1, by alice via desktop, until 18:00".
pub fn describe(g: &Value) -> String {
    let text = |k: &str| g[k].as_str().map(visible_line);
    let mut bound = Vec::new();
    if let Some(r) = text("route") {
        bound.push(format!("route {r}"));
    }
    if let Some(a) = text("agent") {
        bound.push(a);
    }
    if let Some(c) = text("cwd") {
        bound.push(format!("in {c}"));
    }
    if let Some(s) = text("session") {
        bound.push(format!("session {s}"));
    }
    let mut s = format!(
        "{:<8}  {}",
        text("scope").unwrap_or_default(),
        text("rule").unwrap_or_default()
    );
    if !bound.is_empty() {
        s.push_str(&format!("  ({})", bound.join(", ")));
    }
    if let Some(by) = text("by") {
        s.push_str(&format!(", by {by}"));
    }
    if let Some(via) = text("via") {
        s.push_str(&format!(" via {via}"));
    }
    if let Some(until) = text("expires_at") {
        s.push_str(&format!(", until {until}"));
    }
    s
}

/// `imrelay grants [list|revoke ID]`
pub fn run(args: GrantsArgs, config: Option<&std::path::Path>) -> i32 {
    let (remote, rt) = match Remote::with_runtime(&args.remote, config) {
        Ok(both) => both,
        Err(code) => return code,
    };
    let fail = |e: ClientError| {
        eprintln!("imrelay: {}", visible_line(&e.to_string()));
        e.exit_code()
    };
    match args.action.unwrap_or(GrantsAction::List) {
        GrantsAction::List => match rt.block_on(remote.grants()) {
            Ok(list) if args.json => {
                say!(
                    "{}",
                    crate::telemetry::escape_json_invisible(
                        &serde_json::to_string_pretty(&list).unwrap_or_default()
                    )
                );
                exit::OK
            }
            Ok(list) if list.is_empty() => {
                say!(
                    "No grants in force. Allowing an approval with a rule makes one: `imrelay answer ID allow --similar`, or g in `imrelay watch`."
                );
                exit::OK
            }
            Ok(list) => {
                say!("{:<36}  {:<8}  RULE", "ID", "SCOPE");
                for g in &list {
                    say!(
                        "{:<36}  {}",
                        visible_line(g["id"].as_str().unwrap_or("?")),
                        describe(g)
                    );
                }
                exit::OK
            }
            Err(e) => fail(e),
        },
        GrantsAction::Revoke { id, by } => {
            let by = by
                .filter(|b| !b.trim().is_empty())
                .or_else(super::login_name);
            match rt.block_on(remote.revoke_grant(&id, by.as_deref())) {
                Ok(g) => {
                    say!("Revoked: {}", describe(&g));
                    exit::OK
                }
                Err(e) => fail(e),
            }
        }
    }
}
