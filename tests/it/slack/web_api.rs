//! The Web API client against the fake: what each method sends, with which token, what it
//! reads back, and how every failure is classified for the delivery loop.

use std::time::Duration;

use imrelay::channels::slack::api::{ApiError, NewMessage, Retry, WebApi};
use imrelay::config::Secret;
use serde_json::json;

use super::fake::{APP_TOKEN, BOT_TOKEN, Failure, FakeSlack};
use crate::support::eventually;

fn client(slack: &FakeSlack) -> WebApi {
    WebApi::new(&slack.api, Secret::new(BOT_TOKEN), Secret::new(APP_TOKEN)).unwrap()
}

fn blocks() -> serde_json::Value {
    json!([
        {"type": "section", "text": {"type": "mrkdwn", "text": "*Bash* wants to run"}},
        {"type": "section", "text": {"type": "mrkdwn", "text": "```cargo publish```"}},
        {"type": "actions", "block_id": "decide", "elements": [
            {"type": "button", "action_id": "approve", "style": "primary", "value": "tok-a",
             "text": {"type": "plain_text", "text": "Approve"}},
            {"type": "button", "action_id": "deny", "style": "danger", "value": "tok-d",
             "text": {"type": "plain_text", "text": "Deny"}}]}
    ])
}

#[tokio::test]
async fn auth_test_names_the_bot_and_a_wrong_token_is_permanent() {
    let slack = FakeSlack::start().await;
    let who = client(&slack).auth_test().await.unwrap();
    assert_eq!(who.user_id, "U0BOT");
    assert_eq!(who.team_id, "T0TEAM");
    assert_eq!(who.bot_id.as_deref(), Some("B0BOT"));
    let call = &slack.state.calls("auth.test")[0];
    assert_eq!(call.token, BOT_TOKEN, "auth.test checks the bot token");

    let wrong = WebApi::new(
        &slack.api,
        Secret::new("xoxb-revoked"),
        Secret::new(APP_TOKEN),
    )
    .unwrap();
    let e = wrong.auth_test().await.unwrap_err();
    assert!(matches!(e, ApiError::Credentials { .. }), "{e}");
    assert_eq!(e.retry(), Retry::Permanent);
    assert_eq!(e.slack_error(), Some("invalid_auth"));
    assert!(
        !e.to_string().contains("xoxb-revoked"),
        "no token in errors: {e}"
    );
}

#[tokio::test]
async fn a_message_is_posted_as_json_blocks_and_updated_in_place() {
    let slack = FakeSlack::start().await;
    let api = client(&slack);
    let blocks = blocks();
    let posted = api
        .post_message(&NewMessage {
            channel: "C0APPROVALS",
            text: "Bash wants to run cargo publish",
            blocks: Some(&blocks),
            thread_ts: None,
        })
        .await
        .unwrap();
    assert_eq!(posted.channel, "C0APPROVALS");
    let call = &slack.state.calls("chat.postMessage")[0];
    assert_eq!(call.token, BOT_TOKEN);
    assert!(
        call.content_type.starts_with("application/json"),
        "{}",
        call.content_type
    );
    assert_eq!(call.body["blocks"], blocks);
    assert_eq!(call.body["text"], "Bash wants to run cargo publish");
    assert!(call.body.get("thread_ts").is_none(), "absent, not null");

    // A thread reply names its parent.
    api.post_message(&NewMessage {
        channel: "C0APPROVALS",
        text: "Approved by <@U0LEAD>",
        blocks: None,
        thread_ts: Some(&posted.ts),
    })
    .await
    .unwrap();
    assert_eq!(
        slack.state.calls("chat.postMessage")[1].body["thread_ts"],
        posted.ts.as_str()
    );

    let resolved = json!([{"type": "section", "text": {"type": "mrkdwn", "text": ":white_check_mark: Approved"}}]);
    api.update(&posted.channel, &posted.ts, "Approved", &resolved)
        .await
        .unwrap();
    let now = slack.state.message(&posted.channel, &posted.ts).unwrap();
    assert_eq!(
        now["blocks"], resolved,
        "the same message now shows the outcome"
    );

    let e = api
        .update(&posted.channel, "1.000000", "x", &resolved)
        .await
        .unwrap_err();
    assert_eq!(e.slack_error(), Some("message_not_found"));
    assert_eq!(e.retry(), Retry::Permanent);
}

#[tokio::test]
async fn ephemeral_notices_and_modals() {
    let slack = FakeSlack::start().await;
    let api = client(&slack);
    let ts = api
        .post_ephemeral(
            "C0APPROVALS",
            "U0STRANGER",
            "You are not an approver for this.",
        )
        .await
        .unwrap();
    assert!(!ts.is_empty());
    let call = &slack.state.calls("chat.postEphemeral")[0];
    assert_eq!(call.body["user"], "U0STRANGER");

    slack.state.triggers.lock().unwrap().insert("trig-1".into());
    let view = json!({"type": "modal", "callback_id": "deny-reason", "private_metadata": "tok",
        "title": {"type": "plain_text", "text": "Deny with reason"},
        "submit": {"type": "plain_text", "text": "Deny"},
        "blocks": [{"type": "input", "block_id": "reason", "label": {"type": "plain_text", "text": "Reason"},
            "element": {"type": "plain_text_input", "action_id": "reason", "multiline": true}}]});
    assert_eq!(api.views_open("trig-1", &view).await.unwrap(), "V0MODAL");
    assert_eq!(slack.state.calls("views.open")[0].body["view"], view);
    // A trigger id works once, for about three seconds.
    let e = api.views_open("trig-1", &view).await.unwrap_err();
    assert_eq!(e.slack_error(), Some("expired_trigger_id"));
    assert_eq!(e.retry(), Retry::Permanent);
}

