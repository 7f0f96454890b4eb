//! Sending and updating through the outbox: tenant tokens, send deduplication, throttling and
//! outages, resolutions from other channels, the send/resolve race, and restarts.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use imrelay::channels::feishu::api::OpenApi;
use imrelay::config::Secret;
use imrelay::store::{SqliteStore, Store, Synchronous};
use serde_json::json;

use super::fake::{APP_ID, APP_SECRET, Failure, FakeFeishu};
use super::{APPROVER, button_value, card_for, card_text, click, enable, event_id, post_callback};
use crate::support::{reopen_sqlite, settings, spawn_on, spawn_with, wait_until};

#[tokio::test]
async fn the_tenant_token_is_cached() {
    let fake = FakeFeishu::start().await;
    let app = spawn_with(|s| enable(s, &fake)).await;
    app.create_bash("toolu_t1", "ls").await;
    app.create_bash("toolu_t2", "ls").await;
    wait_until("four cards", || fake.state.delivered().len() == 4).await;
    assert_eq!(fake.state.token_requests.load(Ordering::SeqCst), 1);
    let tokens: Vec<String> = fake.state.sends().iter().map(|s| s.token.clone()).collect();
    assert!(tokens.iter().all(|t| t == "t-fake-1"), "{tokens:?}");
    app.stop().await;
}

#[tokio::test]
async fn a_token_near_its_expiry_is_refreshed_before_use() {
    let fake = FakeFeishu::start().await;
    // Tokens that live 5 minutes are inside the refresh margin: each use fetches a new one.
    fake.state.expire.store(300, Ordering::SeqCst);
    let api = OpenApi::new(&fake.url, APP_ID, Secret::new(APP_SECRET)).unwrap();
    let a = api.tenant_token().await.unwrap();
    let b = api.tenant_token().await.unwrap();
    assert_ne!(a, b);
    assert_eq!(fake.state.token_requests.load(Ordering::SeqCst), 2);
    fake.state.expire.store(7200, Ordering::SeqCst);
    let c = api.tenant_token().await.unwrap();
    assert_eq!(api.tenant_token().await.unwrap(), c);
    assert_eq!(fake.state.token_requests.load(Ordering::SeqCst), 3);
}

#[tokio::test]
async fn concurrent_callers_share_one_refresh() {
    let fake = FakeFeishu::start().await;
    fake.state.token_delay_ms.store(300, Ordering::SeqCst);
    let api = Arc::new(OpenApi::new(&fake.url, APP_ID, Secret::new(APP_SECRET)).unwrap());
    let tasks: Vec<_> = (0..16)
        .map(|_| {
            let api = api.clone();
            tokio::spawn(async move { api.tenant_token().await.unwrap() })
        })
        .collect();
    let mut got = Vec::new();
    for t in tasks {
        got.push(t.await.unwrap());
    }
    assert!(got.iter().all(|t| t == &got[0]));
    assert_eq!(fake.state.token_requests.load(Ordering::SeqCst), 1);
    assert_eq!(api.token_fetches(), 1);
}

#[tokio::test]
async fn an_invalid_token_answer_refreshes_the_token_and_retries() {
    let fake = FakeFeishu::start().await;
    let app = spawn_with(|s| enable(s, &fake)).await;
    app.create_bash("toolu_inv1", "ls").await;
    wait_until("two cards", || fake.state.delivered().len() == 2).await;
    fake.state.revoke_tokens();
    app.create_bash("toolu_inv2", "ls").await;
    wait_until("four cards", || fake.state.delivered().len() == 4).await;
    assert_eq!(fake.state.token_requests.load(Ordering::SeqCst), 2);
    let refused: Vec<_> = fake
        .state
        .sends()
        .into_iter()
        .filter(|s| s.message_id.is_none())
        .collect();
    assert!(!refused.is_empty() && refused.iter().all(|s| s.token == "t-fake-1"));
    assert!(
        fake.state.delivered()[2..]
            .iter()
            .all(|s| s.token == "t-fake-2")
    );
    app.stop().await;
}

