//! The web inbox in a real browser: headless Chromium, driven over the DevTools protocol,
//! against the real server. It shows pending interactions from the event stream, answers
//! approvals, questions and forms (checking each field before anything is sent), follows
//! answers given elsewhere, and never lets a stale click change an outcome.
//!
//! Needs Chromium (`.ci/run` installs Debian's `chromium`; `IMRELAY_TEST_CHROMIUM` names
//! another binary). Without one these tests are reported as ignored, with the reason.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use futures_util::{SinkExt, StreamExt};
use reqwest::StatusCode;
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::Message;

use crate::support::*;
use crate::{Need, trial};

mod first_look;
mod operator;
mod phone;
mod push;
mod quorum;
mod sessions;

pub(crate) fn trials() -> Vec<libtest_mimic::Trial> {
    vec![
        trial(
            "inbox::push::every_push_decrypts_with_the_devices_keys_and_carries_a_valid_vapid_jwt",
            push::fake_push_service,
            push::every_push_decrypts_with_the_devices_keys_and_carries_a_valid_vapid_jwt,
        ),
        trial(
            "inbox::push::the_service_worker_shows_the_push_and_its_approve_answers",
            push::fake_push_service_and_browser,
            push::the_service_worker_shows_the_push_and_its_approve_answers,
        ),
        trial(
            "inbox::push::the_service_worker_shows_a_digest_and_its_approve_all_answers",
            push::fake_push_service_and_browser,
            push::the_service_worker_shows_a_digest_and_its_approve_all_answers,
        ),
        trial(
            "inbox::a_passkey_answers_a_step_up_approval_and_a_chat_tap_cannot",
            browser,
            phone::a_passkey_answers_a_step_up_approval_and_a_chat_tap_cannot,
        ),
        trial(
            "inbox::at_the_desk_the_phone_waits_and_away_it_rings_at_once",
            browser,
            phone::at_the_desk_the_phone_waits_and_away_it_rings_at_once,
        ),
        trial(
            "inbox::push::at_the_desk_no_push_is_sent_and_away_it_is_at_once",
            push::fake_push_service_and_browser,
            phone::at_the_desk_no_push_is_sent_and_away_it_is_at_once,
        ),
        trial(
            "inbox::the_sessions_show_their_state_and_take_a_message",
            browser,
            sessions::the_sessions_show_their_state_and_take_a_message,
        ),
        trial(
            "inbox::what_a_person_meets_first_is_said_in_words",
            browser,
            first_look::what_a_person_meets_first_is_said_in_words,
        ),
        trial(
            "inbox::a_labelled_token_answers_as_its_person_without_asking_a_name",
            browser,
            operator::a_labelled_token_answers_as_its_person_without_asking_a_name,
        ),
        trial(
            "inbox::a_card_shows_the_votes_so_far_from_everywhere",
            browser,
            quorum::a_card_shows_the_votes_so_far_from_everywhere,
        ),
        trial(
            "inbox::the_inbox_answers_and_follows_answers_given_elsewhere",
            browser,
            the_inbox_answers_and_follows_answers_given_elsewhere,
        ),
        trial(
            "inbox::after_a_restart_the_inbox_drops_what_was_answered_meanwhile_and_keeps_what_was_typed",
            browser,
            after_a_restart_the_inbox_drops_what_was_answered_meanwhile_and_keeps_what_was_typed,
        ),
        trial(
            "inbox::a_codex_request_offers_no_editor",
            browser,
            a_codex_request_offers_no_editor,
        ),
        trial(
            "inbox::tool_calls_show_as_people_read_them",
            browser,
            tool_calls_show_as_people_read_them,
        ),
        trial(
            "inbox::a_form_is_filled_in_checked_field_by_field_and_answered",
            browser,
            a_form_is_filled_in_checked_field_by_field_and_answered,
        ),
        trial(
            "inbox::an_mcp_clients_questions_are_answered_in_the_inbox",
            browser,
            an_mcp_clients_questions_are_answered_in_the_inbox,
        ),
        trial(
            "inbox::a_link_to_an_item_shows_it_whole",
            browser,
            a_link_to_an_item_shows_it_whole,
        ),
        trial(
            "inbox::allow_similar_grants_a_rule_shown_and_revoked_in_the_inbox",
            browser,
            allow_similar_grants_a_rule_shown_and_revoked_in_the_inbox,
        ),
        trial(
            "inbox::a_form_can_be_declined_with_a_reason",
            browser,
            a_form_can_be_declined_with_a_reason,
        ),
        trial(
            "inbox::a_free_text_prompt_is_a_question_answered_in_one_step",
            browser,
            a_free_text_prompt_is_a_question_answered_in_one_step,
        ),
        trial(
            "inbox::many_are_filtered_selected_and_answered_at_once",
            browser,
            many_are_filtered_selected_and_answered_at_once,
        ),
        trial(
            "inbox::an_agents_pattern_is_checked_by_the_server_not_the_page",
            browser,
            an_agents_pattern_is_checked_by_the_server_not_the_page,
        ),
    ]
}

fn browser() -> Need {
    match chromium() {
        Some(_) => Need::Here,
        None => Need::Missing(
            "no Chromium found: install Debian's chromium (as .ci/run does) or set IMRELAY_TEST_CHROMIUM"
                .into(),
        ),
    }
}

/// The Chromium binary to use, if there is one.
fn chromium() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("IMRELAY_TEST_CHROMIUM") {
        return Some(PathBuf::from(p));
    }
    ["chromium", "chromium-browser", "google-chrome"]
        .iter()
        .find_map(|name| {
            let out = Command::new("which").arg(name).output().ok()?;
            out.status
                .success()
                .then(|| PathBuf::from(String::from_utf8_lossy(&out.stdout).trim()))
        })
}

/// A headless Chromium with one page, killed when dropped.
struct Browser {
    child: Child,
    _profile: tempfile::TempDir,
    ws: tokio_tungstenite::WebSocketStream<
        tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>,
    >,
    next_id: u64,
}

impl Drop for Browser {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Browser {
    async fn launch(bin: &PathBuf) -> Browser {
        let profile = tempfile::tempdir().unwrap();
        // Flags for a machine without network access or a display: no background
        // connections, no sandbox (tests may run as root), a fresh profile.
        let child = Command::new(bin)
            .args([
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-quic",
                "--no-first-run",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--remote-debugging-port=0",
            ])
            .arg(format!("--user-data-dir={}", profile.path().display()))
            .arg("about:blank")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start chromium");
        // Chromium writes the port it chose into the profile.
        let port_file = profile.path().join("DevToolsActivePort");
        let deadline = Instant::now() + Duration::from_secs(30);
        let port = loop {
            if let Ok(text) = std::fs::read_to_string(&port_file)
                && let Some(port) = text.lines().next().and_then(|l| l.parse::<u16>().ok())
            {
                break port;
            }
            assert!(Instant::now() < deadline, "chromium did not start");
            tokio::time::sleep(Duration::from_millis(50)).await;
        };
        let targets: Value = reqwest::get(format!("http://127.0.0.1:{port}/json/list"))
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        let page = targets
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["type"] == "page")
            .expect("a page target");
        let url = page["webSocketDebuggerUrl"].as_str().unwrap();
        let (ws, _) = tokio_tungstenite::connect_async(url).await.unwrap();
        Browser {
            child,
            _profile: profile,
            ws,
            next_id: 0,
        }
    }

