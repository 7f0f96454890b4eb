//! Codex (`@openai/codex`, pinned in `npm/codex`) in its terminal interface, under tmux, with
//! a `PermissionRequest` command hook: the hook's input and what Codex does with each kind of
//! answer, the facts `imrelay hook codex` is built on (and the fixtures in
//! `tests/fixtures/codex` describe). The model is [`FakeModel`] speaking the OpenAI Responses
//! API through a custom `model_provider`; it asks to run the command outside Codex's sandbox,
//! which is what makes `approval_policy = "on-request"` ask.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use serde_json::{Value, json};

use super::fake_model::{Dialect, FakeModel, Step};
use super::{Sandbox, installed};
use crate::support::{TestApp, eventually_within, fixture, spawn_app};
use crate::trial;

pub(crate) fn trials() -> Vec<libtest_mimic::Trial> {
    vec![
        trial(
            "agents::codex::a_reply_to_a_finished_turn_continues_it",
            super::codex,
            a_reply_to_a_finished_turn_continues_it,
        ),
        trial(
            "agents::codex::permission_request_hook_allow_runs_the_command",
            super::codex_tui,
            permission_request_hook_allow_runs_the_command,
        ),
        trial(
            "agents::codex::permission_request_hook_deny_reaches_the_model",
            super::codex_tui,
            permission_request_hook_deny_reaches_the_model,
        ),
        trial(
            "agents::codex::permission_request_hook_with_updated_input_falls_back_to_codex_prompt",
            super::codex_tui,
            permission_request_hook_with_updated_input_falls_back_to_codex_prompt,
        ),
        trial(
            "agents::codex::imrelay_hook_allow_runs_the_command",
            super::codex_tui,
            imrelay_hook_allow_runs_the_command,
        ),
        trial(
            "agents::codex::imrelay_hook_deny_reaches_the_model",
            super::codex_tui,
            imrelay_hook_deny_reaches_the_model,
        ),
        trial(
            "agents::codex::imrelay_pre_tool_use_hook_gates_codex_exec",
            super::codex,
            imrelay_pre_tool_use_hook_gates_codex_exec,
        ),
        trial(
            "agents::codex::codex_exec_runs_only_a_trusted_hook",
            super::codex_tui,
            codex_exec_runs_only_a_trusted_hook,
        ),
        trial(
            "agents::codex::imrelay_hook_interrupted_in_codex_is_withdrawn_in_imrelay",
            super::codex_tui,
            imrelay_hook_interrupted_in_codex_is_withdrawn_in_imrelay,
        ),
    ]
}

/// How long one run of Codex may take, start to end.
const RUN_LIMIT: Duration = Duration::from_secs(60);

const COMMAND: &str = "echo ok > proof.txt";

fn codex() -> PathBuf {
    installed("codex").expect("installed (checked by the trial's need)")
}

/// Codex's home in the sandbox: the fake model as its provider, and `hook.sh` (written here,
/// answering with `answer.out`, `answer.err` and `answer.code` beside it) as the
/// `PermissionRequest` hook for `Bash`.
fn configure(sandbox: &Sandbox, model: &FakeModel, answer: &Answer) -> PathBuf {
    let dir = sandbox.dir.path();
    let hook = dir.join("hook.sh");
    std::fs::write(
        &hook,
        format!(
            "#!/bin/sh\ncat > '{d}/hook-input.json'\ncat '{d}/answer.out'\ncat '{d}/answer.err' >&2\nexit \"$(cat '{d}/answer.code')\"\n",
            d = dir.display()
        ),
    )
    .expect("hook.sh");
    make_executable(&hook);
    std::fs::write(dir.join("answer.out"), &answer.stdout).expect("answer.out");
    std::fs::write(dir.join("answer.err"), &answer.stderr).expect("answer.err");
    std::fs::write(dir.join("answer.code"), answer.code.to_string()).expect("answer.code");
    configure_hook(
        sandbox,
        model,
        "PermissionRequest",
        &hook.display().to_string(),
        30,
    )
}

