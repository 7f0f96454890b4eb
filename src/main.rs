//! The `imrelay` binary: parses the command line, loads the configuration, sets up logging
//! and runs the chosen command. Everything else lives in the library.
//!
//! An error is printed as one message (`error: ...`, its causes joined on the same line),
//! never with a backtrace: the release binary is stripped, so a backtrace would be a column
//! of `<unknown>` frames. The exit status is 2 for an invalid configuration and 1 for any
//! other failure (and for an unhealthy server or a broken audit trail).
//!
//! A closed output is not a failure: a command piped into `head` stops writing and exits 0
//! without a word, and nothing here panics when standard output or standard error is closed
//! (messages to a closed standard error are dropped).

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

/// mimalloc: the default allocator fragments under the many small, short-lived allocations of
/// request handling (see BENCHMARKS.md).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

use anyhow::Context;
use clap::{Parser, Subcommand};
use imrelay::app::App;
use imrelay::config::{Loaded, Settings};

/// The exit status for an invalid configuration (as for a bad command line).
const INVALID_CONFIGURATION: u8 = 2;

/// A human-in-the-loop relay for AI agents: tool approvals and questions, answered from
/// Telegram, Feishu/Lark, Slack, WeCom, DingTalk, ntfy, Discord, Matrix, Web Push, webhooks or the desktop.
#[derive(Parser)]
#[command(name = "imrelay", version = imrelay::VERSION, about)]
struct Cli {
    /// Configuration file (TOML), layered over the built-in defaults. Without it: the first
    /// found of ./imrelay.toml, $XDG_CONFIG_HOME/imrelay/imrelay.toml (or
    /// ~/.config/imrelay/imrelay.toml) and /etc/imrelay/imrelay.toml.
    #[arg(
        long,
        short,
        global = true,
        env = "IMRELAY_CONFIG",
        value_name = "FILE"
    )]
    config: Option<PathBuf>,

    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Subcommand)]
enum Command {
    #[command(flatten)]
    Server(ServerCommand),
    #[command(flatten)]
    Client(Client),
}

/// The server, and tools for the machine it runs on.
#[derive(Subcommand)]
enum ServerCommand {
    /// Run the server (the default).
    Serve,
    /// Validate the configuration and print it, with every secret redacted.
    CheckConfig,
    /// Check the configuration against the world before relying on it: the store, tokens,
    /// and each enabled channel (Telegram, Feishu/Lark, Slack, WeCom, DingTalk, ntfy, Discord, Matrix, Web Push and webhooks); one line per check, exit 1 if any failed.
    Doctor {
        /// Also send a test message to every destination of every enabled channel (chats,
        /// groups, conversations, webhooks).
        #[arg(long)]
        send_test: bool,
        /// Also check an agent token against the running server: the one given, or without
        /// one IMRELAY_AGENT_TOKEN's (the token itself is never printed, only a fingerprint).
        #[arg(
            long,
            value_name = "TOKEN",
            num_args = 0..=1,
            default_missing_value = ""
        )]
        agent_token: Option<String>,
    },
    /// Exit 0 if the server answers /healthz (for container health checks).
    Healthcheck {
        /// Ask /livez instead: only whether the process serves requests, not whether its
        /// store can take writes (for supervisors that restart on failure).
        #[arg(long)]
        live: bool,
        /// The URL to ask (default: /healthz, or /livez, on the configured listen address).
        #[arg(long)]
        url: Option<String>,
    },
    /// Write a consistent copy of the database to FILE (safe while the server runs).
    Backup {
        /// Where to write the copy; must not exist yet. `-` writes it to standard output.
        file: std::path::PathBuf,
    },
    /// Print the audit trail (`audit verify` checks it, `audit head` prints its head).
    Audit {
        /// Only entries since this time (RFC 3339) or age (e.g. 2h, 7d).
        #[arg(long, value_name = "TIME|AGE")]
        since: Option<String>,
        /// One JSON object per line.
        #[arg(long)]
        json: bool,
        #[command(subcommand)]
        action: Option<AuditAction>,
    },
    /// Policy rules: `policy report` says what each rule decided (or, in shadow mode, would
    /// have decided) over a period, from the audit trail.
    Policy {
        #[command(subcommand)]
        action: PolicyAction,
    },
    /// Which route a call would take (`[[routes]]`: first match wins), where it is sent and
    /// who may answer it.
    Route {
        /// The agent's label (e.g. claude-code).
        #[arg(long)]
        agent: Option<String>,
        /// The tool's name (default Bash).
        #[arg(long)]
        tool: Option<String>,
        /// The working directory.
        #[arg(long)]
        cwd: Option<String>,
        /// The session label.
        #[arg(long)]
        session: Option<String>,
        /// A label the agent sends (repeat for several).
        #[arg(long = "label")]
        labels: Vec<String>,
    },
}

