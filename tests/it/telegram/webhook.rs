//! Webhook mode, health, and the channel's configuration.

use super::*;

// ---- webhook and health -------------------------------------------------------------------

#[tokio::test]
async fn webhook_mode_registers_checks_the_secret_and_ignores_duplicates() {
    let (app, tg) = start(Mode::Webhook).await;
    let set = tg.wait_n("setWebhook", 1).await;
    assert_eq!(
        set[0].params["url"],
        "https://relay.example.com/telegram/webhook"
    );
    assert_eq!(set[0].params["secret_token"], SECRET);
    assert_eq!(
        set[0].params["allowed_updates"],
        json!(["message", "callback_query"])
    );
    assert!(
        tg.calls("getUpdates").is_empty(),
        "webhook mode does not poll"
    );

    let id = create(
        &app,
        json!({"tool_name": "AskUserQuestion", "input": {"questions": [
            {"question": "Which toppings?", "header": "Toppings", "multiSelect": true,
             "options": [{"label": "Cheese"}, {"label": "Ham"}]}]}}),
    )
    .await;
    let p = prompt(&tg, PRIVATE, "Which toppings?").await;
    let update = tap(
        tg.next_update_id(),
        ALICE,
        PRIVATE,
        p.message_id,
        &p.button("☐ Cheese"),
    );

    // Wrong or missing secret: refused with a JSON error, nothing happens.
    for secret in [Some("wrong"), None] {
        let mut req = app.client.post(app.url("/telegram/webhook")).json(&update);
        if let Some(s) = secret {
            req = req.header("X-Telegram-Bot-Api-Secret-Token", s);
        }
        let (s, body) = split(req.send().await.unwrap()).await;
        assert_eq!(s, StatusCode::UNAUTHORIZED);
        assert_eq!(body["error"]["code"], "unauthorized");
    }
    assert!(tg.calls("answerCallbackQuery").is_empty());
    // Garbage with the right secret: a 400 JSON error.
    let (s, body) = split(
        app.client
            .post(app.url("/telegram/webhook"))
            .header("X-Telegram-Bot-Api-Secret-Token", SECRET)
            .body("{not json")
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(s, StatusCode::BAD_REQUEST);
    assert_eq!(body["error"]["code"], "invalid_request");

    // The same update delivered twice toggles once.
    assert_eq!(deliver(&app, &update).await, StatusCode::OK);
    assert_eq!(deliver(&app, &update).await, StatusCode::OK);
    assert_eq!(tg.calls("answerCallbackQuery").len(), 1);
    tap_on(&app, &tg, ALICE, &p, &p.button("📨 Submit")).await;
    assert_eq!(
        status(&app, &id).await["resolution"]["result"]["updatedInput"]["answers"],
        json!({"Which toppings?": "Cheese"})
    );
    let m = app.metrics().await;
    assert!(
        m.contains("imrelay_telegram_updates_total{kind=\"duplicate\"} 1"),
        "{m}"
    );
    app.stop().await;
}

#[tokio::test]
async fn without_a_configured_secret_one_is_derived_and_kept() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("imrelay.db");
    let (s, tg) = setup(Mode::Webhook, |s| {
        s.telegram.webhook_secret = Secret::new("")
    })
    .await;

    let first = spawn_on(s.clone(), open_sqlite(&path).await).await;
    let set = tg.wait_n("setWebhook", 1).await;
    let secret = set[0].params["secret_token"].as_str().unwrap().to_string();
    assert_eq!(secret.len(), 64);
    assert!(secret.chars().all(|c| c.is_ascii_hexdigit()));
    let update = text(tg.next_update_id(), ALICE, PRIVATE, "/whoami", None);
    let post = |app: &TestApp, secret: &str| {
        app.client
            .post(app.url("/telegram/webhook"))
            .header("X-Telegram-Bot-Api-Secret-Token", secret)
            .json(&update)
            .send()
    };
    assert_eq!(
        post(&first, SECRET).await.unwrap().status(),
        StatusCode::UNAUTHORIZED
    );
    assert_eq!(
        post(&first, &secret).await.unwrap().status(),
        StatusCode::OK
    );
    tg.wait_n("sendMessage", 1).await;
    first.stop().await;

    // The same secret after a restart.
    let second = spawn_on(s, open_sqlite(&path).await).await;
    let set = tg.wait_n("setWebhook", 2).await;
    assert_eq!(set[1].params["secret_token"], secret.as_str());
    second.stop().await;
}

