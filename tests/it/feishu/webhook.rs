//! The callback endpoint: URL verification, decryption, signatures, tokens, and card clicks
//! answering interactions end to end (agent API → card → click → agent result).

use imrelay::channels::feishu::crypto;
use imrelay::config::Secret;
use reqwest::StatusCode;
use serde_json::{Value, json};

use super::fake::FakeFeishu;
use super::gate::gated_store;
use super::{
    APPROVER, ENCRYPT_KEY, STRANGER, VERIFICATION_TOKEN, button_value, card_for, card_text, click,
    enable, event_id, post_callback, post_signed, tagged,
};
use crate::support::{TestApp, fixture, settings, spawn_on, spawn_with, wait_until};

async fn post_plain(app: &TestApp, body: &Value) -> (StatusCode, Value) {
    app.post("/feishu/callback", body).await
}

#[tokio::test]
async fn url_verification_in_plain_text_checks_the_token() {
    let fake = FakeFeishu::start().await;
    let app = spawn_with(|s| {
        enable(s, &fake);
        s.feishu.encrypt_key = Secret::new("");
    })
    .await;
    let (status, body) = post_plain(
        &app,
        &json!({"challenge": "abc123", "token": VERIFICATION_TOKEN, "type": "url_verification"}),
    )
    .await;
    assert_eq!(status, 200);
    assert_eq!(body, json!({"challenge": "abc123"}));
    let (status, body) = post_plain(
        &app,
        &json!({"challenge": "abc123", "token": "wrong", "type": "url_verification"}),
    )
    .await;
    assert_eq!(status, 401);
    assert_eq!(body["error"]["code"], "unauthorized");
    app.stop().await;
}

