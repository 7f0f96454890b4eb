//! The `imrelay` binary: parses the command line, loads the configuration, sets up logging
//! and runs the chosen command. Everything else lives in the library.

use std::path::PathBuf;

/// mimalloc: the default allocator fragments under the many small, short-lived allocations of
/// request handling (see BENCHMARKS.md).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

use anyhow::Context;
use clap::{Parser, Subcommand};
use imrelay::app::App;
use imrelay::config::Settings;

/// A human-in-the-loop relay for AI agents: tool approvals and questions, answered from
/// Telegram, Feishu/Lark, webhooks or the desktop.
#[derive(Parser)]
#[command(name = "imrelay", version = imrelay::VERSION, about)]
struct Cli {
    /// Configuration file (TOML), layered over the built-in defaults.
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
    /// Run the server (the default).
    Serve,
    /// Validate the configuration and print it, with every secret redacted.
    CheckConfig,
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

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    let settings = Settings::load(cli.config.as_deref())?;
    match cli.command.unwrap_or(Command::Serve) {
        Command::CheckConfig => {
            print!("{}", settings.redacted_toml()?);
            eprintln!("configuration is valid");
            Ok(())
        }
        Command::Healthcheck { live, url } => {
            let probe = if live {
                imrelay::cli::Probe::Live
            } else {
                imrelay::cli::Probe::Ready
            };
            if !imrelay::cli::healthcheck(&settings, probe, url.as_deref())? {
                std::process::exit(1);
            }
            Ok(())
        }
        Command::Audit {
            action: Some(AuditAction::Verify { expect }),
            ..
        } => {
            if !imrelay::cli::audit_verify(&settings, expect.as_deref())? {
                std::process::exit(1);
            }
            Ok(())
        }
        Command::Audit {
            action: Some(AuditAction::Head),
            ..
        } => imrelay::cli::audit_head(&settings),
        Command::Backup { file } => {
            let bytes = imrelay::cli::backup(&settings, &file)?;
            let to = if file == std::path::Path::new("-") {
                "standard output".to_string()
            } else {
                file.display().to_string()
            };
            eprintln!(
                "backed up {} to {to} ({bytes} bytes)",
                settings.store.path.display()
            );
            Ok(())
        }
        Command::Audit { since, json, .. } => {
            imrelay::cli::audit_print(&settings, since.as_deref(), json)
        }
        Command::Serve => {
            imrelay::telemetry::init(&settings.log)?;
            tokio::runtime::Builder::new_multi_thread()
                .enable_all()
                .build()
                .context("cannot start the async runtime")?
                .block_on(serve(settings))
        }
    }
}

async fn serve(settings: Settings) -> anyhow::Result<()> {
    let listen = settings.server.listen;
    for (scope, tokens) in [
        ("agent", &settings.auth.agent_tokens),
        ("operator", &settings.auth.operator_tokens),
    ] {
        if tokens.is_empty() {
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
        tracing::info!("shutting down: finishing in-flight requests");
        shutdown.cancel();
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
