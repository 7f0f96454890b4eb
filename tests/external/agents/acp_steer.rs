//! Steering Gemini CLI behind `imrelay acp` (docs/steering.md), offline against the fake
//! model: a reply to the "finished" question continues the session with a prompt of the
//! proxy's own (the model reads the person's words; the editor sees them as a user message
//! and the agent's work, never the answer to the proxy's request); a deny's instruction is
//! the next prompt after the turn it ended; a message sent mid-turn waits for the turn's end;
//! a person who does not approve the session's route changes nothing.

use imrelay::agents::steer::OnFinish;
use imrelay::config::teams::{PersonSettings, RouteSettings};
use imrelay::config::{OperatorToken, Secret, Settings};
use serde_json::{Value, json};

use super::Sandbox;
use super::acp::{Agent, COMMAND, LIMIT, asked_in_imrelay};
use super::fake_model::{Dialect, FakeModel, Step};
use crate::support::{TestApp, eventually_within, spawn_with};
use crate::trial;

pub(crate) fn trials() -> Vec<libtest_mimic::Trial> {
    vec![
        trial(
            "agents::acp_steer::a_reply_to_a_finished_turn_continues_gemini_and_a_non_approver_changes_nothing",
            super::gemini_cli,
            a_reply_to_a_finished_turn_continues_gemini_and_a_non_approver_changes_nothing,
        ),
        trial(
            "agents::acp_steer::a_denys_instruction_and_a_message_sent_mid_turn_are_the_next_prompts",
            super::gemini_cli,
            a_denys_instruction_and_a_message_sent_mid_turn_are_the_next_prompts,
        ),
    ]
}

pub(super) const AGENT_TOKEN: &str = "agent-token-0123456789";
pub(super) const ALICE: &str = "alice-token-0123456789";
pub(super) const BOB: &str = "bob-token-0123456789";

/// `agent`'s sessions take a route alice approves; bob approves nothing. A finished turn of
/// an ACP agent or of OpenCode does what `on_finish` says.
pub(super) fn teams(agent: &'static str, on_finish: OnFinish) -> impl FnOnce(&mut Settings) {
    move |s| {
        s.auth.agent_tokens = vec![Secret::new(AGENT_TOKEN)];
        s.auth.operator_tokens = vec![
            OperatorToken::labelled(ALICE, "alice-laptop"),
            OperatorToken::labelled(BOB, "bob-phone"),
        ];
        s.people = vec![
            PersonSettings {
                name: "alice".into(),
                operator: vec!["alice-laptop".into()],
                ..Default::default()
            },
            PersonSettings {
                name: "bob".into(),
                operator: vec!["bob-phone".into()],
                ..Default::default()
            },
        ];
        s.routes = vec![RouteSettings {
            name: "steered".into(),
            agent: vec![agent.into()],
            approvers: vec!["alice".into()],
            ..Default::default()
        }];
        s.hooks.acp.on_finish = on_finish;
        s.hooks.acp.finish_wait_secs = 120;
        s.hooks.opencode.on_finish = on_finish;
        s.hooks.opencode.finish_wait_secs = 120;
    }
}

/// The pending "finished" question, once there is one.
pub(super) async fn finished_question(app: &TestApp) -> Value {
    eventually_within("a finished question waits in imrelay", LIMIT, || async {
        let (_, list) = app.get("/v1/interactions?status=pending").await;
        for i in list["interactions"].as_array()? {
            let (_, full) = app
                .get(&format!("/v1/interactions/{}", i["id"].as_str()?))
                .await;
            if full["input"]["questions"][0]["header"] == "Finished" {
                return Some(full);
            }
        }
        None
    })
    .await
}

/// Waits until a request to the model carries `text`.
pub(super) async fn model_reads(model: &FakeModel, text: &str) {
    eventually_within(&format!("the model reads {text:?}"), LIMIT, || async {
        model
            .requests()
            .iter()
            .any(|r| r.body.to_string().contains(text))
            .then_some(())
    })
    .await;
}

/// The session as imrelay keeps it.
async fn kept_session(app: &TestApp, id: &str) -> Value {
    app.get(&format!("/v1/sessions/gemini-cli/{id}")).await.1
}

/// Whether the editor was sent the answer to a request of the proxy's own.
fn saw_proxys_answer(seen: &[Value]) -> bool {
    seen.iter().any(|m| {
        m.get("method").is_none()
            && m["id"]
                .as_str()
                .is_some_and(|id| id.starts_with("imrelay-"))
    })
}

