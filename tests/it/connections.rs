//! Connection bounds: slow and idle clients are closed after the header timeout, requests
//! being answered (long-polls, event streams) are not, connections over the cap are refused
//! while health checks still answer, and one token's long-polls take its share of the
//! connections and no more, so operators keep theirs.

use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Empty};
use hyper::client::conn::http1::{Connection, SendRequest};
use hyper_util::rt::TokioIo;
use reqwest::StatusCode;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::support::{Sse, TestApp, eventually, spawn_with};

/// How long these tests let the server wait for a request head.
const HEADER_TIMEOUT_SECS: u64 = 1;

/// A bound for things that happen after the header timeout; reaching it fails the test.
const BOUND: Duration = Duration::from_secs(10);

async fn app_with_header_timeout() -> TestApp {
    spawn_with(|s| s.server.header_read_timeout_secs = HEADER_TIMEOUT_SECS).await
}

/// One HTTP/1.1 connection to `app`, driven in the background; the handle ends when the
/// server closes the connection.
async fn connect(
    app: &TestApp,
) -> (
    SendRequest<Empty<Bytes>>,
    tokio::task::JoinHandle<hyper::Result<()>>,
) {
    let stream = TcpStream::connect(app.addr).await.expect("connect");
    let (send, conn): (_, Connection<_, Empty<Bytes>>) =
        hyper::client::conn::http1::handshake(TokioIo::new(stream))
            .await
            .expect("handshake");
    (send, tokio::spawn(conn))
}

/// `GET path` on `send`: the status and the body as JSON.
async fn get_on(send: &mut SendRequest<Empty<Bytes>>, path: &str) -> (StatusCode, Value) {
    let req = hyper::Request::get(path)
        .header("host", "127.0.0.1")
        .body(Empty::new())
        .expect("request");
    let resp = send.send_request(req).await.expect("response");
    let status = StatusCode::from_u16(resp.status().as_u16()).expect("status");
    let body = resp.into_body().collect().await.expect("body").to_bytes();
    (status, serde_json::from_slice(&body).unwrap_or(Value::Null))
}

/// Reads `stream` until the server closes it, within [`BOUND`]: what it sent.
async fn read_until_closed(stream: &mut TcpStream) -> String {
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
        "the server did not close the connection within {BOUND:?}"
    );
    String::from_utf8_lossy(&got).into_owned()
}

/// Opens a connection that sends nothing, and waits until the server closes it at the
/// header timeout: by then the timeout has cut anything it would cut that began before.
async fn the_header_timeout_passes(app: &TestApp) {
    let mut idle = TcpStream::connect(app.addr).await.expect("connect");
    read_until_closed(&mut idle).await;
}

#[tokio::test]
async fn a_slow_loris_connection_is_closed_after_the_header_timeout() {
    let app = app_with_header_timeout().await;
    let mut stream = TcpStream::connect(app.addr).await.expect("connect");
    let head = b"GET /livez HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
    let mut buf = [0u8; 1024];
    let mut closed = false;
    // One byte every 100 ms, never finishing the head: a complete one would take 10 s.
    for byte in head.iter().take(100) {
        tokio::select! {
            read = stream.read(&mut buf) => {
                assert!(!matches!(read, Ok(n) if n > 0), "the server answered an unfinished head");
                closed = true;
                break;
            }
            () = tokio::time::sleep(Duration::from_millis(100)) => {
                if stream.write_all(&[*byte]).await.is_err() {
                    closed = true;
                    break;
                }
            }
        }
    }
    assert!(closed, "a head trickled in for 10 s was still being read");
    assert!(
        app.metrics()
            .await
            .contains("imrelay_http_header_timeouts_total 1"),
        "the timeout is counted"
    );
}

#[tokio::test]
async fn an_idle_keep_alive_connection_is_closed_after_the_header_timeout() {
    let app = app_with_header_timeout().await;
    let (mut send, conn) = connect(&app).await;
    let (status, body) = get_on(&mut send, "/livez").await;
    assert_eq!(status, StatusCode::OK, "{body}");
    // The connection was kept alive; nothing more is sent on it.
    let ended = tokio::time::timeout(BOUND, conn).await;
    assert!(
        ended.is_ok(),
        "an idle keep-alive connection stayed open for {BOUND:?}"
    );
}

