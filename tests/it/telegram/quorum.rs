//! The two-person rule across Telegram, Feishu and the inbox: a route with `quorum = 2` is
//! allowed only when two different people allowed it; every copy shows the votes so far; a
//! person's second vote, from any channel, is refused; one deny denies; expiry before the
//! quorum says how many allowed; the votes outlive a restart.

use imrelay::config::teams::{GroupSettings, PersonSettings, RouteSettings};

use super::*;
use crate::feishu::fake::FakeFeishu;
use crate::feishu::{
    APPROVER, CHAT, button_value, card_text, click, enable, event_id, post_callback,
};

/// Alice answers on Telegram and on Feishu (one person), Bob on Telegram; the deploy route
/// needs two of them.
fn teams(s: &mut Settings) {
    s.people = vec![
        PersonSettings {
            ids: imrelay::config::teams::PerChannel::from([
                (
                    "telegram".into(),
                    imrelay::config::teams::written(vec![ALICE.id as u64]),
                ),
                (
                    "feishu".into(),
                    imrelay::config::teams::written(vec![APPROVER]),
                ),
            ]),
            name: "alice".into(),
            ..Default::default()
        },
        PersonSettings {
            ids: imrelay::config::teams::PerChannel::from([(
                "telegram".into(),
                imrelay::config::teams::written(vec![BOB.id as u64]),
            )]),
            name: "bob".into(),
            ..Default::default()
        },
    ];
    s.groups = vec![GroupSettings {
        name: "deployers".into(),
        members: vec!["alice".into(), "bob".into()],
    }];
    s.routes = vec![RouteSettings {
        places: imrelay::config::teams::PerChannel::from([
            (
                "telegram".into(),
                imrelay::config::teams::written(vec![GROUP]),
            ),
            (
                "feishu".into(),
                imrelay::config::teams::written(vec![format!("chat_id:{CHAT}")]),
            ),
        ]),
        name: "deploy".into(),
        cwd: vec!["/srv/deploy/**".into()],
        approvers: vec!["deployers".into()],
        quorum: Some(2),
        ..Default::default()
    }];
}

fn deploy(id: &str, command: &str) -> Value {
    json!({"id": id, "tool_name": "Bash", "input": {"command": command},
           "agent": "claude-code", "cwd": "/srv/deploy"})
}

async fn both(store: Arc<dyn Store>) -> (TestApp, FakeTelegram, FakeFeishu) {
    let feishu = FakeFeishu::start().await;
    let (s, tg) = setup(Mode::Webhook, |s| {
        enable(s, &feishu);
        teams(s);
    })
    .await;
    (spawn_on(s, store).await, tg, feishu)
}

/// The newest card Feishu holds for message `message_id` (sent, or patched since).
fn feishu_card(fake: &FakeFeishu, message_id: &str) -> Option<Value> {
    fake.state
        .patches()
        .into_iter()
        .rev()
        .find(|p| p.message_id == message_id)
        .map(|p| p.card)
}

/// The card first sent for `id` and its message id.
async fn first_card(fake: &FakeFeishu, id: &str) -> (String, Value) {
    crate::feishu::card_for(fake, id).await
}

async fn click_as(app: &TestApp, open_id: &str, card: &Value, button: &str) -> Value {
    let (s, reply) = post_callback(
        app,
        &click(&event_id(), open_id, &button_value(card, button), None),
    )
    .await;
    assert_eq!(s, StatusCode::OK, "{reply}");
    reply
}

fn actions(audit: &[Value]) -> Vec<String> {
    audit
        .iter()
        .map(|e| e["action"].as_str().unwrap_or("").to_string())
        .collect()
}

