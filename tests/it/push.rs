//! A fake Web Push service on loopback for the parity suite: it takes what RFC 8030 § 5 says
//! a push service takes (`POST` to the subscription's endpoint with a `TTL` header), checks
//! the message encryption of RFC 8291 (`Content-Encoding: aes128gcm`, decrypted with the
//! subscription's own private key and auth secret through `web_push_native::decrypt`) and
//! the VAPID header of RFC 8292 § 3 (`Authorization: vapid t=<JWT>, k=<key>`, the JWT's `aud`
//! exactly the service's origin), and answers `201 Created` with a `Location`, as the RFC
//! does. What it received is kept, decrypted. (The same checks made by an implementation
//! nobody here wrote — Python's `http-ece` and `cryptography` — and the inbox's real service
//! worker in Chromium are in `tests/external/inbox/push.rs`.)

use std::sync::{Arc, Mutex};

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use imrelay::config::OperatorToken;
use imrelay::config::teams::PersonSettings;
use serde_json::{Value, json};
use web_push_native::p256;
use web_push_native::p256::elliptic_curve::sec1::ToEncodedPoint;

use crate::support::{TestApp, wait_until};

/// The operator token of the person whose devices are pushed to.
pub(crate) const ANN: &str = "ann-token-0123456789abcdef";
/// The administrator's token (creates interactions).
pub(crate) const ADMIN: &str = "admin-token-0123456789abcdef";

/// One subscription: what the browser keeps (its private key and auth secret).
struct Subscription {
    secret: p256::SecretKey,
    auth: [u8; 16],
}

impl Subscription {
    fn new(n: u8) -> Self {
        let mut bytes = [0x5a; 32];
        bytes[31] = n + 1;
        Subscription {
            secret: p256::SecretKey::from_slice(&bytes).expect("a valid P-256 scalar"),
            auth: [n + 7; 16],
        }
    }
}

#[derive(Default)]
struct Inner {
    received: Vec<Value>,
}

/// The fake push service.
#[derive(Clone)]
pub(crate) struct FakePush {
    origin: String,
    subs: Arc<Vec<Subscription>>,
    inner: Arc<Mutex<Inner>>,
}

/// Why a push is refused: the status and the reason, as the service's log would say.
fn refuse(status: StatusCode, why: String) -> Response {
    (status, why).into_response()
}

/// The JWT's claims, from `vapid t=<jwt>, k=<key>`.
fn vapid(headers: &HeaderMap) -> Result<(Value, String), String> {
    let auth = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .ok_or("no Authorization")?;
    let rest = auth
        .strip_prefix("vapid ")
        .ok_or_else(|| format!("not the vapid scheme: {auth}"))?;
    let mut t = None;
    let mut k = None;
    for part in rest.split(',') {
        match part.trim().split_once('=') {
            Some(("t", v)) => t = Some(v.to_string()),
            Some(("k", v)) => k = Some(v.to_string()),
            _ => return Err(format!("unknown vapid parameter in {auth}")),
        }
    }
    let (t, k) = (t.ok_or("no t=")?, k.ok_or("no k=")?);
    let parts: Vec<&str> = t.split('.').collect();
    if parts.len() != 3 {
        return Err("the JWT has not three parts".into());
    }
    let header: Value = serde_json::from_slice(
        &URL_SAFE_NO_PAD
            .decode(parts[0])
            .map_err(|e| format!("JWT header: {e}"))?,
    )
    .map_err(|e| format!("JWT header: {e}"))?;
    if header["alg"] != "ES256" {
        return Err(format!("JWT alg is not ES256: {header}"));
    }
    let claims: Value = serde_json::from_slice(
        &URL_SAFE_NO_PAD
            .decode(parts[1])
            .map_err(|e| format!("JWT claims: {e}"))?,
    )
    .map_err(|e| format!("JWT claims: {e}"))?;
    Ok((claims, k))
}

