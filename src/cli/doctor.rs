//! `imrelay doctor`: checks a configuration before a person relies on it.
//!
//! It reads the same settings as `serve` and tries what `serve` will need: the store opens
//! and takes writes; tokens are set where the listen address needs them; Telegram's token
//! works and approvers are set (and, with `--send-test`, each chat receives a test message);
//! Feishu's app credentials get a token and approvers are set (each receiver gets a test card);
//! Slack's bot token passes `auth.test`, the app-level token opens a Socket Mode URL, approvers
//! are set (each conversation gets a test message);
//! each webhook target answers a signed test event (`--send-test`). One line per check, `✓`
//! or `✗` with what to do; the exit code says whether everything passed.
//!
//! A SQLite store is looked at without changing anything (doctor runs where a person happens
//! to be, beside a running server or before the first start): a database a server is using is
//! checked through that server's `/healthz`; one nobody uses is opened read-only and its
//! write access checked without writing; a missing one is not created.

use std::fmt;

use serde_json::json;

use crate::channels::feishu::api::OpenApi;
use crate::channels::telegram::client::Client as TelegramClient;
use crate::channels::webhook::signature::SigningKey;
use crate::config::{Backend, Settings};
use crate::metrics::Metrics;
use crate::store::sqlite::{self, Inspection};
use crate::telemetry::escape;

/// The outcome of one check.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Check {
    /// Whether it passed.
    pub ok: bool,
    /// What was checked, and what was found.
    pub what: String,
    /// What to do about a failure.
    pub fix: Option<String>,
}

impl Check {
    fn pass(what: impl Into<String>) -> Self {
        Self {
            ok: true,
            what: what.into(),
            fix: None,
        }
    }

    fn fail(what: impl Into<String>, fix: impl Into<String>) -> Self {
        Self {
            ok: false,
            what: what.into(),
            fix: Some(fix.into()),
        }
    }
}

impl fmt::Display for Check {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mark = if self.ok { "✓" } else { "✗" };
        write!(f, "{mark} {}", self.what)?;
        if let Some(fix) = &self.fix {
            write!(f, "\n    → {fix}")?;
        }
        Ok(())
    }
}

/// Runs every check that applies to `settings`; with `send_test`, sends test messages.
pub async fn run(settings: &Settings, send_test: bool) -> Vec<Check> {
    let mut checks = Vec::new();
    store(settings, &mut checks).await;
    tokens(settings, &mut checks);
    if settings.telegram.enabled {
        telegram(settings, send_test, &mut checks).await;
    }
    if settings.feishu.enabled {
        feishu(settings, send_test, &mut checks).await;
    }
    if settings.slack.enabled {
        slack(settings, send_test, &mut checks).await;
    }
    for target in &settings.webhooks {
        webhook(settings, target, send_test, &mut checks).await;
    }
    let destinations = settings.telegram.enabled
        || settings.feishu.enabled
        || settings.slack.enabled
        || !settings.webhooks.is_empty();
    if !send_test && destinations {
        checks.push(Check::pass(
            "no test messages sent (run `imrelay doctor --send-test` to send one to every chat, receiver and webhook)",
        ));
    }
    if send_test && !destinations {
        checks.push(Check::fail(
            "--send-test: no test message sent, as nothing is configured to send to (no Telegram, Feishu or webhook)",
            "set one up (docs/telegram.md, docs/feishu.md, docs/webhooks.md); the inbox and `imrelay watch` need none",
        ));
    }
    checks
}

async fn store(settings: &Settings, checks: &mut Vec<Check>) {
    if settings.store.backend == Backend::Sqlite {
        sqlite(settings, checks).await;
        return;
    }
    match crate::app::open_store(settings).await {
        Err(e) => checks.push(Check::fail(
            format!("store ({}): cannot open it: {e:#}", backend(settings)),
            "check store.path (SQLite) or store.url (PostgreSQL) and that imrelay may write there",
        )),
        Ok(store) => match store.check_writable().await {
            Ok(()) => checks.push(Check::pass(format!(
                "store ({}) opens and takes writes",
                backend(settings)
            ))),
            Err(e) => checks.push(Check::fail(
                format!(
                    "store ({}) opens but refuses writes: {e}",
                    backend(settings)
                ),
                "free disk space, or give imrelay write access to its data directory",
            )),
        },
    }
}

