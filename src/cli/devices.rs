//! `imrelay devices`: the devices subscribed for Web Push (the `push` channel), listed and
//! removed from the terminal. An operator token with a label sees and removes its person's;
//! the administrator's token sees and removes anyone's.

use serde_json::Value;

use super::client::{ClientError, Remote, RemoteArgs, check_id, exit};
use crate::present::visible_line;

/// `imrelay devices`
#[derive(clap::Args)]
#[command(after_help = super::EXIT_CODES)]
pub struct DevicesArgs {
    #[command(flatten)]
    remote: RemoteArgs,
    #[command(subcommand)]
    action: Option<DevicesAction>,
    /// Print the devices as JSON, as the API returns them.
    #[arg(long)]
    json: bool,
}

#[derive(clap::Subcommand)]
enum DevicesAction {
    /// List the devices (the default).
    List,
    /// Remove a device: it is no longer notified, and its notifications' buttons stop
    /// answering.
    Remove {
        /// The device's id (from `imrelay devices`).
        id: String,
    },
}

impl Remote {
    /// The devices the token may see.
    pub(crate) async fn devices(&self) -> Result<Vec<Value>, ClientError> {
        let mut body = self
            .call(self.request(reqwest::Method::GET, "/v1/push"), None)
            .await?;
        match body["devices"].take() {
            Value::Array(items) => Ok(items),
            _ => Err(ClientError::Protocol("an answer without `devices`".into())),
        }
    }

    /// Removes device `id`.
    pub(crate) async fn remove_device(&self, id: &str) -> Result<Value, ClientError> {
        check_id(id)?;
        let req = self.request(reqwest::Method::DELETE, &format!("/v1/push/devices/{id}"));
        self.call(req, Some(id)).await
    }
}

/// One line about a device: "a1b2…  ann  Android (Chrome)  fcm.googleapis.com  since …".
fn describe(d: &Value) -> String {
    let text = |k: &str| d[k].as_str().map(visible_line).unwrap_or_default();
    format!(
        "{:<24}  {:<12}  {:<24}  {}  since {}",
        text("id"),
        text("person"),
        text("name"),
        text("endpoint_host"),
        text("created_at")
    )
}

/// `imrelay devices [list|remove ID]`
pub fn run(args: DevicesArgs, config: Option<&std::path::Path>) -> i32 {
    let (remote, rt) = match Remote::with_runtime(&args.remote, config) {
        Ok(both) => both,
        Err(code) => return code,
    };
    let fail = |e: ClientError| {
        eprintln!("imrelay: {}", visible_line(&e.to_string()));
        e.exit_code()
    };
    match args.action.unwrap_or(DevicesAction::List) {
        DevicesAction::List => match rt.block_on(remote.devices()) {
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
                    "No device is subscribed. Open the inbox on a phone or computer and press \"Notify me on this device\" (see docs/phone.md)."
                );
                exit::OK
            }
            Ok(list) => {
                say!(
                    "{:<24}  {:<12}  {:<24}  PUSH SERVICE",
                    "ID",
                    "PERSON",
                    "NAME"
                );
                for d in &list {
                    say!("{}", describe(d));
                }
                exit::OK
            }
            Err(e) => fail(e),
        },
        DevicesAction::Remove { id } => match rt.block_on(remote.remove_device(&id)) {
            Ok(_) => {
                say!("Removed device {}.", visible_line(&id));
                exit::OK
            }
            Err(e) => fail(e),
        },
    }
}
