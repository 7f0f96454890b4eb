//! Steering OpenCode's sessions behind `imrelay bridge opencode` (docs/steering.md), with the
//! real `opencode serve` offline against the fake model: a session going idle is a finished
//! turn, and a reply continues it as the session's next message (OpenCode keeps it as the
//! person's message, what its interface shows); a deny's instruction reaches the model as the
//! tool's result and the turn goes on; a message sent mid-turn is the next message once the
//! session is idle; a person who does not approve the session's route changes nothing.

use imrelay::agents::steer::OnFinish;
use serde_json::{Value, json};

use super::Sandbox;
use super::acp_steer::{AGENT_TOKEN, ALICE, BOB, finished_question, model_reads, teams};
use super::fake_model::{Dialect, FakeModel, Step};
use super::opencode::{COMMAND, LIMIT, Server, bridge_log, bridge_with, pending_in};
use crate::support::{eventually_within, spawn_with};
use crate::trial;

pub(crate) fn trials() -> Vec<libtest_mimic::Trial> {
    vec![
        trial(
            "agents::opencode_steer::a_reply_to_an_idle_session_continues_it_and_a_non_approver_changes_nothing",
            super::opencode,
            a_reply_to_an_idle_session_continues_it_and_a_non_approver_changes_nothing,
        ),
        trial(
            "agents::opencode_steer::a_denys_instruction_reaches_the_model_and_a_mid_turn_message_is_the_next_one",
            super::opencode,
            a_denys_instruction_reaches_the_model_and_a_mid_turn_message_is_the_next_one,
        ),
    ]
}

/// The texts of the person's messages in `session`, as OpenCode keeps them (and its own
/// interface shows them).
async fn user_texts(server: &Server, session: &str) -> Vec<String> {
    let (_, messages) = server
        .call(
            reqwest::Method::GET,
            &format!("/session/{session}/message"),
            None,
        )
        .await;
    messages
        .as_array()
        .into_iter()
        .flatten()
        .filter(|m| m["info"]["role"] == "user")
        .flat_map(|m| m["parts"].as_array().cloned().unwrap_or_default())
        .filter_map(|p| p["text"].as_str().map(str::to_string))
        .collect()
}

/// Waits until OpenCode keeps a message of the person's in `session` containing `text`.
async fn opencode_keeps(server: &Server, session: &str, text: &str) {
    eventually_within(&format!("OpenCode keeps {text:?}"), LIMIT, || async {
        user_texts(server, session)
            .await
            .iter()
            .any(|t| t.contains(text))
            .then_some(())
    })
    .await;
}

async fn a_reply_to_an_idle_session_continues_it_and_a_non_approver_changes_nothing() {
    let model = FakeModel::start(Dialect::OpenAiChat, Step::Shell(COMMAND.into()), "Done.").await;
    let sandbox = Sandbox::new();
    let server = Server::start(&sandbox, &model, None).await;
    let mut app = spawn_with(teams("opencode", OnFinish::Ask)).await;
    app.token = Some(ALICE.into());
    let _bridge = bridge_with(&sandbox, &app, &server, Some(AGENT_TOKEN));
    let session = server.prompt("Write the proof file.").await;
    let call = pending_in(&app, &sandbox).await;
    let (status, body) = app
        .respond(
            call["id"].as_str().expect("id"),
            &json!({"decision": "allow"}),
        )
        .await;
    assert!(status.is_success(), "{body}");

    // Idle: the session's route is asked, with what the model said last.
    let q = finished_question(&app).await;
    assert_eq!(
        q["session"],
        session.as_str(),
        "{q}\n{}",
        bridge_log(&sandbox)
    );
    assert_eq!(q["agent"], "opencode", "{q}");
    let question = q["input"]["questions"][0]["question"]
        .as_str()
        .expect("the question")
        .to_string();
    assert!(question.contains("Done."), "{question}");
    let id = q["id"].as_str().expect("id").to_string();

    // Bob approves nothing here: his answer and his message change nothing.
    app.token = Some(BOB.into());
    let (status, body) = app
        .respond(&id, &json!({"answers": {&question: "Delete everything."}}))
        .await;
    assert_eq!(status, 403, "{body}");
    let path = format!("/v1/sessions/opencode/{session}/messages");
    let (status, body) = app
        .post(&path, &json!({"text": "Delete everything."}))
        .await;
    assert_eq!(status, 403, "{body}");
    app.token = Some(ALICE.into());
    let (_, still) = app.get(&format!("/v1/interactions/{id}")).await;
    assert_eq!(still["status"], "pending", "{still}");

    // Alice's reply is the session's next message: OpenCode keeps it as the person's and the
    // model reads it; the continued turn ends with another question.
    let reply = "Now add a line saying twice.";
    let (status, body) = app
        .respond(&id, &json!({"answers": {&question: reply}}))
        .await;
    assert!(status.is_success(), "{body}");
    opencode_keeps(&server, &session, reply).await;
    model_reads(&model, reply).await;
    let again = finished_question(&app).await;
    assert_ne!(again["id"], q["id"], "{again}");
    let texts: Vec<String> = user_texts(&server, &session).await;
    assert!(
        !texts.iter().any(|t| t.contains("Delete everything")),
        "{texts:?}"
    );
}

async fn a_denys_instruction_reaches_the_model_and_a_mid_turn_message_is_the_next_one() {
    let model = FakeModel::start(Dialect::OpenAiChat, Step::Shell(COMMAND.into()), "Done.").await;
    let sandbox = Sandbox::new();
    let mut server = Server::start(&sandbox, &model, None).await;
    let mut app = spawn_with(teams("opencode", OnFinish::Off)).await;
    app.token = Some(ALICE.into());
    let _bridge = bridge_with(&sandbox, &app, &server, Some(AGENT_TOKEN));
    let session = server.prompt("Write the proof file.").await;
    let call = pending_in(&app, &sandbox).await;

    // Mid-turn: queued until the session is idle, and the sender is told so.
    let note = "Also mention the weather.";
    let path = format!("/v1/sessions/opencode/{session}/messages");
    let (status, s) = app.post(&path, &json!({"text": note})).await;
    assert_eq!(status, 202, "{s}\n{}", bridge_log(&sandbox));
    assert_eq!(s["delivery"], "turn_end", "{s}");
    assert!(
        user_texts(&server, &session)
            .await
            .iter()
            .all(|t| !t.contains(note))
    );

    // A deny with an instruction: OpenCode gives the model the words as the call's result
    // and the turn goes on; then the queued message is the session's next one.
    let instruction = "Write the proof to other.txt instead.";
    let (status, body) = app
        .respond(
            call["id"].as_str().expect("id"),
            &json!({"decision": "deny", "message": instruction}),
        )
        .await;
    assert!(status.is_success(), "{body}");
    let told = model
        .wait_for_tool_result(LIMIT)
        .await
        .expect("the rejection reached the model");
    assert!(told.text.contains(instruction), "{told:?}");
    let s = session.clone();
    server
        .event("session.idle", move |p| p["sessionID"] == s)
        .await;
    opencode_keeps(&server, &session, note).await;
    model_reads(&model, note).await;
    let kept: Value = app.get(&format!("/v1/sessions/opencode/{session}")).await.1;
    assert_eq!(kept["messages"][0]["delivered_with"], "stopped", "{kept}");
    // The instruction was the deny's reply, not a message of its own.
    assert!(
        user_texts(&server, &session)
            .await
            .iter()
            .all(|t| !t.contains(instruction))
    );
    assert!(
        !sandbox.project().join("oc-proof.txt").exists(),
        "a denied command ran"
    );
}