/// The SQLite store, looked at without creating or writing anything: through the server that
/// is using it, else read-only.
async fn sqlite(settings: &Settings, checks: &mut Vec<Check>) {
    let path = settings.store.path.clone();
    let shown = shown_path(&path);
    let inspected = tokio::task::spawn_blocking(move || sqlite::inspect(&path)).await;
    let check = match inspected {
        Err(e) => Check::fail(
            format!("store (sqlite): could not look at {shown}: {e}"),
            "run doctor again",
        ),
        Ok(Err(e)) => Check::fail(
            format!("store (sqlite): cannot read {shown}: {e}"),
            "check store.path, and that imrelay may read it",
        ),
        Ok(Ok(Inspection::Missing {
            folder,
            writable: Ok(()),
        })) => match server_health(settings).await {
            // Its server runs, but not on this database: doctor is looking in the wrong place.
            (url, Ok(_)) => Check::fail(
                format!(
                    "store (sqlite): {shown} does not exist, yet an imrelay answers at {url}: it keeps its database elsewhere"
                ),
                if settings.store.path.is_relative() {
                    "store.path is relative: run doctor in the folder that server was started from (or make store.path absolute)"
                } else {
                    "run doctor with that server's configuration (--config)"
                },
            ),
            (_, Err(_)) => Check::pass(format!(
                "store (sqlite): {shown} does not exist yet; `imrelay serve` will create it (it may write in {})",
                std::path::absolute(&folder).unwrap_or(folder).display()
            )),
        },
        Ok(Ok(Inspection::Missing {
            folder,
            writable: Err(e),
        })) => Check::fail(
            format!("store (sqlite): {shown} does not exist, and imrelay could not create it: {e}"),
            format!(
                "give imrelay write access to {}, or set store.path to a folder it may write",
                folder.display()
            ),
        ),
        Ok(Ok(Inspection::Idle { version, .. })) if version > sqlite::SCHEMA_VERSION => {
            Check::fail(
                format!(
                    "store (sqlite): {shown} has schema version {version}, newer than this imrelay understands ({})",
                    sqlite::SCHEMA_VERSION
                ),
                "run the imrelay version that wrote it, or a newer one",
            )
        }
        Ok(Ok(Inspection::Idle {
            writable: Err(e), ..
        })) => Check::fail(
            format!("store (sqlite): {shown} can be read but not written: {e}"),
            "give imrelay write access to the database and its folder",
        ),
        Ok(Ok(Inspection::Idle {
            writable: Ok(()), ..
        })) => Check::pass(format!(
            "store (sqlite): {shown} opens, and imrelay may write it (no server is using it; checked without writing)"
        )),
        Ok(Ok(Inspection::InUse)) => through_server(settings, &shown).await,
    };
    checks.push(check);
}

/// What the server of these settings says at `/healthz` (its URL, then its status and body
/// if an imrelay answers there, or why not).
async fn server_health(
    settings: &Settings,
) -> (
    String,
    Result<(reqwest::StatusCode, serde_json::Value), String>,
) {
    let url = super::health_url(settings, super::Probe::Ready);
    let answer = async {
        let r = reqwest::Client::builder()
            .timeout(std::time::Duration::from_secs(3))
            .build()?
            .get(&url)
            .send()
            .await?;
        let status = r.status();
        r.json::<serde_json::Value>()
            .await
            .map(|body| (status, body))
    };
    let result = match answer.await {
        Err(e) => Err(format!("no server answers at {url} ({e})")),
        Ok((_, body)) if body.get("store").and_then(|s| s.as_str()).is_none() => {
            Err(format!("what answers at {url} is not imrelay"))
        }
        Ok(answered) => Ok(answered),
    };
    (url, result)
}

