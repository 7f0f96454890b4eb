//! Steering through `imrelay acp` (docs/steering.md), with the fake agent of `acp.rs`: the
//! proxy's own turn, started with a person's reply, has an id of its own and its answer never
//! reaches the editor; a prompt typed at the desk while a "finished" question waits withdraws
//! the question on every channel.

use imrelay::agents::steer::OnFinish;
use serde_json::{Value, json};

use crate::acp::{LIMIT, Proxied, open_session, proxied};
use crate::support::*;

/// Runs a turn the editor starts with `id`: the agent says `said`, then ends it.
async fn editor_turn(p: &mut Proxied, id: u64, session: &str, said: &str) {
    p.editor
        .send(
            json!({"jsonrpc": "2.0", "id": id, "method": "session/prompt",
            "params": {"sessionId": session, "prompt": [{"type": "text", "text": "go"}]}}),
        )
        .await;
    assert_eq!(p.agent.recv().await["id"], id);
    let chunk = json!({"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": session,
        "update": {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": said}}}});
    p.agent.send(chunk.clone()).await;
    assert_eq!(p.editor.recv().await, chunk);
    p.agent
        .send(json!({"jsonrpc": "2.0", "id": id, "result": {"stopReason": "end_turn"}}))
        .await;
    assert_eq!(p.editor.recv().await["result"]["stopReason"], "end_turn");
}

/// The "finished" question pending, once there is one other than `not`.
async fn finished(app: &TestApp, not: Option<&str>) -> Value {
    eventually_within("a finished question", LIMIT, || async {
        let (_, list) = app.get("/v1/interactions?status=pending").await;
        list["interactions"]
            .as_array()?
            .iter()
            .find(|i| i["kind"] == "question" && i["id"].as_str() != not)
            .cloned()
    })
    .await
}

#[tokio::test]
async fn the_proxys_turn_is_its_own_and_a_prompt_at_the_desk_withdraws_the_question() {
    let app = spawn_with(|s| {
        s.hooks.acp.on_finish = OnFinish::Ask;
        s.hooks.acp.finish_wait_secs = 600;
    })
    .await;
    let mut p = proxied(&app.url("")).await;
    let session = open_session(&mut p, "/home/dev/shop").await;
    editor_turn(&mut p, 3, &session, "All done.").await;

    let q = finished(&app, None).await;
    let id = q["id"].as_str().expect("id").to_string();
    let (_, full) = app.get(&format!("/v1/interactions/{id}")).await;
    assert_eq!(full["agent"], "fake-agent", "{full}");
    let question = full["input"]["questions"][0]["question"]
        .as_str()
        .expect("question")
        .to_string();
    assert!(question.contains("All done."), "{question}");
    let (status, body) = app
        .respond(
            &id,
            &json!({"answers": {&question: "Run the tests."}, "by": "alice"}),
        )
        .await;
    assert!(status.is_success(), "{body}");

    // The editor is shown the words; the agent gets a prompt with an id of the proxy's own.
    let shown = p.editor.recv().await;
    assert_eq!(
        shown["params"]["update"]["sessionUpdate"],
        "user_message_chunk"
    );
    let prompt = p.agent.recv().await;
    assert_eq!(prompt["method"], "session/prompt", "{prompt}");
    let own = prompt["id"].as_str().expect("a string id").to_string();
    assert!(own.starts_with("imrelay-"), "{own}");
    let text = prompt["params"]["prompt"][0]["text"].as_str().unwrap_or("");
    assert!(
        text.contains("alice") && text.contains("Run the tests."),
        "{text}"
    );
    assert_eq!(shown["params"]["update"]["content"]["text"], text);
    // Its work reaches the editor; its answer does not.
    let chunk = json!({"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": session,
        "update": {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "Tests pass."}}}});
    p.agent.send(chunk.clone()).await;
    assert_eq!(p.editor.recv().await, chunk);
    p.agent
        .send(json!({"jsonrpc": "2.0", "id": own, "result": {"stopReason": "end_turn"}}))
        .await;
    p.editor.quiet().await;

    // That turn's end asks again; a prompt at the desk withdraws the question everywhere.
    let again = finished(&app, Some(&id)).await;
    let again = again["id"].as_str().expect("id").to_string();
    let (_, full) = app.get(&format!("/v1/interactions/{again}")).await;
    assert!(
        full["input"]["questions"][0]["question"]
            .as_str()
            .is_some_and(|q| q.contains("Tests pass.")),
        "{full}"
    );
    p.editor
        .send(
            json!({"jsonrpc": "2.0", "id": 4, "method": "session/prompt",
            "params": {"sessionId": session, "prompt": [{"type": "text", "text": "stop"}]}}),
        )
        .await;
    assert_eq!(p.agent.recv().await["id"], 4);
    eventually_within("the question is withdrawn", LIMIT, || async {
        let (_, i) = app.get(&format!("/v1/interactions/{again}")).await;
        (i["resolution"]["outcome"] == "cancelled").then_some(())
    })
    .await;
    let (_, s) = app.get(&format!("/v1/sessions/fake-agent/{session}")).await;
    assert_eq!(s["delivery"], "turn_end", "{s}");
    assert_eq!(s["state"], "working", "{s}");
}