async fn receive(
    State(fake): State<FakePush>,
    Path(n): Path<usize>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let Some(sub) = fake.subs.get(n) else {
        return refuse(StatusCode::NOT_FOUND, "no such subscription".into());
    };
    if headers
        .get("content-encoding")
        .and_then(|v| v.to_str().ok())
        != Some("aes128gcm")
    {
        return refuse(
            StatusCode::BAD_REQUEST,
            "Content-Encoding is not aes128gcm".into(),
        );
    }
    let Some(ttl) = headers.get("ttl").and_then(|v| v.to_str().ok()) else {
        return refuse(StatusCode::BAD_REQUEST, "no TTL (RFC 8030 § 5.2)".into());
    };
    let (claims, key) = match vapid(&headers) {
        Ok(v) => v,
        Err(why) => return refuse(StatusCode::UNAUTHORIZED, why),
    };
    if claims["aud"] != json!(fake.origin) {
        return refuse(
            StatusCode::FORBIDDEN,
            format!("aud {} is not {}", claims["aud"], fake.origin),
        );
    }
    let auth = web_push_native::Auth::clone_from_slice(&sub.auth);
    let payload = match web_push_native::decrypt(body.to_vec(), &sub.secret, &auth) {
        Ok(p) => p,
        Err(e) => return refuse(StatusCode::BAD_REQUEST, format!("cannot decrypt: {e}")),
    };
    let payload: Value = match serde_json::from_slice(&payload) {
        Ok(v) => v,
        Err(e) => return refuse(StatusCode::BAD_REQUEST, format!("not JSON: {e}")),
    };
    fake.inner.lock().unwrap().received.push(json!({
        "sub": n, "ttl": ttl, "claims": claims, "vapid_key": key, "payload": payload,
    }));
    let location = format!("{}/message/{}", fake.origin, uuid::Uuid::now_v7().simple());
    (StatusCode::CREATED, [(header::LOCATION, location)]).into_response()
}

impl FakePush {
    /// The service on 127.0.0.1, with `n` subscriptions.
    pub(crate) async fn start(n: u8) -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let origin = format!("http://{}", listener.local_addr().unwrap());
        let fake = FakePush {
            origin,
            subs: Arc::new((0..n).map(Subscription::new).collect()),
            inner: Arc::default(),
        };
        let app = Router::new()
            .route("/push/{n}", post(receive))
            .with_state(fake.clone());
        tokio::spawn(async move { axum::serve(listener, app).await });
        fake
    }

    /// Subscription `n` as a browser's `PushSubscription.toJSON()` gives it, with a name.
    pub(crate) fn subscription(&self, n: usize, name: &str) -> Value {
        let s = &self.subs[n];
        let public = s.secret.public_key().as_affine().to_encoded_point(false);
        json!({
            "endpoint": format!("{}/push/{n}", self.origin),
            "keys": {"p256dh": URL_SAFE_NO_PAD.encode(public.as_bytes()),
                     "auth": URL_SAFE_NO_PAD.encode(s.auth)},
            "name": name,
        })
    }

    /// Every push taken, decrypted.
    pub(crate) fn received(&self) -> Vec<Value> {
        self.inner.lock().unwrap().received.clone()
    }

    /// Waits for the push whose payload `pick` accepts.
    pub(crate) async fn one(&self, what: &str, pick: impl Fn(&Value) -> bool) -> Value {
        let find = || self.received().into_iter().find(|r| pick(&r["payload"]));
        wait_until(what, || find().is_some()).await;
        find().unwrap()
    }
}

/// The server with `[push]` on and Ann's phone subscribed to `fake`'s first subscription.
pub(crate) async fn start(
    fake: &FakePush,
    f: impl FnOnce(&mut imrelay::config::Settings),
) -> TestApp {
    let mut app = crate::support::spawn_with(|s| {
        f(s);
        s.push.enabled = true;
        s.push.subject = "mailto:ops@example.com".into();
        s.outbox.retry_base_ms = 50;
        s.auth.operator_tokens = vec![
            OperatorToken::labelled(ANN, "ann-phone"),
            OperatorToken::new(ADMIN),
        ];
        s.people = vec![PersonSettings {
            name: "ann".into(),
            operator: vec!["ann-phone".into()],
            ..Default::default()
        }];
    })
    .await;
    app.token = Some(ANN.into());
    let (s, body) = app
        .post("/v1/push/devices", &fake.subscription(0, "ann's phone"))
        .await;
    assert_eq!(s, StatusCode::CREATED, "{body}");
    app.token = Some(ADMIN.into());
    app
}
