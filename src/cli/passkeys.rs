//! `imrelay passkeys`: the passkeys people registered in the inbox for answers that need one
//! (`step_up`), listed, and removed when a device is lost. An administrator's token (an
//! operator token without a label) sees and removes everyone's; a labelled token its
//! person's own. Registering happens in the inbox: a passkey is made by the browser; a
//! person's first needs an enrolment code an administrator issues (`imrelay passkeys enrol
//! NAME`).

use serde_json::Value;

use super::client::{ClientError, Remote, RemoteArgs, exit};
use crate::present::visible_line;

/// `imrelay passkeys`
#[derive(clap::Args)]
#[command(after_help = super::EXIT_CODES)]
pub struct PasskeysArgs {
    #[command(flatten)]
    remote: RemoteArgs,
    #[command(subcommand)]
    action: Option<PasskeysAction>,
    /// Print the passkeys as JSON, as the API returns them.
    #[arg(long)]
    json: bool,
}

#[derive(clap::Subcommand)]
enum PasskeysAction {
    /// List the registered passkeys (the default).
    List,
    /// Remove a passkey (a lost device): answers that need one take another of its owner's.
    Remove {
        /// The passkey's id (from `imrelay passkeys`).
        id: String,
    },
    /// Issue a single-use enrolment code for a person's first passkey (an administrator's
    /// token): give it to them by another way than their token; the inbox asks for it.
    Enrol {
        /// The person (a `[[people]]` name, or a token's label).
        person: String,
    },
}

impl Remote {
    /// The registered passkeys this token may see.
    pub(crate) async fn passkeys(&self) -> Result<Vec<Value>, ClientError> {
        let mut body = self
            .call(self.request(reqwest::Method::GET, "/v1/passkeys"), None)
            .await?;
        match body["passkeys"].take() {
            Value::Array(items) => Ok(items),
            _ => Err(ClientError::Protocol("a list without `passkeys`".into())),
        }
    }

    /// Says that this token's person is at the desk (`present`) or left it ("desk first").
    pub(crate) async fn presence(&self, present: bool) -> Result<Value, ClientError> {
        let req = self
            .request(reqwest::Method::POST, "/v1/presence")
            .json(&serde_json::json!({ "present": present, "via": "terminal" }));
        self.call(req, None).await
    }

    /// Says every 10 s that this token's person is at the desk, until dropped (`imrelay
    /// watch`, while it runs). A server that does not answer is asked again at the next turn.
    pub(crate) async fn at_desk(self) {
        let mut every = tokio::time::interval(std::time::Duration::from_secs(10));
        every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            every.tick().await;
            if let Err(e) = self.presence(true).await {
                tracing::debug!(error = %e, "presence not reported");
            }
        }
    }

    /// Issues an enrolment code for `person`'s first passkey.
    pub(crate) async fn enrol_passkey(&self, person: &str) -> Result<Value, ClientError> {
        let req = self
            .request(reqwest::Method::POST, "/v1/passkeys/enrolment")
            .json(&serde_json::json!({ "person": person }));
        self.call(req, None).await
    }

    /// Removes passkey `id`.
    pub(crate) async fn remove_passkey(&self, id: &str) -> Result<Value, ClientError> {
        if id.is_empty()
            || id.len() > 1400
            || !id
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        {
            return Err(ClientError::Invalid {
                message: format!(
                    "{:?} is not a passkey id (base64url, as `imrelay passkeys` lists them)",
                    visible_line(id)
                ),
            });
        }
        let req = self.request(reqwest::Method::DELETE, &format!("/v1/passkeys/{id}"));
        self.call(req, Some(id)).await
    }
}

/// One line about a passkey: "alice  laptop  registered 2026-11-29T00:10Z, last used ...".
pub fn describe(p: &Value) -> String {
    let text = |k: &str| p[k].as_str().map(visible_line).unwrap_or_default();
    let at = |k: &str| {
        p[k].as_i64()
            .and_then(|ms| jiff::Timestamp::from_millisecond(ms).ok())
            .map(|t| t.strftime("%Y-%m-%d %H:%M UTC").to_string())
    };
    let mut s = format!(
        "{:<16}  {:<16}  registered {}",
        text("person"),
        text("label"),
        at("created_at").unwrap_or_default()
    );
    match at("last_used_at") {
        Some(used) => s.push_str(&format!(", last used {used}")),
        None => s.push_str(", never used"),
    }
    s
}

/// `imrelay passkeys [list|remove ID]`
pub fn run(args: PasskeysArgs, config: Option<&std::path::Path>) -> i32 {
    let (remote, rt) = match Remote::with_runtime(&args.remote, config) {
        Ok(both) => both,
        Err(code) => return code,
    };
    let fail = |e: ClientError| {
        eprintln!("imrelay: {}", visible_line(&e.to_string()));
        e.exit_code()
    };
    match args.action.unwrap_or(PasskeysAction::List) {
        PasskeysAction::List => match rt.block_on(remote.passkeys()) {
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
                say!("No passkeys registered. People register theirs in the inbox (Passkeys).");
                exit::OK
            }
            Ok(list) => {
                say!("{:<44}  {:<16}  {:<16}  WHEN", "ID", "PERSON", "LABEL");
                for p in &list {
                    say!(
                        "{:<44}  {}",
                        visible_line(p["id"].as_str().unwrap_or("?")),
                        describe(p)
                    );
                }
                exit::OK
            }
            Err(e) => fail(e),
        },
        PasskeysAction::Enrol { person } => match rt.block_on(remote.enrol_passkey(&person)) {
            Ok(c) if args.json => {
                say!(
                    "{}",
                    crate::telemetry::escape_json_invisible(&c.to_string())
                );
                exit::OK
            }
            Ok(c) => {
                let text = |k: &str| c[k].as_str().map(visible_line).unwrap_or_default();
                say!("{}", text("code"));
                eprintln!(
                    "The enrolment code for {}'s first passkey, good once until {}. Give it to \
                     them by another way than their token; in the inbox (Passkeys) they enter it \
                     with the passkey's name.",
                    text("person"),
                    text("expires_at")
                );
                exit::OK
            }
            Err(e) => fail(e),
        },
        PasskeysAction::Remove { id } => match rt.block_on(remote.remove_passkey(&id)) {
            Ok(p) => {
                say!("Removed: {}", describe(&p));
                exit::OK
            }
            Err(e) => fail(e),
        },
    }
}
