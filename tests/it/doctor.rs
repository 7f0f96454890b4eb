//! `imrelay doctor`: the real binary checks a configuration against fakes of Telegram, Feishu
//! and a webhook receiver, healthy and broken, and tells a platform it cannot reach from one
//! that refuses the credentials; and the store beside a running server, or without one,
//! creating and writing nothing. What `imrelay serve` says at start-up of the same gaps, too.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use axum::Router;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::routing::post;

use crate::feishu::fake::{self as feishu_fake, FakeFeishu};
use crate::support::{Server, free_port};
use crate::telegram::fake::{self as telegram_fake, Fail, FakeTelegram};

/// A webhook receiver answering `status`, keeping the headers of what it received.
#[derive(Clone)]
struct Hook {
    status: StatusCode,
    got: Arc<Mutex<Vec<HeaderMap>>>,
}

async fn receive(State(h): State<Hook>, headers: HeaderMap) -> StatusCode {
    h.got.lock().unwrap().push(headers);
    h.status
}

async fn hook(status: StatusCode) -> (Hook, String) {
    let h = Hook {
        status,
        got: Arc::default(),
    };
    let app = Router::new()
        .route("/hook", post(receive))
        .with_state(h.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/hook", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });
    (h, url)
}

/// Runs `imrelay doctor ARGS` with `config` (TOML) in a fresh data directory, its server
/// address one where nothing listens.
pub(crate) async fn doctor(config: String, args: &[&str]) -> (bool, String) {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("imrelay.toml");
    std::fs::write(&file, config).unwrap();
    let db = dir.path().join("imrelay.db");
    let listen = format!("127.0.0.1:{}", free_port());
    let mut with_config = vec!["--config", file.to_str().unwrap(), "doctor"];
    with_config.extend(args);
    let env = [
        ("IMRELAY__STORE__PATH", db.to_str().unwrap()),
        ("IMRELAY__SERVER__LISTEN", listen.as_str()),
    ];
    run_in(dir.path(), &env, &with_config).await
}

/// Runs `imrelay ARGS` in the folder `dir` with `env` and no other configuration: whether it
/// exited 0, and what a person sees.
async fn run_in(dir: &Path, env: &[(&str, &str)], args: &[&str]) -> (bool, String) {
    let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_imrelay"));
    cmd.args(args)
        .current_dir(dir)
        .env_remove("IMRELAY_CONFIG")
        .envs(env.iter().copied());
    let out = cmd.output().await.expect("runs");
    // What a person sees: the checks, and any configuration error or warning.
    let seen = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stderr),
        String::from_utf8_lossy(&out.stdout)
    );
    (out.status.success(), seen)
}