#[tokio::test]
async fn bad_credentials_are_reported() {
    let fake = FakeFeishu::start().await;
    let api = OpenApi::new(&fake.url, APP_ID, Secret::new("wrong")).unwrap();
    let err = api.tenant_token().await.unwrap_err();
    assert!(err.to_string().contains("app credentials"), "{err}");
    assert!(!err.is_transient());
}

#[tokio::test]
async fn a_retried_send_reuses_its_uuid_and_never_posts_twice() {
    let fake = FakeFeishu::start().await;
    // The first send is carried out, but its answer is lost.
    fake.state.fail_sends(&[Failure::CommitThenFail]);
    let app = spawn_with(|s| {
        enable(s, &fake);
        s.feishu.receivers.truncate(1);
    })
    .await;
    app.create_bash("toolu_dup", "ls").await;
    wait_until("a delivered card", || fake.state.delivered().len() == 1).await;
    let sends = fake.state.sends();
    assert_eq!(sends.len(), 2, "one lost answer, one retry");
    assert_eq!(sends[0].uuid, sends[1].uuid);
    assert!(!sends[0].uuid.is_empty() && sends[0].uuid.len() <= 50);
    assert_eq!(fake.state.messages_created(), 1, "no double post");
    let id = imrelay::interaction::InteractionId::parse("toolu_dup").unwrap();
    let mut recorded = Vec::new();
    for _ in 0..500 {
        recorded = app.store.messages("feishu", &id).await.unwrap();
        if !recorded.is_empty() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    assert_eq!(recorded.len(), 1);
    assert_eq!(Some(recorded[0].message_ref.clone()), sends[1].message_id);
    app.stop().await;
}

#[tokio::test]
async fn throttling_and_outages_are_retried_until_the_card_arrives() {
    let fake = FakeFeishu::start().await;
    fake.state
        .fail_sends(&[Failure::Throttle, Failure::ServerError]);
    let app = spawn_with(|s| {
        enable(s, &fake);
        s.feishu.receivers.truncate(1);
    })
    .await;
    app.create_bash("toolu_thr", "ls").await;
    let (message_id, _) = card_for(&fake, "toolu_thr").await;
    assert_eq!(fake.state.sends().len(), 3);
    // Updates recover the same way.
    fake.state
        .fail_patches(&[Failure::ServerError, Failure::Throttle]);
    let (status, _) = app
        .post(
            "/v1/interactions/toolu_thr/respond",
            &json!({"decision": "allow", "by": "bob"}),
        )
        .await;
    assert_eq!(status, 200);
    wait_until("the card is updated", || {
        fake.state
            .patches()
            .iter()
            .any(|p| p.message_id == message_id)
    })
    .await;
    let metrics = app.metrics().await;
    assert!(
        metrics.contains("imrelay_outbox_deliveries_total{channel=\"feishu\",result=\"retry\"} 4"),
        "{metrics}"
    );
    app.stop().await;
}

#[tokio::test]
async fn a_permanent_refusal_is_not_retried_and_other_receivers_still_get_cards() {
    let fake = FakeFeishu::start().await;
    fake.state.fail_sends(&[Failure::Refuse]);
    let app = spawn_with(|s| enable(s, &fake)).await;
    app.create_bash("toolu_ref", "ls").await;
    wait_until("one card delivered", || fake.state.delivered().len() == 1).await;
    app.outbox_idle().await;
    assert_eq!(
        fake.state.sends().len(),
        2,
        "the refused send is not retried"
    );
    let (_, health) = app.get("/healthz").await;
    assert!(health["components"]["feishu_api"].is_object(), "{health}");
    app.stop().await;
}

#[tokio::test]
async fn a_resolution_elsewhere_updates_every_card() {
    let fake = FakeFeishu::start().await;
    let app = spawn_with(|s| enable(s, &fake)).await;
    app.create_bash("toolu_else", "ls").await;
    wait_until("two cards", || fake.state.delivered().len() == 2).await;
    let (status, _) = app
        .post(
            "/v1/interactions/toolu_else/respond",
            &json!({"decision": "allow", "by": "carol", "via": "desktop"}),
        )
        .await;
    assert_eq!(status, 200);
    wait_until("both cards updated", || fake.state.patches().len() == 2).await;
    let mut patched: Vec<String> = fake
        .state
        .patches()
        .iter()
        .map(|p| p.message_id.clone())
        .collect();
    let mut sent: Vec<String> = fake
        .state
        .delivered()
        .iter()
        .filter_map(|s| s.message_id.clone())
        .collect();
    patched.sort();
    sent.sort();
    assert_eq!(patched, sent);
    for p in fake.state.patches() {
        assert_eq!(p.card["header"]["template"], "green");
        assert!(card_text(&p.card).contains("Allowed by carol via desktop"));
    }
    // Cancellation by the agent and expiry update the cards too.
    app.create_bash("toolu_cancel", "ls").await;
    wait_until("cards", || fake.state.delivered().len() == 4).await;
    let (status, _) = app
        .delete("/v1/interactions/toolu_cancel?reason=not%20needed")
        .await;
    assert_eq!(status, 200);
    wait_until("cancel shown", || fake.state.patches().len() == 4).await;
    assert!(card_text(&fake.state.patches()[3].card).contains("not needed"));
    app.stop().await;
}

#[tokio::test]
async fn a_resolution_while_the_send_is_in_flight_still_updates_the_card() {
    let fake = FakeFeishu::start().await;
    fake.state.send_delay_ms.store(800, Ordering::SeqCst);
    let app = spawn_with(|s| {
        enable(s, &fake);
        s.feishu.receivers.truncate(1);
    })
    .await;
    app.create_bash("toolu_race", "ls").await;
    // The platform has the card but has not answered yet.
    wait_until("the send is in flight", || {
        fake.state.messages_created() == 1
    })
    .await;
    let (status, _) = app
        .post(
            "/v1/interactions/toolu_race/respond",
            &json!({"decision": "deny", "by": "dave"}),
        )
        .await;
    assert_eq!(status, 200);
    wait_until("the card is brought up to date", || {
        !fake.state.patches().is_empty()
    })
    .await;
    let patch = &fake.state.patches()[0];
    assert_eq!(
        Some(patch.message_id.clone()),
        fake.state.delivered()[0].message_id
    );
    assert_eq!(patch.card["header"]["template"], "red");
    app.stop().await;
}

#[tokio::test]
async fn an_id_used_again_after_pruning_gets_its_own_card() {
    let fake = FakeFeishu::start().await;
    let app = spawn_with(|s| {
        enable(s, &fake);
        s.feishu.receivers.truncate(1);
    })
    .await;
    app.create_bash("toolu_again", "ls").await;
    let (first, first_card) = card_for(&fake, "toolu_again").await;
    assert_eq!(app.delete("/v1/interactions/toolu_again").await.0, 200);
    wait_until("the first card shows the cancellation", || {
        fake.state.patches().iter().any(|p| p.message_id == first)
    })
    .await;
    assert_eq!(app.prune_all().await, 1);
    // The second interaction with the id is created in a later millisecond.
    app.create_bash("toolu_again", "ls").await;
    wait_until("a second card", || fake.state.messages_created() == 2).await;
    let sends = fake.state.delivered();
    let second = sends.last().unwrap().message_id.clone().unwrap();
    assert_ne!(second, first);
    assert_ne!(sends[0].uuid, sends.last().unwrap().uuid);
    assert!(card_text(&sends.last().unwrap().card).contains("ls"));
    // A button left on the first card (say its update never landed) cannot answer the new
    // interaction: it is told the request is gone.
    let (_, reply) = post_callback(
        &app,
        &click(
            &event_id(),
            APPROVER,
            &button_value(&first_card, "approve"),
            None,
        ),
    )
    .await;
    assert_eq!(reply["toast"]["content"], "This request no longer exists");
    assert_eq!(
        app.get("/v1/interactions/toolu_again").await.1["status"],
        "pending"
    );
    // The new card is the one brought up to date when the new interaction resolves.
    let (status, _) = app
        .post(
            "/v1/interactions/toolu_again/respond",
            &json!({"decision": "allow", "by": "erin"}),
        )
        .await;
    assert_eq!(status, 200);
    wait_until("the second card shows the answer", || {
        fake.state
            .patches()
            .iter()
            .any(|p| p.message_id == second && card_text(&p.card).contains("erin"))
    })
    .await;
    app.stop().await;
}

#[tokio::test]
async fn cards_and_their_buttons_survive_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("feishu.db");
    let fake = FakeFeishu::start().await;
    let mut s = settings();
    enable(&mut s, &fake);
    let store: Arc<dyn Store> = Arc::new(SqliteStore::open(&path, Synchronous::Normal).unwrap());
    let app = spawn_on(s.clone(), store).await;
    app.create_bash("toolu_rs1", "ls").await;
    app.create_bash("toolu_rs2", "ls").await;
    let (m1, card1) = card_for(&fake, "toolu_rs1").await;
    card_for(&fake, "toolu_rs2").await;
    wait_until("four cards", || fake.state.delivered().len() == 4).await;
    app.stop().await;

    let store: Arc<dyn Store> = Arc::new(reopen_sqlite(&path).await);
    let app = spawn_on(s, store).await;
    // An old button still works after the restart...
    let (_, reply) = post_callback(
        &app,
        &click(
            &event_id(),
            APPROVER,
            &button_value(&card1, "approve"),
            None,
        ),
    )
    .await;
    assert_eq!(reply["toast"]["type"], "success", "{reply}");
    // ...and updates find the cards posted before it.
    let (status, _) = app
        .post(
            "/v1/interactions/toolu_rs2/respond",
            &json!({"decision": "deny"}),
        )
        .await;
    assert_eq!(status, 200);
    wait_until("all four cards updated", || fake.state.patches().len() >= 4).await;
    assert!(fake.state.patches().iter().any(|p| p.message_id == m1));
    assert_eq!(
        fake.state.delivered().len(),
        4,
        "no card is posted again after the restart"
    );
    app.stop().await;
}