/// The encrypted URL verification recorded with the official SDK (see the fixture's README).
#[tokio::test]
async fn encrypted_url_verification_from_the_sdk_vector() {
    let vectors = fixture("feishu/callback_vectors.json");
    let v = &vectors["vectors"][0];
    assert_eq!(v["name"], "url_verification");
    let fake = FakeFeishu::start().await;
    let app = spawn_with(|s| {
        enable(s, &fake);
        s.feishu.encrypt_key = Secret::new(vectors["encrypt_key"].as_str().unwrap());
        s.feishu.verification_token = Secret::new(vectors["verification_token"].as_str().unwrap());
    })
    .await;
    // Sent as the platform sends it; its old timestamp does not matter to URL verification.
    let resp = app
        .client
        .post(app.url("/feishu/callback"))
        .header("content-type", "application/json")
        .body(v["body"].as_str().unwrap().to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    let body: Value = resp.json().await.unwrap();
    assert_eq!(body, v["sdk_reply"], "the same reply the SDK gives");
    app.stop().await;
}

#[test]
fn our_crypto_matches_the_official_sdk_vectors() {
    let vectors = fixture("feishu/callback_vectors.json");
    let key = vectors["encrypt_key"].as_str().unwrap();
    for v in vectors["vectors"].as_array().unwrap() {
        let plaintext = v["plaintext"].as_str().unwrap();
        let iv: [u8; 16] = hex::decode(v["iv_hex"].as_str().unwrap())
            .unwrap()
            .try_into()
            .unwrap();
        // What we encrypt is byte for byte what the SDK decrypted...
        assert_eq!(crypto::encrypt_with_iv(key, iv, plaintext), v["encrypt"]);
        // ...we decrypt it back...
        assert_eq!(
            crypto::decrypt(key, v["encrypt"].as_str().unwrap()).unwrap(),
            plaintext
        );
        // ...and compute the signature the SDK accepted.
        let body = v["body"].as_str().unwrap().as_bytes();
        let (ts, nonce) = (
            v["timestamp"].as_str().unwrap(),
            v["nonce"].as_str().unwrap(),
        );
        assert_eq!(crypto::signature(ts, nonce, key, body), v["signature"]);
        assert!(crypto::verify_signature(
            ts,
            nonce,
            key,
            body,
            v["signature"].as_str().unwrap()
        ));
        assert!(!crypto::verify_signature(
            ts,
            nonce,
            "other-key",
            body,
            v["signature"].as_str().unwrap()
        ));
    }
    // The SDK's own reply to a card click is the shape we answer with.
    assert_eq!(
        vectors["vectors"][1]["sdk_reply"]["toast"]["type"],
        "success"
    );
}

#[tokio::test]
async fn encrypted_url_verification_checks_the_token() {
    let fake = FakeFeishu::start().await;
    let app = spawn_with(|s| enable(s, &fake)).await;
    let body = |token: &str| {
        let inner = json!({"challenge": "c-42", "token": token, "type": "url_verification"});
        json!({"encrypt": crypto::encrypt(ENCRYPT_KEY, &inner.to_string())})
    };
    let (status, reply) = post_plain(&app, &body("wrong")).await;
    assert_eq!(status, 401, "{reply}");
    assert_eq!(reply["error"]["code"], "unauthorized");
    assert!(reply.get("challenge").is_none());
    let (status, reply) = post_plain(&app, &body(VERIFICATION_TOKEN)).await;
    assert_eq!(status, 200);
    assert_eq!(reply, json!({"challenge": "c-42"}));
    app.stop().await;
}

#[tokio::test]
async fn encrypted_bodies_with_bad_padding_or_bad_text_get_a_clean_4xx() {
    use base64::Engine;
    let b64 = |bytes: &[u8]| base64::engine::general_purpose::STANDARD.encode(bytes);
    let fake = FakeFeishu::start().await;
    let app = spawn_with(|s| enable(s, &fake)).await;
    // A whole number of blocks, so only the padding can tell that it is wrong.
    let mut unpadded = crypto::encrypt_bytes(ENCRYPT_KEY, [7; 16], &[b'x'; 32]);
    unpadded.truncate(48);
    let not_utf8 = crypto::encrypt_bytes(ENCRYPT_KEY, [7; 16], b"{\"type\":\"\xff\xfe\"}");
    let now = jiff::Timestamp::now().as_second().to_string();
    for (encrypted, status, needle) in [
        (b64(&unpadded), 401, "does not decrypt"),
        (b64(&not_utf8), 400, "UTF-8"),
    ] {
        let body = json!({ "encrypt": encrypted }).to_string();
        // Signed correctly (so decryption is reached) and unsigned alike.
        for signed in [true, false] {
            let (got, reply) = if signed {
                post_signed(&app, body.clone(), &now, None).await
            } else {
                post_plain(&app, &serde_json::from_str(&body).unwrap()).await
            };
            assert_eq!(got.as_u16(), status, "{needle} signed={signed}: {reply}");
            assert!(
                reply["error"]["message"].as_str().unwrap().contains(needle),
                "{reply}"
            );
            assert!(reply["error"]["code"].is_string(), "{reply}");
        }
    }
    app.stop().await;
}

#[tokio::test]
async fn timestamps_at_the_edges_of_the_number_range_are_refused_as_stale() {
    let fake = FakeFeishu::start().await;
    let app = spawn_with(|s| enable(s, &fake)).await;
    let body = json!({"encrypt": crypto::encrypt(ENCRYPT_KEY, &click(&event_id(), APPROVER, &json!({}), None).to_string())})
        .to_string();
    for ts in [i64::MIN.to_string(), i64::MAX.to_string()] {
        let (status, reply) = post_signed(&app, body.clone(), &ts, None).await;
        assert_eq!(status, 401, "{ts}: {reply}");
        assert!(
            reply["error"]["message"]
                .as_str()
                .unwrap()
                .contains("stale"),
            "{reply}"
        );
    }
    let (status, reply) = post_signed(&app, body, "99999999999999999999", None).await;
    assert_eq!(status, 401, "{reply}");
    assert!(
        reply["error"]["message"]
            .as_str()
            .unwrap()
            .contains("not a number")
    );
    app.stop().await;
}

#[tokio::test]
async fn toasts_and_form_errors_speak_chinese_in_zh_cn() {
    let fake = FakeFeishu::start().await;
    let app = spawn_with(|s| {
        enable(s, &fake);
        s.feishu.locale = imrelay::channels::feishu::settings::Locale::ZhCn;
    })
    .await;
    app.create_bash("toolu_zh1", "ls").await;
    let (_, card) = card_for(&fake, "toolu_zh1").await;
    let approve = button_value(&card, "approve");
    let toast = |reply: &Value| reply["toast"]["content"].as_str().unwrap().to_string();

    let (_, refused) = post_callback(&app, &click(&event_id(), STRANGER, &approve, None)).await;
    assert_eq!(toast(&refused), "你不在审批人名单中，无法处理此请求");
    let (_, ok) = post_callback(&app, &click(&event_id(), APPROVER, &approve, None)).await;
    assert_eq!(toast(&ok), "已批准");
    assert!(card_text(&ok["card"]["data"]).contains("已批准"));
    let (_, already) = post_callback(&app, &click(&event_id(), APPROVER, &approve, None)).await;
    assert_eq!(
        toast(&already),
        format!("已处理：由 {APPROVER} 通过 feishu 批准")
    );

    let card = ask(&app, &fake, "toolu_zh2").await;
    let submit = button_value(&card, "submit");
    for (form, expected) in [
        (
            json!({"q1": ["0"]}),
            "回答无效：请回答「Color」：选择一项或填写其他",
        ),
        (
            json!({"q0": "0", "q0_other": "Both", "q1": ["0"]}),
            "回答无效：「Color」只能选择一项或填写其他，不能同时提交",
        ),
        (
            json!({"q0": "7", "q1": ["0"]}),
            "回答无效：「Color」没有选项 \"7\"",
        ),
        (
            json!({"q0": "0", "q1": []}),
            "回答无效：请回答「Toppings」：选择至少一项或填写其他",
        ),
    ] {
        let (_, reply) =
            post_callback(&app, &click(&event_id(), APPROVER, &submit, Some(form))).await;
        assert_eq!(toast(&reply), expected);
    }
    let (_, declined) = post_callback(
        &app,
        &click(&event_id(), APPROVER, &button_value(&card, "decline"), None),
    )
    .await;
    assert_eq!(toast(&declined), "已拒绝回答");
    app.stop().await;
}

#[tokio::test]
async fn signatures_correct_wrong_stale_and_missing() {
    let fake = FakeFeishu::start().await;
    let app = spawn_with(|s| enable(s, &fake)).await;
    app.create_bash("toolu_sig", "ls").await;
    let (_, card) = card_for(&fake, "toolu_sig").await;
    let value = button_value(&card, "approve");
    let body = |eid: &str| {
        json!({"encrypt": crypto::encrypt(ENCRYPT_KEY, &click(eid, APPROVER, &value, None).to_string())})
            .to_string()
    };
    let now = jiff::Timestamp::now().as_second();

    let (status, reply) = post_signed(
        &app,
        body(&event_id()),
        &now.to_string(),
        Some(&"0".repeat(64)),
    )
    .await;
    assert_eq!(status, 401, "{reply}");
    assert!(
        reply["error"]["message"]
            .as_str()
            .unwrap()
            .contains("X-Lark-Signature")
    );

    let (status, reply) =
        post_signed(&app, body(&event_id()), &(now - 3600).to_string(), None).await;
    assert_eq!(status, 401, "{reply}");
    assert!(
        reply["error"]["message"]
            .as_str()
            .unwrap()
            .contains("stale")
    );

    let resp = app
        .client
        .post(app.url("/feishu/callback"))
        .header("content-type", "application/json")
        .body(body(&event_id()))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 401, "unsigned");

    let pending = app
        .registry
        .get(&imrelay::interaction::InteractionId::parse("toolu_sig").unwrap())
        .await
        .unwrap()
        .unwrap();
    assert!(pending.is_pending(), "nothing changed");

    let (status, reply) = post_signed(&app, body(&event_id()), &now.to_string(), None).await;
    assert_eq!(status, 200, "{reply}");
    assert_eq!(reply["toast"]["type"], "success");
    app.stop().await;
}

