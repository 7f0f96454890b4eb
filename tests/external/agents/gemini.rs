//! Gemini CLI (`@google/gemini-cli`, pinned in `npm/gemini-cli`) against the real imrelay over
//! MCP (Streamable HTTP at `/mcp`). The model is [`FakeModel`] speaking the Gemini API
//! (`GOOGLE_GEMINI_BASE_URL`); a [`Tap`] between Gemini CLI and imrelay keeps what went over
//! the wire.

use std::path::PathBuf;
use std::time::Duration;

use serde_json::{Value, json};

use super::fake_model::{Dialect, FakeModel, Step};
use super::tap::Tap;
use super::{Running, Sandbox, installed};
use crate::support::*;
use crate::trial;

pub(crate) fn trials() -> Vec<libtest_mimic::Trial> {
    vec![
        trial(
            "agents::gemini::request_approval_round_trips_over_streamable_http",
            super::gemini_cli,
            request_approval_round_trips_over_streamable_http,
        ),
        trial(
            "agents::gemini::ask_human_round_trips_over_streamable_http",
            super::gemini_cli,
            ask_human_round_trips_over_streamable_http,
        ),
        trial(
            "agents::gemini::headless_runs_hide_an_untrusted_servers_tools",
            super::gemini_cli,
            headless_runs_hide_an_untrusted_servers_tools,
        ),
        trial(
            "agents::gemini::mcp_add_transport_http_writes_url_and_type_and_that_form_works",
            super::gemini_cli,
            mcp_add_transport_http_writes_url_and_type_and_that_form_works,
        ),
    ]
}

/// How long one run of Gemini CLI may take, start to end.
const RUN_LIMIT: Duration = Duration::from_secs(90);

pub(crate) fn gemini() -> PathBuf {
    installed("gemini-cli").expect("installed (checked by the trial's need)")
}

/// Gemini CLI's user settings for a run: no updates, statistics or telemetry, API-key
/// authentication, and `servers` as its MCP servers.
pub(crate) fn write_settings(sandbox: &Sandbox, servers: Value) {
    let dir = sandbox.home().join(".gemini");
    std::fs::create_dir_all(&dir).expect("~/.gemini");
    let settings = json!({
        "general": {"enableAutoUpdate": false, "enableAutoUpdateNotification": false},
        "privacy": {"usageStatisticsEnabled": false},
        "telemetry": {"enabled": false},
        "security": {"auth": {"selectedType": "gemini-api-key"}},
        "mcpServers": servers,
    });
    std::fs::write(dir.join("settings.json"), settings.to_string()).expect("settings.json");
}

/// `gemini` with the model at `model`.
pub(crate) fn gemini_command(sandbox: &Sandbox, model: &FakeModel) -> tokio::process::Command {
    let mut c = sandbox.command(&gemini());
    c.env("GEMINI_API_KEY", "imrelay-test-key")
        .env("GOOGLE_GEMINI_BASE_URL", model.base_url());
    c
}

/// Starts `gemini -p` with imrelay (through `tap`) as the trusted MCP server `imrelay`.
fn start(sandbox: &Sandbox, tap: &Tap, model: &FakeModel) -> Running {
    write_settings(
        sandbox,
        json!({"imrelay": {"httpUrl": tap.url("/mcp"), "trust": true, "timeout": 60000}}),
    );
    start_headless(sandbox, model)
}

/// Starts `gemini -p` with the settings already written.
fn start_headless(sandbox: &Sandbox, model: &FakeModel) -> Running {
    let mut c = gemini_command(sandbox, model);
    c.args(["-p", "Ask before writing the proof file."]).args([
        "-m",
        "gemini-2.5-flash",
        "--output-format",
        "json",
        "--skip-trust",
    ]);
    sandbox.spawn(c)
}