#[derive(Subcommand)]
enum PolicyAction {
    /// What each rule and grant decided, or would have decided, by rule and mode.
    Report {
        /// The period: since this time (RFC 3339) or age (e.g. 24h, 7d).
        #[arg(long, value_name = "TIME|AGE", default_value = "7d")]
        since: String,
        /// One JSON object per rule.
        #[arg(long)]
        json: bool,
    },
    /// Print the starter policy: tested deny and ask rules for the commands teams fear
    /// (force pushes, rm -rf of /, ~ or ., chmod -R 777, a download piped into a shell,
    /// database drops, terraform destroy, kubectl delete), to paste into imrelay.toml.
    Starter,
}

#[derive(Subcommand)]
enum AuditAction {
    /// Check the hash chain and its recorded head; exits 1 and names the first broken entry
    /// if entries were altered or deleted.
    Verify {
        /// A head printed earlier by `audit head`: the chain must still pass through it.
        #[arg(long, value_name = "SEQ:HASH")]
        expect: Option<String>,
    },
    /// Print the chain's head (SEQ:HASH), to keep outside the store for `verify --expect`.
    Head,
}

/// The terminal client of a running server.
#[derive(Subcommand)]
enum Client {
    /// Answer approvals and questions here as they arrive, one at a time (see docs/terminal.md).
    Watch(imrelay::cli::watch::WatchArgs),
    /// List the interactions waiting for an answer, oldest first.
    Pending(imrelay::cli::commands::PendingArgs),
    /// Show one interaction in full: the tool call, the questions, how it ended.
    Show(imrelay::cli::commands::ShowArgs),
    /// Answer one interaction: `allow`, `deny [--reason TEXT]`, or `--answer QUESTION=ANSWER`;
    /// or with `--all --session S`, all of a session's at once.
    Answer(Box<imrelay::cli::commands::AnswerArgs>),
    /// The grants in force ("allow this and similar calls"): list them, or `grants revoke ID`.
    Grants(imrelay::cli::grants::GrantsArgs),
    /// The devices subscribed for Web Push from the inbox: list them, or `devices remove ID`
    /// (see docs/phone.md).
    Devices(imrelay::cli::devices::DevicesArgs),
    /// The passkeys people registered in the inbox for answers that need one: list them, or
    /// `passkeys remove ID` for a lost device (see docs/phone.md).
    Passkeys(imrelay::cli::passkeys::PasskeysArgs),
    /// The agent sessions the server has seen and what each is doing; `sessions send AGENT ID
    /// TEXT` queues a message for one (see docs/sessions.md).
    Sessions(imrelay::cli::sessions::SessionsArgs),
    /// Serve MCP on standard input and output, relayed to the server's /mcp (for MCP clients
    /// that launch commands; see docs/mcp.md).
    Mcp(imrelay::cli::mcp::McpArgs),
    /// The command an agent runs for its approval hooks: `imrelay hook codex` reads Codex's
    /// hook input on standard input and prints the decision (see docs/codex.md).
    Hook(imrelay::cli::hook::HookArgs),
    /// Run an ACP agent for an editor (`imrelay acp -- gemini --acp`): every message passes
    /// through unchanged, and the agent's permission requests are asked on every channel (see
    /// docs/acp.md).
    Acp(imrelay::cli::acp::AcpArgs),
    /// A long-running bridge to an agent's own server: `imrelay bridge opencode` relays the
    /// approvals and questions of OpenCode servers (see docs/opencode.md).
    Bridge(imrelay::cli::bridge::BridgeArgs),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let file = imrelay::config::discovery::locate_here(cli.config.as_deref());
    let config = file.path();
    let command = match cli.command.unwrap_or(Command::Server(ServerCommand::Serve)) {
        // The terminal client reads the configuration only for the server's address, and
        // only without --url: it also runs where there is no configuration.
        Command::Client(client) => {
            let code = match client {
                Client::Watch(args) => imrelay::cli::watch::run(args, config),
                Client::Pending(args) => imrelay::cli::commands::pending(args, config),
                Client::Show(args) => imrelay::cli::commands::show(args, config),
                Client::Answer(args) => imrelay::cli::commands::answer(*args, config),
                Client::Mcp(args) => imrelay::cli::mcp::run(args, config),
                Client::Grants(args) => imrelay::cli::grants::run(args, config),
                Client::Devices(args) => imrelay::cli::devices::run(args, config),
                Client::Passkeys(args) => imrelay::cli::passkeys::run(args, config),
                Client::Sessions(args) => imrelay::cli::sessions::run(args, config),
                Client::Hook(args) => imrelay::cli::hook::run(args, config),
                Client::Acp(args) => imrelay::cli::acp::run(args, config),
                Client::Bridge(args) => imrelay::cli::bridge::run(args, config),
            };
            return ExitCode::from(u8::try_from(code).unwrap_or(1));
        }
        Command::Server(command) => command,
    };
    let Loaded { settings, warnings } = match Settings::load(config) {
        Ok(loaded) => loaded,
        Err(e) => {
            complain(format_args!("error: {e}"));
            return ExitCode::from(INVALID_CONFIGURATION);
        }
    };
    match run(command, settings, &warnings, &file) {
        Ok(code) => code,
        // `imrelay audit | head`: the reader has what it wanted.
        Err(e) if imrelay::cli::ended_by_closed_output(&e) => ExitCode::SUCCESS,
        Err(e) => {
            complain(format_args!("error: {e:#}"));
            ExitCode::FAILURE
        }
    }
}

