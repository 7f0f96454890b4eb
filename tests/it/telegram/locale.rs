//! `telegram.locale = "zh_cn"`: what the bot says — the prompt and its buttons, the toasts
//! after a tap, the request for a reply and its end, the final text, the commands' answers —
//! is in Chinese, through the fake Bot API.

use super::*;
use imrelay::present::render::Locale;

#[tokio::test]
async fn in_chinese_the_bot_says_everything_in_chinese() {
    let (app, tg) = start_with(Mode::Webhook, |s| s.telegram.locale = Locale::ZhCn).await;
    // A command's answer.
    deliver(
        &app,
        &text(tg.next_update_id(), ALICE, GROUP, "/whoami", None),
    )
    .await;
    let calls = tg.wait_n("sendMessage", 1).await;
    let whoami = calls[0].params["text"].as_str().unwrap();
    assert!(
        whoami.contains("<code>-2001</code>") && whoami.contains("你是审批人"),
        "{whoami}"
    );
    // The prompt and its buttons.
    let id = app.create_bash("toolu_zh", "terraform destroy").await;
    let p = prompt(&tg, GROUP, "terraform destroy").await;
    assert!(
        p.text.contains("需要审批") && p.text.contains("内回答"),
        "{}",
        p.text
    );
    assert!(!p.text.contains("Answer within"), "{}", p.text);
    // A stranger's tap: the kit's refusal, in Chinese.
    let told = tap_on(&app, &tg, MALLORY, &p, &p.button("✅ 批准")).await;
    assert_eq!(told, "你不在审批人名单中，无法处理此请求");
    // Deny with a reason: the toast, the request, the reply, the final texts.
    let told = tap_on(&app, &tg, ALICE, &p, &p.button("💬 附理由拒绝…")).await;
    assert_eq!(told, "请回复下方消息，说明理由。");
    let ask = reply_request(&tg, 1).await;
    let asked = ask.params["text"].as_str().unwrap();
    assert!(asked.contains("请回复此消息，说明拒绝"), "{asked}");
    assert_eq!(
        ask.params["reply_markup"]["input_field_placeholder"],
        "拒绝理由"
    );
    reply_to(&app, &tg, ALICE, GROUP, ask.message_id.unwrap(), "今天不行").await;
    assert_eq!(status(&app, &id).await["resolution"]["outcome"], "denied");
    edited(&tg, GROUP, p.message_id, "由 Alice 通过 telegram 拒绝").await;
    edited(&tg, GROUP, ask.message_id.unwrap(), "无需再回复").await;
    // A tap on the settled prompt: told who answered, in Chinese.
    let told = tap_on(&app, &tg, ALICE, &p, &p.button("✅ 批准")).await;
    assert!(told.starts_with("已处理："), "{told}");
    app.stop().await;
}