#[tokio::test]
async fn two_people_allow_and_one_person_counts_once_across_channels() {
    let (app, tg, feishu) = both(Arc::new(MemoryStore::new())).await;
    let id = create(&app, deploy("q-two", "make deploy-prod")).await;
    // The agent waits for the decision.
    let waiter = {
        let (client, url) = (
            app.client.clone(),
            app.url(&format!("/v1/interactions/{id}/wait?timeout_secs=60")),
        );
        tokio::spawn(async move {
            client
                .get(url)
                .send()
                .await
                .unwrap()
                .json::<Value>()
                .await
                .unwrap()
        })
    };
    let p = prompt(&tg, GROUP, "make deploy-prod").await;
    assert!(
        p.text.contains("Needs 2 people · votes: 0 of 2"),
        "{}",
        p.text
    );
    // Each allows it as it is: no "always" or "allow similar" on a vote.
    assert!(
        p.buttons()
            .iter()
            .all(|(t, _)| !t.contains("similar") && !t.contains("Always"))
    );
    let (card_msg, card) = first_card(&feishu, "q-two").await;

    // Alice on Telegram: a vote, not yet a decision.
    assert_eq!(
        tap_on(&app, &tg, ALICE, &p, &p.button("✅ Allow")).await,
        "Vote recorded: 1 of 2: alice via telegram"
    );
    assert_eq!(status(&app, &id).await["status"], "pending");
    // Every copy shows it: the Telegram prompt (buttons kept) and the Feishu card.
    let e = edited(&tg, GROUP, p.message_id, "1 of 2: alice via telegram").await;
    assert!(e["reply_markup"]["inline_keyboard"].is_array(), "{e}");
    eventually("the Feishu card to show the vote", || async {
        feishu_card(&feishu, &card_msg)
            .filter(|c| card_text(c).contains("1 of 2: alice via telegram"))
            .map(|_| ())
    })
    .await;

    // Alice again, on Feishu this time: the same person, refused.
    let reply = click_as(&app, APPROVER, &card, "approve").await;
    assert_eq!(
        reply["toast"]["content"],
        "You already voted on this (allow via telegram): each person counts once",
        "{reply}"
    );
    // And on Telegram once more.
    assert_eq!(
        tap_on(&app, &tg, ALICE, &p, &p.button("✅ Allow")).await,
        "You already voted on this (allow via telegram): each person counts once"
    );
    assert_eq!(status(&app, &id).await["status"], "pending");
    assert!(!waiter.is_finished());

    // Bob decides.
    assert_eq!(
        tap_on(&app, &tg, BOB, &p, &p.button("✅ Allow")).await,
        "Allowed"
    );
    let got = waiter.await.unwrap();
    assert_eq!(got["status"], "resolved", "{got}");
    assert_eq!(got["result"]["behavior"], "allow");
    let done = status(&app, &id).await;
    assert_eq!(done["resolution"]["by"], "bob");
    let votes: Vec<&str> = done["votes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["person"].as_str().unwrap())
        .collect();
    assert_eq!(votes, ["alice", "bob"]);
    // The final copies say who allowed it.
    edited(
        &tg,
        GROUP,
        p.message_id,
        "2 of 2: alice via telegram, bob via telegram",
    )
    .await;
    // The audit trail: each vote, the refused second votes, and the one answer.
    let audit = audit_of(&app, &id).await;
    let a = actions(&audit);
    assert_eq!(a.iter().filter(|x| *x == "voted").count(), 2, "{a:?}");
    assert_eq!(a.iter().filter(|x| *x == "answered").count(), 1, "{a:?}");
    let refused: Vec<&Value> = audit.iter().filter(|e| e["action"] == "refused").collect();
    assert_eq!(refused.len(), 2, "{refused:?}");
    assert!(
        refused[0]["detail"]
            .as_str()
            .unwrap()
            .contains("already voted")
    );
    app.stop().await;
}

#[tokio::test]
async fn one_deny_denies() {
    let (app, tg, feishu) = both(Arc::new(MemoryStore::new())).await;
    let id = create(&app, deploy("q-deny", "make deploy-db")).await;
    let (_, card) = first_card(&feishu, "q-deny").await;
    // Alice allows on Feishu; Bob denies on Telegram: denied at once.
    let reply = click_as(&app, APPROVER, &card, "approve").await;
    assert_eq!(
        reply["toast"]["content"], "Vote recorded: 1 of 2: alice via feishu",
        "{reply}"
    );
    let p = prompt(&tg, GROUP, "make deploy-db").await;
    assert_eq!(
        tap_on(&app, &tg, BOB, &p, &p.button("❌ Deny")).await,
        "Denied"
    );
    let done = status(&app, &id).await;
    assert_eq!(done["resolution"]["outcome"], "denied");
    assert_eq!(done["resolution"]["by"], "bob");
    assert_eq!(done["votes"].as_array().unwrap().len(), 2);
    app.stop().await;
}

#[tokio::test]
async fn the_votes_outlive_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("imrelay.db");
    let store: Arc<dyn Store> = Arc::new(reopen_sqlite(&db).await);
    let (app, tg, feishu) = both(store).await;
    let id = create(&app, deploy("q-restart", "make deploy-cache")).await;
    let p = prompt(&tg, GROUP, "make deploy-cache").await;
    assert_eq!(
        tap_on(&app, &tg, ALICE, &p, &p.button("✅ Allow")).await,
        "Vote recorded: 1 of 2: alice via telegram"
    );
    app.stop().await;

    // Started again on the same database (and the same fakes): the count goes on.
    let store: Arc<dyn Store> = Arc::new(reopen_sqlite(&db).await);
    let mut s = settings();
    telegram_settings(&mut s, &tg, Mode::Webhook);
    enable(&mut s, &feishu);
    teams(&mut s);
    let app = spawn_on(s, store).await;
    assert_eq!(
        tap_on(&app, &tg, ALICE, &p, &p.button("✅ Allow")).await,
        "You already voted on this (allow via telegram): each person counts once"
    );
    assert_eq!(
        tap_on(&app, &tg, BOB, &p, &p.button("✅ Allow")).await,
        "Allowed"
    );
    let done = status(&app, &id).await;
    assert_eq!(done["resolution"]["outcome"], "allowed");
    assert_eq!(done["votes"].as_array().unwrap().len(), 2);
    app.stop().await;
}

