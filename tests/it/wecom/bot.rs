//! The bot long connection against the fake.

use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use imrelay::channels::longconn::tls_config;
use imrelay::channels::wecom::bot::{
    BotConnection, BotError, BotHandler, CardClick, Frame, Replies,
};
use imrelay::config::Secret;
use serde_json::json;
use tokio_util::sync::CancellationToken;

use super::fake::{BOT_ID, FakeWecom, SECRET, card_click, text};
use crate::support::wait_until;

/// Answers every card click with an updated card saying who clicked what; records results.
#[derive(Default)]
struct Cards {
    frames: Mutex<Vec<Frame>>,
    updates: Mutex<Vec<Result<(), String>>>,
}

#[async_trait::async_trait]
impl BotHandler for Cards {
    async fn callback(&self, frame: Frame, replies: Replies) {
        self.frames.lock().unwrap().push(frame.clone());
        if let Some(click) = CardClick::from_frame(&frame) {
            let card = json!({"card_type": "button_interaction", "task_id": click.task_id,
                "main_title": {"title": "Approved", "desc": format!("by {}", click.userid)},
                "button_list": [{"text": "Approved", "style": 1, "key": "done"}]});
            let r = replies
                .update_card(&click.req_id, card, &[])
                .await
                .map_err(|e| e.to_string());
            self.updates.lock().unwrap().push(r);
        }
    }
}

fn start(
    fake: &FakeWecom,
    secret: &str,
    cards: Arc<Cards>,
) -> (
    Arc<BotConnection>,
    CancellationToken,
    tokio::task::JoinHandle<()>,
) {
    let shutdown = CancellationToken::new();
    let bot = Arc::new(
        BotConnection::new(
            &fake.url,
            BOT_ID,
            Secret::new(secret),
            cards,
            shutdown.clone(),
            tls_config().unwrap(),
        )
        .with_heartbeat(Duration::from_millis(200)),
    );
    let task = tokio::spawn(bot.clone().run());
    (bot, shutdown, task)
}

#[tokio::test]
async fn subscribes_keeps_alive_and_answers_a_click_with_a_card_update() {
    let fake = FakeWecom::start().await;
    let cards = Arc::new(Cards::default());
    let (bot, shutdown, task) = start(&fake, SECRET, cards.clone());
    let s = &fake.state;
    wait_until("subscribed", || bot.replies().is_some()).await;
    let (_, sub) = s.sent("aibot_subscribe")[0].clone();
    assert_eq!(sub["body"], json!({"bot_id": BOT_ID, "secret": SECRET}));
    assert!(
        sub["headers"]["req_id"]
            .as_str()
            .unwrap()
            .starts_with("aibot_subscribe_")
    );
    wait_until("heartbeats", || s.sent("ping").len() >= 2).await;

    s.push(
        0,
        "aibot_event_callback",
        "req-click-1",
        card_click("m1", "lead", "g1", "approve", "task-1"),
    );
    wait_until("the update answered", || {
        !cards.updates.lock().unwrap().is_empty()
    })
    .await;
    assert_eq!(cards.updates.lock().unwrap()[0], Ok(()));
    let (_, update) = s.sent("aibot_respond_update_msg")[0].clone();
    assert_eq!(
        update["headers"]["req_id"], "req-click-1",
        "the click's own req_id"
    );
    assert_eq!(update["body"]["response_type"], "update_template_card");
    assert_eq!(update["body"]["template_card"]["task_id"], "task-1");

    // The same callback again (same msgid): handled once.
    s.push(
        0,
        "aibot_event_callback",
        "req-click-1",
        card_click("m1", "lead", "g1", "approve", "task-1"),
    );
    s.push(
        0,
        "aibot_msg_callback",
        "req-msg-1",
        text("m2", "lead", "g1", "hi"),
    );
    wait_until("the message handled", || {
        cards.frames.lock().unwrap().len() == 2
    })
    .await;
    assert_eq!(bot.stats().duplicates.load(Ordering::Relaxed), 1);

    // A dropped connection is opened and subscribed again.
    s.drop_conn(0);
    wait_until("subscribed again", || {
        s.sent("aibot_subscribe").len() == 2 && s.open_conns() == [1]
    })
    .await;
    shutdown.cancel();
    task.await.unwrap();
}

