//! Web Push checked against an implementation nobody here wrote: a fake push service on
//! loopback (tests/external/push/fake_push.py) that decrypts every payload with the
//! subscription's own keys using Python's `http-ece`, and verifies the VAPID JWT with
//! `cryptography` (`aud` exactly its origin, port included). Then the inbox's real service
//! worker in headless Chromium: offline, `pushManager.subscribe()` never resolves (it needs the
//! browser vendor's push service), so the test registers the fake's subscription keys through
//! imrelay's API and hands each decrypted payload to the worker with the DevTools protocol
//! (`ServiceWorker.deliverPushMessage`); the worker's notification and its Approve action
//! resolve the interaction.
//!
//! Needs python3 with venv (tests/external/push/install.sh installs the pinned packages into
//! `target/pyenv`; `.ci/run` calls it first). Without it these tests are reported as ignored,
//! unless `IMRELAY_TEST_PUSH=require`, which makes that a failure.

use std::io::{BufRead, BufReader};
use std::sync::OnceLock;

use imrelay::config::OperatorToken;
use imrelay::config::teams::PersonSettings;

use super::*;

const ANN: &str = "ann-token-0123456789abcdef";
const BOB: &str = "bob-token-0123456789abcdef";
const ADMIN: &str = "admin-token-0123456789abcdef";

fn target_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target"))
}

/// Installs the Python packages once: `Ok` with the interpreter, or why not.
fn python() -> Result<PathBuf, String> {
    static READY: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    READY
        .get_or_init(|| {
            let script =
                PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/external/push/install.sh");
            let out = Command::new("bash")
                .arg(&script)
                .arg("--target")
                .arg(target_dir())
                .output()
                .map_err(|e| format!("cannot run {}: {e}", script.display()))?;
            if out.status.success() {
                Ok(target_dir().join("pyenv/bin/python"))
            } else {
                Err(String::from_utf8_lossy(&out.stderr).trim().to_string())
            }
        })
        .clone()
}

/// The need of the tests that use the fake push service.
pub(super) fn fake_push_service() -> Need {
    match python() {
        Ok(_) => Need::Here,
        Err(why) if std::env::var("IMRELAY_TEST_PUSH").as_deref() == Ok("require") => {
            Need::Required(format!(
                "IMRELAY_TEST_PUSH=require, and the fake push service cannot run: {why}"
            ))
        }
        Err(why) => Need::Missing(format!("no Python for the fake push service: {why}")),
    }
}

/// The need of the tests that also drive Chromium.
pub(super) fn fake_push_service_and_browser() -> Need {
    match (fake_push_service(), browser()) {
        (Need::Here, b) => b,
        (other, _) => other,
    }
}

/// The fake push service, stopped when dropped (its standard input closes).
pub(super) struct FakePush {
    child: Child,
    origin: String,
    subscriptions: Vec<Value>,
    client: reqwest::Client,
}

impl Drop for FakePush {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl FakePush {
    pub(super) fn start(n: usize) -> FakePush {
        let python = python().expect("checked before the test");
        let script =
            PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/external/push/fake_push.py");
        let mut child = Command::new(python)
            .arg(script)
            .arg(n.to_string())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("the fake push service starts");
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .expect("the fake says where it listens");
        let v: Value = serde_json::from_str(&line).expect("one JSON line");
        FakePush {
            child,
            origin: format!("http://127.0.0.1:{}", v["port"]),
            subscriptions: v["subscriptions"].as_array().unwrap().clone(),
            client: reqwest::Client::new(),
        }
    }

    /// The subscription `n` as a browser's `PushSubscription.toJSON()` gives it, with a name.
    pub(super) fn subscription(&self, n: usize, name: &str) -> Value {
        let s = &self.subscriptions[n];
        json!({"endpoint": s["endpoint"], "keys": s["keys"], "name": name})
    }