fn config(tg: &FakeTelegram, fs: &FakeFeishu, hook_url: &str, approvers: bool) -> String {
    let (tg_approvers, fs_approvers) = if approvers {
        ("[1001]", r#"["ou_boss"]"#)
    } else {
        ("[]", "[]")
    };
    format!(
        r#"
[telegram]
enabled = true
token = "{token}"
api_url = "{tg_url}"
chats = [1001, -2001]
approvers = {tg_approvers}

[feishu]
enabled = true
base_url = "{fs_url}"
app_id = "{app_id}"
app_secret = "{app_secret}"
receivers = [{{type = "chat_id", id = "oc_team"}}]
approvers = {fs_approvers}

[[webhooks]]
name = "oncall"
url = "{hook_url}"
secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
"#,
        token = telegram_fake::TOKEN,
        tg_url = tg.url,
        fs_url = fs.url,
        app_id = feishu_fake::APP_ID,
        app_secret = feishu_fake::APP_SECRET,
    )
}

#[tokio::test]
async fn a_healthy_configuration_passes_and_every_destination_gets_a_test() {
    let tg = FakeTelegram::start().await;
    let fs = FakeFeishu::start().await;
    let (receiver, url) = hook(StatusCode::NO_CONTENT).await;
    let (ok, out) = doctor(config(&tg, &fs, &url, true), &["--send-test"]).await;
    assert!(ok, "{out}");
    assert!(!out.contains('✗'), "{out}");
    for line in [
        "✓ store (sqlite): ",
        "✓ Telegram: the bot token works (@",
        "✓ Telegram: chat 1001 received a test message",
        "✓ Telegram: chat -2001 received a test message",
        "✓ Feishu: the app credentials get a token",
        "✓ Feishu: chat_id:oc_team received a test card",
        "✓ webhook oncall: ",
        "checks passed",
    ] {
        assert!(out.contains(line), "{line:?} in:\n{out}");
    }
    // What the destinations received.
    let sent = tg.calls("sendMessage");
    assert_eq!(sent.len(), 2, "{sent:?}");
    assert!(
        sent[0].params["text"]
            .as_str()
            .unwrap()
            .contains("imrelay doctor")
    );
    assert_eq!(fs.state.sends().len(), 1);
    let got = receiver.got.lock().unwrap().clone();
    assert_eq!(got.len(), 1);
    for h in ["webhook-id", "webhook-timestamp", "webhook-signature"] {
        assert!(got[0].contains_key(h), "{h}");
    }
}

#[tokio::test]
async fn without_send_test_nothing_is_sent() {
    let tg = FakeTelegram::start().await;
    let fs = FakeFeishu::start().await;
    let (receiver, url) = hook(StatusCode::OK).await;
    let (ok, out) = doctor(config(&tg, &fs, &url, true), &[]).await;
    assert!(ok, "{out}");
    assert!(out.contains("--send-test"), "{out}");
    assert!(tg.calls("sendMessage").is_empty());
    assert!(fs.state.sends().is_empty());
    assert!(receiver.got.lock().unwrap().is_empty());
}

#[tokio::test]
async fn a_broken_configuration_fails_and_says_what_to_do() {
    let tg = FakeTelegram::start().await;
    tg.fail("getMe", Fail::Status(401, "Unauthorized".into()), 1);
    let fs = FakeFeishu::start().await;
    let (_, url) = hook(StatusCode::INTERNAL_SERVER_ERROR).await;
    let broken = config(&tg, &fs, &url, false).replace(feishu_fake::APP_SECRET, "wrong-secret");
    let (ok, out) = doctor(broken, &["--send-test"]).await;
    assert!(!ok, "{out}");
    for (line, fix) in [
        (
            "✗ Telegram: the bot token was refused (getMe: Invalid bot token)",
            "→ check telegram.token",
        ),
        (
            "✗ Feishu: no token for the app credentials",
            "→ check feishu.app_id",
        ),
        ("✗ webhook oncall: ", "→ the receiver must answer 2xx"),
    ] {
        assert!(out.contains(line), "{line:?} in:\n{out}");
        assert!(out.contains(fix), "{fix:?} in:\n{out}");
    }
    // Every destination that got no test message has its line, with what to do.
    for line in [
        "✗ Telegram: no test message sent to chat 1001, as the check above failed\n    → fix that, then run `imrelay doctor --send-test` again",
        "✗ Telegram: no test message sent to chat -2001, as the check above failed",
        "✗ Feishu: no test message sent to chat_id:oc_team, as the check above failed",
    ] {
        assert!(out.contains(line), "{line:?} in:\n{out}");
    }
    assert!(out.contains("checks failed"), "{out}");
    // Telegram's own words, without the library's.
    assert!(!out.contains("A Telegram's error"), "{out}");
    // Telegram answered getMe with 401: nothing further was tried there.
    assert!(tg.calls("sendMessage").is_empty());
    tg.take_refusals();
}

#[tokio::test]
async fn nobody_to_answer_is_a_failure() {
    let tg = FakeTelegram::start().await;
    let fs = FakeFeishu::start().await;
    let (_, url) = hook(StatusCode::OK).await;
    let (ok, out) = doctor(config(&tg, &fs, &url, false), &[]).await;
    assert!(!ok, "{out}");
    assert!(out.contains("✗ Telegram: no approvers"), "{out}");
    assert!(
        out.contains("→ add your numeric user id to telegram.approvers"),
        "{out}"
    );
    assert!(out.contains("✗ Feishu: no approvers"), "{out}");
}

/// Every file under `dir` (its path, size and time of last change).
fn files(dir: &Path) -> Vec<(PathBuf, u64, SystemTime)> {
    let mut out = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let e = e.unwrap();
            let m = e.metadata().unwrap();
            if m.is_dir() {
                todo.push(e.path());
            }
            out.push((e.path(), m.len(), m.modified().unwrap()));
        }
    }
    out.sort();
    out
}

