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

pub fn trials() -> Vec<libtest_mimic::Trial> {
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
    ]
}

/// How long one run of Gemini CLI may take, start to end.
const RUN_LIMIT: Duration = Duration::from_secs(90);

fn gemini() -> PathBuf {
    installed("gemini-cli").expect("installed (checked by the trial's need)")
}

/// Gemini CLI's user settings for a run: no updates, statistics or telemetry, API-key
/// authentication, and `servers` as its MCP servers.
pub fn write_settings(sandbox: &Sandbox, servers: Value) {
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
pub fn gemini_command(sandbox: &Sandbox, model: &FakeModel) -> tokio::process::Command {
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
