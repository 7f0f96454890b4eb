//! Digests on Feishu: past `feishu.digest_after` pending for one receiver, one card per
//! session with Review, Approve all and Deny all; the "all" answers confirmed on the card,
//! bound to what was listed; in English and Chinese.

use imrelay::channels::feishu::settings::{Locale, Receiver};
use serde_json::{Value, json};

use super::fake::FakeFeishu;
use super::{
    APPROVER, CHAT, STRANGER, button_value, card_for, card_text, click, enable, event_id,
    post_callback,
};
use crate::support::{TestApp, spawn_with, wait_until};

/// Feishu posting to the team chat alone, with digests past `after`, in `locale`.
async fn start(after: u32, locale: Locale) -> (TestApp, FakeFeishu) {
    let fake = FakeFeishu::start().await;
    let app = spawn_with(|s| {
        enable(s, &fake);
        s.feishu.receivers = vec![format!("chat_id:{CHAT}").parse::<Receiver>().unwrap()];
        s.feishu.digest_after = after;
        s.feishu.locale = locale;
    })
    .await;
    (app, fake)
}

async fn create(app: &TestApp, id: &str, session: &str, command: &str) {
    let (s, body) = app
        .post(
            "/v1/interactions",
            &json!({"id": id, "tool_name": "Bash", "input": {"command": command},
                    "session": session, "cwd": "/srv/shop"}),
        )
        .await;
    assert_eq!(s, 201, "{body}");
}

/// The digest card sent whose title contains `marker`: its message id and card.
async fn digest_sent(fake: &FakeFeishu, marker: &str) -> (String, Value) {
    let find = || {
        fake.state.delivered().into_iter().find(|s| {
            s.card["header"]["title"]["content"]
                .as_str()
                .is_some_and(|t| t.contains(marker))
        })
    };
    wait_until(&format!("a digest card {marker:?}"), || find().is_some()).await;
    let s = find().unwrap();
    (s.message_id.unwrap(), s.card)
}

/// The newest update of message `id` whose title contains `marker`.
async fn digest_patched(fake: &FakeFeishu, id: &str, marker: &str) -> Value {
    let find = || {
        fake.state.patches().into_iter().rev().find(|p| {
            p.message_id == id
                && p.card["header"]["title"]["content"]
                    .as_str()
                    .is_some_and(|t| t.contains(marker))
        })
    };
    wait_until(&format!("an update {marker:?}"), || find().is_some()).await;
    find().unwrap().card
}

/// Clicks `button` of digest card `card` (message `message`) as `who`: the toast and the
/// card the reply carries.
async fn press(
    app: &TestApp,
    who: &str,
    message: &str,
    card: &Value,
    button: &str,
) -> (String, Value) {
    let mut env = click(&event_id(), who, &button_value(card, button), None);
    env["event"]["context"]["open_message_id"] = json!(message);
    let (s, reply) = post_callback(app, &env).await;
    assert_eq!(s, 200, "{reply}");
    (
        reply["toast"]["content"].as_str().unwrap_or("").to_string(),
        reply["card"]["data"].clone(),
    )
}

async fn outcome(app: &TestApp, id: &str) -> Value {
    let (_, body) = app.get(&format!("/v1/interactions/{id}")).await;
    body
}