#[tokio::test]
async fn with_the_defaults_it_creates_nothing_and_says_there_is_nothing_to_test() {
    let dir = tempfile::tempdir().unwrap();
    let listen = format!("127.0.0.1:{}", free_port());
    let env = [("IMRELAY__SERVER__LISTEN", listen.as_str())];
    let (ok, out) = run_in(dir.path(), &env, &["doctor"]).await;
    assert!(ok, "{out}");
    assert!(
        out.contains(&format!(
            "✓ store (sqlite): data/imrelay.db ({}) does not exist yet; `imrelay serve` will create it",
            dir.path().join("data/imrelay.db").display()
        )),
        "{out}"
    );
    assert_eq!(files(dir.path()), [], "doctor created files");

    // Test messages asked for, and nowhere to send them: said plainly, and a failure.
    let (ok, out) = run_in(dir.path(), &env, &["doctor", "--send-test"]).await;
    assert!(!ok, "{out}");
    let every =
        imrelay::channels::in_words(&imrelay::config::Settings::defaults().unwrap().channels());
    assert!(every.starts_with("Telegram, Feishu/Lark, "), "{every}");
    assert!(
        out.contains(&format!(
            "✗ --send-test: no test message sent, as nothing is configured to send to (none of {every} is enabled)\n    → set one up"
        )),
        "{out}"
    );
    assert_eq!(files(dir.path()), []);
}

#[tokio::test]
async fn beside_a_running_server_its_store_is_checked_through_it_and_nothing_is_written() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("data").join("imrelay.db");
    let listen = format!("127.0.0.1:{}", free_port());
    let server = Server::start_on(&listen, &db, None);
    let env = [
        ("IMRELAY__SERVER__LISTEN", listen.as_str()),
        ("IMRELAY__STORE__PATH", db.to_str().unwrap()),
    ];
    let names = |dir: &Path| {
        files(dir)
            .into_iter()
            .map(|(p, _, _)| p)
            .collect::<Vec<_>>()
    };
    let before = names(dir.path());
    let (ok, out) = run_in(dir.path(), &env, &["doctor"]).await;
    assert!(ok, "{out}");
    assert!(
        out.contains(&format!(
            "✓ store (sqlite): {} is in use by the running server; checked through it (http://{listen}/healthz): it takes writes",
            db.display()
        )),
        "{out}"
    );
    assert_eq!(names(dir.path()), before);

    // From another folder, where the relative default path names no database: it says where
    // the server's database is not, and creates nothing there either.
    let elsewhere = tempfile::tempdir().unwrap();
    let (ok, out) = run_in(elsewhere.path(), &env[..1], &["doctor"]).await;
    assert!(!ok, "{out}");
    assert!(
        out.contains(&format!(
            "✗ store (sqlite): data/imrelay.db ({}) does not exist, yet an imrelay answers at http://{listen}/healthz: it keeps its database elsewhere\n    → store.path is relative: run doctor in the folder that server was started from",
            elsewhere.path().join("data/imrelay.db").display()
        )),
        "{out}"
    );
    assert_eq!(files(elsewhere.path()), []);

    // The server stopped: the database is opened read-only and nothing in its folder changes
    // (but for the time on WAL's shared-memory index, which SQLite's readers update while
    // the log holds changes not yet in the database file).
    stop(server).await;
    let unchanged = |dir: &Path| {
        files(dir)
            .into_iter()
            .map(|(p, len, at)| {
                let index = p.to_string_lossy().ends_with("-shm");
                (p, len, if index { SystemTime::UNIX_EPOCH } else { at })
            })
            .collect::<Vec<_>>()
    };
    let before = unchanged(dir.path());
    let (ok, out) = run_in(dir.path(), &env, &["doctor"]).await;
    assert!(ok, "{out}");
    assert!(
        out.contains(&format!(
            "✓ store (sqlite): {} opens, and imrelay may write it (no server is using it; checked without writing)",
            db.display()
        )),
        "{out}"
    );
    assert_eq!(unchanged(dir.path()), before);
}

