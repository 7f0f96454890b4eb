//! `imrelay mcp`: an MCP server on standard input and output, for MCP clients that only
//! launch commands, relaying every message to a running imrelay's `/mcp`.
//!
//! It relays JSON-RPC messages unchanged, in both directions, rather than serving tools of
//! its own: the tools, their schemas and their behaviour live in one place (the server), the
//! client's `initialize` reaches the server as it was sent (so people see the real client as
//! the agent asking), and progress notifications and cancellations pass through. rmcp's
//! Streamable HTTP client keeps the session (and opens a new one if the server restarted).
//!
//! Standard output carries only the protocol; messages for people go to standard error.

use std::sync::Arc;

use anyhow::Context;
use rmcp::model::{ClientJsonRpcMessage, ErrorData, JsonRpcMessage, ServerJsonRpcMessage};
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::{IntoTransport, StreamableHttpClientTransport, Transport};
use rmcp::{RoleClient, RoleServer};
use secrecy::ExposeSecret;
use tokio::task::JoinSet;

use super::client::{AgentRemoteArgs, exit};

/// `imrelay mcp`'s arguments. (No `Debug`: it holds the token.)
#[derive(Clone, Default, clap::Args)]
pub struct McpArgs {
    /// Where the server is and the agent token to present.
    #[command(flatten)]
    pub remote: AgentRemoteArgs,
}

/// Runs the relay until the client closes standard input; returns the exit code.
pub fn run(args: McpArgs, config: Option<&std::path::Path>) -> i32 {
    let result = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")
        .and_then(|rt| rt.block_on(relay(args, config)));
    match result {
        Ok(()) => exit::OK,
        Err(e) => {
            eprintln!("imrelay mcp: {e:#}");
            exit::UNREACHABLE
        }
    }
}

/// The HTTP client for the server: rmcp's (reqwest 0.13), with the ring provider and the
/// Mozilla roots like every other TLS client of imrelay. (rmcp's default client would need a
/// process-wide TLS provider.)
pub fn http_client() -> anyhow::Result<reqwest13::Client> {
    let tls = crate::tls::client_config()?;
    Ok(reqwest13::Client::builder()
        .tls_backend_preconfigured((*tls).clone())
        .user_agent(concat!("imrelay-mcp/", env!("CARGO_PKG_VERSION")))
        .connect_timeout(std::time::Duration::from_secs(5))
        // As rmcp's own client: no idle pooling (a reused connection after an unread
        // response body stalls on delayed ACKs).
        .pool_max_idle_per_host(0)
        .build()?)
}

async fn relay(args: McpArgs, config: Option<&std::path::Path>) -> anyhow::Result<()> {
    let base = args.remote.base_url(config)?;
    let url = format!("{base}{}", crate::mcp::PATH);
    let token = args.remote.token();
    let mut upstream_config = StreamableHttpClientTransportConfig::with_uri(url.clone());
    if let Some(t) = &token {
        upstream_config = upstream_config.auth_header(t.expose_secret());
    }
    let mut upstream = IntoTransport::<RoleClient, _, _>::into_transport(
        StreamableHttpClientTransport::with_client(http_client()?, upstream_config),
    );
    let mut downstream =
        IntoTransport::<RoleServer, _, _>::into_transport(rmcp::transport::stdio());
    // Sends run concurrently (a tool call's POST lasts until its answer), each reporting the
    // request it carried when it fails, so the client gets an error instead of silence.
    let mut sends: JoinSet<Option<(ClientJsonRpcMessage, String)>> = JoinSet::new();
    let shown: Arc<str> = url.as_str().into();
    let mut failed = None;
    let ended = loop {
        tokio::select! {
            m = downstream.receive() => match m {
                Some(m) => {
                    let send = upstream.send(m.clone());
                    let url = shown.clone();
                    sends.spawn(async move {
                        send.await
                            .err()
                            .map(|e| (m, format!("cannot reach imrelay at {url}: {e}")))
                    });
                }
                // The client closed standard input: done.
                None => break None,
            },
            m = upstream.receive() => match m {
                Some(m) => downstream.send(m).await.context("cannot write to standard output")?,
                None => break Some(format!("imrelay at {url} ended the session")),
            },
            Some(done) = sends.join_next(), if !sends.is_empty() => {
                if let Ok(Some((m, why))) = done {
                    failed = Some(fail(&mut downstream, m, why).await?);
                }
            }
        }
    };
    // Answer what could not be sent, then stop.
    while let Some(done) = sends.join_next().await {
        if let Ok(Some((m, why))) = done {
            failed = Some(fail(&mut downstream, m, why).await?);
        }
    }
    let _ = upstream.close().await;
    let _ = downstream.close().await;
    // A message that could not be relayed is a failure however the session ended (the client
    // may close its end as soon as it has the error).
    match failed.or(ended) {
        None => Ok(()),
        Some(why) => Err(anyhow::anyhow!(why)),
    }
}

/// Tells the client that its request `m` could not be relayed, and whoever reads standard
/// error (notifications and responses have nobody else to tell); returns `why`.
async fn fail(
    downstream: &mut impl Transport<RoleServer>,
    m: ClientJsonRpcMessage,
    why: String,
) -> anyhow::Result<String> {
    eprintln!("imrelay mcp: {why}");
    if let JsonRpcMessage::Request(r) = m {
        let error: ServerJsonRpcMessage =
            JsonRpcMessage::error(ErrorData::internal_error(why.clone(), None), Some(r.id));
        downstream
            .send(error)
            .await
            .map_err(|e| anyhow::anyhow!("cannot write to standard output: {e}"))?;
    }
    Ok(why)
}
