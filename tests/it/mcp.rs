//! The MCP endpoint driven by rmcp's own client over Streamable HTTP against the real server:
//! the tools and their answers from the API and Telegram, cancellation, deadlines and
//! progress, re-attaching, tokens, protocol errors, several sessions at once, and
//! `imrelay mcp` relaying stdio to a running server.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use imrelay::channels::telegram::Mode;
use imrelay::config::{Secret, Settings};
use reqwest::StatusCode;
use rmcp::model::{
    CallToolRequestParams, CallToolResult, ClientCapabilities, ClientConfig, ClientRequest,
    Implementation, ProgressNotificationParam, Request,
};
use rmcp::service::{NotificationContext, PeerRequestOptions, RunningService};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::{ClientHandler, RoleClient, ServiceError, ServiceExt};
use serde_json::{Map, Value, json};

use crate::support::*;

const AGENT_TOKEN: &str = "agent-token-0123456789";
const OPERATOR_TOKEN: &str = "operator-token-0123456789";

/// An MCP client that records the progress notifications it receives.
#[derive(Clone)]
struct Recorder {
    info: ClientConfig,
    progress: Arc<Mutex<Vec<ProgressNotificationParam>>>,
}

impl Recorder {
    fn named(name: &str) -> Self {
        Self {
            info: ClientConfig::new(
                ClientCapabilities::default(),
                Implementation::new(name, "1.2.3"),
            ),
            progress: Arc::default(),
        }
    }

    fn progress(&self) -> Vec<ProgressNotificationParam> {
        self.progress.lock().unwrap().clone()
    }
}

impl ClientHandler for Recorder {
    fn get_info(&self) -> ClientConfig {
        self.info.clone()
    }

    async fn on_progress(
        &self,
        params: ProgressNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        self.progress.lock().unwrap().push(params);
    }
}

type Client = RunningService<RoleClient, Recorder>;

/// `recorder` initializes a session at `url` with `token`.
async fn open(recorder: Recorder, url: String, token: Option<&str>) -> Result<Client, String> {
    let mut config = StreamableHttpClientTransportConfig::with_uri(url);
    if let Some(t) = token {
        config = config.auth_header(t);
    }
    let http = imrelay::cli::mcp::http_client().expect("an HTTP client");
    recorder
        .serve(StreamableHttpClientTransport::with_client(http, config))
        .await
        .map_err(|e| e.to_string())
}

/// Connects to `/mcp` as client `name` (version 1.2.3), with the app's token if it has one.
async fn connect(app: &TestApp, name: &str) -> Client {
    open(Recorder::named(name), app.url("/mcp"), app.token.as_deref())
        .await
        .expect("initialize")
}

/// A server with test defaults and one client `name` connected to it.
async fn app_with_client(name: &str) -> (TestApp, Client) {
    let app = spawn_app().await;
    let client = connect(&app, name).await;
    (app, client)
}

/// Closes `clients`' sessions, then stops `app`.
async fn close(app: TestApp, clients: impl IntoIterator<Item = Client>) {
    for c in clients {
        c.cancel().await.expect("the session closes");
    }
    app.stop().await;
}

fn args(v: Value) -> Map<String, Value> {
    v.as_object().cloned().expect("an object")
}

/// Calls `tool` with `arguments`.
async fn call(client: &Client, tool: &'static str, arguments: Value) -> CallToolResult {
    client
        .call_tool(CallToolRequestParams::new(tool).with_arguments(args(arguments)))
        .await
        .expect("a tool result")
}

/// Calls `tool` in the background.
fn spawn_call(
    client: &Client,
    tool: &'static str,
    arguments: Value,
) -> tokio::task::JoinHandle<Result<CallToolResult, ServiceError>> {
    let peer = client.peer().clone();
    tokio::spawn(async move {
        peer.call_tool(CallToolRequestParams::new(tool).with_arguments(args(arguments)))
            .await
    })
}

/// The text of `r`; where it has structured content, that says the same (clients such as
/// Codex show the model only the structured content).
fn text(r: &CallToolResult) -> String {
    let text = r
        .content
        .iter()
        .filter_map(|c| c.as_text().map(|t| t.text.clone()))
        .collect::<Vec<_>>()
        .join("\n");
    if let Some(s) = &r.structured_content {
        assert_eq!(s["summary"], text.as_str(), "{s}");
    }
    text
}

/// The one pending interaction whose tool is `tool`, once it exists.
async fn pending(app: &TestApp, tool: &str) -> Value {
    eventually(&format!("a pending {tool} interaction"), || async {
        let (s, body) = app.get("/v1/interactions?status=pending").await;
        assert_eq!(s, StatusCode::OK, "{body}");
        body["interactions"]
            .as_array()?
            .iter()
            .find(|i| i["tool_name"] == tool)
            .cloned()
    })
    .await
}

