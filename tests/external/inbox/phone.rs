//! The phone's safeguards in a real browser: a passkey (Chromium's virtual authenticator over
//! the DevTools protocol's `WebAuthn` domain) registered in the inbox answers an approval
//! whose route needs one (`step_up`), while a tap on the route's Telegram copy (the fake Bot
//! API), an API answer without an assertion and a replayed assertion are refused, and a second
//! passkey needs an assertion with the first; and "desk first": with the inbox shown and
//! focused, a route's direct message, its ntfy copy (the fake checking ntfy's publish format)
//! and its Web Push (the fake push service) wait and are never sent when the approval is
//! answered at the desk, and with the inbox gone they are sent at once.

use imrelay::config::OperatorToken;
use imrelay::config::Secret;
use imrelay::config::teams::{PerChannel, PersonSettings, RouteSettings, written};

use super::*;
use crate::ntfy_fake::FakeNtfy;
use crate::telegram_fake::{FakeTelegram, Person, tap};

const TOKEN: &str = "alice-token-0123456789abcdef";
/// The administrator's token (issues enrolment codes).
const ADMIN_TOKEN: &str = "admin-token-0123456789abcdef";
const ALICE: Person = Person {
    id: 1001,
    first_name: "Alice",
};
const GROUP: i64 = -2001;
const SECRET: &str = "webhook-secret_1";

/// Telegram against `tg` (webhook mode) posting to `GROUP` and Alice's private chat, Alice (Telegram 1001, the
/// inbox token labelled `alice-laptop`) its approver, and `route`.
fn phone_settings(s: &mut imrelay::config::Settings, tg: &FakeTelegram, route: RouteSettings) {
    s.outbox.retry_base_ms = 20;
    s.outbox.retry_max_secs = 1;
    let t = &mut s.telegram;
    t.enabled = true;
    t.token = Secret::new(crate::telegram_fake::TOKEN);
    // Alice's private chat (its id is hers) for the direct messages, and the group.
    t.chats = vec![ALICE.id, GROUP];
    t.approvers = vec![ALICE.id as u64];
    t.mode = imrelay::channels::telegram::Mode::Webhook;
    t.api_url = tg.url.clone();
    t.request_timeout_secs = 5;
    t.webhook_url = "https://relay.example.com/telegram/webhook".into();
    t.webhook_secret = Secret::new(SECRET);
    s.people = vec![PersonSettings {
        name: "alice".into(),
        ids: PerChannel::from([("telegram".into(), written(vec![ALICE.id]))]),
        operator: vec!["alice-laptop".into()],
        ..Default::default()
    }];
    s.routes = vec![route];
}

/// The ntfy publishes whose message contains `marker`.
fn published(ntfy: &FakeNtfy, marker: &str) -> usize {
    ntfy.published()
        .iter()
        .filter(|p| p.to_string().contains(marker))
        .count()
}

fn to_group() -> PerChannel {
    PerChannel::from([("telegram".into(), written(vec![GROUP]))])
}

/// The messages sent to `chat` whose text contains `marker`.
fn sent_to(tg: &FakeTelegram, chat: i64, marker: &str) -> Vec<Value> {
    tg.calls("sendMessage")
        .into_iter()
        .filter(|c| {
            c.params["chat_id"] == chat && c.params["text"].as_str().unwrap_or("").contains(marker)
        })
        .map(|c| c.params)
        .collect()
}

