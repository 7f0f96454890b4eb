//! The web inbox: one self-contained page (HTML, script, stylesheet) compiled into the binary,
//! with no build step and no CDN. It follows `/v1/events`, lists pending interactions and
//! answers them through `/v1/interactions/{id}/respond` with `"via": "desktop"`.
//!
//! It is also an installable web app: a manifest (`/manifest.webmanifest`), icons, and a
//! service worker (`/sw.js`) that shows Web Push notifications and answers their actions;
//! `push.js` subscribes the device and lists the person's devices (the `push` channel's
//! endpoints).

use axum::http::header;
use axum::response::{IntoResponse, Response};

const HTML: &str = include_str!("inbox/index.html");
const SCRIPT: &str = include_str!("inbox/inbox.js");
const PASSKEYS: &str = include_str!("inbox/passkeys.js");
const STYLE: &str = include_str!("inbox/inbox.css");
const PUSH_SCRIPT: &str = include_str!("inbox/push.js");
const WORKER: &str = include_str!("inbox/sw.js");
const MANIFEST: &str = include_str!("inbox/manifest.webmanifest");
const ICON_192: &[u8] = include_bytes!("inbox/icon-192.png");
const ICON_512: &[u8] = include_bytes!("inbox/icon-512.png");
const ICON_MASKABLE: &[u8] = include_bytes!("inbox/icon-maskable-512.png");
const APPLE_TOUCH_ICON: &[u8] = include_bytes!("inbox/apple-touch-icon.png");

/// Only this page's own script and stylesheet run; it may talk only to this server.
const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; \
                   img-src 'self' data:; manifest-src 'self'; worker-src 'self'; base-uri 'none'; \
                   form-action 'none'; frame-ancestors 'none'";

fn asset(content_type: &'static str, body: impl IntoResponse) -> Response {
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

/// `GET /push.js`: the page's part for Web Push (subscribing, the devices).
pub(crate) async fn push_script() -> Response {
    asset("text/javascript; charset=utf-8", PUSH_SCRIPT)
}

/// `GET /sw.js`: the service worker (scope `/`).
pub(crate) async fn worker() -> Response {
    asset("text/javascript; charset=utf-8", WORKER)
}

/// `GET /manifest.webmanifest`
pub(crate) async fn manifest() -> Response {
    asset("application/manifest+json", MANIFEST)
}

/// `GET /icon-192.png`, `/icon-512.png`, `/icon-maskable-512.png`, `/apple-touch-icon.png`
pub(crate) async fn icon(uri: axum::http::Uri) -> Response {
    let png = match uri.path() {
        "/icon-192.png" => ICON_192,
        "/icon-512.png" => ICON_512,
        "/icon-maskable-512.png" => ICON_MASKABLE,
        _ => APPLE_TOUCH_ICON,
    };
    asset("image/png", png)
}

/// The paths of the icons.
pub(crate) const ICONS: [&str; 4] = [
    "/icon-192.png",
    "/icon-512.png",
    "/icon-maskable-512.png",
    "/apple-touch-icon.png",
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_page_builds_no_regular_expression_from_what_it_is_sent() {
        // An agent's `pattern` is checked by the server alone (in linear time): the browser's
        // backtracking engine would freeze the tab on a pattern like (a+)+$.
        assert!(!SCRIPT.contains("RegExp("), "inbox.js builds a RegExp");
        assert!(!PASSKEYS.contains("RegExp("), "passkeys.js builds a RegExp");
        assert!(!PUSH_SCRIPT.contains("RegExp("), "push.js builds a RegExp");
        assert!(!WORKER.contains("RegExp("), "sw.js builds a RegExp");
    }

    #[test]
    fn the_manifest_names_the_icons_served() {
        let m: serde_json::Value = serde_json::from_str(MANIFEST).unwrap();
        assert_eq!(m["start_url"], "/");
        for icon in m["icons"].as_array().unwrap() {
            assert!(ICONS.contains(&icon["src"].as_str().unwrap()), "{icon}");
        }
        for png in [ICON_192, ICON_512, ICON_MASKABLE, APPLE_TOUCH_ICON] {
            assert!(png.starts_with(b"\x89PNG"));
        }
    }
}