/// Writes a line to standard error, like `eprintln!`, but drops it when standard error is
/// closed instead of panicking.
fn complain(line: std::fmt::Arguments<'_>) {
    let mut err = std::io::stderr().lock();
    let _ = err.write_fmt(line).and_then(|()| err.write_all(b"\n"));
}

/// Prints each configuration warning to standard error.
fn print_warnings(warnings: &[String]) {
    for w in warnings {
        complain(format_args!("warning: {}", imrelay::telemetry::escape(w)));
    }
}

/// Runs a command of the server's machine.
fn run(
    command: ServerCommand,
    settings: Settings,
    warnings: &[String],
    file: &imrelay::config::ConfigFile,
) -> anyhow::Result<ExitCode> {
    match command {
        ServerCommand::CheckConfig => check_config(&settings, warnings, file),
        ServerCommand::Route {
            agent,
            tool,
            cwd,
            session,
            labels,
        } => {
            let call = imrelay::cli::route::Call {
                agent,
                tool,
                cwd,
                session,
                labels,
            };
            std::io::stdout()
                .write_all(imrelay::cli::route::explain(&settings, &call)?.as_bytes())?;
            Ok(ExitCode::SUCCESS)
        }
        ServerCommand::Doctor {
            send_test,
            agent_token,
        } => doctor(&settings, warnings, file, send_test, agent_token),
        ServerCommand::Healthcheck { live, url } => {
            let probe = if live {
                imrelay::cli::Probe::Live
            } else {
                imrelay::cli::Probe::Ready
            };
            Ok(passed(imrelay::cli::healthcheck(
                &settings,
                probe,
                url.as_deref(),
            )?))
        }
        ServerCommand::Audit {
            action: Some(AuditAction::Verify { expect }),
            ..
        } => Ok(passed(imrelay::cli::audit_verify(
            &settings,
            expect.as_deref(),
        )?)),
        ServerCommand::Audit {
            action: Some(AuditAction::Head),
            ..
        } => {
            imrelay::cli::audit_head(&settings)?;
            Ok(ExitCode::SUCCESS)
        }
        ServerCommand::Backup { file } => backup(&settings, &file),
        ServerCommand::Policy {
            action: PolicyAction::Report { since, json },
        } => {
            imrelay::cli::policy::print_report(&settings, &since, json)?;
            Ok(ExitCode::SUCCESS)
        }
        ServerCommand::Policy {
            action: PolicyAction::Starter,
        } => {
            std::io::stdout().write_all(imrelay::cli::policy::STARTER.as_bytes())?;
            Ok(ExitCode::SUCCESS)
        }
        ServerCommand::Audit { since, json, .. } => {
            imrelay::cli::audit_print(&settings, since.as_deref(), json)?;
            Ok(ExitCode::SUCCESS)
        }
        ServerCommand::Serve => {
            start_telemetry(&settings, warnings, file)?;
            runtime()?.block_on(serve(settings))?;
            Ok(ExitCode::SUCCESS)
        }
    }
}

/// Sets up logging for the server, and logs which configuration file was read (or that none
/// was) and the configuration warnings through it.
fn start_telemetry(
    settings: &Settings,
    warnings: &[String],
    file: &imrelay::config::ConfigFile,
) -> anyhow::Result<()> {
    imrelay::telemetry::init(&settings.log)?;
    let said = imrelay::telemetry::escape(&file.to_string()).into_owned();
    match file {
        imrelay::config::ConfigFile::None { .. } => tracing::warn!("{said}"),
        _ => tracing::info!("{said}"),
    }
    for w in warnings {
        tracing::warn!("{w}");
    }
    Ok(())
}