/// Stops a server as a service manager does (SIGTERM), and waits until it has exited.
async fn stop(mut server: Server) {
    let pid = nix::unistd::Pid::from_raw(i32::try_from(server.child.id()).unwrap());
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM).unwrap();
    tokio::task::spawn_blocking(move || {
        let status = server.child.wait().unwrap();
        assert!(status.success(), "{status}");
    })
    .await
    .unwrap();
}

fn slack_config(slack: &crate::slack::fake::FakeSlack, bot_token: &str) -> String {
    format!(
        r#"
[slack]
enabled = true
bot_token = "{bot_token}"
app_token = "{app}"
api_base = "{api}"
channels = ["C0APPROVALS", "C0NOTMEMBER"]
approvers = ["U0ALICE"]
"#,
        app = crate::slack::fake::APP_TOKEN,
        api = slack.api,
    )
}

#[tokio::test]
async fn slack_tokens_and_conversations_are_checked_and_each_gets_a_test_message() {
    let slack = crate::slack::fake::FakeSlack::start().await;
    let (ok, out) = doctor(
        slack_config(&slack, crate::slack::fake::BOT_TOKEN),
        &["--send-test"],
    )
    .await;
    assert!(!ok, "one conversation refuses: {out}");
    for line in [
        "✓ Slack: the bot token works (bot imrelay in workspace imrelay test)",
        "✓ Slack: the app-level token opens Socket Mode connections",
        "✓ Slack: 1 approver(s)",
        "✓ Slack: conversation C0APPROVALS received a test message",
        "✗ Slack: conversation C0NOTMEMBER did not take a test message: chat.postMessage: Slack refused the request: channel_not_found\n    → invite the bot",
    ] {
        assert!(out.contains(line), "{line:?} in:\n{out}");
    }
    let posted = slack.state.calls("chat.postMessage");
    assert_eq!(posted.len(), 2);
    assert_eq!(posted[0].body["text"], "imrelay doctor: test message");

    // A refused bot token sends nothing and says which setting to fix.
    let slack = crate::slack::fake::FakeSlack::start().await;
    let (ok, out) = doctor(slack_config(&slack, "xoxb-revoked"), &["--send-test"]).await;
    assert!(!ok);
    assert!(
        out.contains("✗ Slack: auth.test refused the bot token: auth.test: Slack refused the token: invalid_auth\n    → check slack.bot_token"),
        "{out}"
    );
    assert!(
        out.contains("✗ Slack: no test message sent to conversation C0APPROVALS"),
        "{out}"
    );
    assert!(slack.state.calls("chat.postMessage").is_empty());
}