async fn respond(app: &TestApp, id: &Value, body: Value) {
    let (s, r) = app.respond(id.as_str().unwrap(), &body).await;
    assert_eq!(s, StatusCode::OK, "{r}");
}

#[tokio::test]
async fn initialize_names_the_server_and_lists_three_tools_with_schemas() {
    let (app, client) = app_with_client("inspector").await;
    let server = client.peer().peer_info().expect("server info");
    assert_eq!(server.server_info.as_ref().unwrap().name, "imrelay");
    assert!(
        server
            .instructions
            .as_deref()
            .unwrap()
            .contains("request_approval")
    );
    let tools = client.list_all_tools().await.unwrap();
    let mut names: Vec<&str> = tools.iter().map(|t| t.name.as_ref()).collect();
    names.sort_unstable();
    assert_eq!(
        names,
        ["ask_human", "permission_prompt", "request_approval"]
    );
    for t in &tools {
        assert_eq!(t.input_schema["type"], "object");
        // permission_prompt answers with text alone, which Claude Code reads.
        assert_eq!(
            t.output_schema.is_some(),
            t.name != "permission_prompt",
            "{}",
            t.name
        );
    }
    close(app, [client]).await;
}

#[tokio::test]
async fn request_approval_shows_who_asks_and_returns_the_decision_and_reason() {
    let (app, client) = app_with_client("test-agent").await;
    let call_task = spawn_call(
        &client,
        "request_approval",
        json!({"action": "Deploy build 42 to production", "reason": "the release is due",
               "details": {"command": "deploy --prod 42"}, "tool": "Bash"}),
    );
    let i = pending(&app, "Bash").await;
    assert_eq!(i["title"], "Deploy build 42 to production");
    assert_eq!(i["description"], "the release is due");
    assert_eq!(i["input"], json!({"command": "deploy --prod 42"}));
    assert_eq!(i["agent"], "test-agent/1.2.3");
    let session = i["session"].as_str().expect("the MCP session");
    assert!(!session.is_empty());
    respond(
        &app,
        &i["id"],
        json!({"decision": "deny", "message": "not on a Friday", "by": "alice"}),
    )
    .await;
    let r = call_task.await.unwrap().unwrap();
    assert_eq!(r.is_error, Some(false));
    assert_eq!(
        r.structured_content.clone().unwrap(),
        json!({"summary": "Denied by alice via api: not on a Friday. Do not go ahead.",
               "status": "denied", "approved": false, "message": "not on a Friday",
               "by": "alice", "via": "api", "id": i["id"]})
    );
    assert_eq!(
        text(&r),
        "Denied by alice via api: not on a Friday. Do not go ahead."
    );

    // Approved with edited details: the model is told to use them.
    let call_task = spawn_call(
        &client,
        "request_approval",
        json!({"action": "Delete the old logs", "details": {"path": "/var/log/app"}}),
    );
    let i = pending(&app, "request_approval").await;
    respond(
        &app,
        &i["id"],
        json!({"decision": "allow", "updated_input": {"path": "/var/log/app/2024"}, "by": "bob"}),
    )
    .await;
    let r = call_task.await.unwrap().unwrap();
    let s = r.structured_content.clone().unwrap();
    assert_eq!(s["status"], "approved");
    assert_eq!(s["approved"], true);
    assert_eq!(s["details"], json!({"path": "/var/log/app/2024"}));
    assert!(
        text(&r).starts_with("Approved by bob via api."),
        "{}",
        text(&r)
    );
    assert!(text(&r).contains("/var/log/app/2024"));
    close(app, [client]).await;
}

#[tokio::test]
async fn permission_prompt_answers_with_the_json_claude_code_reads_and_reattaches() {
    let (app, client) = app_with_client("claude-code").await;
    let input = json!({"command": "rm -rf build"});
    let prompt_args = json!({"tool_name": "Bash", "input": input, "tool_use_id": "toolu_01MCP"});
    let call_task = spawn_call(&client, "permission_prompt", prompt_args.clone());
    let i = pending(&app, "Bash").await;
    // The interaction is Claude Code's tool call itself, under its tool-use id.
    assert_eq!(i["id"], "toolu_01MCP");
    assert_eq!(i["input"], input);
    assert_eq!(i["kind"], "approval");
    respond(&app, &i["id"], json!({"decision": "allow", "by": "alice"})).await;
    let r = call_task.await.unwrap().unwrap();
    assert_eq!(
        text(&r),
        r#"{"behavior":"allow","updatedInput":{"command":"rm -rf build"}}"#
    );
    // Text only: Claude Code reads the decision from the first block of the content, and
    // turns a result with structured content into a string instead.
    assert_eq!(r.structured_content, None);
    assert_eq!(r.content.len(), 1);
    // The same call again (same tool-use id) gets the same answer without asking again.
    let again = call(&client, "permission_prompt", prompt_args).await;
    assert_eq!(text(&again), text(&r));

    let call_task = spawn_call(
        &client,
        "permission_prompt",
        json!({"tool_name": "Write", "input": {"file_path": "/etc/passwd", "content": "x"}}),
    );
    let i = pending(&app, "Write").await;
    respond(
        &app,
        &i["id"],
        json!({"decision": "deny", "message": "never /etc"}),
    )
    .await;
    let r = call_task.await.unwrap().unwrap();
    let decision: Value = serde_json::from_str(&text(&r)).unwrap();
    assert_eq!(
        decision,
        json!({"behavior": "deny", "message": "never /etc", "interrupt": false})
    );
    close(app, [client]).await;
}