async fn a_reply_to_a_finished_turn_continues_gemini_and_a_non_approver_changes_nothing() {
    let mut app = spawn_with(teams("gemini-cli", OnFinish::Ask)).await;
    app.token = Some(ALICE.into());
    let model = FakeModel::start(Dialect::Gemini, Step::Shell(COMMAND.into()), "Done.").await;
    let sandbox = Sandbox::new();
    let mut agent = Agent::start_proxied_with(&sandbox, &model, &app.url(""), Some(AGENT_TOKEN));
    let session = agent.prompt(&sandbox).await;
    let call = asked_in_imrelay(&app).await;
    let (status, body) = app
        .respond(
            call["id"].as_str().expect("id"),
            &json!({"decision": "allow"}),
        )
        .await;
    assert!(status.is_success(), "{body}");
    let done = agent.until("the prompt's result", |m| m["id"] == 3).await;
    assert_eq!(done["result"]["stopReason"], "end_turn", "{done}");

    // The turn ended: the session's route is asked, with what Gemini CLI said last.
    let q = finished_question(&app).await;
    assert_eq!(q["session"], session.as_str(), "{q}");
    assert_eq!(q["agent"], "gemini-cli", "{q}");
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
    let path = format!("/v1/sessions/gemini-cli/{session}/messages");
    let (status, body) = app
        .post(&path, &json!({"text": "Delete everything."}))
        .await;
    assert_eq!(status, 403, "{body}");
    assert_eq!(body["error"]["code"], "not_an_approver", "{body}");
    app.token = Some(ALICE.into());
    let (_, still) = app.get(&format!("/v1/interactions/{id}")).await;
    assert_eq!(still["status"], "pending", "{still}");
    assert_eq!(kept_session(&app, &session).await["messages"], json!([]));

    // Alice's reply: the proxy prompts Gemini CLI with it.
    let reply = "Now add a line saying twice.";
    let (status, body) = app
        .respond(&id, &json!({"answers": {&question: reply}}))
        .await;
    assert!(status.is_success(), "{body}");
    model_reads(&model, reply).await;
    // The editor shows the words as the person's, then the agent's work, and the continued
    // turn ends with another finished question.
    agent
        .until("the reply shown as a user message", |m| {
            m["params"]["update"]["sessionUpdate"] == "user_message_chunk"
                && m["params"]["update"]["content"]["text"]
                    .as_str()
                    .is_some_and(|t| t.contains(reply))
        })
        .await;
    agent
        .until("the agent's reply to it", |m| {
            m["params"]["update"]["sessionUpdate"] == "agent_message_chunk"
        })
        .await;
    let again = finished_question(&app).await;
    assert_ne!(again["id"], q["id"], "{again}");
    assert!(
        !saw_proxys_answer(&agent.seen),
        "the editor saw the answer to the proxy's own prompt: {:#?}",
        agent.seen
    );
    assert!(
        !model
            .requests()
            .iter()
            .any(|r| r.body.to_string().contains("Delete everything")),
        "a non-approver's words reached the model"
    );
    drop(agent);
}

async fn a_denys_instruction_and_a_message_sent_mid_turn_are_the_next_prompts() {
    let mut app = spawn_with(teams("gemini-cli", OnFinish::Off)).await;
    app.token = Some(ALICE.into());
    let model = FakeModel::start(Dialect::Gemini, Step::Shell(COMMAND.into()), "Done.").await;
    let sandbox = Sandbox::new();
    let mut agent = Agent::start_proxied_with(&sandbox, &model, &app.url(""), Some(AGENT_TOKEN));
    let session = agent.prompt(&sandbox).await;
    let call = asked_in_imrelay(&app).await;

    // Mid-turn (the call waits): a message is queued until the turn ends, and the sender is
    // told so.
    let path = format!("/v1/sessions/gemini-cli/{session}/messages");
    let note = "Also mention the weather.";
    let (status, s) = app.post(&path, &json!({"text": note})).await;
    assert_eq!(status, 202, "{s}");
    assert_eq!(s["delivery"], "turn_end", "{s}");
    assert!(
        s["delivery_note"]
            .as_str()
            .is_some_and(|n| n.contains("when the agent's turn ends")),
        "{s}"
    );
    assert!(s["messages"][0]["delivered_at"].is_null(), "{s}");

    // A deny with an instruction: ACP tells Gemini CLI only "canceled"; the instruction and
    // the queued message follow as the next prompt once the turn is over.
    let instruction = "Write the proof to other.txt instead.";
    let (status, body) = app
        .respond(
            call["id"].as_str().expect("id"),
            &json!({"decision": "deny", "message": instruction}),
        )
        .await;
    assert!(status.is_success(), "{body}");
    let done = agent.until("the prompt's result", |m| m["id"] == 3).await;
    assert_eq!(done["result"]["stopReason"], "end_turn", "{done}");
    let told = model
        .wait_for_tool_result(LIMIT)
        .await
        .expect("the rejection reached the model");
    assert!(!told.text.contains(instruction), "{told:?}");
    model_reads(&model, instruction).await;
    model_reads(&model, note).await;
    let s = eventually_within("both are delivered", LIMIT, || async {
        let s = kept_session(&app, &session).await;
        let all = s["messages"].as_array()?;
        (all.len() == 2 && all.iter().all(|m| m["delivered_with"] == "stopped")).then_some(s)
    })
    .await;
    assert!(
        s["messages"][1]["text"]
            .as_str()
            .is_some_and(|t| t.contains(COMMAND) && t.contains(instruction)),
        "{s}"
    );
    // on_finish is off: no finished question is asked.
    let (_, pending) = app.get("/v1/interactions?status=pending").await;
    assert_eq!(pending["interactions"], json!([]), "{pending}");
    assert!(!saw_proxys_answer(&agent.seen), "{:#?}", agent.seen);
    drop(agent);
}