/// A database another process holds: checked through the server of these settings, if it
/// is the one answering.
async fn through_server(settings: &Settings, shown: &str) -> Check {
    let elsewhere = |why: String| {
        Check::fail(
            format!("store (sqlite): {shown} is in use by another imrelay process, and {why}"),
            "that process holds the database, so `imrelay serve` cannot start with this configuration: \
             stop it, or give this configuration its own store.path (if that process is its server, check server.listen)",
        )
    };
    match server_health(settings).await {
        (_, Err(why)) => elsewhere(why),
        (url, Ok((status, body))) => {
            let state = body["store"].as_str().unwrap_or_default();
            if status.is_success() && state == "ok" {
                Check::pass(format!(
                    "store (sqlite): {shown} is in use by the running server; checked through it ({url}): it takes writes"
                ))
            } else {
                let why = escape(body["store_error"].as_str().unwrap_or("no reason given"));
                Check::fail(
                    format!(
                        "store (sqlite): {shown} is in use by the running server, which says (at {url}) that its store is {}: {why}",
                        escape(state)
                    ),
                    "free disk space, or give imrelay write access to its data directory",
                )
            }
        }
    }
}

/// A path as given, and where that is when it is relative (doctor may run anywhere).
fn shown_path(path: &std::path::Path) -> String {
    match std::path::absolute(path) {
        Ok(abs) if path.is_relative() => format!("{} ({})", path.display(), abs.display()),
        _ => path.display().to_string(),
    }
}

/// The store backend's name as configured (`sqlite`, `memory`, `postgres`).
fn backend(settings: &Settings) -> String {
    format!("{:?}", settings.store.backend).to_lowercase()
}

fn tokens(settings: &Settings, checks: &mut Vec<Check>) {
    let listen = settings.server.listen;
    let (agent, operator) = (
        settings.auth.agent_tokens.len(),
        settings.auth.operator_tokens.len(),
    );
    if listen.ip().is_loopback() {
        checks.push(Check::pass(format!(
            "listens on {listen}: only this machine can connect ({agent} agent and {operator} operator tokens set)"
        )));
    } else if agent > 0 && operator > 0 {
        checks.push(Check::pass(format!(
            "listens on {listen} with {agent} agent and {operator} operator tokens"
        )));
    } else {
        checks.push(Check::fail(
            format!("listens on {listen} without agent and operator tokens"),
            "set auth.agent_tokens and auth.operator_tokens (e.g. `openssl rand -hex 32`)",
        ));
    }
}

async fn telegram(settings: &Settings, send_test: bool, checks: &mut Vec<Check>) {
    let s = &settings.telegram;
    let client = match TelegramClient::new(s, &Metrics::new()) {
        Ok((client, worker)) => {
            tokio::spawn(worker);
            client
        }
        Err(e) => {
            checks.push(Check::fail(
                format!("Telegram: {e:#}"),
                "fix telegram.api_url",
            ));
            untried(
                send_test,
                "Telegram",
                s.chats.iter().map(|c| format!("chat {c}")),
                checks,
            );
            return;
        }
    };
    match client.get_me().await {
        Ok(me) => checks.push(Check::pass(format!(
            "Telegram: the bot token works (@{})",
            me.username()
        ))),
        Err(e) => {
            checks.push(Check::fail(
                format!("Telegram: getMe failed: {}", e.describe()),
                format!(
                    "check telegram.token (from @BotFather) and that {} is reachable",
                    s.api_url.trim()
                ),
            ));
            untried(
                send_test,
                "Telegram",
                s.chats.iter().map(|c| format!("chat {c}")),
                checks,
            );
            return;
        }
    }
    if s.approvers.is_empty() {
        checks.push(Check::fail(
            "Telegram: no approvers, so nobody can answer",
            "add your numeric user id to telegram.approvers (e.g. from @userinfobot)",
        ));
    } else {
        checks.push(Check::pass(format!(
            "Telegram: {} approver(s)",
            s.approvers.len()
        )));
    }
    if s.chats.is_empty() {
        checks.push(Check::fail(
            "Telegram: no chats to post to",
            "add a chat id to telegram.chats (your user id for a private chat)",
        ));
    }
    for &chat in &s.chats {
        if !send_test {
            continue;
        }
        let text = "✅ imrelay doctor: this chat receives imrelay's questions.".to_string();
        match client.send(chat, text, None, None).await {
            Ok(_) => checks.push(Check::pass(format!(
                "Telegram: chat {chat} received a test message"
            ))),
            Err(e) => checks.push(Check::fail(
                format!(
                    "Telegram: chat {chat} did not take a test message: {}",
                    e.describe()
                ),
                "start a chat with the bot first (send it /start), or add it to the group",
            )),
        }
    }
}