#[tokio::test]
async fn ask_human_is_answered_by_a_tap_in_telegram() {
    let (app, tg) = crate::telegram::start(Mode::Polling).await;
    let client = connect(&app, "codex").await;
    let call_task = spawn_call(
        &client,
        "ask_human",
        json!({"question": "Which database for the cache?", "header": "Database",
               "choices": ["PostgreSQL", {"label": "SQLite", "description": "one file"}, "Redis"]}),
    );
    let p = crate::telegram::prompt(&tg, crate::telegram::PRIVATE, "Which database").await;
    // Every channel shows who is asking.
    assert!(p.text.contains("codex/1.2.3"), "{}", p.text);
    let sqlite = p
        .buttons()
        .into_iter()
        .find(|(label, _)| label.ends_with("SQLite"))
        .expect("a SQLite button")
        .1;
    let alice = crate::telegram::fake::Person {
        id: 1001,
        first_name: "Alice",
    };
    tg.push_update(crate::telegram::fake::tap(
        tg.next_update_id(),
        alice,
        crate::telegram::PRIVATE,
        p.message_id,
        &sqlite,
    ));
    let r = call_task.await.unwrap().unwrap();
    let s = r.structured_content.clone().unwrap();
    assert_eq!(s["status"], "answered");
    assert_eq!(s["answer"], "SQLite");
    assert_eq!(s["selected"], json!(["SQLite"]));
    assert_eq!(s["by"], "Alice");
    assert_eq!(s["via"], "telegram");
    assert_eq!(text(&r), "Alice via telegram chose: SQLite");
    close(app, [client]).await;
}

#[tokio::test]
async fn ask_human_takes_several_choices_and_typed_text_from_the_api() {
    let (app, client) = app_with_client("gemini-cli").await;
    let call_task = spawn_call(
        &client,
        "ask_human",
        json!({"question": "Which checks?", "choices": ["Lint", "Tests", "Docs"], "multiple": true}),
    );
    let i = pending(&app, "AskUserQuestion").await;
    assert_eq!(i["input"]["questions"][0]["multiSelect"], true);
    respond(
        &app,
        &i["id"],
        json!({"answers": {"Which checks?": ["Tests", "Lint", "benchmarks too"]}}),
    )
    .await;
    let r = call_task.await.unwrap().unwrap();
    let s = r.structured_content.unwrap();
    assert_eq!(s["selected"], json!(["Tests", "Lint"]));
    assert_eq!(s["other"], "benchmarks too");
    assert_eq!(s["answer"], "Tests, Lint, benchmarks too");

    // Declined.
    let call_task = spawn_call(
        &client,
        "ask_human",
        json!({"question": "Tabs or spaces?", "choices": ["Tabs", "Spaces"]}),
    );
    let i = pending(&app, "AskUserQuestion").await;
    respond(
        &app,
        &i["id"],
        json!({"decision": "deny", "message": "decide yourself", "by": "carol"}),
    )
    .await;
    let r = call_task.await.unwrap().unwrap();
    let s = r.structured_content.clone().unwrap();
    assert_eq!(s["status"], "declined");
    assert_eq!(s["message"], "decide yourself");
    assert_eq!(
        text(&r),
        "carol via api declined to answer: decide yourself"
    );
    close(app, [client]).await;
}