/// A platform that cannot be reached is said to be unreachable, with the fix for that: never
/// blamed on the credentials, which were never tried. Credentials refused are still said to be.
#[tokio::test]
async fn a_platform_out_of_reach_is_not_blamed_on_the_credentials() {
    let (tg, ding, wecom) = (free_port(), free_port(), free_port());
    let config = format!(
        r#"
[telegram]
enabled = true
token = "{token}"
api_url = "http://127.0.0.1:{tg}"
chats = [1001]
approvers = [1001]

[dingtalk]
enabled = true
client_id = "{ding_id}"
client_secret = "{ding_secret}"
card_template_id = "{template}"
api_base = "http://127.0.0.1:{ding}"
conversations = ["cidGroupOps=="]
approvers = ["manager4711"]

[wecom]
enabled = true
transport = "longconn"
url = "ws://127.0.0.1:{wecom}"
bot_id = "{bot_id}"
secret = "{wecom_secret}"
chats = ["wrkGroupA"]
approvers = ["zhangsan"]
"#,
        token = telegram_fake::TOKEN,
        ding_id = crate::dingtalk::fake::CLIENT_ID,
        ding_secret = crate::dingtalk::fake::CLIENT_SECRET,
        template = crate::dingtalk::fake::TEMPLATE,
        bot_id = crate::wecom::fake::BOT_ID,
        wecom_secret = crate::wecom::fake::SECRET,
    );
    let (ok, out) = doctor(config.clone(), &["--send-test"]).await;
    assert!(!ok, "{out}");
    for (line, fix) in [
        (
            format!(
                "✗ Telegram: cannot reach the Bot API at http://127.0.0.1:{tg} (Bot API cannot connect"
            ),
            format!(
                "→ check that this machine reaches http://127.0.0.1:{tg} (its name resolves, no firewall in the way), then run doctor again"
            ),
        ),
        (
            format!(
                "✗ DingTalk: cannot reach http://127.0.0.1:{ding} for an access token: cannot reach DingTalk: "
            ),
            format!("→ check that this machine reaches http://127.0.0.1:{ding} "),
        ),
        (
            format!("✗ WeCom: cannot reach WeCom at ws://127.0.0.1:{wecom}: cannot connect"),
            format!("→ check that this machine reaches ws://127.0.0.1:{wecom} "),
        ),
    ] {
        assert!(out.contains(&line), "{line:?} in:\n{out}");
        assert!(out.contains(&fix), "{fix:?} in:\n{out}");
    }
    for blamed in [
        "check telegram.token",
        "check dingtalk.client_id",
        "check wecom.bot_id",
    ] {
        assert!(!out.contains(blamed), "{blamed:?} in:\n{out}");
    }

    // A WeCom that answers and refuses the secret: the credentials are named.
    let fake = crate::wecom::fake::FakeWecom::start().await;
    let refused = config
        .replace(&format!("ws://127.0.0.1:{wecom}"), &fake.url)
        .replace(crate::wecom::fake::SECRET, "not-the-secret");
    let (ok, out) = doctor(refused, &[]).await;
    assert!(!ok, "{out}");
    assert!(
        out.contains("✗ WeCom: the long connection was refused: WeCom refused the subscription"),
        "{out}"
    );
    assert!(
        out.contains("→ check wecom.bot_id and wecom.secret"),
        "{out}"
    );
    assert!(
        !out.contains("not-the-secret"),
        "the secret is never shown: {out}"
    );
}

/// The lines `imrelay serve` logs with `config` (TOML) until it is ready; then it is stopped.
fn start_up_lines(config: &str) -> Vec<String> {
    use std::io::BufRead;
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("imrelay.toml");
    std::fs::write(&file, config).unwrap();
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_imrelay"))
        .arg("--config")
        .arg(&file)
        .arg("serve")
        .env_remove("IMRELAY_CONFIG")
        .env("IMRELAY__SERVER__LISTEN", "127.0.0.1:0")
        .env("IMRELAY__STORE__PATH", dir.path().join("imrelay.db"))
        .env("IMRELAY__LOG__FORMAT", "json")
        .env("RUST_LOG", "info")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("the imrelay binary starts");
    let stderr = child.stderr.take().expect("stderr");
    let mut lines = Vec::new();
    for line in std::io::BufReader::new(stderr).lines() {
        let Ok(line) = line else { break };
        let ready = line.contains("\"imrelay is ready\"");
        lines.push(line);
        if ready {
            break;
        }
    }
    let _ = child.kill();
    let _ = child.wait();
    lines
}