#[tokio::test]
async fn a_wrong_verification_token_is_refused() {
    let fake = FakeFeishu::start().await;
    let app = spawn_with(|s| enable(s, &fake)).await;
    app.create_bash("toolu_tok", "ls").await;
    let (_, card) = card_for(&fake, "toolu_tok").await;
    let mut envelope = click(&event_id(), APPROVER, &button_value(&card, "approve"), None);
    envelope["header"]["token"] = json!("not-the-token");
    let (status, _) = post_callback(&app, &envelope).await;
    assert_eq!(status, 401);
    let i = app
        .registry
        .get(&imrelay::interaction::InteractionId::parse("toolu_tok").unwrap())
        .await
        .unwrap()
        .unwrap();
    assert!(i.is_pending());
    app.stop().await;
}

#[tokio::test]
async fn approve_end_to_end_with_toast_and_resolved_card() {
    let fake = FakeFeishu::start().await;
    let app = spawn_with(|s| enable(s, &fake)).await;
    let (status, _) = app
        .post(
            "/v1/interactions",
            &json!({"id": "toolu_e2e", "tool_name": "Bash", "input": {"command": "make deploy"}}),
        )
        .await;
    assert_eq!(status, 201);
    let (message_id, card) = card_for(&fake, "toolu_e2e").await;

    let started = std::time::Instant::now();
    let (status, reply) = post_callback(
        &app,
        &click(&event_id(), APPROVER, &button_value(&card, "approve"), None),
    )
    .await;
    let took = started.elapsed();
    assert_eq!(status, 200);
    assert_eq!(reply["toast"]["type"], "success");
    assert_eq!(reply["toast"]["content"], "Allowed");
    assert_eq!(reply["card"]["type"], "raw");
    let resolved = &reply["card"]["data"];
    assert_eq!(resolved["header"]["template"], "green");
    assert!(tagged(resolved, "button").is_empty());
    assert!(card_text(resolved).contains("Allowed by"));
    tracing::info!(?took, "feishu click answered");

    // The agent receives the SDK's allow with the original input.
    let (status, body) = app
        .get("/v1/interactions/toolu_e2e/wait?timeout_secs=5")
        .await;
    assert_eq!(status, 200);
    assert_eq!(
        body["result"],
        json!({"behavior": "allow", "updatedInput": {"command": "make deploy"}})
    );
    assert_eq!(body["resolution"]["via"], "feishu");
    assert_eq!(body["resolution"]["by"], APPROVER);
    // Every card, the clicked one included, is updated through the outbox.
    wait_until("both cards updated", || fake.state.patches().len() >= 2).await;
    assert!(
        fake.state
            .patches()
            .iter()
            .any(|p| p.message_id == message_id)
    );
    app.stop().await;
}