#[tokio::test]
async fn a_long_poll_longer_than_the_header_timeout_completes() {
    let app = app_with_header_timeout().await;
    let id = app.create_bash("conn-poll", "ls").await;
    // A kept-alive connection: the wait is its second request.
    let (mut send, _conn) = connect(&app).await;
    assert_eq!(get_on(&mut send, "/livez").await.0, StatusCode::OK);
    let path = format!("/v1/interactions/{id}/wait?timeout_secs=30");
    let waiting = tokio::spawn(async move { get_on(&mut send, &path).await });
    the_header_timeout_passes(&app).await;
    assert!(!waiting.is_finished(), "the wait ended before the answer");
    let (status, _) = app.respond(&id, &json!({"decision": "allow"})).await;
    assert_eq!(status, StatusCode::OK);
    let (status, body) = tokio::time::timeout(BOUND, waiting)
        .await
        .expect("the wait returns")
        .expect("the wait task");
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["status"], "resolved", "{body}");
    assert_eq!(body["result"]["behavior"], "allow", "{body}");
}

#[tokio::test]
async fn an_event_stream_longer_than_the_header_timeout_stays_open() {
    let app = app_with_header_timeout().await;
    let mut sse = Sse::connect(&app, None).await;
    the_header_timeout_passes(&app).await;
    let id = app.create_bash("conn-sse", "ls").await;
    let event = sse.next().await;
    assert_eq!(event.event, "interaction.created");
    assert_eq!(event.data["id"], id.as_str());
}