/// Alice taps `label` on the prompt `p` (sent to `GROUP`) through the webhook: the toast.
async fn tap_as_alice(app: &TestApp, tg: &FakeTelegram, p: &Value, label: &str) -> String {
    let data = p["reply_markup"]["inline_keyboard"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|row| row.as_array().unwrap().clone())
        .find(|b| b["text"] == label)
        .unwrap_or_else(|| panic!("no button {label:?} in {p}"))["callback_data"]
        .as_str()
        .unwrap()
        .to_string();
    let message = tg
        .calls("sendMessage")
        .into_iter()
        .find(|c| c.params == *p)
        .and_then(|c| c.message_id)
        .unwrap();
    let u = tg.next_update_id();
    let status = app
        .client
        .post(app.url("/telegram/webhook"))
        .header("X-Telegram-Bot-Api-Secret-Token", SECRET)
        .json(&tap(u, ALICE, GROUP, message, &data))
        .send()
        .await
        .unwrap()
        .status();
    assert_eq!(status, StatusCode::OK);
    let want = format!("cq-{u}");
    let calls = tg
        .wait_for("answerCallbackQuery", |c| {
            c.iter()
                .any(|c| c.params["callback_query_id"] == want.as_str())
        })
        .await;
    calls
        .iter()
        .find(|c| c.params["callback_query_id"] == want.as_str())
        .unwrap()
        .params["text"]
        .as_str()
        .unwrap_or("")
        .to_string()
}

/// JavaScript keeping the bodies the page sends to `/respond` in `window.__sent`.
const KEEP_ANSWERS: &str = "window.__sent = []; if (!window.__keeping) { window.__keeping = true; \
    const f0 = window.fetch; \
    window.fetch = (url, opts) => { if (String(url).endsWith('/respond')) window.__sent.push(opts.body); return f0(url, opts); }; }";