#[tokio::test]
async fn a_card_from_before_buttons_carried_the_creation_time_works_only_on_record() {
    use base64::Engine;
    use hmac::{Hmac, Mac};

    let fake = FakeFeishu::start().await;
    let app = spawn_with(|s| enable(s, &fake)).await;
    app.create_bash("toolu_legacy", "make legacy").await;
    let (message_id, _) = card_for(&fake, "toolu_legacy").await;
    let id = imrelay::interaction::InteractionId::parse("toolu_legacy").unwrap();
    wait_until_recorded(&app, &id, &message_id).await;
    // A button value as earlier versions made it: id and action, no creation time.
    let secret = app
        .store
        .secret(imrelay::channels::feishu::SECRET_NAME)
        .await
        .unwrap();
    let mut mac = <Hmac<sha2::Sha256> as Mac>::new_from_slice(&secret).unwrap();
    mac.update(b"imrelay/feishu/button/v1\ntoolu_legacy\nallow");
    let value = json!({
        "imrelay": 1,
        "id": "toolu_legacy",
        "action": "allow",
        "mac": base64::engine::general_purpose::URL_SAFE_NO_PAD
            .encode(&mac.finalize().into_bytes()[..16]),
    });
    // Clicked on a card that is not on record for the interaction (one of an earlier
    // interaction with the same id): the request is gone, nothing changes.
    let (_, reply) = post_callback(&app, &click(&event_id(), APPROVER, &value, None)).await;
    assert_eq!(reply["toast"]["content"], "This request no longer exists");
    assert_eq!(
        app.get("/v1/interactions/toolu_legacy").await.1["status"],
        "pending"
    );
    // Clicked on its own card, it still works.
    let mut on_its_card = click(&event_id(), APPROVER, &value, None);
    on_its_card["event"]["context"]["open_message_id"] = json!(message_id);
    let (_, reply) = post_callback(&app, &on_its_card).await;
    assert_eq!(reply["toast"]["content"], "Allowed", "{reply}");
    app.stop().await;
}

