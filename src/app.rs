//! Wiring: builds the store, registry, outbox, channels and router from [`Settings`], and
//! serves them until a shutdown signal. `main` and the tests both start the server through
//! [`App`], so tests run exactly what ships.

use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use axum::Router;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use crate::channels::{Task, Wiring};
use crate::config::{Backend, Settings};
use crate::health::Health;
use crate::http::{self, AppState, auth::Auth};
use crate::interaction::Registry;
use crate::metrics::Metrics;
use crate::outbox::{Outbox, WakeOnChange};
use crate::store::{MemoryStore, PostgresStore, SqliteStore, Store};

/// A built, not yet serving, imrelay.
pub struct App {
    state: AppState,
    outbox: Arc<Outbox>,
    extra: Router,
    operator_extra: Router,
    agent_extra: Router<AppState>,
    tasks: Vec<Task>,
}

/// Opens the configured store (off the async threads).
pub async fn open_store(settings: &Settings) -> anyhow::Result<Arc<dyn Store>> {
    Ok(match settings.store.backend {
        Backend::Sqlite => Arc::new(
            SqliteStore::open_async(&settings.store.path, settings.store.synchronous)
                .await
                .with_context(|| {
                    format!("cannot open the store at {}", settings.store.path.display())
                })?,
        ),
        Backend::Memory => Arc::new(MemoryStore::new()),
        Backend::Postgres => Arc::new(
            PostgresStore::connect(&settings.store.postgres())
                .await
                .context("cannot open the PostgreSQL store")?,
        ),
    })
}

impl App {
    /// Builds everything the settings describe, with the configured store.
    pub async fn build(settings: Settings) -> anyhow::Result<Self> {
        let store = open_store(&settings).await?;
        Self::with_store(settings, store).await
    }

    /// Builds everything the settings describe, over `store`.
    pub async fn with_store(settings: Settings, store: Arc<dyn Store>) -> anyhow::Result<Self> {
        // Loading checks the tokens; settings built in code are checked here.
        settings.auth.validate()?;
        let settings = Arc::new(settings);
        let metrics = Arc::new(Metrics::new());
        let health = Arc::new(Health::default());
        let shutdown = CancellationToken::new();
        let registry = build_registry(&settings, store.clone(), &metrics)?;
        let mut wiring = Wiring {
            server: crate::channels::Server {
                public_url: settings.public_url(),
                inbox: settings.inbox_url(),
                retention: settings.registry_config().retention,
                leader_lease: Duration::from_millis(settings.store.leader_lease_ms),
            },
            registry: registry.clone(),
            store: store.clone(),
            outbox: Outbox::new(store, metrics.clone())
                .with_backoff(settings.backoff())
                .with_audit(settings.audit.enabled),
            metrics: metrics.clone(),
            health: health.clone(),
            routes: Router::new(),
            operator_routes: Router::new(),
            tasks: Vec::new(),
            shutdown: shutdown.clone(),
        };
        crate::channels::install(&mut wiring, &settings.channels()).await?;
        let Wiring {
            outbox,
            routes: extra,
            operator_routes: operator_extra,
            mut tasks,
            ..
        } = wiring;
        let outbox = Arc::new(outbox);
        registry.add_hook(Arc::new(WakeOnChange(outbox.clone())));
        recover(&registry).await?;
        let agent_extra = agent_routes(&settings, &registry, &metrics, &shutdown, &mut tasks);
        let state = AppState::new(http::Shared {
            registry,
            auth: Arc::new(Auth::new(&settings.auth)),
            event_streams: Default::default(),
            quota: http::quota::Quota::new(settings.server.max_connections_per_token, &metrics),
            passkeys: Arc::new(http::passkeys::Passkeys::new(
                crate::config::phone::passkey_origin(&settings),
            )),
            metrics,
            settings,
            shutdown,
            health,
        });
        Ok(Self {
            state,
            outbox,
            extra,
            operator_extra,
            agent_extra,
            tasks,
        })
    }

    /// The shared state (registry, settings, ...).
    pub fn state(&self) -> &AppState {
        &self.state
    }

    /// Fires to stop the server: long-polls and event streams end, in-flight requests get
    /// `server.shutdown_grace_secs` to finish.
    pub fn shutdown_token(&self) -> CancellationToken {
        self.state.shutdown.clone()
    }