#[tokio::test]
async fn connections_over_the_cap_are_refused_while_health_checks_answer() {
    let app = spawn_with(|s| {
        s.server.max_connections = 2;
        s.server.header_read_timeout_secs = 60;
    })
    .await;
    // Two idle connections take both slots (connections are accepted in order).
    let held = [
        TcpStream::connect(app.addr).await.expect("connect"),
        TcpStream::connect(app.addr).await.expect("connect"),
    ];

    let mut third = TcpStream::connect(app.addr).await.expect("connect");
    third
        .write_all(b"GET /v1/interactions HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        .await
        .expect("write");
    let answer = read_until_closed(&mut third).await;
    let (head, body) = answer.split_once("\r\n\r\n").expect("a response");
    let head = head.to_ascii_lowercase();
    assert!(head.starts_with("http/1.1 503"), "{answer}");
    assert!(head.contains("\r\nretry-after: 1"), "{answer}");
    assert!(head.contains("\r\nconnection: close"), "{answer}");
    assert!(
        head.contains("\r\ncontent-type: application/json"),
        "{answer}"
    );
    let body: Value = serde_json::from_str(body).expect("a JSON body");
    assert_eq!(body["error"]["code"], "too_many_connections", "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap_or("")
            .contains("(2)"),
        "{body}"
    );

    // Health checks still answer over the cap, each on a connection closed after it.
    for path in ["/livez", "/healthz"] {
        let resp = reqwest::Client::new()
            .get(app.url(path))
            .send()
            .await
            .expect("request");
        assert_eq!(resp.status(), StatusCode::OK, "{path}");
        assert_eq!(resp.headers()["connection"], "close", "{path}");
    }

    // Once the idle connections go, requests are served again.
    drop(held);
    eventually("a request is served once slots are free", || async {
        let resp = reqwest::Client::new()
            .get(app.url("/v1/interactions"))
            .send()
            .await
            .ok()?;
        (resp.status() == StatusCode::OK).then_some(())
    })
    .await;
}

const AGENT: &str = "agent-share-0123456789abcdef";
const OPERATOR: &str = "operator-share-0123456789abc";

/// `GET path` with `token` on a connection of its own: the status, the `Connection` header and
/// the body.
async fn get_alone(app: &TestApp, token: &str, path: &str) -> (StatusCode, String, Value) {
    let resp = reqwest::Client::new()
        .get(app.url(path))
        .bearer_auth(token)
        .send()
        .await
        .expect("request");
    let status = resp.status();
    let connection = resp
        .headers()
        .get("connection")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_string();
    let body = resp.json().await.unwrap_or(Value::Null);
    (status, connection, body)
}

#[tokio::test]
async fn one_tokens_long_polls_take_its_share_and_operators_keep_theirs() {
    let mut app = spawn_with(|s| {
        s.server.max_connections = 8;
        s.server.max_connections_per_token = 4;
        s.auth.agent_tokens = vec![imrelay::config::Secret::new(AGENT)];
        s.auth.operator_tokens = vec![imrelay::config::OperatorToken::new(OPERATOR)];
    })
    .await;
    app.token = Some(AGENT.into());
    let id = app.create_bash("share-1", "ls").await;
    // The agent opens as many long-polls as there are connections, each on its own.
    let path = format!("/v1/interactions/{id}/wait?timeout_secs=60");
    let polls: Vec<_> = (0..8)
        .map(|_| {
            let (url, path) = (app.url(""), path.clone());
            tokio::spawn(async move {
                let resp = reqwest::Client::new()
                    .get(format!("{url}{path}"))
                    .bearer_auth(AGENT)
                    .send()
                    .await
                    .expect("request");
                let status = resp.status();
                let headers = resp.headers().clone();
                (
                    status,
                    headers,
                    resp.json::<Value>().await.unwrap_or(Value::Null),
                )
            })
        })
        .collect();
    // Four of them are refused at once, and say why; four are held. (A burst of nine
    // connections with the client's pooled one: one may find the cap taken by refused ones
    // still closing, and get the server's own `503`.)
    eventually("the refused polls are answered", || async {
        (polls.iter().filter(|p| p.is_finished()).count() == 4).then_some(())
    })
    .await;
    let (done, waiting): (Vec<_>, Vec<_>) = polls.into_iter().partition(|p| p.is_finished());
    let mut refused = Vec::new();
    for poll in done {
        refused.push(poll.await.expect("the poll task"));
    }
    assert_eq!(refused.len(), 4, "{refused:?}");
    let over_cap = refused
        .iter()
        .filter(|(status, _, body)| {
            *status == StatusCode::SERVICE_UNAVAILABLE
                && body["error"]["code"] == "too_many_connections"
        })
        .count();
    assert!(over_cap <= 1, "{refused:?}");
    for (status, headers, body) in &refused {
        if *status == StatusCode::SERVICE_UNAVAILABLE {
            continue;
        }
        assert_eq!(*status, StatusCode::TOO_MANY_REQUESTS, "{body}");
        assert_eq!(body["error"]["code"], "connection_quota", "{body}");
        assert!(
            body["error"]["message"]
                .as_str()
                .unwrap_or_default()
                .contains("server.max_connections_per_token"),
            "{body}"
        );
        assert_eq!(headers["retry-after"], "1");
        assert_eq!(headers["connection"], "close");
    }
    // Meanwhile operators list and answer: the rest of the connections are theirs.
    for _ in 0..3 {
        let (status, _, body) = get_alone(&app, OPERATOR, "/v1/interactions?status=pending").await;
        assert_eq!(status, StatusCode::OK, "{body}");
        assert_eq!(
            body["interactions"].as_array().map(Vec::len),
            Some(1),
            "{body}"
        );
    }
    app.metrics_with(&format!(
        "imrelay_http_token_connections_refused_total {}\n",
        4 - over_cap
    ))
    .await;
    // A fifth request of the agent's is refused while four wait; another token's is not.
    let (status, connection, body) =
        get_alone(&app, AGENT, &format!("/v1/interactions/{id}")).await;
    assert_eq!(status, StatusCode::TOO_MANY_REQUESTS, "{body}");
    assert_eq!(connection, "close");
    let (status, _, _) = get_alone(&app, OPERATOR, &format!("/v1/interactions/{id}")).await;
    assert_eq!(status, StatusCode::OK);
    app.token = Some(OPERATOR.into());
    let (status, body) = app.respond(&id, &json!({"decision": "allow"})).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    // The four that waited get the answer, and their places are free again.
    for poll in waiting {
        let (status, _, body) = tokio::time::timeout(BOUND, poll)
            .await
            .expect("the poll returns")
            .expect("the poll task");
        assert_eq!(status, StatusCode::OK, "{body}");
        assert_eq!(body["status"], "resolved", "{body}");
    }
    eventually("the agent's share is free again", || async {
        let (status, _, _) = get_alone(&app, AGENT, &format!("/v1/interactions/{id}")).await;
        (status == StatusCode::OK).then_some(())
    })
    .await;
}