/// `doctor`: which file was read, the warnings, then one line per check (with
/// `--agent-token`, the token's against the running server).
fn doctor(
    settings: &Settings,
    warnings: &[String],
    file: &imrelay::config::ConfigFile,
    send_test: bool,
    agent_token: Option<String>,
) -> anyhow::Result<ExitCode> {
    complain(format_args!(
        "{}",
        imrelay::telemetry::escape(&file.to_string())
    ));
    print_warnings(warnings);
    let token = match agent_token.as_deref() {
        Some("") => Some(std::env::var("IMRELAY_AGENT_TOKEN").map_err(|_| {
            anyhow::anyhow!(
                "--agent-token without a value reads IMRELAY_AGENT_TOKEN, which is not set"
            )
        })?),
        other => other.map(str::to_string),
    };
    let checks = runtime()?.block_on(async {
        let mut checks = imrelay::cli::doctor::run(settings, send_test).await;
        if let Some(token) = &token {
            checks.push(imrelay::cli::doctor::agent_token(settings, token).await);
        }
        checks
    });
    Ok(passed(imrelay::cli::doctor::print(&checks)))
}

/// Success when a check passed, failure when it did not.
fn passed(ok: bool) -> ExitCode {
    if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

/// The async runtime of the commands that need one.
fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")
}

/// `check-config`: which file was read, the effective configuration, every secret redacted,
/// and the routes table.
fn check_config(
    settings: &Settings,
    warnings: &[String],
    file: &imrelay::config::ConfigFile,
) -> anyhow::Result<ExitCode> {
    complain(format_args!(
        "{}",
        imrelay::telemetry::escape(&file.to_string())
    ));
    // Names come from the file: bidirectional and invisible characters are shown as `\u`
    // escapes (which TOML reads back as the same characters), never printed as they are.
    let toml = settings.redacted_toml()?;
    let shown = imrelay::telemetry::escape_json_invisible(&toml);
    std::io::stdout().write_all(shown.as_bytes())?;
    let table = imrelay::cli::route::table_comment(settings)?;
    let shown = imrelay::telemetry::escape_json_invisible(&table);
    std::io::stdout().write_all(shown.as_bytes())?;
    print_warnings(warnings);
    complain(format_args!("configuration is valid"));
    Ok(ExitCode::SUCCESS)
}

/// `backup FILE`: a consistent copy of the database, and a line saying where it went.
fn backup(settings: &Settings, file: &std::path::Path) -> anyhow::Result<ExitCode> {
    let bytes = imrelay::cli::backup(settings, file)?;
    let to = if file == std::path::Path::new("-") {
        "standard output".to_string()
    } else {
        file.display().to_string()
    };
    complain(format_args!(
        "backed up {} to {to} ({bytes} bytes)",
        settings.store.path.display()
    ));
    Ok(ExitCode::SUCCESS)
}

async fn serve(settings: Settings) -> anyhow::Result<()> {
    let listen = settings.server.listen;
    for (scope, none) in [
        ("agent", settings.auth.agent_tokens.is_empty()),
        ("operator", settings.auth.operator_tokens.is_empty()),
    ] {
        if none {
            tracing::warn!(
                "no {scope} tokens configured: {scope} endpoints accept requests from this machine only"
            );
        }
    }
    let app = App::build(settings.clone()).await?;
    let listener = imrelay::http::server::bind(listen)
        .with_context(|| format!("cannot listen on {listen}"))?;
    let shutdown = app.shutdown_token();
    tokio::spawn(async move {
        wait_for_signal().await;
        // Stop first, then say so: nothing on the way (a log line) may keep the signal from
        // taking effect.
        shutdown.cancel();
        tracing::info!("shutting down: finishing in-flight requests");
    });
    tracing::info!(
        version = imrelay::VERSION,
        listen = %listener.local_addr()?,
        store = ?settings.store.backend,
        inbox = %format!("http://{}/", listener.local_addr()?),
        "imrelay is ready"
    );
    app.serve(listener).await?;
    tracing::info!("stopped");
    Ok(())
}

async fn wait_for_signal() {
    let ctrl_c = async {
        if tokio::signal::ctrl_c().await.is_err() {
            std::future::pending::<()>().await;
        }
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        _ = ctrl_c => {}
        _ = term => {}
    }
}