/// Waits until card `message_id` is on record for interaction `id`.
async fn wait_until_recorded(
    app: &TestApp,
    id: &imrelay::interaction::InteractionId,
    message_id: &str,
) {
    for _ in 0..500 {
        let cards = app.store.messages("feishu", id).await.unwrap();
        if cards.iter().any(|c| c.message_ref == message_id) {
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    panic!("card {message_id} was never recorded");
}

#[tokio::test]
async fn deny_with_reason_reaches_the_agent() {
    let fake = FakeFeishu::start().await;
    let app = spawn_with(|s| enable(s, &fake)).await;
    app.create_bash("toolu_deny", "rm -rf /").await;
    let (_, card) = card_for(&fake, "toolu_deny").await;
    let submit = tagged(tagged(&card, "form")[0], "button")[0]["behaviors"][0]["value"].clone();
    let (status, reply) = post_callback(
        &app,
        &click(
            &event_id(),
            APPROVER,
            &submit,
            Some(json!({"reason": "  use the staging box  "})),
        ),
    )
    .await;
    assert_eq!(status, 200);
    assert_eq!(reply["toast"]["content"], "Denied");
    assert_eq!(reply["card"]["data"]["header"]["template"], "red");
    let (_, body) = app
        .get("/v1/interactions/toolu_deny/wait?timeout_secs=5")
        .await;
    assert_eq!(
        body["result"],
        json!({"behavior": "deny", "message": "use the staging box", "interrupt": false})
    );
    app.stop().await;
}

#[tokio::test]
async fn plain_deny_button_names_who_denied() {
    let fake = FakeFeishu::start().await;
    let app = spawn_with(|s| enable(s, &fake)).await;
    app.create_bash("toolu_deny2", "ls").await;
    let (_, card) = card_for(&fake, "toolu_deny2").await;
    let (status, _) = post_callback(
        &app,
        &click(&event_id(), APPROVER, &button_value(&card, "deny"), None),
    )
    .await;
    assert_eq!(status, 200);
    let (_, body) = app
        .get("/v1/interactions/toolu_deny2/wait?timeout_secs=5")
        .await;
    assert_eq!(
        body["result"]["message"],
        format!("Denied by {APPROVER} via feishu")
    );
    app.stop().await;
}

fn questions() -> Value {
    json!({"questions": [
        {"question": "Which color?", "header": "Color", "multiSelect": false,
         "options": [{"label": "Red"}, {"label": "Blue"}]},
        {"question": "Which toppings?", "header": "Toppings", "multiSelect": true,
         "options": [{"label": "Cheese"}, {"label": "Ham"}, {"label": "Olives"}]}
    ]})
}

async fn ask(app: &TestApp, fake: &FakeFeishu, id: &str) -> Value {
    let (status, _) = app
        .post(
            "/v1/interactions",
            &json!({"id": id, "tool_name": "AskUserQuestion", "input": questions()}),
        )
        .await;
    assert_eq!(status, 201);
    card_for(fake, id).await.1
}

#[tokio::test]
async fn question_form_single_multi_and_other() {
    let fake = FakeFeishu::start().await;
    let app = spawn_with(|s| enable(s, &fake)).await;
    let card = ask(&app, &fake, "toolu_qa").await;
    let submit = button_value(&card, "submit");
    // Single select by option, multi select with two options plus "Other" text.
    let form = json!({"q0": "1", "q0_other": "", "q1": ["0", "2"], "q1_other": "Pineapple"});
    let (status, reply) =
        post_callback(&app, &click(&event_id(), APPROVER, &submit, Some(form))).await;
    assert_eq!(status, 200);
    assert_eq!(reply["toast"]["type"], "success", "{reply}");
    let resolved = &reply["card"]["data"];
    assert_eq!(resolved["header"]["template"], "green");
    assert!(tagged(resolved, "form").is_empty());
    assert!(card_text(resolved).contains("Cheese, Olives, Pineapple"));
    let (_, body) = app
        .get("/v1/interactions/toolu_qa/wait?timeout_secs=5")
        .await;
    assert_eq!(body["result"]["behavior"], "allow");
    assert_eq!(
        body["result"]["updatedInput"]["answers"],
        json!({"Which color?": "Blue", "Which toppings?": "Cheese, Olives, Pineapple"})
    );
    assert_eq!(
        body["result"]["updatedInput"]["questions"],
        questions()["questions"]
    );
    app.stop().await;
}

#[tokio::test]
async fn question_answered_with_other_text_only() {
    let fake = FakeFeishu::start().await;
    let app = spawn_with(|s| enable(s, &fake)).await;
    let card = ask(&app, &fake, "toolu_qo").await;
    let submit = button_value(&card, "submit");
    let form = json!({"q0_other": "Green, please", "q1": ["1"]});
    let (_, reply) = post_callback(&app, &click(&event_id(), APPROVER, &submit, Some(form))).await;
    assert_eq!(reply["toast"]["type"], "success", "{reply}");
    let (_, body) = app
        .get("/v1/interactions/toolu_qo/wait?timeout_secs=5")
        .await;
    assert_eq!(
        body["result"]["updatedInput"]["answers"],
        json!({"Which color?": "Green, please", "Which toppings?": "Ham"})
    );
    app.stop().await;
}

#[tokio::test]
async fn invalid_question_forms_come_back_as_a_toast_and_change_nothing() {
    let fake = FakeFeishu::start().await;
    let app = spawn_with(|s| enable(s, &fake)).await;
    let card = ask(&app, &fake, "toolu_qv").await;
    let submit = button_value(&card, "submit");
    for (form, needle) in [
        (json!({"q1": ["0"]}), "Color"), // unanswered
        (
            json!({"q0": "0", "q0_other": "Both", "q1": ["0"]}),
            "not both",
        ), // ambiguous
        (json!({"q0": "7", "q1": ["0"]}), "no option"), // forged option
        (json!({"q0": "0", "q1": []}), "Toppings"), // empty multi
    ] {
        let (status, reply) = post_callback(
            &app,
            &click(&event_id(), APPROVER, &submit, Some(form.clone())),
        )
        .await;
        assert_eq!(status, 200);
        assert_eq!(reply["toast"]["type"], "error", "{form} → {reply}");
        assert!(
            reply["toast"]["content"].as_str().unwrap().contains(needle),
            "{form} → {reply}"
        );
        assert!(reply.get("card").is_none());
    }
    let i = app
        .registry
        .get(&imrelay::interaction::InteractionId::parse("toolu_qv").unwrap())
        .await
        .unwrap()
        .unwrap();
    assert!(i.is_pending());
    // The decline button denies the question.
    let (_, reply) = post_callback(
        &app,
        &click(&event_id(), APPROVER, &button_value(&card, "decline"), None),
    )
    .await;
    assert_eq!(reply["toast"]["content"], "Question declined");
    let (_, body) = app
        .get("/v1/interactions/toolu_qv/wait?timeout_secs=5")
        .await;
    assert_eq!(body["result"]["behavior"], "deny");
    app.stop().await;
}

#[tokio::test]
async fn a_non_approver_gets_an_error_toast_and_nothing_changes() {
    let fake = FakeFeishu::start().await;
    let app = spawn_with(|s| enable(s, &fake)).await;
    app.create_bash("toolu_na", "ls").await;
    let (_, card) = card_for(&fake, "toolu_na").await;
    let (status, reply) = post_callback(
        &app,
        &click(&event_id(), STRANGER, &button_value(&card, "approve"), None),
    )
    .await;
    assert_eq!(status, 200);
    assert_eq!(reply["toast"]["type"], "error");
    assert!(
        reply["toast"]["content"]
            .as_str()
            .unwrap()
            .contains("approver")
    );
    assert!(reply.get("card").is_none(), "the card stays as it is");
    let i = app
        .registry
        .get(&imrelay::interaction::InteractionId::parse("toolu_na").unwrap())
        .await
        .unwrap()
        .unwrap();
    assert!(i.is_pending());
    let metrics = app.metrics().await;
    assert!(
        metrics.contains("imrelay_feishu_callbacks_total{result=\"refused\"} 1"),
        "{metrics}"
    );
    app.stop().await;
}

#[tokio::test]
async fn approvers_may_be_given_as_user_ids() {
    let fake = FakeFeishu::start().await;
    let app = spawn_with(|s| {
        enable(s, &fake);
        s.feishu.approvers = vec![format!("u_{STRANGER}")];
    })
    .await;
    app.create_bash("toolu_uid", "ls").await;
    let (_, card) = card_for(&fake, "toolu_uid").await;
    let (_, reply) = post_callback(
        &app,
        &click(&event_id(), STRANGER, &button_value(&card, "approve"), None),
    )
    .await;
    assert_eq!(reply["toast"]["type"], "success", "{reply}");
    app.stop().await;
}

#[tokio::test]
async fn a_second_click_is_told_who_answered_and_gets_the_resolved_card() {
    let fake = FakeFeishu::start().await;
    let app = spawn_with(|s| enable(s, &fake)).await;
    app.create_bash("toolu_dbl", "ls").await;
    let (_, card) = card_for(&fake, "toolu_dbl").await;
    let (_, first) = post_callback(
        &app,
        &click(&event_id(), APPROVER, &button_value(&card, "approve"), None),
    )
    .await;
    assert_eq!(first["toast"]["type"], "success");
    let (status, second) = post_callback(
        &app,
        &click(&event_id(), APPROVER, &button_value(&card, "deny"), None),
    )
    .await;
    assert_eq!(status, 200);
    assert_eq!(second["toast"]["type"], "info");
    assert_eq!(
        second["toast"]["content"],
        format!("Already allowed by {APPROVER} via feishu")
    );
    assert_eq!(second["card"]["data"]["header"]["template"], "green");
    let (_, body) = app.get("/v1/interactions/toolu_dbl").await;
    assert_eq!(body["resolution"]["outcome"], "allowed");
    app.stop().await;
}

#[tokio::test]
async fn a_click_after_expiry_says_so() {
    let fake = FakeFeishu::start().await;
    let app = spawn_with(|s| enable(s, &fake)).await;
    let (status, _) = app
        .post(
            "/v1/interactions",
            &json!({"id": "toolu_exp", "tool_name": "Bash", "input": {"command": "ls"}, "timeout_secs": 1}),
        )
        .await;
    assert_eq!(status, 201);
    let (_, card) = card_for(&fake, "toolu_exp").await;
    let (_, body) = app
        .get("/v1/interactions/toolu_exp/wait?timeout_secs=5")
        .await;
    assert_eq!(body["resolution"]["outcome"], "expired");
    let (_, reply) = post_callback(
        &app,
        &click(&event_id(), APPROVER, &button_value(&card, "approve"), None),
    )
    .await;
    assert_eq!(reply["toast"]["type"], "info");
    assert!(
        reply["toast"]["content"]
            .as_str()
            .unwrap()
            .contains("Expired")
    );
    assert_eq!(reply["card"]["data"]["header"]["template"], "grey");
    app.stop().await;
}

#[tokio::test]
async fn a_replayed_event_id_gets_the_original_reply_and_changes_nothing() {
    let fake = FakeFeishu::start().await;
    let app = spawn_with(|s| enable(s, &fake)).await;
    app.create_bash("toolu_rep", "ls").await;
    let (_, card) = card_for(&fake, "toolu_rep").await;
    let eid = event_id();
    let approve = click(&eid, APPROVER, &button_value(&card, "approve"), None);
    let (_, first) = post_callback(&app, &approve).await;
    assert_eq!(first["toast"]["type"], "success");
    // The platform delivers the same click again: the clicker is told the same thing.
    let (status, again) = post_callback(&app, &approve).await;
    assert_eq!(status, 200);
    assert_eq!(again, first, "the original toast and card");
    // Another payload under the same event id (a forged replay) cannot act.
    let (status, forged) = post_callback(
        &app,
        &click(&eid, APPROVER, &button_value(&card, "deny"), None),
    )
    .await;
    assert_eq!(status, 200);
    assert_eq!(forged["toast"]["type"], "info", "{forged}");
    let (_, body) = app.get("/v1/interactions/toolu_rep").await;
    assert_eq!(body["resolution"]["outcome"], "allowed");
    let metrics = app.metrics().await;
    assert!(
        metrics.contains("imrelay_feishu_callbacks_total{result=\"duplicate\"} 2"),
        "{metrics}"
    );
    assert!(
        metrics.contains("imrelay_feishu_callbacks_total{result=\"resolved\"} 1"),
        "{metrics}"
    );
    app.stop().await;
}

#[tokio::test]
async fn a_click_cut_off_half_way_is_still_recorded_and_its_retry_told_so() {
    let fake = FakeFeishu::start().await;
    let store = gated_store();
    let mut s = settings();
    enable(&mut s, &fake);
    let app = spawn_on(s, store.clone()).await;
    app.create_bash("toolu_cut", "ls").await;
    let (_, card) = card_for(&fake, "toolu_cut").await;
    let approve = click(&event_id(), APPROVER, &button_value(&card, "approve"), None);

    // The answer's write is held; the platform gives up and drops the connection meanwhile.
    store.hooks.close();
    let request = {
        let client = app.client.clone();
        let body =
            json!({"encrypt": crypto::encrypt(ENCRYPT_KEY, &approve.to_string())}).to_string();
        let url = app.url("/feishu/callback");
        tokio::spawn(async move {
            let ts = jiff::Timestamp::now().as_second().to_string();
            let sig = crypto::signature(&ts, "n", ENCRYPT_KEY, body.as_bytes());
            client
                .post(url)
                .header("content-type", "application/json")
                .header("X-Lark-Request-Timestamp", ts)
                .header("X-Lark-Request-Nonce", "n")
                .header("X-Lark-Signature", sig)
                .body(body)
                .send()
                .await
        })
    };
    wait_until("the handler reaches the write", || {
        store.hooks.waiting() == 1
    })
    .await;
    request.abort();
    let _ = request.await;
    store.hooks.open();

    // The click lands all the same.
    let (_, body) = app
        .get("/v1/interactions/toolu_cut/wait?timeout_secs=5")
        .await;
    assert_eq!(body["resolution"]["outcome"], "allowed", "{body}");
    assert_eq!(body["resolution"]["by"], APPROVER);
    // The platform's retry tells the clicker it worked, with the resolved card.
    let (status, retry) = post_callback(&app, &approve).await;
    assert_eq!(status, 200);
    assert_eq!(retry["toast"]["type"], "success", "{retry}");
    assert_eq!(retry["toast"]["content"], "Allowed");
    assert_eq!(retry["card"]["data"]["header"]["template"], "green");
    // A fresh click by the same person is a second click, and is told so.
    let (_, second) = post_callback(
        &app,
        &click(&event_id(), APPROVER, &button_value(&card, "approve"), None),
    )
    .await;
    assert_eq!(second["toast"]["type"], "info", "{second}");
    app.stop().await;
}

#[tokio::test]
async fn forged_or_swapped_button_data_is_refused() {
    let fake = FakeFeishu::start().await;
    let app = spawn_with(|s| enable(s, &fake)).await;
    app.create_bash("toolu_f1", "ls").await;
    app.create_bash("toolu_f2", "rm -rf /").await;
    let (_, card1) = card_for(&fake, "toolu_f1").await;
    let good = button_value(&card1, "approve");
    // The MAC of toolu_f1's approve does not approve toolu_f2, nor deny toolu_f1 as allow.
    let mut swapped = good.clone();
    swapped["id"] = json!("toolu_f2");
    let mut changed = button_value(&card1, "deny");
    changed["action"] = json!("allow");
    for value in [
        swapped,
        changed,
        json!({"id": "toolu_f1", "action": "allow"}),
        json!("allow"),
    ] {
        let (status, reply) =
            post_callback(&app, &click(&event_id(), APPROVER, &value, None)).await;
        assert_eq!(status, 200);
        assert_eq!(reply["toast"]["type"], "error", "{value}");
        assert!(
            reply["toast"]["content"]
                .as_str()
                .unwrap()
                .contains("not valid")
        );
    }
    for id in ["toolu_f1", "toolu_f2"] {
        assert!(
            app.registry
                .get(&imrelay::interaction::InteractionId::parse(id).unwrap())
                .await
                .unwrap()
                .unwrap()
                .is_pending()
        );
    }
    app.stop().await;
}

#[tokio::test]
async fn with_no_approvers_every_click_is_refused_and_health_says_so() {
    let fake = FakeFeishu::start().await;
    let app = spawn_with(|s| {
        enable(s, &fake);
        s.feishu.approvers.clear();
    })
    .await;
    let (_, health) = app.get("/healthz").await;
    assert_eq!(health["components"]["feishu"]["approvers"], 0);
    app.create_bash("toolu_none", "ls").await;
    let (_, card) = card_for(&fake, "toolu_none").await;
    let (_, reply) = post_callback(
        &app,
        &click(&event_id(), APPROVER, &button_value(&card, "approve"), None),
    )
    .await;
    assert_eq!(reply["toast"]["type"], "error");
    app.stop().await;
}

#[tokio::test]
async fn other_event_types_and_garbage_are_handled() {
    let fake = FakeFeishu::start().await;
    let app = spawn_with(|s| enable(s, &fake)).await;
    let mut other = click(&event_id(), APPROVER, &json!({}), None);
    other["header"]["event_type"] = json!("im.message.receive_v1");
    let (status, reply) = post_callback(&app, &other).await;
    assert_eq!((status, reply), (StatusCode::OK, json!({})));
    let (status, reply) = post_plain(&app, &json!({"hello": "world"})).await;
    assert_eq!(status, 400, "{reply}");
    let resp = app
        .client
        .post(app.url("/feishu/callback"))
        .body("not json")
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 400);
    let (status, reply) = post_plain(&app, &json!({"encrypt": "bm90IGEgcmVhbCBib2R5"})).await;
    assert_eq!(status, 401, "{reply}");
    app.stop().await;
}

#[tokio::test]
async fn a_free_text_prompt_is_a_question_card_not_a_form() {
    let fake = FakeFeishu::start().await;
    let app = spawn_with(|s| enable(s, &fake)).await;
    let (status, _) = app
        .post(
            "/v1/interactions",
            &json!({"id": "fp1", "kind": "prompt", "message": "What is your favorite color?"}),
        )
        .await;
    assert_eq!(status, 201);
    let card = card_for(&fake, "fp1").await.1;
    // Asked as a question: its title and summary say so, the question stands out, and the
    // one box is for the answer (no field label, no "text" hint, no "*").
    assert_eq!(
        card["header"]["title"]["content"],
        "Question from the agent"
    );
    assert_eq!(
        card["config"]["summary"]["content"],
        "The agent asks: What is your favorite color?"
    );
    let text = card_text(&card["body"]);
    assert!(text.starts_with("What is your favorite color?"), "{text}");
    let mut headings = Vec::new();
    super::find_all(&card, &|v| v["text_size"] == "heading", &mut headings);
    assert_eq!(headings.len(), 1, "{card}");
    assert_eq!(headings[0]["content"], "What is your favorite color?");
    assert_eq!(
        headings[0]["tag"], "plain_text",
        "text from the agent is never markdown"
    );
    for form_word in ["Please fill in", "Answer *", "Submit", "Form"] {
        assert!(!text.contains(form_word), "{form_word:?} in {text}");
    }
    let inputs = tagged(&card, "input");
    assert_eq!(inputs.len(), 1, "{card}");
    assert_eq!(inputs[0]["placeholder"]["content"], "Your answer");
    assert_eq!(inputs[0]["required"], true);
    let buttons: Vec<&str> = tagged(&card, "button")
        .iter()
        .filter_map(|b| b["text"]["content"].as_str())
        .collect();
    assert_eq!(buttons, ["Send answer", "Decline to answer"]);

    let submit = button_value(&card, "submit");
    let form = json!({"f0": "Teal"});
    let (status, reply) =
        post_callback(&app, &click(&event_id(), APPROVER, &submit, Some(form))).await;
    assert_eq!(status, 200);
    assert_eq!(reply["toast"]["type"], "success", "{reply}");
    let resolved = &reply["card"]["data"];
    assert_eq!(
        resolved["header"]["title"]["content"],
        "Question from the agent · Answered"
    );
    // The question, who answered and when, and the answer itself.
    let shown = card_text(&resolved["body"]);
    assert!(
        shown.starts_with(&format!(
            "What is your favorite color?\n**Answered by <at id={APPROVER}></at> via feishu** · "
        )),
        "{shown}"
    );
    assert!(shown.ends_with("\n→ Teal"), "{shown}");
    let (_, body) = app.get("/v1/interactions/fp1/wait?timeout_secs=5").await;
    assert_eq!(
        body["result"],
        json!({"action": "accept", "content": {"answer": "Teal"}})
    );
    app.stop().await;
}
