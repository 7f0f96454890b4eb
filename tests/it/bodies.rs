//! Request bodies: one that stalls or trickles is refused with `408` and its connection
//! closed; credentials in the headers are checked before a body is read (agent tokens, a
//! signed webhook answer's headers, Telegram's secret token). The clock is paused where the
//! server's body timers decide: tokio advances it whenever every task waits.

use std::time::Duration;

use imrelay::settings::Secret;
use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::support::{TestApp, spawn_with};

/// Longer than the body bounds these tests run with on a paused clock (virtual time there,
/// real time in the one test on a running clock): reaching it fails the test.
const BOUND: Duration = Duration::from_secs(120);

/// A request head for `path` declaring a `length`-byte JSON body, with `extra` headers.
fn head(path: &str, length: usize, extra: &str) -> String {
    format!(
        "POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n\
         Content-Length: {length}\r\n{extra}\r\n"
    )
}

/// The server's answer on `stream`, read until it closes the connection (within [`BOUND`]):
/// the status, the lowercased head and the JSON body.
async fn answer(stream: &mut TcpStream) -> (u16, String, Value) {
    let mut got = Vec::new();
    let read = tokio::time::timeout(BOUND, async {
        let mut buf = [0u8; 4096];
        loop {
            match stream.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => got.extend_from_slice(&buf[..n]),
            }
        }
    })
    .await;
    assert!(
        read.is_ok(),
        "the server neither answered nor closed within {BOUND:?}"
    );
    let text = String::from_utf8_lossy(&got).into_owned();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let status = head
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no status line in {text:?}"));
    let body = serde_json::from_str(body).unwrap_or(Value::Null);
    (status, head.to_ascii_lowercase(), body)
}

/// Opens a connection to `app` and sends `bytes` on it.
async fn send(app: &TestApp, bytes: &[u8]) -> TcpStream {
    let mut stream = TcpStream::connect(app.addr).await.expect("connect");
    stream.set_nodelay(true).expect("nodelay");
    stream.write_all(bytes).await.expect("write");
    stream
}

#[tokio::test(start_paused = true)]
async fn a_body_that_stalls_gets_408_and_its_connection_closed() {
    let app = spawn_with(|_| {}).await;
    // The issue's recipe: a 1 MB body declared, a few bytes sent, then nothing.
    let mut stream = send(&app, head("/v1/interactions", 1_048_576, "").as_bytes()).await;
    for _ in 0..10 {
        stream.write_all(b" ").await.expect("write");
    }
    let (status, head, body) = answer(&mut stream).await;
    assert_eq!(status, 408, "{head} {body}");
    assert_eq!(body["error"]["code"], "body_too_slow", "{body}");
    assert!(head.contains("\r\nconnection: close"), "{head}");
    assert!(
        app.registry.pending_count() == 0,
        "nothing was created from a partial body"
    );
}

#[tokio::test(start_paused = true)]
async fn a_body_that_keeps_up_but_never_ends_is_cut_at_the_body_timeout() {
    let app = spawn_with(|s| {
        s.server.body_timeout_secs = 20;
        s.server.body_min_bytes_per_sec = 100;
    })
    .await;
    let mut stream = send(&app, head("/v1/interactions", 1_048_576, "").as_bytes()).await;
    // 1,000 bytes a second (ten times the minimum rate) for longer than the timeout.
    let mut answered = None;
    for _ in 0..120 {
        let mut buf = [0u8; 1];
        tokio::select! {
            read = stream.peek(&mut buf) => {
                answered = Some(read.expect("peek"));
                break;
            }
            () = tokio::time::sleep(Duration::from_secs(1)) => {
                if stream.write_all(&[b' '; 1000]).await.is_err() {
                    break;
                }
            }
        }
    }
    assert!(answered.is_some(), "a body sent for 120 s was still read");
    let (status, head, body) = answer(&mut stream).await;
    assert_eq!(status, 408, "{head} {body}");
    assert_eq!(body["error"]["code"], "body_timeout", "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap_or("")
            .contains("within 20 seconds"),
        "{body}"
    );
}

#[tokio::test(start_paused = true)]
async fn a_body_sent_in_time_in_one_byte_packets_is_read_whole() {
    let app = spawn_with(|_| {}).await;
    let body = br#"{"tool_name":"Bash","input":{"command":"ls"},"id":"byte-by-byte"}"#;
    let mut stream = send(&app, head("/v1/interactions", body.len(), "").as_bytes()).await;
    for byte in body {
        stream.write_all(&[*byte]).await.expect("write");
        tokio::task::yield_now().await;
    }
    let mut got = [0u8; 12];
    tokio::time::timeout(BOUND, stream.read_exact(&mut got))
        .await
        .expect("answered")
        .expect("read");
    assert_eq!(&got, b"HTTP/1.1 201", "{}", String::from_utf8_lossy(&got));
}