#[tokio::test]
async fn rate_limits_carry_slacks_wait_and_other_failures_are_classified() {
    let slack = FakeSlack::start().await;
    let api = client(&slack);
    let msg = NewMessage {
        channel: "C0APPROVALS",
        text: "hi",
        blocks: None,
        thread_ts: None,
    };
    slack.state.fail(
        "chat.postMessage",
        &[
            Failure::RateLimited(7),
            Failure::ServerError,
            Failure::Error("internal_error"),
            Failure::Error("not_in_channel"),
        ],
    );
    let e = api.post_message(&msg).await.unwrap_err();
    assert_eq!(e.retry(), Retry::After(Duration::from_secs(7)), "{e}");
    let e = api.post_message(&msg).await.unwrap_err();
    assert_eq!(e.retry(), Retry::Transient, "{e}");
    let e = api.post_message(&msg).await.unwrap_err();
    assert_eq!(e.retry(), Retry::Transient, "{e}");
    let e = api.post_message(&msg).await.unwrap_err();
    assert_eq!(e.retry(), Retry::Permanent, "{e}");
    assert_eq!(e.slack_error(), Some("not_in_channel"));
    // Then it goes through.
    api.post_message(&msg).await.unwrap();

    let e = api
        .post_message(&NewMessage {
            channel: "C0NOWHERE",
            ..msg.clone()
        })
        .await
        .unwrap_err();
    assert_eq!(e.slack_error(), Some("channel_not_found"));
    assert_eq!(e.retry(), Retry::Permanent);

    // More blocks than Slack takes: refused for good, with Slack's explanation.
    let many = serde_json::Value::Array(vec![json!({"type": "divider"}); 51]);
    let e = api
        .post_message(&NewMessage {
            blocks: Some(&many),
            ..msg.clone()
        })
        .await
        .unwrap_err();
    assert_eq!(e.slack_error(), Some("invalid_blocks"));
    assert!(e.to_string().contains("no more than 50"), "{e}");
}

#[tokio::test]
async fn an_unreachable_slack_is_transient() {
    // A port nobody listens on.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let base = format!("http://{}/api", listener.local_addr().unwrap());
    drop(listener);
    let api = WebApi::new(&base, Secret::new(BOT_TOKEN), Secret::new(APP_TOKEN)).unwrap();
    let e = api.auth_test().await.unwrap_err();
    assert!(matches!(e, ApiError::Network { .. }), "{e}");
    assert_eq!(e.retry(), Retry::Transient);
}

#[tokio::test]
async fn socket_mode_urls_need_the_app_token() {
    let slack = FakeSlack::start().await;
    let url = client(&slack).connections_open().await.unwrap();
    assert!(url.starts_with("ws://127.0.0.1:"), "{url}");
    let call = &slack.state.calls("apps.connections.open")[0];
    assert_eq!(call.token, APP_TOKEN);

    // The bot token pasted where the app token belongs.
    let swapped = WebApi::new(&slack.api, Secret::new(BOT_TOKEN), Secret::new(BOT_TOKEN)).unwrap();
    let e = swapped.connections_open().await.unwrap_err();
    assert!(matches!(e, ApiError::Credentials { .. }), "{e}");
    assert_eq!(e.slack_error(), Some("not_allowed_token_type"));
}

#[tokio::test]
async fn a_method_limited_for_the_workspace_is_held_until_its_wait_passes() {
    let slack = FakeSlack::start().await;
    let api = client(&slack);
    let m = NewMessage {
        channel: "C0APPROVALS",
        text: "x",
        blocks: None,
        thread_ts: None,
    };
    let posted = api.post_message(&m).await.unwrap();
    slack.state.fail("chat.update", &[Failure::RateLimited(1)]);
    let e = api
        .update("C0APPROVALS", &posted.ts, "y", &json!([]))
        .await
        .unwrap_err();
    assert_eq!(e.retry(), Retry::After(Duration::from_secs(1)));
    // Asked again at once: refused here with what is left of the wait, Slack not asked.
    let e = api
        .update("C0OPS", &posted.ts, "y", &json!([]))
        .await
        .unwrap_err();
    match e.retry() {
        Retry::After(d) => assert!(d <= Duration::from_secs(1) && d > Duration::ZERO, "{d:?}"),
        other => panic!("{other:?}"),
    }
    assert_eq!(slack.state.calls("chat.update").len(), 1);
    // Other methods go on; chat.postMessage is limited per conversation, so never held.
    slack
        .state
        .fail("chat.postMessage", &[Failure::RateLimited(30)]);
    assert!(api.post_message(&m).await.is_err());
    assert!(api.post_message(&m).await.is_ok());
    // Once the wait passes, chat.update goes to Slack again: asked until then, each refusal
    // (Slack not asked) says what is left of it.
    eventually(
        "chat.update is let through once its wait passes",
        || async {
            match api.update("C0APPROVALS", &posted.ts, "y", &json!([])).await {
                Ok(_) => Some(()),
                Err(e) => match e.retry() {
                    Retry::After(left) if left <= Duration::from_secs(1) => {
                        tokio::time::sleep(left).await;
                        None
                    }
                    other => panic!("{other:?}"),
                },
            }
        },
    )
    .await;
    assert_eq!(slack.state.calls("chat.update").len(), 2);
}