#[tokio::test]
async fn a_digest_card_is_kept_up_to_date_and_approves_all_after_confirming() {
    let (app, fake) = start(1, Locale::EnUs).await;
    create(&app, "toolu_fd0", "s-9", "ls").await;
    card_for(&fake, "toolu_fd0").await;
    let held = ["toolu_fd1", "toolu_fd2", "toolu_fd3"];
    for (n, id) in held.iter().enumerate() {
        create(&app, id, "s-9", &format!("make step{n}")).await;
    }
    let (message, sent) = digest_sent(&fake, "3 requests from session s-9 in /srv/shop").await;
    println!("digest card as sent: {sent:#}");
    let text = card_text(&sent);
    assert!(
        text.contains("• Run: make step0") && text.contains("• Run: make step2"),
        "{text}"
    );
    for b in ["digest_review", "digest_approve_all", "digest_deny_all"] {
        button_value(&sent, b);
    }
    // Only the first card and the digest were sent.
    assert_eq!(fake.state.delivered().len(), 2);

    // One more: the same card is updated, and what was seen before is stale.
    create(&app, "toolu_fd4", "s-9", "make step3").await;
    let now = digest_patched(&fake, &message, "4 requests").await;
    let (toast, card) = press(&app, APPROVER, &message, &sent, "digest_approve_all").await;
    assert!(
        toast.starts_with("This list changed since you saw it (now 4)"),
        "{toast}"
    );
    assert!(
        card["header"]["title"]["content"]
            .as_str()
            .unwrap()
            .contains("4 requests")
    );
    let (toast, _) = press(&app, STRANGER, &message, &now, "digest_approve_all").await;
    assert_eq!(toast, "You are not an approver for this");
    for id in held {
        assert_eq!(outcome(&app, id).await["status"], "pending");
    }

    // Approve all asks first, on the card itself.
    let (toast, confirm) = press(&app, APPROVER, &message, &now, "digest_approve_all").await;
    assert_eq!(toast, "Confirm on the message");
    println!("confirmation card: {confirm:#}");
    assert!(card_text(&confirm).contains("Approve 4 requests?"));
    assert_eq!(confirm["body"]["elements"].as_array().unwrap().len(), 3);
    let (toast, done) = press(&app, APPROVER, &message, &confirm, "digest_confirm").await;
    assert_eq!(toast, "Approved 4");
    assert!(card_text(&done).contains("all answered"), "{done}");
    for id in held.iter().chain(&["toolu_fd4"]) {
        let body = outcome(&app, id).await;
        assert_eq!(body["resolution"]["outcome"], "allowed", "{body}");
        assert_eq!(body["resolution"]["via"], "feishu");
    }
    assert_eq!(outcome(&app, "toolu_fd0").await["status"], "pending");
    app.stop().await;
}

#[tokio::test]
async fn a_chinese_digest_denies_all_and_review_posts_one_card() {
    let (app, fake) = start(1, Locale::ZhCn).await;
    create(&app, "toolu_fz0", "s-8", "ls").await;
    card_for(&fake, "toolu_fz0").await;
    for id in ["toolu_fz1", "toolu_fz2"] {
        create(&app, id, "s-8", "rm -rf build").await;
    }
    let (message, sent) = digest_sent(&fake, "会话 s-8（/srv/shop）：2 个待处理请求").await;
    let labels: Vec<String> = ["digest_review", "digest_approve_all", "digest_deny_all"]
        .iter()
        .map(|b| {
            let mut found = Vec::new();
            super::find_all(&sent, &|v| v["name"] == *b, &mut found);
            found[0]["text"]["content"].as_str().unwrap().to_string()
        })
        .collect();
    assert_eq!(labels, ["逐个查看", "全部批准", "全部拒绝"]);
    let (toast, _) = press(&app, APPROVER, &message, &sent, "digest_review").await;
    assert_eq!(toast, "已在下方单独显示第 1 个（共 2 个）");
    let (reviewed, _) = card_for(&fake, "toolu_fz1").await;
    let (toast, confirm) = press(&app, APPROVER, &message, &sent, "digest_deny_all").await;
    assert_eq!(toast, "请在消息中确认");
    assert!(card_text(&confirm).contains("确认拒绝这 2 个请求？"));
    let (toast, _) = press(&app, APPROVER, &message, &confirm, "digest_confirm").await;
    assert_eq!(toast, "已拒绝 2 个");
    for id in ["toolu_fz1", "toolu_fz2"] {
        assert_eq!(outcome(&app, id).await["resolution"]["outcome"], "denied");
    }
    // The card Review posted is updated to its outcome as any card is.
    wait_until("the reviewed card updated", || {
        fake.state
            .patches()
            .iter()
            .any(|p| p.message_id == reviewed && card_text(&p.card).contains("已拒绝"))
    })
    .await;
    app.stop().await;
}