    /// Calls a DevTools method and returns its result.
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
                .expect("a reply from chromium")
                .expect("the connection to chromium is open")
                .unwrap();
            let Message::Text(text) = frame else { continue };
            let v: Value = serde_json::from_str(&text).unwrap();
            if v["id"] == id {
                assert!(v.get("error").is_none(), "{method}: {v}");
                return v["result"].clone();
            }
        }
    }

    /// Evaluates JavaScript in the page (awaiting a promise) and returns its value.
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

    /// With `IMRELAY_TEST_SCREENSHOTS` set to a directory, saves the page as it looks on a
    /// desktop (1280 px wide) and a phone (390 px) there, as `<name>-1280.png` and
    /// `<name>-390.png`, whole (a long page as well as the first screenful): to look at, not
    /// compared.
    async fn screenshots(&mut self, name: &str) {
        let Some(dir) = std::env::var_os("IMRELAY_TEST_SCREENSHOTS") else {
            return;
        };
        use base64::Engine;
        // From the top: a sticky header would otherwise be drawn where the page was scrolled.
        self.eval("window.scrollTo(0, 0)").await;
        for (width, mobile) in [(1280, false), (390, true)] {
            self.call(
                "Emulation.setDeviceMetricsOverride",
                json!({"width": width, "height": 800, "deviceScaleFactor": 1, "mobile": mobile}),
            )
            .await;
            let height = self
                .eval("Math.ceil(document.documentElement.scrollHeight)")
                .await
                .as_f64()
                .unwrap_or(800.0)
                .max(800.0);
            let shot = self
                .call(
                    "Page.captureScreenshot",
                    json!({"format": "png", "captureBeyondViewport": true,
                           "clip": {"x": 0, "y": 0, "width": width, "height": height, "scale": 1}}),
                )
                .await;
            let png = base64::engine::general_purpose::STANDARD
                .decode(shot["data"].as_str().unwrap())
                .unwrap();
            let path = PathBuf::from(&dir).join(format!("{name}-{width}.png"));
            std::fs::write(&path, png).unwrap();
        }
        self.call("Emulation.clearDeviceMetricsOverride", json!({}))
            .await;
    }

    /// Waits until `expr` is true in the page (generously: a browser on a loaded two-core
    /// machine can take many seconds for its first page).
    async fn until(&mut self, what: &str, expr: &str) {
        let deadline = Instant::now() + Duration::from_secs(45);
        while self.eval(expr).await != json!(true) {
            assert!(Instant::now() < deadline, "timed out waiting for {what}");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

/// What of the page shows: `login`, `main`, and `name-panel` while the name dialog is open
/// (joined if several).
async fn visible(b: &mut Browser) -> Value {
    b.eval(
        "[...['login', 'main'].filter(id => !document.getElementById(id).hidden), \
          ...(document.getElementById('name-panel').open ? ['name-panel'] : [])].join(',')",
    )
    .await
}

/// Types `name` into the open name dialog and continues.
async fn enter_name(b: &mut Browser, name: &str) {
    b.until(
        "the name dialog",
        "document.getElementById('name-panel').open",
    )
    .await;
    b.eval(&format!(
        "document.getElementById('who').value = {}; \
         document.querySelector('#name-form button[type=submit]').click()",
        json!(name)
    ))
    .await;
    b.until(
        "the name dialog to close",
        "!document.getElementById('name-panel').open",
    )
    .await;
}

/// Says who answers from this browser before answering, from the header (the inbox would
/// otherwise ask at the first answer), once the inbox shows.
async fn give_name(b: &mut Browser, name: &str) {
    b.until(
        "the inbox",
        "document.getElementById('main')?.hidden === false && document.getElementById('who-box')?.hidden === false",
    )
    .await;
    b.eval("document.getElementById('who-change').click()")
        .await;
    enter_name(b, name).await;
}

/// JavaScript keeping what the page sends to `/respond` from now on in `window.__sent`.
const COUNT_ANSWERS: &str = "window.__sent = []; if (!window.__counting) { window.__counting = true; \
    const f0 = window.fetch; \
    window.fetch = (url, opts) => { if (String(url).endsWith('/respond')) window.__sent.push(opts.body); return f0(url, opts); }; }";

/// JavaScript for the card of interaction `id` in list `list` (`pending` or `recent`).
fn card(list: &str, id: &str) -> String {
    format!("document.querySelector('#{list} [data-id=\"{id}\"]')")
}

async fn the_inbox_answers_and_follows_answers_given_elsewhere() {
    let bin = chromium().expect("Chromium (checked before the test)");
    let app = spawn_app().await;
    let hostile = "<img src=x onerror=\"window.__xss=1\"> & rm -rf /";
    app.create_bash("ib-approve", hostile).await;
    let (status, _) = app
        .post(
            "/v1/interactions",
            &json!({"id": "ib-question", "tool_name": "AskUserQuestion", "input": {"questions": [
                {"question": "Which database?", "header": "DB", "multiSelect": false,
                 "options": [{"label": "Postgres", "description": "relational"}, {"label": "SQLite"}]},
                {"question": "Which extras?", "header": "Extras", "multiSelect": true,
                 "options": [{"label": "Cache"}, {"label": "Search"}, {"label": "Queue"}]}
            ]}}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED);

    let mut b = Browser::launch(&bin).await;
    b.call("Page.navigate", json!({"url": app.url("/")})).await;
    b.until(
        "both pending cards",
        "document.querySelectorAll('#pending .card').length === 2",
    )
    .await;

    // Untrusted input is shown as text, never run as markup.
    let shown = b
        .eval(&format!(
            "{}.querySelector('details.raw pre').textContent",
            card("pending", "ib-approve")
        ))
        .await;
    // (As pretty-printed JSON: the quotes inside are escaped.)
    let expected = serde_json::to_string(hostile).unwrap();
    assert!(shown.as_str().unwrap().contains(&expected), "{shown}");
    assert_eq!(
        b.eval("typeof window.__xss + ':' + document.querySelectorAll('#pending img').length")
            .await,
        "undefined:0"
    );

    // A browser that has not answered before shows what waits at once, and asks who is
    // answering at the first answer.
    assert_eq!(visible(&mut b).await, "main");
    assert_eq!(
        b.eval("[document.getElementById('who-named').hidden, document.getElementById('who-change').textContent]")
            .await,
        json!([true, "Set your name"])
    );
    b.screenshots("inbox-first-open").await;
    b.eval(COUNT_ANSWERS).await;
    let approve = format!(
        "{}.querySelector('button.primary').click()",
        card("pending", "ib-approve")
    );
    b.eval(&approve).await;
    b.until(
        "the name dialog at the first answer",
        "document.getElementById('name-panel').open",
    )
    .await;
    assert_eq!(visible(&mut b).await, "main,name-panel");
    assert_eq!(
        b.eval("[window.__sent.length, document.activeElement.id, document.getElementById('name-then').hidden]")
            .await,
        json!([0, "who", false]),
        "nothing is sent before the name, the name field has the keyboard, and the dialog says the answer follows"
    );
    b.screenshots("inbox-name-prompt").await;
    // Cancelled: nothing is sent, and the card can be answered again.
    b.eval("document.getElementById('who-cancel').click()")
        .await;
    assert_eq!(visible(&mut b).await, "main");
    assert_eq!(
        b.eval(&format!(
            "[window.__sent.length, {}.querySelector('button.primary').disabled]",
            card("pending", "ib-approve")
        ))
        .await,
        json!([0, false])
    );
    let (_, still) = app.get("/v1/interactions/ib-approve").await;
    assert_eq!(still["status"], "pending");

    // Approve again, and give the name: the approval goes out as Dana's.
    b.eval(&approve).await;
    enter_name(&mut b, "Dana").await;
    assert_eq!(
        b.eval("document.getElementById('who-name').textContent")
            .await,
        "Dana"
    );
    let (status, out) = app.get("/v1/interactions/ib-approve/wait").await;
    assert_eq!(status, StatusCode::OK, "{out}");
    assert_eq!(out["result"]["behavior"], "allow");
    assert_eq!(out["result"]["updatedInput"]["command"], hostile);
    assert_eq!(out["resolution"]["by"], "Dana");
    assert_eq!(out["resolution"]["via"], "desktop");
    b.until(
        "the approval in the recent list",
        &format!(
            "!{} && !!{} && {}.textContent.includes('Allowed by Dana via desktop')",
            card("pending", "ib-approve"),
            card("recent", "ib-approve"),
            card("recent", "ib-approve")
        ),
    )
    .await;

    // Remembered: a reload does not ask again. The name can be changed from the header.
    b.call("Page.reload", json!({})).await;
    b.until(
        "the pending question after the reload",
        &format!(
            "!!{} && !document.getElementById('main').hidden",
            card("pending", "ib-question")
        ),
    )
    .await;
    assert_eq!(visible(&mut b).await, "main");
    b.screenshots("inbox-named").await;
    b.eval("document.getElementById('who-change').click()")
        .await;
    assert_eq!(visible(&mut b).await, "main,name-panel");
    assert_eq!(
        b.eval(
            "[document.getElementById('who').value, document.getElementById('name-then').hidden]"
        )
        .await,
        json!(["Dana", true])
    );
    enter_name(&mut b, "Dana Scully").await;
    assert_eq!(visible(&mut b).await, "main");
    assert_eq!(
        b.eval("document.getElementById('who-name').textContent")
            .await,
        "Dana Scully"
    );

    // The question: one radio, two checkboxes, Submit.
    let q = card("pending", "ib-question");
    b.eval(&format!(
        "(() => {{ const c = {q}; \
           c.querySelector('input[type=radio][value=SQLite]').click(); \
           c.querySelector('input[type=checkbox][value=Cache]').click(); \
           c.querySelector('input[type=checkbox][value=Queue]').click(); \
           [...c.querySelectorAll('button')].find(x => x.textContent === 'Submit').click(); }})()"
    ))
    .await;
    let (status, out) = app.get("/v1/interactions/ib-question/wait").await;
    assert_eq!(status, StatusCode::OK, "{out}");
    assert_eq!(
        out["result"]["updatedInput"]["answers"],
        json!({"Which database?": "SQLite", "Which extras?": "Cache, Queue"})
    );
    assert_eq!(out["resolution"]["by"], "Dana Scully");

    // Answered elsewhere: the card leaves the pending list and says who answered, where.
    app.create_bash("ib-elsewhere", "ls").await;
    b.until(
        "the new card",
        &format!("!!{}", card("pending", "ib-elsewhere")),
    )
    .await;
    let (status, _) = app
        .post(
            "/v1/interactions/ib-elsewhere/respond",
            &json!({"decision": "deny", "message": "not now", "by": "Erin"}),
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    b.until(
        "the card to follow the answer given through the API",
        &format!(
            "!{} && !!{} && {}.textContent.includes('Denied by Erin via api')",
            card("pending", "ib-elsewhere"),
            card("recent", "ib-elsewhere"),
            card("recent", "ib-elsewhere")
        ),
    )
    .await;

    // A stale click: the interaction is answered through the API, and the page's Approve is
    // clicked at once, before or after the stream tells the page. The first answer stands.
    app.create_bash("ib-stale", "make deploy").await;
    b.until(
        "the stale card",
        &format!("!!{}", card("pending", "ib-stale")),
    )
    .await;
    b.eval(&format!(
        "(async () => {{ const btn = {}.querySelector('button.primary'); \
           await fetch('/v1/interactions/ib-stale/respond', {{method: 'POST', \
             headers: {{'Content-Type': 'application/json'}}, \
             body: JSON.stringify({{decision: 'deny', by: 'Frank'}})}}); \
           btn.click(); }})()",
        card("pending", "ib-stale")
    ))
    .await;
    b.until(
        "the stale card to show the first answer",
        &format!(
            "!{} && !!{} && {}.textContent.includes('Denied by Frank')",
            card("pending", "ib-stale"),
            card("recent", "ib-stale"),
            card("recent", "ib-stale")
        ),
    )
    .await;
    let (_, out) = app.get("/v1/interactions/ib-stale").await;
    assert_eq!(out["resolution"]["outcome"], "denied");
    assert_eq!(out["resolution"]["by"], "Frank");
    assert_eq!(
        b.eval("document.querySelectorAll('#pending .card').length")
            .await,
        0
    );
    app.stop().await;
}

async fn after_a_restart_the_inbox_drops_what_was_answered_meanwhile_and_keeps_what_was_typed() {
    let bin = chromium().expect("Chromium (checked before the test)");
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("imrelay.db");
    let first = spawn_on(settings(), std::sync::Arc::new(reopen_sqlite(&path).await)).await;
    first.create_bash("ib-kept", "make release").await;
    first.create_bash("ib-gone", "make clean").await;
    let (status, _) = first
        .post(
            "/v1/interactions",
            &json!({"id": "ib-enter", "tool_name": "AskUserQuestion", "input": {"questions": [
                {"question": "Which branch?", "header": "Branch", "multiSelect": false,
                 "options": [{"label": "main"}, {"label": "next"}]}
            ]}}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED);

    let mut b = Browser::launch(&bin).await;
    b.call("Page.navigate", json!({"url": first.url("/")}))
        .await;
    give_name(&mut b, "Hal").await;
    b.until(
        "three pending cards",
        "document.querySelectorAll('#pending .card').length === 3",
    )
    .await;
    // Half-way through writing a reason when the server goes away.
    b.eval(&format!(
        "{}.querySelector('input.reason').value = 'half typed'",
        card("pending", "ib-kept")
    ))
    .await;

    // The server goes away: the page says so plainly, and nothing can be answered until it
    // is back; what was typed stays.
    let addr = first.addr;
    first.stop().await;
    b.until(
        "the banner saying the server cannot be reached",
        "!document.getElementById('offline').hidden",
    )
    .await;
    let kept = card("pending", "ib-kept");
    assert_eq!(
        b.eval(&format!(
            "(() => {{ const c = {kept}; return [document.getElementById('offline').innerText.includes('Answering is paused'), \
               [...c.querySelectorAll('button')].every(x => x.matches(':disabled')), \
               c.querySelector('input.reason').value]; }})()"
        ))
        .await,
        json!([true, true, "half typed"])
    );
    b.screenshots("inbox-offline").await;
    b.eval(COUNT_ANSWERS).await;
    b.eval(&format!("{kept}.querySelector('button.primary').click()"))
        .await;
    assert_eq!(b.eval("window.__sent.length").await, 0);

    // A restart on the same address: the page's next stream starts with `reset`, as the
    // event ids it saw belong to the old process. Meanwhile ib-gone is answered elsewhere.
    let mut s = settings();
    s.server.listen = addr;
    let second = spawn_on(s, std::sync::Arc::new(reopen_sqlite(&path).await)).await;
    let (status, _) = second
        .post(
            "/v1/interactions/ib-gone/respond",
            &json!({"decision": "allow", "by": "Gina"}),
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    b.until(
        "the card answered meanwhile to move to the recent list",
        &format!(
            "!{} && !!{} && {}.textContent.includes('Allowed by Gina via api')",
            card("pending", "ib-gone"),
            card("recent", "ib-gone"),
            card("recent", "ib-gone")
        ),
    )
    .await;
    assert_eq!(
        b.eval(&format!(
            "{}.querySelector('input.reason').value",
            card("pending", "ib-kept")
        ))
        .await,
        "half typed"
    );
    // Back: the banner goes and answering works again.
    assert_eq!(
        b.eval(&format!(
            "[document.getElementById('conn-text').textContent, document.getElementById('offline').hidden, \
              {kept}.querySelector('button.primary').matches(':disabled')]"
        ))
        .await,
        json!(["live", true, false])
    );

    // Enter in a question's "Other" field answers it.
    b.eval(&format!(
        "{}.querySelector('input.other-text').focus()",
        card("pending", "ib-enter")
    ))
    .await;
    b.call("Input.insertText", json!({"text": "release-2"}))
        .await;
    for kind in ["keyDown", "keyUp"] {
        b.call(
            "Input.dispatchKeyEvent",
            json!({"type": kind, "key": "Enter", "code": "Enter",
                   "windowsVirtualKeyCode": 13, "text": "\r"}),
        )
        .await;
    }
    let (status, out) = second.get("/v1/interactions/ib-enter/wait").await;
    assert_eq!(status, StatusCode::OK, "{out}");
    assert_eq!(
        out["result"]["updatedInput"]["answers"],
        json!({"Which branch?": "release-2"})
    );
    second.stop().await;
}

async fn tool_calls_show_as_people_read_them() {
    let bin = chromium().expect("Chromium (checked before the test)");
    let app = spawn_app().await;
    let hostile = "<img src=x onerror=\"window.__xss=1\"> & rm -rf /";
    app.create_bash("pr-bash", hostile).await;
    let build = "cargo build --release --locked && ./target/release/imrelay --config /etc/imrelay/config.toml doctor --send-test\n\necho   done";
    app.create_bash("pr-build", build).await;
    let long: String = (1..=200).map(|n| format!("line {n}\n")).collect();
    for (id, tool, input) in [
        (
            "pr-edit",
            "Edit",
            json!({"file_path": "/tmp/<b>x</b>.rs", "old_string": "let a = 1;\nkeep();",
                   "new_string": "let a = \"<i>2</i>\";\nkeep();"}),
        ),
        (
            "pr-write",
            "Write",
            json!({"file_path": "/tmp/notes.txt", "content": long}),
        ),
    ] {
        let (status, body) = app
            .post(
                "/v1/interactions",
                &json!({"id": id, "tool_name": tool, "input": input}),
            )
            .await;
        assert_eq!(status, StatusCode::CREATED, "{body}");
    }
    let mut b = Browser::launch(&bin).await;
    b.call("Page.navigate", json!({"url": app.url("/")})).await;
    give_name(&mut b, "Dana").await;
    b.until(
        "every card's tool call",
        "document.querySelectorAll('#pending .card .display .label').length >= 4",
    )
    .await;

    // On a phone a long command wraps only between words, each continued line marked; it is
    // still exactly the command, and nothing of it is out of sight.
    let built = card("pending", "pr-build");
    b.call(
        "Emulation.setDeviceMetricsOverride",
        json!({"width": 390, "height": 800, "deviceScaleFactor": 1, "mobile": true}),
    )
    .await;
    let layout = b
        .eval(&format!(
            "(() => {{ const pre = {built}.querySelector('.display pre'); \
               const lh = parseFloat(getComputedStyle(pre).lineHeight); \
               const box = pre.getBoundingClientRect(); \
               const words = [...pre.querySelectorAll('.word')]; \
               const lines = [...pre.querySelectorAll('.line')]; \
               return {{ text: pre.textContent, \
                 split: words.filter(w => w.getClientRects().length !== 1).map(w => w.textContent), \
                 outside: words.filter(w => w.getBoundingClientRect().right > box.right).map(w => w.textContent), \
                 rows: lines.map(l => Math.round(l.getBoundingClientRect().height / lh)), \
                 marked: lines.map(l => Math.round(parseFloat(getComputedStyle(l, '::before').height) / lh)), \
                 mark: getComputedStyle(lines[0], '::before').maskImage.slice(0, 23) }}; }})()"
        ))
        .await;
    b.call("Emulation.clearDeviceMetricsOverride", json!({}))
        .await;
    assert_eq!(layout["text"], build, "{layout}");
    assert_eq!(layout["split"], json!([]), "{layout}");
    assert_eq!(layout["outside"], json!([]), "{layout}");
    let rows = layout["rows"].as_array().unwrap();
    assert!(
        rows.len() == 3 && rows[0].as_i64().unwrap() >= 3 && rows[1] == 1 && rows[2] == 1,
        "the long line wraps, the empty and the short one do not: {layout}"
    );
    // Every row after a line's first is marked ↪ (a mask drawn down the margin).
    let marked: Vec<i64> = rows.iter().map(|r| r.as_i64().unwrap() - 1).collect();
    assert_eq!(layout["marked"], json!(marked), "{layout}");
    assert_eq!(layout["mark"], "url(\"data:image/svg+xml", "{layout}");

    // A command is itself, as text.
    let bash = card("pending", "pr-bash");
    assert_eq!(
        b.eval("[...document.querySelectorAll('#pending .display')].some(d => /(^|\\n)null/.test(d.innerText))")
            .await,
        false,
        "stray text in a tool call"
    );
    assert_eq!(
        b.eval(&format!("{bash}.querySelector('.display pre').textContent"))
            .await,
        hostile
    );
    // An edit is a diff, its lines marked, its file named; markup in it stays text.
    let edit = card("pending", "pr-edit");
    assert_eq!(
        b.eval(&format!(
            "[...{edit}.querySelectorAll('pre.diff > .line')].map(s => s.className + ':' + s.textContent)"
        ))
        .await,
        json!(["line removed:-let a = 1;\n", "line added:+let a = \"<i>2</i>\";\n", "line context: keep();"])
    );
    assert_eq!(
        b.eval(&format!(
            "{edit}.querySelector('.display .field code').textContent"
        ))
        .await,
        "/tmp/<b>x</b>.rs"
    );
    // A long write shows its start, says what was cut, and shows all on request.
    let write = card("pending", "pr-write");
    let cut = b
        .eval(&format!(
            "{write}.querySelector('.display .cut').textContent"
        ))
        .await;
    assert!(
        cut.as_str().unwrap().contains("more lines not shown"),
        "{cut}"
    );
    assert!(
        !b.eval(&format!(
            "{write}.querySelector('.display pre').textContent"
        ))
        .await
        .as_str()
        .unwrap()
        .contains("line 200")
    );
    b.screenshots("inbox-tool-calls").await;
    b.eval(&format!(
        "[...{write}.querySelectorAll('.display button')].find(x => x.textContent === 'Show all').click()"
    ))
    .await;
    b.until(
        "the whole file",
        &format!("{write}.querySelector('.display pre').textContent.includes('line 200')"),
    )
    .await;
    // The raw input stays one click away, and nothing hostile ran.
    assert!(
        b.eval(&format!(
            "{edit}.querySelector('details.raw pre').textContent"
        ))
        .await
        .as_str()
        .unwrap()
        .contains("old_string")
    );
    assert_eq!(
        b.eval("typeof window.__xss + ':' + document.querySelectorAll('#pending img, #pending b, #pending i').length")
            .await,
        "undefined:0"
    );

    // Edit & approve: an editor with Cancel, and what is wrong with the JSON next to it.
    let click = |card: &str, text: &str| {
        format!(
            "[...{card}.querySelectorAll('button')].find(x => x.textContent === {}).click()",
            json!(text)
        )
    };
    let set_input = |card: &str, text: &str| {
        format!(
            "(() => {{ const t = {card}.querySelector('.edit-box textarea'); t.value = {}; \
             t.dispatchEvent(new Event('input')); }})()",
            json!(text)
        )
    };
    // The buttons of a card a person can see and reach.
    let shown = |card: &str| {
        format!(
            "[...{card}.querySelectorAll('button')].filter(x => x.offsetParent !== null).map(x => x.textContent)"
        )
    };
    assert_eq!(
        b.eval(&shown(&bash)).await,
        json!(["Approve", "Edit & approve…", "Allow similar…", "Deny"])
    );
    b.eval(&click(&bash, "Edit & approve…")).await;
    assert_eq!(
        b.eval(&format!("{bash}.querySelector('.edit-box').hidden"))
            .await,
        false
    );
    // While editing, only the edited approval and Cancel: the plain Approve is out of reach.
    assert_eq!(
        b.eval(&shown(&bash)).await,
        json!(["Approve edited input", "Cancel"])
    );
    b.screenshots("inbox-editing").await;
    b.eval(&set_input(&bash, "{\"command\": ")).await;
    let error = b
        .eval(&format!("{bash}.querySelector('.edit-error').textContent"))
        .await;
    assert!(
        error.as_str().unwrap().starts_with("Not valid JSON"),
        "{error}"
    );
    assert_eq!(
        b.eval(&format!("[...{bash}.querySelectorAll('button')].find(x => x.textContent === 'Approve edited input').disabled"))
            .await,
        true
    );
    b.eval(&set_input(&bash, "[1, 2]")).await;
    assert_eq!(
        b.eval(&format!("{bash}.querySelector('.edit-error').textContent"))
            .await,
        "The input must be a JSON object ({ … })."
    );
    b.eval(&click(&bash, "Cancel")).await;
    assert_eq!(
        b.eval(&format!("{bash}.querySelector('.edit-box').hidden"))
            .await,
        true
    );
    assert_eq!(
        b.eval(&shown(&bash)).await,
        json!(["Approve", "Edit & approve…", "Allow similar…", "Deny"])
    );
    b.eval(&click(&bash, "Edit & approve…")).await;
    b.eval(&set_input(&bash, "{\"command\": \"echo safe\"}"))
        .await;
    b.eval(&click(&bash, "Approve edited input")).await;
    let done = eventually("the edited approval", || async {
        let (_, i) = app.get("/v1/interactions/pr-bash").await;
        (i["status"] == "resolved").then_some(i)
    })
    .await;
    assert_eq!(
        done["resolution"]["result"]["updatedInput"],
        json!({"command": "echo safe"})
    );
    // The recent item says what was asked and what was approved, and the page has an icon.
    let recent = card("recent", "pr-bash");
    b.until(
        "the recent item's summary",
        &format!(
            "({recent}?.querySelector('.summary')?.textContent || '').startsWith('Asked: Run: ')"
        ),
    )
    .await;
    assert_eq!(
        b.eval(&format!(
            "[...{recent}.querySelectorAll('.edited-label, pre.edited')].map(e => e.textContent)"
        ))
        .await,
        json!(["Approved as edited:", "{\n  \"command\": \"echo safe\"\n}"])
    );
    assert_eq!(
        b.eval("document.querySelector('link[rel=icon]').href.startsWith('data:image/svg+xml')")
            .await,
        true
    );
    b.screenshots("inbox-after-edit").await;
    drop(b);
    app.stop().await;
}

/// A form with one field of every kind the inbox draws differently.
fn offsite_schema() -> Value {
    json!({
        "type": "object",
        "required": ["people", "city", "contact"],
        "properties": {
            "people": {"type": "integer", "title": "How many people", "minimum": 2, "maximum": 40,
                       "description": "Including you"},
            "city": {"type": "string", "title": "City", "oneOf": [
                {"const": "ber", "title": "Berlin"}, {"const": "lis", "title": "Lisbon"},
                {"const": "opo", "title": "Porto"}]},
            "venue": {"type": "string", "title": "Venue",
                      "enum": ["a", "b", "c", "d", "e", "f"],
                      "enumNames": ["Hall A", "Hall B", "Hall C", "Hall D", "Hall E",
                                    "<img src=x onerror=\"window.__xss=1\">"]},
            "extras": {"type": "array", "title": "Extras", "maxItems": 2, "items": {"anyOf": [
                {"const": "dinner", "title": "Dinner"}, {"const": "boat", "title": "Boat trip"},
                {"const": "museum", "title": "Museum"}]}},
            "start": {"type": "string", "title": "First day", "format": "date"},
            "contact": {"type": "string", "title": "Contact e-mail", "format": "email"},
            "site": {"type": "string", "title": "Agenda link", "format": "uri"},
            "catering": {"type": "boolean", "title": "Catering", "default": true},
            // `\A` and `\z` are the regex crate's, not JavaScript's: only the server checks it.
            "code": {"type": "string", "title": "Booking code", "pattern": "\\A[A-Z]{3}\\z",
                     "description": "Three capital letters"},
            "notes": {"type": "string", "title": "Notes", "multiline": true, "maxLength": 200}
        }
    })
}

/// JavaScript that sets field `name` of the form in `card` to `value` as typing would (an
/// `input` event, then `change`).
fn fill(card: &str, id: &str, name: &str, value: &str) -> String {
    format!(
        "(() => {{ const c = {card}; const i = [...c.querySelectorAll('.form-field')] \
           .find(f => f.querySelector('.field-label').textContent.startsWith({label})) \
           .querySelector('input, textarea, select'); \
           i.value = {value}; i.dispatchEvent(new Event('input', {{bubbles: true}})); \
           i.dispatchEvent(new Event('change', {{bubbles: true}})); return i.id.startsWith('f-{id}-'); }})()",
        label = json!(name),
        value = json!(value),
    )
}

/// JavaScript for the field of the form in `card` whose label starts with `label`.
fn field(card: &str, label: &str) -> String {
    format!(
        "[...{card}.querySelectorAll('.form-field')].find(f => f.querySelector('.field-label').textContent.startsWith({}))",
        json!(label)
    )
}

/// How a screen reader meets the element `expr` evaluates to, from Chromium's accessibility
/// tree: its role, name, description, and whether it is invalid and required.
async fn accessible(b: &mut Browser, expr: &str) -> Value {
    b.call("Accessibility.enable", json!({})).await;
    let found = b
        .call("Runtime.evaluate", json!({"expression": expr}))
        .await;
    let object = found["result"]["objectId"]
        .as_str()
        .unwrap_or_else(|| panic!("{expr} is not an element: {found}"))
        .to_string();
    let tree = b
        .call(
            "Accessibility.getPartialAXTree",
            json!({"objectId": object, "fetchRelatives": false}),
        )
        .await;
    let node = &tree["nodes"][0];
    let property = |name: &str| {
        node["properties"]
            .as_array()
            .and_then(|ps| ps.iter().find(|p| p["name"] == name))
            .map_or(Value::Null, |p| p["value"]["value"].clone())
    };
    json!({
        "role": node["role"]["value"],
        "name": node["name"]["value"],
        "description": node["description"]["value"],
        "invalid": property("invalid"),
        "required": property("required"),
    })
}

async fn a_form_is_filled_in_checked_field_by_field_and_answered() {
    let bin = chromium().expect("Chromium (checked before the test)");
    let app = spawn_app().await;
    let (status, body) = app
        .post(
            "/v1/interactions",
            &json!({"id": "fm-offsite", "kind": "form", "agent": "planner",
                    "message": "Book the team offsite.\nPick what suits you.",
                    "schema": offsite_schema()}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    let mut b = Browser::launch(&bin).await;
    b.call("Page.navigate", json!({"url": app.url("/")})).await;
    give_name(&mut b, "Ann").await;
    let form = card("pending", "fm-offsite");
    b.until("the form", &format!("!!{form}?.querySelector('form')"))
        .await;

    // Each field is the control its schema asks for, under its label, with its description;
    // the message first, as text.
    assert_eq!(
        b.eval(&format!(
            "{form}.querySelector('.form-message').textContent"
        ))
        .await,
        "Book the team offsite.\nPick what suits you."
    );
    assert_eq!(
        b.eval(&format!(
            "[...{form}.querySelectorAll('.form-field')].map(f => {{ \
               const c = f.querySelector('select, textarea, input'); \
               return f.querySelector('.field-label').textContent + '=' + \
                 (c.tagName === 'INPUT' ? c.type : c.tagName.toLowerCase()) + \
                 ':' + f.querySelectorAll('input, select, textarea').length; }})"
        ))
        .await,
        json!([
            "How many people*=number:1",
            "City*=radio:3",
            "Venue=select:1",
            "Extras=checkbox:3",
            "First day=text:1",
            "Contact e-mail*=email:1",
            "Agenda link=url:1",
            "Catering=checkbox:1",
            "Booking code=text:1",
            "Notes=textarea:1"
        ])
    );
    let people = field(&form, "How many people");
    assert_eq!(
        b.eval(&format!(
            "(() => {{ const f = {people}; const i = f.querySelector('input'); \
               return [f.querySelector('label').htmlFor === i.id, i.min, i.max, i.step, \
                 i.getAttribute('aria-required'), \
                 i.getAttribute('aria-describedby').split(' ').map(id => document.getElementById(id).innerText)]; }})()"
        ))
        .await,
        json!([true, "2", "40", "1", "true", ["Including you\n\nA whole number from 2 to 40", ""]])
    );
    // Option titles are labels, option values are what is sent; a select past five options.
    assert_eq!(
        b.eval(&format!(
            "[...{}.querySelectorAll('label.option')].map(l => l.textContent.trim() + '=' + l.querySelector('input').value)",
            field(&form, "City")
        ))
        .await,
        json!(["Berlin=ber", "Lisbon=lis", "Porto=opo"])
    );
    assert_eq!(
        b.eval(&format!(
            "[...{}.querySelectorAll('option')].map(o => o.value + ':' + o.textContent).join(',')",
            field(&form, "Venue")
        ))
        .await,
        ":—,a:Hall A,b:Hall B,c:Hall C,d:Hall D,e:Hall E,f:<img src=x onerror=\"window.__xss=1\">"
    );
    assert_eq!(
        b.eval(&format!(
            "{}.querySelector('input').checked",
            field(&form, "Catering")
        ))
        .await,
        true,
        "a default is filled in"
    );

    // Count what the page sends from here on.
    b.eval(COUNT_ANSWERS).await;
    // Typed with the keyboard: a number above the maximum.
    b.eval(&format!("{people}.querySelector('input').focus()"))
        .await;
    b.call("Input.insertText", json!({"text": "50"})).await;
    for kind in ["rawKeyDown", "keyUp"] {
        b.call(
            "Input.dispatchKeyEvent",
            json!({"type": kind, "key": "Tab", "code": "Tab", "windowsVirtualKeyCode": 9}),
        )
        .await;
    }
    for (name, value) in [
        ("Venue", "c"),
        ("First day", "2026-12-01"),
        ("Contact e-mail", "ann@example.com"),
        ("Booking code", "abc"),
        ("Notes", "Window seats,\nplease"),
    ] {
        assert_eq!(
            b.eval(&fill(&form, "fm-offsite", name, value)).await,
            true,
            "{name}"
        );
    }
    b.eval(&format!(
        "(() => {{ const c = {form}; \
           c.querySelector('input[type=radio][value=lis]').click(); \
           c.querySelector('input[type=checkbox][value=dinner]').click(); \
           c.querySelector('input[type=checkbox][value=boat]').click(); }})()"
    ))
    .await;
    // Leaving the number (with Tab, above) shows what is wrong with it, next to it.
    assert_eq!(
        b.eval(&format!(
            "(() => {{ const f = {people}; const i = f.querySelector('input'); \
               return [i.getAttribute('aria-invalid'), f.querySelector('.field-error').textContent]; }})()"
        ))
        .await,
        json!(["true", "Must be at most 40."])
    );
    // A screen reader announces the field, that it is required and wrong, and why.
    assert_eq!(
        accessible(&mut b, &format!("{people}.querySelector('input')")).await,
        json!({"role": "spinbutton", "name": "How many people", "invalid": "true", "required": true,
               "description": "Including you A whole number from 2 to 40 Must be at most 40."})
    );
    assert_eq!(
        accessible(
            &mut b,
            &format!("{}.querySelector('fieldset')", field(&form, "City"))
        )
        .await,
        json!({"role": "radiogroup", "name": "City", "invalid": "false", "required": true,
               "description": null})
    );
    // Submit sends nothing while a field is wrong, and takes the keyboard to it.
    let submit = format!(
        "[...{form}.querySelectorAll('button')].find(x => x.textContent === 'Submit').click()"
    );
    b.eval(&submit).await;
    assert_eq!(
        b.eval("[window.__sent.length, document.activeElement.type]")
            .await,
        json!([0, "number"])
    );
    assert_eq!(
        b.eval(&format!("{form}.querySelector('.notice').textContent"))
            .await,
        "One field needs attention."
    );
    b.screenshots("inbox-form").await;
    let (_, still) = app.get("/v1/interactions/fm-offsite").await;
    assert_eq!(still["status"], "pending");

    // Fixed as it is typed.
    b.eval(&fill(&form, "fm-offsite", "How many people", "12"))
        .await;
    assert_eq!(
        b.eval(&format!(
            "(() => {{ const f = {people}; return [f.querySelector('input').hasAttribute('aria-invalid'), f.querySelector('.field-error').textContent]; }})()"
        ))
        .await,
        json!([false, ""])
    );

    // What only the server can check comes back as a 400 naming the field: shown next to it.
    b.eval(&submit).await;
    let code = field(&form, "Booking code");
    b.until(
        "the server's refusal next to its field",
        &format!("{code}.querySelector('.field-error').textContent !== ''"),
    )
    .await;
    assert_eq!(
        b.eval(&format!(
            "[{code}.querySelector('input').getAttribute('aria-invalid'), {code}.querySelector('.field-error').textContent, document.activeElement === {code}.querySelector('input')]"
        ))
        .await,
        json!(["true", "Must match the pattern \\A[A-Z]{3}\\z.", true])
    );
    let (_, still) = app.get("/v1/interactions/fm-offsite").await;
    assert_eq!(still["status"], "pending");

    b.eval(&fill(&form, "fm-offsite", "Booking code", "ABC"))
        .await;
    b.eval(&submit).await;
    let (status, out) = app.get("/v1/interactions/fm-offsite/wait").await;
    assert_eq!(status, StatusCode::OK, "{out}");
    // Values, not titles; the empty link left out; in the schema's order.
    assert_eq!(
        out["result"],
        json!({"action": "accept", "content": {"people": 12, "city": "lis", "venue": "c",
            "extras": ["dinner", "boat"], "start": "2026-12-01", "contact": "ann@example.com",
            "catering": true, "code": "ABC", "notes": "Window seats,\nplease"}})
    );
    assert_eq!(out["resolution"]["by"], "Ann");
    assert_eq!(out["resolution"]["via"], "desktop");
    assert_eq!(
        b.eval("window.__sent.length").await,
        2,
        "one refused, one accepted"
    );

    // The recent item says what was answered, as people read it.
    let recent = card("recent", "fm-offsite");
    b.until("the answered form", &format!("!!{recent}")).await;
    assert_eq!(
        b.eval(&format!(
            "[...{recent}.querySelectorAll('.answer')].map(p => p.textContent)"
        ))
        .await,
        json!([
            "How many people: 12",
            "City: Lisbon",
            "Venue: Hall C",
            "Extras: Dinner, Boat trip",
            "First day: 2026-12-01",
            "Contact e-mail: ann@example.com",
            "Catering: Yes",
            "Booking code: ABC",
            "Notes: Window seats,\nplease"
        ])
    );
    assert!(
        b.eval(&format!("{recent}.textContent"))
            .await
            .as_str()
            .unwrap()
            .contains("Answered by Ann via desktop")
    );
    assert_eq!(
        b.eval("typeof window.__xss + ':' + document.querySelectorAll('main img').length")
            .await,
        "undefined:0"
    );
    b.screenshots("inbox-form-resolved").await;
    drop(b);
    app.stop().await;
}

async fn a_form_can_be_declined_with_a_reason() {
    let bin = chromium().expect("Chromium (checked before the test)");
    let app = spawn_app().await;
    let (status, body) = app
        .post(
            "/v1/interactions",
            &json!({"id": "fm-prompt", "kind": "prompt", "multiline": true,
                    "message": "What should the release notes say?"}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    let mut b = Browser::launch(&bin).await;
    b.call("Page.navigate", json!({"url": app.url("/")})).await;
    give_name(&mut b, "Bo").await;
    let prompt = card("pending", "fm-prompt");
    b.until(
        "the prompt",
        &format!("!!{prompt}?.querySelector('textarea')"),
    )
    .await;
    // A prompt is one required text area: left empty, Send answer says so and sends nothing.
    b.eval(&format!(
        "[...{prompt}.querySelectorAll('button')].find(x => x.textContent === 'Send answer').click()"
    ))
    .await;
    assert_eq!(
        b.eval(&format!(
            "{prompt}.querySelector('.field-error').textContent"
        ))
        .await,
        "Required."
    );
    let (_, still) = app.get("/v1/interactions/fm-prompt").await;
    assert_eq!(still["status"], "pending");

    // Decline, with a reason for the agent.
    b.eval(&format!(
        "(() => {{ const c = {prompt}; c.querySelector('input.reason').value = 'Ask me after the freeze'; \
           [...c.querySelectorAll('button')].find(x => x.textContent === 'Decline').click(); }})()"
    ))
    .await;
    let (status, out) = app.get("/v1/interactions/fm-prompt/wait").await;
    assert_eq!(status, StatusCode::OK, "{out}");
    assert_eq!(
        out["result"],
        json!({"action": "decline", "message": "Ask me after the freeze"})
    );
    assert_eq!(out["resolution"]["outcome"], "denied");
    assert_eq!(out["resolution"]["by"], "Bo");
    let recent = card("recent", "fm-prompt");
    b.until(
        "the declined prompt",
        &format!("({recent}?.textContent || '').includes('Declined by Bo via desktop')"),
    )
    .await;
    assert!(
        b.eval(&format!("{recent}.textContent"))
            .await
            .as_str()
            .unwrap()
            .contains("“Ask me after the freeze”")
    );
    drop(b);
    app.stop().await;
}

/// A free-text prompt reads as a question (not a form): labelled QUESTION, the question itself
/// in place of a field label, no "required" legend, "Send answer"; Enter in its box answers it,
/// and the answered card shows the answer under the question, who gave it and when. A form of
/// several fields keeps its labels, legend and Submit.
async fn a_free_text_prompt_is_a_question_answered_in_one_step() {
    let bin = chromium().expect("Chromium (checked before the test)");
    let app = spawn_app().await;
    for body in [
        json!({"id": "fp-color", "kind": "prompt", "message": "What is your favorite color?"}),
        json!({"id": "fp-form", "kind": "form", "message": "Book the offsite",
               "schema": offsite_schema()}),
    ] {
        let (status, out) = app.post("/v1/interactions", &body).await;
        assert_eq!(status, StatusCode::CREATED, "{out}");
    }
    let mut b = Browser::launch(&bin).await;
    b.call("Page.navigate", json!({"url": app.url("/")})).await;
    give_name(&mut b, "Bo").await;
    let prompt = card("pending", "fp-color");
    let form = card("pending", "fp-form");
    b.until("both cards", &format!("!!{prompt} && !!{form}"))
        .await;
    let seen = b
        .eval(&format!(
            "(() => {{ const c = {prompt}; const shown = (e) => !!e && e.offsetWidth > 1 && e.offsetHeight > 1; \
               return {{ kind: c.querySelector('.kind').innerText, \
                 question: c.querySelector('.question-text')?.innerText, \
                 labels: [...c.querySelectorAll('label, legend')].filter(shown).map(e => e.innerText), \
                 accessible: c.querySelector('input[type=text]')?.labels[0]?.textContent, \
                 placeholder: c.querySelector('input[type=text]')?.placeholder, \
                 legend: shown(c.querySelector('.form-legend')), \
                 buttons: [...c.querySelectorAll('button')].filter(shown).map(e => e.innerText) }}; }})()"
        ))
        .await;
    assert_eq!(
        seen,
        json!({"kind": "QUESTION", "question": "What is your favorite color?", "labels": [],
               "accessible": "Your answer", "placeholder": "Your answer", "legend": false,
               "buttons": ["Send answer", "Decline"]})
    );
    // The form of two fields is still a form.
    let other = b
        .eval(&format!(
            "(() => {{ const c = {form}; return {{ kind: c.querySelector('.kind').innerText, \
               legend: !!c.querySelector('.form-legend'), \
               submit: [...c.querySelectorAll('button')].some(e => e.innerText === 'Submit') }}; }})()"
        ))
        .await;
    assert_eq!(
        other,
        json!({"kind": "FORM", "legend": true, "submit": true})
    );
    b.screenshots("inbox-prompt").await;

    // Typed, then Enter: answered, with nothing more to press.
    b.eval(&format!(
        "(() => {{ const i = {prompt}.querySelector('input[type=text]'); i.value = 'Teal'; \
           i.dispatchEvent(new Event('input', {{ bubbles: true }})); \
           i.form.requestSubmit(); }})()"
    ))
    .await;
    let (status, out) = app.get("/v1/interactions/fp-color/wait").await;
    assert_eq!(status, StatusCode::OK, "{out}");
    assert_eq!(
        out["result"],
        json!({"action": "accept", "content": {"answer": "Teal"}})
    );
    let recent = card("recent", "fp-color");
    b.until("the answered question", &format!("!!{recent}"))
        .await;
    let done = b
        .eval(&format!(
            "(() => {{ const c = {recent}; return {{ kind: c.querySelector('.kind').innerText, \
               outcome: c.querySelector('.outcome').innerText, \
               asked: c.querySelector('.form-message').innerText, \
               answers: [...c.querySelectorAll('.answer')].map(e => e.innerText) }}; }})()"
        ))
        .await;
    assert_eq!(done["kind"], "QUESTION");
    assert!(
        done["outcome"]
            .as_str()
            .unwrap()
            .starts_with("Answered by Bo via desktop at "),
        "{done}"
    );
    assert_eq!(done["asked"], "What is your favorite color?");
    assert_eq!(done["answers"], json!(["Teal"]));
    b.screenshots("inbox-prompt-answered").await;
    drop(b);
    app.stop().await;
}

/// Telegram and Feishu link a tool call they had to cut to `<public_url>/#<id>`: the inbox
/// marks that item, scrolls to it and shows all of it, pending or answered.
async fn a_link_to_an_item_shows_it_whole() {
    let bin = chromium().expect("Chromium (checked before the test)");
    let app = spawn_app().await;
    let long: String = (1..=400)
        .map(|n| format!("echo step {n} && "))
        .collect::<String>()
        + "echo THE-END";
    app.create_bash("ln-long", &long).await;
    app.create_bash("ln-old", &format!("{long} # answered"))
        .await;
    let (status, _) = app
        .respond(
            "ln-old",
            &json!({"decision": "deny", "message": "too long", "by": "eve"}),
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    let mut b = Browser::launch(&bin).await;
    b.call("Page.navigate", json!({"url": app.url("/#ln-long")}))
        .await;
    give_name(&mut b, "Dana").await;
    let linked = card("pending", "ln-long");
    b.until(
        "the linked pending item, whole",
        &format!("{linked}?.classList.contains('linked') && {linked}.querySelector('.display').innerText.includes('THE-END')"),
    )
    .await;
    b.screenshots("inbox-linked").await;
    // Whole: nothing left to expand.
    assert_eq!(
        b.eval(&format!(
            "[...{linked}.querySelectorAll('.display button')].map(b => b.textContent)"
        ))
        .await,
        json!([])
    );
    // Another link, to an answered one: it is marked in the recent list, shown whole too,
    // and the first is no longer marked.
    b.eval("location.hash = '#ln-old'").await;
    let old = card("recent", "ln-old");
    b.until(
        "the linked answered item, whole",
        &format!("{old}?.classList.contains('linked') && {old}.querySelector('.display')?.innerText.includes('THE-END')"),
    )
    .await;
    assert_eq!(
        b.eval("[...document.querySelectorAll('.card.linked')].map(c => c.dataset.id)")
            .await,
        json!(["ln-old"])
    );
    // A link to nothing known changes nothing.
    b.eval("location.hash = '#no-such-item'").await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(
        b.eval("document.querySelectorAll('.card').length").await,
        json!(2)
    );
    app.stop().await;
}

/// The result of a `tools/call` answered as an event stream (or as JSON).
async fn tool_result(resp: reqwest::Response) -> Value {
    let text = resp.text().await.unwrap();
    text.lines()
        .filter_map(|l| l.strip_prefix("data:"))
        .filter_map(|d| serde_json::from_str::<Value>(d.trim()).ok())
        .chain(serde_json::from_str::<Value>(&text).ok())
        .find(|m| m.get("result").is_some())
        .map(|m| m["result"].clone())
        .unwrap_or(Value::Null)
}

/// An MCP client (here plain JSON-RPC over the Streamable HTTP transport) asks for an
/// approval and for free text; both are answered in the browser, and the client gets the
/// answers as its tool results.
async fn an_mcp_clients_questions_are_answered_in_the_inbox() {
    let bin = chromium().expect("Chromium (checked before the test)");
    let app = spawn_app().await;
    let init = post_mcp(
        &app,
        None,
        &json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "codex", "version": "0.9"}}})
        .to_string(),
        None,
    )
    .await;
    assert_eq!(init.status(), StatusCode::OK);
    let session = init.headers()["mcp-session-id"]
        .to_str()
        .unwrap()
        .to_string();
    let _ = init.text().await;
    let ready = post_mcp(
        &app,
        None,
        &json!({"jsonrpc": "2.0", "method": "notifications/initialized"}).to_string(),
        Some(&session),
    )
    .await;
    assert!(ready.status().is_success());
    let call = |id: u64, tool: &str, arguments: Value| {
        let (app_client, url, session) = (app.client.clone(), app.url("/mcp"), session.clone());
        let body = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": {"name": tool, "arguments": arguments}});
        tokio::spawn(async move {
            let resp = app_client
                .post(url)
                .header("Content-Type", "application/json")
                .header("Accept", "application/json, text/event-stream")
                .header("Mcp-Session-Id", session)
                .header("MCP-Protocol-Version", "2025-06-18")
                .body(body.to_string())
                .send()
                .await
                .unwrap();
            tool_result(resp).await
        })
    };
    let approval = call(
        2,
        "request_approval",
        json!({"action": "Deploy build 1234 to production", "details": {"command": "deploy --prod 1234"}, "id": "mcp-deploy"}),
    );
    let prompt = call(
        3,
        "ask_human",
        json!({"question": "Which release name?", "id": "mcp-name"}),
    );
    let mut b = Browser::launch(&bin).await;
    b.call("Page.navigate", json!({"url": app.url("/")})).await;
    give_name(&mut b, "Ines").await;
    let deploy = card("pending", "mcp-deploy");
    let name = card("pending", "mcp-name");
    b.until(
        "both questions, with who asks",
        &format!("!!{deploy} && !!{name}?.querySelector('.body input, .body textarea') && {deploy}.innerText.includes('codex/0.9')"),
    )
    .await;
    b.eval(&format!("{deploy}.querySelector('button.primary').click()"))
        .await;
    let r = approval.await.unwrap();
    assert_eq!(r["structuredContent"]["status"], "approved", "{r}");
    assert_eq!(r["structuredContent"]["via"], "desktop", "{r}");
    assert_eq!(r["structuredContent"]["by"], "Ines", "{r}");
    b.eval(&format!(
        "(() => {{ const c = {name}; const f = c.querySelector('.body input, .body textarea'); f.value = 'Aurora'; \
           f.dispatchEvent(new Event('input')); \
           [...c.querySelectorAll('button')].find(x => x.textContent === 'Send answer').click(); }})()"
    ))
    .await;
    let r = prompt.await.unwrap();
    assert_eq!(r["structuredContent"]["answer"], "Aurora", "{r}");
    assert_eq!(
        r["content"][0]["text"], "Ines via desktop answered: Aurora",
        "{r}"
    );
    app.stop().await;
}

/// A `pattern` that makes a backtracking engine take time exponential in the text: `(a+)+$`
/// against 40 `a`s and a `!` is hours of work for the browser's RegExp, and nothing for the
/// server's linear-time one. The page must stay responsive and still say what is wrong.
async fn an_agents_pattern_is_checked_by_the_server_not_the_page() {
    let bin = chromium().expect("Chromium (checked before the test)");
    let app = spawn_app().await;
    let (status, body) = app
        .post(
            "/v1/interactions",
            &json!({"id": "fm-redos", "kind": "form", "message": "A word",
                    "schema": {"type": "object", "required": ["word"], "properties": {
                        "word": {"type": "string", "title": "Word", "pattern": "(a+)+$"}}}}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    let mut b = Browser::launch(&bin).await;
    b.call("Page.navigate", json!({"url": app.url("/")})).await;
    give_name(&mut b, "Ann").await;
    let form = card("pending", "fm-redos");
    b.until("the form", &format!("!!{form}?.querySelector('form')"))
        .await;
    // Typed and left (input and change: the page checks the field), then submitted. Each
    // call returns only once the page has run it: a page stuck in its RegExp never answers.
    let evil = format!("{}!", "a".repeat(40));
    assert_eq!(b.eval(&fill(&form, "fm-redos", "Word", &evil)).await, true);
    let submit = format!(
        "[...{form}.querySelectorAll('button')].find(x => x.textContent === 'Send answer').click()"
    );
    b.eval(&submit).await;
    let word = field(&form, "Word");
    b.until(
        "the server's refusal next to its field",
        &format!("{word}.querySelector('.field-error').textContent !== ''"),
    )
    .await;
    assert_eq!(
        b.eval(&format!(
            "[{word}.querySelector('input').getAttribute('aria-invalid'), {word}.querySelector('.field-error').textContent]"
        ))
        .await,
        json!(["true", "Must match the pattern (a+)+$."])
    );
    assert_eq!(
        app.get("/v1/interactions/fm-redos").await.1["status"],
        "pending"
    );
    b.eval(&fill(&form, "fm-redos", "Word", "aaa")).await;
    b.eval(&submit).await;
    let (status, out) = app.get("/v1/interactions/fm-redos/wait").await;
    assert_eq!(status, StatusCode::OK, "{out}");
    assert_eq!(
        out["result"],
        json!({"action": "accept", "content": {"word": "aaa"}})
    );
    drop(b);
    app.stop().await;
}

async fn allow_similar_grants_a_rule_shown_and_revoked_in_the_inbox() {
    let bin = chromium().expect("Chromium (checked before the test)");
    let app = spawn_with(|s| {
        s.policy = vec![imrelay::config::policy::PolicyRuleSettings::new(
            "git-read",
            imrelay::interaction::policy::Decision::Allow,
            &["Bash(git status:*)"],
        )];
    })
    .await;
    let create = |id: &'static str, command: &'static str| {
        let app = &app;
        async move {
            let (status, body) = app
                .post(
                    "/v1/interactions",
                    &json!({"id": id, "tool_name": "Bash", "input": {"command": command},
                            "session": "s-1", "agent": "claude-code", "cwd": "/srv/shop"}),
                )
                .await;
            assert_eq!(status, StatusCode::CREATED, "{body}");
            body
        }
    };
    create("sim-1", "npm run test -- --watch").await;
    let mut b = Browser::launch(&bin).await;
    b.call("Page.navigate", json!({"url": app.url("/")})).await;
    give_name(&mut b, "Dana").await;
    let c = card("pending", "sim-1");
    b.until("the pending card", &format!("{c} !== null")).await;
    b.eval(&format!(
        "[...{c}.querySelectorAll('button')].find(b => b.textContent === 'Allow similar…').click()"
    ))
    .await;
    b.until(
        "the proposed rule",
        &format!("{c}.querySelector('.grant-rule').value === 'Bash(npm run test:*)'"),
    )
    .await;
    assert_eq!(
        b.eval(&format!(
            "[...{c}.querySelectorAll('.grant-scope option')].map(o => o.textContent)"
        ))
        .await,
        json!(["for this session", "until revoked"])
    );
    // A rule that cannot be read is refused where it was typed, and nothing is answered.
    b.eval(&format!(
        "{c}.querySelector('.grant-rule').value = 'Bash(npm run test'; \
         [...{c}.querySelectorAll('button')].find(b => b.textContent === 'Approve and allow similar').click()"
    ))
    .await;
    b.until(
        "the rule's error",
        &format!(
            "{c}.querySelector('.similar-box .error')?.textContent.includes('not closed') === true"
        ),
    )
    .await;
    // Said under the box it is about, without the field's path before it.
    let said = b
        .eval(&format!(
            "{c}.querySelector('.similar-box .error').textContent"
        ))
        .await;
    assert!(
        said.as_str()
            .unwrap()
            .starts_with("\"Bash(npm run test\" at character 17"),
        "{said}"
    );
    b.screenshots("inbox-allow-similar").await;
    let (_, still) = app.get("/v1/interactions/sim-1").await;
    assert_eq!(still["status"], "pending");
    b.eval(&format!(
        "{c}.querySelector('.grant-rule').value = 'Bash(npm run test:*)'; \
         [...{c}.querySelectorAll('button')].find(b => b.textContent === 'Approve and allow similar').click()"
    ))
    .await;
    b.until(
        "the answered card and the grant",
        "document.querySelector('#recent [data-id=\"sim-1\"]') !== null && \
         document.querySelectorAll('#grants .card.grant').length === 1",
    )
    .await;
    assert_eq!(
        b.eval("document.querySelector('#grants .card.grant .tool').textContent")
            .await,
        json!("Bash(npm run test:*)")
    );
    let line = b
        .eval("document.querySelector('#grants .card.grant .meta').textContent")
        .await;
    assert!(
        line.as_str().unwrap().starts_with(
            "This session · route default, claude-code, in /srv/shop, session s-1 · by Dana via desktop · until "
        ),
        "{line}"
    );
    // The next matching call, and one a configured rule allows, never reach a person: the
    // recent list says which rule allowed them.
    create("sim-2", "npm run test").await;
    create("sim-3", "git status").await;
    let recent = |id: &str| {
        format!(
            "{}?.querySelector('.outcome')?.textContent",
            card("recent", id)
        )
    };
    b.until(
        "both decisions in the recent list",
        &format!(
            "{} !== undefined && {} !== undefined",
            recent("sim-2"),
            recent("sim-3")
        ),
    )
    .await;
    let said = b.eval(&recent("sim-2")).await;
    assert!(
        said.as_str()
            .unwrap()
            .starts_with("Allowed by policy rule grant Bash(npm run test:*) at "),
        "{said}"
    );
    let said = b.eval(&recent("sim-3")).await;
    assert!(
        said.as_str()
            .unwrap()
            .starts_with("Allowed by policy rule git-read at "),
        "{said}"
    );
    assert_eq!(
        b.eval("document.querySelectorAll('#pending .card').length")
            .await,
        json!(0)
    );
    b.screenshots("inbox-grants").await;
    // Revoked: the list empties, and the next call waits for a person.
    b.eval("[...document.querySelectorAll('#grants button')].find(b => b.textContent === 'Revoke').click()").await;
    b.until("the grant to go", "document.querySelectorAll('#grants .card.grant').length === 0 && !document.getElementById('grants-empty').hidden").await;
    let (_, listed) = app.get("/v1/grants").await;
    assert_eq!(listed["grants"], json!([]));
    let (_, audit) = app.get("/v1/audit?limit=1000").await;
    let revoked = audit["entries"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["action"] == "revoked")
        .cloned()
        .unwrap();
    assert_eq!(
        (revoked["actor"].as_str(), revoked["channel"].as_str()),
        (Some("Dana"), Some("desktop"))
    );
    assert_eq!(create("sim-4", "npm run test").await["status"], "pending");
    app.stop().await;
}

/// A request from Codex's hook: Codex shown as the agent, the command as a command, and no
/// "Edit & approve…" (Codex cannot run an edited input); approving it answers the hook.
async fn a_codex_request_offers_no_editor() {
    let bin = chromium().expect("Chromium (checked before the test)");
    let app = spawn_app().await;
    let client = app.client.clone();
    let url = app.url("/v1/hooks/codex");
    let hook = tokio::spawn(async move {
        let body = fixture("codex/permission_request.json");
        split(client.post(url).json(&body).send().await.unwrap()).await
    });
    let id = pending_one(&app).await["id"].as_str().unwrap().to_string();
    let mut b = Browser::launch(&bin).await;
    b.call("Page.navigate", json!({"url": app.url("/")})).await;
    give_name(&mut b, "Dana").await;
    let codex = card("pending", &id);
    b.until(
        "the card's tool call",
        &format!("!!{codex} && !!{codex}.querySelector('.display .label')"),
    )
    .await;
    let text = b.eval(&format!("{codex}.innerText")).await;
    let text = text.as_str().unwrap();
    for shown in [
        "codex",
        "/tmp/cx/a1/project",
        "echo ok > proof.txt",
        "May I write the proof file?",
    ] {
        assert!(text.contains(shown), "{shown}: {text}");
    }
    assert_eq!(
        b.eval(&format!(
            "[...{codex}.querySelectorAll('button')].filter(x => x.offsetParent !== null).map(x => x.textContent)"
        ))
        .await,
        json!(["Approve", "Allow similar…", "Deny"])
    );
    b.screenshots("inbox-codex").await;
    b.eval(&format!(
        "[...{codex}.querySelectorAll('button')].find(x => x.textContent === 'Approve').click()"
    ))
    .await;
    let (status, out) = hook.await.unwrap();
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        out,
        json!({"hookSpecificOutput": {"hookEventName": "PermissionRequest", "decision": {"behavior": "allow"}}})
    );
}

async fn many_are_filtered_selected_and_answered_at_once() {
    let bin = chromium().expect("Chromium (checked before the test)");
    let app = spawn_app().await;
    for (id, session, command) in [
        ("mb-1", "s-1", "npm test"),
        ("mb-2", "s-1", "npm run lint"),
        ("mb-3", "s-1", "cargo build"),
        ("mb-other", "s-2", "make deploy"),
    ] {
        let (status, body) = app
            .post(
                "/v1/interactions",
                &json!({"id": id, "tool_name": "Bash", "session": session, "agent": "claude-code",
                        "cwd": "/home/dev/shop", "input": {"command": command}}),
            )
            .await;
        assert_eq!(status, StatusCode::CREATED, "{body}");
    }
    let (status, _) = app
        .post(
            "/v1/interactions",
            &json!({"id": "mb-q", "tool_name": "AskUserQuestion", "session": "s-1", "agent": "claude-code",
                    "input": {"questions": [{"question": "Which database?", "header": "DB",
                     "options": [{"label": "Postgres"}, {"label": "SQLite"}]}]}}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED);

    let mut b = Browser::launch(&bin).await;
    b.call("Page.navigate", json!({"url": app.url("/")})).await;
    give_name(&mut b, "Dana").await;
    b.until(
        "five pending cards",
        "document.querySelectorAll('#pending .card').length === 5",
    )
    .await;
    // The filters offer what is pending.
    assert_eq!(
        b.eval("[...document.querySelectorAll('#f-session option')].map(o => o.textContent)")
            .await,
        json!(["any session", "s-1", "s-2"])
    );
    assert_eq!(
        b.eval("[...document.querySelectorAll('#f-kind option')].map(o => o.textContent)")
            .await,
        json!(["any kind", "approval", "question"])
    );
    // No routes configured: no route filter.
    assert_eq!(
        b.eval("document.getElementById('f-route').hidden").await,
        json!(true)
    );
    // One session only, all of it ticked.
    b.eval(
        "const f = document.getElementById('f-session'); f.value = 's-1'; \
         f.dispatchEvent(new Event('change')); \
         const a = document.getElementById('pick-all'); a.checked = true; a.dispatchEvent(new Event('change'))",
    )
    .await;
    assert_eq!(
        b.eval(
            "[[...document.querySelectorAll('#pending .card')].filter(c => !c.hidden).map(c => c.dataset.id).sort(), \
              document.getElementById('bulk-shown').textContent, \
              document.getElementById('bulk-approve').textContent, \
              document.getElementById('bulk-deny').textContent]"
        )
        .await,
        json!([["mb-1", "mb-2", "mb-3", "mb-q"], "4 of 5 shown", "Approve selected (3)", "Deny selected (4)"])
    );
    b.screenshots("inbox-bulk-selected").await;

    // Untick one; approve the rest: the question is left for its own card.
    b.eval(&format!(
        "const p = {}.querySelector('.pick'); p.checked = false; p.dispatchEvent(new Event('change'))",
        card("pending", "mb-3")
    ))
    .await;
    b.eval("document.getElementById('bulk-approve').click()")
        .await;
    b.until(
        "the approved cards to move to Recent, and the answer's summary",
        "!!document.querySelector('#recent [data-id=\"mb-1\"]') && !!document.querySelector('#recent [data-id=\"mb-2\"]') \
         && document.getElementById('bulk-notice').textContent !== ''",
    )
    .await;
    let said = b
        .eval("document.getElementById('bulk-notice').textContent")
        .await;
    assert!(
        said.as_str().unwrap().starts_with("Approved 2 requests."),
        "{said}"
    );
    assert!(
        said.as_str()
            .unwrap()
            .contains("1 question or form left ticked"),
        "{said}"
    );
    for id in ["mb-1", "mb-2"] {
        let (_, i) = app.get(&format!("/v1/interactions/{id}")).await;
        assert_eq!(i["resolution"]["outcome"], "allowed", "{i}");
        assert_eq!(i["resolution"]["by"], "Dana");
        assert_eq!(i["resolution"]["via"], "desktop");
    }
    for id in ["mb-3", "mb-q", "mb-other"] {
        let (_, i) = app.get(&format!("/v1/interactions/{id}")).await;
        assert_eq!(i["status"], "pending", "{id}: {i}");
    }
    b.screenshots("inbox-bulk-approved").await;

    // Deny what is still ticked (the question), with one reason.
    b.eval(
        "document.getElementById('bulk-reason').value = 'Not in this sprint'; \
         document.getElementById('bulk-deny').click()",
    )
    .await;
    b.until(
        "the declined question in Recent",
        "!!document.querySelector('#recent [data-id=\"mb-q\"]')",
    )
    .await;
    let (_, q) = app.get("/v1/interactions/mb-q/wait").await;
    assert_eq!(q["resolution"]["outcome"], "denied", "{q}");
    assert_eq!(q["result"]["message"], "Not in this sprint");
    // The other session was never shown, so never answered.
    let (_, other) = app.get("/v1/interactions/mb-other").await;
    assert_eq!(other["status"], "pending");
    assert_eq!(
        b.eval("document.getElementById('bulk-deny').textContent")
            .await,
        "Deny selected (0)"
    );
}