async fn feishu(settings: &Settings, send_test: bool, checks: &mut Vec<Check>) {
    let s = &settings.feishu;
    let api = match OpenApi::new(&s.api_base(), &s.app_id, s.app_secret.clone()) {
        Ok(api) => api,
        Err(e) => {
            checks.push(Check::fail(format!("Feishu: {e}"), "fix feishu.base_url"));
            untried(
                send_test,
                "Feishu",
                s.receivers.iter().map(|r| r.address()),
                checks,
            );
            return;
        }
    };
    match api.tenant_token().await {
        Ok(_) => checks.push(Check::pass("Feishu: the app credentials get a token")),
        Err(e) => {
            checks.push(Check::fail(
                format!("Feishu: no token for the app credentials: {e}"),
                "check feishu.app_id and feishu.app_secret, and feishu.domain (feishu or lark)",
            ));
            untried(
                send_test,
                "Feishu",
                s.receivers.iter().map(|r| r.address()),
                checks,
            );
            return;
        }
    }
    if s.approvers.is_empty() {
        checks.push(Check::fail(
            "Feishu: no approvers, so nobody can answer",
            "add your open_id to feishu.approvers",
        ));
    } else {
        checks.push(Check::pass(format!(
            "Feishu: {} approver(s)",
            s.approvers.len()
        )));
    }
    if s.receivers.is_empty() {
        checks.push(Check::fail(
            "Feishu: no receivers to post to",
            "add a chat or user to feishu.receivers",
        ));
    }
    for receiver in &s.receivers {
        if !send_test {
            continue;
        }
        let card = json!({
            "schema": "2.0",
            "header": {"title": {"tag": "plain_text", "content": "imrelay doctor"}, "template": "green"},
            "body": {"elements": [{"tag": "markdown", "content": "✅ This chat receives imrelay's questions."}]},
        });
        let uuid = uuid::Uuid::now_v7().to_string();
        match api.send_card(receiver, &card, &uuid).await {
            Ok(_) => checks.push(Check::pass(format!(
                "Feishu: {} received a test card",
                receiver.address()
            ))),
            Err(e) => checks.push(Check::fail(
                format!(
                    "Feishu: {} did not take a test card: {e}",
                    receiver.address()
                ),
                "add the app (bot) to that chat, and give it the im:message:send_as_bot permission",
            )),
        }
    }
}

async fn slack(settings: &Settings, send_test: bool, checks: &mut Vec<Check>) {
    use crate::channels::slack::Mode;
    use crate::channels::slack::api::{NewMessage, WebApi};
    let s = &settings.slack;
    let channels = || s.channels.iter().map(|c| format!("conversation {c}"));
    let api = match WebApi::new(&s.api_base(), s.bot_token.clone(), s.app_token.clone()) {
        Ok(api) => api,
        Err(e) => {
            checks.push(Check::fail(format!("Slack: {e}"), "fix slack.api_base"));
            untried(send_test, "Slack", channels(), checks);
            return;
        }
    };
    match api.auth_test().await {
        Ok(who) => checks.push(Check::pass(format!(
            "Slack: the bot token works (bot {} in workspace {})",
            escape(&who.user),
            escape(&who.team)
        ))),
        Err(e) => {
            checks.push(Check::fail(
                format!("Slack: auth.test refused the bot token: {e}"),
                "check slack.bot_token (xoxb-..., OAuth & Permissions) and that the app is installed in the workspace",
            ));
            untried(send_test, "Slack", channels(), checks);
            return;
        }
    }
    if s.mode == Mode::SocketMode {
        match api.connections_open().await {
            Ok(_) => checks.push(Check::pass(
                "Slack: the app-level token opens Socket Mode connections",
            )),
            Err(e) => checks.push(Check::fail(
                format!("Slack: apps.connections.open failed: {e}"),
                "check slack.app_token (xapp-..., scope connections:write) and that Socket Mode is on in the app's settings",
            )),
        }
    }
    if s.approvers.is_empty() {
        checks.push(Check::fail(
            "Slack: no approvers, so nobody can answer",
            "add your Slack user id (U...) to slack.approvers (profile → ⋮ → Copy member ID)",
        ));
    } else {
        checks.push(Check::pass(format!(
            "Slack: {} approver(s)",
            s.approvers.len()
        )));
    }
    if !send_test {
        return;
    }
    let blocks = json!([{"type": "section", "text": {"type": "plain_text",
        "text": "✅ This conversation receives imrelay's approvals and questions."}}]);
    for channel in &s.channels {
        let message = NewMessage {
            channel,
            text: "imrelay doctor: test message",
            blocks: Some(&blocks),
            thread_ts: None,
        };
        match api.post_message(&message).await {
            Ok(_) => checks.push(Check::pass(format!(
                "Slack: conversation {} received a test message",
                escape(channel)
            ))),
            Err(e) => checks.push(Check::fail(
                format!(
                    "Slack: conversation {} did not take a test message: {e}",
                    escape(channel)
                ),
                "invite the bot to that conversation (/invite @yourbot), and give it the chat:write scope",
            )),
        }
    }
}

