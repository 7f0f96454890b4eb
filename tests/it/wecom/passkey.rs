//! A route that needs a passkey (`step_up`) on WeCom: with the inbox's address, its card is a
//! `text_notice` card whose only action opens its card in the inbox (a smart bot's buttons
//! are callbacks only, so the link is the card's own action and its jump link), saying why;
//! without one, the card keeps its buttons and a click is refused with the same words.

use imrelay::config::Settings;
use imrelay::config::teams::{PerChannel, RouteSettings, written};
use serde_json::json;

use super::channel::{APPROVER, CHATS, click, key, sent_cards, start_with, status};
use super::fake::{card_click, card_fault};

/// A route `prod` to both chats that needs a passkey.
fn prod(s: &mut Settings) {
    s.routes = vec![RouteSettings {
        name: "prod".into(),
        places: PerChannel::from([("wecom".into(), written(CHATS.to_vec()))]),
        step_up: true,
        ..Default::default()
    }];
}

#[tokio::test]
async fn a_step_up_approval_links_to_the_inbox_instead_of_answering() {
    let (fake, app) = start_with(|s| {
        s.server.public_url = "https://relay.example.com".into();
        prod(s);
    })
    .await;
    // (The fake refuses what the smart bot refuses: a button is a callback, never a link.)
    let link_button = json!({"card_type": "button_interaction", "task_id": "t",
        "button_list": [{"text": "Open", "type": 1, "url": "https://relay.example.com/", "key": "k"}]});
    assert!(card_fault(&link_button).is_some());
    app.create_bash("su-w", "make deploy-prod").await;
    for (_, card) in sent_cards(&fake, "make deploy-prod").await {
        assert_eq!(card["card_type"], "text_notice");
        assert!(
            card.get("button_list").is_none(),
            "nothing that answers: {card}"
        );
        let url = "https://relay.example.com/#su-w";
        assert_eq!(card["card_action"], json!({"type": 1, "url": url}));
        assert_eq!(
            card["jump_list"],
            json!([{"type": 1, "title": "🔑 Answer in the inbox", "url": url}])
        );
        assert_eq!(card["sub_title_text"], "make deploy-prod");
        let why = card["quote_area"]["quote_text"].as_str().unwrap();
        assert!(
            why.starts_with(
                "🔑 This needs a passkey (route \"prod\"): open it in the imrelay inbox"
            ),
            "{why}"
        );
    }
    app.stop().await;
}

#[tokio::test]
async fn without_the_inbox_address_a_click_on_a_step_up_card_is_refused() {
    let (fake, app) = start_with(prod).await;
    app.create_bash("su-w2", "make deploy-prod").await;
    let cards = sent_cards(&fake, "make deploy-prod").await;
    let (chat, card) = &cards[0];
    assert_eq!(card["card_type"], "button_interaction");
    let task = card["task_id"].as_str().unwrap();
    let update = click(
        &fake,
        "req-su-w2",
        card_click("m-su-w2", APPROVER, chat, &key(card, "Allow"), task),
    )
    .await;
    let shown = update["body"]["template_card"]["sub_title_text"]
        .as_str()
        .unwrap();
    assert!(
        shown.starts_with("⚠ This needs a passkey (route \"prod\")"),
        "{shown}"
    );
    assert!(status(&app, "su-w2").await["resolution"].is_null());
    app.stop().await;
}