#[test]
fn feishu_settings_load_from_the_environment() {
    use std::collections::HashMap;
    let env: HashMap<String, String> = [
        ("IMRELAY__FEISHU__ENABLED", "true"),
        ("IMRELAY__FEISHU__APP_ID", "cli_1"),
        ("IMRELAY__FEISHU__APP_SECRET", "shh"),
        ("IMRELAY__FEISHU__VERIFICATION_TOKEN", "vt"),
        ("IMRELAY__FEISHU__RECEIVERS", "chat_id:oc_1,open_id:ou_2"),
        ("IMRELAY__FEISHU__APPROVERS", "ou_a"),
        ("IMRELAY__FEISHU__LOCALE", "en_us"),
        ("IMRELAY__FEISHU__DOMAIN", "lark"),
    ]
    .iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    let s = imrelay::config::Settings::load_with_env(None, Some(env.clone())).unwrap();
    assert_eq!(s.feishu.receivers.len(), 2);
    assert_eq!(s.feishu.receivers[1].address(), "open_id:ou_2");
    assert_eq!(s.feishu.approvers, ["ou_a"]);
    assert_eq!(s.feishu.api_base(), "https://open.larksuite.com");
    let toml = s.redacted_toml().unwrap();
    assert!(!toml.contains("shh") && !toml.contains("\"vt\""));
    let mut missing = env;
    missing.remove("IMRELAY__FEISHU__APP_SECRET");
    let err = imrelay::config::Settings::load_with_env(None, Some(missing)).unwrap_err();
    assert!(err.to_string().contains("feishu.app_secret"), "{err}");
}