/// Telegram with neither approvers nor chats: start-up says both at once, and never that
/// prompts are still posted (there is no chat to post them to).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn telegram_without_approvers_or_chats_says_nothing_is_posted_at_start_up() {
    let tg = FakeTelegram::start().await;
    let config = format!(
        "[telegram]\nenabled = true\ntoken = \"{}\"\napi_url = \"{}\"\n",
        telegram_fake::TOKEN,
        tg.url
    );
    let lines = tokio::task::spawn_blocking(move || start_up_lines(&config))
        .await
        .unwrap();
    let said: Vec<&String> = lines
        .iter()
        .filter(|l| l.contains("telegram.approvers") || l.contains("telegram.chats"))
        .collect();
    // The channel's line says both at once; the configuration's warning agrees.
    assert!(
        said.iter().any(|l| l.contains(
            "telegram.approvers and telegram.chats are empty: NOBODY can answer from Telegram, \
             and prompts reach only people a route messages directly"
        )),
        "{said:#?}"
    );
    assert!(
        said.iter().any(|l| l.contains(
            "telegram is enabled but telegram.approvers is empty, and so is telegram.chats"
        )),
        "{said:#?}"
    );
    let nobody = said.iter().filter(|l| l.contains("NOBODY")).count();
    assert_eq!(
        nobody, 1,
        "said once, not by the kit and the channel both: {said:#?}"
    );
    for l in &said {
        assert!(
            !l.contains("still posted") && !l.contains("prompts are posted"),
            "{l}"
        );
        assert!(
            !l.contains("\"telegram.chats is empty"),
            "said twice: {said:#?}"
        );
    }
    assert!(
        lines.last().is_some_and(|l| l.contains("imrelay is ready")),
        "{lines:#?}"
    );
}

/// The generator of P-256, uncompressed: a valid public key for a device's `p256dh`.
const P256_G: &str = "046b17d1f2e12c4247f8bce6e563a440f277037d812deb33a0f4a13945d898c2964fe342e2fe1a7f9b8ee7eb4a7c0f9e162bce33576b315ececbb6406837bf51f5";

/// A folder with a configuration where Ann (token labelled `ann-phone`) subscribes devices
/// for Web Push: the folder, the file, where the database goes, and a free address.
fn push_setup() -> (tempfile::TempDir, PathBuf, PathBuf, String) {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("imrelay.toml");
    std::fs::write(
        &file,
        "[auth]\noperator_tokens = [{ token = \"ann-token-0123456789abcdef\", label = \"ann-phone\" }]\n\
         [push]\nenabled = true\nsubject = \"mailto:ops@example.com\"\n\
         [[people]]\nname = \"ann\"\noperator = [\"ann-phone\"]\n",
    )
    .unwrap();
    let db = dir.path().join("imrelay.db");
    let listen = format!("127.0.0.1:{}", free_port());
    (dir, file, db, listen)
}