    pub(super) async fn received(&self) -> Vec<Value> {
        let r = self
            .client
            .get(format!("{}/received", self.origin))
            .send()
            .await
            .unwrap();
        r.json::<Value>().await.unwrap().as_array().unwrap().clone()
    }

    /// Waits until the fake holds a push that `pick` accepts, and returns it.
    async fn one(&self, what: &str, pick: impl Fn(&Value) -> bool) -> Value {
        eventually(what, || async {
            self.received().await.into_iter().find(|r| pick(r))
        })
        .await
    }

    async fn answer_next(&self, sub: usize, statuses: &[u16]) {
        let r = self
            .client
            .post(format!("{}/control", self.origin))
            .json(&json!({"sub": sub, "statuses": statuses}))
            .send()
            .await
            .unwrap();
        assert!(r.status().is_success());
    }
}

async fn push_app() -> TestApp {
    push_app_with(|_| {}).await
}

/// [`push_app`], changed by `f`.
async fn push_app_with(f: impl FnOnce(&mut imrelay::config::Settings)) -> TestApp {
    spawn_with(|s| {
        s.push.enabled = true;
        s.push.subject = "mailto:ops@example.com".into();
        s.outbox.retry_base_ms = 50;
        s.auth.operator_tokens = vec![
            OperatorToken::labelled(ANN, "ann-phone"),
            OperatorToken::labelled(BOB, "bob-laptop"),
            OperatorToken::new(ADMIN),
        ];
        s.people = vec![
            PersonSettings {
                name: "ann".into(),
                operator: vec!["ann-phone".into()],
                ..Default::default()
            },
            PersonSettings {
                name: "bob".into(),
                operator: vec!["bob-laptop".into()],
                ..Default::default()
            },
        ];
        f(s);
    })
    .await
}

/// `POST`s `body` to `path` with operator token `token`.
async fn post_as(app: &TestApp, token: &str, path: &str, body: &Value) -> (StatusCode, Value) {
    split(
        app.client
            .post(app.url(path))
            .bearer_auth(token)
            .json(body)
            .send()
            .await
            .unwrap(),
    )
    .await
}

async fn get_as(app: &TestApp, token: &str, path: &str) -> (StatusCode, Value) {
    split(
        app.client
            .get(app.url(path))
            .bearer_auth(token)
            .send()
            .await
            .unwrap(),
    )
    .await
}

/// Creates approval `id` running `command` (with the administrator's token).
async fn create(app: &TestApp, id: &str, command: &str) {
    let (status, body) = post_as(
        app,
        ADMIN,
        "/v1/interactions",
        &json!({"id": id, "tool_name": "Bash", "agent": "claude-code", "input": {"command": command}, "timeout_secs": 600}),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
}

pub(super) async fn every_push_decrypts_with_the_devices_keys_and_carries_a_valid_vapid_jwt() {
    let fake = FakePush::start(3);
    let mut app = push_app().await;
    app.token = Some(ADMIN.into());

    // A device belongs to one person: the administrator's token cannot subscribe one, and a
    // subscription that is not a browser's is refused field by field.
    let (status, body) = post_as(&app, ADMIN, "/v1/push/devices", &fake.subscription(0, "x")).await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (StatusCode::BAD_REQUEST, Some("needs_a_person")),
        "{body}"
    );
    let mut bad = fake.subscription(0, "x");
    bad["keys"]["p256dh"] = json!("AAAA");
    let (status, body) = post_as(&app, ANN, "/v1/push/devices", &bad).await;
    assert_eq!(
        (status, body["error"]["field"].as_str()),
        (StatusCode::BAD_REQUEST, Some("keys.p256dh")),
        "{body}"
    );

    // Ann subscribes two devices, Bob one.
    for (n, token, name) in [
        (0, ANN, "ann's phone"),
        (1, ANN, "ann's tablet"),
        (2, BOB, "bob's laptop"),
    ] {
        let (status, body) =
            post_as(&app, token, "/v1/push/devices", &fake.subscription(n, name)).await;
        assert_eq!(status, StatusCode::CREATED, "{body}");
    }
    let (_, mine) = get_as(&app, ANN, "/v1/push").await;
    assert_eq!(mine["person"], "ann");
    let names: Vec<&str> = mine["devices"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["ann's phone", "ann's tablet"]);
    let key = mine["public_key"].as_str().unwrap().to_string();

    // The tablet's subscription is gone (410) and the phone's service is briefly down (503).
    fake.answer_next(1, &[410]).await;
    fake.answer_next(0, &[503]).await;
    create(&app, "push-1", "cargo publish --dry-run").await;
    let ok = fake
        .one("the phone's push after the retry", |r| {
            r["sub"] == 0 && r["status"] == 201
        })
        .await;
    app.outbox_idle().await;

    let all = fake.received().await;
    for r in &all {
        // Every push decrypted, with a JWT whose aud is the fake's origin, port included.
        assert!(r.get("error").is_none(), "{r}");
        assert_eq!(r["claims"]["aud"], json!(fake.origin), "{r}");
        assert_eq!(r["claims"]["sub"], "mailto:ops@example.com");
        assert_eq!(
            r["vapid_key"],
            json!(key),
            "signed with the key browsers subscribe with"
        );
        assert_eq!(r["encoding"], "aes128gcm");
    }
    let statuses: Vec<(u64, u64)> = all
        .iter()
        .map(|r| (r["sub"].as_u64().unwrap(), r["status"].as_u64().unwrap()))
        .collect();
    for expected in [(1, 410), (0, 503), (0, 201), (2, 201)] {
        assert!(statuses.contains(&expected), "{expected:?} in {statuses:?}");
    }
    // What the worker gets: the tool and command, the agent, the card, Approve and Deny.
    let p = &ok["payload"];
    assert_eq!(
        (p["type"].as_str(), p["id"].as_str(), p["url"].as_str()),
        (Some("prompt"), Some("push-1"), Some("/#push-1"))
    );
    assert!(
        p["title"]
            .as_str()
            .unwrap()
            .contains("cargo publish --dry-run"),
        "{p}"
    );
    assert!(p["body"].as_str().unwrap().contains("claude-code"), "{p}");
    let actions: Vec<&str> = p["actions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["action"].as_str().unwrap())
        .collect();
    assert_eq!(actions, ["allow", "deny"]);
    let ttl: i64 = ok["ttl"].as_str().unwrap().parse().unwrap();
    assert!(
        (500..=600).contains(&ttl),
        "TTL {ttl} is the time left to the deadline"
    );
    assert_eq!(ok["urgency"], "normal");

    // The gone subscription's device was removed.
    let (_, mine) = get_as(&app, ANN, "/v1/push").await;
    assert_eq!(mine["devices"].as_array().unwrap().len(), 1, "{mine}");

    // Bob cannot remove Ann's device; the administrator can remove anyone's.
    let ann_phone = mine["devices"][0]["id"].as_str().unwrap().to_string();
    let gone = |t: &str| {
        let req = app
            .client
            .delete(app.url(&format!("/v1/push/devices/{ann_phone}")))
            .bearer_auth(t);
        async move { req.send().await.unwrap().status() }
    };
    assert_eq!(gone(BOB).await, StatusCode::FORBIDDEN);

    // Ann's Deny answers as Ann, through the push channel; the same button again is refused.
    let deny = p["actions"][1]["url"].as_str().unwrap().to_string();
    let (status, body) = split(app.client.post(app.url(&deny)).send().await.unwrap()).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let (_, i) = app.get("/v1/interactions/push-1").await;
    assert_eq!(
        (
            i["resolution"]["outcome"].as_str(),
            i["resolution"]["by"].as_str(),
            i["resolution"]["via"].as_str()
        ),
        (Some("denied"), Some("ann"), Some("push")),
        "{i}"
    );
    let (status, body) = split(app.client.post(app.url(&deny)).send().await.unwrap()).await;
    assert_eq!(status, StatusCode::CONFLICT, "{body}");
    let forged = deny.replace("/deny/", "/allow/");
    let (status, _) = split(app.client.post(app.url(&forged)).send().await.unwrap()).await;
    assert_eq!(status, StatusCode::FORBIDDEN, "a deny token does not allow");

    // The outcome replaces the notification on every device that had it.
    let outcome = fake
        .one("the outcome push", |r| {
            r["payload"]["type"] == "outcome" && r["sub"] == 0
        })
        .await;
    assert_eq!(outcome["payload"]["tag"], p["tag"]);
    assert_eq!(outcome["payload"]["body"], "Denied by ann via push");
    assert_eq!(gone(ADMIN).await, StatusCode::NO_CONTENT);
}

/// The DevTools protocol on another target (the service worker).
struct Target {
    ws: tokio_tungstenite::WebSocketStream<
        tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>,
    >,
    next_id: u64,
}

impl Target {
    async fn call(&mut self, method: &str, params: Value) -> Value {
        self.next_id += 1;
        let id = self.next_id;
        let msg = json!({"id": id, "method": method, "params": params});
        self.ws
            .send(Message::Text(msg.to_string().into()))
            .await
            .unwrap();
        loop {
            let frame = tokio::time::timeout(Duration::from_secs(30), self.ws.next())
                .await
                .expect("a reply")
                .expect("open")
                .unwrap();
            let Message::Text(text) = frame else { continue };
            let v: Value = serde_json::from_str(&text).unwrap();
            if v["id"] == id {
                assert!(v.get("error").is_none(), "{method}: {v}");
                return v["result"].clone();
            }
        }
    }

    async fn eval(&mut self, expr: &str) -> Value {
        let r = self
            .call(
                "Runtime.evaluate",
                json!({"expression": expr, "awaitPromise": true, "returnByValue": true}),
            )
            .await;
        assert!(
            r.get("exceptionDetails").is_none(),
            "{expr} threw: {}",
            r["exceptionDetails"]
        );
        r["result"]["value"].clone()
    }
}

impl Browser {
    /// The DevTools port Chromium chose.
    fn port(&self) -> u16 {
        let text =
            std::fs::read_to_string(self._profile.path().join("DevToolsActivePort")).unwrap();
        text.lines().next().unwrap().parse().unwrap()
    }

    /// Calls a method and also returns the events that came before its reply.
    async fn call_seeing(&mut self, method: &str, params: Value, wait_for: &str) -> Vec<Value> {
        self.next_id += 1;
        let id = self.next_id;
        let msg = json!({"id": id, "method": method, "params": params});
        self.ws
            .send(Message::Text(msg.to_string().into()))
            .await
            .unwrap();
        let mut events = Vec::new();
        let mut replied = false;
        loop {
            let frame = tokio::time::timeout(Duration::from_secs(30), self.ws.next())
                .await
                .expect("a frame")
                .expect("open")
                .unwrap();
            let Message::Text(text) = frame else { continue };
            let v: Value = serde_json::from_str(&text).unwrap();
            if v["id"] == id {
                assert!(v.get("error").is_none(), "{method}: {v}");
                replied = true;
            } else if v["method"] == wait_for {
                events.push(v);
            }
            if replied && !events.is_empty() {
                return events;
            }
        }
    }

    /// The inbox's service worker as a DevTools target.
    async fn worker(&self) -> Target {
        let list = format!("http://127.0.0.1:{}/json/list", self.port());
        let url = eventually("the service worker's target", || {
            let list = list.clone();
            async move {
                let targets: Value = reqwest::get(&list).await.ok()?.json().await.ok()?;
                targets
                    .as_array()?
                    .iter()
                    .find(|t| t["type"] == "service_worker")?["webSocketDebuggerUrl"]
                    .as_str()
                    .map(str::to_string)
            }
        })
        .await;
        let (ws, _) = tokio_tungstenite::connect_async(url).await.unwrap();
        Target { ws, next_id: 0 }
    }
}

/// JavaScript: the notifications shown, as `[{title, body, tag, actions}]`.
const NOTIFICATIONS: &str = "navigator.serviceWorker.ready.then(r => r.getNotifications()).then(ns => \
    ns.map(n => ({title: n.title, body: n.body, tag: n.tag, actions: n.actions.map(a => a.action)})))";

/// The inbox in Chromium, signed in as Ann, its service worker active and notifications
/// allowed, with the fake's first subscription registered as Ann's device: the browser, the
/// worker's registration id (for `ServiceWorker.deliverPushMessage`) and the page's origin.
async fn worker_page(bin: PathBuf, app: &TestApp, fake: &FakePush) -> (Browser, Value, String) {
    let mut b = Browser::launch(&bin).await;
    b.call("Page.navigate", json!({"url": app.url("/")})).await;
    b.until(
        "the token form",
        "document.getElementById('login')?.hidden === false",
    )
    .await;
    b.eval(&format!(
        "document.getElementById('token').value = {}; document.querySelector('#login-form button[type=submit]').click()",
        json!(ANN)
    ))
    .await;
    // The inbox is an app: its manifest and icons load, its worker is active.
    b.until(
        "the devices section",
        "document.getElementById('devices-section')?.hidden === false",
    )
    .await;
    let manifest = b.eval("fetch('/manifest.webmanifest').then(r => r.json()).then(m => [m.display, m.start_url, m.icons.length])").await;
    assert_eq!(manifest, json!(["standalone", "/", 3]));
    b.until(
        "the active service worker",
        "navigator.serviceWorker.controller !== null || false",
    )
    .await;
    let origin = app.url("");
    b.call(
        "Browser.grantPermissions",
        json!({"origin": origin, "permissions": ["notifications"]}),
    )
    .await;
    let events = b
        .call_seeing(
            "ServiceWorker.enable",
            json!({}),
            "ServiceWorker.workerRegistrationUpdated",
        )
        .await;
    let registration = events
        .iter()
        .flat_map(|e| {
            e["params"]["registrations"]
                .as_array()
                .cloned()
                .unwrap_or_default()
        })
        .find(|r| r["scopeURL"] == json!(format!("{origin}/")) && r["isDeleted"] == false)
        .expect("the inbox's registration")["registrationId"]
        .clone();

    // Offline the browser cannot subscribe: the fake's keys go through imrelay's API as this
    // browser's would, with Ann's token; the page lists the device.
    let (status, body) = post_as(
        app,
        ANN,
        "/v1/push/devices",
        &fake.subscription(0, "Android (Chrome)"),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    b.eval("pushRefresh()").await;
    b.until(
        "the device listed",
        "document.querySelectorAll('#devices .device').length === 1",
    )
    .await;
    (b, registration, origin)
}

pub(super) async fn the_service_worker_shows_the_push_and_its_approve_answers() {
    let bin = chromium().expect("Chromium (checked before the test)");
    let fake = FakePush::start(1);
    let mut app = push_app().await;
    app.token = Some(ADMIN.into());

    let (mut b, registration, origin) = worker_page(bin, &app, &fake).await;
    assert_eq!(
        b.eval("[document.getElementById('devices-who').textContent, document.querySelector('#devices .device-name').textContent]").await,
        json!(["Devices notified for ann.", "Android (Chrome)"])
    );
    b.screenshots("inbox-devices").await;

    create(&app, "push-sw", "terraform apply -auto-approve").await;
    let prompt = fake
        .one("the prompt push", |r| r["payload"]["type"] == "prompt")
        .await;
    let payload = prompt["payload"].clone();
    let deliver = |data: &Value| json!({"origin": origin, "registrationId": registration, "data": data.to_string()});
    b.call("ServiceWorker.deliverPushMessage", deliver(&payload))
        .await;
    b.until(
        "the notification",
        &format!("{NOTIFICATIONS}.then(ns => ns.length === 1)"),
    )
    .await;
    let shown = b.eval(NOTIFICATIONS).await;
    assert!(
        shown[0]["title"]
            .as_str()
            .unwrap()
            .contains("terraform apply -auto-approve"),
        "{shown}"
    );
    assert_eq!(shown[0]["actions"], json!(["allow", "deny"]));
    assert_eq!(shown[0]["tag"], payload["tag"]);

    // Approve, as the worker's notificationclick does.
    let mut worker = b.worker().await;
    let tag = payload["tag"].as_str().unwrap();
    worker
        .eval(&format!("self.registration.getNotifications({{tag: {}}}).then(ns => answer(ns[0], 'allow')).then(() => true)", json!(tag)))
        .await;
    let (_, i) = app.get("/v1/interactions/push-sw").await;
    assert_eq!(
        (
            i["resolution"]["outcome"].as_str(),
            i["resolution"]["by"].as_str(),
            i["resolution"]["via"].as_str()
        ),
        (Some("allowed"), Some("ann"), Some("push")),
        "{i}"
    );
    let shown = b.eval(NOTIFICATIONS).await;
    assert_eq!(
        (shown[0]["title"].as_str(), shown[0]["tag"].as_str()),
        (Some("Allowed"), Some(tag)),
        "{shown}"
    );

    // The outcome push replaces it: who answered, where.
    let outcome = fake
        .one("the outcome push", |r| r["payload"]["type"] == "outcome")
        .await;
    b.call(
        "ServiceWorker.deliverPushMessage",
        deliver(&outcome["payload"]),
    )
    .await;
    b.until("the outcome shown", &format!("{NOTIFICATIONS}.then(ns => ns.length === 1 && ns[0].body === 'Allowed by ann via push')")).await;

    // A stale prompt's button is refused, and the worker says so.
    b.call("ServiceWorker.deliverPushMessage", deliver(&payload))
        .await;
    b.until(
        "the prompt again",
        &format!("{NOTIFICATIONS}.then(ns => ns.length === 1 && ns[0].actions.length === 2)"),
    )
    .await;
    worker
        .eval(&format!("self.registration.getNotifications({{tag: {}}}).then(ns => answer(ns[0], 'deny')).then(() => true)", json!(tag)))
        .await;
    let shown = b.eval(NOTIFICATIONS).await;
    assert_eq!(shown[0]["title"], "Not answered", "{shown}");
    assert!(
        shown[0]["body"]
            .as_str()
            .unwrap()
            .starts_with("Already allowed by ann"),
        "{shown}"
    );
    let (_, i) = app.get("/v1/interactions/push-sw").await;
    assert_eq!(i["resolution"]["outcome"], "allowed");
}

/// A session's digest as Chromium shows it: one notification with Approve all and Deny all;
/// Approve all, pressed as the worker's `notificationclick` does, is answered by the
/// confirmation pushed under the same tag (no note of the press's own), and its Yes
/// answers the requests it listed, as Ann, via push.
pub(super) async fn the_service_worker_shows_a_digest_and_its_approve_all_answers() {
    let bin = chromium().expect("Chromium (checked before the test)");
    let fake = FakePush::start(1);
    let mut app = push_app_with(|s| s.push.digest_after = 1).await;
    app.token = Some(ADMIN.into());
    let (mut b, registration, origin) = worker_page(bin, &app, &fake).await;
    let deliver = |data: &Value| json!({"origin": origin, "registrationId": registration, "data": data.to_string()});
    for k in 0..3 {
        let body = json!({"id": format!("sw-d{k}"), "tool_name": "Bash",
            "input": {"command": format!("make step-{k}")}, "session": "s-9", "cwd": "/srv/shop"});
        let (s, v) = app.post("/v1/interactions", &body).await;
        assert_eq!(s, StatusCode::CREATED, "{v}");
    }
    let digest = fake
        .one("the digest of two", |r| {
            r["payload"]["type"] == "digest"
                && r["payload"]["title"]
                    .as_str()
                    .is_some_and(|t| t.starts_with("2 requests"))
        })
        .await["payload"]
        .clone();
    let tag = digest["tag"].as_str().unwrap().to_string();
    b.call("ServiceWorker.deliverPushMessage", deliver(&digest))
        .await;
    let this_tag = format!(
        "{NOTIFICATIONS}.then(ns => ns.filter(n => n.tag === {}))",
        json!(tag)
    );
    b.until(
        "the digest shown",
        &format!("{this_tag}.then(ns => ns.length === 1)"),
    )
    .await;
    let shown = b.eval(&this_tag).await;
    assert_eq!(
        shown[0]["actions"],
        json!(["allow_all", "deny_all"]),
        "{shown}"
    );
    let body = shown[0]["body"].as_str().unwrap_or_default();
    assert!(
        body.contains("make step-1") && body.contains("make step-2"),
        "{shown}"
    );

    let mut worker = b.worker().await;
    let press = |action: &str| {
        format!(
            "self.registration.getNotifications({{tag: {}}}).then(ns => answer(ns[0], {})).then(() => true)",
            json!(tag),
            json!(action)
        )
    };
    worker.eval(&press("allow_all")).await;
    let asked = fake
        .one("the confirmation", |r| {
            r["payload"]["tag"] == tag.as_str()
                && r["payload"]["actions"]
                    .as_array()
                    .is_some_and(|a| a.iter().any(|a| a["action"] == "yes"))
        })
        .await["payload"]
        .clone();
    // The first push rings; the confirmation replaces it quietly (no second alert).
    assert_eq!(
        (
            digest["quiet"].as_bool().unwrap_or(false),
            asked["quiet"].as_bool()
        ),
        (false, Some(true)),
        "{digest} then {asked}"
    );
    // The press shows no note of its own (the digest is replaced by the confirmation's
    // push under its tag).
    let all = b.eval(NOTIFICATIONS).await;
    let others: Vec<&Value> = all
        .as_array()
        .into_iter()
        .flatten()
        .filter(|n| n["tag"] != tag.as_str())
        .collect();
    assert!(others.is_empty(), "{all}");
    b.call("ServiceWorker.deliverPushMessage", deliver(&asked))
        .await;
    b.until(
        "the confirmation shown",
        &format!("{this_tag}.then(ns => ns.length === 1 && ns[0].actions.includes('yes'))"),
    )
    .await;
    worker.eval(&press("yes")).await;
    // The same Yes again (its link used): refused, and the digest stays shown, with the
    // note of why beside it.
    worker.eval(&press("yes")).await;
    let note = format!("{tag}-note");
    b.until(
        "the refusal's note",
        &format!(
            "{NOTIFICATIONS}.then(ns => ns.some(n => n.tag === {} && n.title === 'Not answered'))",
            json!(note)
        ),
    )
    .await;
    let kept = b.eval(&this_tag).await;
    assert!(
        kept.as_array().is_some_and(|k| k.len() == 1),
        "a refused press hid the digest: {kept}"
    );
    for id in ["sw-d1", "sw-d2"] {
        let (_, i) = app.get(&format!("/v1/interactions/{id}")).await;
        let r = &i["resolution"];
        assert_eq!(
            (r["outcome"].as_str(), r["by"].as_str(), r["via"].as_str()),
            (Some("allowed"), Some("ann"), Some("push")),
            "{i}"
        );
    }
    let (_, first) = app.get("/v1/interactions/sw-d0").await;
    assert_eq!(
        first["status"], "pending",
        "pushed on its own, not listed: {first}"
    );
}