pub(super) async fn a_passkey_answers_a_step_up_approval_and_a_chat_tap_cannot() {
    let bin = chromium().expect("Chromium (checked before the test)");
    let tg = FakeTelegram::start().await;
    let mut app = spawn_with(|s| {
        phone_settings(
            s,
            &tg,
            RouteSettings {
                name: "prod".into(),
                places: to_group(),
                approvers: vec!["alice".into()],
                step_up: true,
                ..Default::default()
            },
        );
        s.auth.operator_tokens = vec![
            OperatorToken::labelled(TOKEN, "alice-laptop"),
            OperatorToken::new(ADMIN_TOKEN),
        ];
    })
    .await;
    app.create_bash("pk-1", "make deploy-prod").await;
    // An administrator issues the enrolment code Alice's first passkey needs.
    app.token = Some(ADMIN_TOKEN.into());
    let (status, issued) = app
        .post("/v1/passkeys/enrolment", &json!({"person": "alice"}))
        .await;
    assert_eq!(status, StatusCode::CREATED, "{issued}");
    let code = issued["code"].as_str().unwrap().to_string();
    app.token = Some(TOKEN.into());

    // A tap on the chat copy answers nothing: it says the answer needs a passkey, in the inbox.
    let prompt = eventually("the Telegram prompt", || {
        std::future::ready(sent_to(&tg, GROUP, "make deploy-prod").pop())
    })
    .await;
    let toast = tap_as_alice(&app, &tg, &prompt, "✅ Allow").await;
    assert!(
        toast.contains("needs a passkey") && toast.contains("inbox"),
        "{toast}"
    );
    // An API answer without an assertion is refused with its own code.
    let (status, body) = app.respond("pk-1", &json!({"decision": "allow"})).await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{body}");
    assert_eq!(body["error"]["code"], "step_up_required", "{body}");
    let (_, still) = app.get("/v1/interactions/pk-1").await;
    assert_eq!(still["status"], "pending", "{still}");

    // The inbox at `localhost` (WebAuthn refuses an IP address) with a virtual authenticator
    // that verifies its user.
    let mut b = Browser::launch(&bin).await;
    b.call("WebAuthn.enable", json!({"enableUI": false})).await;
    b.call(
        "WebAuthn.addVirtualAuthenticator",
        json!({"options": {"protocol": "ctap2", "transport": "internal", "hasResidentKey": true,
            "hasUserVerification": true, "isUserVerified": true,
            "automaticPresenceSimulation": true}}),
    )
    .await;
    let port = app.addr.port();
    b.call(
        "Page.navigate",
        json!({"url": format!("http://localhost:{port}/")}),
    )
    .await;
    b.until(
        "the token form",
        "document.getElementById('login')?.hidden === false",
    )
    .await;
    b.eval(&format!(
        "document.getElementById('token').value = {}; \
         document.querySelector('#login-form button[type=submit]').click()",
        json!(TOKEN)
    ))
    .await;
    let pending = card("pending", "pk-1");
    b.until("the pending card", &format!("{pending} !== null"))
        .await;
    assert!(
        b.eval(&format!("{pending}.textContent"))
            .await
            .as_str()
            .unwrap()
            .contains("needs a passkey")
    );
    // A passkey allows this call only: the card offers no grant and no "always" (the server
    // refuses both on a step_up approval), while Approve, Deny and Edit stay.
    let offered = b
        .eval(&format!(
            "[...{pending}.querySelectorAll('.actions button')].filter((x) => !x.closest('[hidden]')).map((x) => x.textContent).join('|')"
        ))
        .await;
    let offered = offered.as_str().unwrap_or_default();
    assert!(
        offered.contains("Approve") && offered.contains("Deny"),
        "{offered}"
    );
    assert!(
        !offered.contains("Allow similar") && !offered.contains("Always"),
        "{offered}"
    );
    // The first passkey: the inbox asks for the code, and refuses to go on without it or
    // with a wrong one, saying so.
    b.until(
        "the enrolment code field",
        "document.getElementById('passkey-code').hidden === false",
    )
    .await;
    b.eval(
        "document.getElementById('passkey-label').value = 'laptop'; \
         document.getElementById('passkey-register').click()",
    )
    .await;
    b.until(
        "the notice asking for the code",
        "document.getElementById('passkey-notice').textContent.includes('needs an enrolment code')",
    )
    .await;
    b.eval(
        "document.getElementById('passkey-code').value = 'ABCD-EFGH-JKMN-PQRS'; \
         document.getElementById('passkey-register').click()",
    )
    .await;
    b.until(
        "the wrong code refused",
        "document.getElementById('passkey-notice').textContent.includes('not one imrelay issued')",
    )
    .await;
    b.eval(&format!(
        "document.getElementById('passkey-code').value = {}; \
         document.getElementById('passkey-register').click()",
        json!(code)
    ))
    .await;
    b.until(
        "the registered passkey",
        "document.getElementById('passkey-count').textContent === '1'",
    )
    .await;
    let (_, listed) = app.get("/v1/passkeys").await;
    assert_eq!(listed["passkeys"][0]["person"], "alice", "{listed}");
    assert_eq!(listed["passkeys"][0]["label"], "laptop", "{listed}");
    b.screenshots("inbox-passkey").await;

    // Approving asks the authenticator, and the answer counts.
    b.eval(KEEP_ANSWERS).await;
    b.eval(&format!(
        "{pending}.querySelector('button.primary').click()"
    ))
    .await;
    b.until(
        "the answered card",
        &format!("{} !== null", card("recent", "pk-1")),
    )
    .await;
    let (_, done) = app.get("/v1/interactions/pk-1").await;
    assert_eq!(done["resolution"]["outcome"], "allowed", "{done}");
    assert_eq!(done["resolution"]["by"], "alice", "{done}");

    // The same assertion again, on another approval that needs one: refused.
    let sent = b.eval("window.__sent").await;
    let sent: Value = serde_json::from_str(sent[0].as_str().unwrap()).unwrap();
    assert!(
        sent["passkey"]["credential"]["response"]["signature"].is_string(),
        "{sent}"
    );
    app.create_bash("pk-2", "make deploy-prod-again").await;
    let (status, body) = app.respond("pk-2", &sent).await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{body}");
    assert_eq!(body["error"]["code"], "passkey_challenge_unknown", "{body}");
    let (_, still) = app.get("/v1/interactions/pk-2").await;
    assert_eq!(still["status"], "pending", "{still}");

    // A second passkey: the token alone cannot add one (a stolen token adds no thief's
    // passkey); with an assertion by the first, made in the page, its registration starts,
    // and the same assertion cannot start another.
    let (status, body) = app
        .post("/v1/passkeys/register", &json!({"label": "thief"}))
        .await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{body}");
    assert_eq!(body["error"]["code"], "passkey_required", "{body}");
    let proof = b
        .eval(
            "(async () => { const p = await apiJson('/v1/passkeys/assert', 'POST'); \
             const c = await navigator.credentials.get(requestOptions(p.options)); \
             return { challenge: p.challenge, credential: credentialJson(c) }; })()",
        )
        .await;
    let (status, body) = app
        .post(
            "/v1/passkeys/register",
            &json!({"label": "second", "passkey": proof}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert!(
        body["options"]["publicKey"]["challenge"].is_string(),
        "{body}"
    );
    let (status, body) = app
        .post(
            "/v1/passkeys/register",
            &json!({"label": "third", "passkey": proof}),
        )
        .await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{body}");
    assert_eq!(body["error"]["code"], "passkey_challenge_unknown", "{body}");

    // The enrolment code (issued, the wrong one refused, used), registration, the assertions
    // and the refusals are in the audit trail.
    let (_, audit) = app.get("/v1/audit?limit=1000").await;
    let passkey: Vec<String> = audit["entries"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["action"] == "passkey")
        .map(|e| e["outcome"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(
        passkey,
        [
            "code_issued",
            "code_refused",
            "code_used",
            "registered",
            "asserted",
            "refused",
            "asserted",
            "refused"
        ],
        "{audit}"
    );

    // A lost device: the administrator's token removes it (here the person's own token).
    let id = listed["passkeys"][0]["id"].as_str().unwrap().to_string();
    let (status, _) = app.delete(&format!("/v1/passkeys/{id}")).await;
    assert_eq!(status, StatusCode::OK);
    let (_, listed) = app.get("/v1/passkeys").await;
    assert_eq!(listed["passkeys"], json!([]), "{listed}");
    app.stop().await;
}

pub(super) async fn at_the_desk_the_phone_waits_and_away_it_rings_at_once() {
    desk_first(None).await;
}

/// The same with Web Push: the fake push service (`tests/external/push/`) holds the device
/// Alice subscribed, and gets nothing while she answers at the desk.
pub(super) async fn at_the_desk_no_push_is_sent_and_away_it_is_at_once() {
    desk_first(Some(super::push::FakePush::start(1))).await;
}

/// "Desk first" on Telegram's direct message, ntfy (the fake that checks ntfy's publish
/// format) and, with `push`, Web Push: Alice's inbox (her labelled token) shown and focused
/// holds them, and an answer there means none is ever sent; with the inbox gone, the next
/// one's go at once.
async fn desk_first(push: Option<super::push::FakePush>) {
    let bin = chromium().expect("Chromium (checked before the test)");
    let tg = FakeTelegram::start().await;
    let (ntfy, ntfy_url) = FakeNtfy::start("Bearer tk_test").await;
    const HOLD: u64 = 15;
    let mut app = spawn_with(|s| {
        let mut places = to_group();
        places.insert("ntfy".into(), written(vec!["phone-alice"]));
        phone_settings(
            s,
            &tg,
            RouteSettings {
                name: "desk".into(),
                places,
                direct: vec!["alice".into()],
                approvers: vec!["alice".into()],
                timeout_secs: Some(120),
                desk_first_secs: Some(HOLD),
                ..Default::default()
            },
        );
        s.auth.operator_tokens = vec![OperatorToken::labelled(TOKEN, "alice-laptop")];
        s.people[0]
            .ids
            .insert("ntfy".into(), written(vec!["alice-phone"]));
        s.ntfy.enabled = true;
        s.ntfy.api_url = ntfy_url.clone();
        s.ntfy.topics = vec!["phone-alice".into()];
        s.ntfy.token = Secret::new("tk_test");
        s.ntfy.person = "alice".into();
        if push.is_some() {
            s.push.enabled = true;
            s.push.subject = "mailto:ops@example.com".into();
        }
    })
    .await;
    app.token = Some(TOKEN.into());
    if let Some(fake) = &push {
        let (status, body) = app
            .post("/v1/push/devices", &fake.subscription(0, "alice's phone"))
            .await;
        assert_eq!(status, StatusCode::CREATED, "{body}");
    }
    let pushed = |marker: &'static str| {
        let fake = push.as_ref();
        async move {
            match fake {
                Some(f) => f
                    .received()
                    .await
                    .iter()
                    .filter(|r| r["status"] == 201 && r["payload"].to_string().contains(marker))
                    .count(),
                None => 0,
            }
        }
    };
    let mut b = Browser::launch(&bin).await;
    // Headless, a page has no focus unless emulated.
    b.call(
        "Emulation.setFocusEmulationEnabled",
        json!({"enabled": true}),
    )
    .await;
    b.call("Page.navigate", json!({"url": app.url("/")})).await;
    b.until(
        "the token form",
        "document.getElementById('login')?.hidden === false",
    )
    .await;
    b.eval(&format!(
        "document.getElementById('token').value = {}; \
         document.querySelector('#login-form button[type=submit]').click()",
        json!(TOKEN)
    ))
    .await;
    eventually("the inbox's presence", || async {
        let (_, p) = app.get("/v1/presence").await;
        (p["present"] == json!(["alice"])).then_some(())
    })
    .await;

    // At the desk: the group's copy goes at once, the phone's copies wait.
    app.create_bash("desk-1", "make at-the-desk").await;
    let (_, i) = app.get("/v1/interactions/desk-1").await;
    assert!(i["phones_at"].is_string(), "{i}");
    eventually("the group's copy", || {
        std::future::ready(sent_to(&tg, GROUP, "make at-the-desk").pop())
    })
    .await;
    let pending = card("pending", "desk-1");
    b.until(
        "the hold on the card",
        &format!(
            "{pending}?.querySelector('.deadline').textContent.includes('phones notified in')"
        ),
    )
    .await;
    b.eval(&format!(
        "{pending}.querySelector('button.primary').click()"
    ))
    .await;
    b.until(
        "the answered card",
        &format!("{} !== null", card("recent", "desk-1")),
    )
    .await;
    // Past the hold every job has run: no phone copy was ever sent.
    eventually_within(
        "the outbox to settle",
        Duration::from_secs(HOLD + 30),
        || async {
            let backlog = app.store.job_backlog().await.unwrap();
            backlog.iter().all(|(_, n)| *n == 0).then_some(())
        },
    )
    .await;
    assert!(sent_to(&tg, ALICE.id, "make at-the-desk").is_empty());
    assert_eq!(published(&ntfy, "make at-the-desk"), 0);
    if let Some(fake) = &push {
        assert_eq!(
            pushed("make at-the-desk").await,
            0,
            "{:?}",
            fake.received().await
        );
    }

    // Away (the tab left the inbox): the next one's phone copies go at once.
    b.call("Page.navigate", json!({"url": "about:blank"})).await;
    eventually("the presence to end", || async {
        let (_, p) = app.get("/v1/presence").await;
        (p["present"] == json!([])).then_some(())
    })
    .await;
    app.create_bash("desk-2", "make away-from-desk").await;
    let (_, i) = app.get("/v1/interactions/desk-2").await;
    assert!(i.get("phones_at").is_none(), "{i}");
    eventually("the direct message", || {
        std::future::ready(sent_to(&tg, ALICE.id, "make away-from-desk").pop())
    })
    .await;
    eventually("the ntfy copy", || {
        std::future::ready((published(&ntfy, "make away-from-desk") > 0).then_some(()))
    })
    .await;
    if push.is_some() {
        eventually("the push", || async {
            (pushed("make away-from-desk").await > 0).then_some(())
        })
        .await;
    }
    assert!(ntfy.refused().is_empty(), "{:?}", ntfy.refused());
    app.stop().await;
}