#[tokio::test]
async fn ask_human_asks_for_free_text_and_forms() {
    let (app, client) = app_with_client("cursor").await;
    // No choices: a free-text question, answered with what the person typed.
    let call_task = spawn_call(
        &client,
        "ask_human",
        json!({"question": "What is your favourite colour?"}),
    );
    let i = pending(&app, "imrelay:form").await;
    assert_eq!(i["kind"], "form");
    assert_eq!(i["input"]["message"], "What is your favourite colour?");
    respond(
        &app,
        &i["id"],
        json!({"action": "accept", "content": {"answer": "Teal"}, "by": "dana"}),
    )
    .await;
    let r = call_task.await.unwrap().unwrap();
    assert_eq!(r.is_error, Some(false));
    let s = r.structured_content.clone().unwrap();
    assert_eq!(s["status"], "answered");
    assert_eq!(s["answer"], "Teal");
    assert_eq!(s["content"], json!({"answer": "Teal"}));
    assert_eq!(text(&r), "dana via api answered: Teal");

    // A schema: a form, answered with its content.
    let call_task = spawn_call(
        &client,
        "ask_human",
        json!({"question": "Release details", "header": "Release", "schema": {
            "type": "object",
            "properties": {
                "version": {"type": "string", "pattern": "^[0-9]+\\.[0-9]+$"},
                "notify": {"type": "boolean", "title": "Tell the team", "default": true}
            },
            "required": ["version"]}}),
    );
    let i = pending(&app, "imrelay:form").await;
    assert_eq!(i["title"], "Release");
    respond(
        &app,
        &i["id"],
        json!({"action": "accept", "content": {"version": "1.4"}, "by": "dana"}),
    )
    .await;
    let r = call_task.await.unwrap().unwrap();
    let s = r.structured_content.clone().unwrap();
    assert_eq!(s["content"], json!({"version": "1.4", "notify": true}));
    assert!(
        text(&r).starts_with("dana via api filled in the form: version: 1.4; Tell the team: Yes."),
        "{}",
        text(&r)
    );

    // More choices than buttons hold: one list field of a form, answered like choices.
    let call_task = spawn_call(
        &client,
        "ask_human",
        json!({"question": "Which region?", "choices": ["eu-west", "eu-north", "us-east", "us-west", "ap-south"], "multiple": true}),
    );
    let i = pending(&app, "imrelay:form").await;
    assert_eq!(
        i["input"]["requestedSchema"]["properties"]["choice"]["items"]["anyOf"][4],
        json!({"const": "ap-south", "title": "ap-south"})
    );
    respond(
        &app,
        &i["id"],
        json!({"action": "accept", "content": {"choice": ["us-east", "eu-west"]}, "by": "dana"}),
    )
    .await;
    let r = call_task.await.unwrap().unwrap();
    let s = r.structured_content.clone().unwrap();
    assert_eq!(s["selected"], json!(["us-east", "eu-west"]));
    assert_eq!(text(&r), "dana via api chose: us-east, eu-west");

    // Declined.
    let call_task = spawn_call(&client, "ask_human", json!({"question": "Why?"}));
    let i = pending(&app, "imrelay:form").await;
    respond(
        &app,
        &i["id"],
        json!({"action": "decline", "message": "no time", "by": "dana"}),
    )
    .await;
    let r = call_task.await.unwrap().unwrap();
    let s = r.structured_content.clone().unwrap();
    assert_eq!(s["status"], "declined");
    assert_eq!(text(&r), "dana via api declined to answer: no time");
    close(app, [client]).await;
}

#[tokio::test]
async fn what_cannot_be_asked_is_a_tool_error_that_says_why() {
    let (app, client) = app_with_client("cursor").await;
    for (arguments, says) in [
        (
            json!({"question": "Release details", "schema": {"type": "object", "properties": {}}}),
            "schema.properties: a form needs 1 to 20 fields",
        ),
        (
            json!({"question": "Where?", "schema": {"type": "object", "properties": {"a": {"type": "object"}}}}),
            "schema.properties.a.type",
        ),
        (
            json!({"question": "Which?", "choices": ["a", "b"], "schema": {"type": "object", "properties": {"a": {"type": "string"}}}}),
            "either `choices` or `schema`",
        ),
        (
            json!({"question": "Which?", "choices": (0..51).map(|n| n.to_string()).collect::<Vec<_>>()}),
            "at most 50",
        ),
        (
            json!({"question": "Which?", "choices": ["a"]}),
            "request_approval",
        ),
        (
            json!({"question": "Which?", "choices": ["a", "a"]}),
            "choices[1]",
        ),
        (json!({"question": "  ", "choices": ["a", "b"]}), "question"),
        (
            json!({"question": "Which?", "choices": ["a", "b"], "timeout_secs": 0}),
            "timeout_secs",
        ),
        (
            json!({"question": "Which?", "choices": ["a", "b"], "id": "has space"}),
            "id:",
        ),
    ] {
        let r = call(&client, "ask_human", arguments.clone()).await;
        assert_eq!(r.is_error, Some(true), "{arguments}");
        assert!(text(&r).contains(says), "{arguments}: {}", text(&r));
    }
    let r = call(
        &client,
        "request_approval",
        json!({"action": "Ask", "tool": "AskUserQuestion"}),
    )
    .await;
    assert_eq!(r.is_error, Some(true));
    assert!(text(&r).contains("ask_human"), "{}", text(&r));
    // Nothing was created.
    let (_, list) = app.get("/v1/interactions").await;
    assert_eq!(list["interactions"], json!([]));
    close(app, [client]).await;
}

