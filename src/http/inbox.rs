//! The web inbox: one self-contained page (HTML, script, stylesheet) compiled into the binary,
//! with no build step and no CDN. It follows `/v1/events`, lists pending interactions and
//! answers them through `/v1/interactions/{id}/respond` with `"via": "desktop"`.

use axum::http::header;
use axum::response::{IntoResponse, Response};

const HTML: &str = include_str!("inbox/index.html");
const SCRIPT: &str = include_str!("inbox/inbox.js");
const PASSKEYS: &str = include_str!("inbox/passkeys.js");
const STYLE: &str = include_str!("inbox/inbox.css");

/// Only this page's own script and stylesheet run; it may talk only to this server.
const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; \
                   img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

fn asset(content_type: &'static str, body: &'static str) -> Response {
    (
        [
            (header::CONTENT_TYPE, content_type),
            (header::CONTENT_SECURITY_POLICY, CSP),
            (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
            (header::REFERRER_POLICY, "no-referrer"),
            (header::CACHE_CONTROL, "no-cache"),
        ],
        body,
    )
        .into_response()
}

/// `GET /`
pub async fn page() -> Response {
    asset("text/html; charset=utf-8", HTML)
}

/// `GET /inbox.js`
pub async fn script() -> Response {
    asset("text/javascript; charset=utf-8", SCRIPT)
}

/// `GET /passkeys.js`: passkeys and presence ("desk first").
pub async fn passkeys_script() -> Response {
    asset("text/javascript; charset=utf-8", PASSKEYS)
}

/// `GET /inbox.css`
pub(crate) async fn style() -> Response {
    asset("text/css; charset=utf-8", STYLE)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_page_builds_no_regular_expression_from_what_it_is_sent() {
        // An agent's `pattern` is checked by the server alone (in linear time): the browser's
        // backtracking engine would freeze the tab on a pattern like (a+)+$.
        assert!(!SCRIPT.contains("RegExp("), "inbox.js builds a RegExp");
        assert!(!PASSKEYS.contains("RegExp("), "passkeys.js builds a RegExp");
    }
}