#[tokio::test(start_paused = true)]
async fn a_declared_body_over_the_limit_is_refused_before_it_is_read() {
    let app = spawn_with(|_| {}).await;
    let mut stream = send(&app, head("/v1/interactions", 2 * 1_048_576, "").as_bytes()).await;
    let (status, head, body) = answer(&mut stream).await;
    assert_eq!(status, 413, "{head} {body}");
    assert_eq!(body["error"]["code"], "payload_too_large", "{body}");
    assert!(head.contains("\r\nconnection: close"), "{head}");
}

#[tokio::test(start_paused = true)]
async fn an_agent_token_is_checked_before_the_body_is_read() {
    let app = spawn_with(|s| {
        s.auth.agent_tokens = vec![Secret::new("agent-token-0123456789")];
        s.auth.operator_tokens = vec![imrelay::config::OperatorToken::new(
            "operator-token-0123456789",
        )];
    })
    .await;
    // No token, and a body that never comes: refused on the head alone.
    let mut stream = send(&app, head("/v1/interactions", 1_048_576, "").as_bytes()).await;
    let (status, _, body) = answer(&mut stream).await;
    assert_eq!(status, 401, "{body}");
    assert_eq!(body["error"]["code"], "unauthorized", "{body}");
}

fn webhook_target() -> imrelay::channels::webhook::WebhookSettings {
    imrelay::channels::webhook::WebhookSettings {
        name: "ticketing".into(),
        // Nothing is delivered in these tests: the target is never called.
        url: "http://127.0.0.1:9/hook".into(),
        secret: Secret::new("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"),
        events: vec![],
        sessions: vec![],
        agents: vec![],
        timeout_secs: 5,
        horizon_hours: 1,
    }
}

#[tokio::test(start_paused = true)]
async fn a_webhook_answer_without_well_formed_signature_headers_is_refused_unread() {
    let app = spawn_with(|s| s.webhooks = vec![webhook_target()]).await;
    let now = jiff::Timestamp::now().as_second();
    let path = "/v1/webhooks/ticketing/respond";
    let good_sig = format!("webhook-signature: v1,{}\r\n", "A".repeat(43) + "=");
    for (why, extra) in [
        ("no signature headers", String::new()),
        (
            "a signature that is not a v1 MAC",
            format!(
                "webhook-id: msg_1\r\nwebhook-timestamp: {now}\r\nwebhook-signature: v1,abc\r\n"
            ),
        ),
        (
            "a stale timestamp",
            format!(
                "webhook-id: msg_1\r\nwebhook-timestamp: {}\r\n{good_sig}",
                now - 3600
            ),
        ),
    ] {
        // 20,000 bytes declared, none sent: the headers alone get the refusal.
        let mut stream = send(&app, head(path, 20_000, &extra).as_bytes()).await;
        let (status, head, body) = answer(&mut stream).await;
        assert_eq!(status, 401, "{why}: {head} {body}");
        assert_eq!(body["error"]["code"], "invalid_signature", "{why}: {body}");
        assert!(head.contains("\r\nconnection: close"), "{why}: {head}");
    }
    // Well-formed headers: the body is read, within the same bounds as every other.
    let extra = format!("webhook-id: msg_2\r\nwebhook-timestamp: {now}\r\n{good_sig}");
    let mut stream = send(&app, head(path, 20_000, &extra).as_bytes()).await;
    stream.write_all(b"{").await.expect("write");
    let (status, _, body) = answer(&mut stream).await;
    assert_eq!(status, 408, "{body}");
    assert_eq!(body["error"]["code"], "body_too_slow", "{body}");
}

#[tokio::test]
async fn a_telegram_webhook_call_without_its_secret_is_refused_unread() {
    // Real time here (the fake Bot API has timers of its own), and no body bound before the
    // test's own: only a refusal on the head ends these requests.
    let (app, tg) = crate::telegram::start_with(imrelay::channels::telegram::Mode::Webhook, |s| {
        s.server.body_timeout_secs = 3600;
        s.server.body_min_bytes_per_sec = 0;
    })
    .await;
    tg.wait_n("setWebhook", 1).await;
    for extra in ["", "X-Telegram-Bot-Api-Secret-Token: wrong\r\n"] {
        let mut stream = send(&app, head("/telegram/webhook", 20_000, extra).as_bytes()).await;
        let (status, head, body) = answer(&mut stream).await;
        assert_eq!(status, 401, "{head} {body}");
        assert_eq!(body["error"]["code"], "unauthorized", "{body}");
    }
    app.stop().await;
}