async fn webhook(
    settings: &Settings,
    target: &crate::channels::webhook::WebhookSettings,
    send_test: bool,
    checks: &mut Vec<Check>,
) {
    let name = &target.name;
    let key = match SigningKey::parse(target.secret.expose()) {
        Ok(key) => key,
        Err(e) => {
            checks.push(Check::fail(
                format!("webhook {name}: {e}"),
                "set its secret to whsec_ followed by base64 of at least 16 random bytes",
            ));
            untried(
                send_test,
                &format!("webhook {name}"),
                [target.url.clone()],
                checks,
            );
            return;
        }
    };
    if !send_test {
        checks.push(Check::pass(format!(
            "webhook {name}: {} (not tried)",
            target.url
        )));
        return;
    }
    let id = format!("msg_doctor_{}", uuid::Uuid::now_v7().simple());
    let now = jiff::Timestamp::now();
    let body = json!({
        "type": "imrelay.test",
        "id": id,
        "timestamp": now.to_string(),
        "data": {"message": "imrelay doctor: a signed test event", "public_url": settings.server.public_url},
    })
    .to_string();
    let signature = key.sign(&id, now.as_second(), body.as_bytes());
    let sent = reqwest::Client::new()
        .post(&target.url)
        .timeout(std::time::Duration::from_secs(target.timeout_secs.max(1)))
        .header("content-type", "application/json")
        .header("webhook-id", &id)
        .header("webhook-timestamp", now.as_second().to_string())
        .header("webhook-signature", signature)
        .body(body)
        .send()
        .await;
    match sent {
        Ok(r) if r.status().is_success() => checks.push(Check::pass(format!(
            "webhook {name}: {} answered a signed test event ({})",
            target.url,
            r.status()
        ))),
        Ok(r) => checks.push(Check::fail(
            format!("webhook {name}: {} answered {}", target.url, r.status()),
            "the receiver must answer 2xx to a correctly signed event (check it verifies with this secret)",
        )),
        Err(e) => checks.push(Check::fail(
            format!("webhook {name}: {} unreachable: {e}", target.url),
            "check the URL and that the receiver is running",
        )),
    }
}

/// With `--send-test`, a failure for each destination of `channel` that gets no test
/// message because a check before it failed: every destination has its line.
fn untried(
    send_test: bool,
    channel: &str,
    destinations: impl IntoIterator<Item = String>,
    checks: &mut Vec<Check>,
) {
    if !send_test {
        return;
    }
    for to in destinations {
        checks.push(Check::fail(
            format!("{channel}: no test message sent to {to}, as the check above failed"),
            "fix that, then run `imrelay doctor --send-test` again",
        ));
    }
}

/// Prints the checks, one per line; true when all passed.
pub fn print(checks: &[Check]) -> bool {
    for c in checks {
        say!("{c}");
    }
    let failed = checks.iter().filter(|c| !c.ok).count();
    if failed == 0 {
        say!("\nall {} checks passed", checks.len());
    } else {
        say!("\n{failed} of {} checks failed", checks.len());
    }
    failed == 0
}
