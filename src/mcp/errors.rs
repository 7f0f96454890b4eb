//! JSON-RPC error bodies for what is refused before a message reaches the server.
//!
//! rmcp answers a body that is not JSON-RPC with `415` and a line of plain text, and its other
//! refusals (no session, an unknown session, a missing `Accept`) with plain text too. Clients
//! read JSON-RPC: a body that does not parse is refused here with `400` and a parse error
//! (`-32700`), one that is not a JSON-RPC message with `400` and an invalid request
//! (`-32600`), and every other plain-text refusal keeps its status with its text in a
//! JSON-RPC error, as the Streamable HTTP transport allows (an error response without an id).
//! imrelay's own refusals (a limit reached) are server errors (`-32000`) that say what to do.

use axum::body::{Body, Bytes};
use axum::extract::Request;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use rmcp::model::ClientJsonRpcMessage;
use serde_json::{Value, json};

/// JSON-RPC's parse error.
const PARSE_ERROR: i64 = -32700;
/// JSON-RPC's invalid request.
pub(crate) const INVALID_REQUEST: i64 = -32600;
/// JSON-RPC's first implementation-defined server error: a limit of imrelay's was reached.
pub(crate) const LIMIT_REACHED: i64 = -32000;
/// Longest refusal text from the transport that is kept.
const MAX_TEXT: usize = 64 * 1024;

/// A JSON-RPC error response with `status`.
pub(crate) fn rpc_error(status: StatusCode, id: Value, code: i64, message: String) -> Response {
    rpc_error_with(status, id, code, message, None)
}

/// A JSON-RPC error response with `status`, and `data` in the error when given.
pub(crate) fn rpc_error_with(
    status: StatusCode,
    id: Value,
    code: i64,
    message: String,
    data: Option<Value>,
) -> Response {
    let mut error = json!({"code": code, "message": message});
    if let Some(data) = data {
        error["data"] = data;
    }
    (
        status,
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        )],
        json!({"jsonrpc": "2.0", "id": id, "error": error}).to_string(),
    )
        .into_response()
}

/// `body` as the JSON-RPC message the server reads, or its refusal.
pub(crate) fn read(body: &[u8]) -> Result<ClientJsonRpcMessage, Box<Response>> {
    serde_json::from_slice::<ClientJsonRpcMessage>(body).map_err(|e| Box::new(refusal(body, &e)))
}

/// The refusal of `body`, which is not a JSON-RPC message the server reads (`e` says why).
fn refusal(body: &[u8], e: &serde_json::Error) -> Response {
    let parsed: Result<Value, _> = serde_json::from_slice(body);
    let Ok(value) = parsed else {
        return rpc_error(
            StatusCode::BAD_REQUEST,
            Value::Null,
            PARSE_ERROR,
            format!("Parse error: the body is not JSON ({e})"),
        );
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
    rpc_error(
        StatusCode::BAD_REQUEST,
        id,
        INVALID_REQUEST,
        format!("Invalid Request: {why}"),
    )
}

/// The refusal of a body that was not read (too large, too slow, cut off): its HTTP status,
/// the JSON-RPC invalid request, and `Connection: close` (the rest of it was never read).
fn unread_body(e: &crate::wire::body::BodyError) -> Response {
    let mut resp = rpc_error(e.status(), Value::Null, INVALID_REQUEST, e.to_string());
    resp.headers_mut()
        .insert(header::CONNECTION, HeaderValue::from_static("close"));
    resp
}

/// Whether `req` carries JSON.
pub(crate) fn is_json(req: &Request) -> bool {
    req.headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.trim_start().starts_with("application/json"))
}

/// The body of `req` as a JSON-RPC message, at most `max_body` bytes, or its refusal.
pub(crate) async fn read_body(
    req: Request,
    max_body: usize,
) -> Result<(Request, ClientJsonRpcMessage), Box<Response>> {
    let (parts, body) = req.into_parts();
    let bytes =
        match crate::wire::body::read(&parts.headers, &parts.extensions, body, max_body).await {
            Ok(bytes) => bytes,
            Err(e) => return Err(Box::new(unread_body(&e))),
        };
    let message = read(&bytes)?;
    Ok((Request::from_parts(parts, Body::from(bytes)), message))
}

/// `resp` with a plain-text refusal of the transport's put into a JSON-RPC error (its status
/// and headers kept).
pub(crate) async fn as_json_rpc(resp: Response) -> Response {
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
        assert!(read(br#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#).is_ok());
        assert!(read(br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#).is_ok());
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
            let r = *read(body).unwrap_err();
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
