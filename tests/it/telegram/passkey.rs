//! A route that needs a passkey (`step_up`) on Telegram: a copy offers no button that answers,
//! only a link (a URL button) to its card in the inbox, and says why; once it is answered
//! there, the copy shows the outcome like any other.

use imrelay::channels::telegram::Mode;
use imrelay::config::teams::{PerChannel, RouteSettings, written};

use super::*;

#[tokio::test]
async fn a_step_up_approval_links_to_the_inbox_instead_of_answering() {
    let (app, tg) = start_with(Mode::Webhook, |s| {
        s.server.public_url = "https://relay.example.com".into();
        s.routes = vec![RouteSettings {
            name: "prod".into(),
            places: PerChannel::from([("telegram".into(), written(vec![GROUP]))]),
            step_up: true,
            ..Default::default()
        }];
    })
    .await;
    create(
        &app,
        json!({"id": "su-1", "tool_name": "Bash", "input": {"command": "make deploy-prod"}}),
    )
    .await;
    let p = prompt(&tg, GROUP, "make deploy-prod").await;
    let shown = parse_html(&p.text).unwrap();
    assert!(
        shown.contains("This needs a passkey (route \"prod\"): open it in the imrelay inbox"),
        "{shown}"
    );
    let keyboard = &p.params["reply_markup"]["inline_keyboard"];
    assert_eq!(
        keyboard,
        &json!([[{"text": "🔑 Answer in the inbox", "url": "https://relay.example.com/#su-1"}]]),
        "one link, no button that answers"
    );
    assert!(tg.take_refusals().is_empty());

    // Only the inbox answers it: an answer without a passkey's assertion is refused.
    let (status, body) = app
        .post(
            "/v1/interactions/su-1/respond",
            &json!({"decision": "allow"}),
        )
        .await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{body}");
    assert_eq!(body["error"]["code"], "step_up_required", "{body}");
    app.stop().await;
}