#[tokio::test]
async fn polling_mode_has_no_webhook_route_and_reports_health() {
    let (app, tg) = start_with(Mode::Polling, |s| s.telegram.approvers.clear()).await;
    tg.wait_n("getUpdates", 1).await;
    let (s, _) = app.post("/telegram/webhook", &json!({})).await;
    assert_eq!(s, StatusCode::NOT_FOUND);
    let mut health = Value::Null;
    for _ in 0..100 {
        let (_, body) = app.get("/healthz").await;
        health = body["components"]["telegram"].clone();
        if health["state"] == "polling" && health["bot"].is_string() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(health["state"], "polling", "{health}");
    assert_eq!(health["bot"], format!("@{BOT_USERNAME}"));
    assert_eq!(health["approvers"], 0);
    // An empty approver list is said loudly.
    assert!(
        health["warning"]
            .as_str()
            .unwrap()
            .contains("nobody can answer")
    );
    app.stop().await;
}

#[tokio::test]
async fn a_polling_outage_shows_in_health_and_polling_resumes() {
    let (app, tg) = start(Mode::Polling).await;
    tg.wait_n("getUpdates", 1).await;
    // Another process polls with the same token, twice; then it stops.
    tg.fail(
        "getUpdates",
        Fail::Status(
            409,
            "Conflict: terminated by other getUpdates request; make sure that only one bot instance is running".into(),
        ),
        2,
    );
    let mut seen_error = Value::Null;
    for _ in 0..500 {
        let (_, body) = app.get("/healthz").await;
        let t = body["components"]["telegram"].clone();
        if t["state"] == "error" {
            seen_error = t;
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(
        seen_error["last_error"]
            .as_str()
            .unwrap_or("")
            .contains("another process polls with this bot token"),
        "{seen_error}"
    );
    // Polling resumes: a tap still gets through.
    let id = app.create_bash("toolu_poll", "whoami").await;
    let p = prompt(&tg, PRIVATE, "whoami").await;
    let u = tg.next_update_id();
    tg.push_update(tap(u, BOB, PRIVATE, p.message_id, &p.button("❌ Deny")));
    assert_eq!(toast(&tg, u).await, "Denied");
    assert_eq!(status(&app, &id).await["resolution"]["outcome"], "denied");
    let (_, body) = app.get("/healthz").await;
    assert_eq!(body["components"]["telegram"]["state"], "polling");
    app.stop().await;
}

#[tokio::test]
async fn a_refused_token_shows_in_health_without_the_token() {
    let (app, _tg) = start_with(Mode::Polling, |s| {
        s.telegram.token = Secret::new("999:WRONG-secret-part");
    })
    .await;
    let mut health = Value::Null;
    for _ in 0..200 {
        let (_, body) = app.get("/healthz").await;
        health = body["components"]["telegram"].clone();
        if health["state"] == "error" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(health["state"], "error", "{health}");
    let last = health["last_error"].as_str().unwrap();
    assert!(last.contains("getMe"), "{last}");
    assert!(
        !health.to_string().contains("WRONG-secret-part"),
        "{health}"
    );
    app.stop().await;
}

// ---- configuration ------------------------------------------------------------------------

fn env(pairs: &[(&str, &str)]) -> Option<std::collections::HashMap<String, String>> {
    Some(
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
    )
}

#[test]
fn configuration_is_validated_and_lists_come_from_the_environment() {
    let s = Settings::load_with_env(
        None,
        env(&[
            ("IMRELAY__TELEGRAM__ENABLED", "true"),
            ("IMRELAY__TELEGRAM__TOKEN", TOKEN),
            ("IMRELAY__TELEGRAM__CHATS", "-1001234,42"),
            ("IMRELAY__TELEGRAM__APPROVERS", "42"),
        ]),
    )
    .unwrap();
    assert_eq!(s.telegram.chats, vec![-1001234, 42]);
    assert_eq!(s.telegram.approvers, vec![42]);
    assert_eq!(s.telegram.mode, Mode::Polling);
    assert!(!s.redacted_toml().unwrap().contains("TEST-token"));

    let no_token = Settings::load_with_env(None, env(&[("IMRELAY__TELEGRAM__ENABLED", "true")]))
        .unwrap_err()
        .to_string();
    assert!(no_token.contains("telegram.token"), "{no_token}");
    let no_url = Settings::load_with_env(
        None,
        env(&[
            ("IMRELAY__TELEGRAM__ENABLED", "true"),
            ("IMRELAY__TELEGRAM__TOKEN", TOKEN),
            ("IMRELAY__TELEGRAM__MODE", "webhook"),
        ]),
    )
    .unwrap_err()
    .to_string();
    assert!(no_url.contains("telegram.webhook_url"), "{no_url}");
    let plain_http = Settings::load_with_env(
        None,
        env(&[
            ("IMRELAY__TELEGRAM__ENABLED", "true"),
            ("IMRELAY__TELEGRAM__TOKEN", TOKEN),
            ("IMRELAY__TELEGRAM__MODE", "webhook"),
            (
                "IMRELAY__TELEGRAM__WEBHOOK_URL",
                "http://relay.example.com/telegram/webhook",
            ),
        ]),
    )
    .unwrap_err()
    .to_string();
    assert!(
        plain_http.contains("telegram.webhook_url") && plain_http.contains("https://"),
        "{plain_http}"
    );
    let unknown = Settings::load_with_env(None, env(&[("IMRELAY__TELEGRAM__CHAT", "1")]))
        .unwrap_err()
        .to_string();
    assert!(unknown.contains("chat"), "{unknown}");
}

#[tokio::test]
async fn a_cut_tool_call_links_to_its_inbox_item_when_the_public_url_is_set() {
    let (app, tg) = start_with(Mode::Webhook, |s| {
        s.server.public_url = "https://relay.example.com".into();
    })
    .await;
    app.create_bash("toolu_long", &"make all && ".repeat(1_000))
        .await;
    let p = prompt(&tg, PRIVATE, "make all").await;
    assert!(
        p.text.contains(
            "more characters not shown</i> · <a href=\"https://relay.example.com/#toolu_long\">all of it in the inbox</a>"
        ),
        "{}",
        p.text
    );
    assert!(p.text.chars().count() <= 4096);
    app.create_bash("toolu_short", "ls -la").await;
    let p = prompt(&tg, PRIVATE, "ls -la").await;
    assert!(
        !p.text.contains("inbox"),
        "nothing cut, no link: {}",
        p.text
    );
    app.stop().await;
}

/// `/healthz` while Telegram fails from the start: the top-level status is `degraded` and
/// names the channel, the answer stays 200 (the server still takes interactions: a readiness
/// probe keeps it in service), `/livez` is untouched; once Telegram answers, `ok` again.
#[tokio::test]
async fn a_failing_channel_degrades_healthz_by_name_without_failing_liveness() {
    let (s, tg) = setup(Mode::Polling, |_| {}).await;
    // Telegram refuses the first calls ("Too Many Requests: retry after 1", twice).
    tg.fail("getMe", Fail::RetryAfter(1), 2);
    let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
    let app = spawn_on(s, store).await;
    let mut body = Value::Null;
    for _ in 0..200 {
        let (status, b) = app.get("/healthz").await;
        assert_eq!(status, StatusCode::OK, "{b}");
        body = b;
        if body["components"]["telegram"]["state"] == "retrying" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(
        body["components"]["telegram"]["state"], "retrying",
        "{body}"
    );
    assert_eq!(body["status"], "degraded", "{body}");
    assert_eq!(body["failing"], json!(["telegram"]), "{body}");
    assert_eq!(body["store"], "ok", "{body}");
    let (status, live) = app.get("/livez").await;
    assert_eq!((status, &live["status"]), (StatusCode::OK, &json!("ok")));
    // The server still takes interactions meanwhile.
    app.create_bash("toolu_degraded", "true").await;

    // Telegram answers again: the channel polls and the status is ok, with nothing failing.
    let mut healthy = Value::Null;
    for _ in 0..500 {
        let (_, b) = app.get("/healthz").await;
        if b["components"]["telegram"]["state"] == "polling" {
            healthy = b;
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(healthy["status"], "ok", "{healthy}");
    assert!(healthy.get("failing").is_none(), "{healthy}");
    app.stop().await;
}