#[tokio::test]
async fn a_call_the_client_cancels_is_withdrawn_on_every_channel() {
    let app = spawn_app().await;
    let mut events = Sse::connect(&app, None).await;
    let client = connect(&app, "claude-code").await;
    let handle = client
        .peer()
        .send_cancellable_request(
            ClientRequest::CallToolRequest(Request::new(
                CallToolRequestParams::new("request_approval")
                    .with_arguments(args(json!({"action": "Drop the staging database"}))),
            )),
            PeerRequestOptions::no_options(),
        )
        .await
        .unwrap();
    let created = events.next().await;
    assert_eq!(created.event, "interaction.created");
    let id = created.data["id"].clone();
    assert_eq!(created.data["title"], "Drop the staging database");
    handle
        .cancel(Some("the user pressed Esc".into()))
        .await
        .unwrap();
    let resolved = events.next().await;
    assert_eq!(resolved.event, "interaction.resolved");
    let i = &resolved.data;
    assert_eq!(i["id"], id);
    assert_eq!(i["resolution"]["outcome"], "cancelled");
    assert_eq!(
        i["resolution"]["result"]["message"],
        "The MCP client cancelled the request"
    );
    assert_eq!(i["resolution"]["by"], "claude-code/1.2.3");
    close(app, [client]).await;
}

#[tokio::test]
async fn a_call_nobody_answers_ends_at_its_deadline_with_progress_meanwhile() {
    let app = spawn_with(|s| s.mcp.progress_interval_secs = 1).await;
    let recorder = Recorder::named("slow-agent");
    let client = open(recorder.clone(), app.url("/mcp"), None).await.unwrap();
    let r = call(
        &client,
        "request_approval",
        json!({"action": "Rotate the keys", "timeout_secs": 2}),
    )
    .await;
    let s = r.structured_content.clone().unwrap();
    assert_eq!(s["status"], "expired");
    assert_eq!(s["approved"], false);
    assert_eq!(s["message"], "No response within 2 seconds");
    assert_eq!(
        text(&r),
        "No response within 2 seconds: not approved. Do not go ahead without asking again."
    );
    let progress = recorder.progress();
    assert!(!progress.is_empty(), "no progress notification");
    assert_eq!(progress[0].total, Some(2.0));
    assert!(
        progress[0]
            .message
            .as_deref()
            .unwrap()
            .starts_with("Waiting for a person")
    );
    // A deadline beyond the server's maximum is clamped to it.
    let client2 = connect(&app, "slow-agent").await;
    let call_task = spawn_call(
        &client2,
        "request_approval",
        json!({"action": "Wait long", "timeout_secs": 999_999}),
    );
    let i = pending(&app, "request_approval").await;
    assert_eq!(i["timeout_secs"], 3600);
    respond(&app, &i["id"], json!({"decision": "allow"})).await;
    call_task.await.unwrap().unwrap();
    close(app, [client, client2]).await;
}

#[tokio::test]
async fn a_retried_call_with_the_same_id_waits_for_the_same_request() {
    let app = spawn_app().await;
    let first = connect(&app, "agent-a").await;
    let second = connect(&app, "agent-a").await;
    let asked = json!({"action": "Publish the crate", "id": "publish-0.4.0",
                       "details": {"version": "0.4.0"}});
    let a = spawn_call(&first, "request_approval", asked.clone());
    let i = pending(&app, "request_approval").await;
    assert_eq!(i["id"], "publish-0.4.0");
    // A retry from another session re-attaches instead of asking again.
    let b = spawn_call(&second, "request_approval", asked.clone());
    app.metrics_with("imrelay_mcp_calls_waiting 2").await;
    let (_, list) = app.get("/v1/interactions").await;
    assert_eq!(list["interactions"].as_array().unwrap().len(), 1);
    respond(&app, &i["id"], json!({"decision": "allow", "by": "dana"})).await;
    for task in [a, b] {
        let s = task.await.unwrap().unwrap().structured_content.unwrap();
        assert_eq!(s["status"], "approved");
        assert_eq!(s["by"], "dana");
    }
    // The same id for a different request is refused.
    let r = call(
        &first,
        "request_approval",
        json!({"action": "Publish the crate", "id": "publish-0.4.0", "details": {"version": "9"}}),
    )
    .await;
    assert_eq!(r.is_error, Some(true));
    assert!(text(&r).contains("already taken"), "{}", text(&r));
    close(app, [first, second]).await;
}

