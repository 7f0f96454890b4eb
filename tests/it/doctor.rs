//! `imrelay doctor`: the real binary checks a configuration against fakes of Telegram, Feishu
//! and a webhook receiver, healthy and broken.

use std::sync::{Arc, Mutex};

use axum::Router;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::routing::post;

use crate::feishu::fake::{self as feishu_fake, FakeFeishu};
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

/// Runs `imrelay doctor ARGS` with `config` (TOML) in a fresh data directory.
async fn doctor(config: String, args: &[&str]) -> (bool, String) {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("imrelay.toml");
    std::fs::write(&file, config).unwrap();
    let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_imrelay"));
    cmd.arg("--config")
        .arg(&file)
        .arg("doctor")
        .args(args)
        .env("IMRELAY__STORE__PATH", dir.path().join("imrelay.db"));
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
        "✓ store (sqlite) opens and takes writes",
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
        ("✗ Telegram: getMe failed", "→ check telegram.token"),
        (
            "✗ Feishu: no token for the app credentials",
            "→ check feishu.app_id",
        ),
        ("✗ webhook oncall: ", "→ the receiver must answer 2xx"),
    ] {
        assert!(out.contains(line), "{line:?} in:\n{out}");
        assert!(out.contains(fix), "{fix:?} in:\n{out}");
    }
    assert!(out.contains("checks failed"), "{out}");
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