/// Codex's home in the sandbox: the fake model as its provider, and `command` as the `event`
/// hook for `Bash`, with `timeout` seconds.
fn configure_hook(
    sandbox: &Sandbox,
    model: &FakeModel,
    event: &str,
    command: &str,
    timeout: u64,
) -> PathBuf {
    let codex_home = sandbox.home().join(".codex");
    std::fs::create_dir_all(&codex_home).expect("CODEX_HOME");
    let config = format!(
        r#"model = "gpt-5.1-codex"
model_provider = "fake"
approval_policy = "on-request"
sandbox_mode = "workspace-write"

[model_providers.fake]
name = "fake"
base_url = "{}/v1"
wire_api = "responses"
env_key = "FAKE_API_KEY"
"#,
        model.base_url()
    );
    std::fs::write(codex_home.join("config.toml"), config).expect("config.toml");
    let hooks = json!({"hooks": {event: [{"matcher": "Bash", "hooks": [
        {"type": "command", "command": command, "timeout": timeout}
    ]}]}});
    std::fs::write(codex_home.join("hooks.json"), hooks.to_string()).expect("hooks.json");
    codex_home
}

fn make_executable(path: &Path) {
    use std::os::unix::fs::PermissionsExt;
    let mut perms = std::fs::metadata(path).expect("metadata").permissions();
    perms.set_mode(0o755);
    std::fs::set_permissions(path, perms).expect("chmod");
}

/// What the hook prints and how it exits.
struct Answer {
    stdout: String,
    stderr: String,
    code: i32,
}

impl Answer {
    fn json(decision: Value) -> Answer {
        Answer {
            stdout: json!({"hookSpecificOutput": {"hookEventName": "PermissionRequest", "decision": decision}})
                .to_string(),
            stderr: String::new(),
            code: 0,
        }
    }
}

/// A program in a tmux session of its own (its own server socket), killed when dropped.
struct Tmux {
    socket: String,
}