#[tokio::test]
async fn cancelling_one_of_two_calls_on_a_request_leaves_it_pending() {
    let app = spawn_app().await;
    let first = connect(&app, "agent-a").await;
    let second = connect(&app, "agent-b").await;
    let asked = json!({"action": "Merge the branch", "id": "merge-17"});
    let request = || {
        ClientRequest::CallToolRequest(Request::new(
            CallToolRequestParams::new("request_approval").with_arguments(args(asked.clone())),
        ))
    };
    let handle = first
        .peer()
        .send_cancellable_request(request(), PeerRequestOptions::no_options())
        .await
        .unwrap();
    let i = pending(&app, "request_approval").await;
    let b = spawn_call(&second, "request_approval", asked.clone());
    app.metrics_with("imrelay_mcp_calls_waiting 2").await;
    handle.cancel(None).await.unwrap();
    // The first call has left; the request stays for the second.
    app.metrics_with("imrelay_mcp_calls_waiting 1").await;
    let (_, now) = app
        .get(&format!("/v1/interactions/{}", i["id"].as_str().unwrap()))
        .await;
    assert_eq!(now["status"], "pending", "{now}");
    respond(&app, &i["id"], json!({"decision": "allow"})).await;
    assert_eq!(
        b.await.unwrap().unwrap().structured_content.unwrap()["status"],
        "approved"
    );
    close(app, [first, second]).await;
}

#[tokio::test]
async fn concurrent_calls_from_several_sessions_each_get_their_own_answer() {
    let app = spawn_app().await;
    let mut clients = Vec::new();
    let mut tasks = Vec::new();
    for n in 0..3 {
        let client = connect(&app, &format!("agent-{n}")).await;
        for k in 0..2 {
            tasks.push((
                format!("task {n}.{k}"),
                spawn_call(
                    &client,
                    "request_approval",
                    json!({"action": format!("task {n}.{k}")}),
                ),
            ));
        }
        clients.push(client);
    }
    let all = eventually("six pending interactions", || async {
        let (_, body) = app.get("/v1/interactions?status=pending").await;
        let list = body["interactions"].as_array()?.clone();
        (list.len() == 6).then_some(list)
    })
    .await;
    let sessions: std::collections::HashSet<&str> =
        all.iter().map(|i| i["session"].as_str().unwrap()).collect();
    assert_eq!(sessions.len(), 3, "one session per client");
    for i in &all {
        // Each is answered with its own title as the deny reason.
        respond(
            &app,
            &i["id"],
            json!({"decision": "deny", "message": i["title"]}),
        )
        .await;
    }
    for (title, task) in tasks {
        let s = task.await.unwrap().unwrap().structured_content.unwrap();
        assert_eq!(s["message"], title.as_str());
    }
    close(app, clients).await;
}

fn with_tokens(s: &mut Settings) {
    s.auth.agent_tokens = vec![Secret::new(AGENT_TOKEN)];
    s.auth.operator_tokens = vec![imrelay::config::OperatorToken::new(OPERATOR_TOKEN)];
}

fn initialize_body() -> Value {
    json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "curl", "version": "8"}}})
}

#[tokio::test]
async fn the_endpoint_takes_agent_tokens_only() {
    let mut app = spawn_with(with_tokens).await;
    let body = initialize_body().to_string();
    for (token, status, code) in [
        (None, StatusCode::UNAUTHORIZED, "unauthorized"),
        (
            Some("wrong-token-0123456789"),
            StatusCode::UNAUTHORIZED,
            "unauthorized",
        ),
        (Some(OPERATOR_TOKEN), StatusCode::FORBIDDEN, "forbidden"),
    ] {
        let (s, b) = split(post_mcp(&app, token, &body, None).await).await;
        assert_eq!(s, status, "{b}");
        assert_eq!(b["error"]["code"], code);
    }
    // rmcp's client with a bad token cannot initialize.
    let refused = open(
        Recorder::named("x"),
        app.url("/mcp"),
        Some("wrong-token-0123456789"),
    )
    .await;
    assert!(refused.is_err());
    app.token = Some(AGENT_TOKEN.into());
    let client = connect(&app, "ok").await;
    assert_eq!(client.list_all_tools().await.unwrap().len(), 3);
    close(app, [client]).await;
}

/// The JSON-RPC messages of a response, whether sent as JSON or as an event stream.
async fn messages(resp: reqwest::Response) -> (StatusCode, Vec<Value>) {
    let status = resp.status();
    let text = resp.text().await.unwrap();
    let mut out: Vec<Value> = text
        .lines()
        .filter_map(|l| l.strip_prefix("data:"))
        .filter_map(|d| serde_json::from_str(d.trim()).ok())
        .collect();
    if out.is_empty()
        && let Ok(v) = serde_json::from_str(&text)
    {
        out.push(v);
    }
    (status, out)
}

