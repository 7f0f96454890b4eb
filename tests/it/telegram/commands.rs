//! The bot's commands: /start, /whoami, /pending, /sessions.

use super::*;

// ---- commands -----------------------------------------------------------------------------

#[tokio::test]
async fn whoami_tells_ids_and_approver_status() {
    let (app, tg) = start(Mode::Webhook).await;
    tg.wait_n("setWebhook", 1).await;
    deliver(
        &app,
        &text(tg.next_update_id(), ALICE, GROUP, "/whoami", None),
    )
    .await;
    deliver(
        &app,
        &text(
            tg.next_update_id(),
            MALLORY,
            -3003,
            &format!("/start@{BOT_USERNAME}"),
            None,
        ),
    )
    .await;
    // Addressed to another bot: ignored.
    deliver(
        &app,
        &text(tg.next_update_id(), ALICE, GROUP, "/whoami@other_bot", None),
    )
    .await;
    let calls = tg.wait_n("sendMessage", 2).await;
    let alice = &calls[0].params;
    assert_eq!(alice["chat_id"], GROUP);
    let t = alice["text"].as_str().unwrap();
    assert!(t.contains("<code>-2001</code>"), "{t}");
    assert!(t.contains("<code>1001</code>"), "{t}");
    assert!(t.contains("you are an approver"), "{t}");
    assert!(t.contains("prompts are posted here"), "{t}");
    let mallory = calls[1].params["text"].as_str().unwrap();
    assert!(mallory.contains("<code>666</code>"), "{mallory}");
    assert!(mallory.contains("you are not an approver"), "{mallory}");
    assert!(
        mallory.contains("not in <code>telegram.chats</code>"),
        "{mallory}"
    );
    // One chat's updates are handled in order: once a later command in the same chat is
    // answered, the one addressed to another bot was handled, and nothing was sent for it.
    deliver(
        &app,
        &text(tg.next_update_id(), ALICE, GROUP, "/whoami", None),
    )
    .await;
    let calls = tg.wait_n("sendMessage", 3).await;
    let probe = calls[2].params["text"].as_str().unwrap();
    assert!(probe.contains("you are an approver"), "{probe}");
    assert_eq!(tg.calls("sendMessage").len(), 3);
    app.stop().await;
}

#[tokio::test]
async fn pending_reposts_pending_prompts_with_working_keyboards() {
    let (app, tg) = start_with(Mode::Webhook, |s| s.telegram.chats = vec![GROUP]).await;
    deliver(
        &app,
        &text(tg.next_update_id(), ALICE, GROUP, "/pending", None),
    )
    .await;
    tg.wait_for("sendMessage", |c| {
        c.iter().any(|c| c.params["text"] == "Nothing is pending.")
    })
    .await;
    let id = app.create_bash("toolu_repost", "docker system prune").await;
    let first = prompt(&tg, GROUP, "docker system prune").await;
    // Non-approvers cannot ask.
    deliver(
        &app,
        &text(tg.next_update_id(), MALLORY, GROUP, "/pending", None),
    )
    .await;
    deliver(
        &app,
        &text(tg.next_update_id(), BOB, GROUP, "/pending", None),
    )
    .await;
    let again = tg
        .wait_for("sendMessage", |c| {
            c.iter()
                .filter(|c| {
                    c.params["text"]
                        .as_str()
                        .unwrap_or("")
                        .contains("docker system prune")
                })
                .count()
                == 2
        })
        .await;
    let second = Posted::from(
        again
            .iter()
            .rev()
            .find(|c| {
                c.params["text"]
                    .as_str()
                    .unwrap()
                    .contains("docker system prune")
            })
            .unwrap(),
    );
    assert_ne!(first.message_id, second.message_id);
    assert!(
        tg.calls("sendMessage")
            .iter()
            .any(|c| c.params["text"] == "Only approvers can ask for the pending prompts.")
    );
    // The re-posted button works, and both copies are edited.
    assert_eq!(
        tap_on(&app, &tg, BOB, &second, &second.button("✅ Allow")).await,
        "Allowed"
    );
    assert_eq!(status(&app, &id).await["resolution"]["by"], "Bob");
    edited(&tg, GROUP, first.message_id, "Allowed by Bob via telegram").await;
    edited(&tg, GROUP, second.message_id, "Allowed by Bob via telegram").await;
    app.stop().await;
}

#[tokio::test]
async fn sessions_lists_the_agent_sessions_of_this_chats_routes() {
    let (app, tg) = start_with(Mode::Webhook, |s| s.telegram.chats = vec![GROUP]).await;
    deliver(
        &app,
        &text(tg.next_update_id(), ALICE, GROUP, "/sessions", None),
    )
    .await;
    tg.wait_for("sendMessage", |c| {
        c.iter()
            .any(|c| c.params["text"] == "No agent session of this chat's routes is known.")
    })
    .await;
    // A session whose turn ended, as Claude Code's hooks tell it.
    let stop = serde_json::json!({"hook_event_name": "Stop", "session_id": "s-tg",
        "cwd": "/srv/<shop>", "stop_hook_active": false,
        "last_assistant_message": "Tests pass <b>now</b>."});
    let (status, out) = app.post("/v1/hooks/claude-code", &stop).await;
    assert_eq!(status, 200, "{out}");
    deliver(
        &app,
        &text(tg.next_update_id(), ALICE, GROUP, "/sessions", None),
    )
    .await;
    let calls = tg
        .wait_for("sendMessage", |c| {
            c.iter().any(|c| {
                c.params["text"]
                    .as_str()
                    .unwrap_or("")
                    .starts_with("<b>Sessions</b>")
            })
        })
        .await;
    let listing = calls
        .iter()
        .filter_map(|c| c.params["text"].as_str())
        .find(|t| t.starts_with("<b>Sessions</b>"))
        .unwrap()
        .to_string();
    // Outside text is escaped for Telegram's HTML.
    assert!(
        listing.contains("finished · claude-code · /srv/&lt;shop&gt;"),
        "{listing}"
    );
    assert!(
        listing.contains("Tests pass &lt;b&gt;now&lt;/b&gt;."),
        "{listing}"
    );
    // Not for those who may not answer.
    deliver(
        &app,
        &text(tg.next_update_id(), MALLORY, GROUP, "/sessions", None),
    )
    .await;
    tg.wait_for("sendMessage", |c| {
        c.iter()
            .any(|c| c.params["text"] == "Only approvers can list the sessions.")
    })
    .await;
    app.stop().await;
}
