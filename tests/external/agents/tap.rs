//! A recording reverse proxy on 127.0.0.1: put between a real agent and imrelay's `/mcp`, it
//! passes every request and response through unchanged (streams as they flow) and keeps a copy
//! of both, so a test can assert, and a fixture can hold, exactly what the agent sent and got.

use std::sync::{Arc, Mutex};

use axum::Router;
use axum::body::{Body, Bytes};
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use futures_util::StreamExt;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

/// One request and its response, as they went through.
#[derive(Clone, Debug, Default)]
pub(crate) struct Exchange {
    pub method: String,
    pub path: String,
    /// Request headers worth keeping (`mcp-*`, `accept`, `authorization`, `content-type`,
    /// `user-agent`, `last-event-id`).
    pub headers: Vec<(String, String)>,
    pub request: String,
    pub status: u16,
    pub content_type: String,
    /// The response body so far (an event stream grows while it is open).
    pub response: String,
}

impl Exchange {
    /// The request body as JSON (`Null` when it is not).
    pub(crate) fn request_json(&self) -> Value {
        serde_json::from_str(&self.request).unwrap_or(Value::Null)
    }

    /// The JSON-RPC messages of the response: the body itself, or each event's `data`.
    pub(crate) fn response_messages(&self) -> Vec<Value> {
        if self.content_type.starts_with("text/event-stream") {
            self.response
                .split("\n\n")
                .filter_map(|event| {
                    let data: Vec<&str> = event
                        .lines()
                        .filter_map(|l| l.strip_prefix("data:"))
                        .map(str::trim_start)
                        .collect();
                    serde_json::from_str(&data.join("\n")).ok()
                })
                .collect()
        } else {
            serde_json::from_str(&self.response).into_iter().collect()
        }
    }

    /// As a fixture: the request and response, JSON where they are JSON.
    pub(crate) fn to_json(&self) -> Value {
        json!({
            "request": {"method": self.method, "path": self.path, "headers": self.headers.iter().map(|(k, v)| json!([k, v])).collect::<Vec<_>>(), "body": serde_json::from_str::<Value>(&self.request).unwrap_or(Value::String(self.request.clone()))},
            "response": {"status": self.status, "content_type": self.content_type, "body": if self.content_type.starts_with("text/event-stream") { Value::String(self.response.clone()) } else { serde_json::from_str::<Value>(&self.response).unwrap_or(Value::String(self.response.clone())) }},
        })
    }
}

/// A running tap; stops when dropped.
pub(crate) struct Tap {
    pub addr: std::net::SocketAddr,
    log: Arc<Mutex<Vec<Exchange>>>,
    stop: CancellationToken,
}

impl Drop for Tap {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

impl Tap {
    /// Starts a tap forwarding to `upstream` (`http://127.0.0.1:port`), path and query kept.
    pub(crate) async fn start(upstream: String) -> Tap {
        let log: Arc<Mutex<Vec<Exchange>>> = Arc::default();
        let client = reqwest::Client::new();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind the tap");
        let addr = listener.local_addr().expect("its address");
        let app = Router::new().fallback({
            let log = log.clone();
            move |method: Method, uri: Uri, headers: HeaderMap, body: Bytes| {
                let (log, client, upstream) = (log.clone(), client.clone(), upstream.clone());
                async move { forward(&log, &client, &upstream, method, uri, headers, body).await }
            }
        });
        let stop = CancellationToken::new();
        let s = stop.clone();
        tokio::spawn(async move {
            let _ = axum::serve(listener, app)
                .with_graceful_shutdown(async move { s.cancelled().await })
                .await;
        });
        Tap { addr, log, stop }
    }

    /// `http://127.0.0.1:<port><path>`.
    pub(crate) fn url(&self, path: &str) -> String {
        format!("http://{}{}", self.addr, path)
    }

    /// Everything that went through so far.
    pub(crate) fn exchanges(&self) -> Vec<Exchange> {
        self.log.lock().expect("lock").clone()
    }

    /// Everything that went through, for failure messages.
    pub(crate) fn describe(&self) -> String {
        let mut out = String::from("--- MCP traffic (through the tap)\n");
        for e in self.exchanges() {
            out.push_str(&format!(
                "-> {} {} {}\n<- {} {} {}\n",
                e.method, e.path, e.request, e.status, e.content_type, e.response
            ));
        }
        out
    }

    /// The exchange whose request is the JSON-RPC `method` (the first one).
    pub(crate) fn find(&self, method: &str) -> Option<Exchange> {
        self.exchanges()
            .into_iter()
            .find(|e| e.request_json()["method"] == method)
    }
}

async fn forward(
    log: &Arc<Mutex<Vec<Exchange>>>,
    client: &reqwest::Client,
    upstream: &str,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let kept = |name: &str| {
        name.starts_with("mcp-")
            || matches!(
                name,
                "accept" | "authorization" | "content-type" | "user-agent" | "last-event-id"
            )
    };
    let index = {
        let mut log = log.lock().expect("lock");
        log.push(Exchange {
            method: method.to_string(),
            path: uri.to_string(),
            headers: headers
                .iter()
                .filter(|(k, _)| kept(k.as_str()))
                .map(|(k, v)| (k.to_string(), String::from_utf8_lossy(v.as_bytes()).into()))
                .collect(),
            request: String::from_utf8_lossy(&body).into_owned(),
            ..Exchange::default()
        });
        log.len() - 1
    };
    let mut req = client.request(method, format!("{upstream}{uri}"));
    for (k, v) in headers.iter() {
        if !matches!(k.as_str(), "host" | "content-length" | "connection") {
            req = req.header(k, v);
        }
    }
    let resp = match req.body(body).send().await {
        Ok(r) => r,
        Err(e) => return (StatusCode::BAD_GATEWAY, e.to_string()).into_response(),
    };
    let status = resp.status();
    let mut builder = Response::builder().status(status.as_u16());
    let mut content_type = String::new();
    for (k, v) in resp.headers() {
        if k == "content-type" {
            content_type = String::from_utf8_lossy(v.as_bytes()).into_owned();
        }
        if !matches!(
            k.as_str(),
            "content-length" | "transfer-encoding" | "connection"
        ) {
            builder = builder.header(k, v);
        }
    }
    {
        let mut log = log.lock().expect("lock");
        log[index].status = status.as_u16();
        log[index].content_type = content_type;
    }
    let log = log.clone();
    let stream = resp.bytes_stream().map(move |chunk| {
        if let Ok(bytes) = &chunk {
            log.lock().expect("lock")[index]
                .response
                .push_str(&String::from_utf8_lossy(bytes));
        }
        chunk
    });
    builder
        .body(Body::from_stream(stream))
        .unwrap_or_else(|e| (StatusCode::BAD_GATEWAY, e.to_string()).into_response())
}