#[tokio::test]
async fn malformed_requests_unknown_methods_and_bad_arguments_get_json_rpc_errors() {
    let app = spawn_app().await;
    // Not JSON, and JSON that is not JSON-RPC: a 400 with the JSON-RPC error.
    for (garbage, code) in [
        ("{not json", -32700),
        ("", -32700),
        ("[]", -32600),
        (r#"{"jsonrpc":"2.0"}"#, -32600),
        (r#"{"jsonrpc":"2.0","id":1,"method":7}"#, -32600),
    ] {
        let (status, body) = split(post_mcp(&app, None, garbage, None).await).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{garbage}: {body}");
        assert_eq!(body["jsonrpc"], "2.0", "{garbage}: {body}");
        assert_eq!(body["error"]["code"], code, "{garbage}: {body}");
    }
    // The transport's own refusals come as JSON-RPC errors too, with their status.
    let (status, body) = split(
        post_mcp(
            &app,
            None,
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#,
            None,
        )
        .await,
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("Session ID is required")
    );
    let resp = app.client.put(app.url("/mcp")).send().await.unwrap();
    assert_eq!(resp.status(), StatusCode::METHOD_NOT_ALLOWED);
    assert!(resp.headers().contains_key("allow"));
    let (_, body) = split(resp).await;
    assert_eq!(body["error"]["code"], -32600);
    // A real session, then requests inside it.
    let resp = post_mcp(&app, None, &initialize_body().to_string(), None).await;
    assert_eq!(resp.status(), StatusCode::OK);
    let session = mcp_session(&resp);
    let (_, init) = messages(resp).await;
    assert_eq!(init[0]["result"]["serverInfo"]["name"], "imrelay");
    let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    let resp = post_mcp(&app, None, &initialized.to_string(), Some(&session)).await;
    assert!(resp.status().is_success(), "{}", resp.status());

    let expect_error = |(status, msgs): (StatusCode, Vec<Value>), code: i64, what: &str| {
        assert!(!status.is_server_error(), "{what}: {status}");
        let e = msgs
            .iter()
            .find(|m| m.get("error").is_some())
            .unwrap_or_else(|| panic!("{what}: no JSON-RPC error in {msgs:?}"));
        assert_eq!(e["error"]["code"], code, "{what}: {e}");
    };
    let rpc = |id: i64, method: &str, params: Value| {
        json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}).to_string()
    };
    expect_error(
        messages(
            post_mcp(
                &app,
                None,
                &rpc(2, "no/such/method", json!({})),
                Some(&session),
            )
            .await,
        )
        .await,
        -32601,
        "unknown method",
    );
    expect_error(
        messages(
            post_mcp(
                &app,
                None,
                &rpc(
                    3,
                    "tools/call",
                    json!({"name": "no_such_tool", "arguments": {}}),
                ),
                Some(&session),
            )
            .await,
        )
        .await,
        -32602,
        "unknown tool",
    );
    for (n, arguments) in [
        json!({}),
        json!({"action": 7}),
        json!({"action": "x", "details": "not an object"}),
        json!({"action": "x", "timeout_secs": -1}),
        json!({"action": "x", "surprise": true}),
        // Arguments that are not an object at all: still invalid params, not an unknown method.
        json!("x"),
        json!(["action", "x"]),
    ]
    .into_iter()
    .enumerate()
    {
        expect_error(
            messages(
                post_mcp(
                    &app,
                    None,
                    &rpc(
                        10 + n as i64,
                        "tools/call",
                        json!({"name": "request_approval", "arguments": arguments}),
                    ),
                    Some(&session),
                )
                .await,
            )
            .await,
            -32602,
            &arguments.to_string(),
        );
    }
    // An unknown session is a 404, as the transport specifies.
    let (status, body) = split(
        post_mcp(
            &app,
            None,
            &rpc(4, "tools/list", json!({})),
            Some("no-such-session"),
        )
        .await,
    )
    .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert_eq!(body["error"]["code"], -32600);
    // A second initialize in a session, a stray response and a request before any session:
    // never a 5xx.
    for (body, session) in [
        (initialize_body().to_string(), Some(session.as_str())),
        (json!({"jsonrpc": "2.0", "id": 99, "result": {}}).to_string(), Some(session.as_str())),
        (json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 12345}}).to_string(), Some(session.as_str())),
        (json!({"jsonrpc": "2.0", "method": "notifications/initialized"}).to_string(), None),
    ] {
        let resp = post_mcp(&app, None, &body, session).await;
        assert!(!resp.status().is_server_error(), "{body}: {}", resp.status());
    }
    let resp = app
        .client
        .delete(app.url("/mcp"))
        .header("Mcp-Session-Id", "no-such-session")
        .send()
        .await
        .unwrap();
    assert!(
        !resp.status().is_server_error(),
        "DELETE: {}",
        resp.status()
    );

    // rmcp's client sees the same as typed errors.
    let client = connect(&app, "typed").await;
    let e = client
        .call_tool(
            CallToolRequestParams::new("permission_prompt")
                .with_arguments(args(json!({"tool_name": "Bash", "input": "ls"}))),
        )
        .await
        .unwrap_err();
    match e {
        ServiceError::McpError(e) => {
            assert_eq!(e.code.0, -32602);
            assert!(e.message.contains("permission_prompt"), "{}", e.message);
        }
        other => panic!("expected a JSON-RPC error, got {other:?}"),
    }
    // Nothing was created by any of it, and the server still serves.
    let (_, list) = app.get("/v1/interactions").await;
    assert_eq!(list["interactions"], json!([]));
    close(app, [client]).await;
}