impl Tmux {
    /// Starts `argv` in a 140×40 terminal with exactly `env`, in `cwd`.
    fn start(cwd: &Path, env: &[(&str, String)], argv: &[String]) -> Tmux {
        static N: AtomicU32 = AtomicU32::new(0);
        let socket = format!(
            "imrelay-test-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        );
        let mut cmd = vec!["env".to_string(), "-i".to_string()];
        cmd.extend(env.iter().map(|(k, v)| format!("{k}={v}")));
        cmd.extend(argv.iter().cloned());
        let status = Command::new("tmux")
            .args(["-L", &socket, "-f", "/dev/null", "new-session", "-d"])
            .args(["-x", "140", "-y", "40", "-c"])
            .arg(cwd)
            .args(cmd)
            .status()
            .expect("tmux runs");
        assert!(status.success(), "tmux new-session failed");
        Tmux { socket }
    }

    /// What the terminal shows.
    fn screen(&self) -> String {
        let out = Command::new("tmux")
            .args(["-L", &self.socket, "capture-pane", "-p", "-S", "-200"])
            .output()
            .expect("tmux capture-pane");
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Presses `keys` (tmux key names: `Enter`, `Escape`, ...).
    fn keys(&self, keys: &[&str]) {
        let status = Command::new("tmux")
            .args(["-L", &self.socket, "send-keys"])
            .args(keys)
            .status()
            .expect("tmux send-keys");
        assert!(status.success(), "tmux send-keys failed");
    }

    /// Waits until the screen shows `text`, for at most `limit`; the screen.
    async fn until_shows(&self, text: &str, limit: Duration) -> String {
        let deadline = tokio::time::Instant::now() + limit;
        loop {
            let screen = self.screen();
            if screen.contains(text) {
                return screen;
            }
            if tokio::time::Instant::now() >= deadline {
                panic!("the terminal never showed {text:?} within {limit:?}; it shows:\n{screen}");
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = Command::new("tmux")
            .args(["-L", &self.socket, "kill-server"])
            .status();
    }
}

/// Starts Codex's terminal interface on the prompt "Write the proof file.", the hook trusted
/// for this run (`--dangerously-bypass-hook-trust`, instead of the "Hooks need review" dialog
/// a new hook gets).
fn start(sandbox: &Sandbox, codex_home: &Path) -> Tmux {
    start_with(
        sandbox,
        codex_home,
        &["--dangerously-bypass-hook-trust", "Write the proof file."],
    )
}

/// Starts Codex's terminal interface with `args`.
fn start_with(sandbox: &Sandbox, codex_home: &Path, args: &[&str]) -> Tmux {
    let home = sandbox.home();
    let env = [
        ("PATH", std::env::var("PATH").unwrap_or_default()),
        ("HOME", home.display().to_string()),
        ("CODEX_HOME", codex_home.display().to_string()),
        ("FAKE_API_KEY", "imrelay-test-key".into()),
        ("TERM", "xterm-256color".into()),
        ("LANG", "C.UTF-8".into()),
    ];
    let mut argv = vec![codex().display().to_string()];
    argv.extend(args.iter().map(|a| a.to_string()));
    Tmux::start(&sandbox.project(), &env, &argv)
}

/// The hook's input, once it has run.
fn hook_input(sandbox: &Sandbox) -> Value {
    let text = std::fs::read_to_string(sandbox.dir.path().join("hook-input.json"))
        .expect("the hook ran and saved its input");
    serde_json::from_str(&text).expect("the hook's input is JSON")
}

/// The hook's input has exactly the fields of the captured fixture, with this run's values.
fn assert_input_like_fixture(input: &Value, sandbox: &Sandbox) {
    let captured = fixture("codex/permission_request.json");
    let keys = |v: &Value| -> Vec<String> {
        let mut k: Vec<String> = v.as_object().expect("an object").keys().cloned().collect();
        k.sort();
        k
    };
    assert_eq!(keys(input), keys(&captured), "{input}");
    assert_eq!(input["hook_event_name"], "PermissionRequest", "{input}");
    assert_eq!(input["tool_name"], "Bash", "{input}");
    assert_eq!(input["tool_input"]["command"], COMMAND, "{input}");
    assert_eq!(input["permission_mode"], "default", "{input}");
    assert!(input.get("tool_use_id").is_none(), "{input}");
    let cwd = std::fs::canonicalize(sandbox.project()).expect("cwd");
    assert_eq!(input["cwd"], cwd.display().to_string(), "{input}");
}

async fn permission_request_hook_allow_runs_the_command() {
    let model = FakeModel::start(
        Dialect::OpenAiResponses,
        Step::Shell(COMMAND.into()),
        "Done.",
    )
    .await;
    let sandbox = Sandbox::new();
    let codex_home = configure(
        &sandbox,
        &model,
        &Answer::json(json!({"behavior": "allow"})),
    );
    let tui = start(&sandbox, &codex_home);

    let result = model.wait_for_tool_result(RUN_LIMIT).await;
    let screen = tui.until_shows("Done.", RUN_LIMIT).await;
    let result = result.unwrap_or_else(|| panic!("no tool result reached the model:\n{screen}"));
    assert!(
        std::fs::read_to_string(sandbox.project().join("proof.txt"))
            .ok()
            .as_deref()
            == Some("ok\n"),
        "the allowed command did not run: {result:?}\n{screen}"
    );
    assert!(screen.contains("Ran echo ok > proof.txt"), "{screen}");
    assert_input_like_fixture(&hook_input(&sandbox), &sandbox);
}

async fn permission_request_hook_deny_reaches_the_model() {
    let model = FakeModel::start(
        Dialect::OpenAiResponses,
        Step::Shell(COMMAND.into()),
        "Done.",
    )
    .await;
    let sandbox = Sandbox::new();
    let deny = json!({"behavior": "deny", "message": "Not on a Friday"});
    let codex_home = configure(&sandbox, &model, &Answer::json(deny));
    let tui = start(&sandbox, &codex_home);

    let result = model.wait_for_tool_result(RUN_LIMIT).await;
    let screen = tui.until_shows("Blocked by hook", RUN_LIMIT).await;
    let result = result.unwrap_or_else(|| panic!("no tool result reached the model:\n{screen}"));
    assert!(
        result.text.contains("Rejected(\\\"Not on a Friday\\\")")
            || result.text.contains("Rejected(\"Not on a Friday\")"),
        "{result:?}"
    );
    assert!(screen.contains("Not on a Friday"), "{screen}");
    assert!(
        !sandbox.project().join("proof.txt").exists(),
        "a denied command ran"
    );
}

async fn permission_request_hook_with_updated_input_falls_back_to_codex_prompt() {
    let model = FakeModel::start(
        Dialect::OpenAiResponses,
        Step::Shell(COMMAND.into()),
        "Done.",
    )
    .await;
    let sandbox = Sandbox::new();
    // What imrelay's Claude Code endpoint answers to an allow: Codex refuses it.
    let allow = json!({"behavior": "allow", "updatedInput": {"command": COMMAND}});
    let codex_home = configure(&sandbox, &model, &Answer::json(allow));
    let tui = start(&sandbox, &codex_home);

    let screen = tui
        .until_shows("Would you like to run the following command?", RUN_LIMIT)
        .await;
    assert!(
        screen.contains("PermissionRequest hook returned unsupported updatedInput"),
        "{screen}"
    );
    assert!(
        !sandbox.project().join("proof.txt").exists(),
        "it ran without asking"
    );
    // Declining Codex's own prompt (Esc) cancels the call and interrupts the turn.
    tui.keys(&["Escape"]);
    let screen = tui.until_shows("Conversation interrupted", RUN_LIMIT).await;
    assert!(
        screen.contains("You canceled the request to run echo ok > proof.txt"),
        "{screen}"
    );
    assert!(
        !sandbox.project().join("proof.txt").exists(),
        "a declined command ran"
    );
}

/// Codex with `imrelay hook codex` as its `PermissionRequest` hook (Codex's `timeout` 30 s),
/// talking to `app`: started, and its call pending in imrelay.
async fn start_through_imrelay(
    sandbox: &Sandbox,
    model: &FakeModel,
    app: &TestApp,
) -> (Tmux, Value) {
    let codex_home = configure_hook(sandbox, model, "PermissionRequest", &hook_command(app), 30);
    let tui = start(sandbox, &codex_home);
    let asked = eventually_within("Codex's call is pending in imrelay", RUN_LIMIT, || async {
        let (_, list) = app.get("/v1/interactions?status=pending").await;
        list["interactions"].as_array()?.first().cloned()
    })
    .await;
    (tui, asked)
}

/// `imrelay hook codex` for `app`, as a hook's `command` (Codex's `timeout` 30 s).
fn hook_command(app: &TestApp) -> String {
    format!(
        "'{}' hook codex --url {} --timeout 30",
        env!("CARGO_BIN_EXE_imrelay"),
        app.url("")
    )
}

/// Codex as the agent on every channel, with its session and working directory, and the
/// shell command as a Bash command.
fn assert_asked_as_codex(asked: &Value, sandbox: &Sandbox) {
    assert_eq!(asked["agent"], "codex", "{asked}");
    assert_eq!(asked["tool_name"], "Bash", "{asked}");
    assert_eq!(asked["input"]["command"], COMMAND, "{asked}");
    assert_eq!(asked["input_fixed"], true, "{asked}");
    assert!(
        asked["session"].as_str().is_some_and(|s| !s.is_empty()),
        "{asked}"
    );
    let cwd = std::fs::canonicalize(sandbox.project()).expect("cwd");
    assert_eq!(asked["cwd"], cwd.display().to_string(), "{asked}");
    // Below Codex's hook timeout of 30 s.
    assert_eq!(asked["timeout_secs"], 25, "{asked}");
}

async fn imrelay_hook_allow_runs_the_command() {
    let app = spawn_app().await;
    let model = FakeModel::start(
        Dialect::OpenAiResponses,
        Step::Shell(COMMAND.into()),
        "Done.",
    )
    .await;
    let sandbox = Sandbox::new();
    let (tui, asked) = start_through_imrelay(&sandbox, &model, &app).await;
    assert_asked_as_codex(&asked, &sandbox);
    let (status, body) = app
        .respond(
            asked["id"].as_str().expect("id"),
            &json!({"decision": "allow", "by": "alice"}),
        )
        .await;
    assert_eq!(status, 200, "{body}");

    let screen = tui.until_shows("Done.", RUN_LIMIT).await;
    assert!(screen.contains("Ran echo ok > proof.txt"), "{screen}");
    assert!(!screen.contains("Hook failed"), "{screen}");
    assert_eq!(
        std::fs::read_to_string(sandbox.project().join("proof.txt"))
            .ok()
            .as_deref(),
        Some("ok\n"),
        "the allowed command did not run:\n{screen}"
    );
}

async fn imrelay_hook_deny_reaches_the_model() {
    let app = spawn_app().await;
    let model = FakeModel::start(
        Dialect::OpenAiResponses,
        Step::Shell(COMMAND.into()),
        "Done.",
    )
    .await;
    let sandbox = Sandbox::new();
    let (tui, asked) = start_through_imrelay(&sandbox, &model, &app).await;
    let id = asked["id"].as_str().expect("id");
    // An edit is refused where it is made: Codex cannot run an edited command.
    let (status, body) = app
        .respond(
            id,
            &json!({"decision": "allow", "updated_input": {"command": "echo edited > proof.txt"}}),
        )
        .await;
    assert_eq!(status, 400, "{body}");
    let (status, body) = app
        .respond(
            id,
            &json!({"decision": "deny", "message": "Not on a Friday"}),
        )
        .await;
    assert_eq!(status, 200, "{body}");

    let result = model.wait_for_tool_result(RUN_LIMIT).await;
    let screen = tui.until_shows("Blocked by hook", RUN_LIMIT).await;
    let result = result.unwrap_or_else(|| panic!("no tool result reached the model:\n{screen}"));
    assert!(result.text.contains("Not on a Friday"), "{result:?}");
    assert!(screen.contains("Not on a Friday"), "{screen}");
    assert!(
        !sandbox.project().join("proof.txt").exists(),
        "a denied command ran"
    );
}

async fn imrelay_hook_interrupted_in_codex_is_withdrawn_in_imrelay() {
    let app = spawn_app().await;
    let model = FakeModel::start(
        Dialect::OpenAiResponses,
        Step::Shell(COMMAND.into()),
        "Done.",
    )
    .await;
    let sandbox = Sandbox::new();
    let (tui, asked) = start_through_imrelay(&sandbox, &model, &app).await;
    let id = asked["id"].as_str().expect("id").to_string();
    // Esc while the hook waits: Codex kills the hook and ends the turn.
    tui.keys(&["Escape"]);
    let screen = tui.until_shows("Conversation interrupted", RUN_LIMIT).await;
    let withdrawn = eventually_within(
        "the interaction is withdrawn in imrelay",
        Duration::from_secs(10),
        || async {
            let (_, i) = app.get(&format!("/v1/interactions/{id}")).await;
            (i["status"] == "resolved").then_some(i)
        },
    )
    .await;
    assert_eq!(
        withdrawn["resolution"]["outcome"], "cancelled",
        "{withdrawn}\n{screen}"
    );
    assert_eq!(withdrawn["resolution"]["by"], "codex", "{withdrawn}");
    assert!(
        !sandbox.project().join("proof.txt").exists(),
        "an interrupted command ran"
    );
}

/// `codex exec`, which never asks: its `PreToolUse` hook is the gate. Allowed, the command
/// runs; denied, it does not and the model is told why.
async fn imrelay_pre_tool_use_hook_gates_codex_exec() {
    for allow in [true, false] {
        let app = spawn_app().await;
        // A plain call, inside the sandbox: nothing Codex itself would ask about.
        let step = Step::Tool {
            name: "exec_command".into(),
            input: json!({"cmd": COMMAND}),
        };
        let model = FakeModel::start(Dialect::OpenAiResponses, step, "Done.").await;
        let sandbox = Sandbox::new();
        let codex_home = configure_hook(&sandbox, &model, "PreToolUse", &hook_command(&app), 30);
        let mut agent = codex_exec(&sandbox, &codex_home, &["--dangerously-bypass-hook-trust"]);
        let asked = agent
            .until("the call is pending in imrelay", RUN_LIMIT, || async {
                let (_, list) = app.get("/v1/interactions?status=pending").await;
                list["interactions"].as_array()?.first().cloned()
            })
            .await;
        assert_eq!(asked["agent"], "codex", "{asked}");
        assert_eq!(asked["tool_name"], "Bash", "{asked}");
        assert_eq!(asked["input"]["command"], COMMAND, "{asked}");
        let answer = if allow {
            json!({"decision": "allow"})
        } else {
            json!({"decision": "deny", "message": "Not on a Friday (pre)"})
        };
        let (status, body) = app
            .respond(asked["id"].as_str().expect("id"), &answer)
            .await;
        assert_eq!(status, 200, "{body}");
        let out = agent.finish(RUN_LIMIT).await;
        let proof = std::fs::read_to_string(sandbox.project().join("proof.txt")).ok();
        let result = model
            .wait_for_tool_result(Duration::from_secs(5))
            .await
            .unwrap_or_else(|| panic!("no tool result reached the model\n{}", out.describe()));
        if allow {
            assert_eq!(proof.as_deref(), Some("ok\n"), "{}", out.describe());
        } else {
            assert_eq!(proof, None, "a denied command ran\n{}", out.describe());
            assert!(
                result.text.contains("Not on a Friday (pre)"),
                "{result:?}\n{}",
                out.describe()
            );
        }
        assert!(out.succeeded(), "{}", out.describe());
    }
}

/// `codex exec` on the prompt, its output to files in the sandbox.
fn codex_exec(sandbox: &Sandbox, codex_home: &Path, flags: &[&str]) -> super::Running {
    let mut c = sandbox.command(&codex());
    c.env("CODEX_HOME", codex_home)
        .env("FAKE_API_KEY", "imrelay-test-key")
        .args(["exec", "--skip-git-repo-check"])
        .args(flags)
        .args([
            "--dangerously-bypass-approvals-and-sandbox",
            "Write the proof file.",
        ]);
    sandbox.spawn(c)
}

/// A hook `codex exec` has not been told to trust does not run at all: the command runs
/// unasked. Trusted once in the terminal interface ("Hooks need review", then "Trust all and
/// continue"), the same hook gates the next `codex exec`.
async fn codex_exec_runs_only_a_trusted_hook() {
    let app = spawn_app().await;
    let step = Step::Tool {
        name: "exec_command".into(),
        input: json!({"cmd": COMMAND}),
    };
    let model = FakeModel::start(Dialect::OpenAiResponses, step, "Done.").await;
    let sandbox = Sandbox::new();
    let codex_home = configure_hook(&sandbox, &model, "PreToolUse", &hook_command(&app), 30);
    let proof = sandbox.project().join("proof.txt");

    let out = codex_exec(&sandbox, &codex_home, &[])
        .finish(RUN_LIMIT)
        .await;
    assert!(out.succeeded(), "{}", out.describe());
    assert!(
        proof.exists(),
        "the untrusted hook stopped it:\n{}",
        out.describe()
    );
    let (_, all) = app.get("/v1/interactions?status=all").await;
    assert_eq!(all["interactions"], json!([]), "the untrusted hook ran");
    std::fs::remove_file(&proof).expect("remove the proof");

    let tui = start_with(&sandbox, &codex_home, &[]);
    tui.until_shows("Hooks need review", RUN_LIMIT).await;
    // Move to the second choice, looking before each key (one can arrive before the dialog
    // takes keys).
    let deadline = tokio::time::Instant::now() + RUN_LIMIT;
    loop {
        let screen = tui.screen();
        if screen.contains("› 2. Trust all and continue") {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "cannot choose to trust the hook:\n{screen}"
        );
        if screen.contains("› 1. Review hooks") {
            tui.keys(&["Down"]);
        } else if screen.contains("› 3. Continue without trusting") {
            tui.keys(&["Up"]);
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    tui.keys(&["Enter"]);
    eventually_within("Codex keeps the trust", RUN_LIMIT, || async {
        let config = std::fs::read_to_string(codex_home.join("config.toml")).ok()?;
        config.contains("trusted_hash").then_some(())
    })
    .await;
    drop(tui);

    let mut agent = codex_exec(&sandbox, &codex_home, &[]);
    let asked = agent
        .until("the call is pending in imrelay", RUN_LIMIT, || async {
            let (_, list) = app.get("/v1/interactions?status=pending").await;
            list["interactions"].as_array()?.first().cloned()
        })
        .await;
    app.respond(
        asked["id"].as_str().expect("id"),
        &json!({"decision": "deny", "message": "Not now"}),
    )
    .await;
    let out = agent.finish(RUN_LIMIT).await;
    assert!(!proof.exists(), "a denied command ran\n{}", out.describe());
}

/// `codex exec` with its `Stop` hook at imrelay and `on_finish = "ask"`: the end of the turn is
/// asked with what Codex said; a reply continues the same turn (the model is called again and
/// reads the person's words); "Let it stop" ends it.
async fn a_reply_to_a_finished_turn_continues_it() {
    let app = crate::support::spawn_with(|s| {
        s.hooks.codex.on_finish = imrelay::agents::steer::OnFinish::Ask;
        s.hooks.codex.finish_wait_secs = 60;
    })
    .await;
    // No tool the model asks for is offered: it answers in words at once.
    let step = Step::Tool {
        name: "no_such_tool".into(),
        input: json!({}),
    };
    let model = FakeModel::start(Dialect::OpenAiResponses, step, "Done.").await;
    let sandbox = Sandbox::new();
    let codex_home = configure_hook(&sandbox, &model, "Stop", &hook_command(&app), 30);
    let hooks = json!({"hooks": {"Stop": [{"hooks": [
        {"type": "command", "command": hook_command(&app), "timeout": 30}
    ]}]}});
    std::fs::write(codex_home.join("hooks.json"), hooks.to_string()).expect("hooks.json");
    let mut agent = codex_exec(&sandbox, &codex_home, &["--dangerously-bypass-hook-trust"]);
    let asked = agent
        .until("the end of the turn is asked", RUN_LIMIT, || async {
            let (_, list) = app.get("/v1/interactions?status=pending").await;
            list["interactions"].as_array()?.first().cloned()
        })
        .await;
    assert_eq!(asked["agent"], "codex", "{asked}");
    assert_eq!(asked["kind"], "question", "{asked}");
    let before = model.requests().len();
    let (status, body) = app
        .respond(
            asked["id"].as_str().expect("id"),
            &json!({"answers": {"0": "Also list the files, please"}, "by": "alice"}),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    let again = agent
        .until("the next end of the turn is asked", RUN_LIMIT, || async {
            let (_, list) = app.get("/v1/interactions?status=pending").await;
            list["interactions"].as_array()?.first().cloned()
        })
        .await;
    assert!(model.requests().len() > before, "{}", model.describe());
    assert!(
        model
            .requests()
            .iter()
            .any(|r| r.body.to_string().contains("Also list the files, please")),
        "the reply did not reach the model\n{}",
        model.describe()
    );
    app.respond(
        again["id"].as_str().expect("id"),
        &json!({"answers": {"0": "Let it stop"}}),
    )
    .await;
    let out = agent.finish(RUN_LIMIT).await;
    assert!(out.succeeded(), "{}", out.describe());
}