#[tokio::test]
async fn a_late_update_and_a_send_to_an_unreached_chat_are_refused_by_wecom() {
    let fake = FakeWecom::start().await;
    let cards = Arc::new(Cards::default());
    *fake.state.update_window.lock().unwrap() = Some(Duration::ZERO);
    let (bot, shutdown, task) = start(&fake, SECRET, cards.clone());
    wait_until("subscribed", || bot.replies().is_some()).await;
    fake.state.push(
        0,
        "aibot_event_callback",
        "req-late",
        card_click("m1", "lead", "g1", "approve", "task-1"),
    );
    wait_until("answered", || !cards.updates.lock().unwrap().is_empty()).await;
    let r = cards.updates.lock().unwrap()[0].clone();
    assert!(r.as_ref().unwrap_err().contains("846608"), "{r:?}");

    let replies = bot.replies().unwrap();
    let body = json!({"msgtype": "markdown", "markdown": {"content": "**Approval needed**"}});
    let e = replies.send("g-never", body.clone()).await.unwrap_err();
    assert!(
        matches!(
            e,
            BotError::Failed {
                errcode: 846609,
                ..
            }
        ),
        "{e}"
    );
    // Once someone has messaged the bot there, it can post.
    fake.state.push(
        0,
        "aibot_msg_callback",
        "req-msg",
        text("m9", "lead", "g-never", "hello"),
    );
    wait_until("the message handled", || {
        cards.frames.lock().unwrap().len() == 2
    })
    .await;
    replies.send("g-never", body).await.unwrap();
    let (_, sent) = fake.state.sent("aibot_send_msg")[1].clone();
    assert_eq!(sent["body"]["chatid"], "g-never");
    assert!(
        sent["headers"]["req_id"]
            .as_str()
            .unwrap()
            .starts_with("aibot_send_msg_")
    );
    shutdown.cancel();
    task.await.unwrap();
}

#[tokio::test]
async fn refused_credentials_silent_heartbeats_and_a_takeover() {
    let fake = FakeWecom::start().await;
    let (bot, shutdown, task) = start(&fake, "wrong", Arc::new(Cards::default()));
    wait_until("refused", || bot.last_error().is_some()).await;
    let e = bot.last_error().unwrap();
    assert!(e.contains("40014") && !e.contains("wrong"), "{e}");
    shutdown.cancel();
    task.await.unwrap();

    let (bot, shutdown, task) = start(&fake, SECRET, Arc::new(Cards::default()));
    wait_until("subscribed", || bot.replies().is_some()).await;
    let conn = fake.state.open_conns()[0];
    // Heartbeats stop being answered: the connection is given up and opened again.
    fake.state.mute_pings.store(true, Ordering::SeqCst);
    wait_until("given up", || {
        bot.last_error().is_some_and(|e| e.contains("heartbeats"))
    })
    .await;
    fake.state.mute_pings.store(false, Ordering::SeqCst);
    wait_until("reconnected", || {
        fake.state.open_conns().iter().any(|c| *c > conn) && bot.replies().is_some()
    })
    .await;

    // Another client took the bot over: this one lets go and does not fight back.
    let conn = *fake.state.open_conns().last().unwrap();
    fake.state.push(
        conn,
        "aibot_event_callback",
        "req-dc",
        json!({"msgid": "m-dc", "aibotid": BOT_ID,
        "from": {"userid": ""}, "msgtype": "event", "event": {"eventtype": "disconnected_event"}}),
    );
    wait_until("let go", || {
        bot.last_error()
            .is_some_and(|e| e.contains("another client"))
    })
    .await;
    assert!(bot.replies().is_none());
    shutdown.cancel();
    task.await.unwrap();
}