#[tokio::test]
async fn mcp_can_be_turned_off() {
    let app = spawn_with(|s| s.mcp.enabled = false).await;
    let resp = post_mcp(&app, None, &initialize_body().to_string(), None).await;
    assert_eq!(resp.status(), StatusCode::NOT_FOUND);
    app.stop().await;
}

/// `imrelay mcp` with `args`, its standard input and output piped.
fn stdio_relay(args: &[&str]) -> tokio::process::Child {
    tokio::process::Command::new(env!("CARGO_BIN_EXE_imrelay"))
        .arg("mcp")
        .args(args)
        .env_remove("IMRELAY_URL")
        .env_remove("IMRELAY_AGENT_TOKEN")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("imrelay mcp starts")
}

#[tokio::test]
async fn the_stdio_command_relays_to_a_running_server() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(&dir.path().join("db.sqlite"));
    let mut child = stdio_relay(&["--url", &server.base]);
    let io = (child.stdout.take().unwrap(), child.stdin.take().unwrap());
    let client = Recorder::named("stdio-client")
        .serve(io)
        .await
        .expect("initialize");
    let tools = client.list_all_tools().await.unwrap();
    assert_eq!(tools.len(), 3);
    let peer = client.peer().clone();
    let task = tokio::spawn(async move {
        peer.call_tool(
            CallToolRequestParams::new("request_approval")
                .with_arguments(args(json!({"action": "Restart nginx"}))),
        )
        .await
    });
    let http = reqwest::Client::new();
    let i = eventually("the relayed request", || async {
        let body: Value = http
            .get(format!("{}/v1/interactions?status=pending", server.base))
            .send()
            .await
            .ok()?
            .json()
            .await
            .ok()?;
        body["interactions"].as_array()?.first().cloned()
    })
    .await;
    // The client behind the relay is the one shown as asking.
    assert_eq!(i["agent"], "stdio-client/1.2.3");
    let id = i["id"].as_str().unwrap();
    let resp = http
        .post(format!("{}/v1/interactions/{id}/respond", server.base))
        .json(&json!({"decision": "allow", "by": "erin"}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::OK);
    let r = task.await.unwrap().unwrap();
    assert_eq!(r.structured_content.unwrap()["by"], "erin");
    client.cancel().await.unwrap();
    let status = tokio::time::timeout(Duration::from_secs(10), child.wait())
        .await
        .expect("the relay exits when its input closes")
        .unwrap();
    assert!(status.success(), "{status}");
}

#[tokio::test]
async fn the_stdio_command_says_why_it_cannot_relay() {
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    // Nothing listens there.
    let mut child = stdio_relay(&["--url", &format!("http://127.0.0.1:{port}")]);
    let io = (child.stdout.take().unwrap(), child.stdin.take().unwrap());
    let e = Recorder::named("x")
        .serve(io)
        .await
        .err()
        .expect("no initialize");
    let stderr = {
        use tokio::io::AsyncReadExt;
        let mut s = String::new();
        child
            .stderr
            .take()
            .unwrap()
            .read_to_string(&mut s)
            .await
            .unwrap();
        s
    };
    let status = child.wait().await.unwrap();
    assert!(!status.success());
    assert!(stderr.contains("cannot reach imrelay"), "{stderr} ({e})");
    drop(dir);
}

#[tokio::test]
async fn at_shutdown_a_keyed_call_stays_pending_for_its_retry_and_others_are_withdrawn() {
    let app = spawn_app().await;
    let store = app.store.clone();
    let client = connect(&app, "agent").await;
    let keyed = spawn_call(
        &client,
        "request_approval",
        json!({"action": "Keyed", "id": "keyed-1", "tool": "Keyed"}),
    );
    let unkeyed = spawn_call(
        &client,
        "request_approval",
        json!({"action": "Unkeyed", "tool": "Unkeyed"}),
    );
    pending(&app, "Keyed").await;
    let other = pending(&app, "Unkeyed").await;
    app.metrics_with("imrelay_mcp_calls_waiting 2").await;
    app.stop().await;
    // (The client's calls are left to its own retry policy.)
    keyed.abort();
    unkeyed.abort();
    let id = |s: &str| imrelay::interaction::InteractionId::parse(s).unwrap();
    let kept = store.get(&id("keyed-1")).await.unwrap().unwrap();
    assert!(kept.is_pending(), "{kept:?}");
    let withdrawn = store
        .get(&id(other["id"].as_str().unwrap()))
        .await
        .unwrap()
        .unwrap();
    let r = withdrawn.resolution.as_ref().expect("withdrawn");
    assert_eq!(
        r.message(),
        Some("imrelay shut down before anyone answered")
    );
}
