//! A fake ntfy server on loopback that checks each publish against the JSON format of ntfy's
//! docs (<https://docs.ntfy.sh/publish/#publish-as-json>: fields, types, the auth header) and
//! records what it took: shared by the ntfy channel's tests (`tests/it/ntfy.rs`) and the
//! phone's Chromium tests (`tests/external/inbox/phone.rs`).

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode as AxumStatus};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use serde_json::Value;

use crate::support::eventually;

/// A fake ntfy server: records each publish, refuses (400) one not in ntfy's format or
/// without the expected `Authorization`.
#[derive(Clone)]
pub(crate) struct FakeNtfy {
    auth: String,
    pub(crate) got: Arc<Mutex<Vec<Value>>>,
    refused: Arc<Mutex<Vec<String>>>,
    /// Statuses to answer well-formed publishes with before accepting them (a `429` says
    /// `Retry-After: 0`).
    pub(crate) failures: Arc<Mutex<VecDeque<u16>>>,
}

/// What is wrong with `body` as ntfy's "publish as JSON" takes it.
fn format_mistakes(body: &Value) -> Vec<String> {
    let mut out = Vec::new();
    let Some(o) = body.as_object() else {
        return vec!["not a JSON object".into()];
    };
    let known = [
        "topic",
        "title",
        "message",
        "priority",
        "tags",
        "click",
        "actions",
        "sequence_id",
    ];
    for k in o.keys().filter(|k| !known.contains(&k.as_str())) {
        out.push(format!("unexpected field {k}"));
    }
    for k in ["topic", "title", "message"] {
        if !o.get(k).is_some_and(Value::is_string) {
            out.push(format!("{k} is not a string"));
        }
    }
    for k in ["click", "sequence_id"] {
        if o.get(k).is_some_and(|v| !v.is_string()) {
            out.push(format!("{k} is not a string"));
        }
    }
    if !o
        .get("priority")
        .and_then(Value::as_u64)
        .is_some_and(|p| (1..=5).contains(&p))
    {
        out.push("priority is not an integer 1 to 5".into());
    }
    if !o
        .get("tags")
        .and_then(Value::as_array)
        .is_some_and(|t| t.iter().all(Value::is_string))
    {
        out.push("tags is not a list of strings".into());
    }
    for a in o
        .get("actions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        // ntfy's `http` action (a request the app makes) and `view` action (a page it
        // opens): <https://docs.ntfy.sh/publish/#action-buttons>.
        let common = a["label"].is_string()
            && a["url"].as_str().is_some_and(|u| u.starts_with("http"))
            && a["clear"].is_boolean();
        let ok = match a["action"].as_str() {
            Some("http") => common && a["method"] == "POST",
            Some("view") => common && a.get("method").is_none(),
            _ => false,
        };
        if !ok {
            out.push(format!("action {a} is not an http or a view action"));
        }
    }
    if o.get("actions")
        .is_some_and(|a| a.as_array().is_none_or(|a| a.len() > 3))
    {
        out.push("actions is not a list of at most 3".into());
    }
    out
}

async fn publish(State(f): State<FakeNtfy>, headers: HeaderMap, body: String) -> Response {
    let status = check(&f, &headers, &body);
    if status == AxumStatus::OK
        && let Some(code) = f.failures.lock().unwrap().pop_front()
    {
        let code = AxumStatus::from_u16(code).unwrap();
        return (code, [("retry-after", "0")]).into_response();
    }
    if status == AxumStatus::OK {
        f.got
            .lock()
            .unwrap()
            .push(serde_json::from_str(&body).unwrap());
    }
    status.into_response()
}

/// Whether a publish is authorized and in ntfy's format.
fn check(f: &FakeNtfy, headers: &HeaderMap, body: &str) -> AxumStatus {
    let auth = headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    if auth != f.auth {
        f.refused
            .lock()
            .unwrap()
            .push(format!("authorization {auth:?}"));
        return AxumStatus::UNAUTHORIZED;
    }
    let Ok(body) = serde_json::from_str::<Value>(body) else {
        f.refused.lock().unwrap().push("not JSON".into());
        return AxumStatus::BAD_REQUEST;
    };
    let mistakes = format_mistakes(&body);
    if !mistakes.is_empty() {
        f.refused.lock().unwrap().extend(mistakes);
        return AxumStatus::BAD_REQUEST;
    }
    AxumStatus::OK
}

impl FakeNtfy {
    pub(crate) async fn start(auth: &str) -> (FakeNtfy, String) {
        let f = FakeNtfy {
            auth: auth.into(),
            got: Arc::default(),
            refused: Arc::default(),
            failures: Arc::default(),
        };
        let app = Router::new()
            .route("/", post(publish))
            .route(
                "/v1/health",
                axum::routing::get(|| async { axum::Json(serde_json::json!({"healthy": true})) }),
            )
            .with_state(f.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        (f, url)
    }

    /// The `n`th publish, once there is one.
    pub(crate) async fn nth(&self, n: usize) -> Value {
        eventually(&format!("publish #{n}"), || {
            let got = self.got.lock().unwrap().get(n).cloned();
            async move { got }
        })
        .await
    }

    /// Every publish so far.
    pub(crate) fn published(&self) -> Vec<Value> {
        self.got.lock().unwrap().clone()
    }

    /// What was refused, and why.
    pub(crate) fn refused(&self) -> Vec<String> {
        self.refused.lock().unwrap().clone()
    }
}