    /// The configured connection bounds, with the cap fitted to the open-file limit (raised
    /// to the hard limit first); warns if the cap had to be lowered.
    fn connection_limits(&self) -> http::server::Limits {
        let server = &self.state.settings.server;
        let budget = http::server::connection_budget(
            server.max_connections,
            http::server::open_file_limit(),
        );
        if let Some(warning) = &budget.warning {
            tracing::warn!("{warning}");
        }
        let per_token = http::server::per_token_share(
            server.max_connections_per_token,
            server.max_connections,
            budget.max_connections,
        );
        if per_token != server.max_connections_per_token {
            tracing::warn!(
                "with the connection cap lowered to {}, each token may hold at most {per_token}                  of them at once (server.max_connections_per_token = {} keeps its share of                  server.max_connections = {})",
                budget.max_connections,
                server.max_connections_per_token,
                server.max_connections
            );
        }
        self.state.quota.set_max(per_token);
        http::server::Limits {
            max_connections: budget.max_connections,
            overflow_connections: http::server::OVERFLOW_CONNECTIONS,
            header_read_timeout: Duration::from_secs(server.header_read_timeout_secs),
            body: crate::wire::body::BodyLimits {
                timeout: Duration::from_secs(server.body_timeout_secs),
                min_rate: server.body_min_bytes_per_sec,
            },
        }
    }

    /// Serves on `listener` until the shutdown token fires.
    pub async fn serve(self, listener: TcpListener) -> anyhow::Result<()> {
        let limits = self.connection_limits();
        let shutdown = self.state.shutdown.clone();
        let grace = Duration::from_secs(self.state.settings.server.shutdown_grace_secs);
        let mut tasks = self.state.registry.spawn_background(shutdown.clone());
        tasks.push(tokio::spawn(self.outbox.clone().run(shutdown.clone())));
        for task in self.tasks {
            tasks.push(tokio::spawn(task));
        }
        let router = http::router(
            self.state.clone(),
            http::Extra {
                open: self.extra,
                operator: self.operator_extra,
                agent: self.agent_extra,
            },
        );
        let server = http::server::serve(
            listener,
            router,
            limits,
            &self.state.metrics,
            shutdown.clone(),
        );
        let deadline = async {
            shutdown.cancelled().await;
            tokio::time::sleep(grace).await;
        };
        tokio::select! {
            () = server => {}
            _ = deadline => tracing::warn!(grace_secs = grace.as_secs(), "in-flight requests did not finish in time; exiting anyway"),
        }
        shutdown.cancel();
        for t in tasks {
            let _ = t.await;
        }
        self.state.registry.close();
        Ok(())
    }
}

/// The registry over `store`, counted by `metrics`, with the policy rules (each rule's series
/// made known) and the people, groups and routes the settings describe.
fn build_registry(
    settings: &Settings,
    store: Arc<dyn Store>,
    metrics: &Arc<Metrics>,
) -> anyhow::Result<Registry> {
    let registry = Registry::new(store, settings.registry_config());
    registry.add_hook(metrics.clone());
    let policy = settings.policy()?;
    for rule in policy.rules() {
        metrics.add_policy_rule(rule.name(), rule.decision().as_str(), rule.mode().as_str());
    }
    registry.set_policy(policy);
    registry.set_teams(settings.teams()?);
    Ok(registry)
}

/// Loads the pending interactions from the store (expiring those whose time ran out).
async fn recover(registry: &Registry) -> anyhow::Result<()> {
    let (reloaded, expired) = registry
        .recover()
        .await
        .context("cannot load pending interactions from the store")?;
    if reloaded + expired > 0 {
        tracing::info!(
            reloaded,
            expired,
            "recovered pending interactions from the store"
        );
    }
    Ok(())
}

/// The agent adapters' endpoints, and MCP's when it is enabled (its session reaper joins
/// `tasks`).
fn agent_routes(
    settings: &Settings,
    registry: &Registry,
    metrics: &Arc<Metrics>,
    shutdown: &CancellationToken,
    tasks: &mut Vec<Task>,
) -> Router<AppState> {
    let hooks = crate::agents::Hooks::new(
        registry.clone(),
        settings.hooks.clone(),
        metrics,
        shutdown.clone(),
    );
    let mut routes = crate::agents::routes(hooks);
    if settings.mcp.enabled {
        let (mcp, reaper) = crate::mcp::endpoint(
            registry.clone(),
            &settings.mcp,
            http::MAX_BODY_BYTES,
            metrics,
            shutdown,
        )
        .into_parts();
        tasks.push(reaper);
        routes = routes.merge(mcp);
    }
    routes
}