#[tokio::test]
async fn the_inbox_votes_as_its_operator_and_questions_are_not_voted_on() {
    let feishu = FakeFeishu::start().await;
    let (s, tg) = setup(Mode::Webhook, |s| {
        enable(s, &feishu);
        teams(s);
        // The channels' approver lists answer; the inbox and the API too.
        s.routes[0].approvers.clear();
    })
    .await;
    let app = spawn_on(s, Arc::new(MemoryStore::new())).await;
    let mut events = Sse::connect(&app, None).await;
    let id = create(&app, deploy("q-inbox", "make deploy-web")).await;
    let (s, body) = app
        .respond(
            &id,
            &json!({"decision": "allow", "via": "desktop", "by": "dana"}),
        )
        .await;
    assert_eq!(s, StatusCode::ACCEPTED, "{body}");
    assert_eq!(body["status"], "pending");
    assert_eq!(body["vote"], "recorded");
    // Without labelled tokens the inbox is the administrator: the name given is not a voter.
    assert_eq!(body["votes"], "1 of 2: administrator via desktop");
    assert_eq!(body["interaction"]["quorum"]["allow"], 2);
    // The inbox hears of it as an event of its own.
    let voted = loop {
        let e = events.next().await;
        if e.event == "interaction.voted" {
            break e;
        }
    };
    assert_eq!(voted.data["votes"][0]["by"], "administrator");
    assert_eq!(voted.data["status"], "pending");
    // The same operator again, under another name: the same person.
    let (s, body) = app
        .respond(
            &id,
            &json!({"decision": "allow", "via": "desktop", "by": "someone else"}),
        )
        .await;
    assert_eq!(s, StatusCode::CONFLICT, "{body}");
    assert_eq!(body["error"]["code"], "already_voted");
    // An edited input is not voted on.
    let (s, body) = app
        .respond(
            &id,
            &json!({"decision": "allow", "updated_input": {"command": "ls"}}),
        )
        .await;
    assert_eq!(s, StatusCode::BAD_REQUEST, "{body}");
    // Alice on Telegram makes two.
    let p = prompt(&tg, GROUP, "make deploy-web").await;
    assert_eq!(
        tap_on(&app, &tg, ALICE, &p, &p.button("✅ Allow")).await,
        "Allowed"
    );
    assert_eq!(status(&app, &id).await["resolution"]["outcome"], "allowed");

    // A question on the same route: the first answer resolves it.
    let q = create(
        &app,
        json!({"id": "q-question", "tool_name": "AskUserQuestion", "input": questions_input(),
               "cwd": "/srv/deploy"}),
    )
    .await;
    let (s, body) = app
        .respond(
            &q,
            &json!({"answers": {"Which color?": "Red", "Which toppings?": ["Ham"]}}),
        )
        .await;
    assert_eq!(s, StatusCode::OK, "{body}");
    assert_eq!(body["status"], "resolved");
    app.stop().await;
}

#[tokio::test]
async fn expiry_before_the_quorum_denies_and_says_how_many_allowed() {
    let (app, tg, _feishu) = both(Arc::new(MemoryStore::new())).await;
    let mut call = deploy("q-expire", "make deploy-late");
    call["timeout_secs"] = json!(2);
    let id = create(&app, call).await;
    let p = prompt(&tg, GROUP, "make deploy-late").await;
    assert_eq!(
        tap_on(&app, &tg, ALICE, &p, &p.button("✅ Allow")).await,
        "Vote recorded: 1 of 2: alice via telegram"
    );
    let done = eventually("the deadline to pass", || async {
        let i = status(&app, &id).await;
        (i["status"] == "resolved").then_some(i)
    })
    .await;
    assert_eq!(done["resolution"]["outcome"], "expired");
    let message = done["resolution"]["result"]["message"].as_str().unwrap();
    assert!(message.contains("1 of 2 people allowed it"), "{message}");
    edited(&tg, GROUP, p.message_id, "1 of 2: alice via telegram").await;
    app.stop().await;
}