async fn pending(agent: &mut Running, app: &TestApp, tap: &Tap, model: &FakeModel) -> Value {
    agent
        .until_or(
            "the call is pending in imrelay",
            RUN_LIMIT,
            || async {
                let (_, list) = app.get("/v1/interactions?status=pending").await;
                list["interactions"].as_array()?.first().cloned()
            },
            || {
                format!(
                    "{}\n--- the model was asked\n{}",
                    tap.describe(),
                    model.describe()
                )
            },
        )
        .await
}

/// What the fake model was told the MCP tool returned.
async fn told(model: &FakeModel, out: &super::Output) -> String {
    model
        .wait_for_tool_result(Duration::from_secs(1))
        .await
        .unwrap_or_else(|| {
            panic!(
                "no tool result reached the model\n{}\nrequests:\n{}",
                out.describe(),
                model.describe()
            )
        })
        .text
}

async fn request_approval_round_trips_over_streamable_http() {
    let app = spawn_app().await;
    let tap = Tap::start(format!("http://{}", app.addr)).await;
    let step = Step::Tool {
        name: "request_approval".into(),
        input: json!({"action": "Write the proof file", "details": {"command": "echo ok > proof.txt"}}),
    };
    let model = FakeModel::start(Dialect::Gemini, step, "Done.").await;
    let sandbox = Sandbox::new();
    let mut agent = start(&sandbox, &tap, &model);

    let asked = pending(&mut agent, &app, &tap, &model).await;
    assert!(
        asked["agent"].as_str().unwrap_or("").contains("gemini"),
        "{asked}"
    );
    let (status, body) = app
        .respond(
            asked["id"].as_str().expect("id"),
            &json!({"decision": "allow", "by": "alice"}),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    let out = agent.finish(RUN_LIMIT).await;
    let text = told(&model, &out).await;
    assert!(
        text.contains("approved") || text.contains("Approved"),
        "{text}\n{}",
        out.describe()
    );
    assert!(out.succeeded(), "{}", out.describe());
}

async fn ask_human_round_trips_over_streamable_http() {
    let app = spawn_app().await;
    let tap = Tap::start(format!("http://{}", app.addr)).await;
    let step = Step::Tool {
        name: "ask_human".into(),
        input: json!({"question": "Which database?", "choices": ["SQLite", "PostgreSQL"]}),
    };
    let model = FakeModel::start(Dialect::Gemini, step, "Done.").await;
    let sandbox = Sandbox::new();
    let mut agent = start(&sandbox, &tap, &model);

    let asked = pending(&mut agent, &app, &tap, &model).await;
    let (status, body) = app
        .respond(
            asked["id"].as_str().expect("id"),
            &json!({"answers": {"Which database?": "SQLite"}, "by": "alice"}),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    let out = agent.finish(RUN_LIMIT).await;
    let text = told(&model, &out).await;
    assert!(text.contains("SQLite"), "{text}\n{}", out.describe());
    assert!(out.succeeded(), "{}", out.describe());
}

/// The names of the tools the model was offered, over every request it got.
fn offered(model: &FakeModel) -> Vec<String> {
    let mut names: Vec<String> = model
        .requests()
        .iter()
        .flat_map(|r| r.body["tools"].as_array().cloned().unwrap_or_default())
        .flat_map(|t| {
            t["functionDeclarations"]
                .as_array()
                .cloned()
                .unwrap_or_default()
        })
        .filter_map(|f| f["name"].as_str().map(str::to_string))
        .collect();
    names.sort();
    names.dedup();
    names
}

async fn headless_runs_hide_an_untrusted_servers_tools() {
    let app = spawn_app().await;
    let tap = Tap::start(format!("http://{}", app.addr)).await;
    let step = Step::Tool {
        name: "request_approval".into(),
        input: json!({"action": "Write the proof file"}),
    };
    let model = FakeModel::start(Dialect::Gemini, step, "Done.").await;
    let sandbox = Sandbox::new();
    write_settings(&sandbox, json!({"imrelay": {"httpUrl": tap.url("/mcp")}}));
    let out = start_headless(&sandbox, &model).finish(RUN_LIMIT).await;
    assert!(out.succeeded(), "{}", out.describe());
    // The tools did load (so hiding them is Gemini CLI's choice, not a failed connection) ...
    assert!(
        !out.stderr.contains("MCP issues detected"),
        "{}\n{}",
        out.describe(),
        tap.describe()
    );
    let listed = tap
        .find("tools/list")
        .unwrap_or_else(|| panic!("Gemini CLI never listed the tools\n{}", tap.describe()));
    assert!(
        listed
            .response_messages()
            .iter()
            .any(|m| m["result"]["tools"].is_array()),
        "{}",
        tap.describe()
    );
    // ... and the model was offered none of them: headless runs drop tools that would need a
    // confirmation, and an untrusted server's tools do.
    let names = offered(&model);
    assert!(!names.is_empty(), "{}", model.describe());
    assert!(
        !names.iter().any(|n| n.contains("imrelay")),
        "an untrusted server's tools were offered: {names:?}"
    );
    assert_eq!(
        app.get("/v1/interactions").await.1["interactions"],
        json!([])
    );
}

async fn mcp_add_transport_http_writes_url_and_type_and_that_form_works() {
    let app = spawn_app().await;
    let tap = Tap::start(format!("http://{}", app.addr)).await;
    let step = Step::Tool {
        name: "request_approval".into(),
        input: json!({"action": "Write the proof file"}),
    };
    let model = FakeModel::start(Dialect::Gemini, step, "Done.").await;
    let sandbox = Sandbox::new();
    write_settings(&sandbox, json!({}));

    // The command docs/mcp.md gives, in the project (its default scope).
    let mut add = gemini_command(&sandbox, &model);
    add.env("GEMINI_CLI_TRUST_WORKSPACE", "true").args([
        "mcp",
        "add",
        "--transport",
        "http",
        "--header",
        "Authorization: Bearer imrelay-test-token",
        "imrelay",
        &tap.url("/mcp"),
    ]);
    let out = sandbox.spawn(add).finish(RUN_LIMIT).await;
    assert!(out.succeeded(), "{}", out.describe());
    let path = sandbox.project().join(".gemini/settings.json");
    let text = std::fs::read_to_string(&path).expect("gemini mcp add wrote the project settings");
    let mut written: Value = serde_json::from_str(&text).expect("JSON");
    assert_eq!(
        written["mcpServers"]["imrelay"],
        json!({"url": tap.url("/mcp"), "type": "http", "headers": {"Authorization": "Bearer imrelay-test-token"}}),
        "{text}"
    );

    // That form works as Streamable HTTP once the server is trusted.
    written["mcpServers"]["imrelay"]["trust"] = json!(true);
    std::fs::write(&path, written.to_string()).expect("settings");
    // A project's settings are read only in a trusted folder: `--skip-trust` is not enough.
    let mut c = gemini_command(&sandbox, &model);
    c.env("GEMINI_CLI_TRUST_WORKSPACE", "true")
        .args(["-p", "Ask before writing the proof file."])
        .args(["-m", "gemini-2.5-flash", "--output-format", "json"]);
    let mut agent = sandbox.spawn(c);
    let asked = pending(&mut agent, &app, &tap, &model).await;
    let (status, body) = app
        .respond(
            asked["id"].as_str().expect("id"),
            &json!({"decision": "allow", "by": "alice"}),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    let out = agent.finish(RUN_LIMIT).await;
    let text = told(&model, &out).await;
    assert!(text.contains("Approved"), "{text}\n{}", out.describe());
    // The header given to `gemini mcp add` is sent.
    let call = tap.find("tools/call").expect("a tools/call");
    assert!(
        call.headers
            .iter()
            .any(|(k, v)| k == "authorization" && v == "Bearer imrelay-test-token"),
        "{:?}",
        call.headers
    );
}