#[tokio::test]
async fn push_is_checked_key_devices_and_their_push_services_beside_the_server() {
    use base64::Engine;
    let b64 = |b: &[u8]| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(b);
    let (dir, file, db, listen) = push_setup();
    let env = [
        ("IMRELAY__SERVER__LISTEN", listen.as_str()),
        ("IMRELAY__STORE__PATH", db.to_str().unwrap()),
    ];
    let args = ["--config", file.to_str().unwrap(), "doctor"];

    // Before the first start: nothing made yet, nothing subscribed, and nothing created.
    let (ok, out) = run_in(dir.path(), &env, &args).await;
    assert!(ok, "{out}");
    for line in [
        "✓ push: push services are given mailto:ops@example.com as whom to contact",
        "✓ push: no VAPID key yet: `imrelay serve` makes one at its first start with push on",
        "✓ push: no device is subscribed yet",
    ] {
        assert!(out.contains(line), "{line:?} in {out}");
    }
    assert!(!db.exists());

    // A push service that answers, and one where nothing listens; a device on each.
    let service = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let up = format!("http://{}", service.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(service, Router::new()).await });
    let down = format!("http://127.0.0.1:{}", free_port());
    let server = Server::start_on(&listen, &db, Some(&file));
    let client = reqwest::Client::new();
    for (endpoint, name) in [(&up, "ann's phone"), (&down, "ann's tablet")] {
        let r = client
            .post(format!("{}/v1/push/devices", server.base))
            .bearer_auth("ann-token-0123456789abcdef")
            .json(&serde_json::json!({
                "endpoint": format!("{endpoint}/push/{name}"),
                "keys": {"p256dh": b64(&hex::decode(P256_G).unwrap()), "auth": b64(&[7; 16])},
                "name": name,
            }))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), StatusCode::CREATED, "{:?}", r.text().await);
    }
    let (ok, out) = run_in(dir.path(), &env, &args).await;
    assert!(!ok, "{out}");
    for line in [
        "✓ push: the VAPID key is kept in the store (public key ".to_string(),
        "✓ push: 2 devices subscribed (ann 2)".to_string(),
        format!("✓ push: {up} (the push service of 1 device) answers"),
        format!(
            "✗ push: {down} (the push service of 1 device) does not answer (waited at most 5 s): "
        ),
        "→ this machine must reach the push services over https".to_string(),
    ] {
        assert!(out.contains(&line), "{line:?} in {out}");
    }
    stop(server).await;
}

/// `doctor --send-test` sends each subscribed device one test notification through the real
/// push path, checked by the fake push service (decrypted with the subscription's keys, the
/// VAPID JWT's `aud` its origin), and says per device what the service answered: a device
/// whose subscription is gone (`404`) is named with its fix.
#[tokio::test]
async fn push_send_test_notifies_each_device_and_says_what_its_service_answered() {
    let fake = crate::push::FakePush::start(1).await;
    let (dir, file, db, listen) = push_setup();
    let env = [
        ("IMRELAY__SERVER__LISTEN", listen.as_str()),
        ("IMRELAY__STORE__PATH", db.to_str().unwrap()),
    ];
    let server = Server::start_on(&listen, &db, Some(&file));
    let client = reqwest::Client::new();
    let phone = fake.subscription(0, "ann's phone");
    let mut gone = fake.subscription(0, "ann's old tablet");
    gone["endpoint"] = phone["endpoint"]
        .as_str()
        .unwrap()
        .replace("/push/0", "/push/9")
        .into();
    for sub in [&phone, &gone] {
        let r = client
            .post(format!("{}/v1/push/devices", server.base))
            .bearer_auth("ann-token-0123456789abcdef")
            .json(sub)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), StatusCode::CREATED, "{:?}", r.text().await);
    }
    let args = ["--config", file.to_str().unwrap(), "doctor", "--send-test"];
    let (ok, out) = run_in(dir.path(), &env, &args).await;
    assert!(!ok, "a gone subscription fails the check: {out}");
    for line in [
        "(ann, \"ann's phone\"): the push service answered 201 Created",
        "(ann, \"ann's old tablet\"): the push service answered 404 Not Found: the subscription is gone",
        "→ the server removes it at its next push to it; or remove it now (`imrelay devices remove ",
    ] {
        assert!(out.contains(line), "{line:?} in {out}");
    }
    let got = fake
        .one("the doctor's test notification", |p| {
            p["id"] == "doctor-test"
        })
        .await;
    assert_eq!(got["payload"]["title"], "imrelay doctor", "{got}");
    assert_eq!(got["claims"]["sub"], "mailto:ops@example.com", "{got}");
    assert_eq!(fake.received().len(), 1, "one device, one test");
    stop(server).await;
}
