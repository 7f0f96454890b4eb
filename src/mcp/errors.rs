//! JSON-RPC error bodies for what the transport refuses before a message reaches the server.
//!
//! rmcp answers a body that is not JSON-RPC with `415` and a line of plain text, and its other
//! refusals (no session, an unknown session, a missing `Accept`) with plain text too. Clients
//! read JSON-RPC: a body that does not parse is refused here with `400` and a parse error
//! (`-32700`), one that is not a JSON-RPC message with `400` and an invalid request
//! (`-32600`), and every other plain-text refusal keeps its status with its text in a
//! JSON-RPC error, as the Streamable HTTP transport allows (an error response without an id).

use axum::body::{Body, Bytes};
use axum::extract::Request;
use axum::http::{HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use rmcp::model::ClientJsonRpcMessage;
use serde_json::{Value, json};

/// JSON-RPC's parse error.
const PARSE_ERROR: i64 = -32700;
/// JSON-RPC's invalid request.
const INVALID_REQUEST: i64 = -32600;
/// Longest refusal text from the transport that is kept.
const MAX_TEXT: usize = 64 * 1024;

/// A JSON-RPC error response with `status`.
fn rpc_error(status: StatusCode, id: Value, code: i64, message: String) -> Response {
    (
        status,
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        )],
        json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}})
            .to_string(),
    )
        .into_response()
}

/// The refusal of `body`, if it is not a JSON-RPC message the server reads.
fn refusal(body: &[u8]) -> Option<Response> {
    let Err(e) = serde_json::from_slice::<ClientJsonRpcMessage>(body) else {
        return None;
    };
    let parsed: Result<Value, _> = serde_json::from_slice(body);
    let Ok(value) = parsed else {
        return Some(rpc_error(
            StatusCode::BAD_REQUEST,
            Value::Null,
            PARSE_ERROR,
            format!("Parse error: the body is not JSON ({e})"),
        ));
    };
    // Echo the request's id when it has a usable one.
    let id = match value.get("id") {
        Some(id @ (Value::String(_) | Value::Number(_))) => id.clone(),
        _ => Value::Null,
    };
    let why = if value.is_array() {
        "batches are not supported: send one message per request".to_string()
    } else {
        format!("not a JSON-RPC 2.0 request, notification or response ({e})")
    };
    Some(rpc_error(
        StatusCode::BAD_REQUEST,
        id,
        INVALID_REQUEST,
        format!("Invalid Request: {why}"),
    ))
}

/// The refusal of a body that was not read (too large, too slow, cut off): its HTTP status,
/// the JSON-RPC invalid request, and `Connection: close` (the rest of it was never read).
fn unread_body(e: &crate::wire::body::BodyError) -> Response {
    let mut resp = rpc_error(e.status(), Value::Null, INVALID_REQUEST, e.to_string());
    resp.headers_mut()
        .insert(header::CONNECTION, HeaderValue::from_static("close"));
    resp
}

fn is_json(req: &Request) -> bool {
    req.headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.trim_start().starts_with("application/json"))
}

/// Middleware on `/mcp`: refuses bodies that are not JSON-RPC with JSON-RPC errors, and puts
/// the transport's plain-text refusals into JSON-RPC errors. `max_body` bounds what it reads.
pub(crate) async fn json_rpc_errors(max_body: usize, req: Request, next: Next) -> Response {
    let req = if req.method() == Method::POST && is_json(&req) {
        let (parts, body) = req.into_parts();
        let bytes = match crate::wire::body::read(&parts.headers, &parts.extensions, body, max_body)
            .await
        {
            Ok(bytes) => bytes,
            Err(e) => return unread_body(&e),
        };
        if let Some(refused) = refusal(&bytes) {
            return refused;
        }
        Request::from_parts(parts, Body::from(bytes))
    } else {
        req
    };
    let resp = next.run(req).await;
    if resp.status().is_success() || resp.headers().contains_key(header::CONTENT_TYPE) {
        return resp;
    }
    let (parts, body) = resp.into_parts();
    let text = axum::body::to_bytes(body, MAX_TEXT)
        .await
        .unwrap_or_else(|_| Bytes::from_static(b"refused"));
    let message = String::from_utf8_lossy(&text).trim().to_string();
    let mut rewritten = rpc_error(parts.status, Value::Null, INVALID_REQUEST, message);
    // Keep what the transport says about the refusal (`Allow` on a 405).
    for (name, value) in &parts.headers {
        if name != header::CONTENT_LENGTH && name != header::CONTENT_TYPE {
            rewritten.headers_mut().insert(name, value.clone());
        }
    }
    rewritten
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn body_of(r: Response) -> Value {
        let bytes = axum::body::to_bytes(r.into_body(), 4096).await.unwrap();
        serde_json::from_slice(&bytes).unwrap()
    }

    #[tokio::test]
    async fn bodies_that_are_not_json_rpc_get_the_matching_error() {
        assert!(refusal(br#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#).is_none());
        assert!(refusal(br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#).is_none());
        for (body, code, id) in [
            (&b"{not json"[..], PARSE_ERROR, Value::Null),
            (b"", PARSE_ERROR, Value::Null),
            (b"[]", INVALID_REQUEST, Value::Null),
            (br#"{"jsonrpc":"2.0"}"#, INVALID_REQUEST, Value::Null),
            (
                br#"{"jsonrpc":"2.0","id":7,"method":3}"#,
                INVALID_REQUEST,
                json!(7),
            ),
            (
                br#"{"jsonrpc":"1.0","id":"a","method":"x"}"#,
                INVALID_REQUEST,
                json!("a"),
            ),
        ] {
            let r = refusal(body).unwrap();
            assert_eq!(r.status(), StatusCode::BAD_REQUEST);
            let v = body_of(r).await;
            assert_eq!(
                v["error"]["code"],
                code,
                "{}",
                String::from_utf8_lossy(body)
            );
            assert_eq!(v["id"], id);
            assert_eq!(v["jsonrpc"], "2.0");
        }
    }
}
